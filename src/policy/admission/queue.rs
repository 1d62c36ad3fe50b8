//! `QueuePolicy`: the §5 admission-queue settings of one connection, resolved by precedence,
//! plus the pure timeout checks and the admission error codes.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Instant;
use crate::config::{Connection, Profile, QueueSettings};
use crate::policy::cooldown::deadline_after;

/// Shortest queue duration accepted (§5 "Durations clamp to 1ms–24h").
pub const MIN_QUEUE_DURATION: Duration = Duration::from_millis(1);

/// Longest queue duration accepted (§5), 24 h.
pub const MAX_QUEUE_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Largest `max_queue_depth` (§5 range 0–100000; 0 = unlimited).
pub const MAX_QUEUE_DEPTH: u32 = 100_000;

/// Clamps a queue duration to 1 ms–24 h (§5).
pub fn clamp_duration(d: Duration) -> Duration {
    d.clamp(MIN_QUEUE_DURATION, MAX_QUEUE_DURATION)
}

/// Clamps a queue depth to 0–100000 (§5; 0 = unlimited).
pub fn clamp_depth(n: u32) -> u32 {
    n.min(MAX_QUEUE_DEPTH)
}

/// Whether a connection sits behind the §5 queue ("Auto-protection"): an explicit
/// `rate_limit_protection = true` enables it regardless; otherwise
/// `auto_enable_api_key_connections` enables it for every `api_key`-profile connection.
/// `Some(false)` behaves exactly like unset. Whether the connection is *active* (not terminal)
/// is the router's concern, not this function's.
pub fn protection_enabled(
    profile: Profile,
    rate_limit_protection: Option<bool>,
    auto_enable_api_key_connections: bool,
) -> bool {
    rate_limit_protection == Some(true)
        || (auto_enable_api_key_connections && profile == Profile::ApiKey)
}

/// How a connection's caps react when a request cannot get a permit in time or the queue is
/// full (§4 fail-open, §5 codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Enforcement {
    /// Behind the §5 queue ([`protection_enabled`]): the queue is the protection, so
    /// `concurrency_fail_open` does not bypass it. `RATE_LIMIT_QUEUE_TIMEOUT` /
    /// `RATE_LIMIT_QUEUE_FULL` (429).
    RateLimitQueue,
    /// Not protected, `concurrency_fail_open = false`: the cap is strict.
    /// `SEMAPHORE_TIMEOUT` / `SEMAPHORE_QUEUE_FULL`.
    Strict,
    /// Not protected, `concurrency_fail_open = true` (the default): a request that timed out
    /// waiting, or found the queue full, proceeds without a permit.
    FailOpen,
}

impl Enforcement {
    /// From the connection's protection flag and `concurrency_fail_open`.
    pub fn resolve(protected: bool, concurrency_fail_open: bool) -> Self {
        match (protected, concurrency_fail_open) {
            (true, _) => Self::RateLimitQueue,
            (false, false) => Self::Strict,
            (false, true) => Self::FailOpen,
        }
    }

    /// Code for a waiter past `max_wait`; `None` = proceed without a permit.
    pub fn timeout_code(self) -> Option<AdmissionCode> {
        match self {
            Self::RateLimitQueue => Some(AdmissionCode::QueueTimeout),
            Self::Strict => Some(AdmissionCode::SemaphoreTimeout),
            Self::FailOpen => None,
        }
    }

    /// Code for an arrival that finds the queue full; `None` = proceed without a permit.
    pub fn queue_full_code(self) -> Option<AdmissionCode> {
        match self {
            Self::RateLimitQueue => Some(AdmissionCode::QueueFull),
            Self::Strict => Some(AdmissionCode::SemaphoreQueueFull),
            Self::FailOpen => None,
        }
    }
}

/// Error codes of admission (§4, §5). None of them is an upstream failure: the core never
/// reports them to the breaker, cooldown or lockout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum AdmissionCode {
    /// A request behind the §5 queue waited longer than `max_wait` and never reached
    /// upstream. 429 with `retry-after`.
    #[serde(rename = "RATE_LIMIT_QUEUE_TIMEOUT")]
    QueueTimeout,
    /// A dispatched request ran past its execution deadline ([`execution_deadline`]).
    /// 504, no `retry-after`. Applies to every connection, protected or not.
    #[serde(rename = "RATE_LIMIT_EXECUTION_TIMEOUT")]
    ExecutionTimeout,
    /// A new request found `max_queue_depth` requests already waiting on a §5-protected
    /// connection; refused at once, before any body rewriting. 429 with `retry-after`.
    #[serde(rename = "RATE_LIMIT_QUEUE_FULL")]
    QueueFull,
    /// A request waiting for a permit on a fail-closed connection
    /// (`concurrency_fail_open = false`, not §5-protected) waited longer than `max_wait`.
    /// 503 with `retry-after`.
    #[serde(rename = "SEMAPHORE_TIMEOUT")]
    SemaphoreTimeout,
    /// A new request found the permit queue of a fail-closed connection full. 503 with
    /// `retry-after`.
    #[serde(rename = "SEMAPHORE_QUEUE_FULL")]
    SemaphoreQueueFull,
}

impl AdmissionCode {
    /// The wire code (`sluice.code`).
    pub fn code(self) -> &'static str {
        match self {
            Self::QueueTimeout => "RATE_LIMIT_QUEUE_TIMEOUT",
            Self::ExecutionTimeout => "RATE_LIMIT_EXECUTION_TIMEOUT",
            Self::QueueFull => "RATE_LIMIT_QUEUE_FULL",
            Self::SemaphoreTimeout => "SEMAPHORE_TIMEOUT",
            Self::SemaphoreQueueFull => "SEMAPHORE_QUEUE_FULL",
        }
    }

    /// HTTP status: 429 for the §5 queue codes, 504 for the execution timeout, 503 for the
    /// strict-cap (semaphore) codes (sluice's own choice).
    pub fn status(self) -> u16 {
        match self {
            Self::QueueTimeout | Self::QueueFull => 429,
            Self::ExecutionTimeout => 504,
            Self::SemaphoreTimeout | Self::SemaphoreQueueFull => 503,
        }
    }

    /// Short reason word for logs and diagnostics: `queue_full`, `queue_timeout` or
    /// `execution_timeout`.
    pub fn reason(self) -> &'static str {
        match self {
            Self::QueueTimeout | Self::SemaphoreTimeout => "queue_timeout",
            Self::QueueFull | Self::SemaphoreQueueFull => "queue_full",
            Self::ExecutionTimeout => "execution_timeout",
        }
    }

    /// True when the response carries `retry-after` (all but the execution timeout).
    pub fn has_retry_after(self) -> bool {
        !matches!(self, Self::ExecutionTimeout)
    }

    /// True for the queue-wait timeouts (counted as `timeouts`, not `rejections`).
    pub fn is_timeout(self) -> bool {
        matches!(
            self,
            Self::QueueTimeout | Self::SemaphoreTimeout | Self::ExecutionTimeout
        )
    }
}

/// One layer of §5 queue settings; `None` = not set at this layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct QueueOverride {
    /// Queue-wait budget.
    #[serde(with = "humantime_serde")]
    pub max_wait: Option<Duration>,
    /// Execution budget.
    #[serde(with = "humantime_serde")]
    pub execution_max_wait: Option<Duration>,
    /// Queue depth (0 = unlimited).
    pub max_queue_depth: Option<u32>,
}

/// The §5 settings in force for one connection, after precedence and clamping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueuePolicy {
    /// Queue-wait budget, 1 ms–24 h. Default 30 s (§5).
    #[serde(with = "humantime_serde")]
    pub max_wait: Duration,
    /// Execution budget from dispatch, 1 ms–24 h. Default 10 min (§5); see
    /// [`execution_deadline`].
    #[serde(with = "humantime_serde")]
    pub execution_max_wait: Duration,
    /// Refuse new requests when this many wait; 0 = unlimited, at most 100000 (§5).
    pub max_queue_depth: u32,
    /// What happens on a timeout or a full queue.
    pub enforcement: Enforcement,
}

impl QueuePolicy {
    /// §5 precedence, lowest first: `defaults` (config: the file's value or the
    /// `SLUICE_QUEUE_*` env default) < `saved` (console/API) < `connection` (per-connection
    /// override). Each field is taken from the highest layer that sets it, then clamped.
    pub fn resolve(
        defaults: &QueueSettings,
        saved: &QueueOverride,
        connection: &QueueOverride,
        enforcement: Enforcement,
    ) -> Self {
        Self {
            max_wait: clamp_duration(
                connection
                    .max_wait
                    .or(saved.max_wait)
                    .unwrap_or(defaults.max_wait),
            ),
            execution_max_wait: clamp_duration(
                connection
                    .execution_max_wait
                    .or(saved.execution_max_wait)
                    .unwrap_or(defaults.execution_max_wait),
            ),
            max_queue_depth: clamp_depth(
                connection
                    .max_queue_depth
                    .or(saved.max_queue_depth)
                    .unwrap_or(defaults.max_queue_depth),
            ),
            enforcement,
        }
    }

    /// [`Self::resolve`] for `conn` on a provider of `profile`: protection from
    /// [`protection_enabled`] and fail-open from `conn.concurrency_fail_open`.
    pub fn for_connection(
        defaults: &QueueSettings,
        saved: &QueueOverride,
        connection: &QueueOverride,
        profile: Profile,
        conn: &Connection,
    ) -> Self {
        let protected = protection_enabled(
            profile,
            conn.rate_limit_protection,
            defaults.auto_enable_api_key_connections,
        );
        Self::resolve(
            defaults,
            saved,
            connection,
            Enforcement::resolve(protected, conn.concurrency_fail_open),
        )
    }
}

/// True once a request queued at `enqueued_at` has waited `max_wait` or longer at `now` (§5
/// queue-wait budget; the timer stops at dispatch and never limits execution).
pub fn queue_timed_out(enqueued_at: Instant, now: Instant, max_wait: Duration) -> bool {
    now.saturating_duration_since(enqueued_at) >= max_wait
}

/// When a request dispatched at `dispatched_at` is cut with `RATE_LIMIT_EXECUTION_TIMEOUT`:
/// `execution_max_wait` after dispatch, raised to the provider's whole-request
/// `provider_timeout` when that is longer, so it never cuts a healthy stream (§5). Independent
/// of the queue wait. Saturates at the far future instead of overflowing.
pub fn execution_deadline(
    dispatched_at: Instant,
    execution_max_wait: Duration,
    provider_timeout: Duration,
) -> Instant {
    deadline_after(dispatched_at, execution_max_wait.max(provider_timeout))
}

/// True once `now` reaches the [`execution_deadline`].
pub fn execution_timed_out(
    dispatched_at: Instant,
    now: Instant,
    execution_max_wait: Duration,
    provider_timeout: Duration,
) -> bool {
    now >= execution_deadline(dispatched_at, execution_max_wait, provider_timeout)
}
