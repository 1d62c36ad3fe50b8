//! The operator endpoints of §1 and §3a acting on state built through real requests.

use std::time::Duration;

use http::Method;
use serde_json::json;

use super::*;

#[tokio::test]
async fn reset_closes_an_open_breaker() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .times(2)
        .reply(d.error(503, "api_error", "unavailable"));
    let cfg = Cfg::new(d, 1)
        .profile("local")
        .each_conn("  disable_cooling = true")
        .tail(NO_WAIT)
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    for _ in 0..2 {
        expect_status(&d.send(&s, "gpt-x", &[]).await, 503, "503 passes through");
    }
    assert_eq!(breaker_state(&s, "p").await["state"], "open");
    expect_status(
        &d.send(&s, "gpt-x", &[]).await,
        503,
        "excluded by the breaker",
    );
    assert_eq!(mock.count(), 2);

    let r = admin(
        &s,
        Method::POST,
        "/api/resilience/reset",
        json!({"provider": "p"}),
    )
    .await;
    expect_status(&r, 200, "reset p");
    assert_eq!(r.json(), json!({"reset": ["p"]}));
    let b = breaker_state(&s, "p").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("closed"), Some(0)),
        "{b:#}"
    );
    assert_eq!(
        b["transitions"].as_array().unwrap().last().unwrap()["reason"],
        "operator_reset"
    );
    expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "traffic flows again");
    assert_eq!(mock.count(), 3);
    assert_eq!(
        s.snapshot().providers[0].breaker.state,
        sluice::snapshot::BreakerState::Closed
    );

    let all = admin(&s, Method::POST, "/api/resilience/reset", json!({})).await;
    assert_eq!(all.json(), json!({"reset": ["p"]}));
    let unknown = admin(
        &s,
        Method::POST,
        "/api/resilience/reset",
        json!({"provider": "nope"}),
    )
    .await;
    expect_status(&unknown, 404, "unknown provider");
}

#[tokio::test]
async fn clearing_cooldowns_reports_cleared_unchanged_and_skipped_terminal() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1).times(1).reply(
        d.error(429, "rate_limit_error", "slow down")
            .header("retry-after", "300"),
    );
    on_key(&mock, d, 2).times(1).reply(d.error(
        402,
        "billing_error",
        "Your credit balance is too low",
    ));
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 3).build(&mock), ENV).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "served by K3");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");
    assert_eq!(
        conn_state(&s, "p", "k2").await["status"],
        "credits_exhausted"
    );
    assert_eq!(conn_state(&s, "p", "k3").await["status"], "active");

    let r = admin(
        &s,
        Method::POST,
        "/api/resilience/cooldowns",
        json!({"all": true}),
    )
    .await;
    expect_status(&r, 200, "clear all");
    assert_eq!(
        r.json(),
        json!({"cleared": ["k1"], "unchanged": ["k3"], "skippedTerminal": ["k2"], "lockoutsCleared": 0})
    );
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        (k1["status"].as_str(), ms(&k1, "remainingMs")),
        (Some("active"), 0),
        "{k1:#}"
    );
    assert_eq!(
        s.snapshot().providers[0].connections[1].status,
        sluice::snapshot::ConnectionStatus::CreditsExhausted
    );

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "K1 serves again");
    assert_eq!(hits(&mock, 1), 2, "the cleared connection is first again");

    let again = admin(
        &s,
        Method::POST,
        "/api/resilience/cooldowns",
        json!({"connectionIds": ["k1", "k2"]}),
    )
    .await;
    assert_eq!(
        again.json(),
        json!({"cleared": [], "unchanged": ["k1"], "skippedTerminal": ["k2"], "lockoutsCleared": 0})
    );
    let bad = admin(
        &s,
        Method::POST,
        "/api/resilience/cooldowns",
        json!({"connectionIds": ["nope"]}),
    )
    .await;
    expect_status(&bad, 404, "unknown connection");
}

#[tokio::test]
async fn clearing_cooldowns_counts_the_model_lockouts_it_cleared() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    // Lockout mode: K1 rate-limits every model, K2 only gpt-z. So K1 ends with three model
    // locks (gpt-x, gpt-y, gpt-z) and K2 with one (gpt-z); both connections stay active.
    on_key(&mock, d, 1).reply(d.error(429, "rate_limit_error", "slow down"));
    on_key(&mock, d, 2)
        .model("gpt-z")
        .reply(d.error(429, "rate_limit_error", "slow down"));
    let cfg = Cfg::new(d, 2)
        .tail(NO_WAIT)
        .tail("[resilience.model_lockout]\nenabled = true")
        .build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    for model in ["gpt-x", "gpt-y"] {
        expect_status(&d.send(&s, model, &[]).await, 200, "K1 429, K2 serves");
    }
    expect_status(
        &d.send(&s, "gpt-z", &[]).await,
        429,
        "both locked for gpt-z",
    );
    let locked =
        |conn: &str, locks: &[Value]| locks.iter().filter(|l| l["connection"] == conn).count();
    let locks = lockouts(&s).await;
    assert_eq!(
        (locked("k1", &locks), locked("k2", &locks)),
        (3, 1),
        "{locks:#?}"
    );
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");

    // A moment later (the locks are still live) the operator clears K1: its three locks go,
    // K2's stays.
    clock.advance(Duration::from_secs(5));
    let r = admin(
        &s,
        Method::POST,
        "/api/resilience/cooldowns",
        json!({"connectionIds": ["k1"]}),
    )
    .await;
    expect_status(&r, 200, "clear k1");
    assert_eq!(
        r.json(),
        json!({"cleared": ["k1"], "unchanged": [], "skippedTerminal": [], "lockoutsCleared": 3})
    );
    let locks = lockouts(&s).await;
    assert_eq!(
        (locked("k1", &locks), locked("k2", &locks)),
        (0, 1),
        "{locks:#?}"
    );
    let before = hits(&mock, 1);
    expect_status(
        &d.send(&s, "gpt-z", &[]).await,
        429,
        "K1 is tried for gpt-z again",
    );
    assert_eq!(hits(&mock, 1), before + 1);

    // Clearing everything counts only the locks live now: K1's new gpt-z lock and K2's.
    let r = admin(
        &s,
        Method::POST,
        "/api/resilience/cooldowns",
        json!({"all": true}),
    )
    .await;
    assert_eq!(
        r.json(),
        json!({"cleared": ["k1", "k2"], "unchanged": [], "skippedTerminal": [], "lockoutsCleared": 2})
    );
    assert!(lockouts(&s).await.is_empty());

    // A lock whose time has passed is not counted.
    expect_status(
        &d.send(&s, "gpt-x", &[]).await,
        200,
        "K1 429 again, K2 serves",
    );
    clock.advance(Duration::from_secs(121));
    let r = admin(
        &s,
        Method::POST,
        "/api/resilience/cooldowns",
        json!({"connectionIds": ["k1"]}),
    )
    .await;
    assert_eq!(
        r.json(),
        json!({"cleared": [], "unchanged": ["k1"], "skippedTerminal": [], "lockoutsCleared": 0})
    );
}

#[tokio::test]
async fn deleting_a_model_cooldown_re_enables_the_model() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .model("gpt-x")
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));
    let cfg = Cfg::new(d, 1)
        .tail(NO_WAIT)
        .tail("[resilience.model_lockout]\nenabled = true")
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[]).await, 429, "upstream 429");
    let locks = lockouts(&s).await;
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(
        ms(&locks[0], "remainingMs"),
        120_000,
        "default base_cooldown"
    );
    expect_status(&d.send(&s, "gpt-x", &[]).await, 429, "locked");
    assert_eq!(mock.count(), 1);

    let del = json!({"provider": "p", "connection": "k1", "model": "gpt-x"});
    let r = admin(
        &s,
        Method::DELETE,
        "/api/resilience/model-cooldowns",
        del.clone(),
    )
    .await;
    expect_status(&r, 200, "delete lock");
    assert_eq!(r.json(), json!({"removed": true}));
    assert!(lockouts(&s).await.is_empty());
    expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "re-enabled");
    assert_eq!(mock.count(), 2);

    let r = admin(&s, Method::DELETE, "/api/resilience/model-cooldowns", del).await;
    assert_eq!(r.json(), json!({"removed": false}));
}

#[tokio::test]
async fn patch_rejects_max_cooldown_below_base_cooldown() {
    let mock = MockUpstream::start().await;
    let (s, _clock) = Sluice::start_manual(&Cfg::new(D::OpenAi, 1).build(&mock), ENV).await;
    let before = admin_get(&s, "/api/resilience").await;

    let r = admin(
        &s,
        Method::PATCH,
        "/api/resilience",
        json!({"model_lockout": {"base_cooldown": "10m", "max_cooldown": "1m"}}),
    )
    .await;
    expect_status(&r, 400, "invalid patch");
    let v = r.json();
    assert_eq!(v["error"]["field"], "model_lockout.max_cooldown", "{v:#}");
    assert_eq!(
        admin_get(&s, "/api/resilience").await,
        before,
        "a rejected patch changes nothing"
    );
}

#[tokio::test]
async fn patch_enabling_lockout_mode_applies_to_the_next_request() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .model("gpt-x")
        .reply(d.error(429, "rate_limit_error", "slow down"));
    let (s, clock) = Sluice::start_manual(&Cfg::new(d, 1).tail(NO_WAIT).build(&mock), ENV).await;

    // Before: a 429 cools the connection.
    expect_status(&d.send(&s, "gpt-x", &[]).await, 429, "connection mode");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");
    assert!(lockouts(&s).await.is_empty());
    clock.advance(Duration::from_secs(60));

    let r = admin(
        &s,
        Method::PATCH,
        "/api/resilience",
        json!({"model_lockout": {"enabled": true, "base_cooldown": "2s"},
               "connection_cooldown": {"api_key": {"base": "1s"}},
               "stream_stall_cooldown": true}),
    )
    .await;
    expect_status(&r, 200, "valid patch");
    let v = r.json();
    assert_eq!(v["settings"]["model_lockout"]["enabled"], true, "{v:#}");
    let got = admin_get(&s, "/api/resilience").await;
    assert_eq!(
        got["overrides"]["model_lockout"]["enabled"], true,
        "{got:#}"
    );

    // After: the same 429 locks the model instead.
    expect_status(&d.send(&s, "gpt-x", &[]).await, 429, "lockout mode");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        k1["status"], "active",
        "no connection cooldown in lockout mode: {k1:#}"
    );
    let locks = lockouts(&s).await;
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(locks[0]["model"], "gpt-x");
    assert_eq!(
        ms(&locks[0], "remainingMs"),
        2_000,
        "the patched base_cooldown"
    );
    expect_status(
        &d.send(&s, "gpt-y", &[]).await,
        200,
        "other model still served",
    );

    // DELETE reverts to the file's settings.
    let r = admin(&s, Method::DELETE, "/api/resilience", Value::Null).await;
    expect_status(&r, 200, "revert");
    assert_eq!(r.json()["settings"]["model_lockout"]["enabled"], false);
}
