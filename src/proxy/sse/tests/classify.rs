//! Classification per fixture and per dialect edge case.

use super::{feed, fixture};
use crate::proxy::sse::{
    Activity, BlockEdge, EventClass, EventKind, StreamKind, Terminal, classify_event,
};
use crate::wire::dialect::sse_error_event;
use crate::wire::sse::SseFramer;

use EventKind::{Content as C, Keepalive as K, Lifecycle as L, Metadata as M, Reasoning as R};

fn classes(kind: StreamKind, bytes: &[u8]) -> Vec<EventClass> {
    let (ev, t) = feed(bytes);
    assert!(!t.is_truncated());
    ev.iter().map(|e| classify_event(kind, e)).collect()
}

fn one(kind: StreamKind, frame: &str) -> EventClass {
    let mut f = SseFramer::new();
    f.push(frame.as_bytes()).unwrap();
    let e = f.next_event().unwrap();
    assert_eq!(f.next_event(), None);
    classify_event(kind, &e)
}

/// (kind, content_bearing, progress) per event.
fn flags(cs: &[EventClass]) -> Vec<(EventKind, bool, bool)> {
    cs.iter()
        .map(|c| (c.kind, c.content_bearing, c.progress))
        .collect()
}

const T: EventKind = EventKind::Terminal;

#[test]
fn anthropic_text() {
    let cs = classes(StreamKind::Anthropic, fixture("anthropic-text"));
    assert_eq!(
        flags(&cs),
        vec![
            (L, false, false), // message_start
            (L, false, false), // content_block_start, empty text
            (K, false, false), // ping before content: keepalive
            (C, true, true),   // first text_delta: content
            (C, true, true),
            (C, true, true),
            (C, true, true),
            (C, true, true),
            (L, false, false), // content_block_stop
            (T, false, false), // message_delta with stop_reason
            (T, false, false), // message_stop
        ]
    );
    assert_eq!(cs[1].block, Some(BlockEdge::Start(0)));
    assert_eq!(cs[8].block, Some(BlockEdge::Stop(0)));
    assert_eq!(cs[9].terminal, Some(Terminal::StopReason));
    assert_eq!(cs[10].terminal, Some(Terminal::Done));
    assert_eq!(cs[3].text_bytes, 4);
    assert_eq!(cs[4].text_bytes, " — here".len());
    assert!(cs.iter().all(|c| c.error.is_none()));
    assert!(cs[2].is_keepalive() && !cs[2].is_useful());
}

#[test]
fn anthropic_thinking_tool() {
    let cs = classes(StreamKind::Anthropic, fixture("anthropic-thinking-tool"));
    assert_eq!(
        flags(&cs),
        vec![
            (L, false, false), // message_start
            (L, false, false), // thinking block start (empty)
            (R, true, true),   // thinking_delta: progress and content-bearing
            (R, true, true),
            (R, true, true), // signature_delta, non-empty
            (L, false, false),
            (L, false, false), // tool_use block start, `input: {}`
            (C, true, true),   // input_json_delta "" (still a tool-input delta)
            (C, true, true),
            (C, true, true),
            (L, false, false),
            (T, false, false),
            (T, false, false),
        ]
    );
    assert_eq!(cs[1].activity, Activity::Reasoning);
    assert_eq!(cs[2].activity, Activity::Reasoning);
    assert_eq!(cs[6].activity, Activity::ToolCall);
    assert_eq!(cs[8].activity, Activity::ToolCall);
    assert!(cs.iter().all(|c| c.text_bytes == 0), "no text deltas");
}

/// Signature-only thinking (`display: omitted`): §6 lists signature deltas as content-bearing
/// for the hold and non-empty signatures as stall progress; the kind stays Reasoning.
#[test]
fn anthropic_thinking_omitted() {
    let cs = classes(StreamKind::Anthropic, fixture("anthropic-thinking-omitted"));
    assert_eq!(
        flags(&cs),
        vec![
            (L, false, false),
            (L, false, false),
            (R, true, true), // signature_delta only
            (L, false, false),
            (L, false, false),
            (C, true, true),
            (L, false, false),
            (T, false, false),
            (T, false, false),
        ]
    );
    let empty_sig = one(
        StreamKind::Anthropic,
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"signature_delta\",\"signature\":\"\"}}\n\n",
    );
    assert_eq!(
        (empty_sig.content_bearing, empty_sig.progress),
        (false, false)
    );
}

#[test]
fn anthropic_error_before_content() {
    let cs = classes(
        StreamKind::Anthropic,
        fixture("anthropic-error-before-content"),
    );
    assert_eq!(cs[0].kind, L);
    assert_eq!(cs[1].kind, EventKind::Error);
    let e = cs[1].error.as_ref().unwrap();
    assert_eq!(e.error_type, "overloaded_error");
    assert_eq!(e.message, "Overloaded");
    assert!(e.is_overloaded());
    assert!(e.body.contains("overloaded_error"));
    assert!(cs.iter().all(|c| !c.content_bearing));
}

#[test]
fn openai_chat_text() {
    let cs = classes(StreamKind::OpenAiChat, fixture("openai-chat-text"));
    assert_eq!(
        flags(&cs),
        vec![
            (L, false, false), // role-only first chunk (content "")
            (C, true, true),
            (C, true, true),
            (C, true, true),
            (L, false, false), // finish_reason, empty delta
            (M, false, false), // usage chunk with empty choices
            (T, false, false), // [DONE]
        ]
    );
    assert_eq!(cs[6].terminal, Some(Terminal::Done));
    assert_eq!(cs[3].text_bytes, " it is: café ✓.".len());
}

#[test]
fn openai_chat_tools() {
    let cs = classes(StreamKind::OpenAiChat, fixture("openai-chat-tools"));
    assert_eq!(
        flags(&cs),
        vec![
            (L, false, false),
            (C, true, true), // tool_calls with name, empty arguments
            (C, true, true),
            (C, true, true),
            (L, false, false),
            (T, false, false),
        ]
    );
    assert!(cs[1..4].iter().all(|c| c.activity == Activity::ToolCall));
}

#[test]
fn openai_responses() {
    let cs = classes(StreamKind::OpenAiResponses, fixture("openai-responses"));
    assert_eq!(
        flags(&cs),
        vec![
            (L, false, false), // response.created
            (L, false, false), // response.in_progress
            (R, false, true),  // reasoning item added (empty): progress only
            (R, true, true),   // reasoning item done with encrypted content
            (L, false, false), // message item added
            (L, false, false), // content_part.added
            (C, true, true),   // output_text.delta
            (C, true, true),
            (C, true, true),
            (L, false, false), // output_text.done
            (L, false, false), // content_part.done
            (L, false, false), // output_item.done
            (T, false, false), // response.completed
        ]
    );
    assert_eq!(cs[12].terminal, Some(Terminal::Done));
    assert_eq!(cs[6].text_bytes, 5);
}

/// A14 / mid-stream errors in each dialect, including sluice's own terminal error events.
#[test]
fn errors_in_each_dialect() {
    let chat = one(
        StreamKind::OpenAiChat,
        "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\",\"code\":\"server_is_overloaded\"}}\n\n",
    );
    let e = chat.error.unwrap();
    assert_eq!(chat.kind, EventKind::Error);
    assert_eq!(e.error_type, "server_error");
    assert_eq!(e.code.as_deref(), Some("server_is_overloaded"));
    assert!(e.is_overloaded());

    // A14(b): Responses first event is an error.
    let r = one(
        StreamKind::OpenAiResponses,
        "data: {\"type\":\"error\",\"error\":{\"type\":\"service_unavailable_error\",\"code\":\"server_is_overloaded\"}}\n\n",
    );
    assert_eq!(r.kind, EventKind::Error);
    assert_eq!(r.error.unwrap().error_type, "service_unavailable_error");
    // The documented Responses `error` event carries code/message at the top level.
    let r = one(
        StreamKind::OpenAiResponses,
        "event: error\ndata: {\"type\":\"error\",\"code\":\"rate_limit_exceeded\",\"message\":\"slow down\",\"param\":null,\"sequence_number\":3}\n\n",
    );
    let e = r.error.unwrap();
    assert_eq!(
        (e.error_type.as_str(), e.message.as_str()),
        ("rate_limit_exceeded", "slow down")
    );

    // sluice's own error events round-trip.
    for (kind, overloaded, ty) in [
        (StreamKind::Anthropic, true, "overloaded_error"),
        (StreamKind::Anthropic, false, "api_error"),
        (StreamKind::OpenAiChat, true, "server_error"),
        (StreamKind::OpenAiResponses, false, "server_error"),
    ] {
        let bytes = sse_error_event(kind, "cut", overloaded);
        let (ev, t) = feed(&bytes);
        assert!(!t.is_truncated());
        let c = classify_event(kind, &ev[0]);
        assert_eq!(c.kind, EventKind::Error, "{kind:?}");
        let e = c.error.unwrap();
        assert_eq!(e.error_type, ty, "{kind:?}");
        assert_eq!(e.message, "cut");
        assert_eq!(e.is_overloaded(), overloaded);
        if kind == StreamKind::OpenAiChat {
            assert_eq!(classify_event(kind, &ev[1]).terminal, Some(Terminal::Done));
        }
        if kind == StreamKind::OpenAiResponses {
            assert_eq!(
                c.terminal,
                Some(Terminal::Failed),
                "response.failed is terminal too"
            );
        }
    }
}

#[test]
fn dialect_edge_cases() {
    // Unknown events pass as Other, never errors.
    for (kind, frame) in [
        (
            StreamKind::Anthropic,
            "event: brand_new\ndata: {\"type\":\"brand_new\"}\n\n",
        ),
        (StreamKind::Anthropic, "data: not json\n\n"),
        (StreamKind::OpenAiChat, "data: not json\n\n"),
        (
            StreamKind::OpenAiResponses,
            "event: response.web_search_call.searching\ndata: {\"type\":\"response.web_search_call.searching\"}\n\n",
        ),
    ] {
        let c = one(kind, frame);
        assert_eq!(c.kind, EventKind::Other, "{frame}");
        assert!(c.error.is_none() && c.is_useful());
    }
    // Chat reasoning deltas: progress and content-bearing ("reasoning" per §6).
    for key in ["reasoning", "reasoning_content"] {
        let c = one(
            StreamKind::OpenAiChat,
            &format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"{key}\":\"hm\"}}}}]}}\n\n"),
        );
        assert_eq!((c.kind, c.content_bearing, c.progress), (R, true, true));
        assert_eq!((c.activity, c.text_bytes), (Activity::Reasoning, 0));
    }
    // Refusal is content; `choices: null` usage chunks are metadata; empty data is a keepalive.
    let c = one(
        StreamKind::OpenAiChat,
        "data: {\"choices\":[{\"delta\":{\"refusal\":\"no\"}}]}\n\n",
    );
    assert_eq!((c.kind, c.content_bearing, c.text_bytes), (C, true, 2));
    let c = one(
        StreamKind::OpenAiChat,
        "data: {\"choices\":null,\"usage\":{}}\n\n",
    );
    assert_eq!(c.kind, M);
    assert_eq!(one(StreamKind::OpenAiChat, "data: \n\n").kind, K);
    assert_eq!(
        one(StreamKind::OpenAiChat, ": OPENROUTER PROCESSING\n\n").kind,
        K
    );
    // message_delta without stop_reason is metadata; citations are content.
    let c = one(
        StreamKind::Anthropic,
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null},\"usage\":{\"output_tokens\":3}}\n\n",
    );
    assert_eq!(c.kind, M);
    let c = one(
        StreamKind::Anthropic,
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\",\"citation\":{}}}\n\n",
    );
    assert_eq!((c.kind, c.content_bearing, c.progress), (C, true, true));
    // An empty text delta bears nothing.
    let c = one(
        StreamKind::Anthropic,
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"\"}}\n\n",
    );
    assert_eq!((c.kind, c.content_bearing, c.progress), (C, false, false));
    // Responses: tool-argument deltas are content; reasoning summary deltas are reasoning;
    // response.incomplete is a terminal marker.
    let c = one(
        StreamKind::OpenAiResponses,
        "event: response.function_call_arguments.delta\ndata: {\"type\":\"response.function_call_arguments.delta\",\"delta\":\"{\\\"a\"}\n\n",
    );
    assert_eq!(
        (c.kind, c.content_bearing, c.activity),
        (C, true, Activity::ToolCall)
    );
    let c = one(
        StreamKind::OpenAiResponses,
        "event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"thinking\"}\n\n",
    );
    assert_eq!((c.kind, c.content_bearing, c.progress), (R, true, true));
    let c = one(
        StreamKind::OpenAiResponses,
        "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"status\":\"incomplete\"}}\n\n",
    );
    assert_eq!((c.kind, c.terminal), (T, Some(Terminal::Incomplete)));
    assert!(c.error.is_none());
    // The event name is the fallback when data carries no type.
    let c = one(StreamKind::Anthropic, "event: ping\ndata: {}\n\n");
    assert_eq!(c.kind, K);
    // Heartbeats classify as keepalives.
    for kind in [
        StreamKind::Anthropic,
        StreamKind::OpenAiChat,
        StreamKind::OpenAiResponses,
    ] {
        let c = one(
            kind,
            std::str::from_utf8(crate::proxy::sse::heartbeat(kind)).unwrap(),
        );
        assert_eq!(c.kind, K);
    }
}
