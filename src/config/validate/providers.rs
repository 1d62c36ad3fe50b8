//! Providers, connections, combos and routing (`CONFIG.md#providers`, `#combos`, `#routing`).

use std::collections::{BTreeMap, HashSet};

use super::super::raw;
use super::*;

impl Validator<'_, '_> {
    pub(super) fn providers(&mut self, raws: Vec<raw::RawProvider>) -> Vec<Provider> {
        let mut out = Vec::new();
        let mut provider_ids = HashSet::new();
        let mut connection_ids = HashSet::new();
        for (i, rp) in raws.into_iter().enumerate() {
            let Some(id) = rp.id.clone().filter(|s| !s.trim().is_empty()) else {
                self.bad(
                    format!("providers[{i}].id"),
                    "is missing",
                    "give every provider a unique id, e.g. id = \"anthropic\"",
                );
                continue;
            };
            let k = format!("providers.{id}");
            if !valid_id(&id) {
                self.bad(
                    format!("{k}.id"),
                    format!(
                        "'{id}' contains characters other than letters, digits, '-', '_' and '.'"
                    ),
                    "use a simple id like \"openrouter\"",
                );
            }
            if !provider_ids.insert(id.clone()) {
                self.bad(
                    format!("{k}.id"),
                    format!("'{id}' is used by two providers"),
                    "provider ids must be unique",
                );
            }
            let dialect = match rp.dialect.as_deref() {
                Some("anthropic") => Dialect::Anthropic,
                Some("openai") => Dialect::OpenAi,
                Some(other) => {
                    self.bad(
                        format!("{k}.dialect"),
                        format!("'{other}' is not a dialect"),
                        "use \"anthropic\" or \"openai\"",
                    );
                    Dialect::Anthropic
                }
                None => {
                    self.bad(
                        format!("{k}.dialect"),
                        "is missing",
                        "set dialect = \"anthropic\" or \"openai\"",
                    );
                    Dialect::Anthropic
                }
            };
            let base_url = match rp.base_url.as_deref() {
                None => {
                    self.bad(
                        format!("{k}.base_url"),
                        "is missing",
                        "set base_url, e.g. \"https://api.anthropic.com\"",
                    );
                    http::Uri::from_static("http://127.0.0.1")
                }
                Some(s) => match parse_base_url(s) {
                    Some(u) => u,
                    None => {
                        self.bad(format!("{k}.base_url"), format!("'{s}' is not a URL"), "use http:// or https:// followed by a host, e.g. \"https://api.anthropic.com\"");
                        http::Uri::from_static("http://127.0.0.1")
                    }
                },
            };
            let profile = match rp.profile.as_deref() {
                None => default_profile(dialect, &base_url),
                Some("oauth") => Profile::Oauth,
                Some("api_key") => Profile::ApiKey,
                Some("local") => Profile::Local,
                Some(other) => {
                    self.bad(
                        format!("{k}.profile"),
                        format!("'{other}' is not a profile"),
                        "use \"oauth\", \"api_key\" or \"local\"",
                    );
                    Profile::ApiKey
                }
            };
            let connection_strategy = self.strategy(
                &format!("{k}.connection_strategy"),
                rp.connection_strategy.as_deref(),
            );
            let timeout = self.duration(
                &format!("{k}.timeout"),
                rp.timeout.as_ref(),
                DEFAULT_TIMEOUT,
            );
            let connect_timeout = self.duration(
                &format!("{k}.connect_timeout"),
                rp.connect_timeout.as_ref(),
                DEFAULT_CONNECT_TIMEOUT,
            );
            let slow_start = self.duration(
                &format!("{k}.slow_start"),
                rp.slow_start.as_ref(),
                Duration::ZERO,
            );
            self.nonzero(&format!("{k}.timeout"), timeout, "\"10m\"");
            self.nonzero(&format!("{k}.connect_timeout"), connect_timeout, "\"10s\"");
            if rp.connections.is_empty() {
                self.bad(
                    format!("{k}.connections"),
                    "is empty",
                    "add a [[providers.connections]] table with id and auth",
                );
            }
            let translation = self.translation(&k, dialect, &rp);
            let mut connections = Vec::new();
            for (j, rc) in rp.connections.into_iter().enumerate() {
                let Some(cid) = rc.id.clone().filter(|s| !s.trim().is_empty()) else {
                    self.bad(
                        format!("{k}.connections[{j}].id"),
                        "is missing",
                        "give every connection a unique id, e.g. id = \"key-a\"",
                    );
                    continue;
                };
                let ck = format!("{k}.connections.{cid}");
                if !valid_id(&cid) {
                    self.bad(format!("{ck}.id"), format!("'{cid}' contains characters other than letters, digits, '-', '_' and '.'"), "use a simple id like \"key-a\"");
                }
                if !connection_ids.insert(cid.clone()) {
                    self.bad(
                        format!("{ck}.id"),
                        format!("'{cid}' is used by two connections"),
                        "connection ids must be unique across the whole file",
                    );
                }
                let auth = match &rc.auth {
                    Some(toml::Value::String(s)) if s == "passthrough" => Auth::Passthrough,
                    Some(toml::Value::Table(t))
                        if t.get("env").is_some_and(toml::Value::is_str)
                            && t.keys().all(|k| k == "env" || k == "scheme") =>
                    {
                        let var = t
                            .get("env")
                            .and_then(toml::Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        let scheme = self.key_scheme(&ck, t.get("scheme"));
                        match self.env_secret(&format!("{ck}.auth.env"), &var) {
                            Some(secret) => Auth::Key {
                                env: var,
                                secret,
                                scheme,
                            },
                            None => Auth::Passthrough,
                        }
                    }
                    // Never echo the value: a string here is often a pasted API key.
                    Some(toml::Value::Table(t)) => {
                        let keys: Vec<&str> = t.keys().map(String::as_str).collect();
                        self.bad(
                            format!("{ck}.auth"),
                            format!(
                                "a table with keys '{}' is not an auth mode (values not shown)",
                                keys.join(", ")
                            ),
                            "use auth = \"passthrough\" or auth = { env = \"VAR_NAME\" } (the key env, a string, and optionally scheme = \"bearer\")",
                        );
                        Auth::Passthrough
                    }
                    Some(other) => {
                        self.bad(
                            format!("{ck}.auth"),
                            format!(
                                "a {} is not an auth mode (value not shown in case it is a secret)",
                                other.type_str()
                            ),
                            "use auth = \"passthrough\", or put the key in an environment variable and write auth = { env = \"VAR_NAME\" }",
                        );
                        Auth::Passthrough
                    }
                    None => {
                        self.bad(
                            format!("{ck}.auth"),
                            "is missing",
                            "use auth = \"passthrough\" or auth = { env = \"VAR_NAME\" }",
                        );
                        Auth::Passthrough
                    }
                };
                let max_concurrent = rc
                    .max_concurrent
                    .map(|n| self.count(&format!("{ck}.max_concurrent"), Some(n), 1, 1, 100_000));
                let mut model_concurrency = BTreeMap::new();
                for (m, n) in &rc.model_concurrency {
                    let n = self.count(
                        &format!("{ck}.model_concurrency.\"{m}\""),
                        Some(*n),
                        1,
                        1,
                        100_000,
                    );
                    model_concurrency.insert(m.clone(), n);
                }
                if rc.low_priority_mode == Some(true)
                    && (profile != Profile::Oauth || dialect != Dialect::Anthropic)
                {
                    self.bad(
                        format!("{ck}.low_priority_mode"),
                        format!(
                            "'true' needs an Anthropic subscription provider (dialect \"anthropic\", profile \"oauth\"); provider '{id}' is dialect \"{}\", profile \"{}\"",
                            dialect.as_str(),
                            profile.as_str()
                        ),
                        "remove low_priority_mode, or set profile = \"oauth\" on an anthropic provider whose connections are subscription (OAuth) accounts",
                    );
                }
                if rc.auto_limit_reset == Some(true)
                    && (profile != Profile::Oauth || dialect != Dialect::Anthropic)
                {
                    self.bad(
                        format!("{ck}.auto_limit_reset"),
                        format!(
                            "'true' needs an Anthropic subscription provider (dialect \"anthropic\", profile \"oauth\"); provider '{id}' is dialect \"{}\", profile \"{}\"",
                            dialect.as_str(),
                            profile.as_str()
                        ),
                        "remove auto_limit_reset, or set profile = \"oauth\" on an anthropic provider whose connections are subscription (OAuth) accounts",
                    );
                }
                let org_uuid = self.org_uuid(&ck, rc.org_uuid.as_deref(), rc.auto_limit_reset);
                connections.push(Connection {
                    id: cid,
                    auth,
                    max_concurrent,
                    model_concurrency,
                    disable_cooling: rc.disable_cooling.unwrap_or(false),
                    rate_limit_protection: rc.rate_limit_protection,
                    concurrency_fail_open: rc.concurrency_fail_open.unwrap_or(true),
                    egress: rc.egress.clone().unwrap_or_else(|| "direct".into()),
                    queue: match &rc.queue {
                        None => ConnectionQueue::default(),
                        Some(q) => {
                            let qk = format!("{ck}.queue");
                            ConnectionQueue {
                                max_wait: q.max_wait.as_ref().map(|v| {
                                    self.duration(
                                        &format!("{qk}.max_wait"),
                                        Some(v),
                                        Duration::from_secs(30),
                                    )
                                }),
                                execution_max_wait: q.execution_max_wait.as_ref().map(|v| {
                                    self.duration(
                                        &format!("{qk}.execution_max_wait"),
                                        Some(v),
                                        Duration::from_secs(600),
                                    )
                                }),
                                max_queue_depth: q.max_queue_depth.map(|n| {
                                    self.count(
                                        &format!("{qk}.max_queue_depth"),
                                        Some(n),
                                        0,
                                        0,
                                        100_000,
                                    )
                                }),
                            }
                        }
                    },
                    low_priority_mode: rc.low_priority_mode.unwrap_or(false),
                    auto_limit_reset: rc.auto_limit_reset.unwrap_or(false),
                    org_uuid,
                    rate_limit_cooldown: self.rate_limit_cooldown(
                        &format!("{ck}.rate_limit_cooldown"),
                        rc.rate_limit_cooldown.as_ref(),
                    ),
                });
            }
            out.push(Provider {
                id,
                dialect,
                base_url,
                profile,
                connection_strategy,
                per_model_quota: rp.per_model_quota.unwrap_or(false),
                timeout,
                connect_timeout,
                slow_start,
                rate_limit_cooldown: self.rate_limit_cooldown(
                    &format!("{k}.rate_limit_cooldown"),
                    rp.rate_limit_cooldown.as_ref(),
                ),
                quota_groups: rp.quota_groups,
                egress_bucketed: rp.egress_bucketed.unwrap_or(false),
                max_concurrent: rp
                    .max_concurrent
                    .map(|n| self.count(&format!("{k}.max_concurrent"), Some(n), 1, 1, 1_000_000)),
                breaker: rp
                    .breaker
                    .as_ref()
                    .map(|b| self.breaker_override(&format!("{k}.breaker"), b))
                    .unwrap_or_default(),
                anthropic_beta_allowlist: rp.anthropic_beta_allowlist.clone(),
                translation,
                connections,
            });
        }
        out
    }

    /// The provider's translation keys: `responses` and `reasoning_effort` only on `openai`
    /// providers, `drop_fields` top-level names that keep the request meaningful,
    /// `default_max_tokens` from 1 to 1,000,000.
    fn translation(&mut self, k: &str, dialect: Dialect, rp: &raw::RawProvider) -> Translation {
        for (key, set) in [
            ("responses", rp.responses.is_some()),
            ("reasoning_effort", rp.reasoning_effort.is_some()),
            ("max_reasoning_effort", rp.max_reasoning_effort.is_some()),
            ("max_completion_tokens", rp.max_completion_tokens.is_some()),
            ("system_role", rp.system_role.is_some()),
        ] {
            if set && dialect == Dialect::Anthropic {
                self.bad(
                    format!("{k}.{key}"),
                    "only applies to dialect = \"openai\" providers",
                    format!("remove {key} from this anthropic provider"),
                );
            }
        }
        let mut drop_fields = Vec::new();
        for f in rp.drop_fields.iter().flatten() {
            if let Some(why) = drop_field_problem(f) {
                self.bad(
                    format!("{k}.drop_fields"),
                    format!("'{f}' {why}"),
                    "list top-level request fields the provider rejects, e.g. drop_fields = [\"stream_options\", \"user\"]",
                );
            } else {
                drop_fields.push(f.clone());
            }
        }
        Translation {
            responses: dialect == Dialect::OpenAi && rp.responses.unwrap_or(true),
            drop_fields,
            default_max_tokens: rp.default_max_tokens.map(|n| {
                self.count(
                    &format!("{k}.default_max_tokens"),
                    Some(n),
                    8192,
                    1,
                    1_000_000,
                )
            }),
            reasoning_effort: rp.reasoning_effort.unwrap_or(false),
            max_reasoning_effort: self
                .effort(
                    &format!("{k}.max_reasoning_effort"),
                    rp.max_reasoning_effort.as_deref(),
                )
                .unwrap_or_default(),
            max_output_tokens: self
                .output_limit(&format!("{k}.max_output_tokens"), rp.max_output_tokens),
            max_completion_tokens: rp.max_completion_tokens.unwrap_or(false),
            system_role: self.system_role(&format!("{k}.system_role"), rp.system_role.as_deref()),
            model_options: rp
                .model_options
                .iter()
                .map(|(m, o)| {
                    (
                        m.clone(),
                        self.model_options(&format!("{k}.model_options.\"{m}\""), o),
                    )
                })
                .collect(),
        }
    }

    /// One `[providers.model_options."<model>"]` entry.
    fn model_options(&mut self, k: &str, o: &raw::RawModelOptions) -> ModelOptions {
        ModelOptions {
            max_output_tokens: self
                .output_limit(&format!("{k}.max_output_tokens"), o.max_output_tokens),
            reasoning_effort: o.reasoning_effort,
            max_reasoning_effort: self.effort(
                &format!("{k}.max_reasoning_effort"),
                o.max_reasoning_effort.as_deref(),
            ),
            max_completion_tokens: o.max_completion_tokens,
        }
    }

    /// A `max_output_tokens` value: 1 to 10,000,000 tokens.
    fn output_limit(&mut self, k: &str, n: Option<i64>) -> Option<u32> {
        n.map(|n| self.count(k, Some(n), 8192, 1, 10_000_000))
    }

    /// `low`, `medium`, `high` or `xhigh`.
    fn effort(&mut self, k: &str, v: Option<&str>) -> Option<ReasoningEffort> {
        let v = v?;
        let e = ReasoningEffort::parse(v);
        if e.is_none() {
            self.bad(
                k,
                format!("'{v}' is not an effort level"),
                "use \"low\", \"medium\", \"high\" or \"xhigh\"",
            );
        }
        e
    }

    /// `system` (default) or `developer`.
    fn system_role(&mut self, k: &str, v: Option<&str>) -> SystemRole {
        match v {
            None | Some("system") => SystemRole::System,
            Some("developer") => SystemRole::Developer,
            Some(other) => {
                self.bad(
                    k,
                    format!("'{other}' is not a role for system text"),
                    "use \"system\" or \"developer\"",
                );
                SystemRole::System
            }
        }
    }

    /// `[providers.breaker]`: each key validated like its `[resilience.breaker.<profile>]`
    /// twin; `open_at >= degrade_at` is checked once the profile is known.
    fn breaker_override(&mut self, k: &str, rb: &raw::RawBreaker) -> BreakerOverride {
        let count = |v: &mut Self, key: &str, n: Option<i64>, max: u32| {
            n.map(|n| v.count(&format!("{k}.{key}"), Some(n), 1, 1, max))
        };
        let dur = |v: &mut Self, key: &str, d: &Option<String>| {
            d.as_ref().map(|d| {
                let d = v.duration(&format!("{k}.{key}"), Some(d), Duration::from_secs(1));
                v.nonzero(&format!("{k}.{key}"), d, "\"30s\"");
                d
            })
        };
        BreakerOverride {
            degrade_at: count(self, "degrade_at", rb.degrade_at, 10_000),
            open_at: count(self, "open_at", rb.open_at, 10_000),
            reset_timeout: dur(self, "reset_timeout", &rb.reset_timeout),
            degraded_quiet_window: rb.degraded_quiet_window.as_ref().map(|d| {
                self.duration(
                    &format!("{k}.degraded_quiet_window"),
                    Some(d),
                    Duration::from_secs(60),
                )
            }),
            probe_timeout: dur(self, "probe_timeout", &rb.probe_timeout),
            max_backoff_multiplier: count(
                self,
                "max_backoff_multiplier",
                rb.max_backoff_multiplier,
                1024,
            ),
            trip_statuses: self
                .trip_statuses(&format!("{k}.trip_statuses"), rb.trip_statuses.as_deref()),
        }
    }

    /// Checks each provider's breaker (profile + override) keeps `open_at >= degrade_at`.
    pub(super) fn provider_breakers(&mut self, providers: &[Provider], r: &Resilience) {
        for p in providers {
            if p.breaker == BreakerOverride::default() {
                continue;
            }
            let profile = r
                .breaker
                .get(&p.profile)
                .copied()
                .unwrap_or_else(|| default_breaker(p.profile));
            let s = p.breaker.over(profile);
            if s.open_at < s.degrade_at {
                self.bad(
                    format!("providers.{}.breaker.open_at", p.id),
                    format!("'{}' is below degrade_at '{}'", s.open_at, s.degrade_at),
                    "open_at must be at least degrade_at (the profile's value applies where the provider sets none)",
                );
            }
        }
    }

    pub(super) fn strategy(&mut self, key: &str, s: Option<&str>) -> Strategy {
        match s {
            None => Strategy::Priority,
            Some(s) => Strategy::parse(s).unwrap_or_else(|| {
                self.bad(
                    key,
                    format!("'{s}' is not a strategy"),
                    "use priority, round_robin, weighted, least_used, random, p2c, fill_first, reset_aware or headroom",
                );
                Strategy::Priority
            }),
        }
    }

    pub(super) fn combos(
        &mut self,
        raws: Vec<raw::RawCombo>,
        providers: &[Provider],
    ) -> Vec<Combo> {
        let mut out = Vec::new();
        let mut names = HashSet::new();
        for (i, rc) in raws.into_iter().enumerate() {
            let Some(name) = rc.name.clone().filter(|s| !s.trim().is_empty()) else {
                self.bad(
                    format!("combos[{i}].name"),
                    "is missing",
                    "give the combo the model name clients will send, e.g. name = \"fast\"",
                );
                continue;
            };
            let k = format!("combos.{name}");
            if !names.insert(name.clone()) {
                self.bad(
                    format!("{k}.name"),
                    format!("'{name}' is used by two combos"),
                    "combo names must be unique",
                );
            }
            let strategy = self.strategy(&format!("{k}.strategy"), rc.strategy.as_deref());
            if rc.targets.is_empty() {
                self.bad(
                    format!("{k}.targets"),
                    "is empty",
                    "list targets as \"provider/model\", e.g. [\"anthropic/claude-haiku-4-5\"]",
                );
            }
            let mut targets = Vec::new();
            for (j, t) in rc.targets.iter().enumerate() {
                let tk = format!("{k}.targets[{j}]");
                // A target is "provider/model" or, for weights, { target = "p/m", weight = 3 }.
                let (s, weight) = match t {
                    toml::Value::String(s) => (s.as_str(), 1),
                    toml::Value::Table(tb)
                        if tb.keys().all(|k| k == "target" || k == "weight")
                            && tb.get("target").is_some_and(toml::Value::is_str) =>
                    {
                        let w = match tb.get("weight") {
                            None => 1,
                            Some(toml::Value::Integer(w)) if (1..=1000).contains(w) => {
                                u32::try_from(*w).unwrap_or(1)
                            }
                            Some(other) => {
                                self.bad(
                                    format!("{tk}.weight"),
                                    format!("'{other}' is not a weight"),
                                    "use a whole number from 1 to 1000",
                                );
                                1
                            }
                        };
                        (
                            tb.get("target")
                                .and_then(toml::Value::as_str)
                                .unwrap_or_default(),
                            w,
                        )
                    }
                    _ => {
                        self.bad(
                            tk,
                            format!("'{t}' is not a target"),
                            "write a target as \"provider/model\", \"provider:connection/model\" or { target = \"provider/model\", weight = 3 }",
                        );
                        continue;
                    }
                };
                match parse_target(s).map(|t| TargetSpec { weight, ..t }) {
                    None => self.bad(
                        tk,
                        format!("'{s}' is not a target"),
                        "write \"provider/model\" or \"provider:connection/model\"",
                    ),
                    Some(spec) => match providers.iter().find(|p| p.id == spec.provider) {
                        None => self.bad(
                            tk,
                            format!("'{s}' names unknown provider '{}'", spec.provider),
                            format!(
                                "define a [[providers]] with id = \"{}\" or fix the name",
                                spec.provider
                            ),
                        ),
                        Some(p) => {
                            if let Some(c) = &spec.connection
                                && !p.connections.iter().any(|x| &x.id == c)
                            {
                                self.bad(
                                    tk,
                                    format!(
                                        "'{s}' names unknown connection '{c}' of provider '{}'",
                                        p.id
                                    ),
                                    "use one of that provider's connection ids",
                                );
                                continue;
                            }
                            targets.push(spec);
                        }
                    },
                }
            }
            let max_hold = self.duration(
                &format!("{k}.max_hold"),
                rc.max_hold.as_ref(),
                DEFAULT_MAX_HOLD,
            );
            self.nonzero(&format!("{k}.max_hold"), max_hold, "\"15m\"");
            out.push(Combo {
                name,
                strategy,
                targets,
                hold_until_reset: rc.hold_until_reset.unwrap_or(false),
                max_hold,
                cooldown_wait: rc.cooldown_wait.unwrap_or(true),
            });
        }
        out
    }

    pub(super) fn routing(&mut self, raw: &raw::RawRouting, providers: &[Provider]) -> Vec<String> {
        let ids: Vec<String> = match &raw.default_provider {
            // Unset: every provider in file order, so each route's dialect finds the first
            // provider that speaks it (`CONFIG.md#routing`: "first listed provider whose dialect
            // matches").
            None => {
                let mut ids: Vec<String> = Vec::new();
                for p in providers {
                    if !ids.contains(&p.id) {
                        ids.push(p.id.clone());
                    }
                }
                ids
            }
            Some(toml::Value::String(s)) => vec![s.clone()],
            Some(toml::Value::Array(a)) if a.iter().all(toml::Value::is_str) => a
                .iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect(),
            Some(other) => {
                self.bad(
                    "routing.default_provider",
                    format!("'{other}' is not a provider id or list of ids"),
                    "write \"anthropic\" or [\"anthropic\", \"openrouter\"]",
                );
                return Vec::new();
            }
        };
        if raw.default_provider.is_some() && ids.is_empty() {
            self.bad(
                "routing.default_provider",
                "is an empty list",
                "name at least one provider id, e.g. [\"anthropic\"], or remove the key",
            );
        }
        let mut seen = HashSet::new();
        for id in &ids {
            if !seen.insert(id) {
                self.bad(
                    "routing.default_provider",
                    format!("'{id}' is listed twice"),
                    "list each provider once",
                );
            }
            if !providers.iter().any(|p| &p.id == id) {
                self.bad(
                    "routing.default_provider",
                    format!("'{id}' is not a configured provider"),
                    "name the id of a [[providers]] table",
                );
            }
        }
        ids
    }
}

/// Why `field` cannot be in `drop_fields`, if it cannot.
fn drop_field_problem(field: &str) -> Option<&'static str> {
    const REQUIRED: [&str; 3] = ["model", "messages", "stream"];
    if field.is_empty() || field.contains(['.', '[', ' ']) {
        Some("is not a top-level field name")
    } else if REQUIRED.contains(&field) {
        Some("is needed by every request and cannot be dropped")
    } else {
        None
    }
}

impl Validator<'_, '_> {
    /// A connection's `org_uuid` (at `{ck}.org_uuid`): a UUID, returned in lowercase; required
    /// when `auto_limit_reset` is true. `None` when unset or invalid (reported). The value is
    /// never echoed: a string pasted here by mistake may be a credential.
    fn org_uuid(&mut self, ck: &str, value: Option<&str>, auto: Option<bool>) -> Option<String> {
        const FIX: &str = "set org_uuid to the subscription account's organization UUID, e.g. org_uuid = \"123e4567-e89b-12d3-a456-426614174000\" (Claude Code keeps it as oauthAccount.organizationUuid in ~/.claude.json)";
        let key = format!("{ck}.org_uuid");
        match value {
            Some(v) if is_uuid(v) => Some(v.to_ascii_lowercase()),
            Some(_) => {
                self.bad(
                    key,
                    "is not a UUID (8-4-4-4-12 hexadecimal digits; value not shown)",
                    FIX,
                );
                None
            }
            None if auto == Some(true) => {
                self.bad(
                    key,
                    "is missing; auto_limit_reset = true needs the organization the reset is requested for",
                    FIX,
                );
                None
            }
            None => None,
        }
    }
}

/// True for a UUID in its text form: 36 characters, hexadecimal digits in groups of
/// 8-4-4-4-12 separated by `-` (either case, no braces or `urn:uuid:` prefix).
fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}
