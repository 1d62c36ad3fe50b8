//! The session-limit reset in dispatch (§2e, `auto_limit_reset`): a connection's
//! failed attempt that is the 5-hour wall makes sluice ask the account's usage endpoint
//! (`GET {base_url}/api/oauth/usage?at_wall=1&skip_spend=1`, the connection's own
//! credentials, bounded by [`QUERY_TIMEOUT`]); when its `juniper_tide` block offers a reset
//! it is requested (`POST {base_url}/api/organizations/{org_uuid}/reset_rate_limits`, body
//! `{"program":"juniper_tide"}`) and, when the answer's `result` is `reset` or
//! `not_limited`, the request is re-sent once on the same connection under the same
//! admission ticket at full speed (an active low-priority lane is ended first), so the
//! wall's 429 neither cools the connection nor counts toward its breaker. Whatever else the
//! try finds is remembered by the core ([`crate::core::Core::record_limit_reset`]) and the
//! attempt goes on as it was (to the lane, then the usual 429 handling). Runs before the
//! lane. Both endpoints are undocumented endpoints of the provider; what their answers mean
//! is read in [`crate::policy::limit_reset`].

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, header};
use http_body_util::Full;

use crate::config::{Auth, Provider};
use crate::policy::headroom::parse::header_pairs;
use crate::policy::limit_reset::{
    self, QUERY_TIMEOUT, RESET_BODY, Step, Tried, USAGE_PATH, reset_path, reset_tried, usage_step,
};
use crate::proxy::Shared;
use crate::proxy::attempt::{Attempted, Target, describe, read_error_body, send_attempt};
use crate::proxy::dialect::ProxyError;
use crate::proxy::dispatch::{Dispatch, log_attempt};
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
        if !tried.retries() {
            return Ok(a);
        }
        let why = if tried == Tried::Reset {
            "session-limit reset granted"
        } else {
            "reset answered not_limited"
        };
        tracing::info!(provider = %t.provider.id, connection = %t.conn.id, "usage wall: {why}; retrying on the same connection at full speed");
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
    // Load-time validation requires it with `auto_limit_reset`; checked again, not assumed.
    let Some(org) = t.conn.org_uuid.as_deref() else {
        return Tried::Failed(format!(
            "connection '{}' has no org_uuid to request the reset for",
            t.conn.id
        ));
    };
    let now = state.core.clock().now();
    let budget = t
        .provider
        .timeout
        .min(QUERY_TIMEOUT)
        .min(deadline.saturating_duration_since(now));
    let step = match call(state, t, req, Method::GET, USAGE_PATH, None, budget).await {
        Ok((status, body)) => usage_step(status, &body),
        Err(e) => Err(e),
    };
    match step {
        Err(e) => Tried::Failed(e),
        Ok(Step::Unavailable(why, next)) => Tried::Unavailable(why, next),
        Ok(Step::RequestReset) => {
            let path = reset_path(org);
            let body = Bytes::from_static(RESET_BODY.as_bytes());
            match call(state, t, req, Method::POST, &path, Some(body), budget).await {
                Ok((status, body)) => reset_tried(status, &body),
                Err(e) => Tried::Failed(e),
            }
        }
    }
}

/// One account call (`method` on `{base_url}{path}`, with a JSON `body` when given) with the
/// connection's own credentials, within `budget`: its status and (at most 1 MiB of) its
/// body. Errors name the provider, never a key or the URL.
async fn call(
    state: &Shared,
    t: &Target<'_>,
    req: &ClientRequest,
    method: Method,
    path: &str,
    body: Option<Bytes>,
    budget: Duration,
) -> Result<(u16, Bytes), String> {
    let client = state
        .upstreams
        .client(t.cand.key.provider, t.provider)
        .map_err(|e| format!("no client for provider '{}': {e}", t.provider.id))?;
    let uri = crate::proxy::attempt::upstream::uri(t.provider, path)
        .map_err(|e| format!("bad URL for provider '{}': {e}", t.provider.id))?;
    let headers = account_headers(t.provider, &t.conn.auth, req, body.as_ref());
    let mut up = Request::new(Full::new(body.unwrap_or_default()));
    *up.method_mut() = method;
    *up.uri_mut() = uri;
    *up.headers_mut() = headers;
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
/// passthrough connection, the client's own `authorization` / `x-api-key`); with a `body`,
/// its JSON content type and length.
fn account_headers(
    p: &Provider,
    auth: &Auth,
    req: &ClientRequest,
    body: Option<&Bytes>,
) -> HeaderMap {
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
    let Some(body) = body else {
        let mut out = upstream_request(&base, auth, p.dialect, req.client_key, 0);
        out.remove(header::CONTENT_LENGTH);
        return out;
    };
    base.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    upstream_request(&base, auth, p.dialect, req.client_key, body.len())
}
