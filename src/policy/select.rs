//! Candidate selection: a client model name → the ordered targets one request may try.
//!
//! A combo name expands to its targets in strategy order, each into its provider's
//! connections (or the pinned one); any other model goes, unchanged, to the connections of the
//! first default provider whose dialect matches the route, or — when none does — of the first
//! default provider (spec §0 "Candidates"). Targets of either dialect are candidates: the
//! proxy translates a request for a provider of the other dialect (`src/translate/`).

use crate::config::{Config, Dialect};

/// One (provider, connection, model) an attempt may be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Index into `Config::providers`.
    pub provider: usize,
    /// Index into that provider's `connections`.
    pub connection: usize,
    /// Upstream model id to send.
    pub model: String,
    /// True when `model` differs from what the client sent (the body must be rewritten).
    pub rewrite: bool,
    /// Index of the combo target this candidate came from (0 for a plain model).
    pub target: usize,
    /// The layout generation `provider` and `connection` index into (`Config::layout` of
    /// the config they came from).
    pub layout: u64,
}

/// A target left out before any attempt, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `provider/model` as configured.
    pub target: String,
    /// Diagnostic reason (an [`ExclusionReason`] word).
    pub reason: &'static str,
}

/// The plan for one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Candidates in the order they are tried.
    pub candidates: Vec<Candidate>,
    /// Targets skipped before trying (none today: every dialect is reachable through
    /// translation; kept for diagnostics).
    pub skipped: Vec<Skipped>,
    /// The combo the model named, if any.
    pub combo: Option<String>,
}

/// Builds the candidate list for `model` on a route of `dialect`.
pub fn plan(cfg: &Config, dialect: Dialect, model: &str) -> Plan {
    let mut out = Plan::default();
    if let Some(combo) = cfg.combo(model) {
        out.combo = Some(combo.name.clone());
        for (ti, t) in combo.targets.iter().enumerate() {
            let Some((pi, p)) = cfg.provider_entry(&t.provider) else {
                continue;
            };
            for (ci, c) in p.connections.iter().enumerate() {
                if t.connection.as_ref().is_some_and(|pin| pin != &c.id) {
                    continue;
                }
                out.candidates.push(Candidate {
                    provider: pi,
                    connection: ci,
                    model: t.model.clone(),
                    rewrite: t.model != model,
                    target: ti,
                    layout: cfg.layout,
                });
            }
        }
        return out;
    }
    let defaults: Vec<(usize, &crate::config::Provider)> = cfg
        .default_providers
        .iter()
        .filter_map(|id| cfg.provider_entry(id))
        .collect();
    // The first default provider of the route's dialect, else the first one (translated).
    let pick = defaults
        .iter()
        .find(|(_, p)| p.dialect == dialect)
        .or(defaults.first());
    if let Some(&(pi, p)) = pick {
        for ci in 0..p.connections.len() {
            out.candidates.push(Candidate {
                provider: pi,
                connection: ci,
                model: model.to_string(),
                rewrite: false,
                target: 0,
                layout: cfg.layout,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};
    use std::path::Path;

    fn cfg(text: &str) -> Config {
        let env = LoadEnv::fixed(&[("K", "secret-key-123")], "/tmp");
        from_str(text, Path::new("t.toml"), &env).unwrap()
    }

    const TWO: &str = r#"
        [routing]
        default_provider = ["oa", "an"]
        [[providers]]
        id = "an"
        dialect = "anthropic"
        base_url = "https://api.anthropic.com"
          [[providers.connections]]
          id = "mine"
          auth = "passthrough"
          [[providers.connections]]
          id = "team"
          auth = { env = "K" }
        [[providers]]
        id = "oa"
        dialect = "openai"
        base_url = "https://openrouter.ai/api"
          [[providers.connections]]
          id = "key-a"
          auth = { env = "K" }
        [[combos]]
        name = "fast"
        targets = ["oa/z-ai/glm-5", "an:team/claude-haiku-4-5", "an/claude-sonnet-4-5"]
    "#;

    #[test]
    fn plain_model_goes_to_first_default_provider_of_the_route_dialect() {
        let c = cfg(TWO);
        let p = plan(&c, Dialect::Anthropic, "claude-opus-4-1");
        assert_eq!(
            p.candidates.len(),
            2,
            "both anthropic connections, in config order"
        );
        assert!(
            p.candidates
                .iter()
                .all(|x| x.provider == 0 && x.model == "claude-opus-4-1" && !x.rewrite)
        );
        let p = plan(&c, Dialect::OpenAi, "gpt-x");
        assert_eq!(
            p.candidates,
            vec![Candidate {
                provider: 1,
                connection: 0,
                model: "gpt-x".into(),
                rewrite: false,
                target: 0,
                layout: 0,
            }]
        );
    }

    #[test]
    fn plain_model_falls_back_to_the_first_default_provider_of_any_dialect() {
        let c = cfg(&TWO.replace(
            "default_provider = [\"oa\", \"an\"]",
            "default_provider = [\"oa\"]",
        ));
        let p = plan(&c, Dialect::Anthropic, "claude-opus-4-1");
        assert_eq!(p.candidates.len(), 1);
        assert_eq!(
            p.candidates[0].provider, 1,
            "the openai provider, translated"
        );
    }

    #[test]
    fn combo_expands_targets_pins_connections_and_keeps_other_dialects() {
        let c = cfg(TWO);
        let p = plan(&c, Dialect::Anthropic, "fast");
        assert_eq!(p.combo.as_deref(), Some("fast"));
        assert!(p.skipped.is_empty(), "{:?}", p.skipped);
        let got: Vec<(usize, &str)> = p
            .candidates
            .iter()
            .map(|x| (x.connection, x.model.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, "z-ai/glm-5"),
                (1, "claude-haiku-4-5"),
                (0, "claude-sonnet-4-5"),
                (1, "claude-sonnet-4-5")
            ]
        );
        assert!(p.candidates.iter().all(|x| x.rewrite));
    }
}

/// Why a candidate was left out at selection time (spec §8 diagnostic reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionReason {
    /// The provider breaker is OPEN, or HALF_OPEN with its probe busy.
    CircuitOpen,
    /// The §1b windowed provider cooldown is active.
    ProviderCooldown,
    /// The connection is cooling (any reason).
    ConnectionCooldown,
    /// The connection waits for a quota reset.
    QuotaWait,
    /// Quota preflight: the connection's binding quota window (read from rate-limit
    /// headers) is at or under `[resilience.quota_preflight] cutoff`; skipped before
    /// dispatch until the window resets.
    QuotaPreflight,
    /// The model (or its quota group) is locked on that connection.
    ModelLockout,
    /// The connection is `banned`, `expired` or `credits_exhausted`.
    Terminal,
    /// Slow start: the provider or connection is ramping up after recovery and this request
    /// fell outside its share. Never waited on and never the reason a request fails:
    /// dispatch tries such a candidate anyway when nothing else served.
    SlowStart,
    /// Anything else (auth / not found exclusions).
    Unavailable,
    /// The target's provider speaks the other dialect (listed in diagnostics only). No
    /// longer produced since translation: every dialect is reachable; kept so the wire word
    /// stays defined.
    DialectMismatch,
    /// The connection is held by another owner's exclusive session lease.
    Leased,
}

impl ExclusionReason {
    /// The wire word used in `sluice.diagnostics.excluded[].reason`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CircuitOpen => "circuit_open",
            Self::ProviderCooldown => "provider_cooldown",
            Self::ConnectionCooldown => "connection_cooldown",
            Self::QuotaWait => "quota_wait",
            Self::QuotaPreflight => "quota_preflight",
            Self::ModelLockout => "model_lockout",
            Self::Terminal => "terminal",
            Self::SlowStart => "slow_start",
            Self::Unavailable => "unavailable",
            Self::DialectMismatch => "dialect_mismatch",
            Self::Leased => "leased",
        }
    }

    /// Transient exclusions (§8 "Transient ="): cooling connection, model lockout, open or
    /// half-open-busy breaker, provider cooldown.
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Self::CircuitOpen
                | Self::ProviderCooldown
                | Self::ConnectionCooldown
                | Self::ModelLockout
        )
    }

    /// A quota wait or a preflight cut-off: both end when a quota window resets, and both
    /// answer `quota_exhausted` when nothing else is eligible.
    pub fn is_quota(self) -> bool {
        matches!(self, Self::QuotaWait | Self::QuotaPreflight)
    }

    /// Exclusions the §4 cooldown-aware wait may wait out: connection cooldowns and model
    /// lockouts only (never an open breaker, quota wait, terminal, auth or not-found).
    pub fn is_waitable(self) -> bool {
        matches!(self, Self::ConnectionCooldown | Self::ModelLockout)
    }
}

/// A target's label, `provider:connection/model`, as the console, the request log and error
/// bodies show it. Built by appending (a `format!` of the three parts was 1.4 % of a
/// request's instructions, paid on every attempt).
pub fn target_label(provider: &str, connection: &str, model: &str) -> String {
    let mut label = String::with_capacity(provider.len() + connection.len() + model.len() + 2);
    label.push_str(provider);
    label.push(':');
    label.push_str(connection);
    label.push('/');
    label.push_str(model);
    label
}

/// One candidate excluded before dispatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exclusion {
    /// `provider:connection/model`.
    pub target: String,
    /// Why.
    pub reason: ExclusionReason,
    /// Until the exclusion ends, when known (ms precision is enough).
    pub retry_after: Option<std::time::Duration>,
}

/// What §8 says the client gets when every candidate was excluded and none was attempted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoneEligible {
    /// HTTP status.
    pub status: u16,
    /// `sluice.code`.
    pub code: &'static str,
    /// `retry-after` (whole seconds, rounded up) when the row gives one.
    pub retry_after: Option<std::time::Duration>,
    /// Send `x-should-retry: false`.
    pub no_retry: bool,
}

/// Applies the §8 table (rows checked in order) to the exclusions of a request for which no
/// attempt was made. `exclusions` must be non-empty; an empty list means "no target" (404).
pub fn none_eligible(exclusions: &[Exclusion]) -> NoneEligible {
    if exclusions.is_empty() {
        return NoneEligible {
            status: 404,
            code: "no_executable_targets",
            retry_after: None,
            no_retry: false,
        };
    }
    let earliest = |pred: &dyn Fn(ExclusionReason) -> bool| {
        exclusions
            .iter()
            .filter(|e| pred(e.reason))
            .filter_map(|e| e.retry_after)
            .min()
    };
    let any = |r: &[ExclusionReason]| exclusions.iter().any(|e| r.contains(&e.reason));
    if any(&[
        ExclusionReason::CircuitOpen,
        ExclusionReason::ProviderCooldown,
    ]) {
        return NoneEligible {
            status: 503,
            code: "all_targets_cooling_down",
            retry_after: earliest(&|r: ExclusionReason| r.is_transient()),
            no_retry: false,
        };
    }
    if any(&[
        ExclusionReason::ConnectionCooldown,
        ExclusionReason::ModelLockout,
    ]) {
        return NoneEligible {
            status: 429,
            code: "rate_limit_error",
            retry_after: earliest(&|r: ExclusionReason| r.is_transient()),
            no_retry: false,
        };
    }
    if any(&[ExclusionReason::QuotaWait, ExclusionReason::QuotaPreflight]) {
        let ra = earliest(&|r: ExclusionReason| r.is_quota());
        return NoneEligible {
            status: 429,
            code: "quota_exhausted",
            retry_after: ra,
            no_retry: ra.is_some_and(|d| d > std::time::Duration::from_secs(60)),
        };
    }
    NoneEligible {
        status: 503,
        code: "ALL_TARGETS_SKIPPED",
        retry_after: None,
        no_retry: true,
    }
}

#[cfg(test)]
mod none_eligible_tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_target_label_is_provider_colon_connection_slash_model() {
        assert_eq!(
            target_label("anthropic", "key-a", "claude-x"),
            "anthropic:key-a/claude-x"
        );
        assert_eq!(target_label("", "", ""), ":/");
    }

    fn ex(reason: ExclusionReason, s: u64) -> Exclusion {
        Exclusion {
            target: "p:c/m".into(),
            reason,
            retry_after: Some(Duration::from_secs(s)),
        }
    }

    #[test]
    fn rows_are_checked_in_order() {
        use ExclusionReason::*;
        let r = none_eligible(&[]);
        assert_eq!((r.status, r.code), (404, "no_executable_targets"));
        let r = none_eligible(&[
            ex(ConnectionCooldown, 5),
            ex(CircuitOpen, 20),
            ex(Terminal, 0),
        ]);
        assert_eq!(
            (r.status, r.code, r.retry_after, r.no_retry),
            (
                503,
                "all_targets_cooling_down",
                Some(Duration::from_secs(5)),
                false
            )
        );
        let r = none_eligible(&[
            ex(ModelLockout, 9),
            ex(ConnectionCooldown, 4),
            ex(QuotaWait, 1),
        ]);
        assert_eq!(
            (r.status, r.code, r.retry_after),
            (429, "rate_limit_error", Some(Duration::from_secs(4)))
        );
        let r = none_eligible(&[ex(QuotaWait, 3600), ex(Terminal, 0)]);
        assert_eq!(
            (r.status, r.code, r.retry_after, r.no_retry),
            (
                429,
                "quota_exhausted",
                Some(Duration::from_secs(3600)),
                true
            )
        );
        let r = none_eligible(&[ex(QuotaWait, 30)]);
        assert!(!r.no_retry, "a short quota wait may be retried");
        let r = none_eligible(&[ex(QuotaPreflight, 900), ex(QuotaWait, 7200)]);
        assert_eq!(
            (r.status, r.code, r.retry_after, r.no_retry),
            (429, "quota_exhausted", Some(Duration::from_secs(900)), true),
            "a preflight cut-off answers like a quota wait, with the earliest reset"
        );
        let r = none_eligible(&[ex(QuotaPreflight, 0), ex(ConnectionCooldown, 5)]);
        assert_eq!(
            r.code, "rate_limit_error",
            "a transient exclusion still comes first"
        );
        let r = none_eligible(&[ex(Terminal, 0), ex(Unavailable, 0)]);
        assert_eq!(
            (r.status, r.code, r.retry_after, r.no_retry),
            (503, "ALL_TARGETS_SKIPPED", None, true)
        );
    }
}
