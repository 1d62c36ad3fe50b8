//! Config hot reload through `POST /api/config/reload` (the same `Control::reload_config`
//! SIGHUP, the console key and `[server] watch_config` call): live state survives, providers
//! and connections can be added, removed and reordered live, a bad file or a restart-only
//! change changes nothing and says why.

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

/// Rewrites the running config file with `edit` applied to its TOML table.
fn edit_toml(s: &Sluice, edit: impl FnOnce(&mut toml::Table)) {
    let path = config_path(s);
    let mut table: toml::Table = toml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut table);
    std::fs::write(&path, toml::to_string(&table).unwrap()).unwrap();
}

/// The `[[providers]]` array of a config table.
fn providers(t: &mut toml::Table) -> &mut Vec<toml::Value> {
    t.get_mut("providers")
        .and_then(toml::Value::as_array_mut)
        .expect("[[providers]]")
}

/// A provider `id` at `base_url` with one passthrough connection `conn`.
fn provider(id: &str, base_url: &str, conn: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!(
        "id = \"{id}\"\ndialect = \"anthropic\"\nbase_url = \"{base_url}\"\n[[connections]]\nid = \"{conn}\"\nauth = \"passthrough\"\n"
    ))
    .map(toml::Value::Table)
    .unwrap()
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
async fn a_listen_change_is_refused_whole_and_a_kept_gate_cap_changes_live() {
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

    // The concurrency cap of a kept connection changes live with a provider added next to
    // it: the gate shows the new cap (its permits and waiters kept).
    edit(&s, |t| t.replace("127.0.0.1:1", "127.0.0.1:0"));
    edit_toml(&s, |t| {
        let ps = providers(t);
        ps[0]["connections"][0]
            .as_table_mut()
            .unwrap()
            .insert("max_concurrent".into(), toml::Value::Integer(4));
        ps.push(provider("q", "http://127.0.0.1:9", "qc"));
    });
    let r = reload(&s).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let gates = s.core().gates().views();
    assert_eq!(
        gates
            .iter()
            .map(|g| (g.connection.as_str(), g.cap))
            .collect::<Vec<_>>(),
        vec![("c", Some(4))],
        "{gates:?}"
    );
    assert_eq!(s.snapshot().providers.len(), 2);
    s.stop().await;
}

/// A stream whose second half comes `gap` after its first.
fn gapped_stream(gap: Duration) -> Reply {
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
    .map(|(i, e)| {
        let pause = if i == 3 { gap } else { Duration::ZERO };
        (pause, Bytes::from(*e))
    })
    .collect();
    Reply::sse_timed(events)
}

#[tokio::test]
async fn a_provider_added_in_front_serves_while_a_stream_on_a_kept_one_runs_on() {
    let old = MockUpstream::start().await;
    let new = MockUpstream::start().await;
    old.on("/v1/messages")
        .reply(gapped_stream(Duration::from_secs(2)));
    new.on("/v1/messages")
        .reply(Reply::anthropic_text("from q"));
    let s = Sluice::start(&fill(BASE, &old), &[]).await;
    let mut stream = client::open_json(&s.url("/v1/messages"), &message("m", true), HEADERS).await;
    assert_eq!(stream.status, 200);
    stream
        .read_until(Duration::from_secs(5), |b| {
            String::from_utf8_lossy(b).contains("hello")
        })
        .await;
    assert_eq!(s.core().in_flight(), 1, "the stream is in flight");

    // Provider "q" goes in front of "p" (every index of "p" moves), with a combo of its own.
    edit_toml(&s, |t| {
        providers(t).insert(0, provider("q", &new.base_url(), "qc"));
    });
    edit(&s, |t| {
        format!("{t}\n[[combos]]\nname = \"mq\"\ntargets = [\"q/claude-q\"]\n")
    });
    let r = reload(&s).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let v = r.json();
    assert_eq!(
        (
            &v["reloaded"]["providersAdded"],
            &v["reloaded"]["providersKept"],
            &v["reloaded"]["connectionsAdded"],
            &v["reloaded"]["connectionsKept"]
        ),
        (&json!(1), &json!(1), &json!(1), &json!(1)),
        "{v:#}"
    );

    let r = client::post_json(&s.url("/v1/messages"), &message("mq", false), HEADERS).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(r.text().contains("from q"), "{}", r.text());
    assert_eq!(new.count(), 1, "routed to the new provider");

    let (body, clean) = stream.read_to_end(Duration::from_secs(10)).await;
    let text = String::from_utf8_lossy(&body);
    assert!(clean, "{text}");
    assert!(
        text.contains("after the reload") && text.contains("message_stop"),
        "the stream ran to its end: {text}"
    );
    let snap = s.wait_requests(2).await;
    let ids: Vec<&str> = snap.providers.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(ids, ["q", "p"]);
    let (q, p) = (&snap.providers[0], &snap.providers[1]);
    assert_eq!((q.attempts, q.in_flight), (1, 0), "{q:?}");
    assert_eq!(
        (
            p.attempts,
            p.failures,
            p.in_flight,
            p.connections[0].in_flight
        ),
        (1, 0, 0, 0),
        "the stream's attempt ended on p/c, where it started: {p:?}"
    );
    assert_eq!(p.connections[0].status.as_str(), "active");
    assert_eq!(old.count(), 1);
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
