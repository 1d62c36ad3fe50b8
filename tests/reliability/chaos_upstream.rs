//! `ChaosUpstream`: an Anthropic + OpenAI upstream that injects faults at random from a fixed
//! seed: 429 with and without hints, 500, 503, 529, a reset before the head, a stall before
//! the first byte, SSE truncated mid-stream, malformed SSE, a zombie 200, slow trickles, and
//! (only when asked) a non-streaming 2xx whose body breaks mid-way.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::support::body::ChannelBody;
use crate::support::fixture;
use crate::support::wire::{anthropic_message, chat_completion, responses_object};

type Body = BoxBody<Bytes, std::io::Error>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// One kind of upstream behaviour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// A normal complete reply.
    None,
    /// 429 with `retry-after: 1`.
    RateLimitHint,
    /// 429 without any hint.
    RateLimitBare,
    /// 500.
    Internal,
    /// 503.
    Unavailable,
    /// 529 `overloaded_error`.
    Overloaded,
    /// The connection closes before any response head.
    ResetBeforeHead,
    /// No response head for a minute (the provider timeout must cut it).
    StallBeforeHead,
    /// A complete reply written in small pieces with pauses.
    Trickle,
    /// Streams only: half the events, then the connection breaks.
    SseTruncated,
    /// Streams only: a 200 whose events are not valid JSON, then the stream ends.
    SseMalformed,
    /// Streams only: a 200 SSE head, then silence.
    Zombie200,
    /// Non-streaming only: a 2xx head with `content-length`, half the body, then a break.
    BodyTruncated,
    /// Non-streaming only: a 2xx head with `content-length`, half the body, then silence
    /// (a zombie 200 without SSE; the provider timeout must cut it).
    BodyStalled,
}

/// Which faults apply to which requests, with weights (out of the sum).
#[derive(Debug, Clone)]
pub struct Mix {
    /// For `stream: true` requests.
    pub stream: Vec<(Fault, u32)>,
    /// For non-streaming requests.
    pub plain: Vec<(Fault, u32)>,
}

impl Mix {
    /// Every fault but [`Fault::BodyTruncated`], about 45 % of replies faulty.
    pub fn standard() -> Mix {
        let common = [
            (Fault::None, 55),
            (Fault::RateLimitHint, 4),
            (Fault::RateLimitBare, 4),
            (Fault::Internal, 5),
            (Fault::Unavailable, 4),
            (Fault::Overloaded, 4),
            (Fault::ResetBeforeHead, 4),
            (Fault::StallBeforeHead, 2),
            (Fault::Trickle, 6),
        ];
        let mut stream = common.to_vec();
        stream.extend([
            (Fault::SseTruncated, 4),
            (Fault::SseMalformed, 3),
            (Fault::Zombie200, 2),
        ]);
        Mix {
            stream,
            plain: common.to_vec(),
        }
    }

    /// The soak's moderate mix: mostly normal replies (some trickled), about 8 % 429 (with
    /// and without a hint) and 503, so failover and cooldown paths run steadily.
    pub fn soak() -> Mix {
        let t = vec![
            (Fault::None, 88),
            (Fault::Trickle, 4),
            (Fault::RateLimitHint, 2),
            (Fault::RateLimitBare, 2),
            (Fault::Unavailable, 4),
        ];
        Mix {
            stream: t.clone(),
            plain: t,
        }
    }

    /// Non-streaming bodies that break or stall mid-way (the truncation defect), with normal
    /// replies.
    pub fn truncated_bodies() -> Mix {
        Mix {
            stream: vec![(Fault::None, 1)],
            plain: vec![
                (Fault::None, 4),
                (Fault::BodyTruncated, 2),
                (Fault::BodyStalled, 1),
            ],
        }
    }
}

struct State {
    seed: u64,
    next: AtomicU64,
    mix: Mix,
    injected: Mutex<BTreeMap<Fault, u64>>,
}

/// The running chaos upstream; dropping it stops it.
pub struct ChaosUpstream {
    addr: SocketAddr,
    state: Arc<State>,
    cancel: CancellationToken,
}

impl Drop for ChaosUpstream {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// splitmix64: a fixed seed and a request number give one fault choice.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl ChaosUpstream {
    /// Binds `127.0.0.1:0` and serves with `seed` and `mix`.
    pub async fn start(seed: u64, mix: Mix) -> ChaosUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State {
            seed,
            next: AtomicU64::new(0),
            mix,
            injected: Mutex::new(BTreeMap::new()),
        });
        let cancel = CancellationToken::new();
        tokio::spawn(accept(listener, state.clone(), cancel.clone()));
        ChaosUpstream {
            addr,
            state,
            cancel,
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// How many replies of each kind were sent so far.
    pub fn injected(&self) -> BTreeMap<Fault, u64> {
        self.state.injected.lock().unwrap().clone()
    }

    /// Upstream requests so far.
    pub fn requests(&self) -> u64 {
        self.state.next.load(Ordering::Relaxed)
    }
}

async fn accept(listener: TcpListener, state: Arc<State>, cancel: CancellationToken) {
    loop {
        let tcp = tokio::select! {
            () = cancel.cancelled() => return,
            a = listener.accept() => match a { Ok((t, _)) => t, Err(_) => continue },
        };
        let _ = tcp.set_nodelay(true);
        let state = state.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let c2 = cancel.clone();
            let svc = service_fn(move |req| handle(state.clone(), c2.clone(), req));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tcp), svc);
            tokio::select! {
                () = cancel.cancelled() => {}
                _ = conn => {}
            }
        });
    }
}

fn choose(state: &State, stream: bool) -> Fault {
    let n = state.next.fetch_add(1, Ordering::Relaxed);
    let table: &[(Fault, u32)] = if stream {
        &state.mix.stream
    } else {
        &state.mix.plain
    };
    let total: u64 = table.iter().map(|(_, w)| u64::from(*w)).sum();
    let mut r = mix64(state.seed ^ mix64(n)) % total.max(1);
    for (f, w) in table {
        if r < u64::from(*w) {
            return *f;
        }
        r -= u64::from(*w);
    }
    Fault::None
}

fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

fn error_body(path: &str, status: u16, kind: &str) -> Bytes {
    let v = if path == "/v1/messages" {
        serde_json::json!({"type": "error", "error": {"type": kind, "message": format!("chaos {status}")}})
    } else {
        serde_json::json!({"error": {"message": format!("chaos {status}"), "type": kind, "param": null, "code": kind}})
    };
    Bytes::from(v.to_string())
}

fn success_json(path: &str) -> Bytes {
    let v = match path {
        "/v1/messages" => anthropic_message("m", "Hello from chaos."),
        "/v1/chat/completions" => chat_completion("m", "Hello from chaos."),
        _ => responses_object("m", "Hello from chaos."),
    };
    Bytes::from(v.to_string())
}

fn success_sse(path: &str) -> Bytes {
    fixture(match path {
        "/v1/messages" => "anthropic-text",
        "/v1/chat/completions" => "openai-chat-text",
        _ => "openai-responses",
    })
}

/// A body fed by a task: `pieces` with `pause` before each, then `end`.
fn fed(pieces: Vec<Bytes>, pause: Duration, end: End, cancel: CancellationToken) -> Body {
    let (tx, body) = ChannelBody::channel();
    tokio::spawn(async move {
        for p in pieces {
            if !pause.is_zero() {
                tokio::time::sleep(pause).await;
            }
            if tx.send(Ok(p)).await.is_err() {
                return;
            }
        }
        match end {
            End::Finish => {}
            End::Break => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let _ = tx.send(Err(std::io::Error::other("chaos: break"))).await;
            }
            End::Silence => {
                tokio::select! {
                    () = tx.closed() => {}
                    () = cancel.cancelled() => {}
                    () = tokio::time::sleep(Duration::from_secs(120)) => {}
                }
            }
        }
    });
    body.boxed()
}

#[derive(Debug, Clone, Copy)]
enum End {
    Finish,
    Break,
    Silence,
}

fn split(b: &Bytes, n: usize) -> Vec<Bytes> {
    let size = b.len().div_ceil(n.max(1)).max(1);
    b.chunks(size).map(Bytes::copy_from_slice).collect()
}

async fn handle(
    state: Arc<State>,
    cancel: CancellationToken,
    req: Request<Incoming>,
) -> Result<Response<Body>, BoxError> {
    let path = req.uri().path().to_string();
    let body = req.into_body().collect().await?.to_bytes();
    let stream = serde_json::from_slice::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["stream"].as_bool())
        .unwrap_or(false);
    let fault = choose(&state, stream);
    *state.injected.lock().unwrap().entry(fault).or_default() += 1;
    let sse = |b: Body| {
        Response::builder()
            .status(200)
            .header("content-type", "text/event-stream")
            .body(b)
    };
    let json = |status: u16, b: Body| {
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(b)
    };
    let err = |status: u16, kind: &str| json(status, full(error_body(&path, status, kind)));
    let resp = match fault {
        Fault::None if stream => sse(fed(split(&success_sse(&path), 3), Duration::ZERO, End::Finish, cancel)),
        Fault::None => json(200, full(success_json(&path))),
        Fault::Trickle if stream => sse(fed(split(&success_sse(&path), 12), Duration::from_millis(25), End::Finish, cancel)),
        Fault::Trickle => {
            let b = success_json(&path);
            let len = b.len();
            let mut r = json(200, fed(split(&b, 8), Duration::from_millis(25), End::Finish, cancel))?;
            r.headers_mut().insert("content-length", len.into());
            Ok(r)
        }
        Fault::RateLimitHint => err(429, "rate_limit_error").map(|mut r| {
            r.headers_mut().insert("retry-after", "1".parse().unwrap());
            r
        }),
        Fault::RateLimitBare => err(429, "rate_limit_error"),
        Fault::Internal => err(500, "api_error"),
        Fault::Unavailable => err(503, "api_error"),
        Fault::Overloaded => err(529, "overloaded_error"),
        Fault::ResetBeforeHead => return Err("chaos: reset before the head".into()),
        Fault::StallBeforeHead => {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(60)) => {}
                () = cancel.cancelled() => {}
            }
            err(504, "api_error")
        }
        Fault::SseTruncated => {
            let all = split(&success_sse(&path), 4);
            sse(fed(all[..2].to_vec(), Duration::ZERO, End::Break, cancel))
        }
        Fault::SseMalformed => sse(full(Bytes::from_static(
            b"event: message_start\ndata: {not json\n\ndata: [[[\n\ndata: {\"choices\":[{\"delta\":\n\n",
        ))),
        Fault::Zombie200 => sse(fed(Vec::new(), Duration::ZERO, End::Silence, cancel)),
        Fault::BodyTruncated | Fault::BodyStalled => {
            let b = success_json(&path);
            let len = b.len();
            let half = b.slice(..len / 2);
            let end = if fault == Fault::BodyTruncated { End::Break } else { End::Silence };
            let mut r = json(200, fed(vec![half], Duration::ZERO, end, cancel))?;
            r.headers_mut().insert("content-length", len.into());
            Ok(r)
        }
    };
    Ok(resp?)
}
