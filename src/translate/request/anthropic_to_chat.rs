//! Anthropic Messages request → OpenAI Chat Completions request.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::{Draft, client_model, stop_list};
use crate::config::ReasoningEffort;
use crate::translate::util::{Obj, arr, effort_for_budget, image_source_to_url, join_text, s, u};
use crate::translate::wire_names::{id_from_anthropic, shorten_into};
use crate::translate::{TargetOptions, TranslateError};

/// Top-level fields this direction reads; any other is dropped with a debug line.
const HANDLED: &[&str] = &[
    "model",
    "system",
    "messages",
    "tools",
    "tool_choice",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "metadata",
    "thinking",
    "output_config",
];

/// Most `stop` strings a Chat Completions request may carry; later ones are not sent (the
/// answer still maps a stop on any of them).
const MAX_CHAT_STOPS: usize = 4;

/// The text block current Claude Code puts first in `system`: attribution for Anthropic's
/// own billing, meaningless to another provider.
const BILLING_HEADER: &str = "x-anthropic-billing-header:";

/// Translates the parsed Anthropic body.
///
/// # Errors
/// A role other than `user` / `assistant` / `system`, unknown content blocks, a
/// `tool_result` whose id no earlier `tool_use` produced, and a `tool_choice` that forces a
/// dropped server tool.
pub fn translate(v: Obj, opts: &TargetOptions) -> Result<Draft, TranslateError> {
    let mut d = Draft::default();
    d.context.client_model = client_model(&v);
    let v = Value::Object(v);
    let mut messages = Vec::new();
    if let Some(sys) = v.get("system") {
        let text = system_text(sys);
        if !text.is_empty() {
            messages.push(json!({"role": opts.system_role.as_str(), "content": text}));
        }
    }
    let mut calls = HashSet::new();
    for (i, m) in arr(&v, "messages").iter().enumerate() {
        message(i, m, opts, &mut calls, &mut messages, &mut d)?;
    }
    d.body.insert("messages".into(), Value::Array(messages));
    tools(&v, &mut d)?;
    scalars(&v, opts, &mut d);
    thinking(&v, opts, &mut d);
    output_format(&v, &mut d);
    if let Some(obj) = v.as_object() {
        for k in obj.keys().filter(|k| !HANDLED.contains(&k.as_str())) {
            d.warn(format!("dropped '{k}' (no Chat Completions counterpart)"));
        }
    }
    Ok(d)
}

/// The `system` field's text (a string or text blocks joined with a blank line), without
/// the billing header block.
fn system_text(sys: &Value) -> String {
    match sys {
        Value::Array(blocks) => {
            let kept: Vec<Value> = blocks
                .iter()
                .filter(|b| !s(b, "text").is_some_and(|t| t.starts_with(BILLING_HEADER)))
                .cloned()
                .collect();
            join_text(&Value::Array(kept), "\n\n")
        }
        other => join_text(other, "\n\n"),
    }
}

/// One Anthropic message → one or more chat messages (tool results become `tool` messages
/// placed first, before the user's own text of that turn).
/// A `system` entry inside `messages` (current Claude Code puts environment and reminder
/// text there) stays at its position as a system message of the provider's system role.
fn message(
    i: usize,
    m: &Value,
    opts: &TargetOptions,
    calls: &mut HashSet<String>,
    out: &mut Vec<Value>,
    d: &mut Draft,
) -> Result<(), TranslateError> {
    let role = s(m, "role").unwrap_or_default();
    if role == "system" {
        let text = m.get("content").map(system_text).unwrap_or_default();
        if !text.is_empty() {
            out.push(json!({"role": opts.system_role.as_str(), "content": text}));
        }
        return Ok(());
    }
    if role != "user" && role != "assistant" {
        return Err(TranslateError::invalid(
            format!("messages[{i}].role"),
            "must be 'user', 'assistant' or 'system'",
        ));
    }
    match m.get("content") {
        Some(Value::String(t)) => {
            out.push(json!({"role": role, "content": t}));
            Ok(())
        }
        Some(Value::Array(blocks)) if role == "assistant" => {
            out.extend(assistant(i, blocks, calls, d)?);
            Ok(())
        }
        Some(Value::Array(blocks)) => user(i, blocks, calls, out),
        _ => Err(TranslateError::invalid(
            format!("messages[{i}].content"),
            "must be a string or an array of content blocks",
        )),
    }
}

fn user(
    i: usize,
    blocks: &[Value],
    calls: &HashSet<String>,
    out: &mut Vec<Value>,
) -> Result<(), TranslateError> {
    let mut parts = Vec::new();
    let mut tool_images = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        let field = || format!("messages[{i}].content[{j}]");
        match s(b, "type") {
            Some("text") => {
                parts.push(json!({"type": "text", "text": s(b, "text").unwrap_or_default()}))
            }
            Some("image") => parts.push(image_part(b, &field())?),
            Some("document") => parts.push(document_part(b, &field())?),
            Some("tool_result") => {
                let id = id_from_anthropic(s(b, "tool_use_id").unwrap_or_default());
                let id = id.as_ref();
                if !calls.contains(id) {
                    return Err(TranslateError::invalid(
                        format!("{}.tool_use_id", field()),
                        format!("no earlier tool_use has id '{id}'"),
                    ));
                }
                let content = b.get("content").cloned().unwrap_or(Value::Null);
                let mut text = join_text(&content, "\n");
                if b.get("is_error") == Some(&Value::Bool(true)) {
                    text = format!("Error: {text}");
                }
                for (k, img) in arr(b, "content").iter().enumerate() {
                    if s(img, "type") == Some("image") {
                        tool_images.push(image_part(img, &format!("{}.content[{k}]", field()))?);
                    }
                }
                out.push(json!({"role": "tool", "tool_call_id": id, "content": text}));
            }
            Some("thinking" | "redacted_thinking") => {}
            Some(t) => {
                return Err(TranslateError::unsupported(
                    format!("{}.type={t}", field()),
                    "this content block has no Chat Completions counterpart",
                ));
            }
            None => {
                return Err(TranslateError::invalid(
                    format!("{}.type", field()),
                    "missing",
                ));
            }
        }
    }
    tool_images.extend(parts);
    let parts = tool_images;
    match parts.as_slice() {
        [] => {}
        [one] if s(one, "type") == Some("text") => {
            out.push(json!({"role": "user", "content": one["text"]}));
        }
        _ => out.push(json!({"role": "user", "content": parts})),
    }
    Ok(())
}

fn image_part(b: &Value, field: &str) -> Result<Value, TranslateError> {
    let url = b
        .get("source")
        .and_then(image_source_to_url)
        .ok_or_else(|| {
            TranslateError::unsupported(
                format!("{field}.source"),
                "only base64 and url image sources translate",
            )
        })?;
    Ok(json!({"type": "image_url", "image_url": {"url": url}}))
}

/// A PDF `document` block → a Chat `file` part with the PDF as a data URL.
fn document_part(b: &Value, field: &str) -> Result<Value, TranslateError> {
    let src = b.get("source").unwrap_or(&Value::Null);
    match (s(src, "type"), s(src, "media_type"), s(src, "data")) {
        (Some("base64"), Some(media), Some(data)) => {
            let name = s(b, "title").unwrap_or("document.pdf");
            Ok(json!({"type": "file", "file": {
                "filename": name, "file_data": format!("data:{media};base64,{data}")}}))
        }
        _ => Err(TranslateError::unsupported(
            format!("{field}.source"),
            "only base64 PDF documents translate to Chat Completions (as a file part)",
        )),
    }
}

/// An assistant turn's blocks → one chat message, or none when nothing is left once thinking
/// is dropped (a thinking-only turn): Chat Completions rejects an assistant message with
/// neither `content` nor `tool_calls`.
fn assistant(
    i: usize,
    blocks: &[Value],
    calls: &mut HashSet<String>,
    d: &mut Draft,
) -> Result<Option<Value>, TranslateError> {
    let mut text = Vec::new();
    let mut tool_calls = Vec::new();
    for (j, b) in blocks.iter().enumerate() {
        match s(b, "type") {
            Some("text") => text.push(s(b, "text").unwrap_or_default()),
            Some("tool_use") => {
                let id = id_from_anthropic(s(b, "id").unwrap_or_default()).into_owned();
                calls.insert(id.clone());
                let input = b.get("input").cloned().unwrap_or_else(|| json!({}));
                let name =
                    shorten_into(&mut d.context.tool_names, s(b, "name").unwrap_or_default());
                tool_calls.push(json!({"id": id, "type": "function", "function": {
                    "name": name, "arguments": input.to_string()}}));
            }
            Some("thinking" | "redacted_thinking") => {
                d.warn(format!(
                    "dropped messages[{i}].content[{j}] (thinking is not sent to other providers)"
                ));
            }
            t => {
                return Err(TranslateError::unsupported(
                    format!("messages[{i}].content[{j}].type={}", t.unwrap_or("")),
                    "this assistant block has no Chat Completions counterpart",
                ));
            }
        }
    }
    if text.is_empty() && tool_calls.is_empty() {
        d.warn(format!("dropped messages[{i}] (nothing but thinking)"));
        return Ok(None);
    }
    let content = if text.is_empty() {
        Value::Null
    } else {
        Value::String(text.join("\n\n"))
    };
    let mut m = json!({"role": "assistant", "content": content});
    if !tool_calls.is_empty() {
        m["tool_calls"] = Value::Array(tool_calls);
    }
    Ok(Some(m))
}

/// `tools` and `tool_choice`. Server tools (no `input_schema`) are dropped with a warning; a
/// `tool_choice` forcing one is refused.
fn tools(v: &Value, d: &mut Draft) -> Result<(), TranslateError> {
    let mut out = Vec::new();
    let mut dropped = HashSet::new();
    for (i, t) in arr(v, "tools").iter().enumerate() {
        let name = s(t, "name").unwrap_or_default();
        match t.get("input_schema") {
            Some(schema) if matches!(s(t, "type"), None | Some("custom")) => {
                let wire = shorten_into(&mut d.context.tool_names, name);
                let mut f = json!({"name": wire, "parameters": schema});
                if let Some(desc) = t.get("description").filter(|x| !x.is_null()) {
                    f["description"] = desc.clone();
                }
                out.push(json!({"type": "function", "function": f}));
            }
            _ => {
                d.warn(format!("dropped tools[{i}] '{name}' (a server tool has no Chat Completions counterpart)"));
                dropped.insert(name.to_string());
            }
        }
    }
    let choice = v.get("tool_choice");
    if let Some(c) = choice {
        if s(c, "type") == Some("tool") && dropped.contains(s(c, "name").unwrap_or_default()) {
            return Err(TranslateError::unsupported(
                "tool_choice.name",
                "the forced tool is a server tool, which has no Chat Completions counterpart",
            ));
        }
    }
    if out.is_empty() {
        return Ok(());
    }
    d.body.insert("tools".into(), Value::Array(out));
    if let Some(c) = choice {
        let mapped = match s(c, "type") {
            Some("any") => json!("required"),
            Some("none") => json!("none"),
            Some("tool") => {
                let name =
                    shorten_into(&mut d.context.tool_names, s(c, "name").unwrap_or_default());
                json!({"type": "function", "function": {"name": name}})
            }
            _ => json!("auto"),
        };
        d.body.insert("tool_choice".into(), mapped);
        if c.get("disable_parallel_tool_use") == Some(&Value::Bool(true)) {
            d.body
                .insert("parallel_tool_calls".into(), Value::Bool(false));
        }
    }
    Ok(())
}

fn scalars(v: &Value, opts: &TargetOptions, d: &mut Draft) {
    if let Some(n) = d.output_limit(u(v, "max_tokens"), opts) {
        let key = if opts.max_completion_tokens {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        d.body.insert(key.into(), json!(n));
    }
    for k in ["temperature", "top_p"] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            d.body.insert(k.into(), x.clone());
        }
    }
    if v.get("top_k").is_some() {
        d.warn("dropped 'top_k' (no Chat Completions counterpart)");
    }
    let stops = stop_list(v.get("stop_sequences"));
    if stops.len() > MAX_CHAT_STOPS {
        d.adjusted.push(format!(
            "stop_sequences {} → {MAX_CHAT_STOPS} (Chat Completions takes at most {MAX_CHAT_STOPS})",
            stops.len()
        ));
    }
    if !stops.is_empty() {
        let sent = &stops[..stops.len().min(MAX_CHAT_STOPS)];
        d.body.insert("stop".into(), json!(sent));
    }
    d.context.stop_sequences = stops;
    if v.get("stream") == Some(&Value::Bool(true)) {
        d.body.insert("stream".into(), Value::Bool(true));
        d.body
            .insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(user) = v.get("metadata").and_then(|m| s(m, "user_id")) {
        d.body.insert("user".into(), json!(user));
    }
}

/// `thinking` and `output_config.effort` → `reasoning_effort` where the target takes it.
/// Enabled thinking maps its budget; adaptive thinking (current Claude Code) and a bare
/// `output_config.effort` map the effort word, `max` / `xhigh` to the target's highest.
/// `display: "omitted"` (or no thinking asked) relays no reasoning text.
fn thinking(v: &Value, opts: &TargetOptions, d: &mut Draft) {
    let t = v.get("thinking").filter(|t| !t.is_null());
    let asked = v
        .get("output_config")
        .and_then(|c| s(c, "effort"))
        .map(effort_word);
    let by_budget = |t: &Value| {
        let budget = u(t, "budget_tokens").unwrap_or(0);
        ReasoningEffort::parse(effort_for_budget(budget)).unwrap_or_default()
    };
    let effort = match t.map(|t| (t, s(t, "type"))) {
        Some((t, Some("enabled"))) => Some(asked.unwrap_or_else(|| by_budget(t))),
        Some((_, Some("adaptive"))) => Some(asked.unwrap_or(ReasoningEffort::Medium)),
        Some((_, Some("disabled"))) => None,
        _ => asked,
    };
    d.context.thinking =
        t.is_some_and(|t| s(t, "type") != Some("disabled") && s(t, "display") != Some("omitted"));
    let Some(effort) = effort else { return };
    if opts.reasoning_effort {
        let e = effort.min(opts.max_reasoning_effort);
        d.body.insert("reasoning_effort".into(), json!(e.as_str()));
    } else {
        let what = if t.is_some() {
            "thinking"
        } else {
            "output_config.effort"
        };
        d.warn(format!(
            "dropped '{what}' (this provider does not take reasoning_effort)"
        ));
    }
}

/// An Anthropic effort word: `low`, `medium`, `high`; `max`, `xhigh` and anything newer
/// count as the highest (clamped to the target's ceiling by the caller).
fn effort_word(w: &str) -> ReasoningEffort {
    match w {
        "low" => ReasoningEffort::Low,
        "medium" => ReasoningEffort::Medium,
        "high" => ReasoningEffort::High,
        _ => ReasoningEffort::XHigh,
    }
}

/// `output_config.format` (structured output, a JSON schema) → Chat `response_format`
/// `json_schema`.
fn output_format(v: &Value, d: &mut Draft) {
    let Some(f) = v.get("output_config").and_then(|c| c.get("format")) else {
        return;
    };
    match (s(f, "type"), f.get("schema")) {
        (Some("json_schema"), Some(schema)) => {
            d.body.insert(
                "response_format".into(),
                json!({"type": "json_schema", "json_schema": {
                    "name": s(f, "name").unwrap_or("output"), "schema": schema, "strict": true}}),
            );
        }
        _ => d.warn("dropped 'output_config.format' (only json_schema formats translate)"),
    }
}
