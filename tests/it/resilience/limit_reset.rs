//! The Anthropic subscription session-limit reset (`auto_limit_reset`): on the 5-hour wall
//! sluice asks the mock's `GET /api/oauth/usage?at_wall=1&skip_spend=1`; when its
//! `juniper_tide` block is in the `reset` arm and `available`, the reset is requested with
//! `POST /api/organizations/{org_uuid}/reset_rate_limits` (`{"program":"juniper_tide"}`) and,
//! on `result` `reset` / `not_limited`, the request is retried on the same connection;
//! `already_used` / `not_offered` are remembered (across a restart); errors back off 15 min;
//! the reset is tried before the low-priority lane.

use std::sync::Arc;
use std::time::Duration;

use sluice::clock::{Clock, ManualClock, unix_ms};

use super::*;
use crate::support::mock_upstream::{USAGE_PATH as USAGE, USAGE_QUERY, reset_rate_limits_path};

/// The organization every test connection names.
const ORG: &str = "0a1b2c3d-4e5f-6789-abcd-ef0123456789";
const SLOW: (&str, &str) = ("anthropic-usage-limit", "slow");
const WEEK_MS: u64 = 7 * 86_400_000;

/// The reset route of [`ORG`].
fn reset_route() -> String {
    reset_rate_limits_path(ORG)
}

/// One anthropic OAuth connection with the reset on.
fn reset_cfg() -> Cfg {
    Cfg::new(D::Anthropic, 1)
        .profile("oauth")
        .each_conn(&format!("auto_limit_reset = true\norg_uuid = \"{ORG}\""))
        .tail(NO_WAIT)
}

/// The 5-hour wall: a rejected 429 naming the five-hour window, resetting at `reset_s`.
fn wall(reset_s: u64) -> Reply {
    let reset = reset_s.to_string();
    D::Anthropic
        .error(429, "rate_limit_error", "usage limit reached")
        .header("anthropic-ratelimit-unified-status", "rejected")
        .header(
            "anthropic-ratelimit-unified-representative-claim",
            "five_hour",
        )
        .header("anthropic-ratelimit-unified-reset", &reset)
        .header("anthropic-ratelimit-unified-5h-status", "rejected")
        .header("anthropic-ratelimit-unified-5h-utilization", "1.0")
        .header("anthropic-ratelimit-unified-5h-reset", &reset)
}

/// The usage answer with a `juniper_tide` block in `arm`, `available` or not (and with
/// `next_available_at`, when given).
fn usage(arm: &str, available: bool, next: Option<&str>) -> Reply {
    let mut tide = json!({"arm": arm, "available": available});
    if let Some(n) = next {
        tide["next_available_at"] = json!(n);
    }
    Reply::json(
        200,
        json!({"five_hour": {"utilization": 1.0, "resets_at": "2030-01-01T00:00:00Z"},
               "juniper_tide": tide}),
    )
}

/// The reset answer with `result` (and `next_available_at`, when given).
fn answer(result: &str, next: Option<&str>) -> Reply {
    let mut a = json!({"result": result});
    if let Some(n) = next {
        a["next_available_at"] = json!(n);
    }
    Reply::json(200, a)
}

/// Requests the mock saw on `path` with `method`.
fn seen(mock: &MockUpstream, method: &str, path: &str) -> usize {
    mock.requests_to(path)
        .iter()
        .filter(|r| r.method.as_str() == method)
        .count()
}

/// The reasons of the last request's attempts.
fn reasons(s: &Sluice) -> Vec<String> {
    s.snapshot().recent[0]
        .attempt_log
        .iter()
        .map(|a| a.reason.clone())
        .collect()
}

#[tokio::test]
async fn an_offered_reset_is_requested_and_the_request_retried_on_the_same_connection() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let cfg = reset_cfg().tail("[resilience.quota_preflight]\nenabled = true\n");
    let (s, clock) = Sluice::start_manual(&cfg.build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 3600;
    mock.on(USAGE).reply(usage("reset", true, None));
    mock.on(&reset_route()).reply(answer("reset", None));
    on_key(&mock, d, 1).times(1).reply(wall(reset_s));
    on_key(&mock, d, 1).reply(Reply::anthropic_text("after the reset"));

    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 200, "served after the reset");
    assert_eq!(seen(&mock, "GET", USAGE), 1, "usage asked once");
    assert_eq!(
        seen(&mock, "POST", &reset_route()),
        1,
        "reset requested once"
    );
    assert_eq!(mock.requests_to(d.path()).len(), 2, "retried once");
    let q = &mock.requests_to(USAGE)[0];
    assert_eq!(q.query.as_deref(), Some(USAGE_QUERY));
    let post = &mock.requests_to(&reset_route())[0];
    assert_eq!(post.json(), json!({"program": "juniper_tide"}));
    assert_eq!(post.header("content-type"), Some("application/json"));
    for call in [q, post] {
        let cred = ["x-api-key", "authorization"]
            .iter()
            .any(|h| call.header(h).is_some_and(|v| v.contains(key(1))));
        assert!(cred, "{} carries the connection's own key", call.path);
    }
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["status"], "active", "not cooled: {row:#}");
    assert_eq!(row["limitReset"]["lastOutcome"], "reset", "{row:#}");
    assert_eq!(row["limitReset"]["resetUsedAt"], unix_ms(clock.wall()));
    let snap = s.snapshot();
    let lr = snap.providers[0].connections[0].limit_reset.clone();
    assert_eq!(
        sluice::snapshot::word::or_empty(&lr.expect("listed").last_outcome),
        "reset"
    );
    assert_eq!(reasons(&s), vec!["limit_reset", "ok"]);

    // The spent 5-hour reading went with the reset: preflight does not skip the connection.
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "the next request");
    assert_eq!(mock.requests_to(d.path()).len(), 3);
    assert_eq!(seen(&mock, "GET", USAGE), 1, "no wall, no query");
    s.stop().await;
}

#[tokio::test]
async fn not_limited_retries_the_request_without_spending_a_reset() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&reset_cfg().build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 3600;
    mock.on(USAGE).reply(usage("reset", true, None));
    mock.on(&reset_route()).reply(answer("not_limited", None));
    on_key(&mock, d, 1).times(1).reply(wall(reset_s));
    on_key(&mock, d, 1).reply(Reply::anthropic_text("not limited after all"));

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "retried");
    assert_eq!(seen(&mock, "POST", &reset_route()), 1);
    assert_eq!(mock.requests_to(d.path()).len(), 2, "retried once");
    assert_eq!(reasons(&s), vec!["limit_reset", "ok"]);
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["status"], "active", "not cooled: {row:#}");
    assert!(
        row.get("limitReset").is_none(),
        "no reset spent, nothing to list: {row:#}"
    );
    s.stop().await;
}

#[tokio::test]
async fn the_mock_default_routes_serve_a_granted_reset() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&reset_cfg().build(&mock), ENV).await;
    on_key(&mock, d, 1)
        .times(1)
        .reply(wall(unix_ms(clock.wall()) / 1000 + 3600));

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "reset by default");
    assert_eq!(seen(&mock, "GET", USAGE), 1);
    assert_eq!(seen(&mock, "POST", &reset_route()), 1);
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["limitReset"]["lastOutcome"], "reset", "{row:#}");
    s.stop().await;
}

#[tokio::test]
async fn an_unavailable_reset_arm_is_not_requested_and_the_next_availability_is_shown() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&reset_cfg().build(&mock), ENV).await;
    let now_ms = unix_ms(clock.wall());
    let next = clock.wall() + Duration::from_secs(2 * 86_400);
    let next_text = humantime::format_rfc3339_seconds(next).to_string();
    mock.on(USAGE)
        .reply(usage("reset", false, Some(&next_text)));
    on_key(&mock, d, 1).reply(wall(now_ms / 1000 + 3600));

    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 429, "the wall is answered as usual");
    assert_eq!(seen(&mock, "GET", USAGE), 1);
    assert_eq!(seen(&mock, "POST", &reset_route()), 0, "no reset requested");
    assert_eq!(mock.requests_to(d.path()).len(), 1, "no retry");
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["status"], "quota_wait", "usual 429 handling: {row:#}");
    assert_eq!(row["limitReset"]["lastOutcome"], "already_used", "{row:#}");
    assert_eq!(
        row["limitReset"]["nextAvailableAt"],
        unix_ms(next) / 1000 * 1000
    );
    s.stop().await;
}

#[tokio::test]
async fn a_reset_answered_already_used_is_remembered_until_its_date() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&reset_cfg().build(&mock), ENV).await;
    let now_ms = unix_ms(clock.wall());
    let next = clock.wall() + Duration::from_secs(3 * 86_400);
    let next_text = humantime::format_rfc3339_seconds(next).to_string();
    mock.on(USAGE).reply(usage("reset", true, None));
    mock.on(&reset_route())
        .reply(answer("already_used", Some(&next_text)));
    on_key(&mock, d, 1).reply(wall(now_ms / 1000 + 3600));

    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "the wall");
    assert_eq!(seen(&mock, "POST", &reset_route()), 1);
    assert_eq!(mock.requests_to(d.path()).len(), 1, "no retry");
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["limitReset"]["lastOutcome"], "already_used", "{row:#}");
    let until = unix_ms(next) / 1000 * 1000;
    assert_eq!(row["limitReset"]["nextAvailableAt"], until);
    assert_eq!(row["limitReset"]["nextQueryAfter"], until);

    // Past the 5-hour window the connection serves again; the next wall asks nothing.
    clock.advance(Duration::from_secs(7200));
    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "the wall again");
    assert_eq!(mock.requests_to(d.path()).len(), 2);
    assert_eq!(seen(&mock, "GET", USAGE), 1, "no query before the date");
    s.stop().await;
}

#[tokio::test]
async fn another_arm_is_not_offered_and_remembered_for_a_week() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&reset_cfg().build(&mock), ENV).await;
    let now_ms = unix_ms(clock.wall());
    mock.on(USAGE).reply(usage("control", true, None));
    on_key(&mock, d, 1).reply(wall(now_ms / 1000 + 3600));

    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "the wall");
    assert_eq!(seen(&mock, "POST", &reset_route()), 0);
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["limitReset"]["lastOutcome"], "not_offered", "{row:#}");
    assert_eq!(row["limitReset"]["nextAvailableAt"], now_ms + WEEK_MS);

    // Past the 5-hour window the connection serves again; the next wall asks nothing.
    clock.advance(Duration::from_secs(7200));
    let r = d.send(&s, "claude-x", &[]).await;
    expect_status(&r, 429, "the wall again");
    assert_eq!(
        mock.requests_to(d.path()).len(),
        2,
        "the connection was tried"
    );
    assert_eq!(seen(&mock, "GET", USAGE), 1, "no query while unavailable");
    s.stop().await;
}

#[tokio::test]
async fn a_failing_usage_endpoint_backs_off_fifteen_minutes() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&reset_cfg().build(&mock), ENV).await;
    let now_ms = unix_ms(clock.wall());
    mock.on(USAGE).reply(Reply::raw(500, "text/plain", "oops"));
    on_key(&mock, d, 1).reply(wall(now_ms / 1000 + 600));

    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "the wall");
    assert_eq!(seen(&mock, "POST", &reset_route()), 0);
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["limitReset"]["lastOutcome"], "error", "{row:#}");
    assert_eq!(row["limitReset"]["nextQueryAfter"], now_ms + 15 * 60_000);
    let text = row["limitReset"]["lastError"].as_str().unwrap_or("");
    assert!(text.contains("500") && !text.contains(key(1)), "{text}");

    // 11 min on the window is over but the backoff is not: no query.
    clock.advance(Duration::from_secs(660));
    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "the wall again");
    assert_eq!(mock.requests_to(d.path()).len(), 2);
    assert_eq!(seen(&mock, "GET", USAGE), 1, "no query during the backoff");
    s.stop().await;
}

#[tokio::test]
async fn a_failing_or_unreadable_reset_answer_backs_off_fifteen_minutes() {
    for (reply, says) in [
        (
            Reply::anthropic_error(404, "not_found_error", "no such org"),
            "HTTP 404",
        ),
        (answer("granted", None), "unknown result"),
        (Reply::raw(200, "text/html", "<html>ok</html>"), "not JSON"),
    ] {
        let d = D::Anthropic;
        let mock = MockUpstream::start().await;
        let (s, clock) = Sluice::start_manual(&reset_cfg().build(&mock), ENV).await;
        let now_ms = unix_ms(clock.wall());
        mock.on(USAGE).reply(usage("reset", true, None));
        mock.on(&reset_route()).reply(reply);
        on_key(&mock, d, 1).reply(wall(now_ms / 1000 + 600));

        expect_status(&d.send(&s, "claude-x", &[]).await, 429, says);
        assert_eq!(mock.requests_to(d.path()).len(), 1, "{says}: no retry");
        let row = conn_state(&s, "p", "k1").await;
        assert_eq!(row["limitReset"]["lastOutcome"], "error", "{says}: {row:#}");
        assert_eq!(row["limitReset"]["nextQueryAfter"], now_ms + 15 * 60_000);
        let text = row["limitReset"]["lastError"].as_str().unwrap_or("");
        assert!(text.contains(says) && !text.contains(key(1)), "{text}");
        assert!(
            !text.contains(ORG),
            "the organization is not echoed: {text}"
        );
        s.stop().await;
    }
}

#[tokio::test]
async fn with_the_lane_on_too_the_reset_is_tried_first() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let cfg = reset_cfg().each_conn("low_priority_mode = true");
    let (s, clock) = Sluice::start_manual(&cfg.build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 3600;
    mock.on(USAGE).reply(usage("reset", true, None));
    mock.on(&reset_route()).reply(answer("reset", None));
    on_key(&mock, d, 1)
        .times(1)
        .reply(wall(reset_s).header("anthropic-ratelimit-unified-slow-offer", "treatment"));
    on_key(&mock, d, 1).reply(Reply::anthropic_text("full speed"));

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "after the reset");
    assert_eq!(seen(&mock, "POST", &reset_route()), 1);
    let sent = mock.requests_to(d.path());
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter().all(|r| r.header(SLOW.0).is_none()),
        "the retry runs at full speed, not on the lane"
    );
    let row = conn_state(&s, "p", "k1").await;
    assert!(row.get("lane").is_none(), "no lane accepted: {row:#}");
    assert_eq!(row["limitReset"]["lastOutcome"], "reset");
    s.stop().await;
}

#[tokio::test]
async fn with_the_lane_on_too_an_unavailable_reset_falls_through_to_the_lane() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let cfg = reset_cfg().each_conn("low_priority_mode = true");
    let (s, clock) = Sluice::start_manual(&cfg.build(&mock), ENV).await;
    let reset_s = unix_ms(clock.wall()) / 1000 + 3600;
    mock.on(USAGE).reply(usage("reset", false, None));
    mock.on(d.path()).header(SLOW.0, SLOW.1).reply(
        Reply::anthropic_text("slow").header("anthropic-ratelimit-unified-slow-status", "active"),
    );
    mock.on(d.path())
        .reply(wall(reset_s).header("anthropic-ratelimit-unified-slow-offer", "treatment"));

    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "on the lane");
    assert_eq!(seen(&mock, "GET", USAGE), 1, "the reset was asked first");
    assert_eq!(seen(&mock, "POST", &reset_route()), 0);
    let sent = mock.requests_to(d.path());
    assert_eq!(sent.len(), 2);
    assert_eq!(sent[1].header(SLOW.0), Some(SLOW.1), "the lane took over");
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["lane"]["state"], "active", "{row:#}");
    assert_eq!(row["limitReset"]["lastOutcome"], "already_used");
    s.stop().await;
}

#[tokio::test]
async fn auto_limit_reset_is_refused_off_an_anthropic_oauth_provider() {
    let mock = MockUpstream::start().await;
    let cfg = Cfg::new(D::Anthropic, 1)
        .each_conn(&format!("auto_limit_reset = true\norg_uuid = \"{ORG}\""))
        .build(&mock);
    let dir = tempfile::tempdir().unwrap();
    let env = sluice::config::LoadEnv::fixed(ENV, dir.path());
    let err = sluice::config::from_str(&cfg, std::path::Path::new("sluice.toml"), &env)
        .expect_err("api_key profile");
    let text = err.to_string();
    assert!(
        text.contains("providers.p.connections.k1.auto_limit_reset")
            && text.contains("profile = \"oauth\""),
        "{text}"
    );
}

#[tokio::test]
async fn auto_limit_reset_without_an_org_uuid_is_refused_naming_file_and_key() {
    let mock = MockUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let env = sluice::config::LoadEnv::fixed(ENV, dir.path());
    let load = |conn: &str| {
        let cfg = Cfg::new(D::Anthropic, 1)
            .profile("oauth")
            .each_conn(conn)
            .build(&mock);
        sluice::config::from_str(&cfg, std::path::Path::new("sluice.toml"), &env)
            .expect_err("no usable org_uuid")
            .to_string()
    };
    let missing = load("auto_limit_reset = true");
    assert!(
        missing.contains("sluice.toml: providers.p.connections.k1.org_uuid: is missing"),
        "{missing}"
    );
    let bad = load("auto_limit_reset = true\norg_uuid = \"my-org\"");
    assert!(
        bad.contains("sluice.toml: providers.p.connections.k1.org_uuid: is not a UUID")
            && !bad.contains("my-org"),
        "{bad}"
    );
}

#[tokio::test]
async fn a_remembered_unavailability_survives_a_restart() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let clock = ManualClock::new();
    let now_ms = unix_ms(clock.wall());
    mock.on(USAGE).reply(usage("reset", false, None));
    on_key(&mock, d, 1).reply(wall(now_ms / 1000 + 3600));
    let db_dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[store]\npath = \"{}\"\n{}",
        db_dir.path().join("state.db").display(),
        reset_cfg().build(&mock)
    );
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "the wall");
    assert_eq!(seen(&mock, "GET", USAGE), 1);
    s.stop().await;

    clock.advance(Duration::from_secs(7200));
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    let row = conn_state(&s, "p", "k1").await;
    assert_eq!(row["limitReset"]["lastOutcome"], "already_used", "{row:#}");
    assert_eq!(row["limitReset"]["nextAvailableAt"], now_ms + WEEK_MS);
    expect_status(&d.send(&s, "claude-x", &[]).await, 429, "the wall again");
    assert_eq!(
        mock.requests_to(d.path()).len(),
        2,
        "the connection was tried"
    );
    assert_eq!(
        seen(&mock, "GET", USAGE),
        1,
        "no query after the restart either"
    );
    s.stop().await;
}
