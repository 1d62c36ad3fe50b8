//! Slow start after recovery through HTTP: a provider whose breaker just closed takes a
//! reduced share of a two-provider combo and ramps to all of it over its `slow_start`
//! window; the ramp shows in the snapshot. Time is the manual clock; the share is asserted
//! with bounds many standard deviations wide, so the seeded draw cannot make it flaky.

use std::time::Duration;

use super::*;

/// Combo `duo` = `p` (connection k1, `slow_start = "30s"`, never cools) then `h` (k2); the
/// `api_key` breaker opens after two counted failures and half-opens after 15 s.
fn duo_config(mock: &MockUpstream) -> String {
    format!(
        "[routing]\ndefault_provider = \"p\"\n\n\
         [[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"{url}\"\nslow_start = \"30s\"\n\
         \n  [[providers.connections]]\n  id = \"k1\"\n  auth = {{ env = \"K1\" }}\n  disable_cooling = true\n\n\
         [[providers]]\nid = \"h\"\ndialect = \"anthropic\"\nbase_url = \"{url}\"\n\
         \n  [[providers.connections]]\n  id = \"k2\"\n  auth = {{ env = \"K2\" }}\n\n\
         [resilience.breaker.api_key]\ndegrade_at = 1\nopen_at = 2\nreset_timeout = \"15s\"\n\n\
         [[combos]]\nname = \"duo\"\ntargets = [\"p/claude-x\", \"h/claude-x\"]\n",
        url = mock.base_url()
    )
}

/// Sends `n` requests for `duo`, each answered 200; returns how many reached k1 and k2.
async fn spread(s: &Sluice, mock: &MockUpstream, n: usize) -> (usize, usize) {
    let (k1, k2) = (hits(mock, 1), hits(mock, 2));
    for i in 0..n {
        let r = D::Anthropic.send(s, "duo", &[]).await;
        expect_status(&r, 200, &format!("request {i}"));
    }
    (hits(mock, 1) - k1, hits(mock, 2) - k2)
}

#[tokio::test]
async fn a_provider_whose_breaker_closed_ramps_its_share_of_the_combo() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1)
        .times(2)
        .reply(d.error(503, "overloaded_error", "Service unavailable"));
    let (s, clock) = Sluice::start_manual(&duo_config(&mock), ENV).await;

    // Two 503s from p (each request falls back to h) open p's breaker.
    assert_eq!(spread(&s, &mock, 2).await, (2, 2));
    assert_eq!(breaker_state(&s, "p").await["state"], "open");
    assert_eq!(s.snapshot().providers[0].ramp_percent, None);

    // The probe succeeds: the breaker closes and the ramp starts at 10 %.
    clock.advance(Duration::from_secs(15));
    assert_eq!(spread(&s, &mock, 1).await, (1, 0), "the probe goes to p");
    assert_eq!(breaker_state(&s, "p").await["state"], "closed");
    let snap = s.snapshot();
    assert_eq!(snap.providers[0].ramp_percent, Some(10));
    assert_eq!(snap.providers[0].connections[0].ramp_percent, Some(10));
    assert_eq!(snap.providers[1].ramp_percent, None, "h never recovered");

    // At 10 % p takes about 20 of 200 (binomial: sd ≈ 4.2); without the ramp it would take
    // all 200, being first in the combo.
    let (p, h) = spread(&s, &mock, 200).await;
    assert!((1..=60).contains(&p), "p took {p} of 200 at a 10 % share");
    assert_eq!(p + h, 200);
    let skipped = s
        .snapshot()
        .recent
        .iter()
        .filter(|r| {
            r.skipped
                .iter()
                .any(|k| k.reason == "slow_start" && k.target == "p:k1/claude-x")
        })
        .count();
    assert!(
        skipped > 0,
        "requests served by h list p as skipped for slow start"
    );

    // Half way through the window: 55 %, also in the cooldowns API and the metrics.
    clock.advance(Duration::from_secs(15));
    assert_eq!(s.snapshot().providers[0].ramp_percent, Some(55));
    let rows = admin_get(&s, "/api/resilience/cooldowns").await;
    let share = |c: &str| {
        rows["connections"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["connection"] == c))
            .map(|r| r["trafficSharePercent"].clone())
    };
    assert_eq!(share("k1"), Some(json!(55)), "{rows:#}");
    assert_eq!(share("k2"), Some(json!(100)), "{rows:#}");
    let metrics = client::get(&s.admin("/metrics"), &[]).await.text();
    assert!(
        metrics.contains("sluice_traffic_share_percent{provider=\"p\",connection=\"k1\"} 55"),
        "{metrics}"
    );
    let (p, _) = spread(&s, &mock, 200).await;
    assert!((50..=170).contains(&p), "p took {p} of 200 at a 55 % share");

    // The window is over: p takes everything again.
    clock.advance(Duration::from_secs(15));
    assert_eq!(s.snapshot().providers[0].ramp_percent, None);
    assert_eq!(spread(&s, &mock, 20).await, (20, 0));
    s.stop().await;
}

#[tokio::test]
async fn a_ramping_provider_with_nowhere_else_to_go_still_serves() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1)
        .times(2)
        .reply(d.error(503, "overloaded_error", "Service unavailable"));
    // h always fails with a client-invisible overload, so every request that skips p for
    // slow start has to come back to it.
    on_key(&mock, d, 2).reply(d.error(529, "overloaded_error", "Overloaded"));
    let (s, clock) = Sluice::start_manual(&duo_config(&mock), ENV).await;
    for _ in 0..2 {
        let _ = d.send(&s, "duo", &[]).await;
    }
    clock.advance(Duration::from_secs(15));
    let r = d.send(&s, "duo", &[]).await;
    expect_status(&r, 200, "the probe");
    assert_eq!(s.snapshot().providers[0].ramp_percent, Some(10));
    let before = hits(&mock, 1);
    for i in 0..30 {
        let r = d.send(&s, "duo", &[]).await;
        expect_status(&r, 200, &format!("request {i}: p serves past its ramp"));
    }
    assert_eq!(hits(&mock, 1) - before, 30, "every request ends on p");
    assert!(
        s.snapshot()
            .recent
            .iter()
            .all(|r| r.skipped.iter().all(|k| k.reason != "slow_start")),
        "a candidate tried past its ramp is not listed as skipped"
    );
    s.stop().await;
}
