//! A `chat.completion` → an Anthropic message.

use serde_json::{Value, json};

use super::stop::{self, Usage};
use crate::translate::util::{arr, s};
use crate::translate::{ResponseContext, TranslateError};

/// Translates a chat completion (first choice) into an Anthropic message.
///
/// # Errors
/// [`TranslateError::Upstream`] when `choices` is missing or empty.
pub fn translate(v: &Value, ctx: &ResponseContext) -> Result<Value, TranslateError> {
    let Some(choice) = arr(v, "choices").first() else {
        return Err(TranslateError::Upstream(
            "the chat completion has no choices".into(),
        ));
    };
    let msg = choice.get("message").unwrap_or(&Value::Null);
    let mut content = Vec::new();
    if ctx.thinking {
        if let Some(t) = reasoning(msg) {
            content.push(json!({"type": "thinking", "thinking": t, "signature": ""}));
        }
    }
    if let Some(t) = s(msg, "content")
        .or_else(|| s(msg, "refusal"))
        .filter(|t| !t.is_empty())
    {
        content.push(json!({"type": "text", "text": t}));
    }
    let calls = arr(msg, "tool_calls");
    for (i, c) in calls.iter().enumerate() {
        let f = c.get("function").unwrap_or(&Value::Null);
        let id = s(c, "id").map_or_else(|| format!("toolu_{i}"), str::to_string);
        content.push(
            json!({"type": "tool_use", "id": id, "name": s(f, "name").unwrap_or_default(),
                            "input": parse_arguments(s(f, "arguments").unwrap_or_default())}),
        );
    }
    let (stop_reason, stop_sequence) = stop_of(choice, !calls.is_empty(), ctx);
    let usage = v.get("usage").map(Usage::from_chat).unwrap_or_default();
    Ok(json!({
        "id": message_id(s(v, "id").unwrap_or_default()),
        "type": "message",
        "role": "assistant",
        "model": model(v, ctx),
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": stop_sequence,
        "usage": usage.anthropic(),
    }))
}

/// An Anthropic message id for an upstream id: `msg_` prefixed when it lacks the prefix.
pub(crate) fn message_id(id: &str) -> String {
    match id {
        "" => "msg_translated".into(),
        i if i.starts_with("msg_") => i.into(),
        i => format!("msg_{i}"),
    }
}

/// The reasoning text some servers add (`reasoning_content`, or `reasoning` as a string).
pub(crate) fn reasoning(msg: &Value) -> Option<&str> {
    s(msg, "reasoning_content")
        .or_else(|| s(msg, "reasoning"))
        .filter(|t| !t.is_empty())
}

/// The client-facing model name.
pub(crate) fn model<'a>(v: &'a Value, ctx: &'a ResponseContext) -> &'a str {
    if ctx.client_model.is_empty() {
        s(v, "model").unwrap_or_default()
    } else {
        &ctx.client_model
    }
}

/// Tool-call `arguments` → `input`. Text that is not a JSON object is kept, not lost:
/// `{"_raw_arguments": "<text>"}` (the client's tool validation then reports it).
pub fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return json!({});
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(o @ Value::Object(_)) => o,
        _ => json!({"_raw_arguments": raw}),
    }
}

/// (stop_reason, stop_sequence). A server that names the matched stop string (vLLM's
/// `stop_reason`) gives `stop_sequence` when it is one of the request's.
pub(crate) fn stop_of(
    choice: &Value,
    has_calls: bool,
    ctx: &ResponseContext,
) -> (&'static str, Value) {
    let finish = s(choice, "finish_reason");
    if finish == Some("stop") {
        if let Some(seq) =
            s(choice, "stop_reason").filter(|x| ctx.stop_sequences.iter().any(|q| q == x))
        {
            return ("stop_sequence", json!(seq));
        }
    }
    (stop::chat_to_anthropic(finish, has_calls), Value::Null)
}
