//! Stage 3: one upstream attempt. [`send_attempt`] builds the upstream request for one
//! admitted candidate, sends it under the provider's `timeout`, and reads enough of the answer
//! to judge it before anything reaches the client: a non-streaming 2xx body is read whole
//! (at most [`MAX_RESPONSE_BODY`] bytes) and checked for an empty turn, an SSE stream goes
//! through the §6 pre-content hold, an error body is read for classification. It returns a typed [`AttemptResult`]; reporting
//! is the dispatcher's.

pub mod injected;
pub mod probe;
pub mod upstream;
use std::error::Error as _;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;

use self::injected::SendError;
use crate::clock::Instant;
use crate::config::{Connection, Provider};
use crate::core::AttemptGuard;
use crate::core::resilience::{AttemptEnd, EndKind};
use crate::policy::Classified;
use crate::policy::select::Candidate;
use crate::proxy::Shared;
use crate::proxy::dialect::ProxyError;
use crate::proxy::headers;
use crate::proxy::request::ClientRequest;
use crate::proxy::route::{Route, RouteKind};
use crate::proxy::sse::guard::Guards;
use crate::proxy::sse::hold::{Held, HoldEnd, HoldFailure, pre_commit_hold};
use crate::proxy::translated::{Seam, UpstreamBody};
use crate::proxy::turn::reply_is_empty;

/// Error bodies are read (for classification and pass-through) up to this many bytes.
pub const MAX_ERROR_BODY: usize = 1 << 20;

/// A non-streaming 2xx body is read whole before its head reaches the client, up to this many
/// bytes (32 MiB); a longer one fails the attempt (`response_too_large`).
pub const MAX_RESPONSE_BODY: usize = 32 << 20;

/// The last failed attempt, kept to answer the client when every candidate failed.
pub enum LastFailure {
    /// The upstream answered with an error.
    Upstream {
        /// Its status.
        status: StatusCode,
        /// Its headers.
        headers: HeaderMap,
        /// Its body (at most [`MAX_ERROR_BODY`] bytes).
        body: Bytes,
        /// How it was classified.
        classified: Classified,
    },
    /// No usable answer (transport error, broken or zombie stream).
    Transport(ProxyError),
}

/// How one attempt ended.
pub enum AttemptResult {
    /// A 2xx SSE stream past its hold: relay it.
    Stream {
        /// The upstream response (the body is the rest of the stream, in the client's
        /// format).
        resp: Response<UpstreamBody>,
        /// What the hold read.
        held: Box<Held>,
    },
    /// A 2xx body read whole.
    Complete(Response<Full<Bytes>>),
    /// Failed: report `classified`; `last` answers the client if nothing else serves.
    Failed {
        /// The status to log (0 = no head).
        status: u16,
        /// The classification to report.
        classified: Classified,
        /// What to answer with if this stays the last failure.
        last: Box<LastFailure>,
    },
    /// A 2xx stream broke or ended after its head but before any content, so nothing of it
    /// reached the client: dispatch may re-open it once on the same connection
    /// (`[resilience.stream] recover_before_content`) before it counts as [`Self::Failed`].
    BrokeBeforeContent {
        /// The classification to report if it is not recovered.
        classified: Classified,
        /// What to answer with if this stays the last failure.
        last: Box<LastFailure>,
    },
    /// The request's execution budget ran out (sluice's own limit: no penalty).
    OutOfTime,
}

impl AttemptResult {
    /// For an upstream error answer: its status, headers and classification (`None` for
    /// anything else — a success, a transport failure, a broken stream).
    pub fn upstream_failure(&self) -> Option<(u16, &HeaderMap, &Classified)> {
        let AttemptResult::Failed {
            status,
            classified,
            last,
        } = self
        else {
            return None;
        };
        match &**last {
            LastFailure::Upstream { headers, .. } => Some((*status, headers, classified)),
            LastFailure::Transport(_) => None,
        }
    }
}

/// One admitted candidate, resolved against the config.
pub struct Target<'a> {
    /// The candidate.
    pub cand: &'a Candidate,
    /// Its provider.
    pub provider: &'a Provider,
    /// Its connection.
    pub conn: &'a Connection,
    /// Set when the request is translated for this target.
    pub seam: Option<&'a Seam>,
}

/// An attempt's result, its time to the head and its in-flight guard.
pub struct Attempted {
    /// The result.
    pub result: AttemptResult,
    /// Time to the response head (or the failure).
    pub latency: Duration,
    /// The attempt's in-flight guard (kept while a stream is relayed).
    pub guard: AttemptGuard,
    /// Whether an operator-injected fault answered (or delayed) it.
    pub injected: bool,
}

/// Sends `body` to `t` for `req` and judges the answer; `deadline` is the end of the request's
/// execution budget. Errors only for a provider URL that cannot be built.
pub async fn send_attempt(
    state: &Shared,
    t: &Target<'_>,
    req: &ClientRequest,
    route: Route,
    body: Bytes,
    deadline: Instant,
) -> Result<Attempted, ProxyError> {
    let up = upstream_request(state, t, req, route, body)?;
    let client = state
        .upstreams
        .client(t.cand.key.provider, t.provider)
        .map_err(|e| {
            ProxyError::Unreachable(format!("no client for provider '{}': {e}", t.provider.id))
        })?;
    let clock = state.core.clock().clone();
    let guard = state.core.begin_attempt(t.cand);
    let started = clock.now();
    let remaining = deadline.saturating_duration_since(started);
    if remaining.is_zero() {
        let latency = std::time::Duration::ZERO;
        return Ok(Attempted {
            result: AttemptResult::OutOfTime,
            latency,
            guard,
            injected: false,
        });
    }
    let head_budget = t.provider.timeout.min(remaining);
    let fault = state.core.fault_for(t.cand);
    let send = injected::send(fault, t.provider.dialect, route.sse_kind(), &client, up);
    let res = tokio::time::timeout(head_budget, send).await;
    let latency = clock.now().saturating_duration_since(started);
    let status = res
        .as_ref()
        .ok()
        .and_then(|r| r.as_ref().ok())
        .map(|r| r.status().as_u16());
    state.core.attempt_result(t.cand, status, latency);
    // Running out of the request's own budget says nothing about the connection.
    if res.is_ok() || remaining >= t.provider.timeout {
        let head_ok = status.is_some_and(|s| s < 500);
        state.core.observe_latency(t.cand, latency, head_ok);
    }
    let result = match res {
        // The request's own budget ran out first: sluice's limit, not the upstream's fault.
        Err(_) if remaining < t.provider.timeout => AttemptResult::OutOfTime,
        Err(_) => transport_failed(state, t, timed_out(t.provider, head_budget)),
        Ok(Err(SendError::Upstream(e))) => transport_failed(state, t, unreachable(t, &e)),
        Ok(Err(SendError::Injected(msg))) => {
            transport_failed(state, t, ProxyError::Unreachable(msg))
        }
        Ok(Ok(resp)) => {
            // A non-streaming body must be complete within the provider's `timeout` too.
            let body_deadline = started
                .checked_add(t.provider.timeout)
                .map_or(deadline, |d| d.min(deadline));
            judge(state, t, route, resp, deadline, body_deadline).await
        }
    };
    Ok(Attempted {
        result,
        latency,
        guard,
        injected: fault.is_some(),
    })
}

/// The upstream request: method, URL, forwarded headers with the connection's credential,
/// and the provider's beta allowlist applied.
fn upstream_request(
    state: &Shared,
    t: &Target<'_>,
    req: &ClientRequest,
    route: Route,
    body: Bytes,
) -> Result<Request<Full<Bytes>>, ProxyError> {
    let path = match t.seam {
        Some(seam) => seam.path(),
        None => req.path_and_query(route.path),
    };
    let uri = crate::proxy::attempt::upstream::uri(t.provider, path).map_err(|e| {
        ProxyError::Unreachable(format!(
            "bad upstream URL for provider '{}': {e}",
            t.provider.id
        ))
    })?;
    let len = body.len();
    let mut up = Request::new(Full::new(body));
    *up.method_mut() = req.parts.method.clone();
    *up.uri_mut() = uri;
    *up.headers_mut() = headers::upstream_request(
        &req.parts.headers,
        &t.conn.auth,
        t.provider.dialect,
        req.client_key,
        len,
    );
    if let Some(seam) = t.seam {
        seam.adapt_headers(up.headers_mut());
    }
    if t.conn.low_priority_mode && state.core.lane_active(t.cand) {
        use crate::policy::lane::{REQUEST_HEADER, REQUEST_VALUE};
        up.headers_mut().insert(
            http::HeaderName::from_static(REQUEST_HEADER),
            HeaderValue::from_static(REQUEST_VALUE),
        );
    }
    if let Some(allow) = &t.provider.anthropic_beta_allowlist {
        state.filter_betas(up.headers_mut(), &t.provider.id, allow);
    }
    if len == 0 && req.parts.method == http::Method::GET {
        up.headers_mut().remove(header::CONTENT_LENGTH);
    }
    Ok(up)
}

/// Judges a response head and reads what must be read before the client sees anything.
async fn judge(
    state: &Shared,
    t: &Target<'_>,
    route: Route,
    resp: Response<Incoming>,
    deadline: Instant,
    body_deadline: Instant,
) -> AttemptResult {
    let status = resp.status();
    state.core.observe_headroom(t.cand, resp.headers());
    if !status.is_success() {
        return Box::pin(upstream_error(state, t, resp)).await;
    }
    // A served answer can still end (or keep) the low-priority lane; an error's meaning
    // for the lane is dispatch's (it may retry on the same connection). Only
    // `low_priority_mode` connections have a lane.
    if t.conn.low_priority_mode {
        state
            .core
            .observe_lane(t.cand, status.as_u16(), resp.headers(), false);
    }
    if !headers::is_event_stream(resp.headers()) {
        return read_complete(state, t, route, resp, deadline, body_deadline).await;
    }
    let translator = t.seam.and_then(Seam::stream);
    let mut resp = resp.map(|b| UpstreamBody::new(b, translator));
    if let Some(seam) = t.seam {
        seam.warn_client(resp.headers_mut());
    }
    let guards = Guards::from_settings(&state.core.settings_snapshot().stream);
    let clock = state.core.clock().clone();
    let hold = Box::pin(pre_commit_hold(
        clock.as_ref(),
        route.sse_kind(),
        guards,
        resp.body_mut(),
    ));
    match tokio::time::timeout_at(deadline, hold).await {
        Err(_) => AttemptResult::OutOfTime,
        Ok(HoldEnd::Held(held)) => AttemptResult::Stream { resp, held },
        Ok(HoldEnd::Failed(f)) => hold_failed(state, t, f),
    }
}

/// A non-2xx answer: its body is read and classified by the provider's own rules (429
/// hints, quota text, restatement), then — for a translated target — rendered in the
/// client's format with the same status and headers (`retry-after` kept).
async fn upstream_error(state: &Shared, t: &Target<'_>, resp: Response<Incoming>) -> AttemptResult {
    let status = resp.status();
    let (mut head, b) = resp.into_parts();
    let mut bytes = read_error_body(b, t.provider.timeout).await;
    let end = AttemptEnd::response(status.as_u16(), &head.headers, &bytes);
    let classified = state
        .core
        .classify_in(t.cand.key.provider, t.cand.provider, &end);
    tracing::info!(provider = %t.provider.id, connection = %t.conn.id, status = status.as_u16(), class = classified.class.as_str(), reason = %classified.reason, "upstream error");
    if let Some(seam) = t.seam {
        bytes = seam.error_body(status.as_u16(), &bytes);
        head.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        seam.warn_client(&mut head.headers);
    }
    AttemptResult::Failed {
        status: status.as_u16(),
        classified: classified.clone(),
        last: Box::new(LastFailure::Upstream {
            status,
            headers: head.headers,
            body: bytes,
            classified,
        }),
    }
}

/// Reads a non-streaming 2xx body whole (bounded in size, and in time by `body_deadline`:
/// the provider's `timeout` from the attempt's start, or the request's execution `deadline`
/// if that comes first), so a break or a stall fails the attempt instead of reaching the
/// client as a short body or holding it. A generation's body (Messages, Chat Completions,
/// Responses) that is an empty turn (`proxy::turn`) fails the attempt too.
async fn read_complete(
    state: &Shared,
    t: &Target<'_>,
    route: Route,
    resp: Response<Incoming>,
    deadline: Instant,
    body_deadline: Instant,
) -> AttemptResult {
    let (head, body) = resp.into_parts();
    let read = tokio::time::timeout_at(
        body_deadline,
        Limited::new(body, MAX_RESPONSE_BODY).collect(),
    );
    let err = match read.await {
        Err(_) if body_deadline >= deadline => return AttemptResult::OutOfTime,
        Err(_) => format!(
            "the upstream response body was not complete within the provider timeout ({})",
            humantime::format_duration(t.provider.timeout)
        ),
        Ok(Ok(c)) => {
            let raw = c.to_bytes();
            // Usage is read from the upstream's own reply (every dialect's shape is known).
            let usage = crate::proxy::usage::Usage::of_json(&raw);
            match complete_body(t, raw) {
                Ok(body) if generation(route) && reply_is_empty(route.sse_kind(), &body) => {
                    let what = "the response body has no text and no tool call (an empty turn)";
                    tracing::info!(provider = %t.provider.id, connection = %t.conn.id, error = what, "upstream answered with an empty turn; trying the next target");
                    return empty_turn(state, t, what);
                }
                Ok(body) => {
                    let mut out = Response::new(Full::new(body));
                    if usage.is_known() {
                        // Read back by `Pending::local` for the request log.
                        out.extensions_mut().insert(usage);
                    }
                    *out.status_mut() = head.status;
                    *out.headers_mut() = headers::client_response(&head.headers, false);
                    out.headers_mut().remove(header::CONTENT_LENGTH);
                    if let Some(seam) = t.seam {
                        out.headers_mut().insert(
                            header::CONTENT_TYPE,
                            HeaderValue::from_static("application/json"),
                        );
                        seam.warn_client(out.headers_mut());
                    }
                    return AttemptResult::Complete(out);
                }
                Err(e) => return untranslatable_reply(state, t, &e),
            }
        }
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            format!("the upstream response body is larger than {MAX_RESPONSE_BODY} bytes")
        }
        Ok(Err(e)) => format!("the upstream response body broke before it was complete: {e}"),
    };
    tracing::info!(provider = %t.provider.id, connection = %t.conn.id, error = %err, "upstream body incomplete");
    let classified = state.core.classify_in(
        t.cand.key.provider,
        t.cand.provider,
        &AttemptEnd::truncated(Some(200), &err),
    );
    AttemptResult::Failed {
        status: head.status.as_u16(),
        classified,
        last: Box::new(LastFailure::Transport(ProxyError::Unreachable(err))),
    }
}

/// Routes whose 2xx answer is a model turn (not a token count or a model list).
fn generation(route: Route) -> bool {
    matches!(
        route.kind,
        RouteKind::Messages | RouteKind::ChatCompletions | RouteKind::Responses
    )
}

/// An empty turn before anything reached the client (`proxy::turn`): reported as
/// `empty_turn` (the breaker counts it, nothing is cooled), and answered with 502 if nothing
/// else serves.
fn empty_turn(state: &Shared, t: &Target<'_>, what: &str) -> AttemptResult {
    let end = AttemptEnd::guard(EndKind::EmptyTurn, what);
    AttemptResult::Failed {
        status: 200,
        classified: state
            .core
            .classify_in(t.cand.key.provider, t.cand.provider, &end),
        last: Box::new(LastFailure::Transport(ProxyError::EmptyTurn(format!(
            "provider '{}' answered with an empty turn (no text and no tool call)",
            t.provider.id
        )))),
    }
}

/// A complete 2xx body as the client gets it (translated for a translated target).
fn complete_body(t: &Target<'_>, body: Bytes) -> Result<Bytes, crate::translate::TranslateError> {
    match t.seam {
        Some(seam) => seam.complete_body(&body),
        None => Ok(body),
    }
}

/// A 2xx reply that is not what its dialect promises (no choices, not JSON): the
/// provider's failure, answered with 502 if nothing else serves.
fn untranslatable_reply(
    state: &Shared,
    t: &Target<'_>,
    e: &crate::translate::TranslateError,
) -> AttemptResult {
    let msg = e.to_string();
    tracing::info!(provider = %t.provider.id, connection = %t.conn.id, error = %msg, "upstream reply cannot be translated");
    let none = HeaderMap::new();
    let end = AttemptEnd::response(502, &none, msg.as_bytes());
    AttemptResult::Failed {
        status: 200,
        classified: state
            .core
            .classify_in(t.cand.key.provider, t.cand.provider, &end),
        last: Box::new(LastFailure::Transport(ProxyError::Unreachable(msg))),
    }
}

/// A stream that failed its hold: classify it (an error event like the HTTP error of its
/// type) and keep what to answer with.
fn hold_failed(state: &Shared, t: &Target<'_>, f: HoldFailure) -> AttemptResult {
    let msg = f.message();
    tracing::info!(provider = %t.provider.id, connection = %t.conn.id, error = %msg, "stream failed before content; trying the next target");
    let p = t.cand.provider;
    let (classified, last) = match &f {
        HoldFailure::ErrorEvent(err) => {
            let end = AttemptEnd::in_stream(&err.error_type, err.body.as_bytes());
            let c = state.core.classify_in(t.cand.key.provider, p, &end);
            let status =
                StatusCode::from_u16(c.status.unwrap_or(502)).unwrap_or(StatusCode::BAD_GATEWAY);
            let mut h = HeaderMap::new();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            let body = Bytes::from(err.body.clone());
            let last = LastFailure::Upstream {
                status,
                headers: h,
                body,
                classified: c.clone(),
            };
            (c, last)
        }
        HoldFailure::Zombie => (
            state.core.classify_in(
                t.cand.key.provider,
                p,
                &AttemptEnd::guard(EndKind::Zombie, &msg),
            ),
            LastFailure::Transport(ProxyError::Unreachable(msg.clone())),
        ),
        HoldFailure::Ended => (
            state.core.classify_in(
                t.cand.key.provider,
                p,
                &AttemptEnd::truncated(Some(200), &msg),
            ),
            LastFailure::Transport(ProxyError::Unreachable(msg.clone())),
        ),
        HoldFailure::EmptyTurn => return empty_turn(state, t, &msg),
        HoldFailure::Broke(_) => (
            state
                .core
                .classify_in(t.cand.key.provider, p, &AttemptEnd::truncated(None, &msg)),
            LastFailure::Transport(ProxyError::Unreachable(msg.clone())),
        ),
    };
    if matches!(f, HoldFailure::Broke(_) | HoldFailure::Ended) {
        return AttemptResult::BrokeBeforeContent {
            classified,
            last: Box::new(last),
        };
    }
    AttemptResult::Failed {
        status: 200,
        classified,
        last: Box::new(last),
    }
}

fn transport_failed(state: &Shared, t: &Target<'_>, err: ProxyError) -> AttemptResult {
    tracing::warn!(provider = %t.provider.id, connection = %t.conn.id, error = %err, "upstream transport error before the response head");
    let classified = state.core.classify_in(
        t.cand.key.provider,
        t.cand.provider,
        &AttemptEnd::transport(),
    );
    AttemptResult::Failed {
        status: 0,
        classified,
        last: Box::new(LastFailure::Transport(err)),
    }
}

fn timed_out(p: &Provider, budget: Duration) -> ProxyError {
    ProxyError::Timeout(format!(
        "{} waiting for provider '{}'",
        humantime::format_duration(budget),
        p.id
    ))
}

fn unreachable(t: &Target<'_>, e: &hyper_util::client::legacy::Error) -> ProxyError {
    let text = describe(e);
    let hint = config_hint(&text, &t.provider.base_url);
    ProxyError::Unreachable(format!("provider '{}': {text}{hint}", t.provider.id))
}

/// A short description of a transport error, with its cause chain (never a credential:
/// hyper errors carry no headers).
pub(crate) fn describe(e: &hyper_util::client::legacy::Error) -> String {
    let mut s = if e.is_connect() {
        "connect failed"
    } else {
        "request failed"
    }
    .to_string();
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// When a transport failure is likely a configuration or local-network problem rather than an
/// outage, says so: a host name that does not resolve (or a DNS lookup that failed
/// temporarily, as on an offline machine), or nothing listening on a loopback address.
pub fn config_hint(error: &str, base_url: &http::Uri) -> String {
    let e = error.to_ascii_lowercase();
    let host = base_url.host().unwrap_or("");
    let dns = [
        "dns error",
        "failed to lookup address",
        "name or service not known",
        "no such host",
        "nodename nor servname",
    ];
    if e.contains("temporary failure in name resolution") {
        return format!(
            " (the DNS lookup of '{host}' failed temporarily; check this machine's network or DNS)"
        );
    }
    if dns.iter().any(|m| e.contains(m)) {
        return format!(
            " (the host name '{host}' does not resolve; check the provider's base_url, or this machine's network if it is offline)"
        );
    }
    let loopback = host == "localhost"
        || host
            .trim_matches(['[', ']'])
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if loopback && e.contains("connection refused") {
        return format!(
            " (configuration problem: nothing is listening on {host}:{}; start the local server or fix the provider's base_url)",
            base_url
                .port_u16()
                .map_or("default port".to_string(), |p| p.to_string())
        );
    }
    String::new()
}

/// Reads an upstream error body (at most [`MAX_ERROR_BODY`] bytes, within `timeout`); an
/// unreadable body reads as empty.
pub(crate) async fn read_error_body(body: Incoming, timeout: Duration) -> Bytes {
    match tokio::time::timeout(timeout, Limited::new(body, MAX_ERROR_BODY).collect()).await {
        Ok(Ok(c)) => c.to_bytes(),
        _ => Bytes::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::config_hint;

    #[test]
    fn names_configuration_problems() {
        let u = |s: &str| s.parse::<http::Uri>().unwrap();
        let dns = config_hint(
            "connect failed: dns error: failed to lookup address information: Name or service not known",
            &u("https://api.exmaple.invalid"),
        );
        assert!(
            dns.contains("does not resolve") && dns.contains("api.exmaple.invalid"),
            "{dns}"
        );
        let offline = config_hint(
            "connect failed: dns error: failed to lookup address information: Temporary failure in name resolution",
            &u("https://api.anthropic.com"),
        );
        assert!(
            offline.contains("failed temporarily") && offline.contains("network"),
            "an offline machine is not blamed on base_url: {offline}"
        );
        assert!(!offline.contains("base_url"), "{offline}");
        let lo = config_hint(
            "connect failed: tcp connect error: Connection refused (os error 111)",
            &u("http://127.0.0.1:11434/v1"),
        );
        assert!(
            lo.contains("nothing is listening on 127.0.0.1:11434"),
            "{lo}"
        );
        let remote = config_hint(
            "connect failed: Connection refused",
            &u("https://api.example.com"),
        );
        assert_eq!(
            remote, "",
            "a refused remote host is an outage, not a config problem"
        );
    }
}
