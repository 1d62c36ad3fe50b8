//! Tests for [`Gates`] on paused tokio time (§4, §5; cases A21, A22).
//!
//! `SystemClock` follows `tokio::time::pause`, so the gates' clock and their timers agree.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::*;
use crate::clock::SystemClock;
use crate::config::{LoadEnv, from_str};
use crate::policy::admission::{DEFAULT_PROTECTION_CAP, RAISE_AFTER_SUCCESSES, RAISE_INTERVAL};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// One provider `p` of `profile` with one connection `c` carrying `conn` keys, and
/// `[resilience.queue]` set to `queue`.
fn setup(profile: &str, conn: &str, queue: &str) -> (Gates, QueueSettings) {
    let text = format!(
        r#"
        [routing]
        default_provider = ["p"]
        [resilience.queue]
        {queue}
        [[providers]]
        id = "p"
        dialect = "openai"
        base_url = "https://api.example.com"
        profile = "{profile}"
          [[providers.connections]]
          id = "c"
          auth = {{ env = "K" }}
          {conn}
          [[providers.connections]]
          id = "free"
          auth = {{ env = "K" }}
        "#
    );
    let env = LoadEnv::fixed(&[("K", "secret-key-123")], "/tmp");
    let cfg = from_str(&text, Path::new("t.toml"), &env).unwrap();
    let gates = Gates::new(&cfg, Arc::new(SystemClock));
    (gates, cfg.resilience.queue.clone())
}

/// A21 shape: api_key (protected by auto-enable), `max_concurrent = cap`, depth 3, 5 s.
fn a21(cap: u32) -> (Gates, QueueSettings) {
    setup(
        "api_key",
        &format!("max_concurrent = {cap}"),
        "max_wait = \"5s\"\nmax_queue_depth = 3",
    )
}

/// Lets every spawned task run until it blocks (no time passes).
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

type Outcome = (usize, Result<Admitted, Refused>);

/// Spawns an `acquire` on connection 0 for `model`, reporting `(tag, outcome)` on `tx`.
fn spawn_acquire(
    g: &Gates,
    q: &QueueSettings,
    model: &str,
    tag: usize,
    tx: &mpsc::UnboundedSender<Outcome>,
) -> JoinHandle<()> {
    let (g, q, model, tx) = (g.clone(), q.clone(), model.to_owned(), tx.clone());
    tokio::spawn(async move {
        let r = g.acquire(ConnKey::new(0, 0), &model, &q).await;
        let _ = tx.send((tag, r));
    })
}

fn conn_view(g: &Gates) -> GateView {
    g.views()
        .into_iter()
        .find(|v| v.kind == GateKind::Connection && v.connection == "c")
        .unwrap()
}

fn model_view(g: &Gates, model: &str) -> GateView {
    g.views()
        .into_iter()
        .find(|v| v.model.as_deref() == Some(model))
        .unwrap()
}

fn drain(rx: &mut mpsc::UnboundedReceiver<Outcome>) -> Vec<Outcome> {
    let mut out = Vec::new();
    while let Ok(o) = rx.try_recv() {
        out.push(o);
    }
    out
}

#[test]
fn gates_and_permits_are_send_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Gates>();
    assert_send_sync::<Admitted>();
    assert_send_sync::<Refused>();
}

#[tokio::test(start_paused = true)]
async fn a21_run1_two_admitted_three_queued_sixth_refused_at_once() {
    let (g, q) = a21(2);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let a1 = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    let a2 = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    assert!(a1.holds_permit() && !a1.without_permit());
    assert_eq!(a1.queued_for(), Duration::ZERO);
    for tag in 3..=5 {
        spawn_acquire(&g, &q, "m", tag, &tx);
        settle().await;
    }
    assert!(drain(&mut rx).is_empty(), "3 waiters must be queued");

    // The 6th is refused at once (no time passes), reason queue_full, 429 + retry-after.
    let t = SystemClock.now();
    let refused = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap_err();
    assert_eq!(SystemClock.now(), t);
    assert_eq!(refused.code, AdmissionCode::QueueFull);
    assert_eq!(refused.code.status(), 429);
    assert_eq!(refused.code.reason(), "queue_full");
    assert!(refused.retry_after.is_some_and(|r| r >= secs(1)));
    assert!(refused.message.contains("'c'"), "{}", refused.message);

    let v = conn_view(&g);
    assert_eq!((v.in_flight, v.cap, v.queued), (2, Some(2), 3));
    assert_eq!((v.max_queue_depth, v.rejections), (3, 1));
    assert_eq!(v.enforcement, Enforcement::RateLimitQueue);

    // Releasing a permit admits the oldest waiter.
    tokio::time::advance(secs(1)).await;
    assert_eq!(conn_view(&g).oldest_wait_ms, 1000);
    drop(a1);
    settle().await;
    let got = drain(&mut rx);
    assert_eq!(got.len(), 1);
    let (tag, r) = got.into_iter().next().unwrap();
    assert_eq!(tag, 3, "FIFO: the oldest waiter gets the permit");
    let a3 = r.unwrap();
    assert_eq!(a3.queued_for(), secs(1));
    assert!(a3.holds_permit());

    // Past 5 s the other two get a fast queue_timeout; admitted ones keep running.
    tokio::time::sleep(secs(5)).await;
    settle().await;
    let mut got = drain(&mut rx);
    got.sort_by_key(|(tag, _)| *tag);
    assert_eq!(got.iter().map(|(t, _)| *t).collect::<Vec<_>>(), vec![4, 5]);
    for (_, r) in got {
        let e = r.unwrap_err();
        assert_eq!(e.code, AdmissionCode::QueueTimeout);
        assert_eq!(e.code.status(), 429);
        assert!(e.retry_after.is_some_and(|r| r >= secs(1)));
    }
    let v = conn_view(&g);
    assert_eq!(
        (v.in_flight, v.queued, v.timeouts, v.oldest_wait_ms),
        (2, 0, 2, 0)
    );
    assert_eq!(v.admitted, 3);
    assert!(a2.holds_permit() && a3.holds_permit());
    drop((a2, a3));
    assert_eq!(conn_view(&g).in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn a21_run2_cap4_admits_four_concurrently() {
    let (g, q) = a21(4);
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap());
    }
    let v = conn_view(&g);
    assert_eq!((v.in_flight, v.queued, v.admitted), (4, 0, 4));
    assert!(g.try_acquire(ConnKey::new(0, 0), "m", &q).is_none());
    held.pop();
    assert!(g.try_acquire(ConnKey::new(0, 0), "m", &q).is_some());
}

#[tokio::test(start_paused = true)]
async fn waiters_are_admitted_in_fifo_order() {
    let (g, q) = setup("api_key", "max_concurrent = 1", "max_wait = \"30s\"");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    for tag in 1..=4 {
        spawn_acquire(&g, &q, "m", tag, &tx);
        settle().await;
    }
    for want in 1..=4 {
        drop(held);
        settle().await;
        let got = drain(&mut rx);
        assert_eq!(got.len(), 1);
        let (tag, r) = got.into_iter().next().unwrap();
        assert_eq!(tag, want);
        held = r.unwrap();
    }
    assert_eq!(conn_view(&g).in_flight, 1);
}

#[tokio::test(start_paused = true)]
async fn model_cap_serializes_that_model_only() {
    let (g, q) = setup(
        "api_key",
        "max_concurrent = 4\n model_concurrency = { \"glm-5\" = 1 }",
        "",
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let a = g.acquire(ConnKey::new(0, 0), "glm-5", &q).await.unwrap();
    spawn_acquire(&g, &q, "glm-5", 1, &tx);
    settle().await;
    assert!(drain(&mut rx).is_empty(), "second glm-5 request waits");
    assert_eq!(model_view(&g, "glm-5").queued, 1);

    // Another model does not wait behind it.
    let other = g.acquire(ConnKey::new(0, 0), "kimi", &q).await.unwrap();
    assert!(other.holds_permit());
    let v = conn_view(&g);
    assert_eq!((v.in_flight, v.queued), (2, 1));
    let m = model_view(&g, "glm-5");
    assert_eq!((m.in_flight, m.cap, m.queued), (1, Some(1), 1));

    drop(a);
    settle().await;
    let (tag, r) = drain(&mut rx).into_iter().next().unwrap();
    assert_eq!(tag, 1);
    let b = r.unwrap();
    let m = model_view(&g, "glm-5");
    assert_eq!((m.in_flight, m.queued, m.admitted), (1, 0, 2));
    drop((b, other));
    assert_eq!(conn_view(&g).in_flight, 0);
    assert_eq!(model_view(&g, "glm-5").in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn dropping_a_queued_future_leaves_the_queue_at_once() {
    let (g, q) = a21(1);
    let held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    // A client that gives up after 1 s while queued.
    let r = tokio::time::timeout(secs(1), g.acquire(ConnKey::new(0, 0), "m", &q)).await;
    assert!(r.is_err());
    let v = conn_view(&g);
    assert_eq!((v.queued, v.in_flight, v.timeouts), (0, 1, 0));
    drop(held);
    assert_eq!(conn_view(&g).in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn cancelled_waiter_is_skipped_and_the_next_gets_the_permit() {
    let (g, q) = a21(1);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    let first = spawn_acquire(&g, &q, "m", 1, &tx);
    settle().await;
    spawn_acquire(&g, &q, "m", 2, &tx);
    settle().await;
    assert_eq!(conn_view(&g).queued, 2);
    first.abort();
    settle().await;
    assert_eq!(conn_view(&g).queued, 1);
    drop(held);
    settle().await;
    let got = drain(&mut rx);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, 2);
    assert!(got[0].1.as_ref().is_ok_and(Admitted::holds_permit));
    assert_eq!(conn_view(&g).in_flight, 1);
}

#[tokio::test(start_paused = true)]
async fn grant_raced_by_cancel_returns_the_permit() {
    let (g, q) = a21(1);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    let waiter = spawn_acquire(&g, &q, "m", 1, &tx);
    settle().await;
    // The release books the permit for the waiter; the waiter is cancelled before it runs.
    drop(held);
    assert_eq!(conn_view(&g).in_flight, 1);
    waiter.abort();
    settle().await;
    assert!(drain(&mut rx).is_empty());
    let v = conn_view(&g);
    assert_eq!((v.in_flight, v.queued), (0, 0));
    assert!(g.try_acquire(ConnKey::new(0, 0), "m", &q).is_some());
}

#[tokio::test(start_paused = true)]
async fn fail_open_unprotected_timeout_proceeds_without_permit() {
    // oauth: auto-enable only covers api_key; concurrency_fail_open defaults to true.
    let (g, q) = setup("oauth", "max_concurrent = 1", "max_wait = \"5s\"");
    let held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    let late = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    assert!(late.without_permit() && !late.holds_permit());
    assert_eq!(late.queued_for(), secs(5));
    let v = conn_view(&g);
    assert_eq!(v.enforcement, Enforcement::FailOpen);
    assert_eq!(
        (v.in_flight, v.queued, v.fail_open_admits, v.timeouts),
        (1, 0, 1, 0)
    );
    drop(late);
    assert_eq!(
        conn_view(&g).in_flight,
        1,
        "a permit-less admit releases nothing"
    );
    drop(held);
    assert_eq!(conn_view(&g).in_flight, 0);
}

#[tokio::test(start_paused = true)]
async fn fail_open_queue_full_proceeds_without_permit_at_once() {
    let (g, q) = setup(
        "oauth",
        "max_concurrent = 1",
        "max_wait = \"5s\"\nmax_queue_depth = 1",
    );
    let (tx, _rx) = mpsc::unbounded_channel();
    let _held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    spawn_acquire(&g, &q, "m", 1, &tx);
    settle().await;
    let t = SystemClock.now();
    let a = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    assert_eq!(SystemClock.now(), t);
    assert!(a.without_permit());
    assert_eq!(conn_view(&g).fail_open_admits, 1);
}

#[tokio::test(start_paused = true)]
async fn strict_cap_times_out_with_semaphore_codes() {
    let (g, q) = setup(
        "oauth",
        "max_concurrent = 1\n concurrency_fail_open = false",
        "max_wait = \"5s\"\nmax_queue_depth = 1",
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    spawn_acquire(&g, &q, "m", 1, &tx);
    settle().await;
    let full = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap_err();
    assert_eq!(full.code, AdmissionCode::SemaphoreQueueFull);
    assert_eq!(full.code.status(), 503);
    tokio::time::sleep(secs(5)).await;
    settle().await;
    let (_, r) = drain(&mut rx).into_iter().next().unwrap();
    let e = r.unwrap_err();
    assert_eq!(e.code, AdmissionCode::SemaphoreTimeout);
    assert!(e.retry_after.is_some());
    let v = conn_view(&g);
    assert_eq!(v.enforcement, Enforcement::Strict);
    assert_eq!((v.timeouts, v.rejections, v.queued), (1, 1, 0));
}

#[tokio::test(start_paused = true)]
async fn explicit_protection_beats_fail_open() {
    let (g, q) = setup(
        "oauth",
        "max_concurrent = 1\n rate_limit_protection = true",
        "max_wait = \"2s\"",
    );
    let _held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    let e = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap_err();
    assert_eq!(e.code, AdmissionCode::QueueTimeout);
    assert!(e.message.contains("2s"), "{}", e.message);
}

#[tokio::test(start_paused = true)]
async fn uncapped_routes_admit_without_bookkeeping() {
    // Not protected: an uncapped connection has no gate (see the protection-cap tests).
    let (g, q) = setup(
        "api_key",
        "model_concurrency = { \"glm-5\" = 1 }",
        "auto_enable_api_key_connections = false",
    );
    // Connection 0 has only a model gate: other models are uncapped.
    let a = g.acquire(ConnKey::new(0, 0), "kimi", &q).await.unwrap();
    let b = g.acquire(ConnKey::new(0, 0), "kimi", &q).await.unwrap();
    assert!(!a.holds_permit() && !a.without_permit() && !b.holds_permit());
    // Connection 1 has no caps at all; unknown indices admit too.
    assert!(g.acquire(ConnKey::new(0, 1), "m", &q).await.is_ok());
    assert!(g.acquire(ConnKey::new(7, 0), "m", &q).await.is_ok());
    assert!(g.try_acquire(ConnKey::new(0, 1), "m", &q).is_some());
    let views = g.views();
    assert_eq!(views.len(), 1, "only the glm-5 gate exists: {views:?}");
    assert_eq!(views[0].admitted, 0);
}

#[tokio::test(start_paused = true)]
async fn try_acquire_books_nothing_when_it_fails() {
    let (g, q) = a21(1);
    let a = g.try_acquire(ConnKey::new(0, 0), "m", &q).unwrap();
    assert!(a.holds_permit());
    assert!(g.try_acquire(ConnKey::new(0, 0), "m", &q).is_none());
    let v = conn_view(&g);
    assert_eq!(
        (v.in_flight, v.queued, v.admitted, v.rejections),
        (1, 0, 1, 0)
    );
    drop(a);
    assert_eq!(conn_view(&g).in_flight, 0);
}

/// A candidate for `model` on connection `connection` of provider 0 (key = position).
fn cand(connection: usize, model: &str) -> crate::policy::select::Candidate {
    crate::policy::select::Candidate {
        provider: 0,
        connection,
        model: model.to_owned(),
        rewrite: false,
        target: 0,
        key: ConnKey::new(0, connection as u32),
    }
}

#[tokio::test(start_paused = true)]
async fn queue_full_for_is_true_only_when_an_arrival_would_be_refused_and_books_nothing() {
    let (g, q) = a21(1);
    let c = cand(0, "m");
    assert!(!g.queue_full_for(&c, &q), "a free permit");
    let _held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    let (tx, _rx) = mpsc::unbounded_channel();
    for tag in 1..=2 {
        spawn_acquire(&g, &q, "m", tag, &tx);
        settle().await;
        assert!(!g.queue_full_for(&c, &q), "{tag} waiting of 3: room left");
    }
    spawn_acquire(&g, &q, "m", 3, &tx);
    settle().await;
    assert!(g.queue_full_for(&c, &q), "3 waiting of 3: full");
    assert!(g.queue_full_for(&c, &q), "asking again changes nothing");
    let v = conn_view(&g);
    assert_eq!(
        (v.in_flight, v.queued, v.admitted, v.rejections),
        (1, 3, 1, 0),
        "the question books nothing"
    );
    assert!(
        !g.queue_full_for(&cand(1, "m"), &q),
        "an uncapped connection is never full"
    );
    // An arrival now is refused, as it said; that refusal is counted.
    let e = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap_err();
    assert_eq!(e.code, AdmissionCode::QueueFull);
    assert_eq!(conn_view(&g).rejections, 1);
}

#[tokio::test(start_paused = true)]
async fn queue_full_for_follows_the_connection_enforcement() {
    for (conn, refuses) in [
        ("max_concurrent = 1", false),
        ("max_concurrent = 1\n concurrency_fail_open = false", true),
    ] {
        let (g, q) = setup("oauth", conn, "max_wait = \"5s\"\nmax_queue_depth = 1");
        let (tx, _rx) = mpsc::unbounded_channel();
        let _held = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
        spawn_acquire(&g, &q, "m", 1, &tx);
        settle().await;
        // Fail-open proceeds without a permit (not refused); strict refuses.
        assert_eq!(g.queue_full_for(&cand(0, "m"), &q), refuses, "{conn}");
    }
}

#[tokio::test(start_paused = true)]
async fn views_serialize_in_snake_case() {
    let (g, q) = a21(2);
    let _a = g.acquire(ConnKey::new(0, 0), "m", &q).await.unwrap();
    let v = serde_json::to_value(conn_view(&g)).unwrap();
    assert_eq!(v["kind"], "connection");
    assert_eq!(v["provider"], "p");
    assert_eq!(v["connection"], "c");
    assert_eq!(v["in_flight"], 1);
    assert_eq!(v["cap"], 2);
    assert_eq!(v["max_queue_depth"], 3);
    assert_eq!(v["enforcement"], "rate_limit_queue");
    assert_eq!(v["oldest_wait_ms"], 0);
    assert!(v["model"].is_null());
}

#[test]
fn execution_budget_is_raised_to_the_provider_timeout() {
    let (g, q) = setup(
        "api_key",
        "max_concurrent = 1",
        "execution_max_wait = \"2m\"",
    );
    assert_eq!(g.execution_budget(secs(60), &q), secs(120));
    assert_eq!(g.execution_budget(secs(600), &q), secs(600));
}

#[tokio::test(start_paused = true)]
async fn waiter_leaving_by_timeout_unblocks_the_one_behind_it() {
    // conn cap 2, glm-5 cap 1. W1 (glm-5) waits on the model gate and holds a reservation on
    // the connection gate; W2 (kimi) waits behind that reservation. When W1 times out, W2
    // must be admitted at once, not at its own timeout.
    let (g, q) = setup(
        "api_key",
        "max_concurrent = 2\n model_concurrency = { \"glm-5\" = 1 }",
        "max_wait = \"5s\"",
    );
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _glm = g.acquire(ConnKey::new(0, 0), "glm-5", &q).await.unwrap();
    spawn_acquire(&g, &q, "glm-5", 1, &tx);
    settle().await;
    tokio::time::advance(secs(1)).await;
    spawn_acquire(&g, &q, "kimi", 2, &tx);
    settle().await;
    assert_eq!(conn_view(&g).queued, 2);
    assert!(
        drain(&mut rx).is_empty(),
        "kimi must not overtake the earlier waiter"
    );
    tokio::time::sleep(secs(4)).await;
    settle().await;
    let mut got = drain(&mut rx);
    got.sort_by_key(|(t, _)| *t);
    assert_eq!(got.len(), 2);
    assert_eq!(
        got[0].1.as_ref().unwrap_err().code,
        AdmissionCode::QueueTimeout
    );
    let kimi = got[1].1.as_ref().unwrap();
    assert!(kimi.holds_permit());
    assert_eq!(kimi.queued_for(), secs(4));
    let v = conn_view(&g);
    assert_eq!((v.in_flight, v.queued, v.timeouts), (2, 0, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contention_never_exceeds_the_cap_and_leaks_nothing() {
    use std::sync::atomic::{AtomicU32, Ordering};
    let (g, q) = setup("api_key", "max_concurrent = 3", "max_wait = \"60s\"");
    let running = Arc::new(AtomicU32::new(0));
    let peak = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for i in 0..200 {
        let (g, q, running, peak) = (g.clone(), q.clone(), running.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let model = if i % 2 == 0 { "a" } else { "b" };
            let permit = g.acquire(ConnKey::new(0, 0), model, &q).await.unwrap();
            assert!(permit.holds_permit());
            // Counted while the permit is held, even if the task is aborted mid-way.
            struct Running(Arc<AtomicU32>);
            impl Drop for Running {
                fn drop(&mut self) {
                    self.0.fetch_sub(1, Ordering::SeqCst);
                }
            }
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            let _running = Running(running);
            peak.fetch_max(now, Ordering::SeqCst);
            for _ in 0..5 {
                tokio::task::yield_now().await;
            }
        }));
    }
    // Cancel every fifth request wherever it is (queued, granted or running).
    for t in tasks.iter().step_by(5) {
        t.abort();
    }
    for t in tasks {
        if let Err(e) = t.await {
            assert!(e.is_cancelled(), "{e}");
        }
    }
    assert!(peak.load(Ordering::SeqCst) <= 3);
    let v = conn_view(&g);
    assert_eq!((v.in_flight, v.queued, v.oldest_wait_ms), (0, 0, 0));
    assert!(g.try_acquire(ConnKey::new(0, 0), "a", &q).is_some());
}

/// Two providers with two uncapped connections each; `provider_p` on `p` and `global` in
/// `[resilience.concurrency]`.
fn caps(provider_p: &str, global: &str) -> (Gates, QueueSettings) {
    let text = format!(
        r#"
        [routing]
        default_provider = ["p"]
        [resilience.concurrency]
        {global}
        [[providers]]
        id = "p"
        dialect = "openai"
        base_url = "https://api.example.com"
        profile = "api_key"
        {provider_p}
          [[providers.connections]]
          id = "a"
          auth = {{ env = "K" }}
          [[providers.connections]]
          id = "b"
          auth = {{ env = "K" }}
        [[providers]]
        id = "q"
        dialect = "openai"
        base_url = "https://api.example.org"
        profile = "api_key"
          [[providers.connections]]
          id = "c"
          auth = {{ env = "K" }}
        "#
    );
    let env = LoadEnv::fixed(&[("K", "secret-key-123")], "/tmp");
    let cfg = from_str(&text, Path::new("t.toml"), &env).unwrap();
    let gates = Gates::new(&cfg, Arc::new(SystemClock));
    (gates, cfg.resilience.queue.clone())
}

#[tokio::test(start_paused = true)]
async fn a_provider_cap_spans_its_connections_and_a_release_wakes_another_connection() {
    let (g, q) = caps("max_concurrent = 1", "");
    let first = g
        .try_acquire(ConnKey::new(0, 0), "m", &q)
        .expect("the provider's one permit");
    assert!(first.holds_permit());
    assert!(
        g.try_acquire(ConnKey::new(0, 1), "m", &q).is_none(),
        "connection b is uncapped, but provider p's cap of 1 is taken"
    );
    assert!(
        g.try_acquire(ConnKey::new(1, 0), "m", &q).is_some(),
        "provider q is not limited by p's cap"
    );
    // A queued request on b is granted when a's permit comes back.
    let (g2, q2) = (g.clone(), q.clone());
    let waiter = tokio::spawn(async move { g2.acquire(ConnKey::new(0, 1), "m", &q2).await });
    settle().await;
    assert!(!waiter.is_finished(), "b waits for the provider permit");
    drop(first);
    let got = tokio::time::timeout(secs(1), waiter)
        .await
        .unwrap()
        .unwrap();
    let got = got.expect("granted");
    assert!(got.holds_permit() && got.queued_for() < secs(1));
}

#[tokio::test(start_paused = true)]
async fn the_global_cap_spans_every_provider() {
    let (g, q) = caps("", "global_max = 2");
    let a = g.try_acquire(ConnKey::new(0, 0), "m", &q).expect("1 of 2");
    let _c = g.try_acquire(ConnKey::new(1, 0), "m", &q).expect("2 of 2");
    assert!(
        g.try_acquire(ConnKey::new(0, 1), "m", &q).is_none(),
        "the global cap is full"
    );
    drop(a);
    assert!(
        g.try_acquire(ConnKey::new(0, 1), "m", &q).is_some(),
        "a release frees a global permit"
    );
}

#[tokio::test(start_paused = true)]
async fn a_protected_uncapped_connection_is_held_at_its_default_cap() {
    let (g, q) = setup(
        "api_key",
        "",
        "protection_default_cap = 2\nmax_wait = \"5s\"",
    );
    let a = g.try_acquire(ConnKey::new(0, 0), "m", &q).unwrap();
    let b = g.try_acquire(ConnKey::new(0, 0), "m", &q).unwrap();
    assert!(a.holds_permit() && b.holds_permit());
    assert!(
        g.try_acquire(ConnKey::new(0, 0), "m", &q).is_none(),
        "the third waits"
    );
    let v = conn_view(&g);
    assert_eq!(
        (v.cap, v.effective_cap, v.cap_source, v.in_flight),
        (None, Some(2), CapSource::Default, 2)
    );
    assert_eq!(v.enforcement, Enforcement::RateLimitQueue);
    // An oauth provider's uncapped connections are not protected by auto-enable: no gate.
    let (o, oq) = setup("oauth", "", "");
    assert!(o.views().is_empty(), "{:?}", o.views());
    assert!(
        !o.try_acquire(ConnKey::new(0, 0), "m", &oq)
            .unwrap()
            .holds_permit()
    );
}

#[tokio::test(start_paused = true)]
async fn a_concurrency_limit_lowers_the_cap_and_holds_new_arrivals_back() {
    let (g, q) = setup("api_key", "", "max_wait = \"5s\"");
    assert_eq!(conn_view(&g).effective_cap, Some(DEFAULT_PROTECTION_CAP));
    let held: Vec<_> = (0..4)
        .map(|_| g.try_acquire(ConnKey::new(0, 0), "m", &q).unwrap())
        .collect();
    // The 4th permit's 429 is reported while all four are held: cap 3.
    g.observe_outcome(ConnKey::new(0, 0), OutcomeClass::ConcurrencyLimited, false);
    let v = conn_view(&g);
    assert_eq!(
        (v.cap, v.effective_cap, v.cap_source),
        (None, Some(3), CapSource::Learned)
    );
    // Nothing in flight is cut; nobody new gets in until the count is under 3.
    let (tx, mut rx) = mpsc::unbounded_channel();
    let waiter = spawn_acquire(&g, &q, "m", 1, &tx);
    settle().await;
    assert!(rx.try_recv().is_err(), "queued at the learned cap");
    assert_eq!(conn_view(&g).queued, 1);
    let mut held = held.into_iter();
    drop(held.next());
    settle().await;
    assert!(rx.try_recv().is_err(), "3 in flight = the cap");
    drop(held.next());
    settle().await;
    let (_, got) = rx.try_recv().expect("granted under the cap");
    assert!(got.unwrap().holds_permit());
    waiter.await.unwrap();
    // Other outcomes, and outcomes of another connection, change nothing.
    g.observe_outcome(ConnKey::new(0, 0), OutcomeClass::RateLimited, false);
    g.observe_outcome(ConnKey::new(1, 0), OutcomeClass::ConcurrencyLimited, false);
    assert_eq!(conn_view(&g).effective_cap, Some(3));
}

#[tokio::test(start_paused = true)]
async fn successes_raise_a_learned_cap_and_grant_a_waiter() {
    let (g, q) = setup(
        "api_key",
        "",
        "protection_default_cap = 3\nmax_wait = \"1h\"",
    );
    let first = g.try_acquire(ConnKey::new(0, 0), "m", &q).unwrap();
    let second = g.try_acquire(ConnKey::new(0, 0), "m", &q).unwrap();
    g.observe_outcome(ConnKey::new(0, 0), OutcomeClass::ConcurrencyLimited, false); // cap 1
    assert_eq!(conn_view(&g).effective_cap, Some(1));
    drop(second);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let waiter = spawn_acquire(&g, &q, "m", 1, &tx);
    settle().await;
    assert!(rx.try_recv().is_err(), "1 in flight = the learned cap");
    tokio::time::advance(RAISE_INTERVAL).await;
    for _ in 0..RAISE_AFTER_SUCCESSES {
        g.observe_outcome(ConnKey::new(0, 0), OutcomeClass::Success, false);
    }
    settle().await;
    let (_, got) = rx.try_recv().expect("the raised cap granted the waiter");
    let got = got.unwrap();
    assert!(got.holds_permit());
    waiter.await.unwrap();
    let v = conn_view(&g);
    assert_eq!(
        (v.effective_cap, v.cap_source, v.in_flight),
        (Some(2), CapSource::Learned, 2)
    );
    drop((first, got));
}

#[tokio::test(start_paused = true)]
async fn an_explicit_cap_is_never_learned_over() {
    let (g, q) = setup("api_key", "max_concurrent = 4", "");
    let _held: Vec<_> = (0..4)
        .map(|_| g.try_acquire(ConnKey::new(0, 0), "m", &q).unwrap())
        .collect();
    g.observe_outcome(ConnKey::new(0, 0), OutcomeClass::ConcurrencyLimited, false);
    let v = conn_view(&g);
    assert_eq!(
        (v.cap, v.effective_cap, v.cap_source),
        (Some(4), Some(4), CapSource::Config)
    );
}
