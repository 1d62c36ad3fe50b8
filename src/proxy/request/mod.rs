//! Stage 1 of an inference request: read and check what the client sent — sluice not
//! draining, the client key, the body under `server.max_body`, valid UTF-8, and the JSON probe
//! (`model`, `stream`). Nothing here talks to an upstream.

pub mod body;
use bytes::Bytes;
use http::{Request, header};
use hyper::body::Incoming;

use crate::proxy::Shared;
use crate::proxy::dialect::ProxyError;
use crate::proxy::headers::{self, ClientKeyHeader};
use crate::proxy::request::body::{Probe, probe, read_limited};

/// A checked client request, ready for dispatch.
#[derive(Clone)]
pub struct ClientRequest {
    /// Method, URI and headers as the client sent them.
    pub parts: http::request::Parts,
    /// The whole body (at most `server.max_body` bytes, valid UTF-8, a JSON object).
    pub body: Bytes,
    /// The `model` and `stream` fields.
    pub probe: Probe,
    /// Which header carried the sluice client key (it is stripped before forwarding).
    pub client_key: Option<ClientKeyHeader>,
}

impl ClientRequest {
    /// The client's path and query, e.g. `/v1/messages?beta=true` (`fallback` when absent).
    pub fn path_and_query<'a>(&'a self, fallback: &'a str) -> &'a str {
        self.parts
            .uri
            .path_and_query()
            .map(|pq| pq.as_str())
            .unwrap_or(fallback)
    }
}

/// Reads and checks `req`. Errors are client errors (or `Draining`), rendered in the route's
/// dialect by the caller.
pub async fn read(state: &Shared, req: Request<Incoming>) -> Result<ClientRequest, ProxyError> {
    if state.core.is_draining() {
        return Err(ProxyError::Draining);
    }
    let cfg = state.core.config();
    let (parts, body) = req.into_parts();
    let client_key = headers::check_client_key(&parts.headers, &cfg.server.client_keys)
        .map_err(|_| ProxyError::Unauthorized)?;
    let content_length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body = read_limited(body, content_length, cfg.server.max_body).await?;
    if let Err(e) = std::str::from_utf8(&body) {
        return Err(ProxyError::BadRequest(format!(
            "request body is not valid UTF-8 (invalid byte at offset {}); JSON text must be UTF-8",
            e.valid_up_to()
        )));
    }
    let probe = probe(&body)?;
    Ok(ClientRequest {
        parts,
        body,
        probe,
        client_key,
    })
}
