//! CPU cost of dialect translation: per request, per non-streaming response and per stream
//! frame (one upstream SSE event), in release mode.
//!
//! The request is shaped like a mid-session Claude Code turn (system blocks, 20 tool
//! definitions, 40 messages with tool calls and results, about 60 KB); the streams are the
//! translation fixtures. Run: `cargo run --release --example translate_cost [-- N]`.
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use serde_json::{Value, json};
use sluice::config::Dialect;
use sluice::translate::{
    ClientFormat, ResponseContext, StreamTranslator, TargetOptions, translate_request,
    translate_response,
};

#[path = "support/timing.rs"]
mod timing;

fn claude_code_request() -> Vec<u8> {
    let tools: Vec<Value> = (0..20)
        .map(|i| json!({"name": format!("Tool{i}"), "description": "x".repeat(600),
            "input_schema": {"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["path"]}}))
        .collect();
    let mut messages =
        vec![json!({"role": "user", "content": "Fix the failing test in src/lib.rs"})];
    for i in 0..20 {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": "Let me look at the file first."},
            {"type": "tool_use", "id": format!("toolu_{i:03}"), "name": "Read", "input": {"path": "src/lib.rs", "limit": 200}}]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{i:03}"), "content": "fn main() {}\n".repeat(100)}]}));
    }
    serde_json::to_vec(&json!({"model": "claude-sonnet-4-5", "max_tokens": 32000, "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "y".repeat(8000), "cache_control": {"type": "ephemeral"}}],
        "tools": tools, "messages": messages, "metadata": {"user_id": "u"},
        "thinking": {"type": "adaptive"}, "output_config": {"effort": "medium"}}))
    .unwrap()
}

fn stream_case(file: &str, upstream: Dialect, client: ClientFormat, n: usize) {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/translation/streams/"
    );
    let input = std::fs::read(format!("{dir}{file}")).unwrap();
    let frames = input.windows(2).filter(|w| w == b"\n\n").count().max(1);
    let ctx = ResponseContext {
        client,
        client_model: "m".into(),
        thinking: true,
        include_usage: true,
        ..Default::default()
    };
    let us = timing::timed(n, || {
        let mut t = StreamTranslator::new(upstream, &ctx).unwrap();
        // Feed in 64-byte chunks, as a network read might split it.
        for c in input.chunks(64) {
            std::hint::black_box(t.feed(c));
        }
        std::hint::black_box(t.finish());
    })
    .median;
    println!(
        "stream  {file:<40} → {:<9} {frames:>3} frames  {:>6.2} us/frame",
        client.as_str(),
        us / frames as f64
    );
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let opts = TargetOptions {
        reasoning_effort: true,
        ..Default::default()
    };
    let req = claude_code_request();
    let us = timing::timed(n, || {
        std::hint::black_box(
            translate_request(
                ClientFormat::Anthropic,
                Dialect::OpenAi,
                &req,
                "gpt-x",
                &opts,
            )
            .unwrap(),
        );
    })
    .median;
    println!(
        "request anthropic → chat      {:>6} KB  {us:>8.1} us",
        req.len() / 1024
    );
    let chat = translate_request(
        ClientFormat::Anthropic,
        Dialect::OpenAi,
        &req,
        "gpt-x",
        &opts,
    )
    .unwrap()
    .body;
    let us = timing::timed(n, || {
        std::hint::black_box(
            translate_request(
                ClientFormat::Chat,
                Dialect::Anthropic,
                &chat,
                "claude",
                &opts,
            )
            .unwrap(),
        );
    })
    .median;
    println!(
        "request chat → anthropic      {:>6} KB  {us:>8.1} us",
        chat.len() / 1024
    );
    let us = timing::timed(n, || {
        std::hint::black_box(serde_json::from_slice::<Value>(&req).unwrap());
    })
    .median;
    println!("  (baseline: parse the same request into a JSON value: {us:.1} us)");
    // What every native Anthropic request now pays: the scan for thinking blocks a
    // translated turn left behind (none here, so no parse).
    let us = timing::timed(n, || {
        std::hint::black_box(sluice::translate::strip_unsigned_thinking(&req));
    })
    .median;
    println!(
        "native anthropic scan (no translation) {:>3} KB  {us:>8.1} us",
        req.len() / 1024
    );
    let reply = br#"{"id":"chatcmpl-1","object":"chat.completion","model":"g","choices":[{"index":0,"message":{"role":"assistant","content":"Reading the file.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"src/lib.rs\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":9000,"completion_tokens":30,"prompt_tokens_details":{"cached_tokens":8000}}}"#;
    for client in [ClientFormat::Anthropic, ClientFormat::Responses] {
        let ctx = ResponseContext {
            client,
            client_model: "m".into(),
            ..Default::default()
        };
        let us = timing::timed(n, || {
            std::hint::black_box(translate_response(Dialect::OpenAi, reply, &ctx).unwrap());
        })
        .median;
        println!(
            "response chat → {:<10}               {us:>8.1} us",
            client.as_str()
        );
    }
    stream_case(
        "../../sse/anthropic-text.sse",
        Dialect::Anthropic,
        ClientFormat::Chat,
        n,
    );
    stream_case(
        "../../sse/anthropic-thinking-tool.sse",
        Dialect::Anthropic,
        ClientFormat::Chat,
        n,
    );
    stream_case(
        "../../sse/anthropic-thinking-tool.sse",
        Dialect::Anthropic,
        ClientFormat::Responses,
        n,
    );
    stream_case(
        "chat-reasoning-interleaved-tools.sse",
        Dialect::OpenAi,
        ClientFormat::Anthropic,
        n,
    );
    stream_case(
        "chat-sequential-tools.sse",
        Dialect::OpenAi,
        ClientFormat::Anthropic,
        n,
    );
    stream_case(
        "chat-sequential-tools.sse",
        Dialect::OpenAi,
        ClientFormat::Responses,
        n,
    );
}
