//! Claude Code end to end: the real `claude -p` (npm `@anthropic-ai/claude-code`) completes a
//! prompt through sluice against the mock upstream, at two releases: the oldest supported
//! ([`OLDEST`], the last pure-JS build) and a recent one ([`RECENT`], a native binary that
//! sends what current releases send: system entries inside `messages`, adaptive thinking,
//! `context_management`, deferred tools). `SLUICE_CLIENTS=latest` replaces the recent pin
//! with whatever the npm registry serves today, so a new release is checked in one command.
//!
//! Each release is installed once under `target/claude-code-<version>/` (see
//! `scripts/install-claude-code.sh`); an in-process mutex plus a lock file keep parallel test
//! runs from installing it twice.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{MockUpstream, Reply, Sluice, client_tool, fill};

/// The oldest supported release: the last that ships `cli.js` (run with Node >= 18).
const OLDEST: &str = "2.1.112";
/// The recent pin: a native binary (~400 MB, from the platform package npm installs beside
/// it).
const RECENT: &str = "2.1.332";
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

/// One installed Claude Code release: how to start it.
#[derive(Debug, Clone)]
struct Cli {
    version: String,
    /// The program (`node` for a `cli.js` build, else the native binary).
    program: PathBuf,
    /// Arguments before the client's own (`cli.js`'s path for a JS build).
    lead: Vec<PathBuf>,
}

/// The releases under test: [`OLDEST`] and [`RECENT`], or with `SLUICE_CLIENTS=latest` the
/// oldest and the registry's newest.
fn releases() -> Vec<String> {
    let recent = if std::env::var("SLUICE_CLIENTS").as_deref() == Ok("latest") {
        client_tool::npm_latest("@anthropic-ai/claude-code")
    } else {
        RECENT.to_string()
    };
    vec![OLDEST.to_string(), recent]
}

/// Installs `version` under `target/claude-code-<version>/` unless present.
fn ensure_claude_code(version: &str) -> Cli {
    let dir = format!("claude-code-{version}");
    let pkg = format!("@anthropic-ai/claude-code@{version}");
    let manifest = client_tool::ensure(
        &dir,
        &pkg,
        "node_modules/@anthropic-ai/claude-code/package.json",
    );
    let root = manifest.parent().map(Path::to_path_buf).unwrap_or_default();
    let js = root.join("cli.js");
    if js.exists() {
        return Cli {
            version: version.into(),
            program: PathBuf::from("node"),
            lead: vec![js],
        };
    }
    let native = native_binary(&root).unwrap_or_else(|| {
        panic!(
            "Claude Code {version} installed without cli.js and without its native binary \
             (@anthropic-ai/claude-code-linux-* under {}); npm must install optional dependencies",
            root.display()
        )
    });
    Cli {
        version: version.into(),
        program: native,
        lead: Vec::new(),
    }
}

/// The platform binary npm installed beside the package (`claude-code-linux-x64/claude`,
/// …-arm64, …-musl).
fn native_binary(pkg_root: &Path) -> Option<PathBuf> {
    let scope = pkg_root.parent()?;
    std::fs::read_dir(scope)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("claude"))
        .find(|p| {
            p.is_file()
                && p.parent()
                    .and_then(Path::file_name)
                    .is_some_and(|n| n.to_string_lossy().starts_with("claude-code-linux-"))
        })
}

/// Output of a finished `claude` run.
#[derive(Debug)]
struct Run {
    #[allow(dead_code, reason = "shown through Debug when the test fails")]
    version: String,
    success: bool,
    code: Option<i32>,
    stdout: String,
    #[allow(dead_code, reason = "shown through Debug when the test fails")]
    stderr: String,
}

/// Runs `claude ARGS…` with a clean environment; kills it after [`RUN_TIMEOUT`].
fn run_claude_with(cli: &Cli, base_url: &str, home: &Path, args: &[&str]) -> Run {
    let path = std::env::var("PATH").unwrap_or_default();
    let child = Command::new(&cli.program)
        .args(&cli.lead)
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
            panic!(
                "cannot start Claude Code {} ({}; a cli.js build needs Node.js >= 18): {e}",
                cli.version,
                cli.program.display()
            )
        });
    let f = client_tool::wait_bounded(child, RUN_TIMEOUT);
    let run = Run {
        version: cli.version.clone(),
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

/// Runs `claude ARGS…` against `s` with `home` as HOME and working directory, on a blocking
/// thread.
async fn claude(cli: &Cli, s: &Sluice, home: &Path, args: Vec<String>) -> Run {
    let (cli, base_url, home) = (cli.clone(), s.base_url(), home.to_path_buf());
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run_claude_with(&cli, &base_url, &home, &args)
    })
    .await
    .unwrap()
}

/// `-p "say the phrase"`.
fn say_the_phrase() -> Vec<String> {
    vec!["-p".into(), "say the phrase".into()]
}

/// A prompt to run `echo MARKER` with the Bash tool, which is allowed without asking.
fn run_the_marker() -> Vec<String> {
    let prompt = format!("Run `echo {MARKER}` with the Bash tool, then report.");
    vec!["-p".into(), prompt, "--allowedTools".into(), "Bash".into()]
}

/// Every release under test, installed (on a blocking thread).
async fn installed() -> Vec<Cli> {
    tokio::task::spawn_blocking(|| releases().iter().map(|v| ensure_claude_code(v)).collect())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_completes_a_prompt_through_sluice() {
    for cli in installed().await {
        completes_a_prompt(cli).await;
    }
}

/// Passthrough to an Anthropic provider: the phrase comes back, headers are forwarded as the
/// design says, and the snapshot counts the request.
async fn completes_a_prompt(cli: Cli) {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").reply(Reply::anthropic_text(PHRASE));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();

    let run = claude(&cli, &s, home.path(), say_the_phrase()).await;

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
            && r.outcome == sluice::snapshot::RequestOutcome::Ok),
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
/// A tool-call id in the form some OpenAI-compatible servers use (invalid as an Anthropic id).
const CHAT_CALL_ID: &str = "functions.Bash:0";
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
            serde_json::json!({"tool_calls": [{"index": 0, "id": CHAT_CALL_ID, "type": "function",
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
    for cli in installed().await {
        runs_a_tool_through_chat(cli).await;
    }
}

/// Translated to a chat-only provider whose tool-call ids are not valid Anthropic ids (as
/// Kimi's `functions.Bash:0`): the client runs the tool, and its result reaches the provider
/// under the provider's own id.
async fn runs_a_tool_through_chat(cli: Cli) {
    let version = cli.version.clone();
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

    let run = claude(&cli, &s, home.path(), run_the_marker()).await;

    let seen = mock.requests();
    assert!(
        run.success,
        "claude -p failed (exit {:?}): {run:#?}\nupstream saw: {seen:#?}",
        run.code
    );

    if version == RECENT {
        // The pinned recent release puts system entries between turns (what broke
        // translation for releases after the oldest): this run exercised that shape.
        assert!(
            seen.iter().any(|r| r.json()["messages"]
                .as_array()
                .is_some_and(|m| m.iter().skip(1).any(|m| m["role"] == "system"))),
            "Claude Code {version} sent no system entry inside messages: {seen:#?}"
        );
    }
    assert!(seen.iter().all(|r| r.path != "/v1/messages"), "{seen:#?}");
    let tool_result = seen.iter().find(|r| {
        let body = String::from_utf8_lossy(&r.body);
        body.contains("\"role\":\"tool\"") && body.contains(CHAT_CALL_ID)
    });
    let tool_result =
        tool_result.unwrap_or_else(|| panic!("no tool result reached the mock: {seen:#?}"));
    let messages = tool_result.json()["messages"].clone();
    let tool = messages
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "tool"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(tool["tool_call_id"], CHAT_CALL_ID, "{messages:#}");
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

/// An Anthropic stream whose one block calls Claude Code's `Bash` tool with `echo MARKER`.
fn anthropic_bash_tool_stream() -> Reply {
    let input =
        serde_json::json!({"command": format!("echo {MARKER}"), "description": "Print the marker"});
    let ev = |name: &str, data: serde_json::Value| format!("event: {name}\ndata: {data}\n\n");
    Reply::sse_events(&[
        ev(
            "message_start",
            serde_json::json!({"type": "message_start", "message": {"id": "msg_e2e",
            "type": "message", "role": "assistant", "model": "mock", "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 0}}}),
        ),
        ev(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0,
            "content_block": {"type": "tool_use", "id": "toolu_e2e_1", "name": "Bash", "input": {}}}),
        ),
        ev(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
        ),
        ev(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        ),
        ev(
            "message_delta",
            serde_json::json!({"type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 5}}),
        ),
        ev("message_stop", serde_json::json!({"type": "message_stop"})),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_runs_a_tool_through_an_anthropic_provider() {
    for cli in installed().await {
        runs_a_tool_through_anthropic(cli).await;
    }
}

/// Passthrough with a tool round trip: the result comes back under the model's id.
async fn runs_a_tool_through_anthropic(cli: Cli) {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .body_contains("\"tool_result\"")
        .reply(Reply::anthropic_text(FINAL));
    mock.on("/v1/messages")
        .body_contains("\"name\":\"Bash\"")
        .reply(anthropic_bash_tool_stream());
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();
    let run = claude(&cli, &s, home.path(), run_the_marker()).await;
    let seen = mock.requests();
    assert!(
        run.success && run.stdout.contains(FINAL),
        "claude -p failed (exit {:?}): {run:#?}\nupstream saw: {seen:#?}",
        run.code
    );
    let result = seen
        .iter()
        .filter_map(|r| {
            let v = r.json();
            v["messages"].as_array().and_then(|m| {
                m.iter()
                    .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                    .find(|b| b["type"] == "tool_result")
            })
        })
        .next()
        .unwrap_or_else(|| panic!("no tool_result reached the mock: {seen:#?}"));
    assert_eq!(result["tool_use_id"], "toolu_e2e_1", "{result:#}");
    assert!(result.to_string().contains(MARKER), "{result:#}");
    s.stop().await;
}

/// Installs the recent release only (how current Claude Code reacts to sluice's waits).
async fn recent() -> Cli {
    let v = releases().pop().unwrap_or_else(|| RECENT.to_string());
    tokio::task::spawn_blocking(move || ensure_claude_code(&v))
        .await
        .unwrap()
}

/// A short rate limit reaches the client in the form it waits on: the upstream's 429 with
/// `retry-after: 2` is passed through, Claude Code waits it out and asks again, and the
/// second request is served; the prompt completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_waits_out_a_short_rate_limit_and_completes() {
    let cli = recent().await;
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").times(1).reply(
        Reply::anthropic_error(429, "rate_limit_error", "slow down").header("retry-after", "2"),
    );
    mock.on("/v1/messages").reply(Reply::anthropic_text(PHRASE));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();
    let run = claude(&cli, &s, home.path(), say_the_phrase()).await;
    assert!(
        run.success && run.stdout.contains(PHRASE),
        "{run:#?}\nupstream saw: {:#?}",
        mock.requests()
    );
    let snap = s.wait_requests(2).await;
    let statuses: Vec<u16> = snap.recent.iter().rev().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 200], "{:#?}", snap.recent);
    s.stop().await;
}

/// A wait longer than a minute is answered at once and honestly: Claude Code gives up on a
/// `retry-after` over 60 s (measured: docs/CLIENTS.md), so the message it prints carries the
/// wait and the reset time instead of leaving the user staring at a spinner.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_shows_the_reset_time_of_a_long_wait() {
    let cli = recent().await;
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").reply(
        Reply::anthropic_error(429, "rate_limit_error", "slow down").header("retry-after", "7200"),
    );
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();
    for turn in 0..2 {
        let run = claude(&cli, &s, home.path(), say_the_phrase()).await;
        let said = format!("{}{}", run.stdout, run.stderr);
        assert!(!run.success, "turn {turn}: {run:#?}");
        // run_claude_with fails the test if the client is still running after RUN_TIMEOUT (2 min):
        // it must give up at once, not wait the 2 h out.
        if turn == 1 {
            // The connection is now cooling: sluice answers itself, naming the wait.
            assert!(
                said.contains("retry in 2h") && said.contains("UTC"),
                "turn {turn}: {said}"
            );
        }
    }
    assert_eq!(
        mock.requests().len(),
        1,
        "the cooling connection is not asked again"
    );
    s.stop().await;
}
