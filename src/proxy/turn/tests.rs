//! Table tests of the empty-turn rule: one row per case and dialect, for streams (framed and
//! tracked as the hold and the relay do) and for whole bodies.

use serde_json::{Value, json};

use super::reply_is_empty;
use crate::clock::{Clock, ManualClock};
use crate::proxy::sse::{StreamKind, StreamTracker};
use crate::wire::sse::SseFramer;

/// What the rule makes of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// Empty with nothing content-bearing: the hold fails the attempt (next target).
    Fallback,
    /// Empty, but its reasoning was content-bearing (it reached the client): relayed as it
    /// is, reported as an empty turn.
    Reported,
    /// Not an empty turn.
    Answer,
}

use Verdict::{Answer, Fallback, Reported};

fn named(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn data(v: Value) -> String {
    format!("data: {v}\n\n")
}

fn verdict(kind: StreamKind, events: &[String]) -> Verdict {
    let t0 = ManualClock::new().now();
    let mut framer = SseFramer::new();
    let mut tracker = StreamTracker::new(kind, t0);
    framer.push(events.concat().as_bytes()).unwrap();
    for ev in framer.by_ref() {
        tracker.observe(t0, &ev);
    }
    match (tracker.empty_turn(), tracker.seen_content()) {
        (true, false) => Fallback,
        (true, true) => Reported,
        (false, _) => Answer,
    }
}

// === Anthropic Messages events ===

fn a_start() -> String {
    named(
        "message_start",
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": null, "usage": {"input_tokens": 3, "output_tokens": 0}}}),
    )
}

fn a_block(index: u64, block: Value) -> String {
    named(
        "content_block_start",
        json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn a_delta(index: u64, delta: Value) -> String {
    named(
        "content_block_delta",
        json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn a_stop_block(index: u64) -> String {
    named(
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    )
}

fn a_end(stop_reason: &str) -> Vec<String> {
    vec![
        named(
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null}, "usage": {"output_tokens": 1}}),
        ),
        named("message_stop", json!({"type": "message_stop"})),
    ]
}

fn a_ping() -> String {
    named("ping", json!({"type": "ping"}))
}

fn a_turn(blocks: Vec<String>, stop_reason: &str) -> Vec<String> {
    let mut out = vec![a_start()];
    out.extend(blocks);
    out.extend(a_end(stop_reason));
    out
}

fn thinking_block() -> Vec<String> {
    vec![
        a_block(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        a_delta(
            0,
            json!({"type": "thinking_delta", "thinking": "Let me think."}),
        ),
        a_delta(0, json!({"type": "signature_delta", "signature": "c2ln"})),
        a_stop_block(0),
    ]
}

#[test]
fn anthropic_streams() {
    let text = vec![
        a_block(0, json!({"type": "text", "text": ""})),
        a_delta(0, json!({"type": "text_delta", "text": "Hi"})),
        a_stop_block(0),
    ];
    let mut thinking_then_text = thinking_block();
    thinking_then_text.extend([
        a_block(1, json!({"type": "text", "text": ""})),
        a_delta(1, json!({"type": "text_delta", "text": "Hi"})),
        a_stop_block(1),
    ]);
    let rows: Vec<(&str, Vec<String>, Verdict)> = vec![
        ("no content blocks", a_turn(vec![], "end_turn"), Fallback),
        (
            "pings only",
            a_turn(vec![a_ping(), a_ping()], "end_turn"),
            Fallback,
        ),
        (
            "an empty text block",
            a_turn(
                vec![
                    a_block(0, json!({"type": "text", "text": ""})),
                    a_delta(0, json!({"type": "text_delta", "text": ""})),
                    a_stop_block(0),
                ],
                "end_turn",
            ),
            Fallback,
        ),
        (
            "an empty thinking block",
            a_turn(
                vec![
                    a_block(
                        0,
                        json!({"type": "thinking", "thinking": "", "signature": ""}),
                    ),
                    a_stop_block(0),
                ],
                "end_turn",
            ),
            Fallback,
        ),
        (
            "ended by message_delta alone (no message_stop)",
            vec![a_start(), a_end("end_turn")[0].clone()],
            Fallback,
        ),
        (
            "a tool_use stop with no tool block",
            a_turn(vec![], "tool_use"),
            Fallback,
        ),
        (
            "only thinking",
            a_turn(thinking_block(), "end_turn"),
            Reported,
        ),
        (
            "only redacted thinking",
            a_turn(
                vec![
                    a_block(0, json!({"type": "redacted_thinking", "data": "ZW5j"})),
                    a_stop_block(0),
                ],
                "end_turn",
            ),
            Reported,
        ),
        ("text", a_turn(text, "end_turn"), Answer),
        (
            "thinking then text",
            a_turn(thinking_then_text, "end_turn"),
            Answer,
        ),
        (
            "a tool call with no arguments",
            a_turn(
                vec![
                    a_block(
                        0,
                        json!({"type": "tool_use", "id": "toolu_1", "name": "now", "input": {}}),
                    ),
                    a_stop_block(0),
                ],
                "tool_use",
            ),
            Answer,
        ),
        (
            "a server tool result",
            a_turn(
                vec![
                    a_block(
                        0,
                        json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}),
                    ),
                    a_stop_block(0),
                ],
                "end_turn",
            ),
            Answer,
        ),
        (
            "a block kind not known here",
            a_turn(
                vec![a_block(0, json!({"type": "hologram"})), a_stop_block(0)],
                "end_turn",
            ),
            Answer,
        ),
        (
            "only thinking, stopped at max_tokens (the client's budget)",
            a_turn(thinking_block(), "max_tokens"),
            Answer,
        ),
        (
            "nothing, stopped by the client's stop sequence",
            a_turn(vec![], "stop_sequence"),
            Answer,
        ),
        ("nothing, a refusal", a_turn(vec![], "refusal"), Answer),
        (
            "an error event is an error, not an empty turn",
            vec![
                a_start(),
                named(
                    "error",
                    json!({"type": "error", "error": {"type": "api_error", "message": "x"}}),
                ),
            ],
            Answer,
        ),
        (
            "no terminal event: truncated, not empty",
            vec![a_start()],
            Answer,
        ),
    ];
    for (name, events, want) in rows {
        assert_eq!(verdict(StreamKind::Anthropic, &events), want, "{name}");
    }
}

// === Chat Completions chunks ===

fn c_chunk(delta: Value, finish: Value) -> String {
    data(
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}),
    )
}

fn c_turn(deltas: Vec<Value>, finish: &str) -> Vec<String> {
    let mut out = vec![c_chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    out.extend(deltas.into_iter().map(|d| c_chunk(d, Value::Null)));
    out.push(c_chunk(json!({}), json!(finish)));
    out.push("data: [DONE]\n\n".into());
    out
}

#[test]
fn chat_streams() {
    let rows: Vec<(&str, Vec<String>, Verdict)> = vec![
        ("role chunk, then finish", c_turn(vec![], "stop"), Fallback),
        (
            "empty content deltas",
            c_turn(
                vec![json!({"content": ""}), json!({"content": null})],
                "stop",
            ),
            Fallback,
        ),
        (
            "a usage-only chunk",
            {
                let mut t = c_turn(vec![], "stop");
                t.insert(
                    t.len() - 1,
                    data(
                        json!({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 0}}),
                    ),
                );
                t
            },
            Fallback,
        ),
        (
            "only reasoning_content",
            c_turn(
                vec![
                    json!({"reasoning_content": "Let me think."}),
                    json!({"reasoning_content": " More."}),
                ],
                "stop",
            ),
            Reported,
        ),
        (
            "only reasoning",
            c_turn(vec![json!({"reasoning": "Hmm."})], "stop"),
            Reported,
        ),
        (
            "text",
            c_turn(vec![json!({"content": "Hi"})], "stop"),
            Answer,
        ),
        (
            "reasoning then text",
            c_turn(
                vec![
                    json!({"reasoning_content": "Hmm."}),
                    json!({"content": "Hi"}),
                ],
                "stop",
            ),
            Answer,
        ),
        (
            "a tool call",
            c_turn(
                vec![
                    json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "now", "arguments": ""}}]}),
                ],
                "tool_calls",
            ),
            Answer,
        ),
        (
            "audio output",
            c_turn(
                vec![json!({"audio": {"id": "a1", "data": "UklG", "transcript": ""}})],
                "stop",
            ),
            Answer,
        ),
        (
            "only reasoning, stopped at the length limit",
            c_turn(vec![json!({"reasoning_content": "Hmm."})], "length"),
            Answer,
        ),
        (
            "nothing, content filter",
            c_turn(vec![], "content_filter"),
            Answer,
        ),
        (
            "no [DONE]: truncated, not empty",
            c_turn(vec![], "stop")[..2].to_vec(),
            Answer,
        ),
    ];
    for (name, events, want) in rows {
        assert_eq!(verdict(StreamKind::OpenAiChat, &events), want, "{name}");
    }
}

// === Responses events ===

fn r_ev(v: Value) -> String {
    let name = v["type"].as_str().unwrap_or_default().to_string();
    named(&name, v)
}

fn r_turn(events: Vec<Value>, end: &str) -> Vec<String> {
    let mut out = vec![
        r_ev(
            json!({"type": "response.created", "response": {"id": "r1", "status": "in_progress"}}),
        ),
        r_ev(json!({"type": "response.in_progress", "response": {"id": "r1"}})),
    ];
    out.extend(events.into_iter().map(r_ev));
    out.push(r_ev(json!({"type": end, "response": {"id": "r1"}})));
    out
}

#[test]
fn responses_streams() {
    let rows: Vec<(&str, Vec<String>, Verdict)> = vec![
        (
            "created, then completed",
            r_turn(vec![], "response.completed"),
            Fallback,
        ),
        (
            "an empty message",
            r_turn(
                vec![
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "role": "assistant", "content": []}}),
                    json!({"type": "response.output_text.delta", "output_index": 0, "delta": ""}),
                    json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ""}]}}),
                ],
                "response.completed",
            ),
            Fallback,
        ),
        (
            "only a reasoning summary",
            r_turn(
                vec![
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "summary": []}}),
                    json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "Hmm."}),
                    json!({"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Hmm."}]}}),
                ],
                "response.completed",
            ),
            Reported,
        ),
        (
            "text",
            r_turn(
                vec![
                    json!({"type": "response.output_text.delta", "output_index": 0, "delta": "Hi"}),
                ],
                "response.completed",
            ),
            Answer,
        ),
        (
            "a function call",
            r_turn(
                vec![
                    json!({"type": "response.output_item.added", "output_index": 0, "item": {"type": "function_call", "call_id": "c1", "name": "now", "arguments": ""}}),
                    json!({"type": "response.function_call_arguments.delta", "output_index": 0, "delta": "{}"}),
                ],
                "response.completed",
            ),
            Answer,
        ),
        (
            "incomplete (an output limit)",
            r_turn(vec![], "response.incomplete"),
            Answer,
        ),
    ];
    for (name, events, want) in rows {
        assert_eq!(
            verdict(StreamKind::OpenAiResponses, &events),
            want,
            "{name}"
        );
    }
}

// === whole bodies ===

#[test]
fn anthropic_bodies() {
    let msg = |content: Value, stop: &str| json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": content, "stop_reason": stop, "usage": {"input_tokens": 1, "output_tokens": 1}});
    let thinking = json!({"type": "thinking", "thinking": "Hmm.", "signature": "c2ln"});
    let rows: Vec<(&str, Value, bool)> = vec![
        ("no content", msg(json!([]), "end_turn"), true),
        (
            "an empty text block",
            msg(json!([{"type": "text", "text": ""}]), "end_turn"),
            true,
        ),
        ("only thinking", msg(json!([thinking]), "end_turn"), true),
        (
            "only redacted thinking",
            msg(
                json!([{"type": "redacted_thinking", "data": "ZW5j"}]),
                "end_turn",
            ),
            true,
        ),
        (
            "thinking and text",
            msg(
                json!([thinking, {"type": "text", "text": "Hi"}]),
                "end_turn",
            ),
            false,
        ),
        (
            "a tool call",
            msg(
                json!([{"type": "tool_use", "id": "t1", "name": "now", "input": {}}]),
                "tool_use",
            ),
            false,
        ),
        (
            "a block kind not known here",
            msg(json!([{"type": "hologram"}]), "end_turn"),
            false,
        ),
        (
            "only thinking at max_tokens",
            msg(json!([thinking]), "max_tokens"),
            false,
        ),
        ("nothing, a refusal", msg(json!([]), "refusal"), false),
        (
            "an error object is not a turn",
            json!({"type": "error", "error": {"type": "api_error", "message": "x"}}),
            false,
        ),
    ];
    for (name, body, want) in rows {
        let b = body.to_string();
        assert_eq!(
            reply_is_empty(StreamKind::Anthropic, b.as_bytes()),
            want,
            "{name}"
        );
    }
    assert!(!reply_is_empty(StreamKind::Anthropic, b"not json"));
}

#[test]
fn chat_bodies() {
    let completion = |message: Value, finish: &str| json!({"id": "c1", "object": "chat.completion", "model": "m", "choices": [{"index": 0, "message": message, "finish_reason": finish}]});
    let rows: Vec<(&str, Value, bool)> = vec![
        (
            "null content",
            completion(json!({"role": "assistant", "content": null}), "stop"),
            true,
        ),
        (
            "empty content",
            completion(json!({"role": "assistant", "content": ""}), "stop"),
            true,
        ),
        (
            "only reasoning_content",
            completion(
                json!({"role": "assistant", "content": null, "reasoning_content": "Hmm."}),
                "stop",
            ),
            true,
        ),
        (
            "no choices",
            json!({"id": "c1", "object": "chat.completion", "choices": []}),
            true,
        ),
        (
            "text",
            completion(json!({"role": "assistant", "content": "Hi"}), "stop"),
            false,
        ),
        (
            "text parts",
            completion(
                json!({"role": "assistant", "content": [{"type": "text", "text": "Hi"}]}),
                "stop",
            ),
            false,
        ),
        (
            "a tool call",
            completion(
                json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}),
                "tool_calls",
            ),
            false,
        ),
        (
            "a refusal",
            completion(
                json!({"role": "assistant", "content": null, "refusal": "I can't."}),
                "stop",
            ),
            false,
        ),
        (
            "only reasoning at the length limit",
            completion(
                json!({"role": "assistant", "content": null, "reasoning_content": "Hmm."}),
                "length",
            ),
            false,
        ),
        (
            "not a completion",
            json!({"error": {"message": "x"}}),
            false,
        ),
    ];
    for (name, body, want) in rows {
        let b = body.to_string();
        assert_eq!(
            reply_is_empty(StreamKind::OpenAiChat, b.as_bytes()),
            want,
            "{name}"
        );
    }
}

#[test]
fn responses_bodies() {
    let response = |output: Value, status: &str| json!({"id": "r1", "object": "response", "status": status, "model": "m", "output": output});
    let reasoning = json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Hmm."}]});
    let rows: Vec<(&str, Value, bool)> = vec![
        ("no output", response(json!([]), "completed"), true),
        (
            "only reasoning",
            response(json!([reasoning]), "completed"),
            true,
        ),
        (
            "an empty message",
            response(
                json!([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ""}]}]),
                "completed",
            ),
            true,
        ),
        (
            "text",
            response(
                json!([reasoning, {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]}]),
                "completed",
            ),
            false,
        ),
        (
            "a function call",
            response(
                json!([{"type": "function_call", "call_id": "c1", "name": "now", "arguments": "{}"}]),
                "completed",
            ),
            false,
        ),
        (
            "incomplete (an output limit)",
            response(json!([reasoning]), "incomplete"),
            false,
        ),
        (
            "still running (background)",
            response(json!([]), "queued"),
            false,
        ),
    ];
    for (name, body, want) in rows {
        let b = body.to_string();
        assert_eq!(
            reply_is_empty(StreamKind::OpenAiResponses, b.as_bytes()),
            want,
            "{name}"
        );
    }
}

#[test]
fn the_fast_path_never_calls_a_turn_empty_and_agrees_with_the_full_check() {
    use super::shows_an_answer;
    let rows: [(StreamKind, &str, bool); 8] = [
        (
            StreamKind::Anthropic,
            r#"{"content":[{"type":"text","text":"Hi"}],"stop_reason":"end_turn"}"#,
            true,
        ),
        (
            StreamKind::Anthropic,
            r#"{"content": [{"type": "text", "text": "Hi"}]}"#,
            true,
        ),
        (
            StreamKind::Anthropic,
            r#"{"content":[{"type":"tool_use","id":"t","name":"n","input":{}}]}"#,
            true,
        ),
        // Only thinking, whose text mentions the key: escaped quotes are not the key.
        (
            StreamKind::Anthropic,
            r#"{"content":[{"type":"thinking","thinking":"say \"text\":\"x\""}],"stop_reason":"end_turn"}"#,
            false,
        ),
        (
            StreamKind::Anthropic,
            r#"{"content":[{"type":"text","text":""}],"stop_reason":"end_turn"}"#,
            false,
        ),
        (
            StreamKind::OpenAiChat,
            r#"{"choices":[{"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}"#,
            true,
        ),
        (
            StreamKind::OpenAiChat,
            r#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c"}]},"finish_reason":"tool_calls"}]}"#,
            true,
        ),
        (
            StreamKind::OpenAiChat,
            r#"{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"stop"}]}"#,
            false,
        ),
    ];
    for (kind, body, answers) in rows {
        assert_eq!(shows_an_answer(kind, body.as_bytes()), answers, "{body}");
        if answers {
            assert!(!reply_is_empty(kind, body.as_bytes()), "{body}");
        }
    }
    assert!(
        reply_is_empty(StreamKind::Anthropic, rows[3].1.as_bytes()),
        "thinking only"
    );
    assert!(
        reply_is_empty(StreamKind::OpenAiChat, rows[7].1.as_bytes()),
        "empty content"
    );
}
