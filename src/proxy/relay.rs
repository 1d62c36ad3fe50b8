//! `RelayBody`: streams an upstream response body to the client as it arrives, byte-exact,
//! and records the request's completion exactly once.
//!
//! It never buffers: each upstream frame is handed to hyper as is. It ends early in two cases,
//! each with a well-formed final SSE event when the response is a stream: the shutdown
//! deadline passed (`hard_stop`), or the upstream body broke after the head. A client that
//! goes away drops the body, which drops the upstream response (closing that connection)
//! and records the request as `cancelled`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::dialect::{SseKind, sse_error_event};
use crate::core::resilience::{Ticket, success};
use crate::core::snapshot::RequestView;
use crate::core::{AttemptGuard, Core, RequestGuard};

/// Error type of response bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The request bookkeeping a body carries until it ends.
pub struct Finish {
    core: Core,
    request: RequestGuard,
    view: RequestView,
    _attempt: Option<AttemptGuard>,
    ticket: Option<Ticket>,
}

impl Finish {
    /// Bundles the request guard, its view so far and the attempt that is being relayed.
    pub fn new(
        core: Core,
        request: RequestGuard,
        view: RequestView,
        attempt: Option<AttemptGuard>,
        ticket: Option<Ticket>,
    ) -> Self {
        Self {
            core,
            request,
            view,
            _attempt: attempt,
            ticket,
        }
    }

    /// Records the request as finished with `outcome` after `bytes` relayed.
    ///
    /// The attempt's verdict goes through the core's choke point: `ok` → success,
    /// `truncated` → a transient failure (§0 "stream ended without its terminal marker, or
    /// transport error after the response head"), `cancelled` → no verdict (probe released).
    pub fn complete(mut self, outcome: &str, bytes: u64, error: &str) {
        if let Some(ticket) = self.ticket.take() {
            match outcome {
                "ok" => {
                    self.core.report(ticket, &success(self.view.status));
                }
                "truncated" if error != "ended by shutdown" => {
                    let c = self.core.classify(
                        ticket.provider,
                        Some(self.view.status),
                        None,
                        error.as_bytes(),
                        None,
                        true,
                    );
                    self.core.report(ticket, &c);
                }
                _ => self.core.release(ticket),
            }
        }
        self.view.outcome = outcome.to_string();
        self.view.bytes = bytes;
        if !error.is_empty() {
            self.view.error = error.to_string();
        }
        self.core
            .finish_request(&self.request, std::mem::take(&mut self.view));
    }
}

/// A streaming response body relayed from upstream.
pub struct RelayBody {
    upstream: Incoming,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
    sse: Option<SseKind>,
    ok_status: bool,
    bytes: u64,
    /// Last up-to-4 bytes relayed, to know whether we sit on an SSE event boundary.
    tail: BytesMut,
    finish: Option<Finish>,
    ended: bool,
}

impl RelayBody {
    /// Wraps `upstream`; `sse` is the stream dialect when the response is `text/event-stream`;
    /// `ok_status` is whether the status was 2xx (else the outcome is `upstream_error`).
    pub fn new(
        upstream: Incoming,
        stop: WaitForCancellationFutureOwned,
        sse: Option<SseKind>,
        ok_status: bool,
        finish: Finish,
    ) -> Self {
        Self {
            upstream,
            stop: Box::pin(stop),
            sse,
            ok_status,
            bytes: 0,
            tail: BytesMut::with_capacity(4),
            finish: Some(finish),
            ended: false,
        }
    }

    fn at_boundary(&self) -> bool {
        let t = &self.tail[..];
        t.is_empty() || t.ends_with(b"\n\n") || t.ends_with(b"\r\n\r\n") || t.ends_with(b"\r\r")
    }

    fn track(&mut self, d: &Bytes) {
        self.bytes += d.len() as u64;
        if d.len() >= 4 {
            self.tail.clear();
            self.tail.extend_from_slice(&d[d.len() - 4..]);
        } else {
            self.tail.extend_from_slice(d);
            let n = self.tail.len();
            if n > 4 {
                let _ = self.tail.split_to(n - 4);
            }
        }
    }

    fn finish_clean(&mut self) {
        let outcome = if self.ok_status {
            "ok"
        } else {
            "upstream_error"
        };
        self.complete(outcome, "");
        self.ended = true;
    }

    fn complete(&mut self, outcome: &str, error: &str) {
        if let Some(f) = self.finish.take() {
            f.complete(outcome, self.bytes, error);
        }
    }

    /// The final error event for a stream cut short, starting on an event boundary.
    fn final_event(&self, kind: SseKind, message: &str, overloaded: bool) -> Bytes {
        let ev = sse_error_event(kind, message, overloaded);
        if self.at_boundary() {
            ev
        } else {
            let mut b = BytesMut::with_capacity(ev.len() + 2);
            b.extend_from_slice(b"\n\n");
            b.extend_from_slice(&ev);
            b.freeze()
        }
    }
}

impl Body for RelayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if this.stop.as_mut().poll(cx).is_ready() {
            let msg = "sluice is shutting down; the stream was ended before it finished";
            this.complete("truncated", "ended by shutdown");
            this.ended = true;
            return match this.sse {
                Some(kind) => {
                    let ev = this.final_event(kind, msg, true);
                    Poll::Ready(Some(Ok(Frame::data(ev))))
                }
                None => Poll::Ready(Some(Err(msg.into()))),
            };
        }
        match Pin::new(&mut this.upstream).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.track(d);
                }
                if this.upstream.is_end_stream() {
                    // A sized body is complete once its last byte is out; hyper may not poll
                    // again, so record the finish now.
                    this.finish_clean();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let msg = format!("upstream stream broke: {e}");
                this.complete("truncated", &msg);
                this.ended = true;
                match this.sse {
                    Some(kind) => {
                        let ev = this.final_event(kind, &msg, false);
                        Poll::Ready(Some(Ok(Frame::data(ev))))
                    }
                    None => Poll::Ready(Some(Err(e.into()))),
                }
            }
            Poll::Ready(None) => {
                this.finish_clean();
                Poll::Ready(None)
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }

    fn size_hint(&self) -> SizeHint {
        if self.sse.is_some() {
            SizeHint::default()
        } else {
            self.upstream.size_hint()
        }
    }
}

impl Drop for RelayBody {
    fn drop(&mut self) {
        // The client went away before the body ended.
        self.complete("cancelled", "client disconnected");
    }
}
