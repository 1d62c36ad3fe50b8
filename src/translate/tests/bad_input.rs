//! Bad input: every case is a clear error or a correct translation, never a panic or a
//! stream without its terminal event.

use serde_json::{Value, json};

use super::split::well_formed;
use super::{context, golden::terminal_count};
use crate::config::Dialect;
use crate::translate::{
    ClientFormat, StreamTranslator, TargetOptions, TranslateError, translate_request,
    translate_response,
};

fn stream(upstream: Dialect, client: ClientFormat, input: &[u8]) -> Vec<u8> {
    let mut t = StreamTranslator::new(upstream, &context(client, None)).unwrap();
    let mut out = t.feed(input).to_vec();
    out.extend_from_slice(&t.finish());
    out
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    format!(
        "data: {}\n\n",
        json!({"id": "c", "object": "chat.completion.chunk", "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    )
}

#[test]
fn malformed_tool_arguments_from_a_chat_stream_pass_through_and_the_stream_ends_cleanly() {
    let input = [
        chunk(json!({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": tru"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_string(),
    ]
    .concat();
    let out = stream(Dialect::OpenAi, ClientFormat::Anthropic, input.as_bytes());
    well_formed("anthropic", &out).unwrap();
    let s = String::from_utf8(out).unwrap();
    assert!(
        s.contains(r#""partial_json":"{\"a\": tru""#),
        "fragments are relayed unchanged: {s}"
    );
    assert!(s.contains(r#""stop_reason":"tool_use""#));
}

#[test]
fn a_chat_stream_that_reopens_a_closed_tool_call_ends_with_an_error_event() {
    let input = [
        chunk(json!({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "f", "arguments": "{\"x\":"}}]}), None),
        chunk(json!({"content": "text in between"}), None),
        chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "1}"}}]}), None),
        chunk(json!({}), Some("tool_calls")),
    ]
    .concat();
    let out = stream(Dialect::OpenAi, ClientFormat::Anthropic, input.as_bytes());
    well_formed("anthropic", &out).unwrap();
    assert_eq!(terminal_count(&out, "anthropic"), 1);
    assert!(String::from_utf8_lossy(&out).contains("event: error"));
}

#[test]
fn tool_results_without_a_matching_call_are_refused_in_every_direction() {
    let opts = TargetOptions::default();
    let a = json!({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "r"}]}]});
    let c =
        json!({"model": "m", "messages": [{"role": "tool", "tool_call_id": "x", "content": "r"}]});
    let r = json!({"model": "m", "input": [{"type": "function_call_output", "call_id": "x", "output": "r"}]});
    for (client, up, body) in [
        (ClientFormat::Anthropic, Dialect::OpenAi, a),
        (ClientFormat::Chat, Dialect::Anthropic, c),
        (ClientFormat::Responses, Dialect::Anthropic, r.clone()),
        (ClientFormat::Responses, Dialect::OpenAi, r),
    ] {
        let e = translate_request(client, up, body.to_string().as_bytes(), "t", &opts).unwrap_err();
        assert!(matches!(e, TranslateError::Invalid { .. }), "{e}");
        assert_eq!(e.status(), 400);
    }
}

#[test]
fn an_empty_choices_array_is_an_upstream_error_or_ignored_in_a_stream() {
    let ctx = context(ClientFormat::Anthropic, None);
    let e = translate_response(Dialect::OpenAi, br#"{"id":"x","choices":[]}"#, &ctx).unwrap_err();
    assert_eq!(e.status(), 502);
    let e = translate_response(Dialect::OpenAi, b"<html>bad gateway</html>", &ctx).unwrap_err();
    assert!(matches!(e, TranslateError::Upstream(_)));
    let input = [
        chunk(json!({"content": "hi"}), None),
        r#"data: {"id":"c","object":"chat.completion.chunk","choices":[]}"#.to_string() + "\n\n",
        r#"data: {"id":"c","object":"chat.completion.chunk","choices":null}"#.to_string() + "\n\n",
        chunk(json!({}), Some("stop")),
        "data: [DONE]\n\n".into(),
    ]
    .concat();
    let out = stream(Dialect::OpenAi, ClientFormat::Anthropic, input.as_bytes());
    well_formed("anthropic", &out).unwrap();
    assert!(String::from_utf8_lossy(&out).contains("event: message_stop"));
}

#[test]
fn unknown_stream_events_are_ignored() {
    let input = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{}}}\n\n\
        event: brand_new_event\ndata: {\"type\":\"brand_new_event\",\"x\":1}\n\n\
        event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"future_delta\",\"z\":1}}\n\n\
        event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n\
        : a comment\n\n\
        event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n\
        event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n\
        event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    for client in [ClientFormat::Chat, ClientFormat::Responses] {
        let out = stream(Dialect::Anthropic, client, input.as_bytes());
        let name = if client == ClientFormat::Chat {
            "chat"
        } else {
            "responses"
        };
        well_formed(name, &out).unwrap();
        let s = String::from_utf8_lossy(&out);
        assert!(s.contains("\"ok\""), "{s}");
        assert!(
            !s.contains("brand_new") && !s.contains("future_delta"),
            "{s}"
        );
    }
}

#[test]
fn a_five_megabyte_tool_result_translates_whole() {
    let big = "x".repeat(5 << 20);
    let a = json!({"model": "m", "max_tokens": 5, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": big}]}]});
    let out = translate_request(
        ClientFormat::Anthropic,
        Dialect::OpenAi,
        a.to_string().as_bytes(),
        "g",
        &TargetOptions::default(),
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&out.body).unwrap();
    assert_eq!(
        v["messages"][2]["content"].as_str().map(str::len),
        Some(5 << 20)
    );
    let back = translate_request(
        ClientFormat::Chat,
        Dialect::Anthropic,
        &out.body,
        "c",
        &TargetOptions::default(),
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&back.body).unwrap();
    assert_eq!(
        v["messages"][2]["content"][0]["content"]
            .as_str()
            .map(str::len),
        Some(5 << 20)
    );
    // …and 5 MB of tool arguments in one stream event.
    let input = chunk(
        json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "W", "arguments": json!({"s": big}).to_string()}}]}),
        Some("tool_calls"),
    );
    let out = stream(Dialect::OpenAi, ClientFormat::Responses, input.as_bytes());
    well_formed("responses", &out).unwrap();
    assert!(
        out.len() > 3 * (5 << 20),
        "delta, done and completed each carry the arguments"
    );
}

#[test]
fn an_oversized_event_and_garbage_end_with_one_error_event() {
    let huge = format!(
        "data: {}",
        "y".repeat(super::super::stream::MAX_EVENT_SIZE + 10)
    );
    for client in [ClientFormat::Anthropic, ClientFormat::Responses] {
        let up = if client == ClientFormat::Anthropic {
            Dialect::OpenAi
        } else {
            Dialect::Anthropic
        };
        let name = if client == ClientFormat::Anthropic {
            "anthropic"
        } else {
            "responses"
        };
        for input in [
            huge.as_bytes(),
            b"\x00\xff\xfe garbage \n\n data: {not json}\n\n",
            b"",
        ] {
            let mut t = StreamTranslator::new(up, &context(client, None)).unwrap();
            let mut out = t.feed(input).to_vec();
            out.extend_from_slice(
                &t.feed(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"),
            );
            out.extend_from_slice(&t.finish());
            assert_eq!(
                terminal_count(&out, name),
                1,
                "{}",
                String::from_utf8_lossy(&out[..out.len().min(300)])
            );
            well_formed(name, &out).unwrap();
        }
    }
}

#[test]
fn non_json_and_same_dialect_requests_are_typed_errors() {
    let opts = TargetOptions::default();
    let e = translate_request(
        ClientFormat::Anthropic,
        Dialect::OpenAi,
        b"{not json",
        "m",
        &opts,
    )
    .unwrap_err();
    assert!(matches!(e, TranslateError::InvalidJson(_)));
    let e =
        translate_request(ClientFormat::Chat, Dialect::Anthropic, b"[1]", "m", &opts).unwrap_err();
    assert!(matches!(e, TranslateError::InvalidJson(_)));
    let e = translate_request(
        ClientFormat::Anthropic,
        Dialect::Anthropic,
        b"{}",
        "m",
        &opts,
    )
    .unwrap_err();
    assert_eq!(e, TranslateError::SameDialect);
    assert!(StreamTranslator::new(Dialect::OpenAi, &context(ClientFormat::Chat, None)).is_err());
    // Wrong types inside a valid body are field errors, not panics.
    for body in [
        json!({"model": "m", "messages": "nope"}),
        json!({"model": "m", "messages": [{"role": "user", "content": 5}]}),
        json!({"model": "m", "messages": [{"role": "robot", "content": "x"}]}),
        json!({"model": "m", "messages": [{"role": "user", "content": [{"text": "no type"}]}]}),
    ] {
        let r = translate_request(
            ClientFormat::Anthropic,
            Dialect::OpenAi,
            body.to_string().as_bytes(),
            "m",
            &opts,
        );
        assert!(
            r.is_ok() || r.as_ref().is_err_and(|e| e.field().is_some()),
            "{body}: {r:?}"
        );
    }
}

#[test]
fn tool_call_fragments_across_many_chunks_reassemble_exactly() {
    // Two calls, the second interleaved with the first, each argument split into 1-3 byte
    // fragments.
    let a = r#"{"command": "echo \"hi\" ☃", "timeout": 5}"#;
    let b = r#"{"file_path": "/tmp/日本語.txt"}"#;
    let frags = |s: &str| -> Vec<String> {
        let chars: Vec<char> = s.chars().collect();
        chars.chunks(2).map(|c| c.iter().collect()).collect()
    };
    let mut input = chunk(
        json!({"tool_calls": [{"index": 0, "id": "call_a", "function": {"name": "Bash", "arguments": ""}}]}),
        None,
    );
    input += &chunk(
        json!({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "Read", "arguments": ""}}]}),
        None,
    );
    let (fa, fb) = (frags(a), frags(b));
    for i in 0..fa.len().max(fb.len()) {
        for (idx, f) in [(0, fa.get(i)), (1, fb.get(i))] {
            if let Some(f) = f {
                input += &chunk(
                    json!({"tool_calls": [{"index": idx, "function": {"arguments": f}}]}),
                    None,
                );
            }
        }
    }
    input += &chunk(json!({}), Some("tool_calls"));
    input += "data: [DONE]\n\n";
    let out = stream(Dialect::OpenAi, ClientFormat::Anthropic, input.as_bytes());
    well_formed("anthropic", &out).unwrap();
    let mut args: std::collections::BTreeMap<u64, String> = Default::default();
    let mut ids = Vec::new();
    for line in String::from_utf8(out).unwrap().lines() {
        let Some(d) = line.strip_prefix("data: ") else {
            continue;
        };
        let v: Value = serde_json::from_str(d).unwrap();
        if v["type"] == "content_block_start" {
            ids.push(v["content_block"]["id"].as_str().unwrap().to_string());
        }
        if let Some(p) = v["delta"]["partial_json"].as_str() {
            args.entry(v["index"].as_u64().unwrap())
                .or_default()
                .push_str(p);
        }
    }
    assert_eq!(ids, ["call_a", "call_b"]);
    assert_eq!(args[&0], a);
    assert_eq!(args[&1], b);
}

#[test]
fn a_codex_namespace_tool_group_is_dropped_not_refused() {
    let body = json!({"model": "m", "input": "hi", "tools": [
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "namespace", "name": "multi_agent_v1", "tools": [{"type": "function", "name": "close_agent"}]},
        {"type": "web_search"}
    ]});
    for up in [Dialect::Anthropic, Dialect::OpenAi] {
        let t = translate_request(
            ClientFormat::Responses,
            up,
            body.to_string().as_bytes(),
            "m",
            &TargetOptions::default(),
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&t.body).unwrap();
        assert_eq!(v["tools"].as_array().unwrap().len(), 1, "{v}");
        assert!(
            t.warnings.iter().any(|w| w.contains("multi_agent_v1")),
            "{:?}",
            t.warnings
        );
    }
}
