//! Empty turns (`docs/RESILIENCE.md#6-stream-guards`): a 2xx answer with no text and no tool
//! call — nothing, or only reasoning — is a failed attempt while nothing of it has reached the
//! client: the next target is tried, the breaker counts it, nothing is cooled or locked. Once
//! reasoning reached the client the turn is relayed as it is, and only reported.
//!
//! The stream guards keep their defaults (15 s heartbeat, 30 s readiness) and every empty
//! turn is written in one go, so the hold always sees it whole: nothing here depends on timing.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use sluice::policy::breaker::BreakerState;
use sluice::snapshot::{AttemptClass, RequestOutcome, Snapshot};

use crate::support::mock_upstream::Gate;
use crate::support::wire::anthropic_message;
use crate::support::{MockUpstream, Reply, Sluice, client, fill, fixture};

const READ: Duration = Duration::from_secs(5);
const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const KEY: (&str, &str) = ("x-api-key", "sk-client-key");
const BEARER: (&str, &str) = ("authorization", "Bearer sk-client-key");

/// Anthropic providers `a`, `b` and OpenAI providers `oa`, `ob` on one mock (told apart by
/// model), with a combo of two targets per route and one translated combo.
const CONFIG: &str = r#"
[routing]
default_provider = "a"

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

[[providers]]
id = "oa"
dialect = "openai"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "koa"
  auth = "passthrough"

[[providers]]
id = "ob"
dialect = "openai"
base_url = "{MOCK}"
profile = "api_key"

  [[providers.connections]]
  id = "kob"
  auth = "passthrough"

[[combos]]
name = "pair"
targets = ["a/model-a", "b/model-b"]

[[combos]]
name = "chat-pair"
targets = ["oa/gpt-a", "ob/gpt-b"]

[[combos]]
name = "translated-pair"
targets = ["oa/gpt-a", "b/model-b"]
"#;

fn messages_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

fn chat_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

fn named(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn message_start() -> String {
    named(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_empty", "type": "message", "role": "assistant", "content": [], "model": "model-a", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 9, "output_tokens": 0}}}),
    )
}

fn message_end() -> String {
    named(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 0}}),
    ) + &named("message_stop", json!({"type": "message_stop"}))
}

/// An Anthropic turn with no content block, in one write.
fn empty_anthropic_stream() -> Reply {
    Reply::sse_chunks(vec![Bytes::from(message_start() + &message_end())])
}

/// An Anthropic turn whose only block is thinking, in one write.
fn thinking_only_stream() -> Reply {
    let thinking = [
        named(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ),
        named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me think about that."}}),
        ),
        named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "c2lnbmVk"}}),
        ),
        named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": 0}),
        ),
    ]
    .concat();
    Reply::sse_chunks(vec![Bytes::from(
        message_start() + &thinking + &message_end(),
    )])
}

fn chat_chunk(delta: Value, finish: Value) -> String {
    let c = json!({"id": "c-empty", "object": "chat.completion.chunk", "created": 0, "model": "gpt-a",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {c}\n\n")
}

/// A chat stream with a role chunk, `reasoning_content` (when given) and a `stop` finish, and
/// no content, in one write.
fn chat_stream_without_content(reasoning: Option<&str>) -> Reply {
    let mut s = chat_chunk(json!({"role": "assistant", "content": ""}), Value::Null);
    if let Some(r) = reasoning {
        s += &chat_chunk(json!({"reasoning_content": r}), Value::Null);
    }
    s += &chat_chunk(json!({}), json!("stop"));
    s += "data: [DONE]\n\n";
    Reply::sse_chunks(vec![Bytes::from(s)])
}

fn anthropic_body_with(content: Value) -> Reply {
    let mut m = anthropic_message("model-a", "");
    m["content"] = content;
    Reply::json(200, m)
}

fn chat_body_without_content(reasoning: &str) -> Reply {
    Reply::json(
        200,
        json!({"id": "c-empty", "object": "chat.completion", "created": 0, "model": "gpt-a",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "reasoning_content": reasoning}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 9, "completion_tokens": 0, "total_tokens": 9}}),
    )
}

fn count(hay: &[u8], needle: &str) -> usize {
    String::from_utf8_lossy(hay).matches(needle).count()
}

/// The first request's attempt log as (target, status, class, reason).
fn attempts(snap: &Snapshot) -> Vec<(String, u16, AttemptClass, String)> {
    snap.recent[0]
        .attempt_log
        .iter()
        .map(|a| (a.target.clone(), a.status, a.class, a.reason.clone()))
        .collect()
}

fn empty_attempt(target: &str) -> (String, u16, AttemptClass, String) {
    (
        target.into(),
        200,
        AttemptClass::EmptyTurn,
        "empty_turn".into(),
    )
}

fn served_attempt(target: &str) -> (String, u16, AttemptClass, String) {
    (target.into(), 200, AttemptClass::Success, "ok".into())
}

/// Provider `id`'s breaker failure count, and its first connection's status, last error
/// kind, cooldown deadline and lockout count: what the console shows.
fn state_of(snap: &Snapshot, id: &str) -> (u32, String, String, Option<u64>, u32) {
    let p = snap
        .providers
        .iter()
        .find(|p| p.id == id)
        .unwrap_or_else(|| panic!("provider {id} in the snapshot"));
    let c = &p.connections[0];
    (
        p.breaker.failure_count,
        c.status.as_str().to_string(),
        sluice::snapshot::word::or_empty(&c.last_error_kind).to_owned(),
        c.cooldown_until_unix_ms,
        c.lockouts,
    )
}

/// Counted once by the breaker, recorded on the connection, never cooled or locked.
fn counted_not_cooled() -> (u32, String, String, Option<u64>, u32) {
    (1, "active".into(), "empty_turn".into(), None, 0)
}

#[tokio::test]
async fn a_streamed_empty_turn_falls_back_to_the_next_target() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(empty_anthropic_stream());
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &messages_body("pair", true),
        &[AV, KEY],
    )
    .await;
    let (got, clean) = st.read_to_end(READ).await;

    assert_eq!((st.status.as_u16(), clean), (200, true));
    assert_eq!(
        got,
        fixture("anthropic-text"),
        "exactly the second target's stream: nothing of the empty turn was sent"
    );
    assert_eq!(count(&got, "event: message_start"), 1);
    let snap = s.wait_requests(1).await;
    assert_eq!(
        attempts(&snap),
        vec![
            empty_attempt("a:ka/model-a"),
            served_attempt("b:kb/model-b")
        ]
    );
    assert_eq!(snap.recent[0].outcome, RequestOutcome::Ok);
    assert_eq!(state_of(&snap, "a"), counted_not_cooled());
}

#[tokio::test]
async fn a_non_streaming_empty_body_falls_back_to_the_next_target() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(anthropic_body_with(json!([])));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &messages_body("pair", false),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["content"][0]["text"], "Hello from the mock.");
    let snap = s.wait_requests(1).await;
    assert_eq!(
        attempts(&snap),
        vec![
            empty_attempt("a:ka/model-a"),
            served_attempt("b:kb/model-b")
        ]
    );
    assert_eq!(state_of(&snap, "a"), counted_not_cooled());
}

#[tokio::test]
async fn thinking_only_counts_as_empty() {
    // A whole body is judged before anything is sent: thinking and nothing else falls back.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("model-a")
        .reply(anthropic_body_with(json!([
            {"type": "thinking", "thinking": "Let me think about that.", "signature": "c2lnbmVk"}
        ])));
    mock.on("/v1/chat/completions")
        .model("gpt-a")
        .reply(chat_body_without_content("Let me think about that."));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let r = client::post_json(
        &s.url("/v1/messages"),
        &messages_body("pair", false),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["content"][0]["text"], "Hello from the mock.");

    let r = client::post_json(
        &s.url("/v1/chat/completions"),
        &chat_body("chat-pair", false),
        &[BEARER],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.json()["choices"][0]["message"]["content"],
        "Hello from the mock."
    );

    let snap = s.wait_requests(2).await;
    let classes: Vec<Vec<AttemptClass>> = snap
        .recent
        .iter()
        .map(|r| r.attempt_log.iter().map(|a| a.class).collect())
        .collect();
    assert_eq!(
        classes,
        vec![vec![AttemptClass::EmptyTurn, AttemptClass::Success]; 2],
        "both dialects: {:?}",
        snap.recent
    );
    assert_eq!(state_of(&snap, "a"), counted_not_cooled());
    assert_eq!(state_of(&snap, "oa"), counted_not_cooled());
}

#[tokio::test]
async fn an_empty_turn_after_reasoning_reached_the_client_is_relayed_unchanged() {
    // Thinking is content-bearing: it ends the hold and goes to the client. A turn that then
    // ends with nothing else cannot be taken back — it is relayed byte for byte, and reported
    // as an empty turn (the breaker counts it; nothing cools).
    let mock = MockUpstream::start().await;
    let reply = thinking_only_stream();
    let upstream = reply.body_bytes();
    mock.on("/v1/messages").model("model-a").reply(reply);
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &messages_body("pair", true),
        &[AV, KEY],
    )
    .await;
    let (got, clean) = st.read_to_end(READ).await;

    assert_eq!((st.status.as_u16(), clean), (200, true));
    assert_eq!(got, upstream, "relayed unchanged, no error event appended");
    assert_eq!(mock.count(), 1, "no fallback after content");
    let snap = s.wait_requests(1).await;
    assert_eq!(attempts(&snap), vec![empty_attempt("a:ka/model-a")]);
    assert_eq!(snap.recent[0].outcome, RequestOutcome::Ok);
    assert_eq!(state_of(&snap, "a"), counted_not_cooled());
}

#[tokio::test]
async fn a_chat_stream_with_no_content_falls_back_to_the_next_target() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/chat/completions")
        .model("gpt-a")
        .reply(chat_stream_without_content(None));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/chat/completions"),
        &chat_body("chat-pair", true),
        &[BEARER],
    )
    .await;
    let (got, clean) = st.read_to_end(READ).await;

    assert_eq!((st.status.as_u16(), clean), (200, true));
    assert_eq!(
        got,
        fixture("openai-chat-text"),
        "the second target's stream"
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(
        attempts(&snap),
        vec![
            empty_attempt("oa:koa/gpt-a"),
            served_attempt("ob:kob/gpt-b")
        ]
    );
    assert_eq!(state_of(&snap, "oa"), counted_not_cooled());
}

#[tokio::test]
async fn a_translated_stream_is_judged_as_the_client_would_receive_it() {
    // The chat upstream sends only reasoning; the Anthropic client did not ask for thinking,
    // so the translator drops it and the client-format stream has no content: an empty turn
    // before anything was sent, so the next (Anthropic) target serves.
    let mock = MockUpstream::start().await;
    mock.on("/v1/chat/completions")
        .model("gpt-a")
        .reply(chat_stream_without_content(Some("Let me think.")));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &messages_body("translated-pair", true),
        &[AV, KEY],
    )
    .await;
    let (got, clean) = st.read_to_end(READ).await;

    assert_eq!((st.status.as_u16(), clean), (200, true));
    assert_eq!(got, fixture("anthropic-text"));
    let snap = s.wait_requests(1).await;
    let log = &snap.recent[0].attempt_log;
    assert_eq!(
        attempts(&snap),
        vec![
            empty_attempt("oa:koa/gpt-a"),
            served_attempt("b:kb/model-b")
        ]
    );
    assert_eq!(log[0].translated, "anthropic→openai");
}

#[tokio::test]
async fn when_every_target_answers_empty_the_client_gets_a_502_in_its_dialect() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").reply(empty_anthropic_stream());
    mock.on("/v1/chat/completions")
        .reply(chat_body_without_content(""));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    // A stream whose head was not committed yet: a plain HTTP error.
    let r = client::post_json(
        &s.url("/v1/messages"),
        &messages_body("pair", true),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 502, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["type"].as_str(), v["error"]["type"].as_str()),
        (Some("error"), Some("api_error"))
    );
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("empty turn")),
        "{v}"
    );

    let r = client::post_json(
        &s.url("/v1/chat/completions"),
        &chat_body("chat-pair", false),
        &[BEARER],
    )
    .await;
    assert_eq!(r.status, 502, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (v["error"]["type"].as_str(), v["error"]["code"].as_str()),
        (Some("api_error"), Some("empty_turn"))
    );

    let snap = s.wait_requests(2).await;
    assert!(
        snap.recent
            .iter()
            .all(|r| r.outcome == RequestOutcome::UpstreamError && r.attempts == 2),
        "{:?}",
        snap.recent
    );
}

#[tokio::test]
async fn a_committed_stream_that_ends_empty_gets_one_error_event() {
    // message_start, then the upstream waits until the client has seen a heartbeat (the head
    // was committed); only then does the empty turn end. Nothing of it reached the client, and
    // no other target can be tried any more: one error event ends the stream.
    let mock = MockUpstream::start().await;
    let cfg = format!("[resilience.stream]\nheartbeat_interval = \"50ms\"\n{CONFIG}");
    let cfg = fill(&cfg, &mock);
    let gate = Gate::new();
    mock.on("/v1/messages").model("model-a").reply(
        Reply::sse_chunks(vec![
            Bytes::from(message_start()),
            Bytes::from(message_end()),
        ])
        .gated(1, &gate),
    );
    let s = Sluice::start(&cfg, &[]).await;

    let mut st = client::open_json(
        &s.url("/v1/messages"),
        &messages_body("model-a", true),
        &[AV, KEY],
    )
    .await;
    assert_eq!(st.status.as_u16(), 200, "the head is committed");
    st.read_until(READ, |b| count(b, "event: ping") > 0).await;
    gate.open();
    let (got, clean) = st.read_to_end(READ).await;

    assert!(clean);
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(!text.contains("message_start"), "{text}");
    assert_eq!(count(&got, "event: error"), 1, "{text}");
    let last = text.trim_end().rsplit("\n\n").next().unwrap_or_default();
    assert!(
        last.starts_with("event: error")
            && last.contains("api_error")
            && last.contains("empty turn"),
        "{text}"
    );
    let snap = s.wait_requests(1).await;
    assert_eq!(snap.recent[0].outcome, RequestOutcome::UpstreamError);
    assert_eq!(
        snap.recent[0]
            .attempt_log
            .iter()
            .map(|a| a.class)
            .collect::<Vec<_>>(),
        vec![AttemptClass::EmptyTurn]
    );
    assert_eq!(state_of(&snap, "a"), counted_not_cooled());
}

#[tokio::test]
async fn the_breaker_counts_empty_turns_and_nothing_cools_or_locks() {
    // One `local` provider (degraded at 1 counted failure, open at 2), lockout mode on.
    let cfg = r#"
[routing]
default_provider = "p"

[resilience.model_lockout]
enabled = true

[[providers]]
id = "p"
dialect = "anthropic"
base_url = "{MOCK}"
profile = "local"

  [[providers.connections]]
  id = "k"
  auth = "passthrough"
"#;
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .times(1)
        .reply(empty_anthropic_stream());
    mock.on("/v1/messages")
        .times(1)
        .reply(anthropic_body_with(json!([])));
    let s = Sluice::start(&fill(cfg, &mock), &[]).await;
    let send = |stream: bool| {
        let url = s.url("/v1/messages");
        async move { client::post_json(&url, &messages_body("claude-x", stream), &[AV, KEY]).await }
    };

    assert_eq!(send(true).await.status, 502);
    let snap = s.wait_requests(1).await;
    let p = &snap.providers[0];
    assert_eq!(
        (p.breaker.state, p.breaker.failure_count),
        (BreakerState::Degraded, 1)
    );
    assert_eq!(state_of(&snap, "p"), counted_not_cooled());

    assert_eq!(send(false).await.status, 502);
    let snap = s.wait_requests(2).await;
    let p = &snap.providers[0];
    assert_eq!(
        (p.breaker.state, p.breaker.failure_count),
        (BreakerState::Open, 2)
    );
    let c = &p.connections[0];
    assert_eq!(
        (c.status.as_str(), c.cooldown_until_unix_ms, c.lockouts),
        ("active", None, 0),
        "the connection never cooled and no model is locked"
    );

    // The open breaker now keeps requests away from the provider.
    let r = send(false).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert_eq!(r.json()["sluice"]["code"], "all_targets_cooling_down");
    assert_eq!(mock.count(), 2);
}
