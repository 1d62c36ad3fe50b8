//! Codex CLI end to end: the real `codex exec` (npm `@openai/codex`, pinned) speaks OpenAI
//! Responses to sluice, which translates the turn for a mock that speaks only Anthropic
//! Messages, and the stream back.
//!
//! The CLI is installed once under `target/codex-cli/` (about 400 MB: the package ships a
//! native binary).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::support::{MockUpstream, Reply, Sluice, client_tool, fill, wire};

const CODEX_VERSION: &str = "0.169.0";
const PHRASE: &str = "sluice-codex-ok 41b7";
const DUMMY_KEY: &str = "sk-codex-test-dummy";
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

[[combos]]
name = "claude"
targets = ["anthropic/claude-sonnet-4-5"]
"#;

fn ensure_codex() -> PathBuf {
    client_tool::ensure(
        "codex-cli",
        &format!("@openai/codex@{CODEX_VERSION}"),
        "node_modules/.bin/codex",
    )
}

/// Codex's own config: sluice as a Responses provider, model `claude`.
fn codex_config(base_url: &str) -> String {
    format!(
        "model_provider = \"sluice\"\nmodel = \"claude\"\n\n[model_providers.sluice]\nname = \"sluice\"\nbase_url = \"{base_url}/v1\"\nenv_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n"
    )
}

/// Output of a finished `codex exec`.
#[derive(Debug)]
struct Run {
    success: bool,
    stdout: String,
    #[allow(dead_code, reason = "shown through Debug when the test fails")]
    stderr: String,
}

fn run_codex(codex: &Path, home: &Path, prompt: &str) -> Run {
    run_codex_with(codex, home, &[prompt])
}

/// `codex exec --skip-git-repo-check ARGS…` in `home` with a clean environment.
fn run_codex_with(codex: &Path, home: &Path, args: &[&str]) -> Run {
    let path = std::env::var("PATH").unwrap_or_default();
    let child = Command::new(codex)
        .args(["exec", "--skip-git-repo-check"])
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("CODEX_HOME", home.join(".codex"))
        .env("OPENAI_API_KEY", DUMMY_KEY)
        .current_dir(home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start codex: {e}"));
    let f = client_tool::wait_bounded(child, RUN_TIMEOUT);
    let run = Run {
        success: f.success(),
        stdout: f.stdout,
        stderr: f.stderr,
    };
    assert!(
        !f.timed_out,
        "codex exec did not finish within {RUN_TIMEOUT:?}: {run:#?}"
    );
    run
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_completes_a_turn_through_an_anthropic_only_provider() {
    let codex = tokio::task::spawn_blocking(ensure_codex).await.unwrap();
    let mock = MockUpstream::start().await;
    mock.speak_only_anthropic();
    mock.on("/v1/messages").reply(Reply::anthropic_text(PHRASE));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();
    std::fs::write(
        home.path().join(".codex/config.toml"),
        codex_config(&s.base_url()),
    )
    .unwrap();

    let home_path = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || run_codex(&codex, &home_path, "say the phrase"))
        .await
        .unwrap();

    let seen = mock.requests();
    assert!(
        run.success,
        "codex exec failed: {run:#?}\nupstream saw: {seen:#?}"
    );
    assert!(
        run.stdout.contains(PHRASE),
        "stdout lacks the phrase: {run:#?}"
    );
    let turn = seen
        .iter()
        .find(|r| r.path == "/v1/messages")
        .unwrap_or_else(|| panic!("no Messages request reached the mock: {seen:#?}"));
    assert_eq!(turn.model().as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(
        turn.header("x-api-key"),
        Some(DUMMY_KEY),
        "the key moved to x-api-key"
    );
    let snap = s.wait_requests(1).await;
    assert!(
        snap.recent.iter().any(|r| r
            .attempt_log
            .iter()
            .any(|a| a.translated == "responses→anthropic")),
        "{:#?}",
        snap.recent
    );
    s.stop().await;
}

const MARKER: &str = "sluice-codex-tool-6a90";
const FINAL: &str = "sluice-codex-final-0d5e";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_runs_a_function_call_round_trip_through_an_anthropic_only_provider() {
    let codex = tokio::task::spawn_blocking(ensure_codex).await.unwrap();
    let mock = MockUpstream::start().await;
    mock.speak_only_anthropic();
    // The turn carrying the command's output gets the final text; the first turn gets an
    // `exec_command` call (Codex's shell tool) split over two input fragments.
    mock.on("/v1/messages")
        .body_contains("\"tool_result\"")
        .reply(Reply::sse_events(&wire::anthropic_text_events(
            "claude-sonnet-4-5",
            FINAL,
        )));
    let cmd = format!("{{\"cmd\":\"echo {MARKER}\"}}");
    let (a, b) = cmd.split_at(9);
    mock.on("/v1/messages")
        .reply(Reply::sse_events(&wire::anthropic_tool_use_events(
            "claude-sonnet-4-5",
            "toolu_codex_1",
            "exec_command",
            &[a, b],
        )));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();
    std::fs::write(
        home.path().join(".codex/config.toml"),
        codex_config(&s.base_url()),
    )
    .unwrap();

    let home_path = home.path().to_path_buf();
    let prompt = format!("Run `echo {MARKER}` and report.");
    let run = tokio::task::spawn_blocking(move || {
        // The test's temp home is the sandbox: no approval prompts, no OS sandbox (which a
        // VM may not support).
        run_codex_with(
            &codex,
            &home_path,
            &["--dangerously-bypass-approvals-and-sandbox", &prompt],
        )
    })
    .await
    .unwrap();

    let seen = mock.requests();
    assert!(
        run.success,
        "codex exec failed: {run:#?}\nupstream saw: {seen:#?}"
    );
    let result = seen
        .iter()
        .filter_map(|r| r.json()["messages"].as_array().cloned())
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|c| c["type"] == "tool_result")
        .unwrap_or_else(|| panic!("no tool result reached the mock: {seen:#?}"));
    assert_eq!(result["tool_use_id"], "toolu_codex_1", "{result:#}");
    assert!(
        result["content"].to_string().contains(MARKER),
        "Codex ran `echo` and sent its output back: {result:#}"
    );
    assert!(
        run.stdout.contains(FINAL),
        "stdout lacks the final text: {run:#?}"
    );
    s.stop().await;
}
