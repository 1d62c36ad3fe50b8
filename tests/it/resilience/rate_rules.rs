//! The issue 9 §4 rules through HTTP: a concurrency-limited 429 fails over without raising
//! the level, `rate_limit_cooldown` replaces the ladder for a hint-less 429, and a
//! `request_rejected` 403 locks one model on one connection instead of banning it.

use std::time::Duration;

use super::*;

/// Takes K1 to backoff level 1 with one hint-less 503 (api_key ladder: 3 s), then lets the
/// cooldown lapse. The 503 is scripted once; later requests reach the default replies.
async fn raise_k1_to_level_one(s: &Sluice, clock: &sluice::clock::ManualClock, d: D) {
    expect_status(
        &d.send(s, d.model(), &[]).await,
        200,
        "k2 serves the 503'd request",
    );
    let k1 = conn_state(s, "p", "k1").await;
    assert_eq!(
        (k1["status"].as_str(), k1["backoffLevel"].as_u64()),
        (Some("cooling"), Some(1)),
        "{k1:#}"
    );
    clock.advance(Duration::from_secs(3));
    assert_eq!(conn_state(s, "p", "k1").await["status"], "active");
}

#[tokio::test]
async fn a_concurrency_limited_429_fails_over_cools_one_second_and_keeps_the_level() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(503, "server_error", "busy"));
    on_key(&mock, d, 1).times(1).reply(d.error(
        429,
        "rate_limit_error",
        "Too many concurrent requests for this API key",
    ));
    let cfg = Cfg::new(d, 2).tail(NO_WAIT).build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    raise_k1_to_level_one(&s, &clock, d).await;

    let r = d.send(&s, d.model(), &[]).await;
    expect_status(&r, 200, "fails over to k2 at once");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (2, 2));
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "cooling", "{k1:#}");
    assert_eq!(ms(&k1, "remainingMs"), 1_000, "cools 1 s: {k1:#}");
    assert_eq!(k1["backoffLevel"], 1, "the level does not move: {k1:#}");
    assert_eq!(k1["lastErrorKind"], "concurrency_limited", "{k1:#}");
    let snap = s.wait_requests(2).await;
    let attempts = &snap.recent[0].attempt_log;
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    assert_eq!(
        (attempts[0].class.as_str(), attempts[0].reason.as_str()),
        ("concurrency_limited", "concurrency_limited")
    );

    clock.advance(Duration::from_secs(1));
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "active", "eligible after 1 s: {k1:#}");
    expect_status(&d.send(&s, d.model(), &[]).await, 200, "k1 serves again");
    assert_eq!(hits(&mock, 1), 3);
}

#[tokio::test]
async fn a_concurrency_limited_429_honours_the_hint_and_feeds_no_breaker() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1).times(1).reply(
        d.error(429, "rate_limit_error", "并发数过高，请稍后再试")
            .header("retry-after", "4"),
    );
    on_key(&mock, d, 2).times(1).reply(d.error(
        429,
        "rate_limit_error",
        "Concurrency limit exceeded",
    ));
    // The local profile degrades at its first counted failure.
    let cfg = Cfg::new(d, 2).profile("local").tail(NO_WAIT).build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, d.model(), &[]).await, 429, "both keys limited");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        (ms(&k1, "remainingMs"), k1["backoffLevel"].as_u64()),
        (4_000, Some(0)),
        "the hint: {k1:#}"
    );
    assert_eq!(k1["lastErrorKind"], "concurrency_limited");
    let k2 = conn_state(&s, "p", "k2").await;
    assert_eq!(ms(&k2, "remainingMs"), 1_000, "no hint: 1 s: {k2:#}");
    let b = breaker_state(&s, "p").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("closed"), Some(0)),
        "never a breaker failure: {b:#}"
    );
}

#[tokio::test]
async fn a_hintless_429_cools_for_the_connections_rate_limit_cooldown() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(503, "server_error", "busy"));
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));
    // k1 sets its own value; the provider's 45 s applies to k2.
    let cfg = Cfg::new(d, 2)
        .provider("rate_limit_cooldown = \"45s\"")
        .tail(NO_WAIT)
        .build(&mock)
        .replacen(
            "auth = { env = \"K1\" }",
            "auth = { env = \"K1\" }\n  rate_limit_cooldown = \"20s\"",
            1,
        );
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    raise_k1_to_level_one(&s, &clock, d).await;
    on_key(&mock, d, 2)
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));

    let r = d.send(&s, d.model(), &[]).await;
    expect_status(&r, 429, "both keys rate limited");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "cooling", "{k1:#}");
    assert_eq!(
        ms(&k1, "remainingMs"),
        20_000,
        "the connection's value replaces the ladder (3 s x 2^1): {k1:#}"
    );
    assert_eq!(
        k1["backoffLevel"], 0,
        "the override resets the level: {k1:#}"
    );
    let k2 = conn_state(&s, "p", "k2").await;
    assert_eq!(
        ms(&k2, "remainingMs"),
        45_000,
        "the provider's value: {k2:#}"
    );

    clock.advance(Duration::from_secs(19));
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");
    clock.advance(Duration::from_secs(1));
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");
}

#[tokio::test]
async fn the_global_rate_limit_cooldown_is_live_through_patch_and_the_hint_still_wins() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));
    on_key(&mock, d, 2).times(1).reply(
        d.error(429, "rate_limit_error", "slow down")
            .header("retry-after", "7"),
    );
    let cfg = Cfg::new(d, 2).tail(NO_WAIT).build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    let r = admin(
        &s,
        Method::PATCH,
        "/api/resilience",
        json!({"rate_limit_cooldown": "90s"}),
    )
    .await;
    expect_status(&r, 200, "patch");
    let bad = admin(
        &s,
        Method::PATCH,
        "/api/resilience",
        json!({"rate_limit_cooldown": "7h"}),
    )
    .await;
    assert!(bad.status.is_client_error(), "{}", bad.text());
    assert!(
        bad.text().contains("rate_limit_cooldown"),
        "names the key: {}",
        bad.text()
    );

    expect_status(&d.send(&s, d.model(), &[]).await, 429, "both keys 429");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(ms(&k1, "remainingMs"), 90_000, "the patched value: {k1:#}");
    let k2 = conn_state(&s, "p", "k2").await;
    assert_eq!(ms(&k2, "remainingMs"), 7_000, "the hint wins: {k2:#}");
}

#[tokio::test]
async fn request_rejected_locks_the_model_on_the_connection_and_never_bans() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1).model("model-a").reply(d.error(
        403,
        "permission_error",
        "Request not allowed",
    ));
    let cfg = Cfg::new(d, 2).tail(NO_WAIT).build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;

    // Rejection 1: model-a locked on k1 for the base (120 s); k2 serves.
    expect_status(&d.send(&s, "model-a", &[]).await, 200, "k2 serves model-a");
    let locks = lockouts(&s).await;
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(
        (
            locks[0]["connection"].as_str(),
            locks[0]["model"].as_str(),
            locks[0]["reason"].as_str()
        ),
        (Some("k1"), Some("model-a"), Some("request_rejected")),
        "{locks:#?}"
    );
    assert_eq!(ms(&locks[0], "remainingMs"), 120_000, "{locks:#?}");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        k1["status"], "active",
        "the connection is not cooled: {k1:#}"
    );
    assert_eq!(k1["lastErrorKind"], "request_rejected", "{k1:#}");

    // While locked, model-a skips k1.
    expect_status(&d.send(&s, "model-a", &[]).await, 200, "k2 again");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (1, 2));

    // Rejection 2, after the first lock ran out: the lock doubles.
    clock.advance(Duration::from_secs(120));
    expect_status(&d.send(&s, "model-a", &[]).await, 200, "k2 serves");
    assert_eq!(hits(&mock, 1), 2, "k1 was tried once the lock ended");
    let locks = lockouts(&s).await;
    assert_eq!(ms(&locks[0], "remainingMs"), 240_000, "doubled: {locks:#?}");

    // model-b still goes to k1 (the default strategy tries k1 first).
    expect_status(&d.send(&s, "model-b", &[]).await, 200, "model-b");
    assert_eq!(hits(&mock, 1), 3, "model-b was served by k1");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "active", "never banned: {k1:#}");

    // Repeats keep doubling up to 1 h and never ban.
    for want in [480, 960, 1920, 3600, 3600] {
        let left = ms(&lockouts(&s).await[0], "remainingMs");
        clock.advance(Duration::from_millis(left));
        expect_status(&d.send(&s, "model-a", &[]).await, 200, "k2 serves");
        let l = &lockouts(&s).await[0];
        assert_eq!(ms(l, "remainingMs"), want * 1000, "{l:#}");
    }
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");
}
