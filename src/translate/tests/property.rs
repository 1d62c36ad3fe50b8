//! Property: random Anthropic requests of the supported subset survive Anthropic → Chat →
//! Anthropic with the same meaning (system, messages, tool ids and inputs, images, tools,
//! tool choice, limits). Out of the subset, because the mapping is knowingly lossy and
//! documented: `is_error` (becomes an `Error: ` prefix), images inside tool results, several
//! text blocks in one assistant turn (joined), thinking blocks (dropped).

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::config::Dialect;
use crate::translate::{ClientFormat, TargetOptions, translate_request};

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 é✓日\\n\"{}]{1,24}"
}

fn image() -> impl Strategy<Value = Value> {
    prop_oneof![
        (prop_oneof![Just("image/png"), Just("image/jpeg"), Just("image/webp")], "[A-Za-z0-9+/]{4,16}")
            .prop_map(|(m, d)| json!({"type": "image", "source": {"type": "base64", "media_type": m, "data": d}})),
        "[a-z]{1,8}".prop_map(|p| json!({"type": "image", "source": {"type": "url", "url": format!("https://img.example/{p}.png")}})),
    ]
}

fn input() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        text().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        any::<bool>().prop_map(Value::from),
        Just(Value::Null),
    ];
    let nested = leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..3).prop_map(|m| json!(m)),
        ]
    });
    prop::collection::btree_map("[a-z_]{1,8}", nested, 0..4).prop_map(|m| json!(m))
}

/// One exchange: user blocks (answering the previous calls first), then an assistant turn of
/// an optional text and 0..3 tool calls.
#[derive(Debug, Clone)]
struct Turn {
    user_parts: Vec<Value>,
    results: Vec<String>,
    text: Option<String>,
    calls: Vec<(String, Value)>,
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        prop::collection::vec(
            prop_oneof![3 => text().prop_map(|t| json!({"type": "text", "text": t})), 1 => image()],
            1..4,
        ),
        prop::collection::vec(text(), 3),
        prop::option::of(text()),
        prop::collection::vec(
            (
                prop_oneof![Just("Read"), Just("Bash"), Just("Edit")],
                input(),
            ),
            0..3,
        ),
    )
        .prop_map(|(user_parts, results, text, calls)| Turn {
            user_parts,
            results,
            text: if calls.is_empty() {
                text.or(Some("ok".into()))
            } else {
                text
            },
            calls: calls.into_iter().map(|(n, i)| (n.to_string(), i)).collect(),
        })
}

fn request() -> impl Strategy<Value = Value> {
    (
        prop::option::of(text()),
        prop::collection::vec(turn(), 1..4),
        1u64..100_000,
        prop::option::of(prop::collection::vec("[A-Z]{1,5}", 1..3)),
        any::<bool>(),
    )
        .prop_map(|(system, turns, max, stops, with_tools)| {
            build(system, &turns, max, stops, with_tools)
        })
}

fn build(
    system: Option<String>,
    turns: &[Turn],
    max: u64,
    stops: Option<Vec<String>>,
    with_tools: bool,
) -> Value {
    let mut messages = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    let mut n = 0;
    for t in turns {
        let mut user: Vec<Value> = pending
            .iter()
            .zip(t.results.iter().cycle())
            .map(|(id, r)| json!({"type": "tool_result", "tool_use_id": id, "content": r}))
            .collect();
        user.extend(t.user_parts.iter().cloned());
        messages.push(json!({"role": "user", "content": user}));
        let mut asst = Vec::new();
        if let Some(x) = &t.text {
            asst.push(json!({"type": "text", "text": x}));
        }
        pending.clear();
        for (name, input) in &t.calls {
            n += 1;
            let id = format!("toolu_{n:02}");
            asst.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
            pending.push(id);
        }
        messages.push(json!({"role": "assistant", "content": asst}));
    }
    let mut req = json!({"model": "claude-x", "max_tokens": max, "messages": messages});
    if let Some(s) = system {
        req["system"] = json!(s);
    }
    if let Some(s) = stops {
        req["stop_sequences"] = json!(s);
    }
    if with_tools {
        req["tools"] = json!([
            {"name": "Read", "description": "read", "input_schema": {"type": "object", "properties": {"p": {"type": "string"}}}},
            {"name": "Bash", "input_schema": {"type": "object"}},
        ]);
        req["tool_choice"] = json!({"type": "tool", "name": "Bash"});
    }
    req
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn anthropic_to_chat_to_anthropic_keeps_the_meaning(req in request()) {
        let opts = TargetOptions::default();
        let chat = translate_request(ClientFormat::Anthropic, Dialect::OpenAi, &serde_json::to_vec(&req).unwrap(), "gpt-x", &opts).unwrap();
        let back = translate_request(ClientFormat::Chat, Dialect::Anthropic, &chat.body, "claude-x", &opts).unwrap();
        let back: Value = serde_json::from_slice(&back.body).unwrap();
        prop_assert_eq!(&back["messages"], &req["messages"]);
        prop_assert_eq!(&back["system"], &req["system"]);
        prop_assert_eq!(&back["max_tokens"], &req["max_tokens"]);
        prop_assert_eq!(&back["stop_sequences"], &req["stop_sequences"]);
        prop_assert_eq!(&back["tools"], &req["tools"]);
        prop_assert_eq!(&back["tool_choice"], &req["tool_choice"]);
    }
}
