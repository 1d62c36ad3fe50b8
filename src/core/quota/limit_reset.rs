//! The live session-limit reset (§2e, `auto_limit_reset`): one [`LimitResetSlot`]
//! per connection in the resilience state, claimed by dispatch before it queries the usage
//! endpoint ([`Core::claim_limit_reset`]), moved by what the try found
//! ([`Core::record_limit_reset`]), shown on the connection's row ([`view`]) and saved behind
//! to the store as one `settings` row per connection (`limit_reset/<provider>/<connection>`,
//! the [`LimitResetSlot`] as JSON), restored at startup.

use crate::clock::unix_ms;
use crate::config::Config;
use crate::core::Core;
use crate::core::resilience::ResState;
use crate::policy::headroom::{Headroom, Window, WindowStatus};
use crate::policy::limit_reset::{LimitResetSlot, Tried};
use crate::policy::select::Candidate;
use crate::snapshot::LimitResetView;
use crate::store::{SettingRow, StateWrite};

/// Prefix of the `settings` keys holding a saved reset record
/// (`limit_reset/<provider>/<connection>`).
pub const SETTINGS_PREFIX: &str = "limit_reset/";

/// The `settings` key for one connection's reset record.
pub fn settings_key(provider: &str, connection: &str) -> String {
    format!("{SETTINGS_PREFIX}{provider}/{connection}")
}

/// The snapshot mark of `slot` at `now_unix_ms`; `None` while nothing is worth listing.
pub fn view(slot: &LimitResetSlot, now_unix_ms: u64) -> Option<LimitResetView> {
    if !slot.is_listed(now_unix_ms) {
        return None;
    }
    Some(LimitResetView {
        last_outcome: slot.last_outcome.map(Into::into),
        last_at_unix_ms: slot.last_at_ms,
        next_query_after_unix_ms: slot.next_query_after_ms.filter(|t| *t > now_unix_ms),
        next_available_at_unix_ms: slot.next_available_at_ms.filter(|t| *t > now_unix_ms),
        reset_used_at_unix_ms: slot.reset_used_at_ms,
        last_error: slot.last_error.clone().unwrap_or_default(),
    })
}

impl Core {
    /// Claims a try at a reset on connection `cand` (see [`LimitResetSlot::claim`]): true
    /// when it has `auto_limit_reset` on and may ask its usage endpoint now (no error
    /// backoff, no remembered unavailability and no other request's try running). The
    /// caller then reports what it found with [`Core::record_limit_reset`].
    pub fn claim_limit_reset(&self, cand: &Candidate) -> bool {
        let now_ms = unix_ms(self.clock().wall());
        // Found under the resilience lock, which a reload holds while the config changes.
        let mut r = self.res();
        if !self.auto_limit_reset(cand) {
            return false;
        }
        r.providers
            .get_mut(cand.key.provider)
            .and_then(|p| p.limit_resets.get_mut(cand.key.slot))
            .is_some_and(|s| s.claim(now_ms))
    }

    /// Folds one try at a reset on connection `cand` in (see [`LimitResetSlot::record`]);
    /// logs it and saves it behind.
    pub fn record_limit_reset(&self, cand: &Candidate, tried: &Tried) {
        let now_ms = unix_ms(self.clock().wall());
        let (slot, ids) = {
            let mut r = self.res();
            let cfg = self.config();
            let Some((provider, connection)) = cand.positions_in(&cfg) else {
                return;
            };
            let Some(ids) = cfg
                .providers
                .get(provider)
                .and_then(|p| Some((p.id.clone(), p.connections.get(connection)?.id.clone())))
            else {
                return;
            };
            let Some(slot) = r
                .providers
                .get_mut(cand.key.provider)
                .and_then(|p| p.limit_resets.get_mut(cand.key.slot))
            else {
                return;
            };
            slot.record(tried, now_ms);
            let slot = slot.clone();
            if tried.retries()
                && let Some(h) = r
                    .providers
                    .get_mut(cand.key.provider)
                    .and_then(|p| p.headroom.get_mut(cand.key.slot))
            {
                forget_spent_window(&mut h.state);
            }
            (slot, ids)
        };
        self.limit_reset_changed(&ids.0, &ids.1, &slot, now_ms);
    }

    /// Whether `cand`'s connection, as the config served now has it, has
    /// `auto_limit_reset` on.
    fn auto_limit_reset(&self, cand: &Candidate) -> bool {
        let cfg = self.config();
        cand.positions_in(&cfg)
            .and_then(|(p, c)| cfg.providers.get(p)?.connections.get(c))
            .is_some_and(|c| c.auto_limit_reset)
    }

    fn limit_reset_changed(
        &self,
        provider: &str,
        connection: &str,
        slot: &LimitResetSlot,
        now_ms: u64,
    ) {
        self.mark_dirty();
        let outcome = slot.last_outcome.map_or("", |o| o.as_str());
        let next_s = slot
            .next_query_after_ms
            .map_or(0, |t| t.saturating_sub(now_ms) / 1000);
        tracing::info!(
            provider,
            connection,
            outcome,
            next_query_in_s = next_s,
            "session-limit reset: {outcome}"
        );
        let Some(store) = self.store() else { return };
        match serde_json::to_string(slot) {
            Ok(value_json) => store.write(StateWrite::Setting(SettingRow {
                key: settings_key(provider, connection),
                value_json,
                updated_at_unix_ms: now_ms,
            })),
            Err(e) => tracing::warn!(error = %e, "could not encode the limit-reset record"),
        }
    }
}

/// A granted reset refills the 5-hour window: its spent reading (and a `rejected` overall
/// status) is forgotten, so quota preflight does not skip the connection before the next
/// response reports the window afresh.
fn forget_spent_window(h: &mut Headroom) {
    h.connection.remove(&Window::FiveHour);
    if let Some(u) = &mut h.unified
        && u.status == Some(WindowStatus::Rejected)
    {
        u.status = None;
    }
}

/// Restores saved reset records from `settings` rows (unknown connections are ignored,
/// unreadable rows skipped with a warning), lapsed records dropped at `now_unix_ms`.
pub(crate) fn restore(res: &mut ResState, cfg: &Config, rows: &[SettingRow], now_unix_ms: u64) {
    let what = "limit-reset record";
    res.restore_setting_rows(
        cfg,
        rows,
        settings_key,
        what,
        |pres, j, mut saved: LimitResetSlot| {
            saved.refresh(now_unix_ms);
            pres.limit_resets.insert(j, saved);
        },
    );
}

/// A new credential is a new account: forgets the reset record of connection `key` and
/// returns the write that deletes its `settings` row (`None` when nothing was known).
pub(crate) fn drop_record(
    res: &mut ResState,
    key: crate::config::keys::ConnKey,
    provider: &str,
    connection: &str,
) -> Option<StateWrite> {
    let slot = res
        .providers
        .get_mut(key.provider)?
        .limit_resets
        .get_mut(key.slot)?;
    if *slot == LimitResetSlot::default() {
        return None;
    }
    *slot = LimitResetSlot::default();
    tracing::info!(provider = %provider, connection = %connection, "credential changed: saved limit-reset record dropped");
    Some(StateWrite::DeleteSetting {
        key: settings_key(provider, connection),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::limit_reset::Unavailable;

    const NOW: u64 = 1_800_000_000_000;

    #[test]
    fn the_view_lists_running_records_only() {
        assert_eq!(view(&LimitResetSlot::default(), NOW), None);
        let mut s = LimitResetSlot::default();
        s.unavailable(Unavailable::AlreadyUsed, Some(NOW + 1_000), NOW);
        let v = view(&s, NOW).expect("listed");
        assert_eq!(
            crate::snapshot::word::or_empty(&v.last_outcome),
            "already_used"
        );
        assert_eq!(v.next_available_at_unix_ms, Some(NOW + 1_000));
        assert_eq!(view(&s, NOW + 1_000), None, "lapsed");
        s.failed("HTTP 500", NOW);
        let v = view(&s, NOW).expect("backoff");
        assert_eq!(
            (
                crate::snapshot::word::or_empty(&v.last_outcome),
                v.last_error.as_str()
            ),
            ("error", "HTTP 500")
        );
    }

    #[test]
    fn a_granted_reset_forgets_the_spent_five_hour_window_only() {
        let mut h = Headroom::default();
        assert!(h.observe(
            [
                ("anthropic-ratelimit-unified-status", "rejected"),
                ("anthropic-ratelimit-unified-5h-utilization", "1.0"),
                ("anthropic-ratelimit-unified-7d-utilization", "0.4"),
            ],
            None,
            NOW
        ));
        forget_spent_window(&mut h);
        assert!(!h.connection.contains_key(&Window::FiveHour));
        assert!(
            h.connection.contains_key(&Window::SevenDay),
            "the week is kept"
        );
        assert_eq!(h.unified.and_then(|u| u.status), None);
    }

    #[test]
    fn restore_reads_its_own_rows_and_drop_forgets_a_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = crate::config::LoadEnv::fixed(&[("KA", "sk-a"), ("KB", "sk-b")], dir.path());
        let text = r#"
            [[providers]]
            id = "p"
            dialect = "anthropic"
            base_url = "https://api.anthropic.com"
            profile = "oauth"
              [[providers.connections]]
              id = "a"
              auth = { env = "KA" }
              [[providers.connections]]
              id = "b"
              auth = { env = "KB" }
              auto_limit_reset = true
              org_uuid = "123E4567-E89B-12D3-A456-426614174000"
        "#;
        let cfg =
            crate::config::from_str(text, std::path::Path::new("t.toml"), &env).expect("config");
        assert!(cfg.providers[0].connections[1].auto_limit_reset);
        assert_eq!(
            cfg.providers[0].connections[1].org_uuid.as_deref(),
            Some("123e4567-e89b-12d3-a456-426614174000"),
            "read in lowercase"
        );
        let mut res = ResState::new(&cfg);
        let mut slot = LimitResetSlot::default();
        slot.unavailable(Unavailable::NotOffered, None, NOW);
        let rows = vec![
            SettingRow {
                key: settings_key("p", "b"),
                value_json: serde_json::to_string(&slot).expect("json"),
                updated_at_unix_ms: NOW,
            },
            SettingRow {
                key: settings_key("p", "a"),
                value_json: "{".into(),
                updated_at_unix_ms: NOW,
            },
        ];
        restore(&mut res, &cfg, &rows, NOW + 1_000);
        assert_eq!(res.providers[0].limit_resets[0], LimitResetSlot::default());
        assert_eq!(res.providers[0].limit_resets[1], slot);
        assert_eq!(
            drop_record(&mut res, crate::config::keys::ConnKey::new(0, 0), "p", "a"),
            None,
            "nothing known"
        );
        let w = drop_record(&mut res, crate::config::keys::ConnKey::new(0, 1), "p", "b")
            .expect("dropped");
        assert!(
            matches!(w, StateWrite::DeleteSetting { ref key } if key == "limit_reset/p/b"),
            "{w:?}"
        );
        assert_eq!(res.providers[0].limit_resets[1], LimitResetSlot::default());
    }
}
