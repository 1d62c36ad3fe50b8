//! The request log's token counts: taken from the upstream's `usage` in a JSON reply and in
//! an SSE stream's events, shown in the snapshot and stored in the state database.

use bytes::Bytes;
use serde_json::json;

use crate::support::client;
use crate::support::{MockUpstream, Reply, Sluice, fill};

const CONFIG: &str = r#"
[routing]
default_provider = "p"

[[providers]]
id = "p"
dialect = "anthropic"
base_url = "{MOCK}"
  [[providers.connections]]
  id = "c"
  auth = "passthrough"
"#;

const HEADERS: &[(&str, &str)] = &[
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "sk-test"),
];

#[tokio::test]
async fn tokens_are_recorded_from_a_json_reply_and_from_a_stream() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("json-model")
        .reply(Reply::json(
            200,
            json!({"id": "m", "type": "message", "role": "assistant", "model": "json-model",
               "content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn",
               "usage": {"input_tokens": 11, "output_tokens": 22}}),
        ));
    let events = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"sse-model\",\"usage\":{\"input_tokens\":33,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":44}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ];
    mock.on("/v1/messages")
        .model("sse-model")
        .reply(Reply::sse_chunks(
            events.iter().map(|e| Bytes::from(*e)).collect(),
        ));
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;
    let body = |model: &str, stream: bool| {
        json!({"model": model, "max_tokens": 16, "stream": stream,
               "messages": [{"role": "user", "content": "hi"}]})
    };
    let r = client::post_json(&s.url("/v1/messages"), &body("json-model", false), HEADERS).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let mut st = client::open_json(&s.url("/v1/messages"), &body("sse-model", true), HEADERS).await;
    let (_, clean) = st.read_to_end(std::time::Duration::from_secs(5)).await;
    assert!(clean);
    let snap = s.wait_requests(2).await;
    let tokens = |m: &str| {
        let r = snap.recent.iter().find(|r| r.client_model == m).unwrap();
        (r.tokens_in, r.tokens_out)
    };
    assert_eq!(tokens("json-model"), (Some(11), Some(22)));
    assert_eq!(
        tokens("sse-model"),
        (Some(33), Some(44)),
        "message_delta's count wins"
    );
    let store = s.core().store().unwrap().clone();
    store.flush();
    let rows = store.recent_requests(10).unwrap();
    let stored: Vec<(String, Option<u64>, Option<u64>)> = rows
        .iter()
        .map(|r| (r.client_model.clone(), r.tokens_in, r.tokens_out))
        .collect();
    assert!(
        stored.contains(&("json-model".into(), Some(11), Some(22))),
        "{stored:?}"
    );
    assert!(
        stored.contains(&("sse-model".into(), Some(33), Some(44))),
        "{stored:?}"
    );
    s.stop().await;
}
