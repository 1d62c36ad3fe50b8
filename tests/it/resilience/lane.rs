//! The Anthropic subscription low-priority lane (`low_priority_mode`, issue 9): a usage-wall
//! 429 that offers the lane is retried on the same connection with
//! `anthropic-usage-limit: slow`, busy lane slots are waited out on the injected clock, the
//! lane ends on its end statuses, and it survives a restart.

use std::sync::Arc;
use std::time::Duration;

use sluice::clock::{Clock, ManualClock, unix_ms};

use super::*;

const SLOW: (&str, &str) = ("anthropic-usage-limit", "slow");

/// One anthropic OAuth connection with the lane on (and preflight on: an active lane must
/// still be dispatched past the usage wall).
fn lane_cfg() -> Cfg {
    Cfg::new(D::Anthropic, 1)
        .profile("oauth")
        .each_conn("low_priority_mode = true")
        .tail("[resilience.quota_preflight]\nenabled = true\n")
        .tail(NO_WAIT)
}

/// The usage-wall 429 that offers the lane; the account resets `reset_s` (Unix seconds).
fn offer(reset_s: u64) -> Reply {
    let reset = reset_s.to_string();
    D::Anthropic
        .error(429, "rate_limit_error", "usage limit reached")
        .header("anthropic-ratelimit-unified-status", "rejected")
        .header("anthropic-ratelimit-unified-slow-offer", "treatment")
        .header("anthropic-ratelimit-unified-reset", &reset)
        .header("anthropic-ratelimit-unified-5h-status", "rejected")
        .header("anthropic-ratelimit-unified-5h-utilization", "1.0")
        .header("anthropic-ratelimit-unified-5h-reset", &reset)
}

/// A lane answer with slow status `status`.
fn on_lane(reply: Reply, status: &str) -> Reply {
    reply.header("anthropic-ratelimit-unified-slow-status", status)
}

/// Whether upstream request `i` carried the slow header.
fn slow(mock: &MockUpstream, i: usize) -> bool {
    mock.requests()[i].header(SLOW.0) == Some(SLOW.1)
}

#[tokio::test]
async fn an_offered_lane_is_accepted_on_the_same_connection_and_not_cooled() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&lane_cfg().build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 7200;
    mock.on(d.path())
        .header(SLOW.0, SLOW.1)
        .reply(on_lane(Reply::anthropic_text("slow but served"), "active"));
    mock.on(d.path()).reply(offer(reset_s));

    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 200, "served on the lane");
    assert_eq!(mock.count(), 2);
    assert!(
        !slow(&mock, 0) && slow(&mock, 1),
        "retried with the slow header"
    );
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["status"], "active", "not cooled: {row:#}");
    assert_eq!(row["lane"]["state"], "active", "{row:#}");
    assert_eq!(row["lane"]["reason"], "treatment");
    assert_eq!(row["lane"]["until"], reset_s * 1000 + 60_000);
    let snap = s.snapshot();
    let lane = snap.providers[0].connections[0].lane.clone().expect("lane");
    assert_eq!(
        (lane.state.as_str(), lane.until_unix_ms),
        ("active", reset_s * 1000 + 60_000)
    );
    let reasons: Vec<String> = snap.recent[0]
        .attempt_log
        .iter()
        .map(|a| a.reason.clone())
        .collect();
    assert_eq!(reasons, vec!["lane_accepted", "ok"]);

    // While the lane is active every request carries the header from its first attempt,
    // and preflight does not skip the connection past its spent 5-hour window.
    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 200, "second request on the lane");
    assert_eq!(mock.count(), 3);
    assert!(slow(&mock, 2));

    // After the reset (+ 60 s) the lane is over: no header.
    clock.advance(Duration::from_secs(7261));
    mock.on(d.path()).reply(Reply::anthropic_text("normal"));
    let before = mock.count();
    let _ = d.send(&s, "claude-x", &[]).await;
    assert!(mock.count() > before);
    assert!(!slow(&mock, before), "the lane ended at its reset");
    s.stop().await;
}

#[tokio::test]
async fn a_busy_lane_slot_is_waited_out_then_served() {
    let d = D::Anthropic;
    let slot_busy = on_lane(d.error(429, "rate_limit_error", "no slot"), "slot_busy");
    busy_then_served(slot_busy).await;
}

#[tokio::test]
async fn a_529_on_the_lane_is_waited_out_then_served() {
    busy_then_served(D::Anthropic.error(529, "overloaded_error", "overloaded")).await;
}

/// The lane is accepted, its first retry answers `busy` (with a 5 s lane retry-after), the
/// next is served: one wait on the manual clock, the connection never cooled.
async fn busy_then_served(busy: Reply) {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&lane_cfg().build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 7200;
    mock.on(d.path())
        .header(SLOW.0, SLOW.1)
        .times(1)
        .reply(busy.header("anthropic-ratelimit-unified-slow-retry-after", "5"));
    mock.on(d.path())
        .header(SLOW.0, SLOW.1)
        .reply(on_lane(Reply::anthropic_text("slot free"), "active"));
    mock.on(d.path()).reply(offer(reset_s));

    let url = s.url(d.path());
    let body = d.body("claude-x", false);
    let started = clock.now();
    let req = tokio::spawn(async move { client::post_json(&url, &body, &[AV]).await });
    // The wait (5 s ± 30 %) runs on the manual clock: move it on in 500 ms steps until the
    // request is done, but never past 7 s (the longest wait plus one step), so a slow machine
    // that is late to run the woken request cannot push the clock further on.
    let r = tokio::time::timeout(Duration::from_secs(10), async {
        let mut moved = Duration::ZERO;
        while !req.is_finished() {
            if moved < Duration::from_millis(7000) {
                clock.advance(Duration::from_millis(500));
                moved += Duration::from_millis(500);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        req.await.expect("request task")
    })
    .await
    .expect("the lane wait ended on the manual clock");
    expect_status(&r, 200, "served after the busy slot");
    assert!(
        clock.now().saturating_duration_since(started) >= Duration::from_millis(3500),
        "waited at least 5 s - 30 %"
    );
    assert_eq!(mock.count(), 3);
    assert!(!slow(&mock, 0) && slow(&mock, 1) && slow(&mock, 2));
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["status"], "active", "{row:#}");
    assert_eq!(row["lane"]["state"], "active");
    let snap = s.snapshot();
    let req = &snap.recent[0];
    assert_eq!(req.waits.len(), 1, "{:#?}", req.waits);
    assert_eq!(req.waits[0].reason, "lane_slot_busy");
    let waited = req.waits[0].waited_ms;
    assert!((3500..=7000).contains(&waited), "waited {waited} ms");
    s.stop().await;
}

#[tokio::test]
async fn a_busy_lane_past_the_requests_own_time_ends_with_a_re_accept_pause() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    // An 8 s budget leaves 3 s after the 5 s margin: shorter than any lane wait.
    let cfg = lane_cfg()
        .provider("timeout = \"8s\"")
        .tail("[resilience.queue]\nexecution_max_wait = \"8s\"\n");
    let (s, clock) = Sluice::start_manual(&cfg.build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 7200;
    mock.on(d.path()).header(SLOW.0, SLOW.1).reply(on_lane(
        d.error(429, "rate_limit_error", "no slot"),
        "slot_busy",
    ));
    mock.on(d.path()).reply(offer(reset_s));

    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 429, "the busy slot is answered");
    assert_eq!(mock.count(), 2, "no wait was made");
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["lane"]["state"], "paused", "{row:#}");
    assert_eq!(row["lane"]["reason"], "slot_busy_timeout");
    assert_eq!(
        row["lane"]["until"],
        unix_ms(clock.wall()) + 600_000,
        "10 min re-accept pause"
    );
    assert_eq!(row["status"], "cooling", "reported as usual: {row:#}");
    assert!(!lane_on(&s));
    s.stop().await;
}

#[tokio::test]
async fn a_busy_lane_never_outwaits_the_clients_own_timeout() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&lane_cfg().build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 7200;
    mock.on(d.path()).header(SLOW.0, SLOW.1).reply(on_lane(
        d.error(429, "rate_limit_error", "no slot"),
        "slot_busy",
    ));
    mock.on(d.path()).reply(offer(reset_s));
    // The client gives up after 8 s: 3 s after the 5 s margin, shorter than any lane wait.
    let r = d
        .send(&s, "claude-x", &[("x-stainless-timeout", "8")])
        .await;
    expect_status(&r, 429, "not waited past the client");
    assert_eq!(mock.count(), 2);
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["lane"]["reason"], "slot_busy_timeout", "{row:#}");
    s.stop().await;
}

#[tokio::test]
async fn an_end_status_on_the_lane_ends_it_and_the_429_cools_as_usual() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&lane_cfg().build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 7200;
    mock.on(d.path())
        .header(SLOW.0, SLOW.1)
        .times(1)
        .reply(on_lane(Reply::anthropic_text("slow"), "active"));
    mock.on(d.path()).header(SLOW.0, SLOW.1).reply(on_lane(
        d.error(429, "rate_limit_error", "weekly limit reached"),
        "weekly_limit",
    ));
    mock.on(d.path()).reply(offer(reset_s));

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "lane accepted");
    assert!(lane_on(&s));
    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 429, "weekly limit");
    assert_eq!(mock.count(), 3, "no retry after an end status");
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["lane"]["state"], "ended", "{row:#}");
    assert_eq!(row["lane"]["reason"], "weekly_limit");
    assert_eq!(row["status"], "cooling", "{row:#}");
    assert!(!lane_on(&s));
    s.stop().await;
}

#[tokio::test]
async fn without_low_priority_mode_an_offer_is_a_plain_429() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(d, 1).profile("oauth").tail(NO_WAIT);
    let (s, clock) = Sluice::start_manual(&cfg.build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 7200;
    mock.on(d.path()).reply(offer(reset_s));
    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "not taken");
    assert_eq!(mock.count(), 1, "no retry");
    assert!(!slow(&mock, 0));
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["status"], "quota_wait", "out until the reset: {row:#}");
    assert!(row.get("lane").is_none(), "{row:#}");
    s.stop().await;
}

#[tokio::test]
async fn low_priority_mode_is_refused_off_an_anthropic_oauth_provider() {
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(D::Anthropic, 1)
        .each_conn("low_priority_mode = true")
        .build(&mock);
    let dir = tempfile::tempdir().unwrap();
    let env = sluice::config::LoadEnv::fixed(ENV, dir.path());
    let err = sluice::config::from_str(&cfg, std::path::Path::new("sluice.toml"), &env)
        .expect_err("api_key profile");
    let text = err.to_string();
    assert!(
        text.contains("providers.p.connections.k1.low_priority_mode")
            && text.contains("profile = \"oauth\""),
        "{text}"
    );
}

#[tokio::test]
async fn an_active_lane_survives_a_restart() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let reset_s = unix_ms(clock.wall()) / 1000 + 7200;
    mock.on(d.path())
        .header(SLOW.0, SLOW.1)
        .reply(on_lane(Reply::anthropic_text("slow"), "active"));
    mock.on(d.path()).reply(offer(reset_s));
    let db_dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[store]\npath = \"{}\"\n{}",
        db_dir.path().join("state.db").display(),
        lane_cfg().build(&mock)
    );
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "lane accepted");
    s.stop().await;

    clock.advance(Duration::from_secs(10));
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["lane"]["state"], "active", "{row:#}");
    assert_eq!(row["lane"]["until"], reset_s * 1000 + 60_000);
    let before = mock.count();
    expect_status(
        &d.send(&s, "claude-x", &[]).await,
        200,
        "on the restored lane",
    );
    assert_eq!(mock.count(), before + 1, "no offer needed again");
    assert!(
        slow(&mock, before),
        "the first attempt carries the slow header"
    );
    s.stop().await;
}

/// Whether connection 0 of provider 0 has an active lane now.
fn lane_on(s: &Sluice) -> bool {
    s.core().lane_active(&sluice::policy::select::Candidate {
        provider: 0,
        connection: 0,
        model: String::new(),
        rewrite: false,
        target: 0,
        key: sluice::config::keys::ConnKey::new(0, 0),
    })
}
