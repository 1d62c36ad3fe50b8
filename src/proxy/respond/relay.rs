//! `RelayBody`: relays a 2xx SSE stream, past its pre-commit hold, to the client as it
//! arrives, byte-exact, and records the request's completion — and the attempt's verdict —
//! exactly once.
//!
//! It never buffers beyond the hold: each upstream frame is handed to hyper as is, and a copy
//! feeds the §6 guards' [`Inspect`]. A stream that ended with its terminal marker is a
//! success; one that ended without it, or broke, is a failed attempt and gets a well-formed
//! final error event; an `event: error` inside the stream is classified like the HTTP error
//! of its type. An empty turn (`proxy::turn`) is reported as `empty_turn`: relayed as it is
//! once reasoning reached the client, or — still held, nothing content-bearing — replaced by
//! one error event. The guards (readiness, content stall, opt-in throughput, the execution
//! budget) end it early with one error event; heartbeats keep a silent stream alive; the
//! shutdown deadline (`hard_stop`) ends it too. A client that goes away drops the body, which
//! drops the upstream response (closing that connection) and records `cancelled` with no
//! penalty.
//!
//! With `[resilience.stream] continue_after_break` on, an Anthropic text turn that breaks (or
//! ends without its terminal event) after text reached the client, on an event boundary, is
//! continued once instead ([`crate::proxy::respond::continuer`]): the broken attempt is reported as its
//! truncation, the continuation is sent with the text as an assistant prefill, and its stream
//! is spliced in ([`crate::proxy::respond::continuation::Splice`]); heartbeats keep the client alive while it
//! is sent. A continuation that fails ends the stream with the usual one error event.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::proxy::translated::UpstreamBody;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use tokio::time::Sleep;
use tokio_util::sync::WaitForCancellationFutureOwned;

use crate::clock::{Clock, Instant};
use crate::core::resilience::{AttemptEnd, EndKind, Ticket, success};
use crate::core::{AttemptGuard, Core, RequestGuard};
use crate::policy::Classified;
use crate::proxy::respond::continuation::{Splice, TextTurn, eligible, prefill};
use crate::proxy::respond::continuer::{Continued, Continuer};
use crate::proxy::sse::guard::{Guards, Inspect, throughput_tick};
use crate::proxy::sse::hold::{EMPTY_STREAM, Held};
use crate::proxy::sse::{StreamEnd, heartbeat};
use crate::snapshot::{AttemptView, RequestOutcome, RequestView};
use crate::wire::dialect::{SseKind, sse_error_event};
use crate::wire::sse::SseFramer;

/// Error type of response bodies.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

type Next = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

/// What an attempt's end means for the resilience layers.
pub enum Verdict {
    /// Completed: report a success.
    Success,
    /// Failed: report this classification.
    Failure(Classified),
    /// No verdict (client gone, shutdown, sluice's own budget): release the probe, penalise
    /// nothing.
    None,
}

/// The request bookkeeping a body carries until it ends.
pub struct Finish {
    core: Core,
    request: RequestGuard,
    view: RequestView,
    _attempt: Option<AttemptGuard>,
    ticket: Option<Ticket>,
    /// The admission permits, released when the body ends or is dropped.
    _permit: Option<crate::core::admission::Admitted>,
}

impl Finish {
    /// Bundles the request guard, its view so far, the attempt being relayed, its resilience
    /// ticket and its admission permits.
    pub fn new(
        core: Core,
        request: RequestGuard,
        view: RequestView,
        attempt: Option<AttemptGuard>,
        ticket: Option<Ticket>,
        permit: Option<crate::core::admission::Admitted>,
    ) -> Self {
        Self {
            core,
            request,
            view,
            _attempt: attempt,
            ticket,
            _permit: permit,
        }
    }

    /// Records the request as finished with `outcome` after `bytes` relayed, and hands the
    /// attempt's `verdict` to the core's one choke point.
    pub fn complete(mut self, outcome: RequestOutcome, bytes: u64, error: &str, verdict: Verdict) {
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
        self.view.outcome = outcome;
        self.view.bytes = bytes;
        if !error.is_empty() {
            self.view.error = error.to_string();
        }
        self.core
            .finish_request(&self.request, std::mem::take(&mut self.view));
    }

    /// Classifies the relayed attempt's `end` with the core's live rules.
    fn classify(&self, end: &AttemptEnd<'_>) -> Verdict {
        match &self.ticket {
            Some(t) => Verdict::Failure(self.core.classify_in(t.key.provider, t.positions.0, end)),
            None => Verdict::None,
        }
    }
}

/// A relayed 2xx SSE response body.
pub struct RelayBody {
    upstream: UpstreamBody,
    stop: Pin<Box<WaitForCancellationFutureOwned>>,
    kind: SseKind,
    inspect: Inspect,
    clock: Arc<dyn Clock>,
    guards: Guards,
    bytes: u64,
    finish: Option<Finish>,
    ended: bool,
    /// Bytes to send before anything else (the held frames, once content arrived).
    pending: Option<Bytes>,
    /// Still holding: frames received but not relayed (no content yet).
    holding: Option<BytesMut>,
    heartbeat: Pin<Box<Sleep>>,
    watchdog: Option<Pin<Box<Sleep>>>,
    /// Ticks while the opt-in throughput watchdog is on.
    throughput: Option<Pin<Box<Sleep>>>,
    /// The §5 execution budget's end, when one applies.
    deadline: Option<Pin<Box<Sleep>>>,
    /// Mid-stream continuation, when `continue_after_break` is on and it was not used yet.
    cont: Option<Watch>,
    /// The continuation being sent (the client stream waits on an event boundary).
    continuing: Option<Sending>,
    /// Rewrites the continuation stream for the client once it is spliced.
    splice: Option<Splice>,
}

/// What the client stream showed, for the continuation rule.
struct Watch {
    continuer: Continuer,
    framer: SseFramer,
    turn: TextTurn,
}

impl Watch {
    fn feed(&mut self, d: &[u8]) {
        if self.framer.push(d).is_err() {
            // Unframeable: never continued.
            self.turn = TextTurn::default();
            return;
        }
        while let Some(ev) = self.framer.next_event() {
            self.turn.observe(&ev);
        }
    }
}

/// A continuation attempt in flight.
struct Sending {
    fut: Pin<Box<dyn Future<Output = Continued> + Send>>,
    trimmed: String,
    broke: String,
}

impl RelayBody {
    /// Wraps `upstream` after its pre-commit hold: the `held` bytes are sent first when they
    /// include content, else they stay held (heartbeats keep the client alive) until content
    /// arrives. `deadline` ends the stream with an execution-timeout error event.
    pub fn new(
        upstream: UpstreamBody,
        stop: WaitForCancellationFutureOwned,
        kind: SseKind,
        held: Held,
        guards: Guards,
        finish: Finish,
        deadline: Option<Instant>,
    ) -> Self {
        let clock = finish.core.clock().clone();
        let now = clock.now();
        let (pending, holding) = if held.content {
            ((!held.bytes.is_empty()).then(|| held.bytes.freeze()), None)
        } else {
            (None, Some(held.bytes))
        };
        Self {
            upstream,
            stop: Box::pin(stop),
            kind,
            watchdog: held
                .inspect
                .next_check(&guards)
                .map(|t| Box::pin(tokio::time::sleep_until(t))),
            inspect: held.inspect,
            clock,
            guards,
            bytes: 0,
            finish: Some(finish),
            ended: false,
            pending,
            holding,
            heartbeat: Box::pin(tokio::time::sleep_until(now + guards.heartbeat)),
            throughput: guards
                .throughput
                .map(|(_, _, w)| Box::pin(tokio::time::sleep_until(now + throughput_tick(w)))),
            deadline: deadline.map(|d| Box::pin(tokio::time::sleep_until(d))),
            cont: None,
            continuing: None,
            splice: None,
        }
    }

    /// Lets a stream that breaks after text be continued once by `continuer` (mid-stream
    /// continuation; `None` leaves today's single error event).
    pub fn with_continuer(mut self, continuer: Option<Continuer>) -> Self {
        self.cont = continuer.map(|continuer| Watch {
            continuer,
            framer: SseFramer::new(),
            turn: TextTurn::default(),
        });
        if let Some(w) = self.cont.as_mut() {
            let first = self.pending.as_deref().or(self.holding.as_deref());
            w.feed(first.unwrap_or_default());
        }
        self
    }

    /// The stream broke after its head: starts the continuation when the rule allows it,
    /// reporting the broken attempt (as the truncation it was) first. `false`: not continued.
    fn try_continue(&mut self, status: Option<u16>, msg: &str) -> bool {
        let Some(w) = self.cont.as_ref() else {
            return false;
        };
        let at_boundary = self.holding.is_none() && w.framer.at_boundary();
        let ctx = w.continuer.context(false, self.clock.now(), at_boundary);
        if !eligible(&ctx, &w.turn) {
            return false;
        }
        let Some(p) = prefill(w.continuer.body(), w.turn.text()) else {
            return false;
        };
        let Some(ticket) = w.continuer.admit() else {
            return false;
        };
        let Some(w) = self.cont.take() else {
            return false;
        };
        let v = self.verdict_truncated(status, msg);
        if let Some(f) = self.finish.as_mut() {
            if let (Some(t), Verdict::Failure(c)) = (f.ticket.take(), v) {
                if let Some(a) = f.view.attempt_log.last_mut() {
                    a.class = c.class;
                    a.reason = c.reason.clone();
                }
                f.core.report(t, &c);
            }
            f.view.attempts += 1;
            f.view.continued = true;
        }
        self.continuing = Some(Sending {
            fut: Box::pin(w.continuer.send(ticket, p.body)),
            trimmed: p.trimmed,
            broke: msg.to_string(),
        });
        true
    }

    /// Polls the continuation in flight: splices its stream in, or ends the client stream
    /// with one error event when it failed.
    fn poll_continuation(&mut self, cx: &mut Context<'_>) -> Option<Next> {
        let s = self.continuing.as_mut()?;
        let Poll::Ready(done) = s.fut.as_mut().poll(cx) else {
            return None;
        };
        let s = self.continuing.take()?;
        match done {
            Continued::Stream {
                resp,
                held,
                guard,
                ticket,
                latency,
            } => {
                let status = resp.status().as_u16();
                if let Some(f) = self.finish.as_mut() {
                    f.ticket = Some(ticket);
                    f._attempt = Some(guard);
                    push_attempt(
                        &mut f.view,
                        status,
                        &success(status),
                        latency,
                        "continuation",
                    );
                }
                self.upstream = resp.into_body();
                self.splice = Some(Splice::new(s.trimmed));
                let held = held.bytes.freeze();
                self.on_data(held).or_else(|| self.poll_upstream(cx))
            }
            Continued::Failed {
                message,
                classified,
            } => {
                if let (Some(f), Some((status, c, latency))) = (self.finish.as_mut(), classified) {
                    push_attempt(&mut f.view, status, &c, latency, &c.reason);
                }
                let msg = format!("{}; {message}", s.broke);
                Some(self.end_with_error(RequestOutcome::Truncated, &msg, false, Verdict::None))
            }
        }
    }

    fn rearm_watchdog(&mut self) {
        match (
            self.inspect.next_check(&self.guards),
            self.watchdog.as_mut(),
        ) {
            (Some(t), Some(w)) => w.as_mut().reset(t),
            (Some(t), None) => self.watchdog = Some(Box::pin(tokio::time::sleep_until(t))),
            (None, _) => self.watchdog = None,
        }
    }

    /// Bytes went out: the heartbeat waits a full interval again.
    fn sent(&mut self, n: usize) {
        self.bytes += n as u64;
        let at = self.clock.now() + self.guards.heartbeat;
        self.heartbeat.as_mut().reset(at);
    }

    fn at_boundary(&self) -> bool {
        self.holding.is_some() || self.inspect.at_boundary()
    }

    fn complete(&mut self, outcome: RequestOutcome, error: &str, verdict: Verdict) {
        if let Some(mut f) = self.finish.take() {
            let usage = self.inspect.usage();
            f.view.tokens_in = usage.input;
            f.view.tokens_out = usage.output;
            f.complete(outcome, self.bytes, error, verdict);
        }
    }

    /// Ends the stream now with one well-formed error event, recording `outcome` and
    /// `verdict`.
    fn end_with_error(
        &mut self,
        outcome: RequestOutcome,
        message: &str,
        overloaded: bool,
        v: Verdict,
    ) -> Next {
        let ev = self.final_event(message, overloaded);
        self.holding = None;
        self.bytes += ev.len() as u64;
        self.complete(outcome, message, v);
        self.ended = true;
        Poll::Ready(Some(Ok(Frame::data(ev))))
    }

    /// A guard abandoned the stream: classify it as `kind` and end it.
    fn abort(&mut self, kind: EndKind, message: &str) -> Next {
        let v = self.finish.as_ref().map_or(Verdict::None, |f| {
            f.classify(&AttemptEnd::guard(kind, message))
        });
        self.end_with_error(RequestOutcome::Truncated, message, false, v)
    }

    /// The verdict for a turn that ended empty (`proxy::turn`), also written into the
    /// request's attempt log (which listed the attempt as served).
    fn empty_verdict(&mut self) -> Verdict {
        let Some(f) = self.finish.as_mut() else {
            return Verdict::None;
        };
        let v = f.classify(&AttemptEnd::guard(EndKind::EmptyTurn, EMPTY_STREAM));
        if let (Verdict::Failure(c), Some(a)) = (&v, f.view.attempt_log.last_mut()) {
            a.class = c.class;
            a.reason = c.reason.clone();
        }
        v
    }

    /// The turn ended empty while still held (the head was committed, so no other target
    /// can be tried): one error event instead of a turn with nothing in it.
    fn end_empty(&mut self) -> Next {
        let v = self.empty_verdict();
        self.end_with_error(RequestOutcome::UpstreamError, EMPTY_STREAM, false, v)
    }

    /// The final error event for a stream cut short, starting on an event boundary.
    fn final_event(&self, message: &str, overloaded: bool) -> Bytes {
        let ev = sse_error_event(self.kind, message, overloaded);
        if self.at_boundary() {
            return ev;
        }
        let mut b = BytesMut::with_capacity(ev.len() + 2);
        b.extend_from_slice(b"\n\n");
        b.extend_from_slice(&ev);
        b.freeze()
    }

    /// One upstream data frame.
    fn on_data(&mut self, d: Bytes) -> Option<Next> {
        let d = match self.splice.as_mut().map(|s| s.feed(&d)) {
            None => d,
            Some(Ok(out)) if out.is_empty() => return None,
            Some(Ok(out)) => out,
            Some(Err(e)) => {
                let msg = e.to_string();
                return Some(self.end_with_error(
                    RequestOutcome::Truncated,
                    &msg,
                    false,
                    Verdict::None,
                ));
            }
        };
        if let Some(w) = self.cont.as_mut() {
            w.feed(&d);
        }
        self.inspect.feed(self.clock.now(), &d);
        let Some(held) = self.holding.as_mut() else {
            self.sent(d.len());
            self.rearm_watchdog();
            return Some(Poll::Ready(Some(Ok(Frame::data(d)))));
        };
        held.extend_from_slice(&d);
        let flush = self.inspect.may_flush();
        if let Some(err) = self.inspect.error().cloned().filter(|_| !flush) {
            // Failed before content after the hold committed: one error event.
            let end = AttemptEnd::in_stream(&err.error_type, err.body.as_bytes());
            let v = self
                .finish
                .as_ref()
                .map_or(Verdict::None, |f| f.classify(&end));
            let what = format!("error event before content: {}", err.error_type);
            self.holding = None;
            let ev = sse_error_event(self.kind, &err.message, err.is_overloaded());
            self.bytes += ev.len() as u64;
            self.complete(RequestOutcome::UpstreamError, &what, v);
            self.ended = true;
            return Some(Poll::Ready(Some(Ok(Frame::data(ev)))));
        }
        if !flush {
            return None;
        }
        if self.inspect.empty_before_content() {
            return Some(self.end_empty());
        }
        let out = self
            .holding
            .take()
            .map(BytesMut::freeze)
            .unwrap_or_default();
        self.sent(out.len());
        self.rearm_watchdog();
        Some(Poll::Ready(Some(Ok(Frame::data(out)))))
    }

    /// The upstream body ended cleanly: judge the stream.
    fn on_end(&mut self) -> Next {
        self.ended = true;
        if self.holding.is_some() && self.inspect.empty_before_content() {
            return self.end_empty();
        }
        if let Some(held) = self.holding.take() {
            // Ended while holding: a complete turn (an excused one, say) is relayed as is.
            if self.inspect.is_complete() {
                self.bytes += held.len() as u64;
                self.complete(RequestOutcome::Ok, "", Verdict::Success);
                return Poll::Ready(Some(Ok(Frame::data(held.freeze()))));
            }
        }
        match self.inspect.end() {
            None | Some((StreamEnd::Complete, _)) => {
                // Reasoning reached the client, then the turn ended with no answer: relayed as
                // it is, reported as an empty turn.
                let v = if self.inspect.empty_turn() {
                    self.empty_verdict()
                } else {
                    Verdict::Success
                };
                self.complete(RequestOutcome::Ok, "", v);
                Poll::Ready(None)
            }
            Some((StreamEnd::Failed, Some(err))) => {
                let end = AttemptEnd::in_stream(&err.error_type, err.body.as_bytes());
                let v = self
                    .finish
                    .as_ref()
                    .map_or(Verdict::None, |f| f.classify(&end));
                let what = format!(
                    "error event in the stream: {} {}",
                    err.error_type, err.message
                );
                self.complete(RequestOutcome::UpstreamError, &what, v);
                Poll::Ready(None)
            }
            Some((StreamEnd::Failed, None)) => {
                let end = AttemptEnd {
                    status: Some(500),
                    body: b"stream reported failure",
                    ..AttemptEnd::default()
                };
                let v = self
                    .finish
                    .as_ref()
                    .map_or(Verdict::None, |f| f.classify(&end));
                self.complete(
                    RequestOutcome::UpstreamError,
                    "the stream reported a failure",
                    v,
                );
                Poll::Ready(None)
            }
            Some((StreamEnd::Truncated, _)) => {
                let msg = "the upstream stream ended before its terminal event";
                if self.try_continue(Some(200), msg) {
                    self.ended = false;
                    return Poll::Pending;
                }
                let v = self.verdict_truncated(Some(200), msg);
                self.end_with_error(RequestOutcome::Truncated, msg, false, v)
            }
        }
    }

    fn verdict_truncated(&self, status: Option<u16>, msg: &str) -> Verdict {
        self.finish.as_ref().map_or(Verdict::None, |f| {
            f.classify(&AttemptEnd::truncated(status, msg))
        })
    }

    /// Polls the upstream until it has nothing ready.
    fn poll_upstream(&mut self, cx: &mut Context<'_>) -> Option<Next> {
        loop {
            match Pin::new(&mut self.upstream).poll_frame(cx) {
                Poll::Pending => return None,
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(d) => {
                        if let Some(out) = self.on_data(d) {
                            return Some(out);
                        }
                    }
                    Err(_trailers) => continue, // SSE carries no trailers worth relaying
                },
                Poll::Ready(Some(Err(e))) => {
                    let msg = format!("upstream stream broke: {e}");
                    if self.try_continue(None, &msg) {
                        return None;
                    }
                    let v = self.verdict_truncated(None, &msg);
                    return Some(self.end_with_error(RequestOutcome::Truncated, &msg, false, v));
                }
                Poll::Ready(None) => match self.on_end() {
                    Poll::Pending => return None,
                    out => return Some(out),
                },
            }
        }
    }

    /// Shutdown, the execution budget and the throughput watchdog.
    fn poll_limits(&mut self, cx: &mut Context<'_>) -> Option<Next> {
        if self.stop.as_mut().poll(cx).is_ready() {
            let msg = "sluice is shutting down; the stream was ended before it finished";
            return Some(self.end_with_error(RequestOutcome::Truncated, msg, true, Verdict::None));
        }
        if let Some(d) = self.deadline.as_mut()
            && d.as_mut().poll(cx).is_ready()
        {
            let msg = "RATE_LIMIT_EXECUTION_TIMEOUT: the request ran longer than [resilience.queue] execution_max_wait";
            return Some(self.end_with_error(RequestOutcome::Truncated, msg, false, Verdict::None));
        }
        if self.continuing.is_some() {
            // No text flows while a continuation is sent: the throughput watchdog waits.
            return None;
        }
        let (Some(t), Some(limits)) = (self.throughput.as_mut(), self.guards.throughput) else {
            return None;
        };
        if t.as_mut().poll(cx).is_pending() {
            return None;
        }
        let now = self.clock.now();
        t.as_mut().reset(now + throughput_tick(limits.2));
        let _ = t.as_mut().poll(cx);
        if self.inspect.slow(now, limits) {
            let msg = "the upstream stream fell below the minimum throughput";
            return Some(self.abort(EndKind::SlowThroughput, msg));
        }
        None
    }

    /// The upstream is silent: readiness and stall checks, then the heartbeat.
    fn poll_guards(&mut self, cx: &mut Context<'_>) -> Option<Next> {
        let now = self.clock.now();
        if self.continuing.is_none()
            && let Some(w) = self.watchdog.as_mut()
            && w.as_mut().poll(cx).is_ready()
        {
            if self.inspect.zombie(now, self.guards.readiness) {
                let msg = "the upstream stream sent no event within the readiness timeout";
                return Some(self.abort(EndKind::Zombie, msg));
            }
            if self.inspect.stalled(now, self.guards.stall) {
                let msg =
                    "the upstream stream stalled: no model output within the content-stall timeout";
                return Some(self.abort(EndKind::Stall, msg));
            }
            self.rearm_watchdog();
            if let Some(w) = self.watchdog.as_mut() {
                let _ = w.as_mut().poll(cx);
            }
        }
        if self.heartbeat.as_mut().poll(cx).is_pending() {
            return None;
        }
        self.heartbeat.as_mut().reset(now + self.guards.heartbeat);
        let _ = self.heartbeat.as_mut().poll(cx);
        if !self.at_boundary() {
            return None;
        }
        let ping = Bytes::from_static(heartbeat(self.kind));
        self.bytes += ping.len() as u64;
        Some(Poll::Ready(Some(Ok(Frame::data(ping)))))
    }
}

impl Body for RelayBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Next {
        let this = self.get_mut();
        if let Some(p) = this.pending.take() {
            this.sent(p.len());
            return Poll::Ready(Some(Ok(Frame::data(p))));
        }
        if this.ended {
            return Poll::Ready(None);
        }
        if let Some(out) = this.poll_limits(cx) {
            return out;
        }
        if this.continuing.is_none()
            && let Some(out) = this.poll_upstream(cx)
        {
            return out;
        }
        if let Some(out) = this.poll_continuation(cx) {
            return out;
        }
        this.poll_guards(cx).unwrap_or(Poll::Pending)
    }

    fn is_end_stream(&self) -> bool {
        self.ended && self.pending.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

impl Drop for RelayBody {
    fn drop(&mut self) {
        // The client went away before the body ended.
        self.complete(
            RequestOutcome::Cancelled,
            "client disconnected",
            Verdict::None,
        );
    }
}

/// Appends one attempt to the request's log (console details).
fn push_attempt(
    view: &mut RequestView,
    status: u16,
    c: &Classified,
    latency: std::time::Duration,
    reason: &str,
) {
    view.attempt_log.push(AttemptView {
        target: view.target.clone(),
        status,
        class: c.class,
        reason: reason.to_string(),
        latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
        ..Default::default()
    });
}
