//! The §6 stream guards' state for one attempt: [`Guards`] (the durations in force) and
//! [`Inspect`] (framer + tracker over a copy of the relayed bytes). Shared by the pre-commit
//! hold and the relay; no I/O, time comes in as `now`.

use std::time::Duration;

use crate::clock::Instant;
use crate::config::StreamSettings;
use crate::proxy::sse::{Readiness, StreamEnd, StreamError, StreamKind, StreamTracker};
use crate::wire::sse::SseFramer;

/// Stream-guard durations, from `[resilience.stream]` (with operator overrides).
#[derive(Debug, Clone, Copy)]
pub struct Guards {
    /// A stream with no useful event this long after its head is a zombie. Default 30s.
    pub readiness: Duration,
    /// Keep-alive interval while nothing reaches the client. Default 15s.
    pub heartbeat: Duration,
    /// No model progress this long (from the head, restarted by progress) abandons the
    /// stream. Default 180s.
    pub stall: Duration,
    /// Opt-in throughput watchdog: `(min_bytes_per_sec, warmup, window)`.
    pub throughput: Option<(u32, Duration, Duration)>,
}

impl Guards {
    /// The guards of `st`.
    pub fn from_settings(st: &StreamSettings) -> Self {
        Self {
            readiness: st.readiness_timeout,
            heartbeat: st.heartbeat_interval,
            stall: st.content_stall_timeout,
            throughput: st.throughput_watchdog.enabled.then_some((
                st.throughput_watchdog.min_bytes_per_sec,
                st.throughput_watchdog.warmup,
                st.throughput_watchdog.window,
            )),
        }
    }
}

/// How often the throughput watchdog looks: a quarter of its window, 50 ms to 1 s.
pub fn throughput_tick(window: Duration) -> Duration {
    (window / 4).clamp(Duration::from_millis(50), Duration::from_secs(1))
}

/// Incremental SSE inspection of one attempt's stream.
pub struct Inspect {
    framer: SseFramer,
    tracker: StreamTracker,
    /// The framer gave up (oversized event): keep relaying, stop judging.
    blind: bool,
    started: Instant,
    /// Token counts from the events' `usage` objects (for the request log).
    usage: crate::proxy::usage::Usage,
}

impl Inspect {
    /// A fresh inspector for a stream of `kind` whose head arrived at `started`.
    pub fn new(kind: StreamKind, started: Instant) -> Self {
        Self {
            framer: SseFramer::new(),
            tracker: StreamTracker::new(kind, started),
            blind: false,
            started,
            usage: Default::default(),
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
            self.usage.observe(ev.data.as_bytes());
        }
    }

    /// Tokens in/out the stream's events reported so far.
    pub fn usage(&self) -> crate::proxy::usage::Usage {
        self.usage
    }

    /// Content (or a complete, empty turn) arrived: the hold may end. A blind inspector
    /// releases the hold too.
    pub fn may_flush(&self) -> bool {
        self.blind || self.tracker.seen_content() || self.tracker.is_complete()
    }

    /// The turn is complete (terminal marker seen).
    pub fn is_complete(&self) -> bool {
        self.tracker.is_complete()
    }

    /// The turn ended empty: no text and no tool call, only reasoning or nothing
    /// (`proxy::turn`); never for a blind inspector.
    pub fn empty_turn(&self) -> bool {
        !self.blind && self.tracker.empty_turn()
    }

    /// The turn ended empty before any content-bearing event, so nothing of it needs to
    /// reach the client: the attempt failed and (in the hold) the next target can be tried.
    /// A turn whose reasoning was content-bearing is relayed, and only reported empty.
    pub fn empty_before_content(&self) -> bool {
        self.empty_turn() && !self.tracker.seen_content()
    }

    /// The in-stream error seen, if any.
    pub fn error(&self) -> Option<&StreamError> {
        if self.blind {
            None
        } else {
            self.tracker.error()
        }
    }

    /// How the stream ended, with its error event; `None` when blind (not judged).
    pub fn end(&self) -> Option<(StreamEnd, Option<StreamError>)> {
        (!self.blind).then(|| (self.tracker.end(), self.tracker.error().cloned()))
    }

    /// Readiness at `now` (a blind inspector is ready).
    pub fn readiness(&self, now: Instant, readiness: Duration) -> Readiness {
        if self.blind {
            Readiness::Ready
        } else {
            self.tracker.readiness(now, readiness)
        }
    }

    /// A zombie: no useful event within `readiness` of the head.
    pub fn zombie(&self, now: Instant, readiness: Duration) -> bool {
        self.readiness(now, readiness) == Readiness::Zombie
    }

    /// No model progress within `stall`.
    pub fn stalled(&self, now: Instant, stall: Duration) -> bool {
        !self.blind && self.tracker.stalled(now, stall)
    }

    /// Text throughput below `min` bytes/s over `window` after `warmup`.
    pub fn slow(&mut self, now: Instant, (min, warmup, window): (u32, Duration, Duration)) -> bool {
        !self.blind && self.tracker.throughput_below(now, min, warmup, window)
    }

    /// The last byte fed ended an event (a heartbeat or error event may follow).
    pub fn at_boundary(&self) -> bool {
        self.blind || self.framer.at_boundary()
    }

    /// When the head arrived.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// When the next guard check is due: readiness before any useful event, else the stall
    /// deadline; `None` when blind.
    pub fn next_check(&self, g: &Guards) -> Option<Instant> {
        if self.blind {
            return None;
        }
        // The content-stall budget runs from the head and restarts on model progress (text,
        // tool input, thinking, signatures); keepalives do not restart it.
        let stall_at = self.tracker.last_progress() + g.stall + Duration::from_millis(1);
        if self.tracker.readiness(self.started, g.readiness) == Readiness::Waiting
            && !self.tracker.seen_content()
        {
            return Some((self.started + g.readiness + Duration::from_millis(1)).min(stall_at));
        }
        Some(stall_at)
    }
}
