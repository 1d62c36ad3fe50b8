//! The load generator (closed loop, `c` keep-alive connections) and the SSE probe, both on
//! hyper's low-level client connection so the rig costs as little as possible per request.
//! Every loop is bounded by a deadline and a request cap.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// One kind of request the rig sends.
#[derive(Clone, Debug)]
pub struct Req {
    /// Route path, e.g. `/v1/messages`.
    pub path: &'static str,
    /// JSON body.
    pub body: Bytes,
    /// Other bodies (other models) of the same route: when non-empty, each request takes one
    /// of `body` and these at random (S5's "requested model chosen at random").
    pub more: Arc<[Bytes]>,
    /// Take `more` in order (each loop starts at its own offset) instead of at random: a pass
    /// that must reach every model once, such as S5's lockout setup.
    pub in_order: bool,
    /// Status the rig counts as expected (200, or the fast-fail status for S7).
    pub expect_ok: bool,
}

impl Req {
    /// An Anthropic request for `model` with bench knobs `knobs` (`stream` adds
    /// `"stream":true`).
    pub fn anthropic(model: &str, knobs: &str, stream: bool) -> Self {
        let body = format!(
            r#"{{"model":"{model}","max_tokens":64,"stream":{stream},"bench":"{knobs}","messages":[{{"role":"user","content":"Say hello in one short sentence, please."}}]}}"#
        );
        Self {
            path: "/v1/messages",
            body: Bytes::from(body),
            more: Arc::from([]),
            in_order: false,
            expect_ok: true,
        }
    }

    /// An OpenAI chat-completions request.
    pub fn openai(model: &str, knobs: &str, stream: bool) -> Self {
        let body = format!(
            r#"{{"model":"{model}","stream":{stream},"bench":"{knobs}","messages":[{{"role":"user","content":"Say hello in one short sentence, please."}}]}}"#
        );
        Self {
            path: "/v1/chat/completions",
            body: Bytes::from(body),
            more: Arc::from([]),
            in_order: false,
            expect_ok: true,
        }
    }

    /// Anthropic requests for each of `models` (at least one), one chosen at random per
    /// request.
    pub fn anthropic_any(models: &[String], knobs: &str) -> Self {
        let bodies: Vec<Bytes> = models
            .iter()
            .map(|m| Self::anthropic(m, knobs, false).body)
            .collect();
        let mut r = Self::anthropic(models.first().map_or("claude-bench", |m| m), knobs, false);
        r.more = Arc::from(bodies);
        r
    }

    /// The body of a loop's next request: `body`, the next of `more` when `in_order`
    /// (`seed` counts), else a pseudo-random one (xorshift on `seed`, so every loop walks its
    /// own order and the rig costs nothing).
    fn body_for(&self, seed: &mut u64) -> Bytes {
        if self.more.is_empty() {
            return self.body.clone();
        }
        if self.in_order {
            let i = (*seed % self.more.len() as u64) as usize;
            *seed = seed.wrapping_add(1);
            return self
                .more
                .get(i)
                .cloned()
                .unwrap_or_else(|| self.body.clone());
        }
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let i = (*seed % self.more.len() as u64) as usize;
        self.more
            .get(i)
            .cloned()
            .unwrap_or_else(|| self.body.clone())
    }
}

/// A latency histogram in nanoseconds (1 µs … 120 s, 3 significant digits).
pub fn hist() -> Histogram<u64> {
    Histogram::new_with_bounds(1_000, 120_000_000_000, 3).expect("constant histogram bounds")
}

/// What one closed-loop window measured.
#[derive(Debug)]
pub struct LoadResult {
    /// Latency of completed requests, ns.
    pub latency: Histogram<u64>,
    /// Requests answered as expected.
    pub ok: u64,
    /// Requests answered otherwise, or failed.
    pub errors: u64,
    /// Connections the rig could not open.
    pub connect_errors: u64,
    /// Wall time of the window.
    pub elapsed: Duration,
}

impl LoadResult {
    /// Requests per second over the window.
    pub fn rps(&self) -> f64 {
        (self.ok + self.errors) as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
    /// Percentile `q` (0–100) in µs.
    pub fn us(&self, q: f64) -> f64 {
        self.latency.value_at_percentile(q) as f64 / 1000.0
    }
}

pub(crate) async fn connect(addr: SocketAddr) -> Option<SendRequest<Full<Bytes>>> {
    let sock = TcpStream::connect(addr).await.ok()?;
    sock.set_nodelay(true).ok()?;
    let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(sock))
        .await
        .ok()?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    Some(send)
}

pub(crate) fn request(addr: SocketAddr, req: &Req, body: Bytes) -> hyper::Request<Full<Bytes>> {
    let mut r = hyper::Request::new(Full::new(body));
    *r.method_mut() = hyper::Method::POST;
    *r.uri_mut() = req.path.parse().unwrap_or_default();
    let h = r.headers_mut();
    if let Ok(v) = addr.to_string().parse() {
        h.insert(hyper::header::HOST, v);
    }
    h.insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/json"),
    );
    h.insert(
        "anthropic-version",
        hyper::header::HeaderValue::from_static("2023-06-01"),
    );
    h.insert(
        "x-api-key",
        hyper::header::HeaderValue::from_static("sk-bench"),
    );
    h.insert(
        "authorization",
        hyper::header::HeaderValue::from_static("Bearer sk-bench"),
    );
    r
}

/// Runs `conns` closed loops of `req` against `addr` for `dur` (at most `cap` requests).
pub async fn closed_loop(
    addr: SocketAddr,
    req: &Req,
    conns: usize,
    dur: Duration,
    cap: u64,
) -> LoadResult {
    let start = Instant::now();
    let deadline = start + dur;
    let per_conn = cap / conns.max(1) as u64 + 1;
    let mut tasks = Vec::with_capacity(conns);
    for i in 0..conns {
        let req = req.clone();
        tasks.push(tokio::spawn(async move {
            one_loop(addr, &req, deadline, per_conn, i as u64).await
        }));
    }
    let mut total = LoadResult {
        latency: hist(),
        ok: 0,
        errors: 0,
        connect_errors: 0,
        elapsed: Duration::ZERO,
    };
    for t in tasks {
        if let Ok(r) = t.await {
            let _ = total.latency.add(&r.latency);
            total.ok += r.ok;
            total.errors += r.errors;
            total.connect_errors += r.connect_errors;
        }
    }
    total.elapsed = start.elapsed();
    total
}

async fn one_loop(
    addr: SocketAddr,
    req: &Req,
    deadline: Instant,
    cap: u64,
    loop_id: u64,
) -> LoadResult {
    let mut seed = if req.in_order {
        loop_id * cap
    } else {
        0x9E37_79B9_7F4A_7C15 ^ (loop_id.wrapping_add(1) << 20)
    };
    let mut r = LoadResult {
        latency: hist(),
        ok: 0,
        errors: 0,
        connect_errors: 0,
        elapsed: Duration::ZERO,
    };
    let mut send = None;
    let mut n = 0;
    while n < cap && Instant::now() < deadline {
        if send.is_none() {
            send = connect(addr).await;
            if send.is_none() {
                r.connect_errors += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        }
        let Some(s) = send.as_mut() else { continue };
        n += 1;
        let t0 = Instant::now();
        let res = async {
            let resp = s
                .send_request(request(addr, req, req.body_for(&mut seed)))
                .await
                .ok()?;
            let good = resp.status().is_success() == req.expect_ok;
            let _ = resp.into_body().collect().await.ok()?;
            Some(good)
        }
        .await;
        let ns = t0.elapsed().as_nanos() as u64;
        match res {
            Some(true) => {
                r.ok += 1;
                let _ = r.latency.record(ns.max(1_000));
            }
            Some(false) => r.errors += 1,
            None => {
                r.errors += 1;
                send = None;
            }
        }
    }
    r
}

/// What the SSE probe measured.
#[derive(Debug)]
pub struct SseResult {
    /// Time to the first body byte, ns.
    pub ttfb: Histogram<u64>,
    /// Gaps between successive events, ns.
    pub gaps: Histogram<u64>,
    /// Streams completed.
    pub streams: u64,
    /// Events received.
    pub frames: u64,
    /// Events expected.
    pub expected: u64,
    /// Gaps longer than the stall threshold.
    pub stalls: u64,
    /// Longest gap, ns.
    pub max_gap_ns: u64,
    /// Streams that failed to open or broke.
    pub errors: u64,
    /// Wall time.
    pub elapsed: Duration,
    /// A gap longer than this (ns) counts as a stall.
    stall_ns: u64,
}

impl SseResult {
    fn new() -> Self {
        Self {
            ttfb: hist(),
            gaps: hist(),
            streams: 0,
            frames: 0,
            expected: 0,
            stalls: 0,
            max_gap_ns: 0,
            errors: 0,
            elapsed: Duration::ZERO,
            stall_ns: u64::MAX,
        }
    }

    fn merge(&mut self, o: &SseResult) {
        let _ = self.ttfb.add(&o.ttfb);
        let _ = self.gaps.add(&o.gaps);
        self.streams += o.streams;
        self.frames += o.frames;
        self.expected += o.expected;
        self.stalls += o.stalls;
        self.max_gap_ns = self.max_gap_ns.max(o.max_gap_ns);
        self.errors += o.errors;
    }
}

/// Runs `conns` connections each streaming `req` (expecting `events` events per stream) in a
/// loop until `dur` is over, at most `per_conn` streams each; a gap over `stall` counts as a
/// stall.
pub async fn sse(
    addr: SocketAddr,
    req: &Req,
    events: u64,
    conns: usize,
    per_conn: u64,
    dur: Duration,
    stall: Duration,
) -> SseResult {
    let start = Instant::now();
    let deadline = start + dur;
    let mut tasks = Vec::with_capacity(conns);
    for _ in 0..conns {
        let req = req.clone();
        tasks.push(tokio::spawn(async move {
            sse_loop(addr, &req, events, per_conn, deadline, stall).await
        }));
    }
    let mut total = SseResult::new();
    for t in tasks {
        if let Ok(r) = t.await {
            total.merge(&r);
        }
    }
    total.elapsed = start.elapsed();
    total
}

async fn sse_loop(
    addr: SocketAddr,
    req: &Req,
    events: u64,
    per_conn: u64,
    deadline: Instant,
    stall: Duration,
) -> SseResult {
    let mut r = SseResult::new();
    r.stall_ns = stall.as_nanos() as u64;
    let mut send = None;
    let mut n = 0;
    while n < per_conn && Instant::now() < deadline {
        if send.is_none() {
            send = connect(addr).await;
            if send.is_none() {
                r.errors += 1;
                n += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            }
        }
        let Some(s) = send.as_mut() else { continue };
        n += 1;
        r.expected += events;
        if one_stream(s, addr, req, &mut r).await.is_some() {
            r.streams += 1;
        } else {
            r.errors += 1;
            send = None;
        }
    }
    r
}

/// Where one stream's readings go: the SSE probe's totals, or an open-loop run's interval.
pub trait StreamSink {
    /// The first body byte arrived `ns` after the request was sent.
    fn first_byte(&mut self, ns: u64);
    /// `events` more events arrived, `gap_ns` after the previous ones (`None` for the first).
    fn events(&mut self, events: u64, gap_ns: Option<u64>);
}

impl StreamSink for SseResult {
    fn first_byte(&mut self, ns: u64) {
        let _ = self.ttfb.record(ns);
    }

    fn events(&mut self, events: u64, gap_ns: Option<u64>) {
        if let Some(gap) = gap_ns {
            let _ = self.gaps.record(gap.max(1_000));
            self.max_gap_ns = self.max_gap_ns.max(gap);
            if gap > self.stall_ns {
                self.stalls += 1;
            }
        }
        self.frames += events;
    }
}

/// Sends `req` on `s` as a streaming request and reads the SSE answer to its end, telling
/// `sink` when the first byte and each group of events arrive. `None` when the request
/// failed, was not a 2xx, or the stream broke (what arrived before the break is told).
pub(crate) async fn one_stream(
    s: &mut SendRequest<Full<Bytes>>,
    addr: SocketAddr,
    req: &Req,
    sink: &mut impl StreamSink,
) -> Option<()> {
    let t0 = Instant::now();
    let resp = s
        .send_request(request(addr, req, req.body.clone()))
        .await
        .ok()?;
    if !resp.status().is_success() {
        let _ = resp.into_body().collect().await;
        return None;
    }
    let mut body = resp.into_body();
    let mut last: Option<Instant> = None;
    let mut first = true;
    let mut carry = 0u8; // trailing '\n' count carried across chunks
    while let Some(frame) = body.frame().await {
        let frame = frame.ok()?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let now = Instant::now();
        if first {
            first = false;
            sink.first_byte((now - t0).as_nanos() as u64);
        }
        let mut events = 0u64;
        for b in data.iter() {
            if *b == b'\n' {
                carry += 1;
                if carry == 2 {
                    events += 1;
                    carry = 0;
                }
            } else {
                carry = 0;
            }
        }
        if events > 0 {
            sink.events(events, last.map(|prev| (now - prev).as_nanos() as u64));
            last = Some(now);
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_loops_cover_every_body_once_and_random_ones_spread() {
        let models: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
        let mut req = Req::anthropic_any(&models, "s=1");
        req.in_order = true;
        let (conns, cap) = (3u64, 10 / 3 + 1);
        let mut seen = std::collections::HashSet::new();
        for loop_id in 0..conns {
            let mut seed = loop_id * cap;
            for _ in 0..cap {
                seen.insert(req.body_for(&mut seed));
            }
        }
        assert_eq!(seen.len(), 10, "the three loops reach all ten models");
        req.in_order = false;
        let mut seed = 0x9E37_79B9_7F4A_7C15;
        let picked: std::collections::HashSet<Bytes> =
            (0..200).map(|_| req.body_for(&mut seed)).collect();
        assert_eq!(picked.len(), 10);
        let plain = Req::anthropic("claude-bench", "s=1", false);
        assert_eq!(plain.body_for(&mut seed), plain.body);
    }
}
