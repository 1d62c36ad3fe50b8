//! The session-limit reset in dispatch (§2e, `auto_limit_reset`): a connection's
//! failed attempt that is the 5-hour wall makes sluice ask the account's usage endpoint
//! (`GET {base_url}/api/oauth/usage`, the connection's own credentials, bounded by
//! [`QUERY_TIMEOUT`]); when a reset is `available` it is requested
//! (`POST {base_url}/api/oauth/usage/reset`) and, on a 2xx, the request is re-sent once on
//! the same connection under the same admission ticket at full speed (an active
//! low-priority lane is ended first), so the wall's 429 neither cools the connection nor
//! counts toward its breaker. Whatever else the try finds is remembered by the core
//! ([`crate::core::Core::record_limit_reset`]) and the attempt goes on as it was (to the
//! lane, then the usual 429 handling). Runs before the lane.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, header};
use http_body_util::Full;

use super::{Dispatch, log_attempt};
use crate::config::{Auth, Provider};
use crate::policy::headroom::parse::header_pairs;
use crate::policy::limit_reset::{
    self, QUERY_TIMEOUT, RESET_PATH, Step, Tried, USAGE_PATH, parse_usage,
};
use crate::proxy::Shared;
use crate::proxy::attempt::{Attempted, Target, describe, read_error_body, send_attempt};
use crate::proxy::dialect::ProxyError;
use crate::proxy::headers::upstream_request;
use crate::proxy::request::ClientRequest;
use crate::proxy::translated::Prepared;

use crate::clock::Instant;

/// `anthropic-version` sent on the two account calls.
const ANTHROPIC_VERSION: &str = "2023-06-01";

impl Dispatch<'_> {
    /// Tries a session-limit reset when `a` is the 5-hour wall on an `auto_limit_reset`
    /// connection that may ask now; on a granted reset re-sends the request once on the
    /// same connection and returns that attempt, else returns `a` as it was.
    pub(super) async fn limit_reset(
        &mut self,
        t: &Target<'_>,
        a: Attempted,
        prepared: &Prepared,
        deadline: Instant,
        translated: String,
    ) -> Result<Attempted, ProxyError> {
        if !t.conn.auto_limit_reset {
            return Ok(a);
        }
        let Some((status, headers, classified)) = a.result.upstream_failure() else {
            return Ok(a);
        };
        if !limit_reset::is_five_hour_wall(status, header_pairs(headers)) {
            return Ok(a);
        }
        let core = self.state.core.clone();
        let left = deadline.saturating_duration_since(core.clock().now());
        if left.is_zero() || !core.claim_limit_reset(t.cand) {
            return Ok(a);
        }
        let tried = Box::pin(try_reset(self.state, t, self.req, deadline)).await;
        core.record_limit_reset(t.cand, &tried);
        if tried != Tried::Granted {
            return Ok(a);
        }
        tracing::info!(provider = %t.provider.id, connection = %t.conn.id, "usage wall: session-limit reset granted; retrying on the same connection at full speed");
        core.lane_end(t.cand, "limit_reset");
        let mut logged = classified.clone();
        logged.reason = "limit_reset".into();
        log_attempt(self.view, status, &logged, a.latency, translated);
        drop(a);
        self.view.attempts += 1;
        let body = prepared.body.clone();
        Box::pin(send_attempt(
            self.state, t, self.req, self.route, body, deadline,
        ))
        .await
    }
}

/// Asks the usage endpoint and, when a reset is available, requests it.
/// Each call is bounded by [`QUERY_TIMEOUT`], the provider's `timeout` and what is left of
/// the request's execution budget (`deadline`).
async fn try_reset(
    state: &Shared,
    t: &Target<'_>,
    req: &ClientRequest,
    deadline: Instant,
) -> Tried {
    let now = state.core.clock().now();
    let budget = t
        .provider
        .timeout
        .min(QUERY_TIMEOUT)
        .min(deadline.saturating_duration_since(now));
    let usage = match call(state, t, req, Method::GET, USAGE_PATH, budget).await {
        Ok((status, body)) if (200..300).contains(&status) => parse_usage(&body),
        Ok((status, _)) => Err(format!("usage endpoint answered HTTP {status}")),
        Err(e) => Err(e),
    };
    let usage = match usage {
        Ok(u) => u,
        Err(e) => return Tried::Failed(e),
    };
    match limit_reset::decide(&usage) {
        Step::Unavailable(why, next) => Tried::Unavailable(why, next),
        Step::Unreadable => Tried::Failed("usage answer has no readable limit_reset.status".into()),
        Step::RequestReset => match call(state, t, req, Method::POST, RESET_PATH, budget).await {
            Ok((status, _)) if (200..300).contains(&status) => Tried::Granted,
            Ok((status, _)) => Tried::Failed(format!("reset endpoint answered HTTP {status}")),
            Err(e) => Tried::Failed(e),
        },
    }
}

/// One account call (`method` on `{base_url}{path}`, no body) with the connection's own
/// credentials, within `budget`: its status and (at most 1 MiB of) its body. Errors name
/// the provider, never a key.
async fn call(
    state: &Shared,
    t: &Target<'_>,
    req: &ClientRequest,
    method: Method,
    path: &str,
    budget: Duration,
) -> Result<(u16, Bytes), String> {
    let client = state
        .upstreams
        .client(t.cand.layout, t.cand.provider, t.provider)
        .map_err(|e| format!("no client for provider '{}': {e}", t.provider.id))?;
    let uri = crate::proxy::upstream::uri(t.provider, path)
        .map_err(|e| format!("bad URL for provider '{}': {e}", t.provider.id))?;
    let mut up = Request::new(Full::new(Bytes::new()));
    *up.method_mut() = method.clone();
    *up.uri_mut() = uri;
    *up.headers_mut() = account_headers(t.provider, &t.conn.auth, req, &method);
    let res = match tokio::time::timeout(budget, client.request(up)).await {
        Err(_) => {
            return Err(format!(
                "no answer from provider '{}' within {}",
                t.provider.id,
                humantime::format_duration(budget)
            ));
        }
        Ok(Err(e)) => return Err(format!("provider '{}': {}", t.provider.id, describe(&e))),
        Ok(Ok(res)) => res,
    };
    let status = res.status().as_u16();
    Ok((status, read_error_body(res.into_body(), budget).await))
}

/// JSON accept, Anthropic's version header and the connection's own credential (for a
/// passthrough connection, the client's own `authorization` / `x-api-key`).
fn account_headers(p: &Provider, auth: &Auth, req: &ClientRequest, method: &Method) -> HeaderMap {
    let mut base = HeaderMap::new();
    base.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    base.insert(
        "anthropic-version",
        HeaderValue::from_static(ANTHROPIC_VERSION),
    );
    if matches!(auth, Auth::Passthrough) {
        for name in [
            header::AUTHORIZATION.as_str(),
            "x-api-key",
            "anthropic-beta",
        ] {
            if let Some(v) = req.parts.headers.get(name) {
                base.insert(http::HeaderName::from_static(name), v.clone());
            }
        }
    }
    let mut out = upstream_request(&base, auth, p.dialect, req.client_key, 0);
    if method == Method::GET {
        out.remove(header::CONTENT_LENGTH);
    }
    out
}
