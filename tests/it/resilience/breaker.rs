//! §1 provider breaker through HTTP: a hung half-open probe cannot wedge it (A10), 529
//! overload neither counts nor cools (A13); and the optional windowed provider cooldown in a
//! combo.

use std::time::Duration;

use serde_json::json;
use sluice::clock::{Clock, unix_ms};

use super::*;

/// Provider `p` (anthropic, `local` profile) opening after 5 counted failures, 15 s reset,
/// 5 s probe timeout; its one connection never cools, so every request reaches upstream.
fn a10_config(mock: &MockUpstream, provider_extra: &str) -> String {
    Cfg::new(D::Anthropic, 1)
        .profile("local")
        .provider(provider_extra)
        .each_conn("  disable_cooling = true")
        .tail(NO_WAIT)
        .tail(
            "[resilience.breaker.local]\ndegrade_at = 3\nopen_at = 5\nreset_timeout = \"15s\"\nprobe_timeout = \"5s\"",
        )
        .build(mock)
}

fn overloaded_503() -> Reply {
    D::Anthropic.error(503, "overloaded_error", "Service unavailable")
}

/// Five 503s through HTTP open the breaker of `p`.
async fn open_with_503s(s: &Sluice, mock: &MockUpstream) {
    let d = D::Anthropic;
    for i in 0..5 {
        let r = d.send(s, "claude-x", &[]).await;
        expect_status(&r, 503, &format!("503 number {i} passes through"));
    }
    assert_eq!(mock.count(), 5);
    let b = breaker_state(s, "p").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("open"), Some(5)),
        "{b:#}"
    );
    assert_eq!(ms(&b, "retryAfterMs"), 15_000);
    let r = d.send(s, "claude-x", &[]).await;
    expect_status(&r, 503, "open breaker: excluded");
    assert_eq!(r.json()["sluice"]["code"], "all_targets_cooling_down");
    assert_eq!(mock.count(), 5, "an open breaker sends nothing upstream");
}

#[tokio::test]
async fn a10_hung_half_open_probe_times_out_and_the_next_probe_closes_the_breaker() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    mock.on(d.path()).times(5).reply(overloaded_503());
    // The probe: accepted, never answered (well past this test's lifetime).
    mock.on(d.path())
        .times(1)
        .reply(Reply::anthropic_text("too late").delay(Duration::from_secs(3_600)));
    let (s, clock) = Sluice::start_manual(&a10_config(&mock, ""), ENV).await;
    open_with_503s(&s, &mock).await;

    clock.advance(Duration::from_secs(15));
    assert_eq!(breaker_state(&s, "p").await["state"], "half_open");
    let url = s.url(d.path());
    let probe = tokio::spawn(async move {
        client::post_json(&url, &D::Anthropic.body("claude-x", false), &[AV]).await
    });
    mock.wait_for(6).await;

    // The probe holds the one permit: everyone else is excluded until it times out.
    let busy = d.send(&s, "claude-x", &[]).await;
    expect_status(&busy, 503, "half-open with the probe in flight");
    let v = busy.json();
    assert_eq!(
        v["sluice"]["diagnostics"]["excluded"][0]["reason"],
        "circuit_open"
    );
    assert_eq!(
        v["sluice"]["diagnostics"]["excluded"][0]["retry_after_ms"], 5_000,
        "until the probe times out"
    );
    assert_eq!(retry_after(&busy), Some(5));
    assert_eq!(mock.count(), 6);

    // probe_timeout passes with no verdict: the permit is released and it counts as a failure.
    clock.advance(Duration::from_secs(5));
    let b = breaker_state(&s, "p").await;
    assert_eq!(
        b["state"], "open",
        "the hung probe re-opened the breaker: {b:#}"
    );
    let last = b["transitions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (
            last["from"].as_str(),
            last["to"].as_str(),
            last["reason"].as_str()
        ),
        (Some("half_open"), Some("open"), Some("probe_timed_out"))
    );
    assert_eq!(
        ms(&b, "retryAfterMs"),
        15_000,
        "re-opened with the next reset timeout"
    );

    // Upstream is healthy now (the scripted replies are used up): the next probe closes it.
    clock.advance(Duration::from_secs(15));
    let ok = d.send(&s, "claude-x", &[]).await;
    expect_status(&ok, 200, "the next probe is admitted");
    assert_eq!(mock.count(), 7);
    let b = breaker_state(&s, "p").await;
    assert_eq!(
        (
            b["state"].as_str(),
            b["failureCount"].as_u64(),
            b["multiplier"].as_u64()
        ),
        (Some("closed"), Some(0), Some(1)),
        "{b:#}"
    );

    // The hung probe's client gives up; its late end must not disturb the closed breaker.
    probe.abort();
    let _ = probe.await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(breaker_state(&s, "p").await["state"], "closed");
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "still closed");
}

#[tokio::test]
async fn a10_probe_ended_by_the_provider_timeout_reopens_and_a_healthy_probe_closes() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    mock.on(d.path()).times(5).reply(overloaded_503());
    mock.on(d.path())
        .times(1)
        .reply(Reply::anthropic_text("too late").delay(Duration::from_secs(3_600)));
    let cfg = a10_config(&mock, "timeout = \"300ms\"");
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    open_with_503s(&s, &mock).await;

    clock.advance(Duration::from_secs(15));
    let hung = d.send(&s, "claude-x", &[]).await;
    expect_status(&hung, 504, "the probe attempt ends at the provider timeout");
    let b = breaker_state(&s, "p").await;
    assert_eq!(b["state"], "open", "a failed probe re-opens: {b:#}");
    let last = b["transitions"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["reason"], "probe_failed");

    clock.advance(Duration::from_secs(15));
    expect_status(&d.send(&s, "claude-x", &[]).await, 200, "healthy probe");
    assert_eq!(breaker_state(&s, "p").await["state"], "closed");
    assert_eq!(mock.count(), 7);
}

#[tokio::test]
async fn a13_529_burst_neither_cools_nor_counts_and_every_request_succeeds() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    for n in 1..=3 {
        on_key(&mock, d, n).times(1).reply(
            Reply::json(
                529,
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            )
            .delay(Duration::from_millis(50)),
        );
    }
    let (s, _clock) =
        Sluice::start_manual(&Cfg::new(d, 3).profile("oauth").build(&mock), ENV).await;

    let first: Vec<Resp> = futures_join_all(&s, d, 6).await;
    let mut retried = 0;
    for r in first {
        match r.status.as_u16() {
            200 => {}
            529 => {
                // No alternative left for this one: the 529 reaches the client, which retries.
                assert_eq!(r.json()["error"]["type"], "overloaded_error");
                retried += 1;
                expect_status(&d.send(&s, "claude-x", &[]).await, 200, "client retry");
            }
            other => panic!("unexpected {other}: {}", r.text()),
        }
    }
    assert!(retried <= 1, "at most one request can meet all three 529s");
    assert_eq!(
        (hits(&mock, 1) + hits(&mock, 2) + hits(&mock, 3)),
        mock.count()
    );
    for n in 1..=3 {
        let c = conn_state(&s, "p", &format!("k{n}")).await;
        assert_eq!(
            (c["status"].as_str(), c["backoffLevel"].as_u64()),
            (Some("active"), Some(0)),
            "529 never cools a connection: {c:#}"
        );
    }
    let b = breaker_state(&s, "p").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("closed"), Some(0)),
        "529 never counts for the breaker: {b:#}"
    );
}

/// `n` concurrent non-streaming requests.
async fn futures_join_all(s: &Sluice, d: D, n: usize) -> Vec<Resp> {
    let url = s.url(d.path());
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(
                async move { client::post_json(&url, &d.body("claude-x", false), &[AV]).await },
            )
        })
        .collect();
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.unwrap());
    }
    out
}

#[tokio::test]
async fn a_providers_own_breaker_keys_override_its_profile() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .reply(d.error(503, "server_error", "down"));
    // api_key opens at 12 failures; this provider at 2 (one request failing on both keys).
    let cfg = Cfg::new(d, 2)
        .provider("[providers.breaker]\nopen_at = 2")
        .tail(NO_WAIT)
        .tail("[resilience.breaker.api_key]\ndegrade_at = 1")
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[]).await, 503, "both keys fail");
    assert_eq!(mock.count(), 2);
    let b = breaker_state(&s, "p").await;
    assert_eq!(b["state"], "open", "{b:#}");
}

/// Provider `p` (openai, `local` profile: degraded at 1, open at 2) with one connection that
/// never cools, so every request reaches upstream and only the breaker decides.
fn trip_config(mock: &MockUpstream, provider_extra: &str) -> String {
    Cfg::new(D::OpenAi, 1)
        .profile("local")
        .provider(provider_extra)
        .each_conn("  disable_cooling = true")
        .tail(NO_WAIT)
        .build(mock)
}

#[tokio::test]
async fn only_trip_statuses_count_toward_the_breaker() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    let ignored = [
        501, 505, 520, 521, 522, 523, 524, 525, 526, 527, 529, 400, 404, 409,
    ];
    for status in ignored {
        mock.on(d.path())
            .times(1)
            .reply(d.error(status, "server_error", "not a provider outage"));
    }
    mock.on(d.path())
        .times(2)
        .reply(d.error(503, "server_error", "down"));
    let (s, _clock) = Sluice::start_manual(&trip_config(&mock, ""), ENV).await;

    let settings = admin_get(&s, "/api/resilience").await;
    assert_eq!(
        settings["settings"]["breaker"]["local"]["trip_statuses"],
        json!([408, 500, 502, 503, 504]),
        "the default list is shown with the other breaker settings"
    );

    for status in ignored {
        let r = d.send(&s, "gpt-x", &[]).await;
        expect_status(&r, status, "the upstream error passes through");
        let b = breaker_state(&s, "p").await;
        assert_eq!(
            (b["state"].as_str(), b["failureCount"].as_u64()),
            (Some("closed"), Some(0)),
            "{status} does not count: {b:#}"
        );
    }
    // The local profile degrades at 1 and opens at 2 counted failures.
    expect_status(&d.send(&s, "gpt-x", &[]).await, 503, "first 503");
    assert_eq!(breaker_state(&s, "p").await["state"], "degraded");
    expect_status(&d.send(&s, "gpt-x", &[]).await, 503, "second 503");
    assert_eq!(breaker_state(&s, "p").await["state"], "open");
    let r = d.send(&s, "gpt-x", &[]).await;
    expect_status(&r, 503, "open breaker: excluded");
    assert_eq!(r.json()["sluice"]["code"], "all_targets_cooling_down");
    assert_eq!(mock.count(), ignored.len() + 2, "nothing sent while open");
}

#[tokio::test]
async fn a_providers_own_trip_statuses_replace_the_profiles() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .times(3)
        .reply(d.error(503, "server_error", "down"));
    mock.on(d.path())
        .times(2)
        .reply(d.error(522, "server_error", "origin timed out"));
    let cfg = trip_config(&mock, "[providers.breaker]\ntrip_statuses = [522]");
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;

    for _ in 0..3 {
        expect_status(&d.send(&s, "gpt-x", &[]).await, 503, "503 passes through");
    }
    let b = breaker_state(&s, "p").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("closed"), Some(0)),
        "503 is not in this provider's list: {b:#}"
    );
    for _ in 0..2 {
        expect_status(&d.send(&s, "gpt-x", &[]).await, 522, "522 passes through");
    }
    let b = breaker_state(&s, "p").await;
    assert_eq!(b["state"], "open", "two 522s open it: {b:#}");
}

// === windowed provider cooldown ===

/// Combo `duo` = `p/claude-x` (connection k1, never cools) then `h/claude-x` (k2), both
/// `api_key` providers (a loopback URL would make them `local`), with the
/// windowed provider cooldown on: 3 counted failures within 1m cool a provider for 30s (the
/// `api_key` breaker, opening at 12, stays closed throughout).
fn window_config(mock: &MockUpstream) -> String {
    format!(
        "[routing]\ndefault_provider = \"p\"\n\n\
         [[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"{url}\"\nprofile = \"api_key\"\n\
         \n  [[providers.connections]]\n  id = \"k1\"\n  auth = {{ env = \"K1\" }}\n  disable_cooling = true\n\n\
         [[providers]]\nid = \"h\"\ndialect = \"anthropic\"\nbase_url = \"{url}\"\nprofile = \"api_key\"\n\
         \n  [[providers.connections]]\n  id = \"k2\"\n  auth = {{ env = \"K2\" }}\n\n\
         [resilience.provider_cooldown]\nenabled = true\n\
         [resilience.provider_cooldown.api_key]\nfailure_threshold = 3\nfailure_window = \"1m\"\ncooldown = \"30s\"\n\n\
         [[combos]]\nname = \"duo\"\ntargets = [\"p/claude-x\", \"h/claude-x\"]\n",
        url = mock.base_url()
    )
}

/// The latest request in the snapshot: its last target tried and its skip reasons for
/// `target`.
fn last_request(s: &Sluice, target: &str) -> (String, Vec<String>) {
    let snap = s.snapshot();
    let last = snap
        .recent
        .iter()
        .max_by_key(|r| r.id)
        .unwrap_or_else(|| panic!("no request in the snapshot"));
    let reasons = last
        .skipped
        .iter()
        .filter(|k| k.target == target)
        .map(|k| k.reason.to_string())
        .collect();
    (last.target.clone(), reasons)
}

#[tokio::test]
async fn windowed_provider_cooldown_skips_the_provider_in_a_combo_until_it_passes() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1).times(5).reply(overloaded_503());
    let (s, clock) = Sluice::start_manual(&window_config(&mock), ENV).await;
    let p_target = "p:k1/claude-x";

    // Failures that fall out of the window do not add up: two 503s, then 61 s later a third
    // is the window's only one.
    for _ in 0..2 {
        expect_status(&d.send(&s, "duo", &[]).await, 200, "p fails, h serves");
    }
    clock.advance(Duration::from_secs(61));
    expect_status(&d.send(&s, "duo", &[]).await, 200, "p fails, h serves");
    clock.advance(Duration::from_secs(1));
    expect_status(&d.send(&s, "duo", &[]).await, 200, "p fails, h serves");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (4, 4));
    assert_eq!(
        s.snapshot().providers[0].provider_cooldown_until_unix_ms,
        None,
        "two failures in the window do not cool p"
    );

    // The third inside the window cools p for 30 s.
    clock.advance(Duration::from_secs(1));
    expect_status(&d.send(&s, "duo", &[]).await, 200, "p fails, h serves");
    assert_eq!(hits(&mock, 1), 5);
    let snap = s.snapshot();
    assert_eq!(
        snap.providers[0].provider_cooldown_until_unix_ms,
        Some(unix_ms(clock.wall()) + 30_000),
        "{:#?}",
        snap.providers[0]
    );
    let b = breaker_state(&s, "p").await;
    assert_eq!(b["state"], "closed", "the window, not the breaker: {b:#}");

    // The combo's next request skips p and is served by h.
    expect_status(&d.send(&s, "duo", &[]).await, 200, "served by h");
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (5, 6),
        "p is not dispatched to"
    );
    assert_eq!(
        last_request(&s, p_target),
        (
            "h:k2/claude-x".to_string(),
            vec!["provider_cooldown".to_string()]
        )
    );

    // Still skipped 1 ms before the cooldown ends; tried (and serving) again once it passed.
    clock.advance(Duration::from_millis(29_999));
    expect_status(&d.send(&s, "duo", &[]).await, 200, "served by h");
    assert_eq!(hits(&mock, 1), 5, "p still cooling at 29.999 s");
    clock.advance(Duration::from_millis(1));
    expect_status(&d.send(&s, "duo", &[]).await, 200, "served by p");
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (6, 7),
        "p is tried again once the cooldown passed"
    );
    assert_eq!(last_request(&s, p_target), (p_target.to_string(), vec![]));
    assert_eq!(
        s.snapshot().providers[0].provider_cooldown_until_unix_ms,
        None
    );
    s.stop().await;
}
