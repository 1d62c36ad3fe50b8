//! Routing around the layers: §2a session affinity, the §4 cooldown-aware wait (real time,
//! millisecond cooldowns) and A24 header pass-through.

use std::time::Duration;

use sluice::clock::{Clock, SystemClock};

use super::*;
use crate::support::client;

const SESSION: (&str, &str) = ("x-claude-code-session-id", "sess-affinity-1");

#[tokio::test]
async fn session_stays_on_the_connection_that_last_succeeded() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    // K1 fails once with an overload (no cooldown), so K1 is healthy again right after.
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(529, "overloaded_error", "Overloaded"));
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).build(&mock), ENV).await;

    expect_status(
        &d.send(&s, "claude-x", &[SESSION]).await,
        200,
        "turn 1 via K2",
    );
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (1, 1));
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");

    expect_status(&d.send(&s, "claude-x", &[SESSION]).await, 200, "turn 2");
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (1, 2),
        "the session's next turn goes to K2 first although K1 is healthy"
    );

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "no session");
    assert_eq!(
        hits(&mock, 1),
        2,
        "without a session the config order applies"
    );
    expect_status(
        &d.send(
            &s,
            "claude-x",
            &[("x-claude-code-session-id", "other-session")],
        )
        .await,
        200,
        "another session",
    );
    assert_eq!(
        hits(&mock, 1),
        3,
        "an unpinned session starts in config order"
    );

    for r in mock.requests() {
        for h in [
            "x-session-id",
            "x-claude-code-session-id",
            "x-codex-session-id",
            "x-sluice-session",
        ] {
            assert!(r.header(h).is_none(), "{h} reached the upstream");
        }
    }
}

#[tokio::test]
async fn pinned_connection_that_cools_is_skipped_and_the_session_re_pinned() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(529, "overloaded_error", "Overloaded"));
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).build(&mock), ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[SESSION]).await, 200, "pinned to K2");

    // K2 now rate limits once: the pin is soft, K1 serves and takes the pin.
    on_key(&mock, d, 2)
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));
    expect_status(
        &d.send(&s, "gpt-x", &[SESSION]).await,
        200,
        "falls back to K1",
    );
    assert_eq!(conn_state(&s, "p", "k2").await["status"], "cooling");
    let before = hits(&mock, 1);
    expect_status(&d.send(&s, "gpt-x", &[SESSION]).await, 200, "re-pinned");
    assert_eq!(hits(&mock, 1), before + 1, "the session moved to K1");
}

/// One connection whose first reply is a hint-less 429; api_key ladder base 100 ms.
fn wait_config(mock: &MockUpstream, wait: &str) -> String {
    Cfg::new(D::OpenAi, 1)
        .tail("[resilience.connection_cooldown.api_key]\nbase = \"100ms\"")
        .tail(wait)
        .build(mock)
}

#[tokio::test]
async fn cooldown_aware_wait_waits_for_a_short_cooldown_and_succeeds() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));
    let s = Sluice::start(&wait_config(&mock, ""), ENV).await;

    expect_status(
        &d.send(&s, "gpt-x", &[]).await,
        429,
        "first call passes the 429 through",
    );
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");

    let started = SystemClock.now();
    let r = d.send(&s, "gpt-x", &[]).await;
    let took = SystemClock.now() - started;
    expect_status(&r, 200, "waited out the cooldown");
    assert_eq!(mock.count(), 2);
    assert!(
        took >= Duration::from_millis(30) && took < Duration::from_secs(2),
        "waited about the remaining 100 ms, took {took:?}"
    );
}

#[tokio::test]
async fn cooldown_aware_wait_disabled_answers_429_at_once() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .times(1)
        .reply(d.error(429, "rate_limit_error", "slow down"));
    let s = Sluice::start(&wait_config(&mock, NO_WAIT), ENV).await;

    expect_status(&d.send(&s, "gpt-x", &[]).await, 429, "first call");
    let r = d.send(&s, "gpt-x", &[]).await;
    expect_status(&r, 429, "no wait");
    assert_eq!(r.json()["sluice"]["code"], "rate_limit_error");
    assert_eq!(retry_after(&r), Some(1), "100 ms rounds up to 1 s");
    assert_eq!(mock.count(), 1);
}

/// Two combos over one connection that a 429 cooled for 30 s on the manual clock: `patient`
/// (the default) waits for the cooldown, `impatient` (`cooldown_wait = false`) answers at once.
/// The waiting request is a stream, so its heartbeats show it is waiting before the clock moves.
#[tokio::test]
async fn a_combo_with_cooldown_wait_false_answers_at_once_while_another_waits() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    mock.on(d.path()).times(1).reply(
        d.error(429, "rate_limit_error", "slow down")
            .header("retry-after", "30"),
    );
    let combos = "[[combos]]\nname = \"patient\"\ntargets = [\"p/claude-x\"]\n\n[[combos]]\nname = \"impatient\"\ncooldown_wait = false\ntargets = [\"p/claude-x\"]\n";
    let cfg = Cfg::new(d, 1)
        .tail("[resilience.stream]\nheartbeat_interval = \"50ms\"")
        .tail(combos)
        .build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(
        &d.send(&s, "impatient", &[]).await,
        429,
        "the 429 passes through",
    );
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");

    let r = d.send(&s, "impatient", &[]).await;
    expect_status(&r, 429, "opted out of the wait");
    assert_eq!(r.json()["sluice"]["code"], "rate_limit_error");
    assert_eq!(retry_after(&r), Some(30), "the cooldown's remaining time");
    assert_eq!(mock.count(), 1);

    let mut st = client::open_json(&s.url(d.path()), &d.body("patient", true), &[AV]).await;
    assert_eq!(
        st.status, 200,
        "the head goes out at the heartbeat interval"
    );
    st.read_until(Duration::from_secs(5), |b| {
        String::from_utf8_lossy(b).matches("event: ping").count() >= 2
    })
    .await;
    assert_eq!(mock.count(), 1, "nothing sent while waiting");
    clock.advance(Duration::from_secs(30));
    let (got, clean) = st.read_to_end(Duration::from_secs(5)).await;
    assert!(clean);
    assert_eq!(
        String::from_utf8_lossy(&got)
            .matches("event: message_start")
            .count(),
        1
    );
    assert_eq!(mock.count(), 2, "sent once the cooldown ended");

    let snap = s.wait_requests(3).await;
    let waits = |model: &str| -> Vec<String> {
        snap.recent
            .iter()
            .filter(|v| v.client_model == model)
            .flat_map(|v| v.waits.iter().map(|w| w.reason.to_string()))
            .collect()
    };
    assert_eq!(
        waits("patient"),
        ["connection_cooldown"],
        "{:#?}",
        snap.recent
    );
    assert!(waits("impatient").is_empty(), "{:#?}", snap.recent);
    s.stop().await;
}

#[tokio::test]
async fn a24_anthropic_beta_is_forwarded_byte_exact() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 1).build(&mock), ENV).await;

    let beta = "feature-a,feature-b-2099";
    let r = client::post_json(
        &s.url(d.path()),
        &d.body("claude-x", false),
        &[AV, ("anthropic-beta", beta)],
    )
    .await;
    expect_status(&r, 200, "anthropic upstream");
    let up = mock.single();
    let values: Vec<&[u8]> = up
        .headers
        .get_all("anthropic-beta")
        .iter()
        .map(|v| v.as_bytes())
        .collect();
    assert_eq!(values, vec![beta.as_bytes()]);
    assert_eq!(up.header("x-api-key"), Some(key(1)));
}

#[tokio::test]
async fn request_fault_is_returned_at_once_without_fallback() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    let upstream = d.error(400, "invalid_request_error", "max_tokens: must be positive");
    on_key(&mock, d, 1).reply(upstream.clone());
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).build(&mock), ENV).await;

    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 400, "the request's own fault");
    assert_eq!(r.body, upstream.body_bytes(), "passed through unchanged");
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (1, 0),
        "no fallback on 400"
    );
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        (k1["status"].as_str(), k1["backoffLevel"].as_u64()),
        (Some("active"), Some(0)),
        "a 400 penalises nothing: {k1:#}"
    );
    assert_eq!(breaker_state(&s, "p").await["failureCount"], 0);
}

#[tokio::test]
async fn cooldown_aware_wait_never_waits_on_a_quota_wait() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path()).times(1).reply(
        d.error(429, "rate_limit_error", "usage window exhausted")
            .header("retry-after", "2"),
    );
    // A 2 s hint is a quota window here; the default §4 wait (max 60 s) is on.
    let cfg = Cfg::new(d, 1)
        .tail("[resilience.connection_cooldown]\nquota_wait_threshold = \"1s\"")
        .build(&mock);
    let s = Sluice::start(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[]).await, 429, "first call");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "quota_wait");

    let started = SystemClock.now();
    let r = d.send(&s, "gpt-x", &[]).await;
    let took = SystemClock.now() - started;
    expect_status(&r, 429, "quota wait");
    assert_eq!(r.json()["sluice"]["code"], "quota_exhausted");
    assert!(
        took < Duration::from_millis(1_000),
        "no §4 wait on quota_wait: {took:?}"
    );
    assert_eq!(mock.count(), 1);
}

#[tokio::test]
async fn cooldown_aware_wait_never_waits_on_an_open_breaker() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    mock.on(d.path())
        .times(2)
        .reply(d.error(503, "api_error", "unavailable"));
    let cfg = Cfg::new(d, 1)
        .profile("local")
        .each_conn("  disable_cooling = true")
        .tail("[resilience.breaker.local]\nreset_timeout = \"2s\"")
        .build(&mock);
    let s = Sluice::start(&cfg, ENV).await;
    for _ in 0..2 {
        expect_status(
            &d.send(&s, "claude-x", &[]).await,
            503,
            "503 passes through",
        );
    }

    let started = SystemClock.now();
    let r = d.send(&s, "claude-x", &[]).await;
    let took = SystemClock.now() - started;
    expect_status(&r, 503, "open breaker");
    assert_eq!(r.json()["sluice"]["code"], "all_targets_cooling_down");
    assert!(
        took < Duration::from_millis(1_000),
        "no §4 wait on an open breaker: {took:?}"
    );
    assert_eq!(mock.count(), 2);
}

#[tokio::test]
async fn connection_strategy_orders_a_providers_connections() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    let cfg = Cfg::new(d, 3)
        .provider("connection_strategy = \"round_robin\"")
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    for turn in 1..=6 {
        expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "round robin");
        let got: Vec<usize> = (1..=3).map(|n| hits(&mock, n)).collect();
        let want: Vec<usize> = (1..=3).map(|n| (turn + 3 - n) / 3).collect();
        assert_eq!(got, want, "turn {turn}: requests rotate over k1, k2, k3");
    }

    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(d, 2)
        .provider("connection_strategy = \"least_used\"")
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(529, "overloaded_error", "Overloaded"));
    expect_status(
        &d.send(&s, "gpt-x", &[]).await,
        200,
        "k1 overloaded, k2 serves",
    );
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (1, 1));
    expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "tie: config order");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (2, 1));
    expect_status(
        &d.send(&s, "gpt-x", &[]).await,
        200,
        "k2 has fewer attempts",
    );
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (2, 2));
}
