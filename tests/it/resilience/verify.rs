//! Clear-and-verify through HTTP: `"verify": "<model>"` on the cooldown clear and breaker
//! reset endpoints sends one 1-token probe to the connection (with its own key, straight to
//! the mock) and clears or resets only when the probe answers 2xx. The probe is not traffic:
//! it feeds no breaker, cooldown or request log.

use super::*;

/// Cools k1 with a 503 (the request falls back to k2); the next k1 request is the probe.
async fn cooled(d: D, extra_conn: &str) -> (MockUpstream, Sluice, sluice::clock::ManualClock) {
    let mock = MockUpstream::start().await;
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(503, "overloaded_error", "Service unavailable"));
    let cfg = Cfg::new(d, 2).tail(extra_conn).build(&mock);
    let (s, clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, d.model(), &[]).await, 200, "falls back to k2");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");
    (mock, s, clock)
}

async fn verify_clear(s: &Sluice, body: Value) -> Resp {
    admin(s, Method::POST, "/api/resilience/cooldowns", body).await
}

#[tokio::test]
async fn a_failing_probe_keeps_the_connection_cooling_and_a_passing_one_clears_it() {
    for d in [D::Anthropic, D::OpenAi] {
        let (mock, s, _clock) = cooled(d, "").await;
        on_key(&mock, d, 1)
            .times(1)
            .reply(d.error(503, "overloaded_error", "Still overloaded"));
        let requests_before = s.snapshot().totals.requests;
        let failures_before = breaker_state(&s, "p").await["failureCount"].clone();

        let r = verify_clear(
            &s,
            json!({"connectionIds": ["k1"], "verify": "probe-model"}),
        )
        .await;
        expect_status(&r, 200, "the probe ran");
        let v = r.json();
        assert_eq!(v["failed"], json!(["k1"]), "{v:#}");
        assert_eq!(v["cleared"], json!([]));
        let report = &v["verified"][0];
        assert_eq!(report["passed"], false);
        assert_eq!(report["probe"]["status"], 503);
        assert!(
            report["probe"]["error"]
                .as_str()
                .unwrap()
                .contains("Still overloaded"),
            "{report:#}"
        );
        assert_eq!(
            conn_state(&s, "p", "k1").await["status"],
            "cooling",
            "{}",
            d.name()
        );
        assert_eq!(
            breaker_state(&s, "p").await["failureCount"],
            failures_before,
            "the failed probe fed no breaker"
        );

        // The probe: one request with k1's own key, 1 token, not streaming, the named model.
        let probe = mock.requests().into_iter().last().unwrap();
        assert_eq!(probe.path, d.path());
        let key = probe.headers[d.key_header()].to_str().unwrap().to_string();
        assert!(key.contains(&key_of(1)), "{}: {key}", d.name());
        let body: Value = serde_json::from_slice(&probe.body).unwrap();
        assert_eq!(body["model"], "probe-model");
        assert_eq!(body["max_tokens"], 1);
        assert_ne!(body["stream"], true);

        // Now k1 answers: the same call clears it.
        let r = verify_clear(
            &s,
            json!({"connectionIds": ["k1"], "verify": "probe-model"}),
        )
        .await;
        let v = r.json();
        assert_eq!(v["cleared"], json!(["k1"]), "{v:#}");
        assert_eq!(v["verified"][0]["probe"]["status"], 200);
        assert_eq!(v["verified"][0]["cleared"]["cleared"], json!(["k1"]));
        assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");
        assert_eq!(
            s.snapshot().totals.requests,
            requests_before,
            "probes are not client requests"
        );
    }
}

fn key_of(n: usize) -> String {
    key(n).to_string()
}

#[tokio::test]
async fn reset_with_verify_probes_the_provider_first() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    on_key(&mock, d, 1)
        .times(2)
        .reply(d.error(503, "overloaded_error", "Service unavailable"));
    let cfg = Cfg::new(d, 1)
        .each_conn("disable_cooling = true")
        .tail("[resilience.breaker.api_key]\ndegrade_at = 1\nopen_at = 2\nreset_timeout = \"15s\"")
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    for _ in 0..2 {
        d.send(&s, d.model(), &[]).await;
    }
    assert_eq!(breaker_state(&s, "p").await["state"], "open");

    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(500, "api_error", "Internal error"));
    let body = json!({"provider": "p", "verify": "claude-haiku"});
    let v = admin(&s, Method::POST, "/api/resilience/reset", body.clone())
        .await
        .json();
    assert_eq!(v["passed"], false, "{v:#}");
    assert_eq!(v["connection"], "k1");
    assert!(v.get("reset").is_none());
    assert_eq!(
        breaker_state(&s, "p").await["state"],
        "open",
        "nothing reset"
    );

    let v = admin(&s, Method::POST, "/api/resilience/reset", body)
        .await
        .json();
    assert_eq!(v["passed"], true, "{v:#}");
    assert_eq!(v["reset"], json!(["p"]));
    assert_eq!(breaker_state(&s, "p").await["state"], "closed");
}

#[tokio::test]
async fn verify_refuses_what_it_cannot_probe_before_sending_anything() {
    let d = D::Anthropic;
    let (mock, s, _clock) = cooled(d, "").await;
    let sent = mock.count();
    let cases = [
        (json!({"connectionIds": ["nope"], "verify": "m"}), 404),
        (json!({"connectionIds": ["k1"], "verify": " "}), 400),
        (json!({"connectionIds": [], "verify": "m"}), 400),
        (json!({"all": true, "verify": "m"}), 400),
    ];
    for (body, want) in cases {
        let r = verify_clear(&s, body.clone()).await;
        expect_status(&r, want, &format!("{body}"));
    }
    for (body, want) in [
        (json!({"verify": "m"}), 400),
        (json!({"provider": "nope", "verify": "m"}), 404),
        (json!({"provider": "p", "connection": "k1"}), 400),
    ] {
        let r = admin(&s, Method::POST, "/api/resilience/reset", body.clone()).await;
        expect_status(&r, want, &format!("{body}"));
    }
    assert_eq!(mock.count(), sent, "nothing was probed");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");
}

#[tokio::test]
async fn a_passthrough_connection_cannot_be_verified() {
    let mock = MockUpstream::start().await;
    let cfg = format!(
        "[routing]\ndefault_provider = \"p\"\n\n[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"{}\"\n\n  [[providers.connections]]\n  id = \"pt\"\n  auth = \"passthrough\"\n",
        mock.base_url()
    );
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    let r = verify_clear(&s, json!({"connectionIds": ["pt"], "verify": "m"})).await;
    expect_status(&r, 400, "passthrough");
    assert!(r.text().contains("passthrough"), "{}", r.text());
    let r = admin(
        &s,
        Method::POST,
        "/api/resilience/reset",
        json!({"provider": "p", "verify": "m"}),
    )
    .await;
    expect_status(&r, 400, "no keyed connection");
    assert_eq!(mock.count(), 0);
}
