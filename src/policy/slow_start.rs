//! Slow start after recovery: a provider whose breaker just closed, or a connection whose
//! cooldown just ended, takes a growing share of the traffic it is offered instead of all of
//! it at once.
//!
//! The share rises linearly from [`FLOOR`] (10 %) at the ramp's start to 1.0 at the end of
//! its window and stays 1.0 after. Admission draws a uniform number in `[0, 1)` (passed in,
//! so tests are deterministic) and admits when the draw falls under the share. Plain data
//! and functions of `now`; the core keeps the ramp starts and reads the window from the
//! provider's `slow_start` key.

use std::time::Duration;

use crate::clock::Instant;

/// The share a ramp starts at: 10 % of the traffic offered.
pub const FLOOR: f64 = 0.10;

/// One ramp: it began at `started_at` and lasts `window` (zero = no ramp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowStart {
    /// When the provider or connection recovered.
    pub started_at: Instant,
    /// How long the share takes to reach 100 % (the provider's `slow_start`).
    pub window: Duration,
}

impl SlowStart {
    /// The share of offered traffic to admit at `now`, in `[FLOOR, 1.0]`: `FLOOR` at the
    /// start (and before it), 1.0 once `window` has passed or when `window` is zero.
    pub fn share(&self, now: Instant) -> f64 {
        if self.window.is_zero() {
            return 1.0;
        }
        let elapsed = now.saturating_duration_since(self.started_at);
        if elapsed >= self.window {
            return 1.0;
        }
        let progress = elapsed.as_secs_f64() / self.window.as_secs_f64();
        (FLOOR + (1.0 - FLOOR) * progress).clamp(FLOOR, 1.0)
    }

    /// Whether the ramp is still running at `now` (its share is under 1.0).
    pub fn is_ramping(&self, now: Instant) -> bool {
        self.share(now) < 1.0
    }

    /// The share at `now` as a whole percentage for the console (`ramping 40 %`), or `None`
    /// when the ramp is over.
    pub fn percent(&self, now: Instant) -> Option<u8> {
        let s = self.share(now);
        (s < 1.0).then(|| as_percent(s))
    }
}

/// A share as a whole percentage, rounded down and clamped to 0–100 (`0.405` → 40).
pub fn as_percent(share: f64) -> u8 {
    // Clamped to [0, 100] first, so the cast cannot truncate.
    (share * 100.0).floor().clamp(0.0, 100.0) as u8
}

/// Admit when `draw` (uniform in `[0, 1)`) falls under `share`; a share of 1.0 or more
/// always admits, a share of 0 or less never does.
pub fn admit(share: f64, draw: f64) -> bool {
    share >= 1.0 || draw < share
}

/// A uniform draw in `[0, 1)` from 64 random bits (their top 53, a double's precision).
pub fn unit_draw(bits: u64) -> f64 {
    const SCALE: f64 = 1.0 / (1u64 << 53) as f64;
    (bits >> 11) as f64 * SCALE
}

/// The lower of two optional shares (`None` = not ramping, full share).
pub fn combined(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn ramp(clock: &ManualClock, window_s: u64) -> SlowStart {
        SlowStart {
            started_at: clock.now(),
            window: Duration::from_secs(window_s),
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn share_rises_linearly_from_ten_percent_to_full_over_the_window() {
        let clock = ManualClock::new();
        let r = ramp(&clock, 40);
        assert!(close(r.share(clock.now()), 0.10), "at the start");
        clock.advance(Duration::from_secs(10));
        assert!(close(r.share(clock.now()), 0.325), "at 25 %");
        clock.advance(Duration::from_secs(10));
        assert!(close(r.share(clock.now()), 0.55), "at 50 %");
        assert_eq!(r.percent(clock.now()), Some(55));
        assert!(r.is_ramping(clock.now()));
        clock.advance(Duration::from_secs(20));
        assert!(close(r.share(clock.now()), 1.0), "at 100 %");
        assert_eq!(r.percent(clock.now()), None);
        assert!(!r.is_ramping(clock.now()));
        clock.advance(Duration::from_secs(3600));
        assert!(close(r.share(clock.now()), 1.0), "after the window");
    }

    #[test]
    fn a_zero_window_is_no_ramp() {
        let clock = ManualClock::new();
        let r = ramp(&clock, 0);
        assert!(close(r.share(clock.now()), 1.0));
        assert_eq!(r.percent(clock.now()), None);
    }

    #[test]
    fn extreme_windows_and_instants_do_not_overflow() {
        let clock = ManualClock::new();
        let start = clock.now();
        clock.advance(Duration::from_secs(5));
        let later = SlowStart {
            started_at: clock.now(),
            window: Duration::MAX,
        };
        assert!(close(later.share(start), FLOOR), "now before the start");
        assert!(
            close(later.share(clock.now()), FLOOR),
            "a huge window barely moves"
        );
        let short = SlowStart {
            started_at: start,
            window: Duration::from_nanos(1),
        };
        assert!(close(short.share(clock.now()), 1.0));
    }

    #[test]
    fn admit_compares_the_draw_with_the_share() {
        assert!(admit(0.4, 0.0));
        assert!(admit(0.4, 0.399));
        assert!(!admit(0.4, 0.4));
        assert!(!admit(0.1, 0.9));
        assert!(admit(1.0, 0.999_999));
        assert!(!admit(0.0, 0.0));
    }

    #[test]
    fn unit_draw_stays_in_the_half_open_interval() {
        assert!(close(unit_draw(0), 0.0));
        let top = unit_draw(u64::MAX);
        assert!(top < 1.0 && top > 0.999_999, "{top}");
        assert!(close(unit_draw(1 << 63), 0.5));
    }

    #[test]
    fn as_percent_rounds_down_and_clamps() {
        assert_eq!(as_percent(0.405), 40);
        assert_eq!(as_percent(0.1), 10);
        assert_eq!(as_percent(7.0), 100);
        assert_eq!(as_percent(-1.0), 0);
        assert_eq!(as_percent(f64::NAN), 0);
    }

    #[test]
    fn combined_takes_the_lower_share() {
        assert_eq!(combined(None, None), None);
        assert_eq!(combined(Some(0.3), None), Some(0.3));
        assert_eq!(combined(None, Some(0.2)), Some(0.2));
        assert_eq!(combined(Some(0.3), Some(0.2)), Some(0.2));
    }
}
