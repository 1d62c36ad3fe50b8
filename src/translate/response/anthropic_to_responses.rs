//! An Anthropic message → a Responses `response` object.

use serde_json::{Value, json};

use super::stop::Usage;
use crate::translate::ResponseContext;
use crate::translate::util::{arr, s};

/// Translates an Anthropic message: each text block is a `message` item, each `tool_use` a
/// `function_call` item (`call_id` = the tool id) — or a `custom_tool_call` item with the
/// call's one string when the tool was a freeform one of the request — thinking a
/// `reasoning` item with a summary (when the client asked for reasoning). `max_tokens` →
/// status `incomplete`.
pub fn translate(m: &Value, ctx: &ResponseContext) -> Value {
    let base = base_id(s(m, "id").unwrap_or_default());
    let mut output = Vec::new();
    for (i, b) in arr(m, "content").iter().enumerate() {
        match s(b, "type") {
            Some("text") => output.push(message_item(&base, i, s(b, "text").unwrap_or_default())),
            Some("thinking") if ctx.thinking => {
                output.push(reasoning_item(
                    &base,
                    i,
                    s(b, "thinking").unwrap_or_default(),
                ));
            }
            Some("tool_use") => {
                let args = b
                    .get("input")
                    .map_or_else(|| "{}".to_string(), Value::to_string);
                let (id, name) = (
                    s(b, "id").unwrap_or_default(),
                    s(b, "name").unwrap_or_default(),
                );
                output.push(if is_custom(ctx, name) {
                    custom_item(&base, i, id, name, &custom_input(&args))
                } else {
                    call_item(&base, i, id, name, &args)
                });
            }
            _ => {}
        }
    }
    let usage = m
        .get("usage")
        .map(Usage::from_anthropic)
        .unwrap_or_default();
    response_object(
        &base,
        ctx,
        s(m, "model"),
        s(m, "stop_reason"),
        output,
        Some(usage),
    )
}

/// The id suffix shared by the response and its items (the upstream message id without a
/// `msg_` / `chatcmpl-` prefix).
pub(crate) fn base_id(id: &str) -> String {
    let b = id.strip_prefix("msg_").unwrap_or(id);
    let b = b.strip_prefix("chatcmpl-").unwrap_or(b);
    if b.is_empty() {
        "translated".into()
    } else {
        b.to_string()
    }
}

/// A completed `message` item for Anthropic block `index`.
pub(crate) fn message_item(base: &str, index: usize, text: &str) -> Value {
    json!({"id": format!("msg_{base}_{index}"), "type": "message", "status": "completed", "role": "assistant",
           "content": [output_text(text)]})
}

/// An `output_text` content part (no annotations, no logprobs: both are required, both empty).
pub(crate) fn output_text(text: &str) -> Value {
    json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
}

/// A completed `reasoning` item.
pub(crate) fn reasoning_item(base: &str, index: usize, text: &str) -> Value {
    json!({"id": format!("rs_{base}_{index}"), "type": "reasoning",
           "summary": [{"type": "summary_text", "text": text}]})
}

/// A completed `function_call` item.
pub(crate) fn call_item(base: &str, index: usize, call_id: &str, name: &str, args: &str) -> Value {
    json!({"id": format!("fc_{base}_{index}"), "type": "function_call", "status": "completed",
           "call_id": call_id, "name": name, "arguments": args})
}

/// Whether `name` is one of the request's freeform (`custom`) tools.
pub(crate) fn is_custom(ctx: &ResponseContext, name: &str) -> bool {
    ctx.custom_tools.iter().any(|c| c == name)
}

/// A freeform tool call's text from the JSON arguments of the tool it was offered as (its
/// one string `input`); arguments of another shape are passed on as they are.
pub(crate) fn custom_input(args: &str) -> String {
    match serde_json::from_str::<Value>(args) {
        Ok(v) => match v.get(crate::translate::request::responses_to_anthropic::CUSTOM_INPUT) {
            Some(Value::String(s)) => s.clone(),
            _ => args.to_string(),
        },
        Err(_) => args.to_string(),
    }
}

/// A completed `custom_tool_call` item.
pub(crate) fn custom_item(
    base: &str,
    index: usize,
    call_id: &str,
    name: &str,
    input: &str,
) -> Value {
    json!({"id": format!("ctc_{base}_{index}"), "type": "custom_tool_call", "status": "completed",
           "call_id": call_id, "name": name, "input": input})
}

/// The `response` fields that repeat the request (all required by OpenAI's schema).
const ECHOED: [&str; 7] = [
    "instructions",
    "metadata",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
];

/// What an [`ECHOED`] field is when the request seam found no value: `tools: []`,
/// `tool_choice: "auto"`, `parallel_tool_calls: true`, the others `null`.
fn echo_default(field: &str) -> Value {
    match field {
        "tools" => json!([]),
        "tool_choice" => json!("auto"),
        "parallel_tool_calls" => json!(true),
        _ => Value::Null,
    }
}

/// The `response` object. `stop` = the Anthropic stop reason (`None` while in progress);
/// `usage` is left out while `None`. The request fields the schema requires come from
/// [`ResponseContext::response_fields`], else their defaults ([`echo_default`]).
pub(crate) fn response_object(
    base: &str,
    ctx: &ResponseContext,
    upstream_model: Option<&str>,
    stop: Option<&str>,
    output: Vec<Value>,
    usage: Option<Usage>,
) -> Value {
    let (status, incomplete) = match stop {
        None => ("in_progress", Value::Null),
        Some("max_tokens") => ("incomplete", json!({"reason": "max_output_tokens"})),
        Some("refusal") => ("incomplete", json!({"reason": "content_filter"})),
        Some(_) => ("completed", Value::Null),
    };
    let model = if ctx.client_model.is_empty() {
        upstream_model.unwrap_or_default()
    } else {
        &ctx.client_model
    };
    let mut r = json!({
        "id": format!("resp_{base}"), "object": "response", "created_at": ctx.created,
        "status": status, "model": model, "output": output,
        "incomplete_details": incomplete, "error": null,
    });
    for k in ECHOED {
        r[k] = ctx
            .response_fields
            .get(k)
            .cloned()
            .unwrap_or_else(|| echo_default(k));
    }
    if let Some(u) = usage {
        let mut v = u.responses();
        // Required next to `cached_tokens`: the tokens written to the prompt cache.
        v["input_tokens_details"]["cache_write_tokens"] = json!(u.cache_creation);
        r["usage"] = v;
    }
    r
}
