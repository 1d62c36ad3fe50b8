//! The request lifecycle of an inference route: read and check the body, plan candidates,
//! send attempts in order (falling back before the first byte reached the client), and hand
//! the chosen upstream response to a [`RelayBody`].

use std::error::Error as _;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{Either, Full};
use hyper::body::Incoming;

use super::Shared;
use super::body::{estimate_tokens, probe, read_limited, rewrite_model};
use super::dialect::{self, ProxyError, SseKind};
use super::headers;
use super::relay::{Finish, RelayBody};
use super::routes::{ProxyBody, Route, RouteKind};
use crate::core::snapshot::RequestView;
use crate::core::{AttemptGuard, RequestGuard};
use crate::policy::select;

enum Outcome {
    /// Relay this upstream response.
    Relay {
        resp: Response<Incoming>,
        attempt: AttemptGuard,
    },
    /// A response sluice answers itself (e.g. a local token estimate).
    Local(Response<Full<Bytes>>),
}

/// A request being served: its guard and view, recorded as `cancelled` if dropped before it
/// finished (the client went away while sluice waited on the upstream head).
struct Pending {
    state: Shared,
    guard: Option<RequestGuard>,
    view: RequestView,
}

impl Pending {
    fn finish(&mut self) {
        if let Some(g) = self.guard.take() {
            self.state
                .core
                .finish_request(&g, std::mem::take(&mut self.view));
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.guard.is_some() {
            self.view.outcome = "cancelled".into();
            self.view.error = "client disconnected before the response head".into();
            self.finish();
        }
    }
}

/// Serves one inference request end to end; never fails (errors are rendered in the route's
/// dialect).
pub async fn handle(state: Shared, req: Request<Incoming>, route: Route) -> Response<ProxyBody> {
    let guard = state.core.begin_request();
    let view = RequestView {
        route: route.path.to_string(),
        ..Default::default()
    };
    let mut pending = Pending {
        state: state.clone(),
        guard: Some(guard),
        view,
    };
    let result = run(&state, req, route, &mut pending.view).await;
    match result {
        Ok(Outcome::Relay { resp, attempt }) => {
            let (parts, body) = resp.into_parts();
            let is_sse = headers::is_event_stream(&parts.headers);
            let mut view = std::mem::take(&mut pending.view);
            view.status = parts.status.as_u16();
            view.stream = is_sse;
            let sse = is_sse.then_some(route.sse_kind());
            let Some(guard) = pending.guard.take() else {
                return dialect::render::<Full<Bytes>>(&ProxyError::Draining, route.dialect)
                    .map(Either::Left);
            };
            let finish = Finish::new(state.core.clone(), guard, view, Some(attempt));
            let relay = RelayBody::new(
                body,
                state.hard_stop.clone().cancelled_owned(),
                sse,
                parts.status.is_success(),
                finish,
            );
            let mut out = Response::new(Either::Right(relay));
            *out.status_mut() = parts.status;
            *out.headers_mut() = headers::client_response(&parts.headers, is_sse);
            out
        }
        Ok(Outcome::Local(resp)) => {
            pending.view.status = resp.status().as_u16();
            pending.view.outcome = "ok".into();
            pending.view.bytes = resp.body().size_hint_exact();
            pending.finish();
            resp.map(Either::Left)
        }
        Err(err) => {
            let view = &mut pending.view;
            view.status = err.status().as_u16();
            view.outcome = match err {
                ProxyError::Unreachable(_) | ProxyError::Timeout(_) => "upstream_error",
                ProxyError::Draining => "sluice_error",
                _ => "client_error",
            }
            .into();
            view.error = err.to_string();
            if view.status >= 500 {
                tracing::warn!(route = route.path, model = %view.client_model, target = %view.target, error = %err, "request failed");
            }
            pending.finish();
            dialect::render::<Full<Bytes>>(&err, route.dialect).map(Either::Left)
        }
    }
}

trait ExactSize {
    fn size_hint_exact(&self) -> u64;
}

impl ExactSize for Full<Bytes> {
    fn size_hint_exact(&self) -> u64 {
        http_body::Body::size_hint(self).exact().unwrap_or(0)
    }
}

async fn run(
    state: &Shared,
    req: Request<Incoming>,
    route: Route,
    view: &mut RequestView,
) -> Result<Outcome, ProxyError> {
    if state.core.is_draining() {
        return Err(ProxyError::Draining);
    }
    let cfg = state.core.config().clone();
    let (parts, body) = req.into_parts();
    let client_key = headers::check_client_key(&parts.headers, &cfg.server.client_keys)
        .map_err(|_| ProxyError::Unauthorized)?;
    let content_length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body = read_limited(body, content_length, cfg.server.max_body).await?;
    let p = probe(&body)?;
    view.client_model = p.model.clone();
    view.stream = p.stream;

    let plan = select::plan(&cfg, route.dialect, &p.model);
    if plan.candidates.is_empty() {
        if route.kind == RouteKind::CountTokens {
            return Ok(Outcome::Local(json_response(
                StatusCode::OK,
                serde_json::json!({ "input_tokens": estimate_tokens(&body) }),
            )));
        }
        let hint = if plan.skipped.is_empty() {
            String::new()
        } else {
            format!(" ({} target(s) skipped: other dialect)", plan.skipped.len())
        };
        return Err(ProxyError::NoTargets {
            model: p.model,
            hint,
        });
    }

    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or(route.path);
    let clock = state.core.clock().clone();
    let n = plan.candidates.len();
    let mut rewritten: Option<(String, Bytes)> = None;
    let mut last_err = ProxyError::Unreachable("no attempt was made".into());
    for (i, cand) in plan.candidates.iter().enumerate() {
        let Some(provider) = cfg.providers.get(cand.provider) else {
            continue;
        };
        let Some(conn) = provider.connections.get(cand.connection) else {
            continue;
        };
        let Some(client) = state.upstreams.client(cand.provider) else {
            continue;
        };
        view.target = format!("{}:{}/{}", provider.id, conn.id, cand.model);
        view.attempts += 1;
        let send_body = if cand.rewrite {
            match &rewritten {
                Some((m, b)) if *m == cand.model => b.clone(),
                _ => {
                    let b = rewrite_model(&body, &cand.model)?;
                    rewritten = Some((cand.model.clone(), b.clone()));
                    b
                }
            }
        } else {
            body.clone()
        };
        let uri = state
            .upstreams
            .uri(cand.provider, path_and_query)
            .map_err(|e| {
                ProxyError::Unreachable(format!(
                    "bad upstream URL for provider '{}': {e}",
                    provider.id
                ))
            })?;
        let mut up = Request::new(Full::new(send_body.clone()));
        *up.method_mut() = parts.method.clone();
        *up.uri_mut() = uri;
        *up.headers_mut() = headers::upstream_request(
            &parts.headers,
            &conn.auth,
            provider.dialect,
            client_key,
            send_body.len(),
        );

        let attempt = state.core.begin_attempt(cand.provider, cand.connection);
        let started = clock.now();
        let res = tokio::time::timeout(provider.timeout, client.request(up)).await;
        let latency = clock.now().saturating_duration_since(started);
        let more = i + 1 < n;
        match res {
            Err(_) => {
                state
                    .core
                    .attempt_result(cand.provider, cand.connection, None, latency);
                last_err = ProxyError::Timeout(format!(
                    "{} waiting for provider '{}'",
                    humantime::format_duration(provider.timeout),
                    provider.id
                ));
                tracing::warn!(target = %view.target, attempt = view.attempts, "upstream timed out before the response head");
            }
            Ok(Err(e)) => {
                state
                    .core
                    .attempt_result(cand.provider, cand.connection, None, latency);
                let why = describe(&e);
                tracing::warn!(target = %view.target, attempt = view.attempts, error = %why, "upstream transport error");
                last_err = ProxyError::Unreachable(format!("provider '{}': {why}", provider.id));
            }
            Ok(Ok(resp)) => {
                let status = resp.status().as_u16();
                state
                    .core
                    .attempt_result(cand.provider, cand.connection, Some(status), latency);
                if status >= 500 && more {
                    tracing::info!(target = %view.target, status, "upstream error before the first byte; trying the next target");
                    continue;
                }
                return Ok(Outcome::Relay { resp, attempt });
            }
        }
        drop(attempt);
    }
    Err(last_err)
}

/// A short description of a transport error, with its cause chain (never a credential:
/// hyper errors carry no headers).
fn describe(e: &hyper_util::client::legacy::Error) -> String {
    let mut s = if e.is_connect() {
        "connect failed".to_string()
    } else {
        "request failed".to_string()
    };
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// A JSON response with `status`.
pub fn json_response(status: StatusCode, v: serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

impl Route {
    /// The SSE format of this route's streams.
    pub fn sse_kind(&self) -> SseKind {
        match self.kind {
            RouteKind::Messages | RouteKind::CountTokens => SseKind::Anthropic,
            RouteKind::ChatCompletions => SseKind::OpenAiChat,
            RouteKind::Responses => SseKind::OpenAiResponses,
        }
    }
}
