//! `UpstreamProbe`: the real [`Probe`] behind clear-and-verify. One non-streaming request
//! with a 1-token budget (`max_tokens = 1`) for the operator's model, sent to exactly one
//! connection with that connection's own key: no routing, no fallback, no admission, and no
//! report to breakers, cooldowns, lockouts or the request log (its answer only decides
//! whether the operator's clear or reset goes ahead). An injected fault on the connection
//! answers the probe as it answers traffic, so a rehearsed outage fails verification too.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, header};
use http_body_util::Full;
use serde_json::json;

use crate::config::{Connection, Dialect, Provider};
use crate::core::operator::verify::{Probe, ProbeResult};
use crate::policy::select::Candidate;
use crate::proxy::Shared;
use crate::proxy::attempt::injected::{self, SendError};
use crate::proxy::attempt::{describe, read_error_body};
use crate::proxy::headers::upstream_request;
use crate::wire::dialect::SseKind;

/// The longest a probe waits for its answer (head and body), unless the provider's own
/// `timeout` is shorter.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(20);

/// The `anthropic-version` a probe sends (clients send their own on traffic).
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Sends probes through the proxy's pooled upstream clients, on the proxy's runtime (so a
/// console thread with a runtime of its own can await it).
pub struct UpstreamProbe {
    state: Shared,
    runtime: tokio::runtime::Handle,
}

impl UpstreamProbe {
    /// A probe using `state`'s upstream clients; its requests run on `runtime`.
    pub fn new(state: Shared, runtime: tokio::runtime::Handle) -> Self {
        Self { state, runtime }
    }
}

impl Probe for UpstreamProbe {
    fn probe<'a>(
        &'a self,
        provider: &'a Provider,
        conn: &'a Connection,
        model: &'a str,
    ) -> Pin<Box<dyn Future<Output = ProbeResult> + Send + 'a>> {
        let state = self.state.clone();
        let (provider, conn, model) = (provider.clone(), conn.clone(), model.to_string());
        let job = self
            .runtime
            .spawn(async move { timed(&state, &provider, &conn, &model).await });
        Box::pin(async move {
            job.await.unwrap_or_else(|e| ProbeResult {
                status: None,
                latency_ms: 0,
                error: Some(format!("the probe did not finish: {e}")),
            })
        })
    }
}

/// Runs one probe and measures it.
async fn timed(state: &Shared, p: &Provider, c: &Connection, model: &str) -> ProbeResult {
    let clock = state.core.clock().clone();
    let started = clock.now();
    let answer = exchange(state, p, c, model).await;
    let latency = clock.now().saturating_duration_since(started);
    let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    match answer {
        Ok((status, _)) if (200..300).contains(&status) => ProbeResult {
            status: Some(status),
            latency_ms,
            error: None,
        },
        Ok((status, body)) => ProbeResult {
            status: Some(status),
            latency_ms,
            error: Some(format!(
                "HTTP {status}: {}",
                crate::policy::classify::error_message(&body)
            )),
        },
        Err(error) => ProbeResult {
            status: None,
            latency_ms,
            error: Some(error),
        },
    }
}

/// Sends the probe and reads its answer: the status and (at most 1 MiB of) the body.
/// Errors: no client or URL for the provider, no answer within the budget, transport
/// failure (the text names the provider, never a key).
async fn exchange(
    state: &Shared,
    p: &Provider,
    c: &Connection,
    model: &str,
) -> Result<(u16, Bytes), String> {
    let cfg = state.core.config();
    let (i, j) = cfg
        .providers
        .iter()
        .enumerate()
        .find_map(|(i, x)| {
            (x.id == p.id)
                .then(|| x.connections.iter().position(|y| y.id == c.id))
                .flatten()
                .map(|j| (i, j))
        })
        .ok_or_else(|| format!("connection '{}' is no longer configured", c.id))?;
    let client = state
        .upstreams
        .client(cfg.keys.provider(i), &cfg.providers[i])?;
    let (path, body) = probe_request(p.dialect, model);
    let uri = crate::proxy::attempt::upstream::uri(&cfg.providers[i], path)?;
    let mut req = Request::new(Full::new(body.clone()));
    *req.method_mut() = Method::POST;
    *req.uri_mut() = uri;
    *req.headers_mut() = probe_headers(p, c, body.len());
    let budget = p.timeout.min(PROBE_TIMEOUT);
    let fault = state.core.fault_for(&Candidate {
        provider: i,
        connection: j,
        model: model.to_string(),
        rewrite: false,
        target: 0,
        key: cfg.keys.connection(i, j),
    });
    let sent = injected::send(fault, p.dialect, sse_kind(p.dialect), &client, req);
    let res = match tokio::time::timeout(budget, sent).await {
        Err(_) => return Err(no_answer(p, budget)),
        Ok(Err(SendError::Upstream(e))) => {
            return Err(format!("provider '{}': {}", p.id, describe(&e)));
        }
        Ok(Err(SendError::Injected(why))) => return Err(why),
        Ok(Ok(res)) => res,
    };
    let status = res.status().as_u16();
    Ok((status, read_error_body(res.into_body(), budget).await))
}

/// The route and JSON body of a 1-token, non-streaming request in `dialect`.
fn probe_request(dialect: Dialect, model: &str) -> (&'static str, Bytes) {
    let messages = json!([{"role": "user", "content": "ping"}]);
    let (path, body) = match dialect {
        Dialect::Anthropic => (
            "/v1/messages",
            json!({"model": model, "max_tokens": 1, "messages": messages}),
        ),
        Dialect::OpenAi => (
            "/v1/chat/completions",
            json!({"model": model, "max_tokens": 1, "messages": messages, "stream": false}),
        ),
    };
    (path, Bytes::from(body.to_string()))
}

/// JSON content type, Anthropic's version header, and the connection's own key.
fn probe_headers(p: &Provider, c: &Connection, body_len: usize) -> HeaderMap {
    let mut base = HeaderMap::new();
    base.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if p.dialect == Dialect::Anthropic {
        base.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
    }
    upstream_request(&base, &c.auth, p.dialect, None, body_len)
}

/// The stream shape an injected stalled/zombie stream would take (a probe never streams).
fn sse_kind(dialect: Dialect) -> SseKind {
    match dialect {
        Dialect::Anthropic => SseKind::Anthropic,
        Dialect::OpenAi => SseKind::OpenAiChat,
    }
}

fn no_answer(p: &Provider, budget: Duration) -> String {
    format!(
        "no answer from provider '{}' within {}",
        p.id,
        humantime::format_duration(budget)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_asks_for_one_token_without_streaming() {
        for (dialect, path, budget_key) in [
            (Dialect::Anthropic, "/v1/messages", "max_tokens"),
            (Dialect::OpenAi, "/v1/chat/completions", "max_tokens"),
        ] {
            let (p, body) = probe_request(dialect, "m-1");
            assert_eq!(p, path);
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(v["model"], "m-1");
            assert_eq!(v[budget_key], 1);
            assert_ne!(v["stream"], true);
        }
    }
}
