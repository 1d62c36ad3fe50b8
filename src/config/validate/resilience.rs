//! `[resilience.*]` tables (§1–§6 of `docs/RESILIENCE.md`), with the defaults it gives.

use std::collections::BTreeMap;
use std::time::Duration;

use super::super::raw;
use super::*;

fn fmt_d(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

impl Validator<'_, '_> {
    pub(super) fn resilience(&mut self, raw: &raw::RawResilience) -> Resilience {
        let session_affinity_ttl = self.duration(
            "resilience.session_affinity_ttl",
            raw.session_affinity_ttl.as_ref(),
            DEFAULT_SESSION_AFFINITY_TTL,
        );
        Resilience {
            breaker: self.breakers(&raw.breaker),
            cooldown: self.cooldown_profiles(&raw.connection_cooldown),
            connection_cooldown: self.connection_cooldown(&raw.connection_cooldown),
            provider_cooldown: self.provider_cooldown(&raw.provider_cooldown),
            model_lockout: self.model_lockout(&raw.model_lockout),
            combo_cooldown_wait: self.combo_cooldown_wait(&raw.combo_cooldown_wait),
            queue: self.queue(&raw.queue),
            stream: self.stream(&raw.stream),
            concurrency: ConcurrencySettings {
                global_max: raw.concurrency.global_max.map(|n| {
                    self.count(
                        "resilience.concurrency.global_max",
                        Some(n),
                        1,
                        1,
                        1_000_000,
                    )
                }),
            },
            session_affinity_ttl,
            quota_preflight: self.quota_preflight(&raw.quota_preflight),
            p2c_latency_weight: self.count(
                "resilience.p2c_latency_weight",
                raw.p2c_latency_weight,
                0,
                0,
                MAX_P2C_LATENCY_WEIGHT,
            ),
        }
    }

    /// `[resilience.quota_preflight]`: both thresholds 0.0–1.0, `warn >= cutoff`.
    fn quota_preflight(&mut self, raw: &raw::RawQuotaPreflight) -> QuotaPreflightSettings {
        let d = QuotaPreflightSettings::default();
        let k = "resilience.quota_preflight";
        let cutoff = self.fraction(&format!("{k}.cutoff"), raw.cutoff, d.cutoff);
        let warn = self.fraction(&format!("{k}.warn"), raw.warn, d.warn);
        if warn < cutoff {
            self.bad(
                format!("{k}.warn"),
                format!("'{warn}' is below cutoff '{cutoff}'"),
                "warn must be at least cutoff (e.g. cutoff = 0.02, warn = 0.20)",
            );
        }
        QuotaPreflightSettings {
            enabled: raw.enabled.unwrap_or(d.enabled),
            cutoff,
            warn,
        }
    }

    /// A fraction of remaining quota, 0.0–1.0.
    fn fraction(&mut self, key: &str, value: Option<f64>, default: f64) -> f64 {
        let Some(v) = value else { return default };
        if (0.0..=1.0).contains(&v) {
            v
        } else {
            self.bad(
                key,
                format!("'{v}' is not a fraction from 0.0 to 1.0"),
                "write the remaining share as a fraction, e.g. 0.02 for 2 %",
            );
            default
        }
    }

    fn breakers(
        &mut self,
        raw: &BTreeMap<String, raw::RawBreaker>,
    ) -> BTreeMap<Profile, BreakerSettings> {
        for name in raw.keys() {
            if parse_profile(name).is_none() {
                self.bad(
                    format!("resilience.breaker.{name}"),
                    format!("'{name}' is not a profile"),
                    "use [resilience.breaker.oauth], [resilience.breaker.api_key] or [resilience.breaker.local]",
                );
            }
        }
        let mut out = BTreeMap::new();
        for p in Profile::ALL {
            let d = default_breaker(p);
            let k = format!("resilience.breaker.{}", p.as_str());
            let Some(rb) = raw.get(p.as_str()) else {
                out.insert(p, d);
                continue;
            };
            let s = BreakerSettings {
                degrade_at: self.count(
                    &format!("{k}.degrade_at"),
                    rb.degrade_at,
                    d.degrade_at,
                    1,
                    10_000,
                ),
                open_at: self.count(&format!("{k}.open_at"), rb.open_at, d.open_at, 1, 10_000),
                reset_timeout: self.duration(
                    &format!("{k}.reset_timeout"),
                    rb.reset_timeout.as_ref(),
                    d.reset_timeout,
                ),
                degraded_quiet_window: self.duration(
                    &format!("{k}.degraded_quiet_window"),
                    rb.degraded_quiet_window.as_ref(),
                    d.degraded_quiet_window,
                ),
                probe_timeout: self.duration(
                    &format!("{k}.probe_timeout"),
                    rb.probe_timeout.as_ref(),
                    d.probe_timeout,
                ),
                max_backoff_multiplier: self.count(
                    &format!("{k}.max_backoff_multiplier"),
                    rb.max_backoff_multiplier,
                    d.max_backoff_multiplier,
                    1,
                    1024,
                ),
                trip_statuses: self
                    .trip_statuses(&format!("{k}.trip_statuses"), rb.trip_statuses.as_deref())
                    .unwrap_or(d.trip_statuses),
            };
            if s.open_at < s.degrade_at {
                self.bad(
                    format!("{k}.open_at"),
                    format!("'{}' is below degrade_at '{}'", s.open_at, s.degrade_at),
                    "open_at must be at least degrade_at",
                );
            }
            self.nonzero(&format!("{k}.reset_timeout"), s.reset_timeout, "\"30s\"");
            self.nonzero(&format!("{k}.probe_timeout"), s.probe_timeout, "\"60s\"");
            out.insert(p, s);
        }
        out
    }

    /// A breaker's `trip_statuses`: HTTP statuses 100–599 (an empty list leaves only
    /// transport errors counting). `None` when the key is absent; each bad entry is reported.
    pub(super) fn trip_statuses(&mut self, key: &str, raw: Option<&[i64]>) -> Option<StatusSet> {
        let raw = raw?;
        let mut ok = Vec::with_capacity(raw.len());
        for &n in raw {
            match u16::try_from(n) {
                Ok(s) if (100..=599).contains(&s) => ok.push(s),
                _ => self.bad(
                    key,
                    format!("'{n}' is not an HTTP status"),
                    "list statuses from 100 to 599, e.g. trip_statuses = [408, 500, 502, 503, 504]",
                ),
            }
        }
        Some(StatusSet::of(&ok))
    }

    fn cooldown_profiles(
        &mut self,
        rc: &raw::RawConnectionCooldown,
    ) -> BTreeMap<Profile, CooldownProfile> {
        let mut out = BTreeMap::new();
        for p in Profile::ALL {
            let d = default_cooldown(p);
            let k = format!("resilience.connection_cooldown.{}", p.as_str());
            let rp = match p {
                Profile::Oauth => rc.oauth.as_ref(),
                Profile::ApiKey => rc.api_key.as_ref(),
                Profile::Local => rc.local.as_ref(),
            };
            let c = match rp {
                None => d,
                Some(rp) => CooldownProfile {
                    base: self.duration(&format!("{k}.base"), rp.base.as_ref(), d.base),
                    max_backoff_level: self.count(
                        &format!("{k}.max_backoff_level"),
                        rp.max_backoff_level,
                        d.max_backoff_level,
                        0,
                        30,
                    ),
                },
            };
            out.insert(p, c);
        }
        out
    }

    fn connection_cooldown(
        &mut self,
        rc: &raw::RawConnectionCooldown,
    ) -> ConnectionCooldownSettings {
        let k = "resilience.connection_cooldown";
        let s = ConnectionCooldownSettings {
            max_cooldown: self.duration(
                &format!("{k}.max_cooldown"),
                rc.max_cooldown.as_ref(),
                DEFAULT_MAX_COOLDOWN,
            ),
            quota_wait_threshold: self.duration(
                &format!("{k}.quota_wait_threshold"),
                rc.quota_wait_threshold.as_ref(),
                DEFAULT_QUOTA_WAIT_THRESHOLD,
            ),
            max_quota_wait: self.duration(
                &format!("{k}.max_quota_wait"),
                rc.max_quota_wait.as_ref(),
                DEFAULT_MAX_QUOTA_WAIT,
            ),
            expired_retry_max: self.count(
                &format!("{k}.expired_retry_max"),
                rc.expired_retry_max,
                DEFAULT_EXPIRED_RETRY_MAX,
                1,
                100,
            ),
            ban_markers: rc
                .ban_markers
                .clone()
                .unwrap_or_else(|| strings(&DEFAULT_BAN_MARKERS)),
            request_rejected_markers: rc
                .request_rejected_markers
                .clone()
                .unwrap_or_else(|| strings(&DEFAULT_REQUEST_REJECTED_MARKERS)),
            quota_markers: rc
                .quota_markers
                .clone()
                .unwrap_or_else(|| strings(&DEFAULT_QUOTA_MARKERS)),
            concurrency_markers: rc
                .concurrency_markers
                .clone()
                .unwrap_or_else(|| strings(&DEFAULT_CONCURRENCY_MARKERS)),
            rate_limit_cooldown: self.rate_limit_cooldown(
                &format!("{k}.rate_limit_cooldown"),
                rc.rate_limit_cooldown.as_ref(),
            ),
            stream_stall_cooldown: rc.stream_stall_cooldown.unwrap_or(false),
        };
        self.nonzero(&format!("{k}.max_cooldown"), s.max_cooldown, "\"30m\"");
        for (name, list) in [
            ("ban_markers", &s.ban_markers),
            ("request_rejected_markers", &s.request_rejected_markers),
            ("quota_markers", &s.quota_markers),
            ("concurrency_markers", &s.concurrency_markers),
        ] {
            if list.iter().any(|m| m.trim().is_empty()) {
                self.bad(
                    format!("{k}.{name}"),
                    "contains an empty marker, which would match every body",
                    "remove the \"\" entry",
                );
            }
        }
        s
    }

    fn provider_cooldown(&mut self, raw: &raw::RawProviderCooldown) -> ProviderCooldownSettings {
        let mut profiles = BTreeMap::new();
        for p in Profile::ALL {
            let d = default_provider_cooldown(p);
            let k = format!("resilience.provider_cooldown.{}", p.as_str());
            let rp = match p {
                Profile::Oauth => raw.oauth.as_ref(),
                Profile::ApiKey => raw.api_key.as_ref(),
                Profile::Local => raw.local.as_ref(),
            };
            let c = match rp {
                None => d,
                Some(rp) => ProviderCooldownProfile {
                    failure_threshold: self.count(
                        &format!("{k}.failure_threshold"),
                        rp.failure_threshold,
                        d.failure_threshold,
                        1,
                        10_000,
                    ),
                    failure_window: self.duration(
                        &format!("{k}.failure_window"),
                        rp.failure_window.as_ref(),
                        d.failure_window,
                    ),
                    cooldown: self.duration(
                        &format!("{k}.cooldown"),
                        rp.cooldown.as_ref(),
                        d.cooldown,
                    ),
                },
            };
            self.nonzero(&format!("{k}.failure_window"), c.failure_window, "\"15m\"");
            profiles.insert(p, c);
        }
        ProviderCooldownSettings {
            enabled: raw.enabled.unwrap_or(false),
            profiles,
        }
    }

    fn model_lockout(&mut self, rl: &raw::RawModelLockout) -> ModelLockoutSettings {
        let k = "resilience.model_lockout";
        let mut error_codes = Vec::new();
        match &rl.error_codes {
            None => error_codes.extend(DEFAULT_LOCKOUT_ERROR_CODES),
            Some(codes) => {
                for &c in codes {
                    match u16::try_from(c) {
                        Ok(s) if (400..=599).contains(&s) => error_codes.push(s),
                        _ => self.bad(
                            format!("{k}.error_codes"),
                            format!("'{c}' is not an HTTP error status"),
                            "use statuses from 400 to 599",
                        ),
                    }
                }
            }
        }
        let s = ModelLockoutSettings {
            enabled: rl.enabled.unwrap_or(false),
            error_codes,
            base_cooldown: self.duration(
                &format!("{k}.base_cooldown"),
                rl.base_cooldown.as_ref(),
                DEFAULT_LOCKOUT_BASE_COOLDOWN,
            ),
            max_cooldown: self.duration(
                &format!("{k}.max_cooldown"),
                rl.max_cooldown.as_ref(),
                DEFAULT_LOCKOUT_MAX_COOLDOWN,
            ),
            max_backoff_steps: self.count(
                &format!("{k}.max_backoff_steps"),
                rl.max_backoff_steps,
                DEFAULT_LOCKOUT_MAX_BACKOFF_STEPS,
                0,
                30,
            ),
            exponential: rl.exponential.unwrap_or(true),
        };
        self.nonzero(&format!("{k}.base_cooldown"), s.base_cooldown, "\"120s\"");
        if s.max_cooldown < s.base_cooldown {
            self.bad(
                format!("{k}.max_cooldown"),
                format!(
                    "'{}' is shorter than base_cooldown '{}'",
                    fmt_d(s.max_cooldown),
                    fmt_d(s.base_cooldown)
                ),
                "max_cooldown must be at least base_cooldown",
            );
        }
        s
    }

    fn combo_cooldown_wait(&mut self, raw: &raw::RawComboCooldownWait) -> ComboCooldownWait {
        let k = "resilience.combo_cooldown_wait";
        let s = ComboCooldownWait {
            enabled: raw.enabled.unwrap_or(true),
            max_wait: self.duration(
                &format!("{k}.max_wait"),
                raw.max_wait.as_ref(),
                DEFAULT_COMBO_WAIT_MAX_WAIT,
            ),
            max_attempts: self.count(
                &format!("{k}.max_attempts"),
                raw.max_attempts,
                DEFAULT_COMBO_WAIT_MAX_ATTEMPTS,
                0,
                100,
            ),
            budget: self.duration(
                &format!("{k}.budget"),
                raw.budget.as_ref(),
                DEFAULT_COMBO_WAIT_BUDGET,
            ),
        };
        if s.budget < s.max_wait {
            self.bad(
                format!("{k}.budget"),
                format!(
                    "'{}' is shorter than max_wait '{}'",
                    fmt_d(s.budget),
                    fmt_d(s.max_wait)
                ),
                "budget must be at least max_wait",
            );
        }
        s
    }

    /// §5. Precedence for the three durations/depth: the file's value, else the `SLUICE_QUEUE_*`
    /// env var (which supplies the default), else the built-in default.
    /// `auto_enable_api_key_connections`: `SLUICE_RATE_LIMIT_AUTO_ENABLE` overrides the file.
    fn queue(&mut self, rq: &raw::RawQueue) -> QueueSettings {
        let k = "resilience.queue";
        let max_wait_default = self.env_duration(ENV_QUEUE_MAX_WAIT, DEFAULT_QUEUE_MAX_WAIT);
        let exec_default = self.env_duration(
            ENV_QUEUE_EXECUTION_MAX_WAIT,
            DEFAULT_QUEUE_EXECUTION_MAX_WAIT,
        );
        let depth_default =
            self.env_count(ENV_QUEUE_MAX_DEPTH, DEFAULT_QUEUE_MAX_DEPTH, 0, 100_000);
        let auto = self
            .env_bool(ENV_RATE_LIMIT_AUTO_ENABLE)
            .or(rq.auto_enable_api_key_connections)
            .unwrap_or(true);
        QueueSettings {
            max_wait: clamp_queue(self.duration(
                &format!("{k}.max_wait"),
                rq.max_wait.as_ref(),
                max_wait_default,
            )),
            execution_max_wait: clamp_queue(self.duration(
                &format!("{k}.execution_max_wait"),
                rq.execution_max_wait.as_ref(),
                exec_default,
            )),
            max_queue_depth: self.count(
                &format!("{k}.max_queue_depth"),
                rq.max_queue_depth,
                depth_default,
                0,
                100_000,
            ),
            auto_enable_api_key_connections: auto,
            protection_default_cap: self.count(
                &format!("{k}.protection_default_cap"),
                rq.protection_default_cap,
                DEFAULT_PROTECTION_CAP,
                1,
                MAX_PROTECTION_CAP,
            ),
        }
    }

    fn stream(&mut self, rs: &raw::RawStream) -> StreamSettings {
        let k = "resilience.stream";
        let s = StreamSettings {
            readiness_timeout: self.duration(
                &format!("{k}.readiness_timeout"),
                rs.readiness_timeout.as_ref(),
                DEFAULT_READINESS_TIMEOUT,
            ),
            heartbeat_interval: self.duration(
                &format!("{k}.heartbeat_interval"),
                rs.heartbeat_interval.as_ref(),
                DEFAULT_HEARTBEAT_INTERVAL,
            ),
            content_stall_timeout: self.duration(
                &format!("{k}.content_stall_timeout"),
                rs.content_stall_timeout.as_ref(),
                DEFAULT_CONTENT_STALL_TIMEOUT,
            ),
            recover_before_content: rs.recover_before_content.unwrap_or(true),
            continue_after_break: rs.continue_after_break.unwrap_or(false),
            throughput_watchdog: self.watchdog(rs.throughput_watchdog.as_ref()),
        };
        self.nonzero(
            &format!("{k}.readiness_timeout"),
            s.readiness_timeout,
            "\"30s\"",
        );
        self.nonzero(
            &format!("{k}.heartbeat_interval"),
            s.heartbeat_interval,
            "\"15s\"",
        );
        self.nonzero(
            &format!("{k}.content_stall_timeout"),
            s.content_stall_timeout,
            "\"180s\"",
        );
        s
    }

    fn watchdog(&mut self, raw: Option<&raw::RawThroughputWatchdog>) -> ThroughputWatchdog {
        let k = "resilience.stream.throughput_watchdog";
        let empty = raw::RawThroughputWatchdog::default();
        let raw = raw.unwrap_or(&empty);
        let enabled = self
            .env_bool(ENV_STREAM_THROUGHPUT_WATCHDOG)
            .or(raw.enabled)
            .unwrap_or(false);
        let s = ThroughputWatchdog {
            enabled,
            warmup: self.duration(
                &format!("{k}.warmup"),
                raw.warmup.as_ref(),
                DEFAULT_WATCHDOG_WARMUP,
            ),
            window: self.duration(
                &format!("{k}.window"),
                raw.window.as_ref(),
                DEFAULT_WATCHDOG_WINDOW,
            ),
            min_bytes_per_sec: self.count(
                &format!("{k}.min_bytes_per_sec"),
                raw.min_bytes_per_sec,
                DEFAULT_WATCHDOG_MIN_BYTES_PER_SEC,
                1,
                u32::MAX,
            ),
        };
        self.nonzero(&format!("{k}.window"), s.window, "\"30s\"");
        s
    }

    /// A duration from an env var (not a secret, so its value may be quoted), else `default`.
    fn env_duration(&mut self, var: &str, default: Duration) -> Duration {
        let Some(v) = (self.env.var)(var).filter(|v| !v.trim().is_empty()) else {
            return default;
        };
        match parse_bounded_duration(&v) {
            Ok(d) => d,
            Err((message, _)) => {
                self.bad(
                    format!("env {var}"),
                    message,
                    format!("set {var} like \"30s\" or \"10m\" (at most {MAX_DURATION_TEXT}), or unset it"),
                );
                default
            }
        }
    }

    fn env_count(&mut self, var: &str, default: u32, min: u32, max: u32) -> u32 {
        let Some(v) = (self.env.var)(var).filter(|v| !v.trim().is_empty()) else {
            return default;
        };
        match v.trim().parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => n,
            _ => {
                self.bad(
                    format!("env {var}"),
                    format!("'{v}' is not a whole number from {min} to {max}"),
                    format!("set {var} to a number in range, or unset it"),
                );
                default
            }
        }
    }

    fn env_bool(&mut self, var: &str) -> Option<bool> {
        let v = (self.env.var)(var).filter(|v| !v.trim().is_empty())?;
        match v.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Some(true),
            "0" | "false" | "no" | "off" => Some(false),
            _ => {
                self.bad(
                    format!("env {var}"),
                    format!("'{v}' is not a boolean"),
                    format!("set {var} to true or false, or unset it"),
                );
                None
            }
        }
    }
}
