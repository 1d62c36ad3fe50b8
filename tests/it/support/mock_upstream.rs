//! `MockUpstream`: a scripted Anthropic / OpenAI upstream on `127.0.0.1:0` that records every
//! request it sees.
//!
//! Replies are scripted per (route path, model) with [`MockUpstream::on`], first match wins,
//! optionally only a number of times; anything unscripted gets a default reply in the real wire
//! format of the route (a Messages JSON or the `anthropic-text` fixture stream, a chat
//! completion, a Responses object, `count_tokens`, `GET /v1/models`, and the two subscription
//! account routes of the session-limit reset: `GET /api/oauth/usage?at_wall=1&skip_spend=1`
//! and `POST /api/organizations/{org_uuid}/reset_rate_limits`; 404 elsewhere).
//!
//! Besides the requests it records each exchange's lifetime (request arrival until its
//! response body ended or was dropped: [`MockUpstream::exchanges`],
//! [`MockUpstream::max_concurrency`]) and when each inbound connection closed
//! ([`MockUpstream::wait_closed`]), for the concurrency and cancellation tests.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use sluice::clock::{Clock, Instant, SystemClock};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::body::ChannelBody;
pub use super::recorded::Recorded;
use super::recorded::{body_model, body_stream};
use super::wire::{anthropic_message, anthropic_text_events, chat_completion, responses_object};

/// The subscription usage route (path; sluice sends it with [`USAGE_QUERY`]).
pub const USAGE_PATH: &str = "/api/oauth/usage";
/// The query sluice sends on [`USAGE_PATH`].
pub const USAGE_QUERY: &str = "at_wall=1&skip_spend=1";

/// The reset route of organization `org`.
pub fn reset_rate_limits_path(org: &str) -> String {
    format!("/api/organizations/{org}/reset_rate_limits")
}

type MockBody = BoxBody<Bytes, std::io::Error>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The bytes of `tests/fixtures/sse/<name>.sse`.
pub fn fixture(name: &str) -> Bytes {
    let path = format!(
        "{}/tests/fixtures/sse/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}")))
}

// === Reply ===

/// What the mock does after the last scripted chunk of a streamed reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// End the body cleanly.
    Finish,
    /// Keep the connection open, sending nothing more, until the client goes away.
    Stall,
    /// Abort the connection mid-body (no terminating chunk), 20 ms after the last chunk.
    Abort,
}

#[derive(Debug, Clone)]
enum ReplyBody {
    Bytes(Bytes),
    Chunks {
        chunks: Vec<(Duration, Bytes)>,
        end: StreamEnd,
    },
    /// Close the connection without any response.
    Drop,
    /// A Messages reply carrying `text`, streamed or not as the request asks.
    AnthropicText(String),
    /// The route's default reply.
    Default,
}

/// A scripted reply: status, headers and a body (JSON, SSE chunks, stall, dropped connection).
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    head_delay: Duration,
    body: ReplyBody,
    /// A streamed body waits for this gate before writing chunk `.0`.
    gate: Option<(usize, Gate)>,
}

/// A point a scripted stream waits at until the test opens it (see [`Reply::gated`]): the
/// test decides when the rest is written, with no timing involved.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<Notify>);

impl Gate {
    /// A closed gate.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the gate (before or after the stream reached it).
    pub fn open(&self) {
        self.0.notify_one();
    }
}

impl Reply {
    fn new(status: u16, body: ReplyBody) -> Self {
        Self {
            status,
            headers: Vec::new(),
            head_delay: Duration::ZERO,
            body,
            gate: None,
        }
    }

    /// A streamed body writes its chunks before `chunk` at once, then waits until `gate` is
    /// opened before writing the rest.
    pub fn gated(mut self, chunk: usize, gate: &Gate) -> Self {
        self.gate = Some((chunk, gate.clone()));
        self
    }

    /// The route's default reply (what an unscripted request gets).
    pub fn default_for_route() -> Self {
        Self::new(200, ReplyBody::Default)
    }

    /// `status` with a JSON body.
    pub fn json(status: u16, body: Value) -> Self {
        Self::new(
            status,
            ReplyBody::Bytes(Bytes::from(serde_json::to_vec(&body).unwrap())),
        )
        .header("content-type", "application/json")
    }

    /// `status` with these exact body bytes and content type.
    pub fn raw(status: u16, content_type: &str, body: impl Into<Bytes>) -> Self {
        Self::new(status, ReplyBody::Bytes(body.into())).header("content-type", content_type)
    }

    /// An Anthropic error: `{"type":"error","error":{"type":..,"message":..},"request_id":..}`.
    pub fn anthropic_error(status: u16, kind: &str, message: &str) -> Self {
        Self::json(
            status,
            json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_mock01"}),
        )
        .header("request-id", "req_mock01")
    }

    /// An OpenAI error: `{"error":{"message":..,"type":..,"param":null,"code":..}}`.
    pub fn openai_error(status: u16, kind: &str, code: &str, message: &str) -> Self {
        Self::json(
            status,
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
        )
    }

    /// A 200 SSE stream of these chunks, written one by one, then ended.
    pub fn sse_chunks(chunks: Vec<Bytes>) -> Self {
        let chunks = chunks.into_iter().map(|c| (Duration::ZERO, c)).collect();
        Self::new(
            200,
            ReplyBody::Chunks {
                chunks,
                end: StreamEnd::Finish,
            },
        )
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
    }

    /// A 200 SSE stream of these chunks, each written after its own pause (zero = at once).
    pub fn sse_timed(chunks: Vec<(Duration, Bytes)>) -> Self {
        Self::new(
            200,
            ReplyBody::Chunks {
                chunks,
                end: StreamEnd::Finish,
            },
        )
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
    }

    /// A `status` reply of `content_type` written as these chunks, each after its own pause
    /// (a chunked, non-SSE body; combine with [`Reply::then_abort`] for a body that breaks).
    pub fn chunked(status: u16, content_type: &str, chunks: Vec<(Duration, Bytes)>) -> Self {
        Self::new(
            status,
            ReplyBody::Chunks {
                chunks,
                end: StreamEnd::Finish,
            },
        )
        .header("content-type", content_type)
    }

    /// A 200 SSE stream of `tests/fixtures/sse/<name>.sse` in one write.
    pub fn sse_fixture(name: &str) -> Self {
        Self::sse_chunks(vec![fixture(name)])
    }

    /// A 200 SSE stream of whole `events` (each `event:`/`data:` block ends with a blank line),
    /// one write per event.
    pub fn sse_events(events: &[String]) -> Self {
        Self::sse_chunks(events.iter().map(|e| Bytes::from(e.clone())).collect())
    }

    /// A Messages reply with one text block; SSE when the request says `stream: true`.
    pub fn anthropic_text(text: &str) -> Self {
        Self::new(200, ReplyBody::AnthropicText(text.to_string()))
    }

    /// Closes the connection before sending any response (a transport error upstream).
    pub fn drop_connection() -> Self {
        Self::new(0, ReplyBody::Drop)
    }

    /// Adds a response header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Waits this long before sending the response head.
    pub fn delay(mut self, d: Duration) -> Self {
        self.head_delay = d;
        self
    }

    /// Re-splits a streamed body into `pieces` writes of about equal size (cut at arbitrary
    /// byte offsets, even inside an event or a UTF-8 sequence), `pause` before each but the first.
    pub fn split(mut self, pieces: usize, pause: Duration) -> Self {
        if let ReplyBody::Chunks { chunks, end } = &self.body {
            let all: Vec<u8> = chunks.iter().flat_map(|(_, c)| c.iter().copied()).collect();
            let size = all.len().div_ceil(pieces.max(1)).max(1);
            let chunks = all
                .chunks(size)
                .enumerate()
                .map(|(i, c)| {
                    (
                        if i == 0 { Duration::ZERO } else { pause },
                        Bytes::copy_from_slice(c),
                    )
                })
                .collect();
            self.body = ReplyBody::Chunks { chunks, end: *end };
        }
        self
    }

    /// Pauses `pause` before every chunk but the first.
    pub fn pace(mut self, pause: Duration) -> Self {
        if let ReplyBody::Chunks { chunks, .. } = &mut self.body {
            for (i, (d, _)) in chunks.iter_mut().enumerate() {
                *d = if i == 0 { Duration::ZERO } else { pause };
            }
        }
        self
    }

    /// After the chunks, hold the connection open without sending more.
    pub fn then_stall(mut self) -> Self {
        if let ReplyBody::Chunks { end, .. } = &mut self.body {
            *end = StreamEnd::Stall;
        }
        self
    }

    /// After the chunks, abort the connection mid-body.
    pub fn then_abort(mut self) -> Self {
        if let ReplyBody::Chunks { end, .. } = &mut self.body {
            *end = StreamEnd::Abort;
        }
        self
    }

    /// The exact bytes a streamed or fixed reply sends (for byte-exact assertions).
    pub fn body_bytes(&self) -> Bytes {
        match &self.body {
            ReplyBody::Bytes(b) => b.clone(),
            ReplyBody::Chunks { chunks, .. } => Bytes::from(
                chunks
                    .iter()
                    .flat_map(|(_, c)| c.iter().copied())
                    .collect::<Vec<u8>>(),
            ),
            _ => Bytes::new(),
        }
    }
}

// === MockUpstream ===

#[derive(Debug)]
struct Rule {
    path: String,
    model: Option<String>,
    header: Option<(String, String)>,
    body: Option<String>,
    remaining: Option<usize>,
    reply: Reply,
}

/// One request/response exchange as the mock lived it.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// Request path (no query).
    pub path: String,
    /// The body's `model`, if any.
    pub model: Option<String>,
    /// When the request (head and whole body) had arrived.
    pub started: Instant,
    /// When the response body ended or was dropped (the client went away); `None` while
    /// the exchange is still in flight.
    pub ended: Option<Instant>,
}

#[derive(Debug, Default)]
struct State {
    rules: Mutex<Vec<Rule>>,
    requests: Mutex<Vec<Recorded>>,
    arrived: Notify,
    exchanges: Mutex<Vec<Exchange>>,
    /// When each inbound connection was closed (by either side), in order.
    closed: Mutex<Vec<Instant>>,
    closed_notify: Notify,
    /// When set, the only inference paths this mock serves (others answer 404).
    speaks: Mutex<Option<Vec<&'static str>>>,
}

/// Marks its exchange ended when dropped (response body finished, or handler/body dropped).
#[derive(Debug)]
struct ExchangeGuard {
    state: Arc<State>,
    idx: usize,
}

impl Drop for ExchangeGuard {
    fn drop(&mut self) {
        let mut ex = self
            .state
            .exchanges
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(e) = ex.get_mut(self.idx) {
            e.ended.get_or_insert_with(|| SystemClock.now());
        }
    }
}

/// A response body that keeps its exchange in flight until it ends or is dropped.
struct Tracked {
    inner: MockBody,
    guard: Option<ExchangeGuard>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The most intervals open at once (an interval with no end is open until now).
fn max_overlap<'a>(intervals: impl Iterator<Item = &'a Exchange>) -> usize {
    let now = SystemClock.now();
    let mut edges: Vec<(Instant, i32)> = Vec::new();
    for e in intervals {
        edges.push((e.started, 1));
        edges.push((e.ended.unwrap_or(now).max(e.started), -1));
    }
    // At equal instants an end comes before a start (back-to-back is not overlap).
    edges.sort();
    let (mut cur, mut max) = (0i32, 0i32);
    for (_, d) in edges {
        cur += d;
        max = max.max(cur);
    }
    usize::try_from(max).unwrap_or(0)
}

/// A scripted upstream. Dropping it closes the listener and every open connection.
#[derive(Debug)]
pub struct MockUpstream {
    addr: SocketAddr,
    state: Arc<State>,
    cancel: CancellationToken,
}

/// Scripts one rule: `mock.on("/v1/messages").model("m").times(1).reply(r)`.
#[derive(Debug)]
#[must_use = "a rule does nothing until .reply(..)"]
pub struct RuleBuilder<'a> {
    mock: &'a MockUpstream,
    path: String,
    model: Option<String>,
    header: Option<(String, String)>,
    body: Option<String>,
    remaining: Option<usize>,
}

impl RuleBuilder<'_> {
    /// Only requests whose JSON body has this `model`.
    pub fn model(mut self, model: &str) -> Self {
        self.model = Some(model.to_string());
        self
    }

    /// Only requests whose header `name` contains `needle` (e.g. the connection's key in
    /// `authorization` or `x-api-key`, to script one connection of a provider).
    pub fn header(mut self, name: &str, needle: &str) -> Self {
        self.header = Some((name.to_ascii_lowercase(), needle.to_string()));
        self
    }

    /// Only requests whose raw body contains `needle` (e.g. `"role":"tool"` to answer a
    /// tool result differently from the first turn).
    pub fn body_contains(mut self, needle: &str) -> Self {
        self.body = Some(needle.to_string());
        self
    }

    /// Only the next `n` matching requests; later ones fall through to the next rule.
    pub fn times(mut self, n: usize) -> Self {
        self.remaining = Some(n);
        self
    }

    /// Registers the rule with this reply.
    pub fn reply(self, reply: Reply) {
        let rule = Rule {
            path: self.path,
            model: self.model,
            header: self.header,
            body: self.body,
            remaining: self.remaining,
            reply,
        };
        self.mock.state.rules.lock().unwrap().push(rule);
    }
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl MockUpstream {
    /// Binds `127.0.0.1:0` and starts serving (HTTP/1.1 and h2c, `TCP_NODELAY`).
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        let cancel = CancellationToken::new();
        tokio::spawn(accept_loop(listener, state.clone(), cancel.clone()));
        Self {
            addr,
            state,
            cancel,
        }
    }

    /// `http://127.0.0.1:PORT`, the provider `base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Makes this mock speak only OpenAI Chat Completions (`/v1/chat/completions`, and
    /// `/v1/models`): every other path answers 404, like Ollama or DeepSeek would.
    pub fn speak_only_chat(&self) {
        *self.state.speaks.lock().unwrap() = Some(vec!["/v1/chat/completions", "/v1/models"]);
    }

    /// Makes this mock speak only Anthropic Messages (`/v1/messages`, count_tokens and
    /// `/v1/models`): every other path answers 404.
    pub fn speak_only_anthropic(&self) {
        *self.state.speaks.lock().unwrap() = Some(vec![
            "/v1/messages",
            "/v1/messages/count_tokens",
            "/v1/models",
        ]);
    }

    /// Starts a rule for requests to `path` (no query); `"*"` matches any path.
    pub fn on(&self, path: &str) -> RuleBuilder<'_> {
        RuleBuilder {
            mock: self,
            path: path.to_string(),
            model: None,
            header: None,
            body: None,
            remaining: None,
        }
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }

    /// Requests received for `path` (no query).
    pub fn requests_to(&self, path: &str) -> Vec<Recorded> {
        self.requests()
            .into_iter()
            .filter(|r| r.path == path)
            .collect()
    }

    /// How many requests were received in all.
    pub fn count(&self) -> usize {
        self.state.requests.lock().unwrap().len()
    }

    /// The only request received; panics unless exactly one arrived.
    pub fn single(&self) -> Recorded {
        let all = self.requests();
        assert_eq!(
            all.len(),
            1,
            "expected exactly one upstream request, got {all:#?}"
        );
        all.into_iter().next().unwrap()
    }

    /// Every exchange so far (request arrival until its response body ended or was dropped),
    /// in arrival order.
    pub fn exchanges(&self) -> Vec<Exchange> {
        self.state.exchanges.lock().unwrap().clone()
    }

    /// Exchanges in flight now.
    pub fn in_flight(&self) -> usize {
        self.exchanges()
            .iter()
            .filter(|e| e.ended.is_none())
            .count()
    }

    /// The most exchanges that were ever in flight at the same time.
    pub fn max_concurrency(&self) -> usize {
        max_overlap(self.exchanges().iter())
    }

    /// The most exchanges for `model` that were ever in flight at the same time.
    pub fn max_concurrency_of(&self, model: &str) -> usize {
        let all = self.exchanges();
        max_overlap(all.iter().filter(|e| e.model.as_deref() == Some(model)))
    }

    /// When each inbound connection closed so far, in order.
    pub fn closed_connections(&self) -> Vec<Instant> {
        self.state.closed.lock().unwrap().clone()
    }

    /// Waits (up to `within`) until at least `n` inbound connections have closed; returns
    /// when the `n`th closed, or `None` if that did not happen in time.
    pub async fn wait_closed(&self, n: usize, within: Duration) -> Option<Instant> {
        tokio::time::timeout(within, async {
            loop {
                let notified = self.state.closed_notify.notified();
                if let Some(at) = self.closed_connections().get(n.saturating_sub(1)) {
                    return *at;
                }
                notified.await;
            }
        })
        .await
        .ok()
    }

    /// Waits (up to 5 s) until at least `n` requests arrived.
    pub async fn wait_for(&self, n: usize) -> Vec<Recorded> {
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let notified = self.state.arrived.notified();
                if self.count() >= n {
                    return;
                }
                notified.await;
            }
        })
        .await;
        assert!(
            waited.is_ok(),
            "mock upstream: waited 5s for {n} requests, got {:#?}",
            self.requests()
        );
        self.requests()
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, cancel: CancellationToken) {
    loop {
        let accepted = tokio::select! {
            _ = cancel.cancelled() => return,
            a = listener.accept() => a,
        };
        let Ok((tcp, _)) = accepted else { continue };
        let _ = tcp.set_nodelay(true);
        let state = state.clone();
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let svc_cancel = cancel.clone();
            let svc_state = state.clone();
            let svc = service_fn(move |req| handle(svc_state.clone(), svc_cancel.clone(), req));
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tcp), svc);
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = conn => {
                    state.closed.lock().unwrap_or_else(|e| e.into_inner()).push(SystemClock.now());
                    state.closed_notify.notify_waiters();
                }
            }
        });
    }
}

fn pick(state: &State, rec: &Recorded, model: Option<&str>) -> Reply {
    let (path, headers) = (rec.path.as_str(), &rec.headers);
    let body = String::from_utf8_lossy(&rec.body);
    let mut rules = state.rules.lock().unwrap();
    let found = rules.iter_mut().find(|r| {
        (r.path == "*" || r.path == path)
            && r.model.as_deref().is_none_or(|m| Some(m) == model)
            && r.header.as_ref().is_none_or(|(name, needle)| {
                headers
                    .get_all(name.as_str())
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .any(|v| v.contains(needle.as_str()))
            })
            && r.body.as_ref().is_none_or(|b| body.contains(b.as_str()))
            && r.remaining != Some(0)
    });
    match found {
        Some(rule) => {
            if let Some(n) = rule.remaining.as_mut() {
                *n -= 1;
            }
            rule.reply.clone()
        }
        None => Reply::default_for_route(),
    }
}

async fn handle(
    state: Arc<State>,
    cancel: CancellationToken,
    req: Request<Incoming>,
) -> Result<Response<MockBody>, BoxError> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await?.to_bytes();
    let rec = Recorded {
        method: parts.method.clone(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().map(str::to_string),
        headers: parts.headers.clone(),
        body: body.clone(),
    };
    let model = body_model(&body);
    let speaks = state.speaks.lock().unwrap().clone();
    let reply = match speaks {
        Some(paths) if !paths.contains(&rec.path.as_str()) => Reply::openai_error(
            404,
            "invalid_request_error",
            "not_found",
            &format!("mock: this server does not speak {}", rec.path),
        ),
        _ => pick(&state, &rec, model.as_deref()),
    };
    let guard = {
        let mut ex = state.exchanges.lock().unwrap();
        ex.push(Exchange {
            path: rec.path.clone(),
            model: model.clone(),
            started: SystemClock.now(),
            ended: None,
        });
        ExchangeGuard {
            state: state.clone(),
            idx: ex.len() - 1,
        }
    };
    state.requests.lock().unwrap().push(rec.clone());
    state.arrived.notify_waiters();

    if !reply.head_delay.is_zero() {
        tokio::time::sleep(reply.head_delay).await;
    }
    let reply = match reply.body {
        ReplyBody::Default => default_reply(&rec),
        ReplyBody::AnthropicText(ref text) => {
            anthropic_text_reply(text, &rec, reply.headers.clone())
        }
        _ => reply,
    };
    let mut builder =
        Response::builder().status(StatusCode::from_u16(reply.status).unwrap_or(StatusCode::OK));
    for (k, v) in &reply.headers {
        builder = builder.header(k.as_str(), HeaderValue::from_str(v).unwrap());
    }
    let body: MockBody = match reply.body {
        ReplyBody::Drop => return Err("mock: dropping the connection as scripted".into()),
        ReplyBody::Bytes(b) => Full::new(b).map_err(|never| match never {}).boxed(),
        ReplyBody::Chunks { chunks, end } => {
            let (tx, body) = ChannelBody::channel();
            let gate = reply.gate;
            tokio::spawn(async move {
                for (i, (pause, chunk)) in chunks.into_iter().enumerate() {
                    if let Some((_, g)) = gate.as_ref().filter(|(at, _)| *at == i) {
                        g.0.notified().await;
                    }
                    if !pause.is_zero() {
                        tokio::time::sleep(pause).await;
                    }
                    if tx.send(Ok(chunk)).await.is_err() {
                        return;
                    }
                }
                match end {
                    StreamEnd::Finish => {}
                    StreamEnd::Stall => {
                        tokio::select! {
                            _ = tx.closed() => {}
                            _ = cancel.cancelled() => {}
                        }
                    }
                    StreamEnd::Abort => {
                        // Let hyper flush what was sent; an error drops its unflushed buffer.
                        tokio::time::sleep(Duration::from_millis(20)).await;
                        let _ = tx
                            .send(Err(std::io::Error::other(
                                "mock: aborting the stream as scripted",
                            )))
                            .await;
                    }
                }
            });
            body.boxed()
        }
        ReplyBody::Default | ReplyBody::AnthropicText(_) => unreachable!("resolved above"),
    };
    let body = Tracked {
        inner: body,
        guard: Some(guard),
    };
    Ok(builder.body(body.boxed())?)
}

// === default replies in the real wire formats ===

fn default_reply(rec: &Recorded) -> Reply {
    let model = rec.model().unwrap_or_else(|| "mock-model".to_string());
    let stream = body_stream(&rec.body);
    match (&rec.method, rec.path.as_str()) {
        (&Method::POST, "/v1/messages") if stream => Reply::sse_fixture("anthropic-text"),
        (&Method::POST, "/v1/messages") => {
            Reply::json(200, anthropic_message(&model, "Hello from the mock."))
        }
        (&Method::POST, "/v1/messages/count_tokens") => {
            Reply::json(200, json!({"input_tokens": (rec.body.len() / 4).max(1)}))
        }
        (&Method::POST, "/v1/chat/completions") if stream => Reply::sse_fixture("openai-chat-text"),
        (&Method::POST, "/v1/chat/completions") => {
            Reply::json(200, chat_completion(&model, "Hello from the mock."))
        }
        (&Method::POST, "/v1/responses") if stream => Reply::sse_fixture("openai-responses"),
        (&Method::POST, "/v1/responses") => {
            Reply::json(200, responses_object(&model, "Hello from the mock."))
        }
        (&Method::GET, USAGE_PATH) => usage_reply(rec),
        (&Method::POST, path) if reset_org(path).is_some() => reset_reply(rec),
        (&Method::GET, "/v1/models") => Reply::json(
            200,
            json!({
                "data": [{"id": "mock-model", "type": "model", "display_name": "Mock", "created_at": "2025-01-01T00:00:00Z"}],
                "has_more": false, "first_id": "mock-model", "last_id": "mock-model"
            }),
        ),
        _ => Reply::anthropic_error(
            404,
            "not_found_error",
            &format!("mock: no route {} {}", rec.method, rec.path),
        ),
    }
}

/// The default usage answer: the reset arm with a reset available; a 400 without the
/// query sluice must send.
fn usage_reply(rec: &Recorded) -> Reply {
    if rec.query.as_deref() != Some(USAGE_QUERY) {
        return Reply::anthropic_error(
            400,
            "invalid_request_error",
            &format!("mock: usage expects ?{USAGE_QUERY}, got {:?}", rec.query),
        );
    }
    Reply::json(
        200,
        json!({"five_hour": {"utilization": 1.0, "resets_at": "2030-01-01T00:00:00Z"},
               "juniper_tide": {"arm": "reset", "available": true}}),
    )
}

/// The organization of a reset route, when `path` is one.
fn reset_org(path: &str) -> Option<&str> {
    path.strip_prefix("/api/organizations/")?
        .strip_suffix("/reset_rate_limits")
        .filter(|org| !org.is_empty() && !org.contains('/'))
}

/// The default reset answer: `reset`; a 400 unless the body is `{"program":"juniper_tide"}`.
fn reset_reply(rec: &Recorded) -> Reply {
    let body: Option<Value> = serde_json::from_slice(&rec.body).ok();
    if body != Some(json!({"program": "juniper_tide"})) {
        return Reply::anthropic_error(
            400,
            "invalid_request_error",
            "mock: reset expects {\"program\":\"juniper_tide\"}",
        );
    }
    Reply::json(200, json!({"result": "reset"}))
}

fn anthropic_text_reply(text: &str, rec: &Recorded, headers: Vec<(String, String)>) -> Reply {
    let model = rec.model().unwrap_or_else(|| "mock-model".to_string());
    let mut reply = if body_stream(&rec.body) {
        Reply::sse_events(&anthropic_text_events(&model, text))
    } else {
        Reply::json(200, anthropic_message(&model, text))
    };
    reply.headers.extend(headers);
    reply
}
