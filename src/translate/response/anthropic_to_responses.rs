//! An Anthropic message → a Responses `response` object.

use serde_json::{Value, json};

use super::stop::Usage;
use crate::translate::ResponseContext;
use crate::translate::util::{arr, s};

/// Translates an Anthropic message: each text block is a `message` item, each `tool_use` a
/// `function_call` item (`call_id` = the tool id), thinking a `reasoning` item with a summary
/// (when the client asked for reasoning). `max_tokens` → status `incomplete`.
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
                output.push(call_item(
                    &base,
                    i,
                    s(b, "id").unwrap_or_default(),
                    s(b, "name").unwrap_or_default(),
                    &args,
                ));
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
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
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

/// The `response` object. `stop` = the Anthropic stop reason (`None` while in progress).
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
    json!({
        "id": format!("resp_{base}"), "object": "response", "created_at": ctx.created,
        "status": status, "model": model, "output": output,
        "incomplete_details": incomplete, "error": null,
        "usage": usage.map(|u| u.responses()),
    })
}
