//! Every answer an OpenAI client gets from a translation is valid by OpenAI's published
//! schema: non-streaming bodies (`Response`, `CreateChatCompletionResponse`) and every stream
//! event (each Responses event by the schema its `type` names, each chat chunk as
//! `CreateChatCompletionStreamResponse`, a chat stream's error as `ErrorResponse`), in every
//! direction that ends at an OpenAI client: Anthropic → Responses, Anthropic → Chat and Chat →
//! Responses, with text, tool calls, thinking, `max_tokens` stops, refusals and upstream
//! errors.
//!
//! The schemas are `tests/fixtures/openai-schema/openai-answers.schema.json`, extracted from
//! OpenAI's OpenAPI spec by `scripts/extract-openai-schemas.py` (see the README beside it) and
//! compiled into the test binary. [`the_validator_rejects_broken_answers`] keeps the check
//! honest: a body missing a required field must fail it.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

use jsonschema::Validator;
use serde_json::{Value, json};

use super::golden::{stream_cases, stream_input};
use super::{client, context, dialect, fixture_dir};
use crate::config::Dialect;
use crate::translate::{
    ClientFormat, ResponseContext, StreamTranslator, TargetOptions, translate_request,
    translate_response,
};

const SCHEMA: &str =
    include_str!("../../../tests/fixtures/openai-schema/openai-answers.schema.json");

static DOC: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(SCHEMA).expect("the extracted schema is JSON"));

/// Compiled validators by component name (compiling one takes a while; tests share them).
static VALIDATORS: LazyLock<Mutex<HashMap<String, Arc<Validator>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The validator of component schema `name` (a key of the document's `$defs`).
fn validator(name: &str) -> Arc<Validator> {
    if let Some(v) = VALIDATORS.lock().unwrap().get(name) {
        return v.clone();
    }
    assert!(DOC["$defs"].get(name).is_some(), "no schema {name}");
    let schema = json!({"$schema": DOC["$schema"], "$ref": format!("#/$defs/{name}"),
                        "$defs": DOC["$defs"]});
    let v = Arc::new(jsonschema::draft202012::new(&schema).expect("the schema compiles"));
    VALIDATORS.lock().unwrap().insert(name.into(), v.clone());
    v
}

/// The schema errors of `body` against component `name`, one line each (empty: valid).
fn errors(name: &str, body: &Value) -> Vec<String> {
    validator(name)
        .iter_errors(body)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

fn assert_valid(name: &str, body: &Value, what: &str) {
    let errs = errors(name, body);
    assert!(
        errs.is_empty(),
        "{what}: invalid {name}:\n  {}\n{body:#}",
        errs.join("\n  ")
    );
}

/// The schema of a Responses stream event `type` (every event the spec lists).
fn event_schema(kind: &str) -> Option<&'static str> {
    DOC["x-sluice-events"].get(kind).and_then(Value::as_str)
}

/// Validates every event of a client stream in `client`'s format; returns how many.
fn assert_stream_valid(client: ClientFormat, sse: &[u8], what: &str) -> usize {
    let text = std::str::from_utf8(sse).expect("client SSE is UTF-8");
    let mut n = 0;
    for frame in text.split("\n\n").filter(|f| !f.trim().is_empty()) {
        let mut name = None;
        let mut data = String::new();
        for line in frame.lines() {
            if let Some(v) = line.strip_prefix("event: ") {
                name = Some(v);
            } else if let Some(v) = line.strip_prefix("data: ") {
                data.push_str(v);
            } else {
                panic!("{what}: unexpected SSE line {line:?}");
            }
        }
        let what = format!("{what}, event {n} ({})", name.unwrap_or("data"));
        n += 1;
        if client == ClientFormat::Chat && data == "[DONE]" {
            continue;
        }
        let body: Value = serde_json::from_str(&data).expect("event data is JSON");
        match client {
            ClientFormat::Chat => {
                assert!(name.is_none(), "{what}: chat events are unnamed");
                let schema = if body.get("error").is_some() {
                    "ErrorResponse"
                } else {
                    "CreateChatCompletionStreamResponse"
                };
                assert_valid(schema, &body, &what);
            }
            ClientFormat::Responses => {
                let kind = body["type"].as_str().unwrap_or_default();
                assert_eq!(name, Some(kind), "{what}: event name and type differ");
                let schema = event_schema(kind)
                    .unwrap_or_else(|| panic!("{what}: {kind:?} is no Responses event"));
                assert_valid(schema, &body, &what);
            }
            ClientFormat::Anthropic => unreachable!("not an OpenAI client"),
        }
    }
    assert!(n > 0, "{what}: no events");
    n
}

/// The schema of a non-streaming answer for `client`.
fn answer_schema(client: ClientFormat) -> &'static str {
    match client {
        ClientFormat::Chat => "CreateChatCompletionResponse",
        ClientFormat::Responses => "Response",
        ClientFormat::Anthropic => unreachable!("not an OpenAI client"),
    }
}

fn translate_ok(upstream: Dialect, body: &Value, ctx: &ResponseContext) -> Value {
    let out = translate_response(upstream, body.to_string().as_bytes(), ctx)
        .unwrap_or_else(|e| panic!("{body}: {e}"));
    serde_json::from_slice(&out).expect("the answer is JSON")
}

fn stream(upstream: Dialect, ctx: &ResponseContext, input: &[u8]) -> Vec<u8> {
    let mut t = StreamTranslator::new(upstream, ctx).expect("a translated stream");
    let mut out = t.feed(input).to_vec();
    out.extend_from_slice(&t.finish());
    out
}

/// A Codex-like Responses request: instructions, function tools (one without `strict` or
/// `description`), a built-in tool, `tool_choice`, `parallel_tool_calls`, sampling and
/// metadata; `reasoning` adds a thinking request (and drops the sampling fields).
fn responses_request(reasoning: bool) -> Value {
    let mut r = json!({"model": "codex-model", "instructions": "be terse", "input": "hi",
        "tools": [{"type": "function", "name": "shell", "description": "run a command",
                   "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}},
                   "strict": false},
                  {"type": "function", "name": "noop"},
                  {"type": "custom", "name": "apply_patch", "description": "edit files",
                   "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
                  {"type": "web_search"}],
        "tool_choice": "required", "parallel_tool_calls": false, "temperature": 0.5,
        "top_p": 0.9, "metadata": {"ticket": "42"}, "store": false});
    if reasoning {
        r["reasoning"] = json!({"effort": "medium", "summary": "auto"});
    }
    r
}

/// Contexts from real requests through the request seam: `(label, upstream, context)`, the
/// label starting with `chat`, `responses`, `reasoning` (a Responses request asking for
/// reasoning) or `bare` (a Responses request with nothing to echo).
fn seam_contexts() -> Vec<(String, Dialect, ResponseContext)> {
    let mut out = Vec::new();
    let chat = json!({"model": "chat-model", "messages": [{"role": "user", "content": "hi"}],
                      "stream": true, "stream_options": {"include_usage": true},
                      "reasoning_effort": "medium"});
    let opts = TargetOptions {
        reasoning_effort: true,
        ..Default::default()
    };
    let bodies = [
        ("chat", ClientFormat::Chat, chat, Dialect::Anthropic),
        (
            "responses",
            ClientFormat::Responses,
            responses_request(false),
            Dialect::Anthropic,
        ),
        (
            "reasoning",
            ClientFormat::Responses,
            responses_request(true),
            Dialect::Anthropic,
        ),
        (
            "responses",
            ClientFormat::Responses,
            responses_request(false),
            Dialect::OpenAi,
        ),
        (
            "reasoning",
            ClientFormat::Responses,
            responses_request(true),
            Dialect::OpenAi,
        ),
        (
            "bare",
            ClientFormat::Responses,
            json!({"model": "m", "input": "hi"}),
            Dialect::Anthropic,
        ),
    ];
    for (label, fmt, body, up) in bodies {
        let t = translate_request(fmt, up, body.to_string().as_bytes(), "up", &opts)
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        let mut ctx = t.context;
        ctx.created = 1_764_460_800;
        out.push((format!("{label} request to {up:?}"), up, ctx));
    }
    out
}

/// Anthropic messages covering every block kind and stop reason.
fn anthropic_messages() -> Vec<Value> {
    let usage = json!({"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 3,
                       "cache_creation_input_tokens": 2});
    let msg = |content: Value, stop: &str| {
        json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
               "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage})
    };
    vec![
        msg(json!([{"type": "text", "text": "Hello."}]), "end_turn"),
        msg(
            json!([{"type": "thinking", "thinking": "Let me see.", "signature": "sig"},
                   {"type": "text", "text": "Running it."},
                   {"type": "tool_use", "id": "toolu_1", "name": "shell", "input": {"cmd": "ls"}},
                   {"type": "tool_use", "id": "toolu_2", "name": "noop", "input": {}},
                   {"type": "tool_use", "id": "toolu_3", "name": "apply_patch",
                    "input": {"input": "*** Begin Patch"}}]),
            "tool_use",
        ),
        msg(json!([{"type": "text", "text": "Cut"}]), "max_tokens"),
        msg(json!([{"type": "text", "text": "No."}]), "refusal"),
        msg(json!([{"type": "text", "text": "a"}]), "stop_sequence"),
        msg(json!([]), "end_turn"),
        json!({"id": "msg_2", "type": "message", "role": "assistant", "content": [],
               "stop_reason": null}),
    ]
}

/// Chat completions covering text, tool calls, reasoning and a length stop.
fn chat_completions() -> Vec<Value> {
    let c = |message: Value, finish: &str| {
        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-x",
               "choices": [{"index": 0, "message": message, "finish_reason": finish}],
               "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16,
                         "prompt_tokens_details": {"cached_tokens": 8}}})
    };
    vec![
        c(json!({"role": "assistant", "content": "Hello."}), "stop"),
        c(
            json!({"role": "assistant", "content": null, "reasoning_content": "Think.",
                   "tool_calls": [{"id": "call_1", "type": "function",
                                   "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}},
                                  {"id": "call_2", "type": "function",
                                   "function": {"name": "noop", "arguments": "not json"}}]}),
            "tool_calls",
        ),
        c(json!({"role": "assistant", "content": "Cut"}), "length"),
        c(
            json!({"role": "assistant", "content": null, "refusal": "No."}),
            "content_filter",
        ),
        json!({"id": "x", "choices": [{"index": 0, "message": {"content": "bare"}}]}),
    ]
}

/// Anthropic SSE for one message: text, thinking, tool calls, then `stop`.
fn anthropic_sse(thinking: bool, tools: bool, stop: &str) -> Vec<u8> {
    let mut evs = vec![
        json!({"type": "message_start", "message": {"id": "msg_s", "type": "message",
        "role": "assistant", "model": "claude-x", "content": [], "stop_reason": null,
        "usage": {"input_tokens": 9, "output_tokens": 1, "cache_read_input_tokens": 4}}}),
    ];
    let mut i = 0;
    if thinking {
        evs.push(json!({"type": "content_block_start", "index": i,
                        "content_block": {"type": "thinking", "thinking": ""}}));
        evs.push(json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "thinking_delta", "thinking": "Hmm."}}));
        evs.push(json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "signature_delta", "signature": "sig"}}));
        evs.push(json!({"type": "content_block_stop", "index": i}));
        i += 1;
    }
    evs.push(json!({"type": "content_block_start", "index": i,
                    "content_block": {"type": "text", "text": ""}}));
    for t in ["Hel", "lo."] {
        evs.push(json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "text_delta", "text": t}}));
    }
    evs.push(json!({"type": "content_block_stop", "index": i}));
    if tools {
        for (id, name, args) in [
            ("toolu_1", "shell", "{\"cmd\":\"ls\"}"),
            ("toolu_2", "noop", ""),
            ("toolu_3", "apply_patch", "{\"input\":\"*** Begin Patch\"}"),
        ] {
            i += 1;
            evs.push(json!({"type": "content_block_start", "index": i,
                            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
            evs.push(json!({"type": "content_block_delta", "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": args}}));
            evs.push(json!({"type": "content_block_stop", "index": i}));
        }
    }
    evs.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": 7}}),
    );
    evs.push(json!({"type": "message_stop"}));
    let mut out = Vec::new();
    for e in evs {
        let name = e["type"].as_str().unwrap_or_default().to_string();
        out.extend_from_slice(format!("event: {name}\ndata: {e}\n\n").as_bytes());
    }
    out
}

/// Chat SSE: reasoning, text, two tool calls, `finish`, a usage chunk, `[DONE]`.
fn chat_sse(finish: &str) -> Vec<u8> {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1,
               "model": "gpt-x", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let chunks = [
        chunk(json!({"role": "assistant", "content": ""}), Value::Null),
        chunk(json!({"reasoning_content": "Think."}), Value::Null),
        chunk(json!({"content": "Hel"}), Value::Null),
        chunk(json!({"content": "lo."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                                   "function": {"name": "shell", "arguments": "{\"cmd\""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": ":\"ls\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "call_2", "type": "function",
                                   "function": {"name": "noop", "arguments": "{}"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!(finish)),
        json!({"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": 1,
               "model": "gpt-x", "choices": [],
               "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16}}),
    ];
    let mut out = Vec::new();
    for c in chunks {
        out.extend_from_slice(format!("data: {c}\n\n").as_bytes());
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    out
}

#[test]
fn non_streaming_answers_are_valid() {
    let mut checked = 0;
    for (label, up, ctx) in seam_contexts() {
        let bodies = match up {
            Dialect::Anthropic => anthropic_messages(),
            Dialect::OpenAi => chat_completions(),
        };
        for body in bodies {
            let answer = translate_ok(up, &body, &ctx);
            assert_valid(
                answer_schema(ctx.client),
                &answer,
                &format!("{label}, upstream {body}"),
            );
            checked += 1;
        }
        // Without the request seam (a bare context): the safe defaults are valid too.
        let bare = ResponseContext {
            client: ctx.client,
            thinking: true,
            ..Default::default()
        };
        for body in match up {
            Dialect::Anthropic => anthropic_messages(),
            Dialect::OpenAi => chat_completions(),
        } {
            let answer = translate_ok(up, &body, &bare);
            assert_valid(
                answer_schema(bare.client),
                &answer,
                &format!("bare context, {body}"),
            );
        }
    }
    assert!(checked >= 30);
}

#[test]
fn stream_events_are_valid() {
    let mut inputs = Vec::new();
    for (thinking, tools, stop) in [
        (false, false, "end_turn"),
        (true, true, "tool_use"),
        (true, false, "max_tokens"),
        (false, false, "refusal"),
        (false, true, "max_tokens"),
    ] {
        let name = format!("anthropic thinking={thinking} tools={tools} {stop}");
        inputs.push((
            name,
            Dialect::Anthropic,
            anthropic_sse(thinking, tools, stop),
        ));
    }
    let overloaded = br#"event: error
data: {"type":"error","error":{"type":"overloaded_error","message":"busy"}}

"#;
    inputs.push((
        "anthropic overloaded".into(),
        Dialect::Anthropic,
        overloaded.to_vec(),
    ));
    let mut cut = anthropic_sse(false, true, "end_turn");
    cut.truncate(cut.len() / 2);
    inputs.push(("anthropic cut".into(), Dialect::Anthropic, cut));
    for finish in ["stop", "tool_calls", "length", "content_filter"] {
        inputs.push((format!("chat {finish}"), Dialect::OpenAi, chat_sse(finish)));
    }
    let mut cut = chat_sse("stop");
    cut.truncate(cut.len() / 2);
    inputs.push(("chat cut".into(), Dialect::OpenAi, cut));
    let mut events = 0;
    for (label, up, ctx) in seam_contexts() {
        for (name, _, input) in inputs.iter().filter(|(_, d, _)| *d == up) {
            let what = format!("{label}, upstream {name}");
            events += assert_stream_valid(ctx.client, &stream(up, &ctx, input), &what);
        }
    }
    assert!(events > 300, "{events} events");
}

/// The golden rows (tests/fixtures/translation) that end at an OpenAI client, each with the
/// row's own context and with a context from a real Responses request.
#[test]
fn golden_rows_are_valid() {
    let rich = seam_contexts()
        .into_iter()
        .find(|(_, up, c)| *up == Dialect::Anthropic && c.client == ClientFormat::Responses)
        .map(|(_, _, c)| c)
        .expect("a Responses context");
    for file in [
        "anthropic_to_chat",
        "anthropic_to_responses",
        "openai_to_responses",
    ] {
        let path = fixture_dir("responses").join(format!("{file}.json"));
        let cases: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let (from, to) = file.split_once("_to_").unwrap();
        for case in &cases {
            let body = case["input"].to_string();
            let mut ctxs = vec![context(client(to), case.get("context"))];
            if to == "responses" {
                ctxs.push(ResponseContext {
                    thinking: ctxs[0].thinking,
                    ..rich.clone()
                });
            }
            for ctx in ctxs {
                let Ok(out) = translate_response(dialect(from), body.as_bytes(), &ctx) else {
                    continue; // an error row: answered as an error, not a body
                };
                let answer: Value = serde_json::from_slice(&out).unwrap();
                assert_valid(
                    answer_schema(ctx.client),
                    &answer,
                    &format!("{file} / {}", case["row"]),
                );
            }
        }
    }
    for case in stream_cases() {
        let to = client(case["client"].as_str().unwrap());
        if to == ClientFormat::Anthropic {
            continue;
        }
        let mut ctx = context(to, case.get("context"));
        let input = stream_input(&case);
        let up = dialect(case["upstream"].as_str().unwrap());
        assert_stream_valid(to, &stream(up, &ctx, &input), &case["input"].to_string());
        if to == ClientFormat::Responses {
            ctx = ResponseContext {
                thinking: ctx.thinking,
                ..rich.clone()
            };
            assert_stream_valid(to, &stream(up, &ctx, &input), &case["input"].to_string());
        }
    }
}

/// The request's values come back in the `response` object; without them, safe defaults.
#[test]
fn the_response_object_echoes_the_request() {
    let ctxs = seam_contexts();
    let body = anthropic_messages().remove(0);
    let by_label = |label: &str, up: Dialect| {
        ctxs.iter()
            .find(|(l, d, _)| *d == up && l.starts_with(label))
            .map(|(_, _, c)| c.clone())
            .unwrap()
    };
    for (label, up) in [
        ("responses", Dialect::Anthropic),
        ("reasoning", Dialect::Anthropic),
        ("responses", Dialect::OpenAi),
        ("reasoning", Dialect::OpenAi),
    ] {
        let ctx = by_label(label, up);
        assert_eq!(ctx.thinking, label == "reasoning");
        let r = translate_ok(Dialect::Anthropic, &body, &ctx);
        assert_eq!(r["instructions"], "be terse");
        assert_eq!(r["tool_choice"], "required");
        assert_eq!(r["parallel_tool_calls"], false);
        assert_eq!(r["metadata"], json!({"ticket": "42"}));
        assert_eq!(
            r["tools"].as_array().unwrap().len(),
            3,
            "built-in tools are not echoed"
        );
        assert_eq!(r["tools"][2]["type"], "custom");
        assert_eq!(r["tools"][0]["name"], "shell");
        assert_eq!(r["tools"][0]["strict"], false);
        assert_eq!(
            r["tools"][1],
            json!({"type": "function", "name": "noop",
            "description": null, "parameters": null, "strict": null})
        );
        if ctx.thinking && up == Dialect::Anthropic {
            assert_eq!(r["temperature"], Value::Null, "dropped for thinking: {r}");
        } else {
            assert_eq!(r["temperature"], 0.5);
            assert_eq!(r["top_p"], 0.9);
        }
    }
    let bare = by_label("bare", Dialect::Anthropic);
    let r = translate_ok(Dialect::Anthropic, &body, &bare);
    for (k, want) in [
        ("tools", json!([])),
        ("tool_choice", json!("auto")),
        ("parallel_tool_calls", json!(true)),
        ("instructions", Value::Null),
        ("metadata", Value::Null),
        ("temperature", Value::Null),
        ("top_p", Value::Null),
    ] {
        assert_eq!(r[k], want, "{k}: {r}");
    }
    assert_eq!(
        r["usage"]["input_tokens"], 15,
        "input + cache read + cache write"
    );
    assert_eq!(
        r["usage"]["input_tokens_details"],
        json!({"cached_tokens": 3, "cache_write_tokens": 2})
    );
}

/// The validator is live: bodies missing what the schema requires (the shapes sluice sent
/// before these fields were added) are rejected, naming the field.
#[test]
fn the_validator_rejects_broken_answers() {
    let (_, _, ctx) = seam_contexts().remove(1);
    let good = translate_ok(Dialect::Anthropic, &anthropic_messages()[1], &ctx);
    assert_valid("Response", &good, "the unbroken response");
    let remove = |v: &mut Value, k: &str| {
        v.as_object_mut().unwrap().remove(k);
    };
    let broken = |edit: &dyn Fn(&mut Value)| {
        let mut v = good.clone();
        edit(&mut v);
        v
    };
    let cases: Vec<(&str, Value, &str)> = vec![
        ("Response", broken(&|v| remove(v, "tools")), "tools"),
        ("Response", broken(&|v| remove(v, "top_p")), "top_p"),
        ("Response", broken(&|v| v["usage"] = Value::Null), "null"),
        (
            "Response",
            broken(&|v| {
                remove(
                    &mut v["usage"]["input_tokens_details"],
                    "cache_write_tokens",
                )
            }),
            "cache_write_tokens",
        ),
        (
            "Response",
            broken(&|v| v["error"] = json!({"code": "server_is_overloaded", "message": "busy"})),
            "server_is_overloaded",
        ),
        (
            "ResponseContentPartAddedEvent",
            json!({"type": "response.content_part.added", "sequence_number": 3, "item_id": "m",
                   "output_index": 0, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": []}}),
            "",
        ),
        (
            "ResponseTextDeltaEvent",
            json!({"type": "response.output_text.delta", "sequence_number": 4, "item_id": "m",
                   "output_index": 0, "content_index": 0, "delta": "x"}),
            "logprobs",
        ),
        (
            "ResponseFunctionCallArgumentsDoneEvent",
            json!({"type": "response.function_call_arguments.done", "sequence_number": 5,
                   "item_id": "fc", "output_index": 1, "arguments": "{}"}),
            "name",
        ),
        (
            "CreateChatCompletionResponse",
            json!({"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                   "choices": [{"index": 0, "logprobs": null, "finish_reason": "stop",
                                "message": {"role": "assistant", "content": "hi"}}]}),
            "refusal",
        ),
        (
            "CreateChatCompletionStreamResponse",
            json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "bogus"}]}),
            "",
        ),
    ];
    for (schema, body, field) in cases {
        let errs = errors(schema, &body);
        assert!(!errs.is_empty(), "{schema} accepted a broken body: {body}");
        assert!(
            errs.iter().any(|e| e.contains(field)),
            "{schema}: no error names {field:?}: {errs:?}"
        );
    }
    // `nullable: true` is read as "or null" (the real API's own chunks carry it).
    assert_valid(
        "CreateChatCompletionStreamResponse",
        &json!({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                "choices": [{"index": 0, "delta": {}, "logprobs": null, "finish_reason": null}]}),
        "a chunk with null finish_reason",
    );
    assert_eq!(
        event_schema("response.created"),
        Some("ResponseCreatedEvent")
    );
    assert_eq!(event_schema("response.bogus"), None);
}

#[test]
fn freeform_tool_calls_come_back_as_custom_tool_call_items() {
    let t = translate_request(
        ClientFormat::Responses,
        Dialect::Anthropic,
        responses_request(false).to_string().as_bytes(),
        "up",
        &TargetOptions::default(),
    )
    .unwrap();
    let sent: Value = serde_json::from_slice(&t.body).unwrap();
    let offered = sent["tools"]
        .as_array()
        .and_then(|a| a.iter().find(|x| x["name"] == "apply_patch"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        offered["input_schema"]["required"],
        json!(["input"]),
        "{sent:#}"
    );
    assert!(
        offered["input_schema"]["properties"]["input"]["description"]
            .as_str()
            .is_some_and(|d| d.contains("lark") && d.contains("start: /.+/")),
        "the grammar is quoted for the model: {offered:#}"
    );
    let ctx = t.context;
    let msg = json!({"id": "msg_c", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [{"type": "tool_use", "id": "toolu_9", "name": "apply_patch",
                     "input": {"input": "*** Begin Patch\n*** End Patch"}}],
        "stop_reason": "tool_use", "usage": {"input_tokens": 3, "output_tokens": 4}});
    let answer = translate_ok(Dialect::Anthropic, &msg, &ctx);
    assert_valid("Response", &answer, "custom tool call");
    let item = &answer["output"][0];
    assert_eq!(item["type"], "custom_tool_call", "{answer:#}");
    assert_eq!(item["input"], "*** Begin Patch\n*** End Patch");
    assert_eq!(item["call_id"], "toolu_9");

    let sse = stream(
        Dialect::Anthropic,
        &ctx,
        &anthropic_sse(false, true, "tool_use"),
    );
    assert_stream_valid(ClientFormat::Responses, &sse, "custom tool stream");
    let text = String::from_utf8(sse).unwrap();
    assert!(
        text.contains("event: response.custom_tool_call_input.done")
            && text.contains("\"input\":\"*** Begin Patch\""),
        "{text}"
    );

    // The next turn carries the call and its output back: a tool_use / tool_result pair.
    let next = json!({"model": "m", "input": [
        {"type": "custom_tool_call", "call_id": "toolu_9", "name": "apply_patch", "input": "*** Begin Patch"},
        {"type": "custom_tool_call_output", "call_id": "toolu_9", "output": "Done!"}
    ], "tools": [{"type": "custom", "name": "apply_patch"}]});
    let t = translate_request(
        ClientFormat::Responses,
        Dialect::Anthropic,
        next.to_string().as_bytes(),
        "up",
        &TargetOptions::default(),
    )
    .unwrap();
    let sent: Value = serde_json::from_slice(&t.body).unwrap();
    assert_eq!(
        sent["messages"][0]["content"][0]["input"],
        json!({"input": "*** Begin Patch"})
    );
    assert_eq!(sent["messages"][1]["content"][0]["tool_use_id"], "toolu_9");
}
