//! §8 (what the client gets when nothing is eligible) and §7 (status restatement), each in
//! both client dialects.

use std::time::Duration;

use serde_json::json;

use super::*;

/// The single excluded target of a §8 answer, checked against `reason` and the dialect shape.
fn check_excluded(
    d: D,
    r: &Resp,
    status: u16,
    code: &str,
    error_type: &str,
    reason: &str,
) -> Value {
    expect_status(r, status, &format!("{d:?} {code}"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v = r.json();
    assert_eq!(v["sluice"]["code"], code, "{d:?}: {v:#}");
    assert_eq!(d.error_type(&v), error_type, "{d:?}: {v:#}");
    match d {
        D::Anthropic => assert_eq!(v["type"], "error"),
        D::OpenAi => assert_eq!(v["error"]["code"], code, "{v:#}"),
    }
    let ex = &v["sluice"]["diagnostics"]["excluded"];
    assert_eq!(ex.as_array().map(Vec::len), Some(1), "{v:#}");
    assert_eq!(
        ex[0]["target"],
        format!("p:k1/{}", d.model()),
        "provider:connection/model"
    );
    assert_eq!(ex[0]["reason"], reason, "{v:#}");
    v
}

#[tokio::test]
async fn open_breaker_is_503_all_targets_cooling_down() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        mock.on(d.path())
            .reply(d.error(502, "api_error", "bad gateway"));
        let cfg = Cfg::new(d, 1)
            .profile("local")
            .each_conn("  disable_cooling = true")
            .tail(NO_WAIT)
            .build(&mock);
        let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
        for _ in 0..2 {
            expect_status(&d.send(&s, d.model(), &[]).await, 502, "passes through");
        }
        assert_eq!(breaker_state(&s, "p").await["state"], "open");

        let r = d.send(&s, d.model(), &[]).await;
        let error_type = match d {
            D::Anthropic => "overloaded_error",
            D::OpenAi => "api_error",
        };
        let v = check_excluded(
            d,
            &r,
            503,
            "all_targets_cooling_down",
            error_type,
            "circuit_open",
        );
        assert_eq!(retry_after(&r), Some(15), "local reset timeout");
        assert_eq!(v["sluice"]["retry_after"], 15);
        assert_eq!(
            v["sluice"]["diagnostics"]["excluded"][0]["retry_after_ms"],
            15_000
        );
        assert!(r.header("x-should-retry").is_none());
        assert_eq!(mock.count(), 2);
    }
}

#[tokio::test]
async fn connection_cooldown_without_wait_is_429_rate_limit_error_with_reset_at() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        mock.on(d.path())
            .times(1)
            .reply(d.error(429, "rate_limit_error", "slow down"));
        let (s, clock) =
            Sluice::start_manual(&Cfg::new(d, 1).tail(NO_WAIT).build(&mock), ENV).await;
        expect_status(
            &d.send(&s, d.model(), &[]).await,
            429,
            "upstream 429 passes through",
        );

        let r = d.send(&s, d.model(), &[]).await;
        let v = check_excluded(
            d,
            &r,
            429,
            "rate_limit_error",
            "rate_limit_error",
            "connection_cooldown",
        );
        assert_eq!(retry_after(&r), Some(3), "api_key ladder base 3s");
        assert_eq!(
            v["sluice"]["diagnostics"]["excluded"][0]["retry_after_ms"],
            3_000
        );
        let reset_at = v["sluice"]["reset_at"].as_str().expect("reset_at is set");
        let reset = humantime::parse_rfc3339(reset_at).unwrap();
        let expected = clock_wall(&clock) + Duration::from_secs(3);
        let skew = reset
            .duration_since(expected)
            .unwrap_or_else(|e| e.duration());
        assert!(
            skew <= Duration::from_secs(1),
            "reset_at {reset_at} is now + 3s"
        );
        assert!(r.header("x-should-retry").is_none());
        assert_eq!(mock.count(), 1);
    }
}

fn clock_wall(c: &sluice::clock::ManualClock) -> std::time::SystemTime {
    use sluice::clock::Clock;
    c.wall()
}

#[tokio::test]
async fn quota_wait_only_is_429_quota_exhausted_and_not_retryable_when_long() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        mock.on(d.path()).times(1).reply(
            d.error(429, "rate_limit_error", "usage window exhausted")
                .header("retry-after", "3600"),
        );
        let (s, _clock) =
            Sluice::start_manual(&Cfg::new(d, 1).tail(NO_WAIT).build(&mock), ENV).await;
        expect_status(
            &d.send(&s, d.model(), &[]).await,
            429,
            "upstream 429 passes through",
        );
        assert_eq!(conn_state(&s, "p", "k1").await["status"], "quota_wait");

        let r = d.send(&s, d.model(), &[]).await;
        let v = check_excluded(
            d,
            &r,
            429,
            "quota_exhausted",
            "rate_limit_error",
            "quota_wait",
        );
        assert_eq!(retry_after(&r), Some(3600));
        assert_eq!(r.header("x-should-retry"), Some("false"), "over 60 s");
        assert_eq!(v["sluice"]["retry_after"], 3600);
        assert!(v["sluice"]["reset_at"].is_string());
        assert_eq!(mock.count(), 1);
    }
}

#[tokio::test]
async fn terminal_only_is_503_all_targets_skipped() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        mock.on(d.path())
            .times(1)
            .reply(d.error(402, "billing_error", "payment required"));
        let (s, _clock) =
            Sluice::start_manual(&Cfg::new(d, 1).tail(NO_WAIT).build(&mock), ENV).await;
        expect_status(
            &d.send(&s, d.model(), &[]).await,
            402,
            "upstream 402 passes through",
        );
        assert_eq!(
            conn_state(&s, "p", "k1").await["status"],
            "credits_exhausted"
        );

        let r = d.send(&s, d.model(), &[]).await;
        let error_type = match d {
            D::Anthropic => "overloaded_error",
            D::OpenAi => "api_error",
        };
        let v = check_excluded(d, &r, 503, "ALL_TARGETS_SKIPPED", error_type, "terminal");
        assert_eq!(r.header("x-should-retry"), Some("false"));
        assert!(r.header("retry-after").is_none(), "no retry hint");
        assert!(v["sluice"]["retry_after"].is_null());
        assert_eq!(mock.count(), 1);
    }
}

#[tokio::test]
async fn an_injected_key_cooled_by_an_auth_failure_is_503_all_targets_skipped() {
    // A 401 and a generic 403 cool the key on the ladder; neither is a rate limit, so the
    // next request is told not to retry rather than to come back after the cooldown.
    for (status, kind, message) in [
        (401, "authentication_error", "invalid x-api-key"),
        (
            403,
            "permission_error",
            "this key may not use this resource",
        ),
    ] {
        for d in BOTH {
            let mock = MockUpstream::start().await;
            mock.on(d.path())
                .times(1)
                .reply(d.error(status, kind, message));
            let (s, _clock) =
                Sluice::start_manual(&Cfg::new(d, 1).tail(NO_WAIT).build(&mock), ENV).await;
            expect_status(
                &d.send(&s, d.model(), &[]).await,
                status,
                "the upstream auth error passes through",
            );
            let k1 = conn_state(&s, "p", "k1").await;
            assert_eq!(k1["status"], "cooling", "{k1:#}");
            assert_eq!(ms(&k1, "remainingMs"), 3_000, "api_key ladder base: {k1:#}");

            let r = d.send(&s, d.model(), &[]).await;
            let error_type = match d {
                D::Anthropic => "overloaded_error",
                D::OpenAi => "api_error",
            };
            let v = check_excluded(
                d,
                &r,
                503,
                "ALL_TARGETS_SKIPPED",
                error_type,
                "connection_cooldown",
            );
            let ex = &v["sluice"]["diagnostics"]["excluded"][0];
            assert_eq!(ex["cause"], "auth", "{status}: {v:#}");
            assert_eq!(ex["retry_after_ms"], 3_000, "the cooldown is still shown");
            assert_eq!(r.header("x-should-retry"), Some("false"), "{status} {d:?}");
            assert!(
                r.header("retry-after").is_none(),
                "{status} {d:?}: no retry hint"
            );
            assert!(v["sluice"]["retry_after"].is_null(), "{v:#}");
            assert!(v["sluice"]["reset_at"].is_null(), "{v:#}");
            assert_eq!(mock.count(), 1, "the cooled key is not dispatched");
        }
    }
}

#[tokio::test]
async fn auth_cooled_and_rate_limited_keys_together_are_429_with_the_rate_limit_hint() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        on_key(&mock, d, 1)
            .times(1)
            .reply(d.error(401, "authentication_error", "invalid key"));
        on_key(&mock, d, 2).times(1).reply(
            d.error(429, "rate_limit_error", "slow down")
                .header("retry-after", "20"),
        );
        let (s, _clock) =
            Sluice::start_manual(&Cfg::new(d, 2).tail(NO_WAIT).build(&mock), ENV).await;
        expect_status(
            &d.send(&s, d.model(), &[]).await,
            429,
            "k1 401, then k2 429: the last failure passes through",
        );

        let r = d.send(&s, d.model(), &[]).await;
        expect_status(&r, 429, &format!("{d:?}: one key is only rate limited"));
        let v = r.json();
        assert_eq!(v["sluice"]["code"], "rate_limit_error", "{v:#}");
        assert_eq!(
            retry_after(&r),
            Some(20),
            "the rate-limited key's hint, not the auth cooldown's 3 s"
        );
        assert!(r.header("x-should-retry").is_none());
        let ex = v["sluice"]["diagnostics"]["excluded"].as_array().unwrap();
        let causes: Vec<(&str, &str, Option<&str>)> = ex
            .iter()
            .map(|e| {
                (
                    e["target"].as_str().unwrap_or(""),
                    e["reason"].as_str().unwrap_or(""),
                    e["cause"].as_str(),
                )
            })
            .collect();
        let (k1, k2) = (format!("p:k1/{}", d.model()), format!("p:k2/{}", d.model()));
        assert_eq!(
            causes,
            vec![
                (k1.as_str(), "connection_cooldown", Some("auth")),
                (k2.as_str(), "connection_cooldown", None),
            ]
        );
        assert_eq!(mock.count(), 2);
    }
}

#[tokio::test]
async fn a_combo_of_the_other_dialect_is_translated_not_404() {
    let mock = MockUpstream::start().await;
    let cfg = format!(
        r#"
[routing]
default_provider = ["an", "oa"]

[[providers]]
id = "an"
dialect = "anthropic"
base_url = "{m}"
  [[providers.connections]]
  id = "ka"
  auth = "passthrough"

[[providers]]
id = "oa"
dialect = "openai"
base_url = "{m}"
  [[providers.connections]]
  id = "ko"
  auth = "passthrough"

[[combos]]
name = "only-openai"
targets = ["oa/gpt-x"]

[[combos]]
name = "only-anthropic"
targets = ["an/claude-x"]
"#,
        m = mock.base_url()
    );
    let (s, _clock) = Sluice::start_manual(&cfg, &[]).await;
    // Every dialect is reachable through translation: no `no_executable_targets` here.
    for (d, model) in [(D::Anthropic, "only-openai"), (D::OpenAi, "only-anthropic")] {
        let r = d.send(&s, model, &[]).await;
        expect_status(&r, 200, model);
    }
    let paths: Vec<String> = mock.requests().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths, ["/v1/chat/completions", "/v1/messages"]);
}

// === §7 restatement ===

#[tokio::test]
async fn cn_quota_403_is_restated_to_429_in_the_clients_dialect() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        mock.on(d.path()).reply(Reply::json(
            403,
            json!({"error": {"message": "用户额度不足"}}),
        ));
        let (s, _clock) =
            Sluice::start_manual(&Cfg::new(d, 1).tail(NO_WAIT).build(&mock), ENV).await;

        let r = d.send(&s, d.model(), &[]).await;
        expect_status(&r, 429, &format!("{d:?} restated"));
        assert_eq!(retry_after(&r), Some(60), "default_retry_after");
        let v = r.json();
        assert_eq!(
            v["error"]["message"], "用户额度不足",
            "upstream message kept: {v:#}"
        );
        assert_eq!(v["error"]["type"], "rate_limit_error");
        match d {
            D::Anthropic => assert_eq!(v["type"], "error"),
            D::OpenAi => assert_eq!(v["error"]["code"], "rate_limit_exceeded"),
        }
        let k1 = conn_state(&s, "p", "k1").await;
        assert_eq!(
            k1["lastStatus"], 429,
            "everything downstream sees the restated status"
        );
        assert_eq!(k1["lastErrorKind"], "quota_exhausted", "{k1:#}");
        assert_eq!(
            k1["status"], "cooling",
            "quota text without a hint cools on the ladder"
        );
    }
}

#[tokio::test]
async fn cn_quota_with_the_no_access_marker_passes_through_as_403() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        let upstream = Reply::json(
            403,
            json!({"error": {"message": "用户额度不足 无权访问模型"}}),
        );
        mock.on(d.path()).reply(upstream.clone());
        let (s, _clock) =
            Sluice::start_manual(&Cfg::new(d, 1).tail(NO_WAIT).build(&mock), ENV).await;

        let r = d.send(&s, d.model(), &[]).await;
        expect_status(&r, 403, &format!("{d:?} exclude marker vetoes"));
        assert_eq!(r.body, upstream.body_bytes(), "passed through unchanged");
        assert!(r.header("retry-after").is_none());
        // The built-in `cn-model-access` rule: only this model is locked on k1.
        assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");
        let locks = admin_get(&s, "/api/resilience/model-cooldowns").await["lockouts"].clone();
        assert_eq!(locks[0]["model"], d.model(), "{locks:#}");
        assert_eq!(locks[0]["reason"], "auth_error", "{locks:#}");
    }
}

#[tokio::test]
async fn restatement_matches_json_escaped_markers_and_keeps_the_upstream_retry_after() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        // `用户额度不足` written as JSON string escapes, plus an upstream hint.
        let raw = br#"{"error":{"message":"\u7528\u6237\u989d\u5ea6\u4e0d\u8db3"}}"#;
        mock.on(d.path())
            .reply(Reply::raw(400, "application/json", &raw[..]).header("retry-after", "30"));
        let cfg = Cfg::new(d, 1).tail(NO_WAIT).build(&mock);
        let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;

        let r = d.send(&s, d.model(), &[]).await;
        expect_status(&r, 429, &format!("{d:?}: 400 with escaped marker restated"));
        assert_eq!(retry_after(&r), Some(30), "the upstream's retry-after wins");
        assert_eq!(r.json()["error"]["message"], "用户额度不足");
    }
}
