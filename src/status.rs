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
use serde_json::Value;

use crate::config::{Config, Lenient};

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
/// configured) within 5 s.
pub async fn fetch(cfg: &Config) -> Result<Value, StatusError> {
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

fn secs_left(until: &Value, now: u64) -> String {
    match until.as_u64() {
        Some(u) if u > now => format!("{}s", (u - now).div_ceil(1000)),
        _ => "-".into(),
    }
}

fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or("")
}

fn n(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

/// Renders the snapshot JSON as plain-text tables.
pub fn render(snap: &Value) -> String {
    let now = n(snap, "taken_at_unix_ms");
    let mut o = String::new();
    let empty = Vec::new();
    let providers = snap
        .get("providers")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let t = snap.get("totals").cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        o,
        "sluice {}  admin {}  requests {} (ok {}, errors {})  in-flight {}{}",
        s(snap, "listen"),
        s(snap, "admin_listen"),
        n(&t, "requests"),
        n(&t, "ok"),
        n(&t, "errors"),
        n(&t, "in_flight"),
        if snap
            .get("draining")
            .and_then(Value::as_bool)
            .unwrap_or(false)
        {
            "  DRAINING"
        } else {
            ""
        }
    );
    let _ = writeln!(
        o,
        "\nBREAKERS\n{:<16} {:<10} {:>9} {:>11}",
        "provider", "state", "failures", "next probe"
    );
    for p in providers {
        let b = p.get("breaker").cloned().unwrap_or(Value::Null);
        let fails = format!(
            "{}/{}/{}",
            n(&b, "failure_count"),
            n(&b, "degrade_at"),
            n(&b, "open_at")
        );
        let _ = writeln!(
            o,
            "{:<16} {:<10} {:>9} {:>11}",
            s(p, "id"),
            s(&b, "state"),
            fails,
            secs_left(&b["next_probe_at_unix_ms"], now)
        );
    }
    let _ = writeln!(
        o,
        "\nCONNECTIONS\n{:<16} {:<16} {:<18} {:>9} {:>6} {:<16} {:>8}",
        "connection", "provider", "status", "remaining", "level", "last error", "lockouts"
    );
    for p in providers {
        for c in p
            .get("connections")
            .and_then(Value::as_array)
            .unwrap_or(&empty)
        {
            let _ = writeln!(
                o,
                "{:<16} {:<16} {:<18} {:>9} {:>6} {:<16} {:>8}",
                s(c, "id"),
                s(p, "id"),
                s(c, "status"),
                secs_left(&c["cooldown_until_unix_ms"], now),
                n(c, "backoff_level"),
                s(c, "last_error_kind"),
                n(c, "lockouts")
            );
        }
    }
    let queues = snap
        .get("queues")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let _ = writeln!(o, "\nQUEUES ({} capped gates)", queues.len());
    if !queues.is_empty() {
        let _ = writeln!(
            o,
            "{:<11} {:<16} {:<28} {:>9} {:>9} {:>10} {:>8} {:>10}",
            "gate",
            "connection",
            "model",
            "in-flight",
            "queued",
            "oldest",
            "timeouts",
            "rejections"
        );
        for q in queues {
            let cap = q
                .get("cap")
                .and_then(Value::as_u64)
                .map_or("-".to_string(), |c| c.to_string());
            let depth = match n(q, "max_queue_depth") {
                0 => "-".to_string(),
                d => d.to_string(),
            };
            let _ = writeln!(
                o,
                "{:<11} {:<16} {:<28} {:>9} {:>9} {:>10} {:>8} {:>10}",
                s(q, "kind"),
                s(q, "connection"),
                q.get("model").and_then(Value::as_str).unwrap_or("-"),
                format!("{}/{cap}", n(q, "in_flight")),
                format!("{}/{depth}", n(q, "queued")),
                format!("{}ms", n(q, "oldest_wait_ms")),
                n(q, "timeouts"),
                n(q, "rejections")
            );
        }
    }
    let locks = snap
        .get("lockouts")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    let _ = writeln!(o, "\nMODEL LOCKOUTS ({})", locks.len());
    if !locks.is_empty() {
        let _ = writeln!(
            o,
            "{:<16} {:<16} {:<28} {:<12} {:<20} {:>8} {:>10}",
            "provider", "connection", "model", "scope", "reason", "failures", "expires in"
        );
        for l in locks {
            let _ = writeln!(
                o,
                "{:<16} {:<16} {:<28} {:<12} {:<20} {:>8} {:>10}",
                s(l, "provider"),
                s(l, "connection"),
                s(l, "model"),
                s(l, "scope"),
                s(l, "reason"),
                n(l, "failures"),
                secs_left(&l["until_unix_ms"], now)
            );
        }
    }
    o
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
}
