//! Stage two of config loading: `RawConfig` → `Config`, collecting every problem.
//!
//! Each default is a named constant citing its source. Every problem names the key path, the
//! offending value in single quotes and the fix; the caller prefixes the file name.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::raw::{self, RawConfig};
use super::*;

/// Inference listener default (`CONFIG.md#server`).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";
/// Admin listener default, loopback only (`CONFIG.md#admin`).
pub const DEFAULT_ADMIN_LISTEN: &str = "127.0.0.1:8788";
/// Body limit default, 32 MiB (Anthropic's own request limit; `CONFIG.md#server`).
pub const DEFAULT_MAX_BODY: u64 = 32 * 1024 * 1024;
/// Provider whole-request timeout default (`CONFIG.md#providers`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Provider connect timeout default (`CONFIG.md#providers`).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Concurrent client connections per listener, default (sluice: far above what local agents
/// open, well below the default open-file limit of 1024 + upstream sockets would exhaust).
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;
/// Shutdown drain deadline default.
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Default `[server] header_read_timeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// `request_log` row cap default.
pub const DEFAULT_REQUEST_LOG_MAX_ROWS: u64 = 10_000;
/// `request_log` age cap default, 7 days.
pub const DEFAULT_REQUEST_LOG_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);
/// Console tick default (`CONFIG.md#console`).
pub const DEFAULT_TICK: Duration = Duration::from_millis(250);
/// Upper bound of every operator-supplied duration (config file, environment, live settings):
/// 366 days. Longer values are rejected at validation, so deadline arithmetic
/// (`Instant + duration`) can never overflow on operator input.
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);
/// [`MAX_DURATION`] as written in messages.
pub const MAX_DURATION_TEXT: &str = "366d";

/// Parses a humantime duration and bounds it by [`MAX_DURATION`]. `Err` carries the problem
/// message and fix (the caller names the key).
pub fn parse_bounded_duration(s: &str) -> Result<Duration, (String, String)> {
    match humantime::parse_duration(s.trim()) {
        Ok(d) if d <= MAX_DURATION => Ok(d),
        Ok(_) => Err((
            format!("'{s}' is longer than the maximum of {MAX_DURATION_TEXT}"),
            format!("use at most \"{MAX_DURATION_TEXT}\""),
        )),
        Err(_) => Err((
            format!("'{s}' is not a duration"),
            "write it like \"30s\", \"250ms\" or \"10m\"".to_string(),
        )),
    }
}

/// Parses a `rate_limit_cooldown` value: a duration from 1s to 6h. The error is a
/// `(message, fix)` pair, as [`parse_bounded_duration`]'s.
pub fn check_rate_limit_cooldown(s: &str) -> Result<Duration, (String, String)> {
    let fix = || "use a duration from \"1s\" to \"6h\", e.g. \"20s\"".to_string();
    match humantime::parse_duration(s.trim()) {
        Ok(d) if (MIN_RATE_LIMIT_COOLDOWN..=MAX_RATE_LIMIT_COOLDOWN).contains(&d) => Ok(d),
        Ok(_) => Err((format!("'{s}' is outside 1s–6h"), fix())),
        Err(_) => Err((format!("'{s}' is not a duration"), fix())),
    }
}

/// Looks up an environment variable by name.
pub type VarLookup<'a> = Box<dyn Fn(&str) -> Option<String> + 'a>;

/// Where env vars and relative paths come from while loading.
pub struct LoadEnv<'a> {
    /// Looks up an environment variable.
    pub var: VarLookup<'a>,
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
            var: Box::new(move |k| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_string())
            }),
            data_dir: data_dir.into(),
        }
    }
}

/// Validates a `[resilience]` table on its own, with the same rules as the file. The live
/// settings editor (console) and `PATCH /api/resilience` use it, so an edit is accepted
/// exactly when the same value would be accepted in `config.toml`. Environment variables are
/// not consulted.
pub fn resilience_from_raw(raw: &raw::RawResilience) -> Result<Resilience, Vec<Problem>> {
    let env = LoadEnv::fixed(&[], ".");
    let mut v = Validator::new(&env, SecretMode::Required);
    let r = v.resilience(raw);
    if v.problems.is_empty() {
        Ok(r)
    } else {
        Err(v.problems)
    }
}

/// Whether an `auth = { env }`, `client_keys_env` or `token_env` variable that is not set is
/// an error ([`SecretMode::Required`], what `sluice` itself needs to serve) or only a warning
/// ([`SecretMode::Optional`]: `sluice check`, `sluice status` and `sluice env` never send a
/// request upstream, so they work without the provider keys exported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecretMode {
    /// A missing secret is a validation problem.
    Required,
    /// A missing secret is a warning; the connection keeps `Auth::Key` with an empty secret.
    Optional,
}

/// A config validated with [`SecretMode::Optional`], plus the secrets that were missing.
#[derive(Debug)]
pub struct Lenient {
    /// The validated config (missing secrets are empty).
    pub config: Config,
    /// One problem per secret variable that is not set, in file order.
    pub missing_secrets: Vec<Problem>,
}

/// Parses and validates config text that came from `path` (used in messages).
pub fn from_str(text: &str, path: &Path, env: &LoadEnv<'_>) -> Result<Config, ConfigError> {
    from_str_with(text, path, env, SecretMode::Required).map(|l| l.config)
}

/// Like [`from_str`], with the given [`SecretMode`]; missing secrets are in
/// [`Lenient::missing_secrets`] (always empty with [`SecretMode::Required`]).
pub fn from_str_with(
    text: &str,
    path: &Path,
    env: &LoadEnv<'_>,
    mode: SecretMode,
) -> Result<Lenient, ConfigError> {
    let file = path.display().to_string();
    let raw: RawConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
        file: file.clone(),
        message: parse_message(text, &e),
    })?;
    let mut v = Validator::new(env, mode);
    let cfg = v.config(raw, path);
    if v.problems.is_empty() {
        Ok(Lenient {
            config: cfg,
            missing_secrets: v.missing_secrets,
        })
    } else {
        Err(ConfigError::Invalid {
            file,
            problems: v.problems,
        })
    }
}

/// The toml crate's message (line, column, source snippet, reason), indented under the file
/// name, with secret-looking words in the snippet masked and a hint when the unknown key looks
/// like a credential or the value is a number where a duration string belongs.
fn parse_message(source: &str, e: &toml::de::Error) -> String {
    let text = e.to_string();
    let mut lines: Vec<String> = text.trim_end().lines().map(redact_snippet_line).collect();
    let reason = e.message();
    if let Some(field) = reason
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
    {
        if let Some(near) = nearest_key(field, reason) {
            lines.push(format!("hint: did you mean {near}?"));
        }
        let f = field.to_ascii_lowercase();
        if ["key", "token", "secret", "password"]
            .iter()
            .any(|w| f.contains(w))
        {
            lines.push(format!(
                "hint: secrets never go in the config file; put '{field}' in an environment variable and write auth = {{ env = \"VAR_NAME\" }} on the connection"
            ));
        }
    }
    if let Some(hint) = unquoted_number_hint(source, e) {
        lines.push(hint);
    }
    lines.join("\n    ")
}

/// String-typed keys that are neither durations nor sizes (names, paths, addresses, enums).
const NON_DURATION_STRING_KEYS: &[&str] = &[
    "listen",
    "client_keys_env",
    "token_env",
    "path",
    "dir",
    "level",
    "theme",
    "id",
    "dialect",
    "base_url",
    "profile",
    "connection_strategy",
    "egress",
    "name",
    "strategy",
    "provider",
    "reason",
    "scope",
    "env",
];

/// For "invalid type: integer, expected a string": the fix, naming the key. Most string-typed
/// numbers in the config are durations with a unit (`timeout = "30s"`); `max_body` is a size.
fn unquoted_number_hint(text: &str, e: &toml::de::Error) -> Option<String> {
    let reason = e.message();
    let number = reason.starts_with("invalid type: integer")
        || reason.starts_with("invalid type: floating point");
    if !number || !reason.contains("expected a string") {
        return None;
    }
    let span = e.span()?;
    let before = text.get(..span.start)?;
    let key = before
        .trim_end()
        .strip_suffix('=')?
        .trim_end()
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .next()
        .filter(|k| !k.is_empty())?;
    let value = text.get(span)?.trim();
    Some(match key {
        "max_body" => format!(
            "hint: sizes are quoted strings with a unit: write {key} = \"{value}MiB\" (or \"{value}KiB\", \"{value}B\")"
        ),
        k if NON_DURATION_STRING_KEYS.contains(&k) => {
            format!("hint: {key} is text: write {key} = \"{value}\"")
        }
        _ => format!(
            "hint: durations are quoted strings with a unit: write {key} = \"{value}s\" for {value} seconds (or \"{value}ms\", \"{value}m\")"
        ),
    })
}

/// A listen address: `ip:port`, `[v6]:port`, or `localhost:port` (taken as 127.0.0.1, the
/// loopback address a client reaches; no DNS lookup). `None` for anything else.
pub fn parse_listen(s: &str) -> Option<SocketAddr> {
    let s = s.trim();
    if let Ok(a) = s.parse() {
        return Some(a);
    }
    let (host, port) = s.rsplit_once(':')?;
    if !host.eq_ignore_ascii_case("localhost") {
        return None;
    }
    let port: u16 = port.parse().ok()?;
    Some(SocketAddr::from(([127, 0, 0, 1], port)))
}

/// The expected field closest to `field` in serde's "unknown field `x`, expected one of `a`,
/// `b`" message, when it is a plausible typo: at most a third of its letters differ (at least
/// one edit allowed). `None` when nothing is close.
fn nearest_key<'r>(field: &str, reason: &'r str) -> Option<&'r str> {
    let (_, expected) = reason.split_once("expected ")?;
    let budget = (field.chars().count() / 3).max(1);
    expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|k| (strsim::levenshtein(field, k), k))
        .filter(|(d, _)| *d <= budget)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

/// Masks secret-looking words in a snippet line (`12 | key = "sk-…"`) of a toml error, keeping
/// the length so the `^^^` marker below still lines up. Other lines pass unchanged.
fn redact_snippet_line(line: &str) -> String {
    let Some((gutter, source)) = line.split_once(" | ") else {
        return line.to_string();
    };
    if gutter.trim().is_empty() || !gutter.trim().chars().all(|c| c.is_ascii_digit()) {
        return line.to_string();
    }
    let mut out = String::with_capacity(line.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if looks_secret(word) {
            out.extend(std::iter::repeat_n('*', word.chars().count()));
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in source.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    format!("{gutter} | {out}")
}

/// A word of at least 20 `[A-Za-z0-9_-]` characters with both letters and digits: API keys
/// and tokens look like this; config keys and ordinary values do not.
fn looks_secret(w: &str) -> bool {
    w.len() >= 20
        && w.chars().any(|c| c.is_ascii_digit())
        && w.chars().any(|c| c.is_ascii_alphabetic())
}

struct Validator<'e, 'a> {
    problems: Vec<Problem>,
    env: &'e LoadEnv<'a>,
    secrets: SecretMode,
    missing_secrets: Vec<Problem>,
}

impl<'e, 'a> Validator<'e, 'a> {
    fn new(env: &'e LoadEnv<'a>, secrets: SecretMode) -> Self {
        Self {
            problems: Vec::new(),
            env,
            secrets,
            missing_secrets: Vec::new(),
        }
    }

    fn bad(&mut self, key: impl Into<String>, message: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem {
            key: key.into(),
            message: message.into(),
            fix: fix.into(),
        });
    }

    fn duration(&mut self, key: &str, value: Option<&String>, default: Duration) -> Duration {
        let Some(s) = value else { return default };
        match parse_bounded_duration(s) {
            Ok(d) => d,
            Err((message, fix)) => {
                self.bad(key, message, fix);
                default
            }
        }
    }

    /// A `rate_limit_cooldown` value: a duration from [`MIN_RATE_LIMIT_COOLDOWN`] to
    /// [`MAX_RATE_LIMIT_COOLDOWN`] (1s–6h); `None` when unset or invalid (reported at `key`).
    fn rate_limit_cooldown(&mut self, key: &str, value: Option<&String>) -> Option<Duration> {
        let s = value?;
        match check_rate_limit_cooldown(s) {
            Ok(d) => Some(d),
            Err((message, fix)) => {
                self.bad(key, message, fix);
                None
            }
        }
    }

    fn count(&mut self, key: &str, value: Option<i64>, default: u32, min: u32, max: u32) -> u32 {
        let Some(n) = value else { return default };
        match u32::try_from(n) {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.bad(
                    key,
                    format!("'{n}' is out of range"),
                    format!("use a whole number from {min} to {max}"),
                );
                default
            }
        }
    }

    fn addr(&mut self, key: &str, value: Option<&String>, default: &str) -> SocketAddr {
        let s = value.map(String::as_str).unwrap_or(default);
        match parse_listen(s) {
            Some(a) => a,
            None => {
                self.bad(
                    key,
                    format!("'{s}' is not a socket address"),
                    "write ip:port or localhost:port, e.g. \"127.0.0.1:8787\"",
                );
                default
                    .parse()
                    .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)))
            }
        }
    }

    /// `auth.scheme` of connection `ck`: absent is the dialect's header; `"bearer"` sends
    /// `Authorization: Bearer` (a subscription token).
    fn key_scheme(&mut self, ck: &str, v: Option<&toml::Value>) -> KeyScheme {
        match v.map(|v| v.as_str()) {
            None => KeyScheme::Dialect,
            Some(Some("bearer")) => KeyScheme::Bearer,
            Some(_) => {
                self.bad(
                    format!("{ck}.auth.scheme"),
                    "is not a key scheme",
                    "write scheme = \"bearer\" to send the key as Authorization: Bearer (subscription tokens), or leave it out for the dialect's own header",
                );
                KeyScheme::Dialect
            }
        }
    }

    fn env_secret(&mut self, key: &str, var: &str) -> Option<Secret> {
        if var.is_empty() || !var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            // The value is not echoed: a pasted secret lands here (keys contain '-').
            self.bad(
                key,
                "is not an environment variable name (value not shown in case it is a secret)",
                "name the variable that holds the secret, using letters, digits and '_' only, e.g. \"OPENROUTER_API_KEY\"",
            );
            return None;
        }
        match (self.env.var)(var) {
            Some(v) if !v.trim().is_empty() => Some(Secret::new(v.trim())),
            _ if self.secrets == SecretMode::Optional => {
                self.missing_secrets.push(Problem {
                    key: key.into(),
                    message: format!("environment variable '{var}' is not set"),
                    fix: format!("export {var}=... before starting sluice"),
                });
                Some(Secret::new(""))
            }
            _ => {
                self.bad(
                    key,
                    format!("environment variable '{var}' is not set"),
                    format!("export {var}=... before starting sluice"),
                );
                None
            }
        }
    }

    /// Reports a zero duration at `key`; `example` is a sensible value to suggest.
    fn nonzero(&mut self, key: &str, d: Duration, example: &str) {
        if d.is_zero() {
            self.bad(
                key,
                "'0s' is not allowed here",
                format!("use a positive duration such as {example}"),
            );
        }
    }

    fn resolve_path(&self, p: Option<&String>, default: &str) -> PathBuf {
        let p = PathBuf::from(p.map(String::as_str).unwrap_or(default));
        if p.is_absolute() {
            p
        } else {
            self.env.data_dir.join(p)
        }
    }

    fn config(&mut self, raw: RawConfig, path: &Path) -> Config {
        let server = self.server(&raw.server);
        let admin = self.admin(&raw.admin);
        if admin.listen == server.listen && admin.listen.port() != 0 {
            self.bad(
                "admin.listen",
                format!("'{}' is also server.listen", admin.listen),
                "give the admin API its own port, e.g. 127.0.0.1:8788",
            );
        }
        let store = StoreConfig {
            path: self.resolve_path(raw.store.path.as_ref(), "sluice.db"),
            request_log_max_rows: raw
                .store
                .request_log_max_rows
                .map(|n| u64::try_from(n).unwrap_or(0))
                .unwrap_or(DEFAULT_REQUEST_LOG_MAX_ROWS),
            request_log_max_age: self.duration(
                "store.request_log_max_age",
                raw.store.request_log_max_age.as_ref(),
                DEFAULT_REQUEST_LOG_MAX_AGE,
            ),
        };
        if raw.store.request_log_max_rows.is_some_and(|n| n < 1) {
            self.bad(
                "store.request_log_max_rows",
                "must be at least 1",
                "use a positive number of rows, e.g. 10000",
            );
        }
        let level = raw.log.level.clone().unwrap_or_else(|| "info".into());
        if !valid_log_filter(&level) {
            self.bad(
                "log.level",
                format!("'{level}' is not a log level or filter"),
                "use error, warn, info, debug or trace, or a filter like \"info,sluice=debug\"",
            );
        }
        let log = LogConfig {
            dir: self.resolve_path(raw.log.dir.as_ref(), "logs"),
            level,
        };
        let console = self.console(&raw.console);
        if raw.providers.is_empty() {
            self.bad(
                "providers",
                "no provider is configured",
                "add at least one [[providers]] table (see the shipped config.toml)",
            );
        }
        let providers = self.providers(raw.providers);
        let combos = self.combos(raw.combos, &providers);
        let default_providers = self.routing(&raw.routing, &providers);
        let resilience = self.resilience(&raw.resilience);
        self.provider_breakers(&providers, &resilience);
        let restatement = self.restatements(raw.restatement, &providers);
        let error_rules = self.error_rules(raw.error_rules, &providers);
        let session_leases = self.session_leases(&raw.session_leases, &server);
        let index = super::Index::build(&providers, &combos);
        let keys = super::keys::KeyTable::positional(&providers);
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
            generation: 0,
            keys,
            session_leases,
            index,
        }
    }

    fn server(&mut self, raw: &raw::RawServer) -> ServerConfig {
        let listen = self.addr("server.listen", raw.listen.as_ref(), DEFAULT_LISTEN);
        let max_body = match &raw.max_body {
            None => DEFAULT_MAX_BODY,
            Some(s) => match s.trim().parse::<bytesize::ByteSize>() {
                Ok(b) if b.as_u64() >= 1024 => b.as_u64(),
                _ => {
                    self.bad(
                        "server.max_body",
                        format!("'{s}' is not a size of at least 1KiB"),
                        "write it like \"32MiB\" or \"64MB\"",
                    );
                    DEFAULT_MAX_BODY
                }
            },
        };
        let mut client_keys = Vec::new();
        if let Some(var) = &raw.client_keys_env {
            if let Some(s) = self.env_secret("server.client_keys_env", var) {
                client_keys = key_list(&s);
                if client_keys.is_empty() && !s.expose().is_empty() {
                    self.bad(
                        "server.client_keys_env",
                        format!("environment variable '{var}' holds no keys"),
                        format!("export {var}=key1,key2 (comma-separated) before starting sluice"),
                    );
                }
            }
        } else if !listen.ip().is_loopback() {
            self.bad(
                "server.listen",
                format!("'{listen}' is not a loopback address and no client keys are configured"),
                "set server.client_keys_env to an env var holding comma-separated client keys, or listen on 127.0.0.1",
            );
        }
        let drain_timeout = self.duration(
            "server.drain_timeout",
            raw.drain_timeout.as_ref(),
            DEFAULT_DRAIN_TIMEOUT,
        );
        let max_connections = self.count(
            "server.max_connections",
            raw.max_connections,
            DEFAULT_MAX_CONNECTIONS,
            1,
            1_000_000,
        );
        let header_read_timeout = self.duration(
            "server.header_read_timeout",
            raw.header_read_timeout.as_ref(),
            DEFAULT_HEADER_READ_TIMEOUT,
        );
        let header_read_timeout =
            if header_read_timeout.is_zero() || header_read_timeout > Duration::from_secs(3600) {
                self.bad(
                    "server.header_read_timeout",
                    format!(
                        "'{}' is out of range",
                        humantime::format_duration(header_read_timeout)
                    ),
                    "use a duration from 1ms to 1h, like \"10s\"",
                );
                DEFAULT_HEADER_READ_TIMEOUT
            } else {
                header_read_timeout
            };
        ServerConfig {
            listen,
            max_body,
            client_keys,
            client_keys_env: raw.client_keys_env.clone(),
            drain_timeout,
            max_connections,
            header_read_timeout,
            watch_config: raw.watch_config.unwrap_or(false),
        }
    }

    fn admin(&mut self, raw: &raw::RawAdmin) -> AdminConfig {
        let listen = self.addr("admin.listen", raw.listen.as_ref(), DEFAULT_ADMIN_LISTEN);
        let token = raw
            .token_env
            .as_ref()
            .and_then(|v| self.env_secret("admin.token_env", v));
        if !listen.ip().is_loopback() && raw.token_env.is_none() {
            self.bad(
                "admin.listen",
                format!("'{listen}' is not a loopback address and admin.token_env is not set"),
                "set admin.token_env to an env var holding a bearer token, or listen on 127.0.0.1",
            );
        }
        AdminConfig {
            listen,
            token,
            token_env: raw.token_env.clone(),
        }
    }

    fn console(&mut self, raw: &raw::RawConsole) -> ConsoleConfig {
        let theme = raw.theme.clone().unwrap_or_else(|| "default".into());
        let tick = self.duration("console.tick", raw.tick.as_ref(), DEFAULT_TICK);
        if tick < Duration::from_millis(50) {
            self.bad(
                "console.tick",
                format!(
                    "'{}' is shorter than 50ms",
                    humantime::format_duration(tick)
                ),
                "use at least \"50ms\"; the default is \"250ms\"",
            );
        }
        let mut keys = BTreeMap::new();
        for (action, v) in &raw.keys {
            let list = match v {
                toml::Value::String(s) => vec![s.clone()],
                toml::Value::Array(a) if a.iter().all(|x| x.is_str()) => a
                    .iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect(),
                other => {
                    self.bad(
                        format!("console.keys.{action}"),
                        format!("'{other}' is not a key or list of keys"),
                        "write \"c\" or [\"r\", \"<C-r>\"]",
                    );
                    continue;
                }
            };
            keys.insert(action.clone(), list);
        }
        ConsoleConfig { theme, tick, keys }
    }
}

/// Whether `s` is a tracing filter sluice accepts: comma-separated directives, each a level
/// (`off`, `error`, `warn`, `info`, `debug`, `trace`) or `target=level`. A bare word is
/// rejected even though `EnvFilter` would read it as a target name ("verbose" is a typo, not
/// a crate).
fn valid_log_filter(s: &str) -> bool {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    let is_level = |l: &str| LEVELS.contains(&l.trim().to_ascii_lowercase().as_str());
    let directives_ok = !s.trim().is_empty()
        && s.split(',').all(|d| match d.rsplit_once('=') {
            Some((target, level)) => !target.trim().is_empty() && is_level(level),
            None => is_level(d),
        });
    directives_ok && tracing_subscriber::EnvFilter::try_new(s).is_ok()
}

fn strings(s: &[&str]) -> Vec<String> {
    s.iter().map(|x| (*x).to_string()).collect()
}

fn clamp_queue(d: Duration) -> Duration {
    d.clamp(Duration::from_millis(1), Duration::from_secs(24 * 3600))
}

fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Validates `[[error_rules]]` and `[[restatement]]` lists given outside the file (an
/// operator's live edit) with exactly the file's rules, against the running `providers`.
/// Errors: every problem, keyed like the file (`error_rules.<id>.reason`).
pub fn rule_lists(
    error_rules: &[raw::RawErrorRule],
    restatement: &[raw::RawRestatement],
    providers: &[Provider],
) -> Result<(Vec<ErrorRule>, Vec<Restatement>), Vec<Problem>> {
    let env = LoadEnv::fixed(&[], "");
    let mut v = Validator::new(&env, SecretMode::Optional);
    let rules = v.error_rules(error_rules.to_vec(), providers);
    let restated = v.restatements(restatement.to_vec(), providers);
    if v.problems.is_empty() {
        Ok((rules, restated))
    } else {
        Err(v.problems)
    }
}

/// The comma-separated keys in `s` (blanks dropped), each kept secret.
pub(super) fn key_list(s: &Secret) -> Vec<Secret> {
    s.expose()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(Secret::new)
        .collect()
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
        Some(h)
            if h.parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback()) =>
        {
            Profile::Local
        }
        _ => Profile::ApiKey,
    }
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
    Some(TargetSpec {
        provider,
        connection,
        model: model.to_string(),
        weight: 1,
    })
}

mod defaults;
mod providers;
mod resilience;
mod rules;
mod session_leases;
pub use session_leases::{
    DEFAULT_LEASE_MAX_TTL, DEFAULT_LEASE_TTL, MAX_LEASE_TTL, MIN_LEASE_TTL, check_lease_ttl,
};
#[cfg(test)]
mod secret_mode_tests;

pub use defaults::*;

#[cfg(test)]
mod prop;
#[cfg(test)]
mod rate_rules_tests;
#[cfg(test)]
mod tests;
