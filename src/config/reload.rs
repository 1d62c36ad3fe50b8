//! What a config reload may change: [`restart_only_changes`] lists every difference between
//! the running config and a freshly validated one that only a restart can apply (listen
//! addresses, the store and log files, the console, and the provider/connection layout the
//! live state and the admission gates are built on). A reload with any such difference is
//! refused whole, so nothing half-applies. [`ReloadDiff`] says what a reload changes.
//!
//! Pure: both configs are already validated; nothing here reads files or the clock.

use serde::Serialize;

use super::{Config, Connection, Problem, Provider};

/// The fix every restart-only difference carries.
const RESTART_FIX: &str =
    "restart sluice to apply it, or put the running value back to reload the rest";

/// Every difference between `old` and `new` that a live reload cannot apply, one
/// [`Problem`] per key (empty: the reload may go ahead). Secrets are never quoted: an auth
/// change shows as its mode (`passthrough`, `env:VAR`).
pub fn restart_only_changes(old: &Config, new: &Config) -> Vec<Problem> {
    let mut out = Vec::new();
    let mut cmp = |key: String, a: String, b: String| {
        if a != b {
            out.push(Problem {
                key,
                message: format!("changed from '{a}' to '{b}'; a reload cannot apply it"),
                fix: RESTART_FIX.into(),
            });
        }
    };
    cmp(
        "server.listen".into(),
        old.server.listen.to_string(),
        new.server.listen.to_string(),
    );
    cmp(
        "admin.listen".into(),
        old.admin.listen.to_string(),
        new.admin.listen.to_string(),
    );
    cmp(
        "server.max_connections".into(),
        old.server.max_connections.to_string(),
        new.server.max_connections.to_string(),
    );
    cmp(
        "server.header_read_timeout".into(),
        format!("{:?}", old.server.header_read_timeout),
        format!("{:?}", new.server.header_read_timeout),
    );
    cmp(
        "store".into(),
        format!("{:?}", old.store),
        format!("{:?}", new.store),
    );
    cmp(
        "log".into(),
        format!("{:?}", old.log),
        format!("{:?}", new.log),
    );
    cmp(
        "console".into(),
        format!("{:?}", old.console),
        format!("{:?}", new.console),
    );
    cmp(
        "resilience.concurrency.global_max".into(),
        format!("{:?}", old.resilience.concurrency.global_max),
        format!("{:?}", new.resilience.concurrency.global_max),
    );
    let ids = |c: &Config| -> Vec<String> { c.providers.iter().map(|p| p.id.clone()).collect() };
    cmp("providers".into(), ids(old).join(", "), ids(new).join(", "));
    for (a, b) in old.providers.iter().zip(&new.providers) {
        if a.id == b.id {
            provider_layout(a, b, &mut cmp);
        }
    }
    out
}

/// The restart-only keys of one provider kept under the same id.
fn provider_layout(a: &Provider, b: &Provider, cmp: &mut impl FnMut(String, String, String)) {
    let key = |k: &str| format!("providers.{}.{k}", a.id);
    cmp(
        key("dialect"),
        a.dialect.as_str().into(),
        b.dialect.as_str().into(),
    );
    cmp(
        key("base_url"),
        a.base_url.to_string(),
        b.base_url.to_string(),
    );
    cmp(
        key("connect_timeout"),
        format!("{:?}", a.connect_timeout),
        format!("{:?}", b.connect_timeout),
    );
    cmp(
        key("profile"),
        a.profile.as_str().into(),
        b.profile.as_str().into(),
    );
    cmp(
        key("max_concurrent"),
        format!("{:?}", a.max_concurrent),
        format!("{:?}", b.max_concurrent),
    );
    let ids =
        |p: &Provider| -> Vec<String> { p.connections.iter().map(|c| c.id.clone()).collect() };
    cmp(key("connections"), ids(a).join(", "), ids(b).join(", "));
    for (x, y) in a.connections.iter().zip(&b.connections) {
        if x.id == y.id {
            connection_layout(&a.id, x, y, cmp);
        }
    }
}

/// The restart-only keys of one connection kept under the same id (its credential and the
/// admission gate facts).
fn connection_layout(
    provider: &str,
    a: &Connection,
    b: &Connection,
    cmp: &mut impl FnMut(String, String, String),
) {
    let key = |k: &str| format!("providers.{provider}.connections.{}.{k}", a.id);
    cmp(key("auth"), a.auth.describe(), b.auth.describe());
    cmp(
        key("max_concurrent"),
        format!("{:?}", a.max_concurrent),
        format!("{:?}", b.max_concurrent),
    );
    cmp(
        key("model_concurrency"),
        format!("{:?}", a.model_concurrency),
        format!("{:?}", b.model_concurrency),
    );
    cmp(
        key("rate_limit_protection"),
        format!("{:?}", a.rate_limit_protection),
        format!("{:?}", b.rate_limit_protection),
    );
    cmp(
        key("concurrency_fail_open"),
        a.concurrency_fail_open.to_string(),
        b.concurrency_fail_open.to_string(),
    );
    cmp(
        key("queue"),
        format!("{:?}", a.queue),
        format!("{:?}", b.queue),
    );
}

/// What an applied reload changed (the admin API's JSON reply, the console's status line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReloadDiff {
    /// The file reloaded.
    pub file: String,
    /// Providers in the new file only (started fresh).
    pub providers_added: usize,
    /// Providers in the running config only (dropped).
    pub providers_removed: usize,
    /// Providers in both (their live state kept).
    pub providers_kept: usize,
    /// Top-level sections whose values changed, e.g. `["combos", "resilience"]`; empty when
    /// the file says what the running config already said.
    pub changed: Vec<String>,
}

impl ReloadDiff {
    /// What reloading from `old` to `new` changes.
    pub fn between(old: &Config, new: &Config) -> Self {
        let has = |c: &Config, id: &str| c.providers.iter().any(|p| p.id == id);
        let kept = new.providers.iter().filter(|p| has(old, &p.id)).count();
        let sections: [(&str, String, String); 8] = [
            (
                "server",
                format!("{:?}", old.server),
                format!("{:?}", new.server),
            ),
            (
                "admin",
                format!("{:?}", old.admin),
                format!("{:?}", new.admin),
            ),
            (
                "routing",
                format!("{:?}", old.default_providers),
                format!("{:?}", new.default_providers),
            ),
            (
                "providers",
                format!("{:?}", old.providers),
                format!("{:?}", new.providers),
            ),
            (
                "combos",
                format!("{:?}", old.combos),
                format!("{:?}", new.combos),
            ),
            (
                "resilience",
                format!("{:?}", old.resilience),
                format!("{:?}", new.resilience),
            ),
            (
                "error_rules",
                format!("{:?}{:?}", old.error_rules, old.restatement),
                format!("{:?}{:?}", new.error_rules, new.restatement),
            ),
            (
                "session_leases",
                format!("{:?}", old.session_leases),
                format!("{:?}", new.session_leases),
            ),
        ];
        Self {
            file: new.file.display().to_string(),
            providers_added: new.providers.len().saturating_sub(kept),
            providers_removed: old.providers.len().saturating_sub(kept),
            providers_kept: kept,
            changed: sections
                .into_iter()
                .filter(|(_, a, b)| a != b)
                .map(|(k, _, _)| k.to_owned())
                .collect(),
        }
    }

    /// One line for the console's status bar, e.g. `config reloaded: combos, resilience`.
    pub fn summary(&self) -> String {
        if self.changed.is_empty() {
            "config reloaded: nothing changed".into()
        } else {
            format!("config reloaded: {} changed", self.changed.join(", "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};
    use std::path::Path;

    fn cfg(extra: &str, conn: &str) -> Config {
        let text = format!(
            "{extra}\n[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"{conn}\"\n  auth = \"passthrough\"\n"
        );
        from_str(&text, Path::new("t.toml"), &LoadEnv::fixed(&[], "/tmp")).unwrap()
    }

    #[test]
    fn live_keys_reload_and_restart_only_keys_are_named() {
        let old = cfg("", "c");
        let live = cfg("[resilience.breaker.api_key]\nopen_at = 20\n", "c");
        assert!(restart_only_changes(&old, &live).is_empty());
        let d = ReloadDiff::between(&old, &live);
        assert_eq!(
            (d.providers_kept, d.providers_added, d.providers_removed),
            (1, 0, 0)
        );
        assert_eq!(d.changed, ["resilience"]);

        let moved = cfg("[server]\nlisten = \"127.0.0.1:9999\"\n", "c");
        let p = restart_only_changes(&old, &moved);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].key, "server.listen");
        assert!(p[0].message.contains("127.0.0.1:9999") && p[0].fix.contains("restart"));

        let renamed = cfg("", "d");
        let keys: Vec<String> = restart_only_changes(&old, &renamed)
            .into_iter()
            .map(|p| p.key)
            .collect();
        assert_eq!(keys, ["providers.p.connections"]);
        assert_eq!(
            ReloadDiff::between(&old, &old).summary(),
            "config reloaded: nothing changed"
        );
    }
}
