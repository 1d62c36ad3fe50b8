//! Fault injection ("rehearse an outage") through real HTTP: each kind replaces the upstream
//! call (the mock receives nothing) and flows through the same classification, cooldown,
//! breaker and stream guards as a real failure; faults expire on the injected clock; the admin
//! API validates what it is given. Stream faults run on the real clock with millisecond
//! guards (as in `streams.rs`); the rest on a manual clock.

use std::time::Duration;

use http::Method;
use serde_json::{Value, json};

use crate::resilience::{
    AV, Cfg, D, ENV, NO_WAIT, admin, admin_get, breaker_state, conn_state, expect_status, hits, ms,
};
use crate::support::{MockUpstream, Sluice, client};

const PAIR: &str = "[[combos]]\nname = \"m\"\ntargets = [\"p:k1/claude-x\", \"p:k2/claude-x\"]";

async fn inject(s: &Sluice, body: Value) -> Value {
    let r = admin(s, Method::POST, "/api/faults", body.clone()).await;
    expect_status(&r, 200, &format!("inject {body}"));
    r.json()["fault"].clone()
}

fn metrics(s: &Sluice) -> String {
    s.core().metrics().render(&s.snapshot())
}

#[tokio::test]
async fn an_injected_503_cools_the_connection_and_nothing_reaches_the_upstream() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let cfg = Cfg::new(d, 2).tail(PAIR).build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    let f = inject(&s, json!({"target": "p/k1", "kind": "503"})).await;
    assert_eq!(
        (
            f["target"].as_str(),
            f["kind"].as_str(),
            ms(&f, "remaining_ms")
        ),
        (Some("p/k1"), Some("503"), 60_000),
        "default duration 60s: {f:#}"
    );

    expect_status(&d.send(&s, "m", &[]).await, 200, "k2 serves");
    assert_eq!(
        hits(&mock, 1),
        0,
        "no traffic leaves for p/k1 while the fault is on"
    );
    assert_eq!(hits(&mock, 2), 1);
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        k1["status"], "cooling",
        "a 503 cools the connection: {k1:#}"
    );
    assert_eq!(k1["lastStatus"], 503, "{k1:#}");

    let snap = s.wait_requests(1).await;
    let req = &snap.recent[0];
    assert!(req.injected, "the request is marked injected");
    assert_eq!(req.attempt_log.len(), 2);
    assert!(req.attempt_log[0].injected && req.attempt_log[0].status == 503);
    assert!(
        !req.attempt_log[1].injected,
        "the real attempt is not marked"
    );
    let detail = serde_json::to_value(req).unwrap();
    assert_eq!(detail["attempt_log"][0]["injected"], true, "{detail:#}");
    assert!(
        detail["attempt_log"][1].get("injected").is_none(),
        "unmarked attempts keep their JSON shape"
    );
    let m = metrics(&s);
    assert!(
        m.contains("sluice_injected_faults_total{provider=\"p\",connection=\"k1\",kind=\"503\"} 1"),
        "{m}"
    );
    assert_eq!(snap.faults.len(), 1, "the snapshot lists the active fault");
    let store = s.core().store().unwrap();
    store.flush();
    let logged = store.recent_requests(1).unwrap();
    assert!(
        logged[0].injected,
        "the request log row is marked: {logged:?}"
    );
}

#[tokio::test]
async fn an_injected_429_cools_by_its_retry_after_hint() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let cfg = Cfg::new(d, 2).tail(PAIR).build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    inject(
        &s,
        json!({"target": "p/k1", "kind": "429", "params": {"retry_after": "45s"}}),
    )
    .await;
    expect_status(&d.send(&s, "m", &[]).await, 200, "k2 serves");
    assert_eq!(hits(&mock, 1), 0);
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "cooling", "{k1:#}");
    assert_eq!(ms(&k1, "remainingMs"), 45_000, "cooled by the hint: {k1:#}");
    assert_eq!(
        breaker_state(&s, "p").await["failureCount"],
        0,
        "a 429 is never a breaker failure"
    );
}

#[tokio::test]
async fn repeated_injected_503s_open_the_breaker() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let cfg = Cfg::new(d, 1)
        .profile("local")
        .each_conn("  disable_cooling = true")
        .tail(NO_WAIT)
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    inject(&s, json!({"target": "p", "kind": "503", "duration": 30})).await;
    for _ in 0..2 {
        expect_status(&d.send(&s, "claude-x", &[]).await, 503, "the injected 503");
    }
    assert_eq!(breaker_state(&s, "p").await["state"], "open");
    assert_eq!(mock.count(), 0);
}

#[tokio::test]
async fn an_injected_reset_is_a_transport_failure_and_fails_over() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let cfg = Cfg::new(d, 2).tail(PAIR).build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    inject(&s, json!({"target": "p/k1", "kind": "reset"})).await;
    expect_status(&d.send(&s, "m", &[]).await, 200, "k2 serves");
    assert_eq!(hits(&mock, 1), 0);
    let snap = s.wait_requests(1).await;
    let a = &snap.recent[0].attempt_log[0];
    assert_eq!(
        (a.status, a.class.as_str(), a.injected),
        (0, "transient", true),
        "no head: a transport failure"
    );
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");
}

#[tokio::test]
async fn a_fault_expires_on_the_clock_and_traffic_flows_again() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let cfg = Cfg::new(d, 1)
        .each_conn("  disable_cooling = true")
        .tail(NO_WAIT)
        .build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    inject(
        &s,
        json!({"target": "p/k1", "kind": "500", "duration": "10s"}),
    )
    .await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 500, "injected");
    assert_eq!(mock.count(), 0);
    clock.advance(Duration::from_secs(4));
    let listed = admin_get(&s, "/api/faults").await;
    assert_eq!(
        ms(&listed["faults"][0], "remaining_ms"),
        6_000,
        "{listed:#}"
    );
    clock.advance(Duration::from_secs(6));
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "expired");
    assert_eq!(mock.count(), 1, "after the duration traffic flows again");
    assert_eq!(admin_get(&s, "/api/faults").await, json!({"faults": []}));
    assert!(s.snapshot().faults.is_empty());
}

#[tokio::test]
async fn added_latency_delays_then_sends_the_real_call() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let cfg = Cfg::new(d, 1).build(&mock);
    let s = Sluice::start(&cfg, ENV).await;
    inject(
        &s,
        json!({"target": "p", "kind": "latency", "params": {"delay": "120ms"}}),
    )
    .await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "still served");
    assert_eq!(mock.count(), 1, "latency lets the real call out");
    let snap = s.wait_requests(1).await;
    let a = &snap.recent[0].attempt_log[0];
    assert!(a.injected, "marked injected");
    assert!(
        a.latency_ms >= 120,
        "the delay is part of the attempt: {a:?}"
    );
}

#[tokio::test]
async fn the_admin_api_validates_lists_and_clears_faults() {
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(D::Anthropic, 2).build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    let bad = |body: Value, status: u16, needle: &'static str| {
        let s = &s;
        async move {
            let r = admin(s, Method::POST, "/api/faults", body.clone()).await;
            expect_status(&r, status, &format!("{body}"));
            assert!(r.text().contains(needle), "{body}: {}", r.text());
        }
    };
    bad(
        json!({"target": "p/k1", "kind": "503", "duration": "11m"}),
        400,
        "between 1s and 10m",
    )
    .await;
    bad(
        json!({"target": "p/k1", "kind": "503", "duration": "0s"}),
        400,
        "duration",
    )
    .await;
    bad(
        json!({"target": "p/k1", "kind": "boom"}),
        400,
        "unknown fault kind 'boom'",
    )
    .await;
    bad(json!({"target": "p/k1"}), 400, "kind").await;
    bad(json!({"kind": "503"}), 400, "target").await;
    bad(
        json!({"target": "p/k1", "kind": "503", "params": {"frames": 2}}),
        400,
        "frames applies",
    )
    .await;
    bad(
        json!({"target": "nope", "kind": "503"}),
        404,
        "unknown provider 'nope'",
    )
    .await;
    bad(
        json!({"target": "p/k9", "kind": "503"}),
        404,
        "unknown connection 'k9'",
    )
    .await;
    assert_eq!(admin_get(&s, "/api/faults").await, json!({"faults": []}));

    let a = inject(&s, json!({"target": "p/k1", "kind": "zombie"})).await;
    inject(
        &s,
        json!({"target": "p/k2", "kind": "stall", "params": {"frames": 3}}),
    )
    .await;
    inject(
        &s,
        json!({"target": "p", "kind": "reset", "duration": "10m"}),
    )
    .await;
    let listed = admin_get(&s, "/api/faults").await["faults"].clone();
    assert_eq!(listed.as_array().unwrap().len(), 3, "{listed:#}");
    assert_eq!(listed[1]["description"], "stall after 3 frames");

    let by_id = admin(
        &s,
        Method::DELETE,
        &format!("/api/faults?id={}", a["id"]),
        Value::Null,
    )
    .await;
    assert_eq!(by_id.json()["cleared"][0]["target"], "p/k1");
    let by_target = admin(&s, Method::DELETE, "/api/faults?target=p/k2", Value::Null).await;
    assert_eq!(by_target.json()["cleared"][0]["kind"], "stall");
    let all = admin(&s, Method::DELETE, "/api/faults", Value::Null).await;
    assert_eq!(all.json()["cleared"][0]["target"], "p");
    assert_eq!(admin_get(&s, "/api/faults").await, json!({"faults": []}));
    let put = admin(&s, Method::PUT, "/api/faults", Value::Null).await;
    expect_status(&put, 405, "PUT");
}

#[tokio::test]
async fn a_readonly_sluice_refuses_to_inject_or_clear() {
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(D::Anthropic, 1).build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    inject(&s, json!({"target": "p", "kind": "503"})).await;
    s.control().set_readonly(true);
    let post = admin(
        &s,
        Method::POST,
        "/api/faults",
        json!({"target": "p", "kind": "reset"}),
    )
    .await;
    expect_status(&post, 403, "inject while read-only");
    assert!(post.text().contains("read-only"), "{}", post.text());
    let del = admin(&s, Method::DELETE, "/api/faults", Value::Null).await;
    expect_status(&del, 403, "clear while read-only");
    let listed = admin_get(&s, "/api/faults").await;
    assert_eq!(
        listed["faults"][0]["kind"], "503",
        "listing still works; nothing changed"
    );
}

// === stream faults (real clock, millisecond guards) ===

const STREAMS: &str = "[resilience.stream]\nheartbeat_interval = \"60ms\"\nreadiness_timeout = \"150ms\"\ncontent_stall_timeout = \"300ms\"\n";

fn stream_body(model: &str) -> Value {
    D::Anthropic.body(model, true)
}

#[tokio::test]
async fn an_injected_stall_is_ended_by_the_stream_stall_guard() {
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(D::Anthropic, 1).tail(STREAMS).build(&mock);
    let s = Sluice::start(&cfg, ENV).await;
    inject(
        &s,
        json!({"target": "p/k1", "kind": "stall", "params": {"frames": 2}}),
    )
    .await;
    let mut st = client::open_json(&s.url("/v1/messages"), &stream_body("claude-x"), &[AV]).await;
    let (got, ended) = st.read_to_end(Duration::from_secs(5)).await;
    assert!(ended, "the guard ends the stream");
    let text = String::from_utf8_lossy(&got).into_owned();
    assert_eq!(
        text.matches("injected ").count(),
        2,
        "two frames, then the stall: {text}"
    );
    assert_eq!(
        text.matches("event: error").count(),
        1,
        "one error event: {text}"
    );
    assert_eq!(mock.count(), 0);
    let snap = s.wait_requests(1).await;
    assert!(snap.recent[0].injected);
    assert_eq!(
        sluice::snapshot::word::or_empty(&snap.providers[0].connections[0].last_error_kind),
        "stream_stall"
    );
}

#[tokio::test]
async fn an_injected_zombie_trips_the_readiness_guard_and_falls_back() {
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(D::Anthropic, 2)
        .tail(STREAMS)
        .tail(PAIR)
        .build(&mock);
    let s = Sluice::start(&cfg, ENV).await;
    inject(&s, json!({"target": "p/k1", "kind": "zombie"})).await;
    let mut st = client::open_json(&s.url("/v1/messages"), &stream_body("m"), &[AV]).await;
    let (got, _) = st.read_to_end(Duration::from_secs(5)).await;
    let text = String::from_utf8_lossy(&got).into_owned();
    assert!(text.contains("message_stop"), "k2's stream serves: {text}");
    assert!(
        !text.contains("msg_injected"),
        "nothing of the zombie reached the client"
    );
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (0, 1));
    let snap = s.wait_requests(1).await;
    let a = &snap.recent[0].attempt_log[0];
    assert!(a.injected);
    assert_eq!(
        sluice::snapshot::word::or_empty(&snap.providers[0].connections[0].last_error_kind),
        "transient"
    );
}
