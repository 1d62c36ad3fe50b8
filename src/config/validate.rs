//! Stage two of config loading: `RawConfig` → `Config`, collecting every problem.
//!
//! Each default is a named constant citing its source. Every problem names the key path, the
//! offending value in single quotes and the fix; the caller prefixes the file name.

use std::collections::{BTreeMap, HashSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{self, RawConfig};
use super::*;

/// Inference listener default (DESIGN §4).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";
/// Admin listener default (DESIGN §3).
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:8788";
/// Body limit default, 32 MiB (DESIGN §3; Anthropic's own request limit).
pub const DEFAULT_MAX_BODY: u64 = 32 * 1024 * 1024;
/// Provider whole-request timeout default (DESIGN §4).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Provider connect timeout default (DESIGN §4).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Shutdown drain deadline default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// `request_log` row cap default.
pub const DEFAULT_REQUEST_LOG_MAX_ROWS: u64 = 10_000;
/// `request_log` age cap default, 7 days.
pub const DEFAULT_REQUEST_LOG_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Console tick default (DESIGN §4).
pub const DEFAULT_TICK: Duration = Duration::from_millis(250);

/// Where env vars and relative paths come from while loading.
pub struct LoadEnv<'a> {
    /// Looks up an environment variable.
    pub var: Box<dyn Fn(&str) -> Option<String> + 'a>,
    /// Base for relative `[store] path` and `[log] dir`.
    pub data_dir: PathBuf,
}

impl LoadEnv<'static> {
    /// The real process environment and the XDG data dir.
    pub fn process() -> Self {
        Self {
            var: Box::new(|k| std::env::var(k).ok()),
            data_dir: default_data_dir(),
        }
    }
}

impl<'a> LoadEnv<'a> {
    /// A fixed set of variables and a data dir (tests, embedding).
    pub fn fixed(vars: &'a [(&'a str, &'a str)], data_dir: impl Into<PathBuf>) -> Self {
        Self {
            var: Box::new(move |k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_string())),
            data_dir: data_dir.into(),
        }
    }
}

/// Parses and validates config text that came from `path` (used in messages).
pub fn from_str(text: &str, path: &Path, env: &LoadEnv<'_>) -> Result<Config, ConfigError> {
    let file = path.display().to_string();
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
        file: file.clone(),
        message: e.to_string().trim_end().replace('\n', "\n    "),
    })?;
    let mut v = Validator { problems: Vec::new(), env };
    let cfg = v.config(raw, path);
    if v.problems.is_empty() {
        Ok(cfg)
    } else {
        Err(ConfigError::Invalid { file, problems: v.problems })
    }
}

struct Validator<'e, 'a> {
    problems: Vec<Problem>,
    env: &'e LoadEnv<'a>,
}

impl Validator<'_, '_> {
    fn bad(&mut self, key: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem { key: key.into(), message: message.into(), fix: fix.into() });
    }

    fn duration(&mut self, key: &str, value: Option<&String>, default: Duration) -> Duration {
        let Some(s) = value else { return default };
        match humantime::parse_duration(s.trim()) {
            Ok(d) => d,
            Err(_) => {
                self.bad(key, format!("'{s}' is not a duration"), "write it like \"30s\", \"250ms\" or \"10m\"");
                default
            }
        }
    }

    fn count(&mut self, key: &str, value: Option<i64>, default: u32, min: u32, max: u32) -> u32 {
        let Some(n) = value else { return default };
        match u32::try_from(n) {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.bad(key, format!("'{n}' is out of range"), format!("use a whole number from {min} to {max}"));
                default
            }
        }
    }

    fn addr(&mut self, key: &str, value: Option<&String>, default: &str) -> SocketAddr {
        let s = value.map(String::as_str).unwrap_or(default);
        match s.parse() {
            Ok(a) => a,
            Err(_) => {
                self.bad(key, format!("'{s}' is not a socket address"), "write host:port, e.g. \"127.0.0.1:8787\"");
                default.parse().unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
            }
        }
    }

    fn env_secret(&mut self, key: &str, var: &str) -> Option<Secret> {
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.bad(key, format!("'{var}' is not an environment variable name"), "use letters, digits and '_' only");
            return None;
        }
        match (self.env.var)(var) {
            Some(v) if !v.trim().is_empty() => Some(Secret::new(v.trim())),
            _ => {
                self.bad(key, format!("environment variable '{var}' is not set"), format!("export {var}=... before starting sluice"));
                None
            }
        }
    }

    fn resolve_path(&self, p: Option<&String>, default: &str) -> PathBuf {
        let p = PathBuf::from(p.map(String::as_str).unwrap_or(default));
        if p.is_absolute() { p } else { self.env.data_dir.join(p) }
    }

    fn config(&mut self, raw: RawConfig, path: &Path) -> Config {
        let server = self.server(&raw.server);
        let admin = self.admin(&raw.admin);
        let store = StoreConfig {
            path: self.resolve_path(raw.store.path.as_ref(), "sluice.db"),
            request_log_max_rows: raw
                .store
                .request_log_max_rows
                .map(|n| u64::try_from(n).unwrap_or(0))
                .unwrap_or(DEFAULT_REQUEST_LOG_MAX_ROWS),
            request_log_max_age: self.duration("store.request_log_max_age", raw.store.request_log_max_age.as_ref(), DEFAULT_REQUEST_LOG_MAX_AGE),
        };
        if raw.store.request_log_max_rows.is_some_and(|n| n < 1) {
            self.bad("store.request_log_max_rows", "must be at least 1", "use a positive number of rows, e.g. 10000");
        }
        let level = raw.log.level.clone().unwrap_or_else(|| "info".into());
        if tracing_subscriber::EnvFilter::try_new(&level).is_err() {
            self.bad("log.level", format!("'{level}' is not a log level or filter"), "use error, warn, info, debug or trace");
        }
        let log = LogConfig { dir: self.resolve_path(raw.log.dir.as_ref(), "logs"), level };
        let console = self.console(&raw.console);
        let providers = self.providers(raw.providers);
        let combos = self.combos(raw.combos, &providers);
        let default_providers = self.routing(&raw.routing, &providers);
        let resilience = self.resilience(&raw.resilience);
        let restatement = self.restatements(raw.restatement, &providers);
        let error_rules = self.error_rules(raw.error_rules, &providers);
        Config {
            file: path.to_path_buf(),
            server,
            admin,
            store,
            log,
            console,
            default_providers,
            providers,
            combos,
            resilience,
            restatement,
            error_rules,
        }
    }

    fn server(&mut self, raw: &raw::RawServer) -> ServerConfig {
        let listen = self.addr("server.listen", raw.listen.as_ref(), DEFAULT_LISTEN);
        let max_body = match &raw.max_body {
            None => DEFAULT_MAX_BODY,
            Some(s) => match s.trim().parse::<bytesize::ByteSize>() {
                Ok(b) if b.as_u64() >= 1024 => b.as_u64(),
                _ => {
                    self.bad("server.max_body", format!("'{s}' is not a size of at least 1KiB"), "write it like \"32MiB\" or \"64MB\"");
                    DEFAULT_MAX_BODY
                }
            },
        };
        let mut client_keys = Vec::new();
        if let Some(var) = &raw.client_keys_env {
            if let Some(s) = self.env_secret("server.client_keys_env", var) {
                client_keys = s.expose().split(',').map(str::trim).filter(|k| !k.is_empty()).map(Secret::new).collect();
            }
        } else if !listen.ip().is_loopback() {
            self.bad(
                "server.listen",
                format!("'{listen}' is not a loopback address and no client keys are configured"),
                "set server.client_keys_env to an env var holding comma-separated client keys, or listen on 127.0.0.1",
            );
        }
        let drain_timeout = self.duration("server.drain_timeout", raw.drain_timeout.as_ref(), DEFAULT_DRAIN_TIMEOUT);
        ServerConfig { listen, max_body, client_keys, client_keys_env: raw.client_keys_env.clone(), drain_timeout }
    }

    fn admin(&mut self, raw: &raw::RawAdmin) -> AdminConfig {
        let listen = self.addr("admin.listen", raw.listen.as_ref(), DEFAULT_ADMIN_LISTEN);
        let token = raw.token_env.as_ref().and_then(|v| self.env_secret("admin.token_env", v));
        if !listen.ip().is_loopback() && raw.token_env.is_none() {
            self.bad(
                "admin.listen",
                format!("'{listen}' is not a loopback address and admin.token_env is not set"),
                "set admin.token_env to an env var holding a bearer token, or listen on 127.0.0.1",
            );
        }
        AdminConfig { listen, token, token_env: raw.token_env.clone() }
    }

    fn console(&mut self, raw: &raw::RawConsole) -> ConsoleConfig {
        let theme = raw.theme.clone().unwrap_or_else(|| "default".into());
        let tick = self.duration("console.tick", raw.tick.as_ref(), DEFAULT_TICK);
        if tick < Duration::from_millis(50) {
            self.bad("console.tick", format!("'{}' is shorter than 50ms", humantime::format_duration(tick)), "use at least \"50ms\"; the default is \"250ms\"");
        }
        let mut keys = BTreeMap::new();
        for (action, v) in &raw.keys {
            let list = match v {
                toml::Value::String(s) => vec![s.clone()],
                toml::Value::Array(a) if a.iter().all(|x| x.is_str()) => a.iter().filter_map(|x| x.as_str().map(String::from)).collect(),
                other => {
                    self.bad(format!("console.keys.{action}"), format!("'{other}' is not a key or list of keys"), "write \"c\" or [\"r\", \"<C-r>\"]");
                    continue;
                }
            };
            keys.insert(action.clone(), list);
        }
        ConsoleConfig { theme, tick, keys }
    }

    fn providers(&mut self, raws: Vec<raw::RawProvider>) -> Vec<Provider> {
        let mut out = Vec::new();
        let mut provider_ids = HashSet::new();
        let mut connection_ids = HashSet::new();
        for (i, rp) in raws.into_iter().enumerate() {
            let Some(id) = rp.id.clone().filter(|s| !s.trim().is_empty()) else {
                self.bad(format!("providers[{i}].id"), "is missing", "give every provider a unique id, e.g. id = \"anthropic\"");
                continue;
            };
            let k = format!("providers.{id}");
            if !valid_id(&id) {
                self.bad(format!("{k}.id"), format!("'{id}' contains characters other than letters, digits, '-', '_' and '.'"), "use a simple id like \"openrouter\"");
            }
            if !provider_ids.insert(id.clone()) {
                self.bad(format!("{k}.id"), format!("'{id}' is used by two providers"), "provider ids must be unique");
            }
            let dialect = match rp.dialect.as_deref() {
                Some("anthropic") => Dialect::Anthropic,
                Some("openai") => Dialect::OpenAi,
                Some(other) => {
                    self.bad(format!("{k}.dialect"), format!("'{other}' is not a dialect"), "use \"anthropic\" or \"openai\"");
                    Dialect::Anthropic
                }
                None => {
                    self.bad(format!("{k}.dialect"), "is missing", "set dialect = \"anthropic\" or \"openai\"");
                    Dialect::Anthropic
                }
            };
            let base_url = match rp.base_url.as_deref() {
                None => {
                    self.bad(format!("{k}.base_url"), "is missing", "set base_url, e.g. \"https://api.anthropic.com\"");
                    http::Uri::from_static("http://127.0.0.1")
                }
                Some(s) => match parse_base_url(s) {
                    Some(u) => u,
                    None => {
                        self.bad(format!("{k}.base_url"), format!("'{s}' is not a URL"), "use http:// or https:// followed by a host, e.g. \"https://api.anthropic.com\"");
                        http::Uri::from_static("http://127.0.0.1")
                    }
                },
            };
            let profile = match rp.profile.as_deref() {
                None => default_profile(dialect, &base_url),
                Some("oauth") => Profile::Oauth,
                Some("api_key") => Profile::ApiKey,
                Some("local") => Profile::Local,
                Some(other) => {
                    self.bad(format!("{k}.profile"), format!("'{other}' is not a profile"), "use \"oauth\", \"api_key\" or \"local\"");
                    Profile::ApiKey
                }
            };
            let connection_strategy = self.strategy(&format!("{k}.connection_strategy"), rp.connection_strategy.as_deref());
            let timeout = self.duration(&format!("{k}.timeout"), rp.timeout.as_ref(), DEFAULT_TIMEOUT);
            let connect_timeout = self.duration(&format!("{k}.connect_timeout"), rp.connect_timeout.as_ref(), DEFAULT_CONNECT_TIMEOUT);
            if timeout.is_zero() {
                self.bad(format!("{k}.timeout"), "'0s' would fail every request", "use a positive duration such as \"10m\"");
            }
            if rp.connections.is_empty() {
                self.bad(format!("{k}.connections"), "is empty", "add a [[providers.connections]] table with id and auth");
            }
            let mut connections = Vec::new();
            for (j, rc) in rp.connections.into_iter().enumerate() {
                let Some(cid) = rc.id.clone().filter(|s| !s.trim().is_empty()) else {
                    self.bad(format!("{k}.connections[{j}].id"), "is missing", "give every connection a unique id, e.g. id = \"key-a\"");
                    continue;
                };
                let ck = format!("{k}.connections.{cid}");
                if !valid_id(&cid) {
                    self.bad(format!("{ck}.id"), format!("'{cid}' contains characters other than letters, digits, '-', '_' and '.'"), "use a simple id like \"key-a\"");
                }
                if !connection_ids.insert(cid.clone()) {
                    self.bad(format!("{ck}.id"), format!("'{cid}' is used by two connections"), "connection ids must be unique across the whole file");
                }
                let auth = match &rc.auth {
                    Some(toml::Value::String(s)) if s == "passthrough" => Auth::Passthrough,
                    Some(toml::Value::Table(t)) if t.len() == 1 && t.get("env").is_some_and(toml::Value::is_str) => {
                        let var = t.get("env").and_then(toml::Value::as_str).unwrap_or_default().to_string();
                        match self.env_secret(&format!("{ck}.auth.env"), &var) {
                            Some(secret) => Auth::Key { env: var, secret },
                            None => Auth::Passthrough,
                        }
                    }
                    Some(other) => {
                        self.bad(format!("{ck}.auth"), format!("'{other}' is not an auth mode"), "use auth = \"passthrough\" or auth = { env = \"VAR_NAME\" }");
                        Auth::Passthrough
                    }
                    None => {
                        self.bad(format!("{ck}.auth"), "is missing", "use auth = \"passthrough\" or auth = { env = \"VAR_NAME\" }");
                        Auth::Passthrough
                    }
                };
                let max_concurrent = rc.max_concurrent.map(|n| self.count(&format!("{ck}.max_concurrent"), Some(n), 1, 1, 100_000));
                let mut model_concurrency = BTreeMap::new();
                for (m, n) in &rc.model_concurrency {
                    let n = self.count(&format!("{ck}.model_concurrency.\"{m}\""), Some(*n), 1, 1, 100_000);
                    model_concurrency.insert(m.clone(), n);
                }
                connections.push(Connection {
                    id: cid,
                    auth,
                    max_concurrent,
                    model_concurrency,
                    disable_cooling: rc.disable_cooling.unwrap_or(false),
                    rate_limit_protection: rc.rate_limit_protection,
                    concurrency_fail_open: rc.concurrency_fail_open.unwrap_or(true),
                    egress: rc.egress.clone().unwrap_or_else(|| "direct".into()),
                });
            }
            out.push(Provider {
                id,
                dialect,
                base_url,
                profile,
                connection_strategy,
                per_model_quota: rp.per_model_quota.unwrap_or(false),
                timeout,
                connect_timeout,
                quota_groups: rp.quota_groups,
                egress_bucketed: rp.egress_bucketed.unwrap_or(false),
                connections,
            });
        }
        out
    }

    fn strategy(&mut self, key: &str, s: Option<&str>) -> Strategy {
        match s {
            None => Strategy::Priority,
            Some(s) => Strategy::parse(s).unwrap_or_else(|| {
                self.bad(key, format!("'{s}' is not a strategy"), "use priority, round_robin, weighted, least_used, random, p2c or fill_first");
                Strategy::Priority
            }),
        }
    }

    fn combos(&mut self, raws: Vec<raw::RawCombo>, providers: &[Provider]) -> Vec<Combo> {
        let mut out = Vec::new();
        let mut names = HashSet::new();
        for (i, rc) in raws.into_iter().enumerate() {
            let Some(name) = rc.name.clone().filter(|s| !s.trim().is_empty()) else {
                self.bad(format!("combos[{i}].name"), "is missing", "give the combo the model name clients will send, e.g. name = \"fast\"");
                continue;
            };
            let k = format!("combos.{name}");
            if !names.insert(name.clone()) {
                self.bad(format!("{k}.name"), format!("'{name}' is used by two combos"), "combo names must be unique");
            }
            let strategy = self.strategy(&format!("{k}.strategy"), rc.strategy.as_deref());
            if rc.targets.is_empty() {
                self.bad(format!("{k}.targets"), "is empty", "list targets as \"provider/model\", e.g. [\"anthropic/claude-haiku-4-5\"]");
            }
            let mut targets = Vec::new();
            for (j, t) in rc.targets.iter().enumerate() {
                let tk = format!("{k}.targets[{j}]");
                let Some(s) = t.as_str() else {
                    self.bad(tk, format!("'{t}' is not a string"), "write a target as \"provider/model\" or \"provider:connection/model\"");
                    continue;
                };
                match parse_target(s) {
                    None => self.bad(tk, format!("'{s}' is not a target"), "write \"provider/model\" or \"provider:connection/model\""),
                    Some(spec) => match providers.iter().find(|p| p.id == spec.provider) {
                        None => self.bad(tk, format!("'{s}' names unknown provider '{}'", spec.provider), format!("define a [[providers]] with id = \"{}\" or fix the name", spec.provider)),
                        Some(p) => {
                            if let Some(c) = &spec.connection
                                && !p.connections.iter().any(|x| &x.id == c)
                            {
                                self.bad(tk, format!("'{s}' names unknown connection '{c}' of provider '{}'", p.id), "use one of that provider's connection ids");
                                continue;
                            }
                            targets.push(spec);
                        }
                    },
                }
            }
            out.push(Combo { name, strategy, targets });
        }
        out
    }

    fn routing(&mut self, raw: &raw::RawRouting, providers: &[Provider]) -> Vec<String> {
        let ids: Vec<String> = match &raw.default_provider {
            None => providers.first().map(|p| vec![p.id.clone()]).unwrap_or_default(),
            Some(toml::Value::String(s)) => vec![s.clone()],
            Some(toml::Value::Array(a)) if a.iter().all(toml::Value::is_str) => a.iter().filter_map(|v| v.as_str().map(String::from)).collect(),
            Some(other) => {
                self.bad("routing.default_provider", format!("'{other}' is not a provider id or list of ids"), "write \"anthropic\" or [\"anthropic\", \"openrouter\"]");
                return Vec::new();
            }
        };
        if providers.is_empty() {
            self.bad("providers", "no provider is configured", "add at least one [[providers]] table (see the shipped config.toml)");
        }
        for id in &ids {
            if !providers.iter().any(|p| &p.id == id) {
                self.bad("routing.default_provider", format!("'{id}' is not a configured provider"), "name the id of a [[providers]] table");
            }
        }
        ids
    }

    fn resilience(&mut self, raw: &raw::RawResilience) -> Resilience {
        let mut breaker = BTreeMap::new();
        for (name, rb) in &raw.breaker {
            if parse_profile(name).is_none() {
                self.bad(format!("resilience.breaker.{name}"), format!("'{name}' is not a profile"), "use resilience.breaker.oauth, .api_key or .local");
                let _ = rb;
            }
        }
        for p in Profile::ALL {
            let d = default_breaker(p);
            let k = format!("resilience.breaker.{}", p.as_str());
            let b = match raw.breaker.get(p.as_str()) {
                None => d,
                Some(rb) => {
                    let s = BreakerSettings {
                        degrade_at: self.count(&format!("{k}.degrade_at"), rb.degrade_at, d.degrade_at, 1, 10_000),
                        open_at: self.count(&format!("{k}.open_at"), rb.open_at, d.open_at, 1, 10_000),
                        reset_timeout: self.duration(&format!("{k}.reset_timeout"), rb.reset_timeout.as_ref(), d.reset_timeout),
                        degraded_quiet_window: self.duration(&format!("{k}.degraded_quiet_window"), rb.degraded_quiet_window.as_ref(), d.degraded_quiet_window),
                        probe_timeout: self.duration(&format!("{k}.probe_timeout"), rb.probe_timeout.as_ref(), d.probe_timeout),
                        max_backoff_multiplier: self.count(&format!("{k}.max_backoff_multiplier"), rb.max_backoff_multiplier, d.max_backoff_multiplier, 1, 1024),
                    };
                    if s.open_at < s.degrade_at {
                        self.bad(format!("{k}.open_at"), format!("'{}' is below degrade_at '{}'", s.open_at, s.degrade_at), "open_at must be at least degrade_at");
                    }
                    s
                }
            };
            breaker.insert(p, b);
        }
        let rc = &raw.connection_cooldown;
        let mut cooldown = BTreeMap::new();
        for p in Profile::ALL {
            let d = default_cooldown(p);
            let k = format!("resilience.connection_cooldown.{}", p.as_str());
            let rp = match p {
                Profile::Oauth => rc.oauth.as_ref(),
                Profile::ApiKey => rc.api_key.as_ref(),
                Profile::Local => rc.local.as_ref(),
            };
            let c = match rp {
                None => d,
                Some(rp) => CooldownProfile {
                    base: self.duration(&format!("{k}.base"), rp.base.as_ref(), d.base),
                    max_backoff_level: self.count(&format!("{k}.max_backoff_level"), rp.max_backoff_level, d.max_backoff_level, 0, 30),
                },
            };
            cooldown.insert(p, c);
        }
        let k = "resilience.connection_cooldown";
        let connection_cooldown = ConnectionCooldownSettings {
            max_cooldown: self.duration(&format!("{k}.max_cooldown"), rc.max_cooldown.as_ref(), Duration::from_secs(30 * 60)),
            quota_wait_threshold: self.duration(&format!("{k}.quota_wait_threshold"), rc.quota_wait_threshold.as_ref(), Duration::from_secs(600)),
            max_quota_wait: self.duration(&format!("{k}.max_quota_wait"), rc.max_quota_wait.as_ref(), Duration::from_secs(7 * 24 * 3600)),
            expired_retry_max: self.count(&format!("{k}.expired_retry_max"), rc.expired_retry_max, 3, 1, 100),
            ban_markers: rc.ban_markers.clone().unwrap_or_else(|| strings(&["account has been disabled", "account has been suspended", "organization has been disabled"])),
            request_rejected_markers: rc.request_rejected_markers.clone().unwrap_or_else(|| strings(&["request not allowed"])),
            quota_markers: rc.quota_markers.clone().unwrap_or_else(|| strings(&["quota", "insufficient_quota", "usage limit", "limit reached", "resource has been exhausted", "额度"])),
            stream_stall_cooldown: rc.stream_stall_cooldown.unwrap_or(false),
        };
        let rl = &raw.model_lockout;
        let k = "resilience.model_lockout";
        let mut error_codes = Vec::new();
        for c in rl.error_codes.clone().unwrap_or_else(|| vec![403, 404, 429, 502, 503, 504]) {
            match u16::try_from(c) {
                Ok(s) if (400..=599).contains(&s) => error_codes.push(s),
                _ => self.bad(format!("{k}.error_codes"), format!("'{c}' is not an HTTP error status"), "use statuses from 400 to 599"),
            }
        }
        let model_lockout = ModelLockoutSettings {
            enabled: rl.enabled.unwrap_or(false),
            error_codes,
            base_cooldown: self.duration(&format!("{k}.base_cooldown"), rl.base_cooldown.as_ref(), Duration::from_secs(120)),
            max_cooldown: self.duration(&format!("{k}.max_cooldown"), rl.max_cooldown.as_ref(), Duration::from_secs(30 * 60)),
            max_backoff_steps: self.count(&format!("{k}.max_backoff_steps"), rl.max_backoff_steps, 10, 0, 30),
            exponential: rl.exponential.unwrap_or(true),
        };
        if model_lockout.max_cooldown < model_lockout.base_cooldown {
            self.bad(
                format!("{k}.max_cooldown"),
                format!("'{}' is shorter than base_cooldown '{}'", humantime::format_duration(model_lockout.max_cooldown), humantime::format_duration(model_lockout.base_cooldown)),
                "max_cooldown must be at least base_cooldown",
            );
        }
        let rq = &raw.queue;
        let k = "resilience.queue";
        let queue = QueueSettings {
            max_wait: clamp_queue(self.duration(&format!("{k}.max_wait"), rq.max_wait.as_ref(), Duration::from_secs(30))),
            execution_max_wait: clamp_queue(self.duration(&format!("{k}.execution_max_wait"), rq.execution_max_wait.as_ref(), Duration::from_secs(600))),
            max_queue_depth: self.count(&format!("{k}.max_queue_depth"), rq.max_queue_depth, 0, 0, 100_000),
            auto_enable_api_key_connections: rq.auto_enable_api_key_connections.unwrap_or(true),
        };
        let rs = &raw.stream;
        let k = "resilience.stream";
        let stream = StreamSettings {
            readiness_timeout: self.duration(&format!("{k}.readiness_timeout"), rs.readiness_timeout.as_ref(), Duration::from_secs(30)),
            heartbeat_interval: self.duration(&format!("{k}.heartbeat_interval"), rs.heartbeat_interval.as_ref(), Duration::from_secs(15)),
            content_stall_timeout: self.duration(&format!("{k}.content_stall_timeout"), rs.content_stall_timeout.as_ref(), Duration::from_secs(180)),
        };
        if stream.heartbeat_interval.is_zero() {
            self.bad(format!("{k}.heartbeat_interval"), "'0s' would flood clients with pings", "use a positive duration such as \"15s\"");
        }
        let session_affinity_ttl = self.duration("resilience.session_affinity_ttl", raw.session_affinity_ttl.as_ref(), Duration::from_secs(3600));
        Resilience { breaker, cooldown, connection_cooldown, model_lockout, queue, stream, session_affinity_ttl }
    }

    fn status(&mut self, key: &str, n: i64) -> Option<u16> {
        match u16::try_from(n) {
            Ok(s) if (100..=599).contains(&s) => Some(s),
            _ => {
                self.bad(key, format!("'{n}' is not an HTTP status"), "use a status from 100 to 599");
                None
            }
        }
    }

    fn known_provider(&mut self, key: &str, p: &Option<String>, providers: &[Provider]) {
        if let Some(p) = p
            && !providers.iter().any(|x| &x.id == p)
        {
            self.bad(key, format!("'{p}' is not a configured provider"), "name the id of a [[providers]] table or omit provider");
        }
    }

    fn restatements(&mut self, raws: Vec<raw::RawRestatement>, providers: &[Provider]) -> Vec<Restatement> {
        let mut out = Vec::new();
        for (i, r) in raws.into_iter().enumerate() {
            let id = r.id.clone().unwrap_or_else(|| format!("restatement[{i}]"));
            let k = format!("restatement.{id}");
            self.known_provider(&format!("{k}.provider"), &r.provider, providers);
            let from_statuses = r.from_statuses.iter().filter_map(|s| self.status(&format!("{k}.from_statuses"), *s)).collect::<Vec<_>>();
            if from_statuses.is_empty() {
                self.bad(format!("{k}.from_statuses"), "is empty", "list the statuses to restate, e.g. [400, 403]");
            }
            let Some(to) = r.to_status else {
                self.bad(format!("{k}.to_status"), "is missing", "set to_status, e.g. 429");
                continue;
            };
            let Some(to_status) = self.status(&format!("{k}.to_status"), to) else { continue };
            if r.text_markers.is_empty() {
                self.bad(format!("{k}.text_markers"), "is empty", "list at least one body text that triggers the rule");
            }
            let default_retry_after = self.duration(&format!("{k}.default_retry_after"), r.default_retry_after.as_ref(), Duration::from_secs(60));
            out.push(Restatement { id, provider: r.provider, from_statuses, to_status, text_markers: r.text_markers, exclude_markers: r.exclude_markers, default_retry_after });
        }
        out
    }

    fn error_rules(&mut self, raws: Vec<raw::RawErrorRule>, providers: &[Provider]) -> Vec<ErrorRule> {
        const REASONS: [&str; 7] = ["rate_limit_exceeded", "quota_exhausted", "auth_error", "not_found", "credits_exhausted", "banned", "server_error"];
        let mut out = Vec::new();
        for (i, r) in raws.into_iter().enumerate() {
            let id = r.id.clone().unwrap_or_else(|| format!("error_rules[{i}]"));
            let k = format!("error_rules.{id}");
            self.known_provider(&format!("{k}.provider"), &r.provider, providers);
            let statuses = r.statuses.iter().filter_map(|s| self.status(&format!("{k}.statuses"), *s)).collect();
            let reason = r.reason.clone().unwrap_or_default();
            if !REASONS.contains(&reason.as_str()) {
                self.bad(format!("{k}.reason"), format!("'{reason}' is not a reason"), format!("use one of {}", REASONS.join(", ")));
            }
            let scope = r.scope.clone().unwrap_or_else(|| "connection".into());
            if !["model", "connection", "provider"].contains(&scope.as_str()) {
                self.bad(format!("{k}.scope"), format!("'{scope}' is not a scope"), "use model, connection or provider");
            }
            let base_cooldown = r.base_cooldown.as_ref().map(|s| self.duration(&format!("{k}.base_cooldown"), Some(s), Duration::from_secs(3)));
            out.push(ErrorRule {
                id,
                provider: r.provider,
                statuses,
                error_types: r.error_types,
                header_markers: r.header_markers,
                text_markers: r.text_markers,
                exclude_markers: r.exclude_markers,
                reason,
                scope,
                base_cooldown,
            });
        }
        out
    }
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| (*x).to_string()).collect()
}

fn clamp_queue(d: Duration) -> Duration {
    d.clamp(Duration::from_millis(1), Duration::from_secs(24 * 3600))
}

fn valid_id(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Parses a profile name.
pub fn parse_profile(s: &str) -> Option<Profile> {
    match s {
        "oauth" => Some(Profile::Oauth),
        "api_key" => Some(Profile::ApiKey),
        "local" => Some(Profile::Local),
        _ => None,
    }
}

/// Profile when the file names none: `local` for loopback base URLs, else `api_key`.
fn default_profile(_dialect: Dialect, base: &http::Uri) -> Profile {
    match base.host() {
        Some("localhost") => Profile::Local,
        Some(h) if h.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback()) => Profile::Local,
        _ => Profile::ApiKey,
    }
}

/// Breaker defaults per profile (spec §1 profile table; quiet window, probe timeout and
/// multiplier cap from the §1 prose).
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
    }
}

/// Cooldown ladder defaults per profile (spec §2 "Backoff").
pub fn default_cooldown(p: Profile) -> CooldownProfile {
    let (base, max_backoff_level) = match p {
        Profile::Oauth => (5, 8),
        Profile::ApiKey => (3, 5),
        Profile::Local => (1, 3),
    };
    CooldownProfile { base: Duration::from_secs(base), max_backoff_level }
}

/// Parses `http(s)://host[:port][/path]` into a base URI without a trailing slash.
pub fn parse_base_url(s: &str) -> Option<http::Uri> {
    let s = s.trim().trim_end_matches('/');
    let uri: http::Uri = s.parse().ok()?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => return None,
    }
    uri.host().filter(|h| !h.is_empty())?;
    if uri.query().is_some() {
        return None;
    }
    Some(uri)
}

/// Parses a combo target `provider[:connection]/model`.
pub fn parse_target(s: &str) -> Option<TargetSpec> {
    let (head, model) = s.split_once('/')?;
    if model.trim().is_empty() || head.is_empty() {
        return None;
    }
    let (provider, connection) = match head.split_once(':') {
        Some((p, c)) if !p.is_empty() && !c.is_empty() => (p.to_string(), Some(c.to_string())),
        Some(_) => return None,
        None => (head.to_string(), None),
    };
    Some(TargetSpec { provider, connection, model: model.to_string() })
}

#[cfg(test)]
mod tests;
