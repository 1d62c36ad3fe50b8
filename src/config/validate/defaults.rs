//! Resilience defaults (§1–§6 of `docs/RESILIENCE.md`), each a named constant or `default_*`
//! function citing its section, and the environment variables that may replace them.

use std::time::Duration;

use super::super::{
    BreakerSettings, CooldownProfile, DEFAULT_TRIP_STATUSES, Profile, ProviderCooldownProfile,
    StatusSet,
};

/// §2: cap on a `cooling` deadline.
pub const DEFAULT_MAX_COOLDOWN: Duration = Duration::from_secs(30 * 60);
/// §2: a retry hint longer than this means `quota_wait`.
pub const DEFAULT_QUOTA_WAIT_THRESHOLD: Duration = Duration::from_secs(10 * 60);
/// §2: cap on `quota_wait`.
pub const DEFAULT_MAX_QUOTA_WAIT: Duration = Duration::from_secs(7 * 24 * 3600);
/// §2: consecutive 401s before `expired`.
pub const DEFAULT_EXPIRED_RETRY_MAX: u32 = 3;
/// §2: ban markers.
pub const DEFAULT_BAN_MARKERS: [&str; 3] = [
    "account has been disabled",
    "account has been suspended",
    "organization has been disabled",
];
/// §2: "request not allowed" markers.
pub const DEFAULT_REQUEST_REJECTED_MARKERS: [&str; 1] = ["request not allowed"];
/// §2: quota markers.
pub const DEFAULT_QUOTA_MARKERS: [&str; 6] = [
    "quota",
    "insufficient_quota",
    "usage limit",
    "limit reached",
    "resource has been exhausted",
    "额度",
];
/// Body markers of a 429 about too many concurrent requests (reason `concurrency_limited`).
pub const DEFAULT_CONCURRENCY_MARKERS: [&str; 4] = [
    "too many concurrent requests",
    "concurrency limit",
    "parallel request limit",
    "并发数过高",
];
/// Shortest `rate_limit_cooldown` (1 s).
pub const MIN_RATE_LIMIT_COOLDOWN: Duration = Duration::from_secs(1);
/// Longest `rate_limit_cooldown` (6 h).
pub const MAX_RATE_LIMIT_COOLDOWN: Duration = Duration::from_secs(6 * 3600);
/// §3: statuses that count as model-scoped failures.
pub const DEFAULT_LOCKOUT_ERROR_CODES: [u16; 6] = [403, 404, 429, 502, 503, 504];
/// §3: first lock duration.
pub const DEFAULT_LOCKOUT_BASE_COOLDOWN: Duration = Duration::from_secs(120);
/// §3: lock cap.
pub const DEFAULT_LOCKOUT_MAX_COOLDOWN: Duration = Duration::from_secs(30 * 60);
/// §3: cap on doublings.
pub const DEFAULT_LOCKOUT_MAX_BACKOFF_STEPS: u32 = 10;
/// §5: queue-wait budget.
pub const DEFAULT_QUEUE_MAX_WAIT: Duration = Duration::from_secs(30);
/// §5: execution budget.
pub const DEFAULT_QUEUE_EXECUTION_MAX_WAIT: Duration = Duration::from_secs(10 * 60);
/// §5: queue depth cap (0 = unlimited).
pub const DEFAULT_QUEUE_MAX_DEPTH: u32 = 0;
/// §4/§5: effective cap of a rate-limit-protected connection without `max_concurrent`
/// until a concurrency-limit 429 teaches a lower one (`protection_default_cap`).
pub const DEFAULT_PROTECTION_CAP: u32 = 32;
/// Largest `protection_default_cap` accepted.
pub const MAX_PROTECTION_CAP: u32 = 100_000;
/// §6: zombie-200 timeout.
pub const DEFAULT_READINESS_TIMEOUT: Duration = Duration::from_secs(30);
/// §6: heartbeat interval.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(15);
/// §6: content stall timeout.
pub const DEFAULT_CONTENT_STALL_TIMEOUT: Duration = Duration::from_secs(180);
/// §6 throughput watchdog warm-up (sluice's own choice).
pub const DEFAULT_WATCHDOG_WARMUP: Duration = Duration::from_secs(30);
/// §6 throughput watchdog window (sluice's own choice).
pub const DEFAULT_WATCHDOG_WINDOW: Duration = Duration::from_secs(30);
/// §6 throughput watchdog floor (sluice's own choice).
pub const DEFAULT_WATCHDOG_MIN_BYTES_PER_SEC: u32 = 10;
/// §4 cooldown-aware wait: longest single wait.
pub const DEFAULT_COMBO_WAIT_MAX_WAIT: Duration = Duration::from_secs(60);
/// §4 cooldown-aware wait: waits per request.
pub const DEFAULT_COMBO_WAIT_MAX_ATTEMPTS: u32 = 3;
/// §4 cooldown-aware wait: total budget.
pub const DEFAULT_COMBO_WAIT_BUDGET: Duration = Duration::from_secs(120);
/// §2a session affinity TTL (1h; `"0s"` disables).
pub const DEFAULT_SESSION_AFFINITY_TTL: Duration = Duration::from_secs(3600);

/// §5 env var that supplies the default `max_wait`.
pub const ENV_QUEUE_MAX_WAIT: &str = "SLUICE_QUEUE_MAX_WAIT";
/// §5 env var that supplies the default `execution_max_wait`.
pub const ENV_QUEUE_EXECUTION_MAX_WAIT: &str = "SLUICE_QUEUE_EXECUTION_MAX_WAIT";
/// §5 env var that supplies the default `max_queue_depth`.
pub const ENV_QUEUE_MAX_DEPTH: &str = "SLUICE_QUEUE_MAX_DEPTH";
/// §5 env var that overrides `auto_enable_api_key_connections`.
pub const ENV_RATE_LIMIT_AUTO_ENABLE: &str = "SLUICE_RATE_LIMIT_AUTO_ENABLE";
/// §6 env var that overrides `throughput_watchdog.enabled`.
pub const ENV_STREAM_THROUGHPUT_WATCHDOG: &str = "SLUICE_STREAM_THROUGHPUT_WATCHDOG";

/// Breaker defaults per profile (§1: per-profile thresholds, quiet window, probe timeout and
/// multiplier cap).
pub fn default_breaker(p: Profile) -> BreakerSettings {
    let (degrade_at, open_at, reset) = match p {
        Profile::Oauth => (5, 8, 60),
        Profile::ApiKey => (7, 12, 30),
        Profile::Local => (1, 2, 15),
    };
    BreakerSettings {
        degrade_at,
        open_at,
        reset_timeout: Duration::from_secs(reset),
        degraded_quiet_window: Duration::from_secs(60),
        probe_timeout: Duration::from_secs(60),
        max_backoff_multiplier: 16,
        trip_statuses: StatusSet::of(&DEFAULT_TRIP_STATUSES),
    }
}

/// Cooldown ladder defaults per profile (§2 "Ladder").
pub fn default_cooldown(p: Profile) -> CooldownProfile {
    let (base, max_backoff_level) = match p {
        Profile::Oauth => (5, 8),
        Profile::ApiKey => (3, 5),
        Profile::Local => (1, 3),
    };
    CooldownProfile {
        base: Duration::from_secs(base),
        max_backoff_level,
    }
}

/// Windowed provider cooldown defaults per profile (§1b).
pub fn default_provider_cooldown(p: Profile) -> ProviderCooldownProfile {
    let (failure_threshold, window_min, cooldown_min) = match p {
        Profile::Oauth => (10, 15, 5),
        Profile::ApiKey => (15, 30, 10),
        Profile::Local => (2, 5, 1),
    };
    ProviderCooldownProfile {
        failure_threshold,
        failure_window: Duration::from_secs(window_min * 60),
        cooldown: Duration::from_secs(cooldown_min * 60),
    }
}
