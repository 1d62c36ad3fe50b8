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
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use hyper::body::Incoming;
use tokio_util::sync::WaitForCancellationFutureOwned;

use super::dialect::SseKind;
use super::sse::SseFramer;
use super::sse::{Readiness, StreamEnd, StreamTracker};
use crate::clock::{Clock, Instant, SystemClock};
use crate::core::resilience::{Ticket, success};
use crate::core::snapshot::RequestView;
use crate::core::{AttemptGuard, Core, RequestGuard};
use crate::policy::{Classified, OutcomeClass, Scope};
use tokio::time::Sleep;

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
    /// The admission permits (§4), released when the body ends or is dropped.
    _permit: Option<crate::core::admission::Admitted>,
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
            _permit: None,
        }
    }

    /// Keeps the admission permits until the relayed body ends.
    pub fn with_permit(mut self, permit: Option<crate::core::admission::Admitted>) -> Self {
        self._permit = permit;
        self
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

/// Stream-guard durations (spec §6), from `[resilience.stream]`.
#[derive(Debug, Clone, Copy)]
pub struct Guards {
    /// A stream with no useful event this long after its head is a zombie. Default 30s.
    pub readiness: Duration,
    /// Keep-alive interval while nothing reaches the client. Default 15s.
    pub heartbeat: Duration,
    /// No model progress this long (from the head, restarted by progress) abandons the
    /// stream. Default 180s.
    pub stall: Duration,
    /// Opt-in throughput watchdog (§6): `(min_bytes_per_sec, warmup, window)`.
    pub throughput: Option<(u32, Duration, Duration)>,
}

/// How often the throughput watchdog looks: a quarter of its window, 50 ms to 1 s.
fn throughput_tick(window: Duration) -> Duration {
    (window / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// Incremental SSE inspection of a relayed stream, shared by the pre-commit hold (in
/// `forward`) and the relay.
pub struct Inspect {
    framer: SseFramer,
    tracker: StreamTracker,
    /// The framer gave up (oversized event): keep relaying, stop judging.
    blind: bool,
    started: Instant,
}

impl Inspect {
    /// A fresh inspector for a stream of `kind` whose head arrived at `started` (tokio time).
    pub fn new(kind: SseKind, started: Instant) -> Self {
        Self {
            framer: SseFramer::new(),
            tracker: StreamTracker::new(kind, started),
            blind: false,
            started,
        }
    }

    /// Feeds relayed bytes at `now`.
    pub fn feed(&mut self, now: Instant, d: &[u8]) {
        if self.blind {
            return;
        }
        if self.framer.push(d).is_err() {
            self.blind = true;
            return;
        }
        while let Some(ev) = self.framer.next_event() {
            self.tracker.observe(now, &ev);
        }
    }

    /// Content (or a complete, empty turn) arrived: the hold may end. A blind inspector
    /// releases the hold too.
    pub fn may_flush(&self) -> bool {
        self.blind || self.tracker.seen_content() || self.tracker.is_complete()
    }

    /// The in-stream error seen before content, if any.
    pub fn error(&self) -> Option<&super::sse::StreamError> {
        if self.blind {
            None
        } else {
            self.tracker.error()
        }
    }

    /// A zombie: no useful event within `readiness` of the head.
    pub fn zombie(&self, now: Instant, readiness: Duration) -> bool {
        !self.blind && self.tracker.readiness(now, readiness) == Readiness::Zombie
    }

    fn stalled(&self, now: Instant, stall: Duration) -> bool {
        !self.blind && self.tracker.stalled(now, stall)
    }

    /// When the next guard check is due: readiness before any useful event, else the stall
    /// deadline once progress started, else none.
    fn next_check(&self, g: &Guards) -> Option<Instant> {
        if self.blind {
            return None;
        }
        // §6: the content-stall budget runs from the head and restarts on model progress
        // (text, tool input, thinking, signatures); keepalives do not restart it.
        let stall_at = self.tracker.last_progress() + g.stall + Duration::from_millis(1);
        if self.tracker.readiness(self.started, g.readiness) == Readiness::Waiting
            && !self.tracker.seen_content()
        {
            return Some((self.started + g.readiness + Duration::from_millis(1)).min(stall_at));
        }
        Some(stall_at)
    }
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
    /// Bytes to send before anything else (the held frames, once content arrived).
    pending: Option<Bytes>,
    /// Still holding: frames received but not relayed (no content yet, head committed).
    holding: Option<BytesMut>,
    guards: Option<Guards>,
    heartbeat: Option<Pin<Box<Sleep>>>,
    watchdog: Option<Pin<Box<Sleep>>>,
    /// Ticks while the opt-in throughput watchdog is on.
    throughput: Option<Pin<Box<Sleep>>>,
}

impl RelayBody {
    /// Wraps a non-SSE (or unguarded) `upstream` body.
    pub fn new(
        upstream: Incoming,
        stop: WaitForCancellationFutureOwned,
        sse: Option<SseKind>,
        ok_status: bool,
        finish: Finish,
    ) -> Self {
        let inspect = sse.map(|kind| Inspect::new(kind, SystemClock.now()));
        Self {
            upstream,
            stop: Box::pin(stop),
            sse,
            inspect,
            ok_status,
            bytes: 0,
            finish: Some(finish),
            ended: false,
            pending: None,
            holding: None,
            guards: None,
            heartbeat: None,
            watchdog: None,
            throughput: None,
        }
    }

    /// Wraps a 2xx SSE body after the pre-commit hold (spec §6): `held` are the bytes read so
    /// far; when `content` is true they are sent first and relaying goes on, else they stay
    /// held (heartbeats keep the client alive) until content arrives.
    #[allow(
        clippy::too_many_arguments,
        reason = "one constructor call site; a builder would add nothing"
    )]
    pub fn guarded(
        upstream: Incoming,
        stop: WaitForCancellationFutureOwned,
        kind: SseKind,
        inspect: Inspect,
        held: BytesMut,
        content: bool,
        guards: Guards,
        finish: Finish,
    ) -> Self {
        let mut b = Self::new(upstream, stop, Some(kind), true, finish);
        b.bytes = if content { held.len() as u64 } else { 0 };
        b.inspect = Some(inspect);
        if content {
            b.pending = (!held.is_empty()).then(|| held.freeze());
        } else {
            b.holding = Some(held);
        }
        let now = SystemClock.now();
        b.heartbeat = Some(Box::pin(tokio::time::sleep_until(now + guards.heartbeat)));
        b.watchdog = b
            .inspect
            .as_ref()
            .and_then(|i| i.next_check(&guards))
            .map(|t| Box::pin(tokio::time::sleep_until(t)));
        if let Some((_, _, window)) = guards.throughput {
            b.throughput = Some(Box::pin(tokio::time::sleep_until(
                now + throughput_tick(window),
            )));
        }
        b.guards = Some(guards);
        b
    }

    fn observe(&mut self, d: &Bytes) {
        if let Some(i) = self.inspect.as_mut() {
            i.feed(SystemClock.now(), d);
        }
    }

    fn rearm_watchdog(&mut self) {
        let (Some(g), Some(i)) = (self.guards, self.inspect.as_ref()) else {
            return;
        };
        match (i.next_check(&g), self.watchdog.as_mut()) {
            (Some(t), Some(w)) => w.as_mut().reset(t),
            (Some(t), None) => self.watchdog = Some(Box::pin(tokio::time::sleep_until(t))),
            (None, _) => self.watchdog = None,
        }
    }

    fn reset_heartbeat(&mut self) {
        if let (Some(hb), Some(g)) = (self.heartbeat.as_mut(), self.guards) {
            hb.as_mut().reset(SystemClock.now() + g.heartbeat);
        }
    }

    /// Ends the stream now with a well-formed error event and reports `class`.
    fn abort(
        &mut self,
        class: OutcomeClass,
        reason: &str,
        message: &str,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let kind = self.sse.unwrap_or(SseKind::Anthropic);
        let ev = self.final_event(kind, message, false);
        let v = match self
            .finish
            .as_ref()
            .and_then(|f| f.provider().map(|p| (f, p)))
        {
            Some((f, p)) => {
                let mut c = f
                    .core
                    .classify(p, Some(200), None, message.as_bytes(), None, true);
                c.class = class;
                c.reason = reason.to_string();
                c.scope = Scope::Triple;
                Verdict::Failure(c)
            }
            None => Verdict::None,
        };
        self.holding = None;
        self.bytes += ev.len() as u64;
        self.complete("truncated", message, v);
        self.ended = true;
        Poll::Ready(Some(Ok(Frame::data(ev))))
    }

    fn at_boundary(&self) -> bool {
        self.holding.is_some()
            || self
                .inspect
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
        if let Some(p) = this.pending.take() {
            this.bytes += p.len() as u64;
            this.reset_heartbeat();
            return Poll::Ready(Some(Ok(Frame::data(p))));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        if let (Some(t), Some(Some((min, warmup, window)))) =
            (this.throughput.as_mut(), this.guards.map(|g| g.throughput))
            && t.as_mut().poll(cx).is_ready()
        {
            let now = SystemClock.now();
            t.as_mut().reset(now + throughput_tick(window));
            let _ = t.as_mut().poll(cx);
            let slow = this
                .inspect
                .as_mut()
                .is_some_and(|i| !i.blind && i.tracker.throughput_below(now, min, warmup, window));
            if slow {
                return this.abort(
                    OutcomeClass::StreamStall,
                    "throughput_too_low",
                    "the upstream stream fell below the minimum throughput",
                );
            }
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
        loop {
            match Pin::new(&mut this.upstream).poll_frame(cx) {
                Poll::Pending => break,
                Poll::Ready(Some(Ok(frame))) => {
                    let Some(d) = frame.data_ref().cloned() else {
                        if this.holding.is_some() {
                            continue; // trailers while holding: nothing to send yet
                        }
                        return Poll::Ready(Some(Ok(frame)));
                    };
                    this.observe(&d);
                    if let Some(held) = this.holding.as_mut() {
                        held.extend_from_slice(&d);
                        let (flush, err) = match this.inspect.as_ref() {
                            Some(i) => (i.may_flush(), i.error().cloned()),
                            None => (true, None),
                        };
                        if let Some(err) = err.filter(|_| !flush) {
                            // Failed before content under a committed head: one error event.
                            this.holding = None;
                            let kind = this.sse.unwrap_or(SseKind::Anthropic);
                            let ev = super::dialect::sse_error_event(
                                kind,
                                &err.message,
                                err.is_overloaded(),
                            );
                            let v = this.classify(
                                None,
                                err.body.as_bytes(),
                                Some(&err.error_type),
                                false,
                            );
                            this.bytes += ev.len() as u64;
                            this.complete(
                                "upstream_error",
                                &format!("error event before content: {}", err.error_type),
                                v,
                            );
                            this.ended = true;
                            return Poll::Ready(Some(Ok(Frame::data(ev))));
                        }
                        if !flush {
                            continue;
                        }
                        let out = this
                            .holding
                            .take()
                            .map(BytesMut::freeze)
                            .unwrap_or_default();
                        this.bytes += out.len() as u64;
                        this.reset_heartbeat();
                        this.rearm_watchdog();
                        return Poll::Ready(Some(Ok(Frame::data(out))));
                    }
                    this.bytes += d.len() as u64;
                    this.reset_heartbeat();
                    this.rearm_watchdog();
                    if this.sse.is_none() && this.upstream.is_end_stream() {
                        // A sized body is complete once its last byte is out; hyper may not
                        // poll again, so record the finish now.
                        let _ = this.end_clean();
                        this.ended = true;
                    }
                    return Poll::Ready(Some(Ok(frame)));
                }
                Poll::Ready(Some(Err(e))) => {
                    let msg = format!("upstream stream broke: {e}");
                    let v = this.classify(None, msg.as_bytes(), None, true);
                    let ev = this.sse.map(|kind| this.final_event(kind, &msg, false));
                    this.holding = None;
                    this.complete("truncated", &msg, v);
                    this.ended = true;
                    return match ev {
                        Some(ev) => Poll::Ready(Some(Ok(Frame::data(ev)))),
                        None => Poll::Ready(Some(Err(e.into()))),
                    };
                }
                Poll::Ready(None) => {
                    this.ended = true;
                    if let Some(held) = this.holding.take() {
                        // Ended while holding: a complete (empty) turn is relayed as is; anything
                        // else gets the final error event instead of the held frames.
                        if this
                            .inspect
                            .as_ref()
                            .is_some_and(|i| i.tracker.is_complete())
                        {
                            this.complete("ok", "", Verdict::Success);
                            this.bytes += held.len() as u64;
                            return Poll::Ready(Some(Ok(Frame::data(held.freeze()))));
                        }
                    }
                    return match this.end_clean() {
                        Some(ev) => {
                            this.bytes += ev.len() as u64;
                            Poll::Ready(Some(Ok(Frame::data(ev))))
                        }
                        None => Poll::Ready(None),
                    };
                }
            }
        }
        // Upstream is silent: stream guards (spec §6).
        let now = SystemClock.now();
        if let Some(g) = this.guards {
            if let Some(w) = this.watchdog.as_mut()
                && w.as_mut().poll(cx).is_ready()
            {
                let (zombie, stalled) = match this.inspect.as_ref() {
                    Some(i) => (i.zombie(now, g.readiness), i.stalled(now, g.stall)),
                    None => (false, false),
                };
                if zombie {
                    return this.abort(
                        OutcomeClass::Transient,
                        "zombie_stream",
                        "the upstream stream sent no event within the readiness timeout",
                    );
                }
                if stalled {
                    return this.abort(OutcomeClass::StreamStall, "stream_stall", "the upstream stream stalled: no model output within the content-stall timeout");
                }
                this.rearm_watchdog();
                if let Some(w) = this.watchdog.as_mut() {
                    let _ = w.as_mut().poll(cx);
                }
            }
            if let Some(hb) = this.heartbeat.as_mut()
                && hb.as_mut().poll(cx).is_ready()
            {
                hb.as_mut().reset(now + g.heartbeat);
                let _ = hb.as_mut().poll(cx);
                if this.at_boundary()
                    && let Some(kind) = this.sse
                {
                    let ping = Bytes::from_static(super::sse::heartbeat(kind));
                    this.bytes += ping.len() as u64;
                    return Poll::Ready(Some(Ok(Frame::data(ping))));
                }
            }
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.is_none()
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
