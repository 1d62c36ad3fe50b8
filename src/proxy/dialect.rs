//! `ProxyError` and its rendering in the client's dialect: the one place that builds the error
//! JSON, status and `retry-after` of every error sluice itself produces.
//!
//! Anthropic routes (`/v1/messages*`) get `{"type":"error","error":{"type","message"}}`;
//! OpenAI routes get `{"error":{"message","type","code"}}` (each dialect's own error shape;
//! `docs/TRANSLATION.md#errors`).
//! Upstream error bodies are never re-rendered here: they pass through unchanged.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use serde_json::json;

use crate::config::Dialect;
use crate::policy::select::{Exclusion, NoneEligible};
use crate::wire::dialect::{anthropic_type, openai_type};

/// An error sluice produces itself (not an upstream reply).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// No route matches the method and path.
    #[error("no route for {method} {path}")]
    NotFound {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
    },
    /// The path exists but not with this method.
    #[error("{method} is not allowed on {path}")]
    MethodNotAllowed {
        /// Request method.
        method: String,
        /// Request path.
        path: String,
    },
    /// The body is over `server.max_body` bytes.
    #[error(
        "request body is larger than the {limit}-byte limit; raise [server] max_body if this is intended"
    )]
    TooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The body is not what the route expects (malformed JSON, missing `model`, …).
    #[error("{0}")]
    BadRequest(String),
    /// The client's sluice key is missing or wrong.
    #[error("missing or invalid sluice client key; send it as x-api-key or Authorization: Bearer")]
    Unauthorized,
    /// The model names no configured target for this route's dialect (§8).
    #[error("model '{model}' resolves to no configured target for this route{hint}")]
    NoTargets {
        /// The client's model.
        model: String,
        /// Extra explanation, e.g. skipped dialect mismatches.
        hint: String,
        /// Targets left out (dialect mismatches), for `sluice.diagnostics.excluded`.
        excluded: Vec<Exclusion>,
    },
    /// Every attempt failed at the transport level (connect refused, reset, timeout).
    #[error("upstream failed: {0}")]
    Unreachable(String),
    /// The upstream did not answer within the provider's `timeout`.
    #[error("upstream timed out after {0}")]
    Timeout(String),
    /// The last attempt answered 2xx with an empty turn: no text and no tool call, only
    /// reasoning or nothing (`docs/RESILIENCE.md#6-stream-guards`). 502: the upstream
    /// answered, but with nothing a client can use — a bad gateway reply, which clients and
    /// SDKs retry like any 5xx; not 503/529, which would say "overloaded".
    #[error("{0}")]
    EmptyTurn(String),
    /// sluice is shutting down and no longer accepts requests.
    #[error("sluice is shutting down; retry shortly")]
    Draining,
    /// An upstream error restated by a §7 rule: new status, the upstream's message text.
    #[error("{message}")]
    Restated {
        /// The restated status (e.g. 429).
        status: u16,
        /// What the client is told to wait.
        retry_after: std::time::Duration,
        /// The upstream's error message, kept verbatim.
        message: String,
    },
    /// The admission queue refused the request (§5): queue full or queue wait timed out.
    #[error("{}", .0.message)]
    Admission(Box<crate::core::admission::Refused>),
    /// Every candidate was excluded before dispatch (§8, the four "all excluded" rows).
    #[error("{}", excluded_message(.0))]
    Excluded(Box<Excluded>),
    /// The request has a field the provider's dialect has no counterpart for (or it is
    /// malformed); decided before anything was sent.
    #[error("{0}")]
    Untranslatable(crate::translate::TranslateError),
    /// An exclusive session lease refused the request or the lease call (§2d):
    /// `lease_generation_stale` (409), `lease_capacity_unavailable` (429), the scope check (403)
    /// and the route being off (404).
    #[error("{message}")]
    Lease {
        /// HTTP status.
        status: u16,
        /// The OpenAI `code` and `sluice.code`.
        code: &'static str,
        /// What happened and what to do.
        message: String,
        /// `retry-after`, when waiting helps.
        retry_after: Option<std::time::Duration>,
    },
}

/// The §8 answer when nothing is eligible, with its diagnostics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excluded {
    /// The §8 row.
    pub verdict: NoneEligible,
    /// Every excluded candidate.
    pub excluded: Vec<Exclusion>,
    /// Wall-clock time of the earliest reset, Unix ms (for `sluice.reset_at`).
    pub reset_at_unix_ms: Option<u64>,
}

fn excluded_message(e: &Excluded) -> String {
    let what = match e.verdict.code {
        "all_targets_cooling_down" => {
            "every target is cooling down (open circuit or provider cooldown)"
        }
        "rate_limit_error" => "every target is rate limited or locked out",
        "quota_exhausted" => "every target is waiting for a quota reset",
        _ => {
            "no target can take this request (credentials refused, banned, expired, out of credits, model not found or unavailable)"
        }
    };
    match e.verdict.retry_after {
        Some(d) => format!(
            "{what}; {}",
            retry_phrase(whole_seconds_up(d), e.reset_at_unix_ms)
        ),
        None => what.to_string(),
    }
}

/// "retry in 42s", or past a minute (where Claude Code stops waiting on a `retry-after`
/// and shows the message instead) the wait in hours and minutes and the reset's UTC time:
/// "retry in 3h 12m (at 17:05 UTC)".
fn retry_phrase(secs: u64, reset_at_unix_ms: Option<u64>) -> String {
    if secs <= 60 {
        return format!("retry in {secs}s");
    }
    let minutes = secs.div_ceil(60);
    let (h, m) = (minutes / 60, minutes % 60);
    let wait = match (h, m) {
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h {m}m"),
    };
    match reset_at_unix_ms {
        Some(ms) => {
            let s = (ms / 1000) % 86_400;
            format!(
                "retry in {wait} (at {:02}:{:02} UTC)",
                s / 3600,
                (s / 60) % 60
            )
        }
        None => format!("retry in {wait}"),
    }
}

/// Whole seconds, rounded up, at least 1 (the `retry-after` header format clients expect):
/// the policy's rounding ([`crate::policy::retry_hint::whole_seconds_up`]) with a floor of 1.
pub fn whole_seconds_up(d: std::time::Duration) -> u64 {
    crate::policy::retry_hint::whole_seconds_up(d).max(1)
}

impl ProxyError {
    /// The HTTP status this error is answered with.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::NotFound { .. } | Self::NoTargets { .. } => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Unreachable(_) | Self::EmptyTurn(_) => StatusCode::BAD_GATEWAY,
            Self::Timeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::Draining => StatusCode::SERVICE_UNAVAILABLE,
            Self::Excluded(e) => {
                StatusCode::from_u16(e.verdict.status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE)
            }
            Self::Restated { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::TOO_MANY_REQUESTS)
            }
            Self::Admission(r) => {
                StatusCode::from_u16(r.code.status()).unwrap_or(StatusCode::TOO_MANY_REQUESTS)
            }
            Self::Untranslatable(e) => {
                StatusCode::from_u16(e.status()).unwrap_or(StatusCode::BAD_REQUEST)
            }
            Self::Lease { status, .. } => {
                StatusCode::from_u16(*status).unwrap_or(StatusCode::CONFLICT)
            }
        }
    }

    /// Short machine-readable kind for logs, the request log and the OpenAI `code` field.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::NotFound { .. } => "not_found",
            Self::MethodNotAllowed { .. } => "method_not_allowed",
            Self::TooLarge { .. } => "request_too_large",
            Self::BadRequest(_) => "invalid_request",
            Self::Unauthorized => "invalid_api_key",
            Self::NoTargets { .. } => "no_executable_targets",
            Self::Unreachable(_) => "upstream_unreachable",
            Self::EmptyTurn(_) => "empty_turn",
            // §5: the response head did not come within the execution budget (the provider
            // `timeout`; `execution_max_wait` is never shorter).
            Self::Timeout(_) => "RATE_LIMIT_EXECUTION_TIMEOUT",
            Self::Draining => "draining",
            Self::Excluded(e) => e.verdict.code,
            Self::Admission(r) => r.code.code(),
            Self::Restated { status: 429, .. } => "rate_limit_exceeded",
            Self::Restated { .. } => "upstream_error",
            Self::Untranslatable(_) => "untranslatable_field",
            Self::Lease { code, .. } => code,
        }
    }
}

/// The JSON body of `err` in `dialect`. §8 errors carry a `sluice` object with `code`,
/// `retry_after` (s), `reset_at` (RFC 3339) and `diagnostics.excluded[]`.
pub fn body(err: &ProxyError, dialect: Dialect) -> Bytes {
    if let ProxyError::Untranslatable(e) = err {
        return e.client_body(match dialect {
            Dialect::Anthropic => crate::translate::ClientFormat::Anthropic,
            Dialect::OpenAi => crate::translate::ClientFormat::Chat,
        });
    }
    let status = err.status();
    let message = err.to_string();
    let mut v = match dialect {
        Dialect::Anthropic => {
            json!({"type": "error", "error": {"type": anthropic_type(status), "message": message}})
        }
        Dialect::OpenAi => {
            json!({"error": {"message": message, "type": openai_type(status), "param": null, "code": err.kind()}})
        }
    };
    let sluice = match err {
        ProxyError::Excluded(e) => Some(json!({
            "code": e.verdict.code,
            "retry_after": e.verdict.retry_after.map(whole_seconds_up),
            "reset_at": e.reset_at_unix_ms.map(rfc3339),
            "diagnostics": {"excluded": e.excluded.iter().map(exclusion_json).collect::<Vec<_>>()},
        })),
        ProxyError::Admission(r) => Some(json!({
            "code": r.code.code(),
            "retry_after": r.retry_after.map(whole_seconds_up),
            "reset_at": null,
            "diagnostics": {"excluded": [], "reason": r.code.reason()},
        })),
        ProxyError::Timeout(_) => Some(json!({
            "code": "RATE_LIMIT_EXECUTION_TIMEOUT", "retry_after": null, "reset_at": null,
            "diagnostics": {"excluded": []},
        })),
        ProxyError::Lease {
            code, retry_after, ..
        } => Some(json!({
            "code": code, "retry_after": retry_after.map(whole_seconds_up), "reset_at": null,
            "diagnostics": {"excluded": []},
        })),
        ProxyError::NoTargets { excluded, .. } => Some(json!({
            "code": "no_executable_targets", "retry_after": null, "reset_at": null,
            "diagnostics": {"excluded": excluded.iter().map(exclusion_json).collect::<Vec<_>>()},
        })),
        _ => None,
    };
    if let (Some(s), Some(obj)) = (sluice, v.as_object_mut()) {
        obj.insert("sluice".into(), s);
    }
    Bytes::from(v.to_string())
}

/// One `sluice.diagnostics.excluded[]` entry.
/// One `sluice.diagnostics.excluded[]` entry; `cause` (`auth`, `not_found`) only when the
/// failure behind a cooldown or lockout is one waiting does not heal.
fn exclusion_json(x: &Exclusion) -> serde_json::Value {
    let mut v = json!({
        "target": x.target,
        "reason": x.reason.as_str(),
        "retry_after_ms": x.retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
    });
    if !x.cause.heals_by_waiting() {
        v["cause"] = json!(x.cause.as_str());
    }
    v
}

fn rfc3339(unix_ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(unix_ms);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// The complete response for `err` in `dialect`: status, JSON body, content type, and
/// `retry-after` / `x-should-retry` where the error calls for them.
pub fn render<B: From<Bytes>>(err: &ProxyError, dialect: Dialect) -> Response<B> {
    let mut resp = Response::new(B::from(body(err, dialect)));
    *resp.status_mut() = err.status();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    match err {
        ProxyError::Draining => {
            h.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        ProxyError::MethodNotAllowed { path, .. } => {
            let allow = if path == "/v1/models" { "GET" } else { "POST" };
            h.insert(header::ALLOW, HeaderValue::from_static(allow));
        }
        ProxyError::Admission(r) => {
            if let Some(d) = r.retry_after {
                h.insert(header::RETRY_AFTER, HeaderValue::from(whole_seconds_up(d)));
            }
        }
        ProxyError::Lease {
            retry_after: Some(d),
            ..
        } => {
            h.insert(header::RETRY_AFTER, HeaderValue::from(whole_seconds_up(*d)));
        }
        ProxyError::Restated { retry_after, .. } => {
            h.insert(
                header::RETRY_AFTER,
                HeaderValue::from(whole_seconds_up(*retry_after)),
            );
        }
        ProxyError::Excluded(e) => {
            if let Some(d) = e.verdict.retry_after {
                h.insert(header::RETRY_AFTER, HeaderValue::from(whole_seconds_up(d)));
            }
            if e.verdict.no_retry {
                h.insert("x-should-retry", HeaderValue::from_static("false"));
            }
        }
        _ => {}
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn parse(b: &Bytes) -> Value {
        serde_json::from_slice(b).unwrap()
    }

    #[test]
    fn anthropic_shape_and_types() {
        let cases = [
            (
                ProxyError::BadRequest("bad".into()),
                400,
                "invalid_request_error",
            ),
            (ProxyError::TooLarge { limit: 10 }, 413, "request_too_large"),
            (
                ProxyError::NotFound {
                    method: "GET".into(),
                    path: "/x".into(),
                },
                404,
                "not_found_error",
            ),
            (ProxyError::Unauthorized, 401, "authentication_error"),
            (ProxyError::Unreachable("refused".into()), 502, "api_error"),
            (ProxyError::EmptyTurn("no text".into()), 502, "api_error"),
            (ProxyError::Timeout("10m".into()), 504, "timeout_error"),
            (ProxyError::Draining, 503, "overloaded_error"),
        ];
        for (err, status, ty) in cases {
            let r: Response<Bytes> = render(&err, Dialect::Anthropic);
            assert_eq!(r.status().as_u16(), status, "{err:?}");
            assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
            let v = parse(r.body());
            assert_eq!(v["type"], "error");
            assert_eq!(v["error"]["type"], ty, "{err:?}");
            assert_eq!(v["error"]["message"], err.to_string());
        }
    }

    #[test]
    fn openai_shape_and_codes() {
        let r: Response<Bytes> = render(&ProxyError::TooLarge { limit: 1024 }, Dialect::OpenAi);
        assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let v = parse(r.body());
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], "request_too_large");
        assert!(v["error"]["message"].as_str().unwrap().contains("1024"));
        assert!(
            v.get("type").is_none(),
            "no Anthropic envelope on OpenAI routes"
        );
        let r: Response<Bytes> = render(&ProxyError::Unreachable("x".into()), Dialect::OpenAi);
        assert_eq!(parse(r.body())["error"]["code"], "upstream_unreachable");
        let r: Response<Bytes> = render(&ProxyError::EmptyTurn("x".into()), Dialect::OpenAi);
        assert_eq!(r.status(), StatusCode::BAD_GATEWAY);
        let v = parse(r.body());
        assert_eq!(
            (v["error"]["type"].as_str(), v["error"]["code"].as_str()),
            (Some("api_error"), Some("empty_turn"))
        );
        let r: Response<Bytes> = render(&ProxyError::Timeout("10m".into()), Dialect::OpenAi);
        assert_eq!(r.status(), StatusCode::GATEWAY_TIMEOUT);
        let v = parse(r.body());
        assert_eq!(
            (v["error"]["code"].as_str(), v["sluice"]["code"].as_str()),
            (
                Some("RATE_LIMIT_EXECUTION_TIMEOUT"),
                Some("RATE_LIMIT_EXECUTION_TIMEOUT")
            )
        );
        let r: Response<Bytes> = render(&ProxyError::Draining, Dialect::OpenAi);
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn excluded_renders_section_8_in_both_dialects() {
        use crate::policy::select::{ExclusionCause, ExclusionReason, none_eligible};
        use std::time::Duration;
        let excluded = vec![
            Exclusion {
                target: "a:k1/m".into(),
                reason: ExclusionReason::QuotaWait,
                retry_after: Some(Duration::from_millis(3_600_500)),
                cause: ExclusionCause::Transient,
            },
            Exclusion {
                target: "a:k2/m".into(),
                reason: ExclusionReason::Terminal,
                retry_after: None,
                cause: ExclusionCause::Transient,
            },
        ];
        let err = ProxyError::Excluded(Box::new(Excluded {
            verdict: none_eligible(&excluded),
            excluded,
            reset_at_unix_ms: Some(4_102_444_800_000),
        }));
        for d in [Dialect::Anthropic, Dialect::OpenAi] {
            let r: Response<Bytes> = render(&err, d);
            assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
            assert_eq!(r.headers()[header::RETRY_AFTER], "3601");
            assert_eq!(r.headers()["x-should-retry"], "false");
            let v = parse(r.body());
            assert_eq!(v["sluice"]["code"], "quota_exhausted");
            assert_eq!(v["sluice"]["retry_after"], 3601);
            assert_eq!(v["sluice"]["reset_at"], "2100-01-01T00:00:00Z");
            assert_eq!(
                v["sluice"]["diagnostics"]["excluded"][0]["target"],
                "a:k1/m"
            );
            assert_eq!(
                v["sluice"]["diagnostics"]["excluded"][0]["reason"],
                "quota_wait"
            );
            assert_eq!(
                v["sluice"]["diagnostics"]["excluded"][0]["retry_after_ms"],
                3_600_500
            );
            assert_eq!(
                v["sluice"]["diagnostics"]["excluded"][1]["reason"],
                "terminal"
            );
            match d {
                Dialect::Anthropic => assert_eq!(v["error"]["type"], "rate_limit_error"),
                Dialect::OpenAi => assert_eq!(v["error"]["code"], "quota_exhausted"),
            }
        }
        let open = vec![Exclusion {
            target: "a:k1/m".into(),
            reason: ExclusionReason::CircuitOpen,
            retry_after: Some(Duration::from_secs(30)),
            cause: ExclusionCause::Transient,
        }];
        let err = ProxyError::Excluded(Box::new(Excluded {
            verdict: none_eligible(&open),
            excluded: open,
            reset_at_unix_ms: None,
        }));
        let r: Response<Bytes> = render(&err, Dialect::Anthropic);
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(parse(r.body())["error"]["type"], "overloaded_error");
        assert!(r.headers().get("x-should-retry").is_none());
    }

    #[test]
    fn restated_error_keeps_the_message_and_adds_retry_after() {
        let err = ProxyError::Restated {
            status: 429,
            retry_after: std::time::Duration::from_secs(60),
            message: "用户额度不足".into(),
        };
        let r: Response<Bytes> = render(&err, Dialect::Anthropic);
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(r.headers()[header::RETRY_AFTER], "60");
        let v = parse(r.body());
        assert_eq!(
            (v["error"]["type"].as_str(), v["error"]["message"].as_str()),
            (Some("rate_limit_error"), Some("用户额度不足"))
        );
        let v = parse(render::<Bytes>(&err, Dialect::OpenAi).body());
        assert_eq!(v["error"]["code"], "rate_limit_exceeded");
    }

    #[test]
    fn whole_seconds_round_up_with_a_floor_of_one() {
        use std::time::Duration;
        assert_eq!(whole_seconds_up(Duration::ZERO), 1);
        assert_eq!(whole_seconds_up(Duration::from_millis(26_660)), 27);
        assert_eq!(whole_seconds_up(Duration::from_secs(60)), 60);
        assert_eq!(
            whole_seconds_up(Duration::MAX),
            u64::MAX,
            "saturates, never overflows"
        );
    }
}

#[cfg(test)]
mod retry_phrase_tests {
    use super::retry_phrase;

    #[test]
    fn short_waits_in_seconds_long_ones_with_the_reset_time() {
        assert_eq!(retry_phrase(42, Some(0)), "retry in 42s");
        assert_eq!(retry_phrase(60, None), "retry in 60s");
        assert_eq!(retry_phrase(61, None), "retry in 2m");
        // 2030-01-01 17:05:00 UTC
        let at = 1_893_517_500_000;
        assert_eq!(
            retry_phrase(11_520, Some(at)),
            "retry in 3h 12m (at 17:05 UTC)"
        );
        assert_eq!(retry_phrase(7_200, Some(at)), "retry in 2h (at 17:05 UTC)");
        assert_eq!(retry_phrase(3_599, None), "retry in 1h");
    }
}
