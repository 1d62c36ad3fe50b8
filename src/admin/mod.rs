//! The admin API on its own loopback listener (README "Admin API", `CONFIG.md#admin`): health
//! probes, Prometheus metrics, the Snapshot as JSON, and the resilience endpoints of §1–§3. GET
//! endpoints evaluate state at request time with the same lazy refresh as routing, so they
//! show what the next request would see; POST/PATCH/DELETE call [`Control`], the one door
//! for operator actions.
//!
//! Every route but `/livez`, `/healthz` and `/readyz` requires `Authorization: Bearer
//! <token>` when `[admin] token_env` is set. Errors are `{"error":{"message","type","code"}}`.
//! A sluice started with `--readonly` answers every POST/PUT/PATCH/DELETE with 403.
//!
//! `GET /api/snapshot/stream` streams the snapshot as Server-Sent Events (see
//! [`crate::snapshot::stream`]); it is what `sluice console` attaches to.

use std::convert::Infallible;

use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Either, Full, Limited, StreamBody};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

mod faults;
mod resilience;
mod verify;

use crate::core::operator::control::{Control, ControlError};
use crate::proxy::respond::response::{json_bytes_response, json_response};
use crate::proxy::serve::server::{Limits, serve_http};
use crate::snapshot::{Snapshot, Word};

/// Admin request bodies are small JSON documents; larger ones are refused.
const MAX_ADMIN_BODY: usize = 64 * 1024;

/// The admin listener's response body: a complete answer, or the snapshot stream.
pub type AdminBody = Either<Full<Bytes>, UnsyncBoxBody<Bytes, Infallible>>;

/// The snapshot stream's path.
pub const STREAM_PATH: &str = "/api/snapshot/stream";

/// Serves the admin API until `stop` (it outlives the drain, so `/readyz` can say 503).
/// Snapshot streams end at `stop` too.
pub async fn serve(listener: TcpListener, control: Control, stop: CancellationToken) {
    let limits = Limits::admin(&control.config().server);
    serve_http(listener, stop.clone(), "admin", limits, move |req| {
        let control = control.clone();
        let stop = stop.clone();
        async move {
            if is_stream_request(&req) && authorized(&control, &req) {
                return snapshot_stream(&control, stop);
            }
            handle(&control, req).await.map(Either::Left)
        }
    })
    .await;
}

/// `GET /api/snapshot/stream` (anything else on that path goes to [`handle`], which answers
/// 401 or 405).
fn is_stream_request(req: &Request<Incoming>) -> bool {
    req.method() == Method::GET && req.uri().path().trim_end_matches('/') == STREAM_PATH
}

/// `200 text/event-stream` with this subscriber's snapshot events.
fn snapshot_stream(control: &Control, stop: CancellationToken) -> Response<AdminBody> {
    let events = crate::snapshot::stream::events(
        control.subscribe(),
        crate::snapshot::stream::Pacing::default(),
        stop,
    )
    .map(|b| Ok::<_, Infallible>(hyper::body::Frame::data(b)));
    let mut r = Response::new(Either::Right(UnsyncBoxBody::new(StreamBody::new(events))));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// `GET /api/snapshot`: the snapshot built and serialised straight to JSON on a blocking-pool
/// thread in the background scheduling class, so a large state's snapshot (megabytes with
/// thousands of lockouts) never holds the runtime worker that requests need. A failure is a
/// 500 naming it.
async fn snapshot_json(control: &Control) -> Response<Full<Bytes>> {
    let control = control.clone();
    let built =
        crate::support::sched::spawn_background(move || serde_json::to_vec(&control.snapshot()))
            .await;
    let failed = match built {
        Ok(Ok(json)) => return json_bytes_response(StatusCode::OK, Bytes::from(json)),
        Ok(Err(e)) => format!("cannot serialise the snapshot: {e}"),
        Err(e) => format!("building the snapshot failed: {e}"),
    };
    error(StatusCode::INTERNAL_SERVER_ERROR, &failed)
}

/// Answers one admin request: the health probes first, then the token and read-only gates,
/// then the route for the method and path.
async fn handle(control: &Control, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_end_matches('/').to_string();
    let method = req.method().clone();
    let get = method == Method::GET || method == Method::HEAD;
    if get && let Some(r) = probe(control, &path) {
        return r;
    }
    if let Some(r) = refusal(control, &req, get) {
        return r;
    }
    let query = req.uri().query().unwrap_or("").to_string();
    let body = match read_body(req).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    route(control, &method, &path, &query, &body).await
}

/// The answer of a health probe (`/livez`, `/healthz`, `/readyz`), open without a token;
/// `None` for any other path.
fn probe(control: &Control, path: &str) -> Option<Response<Full<Bytes>>> {
    match path {
        "/livez" | "/healthz" => Some(json_response(StatusCode::OK, json!({"status": "ok"}))),
        "/readyz" => Some(if control.is_draining() {
            json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                json!({"status": "draining"}),
            )
        } else {
            json_response(StatusCode::OK, json!({"status": "ready"}))
        }),
        _ => None,
    }
}

/// 401 without the admin token, 403 for an action (not GET/HEAD) on a read-only sluice;
/// `None` when the request may go on.
fn refusal(control: &Control, req: &Request<Incoming>, get: bool) -> Option<Response<Full<Bytes>>> {
    if !authorized(control, req) {
        let mut r = error(
            StatusCode::UNAUTHORIZED,
            "missing or wrong admin token; send Authorization: Bearer <token from admin.token_env>",
        );
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return Some(r);
    }
    if control.is_readonly() && !get {
        return Some(error(
            StatusCode::FORBIDDEN,
            "sluice runs read-only (--readonly): operator actions are refused",
        ));
    }
    None
}

/// The route table: the answer of `method path` (with its query string and body) for an
/// authorized request; 405 for another method on a known path, 404 for an unknown one.
async fn route(
    control: &Control,
    method: &Method,
    path: &str,
    query: &str,
    body: &[u8],
) -> Response<Full<Bytes>> {
    match (method.as_str(), path) {
        ("GET" | "HEAD", "/api/snapshot") => snapshot_json(control).await,
        ("GET" | "HEAD", "/metrics") => metrics(control),
        ("GET" | "HEAD", "/api/queues") => {
            json_response(StatusCode::OK, json!({"queues": control.gate_views()}))
        }
        ("GET" | "HEAD", "/api/monitoring/health") => {
            json_response(StatusCode::OK, health(&control.snapshot()))
        }
        ("POST", "/api/config/reload") => reload(control),
        ("GET" | "HEAD", "/api/requests") => request_log_page(control, query),
        ("POST", "/api/resilience/reset") => resilience::reset(control, body).await,
        ("GET" | "HEAD", "/api/faults") => faults::list(control),
        ("POST", "/api/faults") => faults::inject(control, body),
        ("DELETE", "/api/faults") => faults::clear(control, query),
        ("GET" | "HEAD", "/api/resilience/cooldowns") => resilience::cooldowns(control, query),
        ("POST", "/api/resilience/cooldowns") => resilience::clear_cooldowns(control, body).await,
        ("POST", "/api/resilience/terminal-reset") => resilience::terminal_reset(control, body),
        ("GET" | "HEAD", "/api/resilience/model-cooldowns") => {
            json_response(StatusCode::OK, model_cooldowns(&control.snapshot()))
        }
        ("DELETE", "/api/resilience/model-cooldowns") => resilience::reenable_model(control, body),
        ("GET" | "HEAD", "/api/resilience") => resilience::settings(control),
        ("PUT", "/api/resilience") => resilience::replace_settings(control, body),
        ("PATCH", "/api/resilience") => resilience::patch_settings(control, body),
        ("DELETE", "/api/resilience") => resilience::revert_settings(control),
        (
            _,
            "/api/snapshot"
            | "/metrics"
            | "/api/monitoring/health"
            | "/api/resilience/reset"
            | "/api/resilience/cooldowns"
            | "/api/resilience/model-cooldowns"
            | "/api/resilience"
            | "/api/resilience/terminal-reset"
            | "/api/faults"
            | STREAM_PATH,
        ) => error(
            StatusCode::METHOD_NOT_ALLOWED,
            &format!("{method} is not allowed on {path}"),
        ),
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("no admin route {method} {path}"),
        ),
    }
}

/// `GET /metrics`: the Prometheus text exposition.
fn metrics(control: &Control) -> Response<Full<Bytes>> {
    let text = control.metrics_text();
    let mut r = Response::new(Full::new(Bytes::from(text)));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    r
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, Response<Full<Bytes>>> {
    match Limited::new(req.into_body(), MAX_ADMIN_BODY)
        .collect()
        .await
    {
        Ok(c) => Ok(c.to_bytes()),
        Err(_) => Err(error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "admin request bodies are limited to 64 KiB",
        )),
    }
}

/// Parses an admin request body, which must be a JSON object (an empty body reads as `{}`).
fn parse_json<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, Box<Response<Full<Bytes>>>> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        &b"{}"[..]
    } else {
        body
    };
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(Box::new(error(
            StatusCode::BAD_REQUEST,
            "the body must be a JSON object",
        )));
    }
    serde_json::from_slice(body).map_err(|e| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            &format!("invalid JSON body: {e}"),
        ))
    })
}

fn answer(r: Result<Value, ControlError>) -> Response<Full<Bytes>> {
    match r {
        Ok(v) => json_response(StatusCode::OK, v),
        Err(ControlError::Invalid { field, message }) => json_response(
            StatusCode::BAD_REQUEST,
            json!({"error": {"message": format!("{field}: {message}"), "type": "invalid_request_error", "code": 400, "field": field}}),
        ),
        Err(e @ (ControlError::UnknownProvider(_) | ControlError::UnknownConnection(_))) => {
            error(StatusCode::NOT_FOUND, &e.to_string())
        }
    }
}

/// `POST /api/config/reload`: 200 with what changed, or 422 with the error (`code`
/// `config_invalid` or `restart_required`, `message` naming file, key and fix).
fn reload(control: &Control) -> Response<Full<Bytes>> {
    match control.reload_config() {
        Ok(diff) => json_response(StatusCode::OK, json!({"reloaded": diff})),
        Err(e) => error_with(
            StatusCode::UNPROCESSABLE_ENTITY,
            &e.to_string(),
            &[("reason", json!(e.code()))],
        ),
    }
}

/// Most rows one `GET /api/requests` returns.
const MAX_LOG_PAGE: usize = 500;

/// `GET /api/requests?limit=N&before_id=ID`: one page of the request log, newest first
/// (`limit` 1–500, default 50; rows older than `before_id` when given), as
/// `{"rows":[{"id","request"}]}` with each `request` shaped like a snapshot's `recent` row.
/// An attached console pages through history with it. 400 on a non-numeric parameter.
fn request_log_page(control: &Control, query: &str) -> Response<Full<Bytes>> {
    let number = |name: &str| query_param(query, name).map(|v| v.parse::<i64>());
    let limit = match number("limit") {
        None => 50,
        Some(Ok(n)) if n >= 1 => usize::try_from(n).unwrap_or(MAX_LOG_PAGE).min(MAX_LOG_PAGE),
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "limit must be a whole number from 1 to 500",
            );
        }
    };
    let before_id = match number("before_id") {
        None => None,
        Some(Ok(id)) => Some(id),
        Some(Err(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "before_id must be a request-log row id",
            );
        }
    };
    let rows: Vec<Value> = control
        .request_log_page(before_id, limit)
        .into_iter()
        .map(|(id, request)| json!({"id": id, "request": request}))
        .collect();
    json_response(StatusCode::OK, json!({"rows": rows}))
}

fn query_param(query: &str, name: &str) -> Option<String> {
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

fn authorized(control: &Control, req: &Request<Incoming>) -> bool {
    match &control.config().admin.token {
        Some(token) => bearer_matches(req.headers(), token),
        None => true,
    }
}

/// `Authorization: Bearer <token>` equal to `token`, compared in constant time
/// ([`crate::support::ct::constant_time_eq`], the same compare as the client keys).
fn bearer_matches(headers: &http::HeaderMap, token: &crate::config::Secret) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| {
            crate::support::ct::constant_time_eq(t.trim().as_bytes(), token.expose().as_bytes())
        })
}

#[cfg(test)]
mod bearer_tests {
    use http::{HeaderMap, HeaderValue, header};

    use crate::config::Secret;

    #[test]
    fn bearer_token_must_match_exactly() {
        let token = Secret::new("admin-tok-1");
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            super::bearer_matches(&h, &token)
        };
        assert!(with("Bearer admin-tok-1"));
        assert!(with("Bearer  admin-tok-1 "));
        assert!(!with("Bearer admin-tok-2"));
        assert!(!with("Bearer admin-tok-1x"));
        assert!(!with("admin-tok-1"));
        assert!(!super::bearer_matches(&HeaderMap::new(), &token));
    }
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    error_with(status, message, &[])
}

/// The admin API's one error shape, `{"error":{"message","type":"admin_error","code"}}`,
/// with `extra` fields added inside `error` (e.g. a reload's `reason`).
fn error_with(status: StatusCode, message: &str, extra: &[(&str, Value)]) -> Response<Full<Bytes>> {
    let mut body = json!({"message": message, "type": "admin_error", "code": status.as_u16()});
    for (k, v) in extra {
        body[*k] = v.clone();
    }
    json_response(status, json!({"error": body}))
}

fn remaining_ms(until: Option<u64>, now: u64) -> u64 {
    until.map_or(0, |u| u.saturating_sub(now))
}

/// `GET /api/monitoring/health`: every provider breaker (§1).
pub fn health(s: &Snapshot) -> Value {
    let now = s.taken_at_unix_ms;
    json!({"breakers": s.providers.iter().map(|p| json!({
        "provider": p.id,
        "state": p.breaker.state,
        "failureCount": p.breaker.failure_count,
        "degradeAt": p.breaker.degrade_at,
        "openAt": p.breaker.open_at,
        "nextProbeAt": p.breaker.next_probe_at_unix_ms,
        "retryAfterMs": remaining_ms(p.breaker.next_probe_at_unix_ms, now),
        "multiplier": p.breaker.multiplier,
        "providerCooldownUntil": p.provider_cooldown_until_unix_ms,
        "transitions": p.breaker.transitions.iter().map(|t| json!({"at": t.at_unix_ms, "from": t.from, "to": t.to, "reason": t.reason})).collect::<Vec<_>>(),
    })).collect::<Vec<_>>()})
}

/// `GET /api/resilience/cooldowns[?provider=]`: every connection with its state and its model
/// lockouts (§2, §3). No credentials.
pub fn cooldowns(s: &Snapshot, provider: Option<&str>) -> Value {
    let now = s.taken_at_unix_ms;
    let mut out = Vec::new();
    for p in s
        .providers
        .iter()
        .filter(|p| provider.is_none_or(|x| x == p.id))
    {
        for c in &p.connections {
            let locks: Vec<Value> = s
                .lockouts
                .iter()
                .filter(|l| l.provider == p.id && l.connection == c.id)
                .map(|l| lockout_json(l, now))
                .collect();
            let mut row = json!({
                "provider": p.id,
                "connection": c.id,
                "status": c.status,
                "remainingMs": remaining_ms(c.cooldown_until_unix_ms, now),
                "cooldownUntil": c.cooldown_until_unix_ms,
                "backoffLevel": c.backoff_level,
                "lastErrorKind": c.last_error_kind.as_ref().map_or("", Word::as_str),
                "lastError": c.last_error,
                "lastStatus": c.last_status,
                "lockouts": locks,
            });
            row["trafficSharePercent"] = json!(crate::metrics::effective_ramp(
                p.ramp_percent,
                c.ramp_percent
            ));
            if let Some(l) = &c.lane {
                row["lane"] =
                    json!({"state": l.state, "until": l.until_unix_ms, "reason": l.reason});
            }
            if let Some(l) = &c.limit_reset {
                row["limitReset"] = json!({
                    "lastOutcome": l.last_outcome.as_ref().map_or("", Word::as_str),
                    "lastAt": l.last_at_unix_ms,
                    "nextQueryAfter": l.next_query_after_unix_ms,
                    "nextAvailableAt": l.next_available_at_unix_ms,
                    "resetUsedAt": l.reset_used_at_unix_ms,
                    "lastError": l.last_error,
                });
            }
            if !c.headroom.is_empty() {
                row["headroom"] = json!(c.headroom.iter().map(headroom_json).collect::<Vec<_>>());
            }
            if let Some(l) = &c.lease {
                row["lease"] = json!({
                    "generation": l.generation,
                    "expiresAt": l.expires_at_unix_ms,
                    "remainingMs": l.expires_at_unix_ms.saturating_sub(now),
                    "ownerFingerprint": l.owner_fingerprint,
                });
            }
            out.push(row);
        }
    }
    json!({"connections": out})
}

/// One headroom window in the admin API's camelCase style.
fn headroom_json(h: &crate::snapshot::HeadroomRowView) -> Value {
    json!({
        "window": h.window,
        "model": h.model,
        "remaining": h.remaining,
        "resetAt": h.reset_at_unix_ms,
        "status": h.status,
        "binding": h.binding,
        "observedAt": h.observed_at_unix_ms,
    })
}

fn lockout_json(l: &crate::snapshot::LockoutView, now: u64) -> Value {
    json!({
        "provider": l.provider,
        "connection": l.connection,
        "model": l.model,
        "scope": l.scope,
        "reason": l.reason,
        "failures": l.failures,
        "expiresAt": l.until_unix_ms,
        "remainingMs": l.until_unix_ms.saturating_sub(now),
    })
}

/// `GET /api/resilience/model-cooldowns`: active lockouts (§3).
pub fn model_cooldowns(s: &Snapshot) -> Value {
    json!({"lockouts": s.lockouts.iter().map(|l| lockout_json(l, s.taken_at_unix_ms)).collect::<Vec<_>>()})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{BreakerView, ConnectionView, LockoutView, ProviderView, Totals};

    fn snap() -> Snapshot {
        Snapshot {
            started_at_unix_ms: 1_000,
            taken_at_unix_ms: 3_500,
            totals: Totals {
                requests: 3,
                ok: 2,
                errors: 1,
                in_flight: 1,
                bytes_out: 99,
            },
            providers: vec![ProviderView {
                id: "anthropic".into(),
                breaker: BreakerView {
                    state: crate::snapshot::BreakerState::Open,
                    failure_count: 8,
                    degrade_at: 5,
                    open_at: 8,
                    next_probe_at_unix_ms: Some(4_500),
                    ..Default::default()
                },
                connections: vec![ConnectionView {
                    id: "mine".into(),
                    attempts: 4,
                    failures: 1,
                    status: crate::snapshot::ConnectionStatus::Cooling,
                    cooldown_until_unix_ms: Some(6_000),
                    backoff_level: 2,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            lockouts: vec![LockoutView {
                provider: "anthropic".into(),
                connection: "mine".into(),
                model: "opus".into(),
                scope: crate::snapshot::LockoutScope::QuotaGroup,
                reason: "rate_limit_exceeded".into(),
                failures: 1,
                until_unix_ms: 9_500,
            }],
            ..Default::default()
        }
    }

    #[test]
    fn resilience_views_use_the_spec_field_names() {
        let s = snap();
        let h = health(&s);
        assert_eq!(h["breakers"][0]["state"], "open");
        assert_eq!(h["breakers"][0]["retryAfterMs"], 1_000);
        let c = cooldowns(&s, None);
        assert_eq!(c["connections"][0]["remainingMs"], 2_500);
        assert_eq!(c["connections"][0]["backoffLevel"], 2);
        assert_eq!(c["connections"][0]["lockouts"][0]["model"], "opus");
        assert_eq!(
            cooldowns(&s, Some("other"))["connections"]
                .as_array()
                .unwrap()
                .len(),
            0
        );
        let m = model_cooldowns(&s);
        assert_eq!(m["lockouts"][0]["expiresAt"], 9_500);
        assert_eq!(m["lockouts"][0]["remainingMs"], 6_000);
        assert_eq!(
            query_param("provider=anthropic&x=1", "provider").as_deref(),
            Some("anthropic")
        );
    }
}
