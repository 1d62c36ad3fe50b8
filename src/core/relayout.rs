//! [`Core::replace_config`]: a live config reload, including one that adds, removes or
//! reorders providers and connections. Kept entries (matched by provider id, then connection
//! id within their provider; see [`super::layout`]) move to their new positions with all
//! their live state — breaker, §1b window, cooldown, headroom, lane, limit-reset record, slow-start ramps, counters,
//! latency windows, gates with their permits and waiters, faults; lockouts and session pins
//! are keyed by id and stay as they are. New entries start fresh; removed ones are dropped,
//! with their lockouts and their store rows, so a later connection of the same id does not
//! inherit them.
//!
//! The swap happens under the resilience and stats locks (and the gates' lock), together
//! with the config and the layout generation, so no request sees half of it. Work started
//! under the old layout carries its generation and is translated by identity (`Core::locate`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Core;
use super::layout::Remap;
use super::resilience::{ProviderRes, ResState};
use crate::config::Config;
use crate::policy::fault::FaultTarget;
use crate::store::StateWrite;

impl Core {
    /// Serves `config` from now on, stamped with the next layout generation; the live
    /// resilience settings become its file settings with the operator's saved overrides on
    /// top (overrides that no longer validate against the new file are dropped with a
    /// warning). Only `Control::reload_config` calls this, after refusing restart-only
    /// changes.
    pub(crate) fn replace_config(&self, mut config: Config) {
        let now = self.clock().now();
        let tm = self.time_map();
        let writes = {
            // Lock order: leases → resilience → stats → faults → history (as the request
            // path takes them; the gates' own lock is never held while taking one of these).
            let mut leases = self.inner.leases.lock().unwrap_or_else(|e| e.into_inner());
            let mut r = self.res();
            let mut s = self.stats();
            let mut faults = self.inner.faults.lock();
            let old = self.config();
            let remap = Arc::new(Remap::between(&old, &config));
            let mut history = self.history();
            config.layout = history.push(Arc::clone(&remap));
            let config = Arc::new(config);
            let mut writes = removed_rows(&mut r, &old, &remap, now);
            r.relayout(&remap, &config);
            s.relayout(&remap, &config);
            self.inner.gates.relayout(&remap, &config);
            faults.retarget(|t| retarget(&remap, t));
            leases.remap(|(p, c)| remap.connection(p, c));
            writes.extend(super::credentials::reconcile_reload(
                &mut r,
                &old,
                &config,
                &remap,
                &tm,
                self.store().is_some(),
            ));
            apply_file_settings(&mut r, &config);
            self.inner
                .generation
                .store(config.layout, Ordering::Release);
            *self.inner.config.write().unwrap_or_else(|e| e.into_inner()) = config;
            drop((history, faults, leases));
            writes
        };
        if let Some(store) = self.store() {
            for w in writes {
                store.write(w);
            }
        }
        self.mark_dirty();
    }
}

/// The file's resilience settings with the saved operator overrides on top, applied to every
/// breaker and window.
fn apply_file_settings(r: &mut ResState, config: &Config) {
    let saved = r.overrides.clone();
    if let Err(e) = r.adopt(config, saved) {
        tracing::warn!(error = %e, "saved setting overrides do not validate against the reloaded file; using the file's values");
        if let Err(e) = r.adopt(config, Default::default()) {
            tracing::warn!(error = %e, "the reloaded file's own settings did not apply");
        }
    }
}

/// Drops the lockouts of every connection `remap` removes and returns the writes deleting
/// their store rows (connection state, lockouts, saved headroom; the breaker of a removed
/// provider).
fn removed_rows(
    r: &mut ResState,
    old: &Config,
    remap: &Remap,
    now: crate::clock::Instant,
) -> Vec<StateWrite> {
    let mut writes = Vec::new();
    for (p, c) in remap.removed_connections() {
        let (pid, cid) = (&old.providers[p].id, &old.providers[p].connections[c].id);
        r.lockouts.clear_connection(pid, cid, now);
        tracing::info!(provider = %pid, connection = %cid, "connection removed by reload; its state is dropped");
        writes.push(StateWrite::DeleteConnection {
            provider: pid.clone(),
            connection: cid.clone(),
        });
        writes.push(StateWrite::DeleteSetting {
            key: super::headroom::settings_key(pid, cid),
        });
        writes.push(StateWrite::DeleteSetting {
            key: super::lane::settings_key(pid, cid),
        });
        writes.push(StateWrite::DeleteSetting {
            key: super::limit_reset::settings_key(pid, cid),
        });
    }
    for p in remap.removed_providers() {
        writes.push(StateWrite::DeleteBreaker {
            provider: old.providers[p].id.clone(),
        });
    }
    writes
}

/// Where a fault on `t` goes after `remap` (`None`: its provider or connection left).
fn retarget(remap: &Remap, t: FaultTarget) -> Option<FaultTarget> {
    let provider = remap.provider(t.provider)?;
    let connection = match t.connection {
        Some(c) => Some(remap.connection(t.provider, c)?.1),
        None => None,
    };
    Some(FaultTarget {
        provider,
        connection,
    })
}

impl ResState {
    /// Moves the per-provider and per-connection state into `new`'s order (see the module
    /// doc); index-keyed routing state moves with it.
    pub(crate) fn relayout(&mut self, remap: &Remap, new: &Config) {
        let settings = self.settings.clone();
        let old = std::mem::take(&mut self.providers);
        let mut moved =
            remap.providers_vec(old, |np| ProviderRes::fresh(&settings, &new.providers[np]));
        for (np, pr) in moved.iter_mut().enumerate() {
            let cooldowns = std::mem::take(&mut pr.connections);
            pr.connections = remap.connections_vec(np, cooldowns, |_| Default::default());
            let headroom = std::mem::take(&mut pr.headroom);
            pr.headroom = remap.connections_vec(np, headroom, |_| Default::default());
            let ramps = std::mem::take(&mut pr.connection_ramps);
            pr.connection_ramps = remap.connections_vec(np, ramps, |_| None);
            let lanes = std::mem::take(&mut pr.lanes);
            pr.lanes = remap.connections_vec(np, lanes, |_| Default::default());
            let resets = std::mem::take(&mut pr.limit_resets);
            pr.limit_resets = remap.connections_vec(np, resets, |_| Default::default());
        }
        self.providers = moved;
        let states = std::mem::take(&mut self.routing.connection_states);
        self.routing.connection_states = states
            .into_iter()
            .filter_map(|(p, st)| Some((remap.provider(p)?, st)))
            .collect();
        self.routing.latency.relayout(remap);
    }
}
