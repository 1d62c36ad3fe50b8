//! `RelayBody`: streams an upstream response body to the client as it arrives, byte-exact,
//! and records the request's completion — and the attempt's verdict — exactly once.
//!
//! It never buffers: each upstream frame is handed to hyper as is. SSE bodies are also fed to
//! an incremental [`SseFramer`] and [`StreamTracker`] (a copy of the event bytes, never a
//! rewrite) so the verdict follows spec §0: a stream that ended with its terminal marker is a
//! success; one that ended without it, or broke after the head, is a transient failure and
//! gets a well-formed final error event; an `event: error` inside the 200 stream is
//! classified like the HTTP error of its type (A14 c). It also ends early when the shutdown
//! deadline passes (`hard_stop`). A client that goes away drops the body, which drops the
//! upstream response (closing that connection) and records `cancelled` with no penalty.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::dialect::SseKind;
use super::sse::SseFramer;
use super::sse::{StreamEnd, StreamTracker};
use crate::core::resilience::{Ticket, success};
use crate::core::snapshot::RequestView;
use crate::core::{AttemptGuard, Core, RequestGuard};
use crate::policy::Classified;

/// Error type of response bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What an attempt's end means for the resilience layers.
pub enum Verdict {
    /// Completed: report a success.
    Success,
    /// Failed: report this classification.
    Failure(Classified),
    /// No verdict (client gone, shutdown): release the probe, penalise nothing.
    None,
}

/// The request bookkeeping a body carries until it ends.
pub struct Finish {
    core: Core,
    request: RequestGuard,
    view: RequestView,
    _attempt: Option<AttemptGuard>,
    ticket: Option<Ticket>,
}

impl Finish {
    /// Bundles the request guard, its view so far, the attempt being relayed and its
    /// resilience ticket.
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

    /// Records the request as finished with `outcome` after `bytes` relayed, and hands the
    /// attempt's `verdict` to the core's one choke point.
    pub fn complete(mut self, outcome: &str, bytes: u64, error: &str, verdict: Verdict) {
        if let Some(ticket) = self.ticket.take() {
            match verdict {
                Verdict::Success => {
                    self.core.report(ticket, &success(self.view.status));
                }
                Verdict::Failure(c) => {
                    self.core.report(ticket, &c);
                }
                Verdict::None => self.core.release(ticket),
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

    fn provider(&self) -> Option<usize> {
        self.ticket.as_ref().map(|t| t.provider)
    }
}

/// Incremental SSE inspection of a relayed stream.
struct Inspect {
    framer: SseFramer,
    tracker: StreamTracker,
    /// The framer gave up (oversized event): keep relaying, stop judging.
    blind: bool,
}

/// A streaming response body relayed from upstream.
pub struct RelayBody {
    upstream: Incoming,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
    sse: Option<SseKind>,
    inspect: Option<Inspect>,
    ok_status: bool,
    bytes: u64,
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
        let inspect = sse.map(|kind| Inspect {
            framer: SseFramer::new(),
            tracker: StreamTracker::new(kind, finish.core.clock().now()),
            blind: false,
        });
        Self {
            upstream,
            stop: Box::pin(stop),
            sse,
            inspect,
            ok_status,
            bytes: 0,
            finish: Some(finish),
            ended: false,
        }
    }

    fn observe(&mut self, d: &Bytes) {
        self.bytes += d.len() as u64;
        let Some(i) = self.inspect.as_mut().filter(|i| !i.blind) else {
            return;
        };
        if i.framer.push(d).is_err() {
            i.blind = true;
            return;
        }
        let now = self.finish.as_ref().map(|f| f.core.clock().now());
        while let Some(ev) = i.framer.next_event() {
            if let Some(now) = now {
                i.tracker.observe(now, &ev);
            }
        }
    }

    fn at_boundary(&self) -> bool {
        self.inspect
            .as_ref()
            .is_none_or(|i| i.blind || i.framer.at_boundary())
    }

    fn complete(&mut self, outcome: &str, error: &str, verdict: Verdict) {
        if let Some(f) = self.finish.take() {
            f.complete(outcome, self.bytes, error, verdict);
        }
    }

    /// Classifies a failure of the relayed attempt through the core's live rules.
    fn classify(
        &self,
        status: Option<u16>,
        body: &[u8],
        in_stream: Option<&str>,
        truncated: bool,
    ) -> Verdict {
        match &self.finish {
            Some(f) => match f.provider() {
                Some(p) => {
                    Verdict::Failure(f.core.classify(p, status, None, body, in_stream, truncated))
                }
                None => Verdict::None,
            },
            None => Verdict::None,
        }
    }

    /// The final error event for a stream cut short, starting on an event boundary.
    fn final_event(&self, kind: SseKind, message: &str, overloaded: bool) -> Bytes {
        let ev = super::dialect::sse_error_event(kind, message, overloaded);
        if self.at_boundary() {
            ev
        } else {
            let mut b = BytesMut::with_capacity(ev.len() + 2);
            b.extend_from_slice(b"\n\n");
            b.extend_from_slice(&ev);
            b.freeze()
        }
    }

    /// The upstream body ended cleanly: judge the stream, and for a truncated SSE stream
    /// return the final error event to append.
    fn end_clean(&mut self) -> Option<Bytes> {
        let Some(kind) = self.sse else {
            let (outcome, verdict) = if self.ok_status {
                ("ok", Verdict::Success)
            } else {
                ("upstream_error", Verdict::None)
            };
            self.complete(outcome, "", verdict);
            return None;
        };
        let judged = self
            .inspect
            .as_ref()
            .filter(|i| !i.blind)
            .map(|i| (i.tracker.end(), i.tracker.error().cloned()));
        match judged {
            None | Some((StreamEnd::Complete, _)) => {
                self.complete("ok", "", Verdict::Success);
                None
            }
            Some((StreamEnd::Failed, Some(err))) => {
                let v = self.classify(None, err.body.as_bytes(), Some(&err.error_type), false);
                self.complete(
                    "upstream_error",
                    &format!(
                        "error event in the stream: {} {}",
                        err.error_type, err.message
                    ),
                    v,
                );
                None
            }
            Some((StreamEnd::Failed, None)) => {
                let v = self.classify(Some(500), b"stream reported failure", None, false);
                self.complete("upstream_error", "the stream reported a failure", v);
                None
            }
            Some((StreamEnd::Truncated, _)) => {
                let msg = "the upstream stream ended before its terminal event";
                let v = self.classify(Some(200), msg.as_bytes(), None, true);
                let ev = self.final_event(kind, msg, false);
                self.complete("truncated", msg, v);
                Some(ev)
            }
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
            let ev = this.sse.map(|kind| this.final_event(kind, msg, true));
            this.complete("truncated", "ended by shutdown", Verdict::None);
            this.ended = true;
            return match ev {
                Some(ev) => Poll::Ready(Some(Ok(Frame::data(ev)))),
                None => Poll::Ready(Some(Err(msg.into()))),
            };
        }
        match Pin::new(&mut this.upstream).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    let d = d.clone();
                    this.observe(&d);
                }
                if this.sse.is_none() && this.upstream.is_end_stream() {
                    // A sized body is complete once its last byte is out; hyper may not poll
                    // again, so record the finish now.
                    let _ = this.end_clean();
                    this.ended = true;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                let msg = format!("upstream stream broke: {e}");
                let v = this.classify(None, msg.as_bytes(), None, true);
                let ev = this.sse.map(|kind| this.final_event(kind, &msg, false));
                this.complete("truncated", &msg, v);
                this.ended = true;
                match ev {
                    Some(ev) => Poll::Ready(Some(Ok(Frame::data(ev)))),
                    None => Poll::Ready(Some(Err(e.into()))),
                }
            }
            Poll::Ready(None) => {
                this.ended = true;
                match this.end_clean() {
                    Some(ev) => Poll::Ready(Some(Ok(Frame::data(ev)))),
                    None => Poll::Ready(None),
                }
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
        self.complete("cancelled", "client disconnected", Verdict::None);
    }
}
