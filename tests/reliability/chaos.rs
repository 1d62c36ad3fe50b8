//! Chaos: 32 concurrent clients, streaming and not, on both dialects, through a combo of
//! 3 providers / 5 connections per dialect behind [`ChaosUpstream`]. Every request must end
//! with exactly one well-formed outcome within its bound; afterwards no permit is held, no
//! panic was logged, and the snapshot's counters equal the clients' own counts.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::chaos_upstream::{ChaosUpstream, Mix};
use crate::outcome::{Route, Verdict, judge_json, judge_stream};
use crate::proc::{Home, Proc};

/// Longest a single chaos request may take (5 attempts at the 4 s provider timeout, plus
/// queue and cooldown waits, with room to spare).
pub const REQUEST_BOUND: Duration = Duration::from_secs(45);

/// The chaos config for an upstream at `url`: per dialect three providers with 2 + 2 + 1
/// connections, one combo `chaos` over all six, short timeouts so faults resolve quickly.
pub fn config(url: &str) -> String {
    let mut s = String::from(
        r#"
[log]
level = "info"
[resilience]
session_affinity_ttl = "0s"
[resilience.combo_cooldown_wait]
enabled = true
max_wait = "500ms"
max_attempts = 1
budget = "1s"
[resilience.stream]
readiness_timeout = "1s"
heartbeat_interval = "1s"
content_stall_timeout = "2s"
[resilience.breaker.local]
degrade_at = 4
open_at = 8
reset_timeout = "1s"
probe_timeout = "3s"
[resilience.connection_cooldown.local]
base = "1s"
max_backoff_level = 1
[resilience.queue]
max_wait = "2s"
[[combos]]
name = "chaos"
strategy = "round_robin"
targets = ["pa/m", "pb/m", "pc/m", "oa/m", "ob/m", "oc/m"]
"#,
    );
    for (p, dialect, conns) in [
        ("pa", "anthropic", 2),
        ("pb", "anthropic", 2),
        ("pc", "anthropic", 1),
        ("oa", "openai", 2),
        ("ob", "openai", 2),
        ("oc", "openai", 1),
    ] {
        s.push_str(&format!(
            "[[providers]]\nid = \"{p}\"\ndialect = \"{dialect}\"\nbase_url = \"{url}\"\ntimeout = \"4s\"\nconnect_timeout = \"1s\"\n"
        ));
        for c in 1..=conns {
            let cap = if c == 1 {
                "max_concurrent = 4\nrate_limit_protection = true\n"
            } else {
                ""
            };
            s.push_str(&format!(
                "[[providers.connections]]\nid = \"{p}{c}\"\nauth = \"passthrough\"\n{cap}"
            ));
        }
    }
    s
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests sent.
    pub requests: u64,
    /// Verdicts by kind (`ok`, `error 503`, `stream error`, `malformed: …`).
    pub verdicts: BTreeMap<String, u64>,
    /// Requests not finished within [`REQUEST_BOUND`].
    pub hangs: u64,
    /// Complete 2xx.
    pub ok: u64,
    /// Examples of malformed outcomes.
    pub malformed: Vec<String>,
    /// Slowest request.
    pub slowest: Duration,
}

impl Tally {
    /// Asserts every request got exactly one well-formed outcome, showing examples if not.
    pub fn assert_well_formed(&self) {
        assert_eq!(
            self.bad(),
            0,
            "requests without one well-formed outcome: {:?}\nexamples:\n{}",
            self.verdicts,
            self.malformed.join("\n")
        );
    }

    /// Adds another client loop's tally to this one.
    pub fn merge(&mut self, t: Tally) {
        self.requests += t.requests;
        self.ok += t.ok;
        self.hangs += t.hangs;
        self.slowest = self.slowest.max(t.slowest);
        for (k, v) in t.verdicts {
            *self.verdicts.entry(k).or_default() += v;
        }
        self.malformed.extend(t.malformed);
    }

    /// Counts one request's verdict (`Err`: it hung past its bound) and how long it took.
    pub fn add(&mut self, v: Result<Verdict, String>, took: Duration) {
        self.requests += 1;
        self.slowest = self.slowest.max(took);
        let key = match v {
            Ok(Verdict::Ok) => {
                self.ok += 1;
                "ok".to_string()
            }
            Ok(Verdict::Error(s)) => format!("error {s}"),
            Ok(Verdict::StreamError) => "stream error event".into(),
            Ok(Verdict::Malformed(why)) => {
                if self.malformed.len() < 5 {
                    self.malformed.push(why);
                }
                "MALFORMED".into()
            }
            Err(why) => {
                self.hangs += 1;
                if self.malformed.len() < 5 {
                    self.malformed.push(why);
                }
                "HANG".into()
            }
        };
        *self.verdicts.entry(key).or_default() += 1;
    }

    /// Requests that ended in anything but one well-formed outcome.
    pub fn bad(&self) -> u64 {
        self.verdicts.get("MALFORMED").copied().unwrap_or(0) + self.hangs
    }
}

/// The clients' HTTP client.
pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

/// A pooled HTTP/1 client with `TCP_NODELAY`.
pub fn http_client() -> HttpClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    Client::builder(TokioExecutor::new()).build(c)
}

/// Sends one request and judges what came back.
pub async fn one(client: &HttpClient, base: &str, route: Route, stream: bool) -> Verdict {
    let mut b = http::Request::post(format!("{base}{}", route.path()))
        .header("content-type", "application/json");
    for (k, v) in route.headers() {
        b = b.header(k, v);
    }
    let req = b
        .body(Full::new(Bytes::from(
            route.body("chaos", stream).to_string(),
        )))
        .unwrap();
    let resp = match client.request(req).await {
        Ok(r) => r,
        Err(e) => return Verdict::Malformed(format!("no response: {e:?}")),
    };
    let status = resp.status().as_u16();
    let is_sse = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut body = resp.into_body();
    let mut bytes = Vec::new();
    let mut clean = true;
    while let Some(frame) = body.frame().await {
        match frame {
            Ok(f) => {
                if let Ok(d) = f.into_data() {
                    bytes.extend_from_slice(&d);
                }
            }
            Err(_) => {
                clean = false;
                break;
            }
        }
    }
    if status == 200 && is_sse {
        judge_stream(route, &bytes, clean)
    } else if !clean {
        Verdict::Malformed(format!("{status} body broke after {} bytes", bytes.len()))
    } else {
        judge_json(route, status, &bytes)
    }
}

/// Runs `clients` concurrent clients until `total` requests were sent (or `stop` fires);
/// request `i` picks its route and stream flag from `i`.
pub async fn traffic(
    base: String,
    clients: usize,
    total: u64,
    stop: tokio_util::sync::CancellationToken,
) -> Tally {
    let next = Arc::new(AtomicU64::new(0));
    let client = http_client();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (next, client, base, stop) = (next.clone(), client.clone(), base.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total || stop.is_cancelled() {
                    return tally;
                }
                let (route, stream) = route_of(i);
                let t = crate::now();
                let v = tokio::select! {
                    r = tokio::time::timeout(REQUEST_BOUND, one(&client, &base, route, stream)) => r.map_err(|_| format!("{route:?} stream={stream} hung past {REQUEST_BOUND:?}")),
                    () = stop.cancelled() => return tally,
                };
                tally.add(v, t.elapsed());
            }
        }));
    }
    let mut all = Tally::default();
    for t in tasks {
        all.merge(t.await.unwrap());
    }
    all
}

/// GET `/api/snapshot` on the admin listener.
pub async fn snapshot(p: &Proc) -> Value {
    crate::support::client::get(&p.admin_url("/api/snapshot"), &[])
        .await
        .json()
}

/// Permits and waiters still held: (in-flight requests, connection/gate in-flight, queued).
fn held(s: &Value) -> (u64, u64, u64) {
    let mut inflight = 0;
    let mut queued = 0;
    for p in s["providers"].as_array().into_iter().flatten() {
        inflight += p["in_flight"].as_u64().unwrap_or(0);
        for c in p["connections"].as_array().into_iter().flatten() {
            inflight += c["in_flight"].as_u64().unwrap_or(0);
        }
    }
    for g in s["queues"].as_array().into_iter().flatten() {
        inflight += g["in_flight"].as_u64().unwrap_or(0);
        queued += g["queued"].as_u64().unwrap_or(0);
    }
    (
        s["totals"]["in_flight"].as_u64().unwrap_or(0),
        inflight,
        queued,
    )
}

/// Polls the snapshot for up to 2 s until nothing is held; returns that snapshot, or panics
/// with what leaked.
pub async fn settled(p: &Proc) -> Value {
    let start = crate::now();
    loop {
        let s = snapshot(p).await;
        if held(&s) == (0, 0, 0) {
            return s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "permits still held 2 s after the last request (requests, gate/connection in-flight, queued) = {:?}",
            held(&s)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The route and stream flag of request number `i`: half Messages, a quarter each Chat and
/// Responses, streaming every other group of four.
pub fn route_of(i: u64) -> (Route, bool) {
    let route = match i % 4 {
        0 | 1 => Route::Messages,
        2 => Route::Chat,
        _ => Route::Responses,
    };
    (route, (i / 4) % 2 == 0)
}

/// Asserts the snapshot's totals equal the clients' own counts.
pub fn assert_counts(tally: &Tally, s: &Value) {
    let t = &s["totals"];
    assert_eq!(
        t["requests"].as_u64(),
        Some(tally.requests),
        "snapshot requests vs client count: {t}"
    );
    assert_eq!(
        t["ok"].as_u64(),
        Some(tally.ok),
        "snapshot ok vs complete 2xx seen: {t} {:?}",
        tally.verdicts
    );
    assert_eq!(
        t["errors"].as_u64(),
        Some(tally.requests - tally.ok),
        "snapshot errors vs the rest: {t}"
    );
}

/// The fault seed: `SLUICE_CHAOS_SEED` (decimal or `0x` hex) when set, to repeat the run
/// with other fault sequences, else a fixed one.
fn chaos_seed() -> u64 {
    let parse = |v: &str| match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    };
    std::env::var("SLUICE_CHAOS_SEED")
        .ok()
        .and_then(|v| parse(v.trim()))
        .unwrap_or(0x5EED_CA05)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_every_request_gets_exactly_one_well_formed_outcome() {
    let total = crate::pick(384, 3200);
    let up = ChaosUpstream::start(chaos_seed(), Mix::standard()).await;
    let home = Home::new(&config(&up.base_url()));
    let mut p = Proc::start(&home, &[]);
    let t = crate::now();
    let tally = traffic(p.url(""), 32, total, Default::default()).await;
    let took = t.elapsed();
    let s = settled(&p).await;
    p.assert_healthy();
    let err = p.stop();
    let logs = home.log_text();
    let injected = up.injected();
    let faults: u64 = injected
        .iter()
        .filter(|(f, _)| **f != crate::chaos_upstream::Fault::None)
        .map(|(_, n)| n)
        .sum();
    println!(
        "chaos (seed {:#x}): {} requests in {took:.1?} (slowest {:.1?}), {} upstream attempts, {faults} faults injected {injected:?}; outcomes {:?}; {} hangs; 0 panics; 0 leaked permits",
        chaos_seed(),
        tally.requests,
        tally.slowest,
        up.requests(),
        tally.verdicts,
        tally.hangs
    );
    assert_eq!(tally.requests, total);
    tally.assert_well_formed();
    assert!(
        !err.contains("panicked") && !logs.contains("panicked"),
        "panic in sluice output"
    );
    assert_counts(&tally, &s);
    assert!(
        faults >= total / 4,
        "too few faults injected to mean anything: {injected:?}"
    );
}

/// The truncation defect: a non-streaming 2xx whose upstream body breaks or stalls mid-way
/// must fail over (or answer 502 in the client's dialect) within the provider timeout, never
/// reach the client truncated or hold it past its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_non_streaming_bodies_that_break_are_never_relayed_truncated() {
    let total = crate::pick(128, 1000);
    let up = ChaosUpstream::start(0x7A1C_0DE5, Mix::truncated_bodies()).await;
    let home = Home::new(&config(&up.base_url()));
    let mut p = Proc::start(&home, &[]);
    let tally = traffic(p.url(""), 16, total, Default::default()).await;
    let s = settled(&p).await;
    p.assert_healthy();
    println!(
        "chaos (truncated bodies): {} requests, outcomes {:?}, injected {:?}",
        tally.requests,
        tally.verdicts,
        up.injected()
    );
    tally.assert_well_formed();
    assert_counts(&tally, &s);
}
