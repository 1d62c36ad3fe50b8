//! Non-streaming responses. The Anthropic message is the pivot: a chat completion is first
//! turned into an Anthropic message, which is then written in the client's format.

pub mod anthropic_to_chat;
pub mod anthropic_to_responses;
pub mod chat_to_anthropic;
pub mod stop;

use bytes::Bytes;
use serde_json::Value;

use super::{ClientFormat, ResponseContext, TranslateError, wire_names};
use crate::config::Dialect;

/// Translates a successful (2xx) non-streaming upstream body of dialect `upstream` into the
/// client's format (`ctx.client`).
///
/// # Errors
/// [`TranslateError::SameDialect`] when no translation is needed;
/// [`TranslateError::Upstream`] when the body is not JSON or not the dialect's response shape
/// (a chat completion with no choices, an Anthropic reply without `content`). Malformed
/// tool-call arguments are not an error: the raw text is kept as `{"_raw_arguments": "…"}`.
pub fn translate_response(
    upstream: Dialect,
    body: &[u8],
    ctx: &ResponseContext,
) -> Result<Bytes, TranslateError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| TranslateError::Upstream(format!("reply is not JSON: {e}")))?;
    let message = match (upstream, ctx.client) {
        (Dialect::Anthropic, ClientFormat::Anthropic) | (Dialect::OpenAi, ClientFormat::Chat) => {
            return Err(TranslateError::SameDialect);
        }
        (Dialect::OpenAi, _) => chat_to_anthropic::translate(&v, ctx)?,
        (Dialect::Anthropic, _) => {
            if !v.get("content").is_some_and(Value::is_array) {
                return Err(TranslateError::Upstream(
                    "Anthropic reply has no content array".into(),
                ));
            }
            v
        }
    };
    let mut message = message;
    client_tool_calls(&mut message, ctx);
    let out = match ctx.client {
        ClientFormat::Anthropic => message,
        ClientFormat::Chat => anthropic_to_chat::translate(&message, ctx),
        ClientFormat::Responses => anthropic_to_responses::translate(&message, ctx),
    };
    Ok(Bytes::from(out.to_string()))
}

/// Gives each `tool_use` block of the pivot message the client's tool name and an id of the
/// client's form (see [`wire_names::for_client`]).
fn client_tool_calls(message: &mut Value, ctx: &ResponseContext) {
    let Some(blocks) = message.get_mut("content").and_then(Value::as_array_mut) else {
        return;
    };
    for b in blocks
        .iter_mut()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
    {
        let id = b.get("id").and_then(Value::as_str).unwrap_or_default();
        let name = b.get("name").and_then(Value::as_str).unwrap_or_default();
        let (id, name) = wire_names::for_client(ctx.client, &ctx.tool_names, id, name);
        b["id"] = Value::String(id);
        b["name"] = Value::String(name);
    }
}
