//! `latency`: rolling time-to-first-byte and outcome samples per connection (and per
//! connection + model), and the `p2c` penalty they give (`[resilience] p2c_latency_weight`).
//!
//! A [`Rolling`] keeps the last [`MAX_SAMPLES`] (20) samples no older than [`MAX_AGE`]
//! (15 min). [`Rolling::summary`] gives their mean time to first byte and error count, or
//! `None` under [`MIN_SAMPLES`] (3) live samples. [`penalty`] turns two candidates' summaries
//! into up to `weight` penalty points for one of them: half from how much slower it is than
//! the faster of the two (twice as slow = the full half), half from its error rate. Pure:
//! `now` is passed in.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::Instant;

/// Samples kept per window (20).
pub const MAX_SAMPLES: usize = 20;

/// Samples older than this are ignored and dropped (15 min).
pub const MAX_AGE: Duration = Duration::from_secs(15 * 60);

/// A candidate needs this many live samples before it is penalised (3).
pub const MIN_SAMPLES: u32 = 3;

/// One attempt: when it was recorded, its time to first byte, and whether it succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sample {
    at: Instant,
    ttfb: Duration,
    ok: bool,
}

/// The rolling window of one connection (or connection + model).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rolling {
    samples: VecDeque<Sample>,
}

/// What a window says now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Mean time to first byte of the live samples, ms.
    pub mean_ttfb_ms: u64,
    /// Failed samples among them.
    pub errors: u32,
    /// Live samples (at least [`MIN_SAMPLES`]).
    pub samples: u32,
}

impl Summary {
    /// Failed share, 0.0–1.0.
    pub fn error_rate(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            f64::from(self.errors) / f64::from(self.samples)
        }
    }
}

impl Rolling {
    /// Records one attempt at `at` (time to first byte `ttfb`, `ok` = it succeeded), keeping
    /// the newest [`MAX_SAMPLES`] and dropping those older than [`MAX_AGE`].
    pub fn record(&mut self, at: Instant, ttfb: Duration, ok: bool) {
        self.samples.push_back(Sample { at, ttfb, ok });
        while self.samples.len() > MAX_SAMPLES {
            self.samples.pop_front();
        }
        self.expire(at);
    }

    /// Drops samples older than [`MAX_AGE`] at `now`.
    pub fn expire(&mut self, now: Instant) {
        while self
            .samples
            .front()
            .is_some_and(|s| now.saturating_duration_since(s.at) > MAX_AGE)
        {
            self.samples.pop_front();
        }
    }

    /// When the newest sample was recorded (`None` when empty).
    pub fn newest(&self) -> Option<Instant> {
        self.samples.back().map(|s| s.at)
    }

    /// The live samples' summary at `now`; `None` under [`MIN_SAMPLES`].
    pub fn summary(&self, now: Instant) -> Option<Summary> {
        let live = self
            .samples
            .iter()
            .filter(|s| now.saturating_duration_since(s.at) <= MAX_AGE);
        let (mut n, mut errors, mut total_ms) = (0u32, 0u32, 0u128);
        for s in live {
            n += 1;
            errors += u32::from(!s.ok);
            total_ms = total_ms.saturating_add(s.ttfb.as_millis());
        }
        if n < MIN_SAMPLES {
            return None;
        }
        Some(Summary {
            mean_ttfb_ms: u64::try_from(total_ms / u128::from(n)).unwrap_or(u64::MAX),
            errors,
            samples: n,
        })
    }
}

/// Penalty points (0.0–`weight`) for `mine` against the other candidate `other`: half of
/// `weight` scaled by how much slower `mine` is than the faster of the two (1× = 0, 2× or more
/// = the full half), plus half scaled by `mine`'s error rate. 0 unless both have a summary
/// (≥ [`MIN_SAMPLES`] samples) and `weight > 0`.
pub fn penalty(mine: Option<&Summary>, other: Option<&Summary>, weight: u32) -> f64 {
    let (Some(mine), Some(other)) = (mine, other) else {
        return 0.0;
    };
    if weight == 0 {
        return 0.0;
    }
    let half = f64::from(weight) / 2.0;
    // A 0 ms mean counts as 1 ms, so the ratio is always finite.
    let fastest = mine.mean_ttfb_ms.min(other.mean_ttfb_ms).max(1) as f64;
    let ratio = mine.mean_ttfb_ms.max(1) as f64 / fastest;
    let slow = (ratio - 1.0).clamp(0.0, 1.0);
    half * slow + half * mine.error_rate()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    fn filled(clock: &ManualClock, ms: u64, fails: usize, n: usize) -> Rolling {
        let mut r = Rolling::default();
        for i in 0..n {
            r.record(clock.now(), Duration::from_millis(ms), i >= fails);
        }
        r
    }

    #[test]
    fn summary_needs_three_live_samples_and_keeps_the_last_twenty() {
        let clock = ManualClock::new();
        assert_eq!(filled(&clock, 100, 0, 2).summary(clock.now()), None);
        let s = filled(&clock, 100, 1, 3).summary(clock.now()).unwrap();
        assert_eq!((s.mean_ttfb_ms, s.errors, s.samples), (100, 1, 3));
        let mut r = filled(&clock, 100, 0, 20);
        for _ in 0..5 {
            r.record(clock.now(), Duration::from_millis(400), false);
        }
        let s = r.summary(clock.now()).unwrap();
        assert_eq!(s.samples, 20, "capped at 20");
        assert_eq!(s.errors, 5);
        assert_eq!(s.mean_ttfb_ms, (15 * 100 + 5 * 400) / 20);
    }

    #[test]
    fn samples_older_than_fifteen_minutes_do_not_count() {
        let clock = ManualClock::new();
        let mut r = filled(&clock, 100, 0, 3);
        clock.advance(Duration::from_secs(10 * 60));
        r.record(clock.now(), Duration::from_millis(300), true);
        r.record(clock.now(), Duration::from_millis(300), true);
        assert_eq!(r.summary(clock.now()).unwrap().samples, 5);
        clock.advance(Duration::from_secs(5 * 60 + 1));
        assert_eq!(
            r.summary(clock.now()),
            None,
            "the first three are over 15 min old"
        );
        r.record(clock.now(), Duration::from_millis(300), true);
        let s = r.summary(clock.now()).unwrap();
        assert_eq!((s.samples, s.mean_ttfb_ms), (3, 300));
        assert_eq!(r.newest(), Some(clock.now()));
    }

    #[test]
    fn penalty_is_half_latency_half_errors_and_needs_both_summaries() {
        let s = |ms, errors, samples| Summary {
            mean_ttfb_ms: ms,
            errors,
            samples,
        };
        let fast = s(100, 0, 10);
        let slow = s(200, 0, 10);
        let slower = s(1_000, 0, 10);
        let failing = s(100, 5, 10);
        assert_eq!(penalty(Some(&slow), Some(&fast), 10), 5.0, "2x = full half");
        assert_eq!(penalty(Some(&slower), Some(&fast), 10), 5.0, "capped");
        assert_eq!(penalty(Some(&s(150, 0, 10)), Some(&fast), 10), 2.5);
        assert_eq!(
            penalty(Some(&fast), Some(&slow), 10),
            0.0,
            "the faster pays nothing"
        );
        assert_eq!(penalty(Some(&failing), Some(&fast), 10), 2.5, "50% errors");
        assert_eq!(
            penalty(Some(&s(200, 10, 10)), Some(&fast), 20),
            20.0,
            "at most weight"
        );
        assert_eq!(penalty(Some(&slow), None, 10), 0.0, "other unknown");
        assert_eq!(penalty(None, Some(&fast), 10), 0.0, "mine unknown");
        assert_eq!(penalty(Some(&slow), Some(&fast), 0), 0.0, "off");
        assert_eq!(
            penalty(Some(&s(0, 0, 3)), Some(&s(0, 0, 3)), 10),
            0.0,
            "0 ms is finite"
        );
    }
}
