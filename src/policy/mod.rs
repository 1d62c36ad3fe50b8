//! Pure policy: decisions as plain data and functions of `now` (no tokio, hyper, rusqlite or
//! ratatui). The core owns instances of these types and feeds them classified outcomes.
//!
//! - [`classify`]: one upstream result → [`Classified`] (restatement §7 first, then rules).
//! - [`retry_hint`]: every retry-hint format of §2 → one `Duration`.
//! - [`breaker`]: the provider circuit breaker (§1) and the windowed provider cooldown (§1b).
//! - [`cooldown`]: per-connection cooldown and terminal states (§2).
//! - [`lockout`]: per-(connection, model) lockouts (§3).
//! - [`affinity`]: session → connection pins (§2a).
//! - [`report`]: what one classified outcome changes (the plan `Core::report` applies).
//! - [`select`]: candidate planning for one request.
//! - [`slow_start`]: the traffic share of a provider or connection ramping up after recovery.

pub mod admission;
pub mod affinity;
pub mod breaker;
pub mod classify;
pub mod cooldown;
pub mod fault;
pub mod headroom;
pub mod lane;
pub mod latency;
pub mod lease;
pub mod limit_reset;
pub mod lockout;
pub mod report;
pub mod retry_hint;
pub mod select;
pub mod slow_start;
pub mod strategy;

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What one attempt's outcome means to the resilience layers (§0 table, one variant per
/// row). Produced once by [`classify`], consumed by breaker, cooldown and lockout, which
/// never re-parse statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeClass {
    /// 2xx and, for streams, a complete stream.
    #[default]
    Success,
    /// 408, 500, 502, 503, 504, a transport error before the response head, a stream that
    /// ended without its terminal marker or broke after the head. Breaker counts it; the
    /// connection cools on the ladder.
    Transient,
    /// 429 with a short or no retry hint.
    RateLimited,
    /// 429 whose body reports too many requests in flight at once (`concurrency_markers`,
    /// no quota text): fail over, cool the connection briefly, no level change, no breaker.
    ConcurrencyLimited,
    /// 429/403 whose body carries quota text (a `quota_markers` match that does not overlap a
    /// `concurrency_markers` match), or whose hint exceeds `quota_wait_threshold`.
    QuotaExhausted,
    /// 401.
    Auth,
    /// 402 or a credit/billing marker: terminal `credits_exhausted`.
    CreditsExhausted,
    /// 403 without a more specific marker.
    Forbidden,
    /// A ban marker in the body: terminal `banned`.
    Banned,
    /// A 403 matching `request_rejected_markers`: the model is locked on that connection
    /// (doubling per repeat, at most 1 h); never a ban.
    RequestRejected,
    /// 404 model not found.
    NotFound,
    /// 529 overloaded: try the next target, no breaker count, no cooldown.
    Overloaded,
    /// 400, 413, 422: the request's own fault; returned to the client, no fallback.
    ClientFault,
    /// The client went away: no penalty anywhere.
    ClientGone,
    /// The content-stall watchdog abandoned the stream (§6).
    StreamStall,
    /// A 2xx answer that ended with no text and no tool call — nothing at all, or only
    /// reasoning (§6 "empty turns"). Not an HTTP status: the breaker counts it like a
    /// transport failure; the connection only records it (never cooled) and no model is
    /// locked.
    EmptyTurn,
}

impl OutcomeClass {
    /// A provider-level failure, the kind the provider breaker counts (§1 "What counts");
    /// whether this one does also depends on its status and the breaker's `trip_statuses`
    /// ([`breaker::counts`]).
    pub fn counts_for_breaker(self) -> bool {
        matches!(self, Self::Transient | Self::EmptyTurn)
    }

    /// Every class, in declaration order.
    pub const ALL: [Self; 16] = [
        Self::Success,
        Self::Transient,
        Self::RateLimited,
        Self::ConcurrencyLimited,
        Self::QuotaExhausted,
        Self::Auth,
        Self::CreditsExhausted,
        Self::Forbidden,
        Self::Banned,
        Self::RequestRejected,
        Self::NotFound,
        Self::Overloaded,
        Self::ClientFault,
        Self::ClientGone,
        Self::StreamStall,
        Self::EmptyTurn,
    ];

    /// The class [`Self::as_str`] spells `word`, if any (e.g. a stored `last_error_kind`).
    pub fn from_word(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == word)
    }

    /// Short lowercase name for logs, the snapshot and the console (`last_error_kind`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Transient => "transient",
            Self::RateLimited => "rate_limited",
            Self::ConcurrencyLimited => "concurrency_limited",
            Self::QuotaExhausted => "quota_exhausted",
            Self::Auth => "auth",
            Self::CreditsExhausted => "credits_exhausted",
            Self::Forbidden => "forbidden",
            Self::Banned => "banned",
            Self::RequestRejected => "request_rejected",
            Self::NotFound => "not_found",
            Self::Overloaded => "overloaded",
            Self::ClientFault => "client_fault",
            Self::ClientGone => "client_gone",
            Self::StreamStall => "stream_stall",
            Self::EmptyTurn => "empty_turn",
        }
    }
}

impl std::fmt::Display for OutcomeClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Which key a failure is recorded under (§3 "Scope by status", §7 rule `scope`). Serialized
/// (and shown) snake_case, as [`lockout::scope_as_str`] spells it; the default (`quota_group`)
/// only fills hand-built views.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The whole provider.
    Provider,
    /// One connection.
    Connection,
    /// The model's quota group on one connection (429/403/402).
    #[default]
    QuotaGroup,
    /// Exactly that model id on one connection (404).
    Model,
    /// Exactly the provider/connection/model triple (5xx, transport, quality).
    Triple,
}

impl Scope {
    /// `provider`, `connection`, `quota_group`, `model` or `triple`.
    pub fn as_str(self) -> &'static str {
        lockout::scope_as_str(self)
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// The single classification of one attempt's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Classified {
    /// What it means.
    pub class: OutcomeClass,
    /// The status after restatement (§7); `None` for transport errors and client gone.
    pub status: Option<u16>,
    /// Upstream retry hint, already parsed and capped (§2 "Retry hints win for 429").
    pub retry_hint: Option<Duration>,
    /// Reason word, e.g. `rate_limit_exceeded`, `quota_exhausted`, `server_error`.
    pub reason: String,
    /// Scope for a model lockout (§3), when lockout mode applies.
    pub scope: Scope,
    /// Set when a restatement rule rewrote the status.
    pub restated: Option<Restated>,
    /// Short error text for the console (no secrets, at most ~200 chars).
    pub message: String,
    /// The `[[error_rules]]` rule that classified it, if any (its `base_cooldown` applies,
    /// §7).
    pub error_rule: Option<RuleIndex>,
}

/// The `[[error_rules]]` rule that classified an outcome: its position in the rules in
/// force when it matched (rules past the 65535th are never referenced) and its
/// `base_cooldown`, kept here so a live edit of the rules between classification and the
/// report cannot apply another rule's duration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleIndex {
    pos: std::num::NonZeroU16,
    /// Whole milliseconds (saturating at about 49 days), to keep [`Classified`] small.
    base_cooldown_ms: Option<u32>,
}

impl RuleIndex {
    /// The rule at index `i` (no `base_cooldown`), or `None` past the representable range.
    pub fn new(i: usize) -> Option<Self> {
        let n = u16::try_from(i.checked_add(1)?).ok()?;
        std::num::NonZeroU16::new(n).map(|pos| Self {
            pos,
            base_cooldown_ms: None,
        })
    }

    /// The same rule with its `base_cooldown`.
    pub fn with_base_cooldown(self, base_cooldown: Option<std::time::Duration>) -> Self {
        Self {
            base_cooldown_ms: base_cooldown
                .map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX)),
            ..self
        }
    }

    /// The position in the rules in force when it matched.
    pub fn get(self) -> usize {
        usize::from(self.pos.get()) - 1
    }

    /// The rule's `base_cooldown`, as it was when it matched.
    pub fn base_cooldown(self) -> Option<std::time::Duration> {
        self.base_cooldown_ms
            .map(|ms| std::time::Duration::from_millis(u64::from(ms)))
    }
}

/// A §7 restatement that fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restated {
    /// Rule id.
    pub rule: String,
    /// Status before.
    pub from: u16,
    /// Status after.
    pub to: u16,
    /// What the client is told to wait (upstream's hint or the rule's default).
    pub retry_after: Duration,
}
