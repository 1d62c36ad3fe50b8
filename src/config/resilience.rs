//! Typed resilience settings (`[resilience.*]`, §1–§6 of `docs/RESILIENCE.md`) and the §7 rule
//! types.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::Profile;

/// Resilience settings (§1–§6), with the defaults `docs/RESILIENCE.md` gives.
#[derive(Debug, Clone, Serialize)]
pub struct Resilience {
    /// §1 per profile.
    pub breaker: BTreeMap<Profile, BreakerSettings>,
    /// §2 per profile.
    pub cooldown: BTreeMap<Profile, CooldownProfile>,
    /// §2 shared knobs.
    pub connection_cooldown: ConnectionCooldownSettings,
    /// §1b (off by default).
    pub provider_cooldown: ProviderCooldownSettings,
    /// §3.
    pub model_lockout: ModelLockoutSettings,
    /// §4 cooldown-aware wait.
    pub combo_cooldown_wait: ComboCooldownWait,
    /// §5.
    pub queue: QueueSettings,
    /// §6.
    pub stream: StreamSettings,
    /// §4 process-wide cap (`[resilience.concurrency]`).
    pub concurrency: ConcurrencySettings,
    /// §2a; zero disables.
    #[serde(with = "humantime_serde")]
    pub session_affinity_ttl: Duration,
    /// `[resilience.quota_preflight]`: skip a connection before dispatch when its quota
    /// window is nearly spent (off by default).
    pub quota_preflight: QuotaPreflightSettings,
    /// `[resilience] p2c_latency_weight`: up to this many penalty points `p2c` adds for a
    /// slower or more failing candidate, 0–20; 0 (default) = off.
    pub p2c_latency_weight: u32,
}

/// Default `[resilience.quota_preflight] cutoff`: 2 % remaining.
pub const DEFAULT_PREFLIGHT_CUTOFF: f64 = 0.02;

/// Default `[resilience.quota_preflight] warn`: 20 % remaining.
pub const DEFAULT_PREFLIGHT_WARN: f64 = 0.20;

/// Largest `[resilience] p2c_latency_weight` (20).
pub const MAX_P2C_LATENCY_WEIGHT: u32 = 20;

/// `[resilience.quota_preflight]`: thresholds on the remaining fraction of a connection's
/// binding quota window (the one closest to its limit), read from rate-limit headers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct QuotaPreflightSettings {
    /// Master switch; default false.
    pub enabled: bool,
    /// Skip the connection (reason `quota_preflight`) at or under this fraction remaining,
    /// 0.0–1.0; default [`DEFAULT_PREFLIGHT_CUTOFF`].
    pub cutoff: f64,
    /// Log a warning and mark the connection at or under this fraction remaining, 0.0–1.0,
    /// at least `cutoff`; default [`DEFAULT_PREFLIGHT_WARN`].
    pub warn: f64,
}

impl Default for QuotaPreflightSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            cutoff: DEFAULT_PREFLIGHT_CUTOFF,
            warn: DEFAULT_PREFLIGHT_WARN,
        }
    }
}

/// `[resilience.concurrency]`: the process-wide §4 cap, first in the gate order
/// global → provider → connection → model.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ConcurrencySettings {
    /// Requests in flight across every provider; `None` (default) = unlimited.
    pub global_max: Option<u32>,
}

/// A provider's `[providers.breaker]` table: each key set replaces its profile's value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct BreakerOverride {
    /// Replaces `degrade_at`.
    pub degrade_at: Option<u32>,
    /// Replaces `open_at`.
    pub open_at: Option<u32>,
    /// Replaces `reset_timeout`.
    pub reset_timeout: Option<Duration>,
    /// Replaces `degraded_quiet_window`.
    pub degraded_quiet_window: Option<Duration>,
    /// Replaces `probe_timeout`.
    pub probe_timeout: Option<Duration>,
    /// Replaces `max_backoff_multiplier`.
    pub max_backoff_multiplier: Option<u32>,
    /// Replaces `trip_statuses` (the whole list).
    pub trip_statuses: Option<StatusSet>,
}

impl BreakerOverride {
    /// `profile` with every key this override sets replaced.
    pub fn over(&self, profile: BreakerSettings) -> BreakerSettings {
        BreakerSettings {
            degrade_at: self.degrade_at.unwrap_or(profile.degrade_at),
            open_at: self.open_at.unwrap_or(profile.open_at),
            reset_timeout: self.reset_timeout.unwrap_or(profile.reset_timeout),
            degraded_quiet_window: self
                .degraded_quiet_window
                .unwrap_or(profile.degraded_quiet_window),
            probe_timeout: self.probe_timeout.unwrap_or(profile.probe_timeout),
            max_backoff_multiplier: self
                .max_backoff_multiplier
                .unwrap_or(profile.max_backoff_multiplier),
            trip_statuses: self.trip_statuses.unwrap_or(profile.trip_statuses),
        }
    }
}

/// §1 breaker thresholds for one profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct BreakerSettings {
    /// Failures that make it DEGRADED.
    pub degrade_at: u32,
    /// Failures that make it OPEN.
    pub open_at: u32,
    /// OPEN lasts this long before a probe.
    #[serde(with = "humantime_serde")]
    pub reset_timeout: Duration,
    /// DEGRADED resets after this long without a failure. Default 60s.
    #[serde(with = "humantime_serde")]
    pub degraded_quiet_window: Duration,
    /// A probe that does not settle within this counts as failed. Default 60s.
    #[serde(with = "humantime_serde")]
    pub probe_timeout: Duration,
    /// Cap on reset-timeout escalation. Default 16.
    pub max_backoff_multiplier: u32,
    /// HTTP statuses whose server-side failures count toward the breaker. Default
    /// [`DEFAULT_TRIP_STATUSES`]. Transport errors always count; statuses classified as
    /// another layer's business (401, 403, 404, 429, 529, the request's own 400/413/422)
    /// never do, listed or not.
    pub trip_statuses: StatusSet,
}

/// Default `trip_statuses` of every breaker profile: 408, 500, 502, 503, 504 (§1 "What
/// counts"). 501, 505, 520–527 and every other 4xx are left out: they say nothing about the
/// provider's health.
pub const DEFAULT_TRIP_STATUSES: [u16; 5] = [408, 500, 502, 503, 504];

/// Number of 64-bit words in a [`StatusSet`]: statuses 0–639.
const STATUS_WORDS: usize = 10;
/// One past the largest status a [`StatusSet`] can hold.
const STATUS_LIMIT: u16 = 640;

/// A set of HTTP statuses (100–599), such as a breaker's `trip_statuses`. Held as plain bits
/// so the settings that carry it stay `Copy` and a lookup is one shift; shown and serialized
/// as a sorted list of statuses.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct StatusSet([u64; STATUS_WORDS]);

impl StatusSet {
    /// The set of `statuses`; statuses past 639 are ignored (validation allows 100–599).
    pub fn of(statuses: &[u16]) -> Self {
        statuses.iter().copied().collect()
    }

    /// Whether `status` is in the set.
    pub fn contains(&self, status: u16) -> bool {
        let i = usize::from(status);
        self.0.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 == 1)
    }

    /// The statuses in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = u16> + '_ {
        (0..STATUS_LIMIT).filter(|s| self.contains(*s))
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
}

impl FromIterator<u16> for StatusSet {
    fn from_iter<I: IntoIterator<Item = u16>>(iter: I) -> Self {
        let mut set = Self::default();
        for s in iter {
            let i = usize::from(s);
            if let Some(w) = set.0.get_mut(i / 64) {
                *w |= 1 << (i % 64);
            }
        }
        set
    }
}

impl std::fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl Serialize for StatusSet {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// §2 backoff ladder for one profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CooldownProfile {
    /// First cooldown.
    #[serde(with = "humantime_serde")]
    pub base: Duration,
    /// Cap on the backoff level.
    pub max_backoff_level: u32,
}

/// §2 knobs shared by every profile.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConnectionCooldownSettings {
    /// Cap on a `cooling` deadline. Default 30m.
    #[serde(with = "humantime_serde")]
    pub max_cooldown: Duration,
    /// A hint longer than this means `quota_wait`. Default 10m.
    #[serde(with = "humantime_serde")]
    pub quota_wait_threshold: Duration,
    /// Cap on `quota_wait`. Default 7d.
    #[serde(with = "humantime_serde")]
    pub max_quota_wait: Duration,
    /// Consecutive 401s before `expired`. Default 3.
    pub expired_retry_max: u32,
    /// Body markers meaning the account is banned.
    pub ban_markers: Vec<String>,
    /// Body markers of a "request not allowed" 403.
    pub request_rejected_markers: Vec<String>,
    /// Body markers of quota exhaustion.
    pub quota_markers: Vec<String>,
    /// Body markers of a 429 that reports too many requests in flight at once (reason
    /// `concurrency_limited`: fail over, cool 1 s or the hint, no level change). A body that
    /// also matches a quota marker stays a quota verdict.
    pub concurrency_markers: Vec<String>,
    /// Cooldown of a rate-limited 429 without a retry hint, replacing the profile's ladder
    /// (and oauth's 60 s) for every connection whose provider and own entry set none;
    /// 1s–6h, `None` (default) = the ladder. A connection's and a provider's
    /// `rate_limit_cooldown` win over it; an upstream retry hint wins over all of them.
    #[serde(with = "humantime_serde")]
    pub rate_limit_cooldown: Option<Duration>,
    /// Cool a connection after a stream stall. Default false.
    pub stream_stall_cooldown: bool,
}

/// §3 model lockout settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelLockoutSettings {
    /// Master switch. Default false.
    pub enabled: bool,
    /// Statuses that count as model-scoped failures.
    pub error_codes: Vec<u16>,
    /// First lock duration. Default 120s.
    #[serde(with = "humantime_serde")]
    pub base_cooldown: Duration,
    /// Cap. Default 30m.
    #[serde(with = "humantime_serde")]
    pub max_cooldown: Duration,
    /// Cap on doublings. Default 10.
    pub max_backoff_steps: u32,
    /// Double per repeated failure. Default true.
    pub exponential: bool,
}

/// §5 admission queue settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueSettings {
    /// Queue-wait budget. Default 30s.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Execution budget. Default 10m.
    #[serde(with = "humantime_serde")]
    pub execution_max_wait: Duration,
    /// 0 = unlimited.
    pub max_queue_depth: u32,
    /// Queue every api_key connection. Default true.
    pub auto_enable_api_key_connections: bool,
    /// Effective cap of a protected connection without `max_concurrent`, until a
    /// concurrency-limit 429 teaches a lower one; 1–100000. Default 8.
    pub protection_default_cap: u32,
}

/// §6 stream guard settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StreamSettings {
    /// Zombie-200 timeout. Default 30s.
    #[serde(with = "humantime_serde")]
    pub readiness_timeout: Duration,
    /// Keepalive interval while upstream is silent. Default 15s.
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    /// No-content abandon timeout. Default 180s.
    #[serde(with = "humantime_serde")]
    pub content_stall_timeout: Duration,
    /// Re-open a stream that broke or ended before any content once on the same connection
    /// before trying the next target. Default true (sluice).
    pub recover_before_content: bool,
    /// Opt-in mid-stream continuation: an Anthropic text turn whose stream breaks after text
    /// reached the client is re-issued once with that text as an assistant prefill and the
    /// continuation spliced into the same client stream. Default false (sluice).
    pub continue_after_break: bool,
    /// Opt-in slow-stream watchdog.
    pub throughput_watchdog: ThroughputWatchdog,
}

/// §6 throughput watchdog (`[resilience.stream.throughput_watchdog]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ThroughputWatchdog {
    /// Master switch. Default false; `SLUICE_STREAM_THROUGHPUT_WATCHDOG` overrides the file.
    pub enabled: bool,
    /// No verdict before this much streaming. Default 30s (sluice's own choice).
    #[serde(with = "humantime_serde")]
    pub warmup: Duration,
    /// Rolling window the rate is measured over. Default 30s (sluice's own choice).
    #[serde(with = "humantime_serde")]
    pub window: Duration,
    /// Abort below this many text bytes per second. Default 10 (sluice's own choice).
    pub min_bytes_per_sec: u32,
}

/// §1b optional windowed provider cooldown (`[resilience.provider_cooldown]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProviderCooldownSettings {
    /// Master switch. Default false.
    pub enabled: bool,
    /// Thresholds per profile.
    pub profiles: BTreeMap<Profile, ProviderCooldownProfile>,
}

/// §1b thresholds for one profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ProviderCooldownProfile {
    /// Counted failures within `failure_window` that cool the provider.
    pub failure_threshold: u32,
    /// Window the failures are counted in.
    #[serde(with = "humantime_serde")]
    pub failure_window: Duration,
    /// How long the provider is skipped.
    #[serde(with = "humantime_serde")]
    pub cooldown: Duration,
}

/// §4 cooldown-aware wait (`[resilience.combo_cooldown_wait]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ComboCooldownWait {
    /// Master switch. Default true.
    pub enabled: bool,
    /// Longest single wait for the earliest transient expiry. Default 60s.
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Waits per request. Default 3.
    pub max_attempts: u32,
    /// Total waiting per request. Default 120s.
    #[serde(with = "humantime_serde")]
    pub budget: Duration,
}

/// A §7 restatement rule (serialised with the file's keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Restatement {
    /// Rule id.
    pub id: String,
    /// Only for this provider, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Statuses it applies to.
    pub from_statuses: Vec<u16>,
    /// Status it restates to.
    pub to_status: u16,
    /// Any of these in the body triggers it.
    pub text_markers: Vec<String>,
    /// Any of these in the body vetoes it.
    pub exclude_markers: Vec<String>,
    /// What the client is told to wait. Default 60s.
    #[serde(with = "humantime_serde")]
    pub default_retry_after: Duration,
}

/// A §7 provider error rule (kept as parsed; applied by the resilience core; serialised
/// with the file's keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorRule {
    /// Rule id.
    pub id: String,
    /// Only for this provider, if set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// Statuses it matches (empty = any).
    pub statuses: Vec<u16>,
    /// Body error types/codes it matches.
    pub error_types: Vec<String>,
    /// Header name → substring.
    pub header_markers: BTreeMap<String, String>,
    /// Body substrings.
    pub text_markers: Vec<String>,
    /// Body substrings that veto.
    pub exclude_markers: Vec<String>,
    /// Resulting reason.
    pub reason: String,
    /// `model` | `connection` | `provider`.
    pub scope: String,
    /// Optional override of the base cooldown.
    #[serde(with = "humantime_serde", skip_serializing_if = "Option::is_none")]
    pub base_cooldown: Option<Duration>,
}

/// The built-in §7 provider error rules, tried after the rules from the config file (or the
/// operator's saved list): `cn-model-access` — a 400/401/403 saying `无权访问模型` ("no access
/// to this model") is an auth error of that model only, locked for 6 h on that connection.
pub fn builtin_error_rules() -> Vec<ErrorRule> {
    vec![ErrorRule {
        id: "cn-model-access".into(),
        provider: None,
        statuses: vec![400, 401, 403],
        error_types: Vec::new(),
        header_markers: BTreeMap::new(),
        text_markers: vec!["无权访问模型".into()],
        exclude_markers: Vec::new(),
        reason: "auth_error".into(),
        scope: "model".into(),
        base_cooldown: Some(Duration::from_secs(6 * 3600)),
    }]
}

/// The built-in §7 restatement rules, tried after the rules from the config file.
pub fn builtin_restatements() -> Vec<Restatement> {
    vec![Restatement {
        id: "cn-quota".into(),
        provider: None,
        from_statuses: vec![400, 403],
        to_status: 429,
        text_markers: vec!["用户额度不足".into(), "额度不足".into()],
        exclude_markers: vec!["无权访问模型".into()],
        default_retry_after: Duration::from_secs(60),
    }]
}
