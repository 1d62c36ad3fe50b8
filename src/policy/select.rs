//! Candidate selection: a client model name → the ordered targets one request may try.
//!
//! A combo name expands to its targets in strategy order, each into its provider's
//! connections (or the pinned one); any other model goes, unchanged, to the connections of the
//! first default provider whose dialect matches the route, or — when none does — of the first
//! default provider (§0 "Candidates and fallback"). Targets of either dialect are candidates: the
//! proxy translates a request for a provider of the other dialect (`src/translate/`).

use crate::config::keys::ConnKey;
use crate::config::{Config, Dialect};

/// One (provider, connection, model) an attempt may be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Index into `Config::providers` of the config the candidate came from (to read that
    /// config; live state is found by `key`).
    pub provider: usize,
    /// Index into that provider's `connections`, in the same config.
    pub connection: usize,
    /// The connection's stable key: where its live state is kept, whatever reloads did since.
    pub key: ConnKey,
    /// Upstream model id to send.
    pub model: String,
    /// True when `model` differs from what the client sent (the body must be rewritten).
    pub rewrite: bool,
    /// Index of the combo target this candidate came from (0 for a plain model).
    pub target: usize,
}

impl Candidate {
    /// Its positions (provider, connection) in `cfg`, the config served now: the ones it was
    /// planned with unless a reload moved it, `None` when a reload removed it.
    pub fn positions_in(&self, cfg: &Config) -> Option<(usize, usize)> {
        cfg.keys.find(self.key, (self.provider, self.connection))
    }
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
                    key: cfg.keys.connection(pi, ci),
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
                key: cfg.keys.connection(pi, ci),
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
                key: crate::config::keys::ConnKey::new(1, 0),
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

/// Why a candidate was left out at selection time (the §8 diagnostic reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
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

    /// Reasons that may be transient: cooling connection, model lockout, open or
    /// half-open-busy breaker, provider cooldown. A cooldown or lockout is transient only
    /// when its cause heals by waiting ([`Exclusion::is_transient`]).
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

/// What kind of failure keeps a cooled connection or a locked model out. A connection
/// cooldown or a model lockout is transient (a rate limit, a server failure) unless the
/// failure behind it was an auth or not-found one: waiting does not heal those, so they never
/// earn a `429` with a retry hint, and the §4 wait never waits on them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExclusionCause {
    /// A rate limit, a server or transport failure, or anything else time heals (also every
    /// exclusion that is not a cooldown or a lockout).
    #[default]
    Transient,
    /// The credential or the account was refused: 401, a generic 403, a ban, no credits, a
    /// "request not allowed" 403, or an error rule naming one of them.
    Auth,
    /// The model does not exist on that connection (404).
    NotFound,
}

impl ExclusionCause {
    /// The cause behind a failure of `class`.
    pub fn of_class(class: super::OutcomeClass) -> Self {
        use super::OutcomeClass as O;
        match class {
            O::Auth | O::Forbidden | O::Banned | O::CreditsExhausted | O::RequestRejected => {
                Self::Auth
            }
            O::NotFound => Self::NotFound,
            O::Success
            | O::Transient
            | O::RateLimited
            | O::ConcurrencyLimited
            | O::QuotaExhausted
            | O::Overloaded
            | O::ClientFault
            | O::ClientGone
            | O::StreamStall
            | O::EmptyTurn => Self::Transient,
        }
    }

    /// The cause behind a model lockout recorded with reason word `reason` (a classification's
    /// reason: the built-in words, or an `[[error_rules]]` rule's `reason`). Unknown words are
    /// transient.
    pub fn of_reason(reason: &str) -> Self {
        match reason {
            "auth" | "auth_error" | "forbidden" | "banned" | "credits_exhausted"
            | "request_rejected" => Self::Auth,
            "not_found" => Self::NotFound,
            _ => Self::Transient,
        }
    }

    /// The wire word (`transient`, `auth`, `not_found`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transient => "transient",
            Self::Auth => "auth",
            Self::NotFound => "not_found",
        }
    }

    /// Whether waiting can end an exclusion with this cause.
    pub fn heals_by_waiting(self) -> bool {
        self == Self::Transient
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
    /// The failure behind a connection cooldown or a model lockout
    /// ([`ExclusionCause::Transient`] for every other reason).
    pub cause: ExclusionCause,
}

impl Exclusion {
    /// Transient (§8): an open or half-open-busy breaker, a provider cooldown, or a connection
    /// cooldown or model lockout that waiting heals. A cooldown or lockout caused by an auth
    /// or not-found failure is not: it counts with the terminal states.
    pub fn is_transient(&self) -> bool {
        self.reason.is_transient() && self.cause.heals_by_waiting()
    }

    /// A connection cooldown or model lockout from a rate limit or another failure waiting
    /// heals: the exclusions that answer `429 rate_limit_error`.
    pub fn is_rate_limit(&self) -> bool {
        self.is_transient()
            && matches!(
                self.reason,
                ExclusionReason::ConnectionCooldown | ExclusionReason::ModelLockout
            )
    }
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
///
/// Only transient exclusions ([`Exclusion::is_transient`]) give a `retry-after`: a connection
/// cooled after a 401 or a generic 403, or a model locked after a 404, is no rate limit, so
/// when nothing transient or quota-bound is left the answer is `503 ALL_TARGETS_SKIPPED`
/// without a retry hint, as for terminal states. Mixed with a rate-limited candidate, the
/// answer is that candidate's `429` and hint.
pub fn none_eligible(exclusions: &[Exclusion]) -> NoneEligible {
    if exclusions.is_empty() {
        return NoneEligible {
            status: 404,
            code: "no_executable_targets",
            retry_after: None,
            no_retry: false,
        };
    }
    let earliest = |pred: &dyn Fn(&Exclusion) -> bool| {
        exclusions
            .iter()
            .filter(|e| pred(e))
            .filter_map(|e| e.retry_after)
            .min()
    };
    let any = |pred: &dyn Fn(&Exclusion) -> bool| exclusions.iter().any(pred);
    if any(&|e| {
        matches!(
            e.reason,
            ExclusionReason::CircuitOpen | ExclusionReason::ProviderCooldown
        )
    }) {
        return NoneEligible {
            status: 503,
            code: "all_targets_cooling_down",
            retry_after: earliest(&Exclusion::is_transient),
            no_retry: false,
        };
    }
    if any(&Exclusion::is_rate_limit) {
        return NoneEligible {
            status: 429,
            code: "rate_limit_error",
            retry_after: earliest(&Exclusion::is_transient),
            no_retry: false,
        };
    }
    if any(&|e| e.reason.is_quota()) {
        let ra = earliest(&|e| e.reason.is_quota());
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
            cause: ExclusionCause::Transient,
        }
    }

    fn caused(reason: ExclusionReason, s: u64, cause: ExclusionCause) -> Exclusion {
        Exclusion {
            cause,
            ..ex(reason, s)
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

    #[test]
    fn auth_and_not_found_exclusions_are_not_rate_limits() {
        use ExclusionCause::{Auth, NotFound};
        use ExclusionReason::*;
        let skipped = (503, "ALL_TARGETS_SKIPPED", None, true);
        let verdict = |xs: &[Exclusion]| {
            let r = none_eligible(xs);
            (r.status, r.code, r.retry_after, r.no_retry)
        };
        // Only auth-cooled connections, not-found locks and terminal ones: no retry hint.
        assert_eq!(verdict(&[caused(ConnectionCooldown, 3, Auth)]), skipped);
        assert_eq!(
            verdict(&[
                caused(ConnectionCooldown, 3, Auth),
                caused(ModelLockout, 300, NotFound),
                caused(ModelLockout, 120, Auth),
                ex(Terminal, 0),
            ]),
            skipped
        );
        // A rate-limited candidate among them answers 429 with its own hint, even when the
        // auth cooldown ends sooner.
        assert_eq!(
            verdict(&[
                caused(ConnectionCooldown, 3, Auth),
                ex(ConnectionCooldown, 20),
            ]),
            (
                429,
                "rate_limit_error",
                Some(Duration::from_secs(20)),
                false
            )
        );
        // A quota wait still answers quota_exhausted; an open breaker still comes first but
        // never takes its hint from an auth cooldown.
        assert_eq!(
            verdict(&[caused(ConnectionCooldown, 3, Auth), ex(QuotaWait, 30)]),
            (429, "quota_exhausted", Some(Duration::from_secs(30)), false)
        );
        assert_eq!(
            verdict(&[caused(ConnectionCooldown, 3, Auth), ex(CircuitOpen, 15)]),
            (
                503,
                "all_targets_cooling_down",
                Some(Duration::from_secs(15)),
                false
            )
        );
    }

    /// The cooldown policy and the verdict together, at explicit instants: a connection
    /// cooled by a 401 is out for auth while its deadline lasts; one cooled by a 429 is a
    /// rate limit whose hint the client gets.
    #[test]
    fn a_connection_cooled_by_a_401_answers_503_without_a_retry_hint() {
        use crate::clock::{Clock, ManualClock};
        use crate::config::resilience::{ConnectionCooldownSettings, CooldownProfile};
        use crate::policy::cooldown::{Cooldown, CooldownRules, Eligibility};
        use crate::policy::{Classified, OutcomeClass, Scope};

        let settings = ConnectionCooldownSettings {
            max_cooldown: Duration::from_secs(1800),
            quota_wait_threshold: Duration::from_secs(600),
            max_quota_wait: Duration::from_secs(7 * 86_400),
            expired_retry_max: 3,
            ban_markers: vec![],
            request_rejected_markers: vec![],
            quota_markers: vec![],
            concurrency_markers: vec![],
            rate_limit_cooldown: None,
            stream_stall_cooldown: false,
        };
        let rules = CooldownRules {
            profile: CooldownProfile {
                base: Duration::from_secs(3),
                max_backoff_level: 5,
            },
            settings: &settings,
            oauth: false,
            disable_cooling: false,
            rate_limit_cooldown: None,
        };
        let failure = |class, status, hint| Classified {
            class,
            status: Some(status),
            retry_hint: hint,
            reason: String::new(),
            scope: Scope::QuotaGroup,
            restated: None,
            message: String::new(),
            error_rule: None,
        };
        // What selection makes of a cooling connection at `now`.
        let exclusion = |cd: &Cooldown, now| match cd.eligibility(now) {
            Eligibility::Cooling { until } => Some(Exclusion {
                target: "p:k/m".into(),
                reason: ConnectionCooldown,
                retry_after: Some(until.saturating_duration_since(now)),
                cause: cd
                    .cooling_cause(now)
                    .map_or(ExclusionCause::Transient, ExclusionCause::of_class),
            }),
            _ => None,
        };
        use ExclusionReason::ConnectionCooldown;

        let t0 = ManualClock::new().now();
        let mut keyed = Cooldown::default();
        keyed.on_failure(&failure(OutcomeClass::Auth, 401, None), t0, &rules, t0);
        let mut limited = Cooldown::default();
        let hint = Some(Duration::from_secs(20));
        limited.on_failure(
            &failure(OutcomeClass::RateLimited, 429, hint),
            t0,
            &rules,
            t0,
        );

        let t1 = t0 + Duration::from_secs(1);
        let auth = exclusion(&keyed, t1).expect("cooling for 3 s after the 401");
        assert_eq!(
            (auth.cause, auth.retry_after),
            (ExclusionCause::Auth, Some(Duration::from_secs(2)))
        );
        let r = none_eligible(std::slice::from_ref(&auth));
        assert_eq!(
            (r.status, r.code, r.retry_after, r.no_retry),
            (503, "ALL_TARGETS_SKIPPED", None, true)
        );

        let rate = exclusion(&limited, t1).expect("cooling for the 20 s hint");
        assert_eq!(rate.cause, ExclusionCause::Transient);
        let r = none_eligible(&[auth, rate]);
        assert_eq!(
            (r.status, r.code, r.retry_after),
            (429, "rate_limit_error", Some(Duration::from_secs(19)))
        );

        // Past the 401's deadline the connection is eligible again.
        assert_eq!(exclusion(&keyed, t0 + Duration::from_secs(3)), None);
    }
}
