//! Crash: kill -9 during chaos traffic, several times. After each kill the database passes
//! `PRAGMA integrity_check`, sluice restarts on it, and state older than one write-behind
//! batch (≤ 1 s) is there: a cooldown, an open breaker, a model lockout, a session pin, a
//! saved setting and the request log. Also: a truncated, garbage, newer-schema or read-only
//! database gives a clear startup message naming the file and `--reset-state`, never a panic.

use std::time::Duration;

use rusqlite::Connection;
use serde_json::{Value, json};

use crate::chaos::{self, snapshot};
use crate::chaos_upstream::{ChaosUpstream, Mix};
use crate::outcome::Route;
use crate::proc::{Home, Proc};
use crate::support::{MockUpstream, Reply, client};

/// The chaos config plus four anthropic providers on the scripted mock, each leaving one kind
/// of state behind, and lockout mode for 404s.
fn config(chaos_url: &str, mock: &MockUpstream) -> String {
    let mut s = chaos::config(chaos_url)
        .replace("session_affinity_ttl = \"0s\"", "session_affinity_ttl = \"1h\"")
        .replace("[resilience.queue]", "[resilience.model_lockout]\nenabled = true\nerror_codes = [404]\nbase_cooldown = \"10m\"\nmax_cooldown = \"30m\"\n[resilience.queue]")
        .replace("reset_timeout = \"1s\"", "reset_timeout = \"10m\"");
    for p in ["cooler", "breaker", "locker", "pinner"] {
        // The breaker's connection never cools, so every failure reaches the breaker.
        let no_cooling = if p == "breaker" {
            "disable_cooling = true\n"
        } else {
            ""
        };
        s.push_str(&format!(
            "[[providers]]\nid = \"{p}\"\ndialect = \"anthropic\"\nbase_url = \"{}\"\n[[providers.connections]]\nid = \"{p}1\"\nauth = {{ env = \"KEY_{}\" }}\n{no_cooling}[[combos]]\nname = \"to-{p}\"\ntargets = [\"{p}/m\"]\n",
            mock.base_url(),
            p.to_uppercase()
        ));
    }
    s
}

const ENV: &[(&str, &str)] = &[
    ("KEY_COOLER", "key-cooler"),
    ("KEY_BREAKER", "key-breaker"),
    ("KEY_LOCKER", "key-locker"),
    ("KEY_PINNER", "key-pinner"),
];

fn script(mock: &MockUpstream) {
    mock.on("/v1/messages")
        .header("x-api-key", "key-cooler")
        .reply(
            Reply::anthropic_error(429, "rate_limit_error", "slow down")
                .header("retry-after", "600"),
        );
    mock.on("/v1/messages")
        .header("x-api-key", "key-breaker")
        .reply(Reply::anthropic_error(500, "api_error", "boom"));
    mock.on("/v1/messages")
        .header("x-api-key", "key-locker")
        .reply(Reply::anthropic_error(404, "not_found_error", "model: m"));
}

/// Makes each kind of state once, through the API a client or operator would use.
async fn make_state(p: &Proc) -> u64 {
    let mut sent = 0;
    for (model, n, session) in [
        ("to-cooler", 1, None),
        ("to-breaker", 8, None),
        ("to-locker", 1, None),
        ("to-pinner", 1, Some("sess-crash-1")),
    ] {
        for i in 0..n {
            let mut h = Route::Messages.headers();
            if let Some(s) = session {
                h.push(("x-session-id", s));
            }
            let r = client::post_json(
                &p.url("/v1/messages"),
                &Route::Messages.body(model, false),
                &h,
            )
            .await;
            sent += 1;
            if model == "to-breaker" && i == n - 1 {
                let s = snapshot(p).await;
                let b = &connection(&s, "breaker")["breaker"];
                assert_eq!(
                    b["state"],
                    "open",
                    "8 failures did not open the breaker: {b}; last answer {} {}",
                    r.status,
                    r.text()
                );
            }
        }
    }
    let r = client::send(client::request(
        http::Method::PATCH,
        &p.admin_url("/api/resilience"),
        &[("content-type", "application/json")],
        client::full(json!({"stream_stall_cooldown": true}).to_string()),
    ))
    .await;
    assert_eq!(r.status, 200, "PATCH /api/resilience: {}", r.text());
    sent
}

fn connection<'a>(s: &'a Value, provider: &str) -> &'a Value {
    s["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == provider)
        .unwrap_or_else(|| panic!("no provider {provider}"))
}

/// The state made by [`make_state`] is live in a (restarted) sluice.
async fn assert_state_live(p: &Proc) {
    let s = snapshot(p).await;
    let cooler = &connection(&s, "cooler")["connections"][0];
    assert_eq!(cooler["status"], "cooling", "cooldown lost: {cooler}");
    let breaker = &connection(&s, "breaker")["breaker"];
    assert_eq!(breaker["state"], "open", "open breaker lost: {breaker}");
    let lockouts = s["lockouts"].as_array().unwrap();
    assert!(
        lockouts.iter().any(|l| l["provider"] == "locker"),
        "lockout lost: {lockouts:?}"
    );
    let r = client::get(&p.admin_url("/api/resilience"), &[])
        .await
        .json();
    assert_eq!(
        r["overrides"]["stream_stall_cooldown"], true,
        "saved setting lost: {r}"
    );
}

/// `PRAGMA integrity_check` and the committed rows of each kind.
fn check_database(home: &Home, requests_before: u64) -> (u64, String) {
    let conn = Connection::open(home.db()).unwrap();
    let ok: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok", "integrity_check after kill -9");
    let count =
        |sql: &str| -> u64 { conn.query_row(sql, [], |r| r.get::<_, i64>(0)).unwrap() as u64 };
    let rows = count("SELECT COUNT(*) FROM request_log");
    assert!(
        rows >= requests_before,
        "request_log has {rows} rows, {requests_before} requests finished more than 1 s before the kill"
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM connections WHERE provider = 'cooler' AND status = 'cooling'"),
        1,
        "cooldown row"
    );
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM circuit_breakers WHERE provider = 'breaker' AND state = 'open'"
        ),
        1,
        "breaker row"
    );
    assert!(
        count("SELECT COUNT(*) FROM model_lockouts WHERE provider = 'locker'") >= 1,
        "lockout row"
    );
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM session_affinity WHERE session_key LIKE '%sess-crash-1%' AND provider = 'pinner'"
        ),
        1,
        "pin row"
    );
    assert!(count("SELECT COUNT(*) FROM settings") >= 1, "settings row");
    (rows, ok)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_traffic_keeps_the_database_and_the_state() {
    let cycles = crate::pick(3, 5);
    let up = ChaosUpstream::start(0xC0FF_EE11, Mix::standard()).await;
    let mock = MockUpstream::start().await;
    script(&mock);
    let home = Home::new(&config(&up.base_url(), &mock));
    let mut p = Proc::start(&home, ENV);
    let mut finished = make_state(&p).await;
    let mut rows = 0;
    for cycle in 0..cycles {
        // A burst of requests; it and everything before it is older than one write-behind
        // batch once the sleep ends.
        finished += burst(&p, 48).await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let before = finished;
        let stop = tokio_util::sync::CancellationToken::new();
        let traffic = tokio::spawn(chaos::traffic(p.url(""), 16, u64::MAX, stop.clone()));
        tokio::time::sleep(Duration::from_millis(400 + 150 * cycle)).await;
        p.assert_healthy();
        let err = p.kill9();
        assert!(!err.contains("panicked"), "{err}");
        stop.cancel();
        let t = traffic.await.unwrap();
        (rows, _) = check_database(&home, before);
        let t0 = crate::now();
        p = Proc::start(&home, ENV);
        let restart = t0.elapsed();
        assert_state_live(&p).await;
        let r = client::post_json(
            &p.url("/v1/messages"),
            &Route::Messages.body("to-pinner", false),
            &Route::Messages.headers(),
        )
        .await;
        assert_eq!(
            r.status,
            200,
            "a normal request after restart {cycle}: {}",
            r.text()
        );
        // Rows of the killed run's last batch may be lost; what was committed is the floor.
        finished = rows + 1;
        println!(
            "crash cycle {}: kill -9 after {} requests in flight-or-done, integrity ok, {rows} request_log rows, restart {restart:.1?}, state intact",
            cycle + 1,
            t.requests
        );
    }
    p.assert_healthy();
    p.stop();
    println!(
        "crash: {cycles} kill -9 cycles, 0 integrity failures, 0 lost state, {rows} request_log rows at the end"
    );
}

/// `n` successful requests, 8 at a time; returns `n`.
async fn burst(p: &Proc, n: u64) -> u64 {
    let url = p.url("/v1/messages");
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..n / 8 {
                let r = client::post_json(
                    &url,
                    &Route::Messages.body("to-pinner", false),
                    &Route::Messages.headers(),
                )
                .await;
                assert_eq!(r.status, 200, "{}", r.text());
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    n / 8 * 8
}

/// Builds a real database by running sluice once.
async fn real_database(home: &Home) {
    let p = Proc::start(home, &[]);
    client::post_json(
        &p.url("/v1/messages"),
        &Route::Messages.body("m", false),
        &Route::Messages.headers(),
    )
    .await;
    p.stop();
    assert!(home.db().exists());
}

fn bad_start(home: &Home, uid: Option<u32>, what: &str) {
    let (status, err) = home.run_once_as(&[], &[], uid);
    let db = home.db().display().to_string();
    assert!(!status.success(), "{what}: sluice started on it");
    assert!(!err.contains("panicked"), "{what}: panic\n{err}");
    assert!(
        err.contains(&db),
        "{what}: message does not name {db}:\n{err}"
    );
    assert!(
        err.contains("--reset-state"),
        "{what}: message does not offer --reset-state:\n{err}"
    );
    println!(
        "bad database ({what}): {}",
        err.lines().last().unwrap_or("")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_database_file_is_a_clear_startup_message() {
    let mock = MockUpstream::start().await;
    let cfg = crate::hostile::config(&mock);

    let home = Home::new(&cfg);
    real_database(&home).await;
    let len = std::fs::metadata(home.db()).unwrap().len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(home.db())
        .unwrap();
    f.set_len(len / 2).unwrap();
    drop(f);
    bad_start(&home, None, "truncated");

    let home = Home::new(&cfg);
    real_database(&home).await;
    let mut bytes = std::fs::read(home.db()).unwrap();
    for (i, b) in bytes.iter_mut().enumerate().skip(100) {
        *b = (i as u8).wrapping_mul(31);
    }
    std::fs::write(home.db(), &bytes).unwrap();
    bad_start(&home, None, "garbage after the header");

    let home = Home::new(&cfg);
    std::fs::write(
        home.db(),
        b"this is not a database at all, just some text\n".repeat(100),
    )
    .unwrap();
    bad_start(&home, None, "garbage");

    let home = Home::new(&cfg);
    real_database(&home).await;
    let conn = Connection::open(home.db()).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    bad_start(&home, None, "newer schema");

    let home = Home::new(&cfg);
    real_database(&home).await;
    home.make_read_only();
    bad_start(&home, home.unprivileged_uid(), "read-only");
}
