//! The request path's stages end to end: zombie fallback with the default timer ratio,
//! cooldown-aware waits (recorded, with heartbeats on a stream), configuration-problem
//! transport errors, `/v1/models` through the resilience layers, a combo target of the other
//! dialect translated, the execution budget, complete non-streaming bodies, UTF-8 request bodies and
//! the header read timeout. Timers are scaled to milliseconds; nothing sleeps for seconds.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{MockUpstream, Reply, Sluice, client, fill, fixture};

const READ: Duration = Duration::from_secs(5);
const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const KEY: (&str, &str) = ("x-api-key", "sk-client-key");
const PING: &str = "event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// Two anthropic providers on one mock (told apart by model) and a combo over both.
const PAIR: &str = r#"
[routing]
default_provider = "a"

[resilience.stream]
heartbeat_interval = "60ms"
readiness_timeout = "150ms"
content_stall_timeout = "2s"

[[providers]]
id = "a"
dialect = "anthropic"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "ka"
  auth = "passthrough"

[[providers]]
id = "b"
dialect = "anthropic"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "kb"
  auth = "passthrough"

[[combos]]
name = "pair"
targets = ["a/model-a", "b/model-b"]
"#;

fn body(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

fn count(hay: &[u8], needle: &str) -> usize {
    String::from_utf8_lossy(hay).matches(needle).count()
}

#[tokio::test]
async fn zombie_first_target_falls_back_when_heartbeat_is_shorter_than_readiness() {
    // The shipped defaults have heartbeat (15s) < readiness (30s); this config keeps that ratio.
    // The heartbeat must not commit the request to the zombie: the client gets an early head
    // and pings, then the second target's stream.
    let mock = MockUpstream::start().await;
    let defaults = Sluice::start(&fill(TWO_CONNECTIONS, &mock), &[("K1", "a"), ("K2", "b")]).await;
    let d = defaults.core().settings_snapshot().stream.clone();
    assert!(
        d.heartbeat_interval < d.readiness_timeout,
        "the default ratio this test scales"
    );
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_chunks(vec![Bytes::from(PING)]).then_stall());
    mock.on("/v1/messages")
        .model("model-b")
        .reply(Reply::sse_fixture("anthropic-text"));
    let s = Sluice::start(&fill(PAIR, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("pair", true), &[AV, KEY]).await;
    let (got, clean) = st.read_to_end(READ).await;

    assert_eq!(st.status, 200);
    assert!(clean, "the stream ends cleanly: {}", st.text());
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.starts_with(PING),
        "heartbeats kept the client alive first: {text}"
    );
    let served = String::from_utf8_lossy(&fixture("anthropic-text")).into_owned();
    assert!(
        text.ends_with(&served),
        "the second target served the whole stream: {text}"
    );
    assert_eq!(count(&got, "event: message_start"), 1);
    let snap = s.wait_requests(1).await;
    assert_eq!(snap.recent[0].attempts, 2);
    assert_eq!(snap.recent[0].outcome, sluice::snapshot::RequestOutcome::Ok);
    assert_eq!(snap.recent[0].attempt_log[0].reason, "zombie_stream");
}

/// One provider with one connection: a 429 with a short hint cools it.
const SINGLE: &str = r#"
[routing]
default_provider = "a"

[resilience.stream]
heartbeat_interval = "40ms"

[[providers]]
id = "a"
dialect = "anthropic"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "key-a"
  auth = "passthrough"
"#;

#[tokio::test]
async fn cooldown_wait_is_recorded_and_a_waiting_stream_gets_heartbeats() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").times(1).reply(
        Reply::anthropic_error(429, "rate_limit_error", "slow down")
            .header("retry-after-ms", "300"),
    );
    let s = Sluice::start(&fill(SINGLE, &mock), &[]).await;
    let first = client::post_json(&s.url("/v1/messages"), &body("m", false), &[AV, KEY]).await;
    assert_eq!(first.status, 429, "{}", first.text());

    let mut st = client::open_json(&s.url("/v1/messages"), &body("m", true), &[AV, KEY]).await;
    let (got, clean) = st.read_to_end(READ).await;

    assert_eq!(st.status, 200);
    assert!(clean);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with(PING), "heartbeats while waiting: {text}");
    assert!(text.contains("event: message_stop"), "{text}");
    let snap = s.wait_requests(2).await;
    let r = &snap.recent[0];
    assert_eq!(r.outcome, sluice::snapshot::RequestOutcome::Ok);
    assert_eq!(r.waits.len(), 1, "{r:?}");
    assert!(
        r.waits[0].target.starts_with("a:key-a/"),
        "{:?}",
        r.waits[0]
    );
    assert!(
        ["connection_cooldown", "model_lockout"].contains(&r.waits[0].reason.as_str()),
        "{:?}",
        r.waits[0]
    );
    assert!(r.waits[0].waited_ms > 0);
}

#[tokio::test]
async fn connection_refused_on_loopback_is_called_a_configuration_problem() {
    let cfg = SINGLE.replace("{MOCK}", &crate::support::harness::closed_port_url());
    let s = Sluice::start(&cfg, &[]).await;

    let r = client::post_json(&s.url("/v1/messages"), &body("m", false), &[AV, KEY]).await;

    assert_eq!(r.status, 502, "{}", r.text());
    let msg = r.json()["error"]["message"]
        .as_str()
        .unwrap_or("")
        .to_string();
    assert!(
        msg.contains("configuration problem: nothing is listening on 127.0.0.1:"),
        "{msg}"
    );
}

const TWO_CONNECTIONS: &str = r#"
[routing]
default_provider = "a"

[[providers]]
id = "a"
dialect = "anthropic"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "k1"
  auth = { env = "K1" }

  [[providers.connections]]
  id = "k2"
  auth = { env = "K2" }
"#;

#[tokio::test]
async fn models_go_through_fallback_and_report_their_outcome() {
    // The first connection fails; /v1/models falls back to the second (it used to ask only the
    // first connection) and the failure is reported like any attempt (it cools k1).
    let mock = MockUpstream::start().await;
    mock.on("/v1/models")
        .header("x-api-key", "key-one")
        .reply(Reply::anthropic_error(500, "api_error", "boom"));
    let s = Sluice::start(
        &fill(TWO_CONNECTIONS, &mock),
        &[("K1", "key-one"), ("K2", "key-two")],
    )
    .await;

    let r = client::get(&s.url("/v1/models"), &[AV]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    let ids: Vec<String> = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    assert!(ids.contains(&"mock-model".to_string()), "{ids:?}");
    let snap = s.snapshot();
    let k1 = &snap.providers[0].connections[0];
    assert_eq!(
        sluice::snapshot::word::or_empty(&k1.last_error_kind),
        "transient",
        "{k1:?}"
    );
    assert_eq!(mock.requests_to("/v1/models").len(), 2);
}

#[tokio::test]
async fn models_need_a_client_key_when_keys_are_required_and_never_wait() {
    // With client keys on, /v1/models answers 401 in the client's dialect without one (it used
    // to pass any credential upstream), and a list behind a cooling connection answers at once.
    let mock = MockUpstream::start().await;
    mock.on("/v1/models")
        .reply(Reply::anthropic_error(503, "api_error", "down"));
    let cfg = format!(
        "[server]\nclient_keys_env = \"CK\"\n{}",
        fill(SINGLE, &mock)
    );
    let s = Sluice::start(&cfg, &[("CK", "ck-1")]).await;

    let r = client::get(
        &s.url("/v1/models"),
        &[AV, ("authorization", "Bearer stolen")],
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(
        r.json()["error"]["type"],
        "authentication_error",
        "{}",
        r.text()
    );
    let r = client::get(&s.url("/v1/models"), &[("authorization", "Bearer stolen")]).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "invalid_api_key", "{}", r.text());
    assert_eq!(
        mock.requests_to("/v1/models").len(),
        0,
        "nothing went upstream"
    );

    let ok = [AV, ("x-api-key", "ck-1")];
    let r = client::get(&s.url("/v1/models"), &ok).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(mock.requests_to("/v1/models").len(), 1);
    // key-a is cooling now; the next list must not wait for it (the cooldown wait is for
    // inference only) and never reaches the upstream.
    // (The cooldown is 3 s; waiting it out would pass the 2.5 s bound.)
    let r = tokio::time::timeout(
        std::time::Duration::from_millis(2500),
        client::get(&s.url("/v1/models"), &ok),
    )
    .await
    .expect("the model list waited for a cooldown");
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(mock.requests_to("/v1/models").len(), 1);
}

#[tokio::test]
async fn a_combo_target_of_the_other_dialect_is_translated() {
    let mock = MockUpstream::start().await;
    let cfg = format!(
        "{}\n[[providers]]\nid = \"o\"\ndialect = \"openai\"\nbase_url = \"{{MOCK}}\"\nprofile = \"api_key\"\n\n  [[providers.connections]]\n  id = \"ko\"\n  auth = \"passthrough\"\n\n[[combos]]\nname = \"gpt-only\"\ntargets = [\"o/gpt-x\"]\n",
        SINGLE
    );
    let s = Sluice::start(&fill(&cfg, &mock), &[]).await;

    let r = client::post_json(&s.url("/v1/messages"), &body("gpt-only", false), &[AV, KEY]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["type"],
        "message",
        "answered in the client's dialect"
    );
    assert_eq!(mock.single().path, "/v1/chat/completions");
}

/// A provider whose `timeout` and execution budget are 300ms.
fn budget_config(mock: &MockUpstream) -> String {
    fill(SINGLE, mock)
        .replace(
            "profile = \"api_key\"",
            "profile = \"api_key\"\ntimeout = \"300ms\"",
        )
        .replace(
            "[resilience.stream]",
            "[resilience.queue]\nexecution_max_wait = \"300ms\"\n\n[resilience.stream]",
        )
}

#[tokio::test]
async fn execution_budget_ends_a_slow_body_with_504_and_a_long_stream_with_one_error_event() {
    let mock = MockUpstream::start().await;
    let slow = (0..40)
        .map(|_| (Duration::from_millis(50), Bytes::from_static(b" ")))
        .collect();
    mock.on("/v1/messages")
        .model("slow-json")
        .reply(Reply::chunked(200, "application/json", slow));
    let events: Vec<(Duration, Bytes)> = std::iter::once((
        Duration::ZERO,
        Bytes::from_static(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"),
    ))
    .chain((0..40).map(|_| {
        (
            Duration::from_millis(50),
            Bytes::from_static(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"la \"}}\n\n"),
        )
    }))
    .collect();
    mock.on("/v1/messages")
        .model("slow-sse")
        .reply(Reply::sse_timed(events));
    let s = Sluice::start(&budget_config(&mock), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &body("slow-json", false),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 504, "{}", r.text());
    assert_eq!(r.json()["sluice"]["code"], "RATE_LIMIT_EXECUTION_TIMEOUT");

    let mut st =
        client::open_json(&s.url("/v1/messages"), &body("slow-sse", true), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;
    assert_eq!(st.status, 200);
    assert!(count(&got, "text_delta") >= 1, "content was relayed first");
    assert_eq!(count(&got, "event: error"), 1, "{}", st.text());
    assert!(String::from_utf8_lossy(&got).contains("RATE_LIMIT_EXECUTION_TIMEOUT"));
    assert!(count(&got, "text_delta") < 40, "the stream was cut short");
}

#[tokio::test]
async fn non_streaming_body_that_breaks_falls_back_and_never_reaches_the_client_short() {
    let mock = MockUpstream::start().await;
    let reply = json!({"id": "msg_a", "type": "message", "role": "assistant", "model": "model-a",
        "content": [{"type": "text", "text": "x".repeat(4000)}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1}})
    .to_string();
    let half = Bytes::copy_from_slice(&reply.as_bytes()[..reply.len() / 2]);
    let broken = || {
        Reply::chunked(
            200,
            "application/json",
            vec![(Duration::ZERO, half.clone())],
        )
        .header("content-length", &reply.len().to_string())
        .then_abort()
    };
    mock.on("/v1/messages").model("model-a").reply(broken());
    let s = Sluice::start(&fill(PAIR, &mock), &[]).await;

    let r = client::post_json(&s.url("/v1/messages"), &body("pair", false), &[AV, KEY]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "model-b", "the second target served");
    let snap = s.wait_requests(1).await;
    assert_eq!(snap.recent[0].attempts, 2);

    // With no other target, the client gets a 502 in its dialect, not a short body.
    mock.on("/v1/messages").model("only-a").reply(broken());
    let r = client::post_json(&s.url("/v1/messages"), &body("only-a", false), &[AV, KEY]).await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["type"], "error");
}

#[tokio::test]
async fn invalid_utf8_in_a_request_body_is_a_400_in_the_routes_dialect() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(SINGLE, &mock), &[]).await;
    let raw = b"{\"model\":\"m\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}".to_vec();

    let r = client::post_raw(
        &s.url("/v1/messages"),
        raw.clone(),
        &[AV, KEY, ("content-type", "application/json")],
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["type"], "invalid_request_error");
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("UTF-8")
    );

    let r = client::post_raw(
        &s.url("/v1/chat/completions"),
        raw,
        &[KEY, ("content-type", "application/json")],
    )
    .await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], "invalid_request");
    assert_eq!(mock.count(), 0, "nothing was forwarded");
}

/// Opens a connection to a sluice with a 200 ms header read timeout, sends `first` (maybe
/// nothing) and asserts the server closes it well within 5 s (the old default was 30 s),
/// then that a normal request still works.
async fn closed_after_header_read_timeout(first: &[u8]) {
    let mock = MockUpstream::start().await;
    let cfg = fill(SINGLE, &mock).replace(
        "[routing]",
        "[server]\nheader_read_timeout = \"200ms\"\n\n[routing]",
    );
    let s = Sluice::start(&cfg, &[]).await;
    let mut sock = tokio::net::TcpStream::connect(s.listen()).await.unwrap();
    sock.write_all(first).await.unwrap();

    let mut buf = [0u8; 256];
    let read = tokio::time::timeout(Duration::from_secs(5), sock.read(&mut buf)).await;

    assert!(
        matches!(read, Ok(Ok(0)) | Ok(Err(_))),
        "connection still open: {read:?}"
    );
    let r = client::post_json(&s.url("/v1/messages"), &body("m", false), &[AV, KEY]).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn a_connection_that_never_finishes_its_head_is_closed_after_header_read_timeout() {
    closed_after_header_read_timeout(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n").await;
}

#[tokio::test]
async fn a_connection_that_sends_nothing_is_closed_after_header_read_timeout() {
    // Before the first bytes arrive sluice cannot tell HTTP/1 from HTTP/2, so the timeout has
    // to cover that wait too (hyper's own header timer starts only once it serves HTTP/1).
    closed_after_header_read_timeout(b"").await;
}

#[tokio::test]
async fn early_head_with_no_target_left_ends_with_one_error_event() {
    // The only target is a zombie: the head went out early (heartbeats), so the failure is one
    // well-formed error event, not an HTTP error and not a hang.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_chunks(vec![Bytes::from(PING)]).then_stall());
    let cfg = format!("{PAIR}\n[[combos]]\nname = \"solo\"\ntargets = [\"a/model-a\"]\n");
    let s = Sluice::start(&fill(&cfg, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("solo", true), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    assert_eq!(st.status, 200);
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with(PING), "{text}");
    assert_eq!(count(&got, "event: error"), 1, "{text}");
    assert_eq!(count(&got, "event: message_start"), 0, "{text}");
    assert!(text.contains("readiness timeout"), "{text}");
    let snap = s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::UpstreamError
    );
    assert_eq!(snap.recent[0].status, 200);
}

#[tokio::test(start_paused = true)]
async fn execution_budget_with_paused_time_cuts_a_stream_at_execution_max_wait() {
    // Paused tokio time: a stream that keeps sending content every second for an hour is cut
    // with one error event once the 10-minute execution budget (above the provider's 2-minute
    // timeout) is spent, and the request is not penalised.
    let mock = MockUpstream::start().await;
    let start = Bytes::from_static(b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"x\",\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n");
    let delta = Bytes::from_static(b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"la \"}}\n\n");
    let events = std::iter::once((Duration::ZERO, start))
        .chain((0..3600).map(|_| (Duration::from_secs(1), delta.clone())))
        .collect();
    mock.on("/v1/messages").reply(Reply::sse_timed(events));
    let cfg = fill(SINGLE, &mock)
        .replace(
            "profile = \"api_key\"",
            "profile = \"api_key\"\ntimeout = \"2m\"",
        )
        .replace(
            "[resilience.stream]",
            "[resilience.queue]\nexecution_max_wait = \"10m\"\n\n[resilience.stream]",
        )
        .replace(
            "heartbeat_interval = \"40ms\"",
            "heartbeat_interval = \"15s\"",
        );
    let s = Sluice::start(&cfg, &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("m", true), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(Duration::from_secs(7200)).await;

    assert_eq!(st.status, 200);
    assert_eq!(count(&got, "event: error"), 1);
    assert!(String::from_utf8_lossy(&got).contains("RATE_LIMIT_EXECUTION_TIMEOUT"));
    let deltas = count(&got, "text_delta");
    assert!(
        (590..=601).contains(&deltas),
        "cut near 10 minutes of 1/s deltas: {deltas}"
    );
    let snap = s.wait_requests(1).await;
    let c = &snap.providers[0].connections[0];
    assert_eq!(
        c.status,
        sluice::snapshot::ConnectionStatus::Active,
        "sluice's own budget cools nothing: {c:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn zombie_first_target_falls_back_with_the_default_timers() {
    // Paused tokio time, shipped defaults (heartbeat 15s, readiness 30s): the zombie is
    // abandoned at 30s and the second target serves, behind an early head with heartbeats.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_chunks(vec![Bytes::from(PING)]).then_stall());
    mock.on("/v1/messages")
        .model("model-b")
        .reply(Reply::sse_fixture("anthropic-text"));
    let cfg = fill(PAIR, &mock).replace(
        "heartbeat_interval = \"60ms\"\nreadiness_timeout = \"150ms\"\ncontent_stall_timeout = \"2s\"\n",
        "",
    );
    let s = Sluice::start(&cfg, &[]).await;
    let st_cfg = s.core().settings_snapshot().stream.clone();
    assert_eq!(
        (st_cfg.heartbeat_interval, st_cfg.readiness_timeout),
        (Duration::from_secs(15), Duration::from_secs(30))
    );

    // The support client gives up on a head after 10 s; the early head comes at 15 s.
    let req = client::request(
        http::Method::POST,
        &s.url("/v1/messages"),
        &[AV, KEY, ("content-type", "application/json")],
        client::full(serde_json::to_vec(&body("pair", true)).unwrap()),
    );
    let http = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build(hyper_util::client::legacy::connect::HttpConnector::new());
    let resp = http.request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let got = http_body_util::BodyExt::collect(resp.into_body())
        .await
        .unwrap()
        .to_bytes();

    let text = String::from_utf8_lossy(&got);
    let served = String::from_utf8_lossy(&fixture("anthropic-text")).into_owned();
    assert!(text.starts_with(PING), "{text}");
    assert!(text.ends_with(&served), "the second target served: {text}");
    let snap = s.wait_requests(1).await;
    assert_eq!(snap.recent[0].attempts, 2);
    assert_eq!(snap.recent[0].attempt_log[0].reason, "zombie_stream");
}

#[tokio::test]
async fn an_auth_cooled_connection_is_never_waited_on() {
    // A 401 cools the connection; waiting cannot fix a bad key, so the next request is
    // answered at once (no wait recorded) instead of sleeping through the cooldown.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").reply(Reply::anthropic_error(
        401,
        "authentication_error",
        "invalid x-api-key",
    ));
    let cfg = fill(TWO_CONNECTIONS, &mock).replace(
        "  [[providers.connections]]\n  id = \"k2\"\n  auth = { env = \"K2\" }\n",
        "",
    );
    let s = Sluice::start(&cfg, &[("K1", "key-one")]).await;
    let first = client::post_json(&s.url("/v1/messages"), &body("m", false), &[AV]).await;
    assert_eq!(first.status, 401, "{}", first.text());
    let snap = s.snapshot();
    let k1 = &snap.providers[0].connections[0];
    assert_eq!(
        (
            k1.status.as_str(),
            sluice::snapshot::word::or_empty(&k1.last_error_kind)
        ),
        ("cooling", "auth"),
        "{k1:?}"
    );

    let second = client::post_json(&s.url("/v1/messages"), &body("m", false), &[AV]).await;

    assert_ne!(second.status, 200, "{}", second.text());
    let snap = s.wait_requests(2).await;
    assert!(
        snap.recent[0].waits.is_empty(),
        "{:?}",
        snap.recent[0].waits
    );
    assert_eq!(snap.recent[0].skipped[0].reason, "connection_cooldown");
}
