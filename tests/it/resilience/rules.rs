//! Keys that route one failure to the right layer: `per_model_quota`, an error rule's `scope`
//! and `base_cooldown` (§3, §7), the egress-bucketed cooldown (§7), and the one warning line
//! an all-excluded answer writes (§8).

use std::io::Write;
use std::sync::{Arc, Mutex};

use super::*;

fn rate_limited(d: D) -> Reply {
    d.error(429, "rate_limit_error", "slow down")
}

#[tokio::test]
async fn per_model_quota_locks_the_model_instead_of_cooling_the_connection() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .model("gpt-a")
        .times(1)
        .reply(rate_limited(d));
    let cfg = Cfg::new(d, 1)
        .provider("per_model_quota = true")
        .tail(NO_WAIT)
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-a", &[]).await, 429, "passed through");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        k1["status"], "active",
        "the connection is not cooled: {k1:#}"
    );
    let locks = lockouts(&s).await;
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(locks[0]["model"], "gpt-a");
    expect_status(
        &d.send(&s, "gpt-b", &[]).await,
        200,
        "another model still works",
    );
    let again = d.send(&s, "gpt-a", &[]).await;
    expect_status(&again, 429, "the locked model is excluded");
    assert_eq!(mock.count(), 2, "and never dispatched");
}

#[tokio::test]
async fn an_error_rules_base_cooldown_sets_the_first_ladder_step() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .times(1)
        .reply(d.error(503, "server_error", "gateway busy"));
    let cfg = Cfg::new(d, 1)
        .tail(NO_WAIT)
        .tail("[[error_rules]]\nid = \"busy\"\nstatuses = [503]\ntext_markers = [\"gateway busy\"]\nreason = \"server_error\"\nscope = \"connection\"\nbase_cooldown = \"45s\"")
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[]).await, 503, "passed through");
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(k1["status"], "cooling", "{k1:#}");
    assert_eq!(
        ms(&k1, "remainingMs"),
        45_000,
        "the rule's 45s replaces the api_key ladder's 3s: {k1:#}"
    );
}

fn lockout_rule(scope: &str) -> String {
    format!(
        "[resilience.model_lockout]\nenabled = true\n\n[[error_rules]]\nid = \"r\"\nstatuses = [429]\nreason = \"rate_limit_exceeded\"\nscope = \"{scope}\""
    )
}

#[tokio::test]
async fn lockout_mode_rule_scope_provider_locks_the_model_on_every_connection() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1).times(1).reply(rate_limited(d));
    let cfg = Cfg::new(d, 2)
        .tail(NO_WAIT)
        .tail(&lockout_rule("provider"))
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    let r = d.send(&s, "gpt-x", &[]).await;
    expect_status(&r, 429, "k2 is locked by the same verdict");
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (1, 0));
    let mut locked: Vec<String> = lockouts(&s)
        .await
        .iter()
        .map(|l| {
            format!(
                "{}/{}",
                l["connection"].as_str().unwrap(),
                l["model"].as_str().unwrap()
            )
        })
        .collect();
    locked.sort();
    assert_eq!(locked, vec!["k1/gpt-x", "k2/gpt-x"]);
    for k in ["k1", "k2"] {
        assert_eq!(conn_state(&s, "p", k).await["status"], "active", "{k}");
    }
}

#[tokio::test]
async fn lockout_mode_rule_scope_connection_cools_the_connection_instead() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1).times(1).reply(rate_limited(d));
    let cfg = Cfg::new(d, 2)
        .tail(NO_WAIT)
        .tail(&lockout_rule("connection"))
        .build(&mock);
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "k2 serves");
    assert!(lockouts(&s).await.is_empty(), "no model lock");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "cooling");
    assert_eq!(conn_state(&s, "p", "k2").await["status"], "active");
}

#[tokio::test]
async fn egress_bucketed_429_cools_every_connection_on_the_same_egress() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    on_key(&mock, d, 1).times(1).reply(rate_limited(d));
    let mut cfg = Cfg::new(d, 2)
        .provider("egress_bucketed = true")
        .tail(NO_WAIT)
        .build(&mock);
    // A third connection on another egress.
    cfg = cfg.replace(
        "\n[resilience.combo_cooldown_wait]",
        "  [[providers.connections]]\n  id = \"k3\"\n  auth = { env = \"K3\" }\n  egress = \"proxy-b\"\n\n[resilience.combo_cooldown_wait]",
    );
    let (s, _clock) = Sluice::start_manual(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "k3 serves");
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2), hits(&mock, 3)),
        (1, 0, 1),
        "k2 shares k1's egress and is skipped"
    );
    let k2 = conn_state(&s, "p", "k2").await;
    assert_eq!(k2["status"], "cooling", "{k2:#}");
    assert_eq!(conn_state(&s, "p", "k3").await["status"], "active");
}

/// A `MakeWriter` into a shared buffer.
#[derive(Clone, Default)]
struct Buf(Arc<Mutex<Vec<u8>>>);

impl Write for Buf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_all_excluded_answer_writes_one_warning_line_naming_each_target() {
    let buf = Buf::default();
    let sink = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || sink.clone())
        .with_ansi(false)
        .with_max_level(tracing::Level::WARN)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path()).times(2).reply(rate_limited(d));
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).tail(NO_WAIT).build(&mock), ENV).await;
    expect_status(
        &d.send(&s, "gpt-x", &[]).await,
        429,
        "both keys rate limited",
    );
    let before = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let r = d.send(&s, "gpt-x", &[]).await;
    expect_status(&r, 429, "all excluded");
    assert_eq!(mock.count(), 2, "nothing dispatched");
    let after = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let new = &after[before.len()..];
    let lines: Vec<&str> = new
        .lines()
        .filter(|l| l.contains("no target eligible"))
        .collect();
    assert_eq!(lines.len(), 1, "one warning line per answer:\n{new}");
    let line = lines[0];
    assert!(line.contains("WARN"), "{line}");
    for target in ["p:k1/gpt-x", "p:k2/gpt-x"] {
        assert!(line.contains(target), "names {target}: {line}");
    }
    assert!(
        line.contains("connection_cooldown"),
        "names the reason: {line}"
    );
}

// === live rules and the built-in model-access rule ===

fn no_access(d: D) -> Reply {
    d.error(403, "permission_error", "无权访问模型 gpt-a")
}

#[tokio::test]
async fn no_access_to_a_model_locks_that_model_for_six_hours_by_the_built_in_rule() {
    for lockout_mode in [true, false] {
        let mock = MockUpstream::start().await;
        let d = D::OpenAi;
        mock.on(d.path()).model("gpt-a").reply(no_access(d));
        let mut cfg = Cfg::new(d, 1).tail(NO_WAIT);
        if lockout_mode {
            cfg = cfg.tail("[resilience.model_lockout]\nenabled = true");
        }
        let (s, _clock) = Sluice::start_manual(&cfg.build(&mock), ENV).await;
        expect_status(&d.send(&s, "gpt-a", &[]).await, 403, "passed through");
        let locks = lockouts(&s).await;
        assert_eq!(locks.len(), 1, "lockout mode {lockout_mode}: {locks:#?}");
        assert_eq!(locks[0]["model"], "gpt-a");
        let left = locks[0]["remainingMs"].as_u64().unwrap_or_default();
        assert!(
            (6 * 3_600_000 - 1_000..=6 * 3_600_000).contains(&left),
            "{locks:#?}"
        );
        let k1 = conn_state(&s, "p", "k1").await;
        assert_eq!(k1["status"], "active", "only the model: {k1:#}");
        expect_status(&d.send(&s, "gpt-b", &[]).await, 200, "another model");
    }
}

#[tokio::test]
async fn error_rules_are_listed_replaced_and_checked_live_through_the_admin_api() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path())
        .reply(d.error(400, "invalid_request_error", "gateway says: plan exhausted"));
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).tail(NO_WAIT).build(&mock), ENV).await;
    let listed = admin_get(&s, "/api/resilience").await;
    assert_eq!(listed["rules"]["error_rules"], json!([]), "{listed:#}");
    assert_eq!(
        listed["rules"]["builtin"]["error_rules"][0]["id"],
        "cn-model-access"
    );

    // Without a rule the 400 is the client's fault: no failover, nothing cooled.
    expect_status(&d.send(&s, "gpt-x", &[]).await, 400, "no rule");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");

    let rule = json!({"error_rules": [{"id": "gw-plan", "statuses": [400],
        "text_markers": ["plan exhausted"], "reason": "quota_exhausted", "scope": "connection"}]});
    let r = admin(&s, Method::PATCH, "/api/resilience", rule).await;
    expect_status(&r, 200, "a valid rule");
    assert_eq!(r.json()["overrides"]["error_rules"][0]["id"], "gw-plan");
    let listed = admin_get(&s, "/api/resilience").await;
    assert_eq!(listed["rules"]["error_rules"][0]["id"], "gw-plan");

    d.send(&s, "gpt-x", &[]).await;
    let k1 = conn_state(&s, "p", "k1").await;
    assert_eq!(
        k1["lastErrorKind"], "quota_exhausted",
        "the live rule classified it: {k1:#}"
    );
    assert_ne!(k1["status"], "active", "{k1:#}");

    let bad = json!({"error_rules": [{"id": "oops", "statuses": [400], "text_markers": ["x"], "reason": "sleepy"}]});
    let r = admin(&s, Method::PATCH, "/api/resilience", bad).await;
    expect_status(&r, 400, "an invalid rule");
    assert_eq!(r.json()["error"]["field"], "error_rules.oops.reason");
    let listed = admin_get(&s, "/api/resilience").await;
    assert_eq!(
        listed["rules"]["error_rules"][0]["id"], "gw-plan",
        "nothing changed"
    );

    let r = admin(
        &s,
        Method::PATCH,
        "/api/resilience",
        json!({"error_rules": []}),
    )
    .await;
    expect_status(&r, 200, "every rule removed");
    let listed = admin_get(&s, "/api/resilience").await;
    assert_eq!(listed["rules"]["error_rules"], json!([]));
}
