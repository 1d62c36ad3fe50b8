//! `[session_leases]`: exclusive session leases (§2d). Durations are parsed
//! with `humantime` and bounded before use, so an enormous value is a config error, never an
//! overflow later.

use std::time::Duration;

use super::super::raw;
use super::*;

/// Default lease length: 10 minutes.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(600);
/// Default longest lease a client may ask for: 1 hour.
pub const DEFAULT_LEASE_MAX_TTL: Duration = Duration::from_secs(3600);
/// Shortest lease: 10 seconds.
pub const MIN_LEASE_TTL: Duration = Duration::from_secs(10);
/// Longest lease: 24 hours.
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(24 * 3600);

/// Parses a lease length: a duration from 10s to 24h. The error is a `(message, fix)` pair.
pub fn check_lease_ttl(s: &str) -> Result<Duration, (String, String)> {
    let fix = || "use a duration from \"10s\" to \"24h\", e.g. \"10m\"".to_string();
    match humantime::parse_duration(s.trim()) {
        Ok(d) if (MIN_LEASE_TTL..=MAX_LEASE_TTL).contains(&d) => Ok(d),
        Ok(_) => Err((format!("'{s}' is outside 10s–24h"), fix())),
        Err(_) => Err((format!("'{s}' is not a duration"), fix())),
    }
}

impl Validator<'_, '_> {
    fn lease_ttl(&mut self, key: &str, value: Option<&String>, default: Duration) -> Duration {
        let Some(s) = value else { return default };
        match check_lease_ttl(s) {
            Ok(d) => d,
            Err((message, fix)) => {
                self.bad(key, message, fix);
                default
            }
        }
    }

    pub(super) fn session_leases(
        &mut self,
        raw: &raw::RawSessionLeases,
        server: &ServerConfig,
    ) -> SessionLeases {
        let ttl = self.lease_ttl("session_leases.ttl", raw.ttl.as_ref(), DEFAULT_LEASE_TTL);
        let max_ttl = self.lease_ttl(
            "session_leases.max_ttl",
            raw.max_ttl.as_ref(),
            DEFAULT_LEASE_MAX_TTL.max(ttl),
        );
        if max_ttl < ttl {
            self.bad(
                "session_leases.max_ttl",
                format!(
                    "'{}' is shorter than session_leases.ttl ('{}')",
                    humantime::format_duration(max_ttl),
                    humantime::format_duration(ttl)
                ),
                "set max_ttl at least as long as ttl, or leave it out",
            );
        }
        let mut client_keys = Vec::new();
        if let Some(var) = &raw.client_keys_env {
            if server.client_keys_env.is_none() {
                self.bad(
                    "session_leases.client_keys_env",
                    "is set but [server] client_keys_env is not, so sluice checks no client keys",
                    "set server.client_keys_env too, or remove session_leases.client_keys_env",
                );
            }
            if let Some(s) = self.env_secret("session_leases.client_keys_env", var) {
                client_keys = super::key_list(&s);
            }
        }
        SessionLeases {
            enabled: raw.enabled.unwrap_or(false),
            ttl,
            max_ttl: max_ttl.max(ttl),
            client_keys,
            client_keys_env: raw.client_keys_env.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_ttl_is_bounded_without_overflow() {
        assert_eq!(check_lease_ttl("10m"), Ok(Duration::from_secs(600)));
        assert!(check_lease_ttl("9s").is_err());
        assert!(check_lease_ttl("25h").is_err());
        let (msg, fix) = check_lease_ttl("99999999999999999999y").unwrap_err();
        assert!(
            msg.contains("not a duration") || msg.contains("outside"),
            "{msg}"
        );
        assert!(fix.contains("10s"), "{fix}");
    }
}
