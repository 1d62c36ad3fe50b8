//! Path → handler for the inference listener (`docs/ARCHITECTURE.md#the-request-path`).
//! Matching is on the path only, so `/v1/messages?beta=true` is `/v1/messages`.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::config::Dialect;
use crate::policy::select::Candidate;
use crate::proxy::Shared;
use crate::proxy::dialect::ProxyError;
use crate::proxy::request::ClientRequest;
use crate::proxy::request::body::Probe;
use crate::proxy::respond::outcome::Outcome;
use crate::proxy::route::{ROUTES, Route, RouteKind, dialect_for_path};
use crate::proxy::{dispatch, headers, serve::forward};
use crate::snapshot::RequestView;

pub use crate::proxy::respond::response::{ProxyBody, json_response};

/// Dispatches one request on the inference listener.
pub async fn handle(state: Shared, req: Request<Incoming>) -> Response<ProxyBody> {
    let path = req.uri().path();
    let path = if path.len() > 1 {
        path.trim_end_matches('/')
    } else {
        path
    };
    if path == "/api/hello" && (req.method() == Method::HEAD || req.method() == Method::GET) {
        return Response::new(Either::Left(Full::new(Bytes::new())));
    }
    if path == crate::proxy::leases::PATH {
        return crate::proxy::leases::handle(state, req).await;
    }
    if path == "/v1/models" {
        if req.method() == Method::GET || req.method() == Method::HEAD {
            // Boxed: its future is as large as an inference request's, and this route is rare.
            return Box::pin(models(&state, req)).await.map(Either::Left);
        }
        return error(
            ProxyError::MethodNotAllowed {
                method: req.method().to_string(),
                path: path.to_string(),
            },
            Dialect::OpenAi,
        );
    }
    if let Some(route) = ROUTES.iter().find(|r| r.path == path) {
        if req.method() == Method::POST {
            return forward::handle(state, req, *route).await;
        }
        return error(
            ProxyError::MethodNotAllowed {
                method: req.method().to_string(),
                path: path.to_string(),
            },
            route.dialect,
        );
    }
    let d = dialect_for_path(path, req.headers());
    error(
        ProxyError::NotFound {
            method: req.method().to_string(),
            path: path.to_string(),
        },
        d,
    )
}

fn error(err: ProxyError, d: Dialect) -> Response<ProxyBody> {
    crate::proxy::respond::response::error_response(&err, d)
}

/// How long `/v1/models` waits for the upstream's list before answering with the combos only.
pub const MODELS_TIMEOUT: Duration = Duration::from_secs(5);

/// `GET /v1/models`: the configured combos plus the models the first default provider of the
/// client's dialect lists. The upstream call goes through the same stages as inference
/// (breaker, cooldowns, fallback over the provider's connections, every attempt reported
/// through `Core::report`), exempt from admission like count_tokens, with the client's own
/// credentials where the connection passes them through; skipped if it fails within
/// [`MODELS_TIMEOUT`]. One JSON shape serves both dialects: Anthropic's
/// `type`/`display_name`/`created_at` and OpenAI's `object`/`created`/`owned_by` fields side by
/// side.
///
/// Like every inference route it requires a client key when `[server] client_keys_env` is set
/// (401 in the client's dialect otherwise, and nothing is sent upstream).
async fn models(state: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let cfg = state.core.config().clone();
    let want = if req.headers().contains_key("anthropic-version") {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    };
    if headers::check_client_key(req.headers(), &cfg.server.client_keys).is_err() {
        return crate::proxy::dialect::render::<Full<Bytes>>(&ProxyError::Unauthorized, want);
    }
    let mut ids: Vec<(String, String)> = cfg
        .combos
        .iter()
        .map(|c| (c.name.clone(), "sluice".to_string()))
        .collect();
    let (parts, _) = req.into_parts();
    for pick in model_sources(&cfg, want) {
        if let Some((owner, listed)) = upstream_models(state, &cfg, &parts, pick).await {
            ids.extend(listed.into_iter().map(|id| (id, owner.clone())));
        }
    }
    models_list(ids)
}

/// The providers whose models are listed: the first default provider of `want`, then the
/// first default provider of the other dialect (its models are reachable by translation).
fn model_sources(cfg: &crate::config::Config, want: Dialect) -> Vec<usize> {
    let defaults: Vec<usize> = cfg
        .default_providers
        .iter()
        .filter_map(|id| cfg.providers.iter().position(|p| &p.id == id))
        .collect();
    let first_of = |d: Dialect| {
        defaults
            .iter()
            .copied()
            .find(|&i| cfg.providers[i].dialect == d)
    };
    let other = match want {
        Dialect::Anthropic => Dialect::OpenAi,
        Dialect::OpenAi => Dialect::Anthropic,
    };
    let mut out: Vec<usize> = [first_of(want), first_of(other)]
        .into_iter()
        .flatten()
        .collect();
    if out.is_empty() {
        out.extend(defaults.first());
    }
    out
}

/// The model ids provider `pick` of `cfg` (the request's config) lists, with that
/// provider's id.
async fn upstream_models(
    state: &Shared,
    cfg: &std::sync::Arc<crate::config::Config>,
    parts: &http::request::Parts,
    pick: usize,
) -> Option<(String, Vec<String>)> {
    let provider = cfg.providers.get(pick)?;
    let route = Route {
        kind: RouteKind::Models,
        path: "/v1/models",
        dialect: provider.dialect,
    };
    let client_key = headers::check_client_key(&parts.headers, &cfg.server.client_keys)
        .ok()
        .flatten();
    let mut parts = parts.clone();
    translate_list_credential(&mut parts.headers, provider.dialect);
    let req = ClientRequest {
        parts,
        body: Bytes::new(),
        probe: Probe::default(),
        client_key,
    };
    let candidates = (0..provider.connections.len())
        .map(|connection| Candidate {
            provider: pick,
            connection,
            model: String::new(),
            rewrite: false,
            target: 0,
            key: cfg.keys.connection(pick, connection),
        })
        .collect();
    let mut view = RequestView::default();
    let run = dispatch::run_candidates(
        state,
        cfg,
        &req,
        route,
        &mut view,
        candidates,
        None,
        Vec::new(),
    );
    let Ok(Ok(Outcome::Local { resp, .. })) = tokio::time::timeout(MODELS_TIMEOUT, run).await
    else {
        return None;
    };
    if !resp.status().is_success() {
        return None;
    }
    let body = resp.into_body().collect().await.ok()?.to_bytes();
    let v = serde_json::from_slice::<Value>(&body).ok()?;
    let data = v.get("data")?.as_array()?;
    let listed = data
        .iter()
        .filter_map(|m| m.get("id").and_then(Value::as_str).map(str::to_owned))
        .collect();
    Some((provider.id.clone(), listed))
}

/// A passed-through credential for a provider of the other dialect moves to its header
/// (`x-api-key` ↔ `Authorization: Bearer`), as for translated requests.
fn translate_list_credential(h: &mut http::HeaderMap, upstream: Dialect) {
    let seam = crate::proxy::translated::Seam {
        upstream,
        context: crate::translate::ResponseContext::default(),
        adjusted: Vec::new(),
        downgrades: Vec::new(),
    };
    let native = match upstream {
        Dialect::Anthropic => h.contains_key("anthropic-version"),
        Dialect::OpenAi => !h.contains_key("anthropic-version"),
    };
    if !native {
        seam.adapt_headers(h);
    }
}

/// The list response for `(id, owner)` pairs, first occurrence of each id kept.
fn models_list(ids: Vec<(String, String)>) -> Response<Full<Bytes>> {
    let mut seen = HashSet::new();
    let data: Vec<Value> = ids
        .into_iter()
        .filter(|(id, _)| seen.insert(id.clone()))
        .map(|(id, owner)| {
            json!({
                "id": id, "type": "model", "object": "model", "display_name": id,
                "created_at": "1970-01-01T00:00:00Z", "created": 0, "owned_by": owner,
            })
        })
        .collect();
    let first = data
        .first()
        .and_then(|v| v.get("id"))
        .cloned()
        .unwrap_or(Value::Null);
    let last = data
        .last()
        .and_then(|v| v.get("id"))
        .cloned()
        .unwrap_or(Value::Null);
    json_response(
        StatusCode::OK,
        json!({"object": "list", "data": data, "has_more": false, "first_id": first, "last_id": last}),
    )
}
