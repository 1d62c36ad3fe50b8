//! §2 connection cooldown through HTTP: the max rule (A01), a hinted and a bare 429 racing,
//! one level per burst (A02), the level surviving expiry (A03), OpenAI reset headers (A07)
//! and the terminal states.

use std::time::Duration;

use http::Method;
use serde_json::json;

use sluice::clock::{Clock, unix_ms};

use super::*;
use crate::support::client;

/// A01 body of the hinted 429.
fn slow_down() -> Value {
    json!({"error": {"type": "rate_limit_error", "message": "slow down"}})
}

#[tokio::test]
async fn a01_second_429_in_flight_extends_the_cooldown_to_the_max() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    // Both replies are delayed so both requests are in flight on K1 at once: the first
    // arrival gets the hinted 429, the second (250 ms later) the one without a hint.
    on_key(&mock, d, 1).times(1).reply(
        Reply::json(429, slow_down())
            .header("retry-after", "1")
            .delay(Duration::from_millis(150)),
    );
    on_key(&mock, d, 1).times(1).reply(
        d.error(429, "rate_limit_error", "slow down")
            .delay(Duration::from_millis(400)),
    );
    let cfg = Cfg::new(d, 2)
        .tail("[[combos]]\nname = \"m\"\ntargets = [\"p:k1/gpt-x\", \"p:k2/gpt-x\"]")
        .build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;

    let (r1, r2) = tokio::join!(d.send(&s, "m", &[]), d.send(&s, "m", &[]));
    expect_status(&r1, 200, "r1 falls back to K2");
    expect_status(&r2, 200, "r2 falls back to K2");
    assert_eq!(hits(&mock, 1), 2, "both requests were in flight on K1");
    assert_eq!(hits(&mock, 2), 2);

    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "cooling", "{k1:#}");
    let remaining = ms(&k1, "remainingMs");
    assert!(
        remaining > 1_000,
        "the later, longer deadline wins over retry-after: 1 (max rule): {k1:#}"
    );
    assert_eq!(
        remaining, 3_000,
        "the hint-less 429 took the ladder's first step (api_key base 3s)"
    );
    assert_eq!(k1["backoffLevel"], 1);
    assert_eq!(conn_state(&s, "p", "k2").await["status"], "active");

    clock.advance(Duration::from_millis(1_500));
    let r3 = d.send(&s, "m", &[]).await;
    expect_status(&r3, 200, "r3 at t=1.5s");
    assert_eq!(hits(&mock, 1), 2, "K1 must not be dispatched to at t=1.5s");
    assert_eq!(hits(&mock, 2), 3);

    let b = breaker_state(&s, "p").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("closed"), Some(0)),
        "429 is never a breaker failure: {b:#}"
    );
    assert_eq!(
        s.snapshot().providers[0].breaker.state,
        sluice::snapshot::BreakerState::Closed
    );

    // Past the max deadline K1 serves again, and its success clears the whole record.
    clock.advance(Duration::from_millis(1_500));
    expect_status(&d.send(&s, "m", &[]).await, 200, "r4 at t=3s");
    assert_eq!(
        hits(&mock, 1),
        3,
        "K1 is eligible once the 3 s deadline passed"
    );
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        (
            k1["status"].as_str(),
            k1["backoffLevel"].as_u64(),
            k1["lastError"].as_str()
        ),
        (Some("active"), Some(0), Some("")),
        "a success clears status, deadline, error fields and backoff_level: {k1:#}"
    );
}

/// Polls (every few ms, up to 5 s) until connection `k1` of provider `p` is excluded.
async fn wait_k1_excluded(s: &Sluice) {
    let waited = tokio::time::timeout(Duration::from_secs(5), async {
        while s.snapshot().providers[0].connections[0].status
            == sluice::snapshot::ConnectionStatus::Active
        {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "k1 was never excluded");
}

#[tokio::test]
async fn a_hinted_429_and_a_racing_bare_429_cool_until_the_hinted_deadline_in_either_order() {
    for hinted_first in [true, false] {
        let mock = MockUpstream::start().await;
        let d = D::OpenAi;
        let hinted = Reply::json(429, slow_down()).header("retry-after", "30");
        let bare = d.error(429, "rate_limit_error", "slow down");
        // Both requests are in flight on K1 at once; the first upstream reply comes back
        // after 100 ms, the second after 800 ms (real time, so the policy clock can be moved
        // between the two verdicts).
        let (early, late) = if hinted_first {
            (hinted, bare)
        } else {
            (bare, hinted)
        };
        on_key(&mock, d, 1)
            .times(1)
            .reply(early.delay(Duration::from_millis(100)));
        on_key(&mock, d, 1)
            .times(1)
            .reply(late.delay(Duration::from_millis(800)));
        let cfg = Cfg::new(d, 2)
            .tail("[[combos]]\nname = \"m\"\ntargets = [\"p:k1/gpt-x\", \"p:k2/gpt-x\"]")
            .build(&mock);
        let (s, clock) = Sluice::start_manual(&cfg, ENV).await;

        let both = tokio::spawn({
            let url = s.url(d.path());
            async move {
                let body = d.body("m", false);
                tokio::join!(
                    client::post_json(&url, &body, &[]),
                    client::post_json(&url, &body, &[])
                )
            }
        });
        // Both dispatched at T0; the first verdict lands at T0 + 10 ms, the second at
        // T0 + 210 ms: the clock moves between every event.
        wait_hits(&mock, 1, 2).await;
        clock.advance(Duration::from_millis(10));
        wait_k1_excluded(&s).await;
        let mut hinted_at = (Duration::from_millis(10), unix_ms(clock.wall()));
        clock.advance(Duration::from_millis(200));
        if !hinted_first {
            hinted_at = (Duration::from_millis(210), unix_ms(clock.wall()));
        }
        let (r1, r2) = both.await.unwrap();
        expect_status(&r1, 200, "r1 falls back to K2");
        expect_status(&r2, 200, "r2 falls back to K2");
        assert_eq!((hits(&mock, 1), hits(&mock, 2)), (2, 2));

        let case = if hinted_first {
            "hinted first"
        } else {
            "bare first"
        };
        let k1 = s.snapshot().providers[0].connections[0].clone();
        assert_eq!(
            k1.status,
            sluice::snapshot::ConnectionStatus::Cooling,
            "{case}: {k1:#?}"
        );
        let until = k1
            .cooldown_until_unix_ms
            .unwrap_or_else(|| panic!("{case}: no deadline: {k1:#?}"));
        // The hinted deadline is its verdict's instant + 30 s (the bare 429's ladder step,
        // 3 s, is shorter); 1 ms of slack for the wall clock's sub-millisecond part.
        let want = hinted_at.1 + 30_000;
        assert!(
            until.abs_diff(want) <= 1,
            "{case}: cooldown_until {until} is not the hinted deadline {want}: {k1:#?}"
        );
        assert_eq!(k1.backoff_level, 1, "{case}: one ladder step for the burst");

        // K1 stays out until the hinted deadline, and serves from it on (the clock is at
        // T0 + 210 ms; the deadline at the hinted verdict's offset + 30 s).
        let left = hinted_at.0 + Duration::from_secs(30) - Duration::from_millis(210);
        clock.advance(left - Duration::from_millis(1));
        expect_status(&d.send(&s, "m", &[]).await, 200, "just before the deadline");
        assert_eq!(hits(&mock, 1), 2, "{case}: K1 is still cooling");
        clock.advance(Duration::from_millis(1));
        expect_status(&d.send(&s, "m", &[]).await, 200, "after the deadline");
        assert_eq!(hits(&mock, 1), 3, "{case}: K1 is eligible at the deadline");
        s.stop().await;
    }
}

#[tokio::test]
async fn a02_burst_of_429s_raises_the_backoff_level_once() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1).reply(
        d.error(
            429,
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
        )
        .delay(Duration::from_millis(500)),
    );
    on_key(&mock, d, 2).reply(Reply::anthropic_text("served by K2"));
    let cfg = Cfg::new(d, 2)
        .tail(
            "[resilience.connection_cooldown]\nmax_cooldown = \"10m\"\n\
             [resilience.connection_cooldown.api_key]\nbase = \"5s\"",
        )
        .build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;

    let url = s.url(d.path());
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move {
                let mut st = client::open_json(&url, &d.body("claude-x", true), &[AV]).await;
                let status = st.status;
                let (bytes, clean) = st.read_to_end(Duration::from_secs(5)).await;
                (status, String::from_utf8_lossy(&bytes).into_owned(), clean)
            })
        })
        .collect();
    // All eight are dispatched to K1 before the first 429 lands; the failures are classified
    // a moment later.
    wait_hits(&mock, 1, 8).await;
    clock.advance(Duration::from_millis(10));
    for t in tasks {
        let (status, text, clean) = t.await.unwrap();
        assert_eq!(status, 200, "{text}");
        assert!(clean && text.contains("message_stop") && text.contains("served by K2"));
    }
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (8, 8));

    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "cooling", "{k1:#}");
    assert_eq!(
        k1["backoffLevel"], 1,
        "one failure episode, one level: {k1:#}"
    );
    let remaining = ms(&k1, "remainingMs");
    assert_eq!(remaining, 5_000, "base x 2^0 for the episode: {k1:#}");
    assert!(remaining <= 600_000, "never above max_cooldown");
    let k2 = conn_state(&s, "p", "k2").await;
    assert_eq!(
        (k2["status"].as_str(), k2["backoffLevel"].as_u64()),
        (Some("active"), Some(0)),
        "K1's burst cools no other connection: {k2:#}"
    );

    clock.advance(Duration::from_secs(5));
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");
    let r = client::post_json(&url, &d.body("claude-x", false), &[AV]).await;
    expect_status(&r, 200, "after K1's cooldown");
    assert_eq!(hits(&mock, 1), 9, "K1 is eligible again after base x 2^0");
}

#[tokio::test]
async fn a03_backoff_level_survives_expiry_so_quota_errors_escalate() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1).reply(Reply::json(
        429,
        json!({"error": {"message": "subscription quota exceeded"}}),
    ));
    let cfg = Cfg::new(d, 2)
        .tail(
            "[resilience.connection_cooldown.api_key]\nbase = \"5s\"\n\
             [[combos]]\nname = \"m\"\ntargets = [\"p/gpt-x\"]",
        )
        .build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;

    let mut levels = Vec::new();
    for i in 0..30 {
        if i == 3 {
            // t = 6 s: the first cooldown (5 s) has expired, the level has not.
            let k1 = conn_state(&s, "p", "k1").await;
            levels.push((k1["status"].clone(), k1["backoffLevel"].clone()));
        }
        let r = d.send(&s, "m", &[]).await;
        expect_status(&r, 200, &format!("request {i}"));
        clock.advance(Duration::from_secs(2));
    }
    let k1_calls = hits(&mock, 1);
    assert!(
        (4..=5).contains(&k1_calls),
        "K1 got {k1_calls} upstream calls in 60 s; cooldowns 5, 10, 20, 40 s allow 4-5"
    );
    assert_eq!(hits(&mock, 2), 30, "every request was served by K2");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["lastErrorKind"], "quota_exhausted", "{k1:#}");
    assert_eq!(ms(&k1, "backoffLevel"), k1_calls as u64);
    assert_eq!(
        levels,
        vec![(json!("active"), json!(1))],
        "at t=6 s the cooldown has expired but the backoff level is kept"
    );
}

#[tokio::test]
async fn a07_openai_reset_headers_cool_until_the_exhausted_bucket_resets() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1).reply(
        Reply::json(
            429,
            json!({"error": {"code": "rate_limit_exceeded", "message": "TPM limit. Please try again in 1m9.696s."}}),
        )
        .header("x-ratelimit-remaining-requests", "12")
        .header("x-ratelimit-remaining-tokens", "0")
        .header("x-ratelimit-reset-requests", "1m30s")
        .header("x-ratelimit-reset-tokens", "6m0s"),
    );
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).build(&mock), ENV).await;

    let r = d.send(&s, "gpt-x", &[]).await;
    expect_status(&r, 200, "falls back to K2");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        k1["status"], "cooling",
        "360 s is below quota_wait_threshold"
    );
    assert_eq!(
        ms(&k1, "remainingMs"),
        360_000,
        "the exhausted tokens bucket (6m0s) wins: {k1:#}"
    );
    assert_eq!(k1["lastErrorKind"], "rate_limited");
    assert_eq!(k1["lastStatus"], 429);
}

#[tokio::test]
async fn a07_without_reset_headers_the_body_text_hint_is_used() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1).reply(Reply::json(
        429,
        json!({"error": {"code": "rate_limit_exceeded", "message": "TPM limit. Please try again in 1m9.696s."}}),
    ));
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).build(&mock), ENV).await;

    expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "falls back to K2");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "cooling");
    let remaining = ms(&k1, "remainingMs");
    assert!(
        (69_000..=70_000).contains(&remaining),
        "body text 1m9.696s: {k1:#}"
    );
}

#[tokio::test]
async fn oauth_429_without_a_hint_cools_60s_and_api_key_takes_the_ladder() {
    for (profile, want) in [("oauth", 60_000), ("api_key", 3_000), ("local", 1_000)] {
        let mock = MockUpstream::start().await;
        let d = D::Anthropic;
        on_key(&mock, d, 1).reply(d.error(429, "rate_limit_error", "slow down"));
        let cfg = Cfg::new(d, 2).profile(profile).build(&mock);
        let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;

        expect_status(&d.send(&s, "claude-x", &[]).await, 200, "falls back to K2");
        let k1 = conn_state(&s, "p", "k1").await;
        assert_eq!(k1["status"], "cooling", "{profile}: {k1:#}");
        assert_eq!(ms(&k1, "remainingMs"), want, "{profile}: {k1:#}");
    }
}

// === terminal states ===

#[tokio::test]
async fn credits_exhausted_is_terminal_and_never_cleared_by_the_cooldown_manager() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1).reply(d.error(
        402,
        "billing_error",
        "Your credit balance is too low to access the API.",
    ));
    let cfg = Cfg::new(d, 2).build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "falls back to K2");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "credits_exhausted", "{k1:#}");

    for body in [
        json!({"all": true}),
        json!({"connectionIds": ["k1"]}),
        json!({"all": true, "provider": "p"}),
    ] {
        let r = admin(&s, Method::POST, "/api/resilience/cooldowns", body.clone()).await;
        expect_status(&r, 200, &format!("clear {body}"));
        let v = r.json();
        assert_eq!(v["skippedTerminal"], json!(["k1"]), "{body}: {v:#}");
        assert!(!v["cleared"].as_array().unwrap().contains(&json!("k1")));
    }
    clock.advance(Duration::from_secs(7 * 86_400));
    assert_eq!(
        conn_state(&s, "p", "k1").await["status"],
        "credits_exhausted",
        "terminal states do not expire"
    );
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "still via K2");
    assert_eq!(
        hits(&mock, 1),
        1,
        "a terminal connection is never dispatched to"
    );
    assert_eq!(
        s.snapshot().providers[0].connections[0].status,
        sluice::snapshot::ConnectionStatus::CreditsExhausted
    );
}

/// Sends one request to a single-connection provider and returns K1's state after it.
async fn fail_once(s: &Sluice, d: D) -> Value {
    let r = d.send(s, d.model(), &[]).await;
    assert!(r.status.is_client_error(), "{}: {}", r.status, r.text());
    conn_state(s, "p", "k1").await
}

#[tokio::test]
async fn third_consecutive_401_expires_the_connection() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1).reply(d.error(401, "invalid_request_error", "Incorrect API key provided"));
    let cfg = Cfg::new(d, 1).tail(NO_WAIT).build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;

    for i in 1..=2 {
        let k1 = fail_once(&s, d).await;
        assert_eq!(k1["status"], "cooling", "401 number {i} cools: {k1:#}");
        assert_eq!(k1["lastErrorKind"], "auth");
        clock.advance(Duration::from_secs(120));
    }
    let k1 = fail_once(&s, d).await;
    assert_eq!(k1["status"], "expired", "{k1:#}");
    let b = breaker_state(&s, "p").await;
    assert_eq!(b["failureCount"], 0, "401 never counts for the breaker");
}

#[tokio::test]
async fn ban_marker_bans_at_once() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1).reply(d.error(
        403,
        "permission_error",
        "This organization has been disabled.",
    ));
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).build(&mock), ENV).await;

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "falls back to K2");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "banned");
    assert_eq!(conn_state(&s, "p", "k2").await["status"], "active");
}
