//! The official Python SDKs end to end, streaming with tool use, each against an upstream of
//! the other dialect: the `anthropic` SDK through sluice to a provider that speaks only OpenAI
//! Chat Completions, and the `openai` SDK to one that speaks only Anthropic Messages. The
//! script (`tests/it/python/sdk_tool_round.py`) streams a turn ending in a `get_weather` call,
//! sends the tool result back and streams the answer; the test checks what each side saw.
//!
//! The SDKs are pip-installed, pinned, once under `target/python-sdks/`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::support::{MockUpstream, Reply, Sluice, client_tool, fill, wire};

const SDKS: &[&str] = &["anthropic==2.15.0", "openai==3.57.0"];
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const ANSWER: &str = "sluice-sdk-answer-3e8f";

const CONFIG: &str = r#"
[routing]
default_provider = "up"

[[providers]]
id = "up"
dialect = "DIALECT"
base_url = "{MOCK}"

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;

fn ensure_sdks() -> PathBuf {
    client_tool::ensure_pip("python-sdks", SDKS, "openai/__init__.py")
}

/// Runs the script in `mode` against `base_url`; its JSON line.
fn run_script(sdks: &std::path::Path, mode: &str, base_url: &str) -> Value {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/it/python/sdk_tool_round.py"
    );
    let child = Command::new("python3")
        .args([script, mode, base_url])
        .env("PYTHONPATH", sdks)
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start python3: {e}"));
    let f = client_tool::wait_bounded(child, RUN_TIMEOUT);
    assert!(f.success(), "the {mode} SDK script failed: {f:#?}");
    serde_json::from_str(f.stdout.trim()).unwrap_or_else(|e| panic!("{e}: {f:#?}"))
}

fn chat_chunk(delta: Value, finish: Option<&str>) -> Bytes {
    let c = json!({"id": "chatcmpl-sdk", "object": "chat.completion.chunk", "created": 0,
        "model": "mock-chat", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    Bytes::from(format!("data: {c}\n\n"))
}

/// A chat stream calling `get_weather` with its arguments split over three chunks.
fn chat_tool_call() -> Reply {
    let call = |args: &str, head: bool| {
        let mut tc = json!({"index": 0, "function": {"arguments": args}});
        if head {
            tc["id"] = json!("call_sdk_1");
            tc["type"] = json!("function");
            tc["function"]["name"] = json!("get_weather");
        }
        chat_chunk(json!({"tool_calls": [tc]}), None)
    };
    Reply::sse_chunks(vec![
        chat_chunk(json!({"role": "assistant", "content": ""}), None),
        call("{\"ci", true),
        call("ty\":\"Pa", false),
        call("ris\"}", false),
        chat_chunk(json!({}), Some("tool_calls")),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ])
}

fn chat_text() -> Reply {
    Reply::sse_chunks(vec![
        chat_chunk(json!({"role": "assistant", "content": ANSWER}), None),
        chat_chunk(json!({}), Some("stop")),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ])
}

/// An Anthropic stream calling `get_weather`, its input split over three deltas.
fn anthropic_tool_call() -> Reply {
    Reply::sse_events(&wire::anthropic_tool_use_events(
        "mock-claude",
        "toolu_sdk_1",
        "get_weather",
        &["{\"ci", "ty\":\"Pa", "ris\"}"],
    ))
}

fn anthropic_text() -> Reply {
    Reply::sse_events(&wire::anthropic_text_events("mock-claude", ANSWER))
}

/// The mock requests' JSON bodies.
fn bodies(mock: &MockUpstream) -> Vec<Value> {
    mock.requests().iter().map(|r| r.json()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_anthropic_sdk_streams_a_tool_round_trip_from_a_chat_only_provider() {
    let sdks = tokio::task::spawn_blocking(ensure_sdks).await.unwrap();
    let mock = MockUpstream::start().await;
    mock.speak_only_chat();
    mock.on("/v1/chat/completions")
        .body_contains("\"role\":\"tool\"")
        .reply(chat_text());
    mock.on("/v1/chat/completions").reply(chat_tool_call());
    let s = Sluice::start(&fill(&CONFIG.replace("DIALECT", "openai"), &mock), &[]).await;

    let base = s.base_url();
    let out = tokio::task::spawn_blocking(move || run_script(&sdks, "anthropic", &base))
        .await
        .unwrap();

    assert_eq!(out["tool"]["name"], "get_weather", "{out:#}");
    assert_eq!(out["tool"]["id"], "call_sdk_1", "{out:#}");
    assert_eq!(out["tool"]["input"], json!({"city": "Paris"}), "{out:#}");
    assert_eq!(out["stop1"], "tool_use", "{out:#}");
    assert_eq!(out["text"], ANSWER, "{out:#}");
    assert_eq!(out["stop2"], "end_turn", "{out:#}");
    let seen = bodies(&mock);
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(seen[0]["tools"][0]["function"]["name"], "get_weather");
    let tool = seen[1]["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(tool["tool_call_id"], "call_sdk_1", "{seen:#?}");
    assert!(tool["content"].to_string().contains("sunny"), "{seen:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_streams_a_tool_round_trip_from_an_anthropic_only_provider() {
    let sdks = tokio::task::spawn_blocking(ensure_sdks).await.unwrap();
    let mock = MockUpstream::start().await;
    mock.speak_only_anthropic();
    mock.on("/v1/messages")
        .body_contains("\"tool_result\"")
        .reply(anthropic_text());
    mock.on("/v1/messages").reply(anthropic_tool_call());
    let s = Sluice::start(&fill(&CONFIG.replace("DIALECT", "anthropic"), &mock), &[]).await;

    let base = s.base_url();
    let out = tokio::task::spawn_blocking(move || run_script(&sdks, "openai", &base))
        .await
        .unwrap();

    assert_eq!(out["tool"]["name"], "get_weather", "{out:#}");
    assert_eq!(out["tool"]["id"], "toolu_sdk_1", "{out:#}");
    assert_eq!(out["tool"]["input"], json!({"city": "Paris"}), "{out:#}");
    assert_eq!(out["stop1"], "tool_calls", "{out:#}");
    assert_eq!(out["text"], ANSWER, "{out:#}");
    assert_eq!(out["stop2"], "stop", "{out:#}");
    let seen = bodies(&mock);
    assert_eq!(seen.len(), 2, "{seen:#?}");
    assert_eq!(seen[0]["tools"][0]["name"], "get_weather");
    let result = seen[1]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"][0].clone())
        .unwrap_or_default();
    assert_eq!(result["type"], "tool_result", "{seen:#?}");
    assert_eq!(result["tool_use_id"], "toolu_sdk_1", "{seen:#?}");
}
