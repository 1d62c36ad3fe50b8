//! Live quota headroom: one [`Headroom`] per connection, fed from every upstream response
//! head through [`Core::observe_headroom`], shown in the snapshot's connection rows and
//! saved behind to the store as one `settings` row per connection
//! (`headroom/<provider>/<connection>`, the [`Headroom`] as JSON), restored and pruned at
//! startup.

use crate::clock::unix_ms;
use crate::config::{Config, QuotaPreflightSettings};
use crate::core::Core;
use crate::core::resilience::ResState;
use crate::policy::headroom::preflight::{self, PreflightSettings, Verdict};
use crate::policy::headroom::{Headroom, parse};
use crate::snapshot::{HeadroomRowView, PreflightView};
use crate::store::{SettingRow, StateWrite};

/// Prefix of the `settings` keys holding saved headroom (`headroom/<provider>/<connection>`).
pub const SETTINGS_PREFIX: &str = "headroom/";

/// A connection's headroom is written to the store at most this often (10 s, in ms): real
/// upstreams send rate-limit headers on every response, and a restart losing the last few
/// seconds of readings only costs accuracy until the next response.
pub const SAVE_SPACING_MS: u64 = 10_000;

/// The headroom of one connection and when it was last saved.
#[derive(Debug, Clone, Default)]
pub(crate) struct ConnHeadroom {
    pub(crate) state: Headroom,
    saved_at_ms: Option<u64>,
    /// The last preflight state logged (`ok`, `warn`, `cut_off`), so a warning is logged
    /// once per change, not per request.
    logged: &'static str,
}

impl ConnHeadroom {
    /// Forgets everything known (a new credential has a new quota).
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    /// The preflight verdict for `model` under `settings` at `now_ms`; logs a warning when
    /// the connection's state changes to `warn` or `cut_off` (and an info line back to
    /// `ok`). `target` names the connection in the log (called only for a log line).
    pub(crate) fn preflight(
        &mut self,
        target: &dyn Fn() -> String,
        model: &str,
        settings: &QuotaPreflightSettings,
        now_ms: u64,
    ) -> Verdict {
        let v = preflight::decide(&self.state, Some(model), &policy_settings(settings), now_ms);
        let state = v.as_str();
        if state != self.logged {
            log_change(&target(), &v, self.logged, now_ms);
            self.logged = state;
        }
        v
    }
}

/// The policy's settings from the config's `[resilience.quota_preflight]`.
pub fn policy_settings(s: &QuotaPreflightSettings) -> PreflightSettings {
    PreflightSettings {
        enabled: s.enabled,
        cut_off_at: s.cutoff,
        warn_at: s.warn,
    }
}

/// Logs a preflight state change of `target`.
fn log_change(target: &str, v: &Verdict, before: &str, now_ms: u64) {
    match *v {
        Verdict::Ok if before.is_empty() => {}
        Verdict::Ok => {
            tracing::info!(target_conn = %target, "quota preflight: {target} is ok again")
        }
        Verdict::Warn {
            window,
            remaining,
            reset_at_ms,
        }
        | Verdict::CutOff {
            window,
            remaining,
            reset_at_ms,
        } => {
            let resets = reset_at_ms.map_or_else(
                || "reset unknown".to_owned(),
                |r| format!("resets in {}s", r.saturating_sub(now_ms).div_ceil(1000)),
            );
            let what = if v.is_cut_off() {
                "cut off (skipped before dispatch)"
            } else {
                "low"
            };
            tracing::warn!(
                target_conn = %target,
                window = window.as_str(),
                remaining,
                "quota preflight: {target} is {what}: {} window at {:.1}% remaining, {resets}",
                window.label(),
                remaining * 100.0
            );
        }
    }
}

/// The snapshot mark for a verdict: `None` for [`Verdict::Ok`].
pub fn preflight_view(v: &Verdict) -> Option<PreflightView> {
    match *v {
        Verdict::Ok => None,
        Verdict::Warn {
            window,
            remaining,
            reset_at_ms,
        }
        | Verdict::CutOff {
            window,
            remaining,
            reset_at_ms,
        } => Some(PreflightView {
            state: v.mark().into(),
            window: window.into(),
            remaining,
            reset_at_unix_ms: reset_at_ms,
        }),
    }
}

/// The `settings` key for one connection's headroom.
pub fn settings_key(provider: &str, connection: &str) -> String {
    format!("{SETTINGS_PREFIX}{provider}/{connection}")
}

/// The snapshot rows of `h` at `now_unix_ms`: one per live window, binding flagged (empty
/// when nothing live is known).
pub fn rows_view(h: &Headroom, now_unix_ms: u64) -> Vec<HeadroomRowView> {
    h.rows(now_unix_ms)
        .into_iter()
        .map(|r| HeadroomRowView {
            window: r.window.into(),
            model: r.model,
            remaining: r.state.effective_remaining(),
            reset_at_unix_ms: r.state.reset_at_ms,
            status: r.state.status.map(Into::into),
            binding: r.binding,
            observed_at_unix_ms: r.state.observed_at_ms,
        })
        .collect()
}

/// True when a connection last saved at `saved_at_ms` should be saved again at `now_ms`.
fn save_due(saved_at_ms: Option<u64>, now_ms: u64) -> bool {
    saved_at_ms.is_none_or(|t| now_ms.saturating_sub(t) >= SAVE_SPACING_MS || now_ms < t)
}

impl Core {
    /// Folds one upstream response head's rate-limit headers into the headroom of
    /// `cand`'s connection; `cand.model` is the upstream model id sent. Any status,
    /// success or error; headers sluice does not read are ignored, malformed values too.
    /// Uses the injected clock's wall time (upstream resets are wall-clock instants).
    pub fn observe_headroom(
        &self,
        cand: &crate::policy::select::Candidate,
        headers: &http::HeaderMap,
    ) {
        let model = cand.model.as_str();
        let now_ms = unix_ms(self.clock().wall());
        // Read outside the lock; most answers carry no rate-limit headers and stop here.
        let observation = parse::parse(parse::header_pairs(headers), now_ms);
        if observation.is_empty() {
            return;
        }
        let save = {
            let mut r = self.res();
            let cfg = self.config();
            let Some((provider, connection)) = cand.positions_in(&cfg) else {
                return;
            };
            let Some(h) = r
                .providers
                .get_mut(cand.key.provider)
                .and_then(|p| p.headroom.get_mut(cand.key.slot))
            else {
                return;
            };
            h.state.merge(observation, Some(model));
            h.state.prune(now_ms);
            let due = self.store().is_some() && save_due(h.saved_at_ms, now_ms);
            if due {
                h.saved_at_ms = Some(now_ms);
            }
            due.then(|| (cfg, provider, connection, serde_json::to_string(&h.state)))
        };
        self.mark_dirty();
        if let Some((cfg, provider, connection, json)) = save {
            self.save_headroom(&cfg, provider, connection, json, now_ms);
        }
    }

    fn save_headroom(
        &self,
        cfg: &Config,
        provider: usize,
        connection: usize,
        json: serde_json::Result<String>,
        now_ms: u64,
    ) {
        let (Some(store), Some(p)) = (self.store(), cfg.providers.get(provider)) else {
            return;
        };
        let Some(c) = p.connections.get(connection) else {
            return;
        };
        match json {
            Ok(value_json) => store.write(StateWrite::Setting(SettingRow {
                key: settings_key(&p.id, &c.id),
                value_json,
                updated_at_unix_ms: now_ms,
            })),
            Err(e) => tracing::warn!(error = %e, "could not encode headroom"),
        }
    }
}

/// Restores saved headroom from `settings` rows (unknown connections and unreadable rows are
/// skipped with a warning), pruned at `now_unix_ms`.
pub(crate) fn restore(res: &mut ResState, cfg: &Config, rows: &[SettingRow], now_unix_ms: u64) {
    res.restore_setting_rows(
        cfg,
        rows,
        settings_key,
        "headroom",
        |pres, j, mut state: Headroom| {
            state.prune(now_unix_ms);
            if let Some(h) = pres.headroom.get_mut(j) {
                h.state = state;
            }
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_is_spaced_and_survives_a_clock_step_back() {
        assert!(save_due(None, 0));
        assert!(!save_due(Some(1_000), 1_000 + SAVE_SPACING_MS - 1));
        assert!(save_due(Some(1_000), 1_000 + SAVE_SPACING_MS));
        assert!(save_due(Some(50_000), 1_000), "wall clock stepped back");
    }

    #[test]
    fn rows_view_flags_the_binding_window_and_is_empty_when_unknown() {
        assert!(rows_view(&Headroom::default(), 0).is_empty());
        let now = 1_700_000_000_000;
        let reset_5h = (now / 1000 + 3600).to_string();
        let reset_7d = (now / 1000 + 86_400).to_string();
        let headers = [
            ("anthropic-ratelimit-unified-5h-utilization", "0.9"),
            ("anthropic-ratelimit-unified-5h-reset", reset_5h.as_str()),
            ("anthropic-ratelimit-unified-7d-utilization", "0.3"),
            ("anthropic-ratelimit-unified-7d-reset", reset_7d.as_str()),
        ];
        let mut h = Headroom::default();
        assert!(h.observe(headers, Some("m"), now));
        let rows = rows_view(&h, now);
        assert_eq!(rows.len(), 2);
        let five = rows
            .iter()
            .find(|r| r.window == "five_hour")
            .expect("5h row");
        assert!(five.binding);
        assert!((five.remaining.unwrap_or(1.0) - 0.1).abs() < 1e-9);
        assert_eq!(five.reset_at_unix_ms, Some((now / 1000 + 3600) * 1000));
        assert!(rows.iter().any(|r| r.window == "seven_day" && !r.binding));
    }

    #[test]
    fn settings_key_names_provider_and_connection() {
        assert_eq!(settings_key("anthropic", "main"), "headroom/anthropic/main");
    }
}
