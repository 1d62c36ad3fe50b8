//! Codex CLI end to end: the real `codex exec` (npm `@openai/codex`, pinned at [`PIN`]) speaks
//! OpenAI Responses to sluice, which forwards it to a Responses provider unchanged, or
//! translates it for a mock that speaks only Chat Completions or only Anthropic Messages, and
//! the stream back. Each dialect pair gets a streamed function-call round trip: the mock asks
//! for Codex's shell tool (`exec_command`) to run `echo MARKER`, Codex runs it, the output
//! comes back under the mock's call id, and the mock's final text reaches Codex's stdout.
//!
//! Codex picks its tool set by model name. A name it does not know (`claude` here, as a sluice
//! combo) gets its fallback set: function tools, a `namespace` group and `web_search`. A name
//! of its own (`gpt-5.5`) adds the freeform `custom` tool `apply_patch`, `tool_search` and
//! `text.verbosity`; the `*_with_openai_tools_*` tests route that shape through translation.
//!
//! `SLUICE_CLIENTS=latest` replaces the pin with whatever the npm registry serves today. Each
//! release is installed once under `target/codex-cli-<version>/` (about 420 MB: the package's
//! launcher `bin/codex.js` only execs the native binary that npm installs beside it from the
//! platform package `@openai/codex-linux-x64` (…-arm64, …-darwin-*), under
//! `vendor/<target triple>/bin/codex`; the tests run that binary directly).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::support::{MockUpstream, Reply, Sluice, client_tool, fill, wire};

/// The pinned release.
const PIN: &str = "0.171.0";
const PHRASE: &str = "sluice-codex-ok 41b7";
const DUMMY_KEY: &str = "sk-codex-test-dummy";
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// A model name Codex has no metadata for: it sends its fallback tool set.
const FALLBACK_MODEL: &str = "claude";
/// A model name Codex knows: it sends that model's tool set (with `custom` `apply_patch`).
const OPENAI_MODEL: &str = "gpt-5.5";

/// sluice in front of a provider that speaks only Anthropic Messages.
const ANTHROPIC_CONFIG: &str = r#"
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

[[combos]]
name = "gpt-5.5"
targets = ["anthropic/claude-sonnet-4-5"]
"#;

/// sluice in front of a chat-only OpenAI-compatible server (Ollama, vLLM, …).
const CHAT_CONFIG: &str = r#"
[routing]
default_provider = "local"

[[providers]]
id = "local"
dialect = "openai"
base_url = "{MOCK}"
responses = false

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"

[[combos]]
name = "claude"
targets = ["local/qwen3-coder"]

[[combos]]
name = "gpt-5.5"
targets = ["local/qwen3-coder"]
"#;

/// sluice in front of a provider that speaks the Responses API: no translation.
const RESPONSES_CONFIG: &str = r#"
[routing]
default_provider = "openai"

[[providers]]
id = "openai"
dialect = "openai"
base_url = "{MOCK}"

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;

/// The release under test: [`PIN`], or with `SLUICE_CLIENTS=latest` the registry's newest.
fn version() -> &'static str {
    static V: OnceLock<String> = OnceLock::new();
    V.get_or_init(|| {
        if std::env::var("SLUICE_CLIENTS").as_deref() == Ok("latest") {
            client_tool::npm_latest("@openai/codex")
        } else {
            PIN.to_string()
        }
    })
}

/// Installs the release under test under `target/codex-cli-<version>/` unless present;
/// returns its native binary.
fn ensure_codex() -> PathBuf {
    let version = version();
    let manifest = client_tool::ensure(
        &format!("codex-cli-{version}"),
        &format!("@openai/codex@{version}"),
        "node_modules/@openai/codex/package.json",
    );
    let scope = manifest
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    native_binary(&scope).unwrap_or_else(|| {
        panic!(
            "Codex {version} installed without its native binary (@openai/codex-<platform>/\
             vendor/<triple>/bin/codex under {}); npm must install optional dependencies",
            scope.display()
        )
    })
}

/// `@openai/codex-<platform>/vendor/<triple>/bin/codex` under the `@openai` scope directory.
fn native_binary(scope: &Path) -> Option<PathBuf> {
    let platform_pkgs = std::fs::read_dir(scope)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| {
            e.file_name().to_string_lossy().starts_with("codex-") && e.file_name() != "codex"
        });
    platform_pkgs
        .filter_map(|pkg| std::fs::read_dir(pkg.path().join("vendor")).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|triple| triple.path().join("bin/codex"))
        .find(|p| p.is_file())
}

/// Codex's own config: sluice as a Responses provider, model `model`, no retries (the mock
/// answers deterministically; a refusal should fail at once).
fn codex_config(base_url: &str, model: &str) -> String {
    format!(
        "model_provider = \"sluice\"\nmodel = \"{model}\"\n\n[model_providers.sluice]\n\
         name = \"sluice\"\nbase_url = \"{base_url}/v1\"\nenv_key = \"OPENAI_API_KEY\"\n\
         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n"
    )
}

/// A temp home whose `.codex/config.toml` points Codex at `s` with `model`.
fn codex_home(s: &Sluice, model: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".codex")).unwrap();
    std::fs::write(
        home.path().join(".codex/config.toml"),
        codex_config(&s.base_url(), model),
    )
    .unwrap();
    home
}

/// Output of a finished `codex exec`.
#[derive(Debug)]
struct Run {
    success: bool,
    stdout: String,
    #[allow(dead_code, reason = "shown through Debug when the test fails")]
    stderr: String,
}

/// `codex exec --skip-git-repo-check ARGS…` in `home` with a clean environment.
fn run_codex(codex: &Path, home: &Path, args: &[&str]) -> Run {
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
        .unwrap_or_else(|e| panic!("cannot start codex {}: {e}", codex.display()));
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

/// The attempts' `translated` labels in sluice's snapshot once `n` requests were counted.
async fn translated_labels(s: &Sluice, n: u64) -> Vec<String> {
    let snap = s.wait_requests(n).await;
    snap.recent
        .iter()
        .flat_map(|r| r.attempt_log.iter().map(|a| a.translated.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_completes_a_turn_through_an_anthropic_only_provider() {
    let codex = tokio::task::spawn_blocking(ensure_codex).await.unwrap();
    let mock = MockUpstream::start().await;
    mock.speak_only_anthropic();
    mock.on("/v1/messages").reply(Reply::anthropic_text(PHRASE));
    let s = Sluice::start(&fill(ANTHROPIC_CONFIG, &mock), &[]).await;
    let home = codex_home(&s, FALLBACK_MODEL);

    let home_path = home.path().to_path_buf();
    let run =
        tokio::task::spawn_blocking(move || run_codex(&codex, &home_path, &["say the phrase"]))
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
    assert_eq!(turn.json()["stream"], true, "Codex always streams");
    let labels = translated_labels(&s, 1).await;
    assert!(
        labels.iter().any(|l| l == "responses→anthropic"),
        "{labels:?}"
    );
    s.stop().await;
}

// === function-call round trips ===

const MARKER: &str = "sluice-codex-tool-6a90";
const FINAL: &str = "sluice-codex-final-0d5e";
/// Codex's shell tool at this release (a PTY-backed `exec_command {cmd}`; there is no
/// `shell` tool any more).
const SHELL_TOOL: &str = "exec_command";
const ANTHROPIC_CALL_ID: &str = "toolu_codex_1";
/// A chat tool-call id in the form some OpenAI-compatible servers use.
const CHAT_CALL_ID: &str = "call_codex_chat_1";
const RESPONSES_CALL_ID: &str = "call_codex_resp_1";

/// The upstream dialect behind sluice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Upstream {
    /// An `openai` provider with `responses = true`: passthrough to `/v1/responses`.
    Responses,
    /// An `openai` provider with `responses = false`: translated to `/v1/chat/completions`.
    Chat,
    /// An `anthropic` provider: translated to `/v1/messages`.
    Anthropic,
}

impl Upstream {
    fn config(self) -> &'static str {
        match self {
            Self::Responses => RESPONSES_CONFIG,
            Self::Chat => CHAT_CONFIG,
            Self::Anthropic => ANTHROPIC_CONFIG,
        }
    }

    fn path(self) -> &'static str {
        match self {
            Self::Responses => "/v1/responses",
            Self::Chat => "/v1/chat/completions",
            Self::Anthropic => "/v1/messages",
        }
    }

    /// The attempt's `translated` label in sluice's snapshot.
    fn label(self) -> &'static str {
        match self {
            Self::Responses => "",
            Self::Chat => "responses→openai",
            Self::Anthropic => "responses→anthropic",
        }
    }

    fn call_id(self) -> &'static str {
        match self {
            Self::Responses => RESPONSES_CALL_ID,
            Self::Chat => CHAT_CALL_ID,
            Self::Anthropic => ANTHROPIC_CALL_ID,
        }
    }

    /// Scripts the mock: the turn carrying the tool's output gets [`FINAL`]; any other turn
    /// gets a call of [`SHELL_TOOL`] running `echo MARKER`, its arguments in two fragments.
    fn script(self, mock: &MockUpstream) {
        let cmd = json!({"cmd": format!("echo {MARKER}")}).to_string();
        let (a, b) = cmd.split_at(9);
        match self {
            Self::Responses => {
                mock.on("/v1/responses")
                    .body_contains("\"function_call_output\"")
                    .reply(responses_text_stream(FINAL));
                mock.on("/v1/responses").reply(responses_call_stream(
                    RESPONSES_CALL_ID,
                    SHELL_TOOL,
                    &[a, b],
                ));
            }
            Self::Chat => {
                mock.speak_only_chat();
                mock.on("/v1/chat/completions")
                    .body_contains("\"role\":\"tool\"")
                    .reply(chat_text_stream(FINAL));
                mock.on("/v1/chat/completions").reply(chat_call_stream(
                    CHAT_CALL_ID,
                    SHELL_TOOL,
                    &[a, b],
                ));
            }
            Self::Anthropic => {
                mock.speak_only_anthropic();
                mock.on("/v1/messages")
                    .body_contains("\"tool_result\"")
                    .reply(Reply::sse_events(&wire::anthropic_text_events(
                        "claude-sonnet-4-5",
                        FINAL,
                    )));
                mock.on("/v1/messages")
                    .reply(Reply::sse_events(&wire::anthropic_tool_use_events(
                        "claude-sonnet-4-5",
                        ANTHROPIC_CALL_ID,
                        SHELL_TOOL,
                        &[a, b],
                    )));
            }
        }
    }

    /// The tool's output as the upstream received it: (call id, output text), from the first
    /// request carrying one.
    fn tool_output(self, body: &Value) -> Option<(String, String)> {
        let text = |v: &Value| v.as_str().map_or_else(|| v.to_string(), str::to_string);
        match self {
            Self::Responses => body["input"].as_array()?.iter().find_map(|i| {
                (i["type"] == "function_call_output")
                    .then(|| (text(&i["call_id"]), text(&i["output"])))
            }),
            Self::Chat => body["messages"].as_array()?.iter().find_map(|m| {
                (m["role"] == "tool").then(|| (text(&m["tool_call_id"]), text(&m["content"])))
            }),
            Self::Anthropic => body["messages"]
                .as_array()?
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .find_map(|c| {
                    (c["type"] == "tool_result")
                        .then(|| (text(&c["tool_use_id"]), text(&c["content"])))
                }),
        }
    }
}

/// What a round trip left behind, for test-specific checks.
struct RoundTrip {
    /// Every request the mock saw.
    seen: Vec<crate::support::mock_upstream::Recorded>,
}

/// Codex (configured with `model`) asks sluice, in front of `up`, to run `echo MARKER`: the
/// mock calls the shell tool, Codex runs it, its output reaches the mock under the mock's call
/// id, and the mock's final text reaches Codex's stdout; the snapshot labels the translation.
async fn round_trip(up: Upstream, model: &'static str) -> RoundTrip {
    let codex = tokio::task::spawn_blocking(ensure_codex).await.unwrap();
    let mock = MockUpstream::start().await;
    up.script(&mock);
    let s = Sluice::start(&fill(up.config(), &mock), &[]).await;
    let home = codex_home(&s, model);

    let home_path = home.path().to_path_buf();
    let prompt = format!("Run `echo {MARKER}` and report.");
    let run = tokio::task::spawn_blocking(move || {
        // The test's temp home is the sandbox: no approval prompts, no OS sandbox (which a
        // VM may not support).
        run_codex(
            &codex,
            &home_path,
            &["--dangerously-bypass-approvals-and-sandbox", &prompt],
        )
    })
    .await
    .unwrap();

    let seen = mock.requests();
    let snap = s.snapshot();
    let errors: Vec<_> = snap
        .recent
        .iter()
        .filter(|r| r.status != 200)
        .map(|r| (r.status, r.error.clone()))
        .collect();
    assert!(
        run.success,
        "codex exec ({model}) through {up:?} failed: {run:#?}\nsluice answered: {errors:#?}\n\
         upstream saw: {seen:#?}"
    );
    assert!(
        seen.iter().all(|r| r.path == up.path()),
        "every request went to {}: {seen:#?}",
        up.path()
    );
    let first = seen
        .first()
        .unwrap_or_else(|| panic!("no request reached the mock"))
        .json();
    assert_eq!(first["stream"], true, "Codex always streams: {first:#}");
    let offers_shell = match up {
        Upstream::Anthropic => first["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == SHELL_TOOL)),
        Upstream::Chat => first["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["function"]["name"] == SHELL_TOOL)),
        Upstream::Responses => first["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == SHELL_TOOL)),
    };
    assert!(
        offers_shell,
        "the first turn offers {SHELL_TOOL}: {first:#}"
    );
    let (call_id, output) = seen
        .iter()
        .find_map(|r| up.tool_output(&r.json()))
        .unwrap_or_else(|| panic!("no tool output reached the mock: {seen:#?}"));
    assert_eq!(call_id, up.call_id(), "the output answers the mock's call");
    assert!(
        output.contains(MARKER),
        "Codex ran `echo` and sent its output back: {output}"
    );
    assert!(
        run.stdout.contains(FINAL),
        "stdout lacks the final text: {run:#?}"
    );
    let labels = translated_labels(&s, seen.len() as u64).await;
    assert!(
        !labels.is_empty() && labels.iter().all(|l| l == up.label()),
        "every attempt is labelled {:?}: {labels:?}",
        up.label()
    );
    s.stop().await;
    RoundTrip { seen }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_runs_a_function_call_round_trip_through_a_responses_provider() {
    let rt = round_trip(Upstream::Responses, OPENAI_MODEL).await;
    // Passthrough: Codex's own tool set, freeform `custom` tools included, arrives untouched.
    let first = rt.seen[0].json();
    assert_eq!(first["model"], OPENAI_MODEL);
    assert_eq!(
        rt.seen[0].header("authorization"),
        Some(format!("Bearer {DUMMY_KEY}").as_str()),
        "passthrough forwards the client's key"
    );
    let tools = first["tools"].as_array().cloned().unwrap_or_default();
    assert!(
        tools
            .iter()
            .any(|t| t["type"] == "custom" && t["name"] == "apply_patch"),
        "{tools:#?}"
    );
    // The second turn replays the call itself before its output.
    let second = rt.seen[1].json();
    let input = second["input"].as_array().cloned().unwrap_or_default();
    assert!(
        input.iter().any(|i| i["type"] == "function_call"
            && i["call_id"] == RESPONSES_CALL_ID
            && i["name"] == SHELL_TOOL),
        "{input:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_runs_a_function_call_round_trip_through_a_chat_only_provider() {
    let rt = round_trip(Upstream::Chat, FALLBACK_MODEL).await;
    assert_eq!(rt.seen[0].model().as_deref(), Some("qwen3-coder"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_runs_a_function_call_round_trip_through_an_anthropic_only_provider() {
    let rt = round_trip(Upstream::Anthropic, FALLBACK_MODEL).await;
    assert_eq!(rt.seen[0].model().as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(
        rt.seen[0].header("x-api-key"),
        Some(DUMMY_KEY),
        "the key moved to x-api-key"
    );
}

/// Codex's own tool set for an OpenAI model name (the freeform `custom` tool `apply_patch`,
/// `tool_search`) does not stop the turn from translating: `apply_patch` is offered as a tool
/// taking one string, `tool_search` is dropped, and the function tools still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_with_openai_tools_runs_a_function_call_through_a_chat_only_provider() {
    round_trip(Upstream::Chat, OPENAI_MODEL).await;
}

/// As the chat case, for an Anthropic provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_exec_with_openai_tools_runs_a_function_call_through_an_anthropic_only_provider() {
    round_trip(Upstream::Anthropic, OPENAI_MODEL).await;
}

// === scripted upstream streams ===

fn sse(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A `response` object in state `status` with these output items.
fn response_obj(status: &str, output: &[Value]) -> Value {
    let usage = (status == "completed")
        .then(|| json!({"input_tokens": 40, "output_tokens": 12, "total_tokens": 52}));
    json!({"id": "resp_codex_e2e", "object": "response", "created_at": 1_764_460_800,
        "status": status, "model": OPENAI_MODEL, "output": output, "usage": usage})
}

/// A Responses stream around one output item: `created`, `output_item.added`, the item's own
/// `middle` events, `output_item.done`, `completed` (with sequence numbers).
fn responses_stream(added: &Value, middle: Vec<(&str, Value)>, done: &Value) -> Reply {
    let mut events = vec![
        (
            "response.created",
            json!({"response": response_obj("in_progress", &[])}),
        ),
        (
            "response.output_item.added",
            json!({"output_index": 0, "item": added}),
        ),
    ];
    events.extend(middle);
    events.extend([
        (
            "response.output_item.done",
            json!({"output_index": 0, "item": done}),
        ),
        (
            "response.completed",
            json!({"response": response_obj("completed", std::slice::from_ref(done))}),
        ),
    ]);
    let events: Vec<String> = events
        .into_iter()
        .enumerate()
        .map(|(i, (name, mut data))| {
            data["type"] = json!(name);
            data["sequence_number"] = json!(i);
            sse(name, &data)
        })
        .collect();
    Reply::sse_events(&events)
}

/// A Responses stream whose one item is a `function_call` of `name`, its arguments sent as
/// the deltas `parts`.
fn responses_call_stream(call_id: &str, name: &str, parts: &[&str]) -> Reply {
    let item = |status: &str, args: &str| {
        json!({"id": "fc_codex_e2e", "type": "function_call", "status": status,
            "call_id": call_id, "name": name, "arguments": args})
    };
    let args = parts.concat();
    let mut middle: Vec<(&str, Value)> = parts
        .iter()
        .map(|p| {
            (
                "response.function_call_arguments.delta",
                json!({"item_id": "fc_codex_e2e", "output_index": 0, "delta": p}),
            )
        })
        .collect();
    middle.push((
        "response.function_call_arguments.done",
        json!({"item_id": "fc_codex_e2e", "output_index": 0, "arguments": args}),
    ));
    responses_stream(&item("in_progress", ""), middle, &item("completed", &args))
}

/// A Responses stream whose one item is an assistant message saying `text`.
fn responses_text_stream(text: &str) -> Reply {
    let part = |t: &str| json!({"type": "output_text", "text": t, "annotations": []});
    let item = |status: &str, content: Vec<Value>| {
        json!({"id": "msg_codex_e2e", "type": "message", "status": status,
            "role": "assistant", "content": content})
    };
    let at = json!({"item_id": "msg_codex_e2e", "output_index": 0, "content_index": 0});
    let with = |extra: Value| {
        let mut v = at.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let middle = vec![
        (
            "response.content_part.added",
            with(json!({"part": part("")})),
        ),
        ("response.output_text.delta", with(json!({"delta": text}))),
        ("response.output_text.done", with(json!({"text": text}))),
        (
            "response.content_part.done",
            with(json!({"part": part(text)})),
        ),
    ];
    responses_stream(
        &item("in_progress", vec![]),
        middle,
        &item("completed", vec![part(text)]),
    )
}

/// One chat-completion chunk as a `data:` line.
fn chat_chunk(delta: Value, finish: Option<&str>) -> Bytes {
    let c = json!({"id": "chatcmpl-codex", "object": "chat.completion.chunk", "created": 0,
        "model": "qwen3-coder", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    Bytes::from(format!("data: {c}\n\n"))
}

/// A streamed chat turn calling `name`, its arguments in the fragments `parts`.
fn chat_call_stream(id: &str, name: &str, parts: &[&str]) -> Reply {
    let mut chunks = vec![
        chat_chunk(json!({"role": "assistant", "content": null}), None),
        chat_chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": name, "arguments": ""}}]}),
            None,
        ),
    ];
    chunks.extend(parts.iter().map(|p| {
        chat_chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
            None,
        )
    }));
    chunks.push(chat_chunk(json!({}), Some("tool_calls")));
    chunks.push(Bytes::from_static(b"data: [DONE]\n\n"));
    Reply::sse_chunks(chunks)
}

/// A streamed chat turn answering with `text`.
fn chat_text_stream(text: &str) -> Reply {
    Reply::sse_chunks(vec![
        chat_chunk(json!({"role": "assistant", "content": ""}), None),
        chat_chunk(json!({"content": text}), None),
        chat_chunk(json!({}), Some("stop")),
        Bytes::from_static(b"data: [DONE]\n\n"),
    ])
}

/// The patch the mock asks Codex's freeform `apply_patch` tool to apply.
const PATCH: &str =
    "*** Begin Patch\n*** Add File: sluice-patched.txt\n+sluice-patch-ok\n*** End Patch\n";

/// Codex's freeform `apply_patch` through a translating provider: the model's call of the
/// tool (offered upstream as a tool taking one string) reaches Codex as a `custom_tool_call`,
/// Codex applies the patch to its working directory, and the next turn carries the call and
/// its output back as a tool_use / tool_result (or tool call / tool message) pair.
async fn apply_patch_round_trip(up: Upstream) {
    let codex = tokio::task::spawn_blocking(ensure_codex).await.unwrap();
    let mock = MockUpstream::start().await;
    let args = json!({"input": PATCH}).to_string();
    let (a, b) = args.split_at(20);
    match up {
        Upstream::Anthropic => {
            mock.speak_only_anthropic();
            mock.on("/v1/messages")
                .body_contains("\"tool_result\"")
                .reply(Reply::sse_events(&wire::anthropic_text_events(
                    "claude-sonnet-4-5",
                    FINAL,
                )));
            mock.on("/v1/messages")
                .reply(Reply::sse_events(&wire::anthropic_tool_use_events(
                    "claude-sonnet-4-5",
                    ANTHROPIC_CALL_ID,
                    "apply_patch",
                    &[a, b],
                )));
        }
        Upstream::Chat => {
            mock.speak_only_chat();
            mock.on("/v1/chat/completions")
                .body_contains("\"role\":\"tool\"")
                .reply(chat_text_stream(FINAL));
            mock.on("/v1/chat/completions").reply(chat_call_stream(
                CHAT_CALL_ID,
                "apply_patch",
                &[a, b],
            ));
        }
        Upstream::Responses => unreachable!("passthrough needs no mapping"),
    }
    let s = Sluice::start(&fill(up.config(), &mock), &[]).await;
    let home = codex_home(&s, OPENAI_MODEL);
    let home_path = home.path().to_path_buf();
    let run = tokio::task::spawn_blocking(move || {
        run_codex(
            &codex,
            &home_path,
            &[
                "--dangerously-bypass-approvals-and-sandbox",
                "Add the file.",
            ],
        )
    })
    .await
    .unwrap();
    let seen = mock.requests();
    assert!(
        run.success,
        "codex exec failed: {run:#?}\nupstream saw: {seen:#?}"
    );
    let first = seen.first().map(|r| r.json()).unwrap_or_default();
    let offered = first["tools"].as_array().and_then(|t| {
        t.iter()
            .find(|t| t["name"] == "apply_patch" || t["function"]["name"] == "apply_patch")
            .cloned()
    });
    assert!(
        offered.is_some(),
        "apply_patch is offered upstream: {first:#}"
    );
    let patched = std::fs::read_to_string(home.path().join("sluice-patched.txt"))
        .unwrap_or_else(|e| panic!("Codex did not apply the patch ({e}): {run:#?}"));
    assert_eq!(patched.trim(), "sluice-patch-ok");
    let (call_id, _) = seen
        .iter()
        .find_map(|r| up.tool_output(&r.json()))
        .unwrap_or_else(|| panic!("no tool output reached the mock: {seen:#?}"));
    assert_eq!(call_id, up.call_id());
    assert!(run.stdout.contains(FINAL), "{run:#?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_apply_patch_round_trip_through_an_anthropic_only_provider() {
    apply_patch_round_trip(Upstream::Anthropic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_apply_patch_round_trip_through_a_chat_only_provider() {
    apply_patch_round_trip(Upstream::Chat).await;
}
