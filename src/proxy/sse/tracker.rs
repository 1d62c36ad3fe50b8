//! Per-attempt stream state for the §6 guards: completion, content, stall, readiness and the
//! opt-in throughput watchdog. Pure: every time-dependent question takes `now`.
//!
//! Timing comparisons are strict (`>`): a budget of 180 s is exceeded only after more than
//! 180 s, so an event arriving exactly at the deadline still counts.

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;

use crate::clock::Instant;
use crate::proxy::sse::classify::{
    Activity, BlockEdge, EventClass, StreamError, StreamKind, Terminal, classify_event, heartbeat,
};
use crate::wire::dialect::sse_error_event;
use crate::wire::sse::{Event, Trailing};

/// Readiness of an attempt (§6 "Readiness").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// A useful event (anything but keepalives and blank lines) arrived.
    Ready,
    /// Nothing useful yet, still within `readiness_timeout`.
    Waiting,
    /// Nothing useful within `readiness_timeout`: a zombie 200.
    Zombie,
}

/// How a stream ended, once its body is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// A terminal marker arrived (or an Anthropic `message_delta` with `stop_reason` and no
    /// open block) and no error event.
    Complete,
    /// An error event arrived (`event: error`, OpenAI error chunk, `response.failed`).
    Failed,
    /// The body ended without a terminal marker: a failed attempt (§0).
    Truncated,
}

/// Tracks one attempt's stream. Feed every framed event with [`observe`](Self::observe).
#[derive(Debug, Clone)]
pub struct StreamTracker {
    kind: StreamKind,
    started: Instant,
    open_blocks: Vec<u64>,
    stop_reason: bool,
    terminal: Option<Terminal>,
    error: Option<StreamError>,
    first_content: Option<Instant>,
    first_useful: Option<Instant>,
    last_progress: Instant,
    keepalive_progress: bool,
    throughput: Throughput,
    /// Part of the answer arrived (text, a tool call, …; not reasoning).
    answer: bool,
    /// A stop reason explained a turn without an answer.
    excused: bool,
}

impl StreamTracker {
    /// A tracker for an attempt of `kind` whose response started at `started`.
    pub fn new(kind: StreamKind, started: Instant) -> Self {
        Self {
            kind,
            started,
            open_blocks: Vec::new(),
            stop_reason: false,
            terminal: None,
            error: None,
            first_content: None,
            first_useful: None,
            last_progress: started,
            keepalive_progress: false,
            throughput: Throughput::default(),
            answer: false,
            excused: false,
        }
    }

    /// Opt-in: let keepalives restart the content-stall budget too. §6 says they do not (the
    /// default, `false`); a provider may need it as a per-provider opt-in.
    pub fn keepalive_restarts_stall(mut self, on: bool) -> Self {
        self.keepalive_progress = on;
        self
    }

    /// The stream kind.
    pub fn kind(&self) -> StreamKind {
        self.kind
    }

    /// Classifies `ev`, records it at `now`, and returns its class.
    pub fn observe(&mut self, now: Instant, ev: &Event) -> EventClass {
        let c = classify_event(self.kind, ev);
        self.observe_class(now, &c);
        c
    }

    /// Records an already classified event at `now`.
    pub fn observe_class(&mut self, now: Instant, c: &EventClass) {
        match c.block {
            Some(BlockEdge::Start(i)) if !self.open_blocks.contains(&i) => {
                self.open_blocks.push(i);
            }
            Some(BlockEdge::Stop(i)) => self.open_blocks.retain(|&b| b != i),
            _ => {}
        }
        self.answer |= c.answer;
        self.excused |= c.excused_stop;
        if c.content_bearing && self.first_content.is_none() {
            self.first_content = Some(now);
        }
        if c.is_useful() && self.first_useful.is_none() {
            self.first_useful = Some(now);
        }
        if c.progress || (self.keepalive_progress && c.is_keepalive()) {
            self.last_progress = self.last_progress.max(now);
        }
        match c.terminal {
            Some(Terminal::StopReason) => self.stop_reason = true,
            Some(t) if self.terminal.is_none() => self.terminal = Some(t),
            _ => {}
        }
        if let Some(e) = &c.error
            && self.error.is_none()
        {
            self.error = Some(e.clone());
        }
        self.throughput.observe(now, c);
    }

    /// Records the events [`SseFramer::finish`](crate::wire::sse::SseFramer::finish) returned, at `now`.
    pub fn observe_trailing(&mut self, now: Instant, trailing: &Trailing) {
        for ev in &trailing.events {
            self.observe(now, ev);
        }
    }

    /// The terminal marker seen, if any: the first of `message_stop` / `[DONE]` /
    /// `response.*`, else an Anthropic `message_delta` with `stop_reason` once no block is
    /// open.
    pub fn terminal(&self) -> Option<Terminal> {
        self.terminal.or_else(|| {
            (self.stop_reason && self.open_blocks.is_empty()).then_some(Terminal::StopReason)
        })
    }

    /// Whether the stream may end here without being truncated (§6 "Truncation"). A
    /// `response.failed` counts (it is a terminal marker); see [`error`](Self::error).
    pub fn is_complete(&self) -> bool {
        self.terminal().is_some()
    }

    /// The first error event seen, if any.
    pub fn error(&self) -> Option<&StreamError> {
        self.error.as_ref()
    }

    /// The verdict for a body that ended here: an error wins, then completion.
    pub fn end(&self) -> StreamEnd {
        if self.error.is_some() {
            StreamEnd::Failed
        } else if self.is_complete() {
            StreamEnd::Complete
        } else {
            StreamEnd::Truncated
        }
    }

    /// An empty turn (`proxy::turn`): the stream is complete, reported no error, carried no
    /// answer (nothing, or only reasoning) and no stop reason that explains that.
    pub fn empty_turn(&self) -> bool {
        self.is_complete() && self.error.is_none() && !self.answer && !self.excused
    }

    /// Whether a content-bearing event arrived (the pre-content hold is over).
    pub fn seen_content(&self) -> bool {
        self.first_content.is_some()
    }

    /// When the first content-bearing event arrived.
    pub fn first_content_at(&self) -> Option<Instant> {
        self.first_content
    }

    /// Anthropic blocks currently open.
    pub fn open_blocks(&self) -> &[u64] {
        &self.open_blocks
    }

    /// The last instant that restarted the stall budget (the start, before any progress).
    pub fn last_progress(&self) -> Instant {
        self.last_progress
    }

    /// §6 content stall: more than `timeout` since the last progress (or the start). A
    /// stream that already ended (terminal marker or error) never stalls.
    pub fn stalled(&self, now: Instant, timeout: Duration) -> bool {
        if self.is_complete() || self.error.is_some() {
            return false;
        }
        now.saturating_duration_since(self.last_progress) > timeout
    }

    /// §6 readiness: a zombie is a stream with no useful event more than `timeout` after the
    /// start.
    pub fn readiness(&self, now: Instant, timeout: Duration) -> Readiness {
        if self.first_useful.is_some() {
            Readiness::Ready
        } else if now.saturating_duration_since(self.started) > timeout {
            Readiness::Zombie
        } else {
            Readiness::Waiting
        }
    }

    /// The opt-in throughput watchdog fed by this tracker.
    pub fn throughput(&self) -> &Throughput {
        &self.throughput
    }

    /// Whether text throughput is below `min_bytes_per_sec` (see [`Throughput::below`]).
    pub fn throughput_below(
        &mut self,
        now: Instant,
        min_bytes_per_sec: u32,
        warmup: Duration,
        window: Duration,
    ) -> bool {
        self.throughput
            .below(now, min_bytes_per_sec, warmup, window)
    }

    /// The well-formed terminal error event for this stream kind (via
    /// [`sse_error_event`]): Anthropic `event: error` (`api_error`, or `overloaded_error`),
    /// OpenAI chat `data: {"error":…}` then `data: [DONE]`, Responses `response.failed`.
    pub fn error_event(&self, message: &str, overloaded: bool) -> Bytes {
        sse_error_event(self.kind, message, overloaded)
    }

    /// The heartbeat frame for this stream kind.
    pub fn heartbeat(&self) -> &'static [u8] {
        heartbeat(self.kind)
    }
}

/// Most samples kept when [`Throughput::below`] is never asked (bounded memory).
const MAX_SAMPLES: usize = 16_384;

/// §6 throughput watchdog: UTF-8 bytes of text deltas over a rolling window of *active* time.
///
/// The clock starts at the first text byte (time to first token is the readiness and stall
/// guards' business). Time while a tool call or reasoning is in progress (the last
/// [`Activity`] seen was `ToolCall` or `Reasoning`) does not count, and no verdict is given
/// while paused. Usage-only and empty events add nothing.
#[derive(Debug, Clone, Default)]
pub struct Throughput {
    origin: Option<Instant>,
    paused_since: Option<Instant>,
    paused_total: Duration,
    /// (active time, bytes), oldest first.
    samples: VecDeque<(Duration, usize)>,
    retain: Option<Duration>,
}

impl Throughput {
    /// Records an event's activity and text bytes at `now`.
    pub fn observe(&mut self, now: Instant, c: &EventClass) {
        match c.activity {
            Activity::ToolCall | Activity::Reasoning => {
                if self.paused_since.is_none() {
                    self.paused_since = Some(now);
                }
            }
            Activity::Text => self.resume(now),
            Activity::None => {}
        }
        if c.text_bytes == 0 {
            return;
        }
        // Text bytes mean text is flowing, whatever the event's activity says.
        self.resume(now);
        if self.origin.is_none() {
            self.origin = Some(now);
        }
        let at = self.active(now);
        match self.samples.back_mut() {
            Some((t, b)) if *t == at => *b += c.text_bytes,
            _ => self.samples.push_back((at, c.text_bytes)),
        }
        if let Some(w) = self.retain {
            self.prune(at.saturating_sub(w));
        }
        while self.samples.len() > MAX_SAMPLES {
            self.samples.pop_front();
        }
    }

    fn resume(&mut self, now: Instant) {
        if let Some(p) = self.paused_since.take()
            && let Some(o) = self.origin
        {
            self.paused_total += now.saturating_duration_since(p.max(o));
        }
    }

    /// Active (unpaused) time since the first text byte.
    fn active(&self, now: Instant) -> Duration {
        let Some(o) = self.origin else {
            return Duration::ZERO;
        };
        let mut paused = self.paused_total;
        if let Some(p) = self.paused_since {
            paused += now.saturating_duration_since(p.max(o));
        }
        now.saturating_duration_since(o).saturating_sub(paused)
    }

    fn prune(&mut self, lo: Duration) {
        while self.samples.front().is_some_and(|&(t, _)| t <= lo) {
            self.samples.pop_front();
        }
    }

    /// Whether text arrived at fewer than `min_bytes_per_sec` over the last full `window` of
    /// active time. `false` before any text, while paused, and until `warmup + window` of
    /// active time has passed (a verdict needs a full window after the warm-up).
    pub fn below(
        &mut self,
        now: Instant,
        min_bytes_per_sec: u32,
        warmup: Duration,
        window: Duration,
    ) -> bool {
        self.retain = Some(window);
        if self.origin.is_none() || self.paused_since.is_some() || window.is_zero() {
            return false;
        }
        let active = self.active(now);
        if active < warmup.saturating_add(window) {
            return false;
        }
        self.prune(active.saturating_sub(window));
        let bytes: u128 = self.samples.iter().map(|&(_, b)| b as u128).sum();
        bytes * 1000 < u128::from(min_bytes_per_sec) * window.as_millis()
    }
}
