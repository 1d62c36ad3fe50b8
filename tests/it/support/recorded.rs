//! `Recorded`: one request the mock upstream received (method, path, query, headers, body).

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::Value;

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Method.
    pub method: Method,
    /// Path without the query, e.g. `/v1/messages`.
    pub path: String,
    /// The query string without `?`, if any.
    pub query: Option<String>,
    /// Headers as received.
    pub headers: HeaderMap,
    /// Body bytes as received.
    pub body: Bytes,
}

impl Recorded {
    /// The body parsed as JSON (panics if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("upstream body is not JSON ({e}): {:?}", self.body))
    }

    /// The body's `model`, if it is JSON with a string `model`.
    pub fn model(&self) -> Option<String> {
        body_model(&self.body)
    }

    /// A header value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// `path?query` as the upstream saw it.
    pub fn path_and_query(&self) -> String {
        match &self.query {
            Some(q) => format!("{}?{q}", self.path),
            None => self.path.clone(),
        }
    }
}

pub(crate) fn body_model(body: &[u8]) -> Option<String> {
    serde_json::from_slice::<Value>(body)
        .ok()?
        .get("model")?
        .as_str()
        .map(str::to_string)
}

pub(crate) fn body_stream(body: &[u8]) -> bool {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("stream")?.as_bool())
        .unwrap_or(false)
}
