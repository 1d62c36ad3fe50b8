//! Stream guards (spec §6) through real HTTP: the pre-content hold with fallback before
//! anything reaches the client (A14 a), heartbeats while holding, the content-stall watchdog
//! (A20 b), zombie streams, and a long "thinking" stream that only pings (A20 a). Durations
//! are scaled down to milliseconds in the test config; nothing sleeps for seconds.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::support::{MockUpstream, Reply, Sluice, client, fill, fixture};

mod empty_turn;

const READ: Duration = Duration::from_secs(5);
const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const KEY: (&str, &str) = ("x-api-key", "sk-client-key");

/// Two anthropic providers on one mock (told apart by model), a combo over both, and
/// millisecond stream guards.
const CONFIG: &str = r#"
[routing]
default_provider = "a"

[resilience.stream]
heartbeat_interval = "60ms"
readiness_timeout = "300ms"
content_stall_timeout = "600ms"

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

fn body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": true, "messages": [{"role": "user", "content": "hi"}]})
}

fn events(name: &str) -> Vec<Bytes> {
    String::from_utf8_lossy(&fixture(name))
        .split_inclusive("\n\n")
        .map(|e| Bytes::from(e.to_string()))
        .collect()
}

fn ev(s: &str) -> Bytes {
    Bytes::from(s.to_string())
}

const PING: &str = "event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// The stream with every ping event removed: the upstream's own and the heartbeats sluice adds
/// whenever a fallback, a reopen or a quiet upstream takes longer than the 60 ms heartbeat
/// interval (a loaded machine), so a comparison with a fixture does not depend on timing.
fn without_pings(stream: &[u8]) -> String {
    String::from_utf8_lossy(stream).replace(PING, "")
}

fn count(hay: &[u8], needle: &str) -> usize {
    String::from_utf8_lossy(hay).matches(needle).count()
}

#[tokio::test]
async fn error_event_before_content_falls_back_with_nothing_sent() {
    // Case A14(a): a 200 stream whose first event is an overload error is a failed attempt;
    // the client receives a normal stream from the next target and one message_start.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_chunks(events("anthropic-error-before-content")));
    mock.on("/v1/messages")
        .model("model-b")
        .reply(Reply::sse_fixture("anthropic-text"));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("pair"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    assert_eq!(st.status, 200);
    assert_eq!(
        without_pings(&got),
        without_pings(&fixture("anthropic-text")),
        "exactly the second target's stream"
    );
    assert_eq!(count(&got, "event: message_start"), 1);
    let snap = s.wait_requests(1).await;
    assert_eq!(
        (snap.recent[0].attempts, snap.recent[0].target.as_str()),
        (2, "b:kb/model-b")
    );
    let a = &snap.providers[0].connections[0];
    assert_eq!(
        (
            a.status.as_str(),
            sluice::snapshot::word::or_empty(&a.last_error_kind)
        ),
        ("active", "overloaded"),
        "529-class: no cooldown"
    );
}

#[tokio::test]
async fn error_before_content_on_the_last_target_is_answered_as_http_error() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(events("anthropic-error-before-content")));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let r = client::post_json(&s.url("/v1/messages"), &body("plain-model"), &[AV, KEY]).await;

    assert_eq!(r.status, 529, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["type"].as_str(), v["error"]["type"].as_str()),
        (Some("error"), Some("overloaded_error"))
    );
}

#[tokio::test]
async fn lifecycle_frames_are_held_and_heartbeats_keep_the_client_alive() {
    // message_start, then silence longer than the heartbeat interval, then content: the client
    // first gets pings (never inside an event), then the held frames and the rest, unchanged.
    let mock = MockUpstream::start().await;
    let all = events("anthropic-text");
    let mut chunks = vec![all[0].clone()]; // message_start
    chunks.extend((0..4).map(|_| Bytes::new())); // four 50 ms gaps of silence (200 ms)
    chunks.extend(all[1..].iter().cloned());
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(chunks).pace(Duration::from_millis(50)));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("plain-model"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    let text = String::from_utf8_lossy(&got).into_owned();
    let start = text
        .find("event: message_start")
        .unwrap_or_else(|| panic!("message_start relayed: {text}"));
    let before = &text[..start];
    assert!(
        before.matches(PING).count() >= 1,
        "heartbeats before the held frames: {before:?}"
    );
    assert_eq!(
        before.replace(PING, ""),
        "",
        "only whole ping events precede the held frames"
    );
    let upstream = String::from_utf8_lossy(&fixture("anthropic-text")).into_owned();
    assert_eq!(
        text[start..].replace(PING, ""),
        upstream.replace(PING, ""),
        "the upstream bytes, in order, plus pings between events"
    );
    assert_eq!(
        s.wait_requests(1).await.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Ok
    );
}

#[tokio::test]
async fn thinking_stream_that_only_pings_within_the_stall_timeout_completes() {
    // Case A20(a), scaled: message_start, then only pings for ~160 ms (longer than the 60 ms
    // heartbeat, well within the 600 ms stall timeout so a loaded machine's scheduling delays
    // cannot push it over), then content: completes.
    let mock = MockUpstream::start().await;
    let all = events("anthropic-text");
    let mut chunks = vec![all[0].clone()];
    chunks.extend((0..4).map(|_| ev(PING)));
    chunks.extend(all[1..].iter().cloned());
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(chunks).pace(Duration::from_millis(40)));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("plain-model"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    assert!(
        String::from_utf8_lossy(&got).contains("event: message_stop"),
        "completed"
    );
    assert_eq!(
        s.wait_requests(1).await.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Ok
    );
}

#[tokio::test]
async fn stream_that_pings_past_the_stall_timeout_without_output_is_abandoned() {
    // §6: keepalives do not restart the content-stall budget, which runs from the head: a
    // stream stuck after message_start is ended at the stall timeout, not at the provider
    // timeout.
    let mock = MockUpstream::start().await;
    let all = events("anthropic-text");
    let mut chunks = vec![all[0].clone()];
    chunks.extend((0..30).map(|_| ev(PING)));
    mock.on("/v1/messages").reply(
        Reply::sse_chunks(chunks)
            .pace(Duration::from_millis(40))
            .then_stall(),
    );
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("plain-model"), &[AV, KEY]).await;
    let (got, ended) = st.read_to_end(READ).await;

    assert!(ended);
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        !text.contains("message_start"),
        "the held frames never reached the client"
    );
    assert!(
        text.trim_end()
            .rsplit("\n\n")
            .next()
            .unwrap_or_default()
            .starts_with("event: error"),
        "{text}"
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Truncated
    );
    assert_eq!(
        sluice::snapshot::word::or_empty(&snap.providers[0].connections[0].last_error_kind),
        "stream_stall"
    );
}

#[tokio::test]
async fn stalled_stream_after_content_is_abandoned_with_an_error_event() {
    // Case A20(b), scaled: first text delta, then silence with the connection open. At the
    // stall timeout the attempt is abandoned: a terminal error event, the request recorded,
    // and (stream_stall_cooldown = false) no cooldown.
    let mock = MockUpstream::start().await;
    let first: Vec<Bytes> = events("anthropic-text").into_iter().take(4).collect();
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(first).then_stall());
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("plain-model"), &[AV, KEY]).await;
    let (got, ended) = st.read_to_end(READ).await;

    assert!(ended, "the stream was ended by sluice");
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.contains("text_delta"));
    assert!(text.trim_end().ends_with("}"), "ends with a complete event");
    let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
    let data = last
        .strip_prefix("event: error\ndata: ")
        .unwrap_or_else(|| panic!("last event is an error: {text}"));
    let v: Value = serde_json::from_str(data).unwrap();
    assert_eq!(
        (v["type"].as_str(), v["error"]["type"].as_str()),
        (Some("error"), Some("api_error"))
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Truncated
    );
    let c = &snap.providers[0].connections[0];
    assert_eq!(
        (
            c.status.as_str(),
            sluice::snapshot::word::or_empty(&c.last_error_kind)
        ),
        ("active", "stream_stall")
    );
}

#[tokio::test]
async fn zombie_stream_before_commit_falls_back_to_the_next_target() {
    // A 200 stream that sends nothing useful within the readiness timeout is a failed attempt;
    // with readiness shorter than the heartbeat nothing was committed, so the next target serves.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_chunks(vec![ev(PING)]).then_stall());
    mock.on("/v1/messages")
        .model("model-b")
        .reply(Reply::sse_fixture("anthropic-text"));
    let cfg = fill(CONFIG, &mock).replace(
        "readiness_timeout = \"300ms\"",
        "readiness_timeout = \"40ms\"",
    );
    let s = Sluice::start(&cfg, &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("pair"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    // Nothing of the zombie ever reaches the client.
    assert_eq!(
        without_pings(&got),
        without_pings(&fixture("anthropic-text"))
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(snap.recent[0].attempts, 2);
    assert_eq!(
        sluice::snapshot::word::or_empty(&snap.providers[0].connections[0].last_error_kind),
        "transient"
    );
}

#[tokio::test]
async fn opt_in_throughput_watchdog_abandons_a_trickling_stream() {
    // §6 throughput watchdog (opt-in): text arriving slower than min_bytes_per_sec over a full
    // window after the warm-up abandons the attempt with a terminal error event.
    let mock = MockUpstream::start().await;
    let all = events("anthropic-text");
    let delta = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\n\n";
    let mut chunks: Vec<Bytes> = all[..3].to_vec();
    chunks.extend((0..40).map(|_| ev(delta)));
    mock.on("/v1/messages").reply(
        Reply::sse_chunks(chunks)
            .pace(Duration::from_millis(30))
            .then_stall(),
    );
    let cfg = fill(CONFIG, &mock).replace(
        "content_stall_timeout = \"600ms\"",
        "content_stall_timeout = \"5s\"\n\n[resilience.stream.throughput_watchdog]\nenabled = true\nwarmup = \"100ms\"\nwindow = \"200ms\"\nmin_bytes_per_sec = 1000",
    );
    let s = Sluice::start(&cfg, &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("plain-model"), &[AV, KEY]).await;
    let (got, ended) = st.read_to_end(READ).await;

    assert!(ended);
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(
        text.matches("text_delta").count() < 40,
        "cut before the upstream finished"
    );
    assert!(
        text.trim_end()
            .rsplit("\n\n")
            .next()
            .unwrap_or_default()
            .starts_with("event: error"),
        "{text}"
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Truncated
    );
    assert_eq!(
        sluice::snapshot::word::or_empty(&snap.providers[0].connections[0].last_error_kind),
        "stream_stall"
    );
}

/// `message_start` then a broken connection: a 200 stream that broke before any content.
fn broken_before_content() -> Reply {
    Reply::sse_chunks(events("anthropic-text")[..1].to_vec()).then_abort()
}

#[tokio::test]
async fn a_stream_that_breaks_before_content_is_reopened_once_on_the_same_connection() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .times(1)
        .reply(broken_before_content());
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_fixture("anthropic-text"));
    mock.on("/v1/messages")
        .model("model-b")
        .reply(Reply::sse_fixture("anthropic-text"));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("pair"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    assert_eq!(st.status, 200);
    assert_eq!(
        without_pings(&got),
        without_pings(&fixture("anthropic-text")),
        "one clean stream"
    );
    let snap = s.wait_requests(1).await;
    let r = &snap.recent[0];
    assert_eq!(
        (r.attempts, r.target.as_str()),
        (2, "a:ka/model-a"),
        "same connection"
    );
    let reasons: Vec<&str> = r.attempt_log.iter().map(|a| a.reason.as_str()).collect();
    assert_eq!(reasons[0], "recovered", "{reasons:?}");
    assert_eq!(
        mock.requests_to("/v1/messages").len(),
        2,
        "b was never asked"
    );
    let a = &snap.providers[0];
    assert_eq!(a.connections[0].status.as_str(), "active");
    assert_eq!(
        a.breaker.failure_count, 0,
        "a recovered blip is not a failure"
    );
}

#[tokio::test]
async fn a_second_break_moves_on_and_recovery_can_be_switched_off() {
    for (recover, want_attempts, want_a_requests) in [(true, 3, 2), (false, 2, 1)] {
        let mock = MockUpstream::start().await;
        mock.on("/v1/messages")
            .model("model-a")
            .reply(broken_before_content());
        mock.on("/v1/messages")
            .model("model-b")
            .reply(Reply::sse_fixture("anthropic-text"));
        let cfg = fill(CONFIG, &mock).replace(
            "content_stall_timeout = \"600ms\"",
            &format!("content_stall_timeout = \"600ms\"\nrecover_before_content = {recover}"),
        );
        let s = Sluice::start(&cfg, &[]).await;

        let mut st = client::open_json(&s.url("/v1/messages"), &body("pair"), &[AV, KEY]).await;
        let (got, _) = st.read_to_end(READ).await;

        assert_eq!(
            without_pings(&got),
            without_pings(&fixture("anthropic-text")),
            "recover = {recover}"
        );
        let snap = s.wait_requests(1).await;
        let r = &snap.recent[0];
        assert_eq!(
            (r.attempts, r.target.as_str()),
            (want_attempts, "b:kb/model-b")
        );
        let a_requests = mock
            .requests_to("/v1/messages")
            .iter()
            .filter(|q| String::from_utf8_lossy(&q.body).contains("model-a"))
            .count();
        assert_eq!(a_requests, want_a_requests, "recover = {recover}");
    }
}

/// CONFIG with mid-stream continuation on or off.
fn continuing(mock: &MockUpstream, on: bool) -> String {
    fill(CONFIG, mock).replace(
        "content_stall_timeout = \"600ms\"",
        &format!("content_stall_timeout = \"600ms\"\ncontinue_after_break = {on}"),
    )
}

/// The fixture's message_start, block start, ping and first two text deltas ("Sure",
/// " — here"), then a broken connection: text reached the client.
fn broken_after_text() -> Reply {
    Reply::sse_chunks(events("anthropic-text")[..5].to_vec()).then_abort()
}

/// What a continuation of that turn streams: its own message_start, block start and ping,
/// then the rest of the fixture's text and its end.
fn continuation_stream() -> Reply {
    let evs = events("anthropic-text");
    let mut chunks = evs[..3].to_vec();
    chunks.extend_from_slice(&evs[5..]);
    Reply::sse_chunks(chunks)
}

#[tokio::test]
async fn a_text_turn_that_breaks_after_text_is_continued_into_one_message() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .body_contains("\"assistant\"")
        .reply(continuation_stream());
    mock.on("/v1/messages")
        .model("model-a")
        .reply(broken_after_text());
    let s = Sluice::start(&continuing(&mock, true), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("model-a"), &[AV, KEY]).await;
    let (got, ended) = st.read_to_end(READ).await;

    assert!(ended);
    assert_eq!(st.status, 200);
    assert_eq!(count(&got, "event: message_start"), 1);
    assert_eq!(count(&got, "event: content_block_start"), 1);
    assert_eq!(count(&got, "event: message_stop"), 1);
    assert_eq!(count(&got, "event: error"), 0);
    assert_eq!(
        without_pings(&got),
        without_pings(&fixture("anthropic-text")),
        "the client sees the uninterrupted stream, byte for byte but for pings"
    );
    let sent = mock.requests_to("/v1/messages");
    assert_eq!(sent.len(), 2);
    let second: Value = serde_json::from_slice(&sent[1].body).unwrap();
    let msgs = second["messages"].as_array().unwrap();
    assert_eq!(
        msgs.last().unwrap(),
        &json!({"role": "assistant", "content": "Sure — here"}),
        "the text so far as an assistant prefill"
    );
    assert_eq!(second["stream"], true);
    let snap = s.wait_requests(1).await;
    let r = &snap.recent[0];
    assert!(r.continued);
    assert_eq!(r.outcome, sluice::snapshot::RequestOutcome::Ok);
    assert_eq!(r.attempts, 2);
    let reasons: Vec<&str> = r.attempt_log.iter().map(|a| a.reason.as_str()).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!(reasons[1], "continuation", "{reasons:?}");
    assert_ne!(
        reasons[0], "ok",
        "the broken attempt is the truncation it was"
    );
}

#[tokio::test]
async fn with_continuation_off_a_break_after_text_ends_with_one_error_event() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .body_contains("\"assistant\"")
        .reply(continuation_stream());
    mock.on("/v1/messages")
        .model("model-a")
        .reply(broken_after_text());
    let s = Sluice::start(&continuing(&mock, false), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("model-a"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    assert_eq!(count(&got, "event: error"), 1);
    assert_eq!(count(&got, "event: message_stop"), 0);
    assert_eq!(mock.requests_to("/v1/messages").len(), 1);
    let snap = s.wait_requests(1).await;
    assert!(!snap.recent[0].continued);
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Truncated
    );
}

#[tokio::test]
async fn a_tool_use_turn_is_never_continued() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .body_contains("\"assistant\"")
        .reply(continuation_stream());
    let tool = vec![
        events("anthropic-text")[0].clone(),
        ev(
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"grep\",\"input\":{}}}\n\n",
        ),
        ev(
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"q\\\":\"}}\n\n",
        ),
    ];
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_chunks(tool).then_abort());
    let s = Sluice::start(&continuing(&mock, true), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("model-a"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    assert_eq!(count(&got, "event: error"), 1);
    assert_eq!(mock.requests_to("/v1/messages").len(), 1, "never re-issued");
    let snap = s.wait_requests(1).await;
    assert!(!snap.recent[0].continued);
}

fn text_delta(text: &str) -> Bytes {
    Bytes::from(format!(
        "event: content_block_delta\ndata: {}\n\n",
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})
    ))
}

/// The concatenated text deltas of an Anthropic stream.
fn text_of(stream: &[u8]) -> String {
    String::from_utf8_lossy(stream)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["delta"]["type"] == "text_delta")
        .map(|v| v["delta"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[tokio::test]
async fn a_prefill_ending_in_whitespace_is_trimmed_and_the_space_is_not_doubled() {
    let evs = events("anthropic-text");
    let mut broken = evs[..3].to_vec();
    broken.extend([text_delta("Line one."), text_delta(" Then ")]);
    let mut cont = evs[..3].to_vec();
    cont.extend([text_delta(" two"), text_delta(" words.")]);
    cont.extend_from_slice(&evs[8..]);
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .body_contains("\"assistant\"")
        .reply(Reply::sse_chunks(cont));
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::sse_chunks(broken).then_abort());
    let s = Sluice::start(&continuing(&mock, true), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("model-a"), &[AV, KEY]).await;
    let (got, _) = st.read_to_end(READ).await;

    assert_eq!(text_of(&got), "Line one. Then two words.");
    assert_eq!(count(&got, "event: message_start"), 1);
    assert_eq!(count(&got, "event: message_stop"), 1);
    assert_eq!(count(&got, "event: error"), 0);
    let sent = mock.requests_to("/v1/messages");
    let second: Value = serde_json::from_slice(&sent[1].body).unwrap();
    assert_eq!(
        second["messages"][1]["content"], "Line one. Then",
        "no trailing whitespace in the prefill"
    );
}

#[tokio::test]
async fn a_continuation_that_fails_ends_the_stream_with_one_error_event() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .body_contains("\"assistant\"")
        .reply(Reply::anthropic_error(
            529,
            "overloaded_error",
            "Overloaded",
        ));
    mock.on("/v1/messages")
        .model("model-a")
        .reply(broken_after_text());
    let s = Sluice::start(&continuing(&mock, true), &[]).await;

    let mut st = client::open_json(&s.url("/v1/messages"), &body("model-a"), &[AV, KEY]).await;
    let (got, ended) = st.read_to_end(READ).await;

    assert!(ended);
    assert_eq!(count(&got, "event: message_start"), 1);
    assert_eq!(count(&got, "event: error"), 1);
    assert_eq!(count(&got, "event: message_stop"), 0);
    assert_eq!(
        text_of(&got),
        "Sure — here",
        "only the text before the break"
    );
    assert_eq!(mock.requests_to("/v1/messages").len(), 2, "continued once");
    let snap = s.wait_requests(1).await;
    let r = &snap.recent[0];
    assert!(r.continued);
    assert_eq!(r.outcome, sluice::snapshot::RequestOutcome::Truncated);
    assert_eq!(r.attempt_log.len(), 2, "{:?}", r.attempt_log);
    assert_eq!(r.attempt_log[1].status, 529);
}
