//! An Anthropic message → a `chat.completion`.

use serde_json::{Value, json};

use super::stop::{self, Usage};
use crate::translate::ResponseContext;
use crate::translate::util::{arr, s};

/// Translates an Anthropic message. Text blocks join into `content`; `tool_use` blocks become
/// `tool_calls` (ids unchanged, `input` serialised as `arguments`); thinking becomes
/// `reasoning_content` when the client asked for reasoning.
pub fn translate(m: &Value, ctx: &ResponseContext) -> Value {
    let mut text = String::new();
    let mut thinking = String::new();
    let mut calls = Vec::new();
    for b in arr(m, "content") {
        match s(b, "type") {
            Some("text") => text.push_str(s(b, "text").unwrap_or_default()),
            Some("thinking") => thinking.push_str(s(b, "thinking").unwrap_or_default()),
            Some("tool_use") => calls.push(json!({
                "id": s(b, "id").unwrap_or_default(), "type": "function",
                "function": {"name": s(b, "name").unwrap_or_default(),
                             "arguments": b.get("input").map_or_else(|| "{}".to_string(), Value::to_string)}})),
            _ => {}
        }
    }
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { json!(text) },
                             "refusal": null});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    if ctx.thinking && !thinking.is_empty() {
        message["reasoning_content"] = json!(thinking);
    }
    let usage = m
        .get("usage")
        .map(Usage::from_anthropic)
        .unwrap_or_default();
    json!({
        "id": s(m, "id").unwrap_or("chatcmpl-translated"),
        "object": "chat.completion",
        "created": ctx.created,
        "model": if ctx.client_model.is_empty() { s(m, "model").unwrap_or_default() } else { &ctx.client_model },
        "choices": [{"index": 0, "message": message, "logprobs": null,
                     "finish_reason": stop::anthropic_to_chat(s(m, "stop_reason"))}],
        "usage": usage.chat(),
    })
}
