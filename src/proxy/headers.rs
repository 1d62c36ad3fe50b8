//! Header rules for both directions: what is forwarded upstream, what comes back to the
//! client, and how credentials are passed through or injected (a connection's `auth`,
//! `CONFIG.md#providersconnections`).

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use crate::config::{Auth, Dialect, KeyScheme, Secret};
use crate::policy::affinity::SESSION_HEADERS;

/// Hop-by-hop headers (RFC 9110 §7.6.1) plus the non-standard ones proxies also drop.
const HOP_BY_HOP: [&str; 9] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

fn is_hop_by_hop(name: &HeaderName, listed: &[String]) -> bool {
    let n = name.as_str();
    HOP_BY_HOP.contains(&n) || listed.iter().any(|l| l == n)
}

/// Header names listed in the `Connection` header (also hop-by-hop), lowercased.
fn connection_listed(h: &HeaderMap) -> Vec<String> {
    h.get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

/// Which client header carried sluice's own client key (so it is not forwarded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientKeyHeader {
    /// `x-api-key`.
    XApiKey,
    /// `Authorization: Bearer`.
    Authorization,
}

/// The client presented no valid sluice client key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadClientKey;

/// Checks the client's sluice key against `keys` (accepted from either header, A24).
/// `Ok(None)` when no keys are configured; `Err(BadClientKey)` when keys are configured and
/// none match.
pub fn check_client_key(
    h: &HeaderMap,
    keys: &[Secret],
) -> Result<Option<ClientKeyHeader>, BadClientKey> {
    if keys.is_empty() {
        return Ok(None);
    }
    let matches = |v: &str| {
        keys.iter()
            .any(|k| crate::support::ct::constant_time_eq(k.expose().as_bytes(), v.as_bytes()))
    };
    if let Some(v) = h.get("x-api-key").and_then(|v| v.to_str().ok())
        && matches(v.trim())
    {
        return Ok(Some(ClientKeyHeader::XApiKey));
    }
    if let Some(v) = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok())
        && let Some(tok) = v
            .strip_prefix("Bearer ")
            .or_else(|| v.strip_prefix("bearer "))
        && matches(tok.trim())
    {
        return Ok(Some(ClientKeyHeader::Authorization));
    }
    Err(BadClientKey)
}

/// The headers sent upstream for one attempt: the client's headers minus hop-by-hop,
/// `host`, `content-length`, `accept-encoding` (SSE is never compressed, §6), session
/// headers and `x-sluice-*`; credentials passed through or replaced per `auth`.
pub fn upstream_request(
    client: &HeaderMap,
    auth: &Auth,
    dialect: Dialect,
    client_key: Option<ClientKeyHeader>,
    body_len: usize,
) -> HeaderMap {
    let listed = connection_listed(client);
    let mut out = HeaderMap::with_capacity(client.len() + 1);
    for (name, value) in client {
        let n = name.as_str();
        if is_hop_by_hop(name, &listed)
            || n == "host"
            || n == "content-length"
            || n == "accept-encoding"
            // Session headers name the session for affinity and leases; never forwarded.
            || SESSION_HEADERS.contains(name)
            || n.starts_with("x-sluice-")
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    match client_key {
        Some(ClientKeyHeader::XApiKey) => {
            out.remove("x-api-key");
        }
        Some(ClientKeyHeader::Authorization) => {
            out.remove(header::AUTHORIZATION);
        }
        None => {}
    }
    if let Auth::Key { secret, scheme, .. } = auth {
        out.remove("x-api-key");
        out.remove(header::AUTHORIZATION);
        match (dialect, scheme) {
            (Dialect::Anthropic, KeyScheme::Dialect) => {
                if let Ok(mut v) = HeaderValue::from_str(secret.expose()) {
                    v.set_sensitive(true);
                    out.insert(HeaderName::from_static("x-api-key"), v);
                }
            }
            (Dialect::Anthropic, KeyScheme::Bearer) => {
                insert_bearer(&mut out, secret);
                add_beta(&mut out, OAUTH_BETA);
            }
            (Dialect::OpenAi, _) => insert_bearer(&mut out, secret),
        }
    }
    out.insert(header::CONTENT_LENGTH, HeaderValue::from(body_len));
    out
}

/// The `anthropic-beta` flag Anthropic requires with a subscription (OAuth) token sent as
/// `Authorization: Bearer`. Added for `scheme = "bearer"` connections and never dropped by a
/// provider's `anthropic_beta_allowlist` (a passthrough client's own OAuth token needs it too).
pub const OAUTH_BETA: &str = "oauth-2025-04-20";

fn insert_bearer(out: &mut HeaderMap, secret: &Secret) {
    if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", secret.expose())) {
        v.set_sensitive(true);
        out.insert(header::AUTHORIZATION, v);
    }
}

/// Adds `flag` to the comma-separated `anthropic-beta` list unless it is there already (the
/// client's own flags are kept).
fn add_beta(out: &mut HeaderMap, flag: &'static str) {
    // Every `anthropic-beta` line the client sent, joined; one that is not text is left
    // as it was (nothing of the client's is dropped).
    let mut lines = Vec::new();
    for v in out.get_all("anthropic-beta") {
        match v.to_str() {
            Ok(s) if !s.trim().is_empty() => lines.push(s.trim().to_owned()),
            Ok(_) => {}
            Err(_) => return,
        }
    }
    let current = lines.join(",");
    if current.split(',').any(|b| b.trim() == flag) {
        return;
    }
    let joined = if current.is_empty() {
        HeaderValue::from_static(flag)
    } else {
        match HeaderValue::from_str(&format!("{current},{flag}")) {
            Ok(v) => v,
            Err(_) => return,
        }
    };
    out.insert(HeaderName::from_static("anthropic-beta"), joined);
}

/// The upstream response headers relayed to the client: everything but hop-by-hop headers.
/// `content-length` is dropped for SSE (sluice may append a final error event).
pub fn client_response(upstream: &HeaderMap, is_sse: bool) -> HeaderMap {
    let listed = connection_listed(upstream);
    let mut out = HeaderMap::with_capacity(upstream.len());
    for (name, value) in upstream {
        if is_hop_by_hop(name, &listed) || (is_sse && name == header::CONTENT_LENGTH) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

/// Filters a comma-separated `anthropic-beta` value against `allow` (exact entries, or
/// prefixes for entries ending in `*`). Returns the kept value (None when nothing is left)
/// and the dropped values.
pub fn filter_betas(value: &str, allow: &[String]) -> (Option<String>, Vec<String>) {
    let ok = |b: &str| {
        b == OAUTH_BETA
            || allow.iter().any(|a| match a.strip_suffix('*') {
                Some(prefix) => b.starts_with(prefix),
                None => a == b,
            })
    };
    let (mut kept, mut dropped) = (Vec::new(), Vec::new());
    for b in value.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        if ok(b) {
            kept.push(b)
        } else {
            dropped.push(b.to_string())
        }
    }
    ((!kept.is_empty()).then(|| kept.join(",")), dropped)
}

/// True when the response is an SSE stream.
pub fn is_event_stream(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.trim_start()
                .to_ascii_lowercase()
                .starts_with("text/event-stream")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("host", "127.0.0.1:8787"),
            ("connection", "keep-alive, x-custom-hop"),
            ("x-custom-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("accept-encoding", "gzip"),
            ("content-length", "99"),
            ("anthropic-version", "2023-06-01"),
            (
                "anthropic-beta",
                "claude-code-20250219,interleaved-thinking-2025-05-14",
            ),
            ("x-claude-code-session-id", "abc"),
            ("x-session-id", "s1"),
            ("x-sluice-lease-owner", "vlo_x"),
            ("x-sluice-lease-generation", "3"),
            ("x-api-key", "sk-client"),
            ("authorization", "Bearer tok-client"),
            ("user-agent", "claude-cli/2.1"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn passthrough_forwards_credentials_and_betas_and_drops_hop_and_session_headers() {
        let out = upstream_request(&client(), &Auth::Passthrough, Dialect::Anthropic, None, 12);
        assert_eq!(
            out["anthropic-beta"],
            "claude-code-20250219,interleaved-thinking-2025-05-14"
        );
        assert_eq!(out["anthropic-version"], "2023-06-01");
        assert_eq!(out["x-api-key"], "sk-client");
        assert_eq!(out["authorization"], "Bearer tok-client");
        assert_eq!(out["user-agent"], "claude-cli/2.1");
        assert_eq!(out["content-length"], "12");
        for gone in [
            "host",
            "connection",
            "x-custom-hop",
            "keep-alive",
            "te",
            "accept-encoding",
            "x-claude-code-session-id",
            "x-session-id",
            "x-sluice-lease-owner",
            "x-sluice-lease-generation",
        ] {
            assert!(out.get(gone).is_none(), "{gone} must not be forwarded");
        }
    }

    #[test]
    fn injected_key_replaces_client_credentials_in_the_dialect_header() {
        let auth = Auth::Key {
            env: "K".into(),
            secret: Secret::new("sk-configured"),
            scheme: KeyScheme::Dialect,
        };
        let a = upstream_request(&client(), &auth, Dialect::Anthropic, None, 0);
        assert_eq!(a["x-api-key"], "sk-configured");
        assert!(a.get("authorization").is_none());
        let o = upstream_request(&client(), &auth, Dialect::OpenAi, None, 0);
        assert_eq!(o["authorization"], "Bearer sk-configured");
        assert!(o.get("x-api-key").is_none());
    }

    #[test]
    fn a_bearer_key_adds_the_oauth_beta_to_the_clients_list_on_anthropic_only() {
        let auth = Auth::Key {
            env: "T".into(),
            secret: Secret::new("sk-ant-oat01-token"),
            scheme: KeyScheme::Bearer,
        };
        let mut h = client();
        h.insert("x-api-key", HeaderValue::from_static("sk-client"));
        h.insert(
            "anthropic-beta",
            HeaderValue::from_static("prompt-caching-2024-07-31"),
        );
        let a = upstream_request(&h, &auth, Dialect::Anthropic, None, 0);
        assert_eq!(a["authorization"], "Bearer sk-ant-oat01-token");
        assert!(
            a.get("x-api-key").is_none(),
            "the client's key never goes upstream"
        );
        assert_eq!(
            a["anthropic-beta"], "prompt-caching-2024-07-31,oauth-2025-04-20",
            "added to, never replacing, the client's flags"
        );
        let mut already = HeaderMap::new();
        already.insert("anthropic-beta", HeaderValue::from_static(OAUTH_BETA));
        let once = upstream_request(&already, &auth, Dialect::Anthropic, None, 0);
        assert_eq!(once["anthropic-beta"], OAUTH_BETA, "not doubled");
        let bare = upstream_request(&HeaderMap::new(), &auth, Dialect::Anthropic, None, 0);
        assert_eq!(bare["anthropic-beta"], OAUTH_BETA);
        let o = upstream_request(&HeaderMap::new(), &auth, Dialect::OpenAi, None, 0);
        assert_eq!(o["authorization"], "Bearer sk-ant-oat01-token");
        assert!(o.get("anthropic-beta").is_none());
        assert!(a["authorization"].is_sensitive());
    }

    #[test]
    fn the_beta_allowlist_keeps_the_oauth_flag() {
        let (kept, dropped) = filter_betas(
            "oauth-2025-04-20, context-1m-2025-08-07",
            &["prompt-caching-*".to_string()],
        );
        assert_eq!(kept.as_deref(), Some("oauth-2025-04-20"));
        assert_eq!(dropped, vec!["context-1m-2025-08-07".to_string()]);
    }

    #[test]
    fn client_key_accepted_from_either_header_and_not_forwarded() {
        let keys = [Secret::new("sluice-key")];
        let mut h = HeaderMap::new();
        assert_eq!(check_client_key(&h, &[]), Ok(None));
        assert_eq!(check_client_key(&h, &keys), Err(BadClientKey));
        h.insert("x-api-key", HeaderValue::from_static("sluice-key"));
        h.insert(
            "authorization",
            HeaderValue::from_static("Bearer sk-ant-oat-user"),
        );
        let which = check_client_key(&h, &keys).unwrap();
        assert_eq!(which, Some(ClientKeyHeader::XApiKey));
        let out = upstream_request(&h, &Auth::Passthrough, Dialect::Anthropic, which, 0);
        assert!(out.get("x-api-key").is_none());
        assert_eq!(out["authorization"], "Bearer sk-ant-oat-user");
        let mut h = HeaderMap::new();
        h.insert(
            "authorization",
            HeaderValue::from_static("Bearer sluice-key"),
        );
        assert_eq!(
            check_client_key(&h, &keys),
            Ok(Some(ClientKeyHeader::Authorization))
        );
        h.insert("authorization", HeaderValue::from_static("Bearer wrong"));
        assert_eq!(check_client_key(&h, &keys), Err(BadClientKey));
    }

    #[test]
    fn beta_allowlist_keeps_listed_values_and_reports_the_rest() {
        let allow = vec!["feature-a".to_string(), "claude-code-*".to_string()];
        let (kept, dropped) =
            filter_betas("feature-a, feature-b-2099,claude-code-20250219", &allow);
        assert_eq!(kept.as_deref(), Some("feature-a,claude-code-20250219"));
        assert_eq!(dropped, vec!["feature-b-2099".to_string()]);
        let (kept, dropped) = filter_betas("x,y", &allow);
        assert_eq!((kept, dropped.len()), (None, 2));
    }

    #[test]
    fn response_headers_keep_upstream_fields_but_not_hop_by_hop() {
        let mut h = HeaderMap::new();
        h.insert(
            "content-type",
            HeaderValue::from_static("text/event-stream; charset=utf-8"),
        );
        h.insert("content-length", HeaderValue::from_static("10"));
        h.insert("transfer-encoding", HeaderValue::from_static("chunked"));
        h.insert("retry-after", HeaderValue::from_static("3"));
        h.insert("request-id", HeaderValue::from_static("req_1"));
        assert!(is_event_stream(&h));
        let out = client_response(&h, true);
        assert_eq!(out["retry-after"], "3");
        assert_eq!(out["request-id"], "req_1");
        assert!(out.get("transfer-encoding").is_none() && out.get("content-length").is_none());
        assert!(client_response(&h, false).get("content-length").is_some());
    }
}
