//! Plain data around [`super::Cooldown`]: statuses, rules, effects, views and records, plus
//! the saturating time helpers shared by the policy modules.

use std::time::Duration;

use serde::Serialize;

use crate::clock::Instant;
use crate::config::resilience::{ConnectionCooldownSettings, CooldownProfile};

/// `now + d`, saturating: when the sum would overflow the platform's `Instant`, the longest
/// representable shorter duration is used instead (halving until it fits). Never panics.
pub(crate) fn deadline_after(now: Instant, d: Duration) -> Instant {
    let mut d = d;
    loop {
        if let Some(t) = now.checked_add(d) {
            return t;
        }
        if d.is_zero() {
            return now;
        }
        d /= 2;
    }
}

/// `base * 2^level`, saturating at `Duration::MAX` (callers cap it).
pub(crate) fn doubled(base: Duration, level: u32) -> Duration {
    if base.is_zero() {
        return Duration::ZERO;
    }
    2u32.checked_pow(level)
        .and_then(|factor| base.checked_mul(factor))
        .unwrap_or(Duration::MAX)
}

/// Truncates `s` to at most `max` chars (on a char boundary).
pub(crate) fn truncate_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

/// A connection's status (§2 "Per-connection fields"). Serialized snake_case, as stored in
/// table `connections` and shown in the console.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConnectionStatus {
    /// Eligible.
    #[default]
    Active,
    /// A short transient cooldown (the ladder, or a 429 hint).
    Cooling,
    /// A quota/usage window: a hint longer than `quota_wait_threshold`.
    QuotaWait,
    /// Terminal: a ban marker.
    Banned,
    /// Terminal: the `expired_retry_max`-th consecutive 401.
    Expired,
    /// Terminal: 402 or a credit/billing marker.
    CreditsExhausted,
}

impl std::fmt::Display for ConnectionStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl ConnectionStatus {
    /// The stored spelling: `active`, `cooling`, `quota_wait`, `banned`, `expired`,
    /// `credits_exhausted`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Cooling => "cooling",
            Self::QuotaWait => "quota_wait",
            Self::Banned => "banned",
            Self::Expired => "expired",
            Self::CreditsExhausted => "credits_exhausted",
        }
    }

    /// Parses the stored spelling (the inverse of [`Self::as_str`]); `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "active" => Self::Active,
            "cooling" => Self::Cooling,
            "quota_wait" => Self::QuotaWait,
            "banned" => Self::Banned,
            "expired" => Self::Expired,
            "credits_exhausted" => Self::CreditsExhausted,
            _ => return None,
        })
    }

    /// `banned`, `expired` and `credits_exhausted`: not cooldowns; cleared only by an
    /// operator reset or a credential change (§2 "Terminal states").
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Banned | Self::Expired | Self::CreditsExhausted)
    }
}

/// The per-connection configuration one failure is judged by (§2): the profile's ladder, the
/// shared knobs, whether the connection is oauth, and its `disable_cooling` opt-out.
#[derive(Debug, Clone, Copy)]
pub struct CooldownRules<'a> {
    /// `base` and `max_backoff_level` of the provider's profile.
    pub profile: CooldownProfile,
    /// `[resilience.connection_cooldown]`.
    pub settings: &'a ConnectionCooldownSettings,
    /// The provider's profile is `oauth` (a 429 without a hint cools 60 s instead of the
    /// ladder).
    pub oauth: bool,
    /// The connection's `disable_cooling`: record errors, never cool.
    pub disable_cooling: bool,
    /// Cooldown of a rate-limited 429 without a retry hint, already resolved by precedence
    /// (connection, then provider, then `[resilience.connection_cooldown]`, see
    /// [`rate_limit_override`]); `None` = the ladder (oauth: 60 s).
    pub rate_limit_cooldown: Option<Duration>,
}

/// The `rate_limit_cooldown` that applies to one connection: its own, else its provider's,
/// else the global `[resilience.connection_cooldown]` one; `None` when none is set. (An
/// upstream retry hint still wins over the result, see [`super::Cooldown::on_failure`].)
pub fn rate_limit_override(
    connection: Option<Duration>,
    provider: Option<Duration>,
    global: Option<Duration>,
) -> Option<Duration> {
    connection.or(provider).or(global)
}

/// What one [`super::Cooldown::on_failure`] changed, for logging and persistence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CooldownEffect {
    /// Nothing recorded (success, the request's own fault, client gone).
    Ignored,
    /// Error fields recorded; exclusion unchanged (404, 529, a stall without
    /// `stream_stall_cooldown`, or any cooling under `disable_cooling`).
    Recorded,
    /// Error fields recorded; the request was dispatched before the current ladder step was
    /// taken and carried no 429 retry hint or quota wait to apply, so neither the deadline nor
    /// the level nor a terminal counter moved (anti-herd).
    Stale,
    /// The connection is excluded until `until` with `status` (`cooling` or `quota_wait`).
    /// `extended` is false when an existing later deadline was kept (max rule).
    Excluded {
        /// Resulting status (the one whose deadline won).
        status: ConnectionStatus,
        /// Resulting deadline.
        until: Instant,
        /// Backoff level after this failure.
        backoff_level: u32,
        /// The deadline moved later.
        extended: bool,
    },
    /// The connection just entered this terminal state.
    Terminal(ConnectionStatus),
    /// Already terminal: error fields recorded, state kept.
    AlreadyTerminal(ConnectionStatus),
}

/// Whether a connection may take a request at some `now` (§2 "Lazy recovery").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eligibility {
    /// May be selected.
    Eligible,
    /// Transient cooldown until `until` (§8 "Transient").
    Cooling {
        /// Deadline.
        until: Instant,
    },
    /// Quota window until `until` (not transient for §4 waits and §8).
    QuotaWait {
        /// Deadline (the hinted reset, capped at `max_quota_wait`).
        until: Instant,
    },
    /// Terminal: `banned`, `expired` or `credits_exhausted`.
    Terminal(ConnectionStatus),
}

/// Result of an operator clear (`POST /api/resilience/cooldowns`, §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClearResult {
    /// A live `cooling` or `quota_wait` exclusion was removed.
    Cleared,
    /// Nothing to clear (eligible already).
    Unchanged,
    /// Terminal states are listed, never cleared here.
    SkippedTerminal,
}

/// Plain data for the snapshot and `GET /api/resilience/cooldowns` (§2). No credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CooldownView {
    /// Status effective at `now` (a passed deadline reads `active`).
    pub status: ConnectionStatus,
    /// Deadline, when `status` is `cooling` or `quota_wait`.
    pub until: Option<Instant>,
    /// Time left until `until`; zero otherwise.
    pub remaining: Duration,
    /// Current backoff level (kept across expiry; reset by success).
    pub backoff_level: u32,
    /// Reason word of the current exclusion, e.g. `quota_exhausted`; empty when active.
    pub reason: String,
    /// Last error text (at most [`super::MAX_ERROR_CHARS`] chars).
    pub last_error: String,
    /// [`crate::policy::OutcomeClass::as_str`] of the last failure, e.g. `rate_limited`.
    pub last_error_kind: String,
    /// HTTP status of the last failure, if it had one.
    pub last_status: Option<u16>,
    /// When the last failure was recorded.
    pub last_failure_at: Option<Instant>,
    /// Consecutive 401s without a success in between.
    pub consecutive_auth_failures: u32,
    /// Consecutive `request_rejected` 403s without a success in between (informational: a
    /// rejection locks the model, never the connection).
    pub consecutive_rejections: u32,
}

/// Everything [`super::Cooldown`] holds, as plain data for persistence (table `connections`). The
/// core converts the instants to wall-clock ms and back, so the policy never reads a wall clock.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CooldownRecord {
    /// Stored status (not the effective one).
    pub status: ConnectionStatus,
    /// Reason word of the current exclusion.
    pub reason: String,
    /// Deadline of `cooling` / `quota_wait`.
    pub cooldown_until: Option<Instant>,
    /// When the current ladder step was taken (the anti-herd reference).
    pub cooldown_started_at: Option<Instant>,
    /// Backoff level.
    pub backoff_level: u32,
    /// Last error text.
    pub last_error: String,
    /// Last error kind.
    pub last_error_kind: String,
    /// Last HTTP status.
    pub last_status: Option<u16>,
    /// Last failure instant.
    pub last_failure_at: Option<Instant>,
    /// Consecutive 401s.
    pub consecutive_auth_failures: u32,
    /// Consecutive `request_rejected` 403s.
    pub consecutive_rejections: u32,
}
