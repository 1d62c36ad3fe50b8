//! Exclusive session leases on the inference listener
//! (`docs/RESILIENCE.md#2d-exclusive-session-leases-off-by-default`):
//! `POST /api/v1/session-leases` (`acquire` / `renew` / `release`, called with the client's
//! sluice key) and the pre-dispatch [`gate`] that keeps unleased requests off leased
//! connections and fences leased ones to their connection and generation.
//!
//! Requests carry `x-sluice-lease-owner` (the `vlo_…` token) and
//! `x-sluice-lease-generation`; like every `x-sluice-*` header they are never forwarded
//! upstream, and the token is never logged (only its fingerprint).

use std::time::Duration;

use http::{HeaderMap, Method, Request, Response, StatusCode, header};
use hyper::body::Incoming;
use serde::Deserialize;
use serde_json::json;

use crate::config::{Config, Secret};
use crate::core::requests::leases::{AcquireRefused, LeaseGate};
use crate::policy::lease::{ConnKey, Lease, OwnerHash, Refusal};
use crate::policy::select::{self, Candidate};
use crate::proxy::Shared;
use crate::proxy::dialect::ProxyError;
use crate::proxy::request::ClientRequest;
use crate::proxy::request::body::read_limited;
use crate::proxy::respond::response::{ProxyBody, complete, error_response, json_response};
use crate::proxy::route::dialect_for_path;
use crate::snapshot::RequestView;
use crate::snapshot::SkippedView;

/// The route's path.
pub const PATH: &str = "/api/v1/session-leases";
/// The header carrying the owner token.
pub const OWNER_HEADER: &str = "x-sluice-lease-owner";
/// The header carrying the lease generation.
pub const GENERATION_HEADER: &str = "x-sluice-lease-generation";

/// The JSON body of a lease call (no `Debug`: `owner` is a token).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseCall {
    action: String,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    ttl: Option<String>,
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    generation: Option<u64>,
}

/// Serves `POST /api/v1/session-leases`; errors in the OpenAI shape (Anthropic's when the
/// client sends `anthropic-version`).
pub async fn handle(state: Shared, req: Request<Incoming>) -> Response<ProxyBody> {
    let dialect = dialect_for_path(PATH, req.headers());
    if req.method() != Method::POST {
        let err = ProxyError::MethodNotAllowed {
            method: req.method().to_string(),
            path: PATH.into(),
        };
        return error_response(&err, dialect);
    }
    match serve(&state, req).await {
        Ok(v) => complete(json_response(StatusCode::OK, v)),
        Err(e) => error_response(&e, dialect),
    }
}

async fn serve(state: &Shared, req: Request<Incoming>) -> Result<serde_json::Value, ProxyError> {
    if state.core.is_draining() {
        return Err(ProxyError::Draining);
    }
    let cfg = state.core.config();
    if !cfg.session_leases.enabled {
        return Err(lease_error(
            404,
            "session_leases_disabled",
            "session leases are off; set [session_leases] enabled = true".into(),
        ));
    }
    let (parts, body) = req.into_parts();
    authorize(&cfg, &parts.headers)?;
    let length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body = read_limited(body, length, cfg.server.max_body).await?;
    let call: LeaseCall = serde_json::from_slice(&body).map_err(|e| {
        ProxyError::BadRequest(format!(
            "the lease call is not valid JSON ({e}); send {{\"action\":\"acquire\",\"model\":\"…\"}}"
        ))
    })?;
    match call.action.as_str() {
        "acquire" => acquire(state, &cfg, &call),
        "renew" => renew(state, &cfg, &call),
        "release" => release(state, &call),
        other => Err(ProxyError::BadRequest(format!(
            "'{other}' is not a lease action; use acquire, renew or release"
        ))),
    }
}

/// The client key check, then the `lease:exclusive` scope: with `[server] client_keys_env`
/// set only the keys in `[session_leases] client_keys_env` hold it; without client keys
/// (a loopback sluice) every client does.
fn authorize(cfg: &Config, h: &HeaderMap) -> Result<(), ProxyError> {
    crate::proxy::headers::check_client_key(h, &cfg.server.client_keys)
        .map_err(|_| ProxyError::Unauthorized)?;
    if cfg.server.client_keys.is_empty() {
        return Ok(());
    }
    let scoped = presented_key(h).is_some_and(|k| holds(&cfg.session_leases.client_keys, k));
    if scoped {
        return Ok(());
    }
    Err(lease_error(
        403,
        "lease_scope_missing",
        "this client key lacks the lease:exclusive scope; list it in the variable named by [session_leases] client_keys_env".into(),
    ))
}

fn holds(keys: &[Secret], k: &str) -> bool {
    keys.iter()
        .any(|s| crate::support::ct::constant_time_eq(s.expose().as_bytes(), k.as_bytes()))
}

/// The sluice key the client sent (`x-api-key`, else `Authorization: Bearer`).
fn presented_key(h: &HeaderMap) -> Option<&str> {
    if let Some(v) = h.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(v.trim());
    }
    let v = h.get(header::AUTHORIZATION)?.to_str().ok()?;
    v.strip_prefix("Bearer ")
        .or_else(|| v.strip_prefix("bearer "))
        .map(str::trim)
}

fn acquire(
    state: &Shared,
    cfg: &Config,
    call: &LeaseCall,
) -> Result<serde_json::Value, ProxyError> {
    let Some(model) = call.model.as_deref().filter(|m| !m.is_empty()) else {
        return Err(ProxyError::BadRequest(
            "acquire needs \"model\": the combo or model the lease is for".into(),
        ));
    };
    let ttl = ttl_of(cfg, call.ttl.as_deref())?;
    let mut candidates = Vec::new();
    for dialect in [
        crate::config::Dialect::OpenAi,
        crate::config::Dialect::Anthropic,
    ] {
        let plan = select::plan(cfg, dialect, model);
        for c in state.core.order_candidates(&plan) {
            if !candidates
                .iter()
                .any(|x: &Candidate| x.provider == c.provider && x.connection == c.connection)
            {
                candidates.push(c);
            }
        }
    }
    if candidates.is_empty() {
        return Err(ProxyError::NoTargets {
            model: model.into(),
            hint: String::new(),
            excluded: Vec::new(),
        });
    }
    match state.core.lease_acquire(&candidates, ttl) {
        Ok(a) => {
            let mut v = lease_json(state, &state.core.config(), a.conn, &a.lease);
            if let Some(o) = v.as_object_mut() {
                o.insert("owner".into(), json!(a.token.expose()));
            }
            Ok(v)
        }
        Err(AcquireRefused::Busy { retry_after }) => Err(capacity(model, retry_after)),
        Err(AcquireRefused::Random) => Err(ProxyError::Unreachable(
            "the system random source failed; no lease owner could be minted".into(),
        )),
    }
}

fn renew(state: &Shared, cfg: &Config, call: &LeaseCall) -> Result<serde_json::Value, ProxyError> {
    let (owner, generation) = owner_of(call)?;
    let ttl = ttl_of(cfg, call.ttl.as_deref())?;
    match state.core.lease_renew(&owner, generation, ttl) {
        Ok((conn, lease)) => Ok(lease_json(state, &state.core.config(), conn, &lease)),
        Err(r) => Err(refusal(r)),
    }
}

fn release(state: &Shared, call: &LeaseCall) -> Result<serde_json::Value, ProxyError> {
    let (owner, generation) = owner_of(call)?;
    match state.core.lease_release(&owner, generation) {
        Ok(conn) => {
            let (provider, connection) = ids(&state.core.config(), conn);
            Ok(
                json!({"released": true, "provider": provider, "connection": connection, "generation": generation}),
            )
        }
        Err(r) => Err(refusal(r)),
    }
}

fn owner_of(call: &LeaseCall) -> Result<(OwnerHash, u64), ProxyError> {
    let owner = call
        .owner
        .as_deref()
        .and_then(OwnerHash::of_token)
        .ok_or_else(|| {
            ProxyError::BadRequest("\"owner\" must be the vlo_… token the acquire returned".into())
        })?;
    let generation = call.generation.ok_or_else(|| {
        ProxyError::BadRequest("\"generation\" must be the number the acquire returned".into())
    })?;
    Ok((owner, generation))
}

/// The asked lease length (`[session_leases] ttl` when absent), checked against 10s–24h and
/// `max_ttl`.
fn ttl_of(cfg: &Config, asked: Option<&str>) -> Result<Duration, ProxyError> {
    let Some(s) = asked else {
        return Ok(cfg.session_leases.ttl);
    };
    let d = crate::config::validate::check_lease_ttl(s)
        .map_err(|(m, fix)| ProxyError::BadRequest(format!("ttl {m}; {fix}")))?;
    if d > cfg.session_leases.max_ttl {
        return Err(ProxyError::BadRequest(format!(
            "ttl '{s}' is longer than [session_leases] max_ttl ({})",
            humantime::format_duration(cfg.session_leases.max_ttl)
        )));
    }
    Ok(d)
}

fn lease_json(state: &Shared, cfg: &Config, conn: ConnKey, lease: &Lease) -> serde_json::Value {
    let (provider, connection) = ids(cfg, conn);
    let expires_ms = state.core.time_map().wall(lease.expires);
    json!({
        "generation": lease.generation,
        "provider": provider,
        "connection": connection,
        "expiresAt": rfc3339(expires_ms),
        "expiresAtUnixMs": expires_ms,
    })
}

fn ids(cfg: &Config, key: ConnKey) -> (String, String) {
    let (pi, ci) = cfg.keys.position(key).unwrap_or((usize::MAX, usize::MAX));
    let p = cfg.providers.get(pi);
    let c = p.and_then(|p| p.connections.get(ci));
    (
        p.map(|p| p.id.clone()).unwrap_or_default(),
        c.map(|c| c.id.clone()).unwrap_or_default(),
    )
}

fn rfc3339(unix_ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(unix_ms);
    humantime::format_rfc3339_millis(t).to_string()
}

fn lease_error(status: u16, code: &'static str, message: String) -> ProxyError {
    ProxyError::Lease {
        status,
        code,
        message,
        retry_after: None,
    }
}

fn stale() -> ProxyError {
    lease_error(
        409,
        "lease_generation_stale",
        "the session lease is not live at this generation (expired, released, or replaced by a newer acquire); acquire a new lease".into(),
    )
}

fn capacity(model: &str, retry_after: Duration) -> ProxyError {
    ProxyError::Lease {
        status: 429,
        code: "lease_capacity_unavailable",
        message: format!(
            "every connection serving '{model}' is leased by another session; retry in {}s",
            crate::proxy::dialect::whole_seconds_up(retry_after)
        ),
        retry_after: Some(retry_after),
    }
}

fn refusal(r: Refusal) -> ProxyError {
    match r {
        Refusal::Stale => stale(),
        Refusal::Busy { .. } => lease_error(
            409,
            "lease_generation_stale",
            "the connection is leased by another owner".into(),
        ),
    }
}

/// The lease the request presents: `None` without the owner header (or while leases are
/// off); a malformed owner or generation is a 400.
fn presented(cfg: &Config, h: &HeaderMap) -> Result<Option<(OwnerHash, u64)>, ProxyError> {
    if !cfg.session_leases.enabled {
        return Ok(None);
    }
    let owner = h.get(OWNER_HEADER);
    let generation = h.get(GENERATION_HEADER);
    if owner.is_none() && generation.is_none() {
        return Ok(None);
    }
    let owner = owner
        .and_then(|v| v.to_str().ok())
        .and_then(|v| OwnerHash::of_token(v.trim()))
        .ok_or_else(|| {
            ProxyError::BadRequest(format!(
                "{OWNER_HEADER} must be the vlo_… token a lease acquire returned"
            ))
        })?;
    let generation = generation
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .ok_or_else(|| {
            ProxyError::BadRequest(format!(
                "{GENERATION_HEADER} must be the lease generation (a whole number) the acquire returned"
            ))
        })?;
    Ok(Some((owner, generation)))
}

/// The pre-dispatch lease hook: the candidates `req` may use, or the refusal. Leased
/// candidates left out are listed in `view.skipped` with reason `leased`.
pub fn gate(
    state: &Shared,
    req: &ClientRequest,
    candidates: Vec<Candidate>,
    view: &mut RequestView,
) -> Result<Vec<Candidate>, ProxyError> {
    let cfg = state.core.config();
    let presented = presented(&cfg, &req.parts.headers)?;
    if !cfg.session_leases.enabled {
        return Ok(candidates);
    }
    let fingerprint = presented.map(|(o, _)| o.fingerprint());
    match state.core.lease_gate(candidates, presented) {
        LeaseGate::Dispatch { candidates, leased } => {
            list_leased(view, &leased);
            Ok(candidates)
        }
        LeaseGate::Stale => {
            tracing::info!(target: "sluice::lease", owner = fingerprint.as_deref().unwrap_or(""), model = %req.probe.model, "request refused: stale session lease");
            Err(stale())
        }
        LeaseGate::NotOnLease => Err(lease_error(
            409,
            "lease_model_mismatch",
            format!(
                "the leased connection serves no target of '{}'; send the lease only with models its connection serves",
                req.probe.model
            ),
        )),
        LeaseGate::AllLeased {
            leased,
            retry_after,
        } => {
            list_leased(view, &leased);
            Err(capacity(&req.probe.model, retry_after))
        }
    }
}

fn list_leased(view: &mut RequestView, leased: &[select::Exclusion]) {
    for e in leased {
        if !view.skipped.iter().any(|s| s.target == e.target) {
            view.skipped.push(SkippedView {
                target: e.target.clone(),
                reason: crate::snapshot::SkipReason::from(e.reason).into(),
            });
        }
    }
}
