//! Wire-format builders for the mock upstream: Anthropic Messages JSON and SSE, OpenAI chat
//! completions and Responses objects, shaped like the real APIs (clients-and-conventions §2–§3).

use serde_json::{Value, json};

/// A non-streaming Messages API response with one text block.
pub fn anthropic_message(model: &str, text: &str) -> Value {
    json!({
        "id": "msg_01MockUpstream",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": text}],
        "model": model,
        "stop_reason": "end_turn",
        "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 7}
    })
}

fn sse_event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A complete Messages SSE stream with one text block, one string per event.
pub fn anthropic_text_events(model: &str, text: &str) -> Vec<String> {
    let start = json!({"type": "message_start", "message": {"id": "msg_01MockUpstream", "type": "message",
        "role": "assistant", "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 1}}});
    vec![
        sse_event("message_start", &start),
        sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        sse_event("ping", &json!({"type": "ping"})),
        sse_event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ),
        sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ),
        sse_event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                "usage": {"output_tokens": 7}}),
        ),
        sse_event("message_stop", &json!({"type": "message_stop"})),
    ]
}

/// A complete Messages SSE stream whose one block is a `tool_use` of tool `name` with id `id`,
/// its input JSON sent as the `input_json_delta` fragments `parts`; ends with `tool_use`.
pub fn anthropic_tool_use_events(model: &str, id: &str, name: &str, parts: &[&str]) -> Vec<String> {
    let start = json!({"type": "message_start", "message": {"id": "msg_01MockTool", "type": "message",
        "role": "assistant", "content": [], "model": model, "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 12, "output_tokens": 1}}});
    let mut events = vec![
        sse_event("message_start", &start),
        sse_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ),
    ];
    events.extend(parts.iter().map(|p| {
        sse_event(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": p}}),
        )
    }));
    events.extend([
        sse_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ),
        sse_event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
                "usage": {"output_tokens": 7}}),
        ),
        sse_event("message_stop", &json!({"type": "message_stop"})),
    ]);
    events
}

/// A non-streaming `chat.completion`.
pub fn chat_completion(model: &str, text: &str) -> Value {
    json!({
        "id": "chatcmpl-Mock",
        "object": "chat.completion",
        "created": 1_764_460_800,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text, "refusal": null},
            "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

/// A non-streaming Responses API object.
pub fn responses_object(model: &str, text: &str) -> Value {
    json!({
        "id": "resp_Mock",
        "object": "response",
        "created_at": 1_764_460_800,
        "status": "completed",
        "model": model,
        "output": [{"type": "message", "id": "msg_Mock", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    })
}
