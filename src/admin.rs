//! The admin API on its own loopback listener (DESIGN §3): health probes, Prometheus
//! metrics and the Snapshot as JSON. GET endpoints build a fresh snapshot at request time,
//! so they show what the next request would see.
//!
//! Every route but `/livez` and `/readyz` requires `Authorization: Bearer <token>` when
//! `[admin] token_env` is set. Errors use the OpenAI-style error JSON.

use std::fmt::Write as _;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use serde_json::json;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::core::Core;
use crate::core::snapshot::Snapshot;
use crate::proxy::forward::json_response;
use crate::proxy::server::serve_http;

/// Serves the admin API until `stop` (it outlives the drain, so `/readyz` can say 503).
pub async fn serve(listener: TcpListener, core: Core, stop: CancellationToken) {
    serve_http(listener, stop, "admin", move |req| {
        let core = core.clone();
        async move { handle(&core, req).map(Either::Left) }
    })
    .await;
}

fn handle(core: &Core, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().trim_end_matches('/');
    let get = req.method() == Method::GET || req.method() == Method::HEAD;
    match path {
        "/livez" | "/healthz" if get => json_response(StatusCode::OK, json!({"status": "ok"})),
        "/readyz" if get => {
            if core.is_draining() {
                json_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    json!({"status": "draining"}),
                )
            } else {
                json_response(StatusCode::OK, json!({"status": "ready"}))
            }
        }
        _ if !authorized(core, &req) => {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "missing or wrong admin token; send Authorization: Bearer <token from admin.token_env>",
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            r
        }
        "/api/snapshot" if get => match serde_json::to_value(core.snapshot()) {
            Ok(v) => json_response(StatusCode::OK, v),
            Err(e) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("cannot serialise the snapshot: {e}"),
            ),
        },
        "/metrics" if get => {
            let mut r = Response::new(Full::new(Bytes::from(metrics(&core.snapshot()))));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4"),
            );
            r
        }
        "/livez" | "/healthz" | "/readyz" | "/api/snapshot" | "/metrics" => {
            error(StatusCode::METHOD_NOT_ALLOWED, "use GET")
        }
        _ => error(
            StatusCode::NOT_FOUND,
            &format!("no admin route {} {}", req.method(), path),
        ),
    }
}

fn authorized(core: &Core, req: &Request<Incoming>) -> bool {
    let Some(token) = &core.config().admin.token else {
        return true;
    };
    req.headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| t.trim() == token.expose())
}

fn error(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    json_response(
        status,
        json!({"error": {"message": message, "type": "admin_error", "code": status.as_u16()}}),
    )
}

/// Prometheus text exposition (format 0.0.4) of a snapshot. Counter names end in `_total`;
/// labels are provider/connection ids and outcomes only (no high-cardinality values).
pub fn metrics(s: &Snapshot) -> String {
    let mut o = String::new();
    let uptime = s.taken_at_unix_ms.saturating_sub(s.started_at_unix_ms) as f64 / 1000.0;
    let _ = writeln!(
        o,
        "# HELP sluice_uptime_seconds Seconds since sluice started.\n# TYPE sluice_uptime_seconds gauge\nsluice_uptime_seconds {uptime}"
    );
    let _ = writeln!(
        o,
        "# HELP sluice_requests_total Finished client requests by outcome.\n# TYPE sluice_requests_total counter"
    );
    let _ = writeln!(o, "sluice_requests_total{{outcome=\"ok\"}} {}", s.totals.ok);
    let _ = writeln!(
        o,
        "sluice_requests_total{{outcome=\"error\"}} {}",
        s.totals.errors
    );
    let _ = writeln!(
        o,
        "# HELP sluice_in_flight_requests Client requests being served.\n# TYPE sluice_in_flight_requests gauge\nsluice_in_flight_requests {}",
        s.totals.in_flight
    );
    let _ = writeln!(
        o,
        "# HELP sluice_response_bytes_total Body bytes relayed to clients.\n# TYPE sluice_response_bytes_total counter\nsluice_response_bytes_total {}",
        s.totals.bytes_out
    );
    let _ = writeln!(
        o,
        "# HELP sluice_upstream_attempts_total Upstream attempts per provider and connection.\n# TYPE sluice_upstream_attempts_total counter"
    );
    for p in &s.providers {
        for c in &p.connections {
            let _ = writeln!(
                o,
                "sluice_upstream_attempts_total{{provider=\"{}\",connection=\"{}\"}} {}",
                p.id, c.id, c.attempts
            );
        }
    }
    let _ = writeln!(
        o,
        "# HELP sluice_upstream_failures_total Failed upstream attempts (transport or 5xx).\n# TYPE sluice_upstream_failures_total counter"
    );
    for p in &s.providers {
        for c in &p.connections {
            let _ = writeln!(
                o,
                "sluice_upstream_failures_total{{provider=\"{}\",connection=\"{}\"}} {}",
                p.id, c.id, c.failures
            );
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::snapshot::{ConnectionView, ProviderView, Totals};

    #[test]
    fn metrics_text_has_counters_per_connection() {
        let s = Snapshot {
            started_at_unix_ms: 1_000,
            taken_at_unix_ms: 3_500,
            totals: Totals {
                requests: 3,
                ok: 2,
                errors: 1,
                in_flight: 1,
                bytes_out: 99,
            },
            providers: vec![ProviderView {
                id: "anthropic".into(),
                connections: vec![ConnectionView {
                    id: "mine".into(),
                    attempts: 4,
                    failures: 1,
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let m = metrics(&s);
        assert!(m.contains("sluice_uptime_seconds 2.5"));
        assert!(m.contains("sluice_requests_total{outcome=\"ok\"} 2"));
        assert!(m.contains(
            "sluice_upstream_attempts_total{provider=\"anthropic\",connection=\"mine\"} 4"
        ));
        assert!(m.contains(
            "sluice_upstream_failures_total{provider=\"anthropic\",connection=\"mine\"} 1"
        ));
        assert!(m.contains("sluice_in_flight_requests 1"));
    }
}
