//! `Config`: the validated, typed configuration, and `load` (discovery + two-stage parse).
//!
//! Stage one ([`raw`]) is serde with `deny_unknown_fields`; stage two ([`validate`]) turns the
//! raw tables into typed values and reports *every* problem as `file: key.path: 'value' is …;
//! fix`. Secrets are never read from the file: a connection names an environment variable,
//! resolved here at load time, and the value is kept in a [`Secret`] that never prints.

pub mod advice;
pub mod key_values;
pub mod keys;
pub mod raw;
pub mod reload;
pub mod resilience;
pub mod validate;

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use resilience::*;
pub use validate::{Lenient, LoadEnv, SecretMode, from_str, from_str_with};

/// One problem found in a config file: where, what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Dotted key path, e.g. `providers.anthropic.base_url`.
    pub key: String,
    /// What is wrong, quoting the offending value in single quotes.
    pub message: String,
    /// What to do about it.
    pub fix: String,
}

/// Why a config could not be loaded. Display gives one line per problem, each naming the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{file}: cannot read config: {source}; check the path or pass --config PATH")]
    Io {
        /// Path of the config file.
        file: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
    /// TOML syntax or type error (the toml crate's message includes line and column).
    #[error("{file}: {message}")]
    Parse {
        /// Path of the config file.
        file: String,
        /// The parser's message.
        message: String,
    },
    /// One or more validation problems.
    #[error("{}", render_problems(file, problems))]
    Invalid {
        /// Path of the config file.
        file: String,
        /// Every problem found, in file order.
        problems: Vec<Problem>,
    },
    /// No config file was found anywhere on the discovery path.
    #[error(
        "no config file found (looked at: {looked}); pass --config PATH or create ./config.toml"
    )]
    NotFound {
        /// The places looked at, comma-separated.
        looked: String,
    },
}

fn render_problems(file: &str, problems: &[Problem]) -> String {
    problems
        .iter()
        .map(|p| format!("{file}: {}: {}; {}", p.key, p.message, p.fix))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A secret value (API key, token). Debug and Display never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }
    /// The secret itself; only for building an upstream request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
    /// A masked form for display: the last 4 characters, e.g. `…a1b2`.
    pub fn masked(&self) -> String {
        let tail: String = self
            .0
            .chars()
            .rev()
            .take(4)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        if self.0.chars().count() <= 8 {
            "****".into()
        } else {
            format!("…{tail}")
        }
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(****)")
    }
}

/// Wire dialect of a provider or route: the request format it speaks (`CONFIG.md#providers`,
/// key `dialect`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dialect {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI chat completions / responses.
    #[serde(rename = "openai")]
    OpenAi,
}

impl Dialect {
    /// `anthropic` or `openai`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::OpenAi => "openai",
        }
    }
}

/// Breaker and cooldown default profile of a provider (§1, §2 of `docs/RESILIENCE.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// OAuth / subscription accounts.
    Oauth,
    /// API keys.
    ApiKey,
    /// Local servers (Ollama, LM Studio).
    Local,
}

impl Profile {
    /// `oauth`, `api_key` or `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Oauth => "oauth",
            Self::ApiKey => "api_key",
            Self::Local => "local",
        }
    }
    /// All profiles, in display order.
    pub const ALL: [Profile; 3] = [Profile::Oauth, Profile::ApiKey, Profile::Local];
}

/// How a connection authenticates upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// Forward the client's own `x-api-key` / `Authorization`.
    Passthrough,
    /// Replace the client's credentials with this key, sent in the header `scheme` says.
    Key {
        /// Name of the environment variable the key came from (safe to show).
        env: String,
        /// The key itself.
        secret: Secret,
        /// Which header carries it (`auth = { env = "VAR", scheme = "bearer" }`).
        scheme: KeyScheme,
    },
}

/// The header a connection's own key travels in.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KeyScheme {
    /// The dialect's header: `x-api-key` for Anthropic, `Authorization: Bearer` for OpenAI.
    #[default]
    Dialect,
    /// `Authorization: Bearer` in every dialect; on Anthropic also the OAuth beta flag
    /// subscription tokens need (`claude setup-token` tokens, `sk-ant-oat…`).
    Bearer,
}

impl Auth {
    /// `passthrough`, `env:VAR` or `env:VAR (bearer)` — never the secret.
    pub fn describe(&self) -> String {
        match self {
            Self::Passthrough => "passthrough".into(),
            Self::Key {
                env,
                scheme: KeyScheme::Dialect,
                ..
            } => format!("env:{env}"),
            Self::Key {
                env,
                scheme: KeyScheme::Bearer,
                ..
            } => format!("env:{env} (bearer)"),
        }
    }
}

/// Order in which candidates are tried (§4 "Strategies").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// In configured order.
    Priority,
    /// Rotate the start position.
    RoundRobin,
    /// By weight.
    Weighted,
    /// Fewest requests so far.
    LeastUsed,
    /// Uniform random.
    Random,
    /// Power of two choices on in-flight.
    P2c,
    /// Fill the first until it is saturated.
    FillFirst,
    /// The connection whose binding quota window resets soonest first (quota that would
    /// expire unused is spent first); unknown resets after, in priority order.
    ResetAware,
    /// The connection with the most quota left in its binding window first; nothing known
    /// counts as full; ties in priority order.
    Headroom,
}

impl Strategy {
    /// Parses a strategy name as written in the config.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "priority" => Self::Priority,
            "round_robin" => Self::RoundRobin,
            "weighted" => Self::Weighted,
            "least_used" => Self::LeastUsed,
            "random" => Self::Random,
            "p2c" => Self::P2c,
            "fill_first" => Self::FillFirst,
            "reset_aware" => Self::ResetAware,
            "headroom" => Self::Headroom,
            _ => return None,
        })
    }
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Priority => "priority",
            Self::RoundRobin => "round_robin",
            Self::Weighted => "weighted",
            Self::LeastUsed => "least_used",
            Self::Random => "random",
            Self::P2c => "p2c",
            Self::FillFirst => "fill_first",
            Self::ResetAware => "reset_aware",
            Self::Headroom => "headroom",
        }
    }
}

/// One credential on a provider.
#[derive(Debug, Clone)]
pub struct Connection {
    /// Unique across the whole file.
    pub id: String,
    /// How it authenticates.
    pub auth: Auth,
    /// Concurrency cap (§4); `None` = unlimited.
    pub max_concurrent: Option<u32>,
    /// Per-model caps keyed by upstream model id (§4).
    pub model_concurrency: BTreeMap<String, u32>,
    /// Record errors but never cool (§2). Default false.
    pub disable_cooling: bool,
    /// Put the connection behind the admission queue (§5); `None` = unset.
    pub rate_limit_protection: Option<bool>,
    /// Proceed without a permit after a queue timeout (§4). Default true.
    pub concurrency_fail_open: bool,
    /// Egress label for egress-bucketed providers (§7). Default `direct`.
    pub egress: String,
    /// Per-connection §5 queue overrides (win over saved settings and the file).
    pub queue: ConnectionQueue,
    /// Anthropic subscription low-priority lane (§2c). Default false.
    pub low_priority_mode: bool,
    /// Anthropic subscription session-limit reset on the 5-hour wall (§2e). Default false.
    pub auto_limit_reset: bool,
    /// The subscription account's organization UUID (lowercase), the `{org_uuid}` of the
    /// session-limit reset request (§2e). Required when `auto_limit_reset` is on; `None`
    /// when unset.
    pub org_uuid: Option<String>,
    /// Cooldown of a rate-limited 429 without a retry hint on this connection, 1s–6h;
    /// wins over the provider's and `[resilience.connection_cooldown]`'s value. `None`
    /// (default) = inherit.
    pub rate_limit_cooldown: Option<Duration>,
}

/// Per-connection overrides of `[resilience.queue]` (§5 precedence: a per-connection
/// override wins over a saved setting, which wins over the file and the environment).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionQueue {
    /// Queue-wait budget, clamped to 1ms–24h.
    pub max_wait: Option<Duration>,
    /// Execution budget, clamped to 1ms–24h.
    pub execution_max_wait: Option<Duration>,
    /// Queue depth, 0–100000 (0 = unlimited).
    pub max_queue_depth: Option<u32>,
}

/// An upstream API.
#[derive(Debug, Clone)]
pub struct Provider {
    /// Unique across the whole file.
    pub id: String,
    /// Wire dialect.
    pub dialect: Dialect,
    /// Base URL without a trailing slash, e.g. `https://api.anthropic.com`; the route path
    /// (`/v1/messages`) is appended. A base URL ending in `/v1` is accepted and not doubled.
    pub base_url: http::Uri,
    /// Breaker/cooldown profile.
    pub profile: Profile,
    /// Order its connections are tried in (§0 "Candidates and fallback").
    pub connection_strategy: Strategy,
    /// Quotas are per model (§3). Default false.
    pub per_model_quota: bool,
    /// Whole-request timeout. Default 10m (sluice's choice, `CONFIG.md#providers`).
    pub timeout: Duration,
    /// TCP+TLS connect timeout. Default 10s (sluice's choice, `CONFIG.md#providers`).
    pub connect_timeout: Duration,
    /// Slow start after recovery: when its breaker closes after a successful probe, or one
    /// of its connections' cooldown ends, the provider (or connection) is admitted for a
    /// share of the traffic offered that rises from 10 % to 100 % over this window.
    /// Default zero = off (`slow_start = "30s"` to turn it on).
    pub slow_start: Duration,
    /// Cooldown of a rate-limited 429 without a retry hint on its connections, 1s–6h; a
    /// connection's own value wins over it, it wins over `[resilience.connection_cooldown]`'s.
    /// `None` (default) = inherit.
    pub rate_limit_cooldown: Option<Duration>,
    /// Quota groups: group name → model glob patterns (§3).
    pub quota_groups: BTreeMap<String, Vec<String>>,
    /// IP-scoped quotas (§7 "Egress buckets"). Default false.
    pub egress_bucketed: bool,
    /// Requests in flight across all its connections (the §4 provider cap); `None` =
    /// unlimited (default).
    pub max_concurrent: Option<u32>,
    /// `[providers.breaker]`: this provider's own breaker keys, laid over its profile's
    /// `[resilience.breaker.<profile>]`: this provider's thresholds over its profile's (§1).
    pub breaker: BreakerOverride,
    /// `anthropic-beta` values this provider accepts: when set, other values are
    /// dropped from the header before forwarding (logged once each); unset forwards the
    /// header verbatim. Matching is exact, or by prefix for entries ending in `*`.
    pub anthropic_beta_allowlist: Option<Vec<String>>,
    /// How requests of the other dialect are translated for this provider.
    pub translation: Translation,
    /// At least one.
    pub connections: Vec<Connection>,
}

/// A provider's translation keys (`responses`, `drop_fields`, `default_max_tokens`,
/// `reasoning_effort`); they matter only when a client of the other format is routed to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translation {
    /// `openai` providers: whether the provider speaks the Responses API
    /// (`/v1/responses`). True (default): Responses clients pass through unchanged; false:
    /// they are translated to Chat Completions (Ollama, DeepSeek, vLLM, …). Always false
    /// for `anthropic` providers (they are always translated).
    pub responses: bool,
    /// Top-level fields removed from a translated request because the provider rejects
    /// them, e.g. `stream_options`. Default empty.
    pub drop_fields: Vec<String>,
    /// `max_tokens` sent on a translated request that names none. Default: none for
    /// `openai` providers, 8192 for `anthropic` providers.
    pub default_max_tokens: Option<u32>,
    /// `openai` providers: whether they take `reasoning_effort` (a thinking request is
    /// mapped to it); default false (dropped).
    pub reasoning_effort: bool,
    /// `openai` providers: the highest `reasoning_effort` the models take; a client's
    /// `max` / `xhigh` effort becomes this. Default `high`.
    pub max_reasoning_effort: ReasoningEffort,
    /// Largest `max_tokens` a translated request may ask for (tokens); a larger one is
    /// clamped and the clamp shows in the request's details. `None` (default): no clamp.
    pub max_output_tokens: Option<u32>,
    /// `openai` providers: send the output limit as `max_completion_tokens` instead of
    /// `max_tokens` (OpenAI's reasoning models take only that). Default false.
    pub max_completion_tokens: bool,
    /// `openai` providers: the role system text takes in a translated request. Default
    /// `system`.
    pub system_role: SystemRole,
    /// Per-model overrides of the keys above, by model name or `*` glob (an exact name wins,
    /// else the longest matching pattern: `proxy::translated::model_options`). Default empty.
    pub model_options: Vec<(String, ModelOptions)>,
}

impl Default for Translation {
    fn default() -> Self {
        Self {
            responses: true,
            drop_fields: Vec::new(),
            default_max_tokens: None,
            reasoning_effort: false,
            max_reasoning_effort: ReasoningEffort::High,
            max_output_tokens: None,
            max_completion_tokens: false,
            system_role: SystemRole::System,
            model_options: Vec::new(),
        }
    }
}

/// `[providers.model_options."<model>"]`: one model's translation keys; each `None` inherits
/// the provider's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelOptions {
    /// Largest `max_tokens` for this model (tokens).
    pub max_output_tokens: Option<u32>,
    /// Whether this model takes `reasoning_effort`.
    pub reasoning_effort: Option<bool>,
    /// The highest effort this model takes.
    pub max_reasoning_effort: Option<ReasoningEffort>,
    /// Whether this model takes `max_completion_tokens` instead of `max_tokens`.
    pub max_completion_tokens: Option<bool>,
}

/// An OpenAI reasoning effort level, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum ReasoningEffort {
    /// `low`.
    Low,
    /// `medium`.
    Medium,
    /// `high` (the default ceiling).
    #[default]
    High,
    /// `xhigh` (only some models).
    XHigh,
}

impl ReasoningEffort {
    /// The wire word: `low`, `medium`, `high` or `xhigh`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::XHigh => "xhigh",
        }
    }

    /// Parses a wire word; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "low" => Some(Self::Low),
            "medium" => Some(Self::Medium),
            "high" => Some(Self::High),
            "xhigh" => Some(Self::XHigh),
            _ => None,
        }
    }
}

/// The Chat Completions role that system text takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SystemRole {
    /// `system` (default; every Chat Completions server takes it).
    #[default]
    System,
    /// `developer` (OpenAI's reasoning models prefer it).
    Developer,
}

impl SystemRole {
    /// `system` or `developer`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::System => "system",
            Self::Developer => "developer",
        }
    }
}

/// One combo target: `provider[:connection]/model`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetSpec {
    /// Provider id.
    pub provider: String,
    /// Pinned connection id, if any.
    pub connection: Option<String>,
    /// Upstream model id (may contain `/`).
    pub model: String,
    /// Weight for the `weighted` strategy (1–1000). Default 1.
    pub weight: u32,
}

impl fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.connection {
            Some(c) => write!(f, "{}:{}/{}", self.provider, c, self.model),
            None => write!(f, "{}/{}", self.provider, self.model),
        }
    }
}

/// A client-facing model name mapped to ordered targets.
#[derive(Debug, Clone)]
pub struct Combo {
    /// The model name clients send.
    pub name: String,
    /// How targets are ordered.
    pub strategy: Strategy,
    /// In configured order.
    pub targets: Vec<TargetSpec>,
    /// `hold_until_reset`: when every candidate waits for a quota reset (quota wait or
    /// preflight cut-off) and the earliest is within [`Combo::max_hold`], hold the request and
    /// dispatch at that reset instead of answering 429. Default false.
    pub hold_until_reset: bool,
    /// `max_hold`: the longest such hold; default [`DEFAULT_MAX_HOLD`] (15 min). Also bounded
    /// by the request's execution budget.
    pub max_hold: Duration,
    /// `cooldown_wait`: whether a request for this combo may wait out short cooldowns and
    /// lockouts under `[resilience.combo_cooldown_wait]`. False answers at once instead, as
    /// with that wait turned off. Default true.
    pub cooldown_wait: bool,
}

/// Default combo `max_hold` (15 min).
pub const DEFAULT_MAX_HOLD: Duration = Duration::from_secs(15 * 60);

/// `[server]`
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Inference listener. Default `127.0.0.1:8787` (`CONFIG.md#server`).
    pub listen: SocketAddr,
    /// Request body limit in bytes. Default 32 MiB (`CONFIG.md#server`).
    pub max_body: u64,
    /// Keys clients must present (from `client_keys_env`); empty = no client auth.
    pub client_keys: Vec<Secret>,
    /// Name of the env var the client keys came from.
    pub client_keys_env: Option<String>,
    /// How long shutdown waits for in-flight requests. Default 10s.
    pub drain_timeout: Duration,
    /// Client connections each listener serves at once; further ones wait in the OS backlog
    /// until one closes. Default 1024 (`DEFAULT_MAX_CONNECTIONS`).
    pub max_connections: u32,
    /// A client connection that has not sent a complete request head this long after it
    /// connected (or after its previous response) is closed (HTTP/1). Default 10s
    /// ([`validate::DEFAULT_HEADER_READ_TIMEOUT`]).
    pub header_read_timeout: Duration,
    /// Reload the config when the file's modification time changes (polled every 2 s).
    /// Default false: reload on SIGHUP, the console key or `POST /api/config/reload`.
    pub watch_config: bool,
}

/// `[admin]`
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// Admin listener. Default `127.0.0.1:8788` (`CONFIG.md#admin`).
    pub listen: SocketAddr,
    /// Bearer token required on every admin route but `/livez` and `/readyz`.
    pub token: Option<Secret>,
    /// Name of the env var the token came from.
    pub token_env: Option<String>,
}

/// `[store]`
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// SQLite file, resolved (relative paths are under the data dir).
    pub path: PathBuf,
    /// `request_log` keeps at most this many rows. Default 10000.
    pub request_log_max_rows: u64,
    /// `request_log` keeps rows at most this old. Default 7 days.
    pub request_log_max_age: Duration,
}

/// `[log]`
#[derive(Debug, Clone)]
pub struct LogConfig {
    /// Directory of the daily-rolled log files, resolved.
    pub dir: PathBuf,
    /// tracing filter directive, e.g. `info` or `sluice=debug`.
    pub level: String,
}

/// `[console]`
#[derive(Debug, Clone)]
pub struct ConsoleConfig {
    /// Theme name (`themes/<name>.toml` or a built-in). Default `default`.
    pub theme: String,
    /// Countdown redraw tick. Default 250ms (`CONFIG.md#console`).
    pub tick: Duration,
    /// `[console.keys]` overrides: action → keys, as written.
    pub keys: BTreeMap<String, Vec<String>>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from (for messages and the console).
    pub file: PathBuf,
    /// `[server]`
    pub server: ServerConfig,
    /// `[admin]`
    pub admin: AdminConfig,
    /// `[store]`
    pub store: StoreConfig,
    /// `[log]`
    pub log: LogConfig,
    /// `[console]`
    pub console: ConsoleConfig,
    /// `[routing] default_provider`: provider ids in order (at least one).
    pub default_providers: Vec<String>,
    /// `[[providers]]`
    pub providers: Vec<Provider>,
    /// `[[combos]]`
    pub combos: Vec<Combo>,
    /// `[resilience]`
    pub resilience: Resilience,
    /// `[[restatement]]`
    pub restatement: Vec<Restatement>,
    /// `[[error_rules]]`
    pub error_rules: Vec<ErrorRule>,
    /// Not from the file: which config this is since start (0 as loaded; each applied live
    /// reload takes the next number). Caches built from a config (the upstream clients)
    /// rebuild when they see a newer one.
    pub generation: u64,
    /// Not from the file: the stable keys of `providers` and their connections, under which
    /// live state is kept ([`keys`]). Key = position as loaded; the core stamps the keys of
    /// its registry on every config it serves.
    pub keys: keys::KeyTable,
    /// `[session_leases]`
    pub session_leases: SessionLeases,
    /// Name lookups built once at load, so finding a combo or provider costs the same with
    /// one or ten thousand of them.
    index: Index,
}

/// Positions in [`Config::combos`] by name and [`Config::providers`] by id. A lookup checks
/// the entry it lands on and scans when that entry or the list's length no longer matches
/// (items moved or added since the index was built). Code that renames an item in place
/// calls [`Config::reindex`].
#[derive(Debug, Clone, Default)]
struct Index {
    combos: crate::support::fast_map::FastMap<String, usize>,
    providers: crate::support::fast_map::FastMap<String, usize>,
}

impl Index {
    fn build(providers: &[Provider], combos: &[Combo]) -> Self {
        Self {
            combos: combos
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.clone(), i))
                .collect(),
            providers: providers
                .iter()
                .enumerate()
                .map(|(i, p)| (p.id.clone(), i))
                .collect(),
        }
    }
}

/// Up to this many items (8), a scan costs less than hashing the name.
const SCAN_BELOW: usize = 8;

/// The position of the item named `name` in `items` (`key` gives an item's name): a scan for
/// a few items, else through `index` when it still describes `items`.
fn position<T>(
    index: &crate::support::fast_map::FastMap<String, usize>,
    items: &[T],
    name: &str,
    key: impl Fn(&T) -> &str,
) -> Option<usize> {
    if items.len() <= SCAN_BELOW {
        return items.iter().position(|t| key(t) == name);
    }
    match index.get(name) {
        Some(&i) if items.get(i).is_some_and(|t| key(t) == name) => Some(i),
        None if index.len() == items.len() => None,
        _ => items.iter().position(|t| key(t) == name),
    }
}

/// `[session_leases]`: exclusive session leases (one owner per connection). Off by default.
#[derive(Debug, Clone)]
pub struct SessionLeases {
    /// Whether `POST /api/v1/session-leases` is served. Default false.
    pub enabled: bool,
    /// Lease length when an acquire or renew names none. Default 10 min, 10 s–24 h.
    pub ttl: Duration,
    /// The longest lease a client may ask for. Default 1 h (never shorter than `ttl`),
    /// 10 s–24 h.
    pub max_ttl: Duration,
    /// The client keys holding the `lease:exclusive` scope (from `client_keys_env`); empty
    /// means every accepted client may lease.
    pub client_keys: Vec<Secret>,
    /// Name of the env var those keys came from.
    pub client_keys_env: Option<String>,
}

impl Default for SessionLeases {
    fn default() -> Self {
        Self {
            enabled: false,
            ttl: validate::DEFAULT_LEASE_TTL,
            max_ttl: validate::DEFAULT_LEASE_MAX_TTL,
            client_keys: Vec::new(),
            client_keys_env: None,
        }
    }
}

impl Config {
    /// The provider with this id.
    pub fn provider(&self, id: &str) -> Option<&Provider> {
        self.provider_entry(id).map(|(_, p)| p)
    }
    /// The provider with this id and its index into [`Config::providers`].
    pub fn provider_entry(&self, id: &str) -> Option<(usize, &Provider)> {
        let i = self.provider_position(id)?;
        Some((i, self.providers.get(i)?))
    }
    /// Rebuilds the name lookups after `providers` or `combos` were edited in place.
    pub fn reindex(&mut self) {
        self.index = Index::build(&self.providers, &self.combos);
    }
    /// The index into [`Config::providers`] of the provider with this id (a scan of up to 8
    /// providers, else a hash lookup).
    pub fn provider_position(&self, id: &str) -> Option<usize> {
        position(&self.index.providers, &self.providers, id, |p| &p.id)
    }
    /// The combo with this client-facing name (a scan of up to 8 combos, else a hash lookup).
    pub fn combo(&self, name: &str) -> Option<&Combo> {
        position(&self.index.combos, &self.combos, name, |c| &c.name)
            .and_then(|i| self.combos.get(i))
    }
}

/// Where config discovery looks, in order (`CONFIG.md#finding-the-file`): `--config`,
/// `$SLUICE_CONFIG`, `./config.toml`, then the XDG config dir.
pub fn discover(explicit: Option<&Path>, env_config: Option<&str>) -> Result<PathBuf, ConfigError> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    if let Some(p) = env_config.filter(|s| !s.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let mut looked = vec!["./config.toml".to_string()];
    let local = PathBuf::from("config.toml");
    if local.is_file() {
        return Ok(local);
    }
    if let Some(dirs) = project_dirs() {
        let p = dirs.config_dir().join("config.toml");
        looked.push(p.display().to_string());
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(ConfigError::NotFound {
        looked: looked.join(", "),
    })
}

/// sluice's XDG directories (`~/.config/sluice`, `~/.local/share/sluice`).
pub fn project_dirs() -> Option<directories::ProjectDirs> {
    directories::ProjectDirs::from("", "", "sluice")
}

/// Default data dir: XDG data dir, else `./.sluice`.
pub fn default_data_dir() -> PathBuf {
    project_dirs()
        .map(|d| d.data_dir().to_path_buf())
        .unwrap_or_else(|| PathBuf::from(".sluice"))
}

/// Reads, parses and validates the file at `path`, resolving env vars from the process.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with(path, SecretMode::Required).map(|l| l.config)
}

/// Like [`load`], with the given [`SecretMode`] (`Optional` for `check`, `status`, `env`).
pub fn load_with(path: &Path, mode: SecretMode) -> Result<Lenient, ConfigError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
        file: file.clone(),
        source,
    })?;
    from_str_with(&text, path, &LoadEnv::process(), mode)
}

#[cfg(test)]
mod index_tests {
    use super::*;

    fn many(providers: usize, combos: usize) -> Config {
        let mut t = String::new();
        for p in 0..providers {
            t += &format!(
                "[[providers]]\nid = \"p{p}\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"c{p}\"\n  auth = \"passthrough\"\n"
            );
        }
        for c in 0..combos {
            t += &format!(
                "[[combos]]\nname = \"k{c}\"\ntargets = [\"p{}/m{c}\"]\n",
                c % providers
            );
        }
        let env = LoadEnv::fixed(&[], "/tmp");
        from_str(&t, Path::new("t.toml"), &env).expect("valid config")
    }

    #[test]
    fn lookups_find_every_name_with_few_or_many_items() {
        for (providers, combos) in [(2, 3), (12, 40)] {
            let cfg = many(providers, combos);
            for c in 0..combos {
                let name = format!("k{c}");
                assert_eq!(
                    cfg.combo(&name).map(|k| k.name.as_str()),
                    Some(name.as_str())
                );
            }
            for p in 0..providers {
                assert_eq!(cfg.provider_position(&format!("p{p}")), Some(p));
            }
            assert!(cfg.combo("nope").is_none() && cfg.provider("nope").is_none());
        }
    }

    #[test]
    fn lookups_stay_right_after_the_lists_are_edited_in_place() {
        let mut cfg = many(12, 40);
        cfg.combos.swap(0, 39);
        assert_eq!(cfg.combo("k0").map(|k| k.name.as_str()), Some("k0"));
        assert_eq!(cfg.combo("k39").map(|k| k.name.as_str()), Some("k39"));
        let mut extra = cfg.combos[1].clone();
        extra.name = "added".into();
        cfg.combos.push(extra);
        assert_eq!(cfg.combo("added").map(|k| k.name.as_str()), Some("added"));
        cfg.providers.swap(0, 11);
        assert_eq!(cfg.provider_position("p0"), Some(11));
        cfg.combos[5].name = "renamed".into();
        cfg.reindex();
        assert_eq!(
            cfg.combo("renamed").map(|k| k.name.as_str()),
            Some("renamed")
        );
        assert!(cfg.combo("k5").is_none());
    }
}
