//! What a config reload may change: [`restart_only_changes`] lists every difference between
//! the running config and a freshly validated one that only a restart can apply (listen
//! addresses, the store and log files, the console and the global concurrency cap). A
//! reload with any such difference is refused whole, so nothing half-applies. Adding,
//! removing and reordering providers and connections, and every provider or connection key
//! (their concurrency caps included), apply live: live state is kept under stable keys
//! (`config::keys`), so a reload only adds and drops keys. [`ReloadDiff`] says what a reload changes.
//!
//! Pure: both configs are already validated; nothing here reads files or the clock.

use serde::Serialize;

use super::{Config, Problem};

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
    out
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
    /// Connections in the new file only (started fresh), including those of new providers.
    #[serde(default)]
    pub connections_added: usize,
    /// Connections in the running config only (dropped), including those of removed
    /// providers.
    #[serde(default)]
    pub connections_removed: usize,
    /// Connections in both under the same provider (their live state kept).
    #[serde(default)]
    pub connections_kept: usize,
    /// Top-level sections whose values changed, e.g. `["combos", "resilience"]`; empty when
    /// the file says what the running config already said.
    pub changed: Vec<String>,
}

impl ReloadDiff {
    /// What reloading from `old` to `new` changes.
    pub fn between(old: &Config, new: &Config) -> Self {
        let has = |c: &Config, id: &str| c.providers.iter().any(|p| p.id == id);
        let kept = new.providers.iter().filter(|p| has(old, &p.id)).count();
        let count = |c: &Config| {
            c.providers
                .iter()
                .map(|p| p.connections.len())
                .sum::<usize>()
        };
        let conns_kept: usize = new
            .providers
            .iter()
            .filter_map(|p| Some((p, old.provider(&p.id)?)))
            .map(|(p, o)| {
                p.connections
                    .iter()
                    .filter(|c| o.connections.iter().any(|x| x.id == c.id))
                    .count()
            })
            .sum();
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
            connections_added: count(new).saturating_sub(conns_kept),
            connections_removed: count(old).saturating_sub(conns_kept),
            connections_kept: conns_kept,
            changed: sections
                .into_iter()
                .filter(|(_, a, b)| a != b)
                .map(|(k, _, _)| k.to_owned())
                .collect(),
        }
    }

    /// One line for the console's status bar, e.g. `config reloaded: combos, resilience
    /// changed`, with what came and went when the layout changed, e.g. `config reloaded:
    /// providers changed (1 provider added, 2 connections removed)`.
    pub fn summary(&self) -> String {
        if self.changed.is_empty() {
            return "config reloaded: nothing changed".into();
        }
        let counted = [
            (self.providers_added, "provider", "added"),
            (self.providers_removed, "provider", "removed"),
            (self.connections_added, "connection", "added"),
            (self.connections_removed, "connection", "removed"),
        ];
        let moves: Vec<String> = counted
            .iter()
            .filter(|(n, _, _)| *n > 0)
            .map(|(n, what, how)| {
                let s = if *n == 1 { "" } else { "s" };
                format!("{n} {what}{s} {how}")
            })
            .collect();
        let tail = if moves.is_empty() {
            String::new()
        } else {
            format!(" ({})", moves.join(", "))
        };
        format!("config reloaded: {} changed{tail}", self.changed.join(", "))
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

        // A renamed connection is one removed and one added: that applies live.
        let renamed = cfg("", "d");
        assert!(restart_only_changes(&old, &renamed).is_empty());
        let d = ReloadDiff::between(&old, &renamed);
        assert_eq!(
            (
                d.connections_kept,
                d.connections_added,
                d.connections_removed
            ),
            (0, 1, 1)
        );
        assert_eq!(
            ReloadDiff::between(&old, &old).summary(),
            "config reloaded: nothing changed"
        );

        // A combo's keys apply live: the next request reads the new combo.
        let combo = |extra: &str| {
            cfg(
                &format!("[[combos]]\nname = \"m\"\ntargets = [\"p/x\"]\n{extra}"),
                "c",
            )
        };
        let (waits, answers) = (combo(""), combo("cooldown_wait = false\n"));
        assert!(restart_only_changes(&waits, &answers).is_empty());
        assert_eq!(ReloadDiff::between(&waits, &answers).changed, ["combos"]);
    }

    /// A config with providers `spec` = [(id, [(connection id, extra connection keys)])].
    fn layout(spec: &[(&str, &[(&str, &str)])]) -> Config {
        let mut text = String::new();
        for (p, conns) in spec {
            text.push_str(&format!(
                "[[providers]]\nid = \"{p}\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n"
            ));
            for (c, extra) in *conns {
                text.push_str(&format!(
                    "  [[providers.connections]]\n  id = \"{c}\"\n  auth = \"passthrough\"\n  {extra}\n"
                ));
            }
        }
        from_str(&text, Path::new("t.toml"), &LoadEnv::fixed(&[], "/tmp")).unwrap()
    }

    #[test]
    fn layout_changes_apply_live_but_kept_gate_caps_need_a_restart() {
        let old = layout(&[("a", &[("a1", ""), ("a2", "max_concurrent = 2")])]);
        // A provider added in front, a connection removed, one added, queue facts changed.
        let new = layout(&[
            ("n", &[("n1", "max_concurrent = 1")]),
            (
                "a",
                &[
                    ("a2", "max_concurrent = 2\n  concurrency_fail_open = true"),
                    ("a3", ""),
                ],
            ),
        ]);
        assert!(restart_only_changes(&old, &new).is_empty());
        let d = ReloadDiff::between(&old, &new);
        assert_eq!(
            (d.providers_kept, d.providers_added, d.providers_removed),
            (1, 1, 0)
        );
        assert_eq!(
            (
                d.connections_kept,
                d.connections_added,
                d.connections_removed
            ),
            (1, 2, 1)
        );
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["connectionsAdded"], 2);
        assert_eq!(
            d.summary(),
            "config reloaded: routing, providers changed (1 provider added, 2 connections added, 1 connection removed)"
        );

        // A kept connection's cap changes live too (its gate takes the new cap).
        let recapped = layout(&[("a", &[("a1", ""), ("a2", "max_concurrent = 3")])]);
        assert!(restart_only_changes(&old, &recapped).is_empty());
    }
}
