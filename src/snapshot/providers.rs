//! Provider views: each provider with its breaker and connections (cooldowns, headroom,
//! lanes, resets, leases), the active model lockouts, and the combos.

use serde::{Deserialize, Serialize};

use super::word::{Word, empty_is_none};
use super::{BreakerState, ConnectionStatus, LockoutScope};
use crate::config::{Dialect, Profile, Strategy};
use crate::policy::OutcomeClass;
use crate::policy::headroom::preflight::Mark;
use crate::policy::headroom::{Window, WindowStatus};
use crate::policy::lane::State as LaneState;
use crate::policy::limit_reset::Outcome as LimitResetOutcome;

/// One provider with its connections.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderView {
    /// Provider id.
    pub id: String,
    /// `anthropic` or `openai`.
    pub dialect: Word<Dialect>,
    /// Base URL.
    pub base_url: String,
    /// `oauth`, `api_key` or `local`.
    pub profile: Word<Profile>,
    /// Attempts sent to this provider since start.
    pub attempts: u64,
    /// Attempts that failed (transport error or status >= 500).
    pub failures: u64,
    /// Attempts in flight now.
    pub in_flight: u64,
    /// Status of the last attempt (0 = transport error or none yet).
    pub last_status: u16,
    /// Latency of the last attempt's response head in ms.
    pub last_latency_ms: u64,
    /// The provider circuit breaker (§1).
    pub breaker: BreakerView,
    /// The §1b windowed provider cooldown deadline, Unix ms, when cooling.
    pub provider_cooldown_until_unix_ms: Option<u64>,
    /// The provider's slow-start ramp after its breaker closed (`[[providers]] slow_start`):
    /// the share of traffic it is admitted for now, in whole percent (10–99); absent when not
    /// ramping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_percent: Option<u8>,
    /// Connections in config order.
    pub connections: Vec<ConnectionView>,
}

/// A provider breaker as of the snapshot (lazily refreshed: an OPEN breaker past its reset
/// timeout reads `half_open`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct BreakerView {
    /// `closed`, `degraded`, `open` or `half_open`.
    pub state: BreakerState,
    /// Counted failures now.
    pub failure_count: u32,
    /// Threshold for DEGRADED.
    pub degrade_at: u32,
    /// Threshold for OPEN.
    pub open_at: u32,
    /// When the next probe is allowed (OPEN) or the probe times out (HALF_OPEN), Unix ms.
    pub next_probe_at_unix_ms: Option<u64>,
    /// Reset-timeout multiplier (1 normally, up to 16 after repeated re-opens).
    pub multiplier: u32,
    /// Most recent transitions, newest last (at most 20).
    pub transitions: Vec<TransitionView>,
}

/// One breaker state change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TransitionView {
    /// When, Unix ms.
    pub at_unix_ms: u64,
    /// State before.
    pub from: BreakerState,
    /// State after.
    pub to: BreakerState,
    /// Why, e.g. `failure threshold`, `probe succeeded`, `operator reset`.
    pub reason: String,
}

/// One active model lockout (§3).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockoutView {
    /// Provider id.
    pub provider: String,
    /// Connection id.
    pub connection: String,
    /// Quota-group name for group locks, model id for exact locks.
    pub model: String,
    /// `quota_group`, `model` or `triple`.
    pub scope: LockoutScope,
    /// Reason word, e.g. `rate_limit_exceeded`.
    pub reason: String,
    /// Failure count behind the lock.
    pub failures: u32,
    /// When it expires, Unix ms.
    pub until_unix_ms: u64,
}

/// One connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ConnectionView {
    /// Connection id.
    pub id: String,
    /// `passthrough` or `env:VAR` (never the key).
    pub auth: String,
    /// Attempts since start.
    pub attempts: u64,
    /// Failed attempts since start.
    pub failures: u64,
    /// Attempts in flight now.
    pub in_flight: u64,
    /// Effective status: `active`, `cooling`, `quota_wait`, `banned`, `expired` or
    /// `credits_exhausted` (§2).
    pub status: ConnectionStatus,
    /// When the cooldown or quota wait ends, Unix ms.
    pub cooldown_until_unix_ms: Option<u64>,
    /// Backoff level (resets only on success).
    pub backoff_level: u32,
    /// Outcome class of the last error, e.g. `rate_limited`; `None` (an empty string in
    /// JSON) when none.
    #[serde(with = "empty_is_none")]
    pub last_error_kind: Option<Word<OutcomeClass>>,
    /// Short text of the last error (no secrets).
    pub last_error: String,
    /// Status of the last failed attempt.
    pub last_status: Option<u16>,
    /// Active model lockouts on this connection.
    pub lockouts: u32,
    /// Quota headroom read from upstream response headers: one row per live window,
    /// binding window flagged; empty (and left out of JSON) while nothing is known.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub headroom: Vec<HeadroomRowView>,
    /// Quota preflight mark: present (and in JSON) only while preflight is enabled and the
    /// connection's binding window is at or under the `warn` or `cutoff` threshold.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preflight: Option<PreflightView>,
    /// Slow start: the share of traffic this connection is admitted for now, in whole
    /// percent (10–99) — the lower of its own ramp (after a cooldown ended) and its
    /// provider's (after the breaker closed); absent when not ramping.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ramp_percent: Option<u8>,
    /// The Anthropic subscription low-priority lane (`low_priority_mode`): present (and in
    /// JSON) while the connection's lane is active, paused or recently ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lane: Option<LaneView>,
    /// The session-limit reset (`auto_limit_reset`): present (and in JSON) while an error
    /// backoff or a remembered unavailability runs, or for 24 h after a granted reset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_reset: Option<LimitResetView>,
    /// The exclusive session lease holding this connection, while one is live (absent from
    /// JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease: Option<LeaseView>,
}

/// A connection's low-priority lane.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LaneView {
    /// `active` (requests carry `anthropic-usage-limit: slow`), `paused` (no new lane is
    /// accepted before `until_unix_ms`) or `ended`.
    pub state: Word<LaneState>,
    /// Active: when the lane ends (the announced reset + 60 s); paused: when a new lane may
    /// be accepted; ended: when it stops being listed. Unix ms.
    pub until_unix_ms: u64,
    /// `treatment` while active; why it ended otherwise (`weekly_limit`,
    /// `budget_exhausted`, `off`, `ineligible`, `extra_usage`, `new_window`,
    /// `slot_busy_timeout`, `reset_passed`, `limit_reset`). Kept a string: the lane record
    /// itself carries the word as text.
    pub reason: String,
}

/// A connection's session-limit reset record (all instants Unix ms).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitResetView {
    /// How the last try ended: `reset`, `not_limited`, `already_used`, `not_offered` or
    /// `error`; `None` (an empty string in JSON) before any try.
    #[serde(with = "empty_is_none")]
    pub last_outcome: Option<Word<LimitResetOutcome>>,
    /// When it ended.
    pub last_at_unix_ms: Option<u64>,
    /// No usage query before this (absent once passed).
    pub next_query_after_unix_ms: Option<u64>,
    /// When the next reset becomes available, as remembered (absent once passed).
    pub next_available_at_unix_ms: Option<u64>,
    /// When a reset was last granted.
    pub reset_used_at_unix_ms: Option<u64>,
    /// The last error's short text (empty unless `error`; never a credential).
    pub last_error: String,
}

/// A live session lease on a connection (never the owner token).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LeaseView {
    /// The connection's lease generation.
    pub generation: u64,
    /// When the lease lapses unless renewed, Unix ms.
    pub expires_at_unix_ms: u64,
    /// First 8 hex characters of the owner token's SHA-256.
    pub owner_fingerprint: String,
}

/// A connection's quota preflight state while it is not `ok`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PreflightView {
    /// `warn` (still dispatched) or `cut_off` (skipped with reason `quota_preflight`).
    pub state: Word<Mark>,
    /// The binding window's name, e.g. `five_hour`.
    pub window: Word<Window>,
    /// Its remaining fraction, 0–1.
    pub remaining: f64,
    /// When it resets, Unix ms, when known.
    pub reset_at_unix_ms: Option<u64>,
}

// `remaining` is a finite fraction (see `HeadroomRowView`).
impl Eq for PreflightView {}

/// One combo.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ComboView {
    /// Client-facing model name.
    pub name: String,
    /// Strategy name, e.g. `priority`, `round_robin`.
    pub strategy: Word<Strategy>,
    /// Targets as written, `provider[:connection]/model`.
    pub targets: Vec<String>,
}

/// One quota window of a connection, as the last upstream response head reported it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeadroomRowView {
    /// Window name: `five_hour`, `seven_day`, `requests`, `tokens`, `input_tokens` or
    /// `output_tokens`.
    pub window: Word<Window>,
    /// Upstream model the window belongs to (bucket windows); `None` for account-wide
    /// subscription windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Remaining fraction, 0–1 (`0` once the upstream says `rejected`); `None` when the
    /// upstream sent no number.
    pub remaining: Option<f64>,
    /// When the window resets, Unix ms.
    pub reset_at_unix_ms: Option<u64>,
    /// Upstream status word (`allowed`, `allowed_warning`, `rejected`), when sent (the
    /// header parser drops any other word, so only these reach the snapshot).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Word<WindowStatus>>,
    /// True for the window that limits the connection now.
    pub binding: bool,
    /// When it was observed, Unix ms.
    pub observed_at_unix_ms: u64,
}

// `remaining` is always a finite fraction (the parser drops NaN and clamps to 0–1), so
// equality is total and `ConnectionView` keeps its `Eq`.
impl Eq for HeadroomRowView {}
