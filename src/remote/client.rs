//! `AdminClient`: calls a running sluice's admin API (plain HTTP on its loopback listener)
//! with the bearer token, each call bounded by [`CALL_TIMEOUT`].

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::config::Secret;
use crate::console::door::DoorError;
use crate::core::operator::control::ControlError;

/// Longest one admin call (connect, answer, body) may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest admin answer read, in bytes (snapshots are far smaller).
const MAX_ANSWER: usize = 32 * 1024 * 1024;

/// A client of one sluice's admin API. Cheap to share behind an `Arc`.
pub struct AdminClient {
    /// `http://host:port`, no trailing slash.
    base: String,
    token: Option<Secret>,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// `http://host:port` for an admin address given as `host:port` or `http://host:port[/]`.
/// Errors: another scheme (the admin listener speaks plain HTTP), a path, or not a URL.
pub fn admin_base(given: &str) -> Result<String, String> {
    let given = given.trim().trim_end_matches('/');
    let with_scheme = if given.contains("://") {
        given.to_owned()
    } else {
        format!("http://{given}")
    };
    let uri: http::Uri = with_scheme
        .parse()
        .map_err(|e| format!("--admin '{given}' is not a URL: {e}"))?;
    if uri.scheme_str() != Some("http") {
        return Err(format!(
            "--admin '{given}': the admin listener speaks plain http, e.g. http://127.0.0.1:8788"
        ));
    }
    let Some(authority) = uri.authority() else {
        return Err(format!(
            "--admin '{given}' names no host, e.g. http://127.0.0.1:8788"
        ));
    };
    if uri.path() != "/" && !uri.path().is_empty() {
        return Err(format!(
            "--admin '{given}' has a path; give only the address, e.g. http://{authority}"
        ));
    }
    Ok(format!("http://{authority}"))
}

impl AdminClient {
    /// A client of the admin API at `base` (see [`admin_base`]), sending `token` as the
    /// bearer token when given.
    pub fn new(base: String, token: Option<Secret>) -> Self {
        let client = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        AdminClient {
            base,
            token,
            client,
        }
    }

    /// The admin API's address, `http://host:port` (no secret in it).
    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Request<Full<Bytes>>, DoorError> {
        let bytes = body.map_or_else(Bytes::new, |v| Bytes::from(v.to_string()));
        let mut req = Request::new(Full::new(bytes));
        *req.method_mut() = method;
        *req.uri_mut() = format!("{}{path}", self.base)
            .parse()
            .map_err(|e: http::uri::InvalidUri| DoorError::Unreachable(e.to_string()))?;
        if body.is_some() {
            req.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
        }
        if let Some(t) = &self.token {
            let v = HeaderValue::from_str(&format!("Bearer {}", t.expose()))
                .map_err(|_| DoorError::Refused("the admin token is not a valid header".into()))?;
            req.headers_mut().insert(header::AUTHORIZATION, v);
        }
        Ok(req)
    }

    /// Sends one call and returns its JSON answer. Errors: not reachable in
    /// [`CALL_TIMEOUT`] or not JSON ([`DoorError::Unreachable`]); a 400 naming a field
    /// ([`ControlError::Invalid`]); any other error status ([`DoorError::Refused`], with the
    /// admin API's message — e.g. read-only, unknown id, wrong token).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, DoorError> {
        self.call_within(method, path, body, CALL_TIMEOUT).await
    }

    /// [`AdminClient::call`] bounded by `limit` instead of [`CALL_TIMEOUT`] (a verified clear
    /// waits for its probe).
    pub async fn call_within(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        limit: std::time::Duration,
    ) -> Result<Value, DoorError> {
        let req = self.request(method, path, body)?;
        let work = async {
            let resp = self
                .client
                .request(req)
                .await
                .map_err(|e| DoorError::Unreachable(transport_text(&e)))?;
            let status = resp.status();
            let body = http_body_util::Limited::new(resp.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| DoorError::Unreachable(e.to_string()))?
                .to_bytes();
            Ok::<_, DoorError>((status, body))
        };
        let (status, body) = tokio::time::timeout(limit, work)
            .await
            .map_err(|_| DoorError::Unreachable(format!("no answer within {limit:?}")))??;
        answer(status, &body)
    }

    /// Opens the snapshot stream (`GET /api/snapshot/stream`); the head must come within
    /// [`CALL_TIMEOUT`]. Errors: as [`AdminClient::call`]; a 2xx that is not an event stream
    /// is [`DoorError::Unreachable`].
    pub async fn open_stream(&self) -> Result<Response<Incoming>, DoorError> {
        let req = self.request(Method::GET, crate::admin::STREAM_PATH, None)?;
        let resp = tokio::time::timeout(CALL_TIMEOUT, self.client.request(req))
            .await
            .map_err(|_| DoorError::Unreachable(format!("no answer within {CALL_TIMEOUT:?}")))?
            .map_err(|e| DoorError::Unreachable(transport_text(&e)))?;
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status();
        let body = tokio::time::timeout(
            CALL_TIMEOUT,
            http_body_util::Limited::new(resp.into_body(), 64 * 1024).collect(),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
        Err(answer(status, &body).err().unwrap_or_else(|| {
            DoorError::Unreachable("the snapshot stream answered without a stream".into())
        }))
    }
}

/// The transport error with its cause (hyper's top-level text is just "client error").
fn transport_text(e: &hyper_util::client::legacy::Error) -> String {
    use std::error::Error as _;
    match e.source() {
        Some(s) => format!("{e} ({s})"),
        None => e.to_string(),
    }
}

/// The JSON of a 2xx, or the error the admin API's `{"error":{"message","field"?}}` names.
fn answer(status: StatusCode, body: &[u8]) -> Result<Value, DoorError> {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    if status.is_success() {
        return json.ok_or_else(|| DoorError::Unreachable("the answer is not JSON".into()));
    }
    let err = json.as_ref().and_then(|v| v.get("error"));
    let message = err
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .map_or_else(|| format!("admin API answered {status}"), str::to_owned);
    if status == StatusCode::BAD_REQUEST
        && let Some(field) = err.and_then(|e| e.get("field")).and_then(Value::as_str)
    {
        let prefix = format!("{field}: ");
        let message = message.strip_prefix(&prefix).unwrap_or(&message).to_owned();
        return Err(DoorError::Control(ControlError::Invalid {
            field: field.to_owned(),
            message,
        }));
    }
    Err(DoorError::Refused(message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_addresses_are_normalised_and_other_schemes_refused() {
        assert_eq!(
            admin_base("127.0.0.1:8788").unwrap(),
            "http://127.0.0.1:8788"
        );
        assert_eq!(
            admin_base("http://localhost:9/").unwrap(),
            "http://localhost:9"
        );
        assert!(
            admin_base("https://127.0.0.1:8788")
                .unwrap_err()
                .contains("plain http")
        );
        assert!(
            admin_base("http://127.0.0.1:8788/api")
                .unwrap_err()
                .contains("path")
        );
        assert!(admin_base("not a url").is_err());
    }

    #[test]
    fn error_answers_keep_the_admin_api_message_and_field() {
        let ro = br#"{"error":{"message":"sluice runs read-only (--readonly): operator actions are refused","type":"admin_error","code":403}}"#;
        match answer(StatusCode::FORBIDDEN, ro) {
            Err(DoorError::Refused(m)) => assert!(m.contains("read-only"), "{m}"),
            other => panic!("{other:?}"),
        }
        let bad = br#"{"error":{"message":"queue.max_wait: not a duration","type":"invalid_request_error","code":400,"field":"queue.max_wait"}}"#;
        assert_eq!(
            answer(StatusCode::BAD_REQUEST, bad),
            Err(DoorError::Control(ControlError::Invalid {
                field: "queue.max_wait".into(),
                message: "not a duration".into()
            }))
        );
        assert!(matches!(
            answer(StatusCode::BAD_GATEWAY, b"<html>"),
            Err(DoorError::Refused(m)) if m.contains("502")
        ));
        assert_eq!(answer(StatusCode::OK, br#"{"a":1}"#).unwrap()["a"], 1);
        assert!(matches!(
            answer(StatusCode::OK, b"nope"),
            Err(DoorError::Unreachable(_))
        ));
    }
}
