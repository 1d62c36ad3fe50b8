//! `Control`: the single door for operator actions (`docs/ARCHITECTURE.md#the-operator-doors`).
//! The console, the admin API and config reload all call it; nothing else mutates live state on
//! an operator's behalf.
//!
//! Each action applies to the live policy state at the clock's `now`, writes the changed rows
//! behind to the store, marks the snapshot dirty, and returns a report the caller shows
//! (the admin API as JSON, the console in its status bar).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::config::{Config, Resilience};
use crate::core::Core;
pub(crate) use crate::core::operator::settings::apply_saved_settings;
pub use crate::core::operator::settings::{
    CooldownPatch, LockoutPatch, PreflightPatch, QueuePatch, SettingsPatch, apply_patch,
};
use crate::core::resilience::persist::connection_row;
use crate::policy::cooldown::ClearResult;
use crate::store::{SettingRow, StateWrite};

/// The `settings` row holding operator overrides of the resilience tunables.
pub const SETTINGS_KEY: &str = "resilience";

/// Why an operator action was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    /// No provider with this id.
    #[error("unknown provider '{0}'")]
    UnknownProvider(String),
    /// No connection with this id.
    #[error("unknown connection '{0}'")]
    UnknownConnection(String),
    /// A value failed validation; `field` is the dotted key.
    #[error("{field}: {message}")]
    Invalid {
        /// Dotted key, e.g. `model_lockout.max_cooldown`.
        field: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

/// Which connections a clear applies to (`POST /api/resilience/cooldowns`, §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClearTarget {
    /// These connection ids.
    Connections(Vec<String>),
    /// Every connection, or every connection of one provider.
    All {
        /// Limit to this provider.
        provider: Option<String>,
    },
}

/// Result of a clear: connection ids per outcome, and how many live lockouts went with them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct ClearReport {
    /// Connections whose cooldown or quota wait was removed.
    pub cleared: Vec<String>,
    /// Connections that were not excluded.
    pub unchanged: Vec<String>,
    /// Connections in a terminal state (listed, never cleared here).
    pub skipped_terminal: Vec<String>,
    /// Live model lockouts removed from the cleared connections.
    pub lockouts_cleared: u32,
}

impl ClearReport {
    /// One line for the console's status bar, e.g. `cleared 2, skipped 1 terminal`.
    pub fn summary(&self) -> String {
        let mut parts = vec![format!("cleared {}", self.cleared.len())];
        if !self.unchanged.is_empty() {
            parts.push(format!("{} unchanged", self.unchanged.len()));
        }
        if !self.skipped_terminal.is_empty() {
            parts.push(format!("skipped {} terminal", self.skipped_terminal.len()));
        }
        if self.lockouts_cleared > 0 {
            parts.push(format!("{} lockouts cleared", self.lockouts_cleared));
        }
        parts.join(", ")
    }
}

/// Why a config reload changed nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReloadError {
    /// The file did not load or validate (the same rules as at startup); one line per
    /// problem, each naming the file, the key and the fix.
    #[error("{0}")]
    Invalid(String),
    /// The file changes keys only a restart applies (listen addresses, the store, the log,
    /// the console, the concurrency caps of kept providers and connections); the rest was
    /// not applied either.
    #[error("{}", render_restart(file, problems))]
    RestartNeeded {
        /// The config file.
        file: String,
        /// One per restart-only key that changed.
        problems: Vec<crate::config::Problem>,
    },
}

fn render_restart(file: &str, problems: &[crate::config::Problem]) -> String {
    let lines: Vec<String> = problems
        .iter()
        .map(|p| format!("{file}: {}: {}; {}", p.key, p.message, p.fix))
        .collect();
    format!("nothing reloaded (restart needed):\n{}", lines.join("\n"))
}

impl ReloadError {
    /// The admin API's error code: `config_invalid` or `restart_required`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Invalid(_) => "config_invalid",
            Self::RestartNeeded { .. } => "restart_required",
        }
    }
}

/// Handle through which operators act on sluice.
#[derive(Clone)]
pub struct Control {
    core: Core,
    shutdown: CancellationToken,
    /// Set by `sluice --readonly`: the admin API refuses every mutating request, so an
    /// attached console cannot change state either. Shared by clones.
    readonly: Arc<AtomicBool>,
    /// One reload at a time (SIGHUP, the console, the API and the file watch may race); an
    /// action that reads the config and then acts on the live state takes it too, so its
    /// answer names the connections of the config it acted on.
    reloading: Arc<std::sync::Mutex<()>>,
    /// The upstream probe clear-and-verify sends (`crate::core::operator::verify`); set once at startup.
    pub(in crate::core) probe:
        Arc<std::sync::OnceLock<Arc<dyn crate::core::operator::verify::Probe>>>,
}

impl Control {
    /// A door onto `core`; `shutdown` is cancelled to stop sluice. Not read-only.
    pub fn new(core: Core, shutdown: CancellationToken) -> Self {
        Self {
            core,
            shutdown,
            readonly: Arc::new(AtomicBool::new(false)),
            reloading: Arc::default(),
            probe: Arc::default(),
        }
    }

    /// Re-reads the config file sluice started with, validates it exactly like startup,
    /// and applies it when only live keys changed: in-flight requests keep the config they
    /// started with, and every provider, connection and model still in the file (matched by
    /// id) keeps its live state (breakers, cooldowns, lockouts, headroom, pins, queues and
    /// permits) wherever it now sits; new ones start fresh, removed ones are dropped
    /// (`Core::replace_config`). The operator's
    /// saved setting overrides stay on top of the new file. The one door for SIGHUP, the
    /// console key, `POST /api/config/reload` and `[server] watch_config`.
    ///
    /// Errors: [`ReloadError::Invalid`] (the file is broken) or
    /// [`ReloadError::RestartNeeded`] (a restart-only key changed); either way nothing changed.
    pub fn reload_config(&self) -> Result<crate::config::reload::ReloadDiff, ReloadError> {
        let _one = self.reloading.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.core.config();
        let new = match crate::config::load(&old.file) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("config reload refused: {e}");
                return Err(ReloadError::Invalid(e.to_string()));
            }
        };
        let problems = crate::config::reload::restart_only_changes(&old, &new);
        if !problems.is_empty() {
            let e = ReloadError::RestartNeeded {
                file: old.file.display().to_string(),
                problems,
            };
            tracing::warn!("config reload refused: {e}");
            return Err(e);
        }
        let diff = crate::config::reload::ReloadDiff::between(&old, &new);
        self.core.replace_config(new);
        tracing::info!(
            changed = ?diff.changed,
            file = %diff.file,
            providers_added = diff.providers_added,
            providers_removed = diff.providers_removed,
            connections_added = diff.connections_added,
            connections_removed = diff.connections_removed,
            "config reloaded"
        );
        Ok(diff)
    }

    /// Holds off reloads while an action indexes the live state by config position.
    fn no_reload(&self) -> std::sync::MutexGuard<'_, ()> {
        self.reloading.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Marks this sluice read-only (CLI `--readonly`): the admin API then answers every
    /// POST/PUT/PATCH/DELETE with 403, whoever sends it (an attached console, a script).
    pub fn set_readonly(&self, on: bool) {
        self.readonly.store(on, Ordering::Relaxed);
    }

    /// True when started with `--readonly` (see [`Control::set_readonly`]).
    pub fn is_readonly(&self) -> bool {
        self.readonly.load(Ordering::Relaxed)
    }

    /// A receiver of the published snapshots (the same coalesced channel the in-process
    /// console reads); the admin API's snapshot stream subscribes here.
    pub fn subscribe(&self) -> tokio::sync::watch::Receiver<Arc<crate::snapshot::Snapshot>> {
        self.core.subscribe()
    }

    /// Asks sluice to drain and stop (console `q`, SIGTERM).
    pub fn request_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The configuration as loaded (what the admin listener's limits and token come from).
    pub fn config(&self) -> Arc<Config> {
        self.core.config()
    }

    /// True once shutdown started (`/readyz` answers 503).
    pub fn is_draining(&self) -> bool {
        self.core.is_draining()
    }

    /// The Prometheus text exposition of the current state (`/metrics`).
    pub fn metrics_text(&self) -> String {
        self.core.metrics().render(&self.core.snapshot())
    }

    /// Every admission gate with its live counters (`/api/queues`).
    pub fn gate_views(&self) -> Vec<crate::snapshot::GateView> {
        self.core.gates().views()
    }

    /// Injects a fault for a bounded time (never persisted): `req.target` is a provider or
    /// `provider/connection`, `req.duration` 1 s..10 min (default 60 s). While it is on, the
    /// target's attempts are answered by the fault instead of the upstream (added latency
    /// delays the real call) and go through classification and `Core::report` like real ones.
    /// Injecting again on the same target replaces its fault.
    ///
    /// # Errors
    /// An unknown provider or connection, an unknown kind, a bad parameter or duration.
    pub fn inject_fault(
        &self,
        req: &crate::core::operator::faults::FaultRequest,
    ) -> Result<crate::snapshot::FaultView, ControlError> {
        let v = {
            let _config = self.no_reload();
            self.core.inject_fault(req)?
        };
        tracing::warn!(target = %v.target, fault = %v.description, remaining_ms = v.remaining_ms, "operator injected a fault");
        Ok(v)
    }

    /// The faults on now, with their time left.
    pub fn faults(&self) -> Vec<crate::snapshot::FaultView> {
        self.core.fault_views()
    }

    /// Removes the faults `sel` names (all, one id, or one target); returns those removed.
    pub fn clear_faults(
        &self,
        sel: &crate::policy::fault::FaultSelector,
    ) -> Vec<crate::snapshot::FaultView> {
        let gone = self.core.clear_faults(sel);
        tracing::info!(cleared = gone.len(), "operator cleared injected faults");
        gone
    }

    /// Clears connection cooldowns and quota waits (and the cleared connections' live model
    /// lockouts). Terminal states are skipped and reported (§2).
    pub fn clear_cooldowns(&self, target: &ClearTarget) -> Result<ClearReport, ControlError> {
        let _config = self.no_reload();
        let cfg = self.core.config().clone();
        let wanted = clear_targets(&cfg, target)?;
        let now = self.core.clock().now();
        let tm = self.core.time_map();
        let mut report = ClearReport::default();
        let mut writes = Vec::new();
        {
            let mut r = self.core.res();
            for (i, j) in wanted {
                let (p, c) = (&cfg.providers[i], &cfg.providers[i].connections[j]);
                let key = cfg.keys.connection(i, j);
                let Some(cd) = r
                    .providers
                    .get_mut(key.provider)
                    .and_then(|x| x.connections.get_mut(key.slot))
                else {
                    continue;
                };
                let result = cd.clear(now);
                let row = (result == ClearResult::Cleared)
                    .then(|| connection_row(&p.id, &c.id, &cd.persist(), &tm));
                let n = match result {
                    ClearResult::SkippedTerminal => 0,
                    _ => r.lockouts.clear_connection(&p.id, &c.id, now),
                };
                tally(&mut report, &mut writes, (&p.id, &c.id), result, row, n);
            }
        }
        self.write(writes);
        tracing::info!(summary = %report.summary(), "operator cleared cooldowns");
        Ok(report)
    }

    /// Closes the breaker of `provider`, or of every provider (§1 `POST
    /// /api/resilience/reset`). Returns the provider ids reset.
    pub fn reset_breakers(&self, provider: Option<&str>) -> Result<Vec<String>, ControlError> {
        let _config = self.no_reload();
        let cfg = self.core.config().clone();
        if let Some(pid) = provider
            && cfg.provider(pid).is_none()
        {
            return Err(ControlError::UnknownProvider(pid.into()));
        }
        let now = self.core.clock().now();
        let mut done = Vec::new();
        let mut recs = Vec::new();
        {
            let mut r = self.core.res();
            for (i, p) in cfg.providers.iter().enumerate() {
                if provider.is_some_and(|x| x != p.id) {
                    continue;
                }
                if let Some(res) = r.providers.get_mut(cfg.keys.provider(i)) {
                    res.breaker.reset(now);
                    res.window.clear();
                    recs.push((i, res.breaker.persist()));
                    done.push(p.id.clone());
                }
            }
        }
        for (i, rec) in recs {
            self.core.persist_provider(&cfg, i, Some(rec), None, None);
        }
        self.core.mark_dirty();
        tracing::info!(providers = ?done, "operator reset breakers");
        Ok(done)
    }

    /// Re-enables one model on one connection (§3 `DELETE
    /// /api/resilience/model-cooldowns`); `model` is the quota-group name or model id as
    /// listed. Returns whether a live lockout was removed.
    pub fn reenable_model(
        &self,
        provider: &str,
        connection: &str,
        model: &str,
    ) -> Result<bool, ControlError> {
        let cfg = self.core.config().clone();
        let p = cfg
            .provider(provider)
            .ok_or_else(|| ControlError::UnknownProvider(provider.into()))?;
        if !p.connections.iter().any(|c| c.id == connection) {
            return Err(ControlError::UnknownConnection(connection.into()));
        }
        let now = self.core.clock().now();
        let removed = self
            .core
            .res()
            .lockouts
            .remove(provider, connection, model, now);
        self.write(vec![StateWrite::DeleteLockout {
            provider: provider.into(),
            connection: connection.into(),
            model: model.into(),
        }]);
        tracing::info!(
            provider,
            connection,
            model,
            removed,
            "operator re-enabled a model"
        );
        Ok(removed)
    }

    /// Explicit operator reset of a terminal connection state (`banned`, `expired`,
    /// `credits_exhausted`). Returns whether the connection was terminal.
    pub fn reset_terminal(&self, connection: &str) -> Result<bool, ControlError> {
        let _config = self.no_reload();
        let cfg = self.core.config().clone();
        let (i, j) = cfg
            .providers
            .iter()
            .enumerate()
            .find_map(|(i, p)| {
                p.connections
                    .iter()
                    .position(|c| c.id == connection)
                    .map(|j| (i, j))
            })
            .ok_or_else(|| ControlError::UnknownConnection(connection.into()))?;
        let tm = self.core.time_map();
        let (changed, row) = {
            let mut r = self.core.res();
            let key = cfg.keys.connection(i, j);
            let Some(cd) = r
                .providers
                .get_mut(key.provider)
                .and_then(|x| x.connections.get_mut(key.slot))
            else {
                return Ok(false);
            };
            let changed = cd.reset_terminal();
            (
                changed,
                connection_row(&cfg.providers[i].id, connection, &cd.persist(), &tm),
            )
        };
        if changed {
            self.write(vec![StateWrite::Connection(row)]);
            tracing::info!(connection, "operator reset a terminal connection state");
        }
        Ok(changed)
    }

    /// Applies a partial settings edit, validated with the config file's rules; saves the
    /// accumulated overrides in the store (they win over the file until reverted).
    pub fn patch_settings(&self, patch: &SettingsPatch) -> Result<Resilience, ControlError> {
        let _config = self.no_reload();
        let cfg = self.core.config().clone();
        let mut r = self.core.res();
        let mut all = r.overrides.clone();
        all.merge(patch);
        let next = r.adopt(&cfg, all.clone())?;
        drop(r);
        let json = serde_json::to_string(&all).unwrap_or_else(|_| "{}".into());
        let tm = self.core.time_map();
        self.write(vec![StateWrite::Setting(SettingRow {
            key: SETTINGS_KEY.into(),
            value_json: json,
            updated_at_unix_ms: tm.wall(self.core.clock().now()),
        })]);
        tracing::info!(changes = %crate::config::key_values::key_values(patch), "operator changed resilience settings");
        Ok(next)
    }

    /// Replaces the overrides in force with exactly `overrides` (validated against the
    /// file's settings) in one step: one critical section and one store write, so no value in
    /// between — e.g. the file's, while reverting one field of several — is ever live. An
    /// empty patch equals [`Control::revert_settings`]. On error nothing changes.
    pub fn replace_settings(&self, overrides: &SettingsPatch) -> Result<Resilience, ControlError> {
        let _config = self.no_reload();
        let cfg = self.core.config().clone();
        let next = self.core.res().adopt(&cfg, overrides.clone())?;
        let write = if overrides.is_empty() {
            StateWrite::DeleteSetting {
                key: SETTINGS_KEY.into(),
            }
        } else {
            let tm = self.core.time_map();
            StateWrite::Setting(SettingRow {
                key: SETTINGS_KEY.into(),
                value_json: serde_json::to_string(overrides).unwrap_or_else(|_| "{}".into()),
                updated_at_unix_ms: tm.wall(self.core.clock().now()),
            })
        };
        self.write(vec![write]);
        tracing::info!("operator replaced resilience setting overrides");
        Ok(next)
    }

    /// The config file's resilience settings (what a revert goes back to).
    pub fn file_settings(&self) -> Resilience {
        self.core.config().resilience.clone()
    }

    /// One page of the request log, newest first: at most `limit` rows older than row
    /// `before_id` (all rows when `None`), each with its row id (the next page's
    /// `before_id` is the last one's). Empty without a store; a read error logs a warning and
    /// gives none.
    pub fn request_log_page(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Vec<(i64, crate::snapshot::RequestView)> {
        let Some(store) = self.core.store() else {
            return Vec::new();
        };
        let q = crate::store::history::LogQuery {
            before_id,
            limit,
            ..Default::default()
        };
        match store.query_requests(&q) {
            Ok(rows) => rows
                .into_iter()
                .map(|r| (r.id, crate::snapshot::RequestView::from_log(r.row)))
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the request log for the console");
                Vec::new()
            }
        }
    }

    /// A snapshot of the current state at the clock's `now`.
    pub fn snapshot(&self) -> crate::snapshot::Snapshot {
        self.core.snapshot()
    }

    /// The config file's own `[[error_rules]]` and `[[restatement]]` (what a revert goes back
    /// to): `{"error_rules": [...], "restatement": [...]}` with the file's keys.
    pub fn file_rules(&self) -> serde_json::Value {
        let cfg = self.core.config();
        serde_json::json!({"error_rules": cfg.error_rules, "restatement": cfg.restatement})
    }

    /// The `[[error_rules]]` and `[[restatement]]` in force (see
    /// [`crate::core::operator::settings::LiveRules::listing`]).
    pub fn rules(&self) -> serde_json::Value {
        self.core.res().rules.listing()
    }

    /// Drops every operator override: the config file's settings and rules apply again.
    pub fn revert_settings(&self) {
        let _config = self.no_reload();
        let cfg = self.core.config().clone();
        if let Err(e) = self.core.res().adopt(&cfg, SettingsPatch::default()) {
            tracing::warn!(error = %e, "the config file's own settings did not apply");
        }
        self.write(vec![StateWrite::DeleteSetting {
            key: SETTINGS_KEY.into(),
        }]);
        tracing::info!("operator reverted resilience settings to the config file");
    }

    /// The effective settings and the overrides in force.
    pub fn settings(&self) -> (Resilience, SettingsPatch) {
        let r = self.core.res();
        ((*r.settings).clone(), r.overrides.clone())
    }

    fn write(&self, writes: Vec<StateWrite>) {
        if let Some(store) = self.core.store() {
            for w in writes {
                store.write(w);
            }
        }
        self.core.mark_dirty();
    }
}

/// The positions of the connections `target` names in `cfg`; an unknown connection or
/// provider is an error (nothing is cleared then).
fn clear_targets(cfg: &Config, target: &ClearTarget) -> Result<Vec<(usize, usize)>, ControlError> {
    let mut wanted: Vec<(usize, usize)> = Vec::new();
    match target {
        ClearTarget::Connections(ids) => {
            for id in ids {
                let found = cfg.providers.iter().enumerate().find_map(|(i, p)| {
                    p.connections
                        .iter()
                        .position(|c| &c.id == id)
                        .map(|j| (i, j))
                });
                wanted.push(found.ok_or_else(|| ControlError::UnknownConnection(id.clone()))?);
            }
        }
        ClearTarget::All { provider } => {
            if let Some(pid) = provider
                && cfg.provider(pid).is_none()
            {
                return Err(ControlError::UnknownProvider(pid.clone()));
            }
            for (i, p) in cfg.providers.iter().enumerate() {
                if provider.as_ref().is_none_or(|x| x == &p.id) {
                    wanted.extend((0..p.connections.len()).map(|j| (i, j)));
                }
            }
        }
    }
    Ok(wanted)
}

/// Counts one connection's clear in `report` and queues its writes: `result` of clearing
/// its cooldown (`row` its new state when cleared) and `lockouts` model lockouts dropped.
/// A connection with only lockouts counts as cleared.
fn tally(
    report: &mut ClearReport,
    writes: &mut Vec<StateWrite>,
    (provider, connection): (&str, &str),
    result: ClearResult,
    row: Option<crate::store::ConnectionRow>,
    lockouts: usize,
) {
    let drop_locks = || StateWrite::DeleteLockoutsOf {
        provider: provider.to_string(),
        connection: connection.to_string(),
    };
    match result {
        ClearResult::Cleared => {
            report.cleared.push(connection.to_string());
            writes.extend(row.map(StateWrite::Connection));
            report.lockouts_cleared += u32::try_from(lockouts).unwrap_or(u32::MAX);
            writes.push(drop_locks());
        }
        ClearResult::Unchanged if lockouts > 0 => {
            report.lockouts_cleared += u32::try_from(lockouts).unwrap_or(u32::MAX);
            report.cleared.push(connection.to_string());
            writes.push(drop_locks());
        }
        ClearResult::Unchanged => report.unchanged.push(connection.to_string()),
        ClearResult::SkippedTerminal => report.skipped_terminal.push(connection.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};
    use std::path::Path;
    use std::time::Duration;

    fn base() -> Resilience {
        let env = LoadEnv::fixed(&[], "/tmp");
        let cfg = from_str(
            "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n  queue = { max_wait = \"2s\", max_queue_depth = 5 }\n",
            Path::new("t.toml"),
            &env,
        )
        .unwrap();
        assert_eq!(
            cfg.providers[0].connections[0].queue.max_wait,
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            cfg.providers[0].connections[0].queue.max_queue_depth,
            Some(5)
        );
        cfg.resilience
    }

    #[test]
    fn queue_patch_applies_and_is_validated_like_the_file() {
        let b = base();
        let patch = SettingsPatch {
            queue: Some(QueuePatch {
                max_wait: Some("5s".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        let out = apply_patch(&b, &patch).unwrap();
        assert_eq!(out.queue.max_wait, Duration::from_secs(5));
        assert_eq!(
            out.queue.execution_max_wait, b.queue.execution_max_wait,
            "untouched fields keep their values"
        );
        let bad = SettingsPatch {
            queue: Some(QueuePatch {
                max_wait: Some("soon".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        match apply_patch(&b, &bad) {
            Err(ControlError::Invalid { field, .. }) => assert_eq!(field, "queue.max_wait"),
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn lockout_patch_keeps_max_at_least_base() {
        let b = base();
        let bad = SettingsPatch {
            model_lockout: Some(LockoutPatch {
                max_cooldown: Some("1m".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        match apply_patch(&b, &bad) {
            Err(ControlError::Invalid { field, message }) => {
                assert_eq!(field, "model_lockout.max_cooldown");
                assert!(message.contains("base_cooldown"), "{message}");
            }
            other => panic!("expected Invalid, got {other:?}"),
        }
        let mut merged = SettingsPatch::default();
        merged.merge(&SettingsPatch {
            stream_stall_cooldown: Some(true),
            ..Default::default()
        });
        merged.merge(&SettingsPatch {
            queue: Some(QueuePatch {
                max_queue_depth: Some(3),
                ..Default::default()
            }),
            ..Default::default()
        });
        assert_eq!(merged.stream_stall_cooldown, Some(true));
        assert_eq!(merged.queue.and_then(|q| q.max_queue_depth), Some(3));
    }

    /// A `Control` over one passthrough provider, with `head` (TOML tables) before it.
    fn control_with(head: &str) -> Control {
        let env = LoadEnv::fixed(&[], "/tmp");
        let cfg = from_str(
            &format!("{head}[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n"),
            Path::new("t.toml"),
            &env,
        )
        .unwrap();
        let clock = std::sync::Arc::new(crate::clock::ManualClock::new());
        let core = Core::new(std::sync::Arc::new(cfg), clock, None);
        Control::new(core, CancellationToken::new())
    }

    #[test]
    fn replace_settings_swaps_the_overrides_in_one_step_or_not_at_all() {
        let control = control_with("");
        let both = SettingsPatch {
            stream_stall_cooldown: Some(true),
            model_lockout: Some(LockoutPatch {
                base_cooldown: Some("10m".into()),
                max_cooldown: Some("1h".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        control.patch_settings(&both).unwrap();
        // Keep the lockout edit, drop the stall flag: the file's flag comes back, the lockout
        // override stays, and no state in between was ever live.
        let mut remaining = both.clone();
        remaining.stream_stall_cooldown = None;
        let out = control.replace_settings(&remaining).unwrap();
        assert!(!out.connection_cooldown.stream_stall_cooldown);
        assert_eq!(out.model_lockout.base_cooldown, Duration::from_secs(600));
        assert_eq!(control.settings().1, remaining);
        // A set that does not validate against the file (a 2h base above the file's 30m max)
        // is refused as a whole and changes nothing.
        let bad = SettingsPatch {
            model_lockout: Some(LockoutPatch {
                base_cooldown: Some("2h".into()),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert!(control.replace_settings(&bad).is_err());
        assert_eq!(control.settings().1, remaining, "unchanged after a refusal");
        control.replace_settings(&SettingsPatch::default()).unwrap();
        assert!(control.settings().1.is_empty());
        assert_eq!(
            control.settings().0.model_lockout.base_cooldown,
            Duration::from_secs(120)
        );
    }

    #[test]
    fn rate_limit_cooldown_none_unsets_the_files_value() {
        let control =
            control_with("[resilience.connection_cooldown]\nrate_limit_cooldown = \"20s\"\n");
        let rl = |c: &Control| c.settings().0.connection_cooldown.rate_limit_cooldown;
        assert_eq!(rl(&control), Some(Duration::from_secs(20)));
        let patch = |v: &str| SettingsPatch {
            rate_limit_cooldown: Some(v.into()),
            ..Default::default()
        };
        control.patch_settings(&patch(" None ")).unwrap();
        assert_eq!(rl(&control), None, "the ladder applies again");
        control.patch_settings(&patch("45s")).unwrap();
        assert_eq!(rl(&control), Some(Duration::from_secs(45)));
        assert!(
            control.patch_settings(&patch("nothing")).is_err(),
            "only the word none unsets"
        );
        assert!(
            control.patch_settings(&patch("0s")).is_err(),
            "1s-6h still holds"
        );
        control.replace_settings(&SettingsPatch::default()).unwrap();
        assert_eq!(
            rl(&control),
            Some(Duration::from_secs(20)),
            "reverted to the file"
        );
    }
}
