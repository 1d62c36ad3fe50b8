//! `Snapshot`: the immutable view model the console and the admin API read
//! (`docs/ARCHITECTURE.md#the-operator-doors`).
//!
//! Built by the core after changes (coalesced, at most ~20 Hz) and published on a
//! `tokio::sync::watch` channel as `Arc<Snapshot>`. Plain data: tests build one by hand.
//! Times are wall-clock Unix milliseconds so the same struct serialises for `/api/snapshot`.

use serde::{Deserialize, Serialize};

pub use crate::policy::OutcomeClass as AttemptClass;
pub use crate::policy::Scope as LockoutScope;
pub use crate::policy::breaker::BreakerState;
pub use crate::policy::cooldown::ConnectionStatus;

/// Read-only view of sluice at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    /// Increases with every published snapshot.
    pub version: u64,
    /// When it was taken, Unix ms.
    pub taken_at_unix_ms: u64,
    /// When sluice started, Unix ms.
    pub started_at_unix_ms: u64,
    /// Inference listener address, e.g. `127.0.0.1:8787`.
    pub listen: String,
    /// Admin listener address, e.g. `127.0.0.1:8788`.
    pub admin_listen: String,
    /// Config file path as loaded.
    pub config_path: String,
    /// True once shutdown started (`/readyz` answers 503).
    pub draining: bool,
    /// Counters since start.
    pub totals: Totals,
    /// Rolling last-minute statistics.
    pub last_minute: Window,
    /// Most recent finished requests, newest first (at most [`RECENT_CAP`]). Read back when a
    /// snapshot is parsed, so an attached console (`sluice console`) shows them too.
    pub recent: Vec<RequestView>,
    /// Configured providers with live per-provider counters.
    pub providers: Vec<ProviderView>,
    /// Configured combos.
    pub combos: Vec<ComboView>,
    /// Active model lockouts (§3), soonest expiry first.
    pub lockouts: Vec<LockoutView>,
    /// Admission gates with a cap (§4, §5): in-flight / cap, queued / depth cap, oldest
    /// wait, timeouts, rejections.
    pub queues: Vec<super::admission::GateView>,
    /// Write-behind losses of the store since start (zero without a store).
    pub store: StoreView,
    /// Operator-injected faults on now (never persisted), oldest first; serialised only when
    /// there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<super::faults::FaultView>,
    /// Requests held until a quota reset now (a combo's `hold_until_reset`), oldest first;
    /// serialised only when there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<super::holds::HeldView>,
}

/// The store's write-behind counters: rows and state changes dropped because its queue was
/// full (the request path never waits on disk, so these are the price of a stalled disk).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreView {
    /// `request_log` rows dropped.
    pub dropped_request_rows: u64,
    /// Resilience state writes (breaker, connection, lockout, pin, setting rows) dropped.
    pub dropped_state_writes: u64,
}

/// How many finished requests a snapshot keeps.
pub const RECENT_CAP: usize = 200;

/// Request counters since start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    /// Requests finished (any outcome).
    pub requests: u64,
    /// Finished with a 2xx and, for streams, a complete stream.
    pub ok: u64,
    /// Finished with an error status or a broken stream.
    pub errors: u64,
    /// Requests currently being served.
    pub in_flight: u64,
    /// Bytes relayed to clients.
    pub bytes_out: u64,
}

/// Statistics over the last 60 seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Window {
    /// Requests finished in the window, divided by 60 (req/s).
    pub req_per_s: f64,
    /// ok / finished in the window (0.0–1.0); 1.0 when nothing finished.
    pub success_ratio: f64,
    /// Median latency in ms (0 when empty).
    pub p50_ms: u64,
    /// 99th percentile latency in ms (0 when empty).
    pub p99_ms: u64,
    /// Requests finished per second, oldest first, 60 buckets.
    pub sparkline: Vec<u64>,
}

impl RequestView {
    /// A `request_log` row as the Requests panel shows it (no attempt details; `id` 0). An
    /// outcome word this build does not know (a newer sluice wrote it) reads as sluice's own
    /// error rather than as a success.
    pub fn from_log(r: crate::store::RequestLogRow) -> Self {
        Self {
            at_unix_ms: r.at_unix_ms,
            route: r.route,
            client_model: r.client_model,
            target: r.target,
            status: r.status,
            latency_ms: r.latency_ms,
            attempts: r.attempts,
            bytes: r.bytes,
            outcome: RequestOutcome::parse(&r.outcome).unwrap_or(RequestOutcome::SluiceError),
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            injected: r.injected,
            continued: r.continued,
            ..Default::default()
        }
    }
}

/// One finished request as the Requests panel shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RequestView {
    /// Sequence number since start.
    pub id: u64,
    /// When it started, Unix ms.
    pub at_unix_ms: u64,
    /// Prompt tokens the upstream reported (JSON `usage`, or the stream's usage events);
    /// left out of JSON while unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    /// Completion tokens the upstream reported; left out of JSON while unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    /// Client route path, e.g. `/v1/messages`.
    pub route: String,
    /// Model name the client sent (empty when none was readable).
    pub client_model: String,
    /// Last target tried, `provider:connection/model`; empty when none was tried.
    pub target: String,
    /// HTTP status returned to the client (0 when the client went away first).
    pub status: u16,
    /// Total latency in ms.
    pub latency_ms: u64,
    /// Upstream attempts made.
    pub attempts: u32,
    /// Body bytes relayed to the client.
    pub bytes: u64,
    /// Whether the response was an SSE stream.
    pub stream: bool,
    /// `ok`, `upstream_error`, `sluice_error`, `client_error`, `cancelled` or `truncated`.
    pub outcome: RequestOutcome,
    /// Short error text (no secrets), empty when ok.
    pub error: String,
    /// Every attempt in order (for the console's request details).
    pub attempt_log: Vec<AttemptView>,
    /// Candidates left out before dispatch, with why (the §8 reasons).
    pub skipped: Vec<SkippedView>,
    /// Every cooldown-aware wait (§4) the request made, in order.
    pub waits: Vec<WaitView>,
    /// The client's format: `anthropic`, `chat` or `responses` (empty for `/v1/models`).
    pub client_format: String,
    /// The dialect of the last target tried (`anthropic` or `openai`; empty when none).
    pub upstream_dialect: String,
    /// True when an attempt met an operator-injected fault (serialised only when true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub injected: bool,
    /// True when the stream broke after text reached the client and a continuation was sent
    /// once with that text as an assistant prefill (`[resilience.stream]
    /// continue_after_break`; its own attempt shows whether it served; serialised only when
    /// true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continued: bool,
    /// What translation changed in what the last target tried was asked, one line each,
    /// e.g. `max_tokens 128000 → 32768 (max_output_tokens)` (serialised only when
    /// non-empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adjusted: Vec<String>,
}

impl WaitView {
    /// "waited 9.9 s for key-a's cooldown" (or "… for model-x's lockout on key-a").
    pub fn describe(&self) -> String {
        let (pc, model) = self.target.split_once('/').unwrap_or((&self.target, ""));
        let conn = pc.split_once(':').map_or(pc, |(_, c)| c);
        let what = match self.reason.as_str() {
            "model_lockout" => format!("{model}'s lockout on {conn}"),
            "quota_hold" => format!("{conn}'s quota reset (held)"),
            "lane_slot_busy" => format!("a low-priority lane slot on {conn}"),
            _ => format!("{conn}'s cooldown"),
        };
        // Tenths of a second, rounded down: 9_950 ms reads "9.9 s".
        let tenths = self.waited_ms / 100;
        format!("waited {}.{} s for {what}", tenths / 10, tenths % 10)
    }
}

/// One cooldown-aware wait of a request: every candidate was excluded by a short cooldown or
/// lockout, and the request waited for the earliest to end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WaitView {
    /// The target whose exclusion ended first, `provider:connection/model`.
    pub target: String,
    /// `connection_cooldown`, `model_lockout`, or `quota_hold` (a combo's hold until a quota
    /// reset).
    pub reason: String,
    /// How long the request waited, ms.
    pub waited_ms: u64,
}

/// One upstream attempt of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AttemptView {
    /// `provider:connection/model`.
    pub target: String,
    /// Response status (0 = transport error before the head).
    pub status: u16,
    /// Outcome class, e.g. `success`, `rate_limited`, `transient`, `overloaded`.
    pub class: AttemptClass,
    /// Reason word, e.g. `rate_limit_exceeded`.
    pub reason: String,
    /// Time to the response head (or the failure), ms.
    pub latency_ms: u64,
    /// `client→upstream` when the request was translated for this target, e.g.
    /// `anthropic→openai`; empty when it was forwarded in the client's format.
    pub translated: String,
    /// True when an operator-injected fault answered (or delayed) this attempt (serialised
    /// only when true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub injected: bool,
}

/// A candidate excluded before dispatch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkippedView {
    /// `provider:connection/model`.
    pub target: String,
    /// `circuit_open`, `connection_cooldown`, `quota_wait`, `model_lockout`, `terminal`,
    /// `provider_cooldown`, `unavailable`, `saturated`, or `slow_start` (skipped for a
    /// recovering provider's ramp, and served elsewhere).
    pub reason: String,
}

/// One provider with its connections.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProviderView {
    /// Provider id.
    pub id: String,
    /// `anthropic` or `openai`.
    pub dialect: String,
    /// Base URL.
    pub base_url: String,
    /// `oauth`, `api_key` or `local`.
    pub profile: String,
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
    /// Kind of the last error, e.g. `rate_limited` (empty when none).
    pub last_error_kind: String,
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
    pub state: String,
    /// Active: when the lane ends (the announced reset + 60 s); paused: when a new lane may
    /// be accepted; ended: when it stops being listed. Unix ms.
    pub until_unix_ms: u64,
    /// `treatment` while active; why it ended otherwise (`weekly_limit`,
    /// `budget_exhausted`, `off`, `ineligible`, `extra_usage`, `new_window`,
    /// `slot_busy_timeout`, `reset_passed`).
    pub reason: String,
}

/// A connection's session-limit reset record (all instants Unix ms).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitResetView {
    /// How the last try ended: `reset`, `not_limited`, `already_used`, `not_offered` or
    /// `error`.
    pub last_outcome: String,
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
    pub state: String,
    /// The binding window's name, e.g. `five_hour`.
    pub window: String,
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
    /// Strategy name.
    pub strategy: String,
    /// Targets as written, `provider[:connection]/model`.
    pub targets: Vec<String>,
}

/// One quota window of a connection, as the last upstream response head reported it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeadroomRowView {
    /// Window name: `five_hour`, `seven_day`, `requests`, `tokens`, `input_tokens` or
    /// `output_tokens`.
    pub window: String,
    /// Upstream model the window belongs to (bucket windows); `None` for account-wide
    /// subscription windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Remaining fraction, 0–1 (`0` once the upstream says `rejected`); `None` when the
    /// upstream sent no number.
    pub remaining: Option<f64>,
    /// When the window resets, Unix ms.
    pub reset_at_unix_ms: Option<u64>,
    /// Upstream status word (`allowed`, `allowed_warning`, `rejected`), when sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// True for the window that limits the connection now.
    pub binding: bool,
    /// When it was observed, Unix ms.
    pub observed_at_unix_ms: u64,
}

// `remaining` is always a finite fraction (the parser drops NaN and clamps to 0–1), so
// equality is total and `ConnectionView` keeps its `Eq`.
impl Eq for HeadroomRowView {}
/// How a finished request ended, as the request log, metrics and console name it. Serialized
/// snake_case (`ok`, `upstream_error`, …).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestOutcome {
    /// A 2xx and, for streams, a complete stream.
    #[default]
    Ok,
    /// The upstream failed (error status passed through, unreachable, timed out).
    UpstreamError,
    /// sluice refused it (draining, every candidate excluded).
    SluiceError,
    /// The client's request was bad (unknown model, unreadable body, …).
    ClientError,
    /// The client went away before it was answered.
    Cancelled,
    /// A stream that ended before its terminal event.
    Truncated,
}

impl RequestOutcome {
    /// `ok`, `upstream_error`, `sluice_error`, `client_error`, `cancelled` or `truncated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::UpstreamError => "upstream_error",
            Self::SluiceError => "sluice_error",
            Self::ClientError => "client_error",
            Self::Cancelled => "cancelled",
            Self::Truncated => "truncated",
        }
    }

    /// Parses [`as_str`](Self::as_str) output (request-log rows read back from the store);
    /// `None` for any other word.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ok" => Self::Ok,
            "upstream_error" => Self::UpstreamError,
            "sluice_error" => Self::SluiceError,
            "client_error" => Self::ClientError,
            "cancelled" => Self::Cancelled,
            "truncated" => Self::Truncated,
            _ => return None,
        })
    }
}

impl std::fmt::Display for RequestOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}
