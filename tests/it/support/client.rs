//! A small HTTP/1.1 client for tests: whole responses ([`Resp`]) or streamed reads
//! ([`Streaming`]), over the hyper-util legacy client. A fresh client (no pooled connections)
//! per call keeps tests independent.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use super::body::ChannelBody;

/// Request body type of the test client.
pub type ReqBody = BoxBody<Bytes, std::io::Error>;

/// How long a test waits for a whole response.
pub const RESPONSE_TIMEOUT: Duration = Duration::from_secs(10);

/// A complete response.
#[derive(Debug, Clone)]
pub struct Resp {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Raw body bytes.
    pub body: Bytes,
}

impl Resp {
    /// The body as JSON (panics with the body text if it is not JSON).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "response body is not JSON ({e}); status {}: {}",
                self.status,
                self.text()
            )
        })
    }

    /// The body as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A response whose body is read incrementally.
#[derive(Debug)]
pub struct Streaming {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Everything received so far.
    pub received: BytesMut,
    body: Incoming,
    done: bool,
}

impl Streaming {
    /// Reads the next data frame; `None` at the end of the body. Panics after `within`, or when
    /// the body errors (a truncated stream is reported as an end with `Err`).
    pub async fn next_chunk(&mut self, within: Duration) -> Option<Result<Bytes, String>> {
        if self.done {
            return None;
        }
        loop {
            let frame = tokio::time::timeout(within, self.body.frame())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "no body frame within {within:?}; received so far: {:?}",
                        self.text()
                    )
                });
            match frame {
                None => {
                    self.done = true;
                    return None;
                }
                Some(Err(e)) => {
                    self.done = true;
                    return Some(Err(e.to_string()));
                }
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.received.extend_from_slice(&data);
                        return Some(Ok(data));
                    }
                }
            }
        }
    }

    /// Reads until `received` satisfies `pred`; panics if the body ends first or after `within`.
    pub async fn read_until(&mut self, within: Duration, pred: impl Fn(&[u8]) -> bool) {
        let waited = tokio::time::timeout(within, async {
            while !pred(&self.received) {
                match self.next_chunk(within).await {
                    Some(Ok(_)) => {}
                    other => return Err(other),
                }
            }
            Ok(())
        })
        .await;
        match waited {
            Ok(Ok(())) => {}
            Ok(Err(end)) => panic!(
                "body ended ({end:?}) before the expected bytes; got {:?}",
                self.text()
            ),
            Err(_) => panic!(
                "expected bytes not received within {within:?}; got {:?}",
                self.text()
            ),
        }
    }

    /// Reads to the end of the body; returns everything received and whether it ended cleanly.
    pub async fn read_to_end(&mut self, within: Duration) -> (Bytes, bool) {
        let mut clean = true;
        let ended = tokio::time::timeout(within, async {
            while let Some(r) = self.next_chunk(within).await {
                if r.is_err() {
                    clean = false;
                }
            }
        })
        .await;
        assert!(
            ended.is_ok(),
            "body did not end within {within:?}; got {:?}",
            self.text()
        );
        (self.received.clone().freeze(), clean)
    }

    /// Everything received so far as (lossy) text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.received).into_owned()
    }
}

/// A body with a `content-length`.
pub fn full(body: impl Into<Bytes>) -> ReqBody {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

/// A body sent as `transfer-encoding: chunked` (no `content-length`).
pub fn chunked(chunks: Vec<Bytes>) -> ReqBody {
    ChannelBody::from_chunks(chunks).boxed()
}

/// A request builder for `method url` with `headers`.
pub fn request(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: ReqBody,
) -> Request<ReqBody> {
    let mut b = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(body).unwrap()
}

fn client() -> Client<HttpConnector, ReqBody> {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(0)
        .build(connector)
}

/// Sends `req` and reads the whole response (panics after [`RESPONSE_TIMEOUT`]).
pub async fn send(req: Request<ReqBody>) -> Resp {
    let desc = format!("{} {}", req.method(), req.uri());
    let got = tokio::time::timeout(RESPONSE_TIMEOUT, async {
        let resp = client()
            .request(req)
            .await
            .unwrap_or_else(|e| panic!("{desc}: {e:?}"));
        let (parts, body) = resp.into_parts();
        let body = body
            .collect()
            .await
            .unwrap_or_else(|e| panic!("{desc}: body: {e:?}"))
            .to_bytes();
        Resp {
            status: parts.status,
            headers: parts.headers,
            body,
        }
    })
    .await;
    got.unwrap_or_else(|_| panic!("{desc}: no complete response within {RESPONSE_TIMEOUT:?}"))
}

/// Sends `req` and returns once the response head arrived.
pub async fn open(req: Request<ReqBody>) -> Streaming {
    let desc = format!("{} {}", req.method(), req.uri());
    let resp = tokio::time::timeout(RESPONSE_TIMEOUT, client().request(req))
        .await
        .unwrap_or_else(|_| panic!("{desc}: no response head within {RESPONSE_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("{desc}: {e:?}"));
    let (parts, body) = resp.into_parts();
    Streaming {
        status: parts.status,
        headers: parts.headers,
        received: BytesMut::new(),
        body,
        done: false,
    }
}

/// `POST url` with a JSON body and extra headers.
pub async fn post_json(url: &str, body: &Value, headers: &[(&str, &str)]) -> Resp {
    let mut h = vec![("content-type", "application/json")];
    h.extend_from_slice(headers);
    send(request(
        Method::POST,
        url,
        &h,
        full(serde_json::to_vec(body).unwrap()),
    ))
    .await
}

/// `POST url` with raw body bytes (content-length set) and headers.
pub async fn post_raw(url: &str, body: impl Into<Bytes>, headers: &[(&str, &str)]) -> Resp {
    send(request(Method::POST, url, headers, full(body))).await
}

/// `GET url` with headers.
pub async fn get(url: &str, headers: &[(&str, &str)]) -> Resp {
    send(request(Method::GET, url, headers, full(Bytes::new()))).await
}

/// `POST url` with a JSON body, returning once the head arrived (for streamed replies).
pub async fn open_json(url: &str, body: &Value, headers: &[(&str, &str)]) -> Streaming {
    let mut h = vec![("content-type", "application/json")];
    h.extend_from_slice(headers);
    open(request(
        Method::POST,
        url,
        &h,
        full(serde_json::to_vec(body).unwrap()),
    ))
    .await
}
