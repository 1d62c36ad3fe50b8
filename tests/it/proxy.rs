//! Proxy integration tests: real HTTP through an in-process sluice to a scripted mock upstream.
//!
//! Each test asserts on what the client received *and* what the upstream saw (and, where it
//! matters, on the snapshot). Contract: DESIGN §3–§4 and clients-and-conventions §0–§3.

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use serde_json::{Value, json};

use crate::support::client::{self, Resp};
use crate::support::wire::anthropic_message;
use crate::support::{MockUpstream, Reply, Sluice, fill, fixture};

const READ: Duration = Duration::from_secs(5);

/// One anthropic provider with a passthrough connection: the default for unknown models.
const ANTHROPIC: &str = r#"
[routing]
default_provider = "up"

[[providers]]
id = "up"
dialect = "anthropic"
base_url = "{MOCK}"

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;

/// One openai provider with a passthrough connection.
const OPENAI: &str = r#"
[routing]
default_provider = "oai"

[[providers]]
id = "oai"
dialect = "openai"
base_url = "{MOCK}"

  [[providers.connections]]
  id = "oai-mine"
  auth = "passthrough"
"#;

/// Two anthropic providers on the same mock (told apart by model) and a combo over both.
const TWO_TARGETS: &str = r#"
[routing]
default_provider = "a"

[[providers]]
id = "a"
dialect = "anthropic"
base_url = "{A}"

  [[providers.connections]]
  id = "ka"
  auth = "passthrough"

[[providers]]
id = "b"
dialect = "anthropic"
base_url = "{B}"

  [[providers.connections]]
  id = "kb"
  auth = "passthrough"

[[combos]]
name = "fast"
strategy = "priority"
targets = ["a/model-a", "b/model-b"]
"#;

const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const KEY: (&str, &str) = ("x-api-key", "sk-client-key");

fn anthropic_body(model: &str, stream: bool) -> Value {
    json!({
        "model": model,
        "max_tokens": 256,
        "stream": stream,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=test;"},
            {"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi ✓ café"}]}],
        "thinking": {"type": "adaptive", "display": "omitted"},
        "output_config": {"effort": "medium"},
        "metadata": {"user_id": "{\"device\":\"t\"}"}
    })
}

fn chat_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

fn responses_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "input": "hi"})
}

fn two_targets(a: &str, b: &str) -> String {
    TWO_TARGETS.replace("{A}", a).replace("{B}", b)
}

/// Asserts an Anthropic error body: `{"type":"error","error":{"type":kind,"message":".."}}`.
fn assert_anthropic_error(r: &Resp, status: u16, kind: &str) {
    assert_eq!(r.status.as_u16(), status, "body: {}", r.text());
    let v = r.json();
    assert_eq!(v["type"], "error", "anthropic error shape: {v}");
    assert_eq!(v["error"]["type"], kind, "anthropic error type: {v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "message: {v}"
    );
}

/// Asserts an OpenAI error body: `{"error":{"message":"..","type":"..","code":..}}`.
fn assert_openai_error(r: &Resp, status: u16) {
    assert_eq!(r.status.as_u16(), status, "body: {}", r.text());
    let v = r.json();
    let e = v["error"]
        .as_object()
        .unwrap_or_else(|| panic!("openai error shape: {v}"));
    assert!(
        e.get("message")
            .and_then(Value::as_str)
            .is_some_and(|m| !m.is_empty()),
        "message: {v}"
    );
    assert!(
        e.get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| !t.is_empty()),
        "type: {v}"
    );
    assert!(e.contains_key("code"), "code: {v}");
    assert!(
        v.get("type").is_none(),
        "must not be the anthropic shape: {v}"
    );
}

/// The first `n` SSE events of a fixture, one `Bytes` per event.
fn first_events(name: &str, n: usize) -> Vec<Bytes> {
    String::from_utf8_lossy(&fixture(name))
        .split_inclusive("\n\n")
        .take(n)
        .map(|e| Bytes::from(e.to_string()))
        .collect()
}

/// Asserts `tail` ends with a complete `event: error` SSE event in the Anthropic shape.
fn assert_last_event_is_anthropic_error(tail: &[u8]) {
    let text = String::from_utf8_lossy(tail).into_owned();
    let last = text
        .trim_end_matches('\n')
        .rsplit("\n\n")
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(
        text.ends_with("\n\n"),
        "the final event is terminated by a blank line: {text:?}"
    );
    let mut lines = last.lines();
    assert_eq!(lines.next(), Some("event: error"), "last event: {last:?}");
    let data = lines
        .next()
        .and_then(|l| l.strip_prefix("data: "))
        .unwrap_or_else(|| panic!("data line: {last:?}"));
    let v: Value = serde_json::from_str(data).unwrap();
    assert_eq!(v["type"], "error");
    assert!(
        v["error"]["type"].as_str().is_some_and(|t| !t.is_empty()),
        "{v}"
    );
    assert!(v["error"]["message"].as_str().is_some(), "{v}");
}

// === routes and pass-through ===

#[tokio::test]
async fn messages_json_reply_and_request_body_pass_through_unchanged() {
    let mock = MockUpstream::start().await;
    let reply = Reply::json(200, anthropic_message("claude-sonnet-4-5", "Hello ✓"))
        .header("request-id", "req_123");
    let expected = reply.body_bytes();
    mock.on("/v1/messages").reply(reply);
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let body = anthropic_body("claude-sonnet-4-5", false);
    let r = client::post_json(&s.url("/v1/messages?beta=true"), &body, &[AV, KEY]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.body, expected,
        "client must get the upstream body byte for byte"
    );
    assert_eq!(r.header("request-id"), Some("req_123"));
    let up = mock.single();
    assert_eq!(
        (up.method.clone(), up.path.as_str()),
        (Method::POST, "/v1/messages")
    );
    assert_eq!(
        up.json(),
        body,
        "no combo: the body goes upstream semantically unchanged"
    );
}

#[tokio::test]
async fn count_tokens_is_forwarded_with_its_query_string() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages/count_tokens")
        .reply(Reply::json(200, json!({"input_tokens": 4242})));
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let body =
        json!({"model": "claude-sonnet-4-5", "messages": [{"role": "user", "content": "hi"}]});
    let r = client::post_json(
        &s.url("/v1/messages/count_tokens?beta=true"),
        &body,
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json(), json!({"input_tokens": 4242}));
    let up = mock.single();
    assert_eq!(up.path_and_query(), "/v1/messages/count_tokens?beta=true");
    assert_eq!(up.json(), body);
}

#[tokio::test]
async fn models_lists_the_configured_combos() {
    let mock = MockUpstream::start().await;
    let config = format!(
        "{}\n[[combos]]\nname = \"smart\"\ntargets = [\"b/model-b\"]\n",
        two_targets(&mock.base_url(), &mock.base_url())
    );
    let s = Sluice::start(&config, &[]).await;

    let r = client::get(&s.url("/v1/models"), &[AV, KEY]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let ids: Vec<&str> = v["data"]
        .as_array()
        .unwrap_or_else(|| panic!("data[]: {v}"))
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect();
    assert!(
        ids.contains(&"fast") && ids.contains(&"smart"),
        "combo names in data[].id: {ids:?}"
    );
}

#[tokio::test]
async fn head_api_hello_is_200() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let r = client::send(client::request(
        Method::HEAD,
        &s.url("/api/hello"),
        &[],
        client::full(Bytes::new()),
    ))
    .await;

    assert_eq!(r.status, 200);
    assert!(r.body.is_empty());
}

#[tokio::test]
async fn requests_go_only_to_providers_of_the_route_dialect() {
    let anthropic = MockUpstream::start().await;
    let openai = MockUpstream::start().await;
    // The openai provider is listed first: /v1/messages must skip it.
    let config = format!(
        "{}\n{}",
        OPENAI
            .replace(
                "default_provider = \"oai\"",
                "default_provider = [\"oai\", \"up\"]"
            )
            .replace("{MOCK}", &openai.base_url()),
        ANTHROPIC
            .replace("[routing]\ndefault_provider = \"up\"\n", "")
            .replace("{MOCK}", &anthropic.base_url())
    );
    let s = Sluice::start(&config, &[]).await;

    let m = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &[AV, KEY],
    )
    .await;
    let c = client::post_json(
        &s.url("/v1/chat/completions"),
        &chat_body("gpt-x", false),
        &[],
    )
    .await;
    let r = client::post_json(
        &s.url("/v1/responses"),
        &responses_body("gpt-x", false),
        &[],
    )
    .await;

    assert_eq!(
        (m.status.as_u16(), c.status.as_u16(), r.status.as_u16()),
        (200, 200, 200),
        "{} | {} | {}",
        m.text(),
        c.text(),
        r.text()
    );
    assert_eq!(m.json()["type"], "message");
    assert_eq!(c.json()["object"], "chat.completion");
    assert_eq!(r.json()["object"], "response");
    let a_paths: Vec<String> = anthropic
        .requests()
        .iter()
        .map(|r| r.path.clone())
        .collect();
    let o_paths: Vec<String> = openai.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(a_paths, ["/v1/messages"]);
    assert_eq!(o_paths, ["/v1/chat/completions", "/v1/responses"]);
    assert_eq!(
        openai.requests()[0].model().as_deref(),
        Some("gpt-x"),
        "default provider: model unchanged"
    );
}

// === streaming ===

/// Streams `fixture` split into several small, paced writes and asserts the client got the
/// exact bytes the mock sent.
async fn assert_stream_byte_exact(config: &str, route: &str, body: Value, fixture_name: &str) {
    let mock = MockUpstream::start().await;
    let reply = Reply::sse_fixture(fixture_name).split(7, Duration::from_millis(3));
    let expected = reply.body_bytes();
    assert_eq!(expected, fixture(fixture_name));
    mock.on(route).reply(reply);
    let s = Sluice::start(&fill(config, &mock), &[]).await;

    let mut st = client::open_json(&s.url(route), &body, &[AV, KEY]).await;
    assert_eq!(st.status, 200);
    assert!(
        st.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream")),
        "content-type: {:?}",
        st.headers.get("content-type")
    );
    let (got, clean) = st.read_to_end(READ).await;

    assert!(clean, "stream must end cleanly");
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(&expected)
    );
    assert_eq!(got, expected, "byte-exact relay");
    assert_eq!(mock.single().json()["stream"], true);
}

#[tokio::test]
async fn anthropic_text_stream_is_relayed_byte_exact() {
    assert_stream_byte_exact(
        ANTHROPIC,
        "/v1/messages",
        anthropic_body("claude-sonnet-4-5", true),
        "anthropic-text",
    )
    .await;
}

#[tokio::test]
async fn anthropic_thinking_tool_stream_is_relayed_byte_exact() {
    assert_stream_byte_exact(
        ANTHROPIC,
        "/v1/messages",
        anthropic_body("claude-opus-4-5", true),
        "anthropic-thinking-tool",
    )
    .await;
}

#[tokio::test]
async fn openai_chat_text_stream_is_relayed_byte_exact() {
    assert_stream_byte_exact(
        OPENAI,
        "/v1/chat/completions",
        chat_body("gpt-5-mini", true),
        "openai-chat-text",
    )
    .await;
}

#[tokio::test]
async fn openai_chat_tools_stream_is_relayed_byte_exact() {
    assert_stream_byte_exact(
        OPENAI,
        "/v1/chat/completions",
        chat_body("gpt-5-mini", true),
        "openai-chat-tools",
    )
    .await;
}

#[tokio::test]
async fn openai_responses_stream_is_relayed_byte_exact() {
    assert_stream_byte_exact(
        OPENAI,
        "/v1/responses",
        responses_body("gpt-5-mini", true),
        "openai-responses",
    )
    .await;
}

#[tokio::test]
async fn stream_events_reach_the_client_before_the_upstream_finishes() {
    let mock = MockUpstream::start().await;
    // Up to the first text delta: the lifecycle frames are held (spec §6) until content.
    let events = first_events("anthropic-text", 4);
    let first_three: Vec<u8> = events.iter().flat_map(|b| b.iter().copied()).collect();
    mock.on("/v1/messages").reply(
        Reply::sse_chunks(events)
            .pace(Duration::from_millis(2))
            .then_stall(),
    );
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-sonnet-4-5", true),
        &[AV, KEY],
    )
    .await;
    assert_eq!(st.status, 200);
    // The upstream never finishes; a buffering proxy would time out here.
    st.read_until(READ, |got| got.len() >= first_three.len())
        .await;

    assert_eq!(&st.received[..], &first_three[..]);
}

#[tokio::test]
async fn upstream_breaking_mid_stream_ends_the_client_stream_with_an_error_event() {
    let mock = MockUpstream::start().await;
    let events = first_events("anthropic-text", 4);
    let sent: Vec<u8> = events.iter().flat_map(|b| b.iter().copied()).collect();
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(events).then_abort());
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", true),
        &[AV, KEY],
    )
    .await;
    let (got, _) = st.read_to_end(READ).await;

    assert!(
        got.starts_with(&sent),
        "relayed bytes first: {:?}",
        String::from_utf8_lossy(&got)
    );
    assert_last_event_is_anthropic_error(&got[sent.len()..]);
}

#[tokio::test]
async fn stream_ending_without_its_terminal_event_gets_an_error_event_and_cools_the_connection() {
    // Spec §0/§6: a stream that ends cleanly but without `message_stop` is a failed attempt.
    let mock = MockUpstream::start().await;
    let events = first_events("anthropic-text", 4);
    let sent: Vec<u8> = events.iter().flat_map(|b| b.iter().copied()).collect();
    mock.on("/v1/messages").reply(Reply::sse_chunks(events));
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", true),
        &[AV, KEY],
    )
    .await;
    let (got, _) = st.read_to_end(READ).await;

    assert!(
        got.starts_with(&sent),
        "relayed bytes first: {:?}",
        String::from_utf8_lossy(&got)
    );
    assert_last_event_is_anthropic_error(&got[sent.len()..]);
    let snap = s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Truncated
    );
    let conn = &snap.providers[0].connections[0];
    assert_eq!(
        (
            conn.status.as_str(),
            sluice::snapshot::word::or_empty(&conn.last_error_kind)
        ),
        ("cooling", "transient")
    );
    assert_eq!(
        snap.providers[0].breaker.failure_count, 1,
        "a truncated stream counts for the breaker"
    );
}

#[tokio::test]
async fn error_event_after_content_is_relayed_and_classified_like_its_status() {
    // Case A14(c): bytes already reached the client, so the error event is relayed as is, the
    // stream ends, and the failure is recorded (overloaded → the 529 row: no cooldown).
    let mock = MockUpstream::start().await;
    let mut events = first_events("anthropic-text", 5);
    events.push(Bytes::from_static(
        b"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
    ));
    let sent: Vec<u8> = events.iter().flat_map(|b| b.iter().copied()).collect();
    mock.on("/v1/messages").reply(Reply::sse_chunks(events));
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", true),
        &[AV, KEY],
    )
    .await;
    let (got, _) = st.read_to_end(READ).await;

    assert_eq!(
        got, sent,
        "the upstream's own error event ends the stream; nothing is appended"
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::UpstreamError
    );
    let conn = &snap.providers[0].connections[0];
    assert_eq!(
        conn.status,
        sluice::snapshot::ConnectionStatus::Active,
        "529-class errors never cool a connection"
    );
    assert_eq!(
        sluice::snapshot::word::or_empty(&conn.last_error_kind),
        "overloaded"
    );
    assert_eq!(snap.providers[0].breaker.failure_count, 0);
}

// === combos and fallback ===

#[tokio::test]
async fn round_robin_combo_alternates_targets_and_weighted_accepts_table_targets() {
    let mock = MockUpstream::start().await;
    let cfg = two_targets(&mock.base_url(), &mock.base_url())
        .replace("strategy = \"priority\"", "strategy = \"round_robin\"");
    let s = Sluice::start(&cfg, &[]).await;
    for _ in 0..4 {
        let r = client::post_json(
            &s.url("/v1/messages"),
            &anthropic_body("fast", false),
            &[AV, KEY],
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let models: Vec<String> = mock
        .requests()
        .iter()
        .map(|r| r.json()["model"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(models.len(), 4);
    assert!(
        models.windows(2).all(|w| w[0] != w[1]),
        "round robin alternates: {models:?}"
    );

    let weighted = two_targets(&mock.base_url(), &mock.base_url())
        .replace("strategy = \"priority\"", "strategy = \"weighted\"")
        .replace("targets = [\"a/model-a\", \"b/model-b\"]", "targets = [{ target = \"a/model-a\", weight = 1000 }, { target = \"b/model-b\", weight = 1 }]");
    let s2 = Sluice::start(&weighted, &[]).await;
    let r = client::post_json(
        &s2.url("/v1/messages"),
        &anthropic_body("fast", false),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn combo_rewrites_only_the_model_and_the_snapshot_names_the_target() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&two_targets(&mock.base_url(), &mock.base_url()), &[]).await;

    let body = anthropic_body("fast", false);
    let r = client::post_json(&s.url("/v1/messages"), &body, &[AV, KEY]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    let mut expected = body.clone();
    expected["model"] = json!("model-a");
    assert_eq!(mock.single().json(), expected, "only `model` is rewritten");
    let snap = s.wait_requests(1).await;
    assert_eq!(snap.totals.requests, 1);
    let rq = &snap.recent[0];
    assert_eq!(
        (
            rq.route.as_str(),
            rq.client_model.as_str(),
            rq.target.as_str(),
            rq.status,
            rq.attempts,
            rq.outcome.as_str()
        ),
        ("/v1/messages", "fast", "a:ka/model-a", 200, 1, "ok")
    );
}

#[tokio::test]
async fn combo_falls_back_to_the_next_target_on_5xx() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::anthropic_error(
            503,
            "overloaded_error",
            "Overloaded",
        ));
    let s = Sluice::start(&two_targets(&mock.base_url(), &mock.base_url()), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("fast", false),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "model-b");
    let models: Vec<Option<String>> = mock.requests().iter().map(|r| r.model()).collect();
    assert_eq!(
        models,
        [Some("model-a".to_string()), Some("model-b".to_string())]
    );
    let snap = s.wait_requests(1).await;
    let rq = &snap.recent[0];
    assert_eq!(
        (
            rq.client_model.as_str(),
            rq.target.as_str(),
            rq.status,
            rq.attempts,
            rq.outcome.as_str()
        ),
        ("fast", "b:kb/model-b", 200, 2, "ok")
    );
    assert_eq!(
        snap.providers
            .iter()
            .map(|p| (p.id.as_str(), p.attempts))
            .collect::<Vec<_>>(),
        [("a", 1), ("b", 1)]
    );
    assert_eq!(snap.providers[0].failures, 1);
}

#[tokio::test]
async fn combo_falls_back_on_a_refused_connection() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&two_targets("{CLOSED}", &mock.base_url()), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &anthropic_body("fast", true),
        &[AV, KEY],
    )
    .await;
    let (got, clean) = st.read_to_end(READ).await;

    assert_eq!(st.status, 200, "{}", st.text());
    assert!(clean);
    assert_eq!(got, fixture("anthropic-text"));
    assert_eq!(mock.single().model().as_deref(), Some("model-b"));
    let snap = s.wait_requests(1).await;
    assert_eq!(
        (snap.recent[0].attempts, snap.recent[0].target.as_str()),
        (2, "b:kb/model-b")
    );
}

#[tokio::test]
async fn combo_falls_back_when_the_upstream_drops_the_connection() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::drop_connection());
    let s = Sluice::start(&two_targets(&mock.base_url(), &mock.base_url()), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("fast", false),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["model"], "model-b");
    assert!(
        mock.requests()
            .iter()
            .any(|r| r.model().as_deref() == Some("model-a")),
        "model-a was tried first"
    );
    assert_eq!(
        mock.requests().last().and_then(|r| r.model()).as_deref(),
        Some("model-b")
    );
}

#[tokio::test]
async fn combo_returns_a_4xx_as_is_without_fallback() {
    let mock = MockUpstream::start().await;
    let reply = Reply::anthropic_error(
        400,
        "invalid_request_error",
        "max_tokens: Extra inputs are not permitted",
    );
    let expected = reply.body_bytes();
    mock.on("/v1/messages").model("model-a").reply(reply);
    let s = Sluice::start(&two_targets(&mock.base_url(), &mock.base_url()), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("fast", false),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 400);
    assert_eq!(r.body, expected, "upstream error body unchanged");
    assert_eq!(
        mock.single().model().as_deref(),
        Some("model-a"),
        "no fallback on 4xx"
    );
}

#[tokio::test]
async fn combo_all_failing_passes_the_last_upstream_status_and_body() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(Reply::anthropic_error(500, "api_error", "first"));
    let last = Reply::anthropic_error(529, "overloaded_error", "Overloaded (last)")
        .header("x-should-retry", "false");
    let expected = last.body_bytes();
    mock.on("/v1/messages").model("model-b").reply(last);
    let s = Sluice::start(&two_targets(&mock.base_url(), &mock.base_url()), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("fast", false),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 529);
    assert_eq!(r.body, expected);
    assert_eq!(r.header("x-should-retry"), Some("false"));
    assert_eq!(mock.count(), 2);
}

#[tokio::test]
async fn combo_all_unreachable_is_502_in_the_anthropic_dialect() {
    let s = Sluice::start(&two_targets("{CLOSED}", "{CLOSED}"), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("fast", false),
        &[AV, KEY],
    )
    .await;

    assert_anthropic_error(&r, 502, "api_error");
    let snap = s.wait_requests(1).await;
    assert_eq!((snap.recent[0].status, snap.recent[0].attempts), (502, 2));
}

#[tokio::test]
async fn unreachable_upstream_is_502_in_the_openai_dialect() {
    let s = Sluice::start(&OPENAI.replace("{MOCK}", "{CLOSED}"), &[]).await;

    let r = client::post_json(
        &s.url("/v1/chat/completions"),
        &chat_body("gpt-5-mini", false),
        &[],
    )
    .await;

    assert_openai_error(&r, 502);
}

#[tokio::test]
async fn combo_targets_of_the_other_dialect_are_translated() {
    let anthropic = MockUpstream::start().await;
    let openai = MockUpstream::start().await;
    let config = format!(
        "{}\n{}\n[[combos]]\nname = \"mixed\"\ntargets = [\"oai/gpt-5-mini\", \"up/claude-haiku-4-5\"]\n",
        ANTHROPIC.replace("{MOCK}", &anthropic.base_url()),
        OPENAI
            .replace("[routing]\ndefault_provider = \"oai\"\n", "")
            .replace("{MOCK}", &openai.base_url())
    );
    let s = Sluice::start(&config, &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("mixed", false),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["type"], "message", "{}", r.text());
    let up = openai.single();
    assert_eq!(
        (up.path.as_str(), up.model().as_deref()),
        ("/v1/chat/completions", Some("gpt-5-mini")),
        "the first target, translated"
    );
    assert_eq!(anthropic.count(), 0);
    let snap = s.wait_requests(1).await;
    assert_eq!(
        (snap.recent[0].attempts, snap.recent[0].target.as_str()),
        (1, "oai:oai-mine/gpt-5-mini")
    );
    assert_eq!(snap.recent[0].attempt_log[0].translated, "anthropic→openai");
}

// === headers and credentials ===

#[tokio::test]
async fn anthropic_version_and_beta_are_forwarded_verbatim() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;
    let beta = "claude-code-20250219,interleaved-thinking-2025-05-14, context-management-2025-06-27,made-up-2099-01-01";

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &[AV, KEY, ("anthropic-beta", beta)],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    let up = mock.single();
    assert_eq!(up.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(up.header("anthropic-beta"), Some(beta));
}

#[tokio::test]
async fn beta_allowlist_drops_unlisted_values_for_that_provider_only() {
    // Case A24(a)(ii): an Anthropic-compatible upstream that rejects unknown betas.
    let mock = MockUpstream::start().await;
    let cfg = fill(ANTHROPIC, &mock).replace(
        "dialect = \"anthropic\"",
        "dialect = \"anthropic\"\nanthropic_beta_allowlist = [\"feature-a\", \"claude-code-*\"]",
    );
    assert!(
        cfg.contains("anthropic_beta_allowlist"),
        "fixture config changed shape"
    );
    let s = Sluice::start(&cfg, &[]).await;
    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &[
            AV,
            KEY,
            (
                "anthropic-beta",
                "feature-a,feature-b-2099,claude-code-20250219",
            ),
        ],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        mock.single().header("anthropic-beta"),
        Some("feature-a,claude-code-20250219")
    );
}

#[tokio::test]
async fn hop_by_hop_and_session_headers_are_not_forwarded() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;
    let dropped = [
        ("keep-alive", "timeout=5"),
        ("te", "trailers"),
        ("upgrade", "websocket"),
        ("proxy-authorization", "Basic cHJveHk6c2VjcmV0"),
        ("x-session-id", "s-1"),
        (
            "x-claude-code-session-id",
            "1b7c0a4e-0000-4000-8000-000000000001",
        ),
        ("x-codex-session-id", "codex-1"),
        ("x-sluice-session", "lease-1"),
    ];
    let mut headers = vec![AV, KEY, ("connection", "keep-alive"), ("x-app", "cli")];
    headers.extend_from_slice(&dropped);

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &headers,
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    let up = mock.single();
    for (name, _) in dropped {
        assert_eq!(
            up.header(name),
            None,
            "{name} must not be forwarded; upstream saw {:#?}",
            up.headers
        );
    }
    assert_ne!(
        up.header("connection"),
        Some("keep-alive"),
        "the client's connection header is hop-by-hop"
    );
    assert_eq!(
        up.header("x-app"),
        Some("cli"),
        "ordinary headers are forwarded"
    );
}

#[tokio::test]
async fn headers_named_in_connection_are_not_forwarded() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let headers = [
        AV,
        KEY,
        ("connection", "keep-alive, x-hop-token"),
        ("x-hop-token", "hop"),
    ];
    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &headers,
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        mock.single().header("x-hop-token"),
        None,
        "RFC 9110 §7.6.1: a header named in Connection is hop-by-hop"
    );
}

#[tokio::test]
async fn passthrough_forwards_the_clients_credentials_unchanged() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let headers = [
        AV,
        ("x-api-key", "sk-ant-client-1"),
        ("authorization", "Bearer tok-client-1"),
    ];
    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &headers,
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    let up = mock.single();
    assert_eq!(up.header("x-api-key"), Some("sk-ant-client-1"));
    assert_eq!(up.header("authorization"), Some("Bearer tok-client-1"));
}

/// One Anthropic request with `headers` through a connection whose `auth` is `auth` (its key
/// in `$var` = `key`); returns what reached the upstream.
async fn through_anthropic_key(
    auth: &str,
    var: &str,
    key: &str,
    headers: &[(&str, &str)],
) -> crate::support::recorded::Recorded {
    let mock = MockUpstream::start().await;
    let config = fill(ANTHROPIC, &mock).replace("auth = \"passthrough\"", auth);
    let s = Sluice::start(&config, &[(var, key)]).await;
    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        headers,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    mock.single()
}

#[tokio::test]
async fn env_key_replaces_client_credentials_with_x_api_key_on_anthropic() {
    let headers = [
        AV,
        ("x-api-key", "sk-ant-client-1"),
        ("authorization", "Bearer tok-client-1"),
    ];
    let up = through_anthropic_key(
        "auth = { env = \"UP_KEY\" }",
        "UP_KEY",
        "sk-ant-configured",
        &headers,
    )
    .await;
    assert_eq!(up.header("x-api-key"), Some("sk-ant-configured"));
    assert_eq!(
        up.header("authorization"),
        None,
        "the client's Authorization must be removed"
    );
}

#[tokio::test]
async fn env_key_replaces_client_credentials_with_bearer_on_openai() {
    let mock = MockUpstream::start().await;
    let config =
        fill(OPENAI, &mock).replace("auth = \"passthrough\"", "auth = { env = \"OAI_KEY\" }");
    let s = Sluice::start(&config, &[("OAI_KEY", "sk-oai-configured")]).await;

    let headers = [
        ("x-api-key", "sk-client-1"),
        ("authorization", "Bearer tok-client-1"),
    ];
    let r = client::post_json(
        &s.url("/v1/chat/completions"),
        &chat_body("gpt-5-mini", false),
        &headers,
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    let up = mock.single();
    assert_eq!(up.header("authorization"), Some("Bearer sk-oai-configured"));
    assert_eq!(
        up.header("x-api-key"),
        None,
        "the client's x-api-key must be removed"
    );
}

#[tokio::test]
async fn a_subscription_token_goes_as_bearer_with_the_oauth_beta_added() {
    let headers = [
        AV,
        ("x-api-key", "sk-ant-client-1"),
        ("anthropic-beta", "interleaved-thinking-2025-05-14"),
    ];
    let up = through_anthropic_key(
        "auth = { env = \"SUB_TOKEN\", scheme = \"bearer\" }",
        "SUB_TOKEN",
        "sk-ant-oat01-pooled",
        &headers,
    )
    .await;
    assert_eq!(
        up.header("authorization"),
        Some("Bearer sk-ant-oat01-pooled")
    );
    assert_eq!(up.header("x-api-key"), None, "the client's key is replaced");
    assert_eq!(
        up.header("anthropic-beta"),
        Some("interleaved-thinking-2025-05-14,oauth-2025-04-20")
    );
}

// === upstream errors ===

#[tokio::test]
async fn upstream_429_status_body_and_retry_after_reach_the_client() {
    let mock = MockUpstream::start().await;
    let reply = Reply::anthropic_error(
        429,
        "rate_limit_error",
        "Number of request tokens has exceeded your per-minute rate limit",
    )
    .header("retry-after", "7")
    .header("anthropic-ratelimit-requests-remaining", "0");
    let expected = reply.body_bytes();
    mock.on("/v1/messages").reply(reply);
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", true),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 429);
    assert_eq!(r.body, expected);
    assert_eq!(r.header("retry-after"), Some("7"));
    assert_eq!(
        r.header("anthropic-ratelimit-requests-remaining"),
        Some("0")
    );
}

#[tokio::test]
async fn upstream_openai_400_body_passes_through_unchanged() {
    let mock = MockUpstream::start().await;
    let reply = Reply::openai_error(
        400,
        "invalid_request_error",
        "invalid_value",
        "Invalid value for 'temperature'.",
    );
    let expected = reply.body_bytes();
    mock.on("/v1/responses").reply(reply);
    let s = Sluice::start(&fill(OPENAI, &mock), &[]).await;

    let r = client::post_json(
        &s.url("/v1/responses"),
        &responses_body("gpt-5-mini", false),
        &[],
    )
    .await;

    assert_eq!(r.status, 400);
    assert_eq!(r.body, expected);
}

// === errors sluice produces ===

#[tokio::test]
async fn body_over_max_body_with_content_length_is_413_and_never_sent_upstream() {
    let mock = MockUpstream::start().await;
    let config = format!("[server]\nmax_body = \"1KiB\"\n{}", fill(ANTHROPIC, &mock));
    let s = Sluice::start(&config, &[]).await;
    let mut big = anthropic_body("claude-x", false);
    big["messages"][0]["content"][0]["text"] = json!("x".repeat(4096));

    let small = client::post_json(
        &s.url("/v1/messages"),
        &json!({"model": "claude-x", "max_tokens": 8, "messages": []}),
        &[AV, KEY],
    )
    .await;
    let r = client::post_json(&s.url("/v1/messages"), &big, &[AV, KEY]).await;

    assert_eq!(
        small.status,
        200,
        "under the limit is fine: {}",
        small.text()
    );
    assert_anthropic_error(&r, 413, "request_too_large");
    assert_eq!(
        mock.count(),
        1,
        "the oversized request never reaches the upstream"
    );
}

#[tokio::test]
async fn chunked_body_over_max_body_is_413_in_the_openai_dialect() {
    let mock = MockUpstream::start().await;
    let config = format!("[server]\nmax_body = \"1KiB\"\n{}", fill(OPENAI, &mock));
    let s = Sluice::start(&config, &[]).await;
    let mut chunks = vec![Bytes::from_static(
        br#"{"model":"gpt-5-mini","messages":[{"role":"user","content":""#,
    )];
    chunks.extend((0..8).map(|_| Bytes::from(vec![b'y'; 512])));
    chunks.push(Bytes::from_static(br#""}]}"#));

    let req = client::request(
        Method::POST,
        &s.url("/v1/chat/completions"),
        &[("content-type", "application/json")],
        client::chunked(chunks),
    );
    assert!(req.headers().get("content-length").is_none());
    let r = client::send(req).await;

    assert_openai_error(&r, 413);
    assert_eq!(mock.count(), 0);
}

#[tokio::test]
async fn unknown_routes_are_404_in_the_routes_dialect() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let a = client::post_json(
        &s.url("/v1/messages/unknown"),
        &anthropic_body("claude-x", false),
        &[AV, KEY],
    )
    .await;
    let o = client::get(&s.url("/v1/foo"), &[]).await;

    assert_anthropic_error(&a, 404, "not_found_error");
    assert_openai_error(&o, 404);
    assert_eq!(mock.count(), 0);
}

#[tokio::test]
async fn malformed_json_is_400_invalid_request_error() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(ANTHROPIC, &mock), &[]).await;

    let r = client::post_raw(
        &s.url("/v1/messages"),
        &b"{\"model\": \"claude-x\", \"messages\": ["[..],
        &[("content-type", "application/json"), AV, KEY],
    )
    .await;

    assert_anthropic_error(&r, 400, "invalid_request_error");
    assert_eq!(mock.count(), 0);
}

#[tokio::test]
async fn body_without_model_is_400_in_the_routes_dialect() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(OPENAI, &mock), &[]).await;

    let r = client::post_json(
        &s.url("/v1/chat/completions"),
        &json!({"messages": [{"role": "user", "content": "hi"}]}),
        &[],
    )
    .await;
    let a = client::post_json(
        &s.url("/v1/messages"),
        &json!({"max_tokens": 8, "messages": []}),
        &[AV, KEY],
    )
    .await;

    assert_openai_error(&r, 400);
    assert_anthropic_error(&a, 400, "invalid_request_error");
    assert_eq!(mock.count(), 0);
}

// === shutdown ===

#[tokio::test]
async fn stop_ends_a_stalled_stream_with_an_anthropic_error_event() {
    let mock = MockUpstream::start().await;
    let events = first_events("anthropic-text", 4);
    let sent: Vec<u8> = events.iter().flat_map(|b| b.iter().copied()).collect();
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(events).then_stall());
    let config = format!(
        "[server]\ndrain_timeout = \"200ms\"\n{}",
        fill(ANTHROPIC, &mock)
    );
    let s = Sluice::start(&config, &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", true),
        &[AV, KEY],
    )
    .await;
    st.read_until(READ, |got| got.len() >= sent.len()).await;
    let stopping = tokio::spawn(s.stop());
    let (got, _) = st.read_to_end(READ).await;
    tokio::time::timeout(READ, stopping)
        .await
        .expect("stop() returns after the drain deadline")
        .unwrap();

    assert!(
        got.starts_with(&sent),
        "what the upstream sent comes first: {:?}",
        String::from_utf8_lossy(&got)
    );
    assert_last_event_is_anthropic_error(&got[sent.len()..]);
}

#[tokio::test]
async fn a_clients_bad_key_never_expires_the_shared_passthrough_connection() {
    // On `passthrough` the credential is each client's own: three 401s for one client's typo
    // must not lock every other client out (the connection stays active).
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .header("x-api-key", "typo")
        .reply(Reply::anthropic_error(
            401,
            "authentication_error",
            "invalid x-api-key",
        ));
    let cfg = fill(ANTHROPIC, &mock).replace("base_url = ", "profile = \"oauth\"\nbase_url = ");
    let s = Sluice::start(&cfg, &[]).await;
    for _ in 0..3 {
        let r = client::post_json(
            &s.url("/v1/messages"),
            &anthropic_body("claude-x", false),
            &[AV, ("x-api-key", "typo")],
        )
        .await;
        assert_eq!(
            r.status,
            401,
            "the client's own 401 comes back unchanged: {}",
            r.text()
        );
    }
    let good = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &[AV, KEY],
    )
    .await;
    assert_eq!(
        good.status,
        200,
        "another client is still served: {}",
        good.text()
    );
    assert_eq!(
        s.snapshot().providers[0].connections[0].status,
        sluice::snapshot::ConnectionStatus::Active
    );
}

#[tokio::test]
async fn terminal_reset_endpoint_brings_back_an_injected_key() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .times(1)
        .reply(Reply::anthropic_error(
            402,
            "billing_error",
            "credit balance is too low",
        ));
    let cfg =
        fill(ANTHROPIC, &mock).replace("auth = \"passthrough\"", "auth = { env = \"TEAM_KEY\" }");
    let s = Sluice::start(&cfg, &[("TEAM_KEY", "sk-team-0123456789")]).await;
    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &[AV],
    )
    .await;
    assert_eq!(r.status, 402);
    assert_eq!(
        s.snapshot().providers[0].connections[0].status,
        sluice::snapshot::ConnectionStatus::CreditsExhausted
    );

    let reset = client::post_json(
        &s.admin("/api/resilience/terminal-reset"),
        &json!({"connectionIds": ["mine"]}),
        &[],
    )
    .await;
    assert_eq!(reset.status, 200, "{}", reset.text());
    assert_eq!(reset.json()["reset"], json!(["mine"]));
    assert_eq!(
        s.snapshot().providers[0].connections[0].status,
        sluice::snapshot::ConnectionStatus::Active
    );
    let again = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("claude-x", false),
        &[AV],
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.text());
    let bad = client::post_json(&s.admin("/api/resilience/terminal-reset"), &json!([1]), &[]).await;
    assert_eq!(bad.status, 400, "a non-object body is refused");
}
