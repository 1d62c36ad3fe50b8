//! `bench-mock`: a zero-delay hyper upstream speaking Anthropic (`POST /v1/messages`) and
//! OpenAI (`POST /v1/chat/completions`).
//!
//! Behaviour is chosen per request by a top-level body field the proxy forwards unchanged,
//! `"bench": "s=10240;f=64;i=20;t=5;x=429"`:
//! - `s`: non-streaming JSON size in bytes (default 500);
//! - `f`: SSE content frames (default 64), `i`: ms between frames (default 0), `t`: ms before
//!   the first frame (TTFT, default 0);
//! - `x`: fault — `403`, `429` (with `retry-after: 1`), `500`, `529`, `reset` (connection dropped
//!   before the head), `stall` (no answer for 30 s).
//!
//! `GET /stats` answers `{"requests":N}`: POSTs served since start (to prove a fast-fail never
//! reached the upstream).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// Boxed response body of the mock and the floor.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// Knobs parsed from the request's `"bench"` field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Knobs {
    /// JSON size, bytes.
    pub size: usize,
    /// SSE content frames.
    pub frames: usize,
    /// Pace between frames, ms.
    pub interval_ms: u64,
    /// Delay before the first frame or the JSON head, ms.
    pub ttft_ms: u64,
    /// Fault word, empty for none.
    pub fault: String,
}

/// Parses `"bench":"k=v;…"` out of a request body (defaults when absent).
pub fn knobs(body: &[u8]) -> Knobs {
    let mut k = Knobs {
        size: 500,
        frames: 64,
        ..Knobs::default()
    };
    let Some(spec) = find_field(body) else {
        return k;
    };
    for part in spec.split(';') {
        let (key, val) = part.split_once('=').unwrap_or((part, ""));
        match key {
            "s" => k.size = val.parse().unwrap_or(k.size),
            "f" => k.frames = val.parse().unwrap_or(k.frames),
            "i" => k.interval_ms = val.parse().unwrap_or(0),
            "t" => k.ttft_ms = val.parse().unwrap_or(0),
            "x" => k.fault = val.to_string(),
            _ => {}
        }
    }
    k
}

fn find_field(body: &[u8]) -> Option<&str> {
    let key = b"\"bench\":\"";
    let at = body.windows(key.len()).position(|w| w == key)? + key.len();
    let end = body[at..].iter().position(|b| *b == b'"')?;
    std::str::from_utf8(&body[at..at + end]).ok()
}

fn is_stream(body: &[u8]) -> bool {
    let a = b"\"stream\":true";
    let b = b"\"stream\": true";
    body.windows(a.len()).any(|w| w == a) || body.windows(b.len()).any(|w| w == b)
}

/// Events a stream of `frames` content frames carries in `dialect` (`anthropic`/`openai`).
pub fn expected_events(openai: bool, frames: usize) -> usize {
    if openai { frames + 2 } else { frames + 3 }
}

fn json_reply(openai: bool, size: usize) -> Bytes {
    let bare = json_with_pad(openai, "").len();
    Bytes::from(json_with_pad(
        openai,
        &"x".repeat(size.saturating_sub(bare)),
    ))
}

fn json_with_pad(openai: bool, pad: &str) -> String {
    if openai {
        format!(
            r#"{{"id":"chatcmpl-bench","object":"chat.completion","created":1,"model":"gpt-bench","choices":[{{"index":0,"message":{{"role":"assistant","content":"Hello from the bench mock.{pad}"}},"finish_reason":"stop"}}],"usage":{{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}}}"#
        )
    } else {
        format!(
            r#"{{"id":"msg_bench","type":"message","role":"assistant","model":"claude-bench","content":[{{"type":"text","text":"Hello from the bench mock.{pad}"}}],"stop_reason":"end_turn","stop_sequence":null,"usage":{{"input_tokens":12,"output_tokens":9}}}}"#
        )
    }
}

fn sse_frames(openai: bool, frames: usize) -> Vec<Bytes> {
    let mut v = Vec::with_capacity(frames + 3);
    if openai {
        v.push(Bytes::from_static(b"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-bench\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"));
        for i in 0..frames {
            v.push(Bytes::from(format!("data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n")));
        }
        v.push(Bytes::from_static(b"data: [DONE]\n\n"));
    } else {
        v.push(Bytes::from_static(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_bench\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-bench\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n"));
        v.push(Bytes::from_static(b"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"));
        for i in 0..frames {
            v.push(Bytes::from(format!("event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"tok{i} \"}}}}\n\n")));
        }
        v.push(Bytes::from_static(
            b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
        ));
    }
    v
}

fn error_reply(openai: bool, status: StatusCode) -> Response<Body> {
    let text = if openai {
        format!(
            r#"{{"error":{{"message":"bench fault {}","type":"server_error","code":null}}}}"#,
            status.as_u16()
        )
    } else {
        let kind = match status.as_u16() {
            403 => "permission_error",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        format!(
            r#"{{"type":"error","error":{{"type":"{kind}","message":"bench fault {}"}}}}"#,
            status.as_u16()
        )
    };
    let mut r = Response::new(full(Bytes::from(text)));
    *r.status_mut() = status;
    r.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    if status.as_u16() == 429 {
        r.headers_mut()
            .insert("retry-after", hyper::header::HeaderValue::from_static("1"));
    }
    r
}

/// A complete body.
pub fn full(b: Bytes) -> Body {
    Full::new(b).map_err(|never| match never {}).boxed()
}

/// Counters the mock exposes on `GET /stats`.
#[derive(Default)]
pub struct MockState {
    requests: AtomicU64,
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<MockState>,
) -> Result<Response<Body>, std::io::Error> {
    if req.method() == hyper::Method::GET {
        let n = state.requests.load(Ordering::Relaxed);
        return Ok(Response::new(full(Bytes::from(format!(
            "{{\"requests\":{n}}}"
        )))));
    }
    let openai = req.uri().path().ends_with("/chat/completions");
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(std::io::Error::other)?
        .to_bytes();
    state.requests.fetch_add(1, Ordering::Relaxed);
    let k = knobs(&body);
    match k.fault.as_str() {
        "429" => return Ok(error_reply(openai, StatusCode::TOO_MANY_REQUESTS)),
        "403" => return Ok(error_reply(openai, StatusCode::FORBIDDEN)),
        "500" => return Ok(error_reply(openai, StatusCode::INTERNAL_SERVER_ERROR)),
        "529" => {
            let s = StatusCode::from_u16(529).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            return Ok(error_reply(openai, s));
        }
        "reset" => return Err(std::io::Error::other("bench reset")),
        "stall" => tokio::time::sleep(Duration::from_secs(30)).await,
        _ => {}
    }
    if k.ttft_ms > 0 {
        tokio::time::sleep(Duration::from_millis(k.ttft_ms)).await;
    }
    if !is_stream(&body) {
        let mut r = Response::new(full(json_reply(openai, k.size)));
        r.headers_mut().insert(
            "content-type",
            hyper::header::HeaderValue::from_static("application/json"),
        );
        return Ok(r);
    }
    let frames = sse_frames(openai, k.frames);
    let pace = Duration::from_millis(k.interval_ms);
    // The preamble and the first content frame go at once (a proxy that holds the head until
    // content arrives is then measured fairly); the pace applies between later frames.
    let immediate = if openai { 2 } else { 3 };
    let stream = futures_util::stream::unfold(
        (frames.into_iter(), 0usize),
        move |(mut it, i)| async move {
            let next = it.next()?;
            if i >= immediate && !pace.is_zero() {
                tokio::time::sleep(pace).await;
            }
            Some((Ok::<_, std::io::Error>(Frame::data(next)), (it, i + 1)))
        },
    );
    let mut r = Response::new(BodyExt::boxed(StreamBody::new(stream)));
    r.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("text/event-stream"),
    );
    Ok(r)
}

/// Serves the mock on `addr` until the process ends.
pub async fn run(addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    let state = Arc::new(MockState::default());
    loop {
        let (sock, _) = listener.accept().await?;
        let _ = sock.set_nodelay(true);
        let state = state.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| handle(req, state.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(sock), svc)
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_parse_and_default() {
        let k = knobs(br#"{"model":"m","bench":"s=10240;f=8;i=20;t=5;x=429","stream":true}"#);
        assert_eq!(
            k,
            Knobs {
                size: 10240,
                frames: 8,
                interval_ms: 20,
                ttft_ms: 5,
                fault: "429".into()
            }
        );
        assert_eq!(knobs(b"{}").size, 500);
        assert!(is_stream(br#"{"stream": true}"#));
        assert_eq!(sse_frames(false, 4).len(), expected_events(false, 4));
        assert_eq!(sse_frames(true, 4).len(), expected_events(true, 4));
        assert!(json_reply(true, 10240).len() >= 10240);
    }
}
