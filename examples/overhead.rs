//! Added latency of one non-streaming request through sluice vs direct to a mock upstream.
//!
//! Starts a zero-delay hyper mock (Anthropic-shaped JSON reply) and sluice in-process, then
//! sends N sequential `POST /v1/messages` requests (default 1000, after 200 warm-up) over one
//! keep-alive connection each way, alternating direct and proxied rounds of 100, and prints
//! the medians and p99s. Run: `cargo run --release --example overhead [-- N]`.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs
)]

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use sluice::clock::{Clock, SystemClock};

const REPLY: &str = r#"{"id":"msg_bench","type":"message","role":"assistant","model":"claude-bench","content":[{"type":"text","text":"Hello from the benchmark mock upstream."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":9}}"#;
const BODY: &str = r#"{"model":"claude-bench","max_tokens":64,"messages":[{"role":"user","content":"Say hello in one short sentence, please."}]}"#;

async fn mock() -> std::net::SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            s.set_nodelay(true).unwrap();
            tokio::spawn(async move {
                let svc = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let _ = req.into_body().collect().await;
                    let mut r =
                        hyper::Response::new(Full::new(Bytes::from_static(REPLY.as_bytes())));
                    r.headers_mut()
                        .insert("content-type", "application/json".parse().unwrap());
                    Ok::<_, Infallible>(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

fn pct(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1000);
    let upstream = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{d}/s.db\"\n[log]\ndir = \"{d}/logs\"\n\
         [[providers]]\nid = \"anthropic\"\ndialect = \"anthropic\"\nbase_url = \"http://{upstream}\"\n  [[providers.connections]]\n  id = \"mine\"\n  auth = \"passthrough\"\n",
        d = dir.path().display()
    );
    let env = sluice::config::LoadEnv::fixed(&[], dir.path());
    let cfg = sluice::config::from_str(&text, std::path::Path::new("bench.toml"), &env).unwrap();
    // `OVERHEAD_NO_STORE=1` measures without the SQLite request log (feature ladder, S6).
    let store = match std::env::var("OVERHEAD_NO_STORE").as_deref() {
        Ok("1") => None,
        _ => Some(Arc::new(sluice::store::Store::open(&cfg.store).unwrap())),
    };
    let running = sluice::app::start(cfg, Arc::new(SystemClock), store)
        .await
        .unwrap();
    let proxy = running.listen;

    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(http);
    let clock = SystemClock;
    let one = |addr: std::net::SocketAddr| {
        let client = client.clone();
        async move {
            let req = hyper::Request::post(format!("http://{addr}/v1/messages"))
                .header("content-type", "application/json")
                .header("anthropic-version", "2023-06-01")
                .header("x-api-key", "sk-bench")
                .body(Full::new(Bytes::from_static(BODY.as_bytes())))
                .unwrap();
            let t0 = clock.now();
            let resp = client.request(req).await.unwrap();
            assert!(resp.status().is_success());
            let _ = resp.into_body().collect().await.unwrap();
            clock.now().duration_since(t0).as_secs_f64() * 1e6
        }
    };
    for _ in 0..200 {
        one(upstream).await;
        one(proxy).await;
    }
    let (mut direct, mut via) = (Vec::with_capacity(n), Vec::with_capacity(n));
    while via.len() < n {
        for _ in 0..100.min(n - via.len()) {
            direct.push(one(upstream).await);
        }
        for _ in 0..100.min(n - via.len()) {
            via.push(one(proxy).await);
        }
    }
    let (d50, d99) = (pct(&mut direct, 0.5), pct(&mut direct, 0.99));
    let (p50, p99) = (pct(&mut via, 0.5), pct(&mut via, 0.99));
    println!("requests: {n} sequential per path, non-streaming POST /v1/messages, zero-delay mock");
    println!("direct  p50 {d50:8.1} us   p99 {d99:8.1} us");
    println!("sluice  p50 {p50:8.1} us   p99 {p99:8.1} us");
    println!(
        "added   p50 {:8.1} us   p99 {:8.1} us",
        p50 - d50,
        p99 - d99
    );
    running.stop().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
}
