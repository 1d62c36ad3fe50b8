//! Empty turns: a 2xx answer that ends with no text and no tool call — nothing at all, or
//! only reasoning (`docs/RESILIENCE.md#6-stream-guards`). Pure: no I/O, no clock.
//!
//! The check reads what the client would receive, in the route's format (Anthropic
//! Messages, Chat Completions, Responses): for a translated target that is the translator's
//! output, which is also what the pre-content hold reads. So "empty" means empty for this
//! client — e.g. upstream reasoning a client did not ask for is dropped by the translator and
//! leaves an empty turn — and one set of rules serves every upstream dialect.
//!
//! - A stream is judged by [`StreamTracker::empty_turn`](crate::proxy::sse::StreamTracker::empty_turn)
//!   from its events' `answer` and `excused_stop` flags (set by the SSE classifier).
//! - A whole body is judged by [`reply_is_empty`].
//!
//! Decisions (each has a table row in the tests):
//! - *Answer* is text (any non-empty string), a tool call (even one with no arguments), a
//!   server tool result, a citation, a refusal, audio, or a block / output item of a kind not
//!   known here — when in doubt a turn is not empty, so a new block type can never make
//!   sluice fail a good answer. Thinking, redacted thinking and reasoning are not.
//! - *Excused*: a turn that stopped for one of [`EXCUSING_STOPS`] (an output limit — a client
//!   asking for 1 token from a reasoning model gets only reasoning —, its own stop sequence,
//!   a refusal, a content filter), or a Responses object that is not `completed`, is not
//!   empty: trying another target would not change it, and the provider did nothing wrong.
//! - A turn that ended in an error is an error, not an empty turn; a body that is not JSON or
//!   not of the route's shape is not judged.

use serde_json::Value;

use crate::proxy::sse::{EXCUSING_STOPS, StreamKind};

/// Whether a complete 2xx `body` in the `kind` route's format is an empty turn (see the
/// module doc). `false` for anything that is not JSON of that shape.
pub fn reply_is_empty(kind: StreamKind, body: &[u8]) -> bool {
    if shows_an_answer(kind, body) {
        return false;
    }
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    match kind {
        StreamKind::Anthropic => anthropic_empty(&v),
        StreamKind::OpenAiChat => chat_empty(&v),
        StreamKind::OpenAiResponses => responses_empty(&v),
    }
}

/// The fast path of [`reply_is_empty`], for the common answer: a key that only an answer
/// has (`"text"` in Messages, `"content"` in Chat) with a non-empty string value, or a tool
/// call, written as raw JSON (quotes inside a JSON string are escaped, so these bytes are
/// never part of a string value). `false` means "not shown here", never "empty": the body is
/// then parsed and judged whole. Parsing every reply into a value tree cost about 15,000
/// instructions per request.
fn shows_an_answer(kind: StreamKind, body: &[u8]) -> bool {
    let (keys, calls): (&[&[u8]], &[u8]) = match kind {
        StreamKind::Anthropic => (&[b"\"text\":\"", b"\"text\": \""], b"\"type\":\"tool_use\""),
        StreamKind::OpenAiChat => (
            &[b"\"content\":\"", b"\"content\": \""],
            b"\"tool_calls\":[{",
        ),
        StreamKind::OpenAiResponses => return false,
    };
    memchr::memmem::find(body, calls).is_some()
        || keys.iter().any(|k| {
            memchr::memmem::find_iter(body, k)
                .any(|at| body.get(at + k.len()).is_some_and(|&b| b != b'"'))
        })
}

fn str_of<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn non_empty(v: &Value, key: &str) -> bool {
    str_of(v, key).is_some_and(|s| !s.is_empty())
}

fn excused(v: &Value, key: &str) -> bool {
    str_of(v, key).is_some_and(|r| EXCUSING_STOPS.contains(&r))
}

/// A Messages object: its `content` blocks.
fn anthropic_empty(v: &Value) -> bool {
    let Some(blocks) = v.get("content").and_then(Value::as_array) else {
        return false;
    };
    !excused(v, "stop_reason") && !blocks.iter().any(anthropic_block_answers)
}

fn anthropic_block_answers(b: &Value) -> bool {
    match str_of(b, "type") {
        Some("thinking" | "redacted_thinking") => false,
        Some("text") => non_empty(b, "text"),
        _ => true,
    }
}

/// A chat completion: every choice's `message`.
fn chat_empty(v: &Value) -> bool {
    let Some(choices) = v.get("choices").and_then(Value::as_array) else {
        return false;
    };
    if choices.iter().any(|c| excused(c, "finish_reason")) {
        return false;
    }
    !choices
        .iter()
        .any(|c| c.get("message").is_none_or(chat_message_answers))
}

fn chat_message_answers(m: &Value) -> bool {
    let content = match m.get("content") {
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(parts)) => parts
            .iter()
            .any(|p| str_of(p, "type") != Some("text") || non_empty(p, "text")),
        _ => false,
    };
    content
        || non_empty(m, "refusal")
        || m.get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
        || m.get("function_call").is_some_and(Value::is_object)
        || m.get("audio").is_some_and(Value::is_object)
}

/// A Responses object: its `output` items, once `completed`.
fn responses_empty(v: &Value) -> bool {
    let Some(items) = v.get("output").and_then(Value::as_array) else {
        return false;
    };
    str_of(v, "status") == Some("completed") && !items.iter().any(responses_item_answers)
}

fn responses_item_answers(item: &Value) -> bool {
    match str_of(item, "type") {
        Some("reasoning") => false,
        Some("message") => item
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|parts| {
                parts.iter().any(|p| match str_of(p, "type") {
                    Some("output_text") => non_empty(p, "text"),
                    Some("refusal") => non_empty(p, "refusal"),
                    _ => true,
                })
            }),
        _ => true,
    }
}

#[cfg(test)]
mod tests;
