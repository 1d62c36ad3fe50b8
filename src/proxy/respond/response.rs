//! The response types every listener sends, and the small builders the inference and admin
//! listeners share. Nothing here knows the request path, so `admin` and `routes` depend on
//! this module rather than on `forward`.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::{Either, Full};

use crate::config::Dialect;
use crate::proxy::dialect::{self, ProxyError};
use crate::proxy::respond::commit::EarlyBody;
use crate::proxy::respond::relay::RelayBody;

/// A streamed body: a relay, or an early-committed stream head (see `proxy::commit`).
pub type StreamBody = Either<RelayBody, EarlyBody>;

/// Body of every response the listeners send.
pub type ProxyBody = Either<Full<Bytes>, StreamBody>;

/// A JSON response with `status`.
pub fn json_response(status: StatusCode, v: serde_json::Value) -> Response<Full<Bytes>> {
    json_bytes_response(status, Bytes::from(v.to_string()))
}

/// A complete `application/json` response of `json`, already serialised.
pub fn json_bytes_response(status: StatusCode, json: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(json));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// `err` rendered in dialect `d`, as a listener response.
pub fn error_response(err: &ProxyError, d: Dialect) -> Response<ProxyBody> {
    complete(dialect::render::<Full<Bytes>>(err, d))
}

/// A complete response as a listener response.
pub fn complete(resp: Response<Full<Bytes>>) -> Response<ProxyBody> {
    resp.map(Either::Left)
}
