//! `Clock`: the one source of time for the core, with `SystemClock` and the test `ManualClock`.
//!
//! Policy code never reads a clock; it receives `now`. The core stamps events with a `Clock`
//! so integration tests can move time with [`ManualClock::advance`] instead of sleeping.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Monotonic instant used everywhere in sluice; follows `tokio::time::pause` in tests.
pub type Instant = tokio::time::Instant;

/// Source of time for the core. Policy code never calls this; it receives `now`.
pub trait Clock: Send + Sync + 'static {
    /// Monotonic now, for in-memory deadlines.
    fn now(&self) -> Instant;
    /// Wall-clock now, only for values persisted to SQLite or shown as timestamps.
    fn wall(&self) -> SystemTime;
}

/// Milliseconds since the Unix epoch for `t` (0 for times before the epoch).
pub fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The real clock: `tokio::time::Instant::now()` and `SystemTime::now()`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    #[expect(
        clippy::disallowed_methods,
        reason = "the one place that reads real time"
    )]
    fn now(&self) -> Instant {
        Instant::now()
    }

    #[expect(
        clippy::disallowed_methods,
        reason = "the one place that reads real time"
    )]
    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that only moves when told to; shared by clones.
#[derive(Debug, Clone)]
pub struct ManualClock {
    base: Instant,
    base_wall: SystemTime,
    offset: Arc<Mutex<Duration>>,
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl ManualClock {
    /// A manual clock starting at the real current time.
    #[expect(
        clippy::disallowed_methods,
        reason = "the test clock anchors at real time once"
    )]
    pub fn new() -> Self {
        Self {
            base: Instant::now(),
            base_wall: SystemTime::now(),
            offset: Arc::new(Mutex::new(Duration::ZERO)),
        }
    }

    /// Moves both the monotonic and the wall clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let mut off = self.offset.lock().unwrap_or_else(|e| e.into_inner());
        *off = off.saturating_add(by);
    }

    fn offset(&self) -> Duration {
        *self.offset.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + self.offset()
    }

    fn wall(&self) -> SystemTime {
        self.base_wall + self.offset()
    }
}

/// `YYYY-MM-DD HH:MM:SS` (UTC) of a Unix-ms time; out-of-range times print as the raw number.
pub fn utc_text(unix_ms: u64) -> String {
    let secs = i64::try_from(unix_ms / 1000).unwrap_or(i64::MAX);
    match time::OffsetDateTime::from_unix_timestamp(secs) {
        Ok(t) => format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            t.year(),
            u8::from(t.month()),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        ),
        Err(_) => unix_ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_advances_both_clocks_together() {
        let c = ManualClock::new();
        let (t0, w0) = (c.now(), c.wall());
        c.advance(Duration::from_millis(1500));
        assert_eq!(c.now() - t0, Duration::from_millis(1500));
        assert_eq!(
            c.wall().duration_since(w0).unwrap(),
            Duration::from_millis(1500)
        );
        let clone = c.clone();
        clone.advance(Duration::from_secs(1));
        assert_eq!(c.now() - t0, Duration::from_millis(2500));
    }

    #[test]
    fn unix_ms_of_epoch_is_zero() {
        assert_eq!(unix_ms(UNIX_EPOCH), 0);
        assert_eq!(unix_ms(UNIX_EPOCH + Duration::from_millis(42)), 42);
    }
}
