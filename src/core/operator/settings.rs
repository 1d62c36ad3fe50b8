//! Operator settings: the typed partial edit of the live resilience tunables
//! ([`SettingsPatch`], the shape of `PATCH /api/resilience` and of the console's settings
//! editor), how a patch is validated against the file's values with the config file's own
//! rules ([`apply_patch`]), and how saved overrides are applied at startup. `Control` is the
//! only caller that changes live settings; this module holds no state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::raw::{
    RawConnectionCooldown, RawCooldownProfile, RawModelLockout, RawQueue, RawQuotaPreflight,
    RawResilience,
};
use crate::config::{Config, Profile, Resilience};
use crate::core::operator::control::{ControlError, SETTINGS_KEY};
use crate::core::resilience::ResState;
use crate::store::SettingRow;

/// The `rate_limit_cooldown` patch value that unsets it (the ladder applies), matched without
/// regard to case or surrounding spaces.
pub const RATE_LIMIT_COOLDOWN_NONE: &str = "none";

/// Whether a `rate_limit_cooldown` patch value is [`RATE_LIMIT_COOLDOWN_NONE`].
fn unsets_rate_limit_cooldown(v: &str) -> bool {
    v.trim().eq_ignore_ascii_case(RATE_LIMIT_COOLDOWN_NONE)
}

/// A partial edit of the live tunables (`PATCH /api/resilience`, the console's settings
/// editor). Field names and value formats are those of `config.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SettingsPatch {
    /// `[resilience.connection_cooldown] stream_stall_cooldown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_stall_cooldown: Option<bool>,
    /// `[resilience.connection_cooldown] rate_limit_cooldown`, e.g. `"20s"` (1s–6h): the
    /// cooldown of a rate-limited 429 without a retry hint, for connections whose own entry
    /// and provider set none (a connection's or provider's `rate_limit_cooldown` in the file
    /// wins over it; an upstream retry hint wins over all). [`RATE_LIMIT_COOLDOWN_NONE`]
    /// (`"none"`) unsets it: hint-less 429s climb the profile's ladder again, even when the
    /// file sets a value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_limit_cooldown: Option<String>,
    /// `[resilience.connection_cooldown.<profile>]` `base` / `max_backoff_level`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connection_cooldown: BTreeMap<String, CooldownPatch>,
    /// `[resilience.model_lockout]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_lockout: Option<LockoutPatch>,
    /// `[resilience.queue]` `max_wait` / `execution_max_wait` / `max_queue_depth` (§5: a saved
    /// value overrides the file and the environment; a connection's own `queue` wins over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<QueuePatch>,
    /// `[resilience.quota_preflight]` `enabled` / `cutoff` / `warn`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_preflight: Option<PreflightPatch>,
    /// `[[error_rules]]`: when set, this whole list replaces the config file's (the keys of
    /// each rule are the file's); `[]` switches every file rule off. The built-in rules stay
    /// after it either way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_rules: Option<Vec<crate::config::raw::RawErrorRule>>,
    /// `[[restatement]]`: when set, this whole list replaces the config file's, like
    /// `error_rules`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restatement: Option<Vec<crate::config::raw::RawRestatement>>,
}

/// Quota preflight edit: thresholds are fractions of the remaining quota, 0.0–1.0, with
/// `warn >= cutoff` (the file's rules).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreflightPatch {
    /// Master switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// e.g. `0.02`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cutoff: Option<f64>,
    /// e.g. `0.2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warn: Option<f64>,
}

// Thresholds come from JSON (which cannot spell NaN) or from the console's editor (which keeps
// finite numbers only), so float equality is a full equivalence on every value held here.
impl Eq for PreflightPatch {}

/// Admission queue edit (§5).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuePatch {
    /// e.g. `"30s"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_wait: Option<String>,
    /// e.g. `"10m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution_max_wait: Option<String>,
    /// 0–100000 (0 = unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_queue_depth: Option<i64>,
}

/// Profile ladder edit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CooldownPatch {
    /// e.g. `"3s"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// 0–30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backoff_level: Option<i64>,
}

/// Model lockout edit (§3 settings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LockoutPatch {
    /// Master switch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Statuses 400–599.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_codes: Option<Vec<i64>>,
    /// e.g. `"120s"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_cooldown: Option<String>,
    /// e.g. `"30m"`; must be at least `base_cooldown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cooldown: Option<String>,
    /// 0–30.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backoff_steps: Option<i64>,
    /// Double per repeated failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exponential: Option<bool>,
}

impl SettingsPatch {
    /// Overlays `other` on `self` (later values win).
    pub fn merge(&mut self, other: &SettingsPatch) {
        if other.stream_stall_cooldown.is_some() {
            self.stream_stall_cooldown = other.stream_stall_cooldown;
        }
        if other.rate_limit_cooldown.is_some() {
            self.rate_limit_cooldown
                .clone_from(&other.rate_limit_cooldown);
        }
        for (k, v) in &other.connection_cooldown {
            let e = self.connection_cooldown.entry(k.clone()).or_default();
            if v.base.is_some() {
                e.base.clone_from(&v.base);
            }
            if v.max_backoff_level.is_some() {
                e.max_backoff_level = v.max_backoff_level;
            }
        }
        if let Some(o) = &other.model_lockout {
            let e = self.model_lockout.get_or_insert_with(LockoutPatch::default);
            macro_rules! take {
                ($f:ident) => {
                    if o.$f.is_some() {
                        e.$f.clone_from(&o.$f);
                    }
                };
            }
            take!(enabled);
            take!(error_codes);
            take!(base_cooldown);
            take!(max_cooldown);
            take!(max_backoff_steps);
            take!(exponential);
        }
        if let Some(o) = &other.queue {
            let e = self.queue.get_or_insert_with(QueuePatch::default);
            if o.max_wait.is_some() {
                e.max_wait.clone_from(&o.max_wait);
            }
            if o.execution_max_wait.is_some() {
                e.execution_max_wait.clone_from(&o.execution_max_wait);
            }
            if o.max_queue_depth.is_some() {
                e.max_queue_depth = o.max_queue_depth;
            }
        }
        if let Some(o) = &other.quota_preflight {
            let e = self
                .quota_preflight
                .get_or_insert_with(PreflightPatch::default);
            e.enabled = o.enabled.or(e.enabled);
            e.cutoff = o.cutoff.or(e.cutoff);
            e.warn = o.warn.or(e.warn);
        }
        if other.error_rules.is_some() {
            self.error_rules.clone_from(&other.error_rules);
        }
        if other.restatement.is_some() {
            self.restatement.clone_from(&other.restatement);
        }
    }

    /// True when it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.stream_stall_cooldown.is_none()
            && self.rate_limit_cooldown.is_none()
            && self.connection_cooldown.is_empty()
            && self.model_lockout.is_none()
            && self.queue.is_none()
            && self.quota_preflight.is_none()
            && self.error_rules.is_none()
            && self.restatement.is_none()
    }
}

/// The `[[error_rules]]` and `[[restatement]]` in force: the operator's saved lists where
/// set, else the config file's. `error_rules` ends with the built-in rules
/// (`config::builtin_error_rules`); a match carries its rule's `base_cooldown` to the report,
/// so an edit in between cannot change it.
#[derive(Debug, Clone, Default)]
pub struct LiveRules {
    /// Provider error rules, the built-in ones last.
    pub error_rules: Vec<crate::config::ErrorRule>,
    /// Restatement rules (the built-in ones are kept apart, tried after these).
    pub restatement: Vec<crate::config::Restatement>,
}

/// The rules `patch` puts in force over `cfg`'s, validated with the file's own rules.
/// Errors: [`ControlError::Invalid`] naming the first problem's key (e.g.
/// `error_rules.gw-quota.reason`) and listing every problem.
pub fn live_rules(cfg: &Config, patch: &SettingsPatch) -> Result<LiveRules, ControlError> {
    let (mut error_rules, restatement) = match (&patch.error_rules, &patch.restatement) {
        (None, None) => (cfg.error_rules.clone(), cfg.restatement.clone()),
        (rules, restated) => {
            let (r, s) = crate::config::validate::rule_lists(
                rules.as_deref().unwrap_or_default(),
                restated.as_deref().unwrap_or_default(),
                &cfg.providers,
            )
            .map_err(|problems| rules_invalid(&problems))?;
            (
                if rules.is_some() {
                    r
                } else {
                    cfg.error_rules.clone()
                },
                if restated.is_some() {
                    s
                } else {
                    cfg.restatement.clone()
                },
            )
        }
    };
    error_rules.extend(crate::config::builtin_error_rules());
    Ok(LiveRules {
        error_rules,
        restatement,
    })
}

impl LiveRules {
    /// The rules as `GET /api/resilience` lists them: `{"error_rules": [...],
    /// "restatement": [...], "builtin": {"error_rules": [...], "restatement": [...]}}`, each
    /// rule with the file's keys (the built-in rules are listed apart; they always apply
    /// after the others).
    pub fn listing(&self) -> serde_json::Value {
        let builtin = crate::config::builtin_error_rules();
        let own = self.error_rules.len().saturating_sub(builtin.len());
        serde_json::json!({
            "error_rules": self.error_rules.get(..own).unwrap_or_default(),
            "restatement": self.restatement,
            "builtin": {
                "error_rules": builtin,
                "restatement": crate::config::builtin_restatements(),
            },
        })
    }
}

fn rules_invalid(problems: &[crate::config::Problem]) -> ControlError {
    let field = problems
        .first()
        .map_or_else(|| "error_rules".to_owned(), |p| p.key.clone());
    let message = problems
        .iter()
        .map(|p| format!("{}: {}; {}", p.key, p.message, p.fix))
        .collect::<Vec<_>>()
        .join(" | ");
    ControlError::Invalid { field, message }
}

fn fmt(d: std::time::Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// `base` with `patch` applied, validated with the config file's rules
/// (`config::validate::resilience_from_raw`). Errors name the field as `section.key`.
pub fn apply_patch(base: &Resilience, patch: &SettingsPatch) -> Result<Resilience, ControlError> {
    check_profiles(patch)?;
    check_queue_ranges(patch)?;
    let checked = crate::config::validate::resilience_from_raw(&raw_settings(base, patch))
        .map_err(|problems| {
            let p = problems
                .into_iter()
                .next()
                .unwrap_or(crate::config::Problem {
                    key: "settings".into(),
                    message: "invalid".into(),
                    fix: String::new(),
                });
            ControlError::Invalid {
                field: p.key.trim_start_matches("resilience.").to_string(),
                message: format!("{}; {}", p.message, p.fix),
            }
        })?;
    let mut out = base.clone();
    out.model_lockout = checked.model_lockout;
    out.cooldown = checked.cooldown;
    if patch.queue.is_some() {
        out.queue = checked.queue;
    }
    out.quota_preflight = checked.quota_preflight;
    if let Some(v) = patch.stream_stall_cooldown {
        out.connection_cooldown.stream_stall_cooldown = v;
    }
    if let Some(v) = &patch.rate_limit_cooldown {
        out.connection_cooldown.rate_limit_cooldown = if unsets_rate_limit_cooldown(v) {
            None
        } else {
            checked.connection_cooldown.rate_limit_cooldown
        };
    }
    Ok(out)
}

/// Refuses a `connection_cooldown` entry that names no profile.
fn check_profiles(patch: &SettingsPatch) -> Result<(), ControlError> {
    for k in patch.connection_cooldown.keys() {
        if crate::config::validate::parse_profile(k).is_none() {
            return Err(ControlError::Invalid {
                field: format!("connection_cooldown.{k}"),
                message: format!("'{k}' is not a profile; use oauth, api_key or local"),
            });
        }
    }
    Ok(())
}

/// Refuses a queue wait outside 1 ms–24 h (the file's validation allows longer ones).
fn check_queue_ranges(patch: &SettingsPatch) -> Result<(), ControlError> {
    let Some(q) = &patch.queue else {
        return Ok(());
    };
    for (name, v) in [
        ("max_wait", &q.max_wait),
        ("execution_max_wait", &q.execution_max_wait),
    ] {
        if let Some(v) = v
            && humantime::parse_duration(v.trim()).is_ok_and(|d| {
                d < std::time::Duration::from_millis(1)
                    || d > std::time::Duration::from_secs(86_400)
            })
        {
            return Err(ControlError::Invalid {
                field: format!("queue.{name}"),
                message: format!("'{v}' is outside 1ms–24h; use a duration in that range"),
            });
        }
    }
    Ok(())
}

/// The live settings `base` with `patch` on top, written back as the file's raw settings so
/// the file's own validation checks them.
fn raw_settings(base: &Resilience, patch: &SettingsPatch) -> RawResilience {
    let mut raw = RawResilience {
        model_lockout: raw_lockout(&base.model_lockout, patch.model_lockout.clone()),
        connection_cooldown: RawConnectionCooldown {
            rate_limit_cooldown: patch
                .rate_limit_cooldown
                .clone()
                .filter(|v| !unsets_rate_limit_cooldown(v)),
            ..RawConnectionCooldown::default()
        },
        queue: raw_queue(&base.queue, patch.queue.clone()),
        quota_preflight: {
            let q = &base.quota_preflight;
            let qp = patch.quota_preflight.unwrap_or_default();
            RawQuotaPreflight {
                enabled: Some(qp.enabled.unwrap_or(q.enabled)),
                cutoff: Some(qp.cutoff.unwrap_or(q.cutoff)),
                warn: Some(qp.warn.unwrap_or(q.warn)),
            }
        },
        ..RawResilience::default()
    };
    for p in Profile::ALL {
        let prof = Some(raw_cooldown_profile(base, patch, p));
        match p {
            Profile::Oauth => raw.connection_cooldown.oauth = prof,
            Profile::ApiKey => raw.connection_cooldown.api_key = prof,
            Profile::Local => raw.connection_cooldown.local = prof,
        }
    }
    raw
}

/// The model-lockout settings `ml` with the patch `lp` on top, as raw file settings.
fn raw_lockout(
    ml: &crate::config::ModelLockoutSettings,
    lp: Option<LockoutPatch>,
) -> RawModelLockout {
    let lp = lp.unwrap_or_default();
    RawModelLockout {
        enabled: Some(lp.enabled.unwrap_or(ml.enabled)),
        error_codes: Some(
            lp.error_codes
                .unwrap_or_else(|| ml.error_codes.iter().map(|c| i64::from(*c)).collect()),
        ),
        base_cooldown: Some(lp.base_cooldown.unwrap_or_else(|| fmt(ml.base_cooldown))),
        max_cooldown: Some(lp.max_cooldown.unwrap_or_else(|| fmt(ml.max_cooldown))),
        max_backoff_steps: Some(
            lp.max_backoff_steps
                .unwrap_or(i64::from(ml.max_backoff_steps)),
        ),
        exponential: Some(lp.exponential.unwrap_or(ml.exponential)),
    }
}

/// The queue settings `q` with the patch `qp` on top, as raw file settings.
fn raw_queue(q: &crate::config::QueueSettings, qp: Option<QueuePatch>) -> RawQueue {
    let qp = qp.unwrap_or_default();
    RawQueue {
        max_wait: Some(qp.max_wait.unwrap_or_else(|| fmt(q.max_wait))),
        execution_max_wait: Some(
            qp.execution_max_wait
                .unwrap_or_else(|| fmt(q.execution_max_wait)),
        ),
        max_queue_depth: Some(qp.max_queue_depth.unwrap_or(i64::from(q.max_queue_depth))),
        auto_enable_api_key_connections: Some(q.auto_enable_api_key_connections),
        protection_default_cap: Some(i64::from(q.protection_default_cap)),
    }
}

/// Profile `p`'s connection cooldown from `base` with its `patch` entry on top, as raw file
/// settings.
fn raw_cooldown_profile(
    base: &Resilience,
    patch: &SettingsPatch,
    p: Profile,
) -> RawCooldownProfile {
    let cur = base
        .cooldown
        .get(&p)
        .copied()
        .unwrap_or_else(|| crate::config::validate::default_cooldown(p));
    let cp = patch
        .connection_cooldown
        .get(p.as_str())
        .cloned()
        .unwrap_or_default();
    RawCooldownProfile {
        base: Some(cp.base.unwrap_or_else(|| fmt(cur.base))),
        max_backoff_level: Some(
            cp.max_backoff_level
                .unwrap_or(i64::from(cur.max_backoff_level)),
        ),
    }
}

/// Applies the saved overrides (if any) on top of the file's settings at startup; an override
/// that no longer validates is logged and ignored.
pub(crate) fn apply_saved_settings(res: &mut ResState, cfg: &Config, rows: &[SettingRow]) {
    let Some(row) = rows.iter().find(|r| r.key == SETTINGS_KEY) else {
        return;
    };
    let patch: SettingsPatch = match serde_json::from_str(&row.value_json) {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(error = %e, "ignoring unreadable saved settings");
            return;
        }
    };
    if let Err(e) = res.adopt(cfg, patch) {
        tracing::warn!(error = %e, "ignoring saved settings that no longer validate");
    }
}

#[cfg(test)]
mod rules_tests;
#[cfg(test)]
mod tests;
