//! aider end to end: the real `aider --message` (PyPI `aider-chat`, pinned; it talks through
//! litellm) edits a file through sluice in both of its modes, each to a provider of the same
//! dialect and to one of the other:
//!
//! - OpenAI mode (`--model openai/<name>`, `OPENAI_API_BASE=<sluice>/v1`): Chat Completions,
//!   forwarded to an OpenAI provider or translated for an Anthropic one;
//! - Anthropic mode (`--model anthropic/<name>`, `ANTHROPIC_API_BASE=<sluice>`, litellm appends
//!   `/v1/messages`): Messages, forwarded to an Anthropic provider or translated for a chat one.
//!
//! aider's environment is what `sluice env aider` prints. The mock answers with a
//! SEARCH/REPLACE block; the test checks the request the mock saw, the
//! edit on disk and sluice's record of the request. aider streams by default; the translated
//! pairs also run with `--no-stream`.
//!
//! aider is installed once, into a virtualenv under `target/aider-<version>/venv/` made with the
//! machine's `python3` (about 700 MB).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use sluice::cli::env::ClientKind;
use sluice::config::LoadEnv;

use crate::support::{MockUpstream, Reply, Sluice, client_tool, fill, wire};

/// The pinned aider release; `SLUICE_CLIENTS=latest` uses the one PyPI serves today.
const AIDER_PIN: &str = "0.86.2";
const RUN_TIMEOUT: Duration = Duration::from_secs(180);
const OPENAI_KEY: &str = "sk-aider-test-openai";
const ANTHROPIC_KEY: &str = "sk-ant-aider-test";
const FILE: &str = "greet.py";
const ORIGINAL: &str = "def greet():\n    return \"hello\"\n";

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

/// The aider release under test: [`AIDER_PIN`], or PyPI's newest with `SLUICE_CLIENTS=latest`.
fn aider_version() -> String {
    if std::env::var("SLUICE_CLIENTS").as_deref() == Ok("latest") {
        client_tool::pypi_latest("aider-chat")
    } else {
        AIDER_PIN.to_string()
    }
}

/// `target/aider-<version>/venv/bin/aider`, installed on first use; a python3 aider cannot
/// run on fails the test with why.
fn ensure_aider() -> PathBuf {
    let version = aider_version();
    let pkg = format!("aider-chat=={version}");
    let dir = format!("aider-{version}");
    let bin = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(&dir)
        .join("venv/bin/aider");
    if !bin.exists() {
        let v = Command::new("python3")
            .args([
                "-c",
                "import sys; print('%d.%d' % sys.version_info[:2]); sys.exit(not ((3, 10) <= sys.version_info[:2] < (3, 13)))",
            ])
            .output()
            .unwrap_or_else(|e| panic!("installing {pkg} needs python3 on PATH: {e}"));
        assert!(
            v.status.success(),
            "{pkg} requires Python >=3.10,<3.13 but python3 is {}",
            String::from_utf8_lossy(&v.stdout).trim()
        );
    }
    client_tool::ensure_venv(&dir, &[&pkg], "bin/aider")
}

/// How aider talks to sluice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `openai/<model>` with `OPENAI_API_BASE`: Chat Completions.
    OpenAi,
    /// `anthropic/<model>` with `ANTHROPIC_API_BASE`: Messages.
    Anthropic,
}

/// What the upstream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upstream {
    Chat,
    Anthropic,
}

/// One aider run: the client mode, the provider's dialect, streaming or not.
#[derive(Debug, Clone, Copy)]
struct Case {
    mode: Mode,
    upstream: Upstream,
    stream: bool,
    /// Unique text the edit writes (and the prompt names).
    phrase: &'static str,
}

impl Case {
    /// The model aider is given, and the one sluice forwards (aider/litellm drop the prefix).
    fn models(&self) -> (&'static str, &'static str) {
        match self.mode {
            Mode::OpenAi => ("openai/mock-gpt", "mock-gpt"),
            Mode::Anthropic => ("anthropic/claude-sonnet-4-5", "claude-sonnet-4-5"),
        }
    }

    fn upstream_path(&self) -> &'static str {
        match self.upstream {
            Upstream::Chat => "/v1/chat/completions",
            Upstream::Anthropic => "/v1/messages",
        }
    }

    /// `attempt_log[].translated` sluice records.
    fn translated(&self) -> &'static str {
        match (self.mode, self.upstream) {
            (Mode::OpenAi, Upstream::Chat) | (Mode::Anthropic, Upstream::Anthropic) => "",
            (Mode::OpenAi, Upstream::Anthropic) => "chat→anthropic",
            (Mode::Anthropic, Upstream::Chat) => "anthropic→openai",
        }
    }
}

/// aider's SEARCH/REPLACE edit of [`FILE`], making `greet` return `phrase`.
fn edit(phrase: &str) -> String {
    format!(
        "I'll change the greeting.\n\n{FILE}\n```python\n<<<<<<< SEARCH\n    return \"hello\"\n=======\n    return \"{phrase}\"\n>>>>>>> REPLACE\n```\n"
    )
}

/// `text` cut into `n` pieces of about equal size (ASCII only).
fn pieces(text: &str, n: usize) -> Vec<&str> {
    let size = text.len().div_ceil(n);
    (0..n)
        .map(|i| &text[(i * size).min(text.len())..((i + 1) * size).min(text.len())])
        .filter(|p| !p.is_empty())
        .collect()
}

fn chat_chunk(model: &str, delta: Value, finish: Option<&str>) -> Bytes {
    let c = json!({"id": "chatcmpl-aider", "object": "chat.completion.chunk", "created": 0,
        "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    Bytes::from(format!("data: {c}\n\n"))
}

/// A chat completion carrying `text`: a stream of several content deltas and a usage chunk,
/// or one JSON object.
fn chat_reply(model: &str, text: &str, stream: bool) -> Reply {
    if !stream {
        return Reply::json(200, wire::chat_completion(model, text));
    }
    let mut chunks = vec![chat_chunk(
        model,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    chunks.extend(
        pieces(text, 4)
            .into_iter()
            .map(|p| chat_chunk(model, json!({"content": p}), None)),
    );
    chunks.push(chat_chunk(model, json!({}), Some("stop")));
    let usage = json!({"id": "chatcmpl-aider", "object": "chat.completion.chunk", "created": 0,
        "model": model, "choices": [],
        "usage": {"prompt_tokens": 900, "completion_tokens": 60, "total_tokens": 960}});
    chunks.push(Bytes::from(format!("data: {usage}\n\n")));
    chunks.push(Bytes::from_static(b"data: [DONE]\n\n"));
    Reply::sse_chunks(chunks)
}

fn sse_event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A Messages reply carrying `text`: a stream of several text deltas, or one JSON message.
fn anthropic_reply(model: &str, text: &str, stream: bool) -> Reply {
    if !stream {
        return Reply::json(200, wire::anthropic_message(model, text));
    }
    let start = json!({"type": "message_start", "message": {"id": "msg_01Aider", "type": "message",
        "role": "assistant", "content": [], "model": model, "stop_reason": null,
        "stop_sequence": null, "usage": {"input_tokens": 900, "output_tokens": 1}}});
    let mut events = vec![
        sse_event("message_start", &start),
        sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
        ),
        sse_event("ping", &json!({"type": "ping"})),
    ];
    events.extend(pieces(text, 4).into_iter().map(|p| {
        sse_event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": p}}),
        )
    }));
    events.extend([
        sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ),
        sse_event(
            "message_delta",
            &json!({"type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 60}}),
        ),
        sse_event("message_stop", &json!({"type": "message_stop"})),
    ]);
    Reply::sse_events(&events)
}

/// aider's model-metadata cache, pre-filled so it never fetches litellm's price list from
/// GitHub (a fresh, non-empty cache is used as is).
fn seed_model_cache(home: &Path) {
    let dir = home.join(".aider/caches");
    std::fs::create_dir_all(&dir).unwrap();
    let meta = json!({
        "mock-gpt": {"max_input_tokens": 128000, "max_output_tokens": 16384, "max_tokens": 16384,
            "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
            "litellm_provider": "openai", "mode": "chat"}
    });
    std::fs::write(
        dir.join("model_prices_and_context_window.json"),
        meta.to_string(),
    )
    .unwrap();
}

/// The `export NAME=value` lines `sluice env aider` prints for a sluice on `listen` with
/// `config`, checked to name `--model <prefix>/` for `mode`.
fn sluice_env_aider(config: &str, listen: SocketAddr, mode: Mode) -> Vec<(String, String)> {
    let text = format!("[server]\nlisten = \"{listen}\"\n{config}");
    let cfg = sluice::config::from_str(
        &text,
        Path::new("aider-test.toml"),
        &LoadEnv::fixed(&[], std::env::temp_dir()),
    )
    .unwrap_or_else(|e| panic!("{e}\n{text}"));
    let out = sluice::cli::env::render(ClientKind::Aider, &cfg);
    let prefix = match mode {
        Mode::OpenAi => "aider --model openai/",
        Mode::Anthropic => "aider --model anthropic/",
    };
    assert!(
        out.contains(prefix),
        "`sluice env aider` lacks {prefix:?}:\n{out}"
    );
    out.lines()
        .filter_map(|l| l.strip_prefix("export "))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("{l:?} in\n{out}"));
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// Output of a finished aider run.
#[derive(Debug)]
struct Run {
    success: bool,
    stdout: String,
    #[allow(dead_code, reason = "shown through Debug when the test fails")]
    stderr: String,
}

/// `aider --message <prompt> <FILE>` in `work`, non-interactive, with a clean environment
/// (HOME = `home`) plus `exports` (what `sluice env aider` prints) and `case.mode`'s key.
fn run_aider(
    aider: &Path,
    home: &Path,
    work: &Path,
    exports: &[(String, String)],
    case: Case,
) -> Run {
    let (model, _) = case.models();
    let prompt = format!("Make greet() return \"{}\".", case.phrase);
    let mut cmd = Command::new(aider);
    cmd.args([
        "--model",
        model,
        "--edit-format",
        "diff",
        "--message",
        &prompt,
    ])
    .args([
        "--yes-always",
        "--no-git",
        "--no-gitignore",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-show-model-warnings",
        "--no-check-update",
        "--no-show-release-notes",
        "--no-analytics",
        "--no-pretty",
        "--no-fancy-input",
        "--no-detect-urls",
        "--no-auto-lint",
        "--no-suggest-shell-commands",
        "--map-tokens",
        "0",
    ])
    .arg(if case.stream {
        "--stream"
    } else {
        "--no-stream"
    })
    .arg(FILE)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("HOME", home)
    .env("TERM", "dumb")
    .env("NO_PROXY", "127.0.0.1,localhost")
    // litellm's own model price list: the packaged copy, not a download at import.
    .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    .current_dir(work)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd.envs(exports.iter().map(|(k, v)| (k, v)));
    match case.mode {
        Mode::OpenAi => cmd.env("OPENAI_API_KEY", OPENAI_KEY),
        Mode::Anthropic => cmd.env("ANTHROPIC_API_KEY", ANTHROPIC_KEY),
    };
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", aider.display()));
    let f = client_tool::wait_bounded(child, RUN_TIMEOUT);
    let run = Run {
        success: f.success(),
        stdout: f.stdout,
        stderr: f.stderr,
    };
    assert!(
        !f.timed_out,
        "aider did not finish within {RUN_TIMEOUT:?}: {run:#?}"
    );
    run
}

/// Runs `case` end to end and checks the upstream request, the edit on disk and sluice's record.
async fn edits_through_sluice(case: Case) {
    let aider = tokio::task::spawn_blocking(ensure_aider).await.unwrap();
    let (_, upstream_model) = case.models();
    let answer = edit(case.phrase);
    let mock = MockUpstream::start().await;
    let dialect = match case.upstream {
        Upstream::Chat => {
            mock.speak_only_chat();
            mock.on("/v1/chat/completions")
                .reply(chat_reply(upstream_model, &answer, case.stream));
            "openai"
        }
        Upstream::Anthropic => {
            mock.speak_only_anthropic();
            mock.on("/v1/messages")
                .reply(anthropic_reply(upstream_model, &answer, case.stream));
            "anthropic"
        }
    };
    let config = fill(&CONFIG.replace("DIALECT", dialect), &mock);
    let s = Sluice::start(&config, &[]).await;
    // aider gets exactly what `sluice env aider` tells a user to export.
    let exports = sluice_env_aider(&config, s.listen(), case.mode);
    let names: Vec<&str> = exports.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(
        names,
        ["OPENAI_API_BASE", "ANTHROPIC_API_BASE"],
        "{exports:?}"
    );
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    seed_model_cache(home.path());
    std::fs::write(work.path().join(FILE), ORIGINAL).unwrap();

    let (home_path, work_path) = (home.path().to_path_buf(), work.path().to_path_buf());
    let run = tokio::task::spawn_blocking(move || {
        run_aider(&aider, &home_path, &work_path, &exports, case)
    })
    .await
    .unwrap();

    let seen = mock.requests();
    assert!(
        run.success,
        "aider failed ({case:?}): {run:#?}\nupstream saw: {seen:#?}\nsluice: {:#?}",
        s.snapshot().recent
    );
    // One turn: the edit applied the first time (a failed edit makes aider send a reflection).
    assert_eq!(
        seen.len(),
        1,
        "{case:?}: expected one upstream request: {seen:#?}\n{run:#?}"
    );
    let req = &seen[0];
    assert_eq!(req.path, case.upstream_path(), "{case:?}: {req:#?}");
    let body = req.json();
    assert_eq!(body["model"], upstream_model, "{case:?}: {body:#}");
    assert_eq!(
        body["stream"].as_bool().unwrap_or(false),
        case.stream,
        "{case:?}: {body:#}"
    );
    let text = body.to_string();
    assert!(
        text.contains(case.phrase) && text.contains("return \\\"hello\\\""),
        "{case:?}: the prompt and the file reach the upstream: {body:#}"
    );
    match case.upstream {
        Upstream::Chat => {
            assert_eq!(body["messages"][0]["role"], "system", "{case:?}: {body:#}");
            assert_eq!(
                req.header("authorization"),
                Some(format!("Bearer {}", key(case.mode)).as_str()),
                "{case:?}: the client's key reaches the chat upstream as a bearer token"
            );
        }
        Upstream::Anthropic => {
            assert!(
                body["system"].to_string().contains("SEARCH/REPLACE"),
                "{case:?}: aider's system prompt as `system`: {body:#}"
            );
            assert!(body["max_tokens"].as_u64().is_some(), "{body:#}");
            assert!(
                body["messages"]
                    .as_array()
                    .is_some_and(|m| m.iter().all(|m| m["role"] != "system")),
                "{case:?}: {body:#}"
            );
            assert_eq!(
                req.header("x-api-key"),
                Some(key(case.mode)),
                "{case:?}: the client's key reaches the Anthropic upstream as x-api-key"
            );
        }
    }

    let edited = std::fs::read_to_string(work.path().join(FILE)).unwrap();
    assert_eq!(
        edited,
        ORIGINAL.replace("hello", case.phrase),
        "{case:?}: aider applied the edit: {run:#?}"
    );
    assert!(
        run.stdout.contains(&format!("Applied edit to {FILE}")),
        "{case:?}: {run:#?}"
    );

    let snap = s.wait_requests(1).await;
    let r = &snap.recent[0];
    assert_eq!(r.outcome, sluice::snapshot::RequestOutcome::Ok, "{r:#?}");
    assert_eq!(r.stream, case.stream, "{r:#?}");
    assert_eq!(r.client_model, upstream_model, "{r:#?}");
    assert_eq!(
        r.route,
        match case.mode {
            Mode::OpenAi => "/v1/chat/completions",
            Mode::Anthropic => "/v1/messages",
        },
        "{r:#?}"
    );
    assert_eq!(r.attempt_log.len(), 1, "{r:#?}");
    assert_eq!(r.attempt_log[0].translated, case.translated(), "{r:#?}");
    s.stop().await;
}

fn key(mode: Mode) -> &'static str {
    match mode {
        Mode::OpenAi => OPENAI_KEY,
        Mode::Anthropic => ANTHROPIC_KEY,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_openai_mode_edits_a_file_through_an_openai_provider() {
    edits_through_sluice(Case {
        mode: Mode::OpenAi,
        upstream: Upstream::Chat,
        stream: true,
        phrase: "sluice-aider-oo-5c1d",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_openai_mode_streams_an_edit_from_an_anthropic_provider() {
    edits_through_sluice(Case {
        mode: Mode::OpenAi,
        upstream: Upstream::Anthropic,
        stream: true,
        phrase: "sluice-aider-oa-2b7e",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_openai_mode_without_streaming_edits_through_an_anthropic_provider() {
    edits_through_sluice(Case {
        mode: Mode::OpenAi,
        upstream: Upstream::Anthropic,
        stream: false,
        phrase: "sluice-aider-oan-9f04",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_anthropic_mode_edits_a_file_through_an_anthropic_provider() {
    edits_through_sluice(Case {
        mode: Mode::Anthropic,
        upstream: Upstream::Anthropic,
        stream: true,
        phrase: "sluice-aider-aa-7d3a",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_anthropic_mode_streams_an_edit_from_a_chat_provider() {
    edits_through_sluice(Case {
        mode: Mode::Anthropic,
        upstream: Upstream::Chat,
        stream: true,
        phrase: "sluice-aider-ac-40e8",
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aider_anthropic_mode_without_streaming_edits_through_a_chat_provider() {
    edits_through_sluice(Case {
        mode: Mode::Anthropic,
        upstream: Upstream::Chat,
        stream: false,
        phrase: "sluice-aider-acn-e612",
    })
    .await;
}
