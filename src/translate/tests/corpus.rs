//! The request corpus: request bodies shaped like what real clients, SDK examples and other
//! gateways' test suites send (`tests/fixtures/translation/corpus/{anthropic,chat,responses}.json`,
//! each body naming where its shape came from), translated in every dialect pair it meets
//! (Anthropic client → `openai`; Chat client → `anthropic`; Responses client → `anthropic` and
//! `openai`), streaming and not, with the default [`TargetOptions`] and with a variant
//! (`reasoning_effort`, `max_output_tokens: 4096`, `max_completion_tokens`).
//!
//! Each translation either fails with a [`TranslateError`] naming the field the corpus marks
//! `"refused"`, or yields a body the upstream accepts:
//!
//! - valid by the upstream's schema: OpenAI's `CreateChatCompletionRequest` (extracted by
//!   `scripts/extract-openai-schemas.py`, see `tests/fixtures/openai-schema/README.md`) or the
//!   hand-written Anthropic Messages request schema
//!   (`tests/fixtures/anthropic-schema/README.md`);
//! - no top-level field the Chat schema does not list (it allows any, the API does not);
//! - no JSON `null` at a top-level field or in a `tools[]` entry;
//! - the API's rules that a schema cannot express (tool results answering the calls just
//!   before them, a thinking budget below `max_tokens`, `tool_choice` naming an offered tool,
//!   …), from [`chat_rules`] and [`anthropic_rules`];
//! - with the variant's options, an output limit of at most 4096, sent as
//!   `max_completion_tokens` to an OpenAI upstream.
//!
//! The corpus bodies themselves are checked against their own format's schema (`CreateResponse`
//! for Responses bodies): a body that a real client sends although its published schema does
//! not allow it says why in `"off_spec"`, and must then fail that schema, so the marks stay
//! honest. [`the_checks_reject_broken_requests`] keeps every check live.

use std::collections::{BTreeSet, HashSet};
use std::sync::LazyLock;

use jsonschema::Validator;
use serde_json::{Value, json};

use super::fixture_dir;
use crate::config::Dialect;
use crate::translate::{ClientFormat, TargetOptions, TranslatedRequest, translate_request};

const OPENAI_SCHEMA: &str =
    include_str!("../../../tests/fixtures/openai-schema/openai-answers.schema.json");
const ANTHROPIC_SCHEMA: &str =
    include_str!("../../../tests/fixtures/anthropic-schema/messages-request.schema.json");

static OPENAI_DOC: LazyLock<Value> =
    LazyLock::new(|| serde_json::from_str(OPENAI_SCHEMA).expect("the extracted schema is JSON"));

/// The validator of component schema `name` of `defs` (the extracted OpenAI `$defs`).
fn openai_validator(defs: &Value, name: &str) -> Validator {
    assert!(defs.get(name).is_some(), "no schema {name}");
    let schema = json!({"$schema": OPENAI_DOC["$schema"], "$ref": format!("#/$defs/{name}"),
                        "$defs": defs});
    jsonschema::draft202012::new(&schema).expect("the OpenAI schema compiles")
}

/// `v` with every `oneOf` read as `anyOf`.
fn one_of_as_any_of(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| {
                    let k = if k == "oneOf" { "anyOf" } else { k.as_str() };
                    (k.to_string(), one_of_as_any_of(x))
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(one_of_as_any_of).collect()),
        other => other.clone(),
    }
}

static CHAT_REQUEST: LazyLock<Validator> =
    LazyLock::new(|| openai_validator(&OPENAI_DOC["$defs"], "CreateChatCompletionRequest"));
/// `CreateResponse`, with the spec's `oneOf`s read as `anyOf` (as the SDKs generated from it
/// read them): its input item union lists both `EasyInputMessage` and `InputMessage`, which
/// overlap, so under a strict `oneOf` no message item at all would be valid.
static RESPONSES_REQUEST: LazyLock<Validator> =
    LazyLock::new(|| openai_validator(&one_of_as_any_of(&OPENAI_DOC["$defs"]), "CreateResponse"));
static ANTHROPIC_REQUEST: LazyLock<Validator> = LazyLock::new(|| {
    let schema: Value =
        serde_json::from_str(ANTHROPIC_SCHEMA).expect("the Anthropic schema is JSON");
    jsonschema::draft202012::new(&schema).expect("the Anthropic schema compiles")
});

/// The top-level fields `CreateChatCompletionRequest` lists (through its `allOf` / `$ref`s).
static CHAT_FIELDS: LazyLock<BTreeSet<String>> = LazyLock::new(|| {
    fn collect(schema: &Value, out: &mut BTreeSet<String>) {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            let name = r.trim_start_matches("#/$defs/");
            collect(&OPENAI_DOC["$defs"][name], out);
        }
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            out.extend(props.keys().cloned());
        }
        for part in schema
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            collect(part, out);
        }
    }
    let mut out = BTreeSet::new();
    collect(
        &OPENAI_DOC["$defs"]["CreateChatCompletionRequest"],
        &mut out,
    );
    out
});

/// The schema errors of `body`, one line each (empty: valid).
fn schema_errors(v: &Validator, body: &Value) -> Vec<String> {
    v.iter_errors(body)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect()
}

/// One corpus entry.
struct Case {
    /// `anthropic.json[3]`.
    label: String,
    format: ClientFormat,
    source: String,
    body: Value,
    /// The field a translation must refuse, naming it.
    refused: Option<String>,
    /// Why a real client's body fails its own format's published schema.
    off_spec: Option<String>,
}

/// Every corpus entry, from the three files.
fn corpus() -> Vec<Case> {
    let mut out = Vec::new();
    for (file, format) in [
        ("anthropic", ClientFormat::Anthropic),
        ("chat", ClientFormat::Chat),
        ("responses", ClientFormat::Responses),
    ] {
        let path = fixture_dir("corpus").join(format!("{file}.json"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let entries: Vec<Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        for (i, e) in entries.into_iter().enumerate() {
            let label = format!("{file}.json[{i}]");
            let text = |k: &str| e.get(k).and_then(Value::as_str).map(String::from);
            if let Some(k) = e.as_object().and_then(|o| {
                o.keys()
                    .find(|k| !matches!(k.as_str(), "source" | "body" | "refused" | "off_spec"))
            }) {
                panic!("{label}: unknown key {k:?}");
            }
            out.push(Case {
                format,
                source: text("source").unwrap_or_else(|| panic!("{label}: no source")),
                refused: text("refused"),
                off_spec: text("off_spec"),
                body: e
                    .get("body")
                    .cloned()
                    .unwrap_or_else(|| panic!("{label}: no body")),
                label,
            });
        }
    }
    out
}

/// The upstream dialects a client format is translated to.
fn upstreams(format: ClientFormat) -> &'static [Dialect] {
    match format {
        ClientFormat::Anthropic => &[Dialect::OpenAi],
        ClientFormat::Chat => &[Dialect::Anthropic],
        ClientFormat::Responses => &[Dialect::Anthropic, Dialect::OpenAi],
    }
}

/// The variant's output cap.
const CAP: u64 = 4096;

/// The options each body is translated with: the defaults, and a variant.
fn option_sets() -> [(&'static str, TargetOptions); 2] {
    [
        ("default options", TargetOptions::default()),
        (
            "variant options",
            TargetOptions {
                reasoning_effort: true,
                max_output_tokens: Some(CAP as u32),
                max_completion_tokens: true,
                ..Default::default()
            },
        ),
    ]
}

/// `body` streaming (`stream: true`) and not (no `stream`, no `stream_options`).
fn stream_variants(body: &Value) -> [(bool, Value); 2] {
    let mut on = body.clone();
    on["stream"] = Value::Bool(true);
    let mut off = body.clone();
    if let Some(o) = off.as_object_mut() {
        o.remove("stream");
        o.remove("stream_options");
    }
    [(true, on), (false, off)]
}

/// `null` at a top-level field or in a `tools[]` entry (and a Chat tool's `function`).
fn nulls(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let null_keys = |v: &Value, at: &str, out: &mut Vec<String>| {
        for (k, x) in v.as_object().into_iter().flatten() {
            if x.is_null() {
                out.push(format!("null at {at}{k}"));
            }
        }
    };
    null_keys(body, "", &mut out);
    for (i, t) in arr(body, "tools").iter().enumerate() {
        null_keys(t, &format!("tools[{i}]."), &mut out);
        if let Some(f) = t.get("function") {
            null_keys(f, &format!("tools[{i}].function."), &mut out);
        }
    }
    out
}

fn arr<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn st<'a>(v: &'a Value, k: &str) -> &'a str {
    v.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// A tool name as OpenAI documents it (and Anthropic's schema requires it).
fn valid_tool_name(n: &str) -> bool {
    (1..=64).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Offered tool names, with a problem for each duplicate.
fn tool_names(names: impl Iterator<Item = String>, out: &mut Vec<String>) -> HashSet<String> {
    let mut seen = HashSet::new();
    for n in names {
        if !seen.insert(n.clone()) {
            out.push(format!("tool name {n:?} offered twice"));
        }
    }
    seen
}

/// The Chat Completions API's rules beyond its schema (each stated in the API reference's
/// field descriptions or returned as a 400 by the API).
fn chat_rules(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let tools = arr(body, "tools");
    let names = tool_names(
        tools.iter().map(|t| st(&t["function"], "name").to_string()),
        &mut out,
    );
    for n in names.iter().filter(|n| !valid_tool_name(n)) {
        out.push(format!(
            "tool name {n:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$"
        ));
    }
    for k in ["tool_choice", "parallel_tool_calls"] {
        if body.get(k).is_some() && tools.is_empty() {
            out.push(format!("{k} without tools"));
        }
    }
    if let Some(n) = body
        .get("tool_choice")
        .and_then(|c| c.get("function"))
        .map(|f| st(f, "name"))
        .filter(|n| !names.contains(*n))
    {
        out.push(format!("tool_choice names {n:?}, which is not offered"));
    }
    if body.get("stream_options").is_some() && body.get("stream") != Some(&Value::Bool(true)) {
        out.push("stream_options without stream: true".into());
    }
    if body.get("max_tokens").is_some() && body.get("max_completion_tokens").is_some() {
        out.push("both max_tokens and max_completion_tokens".into());
    }
    // Tool calls answered by tool messages right after them, each id once.
    let mut pending: Vec<String> = Vec::new();
    for (i, m) in arr(body, "messages").iter().enumerate() {
        let role = st(m, "role");
        if role != "tool" && !pending.is_empty() {
            out.push(format!(
                "messages[{i}]: tool calls {pending:?} are not answered"
            ));
            pending.clear();
        }
        match role {
            "assistant" => {
                let calls = arr(m, "tool_calls");
                if m.get("content").is_none_or(Value::is_null) && calls.is_empty() {
                    out.push(format!(
                        "messages[{i}]: assistant message with neither content nor tool_calls"
                    ));
                }
                for c in calls {
                    let n = st(&c["function"], "name");
                    if !valid_tool_name(n) {
                        out.push(format!("messages[{i}]: tool call name {n:?} is invalid"));
                    }
                    pending.push(st(c, "id").to_string());
                }
            }
            "tool" => {
                let id = st(m, "tool_call_id");
                match pending.iter().position(|p| p == id) {
                    Some(k) => {
                        pending.remove(k);
                    }
                    None => out.push(format!(
                        "messages[{i}]: tool message for {id:?} does not answer a call just before it"
                    )),
                }
            }
            _ => {}
        }
    }
    out
}

/// The Anthropic Messages API's rules beyond the schema (from the tool-use and extended
/// thinking docs, and the API's own 400 messages).
fn anthropic_rules(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let names = tool_names(
        arr(body, "tools").iter().map(|t| st(t, "name").to_string()),
        &mut out,
    );
    if let Some(c) = body.get("tool_choice") {
        if st(c, "type") == "tool" && !names.contains(st(c, "name")) {
            out.push(format!(
                "tool_choice names {:?}, which is not offered",
                st(c, "name")
            ));
        }
    }
    let max = body.get("max_tokens").and_then(Value::as_u64).unwrap_or(0);
    if let Some(b) = body
        .get("thinking")
        .and_then(|t| t.get("budget_tokens"))
        .and_then(Value::as_u64)
    {
        if b >= max {
            out.push(format!(
                "thinking.budget_tokens {b} is not below max_tokens {max}"
            ));
        }
    }
    let messages = arr(body, "messages");
    let blocks = |m: &Value| arr(m, "content").to_vec();
    for (i, m) in messages.iter().enumerate() {
        let content = blocks(m);
        let ids = |kind: &str, key: &str| -> Vec<String> {
            content
                .iter()
                .filter(|b| st(b, "type") == kind)
                .map(|b| st(b, key).to_string())
                .collect()
        };
        if st(m, "role") == "assistant" {
            let calls = ids("tool_use", "id");
            if let Some(next) = messages.get(i + 1).filter(|_| !calls.is_empty()) {
                let answered: Vec<String> = blocks(next)
                    .iter()
                    .filter(|b| st(b, "type") == "tool_result")
                    .map(|b| st(b, "tool_use_id").to_string())
                    .collect();
                let missing: Vec<&String> =
                    calls.iter().filter(|c| !answered.contains(c)).collect();
                if st(next, "role") != "user" || !missing.is_empty() {
                    out.push(format!(
                        "messages[{i}]: tool_use ids {missing:?} have no tool_result in the next message"
                    ));
                }
            }
            continue;
        }
        let results = ids("tool_result", "tool_use_id");
        if results.is_empty() {
            continue;
        }
        let prev_calls: Vec<String> = i
            .checked_sub(1)
            .map(|p| &messages[p])
            .filter(|p| st(p, "role") == "assistant")
            .map(|p| {
                blocks(p)
                    .iter()
                    .filter(|b| st(b, "type") == "tool_use")
                    .map(|b| st(b, "id").to_string())
                    .collect()
            })
            .unwrap_or_default();
        for r in results.iter().filter(|r| !prev_calls.contains(r)) {
            out.push(format!(
                "messages[{i}]: tool_result for {r:?} has no tool_use in the previous message"
            ));
        }
        let first_other = content.iter().position(|b| st(b, "type") != "tool_result");
        let last_result = content.iter().rposition(|b| st(b, "type") == "tool_result");
        if let (Some(o), Some(r)) = (first_other, last_result) {
            if o < r {
                out.push(format!(
                    "messages[{i}]: tool_result blocks do not come first"
                ));
            }
        }
    }
    out
}

/// Everything wrong with `body` as a request to an upstream of dialect `up`.
fn upstream_problems(up: Dialect, body: &Value) -> Vec<String> {
    let mut out = nulls(body);
    match up {
        Dialect::OpenAi => {
            out.extend(schema_errors(&CHAT_REQUEST, body));
            for k in body.as_object().into_iter().flat_map(|o| o.keys()) {
                if !CHAT_FIELDS.contains(k) {
                    out.push(format!("'{k}' is no CreateChatCompletionRequest field"));
                }
            }
            out.extend(chat_rules(body));
        }
        Dialect::Anthropic => {
            out.extend(schema_errors(&ANTHROPIC_REQUEST, body));
            out.extend(anthropic_rules(body));
        }
    }
    out
}

/// What the variant options promise: the output cap, and `max_completion_tokens` to OpenAI.
fn variant_problems(up: Dialect, body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for k in ["max_tokens", "max_completion_tokens"] {
        if let Some(n) = body.get(k).and_then(Value::as_u64).filter(|n| *n > CAP) {
            out.push(format!("{k} {n} is above max_output_tokens {CAP}"));
        }
    }
    if up == Dialect::OpenAi && body.get("max_tokens").is_some() {
        out.push("max_tokens sent although max_completion_tokens is set".into());
    }
    out
}

/// Whether the error field `field` is the corpus's `refused` (or a path under it).
fn names_field(field: &str, refused: &str) -> bool {
    field == refused
        || field
            .strip_prefix(refused)
            .is_some_and(|rest| rest.starts_with('.') || rest.starts_with('['))
}

fn translate(
    fmt: ClientFormat,
    up: Dialect,
    body: &Value,
    opts: &TargetOptions,
) -> Result<TranslatedRequest, crate::translate::TranslateError> {
    translate_request(fmt, up, body.to_string().as_bytes(), "upstream-model", opts)
}

#[test]
fn the_corpus_is_large_enough_and_says_where_each_body_came_from() {
    let cases = corpus();
    for fmt in [
        ClientFormat::Anthropic,
        ClientFormat::Chat,
        ClientFormat::Responses,
    ] {
        let of: Vec<&Case> = cases.iter().filter(|c| c.format == fmt).collect();
        assert!(of.len() >= 12, "{}: only {} bodies", fmt.as_str(), of.len());
        assert!(
            of.iter().any(|c| c.refused.is_some()),
            "{}: no refused body",
            fmt.as_str()
        );
    }
    for c in &cases {
        assert!(
            c.source.len() > 20,
            "{}: say where the body came from",
            c.label
        );
        assert!(
            c.body.get("model").is_some_and(Value::is_string),
            "{}: no model",
            c.label
        );
    }
}

#[test]
fn corpus_bodies_are_what_their_own_format_accepts() {
    let mut failures = Vec::new();
    for c in corpus() {
        let v: &Validator = match c.format {
            ClientFormat::Anthropic => &ANTHROPIC_REQUEST,
            ClientFormat::Chat => &CHAT_REQUEST,
            ClientFormat::Responses => &RESPONSES_REQUEST,
        };
        let errs = schema_errors(v, &c.body);
        match (&c.off_spec, errs.is_empty()) {
            (None, false) => failures.push(format!(
                "{} ({}) fails its own format's schema:\n    {}",
                c.label,
                c.source,
                errs.join("\n    ")
            )),
            (Some(why), true) => failures.push(format!(
                "{} is marked off_spec ({why}) but its format's schema accepts it",
                c.label
            )),
            _ => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_translated_request_is_valid_upstream() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for c in corpus() {
        for &up in upstreams(c.format) {
            for (opts_name, opts) in option_sets() {
                for (streaming, body) in stream_variants(&c.body) {
                    let what = format!(
                        "{} → {up:?}, {opts_name}, {} ({})",
                        c.label,
                        if streaming {
                            "streaming"
                        } else {
                            "not streaming"
                        },
                        c.source
                    );
                    let result = translate(c.format, up, &body, &opts);
                    let t = match (result, &c.refused) {
                        (Err(e), Some(field)) => {
                            if !e.field().is_some_and(|f| names_field(f, field))
                                || !e.to_string().contains(field.as_str())
                            {
                                failures.push(format!(
                                    "{what}: refused, but not naming '{field}': {e}"
                                ));
                            }
                            continue;
                        }
                        (Err(e), None) => {
                            failures.push(format!("{what}: refused: {e}"));
                            continue;
                        }
                        (Ok(_), Some(field)) => {
                            failures.push(format!(
                                "{what}: translated although '{field}' must be refused"
                            ));
                            continue;
                        }
                        (Ok(t), None) => t,
                    };
                    let sent: Value = serde_json::from_slice(&t.body).expect("the body is JSON");
                    let mut problems = upstream_problems(up, &sent);
                    if opts.max_output_tokens.is_some() {
                        problems.extend(variant_problems(up, &sent));
                    }
                    if t.stream != streaming {
                        problems.push(format!("stream is {} upstream", t.stream));
                    }
                    if !problems.is_empty() {
                        failures.push(format!(
                            "{what}:\n    {}\n  sent: {sent}",
                            problems.join("\n    ")
                        ));
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of the corpus translations are not valid upstream requests:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(checked >= 150, "only {checked} translations checked");
}

/// The checks are live: each broken body (the shapes a translator gets wrong) is rejected,
/// by a message naming what is wrong.
#[test]
fn the_checks_reject_broken_requests() {
    let chat = json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "parameters": {"type": "object", "properties": {}}}}],
        "tool_choice": "auto", "stream": true, "stream_options": {"include_usage": true},
        "max_completion_tokens": 100});
    let anthropic = json!({"model": "m", "max_tokens": 2048, "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                                          {"type": "text", "text": "thanks"}]}],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}],
        "tool_choice": {"type": "auto"}, "thinking": {"type": "enabled", "budget_tokens": 1024}});
    assert_eq!(
        upstream_problems(Dialect::OpenAi, &chat),
        Vec::<String>::new()
    );
    assert_eq!(
        upstream_problems(Dialect::Anthropic, &anthropic),
        Vec::<String>::new()
    );
    let broken = |base: &Value, edit: &dyn Fn(&mut Value)| {
        let mut v = base.clone();
        edit(&mut v);
        v
    };
    let chat_cases: Vec<(Value, &str)> = vec![
        (
            broken(&chat, &|v| {
                v.as_object_mut().unwrap().remove("messages");
            }),
            "messages",
        ),
        (
            broken(&chat, &|v| v["messages"][0]["role"] = json!("bogus")),
            "messages",
        ),
        (
            broken(&chat, &|v| {
                v["tools"][0]["function"]["parameters"] = Value::Null
            }),
            "null",
        ),
        (
            broken(&chat, &|v| v["stop"] = json!(["a", "b", "c", "d", "e"])),
            "stop",
        ),
        (
            broken(&chat, &|v| v["temperature"] = Value::Null),
            "null at temperature",
        ),
        (broken(&chat, &|v| v["top_k"] = json!(5)), "'top_k'"),
        (
            broken(&chat, &|v| {
                v["tool_choice"] = json!({"type": "function", "function": {"name": "nope"}})
            }),
            "not offered",
        ),
        (
            broken(&chat, &|v| v["tools"] = json!([])),
            "tool_choice without tools",
        ),
        (
            broken(&chat, &|v| {
                v.as_object_mut().unwrap().remove("stream");
            }),
            "stream_options",
        ),
        (
            broken(&chat, &|v| v["max_tokens"] = json!(5)),
            "both max_tokens",
        ),
        (
            broken(&chat, &|v| {
                v["messages"][2]["tool_call_id"] = json!("call_9")
            }),
            "does not answer",
        ),
        (
            broken(&chat, &|v| {
                v["messages"].as_array_mut().unwrap().pop();
                v["messages"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"role": "user", "content": "x"}));
            }),
            "not answered",
        ),
        (
            broken(&chat, &|v| {
                v["messages"][1] = json!({"role": "assistant", "content": null})
            }),
            "neither content",
        ),
        (
            broken(&chat, &|v| {
                v["tools"][0]["function"]["name"] = json!("mcp.search")
            }),
            "does not match",
        ),
    ];
    for (body, want) in chat_cases {
        let p = upstream_problems(Dialect::OpenAi, &body);
        assert!(
            p.iter().any(|e| e.contains(want)),
            "chat check missed {want:?}: {p:?}\n{body}"
        );
    }
    let anthropic_cases: Vec<(Value, &str)> = vec![
        (
            broken(&anthropic, &|v| {
                v.as_object_mut().unwrap().remove("max_tokens");
            }),
            "max_tokens",
        ),
        (
            broken(&anthropic, &|v| v["max_tokens"] = json!(0)),
            "max_tokens",
        ),
        (
            broken(&anthropic, &|v| v["messages"] = json!([])),
            "messages",
        ),
        (
            broken(&anthropic, &|v| v["messages"][0]["role"] = json!("system")),
            "role",
        ),
        (
            broken(&anthropic, &|v| {
                v["messages"][1]["content"][0]["id"] = json!("functions.Bash:0")
            }),
            "functions.Bash:0",
        ),
        (
            broken(&anthropic, &|v| {
                v["tools"][0]["name"] = json!("x".repeat(65))
            }),
            "xxxx",
        ),
        (
            broken(&anthropic, &|v| v["tools"][0]["input_schema"] = json!({})),
            "type",
        ),
        (
            broken(&anthropic, &|v| v["tools"][0]["description"] = Value::Null),
            "null",
        ),
        (
            broken(&anthropic, &|v| v["temperature"] = Value::Null),
            "null",
        ),
        (
            broken(&anthropic, &|v| v["temperature"] = json!(1.5)),
            "1.5",
        ),
        (
            broken(&anthropic, &|v| v["parallel_tool_calls"] = json!(false)),
            "parallel_tool_calls",
        ),
        (
            broken(&anthropic, &|v| v["tool_choice"] = json!({"type": "any"})),
            "any",
        ),
        (
            broken(&anthropic, &|v| {
                v["thinking"]["budget_tokens"] = json!(4096)
            }),
            "budget_tokens",
        ),
        (
            broken(&anthropic, &|v| {
                v["messages"][0]["content"] = json!([{"type": "text", "text": ""}])
            }),
            "text",
        ),
        (
            broken(
                &anthropic,
                &|v| v["messages"][0]["content"] = json!([{"type": "image", "source": {"type": "base64", "media_type": "image/jpg", "data": "x"}}]),
            ),
            "image/jpg",
        ),
        (
            broken(&anthropic, &|v| {
                v["messages"][2]["content"][0]["tool_use_id"] = json!("toolu_9")
            }),
            "no tool_use",
        ),
        (
            broken(&anthropic, &|v| {
                v["messages"][2]["content"]
                    .as_array_mut()
                    .unwrap()
                    .reverse()
            }),
            "come first",
        ),
        (
            broken(&anthropic, &|v| {
                v["messages"][2] = json!({"role": "user", "content": "x"})
            }),
            "no tool_result",
        ),
        (
            broken(&anthropic, &|v| {
                v["tool_choice"] = json!({"type": "tool", "name": "nope"})
            }),
            "nope",
        ),
    ];
    for (body, want) in anthropic_cases {
        let p = upstream_problems(Dialect::Anthropic, &body);
        assert!(
            p.iter().any(|e| e.contains(want)),
            "anthropic check missed {want:?}: {p:?}\n{body}"
        );
    }
    assert!(!variant_problems(Dialect::OpenAi, &json!({"max_tokens": 9000})).is_empty());
    assert!(variant_problems(Dialect::Anthropic, &json!({"max_tokens": 4096})).is_empty());
    assert!(names_field("tool_choice.type", "tool_choice"));
    assert!(!names_field("n_things", "n"));
}
