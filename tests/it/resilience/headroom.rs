//! Quota headroom: the rate-limit headers of every upstream response head (success or error)
//! reach the snapshot's connection rows, `GET /api/resilience/cooldowns` and `/metrics`, and
//! survive a restart.

use std::sync::Arc;
use std::time::Duration;

use sluice::clock::{Clock, ManualClock, unix_ms};

use super::*;

/// A reply carrying subscription windows (5 h at 90 % used, 7 d at 40 %) and an OpenAI-style
/// requests bucket (80 of 100 left), resets relative to `now_ms`.
fn with_quota_headers(reply: Reply, now_ms: u64) -> Reply {
    let secs = now_ms / 1000;
    reply
        .header("anthropic-ratelimit-unified-5h-utilization", "0.9")
        .header(
            "anthropic-ratelimit-unified-5h-reset",
            &(secs + 3_600).to_string(),
        )
        .header("anthropic-ratelimit-unified-7d-utilization", "0.4")
        .header(
            "anthropic-ratelimit-unified-7d-reset",
            &(secs + 86_400).to_string(),
        )
        .header("x-ratelimit-limit-requests", "100")
        .header("x-ratelimit-remaining-requests", "80")
        .header("x-ratelimit-reset-requests", "6m0s")
}

/// The value of the `/metrics` series `series` (name and labels).
fn gauge(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{metrics}"))
}

fn window<'a>(rows: &'a [Value], name: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["window"] == name)
        .unwrap_or_else(|| panic!("no {name} row in {rows:#?}"))
}

#[tokio::test]
async fn headroom_from_an_error_head_shows_in_snapshot_cooldowns_and_metrics() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    // An error head carries the headers too: k1 answers 529, k2 200 without any.
    on_key(&mock, d, 1).times(1).reply(with_quota_headers(
        d.error(529, "overloaded_error", "Overloaded"),
        now,
    ));
    let cfg = Cfg::new(d, 2).build(&mock);
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k1 529, then k2");

    let snap = s.snapshot();
    let k1 = &snap.providers[0].connections[0];
    let rows: Vec<_> = k1.headroom.iter().map(|r| r.window.as_str()).collect();
    assert_eq!(rows, vec!["five_hour", "seven_day", "requests"], "{k1:#?}");
    let five = &k1.headroom[0];
    assert!(five.binding, "the 5 h window (10 % left) binds: {k1:#?}");
    assert!((five.remaining.unwrap() - 0.1).abs() < 1e-9);
    assert_eq!(five.reset_at_unix_ms, Some((now / 1000 + 3_600) * 1000));
    assert_eq!(k1.headroom[2].model.as_deref(), Some("claude-x"));
    assert!(
        snap.providers[0].connections[1].headroom.is_empty(),
        "k2's response had no headers"
    );

    let row = conn_state(&s, "p", "k1").await;
    let hr = row["headroom"].as_array().expect("headroom rows");
    assert_eq!(window(hr, "five_hour")["binding"], true, "{row:#}");
    assert_eq!(window(hr, "seven_day")["binding"], false);
    assert_eq!(window(hr, "requests")["remaining"], 0.8);
    assert_eq!(window(hr, "requests")["resetAt"], now + 360_000);
    assert!(
        conn_state(&s, "p", "k2").await.get("headroom").is_none(),
        "omitted while nothing is known"
    );

    let metrics = client::get(&s.admin("/metrics"), &[]).await.text();
    let k1_5h = "{provider=\"p\",connection=\"k1\",window=\"five_hour\",model=\"\"}";
    let reset_5h = ((now / 1000 + 3_600) * 1000 - now) as f64 / 1000.0;
    for (name, labels, want) in [
        ("sluice_headroom_remaining_ratio", k1_5h, 0.1),
        ("sluice_headroom_reset_seconds", k1_5h, reset_5h),
        (
            "sluice_headroom_remaining_ratio",
            "{provider=\"p\",connection=\"k1\",window=\"requests\",model=\"claude-x\"}",
            0.8,
        ),
    ] {
        let got = gauge(&metrics, &format!("{name}{labels}"));
        assert!(
            (got - want).abs() < 1e-6,
            "{name}{labels} = {got}, want {want}"
        );
    }
    assert!(!metrics.contains("connection=\"k2\",window="), "{metrics}");

    // Past the requests reset only the subscription windows stay live.
    clock.advance(Duration::from_secs(361));
    let snap = s.snapshot();
    let rows: Vec<_> = snap.providers[0].connections[0]
        .headroom
        .iter()
        .map(|r| r.window.as_str())
        .collect();
    assert_eq!(rows, vec!["five_hour", "seven_day"]);
    s.stop().await;
}

#[tokio::test]
async fn headroom_survives_a_restart_and_is_pruned_on_load() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    mock.on(d.path())
        .times(1)
        .reply(with_quota_headers(Reply::anthropic_text("hi"), now));
    let db_dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[store]\npath = \"{}\"\n{}",
        db_dir.path().join("state.db").display(),
        Cfg::new(d, 1).build(&mock)
    );
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "with headers");
    assert_eq!(s.snapshot().providers[0].connections[0].headroom.len(), 3);
    s.stop().await;

    // Seven minutes down: the requests bucket (6 min) has reset, the subscription windows not.
    clock.advance(Duration::from_secs(420));
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    let row = conn_state(&s, "p", "k1").await;
    let hr = row["headroom"].as_array().expect("restored headroom");
    assert_eq!(hr.len(), 2, "{row:#}");
    assert_eq!(window(hr, "five_hour")["binding"], true);
    assert_eq!(
        window(hr, "seven_day")["resetAt"],
        (now / 1000 + 86_400) * 1000
    );
    s.stop().await;
}

// === quota preflight ===

/// `[resilience.quota_preflight] enabled = true` (default thresholds: cut off at 2 %, warn at
/// 20 %), with the §4 wait off (a manual clock).
const PREFLIGHT: &str = "[resilience.quota_preflight]\nenabled = true\n";

/// A reply whose 5 h window is `used` (a fraction) and resets `in_secs` from `now_ms`.
fn five_hour(reply: Reply, used: &str, now_ms: u64, in_secs: u64) -> Reply {
    reply
        .header("anthropic-ratelimit-unified-5h-utilization", used)
        .header(
            "anthropic-ratelimit-unified-5h-reset",
            &(now_ms / 1000 + in_secs).to_string(),
        )
}

/// Skipped targets of the newest finished request, as `target reason` strings.
fn skipped(s: &Sluice) -> Vec<String> {
    s.snapshot().recent[0]
        .skipped
        .iter()
        .map(|k| format!("{} {}", k.target, k.reason))
        .collect()
}

#[tokio::test]
async fn preflight_skips_a_nearly_spent_connection_and_falls_back_to_the_next() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    // k1 serves the first request and reports 99 % of its 5 h window used.
    on_key(&mock, d, 1)
        .times(1)
        .reply(five_hour(Reply::anthropic_text("hi"), "0.99", now, 3_600));
    on_key(&mock, d, 2).reply(five_hour(Reply::anthropic_text("hi"), "0.85", now, 7_200));
    let cfg = Cfg::new(d, 2).tail(NO_WAIT).tail(PREFLIGHT).build(&mock);
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k1 serves");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (1, 0));
    let k1 = &s.snapshot().providers[0].connections[0];
    let mark = k1.preflight.as_ref().expect("k1 marked");
    assert_eq!(mark.state, "cut_off", "{k1:#?}");
    assert_eq!(mark.window, "five_hour");
    assert_eq!(mark.reset_at_unix_ms, Some((now / 1000 + 3_600) * 1000));

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k2 serves");
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (1, 1),
        "k1 was skipped before dispatch"
    );
    assert_eq!(skipped(&s), vec!["p:k1/claude-x quota_preflight"]);
    let k2 = &s.snapshot().providers[0].connections[1];
    assert_eq!(
        k2.preflight.as_ref().map(|p| p.state.as_str()),
        Some("warn"),
        "15 % left is under the 20 % warning: {k2:#?}"
    );
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(
        row["status"], "active",
        "preflight is not a cooldown: {row:#}"
    );
    s.stop().await;
}

#[tokio::test]
async fn every_connection_cut_off_answers_quota_exhausted_until_the_earliest_reset() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    // k1 reports 100 % used (reset in 1 h), then k2 99.5 % used (reset in 15 min).
    on_key(&mock, d, 1)
        .times(1)
        .reply(five_hour(Reply::anthropic_text("hi"), "1.0", now, 3_600));
    on_key(&mock, d, 2)
        .times(1)
        .reply(five_hour(Reply::anthropic_text("hi"), "0.995", now, 900));
    let cfg = Cfg::new(d, 2).tail(NO_WAIT).tail(PREFLIGHT).build(&mock);
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k1");
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k1 cut off: k2");
    clock.advance(Duration::from_secs(60));

    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 429, "both cut off");
    assert_eq!(hits(&mock, 1) + hits(&mock, 2), 2, "nothing sent upstream");
    let v = r.json();
    assert_eq!(v["error"]["type"], "rate_limit_error", "{v:#}");
    assert_eq!(v["sluice"]["code"], "quota_exhausted", "{v:#}");
    assert_eq!(retry_after(&r), Some(840), "k2 resets first: 900 s - 60 s");
    assert_eq!(r.header("x-should-retry"), Some("false"));
    let reasons: Vec<&str> = v["sluice"]["diagnostics"]["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap())
        .collect();
    assert_eq!(reasons, vec!["quota_preflight", "quota_preflight"], "{v:#}");

    // Once k2's window has reset its old numbers are stale: they never cut it off.
    clock.advance(Duration::from_secs(841));
    expect_status(
        &d.send(&s, "claude-x", &[]).await,
        200,
        "k2 after its reset",
    );
    assert_eq!(hits(&mock, 2), 2);
    assert_eq!(hits(&mock, 1), 1, "k1 (reset in 1 h) still skipped");
    s.stop().await;
}

#[tokio::test]
async fn preflight_off_never_skips() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    on_key(&mock, d, 1).reply(five_hour(Reply::anthropic_text("hi"), "1.0", now, 3_600));
    let cfg = Cfg::new(d, 2).tail(NO_WAIT).build(&mock);
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    for _ in 0..2 {
        expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k1 serves");
    }
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (2, 0));
    assert!(skipped(&s).is_empty());
    assert!(s.snapshot().providers[0].connections[0].preflight.is_none());
    s.stop().await;
}

#[tokio::test]
async fn preflight_thresholds_change_live_through_the_admin_api() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    // k1 has 10 % left: above the default 2 % cut-off.
    on_key(&mock, d, 1).reply(five_hour(Reply::anthropic_text("hi"), "0.9", now, 3_600));
    let cfg = Cfg::new(d, 2).tail(NO_WAIT).tail(PREFLIGHT).build(&mock);
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    for _ in 0..2 {
        expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k1 serves");
    }
    assert_eq!(hits(&mock, 1), 2);

    let r = admin(
        &s,
        Method::PATCH,
        "/api/resilience",
        json!({"quota_preflight": {"cutoff": 0.3}}),
    )
    .await;
    expect_status(&r, 400, "cutoff above warn");
    assert_eq!(
        r.json()["error"]["field"],
        "quota_preflight.warn",
        "{}",
        r.text()
    );

    let r = admin(
        &s,
        Method::PATCH,
        "/api/resilience",
        json!({"quota_preflight": {"cutoff": 0.15, "warn": 0.5}}),
    )
    .await;
    expect_status(&r, 200, "valid thresholds");
    let got = admin_get(&s, "/api/resilience").await;
    assert_eq!(
        got["settings"]["quota_preflight"]["cutoff"], 0.15,
        "{got:#}"
    );
    assert_eq!(got["overrides"]["quota_preflight"]["warn"], 0.5, "{got:#}");

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k2 serves");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (2, 1), "k1 now cut off");
    assert_eq!(skipped(&s), vec!["p:k1/claude-x quota_preflight"]);
    s.stop().await;
}

// === reset_aware and headroom strategies ===

/// A combo `seed-k2` that reaches k2 only (to give it headroom readings first).
const SEED_K2: &str = "[[combos]]\nname = \"seed-k2\"\ntargets = [\"p:k2/claude-x\"]\n";

#[tokio::test]
async fn reset_aware_connection_strategy_tries_the_soonest_reset_first() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    on_key(&mock, d, 1).reply(five_hour(Reply::anthropic_text("hi"), "0.2", now, 7_200));
    on_key(&mock, d, 2).reply(five_hour(Reply::anthropic_text("hi"), "0.7", now, 600));
    let cfg = Cfg::new(d, 2)
        .provider("connection_strategy = \"reset_aware\"")
        .tail(SEED_K2)
        .build(&mock);
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "nothing known: k1");
    expect_status(&d.send(&s, "seed-k2", &[]).await, 200, "k2 seeded");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (1, 1));
    for _ in 0..2 {
        expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k2 resets first");
    }
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (1, 3),
        "k2's window resets in 10 min, k1's in 2 h"
    );
    // Past k2's reset its numbers are stale: k1 (known reset) goes first again.
    clock.advance(Duration::from_secs(601));
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "k1");
    assert_eq!(hits(&mock, 1), 2);
    s.stop().await;
}

#[tokio::test]
async fn headroom_combo_strategy_tries_the_target_with_most_quota_left_first() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now = unix_ms(clock.wall());
    on_key(&mock, d, 1).reply(five_hour(Reply::anthropic_text("hi"), "0.7", now, 600));
    on_key(&mock, d, 2).reply(five_hour(Reply::anthropic_text("hi"), "0.4", now, 7_200));
    let combo = "[[combos]]\nname = \"roomy\"\nstrategy = \"headroom\"\ntargets = [\"p:k1/claude-x\", \"p:k2/claude-x\"]\n";
    let cfg = Cfg::new(d, 2).tail(SEED_K2).tail(combo).build(&mock);
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "roomy", &[]).await, 200, "nothing known: k1");
    expect_status(&d.send(&s, "seed-k2", &[]).await, 200, "k2 seeded");
    for _ in 0..2 {
        expect_status(&d.send(&s, "roomy", &[]).await, 200, "k2 has more left");
    }
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (1, 3),
        "k2 has 60 % left, k1 30 %"
    );
    let snap = s.snapshot();
    assert_eq!(
        snap.combos
            .iter()
            .find(|c| c.name == "roomy")
            .map(|c| c.strategy.as_str()),
        Some("headroom")
    );
    s.stop().await;
}

#[tokio::test]
async fn an_unknown_strategy_names_the_quota_strategies_in_its_fix() {
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(D::Anthropic, 1)
        .provider("connection_strategy = \"roomiest\"")
        .build(&mock);
    let env = sluice::config::LoadEnv::fixed(ENV, "/tmp");
    let err = sluice::config::from_str(&cfg, std::path::Path::new("c.toml"), &env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("providers.p.connection_strategy") && err.contains("reset_aware or headroom"),
        "{err}"
    );
}

// === hold until reset ===

/// One connection whose requests bucket is spent and resets 30 s after each response, a
/// combo `held` that holds up to a minute and one `unheld` that does not; 50 ms heartbeats.
async fn held_setup() -> (MockUpstream, Sluice, sluice::clock::ManualClock) {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    mock.on(d.path()).reply(
        Reply::anthropic_text("after the reset")
            .header("x-ratelimit-limit-requests", "100")
            .header("x-ratelimit-remaining-requests", "0")
            .header("x-ratelimit-reset-requests", "30s"),
    );
    let combos = "[[combos]]\nname = \"held\"\nhold_until_reset = true\nmax_hold = \"1m\"\ntargets = [\"p/claude-x\"]\n\n[[combos]]\nname = \"unheld\"\ntargets = [\"p/claude-x\"]\n";
    let cfg = Cfg::new(d, 1)
        .tail(NO_WAIT)
        .tail(PREFLIGHT)
        .tail("[resilience.stream]\nheartbeat_interval = \"50ms\"")
        .tail(combos)
        .build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, "held", &[]).await, 200, "first: nothing known");
    (mock, s, clock)
}

#[tokio::test]
async fn a_held_stream_heartbeats_shows_held_until_and_dispatches_at_the_reset() {
    let d = D::Anthropic;
    let (mock, s, clock) = held_setup().await;
    let r = d.send(&s, "unheld", &[]).await;
    expect_status(&r, 429, "cut off, no hold");
    assert_eq!(r.json()["sluice"]["code"], "quota_exhausted");

    let mut st = client::open_json(&s.url(d.path()), &d.body("held", true), &[AV]).await;
    assert_eq!(
        st.status, 200,
        "the head goes out at the heartbeat interval"
    );
    st.read_until(Duration::from_secs(5), |b| {
        String::from_utf8_lossy(b).matches("event: ping").count() >= 2
    })
    .await;
    let snap = admin_get(&s, "/api/snapshot").await;
    let held = &snap["held"][0];
    assert_eq!(held["model"], "held", "{snap:#}");
    assert_eq!(held["target"], "p:k1/claude-x");
    let left = held["until_unix_ms"].as_u64().unwrap() - snap["taken_at_unix_ms"].as_u64().unwrap();
    assert!(
        (29_000..=30_000).contains(&left),
        "held until the reset: {left} ms"
    );
    assert_eq!(mock.requests().len(), 1, "nothing sent while held");

    clock.advance(Duration::from_secs(30));
    let (got, clean) = st.read_to_end(Duration::from_secs(5)).await;
    assert!(clean);
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("after the reset"), "{text}");
    assert_eq!(text.matches("event: message_start").count(), 1);
    assert_eq!(mock.requests().len(), 2);
    let snap = s.wait_requests(3).await;
    assert!(snap.held.is_empty(), "no longer held");
    let req = snap
        .recent
        .iter()
        .find(|v| v.client_model == "held" && !v.waits.is_empty())
        .expect("the held request");
    assert_eq!(req.waits[0].reason, "quota_hold", "{req:#?}");
    assert!(req.waits[0].describe().contains("quota reset (held)"));
    s.stop().await;
}

#[tokio::test]
async fn a_hold_never_outlasts_the_clients_own_timeout() {
    let d = D::Anthropic;
    let (mock, s, _clock) = held_setup().await;
    // 30 s to the reset + 5 s margin > 20 s: the client would give up first, so no hold.
    let r = d.send(&s, "held", &[("x-stainless-timeout", "20")]).await;
    expect_status(&r, 429, "answered at once");
    assert_eq!(r.json()["sluice"]["code"], "quota_exhausted");
    assert!(s.snapshot().held.is_empty());
    assert_eq!(mock.requests().len(), 1);
    s.stop().await;
}
