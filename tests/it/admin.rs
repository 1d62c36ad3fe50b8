//! Admin listener integration tests: health probes, drain, `/api/snapshot`, bearer token.

use std::time::Duration;

use bytes::Bytes;
use serde_json::json;

use crate::support::client;
use crate::support::{MockUpstream, Reply, Sluice, fill};

const CONFIG: &str = r#"
[routing]
default_provider = "up"

[[providers]]
id = "up"
dialect = "anthropic"
base_url = "{MOCK}"

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;

const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const KEY: (&str, &str) = ("x-api-key", "sk-client-key");

fn message(stream: bool) -> serde_json::Value {
    json!({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": stream,
        "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn livez_and_readyz_are_200_while_serving() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(CONFIG, &mock), &[]).await;

    let live = client::get(&s.admin("/livez"), &[]).await;
    let ready = client::get(&s.admin("/readyz"), &[]).await;

    assert_eq!(live.status, 200, "{}", live.text());
    assert_eq!(ready.status, 200, "{}", ready.text());
}

#[tokio::test]
async fn readyz_is_503_once_draining_begins() {
    let mock = MockUpstream::start().await;
    // A content event, so the pre-content hold (spec §6) releases the stream at once.
    let first: Vec<Bytes> = vec![Bytes::from_static(
        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
    )];
    mock.on("/v1/messages")
        .reply(Reply::sse_chunks(first).then_stall());
    let config = format!("[server]\ndrain_timeout = \"2s\"\n{}", fill(CONFIG, &mock));
    let s = Sluice::start(&config, &[]).await;
    let readyz = s.admin("/readyz");

    // Keep one stream in flight so the drain lasts until its deadline.
    let mut st = client::open_json(&s.url("/v1/messages"), &message(true), &[AV, KEY]).await;
    st.read_until(Duration::from_secs(5), |got| !got.is_empty())
        .await;
    assert_eq!(client::get(&readyz, &[]).await.status, 200);
    let stopping = tokio::spawn(s.stop());

    let saw_503 = tokio::time::timeout(Duration::from_millis(1500), async {
        loop {
            if client::get(&readyz, &[]).await.status == 503 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(saw_503.is_ok(), "/readyz never answered 503 while draining");
    drop(st);
    tokio::time::timeout(Duration::from_secs(5), stopping)
        .await
        .expect("stop() finishes")
        .unwrap();
}

#[tokio::test]
async fn api_snapshot_serves_the_snapshot_as_json() {
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&fill(CONFIG, &mock), &[]).await;
    clock.advance(Duration::from_secs(3));

    let r = client::post_json(&s.url("/v1/messages"), &message(false), &[AV, KEY]).await;
    assert_eq!(r.status, 200, "{}", r.text());
    s.wait_requests(1).await;
    let snap = client::get(&s.admin("/api/snapshot"), &[]).await;

    assert_eq!(snap.status, 200, "{}", snap.text());
    assert!(
        snap.header("content-type")
            .is_some_and(|c| c.starts_with("application/json")),
        "{:?}",
        snap.headers
    );
    let v = snap.json();
    assert_eq!(v["totals"]["requests"], 1, "{v}");
    assert_eq!(v["providers"][0]["id"], "up");
    assert_eq!(v["providers"][0]["attempts"], 1);
    assert_eq!(v["recent"][0]["route"], "/v1/messages");
    assert_eq!(v["recent"][0]["target"], "up:mine/claude-sonnet-4-5");
    assert_eq!(v["listen"], s.listen().to_string());
    assert!(v["started_at_unix_ms"].as_u64().is_some_and(|t| t > 0));
}

#[tokio::test]
async fn admin_token_guards_the_api_but_not_livez() {
    let mock = MockUpstream::start().await;
    let config = format!(
        "[admin]\ntoken_env = \"SLUICE_ADMIN_TOKEN\"\n{}",
        fill(CONFIG, &mock)
    );
    let s = Sluice::start(&config, &[("SLUICE_ADMIN_TOKEN", "adm-secret-123")]).await;
    let url = s.admin("/api/snapshot");

    let none = client::get(&url, &[]).await;
    let wrong = client::get(&url, &[("authorization", "Bearer nope")]).await;
    let right = client::get(&url, &[("authorization", "Bearer adm-secret-123")]).await;
    let live = client::get(&s.admin("/livez"), &[]).await;

    assert_eq!(none.status, 401, "{}", none.text());
    assert_eq!(wrong.status, 401, "{}", wrong.text());
    assert_eq!(right.status, 200, "{}", right.text());
    assert_eq!(right.json()["providers"][0]["id"], "up");
    assert_eq!(live.status, 200, "/livez stays open without a token");
    assert!(!none.text().contains("adm-secret-123") && !wrong.text().contains("adm-secret-123"));
}
