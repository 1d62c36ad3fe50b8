//! Providers, connections, combos and routing (`CONFIG.md#providers`, `#combos`, `#routing`).

use std::collections::{BTreeMap, HashSet};

use super::super::raw;
use super::*;

impl Validator<'_, '_> {
    pub(super) fn providers(&mut self, raws: Vec<raw::RawProvider>) -> Vec<Provider> {
        let mut out = Vec::new();
        let mut seen = SeenIds::default();
        for (i, rp) in raws.into_iter().enumerate() {
            if let Some(p) = self.provider(i, rp, &mut seen) {
                out.push(p);
            }
        }
        out
    }

    /// One `[[providers]]` entry, checked with its connections; `None` (after saying so) when
    /// it has no id.
    fn provider(&mut self, i: usize, rp: raw::RawProvider, seen: &mut SeenIds) -> Option<Provider> {
        let id = self.provider_id(i, &rp, &mut seen.providers)?;
        let k = format!("providers.{id}");
        let dialect = self.dialect(&k, rp.dialect.as_deref());
        let base_url = self.base_url(&k, rp.base_url.as_deref());
        let profile = self.profile(&k, rp.profile.as_deref(), dialect, &base_url);
        let connection_strategy = self.strategy(
            &format!("{k}.connection_strategy"),
            rp.connection_strategy.as_deref(),
        );
        let (timeout, connect_timeout, slow_start) = self.provider_timeouts(&k, &rp);
        if rp.connections.is_empty() {
            self.bad(
                format!("{k}.connections"),
                "is empty",
                "add a [[providers.connections]] table with id and auth",
            );
        }
        let translation = self.translation(&k, dialect, &rp);
        let owner = ConnectionOwner {
            key: &k,
            id: &id,
            dialect,
            profile,
        };
        let mut connections = Vec::new();
        for (j, rc) in rp.connections.into_iter().enumerate() {
            if let Some(c) = self.connection(&owner, j, rc, &mut seen.connections) {
                connections.push(c);
            }
        }
        Some(Provider {
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
        })
    }

    /// The provider's id: present (else `None`, after saying so), made of id characters and
    /// not used by an earlier provider (each a problem if not).
    fn provider_id(
        &mut self,
        i: usize,
        rp: &raw::RawProvider,
        seen: &mut HashSet<String>,
    ) -> Option<String> {
        let Some(id) = rp.id.clone().filter(|s| !s.trim().is_empty()) else {
            self.bad(
                format!("providers[{i}].id"),
                "is missing",
                "give every provider a unique id, e.g. id = \"anthropic\"",
            );
            return None;
        };
        let k = format!("providers.{id}");
        if !valid_id(&id) {
            self.bad(
                format!("{k}.id"),
                format!("'{id}' contains characters other than letters, digits, '-', '_' and '.'"),
                "use a simple id like \"openrouter\"",
            );
        }
        if !seen.insert(id.clone()) {
            self.bad(
                format!("{k}.id"),
                format!("'{id}' is used by two providers"),
                "provider ids must be unique",
            );
        }
        Some(id)
    }

    /// `dialect`: `anthropic` or `openai` (required; Anthropic after a problem).
    fn dialect(&mut self, k: &str, v: Option<&str>) -> Dialect {
        match v {
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
        }
    }

    /// `base_url`: an http(s) URL (required; a loopback placeholder after a problem).
    fn base_url(&mut self, k: &str, v: Option<&str>) -> http::Uri {
        match v {
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
        }
    }

    /// `profile`: `oauth`, `api_key` or `local`; unset, the default for the dialect and URL.
    fn profile(
        &mut self,
        k: &str,
        v: Option<&str>,
        dialect: Dialect,
        base_url: &http::Uri,
    ) -> Profile {
        match v {
            None => default_profile(dialect, base_url),
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
        }
    }

    /// The provider's `(timeout, connect_timeout, slow_start)`; the first two must not be zero.
    fn provider_timeouts(
        &mut self,
        k: &str,
        rp: &raw::RawProvider,
    ) -> (Duration, Duration, Duration) {
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
        (timeout, connect_timeout, slow_start)
    }

    /// One `[[providers.connections]]` entry of `owner`; `None` (after saying so) when it has
    /// no id.
    fn connection(
        &mut self,
        owner: &ConnectionOwner<'_>,
        j: usize,
        rc: raw::RawConnection,
        seen: &mut HashSet<String>,
    ) -> Option<Connection> {
        let k = owner.key;
        let Some(cid) = rc.id.clone().filter(|s| !s.trim().is_empty()) else {
            self.bad(
                format!("{k}.connections[{j}].id"),
                "is missing",
                "give every connection a unique id, e.g. id = \"key-a\"",
            );
            return None;
        };
        let ck = format!("{k}.connections.{cid}");
        if !valid_id(&cid) {
            self.bad(
                format!("{ck}.id"),
                format!("'{cid}' contains characters other than letters, digits, '-', '_' and '.'"),
                "use a simple id like \"key-a\"",
            );
        }
        if !seen.insert(cid.clone()) {
            self.bad(
                format!("{ck}.id"),
                format!("'{cid}' is used by two connections"),
                "connection ids must be unique across the whole file",
            );
        }
        let auth = self.auth(&ck, rc.auth.as_ref());
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
        self.subscription_only(&ck, "low_priority_mode", rc.low_priority_mode, owner);
        self.subscription_only(&ck, "auto_limit_reset", rc.auto_limit_reset, owner);
        let org_uuid = self.org_uuid(&ck, rc.org_uuid.as_deref(), rc.auto_limit_reset);
        Some(Connection {
            id: cid,
            auth,
            max_concurrent,
            model_concurrency,
            disable_cooling: rc.disable_cooling.unwrap_or(false),
            rate_limit_protection: rc.rate_limit_protection,
            concurrency_fail_open: rc.concurrency_fail_open.unwrap_or(true),
            egress: rc.egress.clone().unwrap_or_else(|| "direct".into()),
            queue: self.connection_queue(&ck, rc.queue.as_ref()),
            low_priority_mode: rc.low_priority_mode.unwrap_or(false),
            auto_limit_reset: rc.auto_limit_reset.unwrap_or(false),
            org_uuid,
            rate_limit_cooldown: self.rate_limit_cooldown(
                &format!("{ck}.rate_limit_cooldown"),
                rc.rate_limit_cooldown.as_ref(),
            ),
        })
    }

    /// A connection's `auth`: `"passthrough"` or `{ env = "VAR", scheme? }` (the key read from
    /// the environment). Passthrough after a problem; a wrong value is never echoed.
    fn auth(&mut self, ck: &str, v: Option<&toml::Value>) -> Auth {
        match v {
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
                let scheme = self.key_scheme(ck, t.get("scheme"));
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
        }
    }

    /// A problem when the connection key `key` is `true` on a provider that is not an
    /// Anthropic subscription one (dialect `anthropic`, profile `oauth`).
    fn subscription_only(
        &mut self,
        ck: &str,
        key: &str,
        v: Option<bool>,
        owner: &ConnectionOwner<'_>,
    ) {
        let ConnectionOwner {
            id,
            dialect,
            profile,
            ..
        } = *owner;
        if v == Some(true) && (profile != Profile::Oauth || dialect != Dialect::Anthropic) {
            self.bad(
                format!("{ck}.{key}"),
                format!(
                    "'true' needs an Anthropic subscription provider (dialect \"anthropic\", profile \"oauth\"); provider '{id}' is dialect \"{}\", profile \"{}\"",
                    dialect.as_str(),
                    profile.as_str()
                ),
                format!("remove {key}, or set profile = \"oauth\" on an anthropic provider whose connections are subscription (OAuth) accounts"),
            );
        }
    }

    /// A connection's `[queue]` overrides (each unset key falls back to `[queue]`).
    fn connection_queue(
        &mut self,
        ck: &str,
        q: Option<&raw::RawConnectionQueue>,
    ) -> ConnectionQueue {
        let Some(q) = q else {
            return ConnectionQueue::default();
        };
        let qk = format!("{ck}.queue");
        ConnectionQueue {
            max_wait: q.max_wait.as_ref().map(|v| {
                self.duration(&format!("{qk}.max_wait"), Some(v), Duration::from_secs(30))
            }),
            execution_max_wait: q.execution_max_wait.as_ref().map(|v| {
                self.duration(
                    &format!("{qk}.execution_max_wait"),
                    Some(v),
                    Duration::from_secs(600),
                )
            }),
            max_queue_depth: q
                .max_queue_depth
                .map(|n| self.count(&format!("{qk}.max_queue_depth"), Some(n), 0, 0, 100_000)),
        }
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
            if let Some(c) = self.combo(i, rc, &mut names, providers) {
                out.push(c);
            }
        }
        out
    }

    /// One `[[combos]]` entry with its targets; `None` (after saying so) when it has no name.
    fn combo(
        &mut self,
        i: usize,
        rc: raw::RawCombo,
        names: &mut HashSet<String>,
        providers: &[Provider],
    ) -> Option<Combo> {
        let Some(name) = rc.name.clone().filter(|s| !s.trim().is_empty()) else {
            self.bad(
                format!("combos[{i}].name"),
                "is missing",
                "give the combo the model name clients will send, e.g. name = \"fast\"",
            );
            return None;
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
            if let Some(spec) = self.combo_target(&format!("{k}.targets[{j}]"), t, providers) {
                targets.push(spec);
            }
        }
        let max_hold = self.duration(
            &format!("{k}.max_hold"),
            rc.max_hold.as_ref(),
            DEFAULT_MAX_HOLD,
        );
        self.nonzero(&format!("{k}.max_hold"), max_hold, "\"15m\"");
        Some(Combo {
            name,
            strategy,
            targets,
            hold_until_reset: rc.hold_until_reset.unwrap_or(false),
            max_hold,
            cooldown_wait: rc.cooldown_wait.unwrap_or(true),
        })
    }

    /// The combo target `t` (at key `tk`), naming a configured provider (and connection, if
    /// any); `None` after saying why it is not.
    fn combo_target(
        &mut self,
        tk: &str,
        t: &toml::Value,
        providers: &[Provider],
    ) -> Option<TargetSpec> {
        let (s, weight) = self.target_and_weight(tk, t)?;
        let Some(spec) = parse_target(s).map(|t| TargetSpec { weight, ..t }) else {
            self.bad(
                tk,
                format!("'{s}' is not a target"),
                "write \"provider/model\" or \"provider:connection/model\"",
            );
            return None;
        };
        let Some(p) = providers.iter().find(|p| p.id == spec.provider) else {
            self.bad(
                tk,
                format!("'{s}' names unknown provider '{}'", spec.provider),
                format!(
                    "define a [[providers]] with id = \"{}\" or fix the name",
                    spec.provider
                ),
            );
            return None;
        };
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
            return None;
        }
        Some(spec)
    }

    /// A combo target's text and weight: `"provider/model"` (weight 1) or, for weights,
    /// `{ target = "p/m", weight = 3 }` (1 to 1000; 1 after a problem). `None` after saying
    /// why `t` is neither.
    fn target_and_weight<'t>(&mut self, tk: &str, t: &'t toml::Value) -> Option<(&'t str, u32)> {
        match t {
            toml::Value::String(s) => Some((s.as_str(), 1)),
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
                Some((
                    tb.get("target")
                        .and_then(toml::Value::as_str)
                        .unwrap_or_default(),
                    w,
                ))
            }
            _ => {
                self.bad(
                    tk,
                    format!("'{t}' is not a target"),
                    "write a target as \"provider/model\", \"provider:connection/model\" or { target = \"provider/model\", weight = 3 }",
                );
                None
            }
        }
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

/// The ids seen so far in the file: provider ids, and connection ids (unique across the whole
/// file).
#[derive(Default)]
struct SeenIds {
    providers: HashSet<String>,
    connections: HashSet<String>,
}

/// The provider a connection belongs to, as the connection's checks need it.
#[derive(Clone, Copy)]
struct ConnectionOwner<'a> {
    /// The provider's config key, `providers.<id>`.
    key: &'a str,
    id: &'a str,
    dialect: Dialect,
    profile: Profile,
}
