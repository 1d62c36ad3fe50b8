//! The answer when no candidate served the request: the last failure (an upstream error
//! passed through or restated, or a transport error), or — when nothing was attempted — the
//! §8 "nothing eligible" error with every exclusion in `sluice.diagnostics.excluded`.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

use crate::clock::unix_ms;
use crate::policy::Classified;
use crate::policy::select::{Exclusion, none_eligible};
use crate::proxy::attempt::LastFailure;
use crate::proxy::dialect::{self, Excluded, ProxyError};
use crate::proxy::headers;
use crate::proxy::respond::outcome::Outcome;
use crate::snapshot::RequestOutcome;

/// The answer from the last failure, or from the exclusions when nothing was attempted.
/// `mismatched` are the exclusions for targets of the other dialect.
pub fn answer(
    last: Option<LastFailure>,
    exclusions: Vec<Exclusion>,
    mismatched: Vec<Exclusion>,
    wall: std::time::SystemTime,
    model: &str,
) -> Result<Outcome, ProxyError> {
    match last {
        Some(LastFailure::Upstream {
            status,
            headers,
            body,
            classified,
        }) => Ok(upstream_failure(status, &headers, body, &classified)?),
        Some(LastFailure::Transport(e)) => Err(e),
        None => Err(nothing_eligible(exclusions, mismatched, wall, model)),
    }
}

fn upstream_failure(
    status: StatusCode,
    headers: &HeaderMap,
    body: Bytes,
    classified: &Classified,
) -> Result<Outcome, ProxyError> {
    if let Some(r) = &classified.restated {
        return Err(ProxyError::Restated {
            status: r.to,
            retry_after: r.retry_after,
            message: upstream_message(&body, classified),
        });
    }
    let mut resp = pass_through(status, headers, body);
    add_retry_after(&mut resp, classified);
    Ok(Outcome::Local {
        resp,
        outcome: RequestOutcome::UpstreamError,
    })
}

fn nothing_eligible(
    exclusions: Vec<Exclusion>,
    mismatched: Vec<Exclusion>,
    wall: std::time::SystemTime,
    model: &str,
) -> ProxyError {
    let verdict = none_eligible(&exclusions);
    let now_ms = unix_ms(wall);
    let reset_at_unix_ms = verdict
        .retry_after
        .map(|d| now_ms.saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
    let detail: Vec<String> = exclusions
        .iter()
        .chain(&mismatched)
        .map(|e| {
            format!(
                "{} {} {}s",
                e.target,
                e.reason.as_str(),
                e.retry_after.map_or(0, |d| d.as_secs())
            )
        })
        .collect();
    tracing::warn!(model, status = verdict.status, code = verdict.code, excluded = %detail.join(", "), "no target eligible");
    let mut excluded = exclusions;
    excluded.extend(mismatched);
    ProxyError::Excluded(Box::new(Excluded {
        verdict,
        excluded,
        reset_at_unix_ms,
    }))
}

/// The upstream's error response, unchanged but for hop-by-hop headers.
pub fn pass_through(status: StatusCode, h: &HeaderMap, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    *r.headers_mut() = headers::client_response(h, false);
    r.headers_mut().remove(header::CONTENT_LENGTH);
    r
}

/// A retryable upstream error (429, 503, 529) whose only retry hint was in the body (e.g. a
/// Gemini `retryDelay`) gets that hint as an integer `retry-after` header, the one
/// form every client reads. An upstream `retry-after` is never replaced.
fn add_retry_after(resp: &mut Response<Full<Bytes>>, c: &Classified) {
    let retryable = matches!(resp.status().as_u16(), 429 | 503 | 529);
    if retryable
        && !resp.headers().contains_key(header::RETRY_AFTER)
        && let Some(hint) = c.retry_hint
    {
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(dialect::whole_seconds_up(hint)),
        );
    }
}

/// The upstream's own error message for a restated error (falls back to the classifier's).
fn upstream_message(body: &[u8], c: &Classified) -> String {
    if c.message.is_empty() {
        String::from_utf8_lossy(body).chars().take(500).collect()
    } else {
        c.message.clone()
    }
}
