//! Raw serde mirror of `config.toml` (stage one of two): every table denies unknown keys.
//!
//! Field defaults live in `validate` (resilience ones in `validate/defaults.rs`), each citing its
//! source (`CONFIG.md`, or a section of `docs/RESILIENCE.md`). Values stay loosely typed here
//! (strings, `toml::Value`) so stage two can report the key path, the bad value and the fix in
//! one message.

#![allow(
    missing_docs,
    reason = "fields mirror config keys one to one; config.toml and CONFIG.md document them"
)]

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    #[serde(default)]
    pub server: RawServer,
    #[serde(default)]
    pub admin: RawAdmin,
    #[serde(default)]
    pub store: RawStore,
    #[serde(default)]
    pub log: RawLog,
    #[serde(default)]
    pub console: RawConsole,
    #[serde(default)]
    pub routing: RawRouting,
    #[serde(default)]
    pub providers: Vec<RawProvider>,
    #[serde(default)]
    pub combos: Vec<RawCombo>,
    #[serde(default)]
    pub resilience: RawResilience,
    #[serde(default)]
    pub restatement: Vec<RawRestatement>,
    #[serde(default)]
    pub error_rules: Vec<RawErrorRule>,
    #[serde(default)]
    pub session_leases: RawSessionLeases,
}

/// `[session_leases]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSessionLeases {
    pub enabled: Option<bool>,
    pub ttl: Option<String>,
    pub max_ttl: Option<String>,
    pub client_keys_env: Option<String>,
}

/// `[server]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawServer {
    pub listen: Option<String>,
    pub max_body: Option<String>,
    pub client_keys_env: Option<String>,
    pub drain_timeout: Option<String>,
    pub max_connections: Option<i64>,
    pub header_read_timeout: Option<String>,
    pub watch_config: Option<bool>,
}

/// `[admin]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: Option<String>,
    pub token_env: Option<String>,
}

/// `[store]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStore {
    pub path: Option<String>,
    pub request_log_max_rows: Option<i64>,
    pub request_log_max_age: Option<String>,
}

/// `[log]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLog {
    pub dir: Option<String>,
    pub level: Option<String>,
}

/// `[console]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConsole {
    pub theme: Option<String>,
    pub tick: Option<String>,
    #[serde(default)]
    pub keys: BTreeMap<String, toml::Value>,
}

/// `[routing]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRouting {
    pub default_provider: Option<toml::Value>,
}

/// `[[providers]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProvider {
    pub id: Option<String>,
    pub dialect: Option<String>,
    pub base_url: Option<String>,
    pub profile: Option<String>,
    pub connection_strategy: Option<String>,
    pub per_model_quota: Option<bool>,
    pub timeout: Option<String>,
    pub connect_timeout: Option<String>,
    pub slow_start: Option<String>,
    pub rate_limit_cooldown: Option<String>,
    #[serde(default)]
    pub quota_groups: BTreeMap<String, Vec<String>>,
    pub egress_bucketed: Option<bool>,
    pub anthropic_beta_allowlist: Option<Vec<String>>,
    pub max_concurrent: Option<i64>,
    pub breaker: Option<RawBreaker>,
    pub responses: Option<bool>,
    pub drop_fields: Option<Vec<String>>,
    pub default_max_tokens: Option<i64>,
    pub reasoning_effort: Option<bool>,
    pub max_reasoning_effort: Option<String>,
    pub max_output_tokens: Option<i64>,
    pub max_completion_tokens: Option<bool>,
    pub system_role: Option<String>,
    #[serde(default)]
    pub model_options: BTreeMap<String, RawModelOptions>,
    #[serde(default)]
    pub connections: Vec<RawConnection>,
}

/// `[providers.model_options."<model>"]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModelOptions {
    pub max_output_tokens: Option<i64>,
    pub reasoning_effort: Option<bool>,
    pub max_reasoning_effort: Option<String>,
    pub max_completion_tokens: Option<bool>,
}

/// `[[providers.connections]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConnection {
    pub id: Option<String>,
    pub auth: Option<toml::Value>,
    pub max_concurrent: Option<i64>,
    #[serde(default)]
    pub model_concurrency: BTreeMap<String, i64>,
    pub disable_cooling: Option<bool>,
    pub rate_limit_protection: Option<bool>,
    pub concurrency_fail_open: Option<bool>,
    pub low_priority_mode: Option<bool>,
    pub auto_limit_reset: Option<bool>,
    pub org_uuid: Option<String>,
    pub egress: Option<String>,
    pub queue: Option<RawConnectionQueue>,
    pub rate_limit_cooldown: Option<String>,
}

/// `queue = { .. }` on a connection: per-connection §5 overrides.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConnectionQueue {
    pub max_wait: Option<String>,
    pub execution_max_wait: Option<String>,
    pub max_queue_depth: Option<i64>,
}

/// `[[combos]]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCombo {
    pub name: Option<String>,
    pub strategy: Option<String>,
    #[serde(default)]
    pub targets: Vec<toml::Value>,
    pub hold_until_reset: Option<bool>,
    pub max_hold: Option<String>,
    pub cooldown_wait: Option<bool>,
}

/// `[resilience]`: the tables of §1–§6 of `docs/RESILIENCE.md`. Parsed and validated here so a
/// file that sets any key documented there loads today.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawResilience {
    #[serde(default)]
    pub breaker: BTreeMap<String, RawBreaker>,
    #[serde(default)]
    pub provider_cooldown: RawProviderCooldown,
    #[serde(default)]
    pub connection_cooldown: RawConnectionCooldown,
    #[serde(default)]
    pub model_lockout: RawModelLockout,
    #[serde(default)]
    pub queue: RawQueue,
    #[serde(default)]
    pub stream: RawStream,
    #[serde(default)]
    pub combo_cooldown_wait: RawComboCooldownWait,
    #[serde(default)]
    pub concurrency: RawConcurrency,
    pub session_affinity_ttl: Option<String>,
    #[serde(default)]
    pub quota_preflight: RawQuotaPreflight,
    pub p2c_latency_weight: Option<i64>,
}

/// `[resilience.quota_preflight]`
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQuotaPreflight {
    pub enabled: Option<bool>,
    pub cutoff: Option<f64>,
    pub warn: Option<f64>,
}

/// `[resilience.concurrency]` (§4 gate order: global → provider → connection → model)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConcurrency {
    pub global_max: Option<i64>,
}

/// `[resilience.breaker.<profile>]` (§1)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBreaker {
    pub degrade_at: Option<i64>,
    pub open_at: Option<i64>,
    pub reset_timeout: Option<String>,
    pub degraded_quiet_window: Option<String>,
    pub probe_timeout: Option<String>,
    pub max_backoff_multiplier: Option<i64>,
    pub trip_statuses: Option<Vec<i64>>,
}

/// `[resilience.provider_cooldown]` (§1b); per-profile tables inside.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProviderCooldown {
    pub enabled: Option<bool>,
    #[serde(default)]
    pub oauth: Option<RawProviderCooldownProfile>,
    #[serde(default)]
    pub api_key: Option<RawProviderCooldownProfile>,
    #[serde(default)]
    pub local: Option<RawProviderCooldownProfile>,
}

/// `[resilience.provider_cooldown.<profile>]` (§1b)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawProviderCooldownProfile {
    pub failure_threshold: Option<i64>,
    pub failure_window: Option<String>,
    pub cooldown: Option<String>,
}

/// `[resilience.connection_cooldown]` (§2); per-profile tables inside.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawConnectionCooldown {
    pub max_cooldown: Option<String>,
    pub quota_wait_threshold: Option<String>,
    pub max_quota_wait: Option<String>,
    pub expired_retry_max: Option<i64>,
    pub ban_markers: Option<Vec<String>>,
    pub request_rejected_markers: Option<Vec<String>>,
    pub quota_markers: Option<Vec<String>>,
    pub concurrency_markers: Option<Vec<String>>,
    pub rate_limit_cooldown: Option<String>,
    pub stream_stall_cooldown: Option<bool>,
    pub oauth: Option<RawCooldownProfile>,
    pub api_key: Option<RawCooldownProfile>,
    pub local: Option<RawCooldownProfile>,
}

/// `[resilience.connection_cooldown.<profile>]` (§2)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawCooldownProfile {
    pub base: Option<String>,
    pub max_backoff_level: Option<i64>,
}

/// `[resilience.model_lockout]` (§3)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawModelLockout {
    pub enabled: Option<bool>,
    pub error_codes: Option<Vec<i64>>,
    pub base_cooldown: Option<String>,
    pub max_cooldown: Option<String>,
    pub max_backoff_steps: Option<i64>,
    pub exponential: Option<bool>,
}

/// `[resilience.queue]` (§5)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    pub max_wait: Option<String>,
    pub execution_max_wait: Option<String>,
    pub max_queue_depth: Option<i64>,
    pub auto_enable_api_key_connections: Option<bool>,
    pub protection_default_cap: Option<i64>,
}

/// `[resilience.stream]` (§6)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawStream {
    pub readiness_timeout: Option<String>,
    pub heartbeat_interval: Option<String>,
    pub content_stall_timeout: Option<String>,
    pub recover_before_content: Option<bool>,
    pub continue_after_break: Option<bool>,
    pub throughput_watchdog: Option<RawThroughputWatchdog>,
}

/// `[resilience.stream.throughput_watchdog]` (§6)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawThroughputWatchdog {
    pub enabled: Option<bool>,
    pub warmup: Option<String>,
    pub window: Option<String>,
    pub min_bytes_per_sec: Option<i64>,
}

/// `[resilience.combo_cooldown_wait]` (§4)
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawComboCooldownWait {
    pub enabled: Option<bool>,
    pub max_wait: Option<String>,
    pub max_attempts: Option<i64>,
    pub budget: Option<String>,
}

/// `[[restatement]]` (§7); also the shape of a live edit (`PATCH /api/resilience`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRestatement {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default)]
    pub from_statuses: Vec<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_status: Option<i64>,
    #[serde(default)]
    pub text_markers: Vec<String>,
    #[serde(default)]
    pub exclude_markers: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_retry_after: Option<String>,
}

/// `[[error_rules]]` (§7); also the shape of a live edit (`PATCH /api/resilience`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawErrorRule {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default)]
    pub statuses: Vec<i64>,
    #[serde(default)]
    pub error_types: Vec<String>,
    #[serde(default)]
    pub header_markers: BTreeMap<String, String>,
    #[serde(default)]
    pub text_markers: Vec<String>,
    #[serde(default)]
    pub exclude_markers: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_cooldown: Option<String>,
}
