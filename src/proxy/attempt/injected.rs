//! The upstream answer of an injected fault (see `policy::fault`). When a fault is on for an
//! attempt's target, [`send`] replaces the upstream call with a real HTTP exchange over an
//! in-memory pipe: a hyper server on one end writes the synthesized response (a status with
//! its error body, a stream that stalls after N frames, a zombie 200), a hyper client on the
//! other reads it, so `attempt.rs` gets an ordinary `Response<Incoming>` and the same
//! judge, hold, guards and `Core::report` handle it as if it came from the network. A
//! connection reset is a transport error; added latency waits, then sends the real call.
//! Nothing leaves for the target while a replacing fault is on.

use std::convert::Infallible;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;

use crate::config::Dialect;
use crate::policy::fault::FaultKind;
use crate::proxy::attempt::upstream::UpstreamClient;
use crate::snapshot::RequestView;
use crate::wire::dialect::SseKind;

/// Bytes of the in-memory pipe between the synthesized server and its client.
const PIPE_BYTES: usize = 64 * 1024;

/// Why an attempt got no response head.
pub enum SendError {
    /// The real upstream call failed.
    Upstream(hyper_util::client::legacy::Error),
    /// An injected fault (a reset) or the synthesized exchange failed; the message says so.
    Injected(String),
}

/// Sends `up` through `client`, or — when `fault` is on — answers it as the fault says.
/// `dialect` shapes an injected error body, `sse` an injected stream.
pub async fn send(
    fault: Option<FaultKind>,
    dialect: Dialect,
    sse: SseKind,
    client: &UpstreamClient,
    up: Request<Full<Bytes>>,
) -> Result<Response<Incoming>, SendError> {
    let kind = match fault {
        None => return client.request(up).await.map_err(SendError::Upstream),
        Some(FaultKind::Latency(d)) => {
            tokio::time::sleep(d).await;
            return client.request(up).await.map_err(SendError::Upstream);
        }
        Some(FaultKind::Reset) => {
            return Err(SendError::Injected(
                "connection reset by peer (injected fault)".into(),
            ));
        }
        Some(k) => k,
    };
    exchange(synthesize(kind, dialect, sse))
        .await
        .map_err(|e| SendError::Injected(format!("injected fault exchange failed: {e}")))
}

/// Marks a request and its last attempt as answered by an injected fault.
pub fn mark(view: &mut RequestView) {
    view.injected = true;
    if let Some(a) = view.attempt_log.last_mut() {
        a.injected = true;
    }
}

type Synth = Response<BoxBody<Bytes, Infallible>>;

/// The response a replacing fault answers with.
fn synthesize(kind: FaultKind, dialect: Dialect, sse: SseKind) -> Synth {
    match kind {
        FaultKind::Status {
            status,
            retry_after,
        } => status_response(status, retry_after, dialect),
        FaultKind::Stall { frames } => {
            let mut v = preamble(sse);
            v.extend((0..frames).map(|_| content_frame(sse)));
            stream_response(v)
        }
        // Latency and reset never get here; a zombie is the same as an unknown kind.
        _ => stream_response(zombie_frames(sse)),
    }
}

fn status_response(status: u16, retry_after: Option<Duration>, dialect: Dialect) -> Synth {
    let (kind, text) = match status {
        429 => ("rate_limit_error", "rate limited (injected fault)"),
        500 => ("api_error", "internal server error (injected fault)"),
        529 => ("overloaded_error", "overloaded (injected fault)"),
        _ => ("overloaded_error", "service unavailable (injected fault)"),
    };
    let body = match dialect {
        Dialect::Anthropic => serde_json::json!({
            "type": "error",
            "error": {"type": kind, "message": text},
        }),
        Dialect::OpenAi => serde_json::json!({
            "error": {"type": kind, "message": text, "code": status.to_string()},
        }),
    };
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())).boxed());
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(d) = retry_after
        && let Ok(v) = HeaderValue::from_str(&d.as_secs().max(1).to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

/// A 200 event stream of `frames`, then silence (the body never ends).
fn stream_response(frames: Vec<&'static str>) -> Synth {
    let body = stream::iter(frames)
        .map(|f| Ok::<_, Infallible>(Frame::data(Bytes::from_static(f.as_bytes()))))
        .chain(stream::pending());
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(body)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    r
}

fn preamble(sse: SseKind) -> Vec<&'static str> {
    match sse {
        SseKind::Anthropic => vec![
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_injected\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"injected\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        ],
        SseKind::OpenAiChat => vec![
            "data: {\"id\":\"chatcmpl-injected\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\"}}]}\n\n",
        ],
        SseKind::OpenAiResponses => vec![
            "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_injected\",\"status\":\"in_progress\"}}\n\n",
        ],
    }
}

fn content_frame(sse: SseKind) -> &'static str {
    match sse {
        SseKind::Anthropic => {
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"injected \"}}\n\n"
        }
        SseKind::OpenAiChat => {
            "data: {\"id\":\"chatcmpl-injected\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"injected \"}}]}\n\n"
        }
        SseKind::OpenAiResponses => {
            "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"injected \"}\n\n"
        }
    }
}

/// A stream that opens and then never carries a useful event: an Anthropic ping or an
/// OpenAI keep-alive comment.
fn zombie_frames(sse: SseKind) -> Vec<&'static str> {
    match sse {
        SseKind::Anthropic => vec!["event: ping\ndata: {\"type\":\"ping\"}\n\n"],
        SseKind::OpenAiChat | SseKind::OpenAiResponses => vec![": keep-alive\n\n"],
    }
}

/// Serves `resp` once over an in-memory pipe and returns the client's view of it.
async fn exchange(resp: Synth) -> Result<Response<Incoming>, hyper::Error> {
    let (client_io, server_io) = tokio::io::duplex(PIPE_BYTES);
    let slot = std::sync::Mutex::new(Some(resp));
    let service = hyper::service::service_fn(move |_req: Request<Incoming>| {
        let r = slot
            .lock()
            .ok()
            .and_then(|mut s| s.take())
            .unwrap_or_else(|| status_response(503, None, Dialect::Anthropic));
        async move { Ok::<_, Infallible>(r) }
    });
    tokio::spawn(async move {
        let conn = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(server_io), service);
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "injected fault exchange ended");
        }
    });
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(client_io)).await?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let req = Request::builder()
        .uri("/")
        .body(Full::new(Bytes::new()))
        .unwrap_or_default();
    sender.send_request(req).await
}
