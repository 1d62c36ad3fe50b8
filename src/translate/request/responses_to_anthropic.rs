//! OpenAI Responses request → Anthropic Messages request (what Codex CLI sends, for a Claude
//! target).

use std::collections::HashSet;

use serde_json::{Value, json};

use super::chat_to_anthropic::thinking_budget;
use super::turns::Turns;
use super::{Draft, client_model};
use crate::translate::options::DEFAULT_MAX_TOKENS;
use crate::translate::util::{Obj, arr, budget_for_effort, join_text, s, u, url_to_image_source};
use crate::translate::{TargetOptions, TranslateError};

/// Top-level fields this direction reads; any other is dropped with a warning.
const HANDLED: &[&str] = &[
    "model",
    "instructions",
    "input",
    "tools",
    "tool_choice",
    "max_output_tokens",
    "reasoning",
    "temperature",
    "top_p",
    "stream",
    "previous_response_id",
    "parallel_tool_calls",
    "user",
    "text",
    "background",
    "conversation",
];

/// Built-in tool types with no counterpart elsewhere: dropped with a warning (refused when
/// `tool_choice` forces one).
const HOSTED: &[&str] = &[
    "web_search",
    "web_search_preview",
    "file_search",
    "code_interpreter",
    "computer_use_preview",
    "image_generation",
    "mcp",
    "local_shell",
    "tool_search",
];

/// Translates the parsed Responses body, filling `max_tokens` (required by Anthropic).
///
/// # Errors
/// See [`to_anthropic`].
pub fn translate(v: Obj, opts: &TargetOptions) -> Result<Draft, TranslateError> {
    to_anthropic(v, opts, true)
}

/// What a `background: true` request gets instead: sluice keeps no responses to poll, so it
/// answers the request as it would without the flag.
pub const BACKGROUND_IGNORED: &str = "background ignored: served synchronously";

/// Translates the parsed Responses body into an Anthropic body; `require_max` fills
/// `max_tokens` from the options (or [`DEFAULT_MAX_TOKENS`]) when the client gave none.
/// `background: true` is served synchronously, recorded in [`Draft::downgrades`].
///
/// # Errors
/// `previous_response_id` / `conversation` (server-side state), structured
/// `text.format` other than `json_schema`, a forced built-in tool, input items other than messages,
/// function calls, their outputs and reasoning, `arguments` that are not a JSON object, and a
/// `function_call_output` whose `call_id` no earlier call produced.
pub fn to_anthropic(
    v: Obj,
    opts: &TargetOptions,
    require_max: bool,
) -> Result<Draft, TranslateError> {
    let mut d = Draft::default();
    d.context.client_model = client_model(&v);
    let v = Value::Object(v);
    refuse(&v)?;
    if v.get("background") == Some(&Value::Bool(true)) {
        d.downgrades.push(BACKGROUND_IGNORED.into());
    }
    let mut turns = Turns::default();
    if let Some(t) = s(&v, "instructions").filter(|t| !t.is_empty()) {
        turns.system.push(t.to_string());
    }
    match v.get("input") {
        Some(Value::String(t)) => turns.push("user", vec![json!({"type": "text", "text": t})]),
        Some(Value::Array(items)) => {
            for (i, it) in items.iter().enumerate() {
                item(i, it, &mut turns, &mut d)?;
            }
        }
        _ => {}
    }
    if !turns.system.is_empty() {
        d.body
            .insert("system".into(), json!(turns.system.join("\n\n")));
    }
    d.body.insert("messages".into(), turns.messages());
    tools(&v, &mut d)?;
    scalars(&v, opts, require_max, &mut d);
    output_format(&v, &mut d);
    echo(&v, &mut d);
    if let Some(obj) = v.as_object() {
        for k in obj.keys().filter(|k| !HANDLED.contains(&k.as_str())) {
            d.warn(format!(
                "dropped '{k}' (no counterpart outside the Responses API)"
            ));
        }
    }
    Ok(d)
}

fn refuse(v: &Value) -> Result<(), TranslateError> {
    for k in ["previous_response_id", "conversation"] {
        if v.get(k).is_some_and(|x| !x.is_null()) {
            return Err(TranslateError::unsupported(
                k,
                "sluice does not store responses; send the whole conversation in 'input' (store=false)",
            ));
        }
    }
    if let Some(f) = v
        .get("text")
        .and_then(|t| t.get("format"))
        .and_then(|f| s(f, "type"))
        .filter(|t| !matches!(*t, "text" | "json_schema"))
    {
        return Err(TranslateError::unsupported(
            format!("text.format.type={f}"),
            "only json_schema structured output translates (to output_config.format)",
        ));
    }
    Ok(())
}

/// `text.format` `json_schema` (structured output) → Anthropic `output_config.format`.
fn output_format(v: &Value, d: &mut Draft) {
    let schema = v
        .get("text")
        .and_then(|t| t.get("format"))
        .filter(|f| s(f, "type") == Some("json_schema"))
        .and_then(|f| f.get("schema"));
    if let Some(schema) = schema {
        d.body.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
    }
}

/// One input item.
fn item(i: usize, it: &Value, turns: &mut Turns, d: &mut Draft) -> Result<(), TranslateError> {
    let field = format!("input[{i}]");
    let kind = s(it, "type").unwrap_or(if it.get("role").is_some() {
        "message"
    } else {
        ""
    });
    match kind {
        "message" => message(&field, it, turns),
        "function_call" => {
            let raw = s(it, "arguments").unwrap_or_default();
            let input = parse_arguments(raw, &format!("{field}.arguments"))?;
            let id = s(it, "call_id").unwrap_or_default();
            turns.calls.insert(id.to_string());
            let name = s(it, "name").unwrap_or_default();
            turns.push(
                "assistant",
                vec![json!({"type": "tool_use", "id": id, "name": name, "input": input})],
            );
            Ok(())
        }
        "custom_tool_call" => {
            // A freeform tool's call (Codex's apply_patch): its raw text is the one string
            // argument of the tool it was offered as.
            let id = s(it, "call_id").unwrap_or_default();
            turns.calls.insert(id.to_string());
            let input = json!({CUSTOM_INPUT: s(it, "input").unwrap_or_default()});
            let name = s(it, "name").unwrap_or_default();
            turns.push(
                "assistant",
                vec![json!({"type": "tool_use", "id": id, "name": name, "input": input})],
            );
            Ok(())
        }
        "function_call_output" | "custom_tool_call_output" => {
            let id = s(it, "call_id").unwrap_or_default();
            if !turns.calls.contains(id) {
                return Err(TranslateError::invalid(
                    format!("{field}.call_id"),
                    format!("no earlier function_call has call_id '{id}'"),
                ));
            }
            let text = join_text(it.get("output").unwrap_or(&Value::Null), "\n");
            turns.push(
                "user",
                vec![json!({"type": "tool_result", "tool_use_id": id, "content": text})],
            );
            Ok(())
        }
        "reasoning" => {
            d.warn(format!(
                "dropped {field} (reasoning items are not sent to other providers)"
            ));
            Ok(())
        }
        t => Err(TranslateError::unsupported(
            format!("{field}.type={t}"),
            "only message, function and custom tool calls, their outputs, and reasoning items translate",
        )),
    }
}

fn parse_arguments(raw: &str, field: &str) -> Result<Value, TranslateError> {
    if raw.trim().is_empty() {
        return Ok(json!({}));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(o @ Value::Object(_)) => Ok(o),
        Ok(_) => Err(TranslateError::invalid(field, "must be a JSON object")),
        Err(e) => Err(TranslateError::invalid(
            field,
            format!("not valid JSON: {e}"),
        )),
    }
}

fn message(field: &str, it: &Value, turns: &mut Turns) -> Result<(), TranslateError> {
    let role = s(it, "role").unwrap_or_default();
    let content = it.get("content").unwrap_or(&Value::Null);
    if matches!(role, "system" | "developer") {
        let t = join_text(content, "\n\n");
        if !t.is_empty() {
            turns.system.push(t);
        }
        return Ok(());
    }
    if role != "user" && role != "assistant" {
        return Err(TranslateError::invalid(
            format!("{field}.role"),
            format!("unknown role '{role}'"),
        ));
    }
    let mut blocks = Vec::new();
    match content {
        Value::String(t) if !t.is_empty() => blocks.push(json!({"type": "text", "text": t})),
        Value::Array(parts) => {
            for (j, p) in parts.iter().enumerate() {
                if let Some(b) = part(&format!("{field}.content[{j}]"), p)? {
                    blocks.push(b);
                }
            }
        }
        _ => {}
    }
    turns.push(role, blocks);
    Ok(())
}

fn part(field: &str, p: &Value) -> Result<Option<Value>, TranslateError> {
    match s(p, "type") {
        Some("input_text" | "output_text" | "text") => Ok(s(p, "text")
            .filter(|t| !t.is_empty())
            .map(|t| json!({"type": "text", "text": t}))),
        Some("refusal") => Ok(s(p, "refusal").map(|t| json!({"type": "text", "text": t}))),
        Some("input_file") => {
            super::chat_to_anthropic::document_block(field, s(p, "file_data"), s(p, "filename"))
                .map(Some)
        }
        Some("input_image") => {
            let url = p
                .get("image_url")
                .and_then(|x| x.as_str().or_else(|| s(x, "url")))
                .unwrap_or_default();
            let source = url_to_image_source(url).ok_or_else(|| {
                TranslateError::unsupported(
                    format!("{field}.image_url"),
                    "only data: and http(s) image URLs translate (not file_id)",
                )
            })?;
            Ok(Some(json!({"type": "image", "source": source})))
        }
        t => Err(TranslateError::unsupported(
            format!("{field}.type={}", t.unwrap_or("")),
            "only text, image and inline PDF file parts translate",
        )),
    }
}

/// The one property of the tool a freeform (`custom`) tool is offered as.
pub(crate) const CUSTOM_INPUT: &str = "input";

/// A Responses `custom` (freeform) tool → an Anthropic tool taking one string, `input`; its
/// grammar, when given, is quoted in the property's description so the model writes to it.
fn custom_tool(t: &Value, name: &str) -> Value {
    let mut hint = String::from("The raw input of this tool, as free text.");
    if let Some(f) = t.get("format").filter(|f| s(f, "type") == Some("grammar")) {
        hint.push_str(&format!(
            " It must follow this {} grammar:\n{}",
            s(f, "syntax").unwrap_or("formal"),
            s(f, "definition").unwrap_or_default()
        ));
    }
    let mut tool = json!({"name": name, "input_schema": {"type": "object",
        "properties": {CUSTOM_INPUT: {"type": "string", "description": hint}},
        "required": [CUSTOM_INPUT]}});
    if let Some(desc) = t.get("description").filter(|x| x.is_string()) {
        tool["description"] = desc.clone();
    }
    tool
}

/// A Responses `function` tool → an Anthropic tool with its parameters as the input schema.
fn function_tool(t: &Value) -> Value {
    // `parameters` is required and nullable in the Responses API: `null` (or none)
    // is a tool without arguments.
    let schema = t
        .get("parameters")
        .filter(|p| !p.is_null())
        .cloned()
        .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
    let mut tool = json!({"name": s(t, "name").unwrap_or_default(), "input_schema": schema});
    if let Some(desc) = t.get("description").filter(|x| !x.is_null()) {
        tool["description"] = desc.clone();
    }
    tool
}

/// The Responses `tool_choice` as an Anthropic one (`None` when not given); forcing a tool that
/// was `dropped` or is built-in cannot translate.
fn tool_choice(v: &Value, dropped: &HashSet<String>) -> Result<Option<Value>, TranslateError> {
    Ok(match v.get("tool_choice") {
        Some(Value::String(c)) if c == "required" => Some(json!({"type": "any"})),
        Some(Value::String(c)) if c == "none" => Some(json!({"type": "none"})),
        Some(c @ Value::Object(_)) => match s(c, "type") {
            Some("function" | "custom") => {
                Some(json!({"type": "tool", "name": s(c, "name").unwrap_or_default()}))
            }
            Some(k) if dropped.contains(k) || HOSTED.contains(&k) => {
                return Err(TranslateError::unsupported(
                    "tool_choice.type",
                    format!("the forced tool '{k}' is a built-in tool with no counterpart"),
                ));
            }
            _ => Some(json!({"type": "auto"})),
        },
        Some(Value::String(_)) => Some(json!({"type": "auto"})),
        _ => None,
    })
}

/// The Responses `tools` → Anthropic `tools` (built-in tools and namespaces are dropped with a
/// warning, an unknown type cannot translate), with `tool_choice` and `parallel_tool_calls`.
fn tools(v: &Value, d: &mut Draft) -> Result<(), TranslateError> {
    let mut out = Vec::new();
    let mut dropped = HashSet::new();
    for (i, t) in arr(v, "tools").iter().enumerate() {
        match s(t, "type").unwrap_or_default() {
            "function" => out.push(function_tool(t)),
            "custom" => {
                let name = s(t, "name").unwrap_or_default();
                out.push(custom_tool(t, name));
                d.context.custom_tools.push(name.to_string());
            }
            k if HOSTED.contains(&k) => {
                d.warn(format!(
                    "dropped tools[{i}] '{k}' (a built-in tool has no counterpart)"
                ));
                dropped.insert(k.to_string());
            }
            // A named group of function tools (Codex's sub-agent tools): its calls carry the
            // namespace, which an Anthropic tool list cannot express. Dropped like a built-in.
            "namespace" => {
                let name = s(t, "name").unwrap_or_default();
                d.warn(format!(
                    "dropped tools[{i}] namespace '{name}' (tool groups have no counterpart)"
                ));
                dropped.insert("namespace".to_string());
            }
            k => {
                return Err(TranslateError::unsupported(
                    format!("tools[{i}].type={k}"),
                    "only function tools translate",
                ));
            }
        }
    }
    let choice = tool_choice(v, &dropped)?;
    if out.is_empty() {
        return Ok(());
    }
    d.body.insert("tools".into(), Value::Array(out));
    let no_parallel = v.get("parallel_tool_calls") == Some(&Value::Bool(false));
    let mut choice = choice;
    if no_parallel {
        let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
        if s(c, "type") != Some("none") {
            c["disable_parallel_tool_use"] = Value::Bool(true);
        }
    }
    if let Some(c) = choice {
        d.body.insert("tool_choice".into(), c);
    }
    Ok(())
}

/// `max_output_tokens` (clamped to the target's `max_output_tokens` here only for an Anthropic
/// upstream: towards Chat the Anthropic → Chat step clamps and records it), reasoning,
/// sampling, `stream` and `user`.
fn scalars(v: &Value, opts: &TargetOptions, require_max: bool, d: &mut Draft) {
    let asked =
        u(v, "max_output_tokens").or_else(|| match (opts.default_max_tokens, require_max) {
            (Some(n), _) => Some(u64::from(n)),
            (None, true) => Some(u64::from(DEFAULT_MAX_TOKENS)),
            (None, false) => None,
        });
    let max = if require_max {
        asked.and_then(|n| d.output_limit(Some(n), opts))
    } else {
        asked
    };
    if let Some(n) = max {
        d.body.insert("max_tokens".into(), json!(n));
    }
    let word = v
        .get("reasoning")
        .and_then(|r| s(r, "effort"))
        .filter(|w| budget_for_effort(w).is_some());
    let thinking = if require_max {
        let budget = word.and_then(budget_for_effort);
        thinking_budget(budget, max.unwrap_or(u64::MAX), d).inspect(|b| {
            d.body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": b}),
            );
        })
    } else {
        // Responses → Chat: the effort word itself crosses (so `xhigh` stays `xhigh` where
        // the provider takes it), and sampling stays: no Anthropic thinking rules apply.
        word.map(|w| {
            d.body
                .insert("thinking".into(), json!({"type": "adaptive"}));
            d.body.insert("output_config".into(), json!({"effort": w}));
            0
        })
    };
    if thinking.is_some() {
        d.context.thinking = v.get("reasoning").and_then(|r| s(r, "summary")) != Some("none");
    }
    let thinking = thinking.filter(|_| require_max);
    for k in ["temperature", "top_p"] {
        match v.get(k) {
            Some(_) if thinking.is_some() => d.warn(format!(
                "dropped '{k}' (Anthropic thinking requires the default)"
            )),
            Some(x) if !x.is_null() => {
                d.body.insert(k.into(), x.clone());
            }
            _ => {}
        }
    }
    if v.get("stream") == Some(&Value::Bool(true)) {
        d.body.insert("stream".into(), Value::Bool(true));
    }
    if let Some(user) = s(v, "user") {
        d.body.insert("metadata".into(), json!({"user_id": user}));
    }
}

/// Fills what the `response` object repeats of the request (OpenAI's schema requires
/// `instructions`, `tools`, `tool_choice`, `parallel_tool_calls`, `temperature`, `top_p` and
/// `metadata`; see [`crate::translate::ResponseContext::response_fields`]): the client's
/// values in the schema's forms, or for `temperature` / `top_p` the values sent upstream.
fn echo(v: &Value, d: &mut Draft) {
    let mut f = serde_json::Map::new();
    if let Some(i) = v.get("instructions").filter(|i| i.is_string()) {
        f.insert("instructions".into(), i.clone());
    }
    let typed = |t: &Value, k: &str, ok: fn(&Value) -> bool| {
        t.get(k).filter(|x| ok(x)).cloned().unwrap_or(Value::Null)
    };
    let tools: Vec<Value> = arr(v, "tools")
        .iter()
        .filter_map(|t| {
            let name = s(t, "name").unwrap_or_default();
            match s(t, "type")? {
                "function" => Some(json!({"type": "function", "name": name,
                    "description": typed(t, "description", Value::is_string),
                    "parameters": typed(t, "parameters", Value::is_object),
                    "strict": typed(t, "strict", Value::is_boolean)})),
                "custom" => {
                    let mut c = json!({"type": "custom", "name": name});
                    for k in ["description", "format"] {
                        if let Some(x) = t.get(k).filter(|x| !x.is_null()) {
                            c[k] = x.clone();
                        }
                    }
                    Some(c)
                }
                _ => None,
            }
        })
        .collect();
    f.insert("tools".into(), Value::Array(tools));
    let choice = match v.get("tool_choice") {
        Some(x @ Value::String(m)) if matches!(m.as_str(), "auto" | "none" | "required") => {
            Some(x.clone())
        }
        Some(x) => match (s(x, "type"), s(x, "name")) {
            (Some(k @ ("function" | "custom")), Some(n)) => Some(json!({"type": k, "name": n})),
            _ => None,
        },
        _ => None,
    };
    if let Some(c) = choice {
        f.insert("tool_choice".into(), c);
    }
    if let Some(p) = v.get("parallel_tool_calls").filter(|p| p.is_boolean()) {
        f.insert("parallel_tool_calls".into(), p.clone());
    }
    for k in ["temperature", "top_p"] {
        if let Some(x) = d.body.get(k).filter(|x| x.is_number()) {
            f.insert(k.into(), x.clone());
        }
    }
    let strings = |m: &&Value| {
        m.as_object()
            .is_some_and(|o| o.values().all(Value::is_string))
    };
    if let Some(m) = v.get("metadata").filter(strings) {
        f.insert("metadata".into(), m.clone());
    }
    d.context.response_fields = f;
}
