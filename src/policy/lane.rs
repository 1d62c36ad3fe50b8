//! The Anthropic subscription low-priority lane
//! (`docs/RESILIENCE.md#2c-anthropic-subscription-low-priority-lane-off-by-default`).
//!
//! A subscription (OAuth) connection with `low_priority_mode = true` that hits its usage
//! wall may be offered a slower lane instead of a hard 429: the 429 carries
//! `anthropic-ratelimit-unified-status: rejected` and
//! `anthropic-ratelimit-unified-slow-offer: treatment`. The lane is accepted by retrying on
//! the same connection with the request header `anthropic-usage-limit: slow`
//! ([`REQUEST_HEADER`]); while it is active every request on that connection carries it. The
//! lane lasts until the announced `anthropic-ratelimit-unified-reset` plus [`RESET_GRACE`].
//!
//! The lane's own status arrives in `anthropic-ratelimit-unified-slow-status`
//! ([`SlowStatus`]). The lane header names follow sluice's own specification: Anthropic does
//! not publish them.
//!
//! Pure: no clock reads, no I/O, no randomness of its own. Every time-dependent call takes
//! `now_unix_ms` (wall clock: upstream resets are wall-clock instants) and the jitter of a
//! busy wait takes a uniform `draw` in `[0, 1)` from the caller's (seeded) RNG.

#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The request header that asks for the lane (`anthropic-usage-limit`).
pub const REQUEST_HEADER: &str = "anthropic-usage-limit";
/// Its value (`slow`).
pub const REQUEST_VALUE: &str = "slow";

/// The active lane lasts this long past the announced reset (60 s).
pub const RESET_GRACE: Duration = Duration::from_secs(60);
/// Default wait of a busy lane without `…-slow-retry-after` (20 s).
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(20);
/// A busy lane's wait is clamped to 5 s–600 s before jitter.
pub const RETRY_AFTER_MIN: Duration = Duration::from_secs(5);
/// Upper clamp of a busy lane's wait (600 s).
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(600);
/// Jitter of a busy wait: ±30 %.
pub const JITTER: f64 = 0.3;
/// Default bound on all busy waits of one request without `…-slow-max-wait` (20 min).
pub const DEFAULT_MAX_WAIT: Duration = Duration::from_secs(20 * 60);
/// `…-slow-max-wait` is clamped to 1 min–6 h.
pub const MAX_WAIT_MIN: Duration = Duration::from_secs(60);
/// Upper clamp of `…-slow-max-wait` (6 h).
pub const MAX_WAIT_MAX: Duration = Duration::from_secs(6 * 3600);
/// A busy wait leaves this much of the request's own remaining time (5 s).
pub const REQUEST_MARGIN: Duration = Duration::from_secs(5);
/// After a lane gave up waiting for a slot, no new lane is accepted for 10 min.
pub const REACCEPT_PAUSE: Duration = Duration::from_secs(600);
/// `budget_exhausted` is remembered this long (8 days): no lane is accepted before.
pub const BUDGET_MEMORY: Duration = Duration::from_secs(8 * 86_400);
/// An ended lane stays listed (for the console and API) this long (24 h).
pub const ENDED_SHOWN: Duration = Duration::from_secs(86_400);

/// The lane status word (`anthropic-ratelimit-unified-slow-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowStatus {
    /// `active`: the request was served on the lane.
    Active,
    /// `not_needed`: the account is under its wall again; the lane is kept.
    NotNeeded,
    /// `slot_busy`: no lane slot now; wait and retry.
    SlotBusy,
    /// `weekly_limit`: the weekly limit is reached; the lane ends.
    WeeklyLimit,
    /// `budget_exhausted`: the lane's own budget is used up; ends, remembered 8 days.
    BudgetExhausted,
    /// `off`: the lane is switched off for the account; ends.
    Off,
    /// `ineligible`: the account cannot use the lane; ends.
    Ineligible,
    /// `overage-in-use`: paid extra usage serves instead; ends as `extra_usage`.
    OverageInUse,
}

impl SlowStatus {
    /// Parses the header value (trimmed, ASCII case-insensitive, `-` and `_` alike).
    pub fn parse(s: &str) -> Option<Self> {
        Some(
            match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
                "active" => Self::Active,
                "not_needed" => Self::NotNeeded,
                "slot_busy" => Self::SlotBusy,
                "weekly_limit" => Self::WeeklyLimit,
                "budget_exhausted" => Self::BudgetExhausted,
                "off" => Self::Off,
                "ineligible" => Self::Ineligible,
                "overage_in_use" => Self::OverageInUse,
                _ => return None,
            },
        )
    }

    /// The reason an ending status gives the lane; `None` for statuses that keep it.
    pub fn end_reason(self) -> Option<&'static str> {
        match self {
            Self::Active | Self::NotNeeded | Self::SlotBusy => None,
            Self::WeeklyLimit => Some("weekly_limit"),
            Self::BudgetExhausted => Some("budget_exhausted"),
            Self::Off => Some("off"),
            Self::Ineligible => Some("ineligible"),
            Self::OverageInUse => Some("extra_usage"),
        }
    }
}

/// What one response head says about the lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Signals {
    /// `anthropic-ratelimit-unified-status: rejected`.
    pub rejected: bool,
    /// `anthropic-ratelimit-unified-slow-offer: treatment`.
    pub offered: bool,
    /// `anthropic-ratelimit-unified-reset` (Unix seconds), as Unix ms.
    pub reset_at_ms: Option<u64>,
    /// `anthropic-ratelimit-unified-5h-reset` (Unix seconds), as Unix ms.
    pub five_hour_reset_ms: Option<u64>,
    /// `anthropic-ratelimit-unified-slow-status`.
    pub status: Option<SlowStatus>,
    /// `anthropic-ratelimit-unified-slow-retry-after` (seconds).
    pub retry_after: Option<Duration>,
    /// `anthropic-ratelimit-unified-slow-max-wait` (seconds).
    pub max_wait: Option<Duration>,
}

impl Signals {
    /// Reads the lane headers from `(name, value)` pairs (names case-insensitive); malformed
    /// values are ignored.
    pub fn parse<'a, I>(headers: I) -> Self
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut s = Self::default();
        for (name, value) in headers {
            let v = value.trim();
            match name.to_ascii_lowercase().as_str() {
                "anthropic-ratelimit-unified-status" => {
                    s.rejected = v.eq_ignore_ascii_case("rejected");
                }
                "anthropic-ratelimit-unified-slow-offer" => {
                    s.offered = v.eq_ignore_ascii_case("treatment");
                }
                "anthropic-ratelimit-unified-reset" => s.reset_at_ms = unix_secs_ms(v),
                "anthropic-ratelimit-unified-5h-reset" => s.five_hour_reset_ms = unix_secs_ms(v),
                "anthropic-ratelimit-unified-slow-status" => s.status = SlowStatus::parse(v),
                "anthropic-ratelimit-unified-slow-retry-after" => s.retry_after = secs(v),
                "anthropic-ratelimit-unified-slow-max-wait" => s.max_wait = secs(v),
                _ => {}
            }
        }
        s
    }

    /// True for a 429 that offers the lane (`rejected` + `treatment`).
    pub fn is_offer(&self, status: u16) -> bool {
        status == 429 && self.rejected && self.offered
    }
}

/// Whole or fractional seconds, finite and not negative, at most a year.
fn secs(v: &str) -> Option<Duration> {
    let f: f64 = v.parse().ok()?;
    (f.is_finite() && (0.0..=31_536_000.0).contains(&f)).then(|| Duration::from_secs_f64(f))
}

/// Unix seconds as Unix ms.
fn unix_secs_ms(v: &str) -> Option<u64> {
    v.parse::<u64>().ok()?.checked_mul(1000)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Where a connection's lane stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Accepted: every request carries `anthropic-usage-limit: slow` until `until_unix_ms`.
    Active,
    /// Not accepted again before `until_unix_ms` (after a busy lane gave up, or a
    /// `budget_exhausted`).
    Paused,
    /// Ended (listed for a while); a new offer is accepted again.
    Ended,
}

impl State {
    /// snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Paused => "paused",
            Self::Ended => "ended",
        }
    }
}

/// One connection's lane record (persisted as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    /// Where it stands.
    pub state: State,
    /// Active: when it ends (the reset + 60 s). Paused: when a new lane may be accepted.
    /// Ended: when it stops being listed. Unix ms.
    pub until_unix_ms: u64,
    /// Why: `treatment` while active; the ending reason otherwise (`weekly_limit`,
    /// `budget_exhausted`, `off`, `ineligible`, `extra_usage`, `new_window`,
    /// `slot_busy_timeout`, `reset_passed`).
    pub reason: String,
    /// The 5-hour window reset the lane was accepted under (Unix ms), to tell a new window.
    #[serde(default)]
    pub window_reset_ms: Option<u64>,
    /// When `budget_exhausted` was last seen (Unix ms): no lane is accepted for
    /// [`BUDGET_MEMORY`] after it, whatever the state shows.
    #[serde(default)]
    pub budget_exhausted_at_ms: Option<u64>,
}

/// What a failed response means for the request in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not about the lane: report it as usual.
    Report,
    /// The lane was just accepted: retry at once on the same connection.
    Accepted,
    /// The lane is busy: wait (see [`busy_wait`]) and retry on the same connection.
    Busy {
        /// `…-slow-retry-after`, when sent.
        retry_after: Option<Duration>,
        /// `…-slow-max-wait`, when sent.
        max_wait: Option<Duration>,
    },
}

/// One connection's lane: the record, if any, and the rules that move it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaneSlot {
    /// The record; `None` when no lane was ever seen (or it was forgotten).
    pub lane: Option<Lane>,
}

impl LaneSlot {
    /// True while the lane is active at `now_unix_ms`: requests carry the slow header.
    pub fn is_active(&self, now_unix_ms: u64) -> bool {
        self.lane
            .as_ref()
            .is_some_and(|l| l.state == State::Active && now_unix_ms < l.until_unix_ms)
    }

    /// The record as it stands at `now_unix_ms` (an active lane past its end reads as
    /// ended with reason `reset_passed`; a lapsed pause or ended record reads as none).
    pub fn current(&self, now_unix_ms: u64) -> Option<Lane> {
        let l = self.lane.as_ref()?;
        if now_unix_ms < l.until_unix_ms {
            return Some(l.clone());
        }
        (l.state == State::Active).then(|| Lane {
            state: State::Ended,
            until_unix_ms: l.until_unix_ms.saturating_add(ms(ENDED_SHOWN)),
            reason: "reset_passed".into(),
            ..l.clone()
        })
    }

    /// Applies the lapses at `now_unix_ms` (see [`LaneSlot::current`]); true when the
    /// record changed.
    pub fn refresh(&mut self, now_unix_ms: u64) -> bool {
        let cur = self.current(now_unix_ms);
        let kept = cur.or_else(|| self.budget_memory(now_unix_ms));
        let changed = kept != self.lane;
        self.lane = kept;
        changed
    }

    /// A paused record standing for a remembered `budget_exhausted`, while it lasts.
    fn budget_memory(&self, now_unix_ms: u64) -> Option<Lane> {
        let at = self.lane.as_ref()?.budget_exhausted_at_ms?;
        let until = at.saturating_add(ms(BUDGET_MEMORY));
        (now_unix_ms < until).then(|| Lane {
            state: State::Paused,
            until_unix_ms: until,
            reason: "budget_exhausted".into(),
            window_reset_ms: None,
            budget_exhausted_at_ms: Some(at),
        })
    }

    /// True when a new offer may be accepted at `now_unix_ms`: no pause running and no
    /// `budget_exhausted` within [`BUDGET_MEMORY`].
    pub fn may_accept(&self, now_unix_ms: u64) -> bool {
        let Some(l) = &self.lane else { return true };
        let budget = l
            .budget_exhausted_at_ms
            .is_some_and(|at| now_unix_ms < at.saturating_add(ms(BUDGET_MEMORY)));
        let paused = l.state == State::Paused && now_unix_ms < l.until_unix_ms;
        !budget && !paused
    }

    /// Folds one response head (any status) in at `now_unix_ms` and says what it means for
    /// the request in flight. `retried` is true when this request already accepted the
    /// lane once (a second offer is then reported as usual, never accepted in a loop).
    ///
    /// Order: an ending lane status ends the lane (a `budget_exhausted` is remembered); a
    /// new 5-hour window ends it (`new_window`); an offer on a 429 is accepted when allowed;
    /// `slot_busy` or a 529 on an active lane is [`Verdict::Busy`]; `active` and
    /// `not_needed` keep it.
    pub fn observe(
        &mut self,
        status: u16,
        s: &Signals,
        retried: bool,
        now_unix_ms: u64,
    ) -> Verdict {
        self.refresh(now_unix_ms);
        if let Some(reason) = s.status.and_then(SlowStatus::end_reason) {
            if s.status == Some(SlowStatus::BudgetExhausted) {
                self.pause(now_unix_ms, BUDGET_MEMORY, reason);
                if let Some(l) = &mut self.lane {
                    l.budget_exhausted_at_ms = Some(now_unix_ms);
                }
            } else {
                self.end(now_unix_ms, reason);
            }
            return Verdict::Report;
        }
        if self.is_active(now_unix_ms) && self.new_window(s) {
            self.end(now_unix_ms, "new_window");
            return Verdict::Report;
        }
        if s.is_offer(status) {
            if retried || !self.may_accept(now_unix_ms) {
                return Verdict::Report;
            }
            self.accept(s, now_unix_ms);
            return Verdict::Accepted;
        }
        let busy = s.status == Some(SlowStatus::SlotBusy) || status == 529;
        if busy && self.is_active(now_unix_ms) {
            return Verdict::Busy {
                retry_after: s.retry_after,
                max_wait: s.max_wait,
            };
        }
        Verdict::Report
    }

    /// True when `s` announces a 5-hour window later than the one the lane was accepted
    /// under (by more than [`RESET_GRACE`]).
    fn new_window(&self, s: &Signals) -> bool {
        let (Some(l), Some(seen)) = (&self.lane, s.five_hour_reset_ms) else {
            return false;
        };
        l.window_reset_ms
            .is_some_and(|w| seen > w.saturating_add(ms(RESET_GRACE)))
    }

    /// Accepts the lane on offer `s`: active until the announced reset + 60 s (with no reset
    /// announced, the 5-hour reset; with neither, 5 h from now).
    fn accept(&mut self, s: &Signals, now_unix_ms: u64) {
        let reset = s
            .reset_at_ms
            .or(s.five_hour_reset_ms)
            .unwrap_or_else(|| now_unix_ms.saturating_add(5 * 3_600_000));
        let budget = self.lane.as_ref().and_then(|l| l.budget_exhausted_at_ms);
        self.lane = Some(Lane {
            state: State::Active,
            until_unix_ms: reset.max(now_unix_ms).saturating_add(ms(RESET_GRACE)),
            reason: "treatment".into(),
            window_reset_ms: s.five_hour_reset_ms.or(s.reset_at_ms),
            budget_exhausted_at_ms: budget,
        });
    }

    /// Ends the lane for `reason` (listed for [`ENDED_SHOWN`]).
    pub fn end(&mut self, now_unix_ms: u64, reason: &str) {
        let budget = self.lane.as_ref().and_then(|l| l.budget_exhausted_at_ms);
        self.lane = Some(Lane {
            state: State::Ended,
            until_unix_ms: now_unix_ms.saturating_add(ms(ENDED_SHOWN)),
            reason: reason.into(),
            window_reset_ms: None,
            budget_exhausted_at_ms: budget,
        });
    }

    /// Ends the lane with no re-accept for `pause`.
    pub fn pause(&mut self, now_unix_ms: u64, pause: Duration, reason: &str) {
        let budget = self.lane.as_ref().and_then(|l| l.budget_exhausted_at_ms);
        self.lane = Some(Lane {
            state: State::Paused,
            until_unix_ms: now_unix_ms.saturating_add(ms(pause)),
            reason: reason.into(),
            window_reset_ms: None,
            budget_exhausted_at_ms: budget,
        });
    }

    /// A busy lane gave up (its waits would pass their bound): ends it with the
    /// [`REACCEPT_PAUSE`] (reason `slot_busy_timeout`).
    pub fn give_up(&mut self, now_unix_ms: u64) {
        self.pause(now_unix_ms, REACCEPT_PAUSE, "slot_busy_timeout");
    }
}

/// The next wait of a busy lane, or `None` to give up (then [`LaneSlot::give_up`]).
///
/// The wait is `retry_after` (default [`DEFAULT_RETRY_AFTER`], clamped 5 s–600 s) with ±30 %
/// jitter from `draw` (uniform in `[0, 1)`: 0 → −30 %, 1 → +30 %). All waits of one request
/// (`waited` so far plus this one) stay within `max_wait` (default [`DEFAULT_MAX_WAIT`],
/// clamped 1 min–6 h) and within the request's `remaining` time less [`REQUEST_MARGIN`].
pub fn busy_wait(
    retry_after: Option<Duration>,
    max_wait: Option<Duration>,
    waited: Duration,
    remaining: Duration,
    draw: f64,
) -> Option<Duration> {
    let base = retry_after
        .unwrap_or(DEFAULT_RETRY_AFTER)
        .clamp(RETRY_AFTER_MIN, RETRY_AFTER_MAX);
    let draw = if draw.is_finite() {
        draw.clamp(0.0, 1.0)
    } else {
        0.5
    };
    let wait = base.mul_f64(1.0 - JITTER + 2.0 * JITTER * draw);
    let max_wait = max_wait
        .unwrap_or(DEFAULT_MAX_WAIT)
        .clamp(MAX_WAIT_MIN, MAX_WAIT_MAX);
    let bound = max_wait
        .saturating_sub(waited)
        .min(remaining.saturating_sub(REQUEST_MARGIN));
    (wait <= bound).then_some(wait)
}
