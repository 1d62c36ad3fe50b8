//! `AutoCap`: the effective concurrency cap of a rate-limit-protected connection that has no
//! `max_concurrent` of its own (§4 caps, §5 auto-protection).
//!
//! The §5 queue only holds a request back when one of its gates is full, so protection on a
//! connection without a cap used to change nothing. Such a connection now gets an effective
//! cap that works exactly like `max_concurrent` (same gate, same FIFO queue, same codes):
//!
//! - **Default**: `[resilience.queue] protection_default_cap` (32) until the upstream says
//!   otherwise.
//! - **Learned from concurrency-limit 429s** ([`AutoCap::on_concurrency_limited`]): a 429 the
//!   classifier calls `concurrency_limited`, reported while `n` permits of the connection are
//!   in flight (the refused request's own permit included: it is still held when its outcome
//!   is reported), lowers the cap to `max(1, n − 1)`. The upstream refused the `n`-th request,
//!   so `n` does not fit; `n − 1` is the most that might. Keeping `n` would go on sending the
//!   very request that was refused. A burst of refusals converges on the number of requests
//!   the upstream kept running, because each later refusal sees fewer permits in flight. A
//!   429 never raises the cap (the new cap is the lower of the old one and `n − 1`).
//! - **Slow rise** ([`AutoCap::on_success`]): after [`RAISE_AFTER_SUCCESSES`] successes *and*
//!   [`RAISE_INTERVAL`] since the last change (a concurrency-limit 429 restarts both), the
//!   learned cap goes up by one; back at the default it is forgotten (source `default`).
//! - **Headroom**: no rise while the connection's requests window, as its last rate-limit
//!   headers reported it (`anthropic-ratelimit-requests-remaining`,
//!   `x-ratelimit-remaining-requests`), is live and has at most [`LOW_REQUESTS_HEADROOM`] of
//!   its limit left ([`requests_headroom_low`]): more parallelism would only spend a nearly
//!   empty window faster. Headers never lower the cap; that is the 429's job.
//!
//! An explicit `max_concurrent` always wins and is never learned over ([`effective_cap`]).
//! Learned caps live in memory only: a restart starts again from the default.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Instant;
use crate::policy::headroom::{Headroom, Window};

pub use crate::config::validate::{DEFAULT_PROTECTION_CAP, MAX_PROTECTION_CAP};

/// Successes since the last change before a learned cap may rise by one (20).
pub const RAISE_AFTER_SUCCESSES: u32 = 20;

/// Time since the last change before a learned cap may rise by one (60 s).
pub const RAISE_INTERVAL: Duration = Duration::from_secs(60);

/// A requests window with at most this fraction left holds a learned cap where it is (0.2).
pub const LOW_REQUESTS_HEADROOM: f64 = 0.2;

/// Where a gate's effective cap comes from (`cap_source` in `GET /api/queues`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapSource {
    /// `max_concurrent` or a `model_concurrency` entry.
    #[default]
    Config,
    /// Learned from concurrency-limit 429s ([`AutoCap::on_concurrency_limited`]).
    Learned,
    /// `protection_default_cap`.
    Default,
}

impl CapSource {
    /// `config`, `learned` or `default`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::Learned => "learned",
            Self::Default => "default",
        }
    }
}

/// A cap learned from a concurrency-limit 429.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Learned {
    cap: u32,
    /// Successes since `since`.
    successes: u32,
    /// The last change (a 429 or a rise).
    since: Instant,
}

/// The effective cap of one protected connection without `max_concurrent`: the default, or a
/// cap learned from concurrency-limit 429s (rules in the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoCap {
    default_cap: u32,
    learned: Option<Learned>,
}

// === impl AutoCap ===

impl AutoCap {
    /// At `default_cap` (raised to 1), nothing learned.
    pub fn new(default_cap: u32) -> Self {
        Self {
            default_cap: default_cap.max(1),
            learned: None,
        }
    }

    /// The cap in force: the learned one, never above the default.
    pub fn cap(&self) -> u32 {
        self.learned
            .map_or(self.default_cap, |l| l.cap.min(self.default_cap))
    }

    /// `learned` while a learned cap is in force, else `default`.
    pub fn source(&self) -> CapSource {
        if self.learned.is_some() {
            CapSource::Learned
        } else {
            CapSource::Default
        }
    }

    /// A new default (config reload): a learned cap at or above it is forgotten.
    pub fn set_default(&mut self, default_cap: u32) {
        self.default_cap = default_cap.max(1);
        if self.learned.is_some_and(|l| l.cap >= self.default_cap) {
            self.learned = None;
        }
    }

    /// A concurrency-limit 429 reported at `now` with `in_flight` permits of the connection
    /// held (the refused request's included). Lowers the cap to `max(1, in_flight − 1)` when
    /// that is lower, and restarts the rise count either way. True when the cap changed.
    pub fn on_concurrency_limited(&mut self, in_flight: u32, now: Instant) -> bool {
        let before = self.cap();
        let target = in_flight.saturating_sub(1).max(1);
        if self.learned.is_none() && target >= before {
            return false;
        }
        self.learned = Some(Learned {
            cap: before.min(target),
            successes: 0,
            since: now,
        });
        self.cap() != before
    }

    /// A success reported at `now`; `headroom_low` from [`requests_headroom_low`]. Raises a
    /// learned cap by one after [`RAISE_AFTER_SUCCESSES`] successes and [`RAISE_INTERVAL`]
    /// since the last change, unless the headroom is low; a cap back at the default is
    /// forgotten. True when the cap rose.
    pub fn on_success(&mut self, headroom_low: bool, now: Instant) -> bool {
        let default_cap = self.default_cap;
        let Some(l) = self.learned.as_mut() else {
            return false;
        };
        l.successes = l.successes.saturating_add(1);
        let due = l.successes >= RAISE_AFTER_SUCCESSES
            && now.saturating_duration_since(l.since) >= RAISE_INTERVAL;
        if !due || headroom_low {
            return false;
        }
        l.cap = l.cap.saturating_add(1);
        l.successes = 0;
        l.since = now;
        if l.cap >= default_cap {
            self.learned = None;
        }
        true
    }
}

/// The cap a connection gate enforces and its source: an explicit `max_concurrent` wins;
/// else a protected connection's [`AutoCap`]; else none (unlimited, no gate).
pub fn effective_cap(explicit: Option<u32>, auto: Option<&AutoCap>) -> Option<(u32, CapSource)> {
    match (explicit, auto) {
        (Some(cap), _) => Some((cap, CapSource::Config)),
        (None, Some(a)) => Some((a.cap(), a.source())),
        (None, None) => None,
    }
}

/// True when any live requests window of `h` (connection-wide or of any model) has at most
/// [`LOW_REQUESTS_HEADROOM`] of its limit left at `now_unix_ms` (a `rejected` status counts
/// as none left). Stale windows and windows without a number are ignored.
pub fn requests_headroom_low(h: &Headroom, now_unix_ms: u64) -> bool {
    std::iter::once(&h.connection)
        .chain(h.models.values())
        .filter_map(|windows| windows.get(&Window::Requests))
        .filter(|w| !w.is_stale(now_unix_ms))
        .filter_map(|w| w.effective_remaining())
        .any(|left| left <= LOW_REQUESTS_HEADROOM)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::policy::headroom::WindowState;

    fn t0() -> Instant {
        ManualClock::new().now()
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    /// `n` successes at `at`; true when any of them raised the cap.
    fn succeed(a: &mut AutoCap, n: u32, low: bool, at: Instant) -> bool {
        (0..n).fold(false, |raised, _| a.on_success(low, at) || raised)
    }

    #[test]
    fn starts_at_the_default_and_an_explicit_cap_wins() {
        let a = AutoCap::new(8);
        assert_eq!((a.cap(), a.source()), (8, CapSource::Default));
        assert_eq!(effective_cap(None, Some(&a)), Some((8, CapSource::Default)));
        assert_eq!(
            effective_cap(Some(3), Some(&a)),
            Some((3, CapSource::Config))
        );
        assert_eq!(effective_cap(Some(3), None), Some((3, CapSource::Config)));
        assert_eq!(effective_cap(None, None), None, "unprotected: no cap");
        assert_eq!(AutoCap::new(0).cap(), 1, "a default of 0 is raised to 1");
    }

    #[test]
    fn a_concurrency_limit_with_n_in_flight_caps_at_n_minus_one() {
        // (in flight when the 429 was reported, learned cap)
        for (n, want) in [(4, 3), (8, 7), (2, 1), (1, 1), (0, 1)] {
            let mut a = AutoCap::new(8);
            assert!(a.on_concurrency_limited(n, t0()), "n = {n}");
            assert_eq!((a.cap(), a.source()), (want, CapSource::Learned), "n = {n}");
        }
    }

    #[test]
    fn a_429_never_raises_and_a_burst_converges_on_what_the_upstream_kept() {
        let t = t0();
        let mut a = AutoCap::new(8);
        // 8 sent at once, the upstream keeps 3: the 5 refusals come back one by one while
        // the 3 still run, so they are reported with 8, 7, 6, 5, 4 permits in flight.
        for n in (4..=8).rev() {
            a.on_concurrency_limited(n, t);
        }
        assert_eq!(a.cap(), 3);
        // A later refusal seen with more in flight (impossible under the cap, but an old
        // attempt may report late) does not raise it.
        assert!(!a.on_concurrency_limited(6, t));
        assert_eq!((a.cap(), a.source()), (3, CapSource::Learned));
        // At the default with nothing learned, a 429 that would not lower it changes nothing.
        let mut b = AutoCap::new(2);
        assert!(!b.on_concurrency_limited(3, t));
        assert_eq!((b.cap(), b.source()), (2, CapSource::Default));
    }

    #[test]
    fn a_learned_cap_rises_by_one_after_enough_successes_and_time() {
        let t = t0();
        let mut a = AutoCap::new(4);
        a.on_concurrency_limited(3, t); // cap 2
        assert_eq!(a.cap(), 2);
        // Enough successes, not enough time.
        assert!(!succeed(&mut a, RAISE_AFTER_SUCCESSES, false, t + secs(59)));
        // Enough time, the count already reached: the next success raises.
        assert!(a.on_success(false, t + RAISE_INTERVAL));
        assert_eq!((a.cap(), a.source()), (3, CapSource::Learned));
        // The rise restarted both: time alone is not enough.
        let t1 = t + RAISE_INTERVAL;
        assert!(!succeed(
            &mut a,
            RAISE_AFTER_SUCCESSES - 1,
            false,
            t1 + secs(600)
        ));
        assert!(a.on_success(false, t1 + secs(600)));
        assert_eq!(
            (a.cap(), a.source()),
            (4, CapSource::Default),
            "back at the default it is forgotten"
        );
        assert!(!succeed(&mut a, 100, false, t1 + secs(6000)), "never above");
        assert_eq!(a.cap(), 4);
    }

    #[test]
    fn a_429_restarts_the_rise_and_low_headroom_holds_it() {
        let t = t0();
        let mut a = AutoCap::new(8);
        a.on_concurrency_limited(5, t); // 4
        succeed(&mut a, RAISE_AFTER_SUCCESSES - 1, false, t + secs(30));
        a.on_concurrency_limited(6, t + secs(61)); // confirms, does not raise
        assert_eq!(a.cap(), 4);
        assert!(
            !a.on_success(false, t + secs(62)),
            "count restarted by the 429"
        );
        // Due, but the requests window is nearly empty: held until it is not.
        let t2 = t + secs(61) + RAISE_INTERVAL;
        assert!(!succeed(&mut a, RAISE_AFTER_SUCCESSES, true, t2));
        assert_eq!(a.cap(), 4);
        assert!(a.on_success(false, t2));
        assert_eq!(a.cap(), 5);
    }

    #[test]
    fn a_new_default_clamps_or_forgets_the_learned_cap() {
        let t = t0();
        let mut a = AutoCap::new(8);
        a.on_concurrency_limited(6, t); // 5
        a.set_default(10);
        assert_eq!((a.cap(), a.source()), (5, CapSource::Learned));
        a.set_default(4);
        assert_eq!((a.cap(), a.source()), (4, CapSource::Default));
        assert!(
            !a.on_success(false, t + secs(3600)),
            "nothing learned to raise"
        );
    }

    #[test]
    fn requests_headroom_is_low_at_a_fifth_left_and_ignores_other_and_stale_windows() {
        let now = 1_000_000;
        let window = |remaining: f64, reset_at_ms: u64| WindowState {
            remaining: Some(remaining),
            reset_at_ms: Some(reset_at_ms),
            observed_at_ms: now - 1,
            ..WindowState::default()
        };
        let mut h = Headroom::default();
        assert!(!requests_headroom_low(&h, now), "nothing reported");
        h.connection
            .insert(Window::Tokens, window(0.0, now + 60_000));
        assert!(!requests_headroom_low(&h, now), "tokens are not requests");
        h.models
            .entry("m".into())
            .or_default()
            .insert(Window::Requests, window(0.5, now + 60_000));
        assert!(!requests_headroom_low(&h, now));
        h.models
            .entry("n".into())
            .or_default()
            .insert(Window::Requests, window(0.2, now + 60_000));
        assert!(requests_headroom_low(&h, now), "a fifth left is low");
        assert!(
            !requests_headroom_low(&h, now + 60_000),
            "past its reset the window is stale"
        );
    }
}
