//! Path → handler for the inference listener (DESIGN §3). Matching is on the path only, so
//! `/v1/messages?beta=true` is `/v1/messages`.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::Shared;
use super::dialect::{self, ProxyError};
use super::forward::{self, json_response};
use super::headers;
use super::relay::RelayBody;
use crate::config::Dialect;

/// Body of every response the listeners send.
pub type ProxyBody = Either<Full<Bytes>, RelayBody>;

/// The inference routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// `POST /v1/messages`
    Messages,
    /// `POST /v1/messages/count_tokens`
    CountTokens,
    /// `POST /v1/chat/completions`
    ChatCompletions,
    /// `POST /v1/responses`
    Responses,
}

/// A matched inference route.
#[derive(Debug, Clone, Copy)]
pub struct Route {
    /// Which route.
    pub kind: RouteKind,
    /// Its path, e.g. `/v1/messages`.
    pub path: &'static str,
    /// Its wire dialect.
    pub dialect: Dialect,
}

const ROUTES: [Route; 4] = [
    Route {
        kind: RouteKind::Messages,
        path: "/v1/messages",
        dialect: Dialect::Anthropic,
    },
    Route {
        kind: RouteKind::CountTokens,
        path: "/v1/messages/count_tokens",
        dialect: Dialect::Anthropic,
    },
    Route {
        kind: RouteKind::ChatCompletions,
        path: "/v1/chat/completions",
        dialect: Dialect::OpenAi,
    },
    Route {
        kind: RouteKind::Responses,
        path: "/v1/responses",
        dialect: Dialect::OpenAi,
    },
];

/// The dialect used for errors on `path` when no route matched.
pub fn dialect_for_path(path: &str, h: &http::HeaderMap) -> Dialect {
    if path.starts_with("/v1/messages")
        || path.starts_with("/v1/complete")
        || h.contains_key("anthropic-version")
    {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    }
}

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
    if path == "/v1/models" {
        if req.method() == Method::GET {
            return models(&state, req).await.map(Either::Left);
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
    dialect::render::<Full<Bytes>>(&err, d).map(Either::Left)
}

/// `GET /v1/models`: the configured combos plus the models the first default provider of the
/// client's dialect lists (asked with the client's own credentials; skipped if it fails within
/// 5 s). One JSON shape serves both dialects: Anthropic's `type`/`display_name`/`created_at`
/// and OpenAI's `object`/`created`/`owned_by` fields side by side.
async fn models(state: &Shared, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let cfg = state.core.config().clone();
    let want = if req.headers().contains_key("anthropic-version") {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    };
    let mut ids: Vec<(String, String)> = cfg
        .combos
        .iter()
        .map(|c| (c.name.clone(), "sluice".to_string()))
        .collect();
    let pick = cfg
        .default_providers
        .iter()
        .filter_map(|id| cfg.providers.iter().position(|p| &p.id == id))
        .find(|&i| cfg.providers[i].dialect == want)
        .or_else(|| {
            cfg.default_providers
                .first()
                .and_then(|id| cfg.providers.iter().position(|p| &p.id == id))
        });
    if let Some(i) = pick
        && let (Some(p), Some(client)) = (cfg.providers.get(i), state.upstreams.client(i))
        && let Some(conn) = p.connections.first()
    {
        let client_key = headers::check_client_key(req.headers(), &cfg.server.client_keys)
            .ok()
            .flatten();
        let pq = req
            .uri()
            .path_and_query()
            .map(|x| x.as_str())
            .unwrap_or("/v1/models");
        if let Ok(uri) = state.upstreams.uri(i, pq) {
            let mut up = Request::new(Full::new(Bytes::new()));
            *up.uri_mut() = uri;
            *up.headers_mut() =
                headers::upstream_request(req.headers(), &conn.auth, p.dialect, client_key, 0);
            up.headers_mut().remove(http::header::CONTENT_LENGTH);
            let fetched = tokio::time::timeout(Duration::from_secs(5), async {
                let resp = client.request(up).await.ok()?;
                if !resp.status().is_success() {
                    return None;
                }
                let body = http_body_util::Limited::new(resp.into_body(), 8 << 20)
                    .collect()
                    .await
                    .ok()?
                    .to_bytes();
                serde_json::from_slice::<Value>(&body).ok()
            })
            .await
            .ok()
            .flatten();
            if let Some(Value::Array(data)) = fetched.as_ref().and_then(|v| v.get("data")) {
                for m in data {
                    if let Some(id) = m.get("id").and_then(Value::as_str) {
                        ids.push((id.to_string(), p.id.clone()));
                    }
                }
            }
        }
    }
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
