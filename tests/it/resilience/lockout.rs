//! §3 model lockout through HTTP: a Gemini-style body hint locks one model for its hinted
//! time (A05), leaving the connection and its other models alone.

use serde_json::json;

use super::*;

/// A05: Gemini 429 whose only hint is the structured `retryDelay` (plus a longer one in text).
fn gemini_429() -> Reply {
    Reply::json(
        429,
        json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "message": "Quota hit. Please retry in 26.66s.",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "26s"}]}}),
    )
}

/// Lockout mode with a 1 s base, so the lock length is the hint's (§3 "max(that, retry
/// hint)"); no §4 wait (the clock is manual).
fn lockout_config(mock: &MockUpstream) -> String {
    Cfg::new(D::OpenAi, 1)
        .tail(NO_WAIT)
        .tail("[resilience.model_lockout]\nenabled = true\nbase_cooldown = \"1s\"")
        .build(mock)
}

#[tokio::test]
async fn a05_body_retry_delay_locks_only_that_model_for_the_hinted_time() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path()).model("gemini-x").reply(gemini_429());
    let (s, _clock) = Sluice::start_manual(&lockout_config(&mock), ENV).await;

    let r = d.send(&s, "gemini-x", &[]).await;
    expect_status(&r, 429, "no fallback: the upstream 429 passes through");
    assert_eq!(
        r.body,
        gemini_429().body_bytes(),
        "upstream body unchanged (§8 row 2)"
    );

    let locks = lockouts(&s).await;
    assert_eq!(locks.len(), 1, "{locks:#?}");
    let l = &locks[0];
    assert_eq!(
        (
            l["provider"].as_str(),
            l["connection"].as_str(),
            l["model"].as_str()
        ),
        (Some("p"), Some("k1"), Some("gemini-x"))
    );
    let remaining = ms(l, "remainingMs");
    assert_eq!(
        remaining, 26_000,
        "structured retryDelay 26s wins over the message's 26.66s; not a day-long quota lock: {l:#}"
    );
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        k1["status"], "active",
        "lockout mode records a model lock instead of a connection cooldown: {k1:#}"
    );
    assert_eq!(k1["lockouts"].as_array().unwrap().len(), 1);

    // Another model on the same key is unaffected.
    let other = d.send(&s, "gemini-y", &[]).await;
    expect_status(&other, 200, "other model on the same key");
    assert_eq!(mock.count(), 2);

    // The locked model is excluded before dispatch.
    let again = d.send(&s, "gemini-x", &[]).await;
    expect_status(&again, 429, "locked model");
    assert_eq!(mock.count(), 2, "a locked model is not dispatched");
    let v = again.json();
    assert_eq!(v["sluice"]["code"], "rate_limit_error");
    assert_eq!(
        v["sluice"]["diagnostics"]["excluded"][0]["reason"],
        "model_lockout"
    );
    assert_eq!(retry_after(&again), Some(26));

    let b = breaker_state(&s, "p").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("closed"), Some(0)),
        "breaker untouched: {b:#}"
    );
}

#[tokio::test]
async fn a05_lock_expires_after_the_hint() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .model("gemini-x")
        .times(1)
        .reply(gemini_429());
    let (s, clock) = Sluice::start_manual(&lockout_config(&mock), ENV).await;

    expect_status(&d.send(&s, "gemini-x", &[]).await, 429, "first call");
    clock.advance(std::time::Duration::from_millis(25_900));
    expect_status(
        &d.send(&s, "gemini-x", &[]).await,
        429,
        "still locked at 25.9s",
    );
    assert_eq!(mock.count(), 1);
    clock.advance(std::time::Duration::from_millis(200));
    expect_status(&d.send(&s, "gemini-x", &[]).await, 200, "unlocked at 26.1s");
    assert_eq!(mock.count(), 2);
    assert!(
        lockouts(&s).await.is_empty(),
        "a success removes the lock (decay to 0)"
    );
}

#[tokio::test]
async fn a05_client_is_told_the_structured_retry_delay() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path()).model("gemini-x").reply(gemini_429());
    let (s, _clock) = Sluice::start_manual(&lockout_config(&mock), ENV).await;

    let r = d.send(&s, "gemini-x", &[]).await;
    expect_status(&r, 429, "no fallback");
    assert_eq!(
        retry_after(&r),
        Some(26),
        "cases.md A05: client gets 429 with retry-after from the structured retryDelay"
    );
}

#[tokio::test]
async fn rate_limit_locks_the_quota_group_and_a_5xx_only_the_exact_model() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .model("gpt-5-mini")
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));
    mock.on(d.path())
        .model("other-a")
        .times(1)
        .reply(d.error(503, "api_error", "unavailable"));
    let cfg = Cfg::new(d, 1)
        .provider("[providers.quota_groups]\n\"gpt-5\" = [\"gpt-5*\"]")
        .tail(NO_WAIT)
        .tail("[resilience.model_lockout]\nenabled = true")
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;

    expect_status(
        &d.send(&s, "gpt-5-mini", &[]).await,
        429,
        "429 on gpt-5-mini",
    );
    let locks = lockouts(&s).await;
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(
        (locks[0]["model"].as_str(), locks[0]["scope"].as_str()),
        (Some("gpt-5"), Some("quota_group")),
        "listed under the group name"
    );
    let r = d.send(&s, "gpt-5-nano", &[]).await;
    expect_status(&r, 429, "same quota group is locked");
    assert_eq!(
        r.json()["sluice"]["diagnostics"]["excluded"][0]["reason"],
        "model_lockout"
    );
    assert_eq!(mock.count(), 1);

    expect_status(&d.send(&s, "other-a", &[]).await, 503, "503 on other-a");
    assert_eq!(
        breaker_state(&s, "p").await["failureCount"],
        1,
        "breaker counting is independent of lockout mode"
    );
    let r = d.send(&s, "other-b", &[]).await;
    expect_status(&r, 200, "a 5xx locks only the exact triple");
    let locks = lockouts(&s).await;
    assert!(
        locks
            .iter()
            .any(|l| l["model"] == "other-a" && l["scope"] == "triple"),
        "{locks:#?}"
    );
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");
}
