//! When the response head is committed. A non-streaming request's head goes out with its
//! complete answer. A streaming request whose dispatch is still going after
//! `heartbeat_interval` (queued, waiting out a cooldown, or holding a stream that has shown
//! no content yet) gets an early `200 text/event-stream` head and heartbeats, so clients
//! with a no-bytes timeout keep waiting, while dispatch goes on — still free to fall back to
//! the next target, since nothing of any attempt has been sent. [`EarlyBody`] then relays the
//! stream that served, or ends with one well-formed error event if none did.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{HeaderValue, Response, header};
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use tokio::time::Sleep;

use crate::proxy::Shared;
use crate::proxy::dialect::ProxyError;
use crate::proxy::respond::outcome::{Outcome, Pending};
use crate::proxy::respond::relay::{BoxError, RelayBody};
use crate::proxy::route::Route;
use crate::proxy::sse::heartbeat;
use crate::snapshot::RequestOutcome;
use crate::wire::dialect::sse_error_event;

/// A dispatch still running, with the request's bookkeeping.
pub type Serving = Pin<Box<dyn Future<Output = (Result<Outcome, ProxyError>, Pending)> + Send>>;

enum Phase {
    /// Dispatch is running; heartbeats go out meanwhile.
    Waiting(Serving),
    /// A stream served: relay it.
    Relay(Box<RelayBody>),
    /// Done.
    Ended,
}

/// The body of an early-committed stream head.
pub struct EarlyBody {
    state: Shared,
    route: Route,
    phase: Phase,
    heartbeat: Pin<Box<Sleep>>,
    interval: std::time::Duration,
}

/// The early head: `200 text/event-stream` with an [`EarlyBody`] driving `serving`.
pub fn early_head(state: Shared, route: Route, serving: Serving) -> Response<EarlyBody> {
    let interval = state.core.settings_snapshot().stream.heartbeat_interval;
    // The first heartbeat goes out at once: the interval already passed without a head.
    let now = state.core.clock().now();
    let body = EarlyBody {
        state,
        route,
        phase: Phase::Waiting(serving),
        heartbeat: Box::pin(tokio::time::sleep_until(now)),
        interval,
    };
    let mut resp = Response::new(body);
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    resp
}

impl EarlyBody {
    /// Dispatch finished: relay its stream, or turn its answer into the stream's end.
    fn served(&mut self, result: Result<Outcome, ProxyError>, pending: Pending) -> Option<Bytes> {
        let kind = self.route.sse_kind();
        let (outcome, message, status) = match result {
            Ok(Outcome::Stream(s)) => {
                self.phase = match pending.relay(*s, self.route) {
                    Some((_, relay)) => Phase::Relay(Box::new(relay)),
                    None => Phase::Ended,
                };
                return None;
            }
            Ok(Outcome::Local { resp, outcome }) if resp.status().is_success() => {
                // A complete (non-SSE) answer to a streaming request: its bytes as they are.
                let body = full_bytes(resp.into_body());
                pending.stream_error(outcome, String::new(), body.len() as u64);
                self.phase = Phase::Ended;
                return Some(body);
            }
            Ok(Outcome::Local { resp, .. }) => {
                let status = resp.status().as_u16();
                let body = full_bytes(resp.into_body());
                (RequestOutcome::UpstreamError, upstream_text(&body), status)
            }
            Err(e) => {
                let status = e.status().as_u16();
                let mut p = pending;
                p.record_error(&e, 200);
                let ev = sse_error_event(kind, &e.to_string(), matches!(status, 503 | 529));
                let outcome = p.view.outcome;
                p.stream_error(outcome, e.to_string(), ev.len() as u64);
                self.phase = Phase::Ended;
                return Some(ev);
            }
        };
        let ev = sse_error_event(kind, &message, matches!(status, 503 | 529));
        pending.stream_error(outcome, message, ev.len() as u64);
        self.phase = Phase::Ended;
        Some(ev)
    }
}

/// The bytes of a complete body.
fn full_bytes(b: Full<Bytes>) -> Bytes {
    let mut b = b;
    let waker = std::task::Waker::noop();
    let mut cx = Context::from_waker(waker);
    match Pin::new(&mut b).poll_frame(&mut cx) {
        Poll::Ready(Some(Ok(f))) => f.into_data().unwrap_or_default(),
        _ => Bytes::new(),
    }
}

/// The message of an upstream error body (`error.message`), else its text.
fn upstream_text(body: &[u8]) -> String {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(500).collect())
}

impl Body for EarlyBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if let Phase::Waiting(serving) = &mut this.phase
            && let Poll::Ready((result, pending)) = serving.as_mut().poll(cx)
            && let Some(last) = this.served(result, pending)
        {
            return Poll::Ready(Some(Ok(Frame::data(last))));
        }
        match &mut this.phase {
            Phase::Relay(r) => Pin::new(r.as_mut()).poll_frame(cx),
            Phase::Ended => Poll::Ready(None),
            Phase::Waiting(_) => {
                if this.heartbeat.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                let next = this.state.core.clock().now() + this.interval;
                this.heartbeat.as_mut().reset(next);
                let _ = this.heartbeat.as_mut().poll(cx);
                let ping = heartbeat(this.route.sse_kind());
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(ping)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.phase, Phase::Ended)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
