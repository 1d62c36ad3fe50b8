//! `Cooldown`: one connection's cooldown and terminal state
//! (`docs/RESILIENCE.md#2-connection-cooldown`).
//!
//! A connection (one API key or account) is skipped while it cools, waits for a quota window
//! or sits in a terminal state, while the provider's other connections keep serving. This type
//! is the pure state machine: the core feeds it classified outcomes ([`Classified`]) stamped
//! with `now` and the dispatch instant of the failed attempt, and reads eligibility lazily at
//! selection time. Nothing here reads a clock or needs a timer (§2 "Lazy recovery").
//!
//! Decisions `docs/RESILIENCE.md` leaves open are stated on the method that makes them; the
//! module-level summary is on [`Cooldown`].

use std::time::Duration;

use super::{Classified, OutcomeClass};
use crate::clock::Instant;

#[cfg(test)]
mod rate_rules_tests;
#[cfg(test)]
mod tests;
mod types;

pub use types::{
    ClearResult, ConnectionStatus, CooldownEffect, CooldownRecord, CooldownRules, CooldownView,
    Eligibility, rate_limit_override,
};
pub(crate) use types::{deadline_after, doubled, truncate_chars};

/// Longest `last_error` kept, in chars (§2 "short text").
pub const MAX_ERROR_CHARS: usize = 200;

/// Cooldown a 429 without a retry hint sets on an oauth connection: 60 s (§2 "Retry hints win
/// for 429").
pub const OAUTH_RATE_LIMIT_COOLDOWN: Duration = Duration::from_secs(60);

/// Cooldown of a concurrency-limited 429 without a retry hint: 1 s (§2: the
/// upstream counts requests in flight, which free up within moments).
pub const CONCURRENCY_LIMIT_COOLDOWN: Duration = Duration::from_secs(1);

/// One connection's cooldown state machine (§2).
///
/// **States.** `active` → `cooling` (ladder or 429 hint) or `quota_wait` (a hint longer than
/// `quota_wait_threshold`) → back to eligible lazily when the deadline passes (the stored
/// status may still read `cooling` until the next write; [`Self::view`] and
/// [`Self::eligibility`] report the effective state). Any non-terminal state → `banned`,
/// `expired` or `credits_exhausted` (terminal), which only [`Self::reset_terminal`] leaves.
///
/// **Ladder.** `cooldown = base * 2^backoff_level`, then `backoff_level += 1` capped at
/// `max_backoff_level`; the cooldown is capped at `max_cooldown`. The level survives expiry
/// and resets only on success or an operator clear.
///
/// **Deadline rules.** The new deadline is `max(existing, computed)`. A failure of a request
/// dispatched before the current ladder step was taken (`dispatched_at <
/// cooldown_started_at`) is *stale*: it takes no ladder step, so it neither extends the
/// deadline with one nor raises the level, and it does not count toward `expired`/`banned`
/// (a burst raises the level once). Only a ladder step (or the `rate_limit_cooldown`
/// override) is that reference.
///
/// **Retry hints.** A 429 with a short hint cools exactly until the hint (capped at
/// `max_cooldown`), does not raise the level and does not start a ladder step, so it is not a
/// reference for staleness: an in-flight 429 without a hint that lands afterwards still takes
/// the next ladder step and, by the max rule, lengthens the deadline. A hint longer
/// than `quota_wait_threshold` on a 429 / 403 means `quota_wait` until the reset, capped at
/// `max_quota_wait`. Such hinted deadlines are upstream facts and apply even to stale failures,
/// by the max rule only (never shortening, never raising the level). So when a hinted 429 and
/// a hint-less one from the same burst race, the order of their verdicts does not matter: the
/// deadline is the later of the hinted one and one ladder step, and the level rises once. A
/// hint that only floors a ladder step (a 503's `retry-after`) goes with that step when stale.
///
/// ```
/// use std::time::Duration;
/// use sluice::clock::{Clock, ManualClock};
/// use sluice::config::resilience::{ConnectionCooldownSettings, CooldownProfile};
/// use sluice::policy::cooldown::{Cooldown, CooldownRules, Eligibility};
/// use sluice::policy::{Classified, OutcomeClass, Scope};
///
/// let settings = ConnectionCooldownSettings {
///     max_cooldown: Duration::from_secs(1800),
///     quota_wait_threshold: Duration::from_secs(600),
///     max_quota_wait: Duration::from_secs(7 * 86_400),
///     expired_retry_max: 3,
///     ban_markers: vec![],
///     request_rejected_markers: vec![],
///     quota_markers: vec![],
///     concurrency_markers: vec![],
///     rate_limit_cooldown: None,
///     stream_stall_cooldown: false,
/// };
/// let rules = CooldownRules {
///     profile: CooldownProfile { base: Duration::from_secs(3), max_backoff_level: 5 },
///     settings: &settings,
///     oauth: false,
///     disable_cooling: false,
///     rate_limit_cooldown: None,
/// };
/// let outcome = Classified {
///     class: OutcomeClass::Transient,
///     status: Some(503),
///     retry_hint: None,
///     reason: "server_error".into(),
///     scope: Scope::Triple,
///     restated: None,
///     message: "upstream 503".into(),
///     error_rule: None,
/// };
/// let t0 = ManualClock::new().now();
/// let mut c = Cooldown::default();
/// c.on_failure(&outcome, t0, &rules, t0);
/// let until = t0 + Duration::from_secs(3);
/// assert_eq!(c.eligibility(t0), Eligibility::Cooling { until });
/// assert_eq!(c.eligibility(until), Eligibility::Eligible);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cooldown {
    status: ConnectionStatus,
    reason: String,
    /// The class of the failure that set the live `cooling` / `quota_wait` deadline.
    cause: Option<OutcomeClass>,
    cooldown_until: Option<Instant>,
    cooldown_started_at: Option<Instant>,
    backoff_level: u32,
    last_error: String,
    last_error_kind: String,
    last_status: Option<u16>,
    last_failure_at: Option<Instant>,
    consecutive_auth_failures: u32,
    consecutive_rejections: u32,
}

/// How one failure class is applied after the error fields are recorded.
enum Action {
    /// Record only.
    Record,
    /// Enter a terminal state.
    Terminal(ConnectionStatus),
    /// Cooling until exactly `now + hint` (429 short hint): no level change, no ladder step.
    Hinted(Duration),
    /// Cooling for the configured `rate_limit_cooldown` (hint-less 429): the level goes back
    /// to 0, and like a ladder step it is the anti-herd reference.
    Override(Duration),
    /// `quota_wait` until `now + hint`.
    QuotaWait(Duration),
    /// One ladder step; `fixed` replaces the ladder duration (oauth 429 60 s), `floor` is a
    /// minimum (a short hint on a non-429 failure).
    Ladder {
        fixed: Option<Duration>,
        floor: Option<Duration>,
    },
}

/// The reason a failure records: `quota_exhausted` for a quota failure, else the classifier's
/// reason (the class name when it gave none).
fn failure_reason(c: &Classified) -> String {
    match c.class {
        OutcomeClass::QuotaExhausted => "quota_exhausted".to_owned(),
        _ if c.reason.is_empty() => c.class.as_str().to_owned(),
        _ => c.reason.clone(),
    }
}

impl Cooldown {
    /// Records one failed attempt (§0 table, §2).
    ///
    /// `dispatched_at` is when the failed attempt was sent upstream; `now` when its outcome
    /// was classified. Per class:
    /// - `RateLimited` (429): a hint (non-zero) cools until exactly the hint, capped at
    ///   `max_cooldown`, or `quota_wait` when it exceeds `quota_wait_threshold`; no hint →
    ///   the `rate_limit_cooldown` override when [`CooldownRules::rate_limit_cooldown`] has
    ///   one (exactly that long, *not* capped at `max_cooldown` — it is bounded to 1s–6h by
    ///   validation — and the level is reset to 0), else oauth 60 s, api_key/local the
    ///   ladder. Both ladder cases raise the level once; every no-hint case obeys anti-herd.
    ///   A hinted 429 from a stale request (sent before the current ladder step) still
    ///   applies its hint by the max rule: a hint-less 429 racing a `retry-after: 30` leaves
    ///   the deadline at the later of the hinted one and that one ladder step, whichever
    ///   verdict lands first.
    /// - `ConcurrencyLimited` (429 "too many concurrent requests"): cools for the hint, else
    ///   [`CONCURRENCY_LIMIT_COOLDOWN`] (1 s, ignored when stale), capped at `max_cooldown`;
    ///   the level never moves and the override never applies.
    /// - `QuotaExhausted`, `Forbidden` (429/403): a hint over the threshold → `quota_wait`;
    ///   otherwise the ladder (reason `quota_exhausted` for quota), with a short hint as a
    ///   minimum.
    /// - `Transient`: the ladder (a hint, e.g. a 503 `retry-after`, is a minimum).
    /// - `Auth` (401): the ladder; the `expired_retry_max`-th consecutive non-stale 401
    ///   (0 is read as 1) → `expired`.
    /// - `RequestRejected`: recorded, and the rejection counter rises (non-stale ones);
    ///   never a cooldown and never `banned`: the core locks the model on the connection
    ///   instead (`policy::report`).
    /// - `Banned` → `banned`; `CreditsExhausted` → `credits_exhausted` (even when stale:
    ///   markers are facts about the account).
    /// - `NotFound`, `Overloaded`, `EmptyTurn` (404, 529, a 2xx with no answer): recorded,
    ///   never cool.
    /// - `StreamStall`: recorded; a ladder step only with `stream_stall_cooldown`.
    /// - `ClientFault`, `ClientGone`, `Success`: ignored entirely.
    ///
    /// Terminal states are never left or replaced here (the first terminal state sticks;
    /// later failures only update the error fields). With `disable_cooling` the error fields
    /// and the 401 / rejection counters are still recorded and terminal states still apply,
    /// but no cooling or quota deadline is ever set and the level never rises.
    pub fn on_failure(
        &mut self,
        c: &Classified,
        dispatched_at: Instant,
        rules: &CooldownRules<'_>,
        now: Instant,
    ) -> CooldownEffect {
        use OutcomeClass as O;
        if matches!(c.class, O::Success | O::ClientFault | O::ClientGone) {
            return CooldownEffect::Ignored;
        }
        self.record_error(c, now);
        if self.status.is_terminal() {
            return CooldownEffect::AlreadyTerminal(self.status);
        }
        let stale = self.cooldown_started_at.is_some_and(|s| dispatched_at < s);
        let hint = c.retry_hint.filter(|h| !h.is_zero());
        let action = match self.action(c, stale, hint, rules) {
            Ok(a) => a,
            Err(effect) => return effect,
        };
        let cause = (failure_reason(c), c.class);
        self.take(action, cause, stale, hint, rules, now)
    }

    /// What the failure `c` does, by its class (the 401 and rejection counters rise here);
    /// `Err` with the effect when a stale 401 or rejection ends it early.
    fn action(
        &mut self,
        c: &Classified,
        stale: bool,
        hint: Option<Duration>,
        rules: &CooldownRules<'_>,
    ) -> Result<Action, CooldownEffect> {
        use OutcomeClass as O;
        let settings = rules.settings;
        let long_hint = hint.filter(|h| *h > settings.quota_wait_threshold);
        Ok(match c.class {
            O::Success
            | O::ClientFault
            | O::ClientGone
            | O::NotFound
            | O::Overloaded
            | O::EmptyTurn => Action::Record,
            O::StreamStall if !settings.stream_stall_cooldown => Action::Record,
            O::StreamStall | O::Transient => Action::Ladder {
                fixed: None,
                floor: hint,
            },
            O::Banned => Action::Terminal(ConnectionStatus::Banned),
            O::CreditsExhausted => Action::Terminal(ConnectionStatus::CreditsExhausted),
            O::Auth => {
                if stale {
                    return Err(CooldownEffect::Stale);
                }
                self.consecutive_auth_failures = self.consecutive_auth_failures.saturating_add(1);
                if self.consecutive_auth_failures >= settings.expired_retry_max.max(1) {
                    Action::Terminal(ConnectionStatus::Expired)
                } else {
                    Action::Ladder {
                        fixed: None,
                        floor: hint,
                    }
                }
            }
            O::RequestRejected => {
                if stale {
                    return Err(CooldownEffect::Stale);
                }
                self.consecutive_rejections = self.consecutive_rejections.saturating_add(1);
                Action::Record
            }
            O::ConcurrencyLimited => Action::Hinted(hint.unwrap_or(CONCURRENCY_LIMIT_COOLDOWN)),
            O::RateLimited | O::QuotaExhausted | O::Forbidden if long_hint.is_some() => {
                Action::QuotaWait(long_hint.unwrap_or_default())
            }
            O::RateLimited => match (hint, rules.rate_limit_cooldown) {
                (Some(h), _) => Action::Hinted(h),
                (None, Some(d)) => Action::Override(d),
                (None, None) => Action::Ladder {
                    fixed: rules.oauth.then_some(OAUTH_RATE_LIMIT_COOLDOWN),
                    floor: None,
                },
            },
            O::QuotaExhausted | O::Forbidden => Action::Ladder {
                fixed: None,
                floor: hint,
            },
        })
    }

    /// Takes `action` for a failure with `cause` (its reason and class): records, enters a
    /// terminal state, or sets a cooling / quota deadline (anti-herd and `disable_cooling`
    /// permitting).
    fn take(
        &mut self,
        action: Action,
        cause: (String, OutcomeClass),
        stale: bool,
        hint: Option<Duration>,
        rules: &CooldownRules<'_>,
        now: Instant,
    ) -> CooldownEffect {
        let settings = rules.settings;
        let (reason, class) = cause;
        match action {
            Action::Record => CooldownEffect::Recorded,
            Action::Terminal(status) => {
                self.status = status;
                self.reason = reason;
                self.cause = None;
                self.cooldown_until = None;
                CooldownEffect::Terminal(status)
            }
            _ if rules.disable_cooling => CooldownEffect::Recorded,
            // Anti-herd gates our own guesses (the ladder, the override, the 1 s concurrency
            // default); an upstream hint is a fact about the account and applies even from a
            // stale request, by the max rule only.
            Action::Override(_) if stale => CooldownEffect::Stale,
            Action::Hinted(_) if stale && hint.is_none() => CooldownEffect::Stale,
            Action::Hinted(h) => {
                let until = deadline_after(now, h.min(settings.max_cooldown));
                self.exclude(ConnectionStatus::Cooling, until, (reason, class), now)
            }
            Action::Override(d) => {
                self.backoff_level = 0;
                self.cooldown_started_at = Some(now);
                let until = deadline_after(now, d);
                self.exclude(ConnectionStatus::Cooling, until, (reason, class), now)
            }
            Action::QuotaWait(h) => {
                let until = deadline_after(now, h.min(settings.max_quota_wait));
                self.exclude(ConnectionStatus::QuotaWait, until, (reason, class), now)
            }
            Action::Ladder { .. } if stale => CooldownEffect::Stale,
            Action::Ladder { fixed, floor } => {
                let max_level = rules.profile.max_backoff_level;
                let level = self.backoff_level.min(max_level);
                let computed = fixed
                    .unwrap_or_else(|| doubled(rules.profile.base, level))
                    .max(floor.unwrap_or_default())
                    .min(settings.max_cooldown);
                self.backoff_level = level.saturating_add(1).min(max_level);
                self.cooldown_started_at = Some(now);
                let until = deadline_after(now, computed);
                self.exclude(ConnectionStatus::Cooling, until, (reason, class), now)
            }
        }
    }

    /// Records a successful attempt (§2 "A success clears status, deadline, error fields and
    /// `backoff_level`"); also resets the 401 and rejection counters and the anti-herd
    /// reference. Returns whether anything changed.
    ///
    /// *Decision*: a terminal state survives a success (§2 clears terminal states only
    /// on a credential change or an explicit operator reset; such a success can only come from
    /// a request dispatched before the verdict). The whole state is then left untouched.
    pub fn on_success(&mut self) -> bool {
        if self.status.is_terminal() {
            return false;
        }
        let fresh = Self::default();
        let changed = *self != fresh;
        *self = fresh;
        changed
    }

    /// Whether the connection may be selected at `now` (lazy: a passed deadline is eligible).
    pub fn eligibility(&self, now: Instant) -> Eligibility {
        match (self.status, self.live_deadline(now)) {
            (s, _) if s.is_terminal() => Eligibility::Terminal(s),
            (ConnectionStatus::Cooling, Some(until)) => Eligibility::Cooling { until },
            (ConnectionStatus::QuotaWait, Some(until)) => Eligibility::QuotaWait { until },
            _ => Eligibility::Eligible,
        }
    }

    /// Shorthand for `eligibility(now) == Eligible`.
    pub fn is_eligible(&self, now: Instant) -> bool {
        self.eligibility(now) == Eligibility::Eligible
    }

    /// Operator clear (`POST /api/resilience/cooldowns`): removes a live `cooling` /
    /// `quota_wait` exclusion and its reason.
    ///
    /// *Decision*: clearing also resets `backoff_level` and the anti-herd reference (the
    /// operator asks for a fresh start), but keeps the error fields (history) and the 401 /
    /// rejection counters (only a success proves the credential works). Terminal states are
    /// skipped; an eligible connection is left untouched (`Unchanged`).
    pub fn clear(&mut self, now: Instant) -> ClearResult {
        match self.eligibility(now) {
            Eligibility::Terminal(_) => ClearResult::SkippedTerminal,
            Eligibility::Eligible => ClearResult::Unchanged,
            Eligibility::Cooling { .. } | Eligibility::QuotaWait { .. } => {
                self.status = ConnectionStatus::Active;
                self.reason.clear();
                self.cause = None;
                self.cooldown_until = None;
                self.cooldown_started_at = None;
                self.backoff_level = 0;
                ClearResult::Cleared
            }
        }
    }

    /// Explicit operator reset of a terminal state (or a credential change): back to `active`
    /// with level, counters, deadline and anti-herd reference reset; error fields are kept as
    /// history. Returns false (and changes nothing) when the state was not terminal.
    pub fn reset_terminal(&mut self) -> bool {
        if !self.status.is_terminal() {
            return false;
        }
        *self = Self {
            last_error: std::mem::take(&mut self.last_error),
            last_error_kind: std::mem::take(&mut self.last_error_kind),
            last_status: self.last_status,
            last_failure_at: self.last_failure_at,
            ..Self::default()
        };
        true
    }

    /// Plain data for the snapshot, with the status effective at `now`.
    pub fn view(&self, now: Instant) -> CooldownView {
        let (status, until) = match self.eligibility(now) {
            Eligibility::Eligible => (ConnectionStatus::Active, None),
            Eligibility::Cooling { until } => (ConnectionStatus::Cooling, Some(until)),
            Eligibility::QuotaWait { until } => (ConnectionStatus::QuotaWait, Some(until)),
            Eligibility::Terminal(s) => (s, None),
        };
        CooldownView {
            status,
            until,
            remaining: until.map_or(Duration::ZERO, |u| u.saturating_duration_since(now)),
            backoff_level: self.backoff_level,
            reason: if status == ConnectionStatus::Active {
                String::new()
            } else {
                self.reason.clone()
            },
            last_error: self.last_error.clone(),
            last_error_kind: self.last_error_kind.clone(),
            last_status: self.last_status,
            last_failure_at: self.last_failure_at,
            consecutive_auth_failures: self.consecutive_auth_failures,
            consecutive_rejections: self.consecutive_rejections,
        }
    }

    /// The stored status (may read `cooling` after the deadline passed; see [`Self::view`]).
    pub fn status(&self) -> ConnectionStatus {
        self.status
    }

    /// The class of the failure behind the live `cooling` / `quota_wait` deadline (e.g.
    /// [`OutcomeClass::Auth`] for a connection cooled after a 401), `None` when there is no
    /// such deadline. Restored state takes the class of the last recorded failure.
    pub fn cooling_cause(&self, now: Instant) -> Option<OutcomeClass> {
        self.live_deadline(now).and(self.cause)
    }

    /// Current backoff level.
    pub fn backoff_level(&self) -> u32 {
        self.backoff_level
    }

    /// Everything, for persistence.
    pub fn persist(&self) -> CooldownRecord {
        CooldownRecord {
            status: self.status,
            reason: self.reason.clone(),
            cooldown_until: self.cooldown_until,
            cooldown_started_at: self.cooldown_started_at,
            backoff_level: self.backoff_level,
            last_error: self.last_error.clone(),
            last_error_kind: self.last_error_kind.clone(),
            last_status: self.last_status,
            last_failure_at: self.last_failure_at,
            consecutive_auth_failures: self.consecutive_auth_failures,
            consecutive_rejections: self.consecutive_rejections,
        }
    }

    /// Rebuilds the state from a record. A `cooling` / `quota_wait` record without a deadline
    /// becomes `active`; a deadline on an `active` or terminal record is dropped.
    pub fn restore(r: CooldownRecord) -> Self {
        let waiting = matches!(
            r.status,
            ConnectionStatus::Cooling | ConnectionStatus::QuotaWait
        );
        let (status, cooldown_until) = match (waiting, r.cooldown_until) {
            (true, Some(u)) => (r.status, Some(u)),
            (true, None) => (ConnectionStatus::Active, None),
            (false, _) => (r.status, None),
        };
        // The record keeps no class of its own: the last recorded failure's stands in.
        let cause = cooldown_until.and_then(|_| OutcomeClass::from_word(&r.last_error_kind));
        Self {
            status,
            reason: r.reason,
            cause,
            cooldown_until,
            cooldown_started_at: r.cooldown_started_at,
            backoff_level: r.backoff_level,
            last_error: truncate_chars(&r.last_error, MAX_ERROR_CHARS),
            last_error_kind: r.last_error_kind,
            last_status: r.last_status,
            last_failure_at: r.last_failure_at,
            consecutive_auth_failures: r.consecutive_auth_failures,
            consecutive_rejections: r.consecutive_rejections,
        }
    }

    /// The `cooling` / `quota_wait` deadline if it is still in the future at `now`.
    /// The deadline of a `cooling` / `quota_wait` that has already passed at `now` (the
    /// instant the connection became eligible again, lazily); `None` while it is still live,
    /// after a success or operator clear reset it, and for any other status.
    pub fn lapsed_deadline(&self, now: Instant) -> Option<Instant> {
        match self.status {
            ConnectionStatus::Cooling | ConnectionStatus::QuotaWait => {
                self.cooldown_until.filter(|u| *u <= now)
            }
            _ => None,
        }
    }

    fn live_deadline(&self, now: Instant) -> Option<Instant> {
        match self.status {
            ConnectionStatus::Cooling | ConnectionStatus::QuotaWait => {
                self.cooldown_until.filter(|u| now < *u)
            }
            _ => None,
        }
    }

    fn record_error(&mut self, c: &Classified, now: Instant) {
        self.last_error = truncate_chars(&c.message, MAX_ERROR_CHARS);
        c.class.as_str().clone_into(&mut self.last_error_kind);
        self.last_status = c.status;
        self.last_failure_at = Some(now);
    }

    /// Applies the max rule: the later of the live deadline and `until` wins, with its status,
    /// reason and the class behind it (ties keep the existing one). It leaves the anti-herd
    /// reference alone: only a ladder step (or the override) moves it, before calling this.
    fn exclude(
        &mut self,
        status: ConnectionStatus,
        until: Instant,
        (reason, cause): (String, OutcomeClass),
        now: Instant,
    ) -> CooldownEffect {
        let live = self.live_deadline(now);
        let extended = live.is_none_or(|existing| until > existing);
        if extended {
            self.status = status;
            self.cooldown_until = Some(until);
            self.reason = reason;
            self.cause = Some(cause);
        }
        CooldownEffect::Excluded {
            status: self.status,
            until: self.cooldown_until.unwrap_or(until),
            backoff_level: self.backoff_level,
            extended,
        }
    }
}
