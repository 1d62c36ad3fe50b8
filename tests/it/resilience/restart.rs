//! Persistence (§1, §2, §3): a connection cooldown, a model lockout and an open breaker
//! survive a restart on the same database, with their remaining time.

use std::sync::Arc;
use std::time::Duration;

use super::*;

/// `p1` (openai, two keys, 404s lock the exact model) and `p2` (anthropic, local profile,
/// never cools its connection, opens after two 503s).
fn restart_config(mock: &MockUpstream, db: &std::path::Path) -> String {
    format!(
        r#"
[store]
path = "{db}"

[routing]
default_provider = ["p1", "p2"]

[[providers]]
id = "p1"
dialect = "openai"
base_url = "{m}"
profile = "api_key"
  [[providers.connections]]
  id = "k1"
  auth = {{ env = "K1" }}
  [[providers.connections]]
  id = "k2"
  auth = {{ env = "K2" }}

[[providers]]
id = "p2"
dialect = "anthropic"
base_url = "{m}"
profile = "local"
  [[providers.connections]]
  id = "k3"
  auth = {{ env = "K3" }}
  disable_cooling = true

[resilience.model_lockout]
enabled = true
error_codes = [404]
base_cooldown = "300s"

[resilience.combo_cooldown_wait]
enabled = false
"#,
        db = db.display(),
        m = mock.base_url()
    )
}

/// Asserts `got` is within 1 s below `want` (ms).
fn about(got: u64, want: u64, what: &str) {
    assert!(
        got <= want && want - got <= 1_000,
        "{what}: {got} ms remaining, expected about {want}"
    );
}

#[tokio::test]
async fn cooldowns_lockouts_and_breakers_survive_a_restart() {
    let mock = MockUpstream::start().await;
    let (oa, an) = (D::OpenAi, D::Anthropic);
    on_key(&mock, oa, 1).times(1).reply(
        oa.error(429, "rate_limit_error", "slow down")
            .header("retry-after", "120"),
    );
    on_key(&mock, oa, 2).times(1).reply(oa.error(
        404,
        "not_found_error",
        "The model `gone` does not exist",
    ));
    mock.on(an.path())
        .times(2)
        .reply(an.error(503, "overloaded_error", "unavailable"));
    let db_dir = tempfile::tempdir().unwrap();
    let cfg = restart_config(&mock, &db_dir.path().join("state.db"));
    let clock = sluice::clock::ManualClock::new();

    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    // K1 cools for 120 s (hint), K2 locks `gone` for 300 s, p2's breaker opens.
    expect_status(&oa.send(&s, "gone", &[]).await, 404, "K1 429, then K2 404");
    for _ in 0..2 {
        expect_status(&an.send(&s, "claude-x", &[]).await, 503, "p2 503");
    }
    assert_eq!(
        ms(&conn_state(&s, "p1", "k1").await, "remainingMs"),
        120_000
    );
    assert_eq!(ms(&lockouts(&s).await[0], "remainingMs"), 300_000);
    let b = breaker_state(&s, "p2").await;
    assert_eq!(b["state"], "open");
    let transitions_before = b["transitions"].clone();
    s.stop().await;

    // Ten seconds of downtime.
    clock.advance(Duration::from_secs(10));
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;

    let k1 = conn_state(&s, "p1", "k1").await;
    assert_eq!(k1["status"], "cooling", "{k1:#}");
    about(ms(&k1, "remainingMs"), 110_000, "K1 cooldown");
    assert_eq!(k1["lastStatus"], 429);
    let locks = lockouts(&s).await;
    assert_eq!(locks.len(), 1, "{locks:#?}");
    assert_eq!(
        (
            locks[0]["provider"].as_str(),
            locks[0]["connection"].as_str(),
            locks[0]["model"].as_str()
        ),
        (Some("p1"), Some("k2"), Some("gone"))
    );
    about(ms(&locks[0], "remainingMs"), 290_000, "lockout");
    let b = breaker_state(&s, "p2").await;
    assert_eq!(
        (b["state"].as_str(), b["failureCount"].as_u64()),
        (Some("open"), Some(2)),
        "{b:#}"
    );
    about(ms(&b, "retryAfterMs"), 5_000, "breaker reset timeout");
    assert_eq!(
        b["transitions"], transitions_before,
        "transition history restored"
    );
    let snap = s.snapshot();
    assert_eq!(
        snap.providers[0].connections[0].status,
        sluice::snapshot::ConnectionStatus::Cooling
    );
    assert_eq!(snap.lockouts.len(), 1);

    // The restored state routes: nothing is dispatched to the excluded targets.
    let before = mock.count();
    let r = oa.send(&s, "gone", &[]).await;
    expect_status(&r, 429, "K1 cooling, `gone` locked on K2");
    let reasons: Vec<String> = r.json()["sluice"]["diagnostics"]["excluded"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["reason"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(reasons, vec!["connection_cooldown", "model_lockout"]);
    let r = an.send(&s, "claude-x", &[]).await;
    expect_status(&r, 503, "p2 still open");
    assert_eq!(mock.count(), before);

    // And recovers lazily as the restored deadlines pass.
    clock.advance(Duration::from_secs(6));
    expect_status(
        &an.send(&s, "claude-x", &[]).await,
        200,
        "probe after the reset timeout",
    );
    assert_eq!(breaker_state(&s, "p2").await["state"], "closed");
    s.stop().await;
}

#[tokio::test]
async fn session_pins_survive_a_restart() {
    let mock = MockUpstream::start().await;
    let d = D::Anthropic;
    on_key(&mock, d, 1)
        .times(1)
        .reply(d.error(529, "overloaded_error", "Overloaded"));
    let db_dir = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[store]\npath = \"{}\"\n{}",
        db_dir.path().join("state.db").display(),
        Cfg::new(d, 2).build(&mock)
    );
    let clock = sluice::clock::ManualClock::new();
    let session = ("x-claude-code-session-id", "sess-restart");

    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(
        &d.send(&s, "claude-x", &[session]).await,
        200,
        "pinned to K2",
    );
    assert_eq!((hits(&mock, 1), hits(&mock, 2)), (1, 1));
    s.stop().await;

    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    expect_status(
        &d.send(&s, "claude-x", &[session]).await,
        200,
        "after restart",
    );
    assert_eq!(
        (hits(&mock, 1), hits(&mock, 2)),
        (1, 2),
        "the restored pin sends the session to K2 first"
    );
    s.stop().await;
}

#[tokio::test]
async fn a_terminal_state_ends_when_the_credential_changes_and_only_then() {
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    mock.on(d.path()).times(1).reply(d.error(
        403,
        "permission_error",
        "Your account has been disabled",
    ));
    let db_dir = tempfile::tempdir().unwrap();
    let db = db_dir.path().join("state.db");
    let cfg = format!(
        "[store]\npath = \"{}\"\n{}",
        db.display(),
        Cfg::new(d, 1).tail(NO_WAIT).build(&mock)
    );
    let s = Sluice::start(&cfg, ENV).await;
    expect_status(&d.send(&s, "gpt-x", &[]).await, 403, "ban passes through");
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "banned");
    s.stop().await;

    let secret = db_dir.path().join("credential-fingerprint.key");
    let stored = std::fs::read(&secret).expect("the per-install secret is beside the database");
    assert_eq!(stored.len(), 32);
    let db_bytes = std::fs::read(&db).unwrap();
    assert!(
        !db_bytes.windows(7).any(|w| w == b"key-one"),
        "the key itself is never stored"
    );

    // Same key: still banned.
    let s = Sluice::start(&cfg, ENV).await;
    assert_eq!(
        conn_state(&s, "p", "k1").await["status"],
        "banned",
        "same credential"
    );
    s.stop().await;

    // A new key in the same env var: the ban is cleared.
    let new_env = [
        ("K1", "key-one-rotated"),
        ("K2", "key-two"),
        ("K3", "key-three"),
    ];
    let s = Sluice::start(&cfg, &new_env).await;
    assert_eq!(
        conn_state(&s, "p", "k1").await["status"],
        "active",
        "credential changed"
    );
    expect_status(&d.send(&s, "gpt-x", &[]).await, 200, "serves again");
    s.stop().await;

    // And back to the old key: a changed credential again, nothing terminal to clear.
    let s = Sluice::start(&cfg, ENV).await;
    assert_eq!(conn_state(&s, "p", "k1").await["status"], "active");
    s.stop().await;
}

#[tokio::test]
async fn a_session_lease_survives_a_restart_and_only_its_hash_is_stored() {
    use super::leases::{LEASES, acquire, leased_n, send_leased};
    let mock = MockUpstream::start().await;
    let d = D::OpenAi;
    let db_dir = tempfile::tempdir().unwrap();
    let db = db_dir.path().join("state.db");
    let cfg = format!(
        "[store]\npath = \"{}\"\n{}",
        db.display(),
        Cfg::new(d, 2).tail(LEASES).build(&mock)
    );
    let clock = sluice::clock::ManualClock::new();

    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    let lease = acquire(&s, d.model()).await;
    let n = leased_n(&lease);
    let owner = lease["owner"].as_str().unwrap().to_string();
    s.stop().await;

    // The database holds the token's SHA-256, never the token.
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (hash, generation): (String, i64) = conn
        .query_row(
            "SELECT owner_sha256, generation FROM session_leases WHERE connection = ?1",
            [format!("k{n}")],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let want: String = ring::digest::digest(&ring::digest::SHA256, owner.as_bytes())
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!((hash, generation), (want, 1));
    drop(conn);

    clock.advance(Duration::from_secs(60));
    let s = Sluice::start_with_clock(&cfg, ENV, Arc::new(clock.clone())).await;
    let c = conn_state(&s, "p", &format!("k{n}")).await;
    about(ms(&c["lease"], "remainingMs"), 540_000, "restored lease");
    expect_status(
        &send_leased(&s, d, &owner, "1").await,
        200,
        "leased after restart",
    );
    expect_status(
        &d.send(&s, d.model(), &[]).await,
        200,
        "unleased after restart",
    );
    assert_eq!(hits(&mock, n), 1, "only the leased request went to k{n}");
    assert_eq!(hits(&mock, 3 - n), 1);
    s.stop().await;
}
