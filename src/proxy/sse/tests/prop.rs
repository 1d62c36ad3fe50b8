//! Property tests (proptest) for the framer and classifier over arbitrary, SSE-shaped bytes:
//! chunking never changes the result, the bytes pass through exactly, the partial-event buffer
//! stays bounded, and classifying whatever comes out never panics.

use proptest::prelude::*;

use crate::proxy::sse::{StreamKind, classify_event};
use crate::wire::sse::{Event, SseFramer, Trailing};

/// Cases per property: 64 (the debug build frames slowly), or 4096 with
/// `SLUICE_RELIABILITY=long`.
fn config() -> ProptestConfig {
    let long = std::env::var("SLUICE_RELIABILITY").is_ok_and(|v| v == "long");
    ProptestConfig {
        cases: if long { 4096 } else { 64 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Pieces SSE streams are made of, plus arbitrary bytes (invalid UTF-8 included).
fn piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"data: ".to_vec()),
        Just(b"data:".to_vec()),
        Just(b"event: ".to_vec()),
        Just(b"id: 7".to_vec()),
        Just(b"retry: 10".to_vec()),
        Just(b": ping".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"\r".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n\n".to_vec()),
        Just("é€😀".as_bytes().to_vec()),
        Just(br#"{"type":"message_stop"}"#.to_vec()),
        Just(br#"{"type":"error","error":{"type":"overloaded_error","message":"x"}}"#.to_vec()),
        Just(br#"{"choices":[{"delta":{"content":"hi"}}]}"#.to_vec()),
        Just(b"[DONE]".to_vec()),
        Just(br#"{"type":"response.completed"}"#.to_vec()),
        "[a-z_.]{1,12}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..16),
    ]
}

fn stream() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(piece(), 0..80).prop_map(|v| v.concat())
}

/// Feeds `input` in chunks ending at `cuts` (any offsets; sorted and clamped here).
fn run(input: &[u8], cuts: &[usize], max: usize) -> (Vec<Event>, Trailing, usize) {
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
    cuts.sort_unstable();
    let mut f = SseFramer::with_max_event_size(max);
    let mut events = Vec::new();
    let mut from = 0;
    let mut most_pending = 0;
    for c in cuts.into_iter().chain(std::iter::once(input.len())) {
        if f.push(&input[from..c]).is_err() {
            break;
        }
        most_pending = most_pending.max(f.pending().len());
        events.extend(f.by_ref());
        from = c;
    }
    let t = f.finish();
    events.extend(t.events.iter().cloned());
    (events, t, most_pending)
}

proptest! {
    #![proptest_config(config())]

    /// Parsing in chunks equals parsing whole, at any set of chunk boundaries.
    #[test]
    fn chunking_never_changes_the_events(input in stream(), cuts in prop::collection::vec(any::<usize>(), 0..12)) {
        let (whole, tw, _) = run(&input, &[], 1 << 20);
        let (split, ts, _) = run(&input, &cuts, 1 << 20);
        prop_assert_eq!(&whole, &split);
        prop_assert_eq!(tw.partial, ts.partial);
        prop_assert_eq!(tw.error, ts.error);
    }

    /// Without an error, the events' raw bytes plus the unfinished tail are the input exactly.
    #[test]
    fn bytes_pass_through_exactly(input in stream(), cuts in prop::collection::vec(any::<usize>(), 0..12)) {
        let (events, t, _) = run(&input, &cuts, 1 << 20);
        prop_assume!(t.error.is_none());
        let mut out: Vec<u8> = events.iter().flat_map(|e| e.raw.iter().copied()).collect();
        out.extend_from_slice(&t.partial);
        prop_assert_eq!(out, input);
    }

    /// With a small limit the buffer never holds more than the limit, and every event that
    /// comes out is within it; an oversized event is a sticky error, never a panic.
    #[test]
    fn partial_buffer_is_bounded(input in stream(), cuts in prop::collection::vec(any::<usize>(), 0..12), max in 1usize..200) {
        let (events, _, most_pending) = run(&input, &cuts, max);
        prop_assert!(most_pending <= max, "pending {most_pending} > limit {max}");
        for e in &events {
            prop_assert!(e.raw.len() <= max, "event of {} bytes > limit {max}", e.raw.len());
        }
    }

    /// Classifying any framed event of any dialect never panics, and a comment-only event is
    /// never an error or a terminal marker.
    #[test]
    fn classifying_never_panics(input in stream()) {
        let (events, _, _) = run(&input, &[], 1 << 20);
        for e in &events {
            for kind in [StreamKind::Anthropic, StreamKind::OpenAiChat, StreamKind::OpenAiResponses] {
                let c = classify_event(kind, e);
                if e.is_comment_only || e.is_blank {
                    prop_assert!(c.error.is_none() && c.terminal.is_none());
                }
            }
        }
    }

    /// Arbitrary JSON in a `data:` field (any dialect, any event name) never panics the classifier.
    #[test]
    fn classifying_arbitrary_json_never_panics(name in prop::option::of("[a-z_.]{0,24}"), data in json()) {
        let text = match &name {
            Some(n) => format!("event: {n}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        };
        let (events, _, _) = run(text.as_bytes(), &[], 1 << 20);
        for e in &events {
            for kind in [StreamKind::Anthropic, StreamKind::OpenAiChat, StreamKind::OpenAiResponses] {
                let _ = classify_event(kind, e);
            }
        }
    }
}

/// JSON values shaped like the dialects' events: known `type` words and field names, any values.
fn json() -> impl Strategy<Value = serde_json::Value> {
    use serde_json::Value;
    let word = prop_oneof![
        Just("type"),
        Just("error"),
        Just("delta"),
        Just("text"),
        Just("choices"),
        Just("content"),
        Just("message_stop"),
        Just("content_block_delta"),
        Just("text_delta"),
        Just("thinking_delta"),
        Just("response.completed"),
        Just("response.failed"),
        Just("overloaded_error"),
        Just("code"),
        Just("finish_reason"),
        Just("tool_calls"),
        Just("reasoning_content"),
        Just("index"),
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        word.clone().prop_map(|w| Value::String(w.into())),
        ".{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((word.clone(), inner), 0..5).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
        ]
    })
}
