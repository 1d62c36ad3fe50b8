//! Edges of the request path through real HTTP: client cancellation reaching the upstream
//! (§5, case A22), `count_tokens` (A23), body limits (A25), heartbeats that never split an
//! event (§6, A17) and stream framing across split writes (§6, A18). Real time, millisecond
//! durations; the mock records when its inbound connections close.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};
use sluice::clock::{Clock, Instant, SystemClock};

use crate::support::client::{self, Resp};
use crate::support::wire::anthropic_message;
use crate::support::{MockUpstream, Reply, Sluice, fill, fixture};

const READ: Duration = Duration::from_secs(5);
const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const ENV: &[(&str, &str)] = &[("K1", "key-one"), ("K2", "key-two")];
const PING: &str = "event: ping\ndata: {\"type\":\"ping\"}\n\n";
/// Disconnect-to-upstream-close budget (case A22).
const CLOSE_WITHIN: Duration = Duration::from_secs(1);

/// An anthropic provider `a` and an openai provider `o` on one mock, both `api_key` with an
/// injected key; `a/k1` is capped at 2 so its permits show in `/api/queues`.
const BOTH: &str = r#"
[routing]
default_provider = ["a", "o"]

[[providers]]
id = "a"
dialect = "anthropic"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "k1"
  auth = { env = "K1" }
  max_concurrent = 2

[[providers]]
id = "o"
dialect = "openai"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "k2"
  auth = { env = "K2" }
"#;

fn messages(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": stream,
        "messages": [{"role": "user", "content": "hi"}]})
}

fn chat(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

fn sse(name: &str, data: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {data}\n\n"))
}

fn delta(i: usize) -> Bytes {
    sse(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "text_delta", "text": format!("chunk {i} ")}}),
    )
}

/// A complete Anthropic stream with `n` text deltas.
fn anthropic_stream(n: usize) -> Vec<Bytes> {
    let mut v = vec![
        sse(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_01Edge", "type": "message",
                "role": "assistant", "content": [], "model": "m", "stop_reason": null,
                "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
        ),
        sse(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    v.extend((0..n).map(delta));
    v.push(sse(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    v.push(sse(
        "message_delta",
        &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn",
            "stop_sequence": null}, "usage": {"output_tokens": 9}}),
    ));
    v.push(sse("message_stop", &json!({"type": "message_stop"})));
    v
}

/// `GET /api/queues` → the connection gate of `a/k1`.
async fn k1_gate(s: &Sluice) -> Value {
    let v = client::get(&s.admin("/api/queues"), &[]).await.json();
    v["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["provider"] == "a" && g["connection"] == "k1" && g["kind"] == "connection")
        .unwrap_or_else(|| panic!("no a/k1 gate: {v:#}"))
        .clone()
}

/// Polls until `a/k1` holds no permit (up to 1 s).
async fn wait_permits_released(s: &Sluice) {
    let deadline = SystemClock.now() + Duration::from_secs(1);
    loop {
        let g = k1_gate(s).await;
        if g["in_flight"] == 0 && g["queued"] == 0 {
            return;
        }
        assert!(SystemClock.now() < deadline, "permit never released: {g:#}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Breaker closed with no failures, every connection active and uncooled, no lockouts.
fn assert_untouched(s: &Sluice) {
    let snap = s.snapshot();
    for p in &snap.providers {
        assert_eq!(
            (
                p.breaker.state.as_str(),
                p.breaker.failure_count,
                p.failures
            ),
            ("closed", 0, 0),
            "provider {}: {:#?}",
            p.id,
            p.breaker
        );
        for c in &p.connections {
            assert_eq!(
                (c.status.as_str(), c.failures, c.cooldown_until_unix_ms),
                ("active", 0, None),
                "{c:#?}"
            );
        }
    }
    assert!(snap.lockouts.is_empty(), "{:#?}", snap.lockouts);
}

/// After a client disconnect: the mock's connection closed within [`CLOSE_WITHIN`] (returns
/// the measured time), the request is `cancelled`, nothing retried, nothing penalised, the
/// permit released.
async fn assert_cancelled(s: &Sluice, mock: &MockUpstream, gone_at: Instant, case: &str) {
    let closed = mock.wait_closed(1, Duration::from_secs(3)).await;
    let closed = closed.unwrap_or_else(|| panic!("{case}: the upstream connection never closed"));
    let took = closed.saturating_duration_since(gone_at);
    eprintln!("A22 {case}: client disconnect -> upstream connection closed in {took:?}");
    assert!(
        took < CLOSE_WITHIN,
        "{case}: upstream closed {took:?} after the disconnect"
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Cancelled,
        "{case}: {:#?}",
        snap.recent[0]
    );
    assert_eq!(
        mock.count(),
        1,
        "{case}: no retry or fallback after the disconnect"
    );
    assert_eq!(mock.in_flight(), 0, "{case}: upstream exchange ended");
    wait_permits_released(s).await;
    assert_untouched(s);
}

// === A22: client disconnects ===

#[tokio::test]
async fn a22a_client_dropping_a_stream_closes_the_upstream_connection() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(anthropic_stream(100)).pace(Duration::from_millis(50)));
    let s = Sluice::start(&fill(BOTH, &mock), ENV).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &messages("m", true), &[AV]).await;
    assert_eq!(st.status, 200);
    st.read_until(READ, |got| {
        String::from_utf8_lossy(got).matches("text_delta").count() >= 5
    })
    .await;
    assert_eq!(
        k1_gate(&s).await["in_flight"],
        1,
        "the stream holds its permit"
    );
    drop(st);
    let gone_at = SystemClock.now();

    assert_cancelled(&s, &mock, gone_at, "(a) streaming, after 5 chunks").await;
}

#[tokio::test]
async fn a22b_client_leaving_before_the_first_byte_closes_the_upstream_connection() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(anthropic_stream(3)).delay(Duration::from_secs(5)));
    let s = Sluice::start(&fill(BOTH, &mock), ENV).await;

    let url = s.url("/v1/messages");
    let body = messages("m", true);
    // Boxed, so that `drop(open)` really drops the request future (the client goes away).
    let mut open = Box::pin(client::open_json(&url, &body, &[AV]));
    tokio::select! {
        _ = &mut open => panic!("no response head was expected"),
        _ = mock.wait_for(1) => {}
    }
    tokio::select! {
        _ = &mut open => panic!("no response head was expected"),
        () = tokio::time::sleep(Duration::from_millis(100)) => {}
    }
    assert_eq!(
        k1_gate(&s).await["in_flight"],
        1,
        "waiting on the head holds the permit"
    );
    drop(open);
    let gone_at = SystemClock.now();

    assert_cancelled(&s, &mock, gone_at, "(b) before the first byte").await;
}

#[tokio::test]
async fn a22c_non_streaming_client_giving_up_closes_the_upstream_connection() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .reply(Reply::json(200, anthropic_message("m", "late")).delay(Duration::from_secs(5)));
    let s = Sluice::start(&fill(BOTH, &mock), ENV).await;

    let gave_up = tokio::time::timeout(
        Duration::from_millis(200),
        client::post_json(&s.url("/v1/messages"), &messages("m", false), &[AV]),
    )
    .await;
    let gone_at = SystemClock.now();
    assert!(
        gave_up.is_err(),
        "the upstream takes 5 s; the client gives up at 200 ms"
    );

    assert_cancelled(&s, &mock, gone_at, "(c) non-streaming, after 200 ms").await;
}

// === A23: count_tokens ===

const COUNT_BODY: &str = r#"{"model":"m","messages":[{"role":"user","content":"hello"}]}"#;
const BETA: (&str, &str) = ("anthropic-beta", "token-counting-2024-11-01,feature-b-2099");

async fn count_tokens(s: &Sluice) -> Resp {
    client::post_raw(
        &s.url("/v1/messages/count_tokens?beta=true"),
        COUNT_BODY,
        &[("content-type", "application/json"), AV, BETA],
    )
    .await
}

#[tokio::test]
async fn a23_count_tokens_without_an_anthropic_provider_is_a_local_estimate() {
    let mock = MockUpstream::start().await;
    let cfg = fill(BOTH, &mock).replace(
        "default_provider = [\"a\", \"o\"]",
        "default_provider = \"o\"",
    );
    // Only the openai provider: cut the anthropic one out of the config.
    let start = cfg.find("[[providers]]\nid = \"a\"").unwrap();
    let end = cfg.find("[[providers]]\nid = \"o\"").unwrap();
    let cfg = format!("{}{}", &cfg[..start], &cfg[end..]);
    let s = Sluice::start(&cfg, ENV).await;

    let r = count_tokens(&s).await;

    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let n = v["input_tokens"].as_u64().unwrap_or_else(|| panic!("{v}"));
    assert!((1..100).contains(&n), "a plausible estimate: {v}");
    assert_eq!(v.as_object().map(|o| o.len()), Some(1), "{v}");
    assert_eq!(mock.count(), 0, "no upstream call");
}

#[tokio::test]
async fn a23_count_tokens_is_forwarded_to_the_configured_base_url_with_query_and_headers() {
    let mock = MockUpstream::start().await;
    mock.on("/custom/base/v1/messages/count_tokens")
        .reply(Reply::json(200, json!({"input_tokens": 7})));
    let cfg = fill(BOTH, &mock).replacen(
        &format!("base_url = \"{}\"", mock.base_url()),
        &format!("base_url = \"{}/custom/base\"", mock.base_url()),
        1,
    );
    let s = Sluice::start(&cfg, ENV).await;

    let r = count_tokens(&s).await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"input_tokens": 7}));
    let up = mock.single();
    assert_eq!(
        up.path_and_query(),
        "/custom/base/v1/messages/count_tokens?beta=true"
    );
    assert_eq!(up.header("anthropic-version"), Some(AV.1));
    assert_eq!(up.header("anthropic-beta"), Some(BETA.1));
    assert_eq!(up.header("x-api-key"), Some("key-one"));
    assert_eq!(&up.body[..], COUNT_BODY.as_bytes(), "body unchanged");
}

#[tokio::test]
async fn a23_count_tokens_never_waits_for_or_takes_a_generation_slot() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .reply(Reply::json(200, anthropic_message("m", "slow")).delay(Duration::from_millis(600)));
    let cfg = fill(BOTH, &mock).replace("max_concurrent = 2", "max_concurrent = 1");
    let s = Sluice::start(&cfg, ENV).await;

    let url = s.url("/v1/messages");
    let busy =
        tokio::spawn(async move { client::post_json(&url, &messages("m", false), &[AV]).await });
    mock.wait_for(1).await;
    let before = k1_gate(&s).await;
    assert_eq!(before["in_flight"], 1, "{before:#}");

    let t = SystemClock.now();
    let r = count_tokens(&s).await;
    let took = t.elapsed();

    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["input_tokens"].as_u64().is_some(), "{}", r.text());
    assert!(
        took < Duration::from_millis(300),
        "count_tokens went through at once, took {took:?}"
    );
    let after = k1_gate(&s).await;
    assert_eq!(
        (
            after["in_flight"].clone(),
            after["admitted"].clone(),
            after["queued"].clone()
        ),
        (json!(1), before["admitted"].clone(), json!(0)),
        "count_tokens took no permit: {after:#}"
    );
    assert_eq!(busy.await.unwrap().status, 200);
    assert_eq!(mock.requests_to("/v1/messages/count_tokens").len(), 1);
}

// === A25: body limits ===

/// A JSON body of about `size` bytes for `model` (a long user message).
fn big_body(model: &str, size: usize, anthropic: bool) -> Bytes {
    let mut v = if anthropic {
        messages(model, false)
    } else {
        chat(model, false)
    };
    v["messages"][0]["content"] = json!("x".repeat(size));
    Bytes::from(serde_json::to_vec(&v).unwrap())
}

#[tokio::test]
async fn a25_large_body_under_max_body_is_forwarded_byte_for_byte() {
    let mock = MockUpstream::start().await;
    let cfg = format!("[server]\nmax_body = \"8MiB\"\n{}", fill(BOTH, &mock));
    let s = Sluice::start(&cfg, ENV).await;
    let body = big_body("m", 3_000_000, true);

    let r = client::post_raw(
        &s.url("/v1/messages"),
        body.clone(),
        &[("content-type", "application/json"), AV],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    let up = mock.single();
    assert_eq!(up.body.len(), body.len());
    assert!(up.body == body, "3 MB body forwarded unchanged");
}

#[tokio::test]
async fn a25_body_over_max_body_is_413_in_each_dialect_and_never_an_upstream_failure() {
    let mock = MockUpstream::start().await;
    let cfg = format!("[server]\nmax_body = \"8MiB\"\n{}", fill(BOTH, &mock));
    let s = Sluice::start(&cfg, ENV).await;

    // Anthropic, with a content-length.
    let a = client::post_raw(
        &s.url("/v1/messages"),
        big_body("m", 9_000_000, true),
        &[("content-type", "application/json"), AV],
    )
    .await;
    // OpenAI, chunked (no content-length): the limit is found while reading.
    let body = big_body("m", 9_000_000, false);
    let chunks: Vec<Bytes> = body
        .chunks(256 * 1024)
        .map(Bytes::copy_from_slice)
        .collect();
    let req = client::request(
        Method::POST,
        &s.url("/v1/chat/completions"),
        &[("content-type", "application/json")],
        client::chunked(chunks),
    );
    let o = client::send(req).await;

    assert_eq!(a.status, 413, "{}", a.text());
    let v = a.json();
    assert_eq!(
        (v["type"].as_str(), v["error"]["type"].as_str()),
        (Some("error"), Some("request_too_large")),
        "anthropic error JSON: {v}"
    );
    assert_eq!(o.status, 413, "{}", o.text());
    let v = o.json();
    assert!(v.get("type").is_none(), "openai error JSON: {v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
            && v["error"]["type"].as_str().is_some(),
        "openai error JSON: {v}"
    );
    assert_eq!(o.header("content-type"), Some("application/json"));
    assert_eq!(mock.count(), 0, "never sent upstream");
    assert_untouched(&s);
    let small = client::post_json(&s.url("/v1/messages"), &messages("m", false), &[AV]).await;
    assert_eq!(small.status, 200, "still serving: {}", small.text());
}

// === A17: heartbeats only at event boundaries ===

/// The split event of the A17 test.
const SPLIT_DATA: &str = "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"split event\"}}\n\n";

#[tokio::test]
async fn a17_heartbeat_never_splits_an_event() {
    let mock = MockUpstream::start().await;
    let pause = Duration::from_millis(150);
    let zero = Duration::ZERO;
    let all = anthropic_stream(3);
    let mut chunks: Vec<(Duration, Bytes)> = all[..3].iter().map(|c| (zero, c.clone())).collect();
    // Silence at an event boundary: heartbeats belong here.
    chunks.push((pause, all[3].clone()));
    // An event cut after its `event:` line, then silence: no heartbeat may land inside it.
    chunks.push((zero, Bytes::from_static(b"event: content_block_delta\n")));
    chunks.push((pause, Bytes::from_static(SPLIT_DATA.as_bytes())));
    chunks.extend(all[4..].iter().map(|c| (zero, c.clone())));
    let upstream: Vec<u8> = chunks.iter().flat_map(|(_, c)| c.to_vec()).collect();
    mock.on("/v1/messages").reply(Reply::sse_timed(chunks));
    let cfg = format!(
        "{}\n[resilience.stream]\nheartbeat_interval = \"50ms\"\nreadiness_timeout = \"2s\"\ncontent_stall_timeout = \"2s\"\n",
        fill(BOTH, &mock)
    );
    let s = Sluice::start(&cfg, ENV).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &messages("m", true), &[AV]).await;
    let (got, clean) = st.read_to_end(READ).await;

    assert!(clean);
    let text = String::from_utf8_lossy(&got).into_owned();
    let upstream = String::from_utf8(upstream).unwrap();
    assert!(
        !upstream.contains("event: ping"),
        "the upstream sends no pings itself"
    );
    let events: Vec<&str> = text.split_inclusive("\n\n").collect();
    for ev in &events {
        assert!(
            *ev == PING || !ev.contains("ping"),
            "a heartbeat inside an event: {ev:?}\nwhole stream: {text}"
        );
        assert!(
            ev.matches("event:").count() <= 1 && ev.ends_with("\n\n"),
            "malformed event {ev:?}"
        );
    }
    let pings = events.iter().filter(|e| **e == PING).count();
    assert!(
        pings >= 1,
        "heartbeats were sent during the boundary pause: {text}"
    );
    assert_eq!(
        text.replace(PING, ""),
        upstream,
        "client bytes = upstream bytes + whole ping events"
    );
    assert!(text.contains(&format!("event: content_block_delta\n{SPLIT_DATA}")));
    assert_eq!(
        s.wait_requests(1).await.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Ok
    );
}

// === A18: events split across writes ===

/// Cut points: every `data:` line in the middle of its JSON, the first 3-byte UTF-8 character
/// after its second byte, and (CRLF input) every `\r\n` between `\r` and `\n`.
fn cuts(bytes: &[u8]) -> Vec<usize> {
    let mut at = Vec::new();
    let mut line_start = 0;
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' {
            let line = &bytes[line_start..i];
            if line.starts_with(b"data: {") {
                at.push(line_start + line.len() / 2);
            }
            line_start = i + 1;
        }
        if *b == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
            at.push(i + 1);
        }
    }
    let utf8 = bytes
        .iter()
        .position(|b| *b & 0xF0 == 0xE0)
        .expect("the fixture has a 3-byte UTF-8 character");
    at.push(utf8 + 2);
    at.sort_unstable();
    at.dedup();
    at
}

/// `bytes` as writes cut at [`cuts`], 3 ms apart.
fn split_writes(bytes: &[u8]) -> Vec<(Duration, Bytes)> {
    let mut out = Vec::new();
    let mut from = 0;
    for at in cuts(bytes).into_iter().chain([bytes.len()]) {
        if at > from {
            let pause = if from == 0 {
                Duration::ZERO
            } else {
                Duration::from_millis(3)
            };
            out.push((pause, Bytes::copy_from_slice(&bytes[from..at])));
            from = at;
        }
    }
    out
}

fn crlf(b: &[u8]) -> Vec<u8> {
    String::from_utf8(b.to_vec())
        .unwrap()
        .replace('\n', "\r\n")
        .into_bytes()
}

async fn split_stream_is_relayed_byte_exact(fixture_name: &str, anthropic: bool) {
    let lf = fixture(fixture_name).to_vec();
    let variants = [("LF", lf.clone()), ("CRLF", crlf(&lf))];
    let mock = MockUpstream::start().await;
    let (path, model) = if anthropic {
        ("/v1/messages", "m-anthropic")
    } else {
        ("/v1/chat/completions", "m-openai")
    };
    for (name, bytes) in &variants {
        let writes = split_writes(bytes);
        let data_lines = String::from_utf8_lossy(bytes).matches("data: {").count();
        assert!(writes.len() > data_lines, "{name}: every data line split");
        if *name == "CRLF" {
            assert!(
                writes.iter().any(|(_, w)| w.ends_with(b"\r")),
                "a \\r\\n split between writes"
            );
        }
        assert!(
            writes.iter().any(|(_, w)| std::str::from_utf8(w).is_err()),
            "a UTF-8 character split between writes"
        );
        mock.on(path).times(1).reply(Reply::sse_timed(writes));
    }
    let s = Sluice::start(&fill(BOTH, &mock), ENV).await;

    for (i, (name, bytes)) in variants.iter().enumerate() {
        let (body, headers): (Value, Vec<(&str, &str)>) = if anthropic {
            (messages(model, true), vec![AV])
        } else {
            (chat(model, true), vec![])
        };
        let mut st = client::open_json(&s.url(path), &body, &headers).await;
        let (got, clean) = st.read_to_end(READ).await;

        assert!(clean, "{fixture_name} {name}");
        assert!(
            got[..] == bytes[..],
            "{fixture_name} {name}: client bytes differ from upstream bytes\n got: {:?}\nwant: {:?}",
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(bytes)
        );
        let snap = s.wait_requests(i as u64 + 1).await;
        let req = snap.recent.iter().max_by_key(|r| r.id).unwrap();
        assert_eq!(
            req.outcome,
            sluice::snapshot::RequestOutcome::Ok,
            "{fixture_name} {name}: {req:#?}"
        );
    }
    assert_untouched(&s);
}

#[tokio::test]
async fn a18_openai_chat_stream_split_mid_json_crlf_and_utf8_is_relayed_byte_exact() {
    split_stream_is_relayed_byte_exact("openai-chat-text", false).await;
}

#[tokio::test]
async fn a18_anthropic_stream_split_mid_json_crlf_and_utf8_is_relayed_byte_exact() {
    split_stream_is_relayed_byte_exact("anthropic-text", true).await;
}
