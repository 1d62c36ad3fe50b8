//! What current clients send (Claude Code 2.1.3xx: system entries inside `messages`, adaptive
//! thinking with `output_config.effort`, `context_management`, deferred tools, a billing
//! header block, `max_tokens: 128000`; the openai SDK's `null` optional fields; ids and tool
//! names from OpenAI-compatible servers) through each direction it meets.

use serde_json::{Value, json};

use super::super::{
    ClientFormat, TargetOptions, translate_request, translate_response, wire_names,
};
use crate::config::{Dialect, ReasoningEffort, SystemRole};

/// The shape of a Claude Code 2.1.332 request (the fields, not the real prompt text).
fn claude_code_body() -> Value {
    json!({
        "model": "claude-sonnet-5",
        "max_tokens": 128000,
        "stream": true,
        "system": [
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332; cc_entrypoint=cli"},
            {"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "list the files"}]},
            {"role": "system", "content": "<env>cwd: /tmp/x</env>"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "…", "signature": "sig"},
                {"type": "tool_use", "id": "sx_functions_2EBash_3A0", "name": "Bash", "input": {"command": "ls"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "sx_functions_2EBash_3A0", "content": "a.txt",
                 "cache_control": {"type": "ephemeral"}}
            ]},
            {"role": "system", "content": [{"type": "text", "text": "<reminder>be brief</reminder>"}]}
        ],
        "tools": [
            {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"},
             "cache_control": {"type": "ephemeral"}},
            {"name": "ToolSearch", "description": "Find deferred tools", "input_schema": {"type": "object"}},
            {"name": "mcp__very_long_server_name_for_the_company_wiki__search_pages_by_title", "description": null,
             "input_schema": {"type": "object"}, "defer_loading": true}
        ],
        "thinking": {"type": "adaptive", "display": "omitted"},
        "output_config": {"effort": "max"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": "user_abc"}
    })
}

fn to_chat(body: &Value, opts: &TargetOptions) -> (Value, super::super::TranslatedRequest) {
    let t = translate_request(
        ClientFormat::Anthropic,
        Dialect::OpenAi,
        body.to_string().as_bytes(),
        "gpt-5",
        opts,
    )
    .unwrap_or_else(|e| panic!("current Claude Code's body must translate: {e}"));
    let v: Value = serde_json::from_slice(&t.body).unwrap();
    (v, t)
}

#[test]
fn claude_code_2_1_332_translates_to_chat() {
    let opts = TargetOptions {
        reasoning_effort: true,
        max_output_tokens: Some(32768),
        ..Default::default()
    };
    let (v, t) = to_chat(&claude_code_body(), &opts);
    let roles: Vec<&str> = v["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "system", "assistant", "tool", "system"],
        "system entries keep their position: {v:#}"
    );
    assert_eq!(
        v["messages"][0]["content"], "You are Claude Code.",
        "the billing header block is not sent"
    );
    assert_eq!(v["messages"][2]["content"], "<env>cwd: /tmp/x</env>");
    assert_eq!(v["messages"][5]["content"], "<reminder>be brief</reminder>");
    assert_eq!(
        v["messages"][3]["tool_calls"][0]["id"], "functions.Bash:0",
        "an escaped id goes back to the provider's own form"
    );
    assert_eq!(v["messages"][4]["tool_call_id"], "functions.Bash:0");
    assert_eq!(v["max_tokens"], 32768, "clamped to max_output_tokens");
    assert_eq!(
        t.adjusted,
        ["max_tokens 128000 → 32768 (max_output_tokens)"]
    );
    assert_eq!(v["reasoning_effort"], "high", "max → the target's highest");
    assert!(
        !t.context.thinking,
        "display omitted: no reasoning text relayed"
    );
    for k in ["context_management", "output_config", "thinking", "system"] {
        assert!(v.get(k).is_none(), "{k} is not sent: {v:#}");
    }
    let tools = v["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 3);
    let long = &tools[2]["function"];
    assert!(
        long.get("description").is_none(),
        "a null description is dropped"
    );
    let wire = long["name"].as_str().unwrap();
    assert!(wire.len() <= 64, "{wire}");
    assert!(
        tools
            .iter()
            .all(|t| t["function"].get("defer_loading").is_none()
                && t.get("cache_control").is_none())
    );
    assert_eq!(
        t.context.tool_names,
        [(
            wire.to_string(),
            "mcp__very_long_server_name_for_the_company_wiki__search_pages_by_title".to_string()
        )]
    );
}

#[test]
fn effort_ceiling_role_and_limit_field_follow_the_options() {
    let opts = TargetOptions {
        reasoning_effort: true,
        max_reasoning_effort: ReasoningEffort::XHigh,
        max_completion_tokens: true,
        system_role: SystemRole::Developer,
        ..Default::default()
    };
    let (v, t) = to_chat(&claude_code_body(), &opts);
    assert_eq!(v["reasoning_effort"], "xhigh");
    assert_eq!(v["max_completion_tokens"], 128000);
    assert!(v.get("max_tokens").is_none());
    assert!(t.adjusted.is_empty(), "no clamp without max_output_tokens");
    assert_eq!(v["messages"][0]["role"], "developer");
    assert_eq!(v["messages"][2]["role"], "developer");

    let mut body = claude_code_body();
    body["output_config"] = json!({"effort": "low"});
    body["thinking"] = json!({"type": "adaptive"});
    let (v, t) = to_chat(&body, &opts);
    assert_eq!(v["reasoning_effort"], "low");
    assert!(t.context.thinking, "thinking shown when not omitted");

    let (v, t) = to_chat(&claude_code_body(), &TargetOptions::default());
    assert!(
        v.get("reasoning_effort").is_none(),
        "provider takes no effort"
    );
    assert!(t.warnings.iter().any(|w| w.contains("reasoning_effort")));
}

#[test]
fn structured_output_and_pdf_translate_to_chat() {
    let body = json!({
        "model": "m", "max_tokens": 100,
        "messages": [{"role": "user", "content": [
            {"type": "document", "title": "spec.pdf",
             "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}},
            {"type": "text", "text": "summarise"}
        ]}],
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    });
    let (v, _) = to_chat(&body, &TargetOptions::default());
    assert_eq!(v["response_format"]["type"], "json_schema");
    assert_eq!(
        v["response_format"]["json_schema"]["schema"],
        json!({"type": "object"})
    );
    let part = &v["messages"][0]["content"][0];
    assert_eq!(part["type"], "file");
    assert_eq!(
        part["file"]["file_data"],
        "data:application/pdf;base64,JVBERi0="
    );
    assert_eq!(part["file"]["filename"], "spec.pdf");
}

#[test]
fn chat_reply_ids_and_long_names_come_back_in_the_clients_form() {
    let opts = TargetOptions::default();
    let (_, t) = to_chat(&claude_code_body(), &opts);
    let (wire, long) = t.context.tool_names[0].clone();
    let reply = json!({"id": "c1", "object": "chat.completion", "created": 0, "model": "gpt-5",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
            "content": null, "tool_calls": [{"id": "functions.Bash:7", "type": "function",
            "function": {"name": wire, "arguments": "{}"}}]}}]});
    let out =
        translate_response(Dialect::OpenAi, reply.to_string().as_bytes(), &t.context).unwrap();
    let m: Value = serde_json::from_slice(&out).unwrap();
    let call = &m["content"][0];
    assert_eq!(call["name"], long.as_str());
    assert_eq!(call["id"], "sx_functions_2EBash_3A7");
    assert_eq!(
        wire_names::id_from_anthropic("sx_functions_2EBash_3A7"),
        "functions.Bash:7"
    );

    let mut s = super::super::StreamTranslator::new(Dialect::OpenAi, &t.context).unwrap();
    let chunk = json!({"id": "c1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
        "id": "functions.Bash:8", "type": "function", "function": {"name": wire, "arguments": "{}"}}]},
        "finish_reason": "tool_calls"}]});
    let mut out = s
        .feed(format!("data: {chunk}\n\ndata: [DONE]\n\n").as_bytes())
        .to_vec();
    out.extend_from_slice(&s.finish());
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains(&format!("\"name\":\"{long}\"")), "{text}");
    assert!(
        text.contains("\"id\":\"sx_functions_2EBash_3A8\""),
        "{text}"
    );
}

#[test]
fn openai_sdk_nulls_and_odd_ids_reach_anthropic_valid() {
    let body = json!({
        "model": "m", "temperature": null, "top_p": null, "stop": null, "user": null,
        "tool_choice": null, "response_format": null,
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "functions.Bash:0",
                "type": "function", "function": {"name": "Bash", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "functions.Bash:0", "content": "ok"}
        ],
        "tools": [{"type": "function", "function": {"name": "Bash", "description": null,
            "parameters": {"type": "object"}}}]
    });
    let t = translate_request(
        ClientFormat::Chat,
        Dialect::Anthropic,
        body.to_string().as_bytes(),
        "claude-sonnet-5",
        &TargetOptions::default(),
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&t.body).unwrap();
    for k in [
        "temperature",
        "top_p",
        "stop_sequences",
        "metadata",
        "tool_choice",
    ] {
        assert!(v.get(k).is_none(), "{k}: {v:#}");
    }
    assert!(v["tools"][0].get("description").is_none());
    assert_eq!(
        v["messages"][1]["content"][0]["id"],
        "sx_functions_2EBash_3A0"
    );
    assert_eq!(
        v["messages"][2]["content"][0]["tool_use_id"],
        "sx_functions_2EBash_3A0"
    );
}

#[test]
fn system_only_requests_to_anthropic_are_refused_clearly() {
    for (client, body) in [
        (
            ClientFormat::Chat,
            json!({"model": "m", "messages": [{"role": "system", "content": "be brief"}]}),
        ),
        (
            ClientFormat::Responses,
            json!({"model": "m", "instructions": "be brief", "input": []}),
        ),
    ] {
        let e = translate_request(
            client,
            Dialect::Anthropic,
            body.to_string().as_bytes(),
            "claude",
            &TargetOptions::default(),
        )
        .expect_err("an empty messages array is never sent");
        assert_eq!(e.status(), 400, "{e}");
        assert!(e.to_string().contains("messages"), "{e}");
    }
}

#[test]
fn chat_structured_output_and_pdf_reach_anthropic() {
    let body = json!({
        "model": "m",
        "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
        "messages": [{"role": "user", "content": [
            {"type": "file", "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}},
            {"type": "text", "text": "read"}
        ]}]
    });
    let t = translate_request(
        ClientFormat::Chat,
        Dialect::Anthropic,
        body.to_string().as_bytes(),
        "claude",
        &TargetOptions {
            max_output_tokens: Some(4096),
            ..Default::default()
        },
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&t.body).unwrap();
    assert_eq!(
        v["output_config"]["format"],
        json!({"type": "json_schema", "schema": {"type": "object"}})
    );
    assert_eq!(v["messages"][0]["content"][0]["type"], "document");
    assert_eq!(v["messages"][0]["content"][0]["title"], "a.pdf");
    assert_eq!(v["max_tokens"], 4096, "the 8192 default is clamped too");
}

#[test]
fn responses_to_chat_keeps_the_effort_word_and_sampling() {
    let body = json!({"model": "m", "input": "hi", "reasoning": {"effort": "xhigh"},
        "temperature": 0.3, "max_output_tokens": 500});
    let opts = TargetOptions {
        reasoning_effort: true,
        max_reasoning_effort: ReasoningEffort::XHigh,
        ..Default::default()
    };
    let t = translate_request(
        ClientFormat::Responses,
        Dialect::OpenAi,
        body.to_string().as_bytes(),
        "gpt-5",
        &opts,
    )
    .unwrap();
    let v: Value = serde_json::from_slice(&t.body).unwrap();
    assert_eq!(v["reasoning_effort"], "xhigh", "{v:#}");
    assert_eq!(
        v["temperature"], 0.3,
        "no Anthropic thinking rule on a Chat target"
    );
    assert_eq!(v["max_tokens"], 500);
    assert!(t.context.thinking);
    assert!(v.get("output_config").is_none() && v.get("thinking").is_none());
}

#[test]
fn more_than_four_stop_sequences_send_the_first_four() {
    let body = json!({"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}],
        "stop_sequences": ["a", "b", "c", "d", "e"]});
    let (v, t) = to_chat(&body, &TargetOptions::default());
    assert_eq!(v["stop"], json!(["a", "b", "c", "d"]));
    assert_eq!(t.adjusted.len(), 1, "{:?}", t.adjusted);
    assert_eq!(t.context.stop_sequences.len(), 5);
}
