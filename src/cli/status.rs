//! `sluice status`: a one-shot plain-text table of breakers, connections (cooldowns) and
//! model lockouts, read from a running instance's admin API (`GET /api/snapshot`). For
//! scripts and for people without a TTY.

use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::config::{Config, Lenient};
use crate::snapshot::Snapshot;

/// Why the status could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// The admin listener did not answer.
    #[error(
        "cannot reach sluice's admin API at http://{addr}: {message}; is sluice running with this config?"
    )]
    Unreachable {
        /// The admin address.
        addr: String,
        /// The transport error.
        message: String,
    },
    /// It answered with an error status.
    #[error("admin API answered {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Body text.
        body: String,
    },
}

/// `sluice status` needs only the admin address and, when `admin.token_env` is set, the
/// token: every other missing secret of a [`SecretMode::Optional`](crate::config::SecretMode)
/// load is ignored. Errors: the admin token's variable is not set (`key: message; fix`).
pub fn admin_token_ready(loaded: &Lenient) -> Result<(), String> {
    match loaded
        .missing_secrets
        .iter()
        .find(|p| p.key == "admin.token_env")
    {
        Some(p) => Err(format!(
            "{}: {}; {} to query the admin API",
            p.key, p.message, p.fix
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod token_tests {
    use std::path::Path;

    use crate::config::{LoadEnv, SecretMode, from_str_with};

    const TEXT: &str = "[admin]\ntoken_env = \"T\"\n[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"https://x\"\n[[providers.connections]]\nid = \"k\"\nauth = { env = \"PROVIDER_KEY\" }\n";

    #[test]
    fn status_needs_only_the_admin_token() {
        let vars = [("T", "tok")];
        let l = from_str_with(
            TEXT,
            Path::new("s.toml"),
            &LoadEnv::fixed(&vars, "/d"),
            SecretMode::Optional,
        )
        .unwrap();
        assert_eq!(l.missing_secrets.len(), 1, "the provider key is missing");
        assert_eq!(super::admin_token_ready(&l), Ok(()));
        let l = from_str_with(
            TEXT,
            Path::new("s.toml"),
            &LoadEnv::fixed(&[], "/d"),
            SecretMode::Optional,
        )
        .unwrap();
        let err = super::admin_token_ready(&l).unwrap_err();
        assert!(
            err.starts_with("admin.token_env: environment variable 'T' is not set"),
            "{err}"
        );
    }
}

/// Fetches `/api/snapshot` from the admin listener named in `cfg` (with the bearer token when
/// configured) within 5 s, parsed as the typed [`Snapshot`].
pub async fn fetch(cfg: &Config) -> Result<Snapshot, StatusError> {
    let addr = cfg.admin.listen.to_string();
    let unreachable = |m: String| StatusError::Unreachable {
        addr: addr.clone(),
        message: m,
    };
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let mut req = http::Request::new(Empty::new());
    *req.uri_mut() = format!("http://{addr}/api/snapshot")
        .parse()
        .map_err(|e: http::uri::InvalidUri| unreachable(e.to_string()))?;
    if let Some(t) = &cfg.admin.token
        && let Ok(v) = http::HeaderValue::from_str(&format!("Bearer {}", t.expose()))
    {
        req.headers_mut().insert(http::header::AUTHORIZATION, v);
    }
    let resp = tokio::time::timeout(Duration::from_secs(5), client.request(req))
        .await
        .map_err(|_| unreachable("timed out after 5s".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    let status = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| unreachable(e.to_string()))?
        .to_bytes();
    if status != 200 {
        return Err(StatusError::Status {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
    }
    serde_json::from_slice(&body).map_err(|e| unreachable(format!("unreadable snapshot: {e}")))
}

fn secs_left(until: Option<u64>, now: u64) -> String {
    match until {
        Some(u) if u > now => format!("{}s", (u - now).div_ceil(1000)),
        _ => "-".into(),
    }
}

/// Renders a snapshot as plain-text tables.
pub fn render(snap: &Snapshot) -> String {
    let now = snap.taken_at_unix_ms;
    let mut o = String::new();
    let t = &snap.totals;
    let _ = writeln!(
        o,
        "sluice {}  admin {}  requests {} (ok {}, errors {})  in-flight {}{}",
        snap.listen,
        snap.admin_listen,
        t.requests,
        t.ok,
        t.errors,
        t.in_flight,
        if snap.draining { "  DRAINING" } else { "" }
    );
    breakers(&mut o, snap, now);
    connections(&mut o, snap, now);
    queues(&mut o, snap);
    lockouts(&mut o, snap, now);
    o
}

fn breakers(o: &mut String, snap: &Snapshot, now: u64) {
    let _ = writeln!(
        o,
        "\nBREAKERS\n{:<16} {:<10} {:>9} {:>11}",
        "provider", "state", "failures", "next probe"
    );
    for p in &snap.providers {
        let b = &p.breaker;
        let fails = format!("{}/{}/{}", b.failure_count, b.degrade_at, b.open_at);
        let _ = writeln!(
            o,
            "{:<16} {:<10} {:>9} {:>11}",
            p.id,
            b.state,
            fails,
            secs_left(b.next_probe_at_unix_ms, now)
        );
    }
}

fn connections(o: &mut String, snap: &Snapshot, now: u64) {
    let _ = writeln!(
        o,
        "\nCONNECTIONS\n{:<16} {:<16} {:<18} {:>9} {:>6} {:<16} {:>8}",
        "connection", "provider", "status", "remaining", "level", "last error", "lockouts"
    );
    for p in &snap.providers {
        for c in &p.connections {
            let _ = writeln!(
                o,
                "{:<16} {:<16} {:<18} {:>9} {:>6} {:<16} {:>8}",
                c.id,
                p.id,
                c.status,
                secs_left(c.cooldown_until_unix_ms, now),
                c.backoff_level,
                c.last_error_kind
                    .as_ref()
                    .map_or("", crate::snapshot::Word::as_str),
                c.lockouts
            );
        }
    }
}

fn queues(o: &mut String, snap: &Snapshot) {
    let _ = writeln!(o, "\nQUEUES ({} capped gates)", snap.queues.len());
    if snap.queues.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{:<11} {:<16} {:<28} {:>9} {:>9} {:>10} {:>8} {:>10}",
        "gate", "connection", "model", "in-flight", "queued", "oldest", "timeouts", "rejections"
    );
    for q in &snap.queues {
        let cap = q
            .effective_cap
            .or(q.cap)
            .map_or("-".to_string(), |c| c.to_string());
        let depth = match q.max_queue_depth {
            0 => "-".to_string(),
            d => d.to_string(),
        };
        let kind = serde_json::to_value(q.kind)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "{:<11} {:<16} {:<28} {:>9} {:>9} {:>10} {:>8} {:>10}",
            kind,
            q.connection,
            q.model.as_deref().unwrap_or("-"),
            format!("{}/{cap}", q.in_flight),
            format!("{}/{depth}", q.queued),
            format!("{}ms", q.oldest_wait_ms),
            q.timeouts,
            q.rejections
        );
    }
}

fn lockouts(o: &mut String, snap: &Snapshot, now: u64) {
    let _ = writeln!(o, "\nMODEL LOCKOUTS ({})", snap.lockouts.len());
    if snap.lockouts.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "{:<16} {:<16} {:<28} {:<12} {:<20} {:>8} {:>10}",
        "provider", "connection", "model", "scope", "reason", "failures", "expires in"
    );
    for l in &snap.lockouts {
        let _ = writeln!(
            o,
            "{:<16} {:<16} {:<28} {:<12} {:<20} {:>8} {:>10}",
            l.provider,
            l.connection,
            l.model,
            l.scope,
            l.reason,
            l.failures,
            secs_left(Some(l.until_unix_ms), now)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_breakers_connections_and_lockouts() {
        let snap = json!({
            "taken_at_unix_ms": 10_000, "listen": "127.0.0.1:8787", "admin_listen": "127.0.0.1:8788",
            "totals": {"requests": 5, "ok": 4, "errors": 1, "in_flight": 0},
            "providers": [{"id": "openrouter", "breaker": {"state": "open", "failure_count": 12, "degrade_at": 7, "open_at": 12, "next_probe_at_unix_ms": 25_000},
                "connections": [{"id": "key-a", "status": "cooling", "cooldown_until_unix_ms": 13_500, "backoff_level": 2, "last_error_kind": "rate_limited", "lockouts": 1}]}],
            "lockouts": [{"provider": "openrouter", "connection": "key-a", "model": "z-ai/glm-5", "scope": "model", "reason": "not_found", "failures": 1, "until_unix_ms": 70_000}],
        });
        let snap: Snapshot = serde_json::from_value(snap).unwrap();
        let out = render(&snap);
        assert!(
            out.contains("openrouter       open         12/7/12         15s"),
            "{out}"
        );
        assert!(
            out.contains(
                "key-a            openrouter       cooling                   4s      2 rate_limited"
            ),
            "{out}"
        );
        assert!(out.contains("MODEL LOCKOUTS (1)"));
        assert!(out.contains("QUEUES (0 capped gates)"));
        assert!(out.contains("z-ai/glm-5"));
        assert!(out.contains("60s"));
    }

    #[test]
    fn a_live_snapshot_round_trips_through_its_json() {
        let env = crate::config::LoadEnv::fixed(&[("K", "secret-key-123")], "/tmp");
        let cfg = crate::config::from_str(
            "[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:1\"\nmax_concurrent = 3\n  [[providers.connections]]\n  id = \"c\"\n  auth = { env = \"K\" }\n  max_concurrent = 2\n  model_concurrency = { \"m\" = 1 }\n",
            std::path::Path::new("t.toml"),
            &env,
        )
        .unwrap();
        let clock = std::sync::Arc::new(crate::clock::ManualClock::new());
        let core = crate::core::Core::new(std::sync::Arc::new(cfg), clock, None);
        let snap = core.snapshot();
        let json = serde_json::to_value(&snap).unwrap();
        let back: Snapshot = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        assert!(
            !back.queues.is_empty()
                && back.providers[0].breaker.state == crate::snapshot::BreakerState::Closed
        );
    }
}
