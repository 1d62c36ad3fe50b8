//! Config hot reload through `POST /api/config/reload` (the same `Control::reload_config`
//! SIGHUP, the console key and `[server] watch_config` call): live state survives, a bad
//! file or a restart-only change changes nothing and says why.

use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::support::client::{self, Resp};
use crate::support::{MockUpstream, Reply, Sluice, fill};

/// One anthropic provider `p` with one passthrough connection `c`, and a combo `m`.
const BASE: &str = r#"
[routing]
default_provider = "p"

[[providers]]
id = "p"
dialect = "anthropic"
base_url = "{MOCK}"
  [[providers.connections]]
  id = "c"
  auth = "passthrough"

[[combos]]
name = "m"
targets = ["p/claude-x"]
"#;

fn config_path(s: &Sluice) -> std::path::PathBuf {
    s.dir().join("config.toml")
}

/// Rewrites the running config file with `edit` applied to its text.
fn edit(s: &Sluice, edit: impl FnOnce(String) -> String) {
    let path = config_path(s);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, edit(text)).unwrap();
}

async fn reload(s: &Sluice) -> Resp {
    client::post_json(&s.admin("/api/config/reload"), &json!({}), &[]).await
}

fn message(model: &str, stream: bool) -> Value {
    json!({"model": model, "max_tokens": 16, "stream": stream,
           "messages": [{"role": "user", "content": "hi"}]})
}

const HEADERS: &[(&str, &str)] = &[
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "sk-test"),
];

#[tokio::test]
async fn a_valid_reload_applies_live_keys_and_says_what_changed() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(BASE, &mock), &[]).await;
    assert!(s.core().config().combo("n").is_none());
    edit(&s, |t| {
        format!("{t}\n[[combos]]\nname = \"n\"\ntargets = [\"p/claude-y\"]\n")
    });
    let r = reload(&s).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(v["reloaded"]["changed"], json!(["combos"]), "{v:#}");
    assert_eq!(
        (
            &v["reloaded"]["providersKept"],
            &v["reloaded"]["providersAdded"],
            &v["reloaded"]["providersRemoved"]
        ),
        (&json!(1), &json!(0), &json!(0))
    );
    assert!(
        s.core().config().combo("n").is_some(),
        "new requests see the new combo"
    );
    let snap = s.snapshot();
    assert!(
        snap.combos.iter().any(|c| c.name == "n"),
        "the snapshot lists it"
    );
    s.stop().await;
}

#[tokio::test]
async fn an_in_flight_stream_survives_a_reload() {
    let mock = MockUpstream::start().await;
    let events: Vec<(Duration, Bytes)> = [
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m1\",\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-x\",\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" after the reload\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":4}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    ]
    .iter()
    .enumerate()
    // The second half of the stream comes 600 ms later: the reload happens in that gap.
    .map(|(i, e)| {
        let pause = if i == 3 { 600 } else { 0 };
        (Duration::from_millis(pause), Bytes::from(*e))
    })
    .collect();
    mock.on("/v1/messages").reply(Reply::sse_timed(events));
    let s = Sluice::start(&fill(BASE, &mock), &[]).await;
    let mut stream = client::open_json(&s.url("/v1/messages"), &message("m", true), HEADERS).await;
    assert_eq!(stream.status, 200);
    stream
        .read_until(Duration::from_secs(5), |b| {
            String::from_utf8_lossy(b).contains("hello")
        })
        .await;
    assert_eq!(s.core().in_flight(), 1, "the stream is in flight");
    edit(&s, |t| {
        t.replace("targets = [\"p/claude-x\"]", "targets = [\"p/claude-z\"]")
    });
    let r = reload(&s).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let (body, clean) = stream.read_to_end(Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&body);
    assert!(clean, "{text}");
    assert!(
        text.contains("after the reload") && text.contains("message_stop"),
        "the stream ran to its end: {text}"
    );
    s.wait_requests(1).await;
    s.stop().await;
}

#[tokio::test]
async fn a_cooldown_survives_a_reload() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages").reply(
        Reply::anthropic_error(429, "rate_limit_error", "slow down").header("retry-after", "120"),
    );
    // A manual clock: the snapshot's wall-clock deadlines are then exact.
    let (s, _clock) = Sluice::start_manual(&fill(BASE, &mock), &[]).await;
    let r = client::post_json(&s.url("/v1/messages"), &message("m", false), HEADERS).await;
    assert_eq!(r.status, 429, "{}", r.text());
    let before = s.snapshot().providers[0].connections[0].clone();
    assert_eq!(before.status.as_str(), "cooling", "{before:?}");
    edit(&s, |t| {
        format!("{t}\n[[combos]]\nname = \"n\"\ntargets = [\"p/claude-y\"]\n")
    });
    assert_eq!(reload(&s).await.status, 200);
    let after = s.snapshot().providers[0].connections[0].clone();
    assert_eq!(after.status.as_str(), "cooling", "{after:?}");
    assert_eq!(after.cooldown_until_unix_ms, before.cooldown_until_unix_ms);
    assert_eq!(after.backoff_level, before.backoff_level);
    s.stop().await;
}

#[tokio::test]
async fn an_invalid_file_changes_nothing_and_names_the_key() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(BASE, &mock), &[]).await;
    let before = s.core().config();
    edit(&s, |t| {
        format!("{t}\n[[combos]]\nname = \"n\"\ntargets = [\"nowhere/claude-y\"]\n")
    });
    let r = reload(&s).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let v = r.json();
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(v["error"]["reason"], "config_invalid", "{v:#}");
    assert!(
        msg.contains("config.toml") && msg.contains("combos") && msg.contains("nowhere"),
        "names the file, the key and the value: {msg}"
    );
    assert!(
        std::sync::Arc::ptr_eq(&before, &s.core().config()),
        "the running config is untouched"
    );
    assert!(s.core().config().combo("n").is_none());
    s.stop().await;
}

#[tokio::test]
async fn a_listen_change_or_a_new_provider_is_refused_whole() {
    let mock = MockUpstream::start().await;
    let s = Sluice::start(&fill(BASE, &mock), &[]).await;
    let before = s.core().config();
    // A live change (a combo) next to a restart-only one: neither applies.
    edit(&s, |t| {
        format!(
            "{}\n[[combos]]\nname = \"n\"\ntargets = [\"p/claude-y\"]\n",
            t.replacen("127.0.0.1:0", "127.0.0.1:1", 1)
        )
    });
    let r = reload(&s).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let v = r.json();
    assert_eq!(v["error"]["reason"], "restart_required", "{v:#}");
    let msg = v["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("config.toml: ")
            && (msg.contains("server.listen") || msg.contains("admin.listen"))
            && msg.contains("'127.0.0.1:1'")
            && msg.contains("restart"),
        "{msg}"
    );
    assert!(std::sync::Arc::ptr_eq(&before, &s.core().config()));
    assert!(
        s.core().config().combo("n").is_none(),
        "nothing half-applied"
    );

    // Adding a provider changes the layout the live state is built on: restart needed.
    edit(&s, |t| {
        t.replace("127.0.0.1:1", "127.0.0.1:0")
            + "\n[[providers]]\nid = \"q\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"qc\"\n  auth = \"passthrough\"\n"
    });
    let r = reload(&s).await;
    assert_eq!(r.status, 422, "{}", r.text());
    let msg = r.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        msg.contains(": providers: changed from 'p' to 'p, q'"),
        "{msg}"
    );
    assert_eq!(s.snapshot().providers.len(), 1);
    s.stop().await;
}

#[tokio::test]
async fn reload_needs_the_admin_token_like_every_other_admin_route() {
    let mock = MockUpstream::start().await;
    let cfg = fill(BASE, &mock).replace(
        "[routing]",
        "[admin]\ntoken_env = \"SLUICE_RELOAD_TEST_TOKEN\"\n\n[routing]",
    );
    let s = Sluice::start(&cfg, &[("SLUICE_RELOAD_TEST_TOKEN", "t0ken-for-reload")]).await;
    let r = reload(&s).await;
    assert_eq!(r.status, 401, "{}", r.text());
    s.stop().await;
}

#[tokio::test]
async fn watch_config_reloads_when_the_file_changes() {
    let mock = MockUpstream::start().await;
    let cfg = fill(BASE, &mock).replace("[routing]", "[server]\nwatch_config = true\n\n[routing]");
    let s = Sluice::start(&cfg, &[]).await;
    edit(&s, |t| {
        format!("{t}\n[[combos]]\nname = \"n\"\ntargets = [\"p/claude-y\"]\n")
    });
    // The poll runs every 2 s; allow a few rounds on a busy machine.
    let seen = tokio::time::timeout(Duration::from_secs(15), async {
        while s.core().config().combo("n").is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    assert!(seen.is_ok(), "the edit was never picked up");
    s.stop().await;
}
