//! The live §2c low-priority lane: one [`LaneSlot`] per connection in the resilience state,
//! moved by [`Core::observe_lane`] (every response head of a `low_priority_mode`
//! connection), read by the attempt builder ([`Core::lane_active`]: add
//! `anthropic-usage-limit: slow`) and by admission (an active lane skips quota preflight),
//! shown on the connection's row ([`view`]) and saved behind to the store as one `settings`
//! row per connection (`lane/<provider>/<connection>`, the [`LaneSlot`] as JSON), restored at
//! startup.

use crate::config::keys::ConnKey;
use std::time::Duration;

use crate::clock::{Clock, unix_ms};
use crate::config::Config;
use crate::core::Core;
use crate::core::resilience::ResState;
use crate::policy::headroom::parse;
use crate::policy::lane::{LaneSlot, Signals, Verdict};
use crate::policy::select::Candidate;
use crate::snapshot::LaneView;
use crate::store::{SettingRow, StateWrite};

/// Prefix of the `settings` keys holding a saved lane (`lane/<provider>/<connection>`).
pub const SETTINGS_PREFIX: &str = "lane/";

/// The `settings` key for one connection's lane.
pub fn settings_key(provider: &str, connection: &str) -> String {
    format!("{SETTINGS_PREFIX}{provider}/{connection}")
}

/// True while connection `key` has an active lane, read under the resilience lock already
/// held as `r`.
pub(crate) fn active_in(r: &ResState, key: ConnKey, clock: &dyn Clock) -> bool {
    let now_ms = unix_ms(clock.wall());
    r.providers
        .get(key.provider)
        .and_then(|p| p.lanes.get(key.slot))
        .is_some_and(|l| l.is_active(now_ms))
}

/// The snapshot mark of `slot` at `now_unix_ms`; `None` when no lane is listed.
pub fn view(slot: &LaneSlot, now_unix_ms: u64) -> Option<LaneView> {
    slot.current(now_unix_ms).map(|l| LaneView {
        state: l.state.into(),
        until_unix_ms: l.until_unix_ms,
        reason: l.reason,
    })
}

impl Core {
    /// True while candidate `cand`'s connection has an active low-priority lane: its
    /// requests carry `anthropic-usage-limit: slow`.
    pub fn lane_active(&self, cand: &Candidate) -> bool {
        let r = self.res();
        active_in(&r, cand.key, self.clock().as_ref())
    }

    /// Folds one response head of a `low_priority_mode` connection into its lane (see
    /// [`LaneSlot::observe`]) and says what it means for the request in flight; `retried`
    /// is true once this request accepted the lane. Connections without
    /// `low_priority_mode` are left alone ([`Verdict::Report`]). A changed lane is logged and
    /// saved behind.
    pub fn observe_lane(
        &self,
        cand: &Candidate,
        status: u16,
        headers: &http::HeaderMap,
        retried: bool,
    ) -> Verdict {
        let signals = Signals::parse(parse::header_pairs(headers));
        self.move_lane(cand, |slot, now_ms| {
            slot.observe(status, &signals, retried, now_ms)
        })
        .unwrap_or(Verdict::Report)
    }

    /// A busy lane gave up waiting: ends it with the 10-minute re-accept pause.
    pub fn lane_give_up(&self, cand: &Candidate) {
        self.move_lane(cand, |slot, now_ms| slot.give_up(now_ms));
    }

    /// Ends an active lane on connection `cand` for `reason` (a granted session-limit reset
    /// sends the retry at full speed); no-op without an active lane.
    pub fn lane_end(&self, cand: &Candidate, reason: &str) {
        self.move_lane(cand, |slot, now_ms| {
            if slot.is_active(now_ms) {
                slot.end(now_ms, reason);
            }
        });
    }

    /// A uniform draw in `[0, 1)` from the core's seeded RNG (the busy wait's jitter).
    pub fn lane_draw(&self) -> f64 {
        let mut r = self.res();
        crate::policy::slow_start::unit_draw(crate::policy::strategy::RngLike::next_u64(
            &mut r.routing.rng,
        ))
    }

    /// Applies `f` to the lane of `cand`'s connection (a `low_priority_mode` one; `None`
    /// for others or one a reload removed) at the wall clock's now; logs and saves it when
    /// it changed. The connection is located, and named, under the resilience lock.
    fn move_lane<T>(&self, cand: &Candidate, f: impl FnOnce(&mut LaneSlot, u64) -> T) -> Option<T> {
        let now_ms = unix_ms(self.clock().wall());
        let (out, changed, ids) = {
            let mut r = self.res();
            let cfg = self.config();
            let (pi, ci) = cand.positions_in(&cfg)?;
            let p = cfg.providers.get(pi)?;
            let c = p.connections.get(ci).filter(|c| c.low_priority_mode)?;
            let ids = (p.id.clone(), c.id.clone());
            let slot = r
                .providers
                .get_mut(cand.key.provider)?
                .lanes
                .get_mut(cand.key.slot)?;
            let before = slot.lane.clone();
            let out = f(slot, now_ms);
            let changed = (slot.lane != before).then(|| slot.clone());
            (out, changed, ids)
        };
        if let Some(slot) = changed {
            self.lane_changed(&ids.0, &ids.1, &slot, now_ms);
        }
        Some(out)
    }

    fn lane_changed(&self, provider: &str, connection: &str, slot: &LaneSlot, now_ms: u64) {
        self.mark_dirty();
        if let Some(l) = &slot.lane {
            let secs = Duration::from_millis(l.until_unix_ms.saturating_sub(now_ms)).as_secs();
            tracing::info!(provider, connection, state = l.state.as_str(), reason = %l.reason, "low-priority lane {} ({}), {secs}s to go", l.state.as_str(), l.reason);
        }
        let Some(store) = self.store() else { return };
        match serde_json::to_string(slot) {
            Ok(value_json) => store.write(StateWrite::Setting(SettingRow {
                key: settings_key(provider, connection),
                value_json,
                updated_at_unix_ms: now_ms,
            })),
            Err(e) => tracing::warn!(error = %e, "could not encode the lane"),
        }
    }
}

/// Restores saved lanes from `settings` rows (unknown connections are ignored, unreadable
/// rows skipped with a warning), lapses applied at `now_unix_ms`.
pub(crate) fn restore(res: &mut ResState, cfg: &Config, rows: &[SettingRow], now_unix_ms: u64) {
    res.restore_setting_rows(
        cfg,
        rows,
        settings_key,
        "lane",
        |pres, j, mut saved: LaneSlot| {
            saved.refresh(now_unix_ms);
            pres.lanes.insert(j, saved);
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::lane::{Lane, State};

    #[test]
    fn the_view_lists_active_paused_and_ended_lanes_and_drops_lapsed_ones() {
        assert_eq!(view(&LaneSlot::default(), 0), None);
        let slot = LaneSlot {
            lane: Some(Lane {
                state: State::Active,
                until_unix_ms: 10_000,
                reason: "treatment".into(),
                window_reset_ms: None,
                budget_exhausted_at_ms: None,
            }),
        };
        let v = view(&slot, 5_000).expect("active");
        assert_eq!(
            (v.state.as_str(), v.until_unix_ms, v.reason.as_str()),
            ("active", 10_000, "treatment")
        );
        let v = view(&slot, 10_000).expect("ended");
        assert_eq!(
            (v.state.as_str(), v.reason.as_str()),
            ("ended", "reset_passed")
        );
        let mut paused = slot.clone();
        paused.give_up(1_000);
        assert_eq!(view(&paused, 1_000 + 600_000), None, "pause over");
    }

    #[test]
    fn restore_reads_its_own_rows_only() {
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
              low_priority_mode = true
        "#;
        let cfg =
            crate::config::from_str(text, std::path::Path::new("t.toml"), &env).expect("config");
        assert!(cfg.providers[0].connections[1].low_priority_mode);
        let mut res = ResState::new(&cfg);
        let mut slot = LaneSlot::default();
        slot.give_up(1_000);
        let rows = vec![
            SettingRow {
                key: settings_key("p", "b"),
                value_json: serde_json::to_string(&slot).expect("json"),
                updated_at_unix_ms: 1_000,
            },
            SettingRow {
                key: settings_key("p", "gone"),
                value_json: "{".into(),
                updated_at_unix_ms: 1_000,
            },
        ];
        restore(&mut res, &cfg, &rows, 2_000);
        assert_eq!(res.providers[0].lanes[0], LaneSlot::default());
        assert_eq!(res.providers[0].lanes[1], slot);
    }
}
