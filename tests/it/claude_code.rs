//! Claude Code end to end: the real `claude -p` (npm `@anthropic-ai/claude-code`, pinned to the
//! last pure-JS build) completes a prompt through sluice against the mock upstream.
//!
//! The CLI is installed once under `target/claude-code/` (see `scripts/install-claude-code.sh`);
//! an in-process mutex plus a lock file keep parallel test runs from installing it twice.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{MockUpstream, Reply, Sluice, client_tool, fill};

/// Last release that ships `cli.js` (Node >= 18) instead of a ~400 MB native binary.
const CLAUDE_CODE_VERSION: &str = "2.1.112";
const PHRASE: &str = "sluice-e2e-ok 7f3a";
const DUMMY_KEY: &str = "sk-ant-test-dummy";
/// Kill `claude` if it has not finished by then.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

const CONFIG: &str = r#"
[routing]
default_provider = "anthropic"

[[providers]]
id = "anthropic"
dialect = "anthropic"
base_url = "{MOCK}"

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;

/// Installs Claude Code under `target/claude-code/` unless present; returns the `cli.js` path.
fn ensure_claude_code() -> PathBuf {
    client_tool::ensure(
        "claude-code",
        &format!("@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}"),
        "node_modules/@anthropic-ai/claude-code/cli.js",
    )
}

/// Output of a finished `claude` run.
#[derive(Debug)]
struct Run {
    success: bool,
    code: Option<i32>,
    stdout: String,
    #[allow(dead_code, reason = "shown through Debug when the test fails")]
    stderr: String,
}

/// Runs `node cli.js -p PROMPT` with a clean environment; kills it after [`RUN_TIMEOUT`].
fn run_claude(cli: &Path, base_url: &str, home: &Path, prompt: &str) -> Run {
    run_claude_with(cli, base_url, home, &["-p", prompt])
}

/// Runs `node cli.js ARGS…` like [`run_claude`].
fn run_claude_with(cli: &Path, base_url: &str, home: &Path, args: &[&str]) -> Run {
    let path = std::env::var("PATH").unwrap_or_default();
    let child = Command::new("node")
        .arg(cli)
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", DUMMY_KEY)
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_MAX_RETRIES", "1")
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot start `node` (Node.js >= 18 is required for this test): {e}")
        });
    let f = client_tool::wait_bounded(child, RUN_TIMEOUT);
    let run = Run {
        success: f.success(),
        code: f.status.and_then(|s| s.code()),
        stdout: f.stdout,
        stderr: f.stderr,
    };
    assert!(
        !f.timed_out,
        "claude -p did not finish within {RUN_TIMEOUT:?} and was killed: {run:#?}"
    );
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_completes_a_prompt_through_sluice() {
    let cli = tokio::task::spawn_blocking(ensure_claude_code)
        .await
        .unwrap();
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").reply(Reply::anthropic_text(PHRASE));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();

    let base_url = s.base_url();
    let home_path = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || {
        run_claude(&cli, &base_url, &home_path, "say the phrase")
    })
    .await
    .unwrap();

    let seen = mock.requests();
    assert!(
        run.success,
        "claude -p failed (exit {:?}): {run:#?}\nupstream saw: {seen:#?}",
        run.code
    );
    assert!(
        run.stdout.contains(PHRASE),
        "stdout lacks the phrase: {run:#?}"
    );
    let messages: Vec<_> = seen
        .iter()
        .filter(|r| r.method == http::Method::POST && r.path == "/v1/messages")
        .collect();
    assert!(
        !messages.is_empty(),
        "the mock never saw POST /v1/messages: {seen:#?}"
    );
    for m in &messages {
        let beta = m.header("anthropic-beta").unwrap_or_default();
        assert!(
            beta.contains("claude-code-"),
            "anthropic-beta forwarded from Claude Code: {beta:?}"
        );
        assert_eq!(m.header("anthropic-version"), Some("2023-06-01"));
        assert_eq!(
            m.header("x-api-key"),
            Some(DUMMY_KEY),
            "passthrough forwards the client's key"
        );
        assert!(
            m.header("x-claude-code-session-id").is_none(),
            "session headers are not forwarded"
        );
    }
    let snap = s.wait_requests(messages.len() as u64).await;
    assert!(
        snap.recent.iter().any(|r| r.route == "/v1/messages"
            && r.status == 200
            && r.outcome == sluice::core::snapshot::RequestOutcome::Ok),
        "snapshot counted the request: {:#?}",
        snap.recent
    );
    s.stop().await;
}

/// sluice in front of a provider that speaks only OpenAI Chat Completions.
const CHAT_ONLY_CONFIG: &str = r#"
[routing]
default_provider = "local"

[[providers]]
id = "local"
dialect = "openai"
base_url = "{MOCK}"

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;

const MARKER: &str = "sluice-tool-marker-5d21";
const FINAL: &str = "sluice-final-answer-9c04";

/// One chat-completion chunk as a `data:` line.
fn chat_chunk(delta: serde_json::Value, finish: Option<&str>) -> bytes::Bytes {
    let c = serde_json::json!({"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "created": 0,
        "model": "mock-chat", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    bytes::Bytes::from(format!("data: {c}\n\n"))
}

/// A streamed chat turn that calls Claude Code's `Bash` tool with `echo MARKER`.
fn bash_tool_call_stream() -> Reply {
    let args =
        serde_json::json!({"command": format!("echo {MARKER}"), "description": "Print the marker"});
    Reply::sse_chunks(vec![
        chat_chunk(
            serde_json::json!({"role": "assistant", "content": ""}),
            None,
        ),
        chat_chunk(
            serde_json::json!({"tool_calls": [{"index": 0, "id": "call_e2e_1", "type": "function",
                "function": {"name": "Bash", "arguments": args.to_string()}}]}),
            None,
        ),
        chat_chunk(serde_json::json!({}), Some("tool_calls")),
        bytes::Bytes::from_static(b"data: [DONE]\n\n"),
    ])
}

/// A streamed chat turn answering with `text`.
fn text_stream(text: &str) -> Reply {
    Reply::sse_chunks(vec![
        chat_chunk(
            serde_json::json!({"role": "assistant", "content": text}),
            None,
        ),
        chat_chunk(serde_json::json!({}), Some("stop")),
        bytes::Bytes::from_static(b"data: [DONE]\n\n"),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_through_a_chat_only_provider() {
    let cli = tokio::task::spawn_blocking(ensure_claude_code)
        .await
        .unwrap();
    let mock = MockUpstream::start().await;
    mock.speak_only_chat();
    // The tool result comes back as a `tool` message: answer it with the final text; the
    // turn that offers the Bash tool gets the tool call; anything else the default reply.
    mock.on("/v1/chat/completions")
        .body_contains("\"role\":\"tool\"")
        .reply(text_stream(FINAL));
    mock.on("/v1/chat/completions")
        .body_contains("\"name\":\"Bash\"")
        .reply(bash_tool_call_stream());
    let s = Sluice::start(&fill(CHAT_ONLY_CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();

    let base_url = s.base_url();
    let home_path = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || {
        let prompt = format!("Run `echo {MARKER}` with the Bash tool, then report.");
        run_claude_with(
            &cli,
            &base_url,
            &home_path,
            &["-p", &prompt, "--allowedTools", "Bash"],
        )
    })
    .await
    .unwrap();

    let seen = mock.requests();
    assert!(
        run.success,
        "claude -p failed (exit {:?}): {run:#?}\nupstream saw: {seen:#?}",
        run.code
    );
    assert!(seen.iter().all(|r| r.path != "/v1/messages"), "{seen:#?}");
    let tool_result = seen.iter().find(|r| {
        let body = String::from_utf8_lossy(&r.body);
        body.contains("\"role\":\"tool\"") && body.contains("call_e2e_1")
    });
    let tool_result =
        tool_result.unwrap_or_else(|| panic!("no tool result reached the mock: {seen:#?}"));
    let messages = tool_result.json()["messages"].clone();
    let tool = messages
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(tool["tool_call_id"], "call_e2e_1", "{messages:#}");
    assert!(
        tool["content"]
            .as_str()
            .unwrap_or_default()
            .contains(MARKER),
        "Claude Code ran `echo` and sent its output back: {tool:#}"
    );
    assert!(
        run.stdout.contains(FINAL),
        "stdout lacks the final text: {run:#?}"
    );
    let snap = s.wait_requests(2).await;
    assert!(
        snap.recent.iter().any(|r| r
            .attempt_log
            .iter()
            .any(|a| a.translated == "anthropic→openai")),
        "{:#?}",
        snap.recent
    );
    s.stop().await;
}
