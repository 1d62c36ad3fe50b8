//! Dialect translation on the request path: each client format against a mock that speaks
//! only the other dialect (chat-only or Anthropic-only), tool-call round trips, fallback
//! from an Anthropic target to a translated OpenAI one, translated upstream errors (status,
//! `retry-after`, cooldown), a stream cut mid-tool-call, untranslatable requests (400, no
//! upstream traffic, no penalty), a `background` request served synchronously with a warning,
//! and count_tokens answered locally.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::support::{MockUpstream, Reply, Sluice, client};

const READ: Duration = Duration::from_secs(5);
const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const KEY: (&str, &str) = ("x-api-key", "sk-client-key");
const BEARER: (&str, &str) = ("authorization", "Bearer sk-client-key");

/// `an` speaks Anthropic (mock `{AN}`), `oa` and `chatonly` speak OpenAI (mock `{OA}`);
/// `chatonly` has `responses = false`.
const TWO: &str = r#"
[routing]
default_provider = ["an", "oa"]

[resilience.stream]
heartbeat_interval = "60ms"
readiness_timeout = "400ms"
content_stall_timeout = "300ms"

[[providers]]
id = "an"
dialect = "anthropic"
base_url = "{AN}"
profile = "api_key"

  [[providers.connections]]
  id = "ka"
  auth = "passthrough"

[[providers]]
id = "oa"
dialect = "openai"
base_url = "{OA}"
profile = "api_key"
drop_fields = ["user"]
default_max_tokens = 1000

  [[providers.connections]]
  id = "ko"
  auth = "passthrough"

[[providers]]
id = "chatonly"
dialect = "openai"
base_url = "{OA}"
profile = "api_key"
responses = false

  [[providers.connections]]
  id = "kc"
  auth = "passthrough"

[[combos]]
name = "gpt"
targets = ["oa/gpt-x"]

[[combos]]
name = "claude"
targets = ["an/claude-x"]

[[combos]]
name = "local"
targets = ["chatonly/llama"]

[[combos]]
name = "mixed"
targets = ["an/claude-x", "oa/gpt-x"]
"#;

struct Two {
    an: MockUpstream,
    oa: MockUpstream,
    s: Sluice,
}

async fn start() -> Two {
    let an = MockUpstream::start().await;
    an.speak_only_anthropic();
    let oa = MockUpstream::start().await;
    oa.speak_only_chat();
    let cfg = TWO
        .replace("{AN}", &an.base_url())
        .replace("{OA}", &oa.base_url());
    let s = Sluice::start(&cfg, &[]).await;
    Two { an, oa, s }
}

fn anthropic_body(model: &str, stream: bool, messages: Value) -> Value {
    json!({"model": model, "max_tokens": 64, "stream": stream, "messages": messages,
        "tools": [{"name": "Bash", "description": "run", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]})
}

fn chat_tool_call() -> Value {
    json!({"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"command\":\"echo hi\"}"}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
}

fn chunk(delta: Value, finish: Value) -> Bytes {
    let c = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": "gpt-x",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    Bytes::from(format!("data: {c}\n\n"))
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

#[tokio::test]
async fn anthropic_client_gets_a_tool_call_round_trip_from_a_chat_only_upstream() {
    let t = start().await;
    t.oa.on("/v1/chat/completions")
        .times(1)
        .reply(Reply::json(200, chat_tool_call()));
    let first = json!([{"role": "user", "content": "run echo hi"}]);
    let r = client::post_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("gpt", false, first),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["type"], "message", "{v}");
    assert_eq!(v["stop_reason"], "tool_use", "{v}");
    assert_eq!(v["content"][0]["type"], "tool_use", "{v}");
    assert_eq!(v["content"][0]["id"], "call_1", "{v}");
    assert_eq!(v["content"][0]["input"]["command"], "echo hi", "{v}");
    let up = t.oa.single();
    assert_eq!(up.path, "/v1/chat/completions");
    assert_eq!(up.json()["model"], "gpt-x");
    assert_eq!(up.json()["tools"][0]["function"]["name"], "Bash");
    assert_eq!(
        up.headers.get("authorization").unwrap(),
        "Bearer sk-client-key",
        "the passed-through key moved to the OpenAI header"
    );
    assert!(up.headers.get("x-api-key").is_none());

    let second = json!([
        {"role": "user", "content": "run echo hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "Bash", "input": {"command": "echo hi"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "hi"}]}
    ]);
    let r = client::post_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("gpt", false, second),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["content"][0]["text"], "Hello from the mock.");
    let up = t.oa.requests_to("/v1/chat/completions")[1].json();
    let tool = up["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .cloned()
        .unwrap_or_else(|| panic!("no tool message in {up}"));
    assert_eq!(tool["tool_call_id"], "call_1");
    assert_eq!(tool["content"], "hi");
    assert_eq!(up["max_tokens"], 64);

    let snap = t.s.wait_requests(2).await;
    assert_eq!(snap.recent[0].attempt_log[0].translated, "anthropic→openai");
    assert_eq!(snap.recent[0].client_format, "anthropic");
    assert_eq!(
        sluice::snapshot::word::or_empty(&snap.recent[0].upstream_dialect),
        "openai"
    );
}

#[tokio::test]
async fn anthropic_client_streams_from_a_chat_only_upstream() {
    let t = start().await;
    let messages = json!([{"role": "user", "content": "hi"}]);
    let mut st = client::open_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("gpt", true, messages),
        &[AV, KEY],
    )
    .await;
    let (got, clean) = st.read_to_end(READ).await;
    let text = String::from_utf8_lossy(&got);

    assert_eq!(st.status, 200);
    assert!(clean, "{text}");
    assert!(text.starts_with("event: message_start\n"), "{text}");
    assert!(text.contains("text_delta"), "{text}");
    assert_eq!(count(&text, "event: message_stop"), 1, "{text}");
    assert_eq!(count(&text, "event: error"), 0, "{text}");
    assert!(!text.contains("[DONE]"), "{text}");
    let up = t.oa.single().json();
    assert_eq!(up["stream"], true);
    assert_eq!(up["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn chat_client_is_served_by_an_anthropic_only_upstream() {
    let t = start().await;
    let body = json!({"model": "claude", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}], "user": "u1"});
    let r = client::post_json(&t.s.url("/v1/chat/completions"), &body, &[BEARER]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["object"], "chat.completion", "{v}");
    assert_eq!(v["model"], "claude", "the client's model name: {v}");
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Hello from the mock."
    );
    let up = t.an.single();
    assert_eq!(up.path, "/v1/messages");
    assert_eq!(up.json()["system"], "be brief");
    assert_eq!(up.json()["max_tokens"], 8192, "the Anthropic default");
    assert_eq!(up.headers.get("x-api-key").unwrap(), "sk-client-key");
    assert_eq!(up.headers.get("anthropic-version").unwrap(), "2023-06-01");
}

#[tokio::test]
async fn responses_client_gets_a_function_call_round_trip_from_anthropic() {
    let t = start().await;
    let msg = json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"command": ["echo", "hi"]}}],
        "stop_reason": "tool_use", "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 3}});
    t.an.on("/v1/messages")
        .times(1)
        .reply(Reply::json(200, msg));
    let tools = json!([{"type": "function", "name": "shell", "description": "run", "parameters": {"type": "object"}}]);
    let body = json!({"model": "claude", "instructions": "you are codex", "input": "say hi", "tools": tools, "store": false});
    let r = client::post_json(&t.s.url("/v1/responses"), &body, &[BEARER]).await;

    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    let call = v["output"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "function_call")
        .cloned()
        .unwrap_or_else(|| panic!("no function_call in {v}"));
    assert_eq!(call["call_id"], "toolu_1");
    assert_eq!(call["name"], "shell");

    let input = json!([
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "say hi"}]},
        {"type": "function_call", "call_id": "toolu_1", "name": "shell", "arguments": "{\"command\":[\"echo\",\"hi\"]}"},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "hi"}
    ]);
    let body = json!({"model": "claude", "input": input, "tools": tools, "store": false});
    let r = client::post_json(&t.s.url("/v1/responses"), &body, &[BEARER]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["status"], "completed");
    let up = t.an.requests_to("/v1/messages")[1].json();
    let last = &up["messages"][2];
    assert_eq!(last["content"][0]["type"], "tool_result", "{up}");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_1", "{up}");
}

#[tokio::test]
async fn responses_pass_through_to_openai_unless_the_provider_is_chat_only() {
    let oa = MockUpstream::start().await;
    let an = MockUpstream::start().await;
    let cfg = TWO
        .replace("{AN}", &an.base_url())
        .replace("{OA}", &oa.base_url());
    let s = Sluice::start(&cfg, &[]).await;
    let body = json!({"model": "gpt", "input": "hi"});
    let r = client::post_json(&s.url("/v1/responses"), &body, &[BEARER]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(oa.single().path, "/v1/responses", "forwarded unchanged");

    oa.speak_only_chat();
    let body = json!({"model": "local", "input": "hi", "stream": true});
    let mut st = client::open_json(&s.url("/v1/responses"), &body, &[BEARER]).await;
    let (got, clean) = st.read_to_end(READ).await;
    let text = String::from_utf8_lossy(&got);
    assert!(clean, "{text}");
    assert!(text.starts_with("event: response.created"), "{text}");
    assert_eq!(count(&text, "event: response.completed"), 1, "{text}");
    let up = oa.requests_to("/v1/chat/completions");
    assert_eq!(up.len(), 1);
    assert_eq!(up[0].json()["model"], "llama");
}

/// `background: true` is served synchronously when translated, and the client is told in
/// `x-sluice-warning`; a Responses provider gets the body as the client sent it.
#[tokio::test]
async fn a_background_responses_request_is_served_synchronously_with_a_warning() {
    let an = MockUpstream::start().await;
    an.speak_only_anthropic();
    let oa = MockUpstream::start().await;
    let cfg = TWO
        .replace("{AN}", &an.base_url())
        .replace("{OA}", &oa.base_url());
    let s = Sluice::start(&cfg, &[]).await;

    let body = json!({"model": "claude", "input": "hi", "background": true, "store": false});
    let r = client::post_json(&s.url("/v1/responses"), &body, &[BEARER]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("x-sluice-warning"),
        Some("background ignored: served synchronously")
    );
    let v = r.json();
    assert_eq!(v["object"], "response", "{v}");
    assert_eq!(v["status"], "completed", "{v}");
    let up = an.single();
    assert_eq!(up.path, "/v1/messages");
    assert!(up.json().get("background").is_none(), "{}", up.json());

    let body = json!({"model": "gpt", "input": "hi", "background": true});
    let r = client::post_json(&s.url("/v1/responses"), &body, &[BEARER]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.header("x-sluice-warning"),
        None,
        "passed through, not downgraded"
    );
    let up = oa.single();
    assert_eq!(up.path, "/v1/responses");
    assert_eq!(up.json()["background"], true, "forwarded unchanged");
}

#[tokio::test]
async fn a_failed_anthropic_target_falls_back_to_a_translated_openai_one() {
    let t = start().await;
    t.an.on("/v1/messages")
        .times(1)
        .reply(Reply::anthropic_error(
            503,
            "overloaded_error",
            "Overloaded",
        ));
    let messages = json!([{"role": "user", "content": "hi"}]);
    let r = client::post_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("mixed", false, messages.clone()),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["content"][0]["text"], "Hello from the mock.");
    let snap = t.s.wait_requests(1).await;
    let log = &snap.recent[0].attempt_log;
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].translated, "");
    assert_eq!(log[1].translated, "anthropic→openai");

    t.an.on("/v1/messages").times(1).reply(
        Reply::anthropic_error(429, "rate_limit_error", "slow down").header("retry-after", "30"),
    );
    let r = client::post_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("mixed", true, messages),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(count(&r.text(), "event: message_stop"), 1, "{}", r.text());
    assert_eq!(t.oa.requests_to("/v1/chat/completions").len(), 2);
}

#[tokio::test]
async fn a_translated_upstream_error_keeps_status_and_retry_after_and_cools_the_connection() {
    let t = start().await;
    t.oa.on("/v1/chat/completions").reply(
        Reply::openai_error(429, "requests", "rate_limit_exceeded", "Rate limit reached")
            .header("retry-after", "7"),
    );
    let messages = json!([{"role": "user", "content": "hi"}]);
    let r = client::post_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("gpt", false, messages),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(r.header("retry-after"), Some("7"));
    let v = r.json();
    assert_eq!(v["type"], "error", "in the Anthropic dialect: {v}");
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
    assert_eq!(v["error"]["message"], "Rate limit reached", "{v}");
    let snap = t.s.snapshot();
    let conn = &snap.providers[1].connections[0];
    assert!(
        conn.cooldown_until_unix_ms.is_some(),
        "the 429 cooled the translated target's connection: {conn:?}"
    );
}

#[tokio::test]
async fn a_chat_stream_cut_mid_tool_call_ends_with_one_anthropic_error_event() {
    let t = start().await;
    t.oa.on("/v1/chat/completions").reply(Reply::sse_chunks(vec![
        chunk(json!({"role": "assistant", "content": "Running it."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "Bash", "arguments": "{\"comm"}}]}),
            Value::Null,
        ),
    ]));
    let messages = json!([{"role": "user", "content": "hi"}]);
    let mut st = client::open_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("gpt", true, messages),
        &[AV, KEY],
    )
    .await;
    let (got, _) = st.read_to_end(READ).await;
    let text = String::from_utf8_lossy(&got);

    assert_eq!(st.status, 200);
    assert!(text.contains("\"type\":\"tool_use\""), "{text}");
    assert_eq!(count(&text, "event: error"), 1, "{text}");
    assert_eq!(count(&text, "event: message_stop"), 0, "{text}");
    let tail = text.rsplit("\n\n").nth(1).unwrap_or("");
    assert!(
        tail.starts_with("event: error\ndata: {"),
        "last event: {tail:?} in {text}"
    );
    let snap = t.s.wait_requests(1).await;
    assert_eq!(
        snap.recent[0].outcome,
        sluice::snapshot::RequestOutcome::Truncated
    );
}

#[tokio::test]
async fn the_stall_guard_fires_on_a_translated_stream() {
    let t = start().await;
    t.oa.on("/v1/chat/completions").reply(
        Reply::sse_chunks(vec![chunk(
            json!({"role": "assistant", "content": "Hel"}),
            Value::Null,
        )])
        .then_stall(),
    );
    let messages = json!([{"role": "user", "content": "hi"}]);
    let mut st = client::open_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("gpt", true, messages),
        &[AV, KEY],
    )
    .await;
    let (got, _) = st.read_to_end(READ).await;
    let text = String::from_utf8_lossy(&got);

    assert!(text.contains("\"text\":\"Hel\""), "{text}");
    assert_eq!(count(&text, "event: error"), 1, "{text}");
    let snap = t.s.wait_requests(1).await;
    assert!(
        snap.recent[0].error.contains("stall") || snap.recent[0].error.contains("content"),
        "{:?}",
        snap.recent[0]
    );
}

#[tokio::test]
async fn an_untranslatable_request_is_a_400_naming_the_field_with_no_upstream_traffic() {
    let t = start().await;
    let messages = json!([{"role": "user", "content": [
        {"type": "document", "source": {"type": "url", "url": "https://example.test/a.pdf"}},
        {"type": "text", "text": "summarise"}
    ]}]);
    let r = client::post_json(
        &t.s.url("/v1/messages"),
        &anthropic_body("gpt", false, messages.clone()),
        &[AV, KEY],
    )
    .await;

    assert_eq!(r.status, 400, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["type"], "invalid_request_error", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("document"),
        "{v}"
    );
    assert_eq!(t.oa.count(), 0, "nothing was sent");
    let snap = t.s.snapshot();
    assert_eq!(snap.providers[1].failures, 0, "no penalty");
    assert!(
        snap.providers[1].connections[0]
            .cooldown_until_unix_ms
            .is_none()
    );

    // A chat client's n > 1 for an Anthropic target, in the OpenAI dialect.
    let body = json!({"model": "claude", "n": 2, "messages": [{"role": "user", "content": "hi"}]});
    let r = client::post_json(&t.s.url("/v1/chat/completions"), &body, &[BEARER]).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["param"], "n", "{}", r.text());
    assert_eq!(t.an.count(), 0);
}

#[tokio::test]
async fn an_untranslatable_request_may_still_be_served_by_a_same_dialect_target() {
    let an = MockUpstream::start().await;
    let oa = MockUpstream::start().await;
    let cfg = TWO
        .replace("{AN}", &an.base_url())
        .replace("{OA}", &oa.base_url())
        .replace(
            "targets = [\"an/claude-x\", \"oa/gpt-x\"]",
            "targets = [\"oa/gpt-x\", \"an/claude-x\"]",
        );
    let s = Sluice::start(&cfg, &[]).await;
    let messages = json!([{"role": "user", "content": [
        {"type": "document", "source": {"type": "url", "url": "https://example.test/a.pdf"}}
    ]}]);
    let r = client::post_json(
        &s.url("/v1/messages"),
        &anthropic_body("mixed", false, messages),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(oa.count(), 0);
    assert_eq!(an.count(), 1);
    let snap = s.wait_requests(1).await;
    assert_eq!(snap.recent[0].skipped[0].reason, "untranslatable");
}

#[tokio::test]
async fn count_tokens_for_a_translated_target_is_estimated_locally() {
    let t = start().await;
    let messages = json!([{"role": "user", "content": "hello there"}]);
    let r = client::post_json(
        &t.s.url("/v1/messages/count_tokens"),
        &json!({"model": "gpt", "messages": messages}),
        &[AV, KEY],
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.json()["input_tokens"].as_u64().unwrap() > 0);
    assert_eq!(t.oa.count(), 0);
}

#[tokio::test]
async fn the_model_list_includes_models_of_both_dialects() {
    let t = start().await;
    t.oa.on("/v1/models").reply(Reply::json(
        200,
        json!({"object": "list", "data": [{"id": "gpt-x", "object": "model"}]}),
    ));
    let r = client::get(&t.s.url("/v1/models"), &[AV, KEY]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let ids: Vec<String> = r.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_string())
        .collect();
    for want in ["mixed", "mock-model", "gpt-x"] {
        assert!(ids.iter().any(|i| i == want), "{want} missing from {ids:?}");
    }
}

#[tokio::test]
async fn chat_client_streams_from_an_anthropic_only_upstream() {
    let t = start().await;
    let body = json!({"model": "claude", "stream": true, "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": "hi"}]});
    let mut st = client::open_json(&t.s.url("/v1/chat/completions"), &body, &[BEARER]).await;
    let (got, clean) = st.read_to_end(READ).await;
    let text = String::from_utf8_lossy(&got);

    assert_eq!(st.status, 200);
    assert!(clean, "{text}");
    assert!(
        text.contains("\"object\":\"chat.completion.chunk\""),
        "{text}"
    );
    assert!(!text.contains("event: message_start"), "{text}");
    assert_eq!(count(&text, "data: [DONE]"), 1, "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert!(text.contains("\"usage\""), "the usage chunk: {text}");
    assert_eq!(t.an.single().json()["stream"], true);
    let snap = t.s.wait_requests(1).await;
    assert_eq!(snap.recent[0].attempt_log[0].translated, "chat→anthropic");
}
