//! [`Core::replace_config`]: a live config reload, including one that adds, removes or
//! reorders providers and connections. Live state is kept under stable keys
//! ([`crate::config::keys`]), so a reload is a diff of key sets: a kept provider or
//! connection keeps all its state where it is (breaker, provider cooldown window, cooldown,
//! headroom, lane, limit-reset record, slow-start ramps, counters, latency windows, gates with
//! their permits and waiters, faults, leases); a new one starts fresh; a removed one's state
//! is dropped, with its lockouts and its store rows, so a later connection of the same id
//! does not inherit it. Work started before the reload (an admitted ticket, an attempt guard,
//! a held permit) carries its key and finds its state, or nothing when it was removed.
//!
//! The swap happens under the resilience and stats locks (and the gates' lock), together
//! with the config, so no request sees half of it.

use std::sync::Arc;

use crate::config::Config;
use crate::config::keys::KeyDiff;
use crate::core::Core;
use crate::core::resilience::{ProviderRes, ResState};
use crate::store::StateWrite;

impl Core {
    /// Serves `config` from now on, stamped with the keys of its names and the next
    /// generation; the live resilience settings become its file settings with the
    /// operator's saved overrides on top (overrides that no longer validate against the new
    /// file are dropped with a warning). Only `Control::reload_config` calls this, after
    /// refusing restart-only changes.
    pub(crate) fn replace_config(&self, mut config: Config) {
        let now = self.clock().now();
        let tm = self.time_map();
        // Read before any lock is taken (a file read must not hold up requests).
        let secret = self.store().map(|_| {
            crate::store::secret::install_secret(&crate::store::secret::secret_path(
                &config.store.path,
            ))
        });
        let writes = {
            // Lock order: leases → resilience → stats → faults → registry (as the request
            // path takes them; the gates' own lock is never held while taking one of these).
            let mut leases = self.inner.leases.lock().unwrap_or_else(|e| e.into_inner());
            let mut r = self.res();
            let mut s = self.stats();
            let mut faults = self.inner.faults.lock();
            let old = self.config();
            let diff = self
                .inner
                .registry
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .stamp(&mut config);
            config.generation = old.generation.saturating_add(1);
            let config = Arc::new(config);
            let mut writes = removed_rows(&mut r, &diff, now);
            r.rekey(&diff, &config);
            s.rekey(&diff);
            self.inner.gates.rekey(&diff, &config);
            faults.retain(|t| {
                let gone = |c| {
                    diff.removed_connections
                        .iter()
                        .any(|(k, _, _)| k.provider == t.provider && k.slot == c)
                };
                config.keys.provider_position(t.provider).is_some()
                    && !t.connection.is_some_and(gone)
            });
            leases.retain(|k| config.keys.position(k).is_some());
            writes.extend(crate::core::resilience::credentials::reconcile_reload(
                &mut r,
                &old,
                &config,
                &diff,
                &tm,
                secret.as_ref(),
            ));
            apply_file_settings(&mut r, &config);
            *self.inner.config.write().unwrap_or_else(|e| e.into_inner()) = config;
            drop((faults, leases));
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

/// Drops the lockouts of every connection the reload removed and returns the writes deleting
/// their store rows (connection state, lockouts, saved headroom, lane and reset records; the
/// breaker of a removed provider).
fn removed_rows(r: &mut ResState, diff: &KeyDiff, now: crate::clock::Instant) -> Vec<StateWrite> {
    let mut writes = Vec::new();
    for (_, pid, cid) in &diff.removed_connections {
        r.lockouts.clear_connection(pid, cid, now);
        tracing::info!(provider = %pid, connection = %cid, "connection removed by reload; its state is dropped");
        writes.push(StateWrite::DeleteConnection {
            provider: pid.clone(),
            connection: cid.clone(),
        });
        writes.push(StateWrite::DeleteSetting {
            key: crate::core::quota::headroom::settings_key(pid, cid),
        });
        writes.push(StateWrite::DeleteSetting {
            key: crate::core::quota::lane::settings_key(pid, cid),
        });
        writes.push(StateWrite::DeleteSetting {
            key: crate::core::quota::limit_reset::settings_key(pid, cid),
        });
    }
    for (_, pid) in &diff.removed_providers {
        writes.push(StateWrite::DeleteBreaker {
            provider: pid.clone(),
        });
    }
    writes
}

impl ResState {
    /// Follows a reload's key changes (see the module doc): removed providers and
    /// connections lose their state, new ones start fresh, kept ones are untouched.
    pub(crate) fn rekey(&mut self, diff: &KeyDiff, new: &Config) {
        for (key, _, _) in &diff.removed_connections {
            if let Some(p) = self.providers.get_mut(key.provider) {
                p.remove_connection(key.slot);
            }
        }
        for (p, _) in &diff.removed_providers {
            self.providers.remove(*p);
            self.routing.connection_states.remove(p);
        }
        let settings = self.settings.clone();
        for (i, p) in new.providers.iter().enumerate() {
            let key = new.keys.provider(i);
            if diff.added_providers.contains(&key) {
                self.providers
                    .insert(key, ProviderRes::fresh(&settings, p, std::iter::empty()));
            }
        }
        for key in &diff.added_connections {
            if let Some(p) = self.providers.get_mut(key.provider) {
                p.add_connection(key.slot);
            }
        }
        self.routing
            .latency
            .retain(|k| new.keys.position(k).is_some());
    }
}
