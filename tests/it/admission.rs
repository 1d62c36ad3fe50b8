//! Admission through real HTTP (resilience-spec §4 concurrency caps, §5 admission queue;
//! case A21): connection and model caps measured at the mock upstream, the FIFO queue seen
//! through `GET /api/queues`, queue-full and queue-timeout rejections in the route's dialect,
//! and saturation that never counts as a failure. Real time, millisecond durations; the
//! assertions are about counters and order (which exchange started before which ended), and
//! time only as lower bounds (a timer never fires early), never as a window a loaded
//! machine could miss.

use std::time::Duration;

use serde_json::{Value, json};
use sluice::clock::{Clock, SystemClock};

use crate::support::client::{self, Resp};
use crate::support::wire::{anthropic_message, chat_completion};
use crate::support::{MockUpstream, Reply, Sluice};

const AV: (&str, &str) = ("anthropic-version", "2023-06-01");
const ENV: &[(&str, &str)] = &[("K1", "key-one")];
/// How long the mock takes to answer a generation in these tests.
const SLOW: Duration = Duration::from_millis(300);

/// One `api_key` provider `p` of `dialect` with connection `k1` (so it is behind the §5 queue
/// by `auto_enable_api_key_connections`), `conn` extra keys on the connection and `tail`
/// after it.
fn config(mock: &MockUpstream, dialect: &str, conn: &str, tail: &str) -> String {
    format!(
        r#"
[routing]
default_provider = "p"

[[providers]]
id = "p"
dialect = "{dialect}"
base_url = "{}"
profile = "api_key"

  [[providers.connections]]
  id = "k1"
  auth = {{ env = "K1" }}
  {conn}

{tail}
"#,
        mock.base_url()
    )
}

fn anthropic_body(model: &str) -> Value {
    json!({"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
}

fn chat_body(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

/// A slow Messages reply for every request.
fn slow_anthropic(mock: &MockUpstream, delay: Duration) {
    mock.on("/v1/messages")
        .reply(Reply::json(200, anthropic_message("m", "done")).delay(delay));
}

/// Sends a Messages request in the background.
fn spawn_messages(s: &Sluice, model: &str) -> tokio::task::JoinHandle<(Resp, Duration)> {
    let url = s.url("/v1/messages");
    let body = anthropic_body(model);
    tokio::spawn(async move {
        let t = SystemClock.now();
        let r = client::post_json(&url, &body, &[AV]).await;
        (r, t.elapsed())
    })
}

/// `GET /api/queues` → the gate of `kind` (`connection` / `model`) for `model`.
async fn gate(s: &Sluice, kind: &str, model: Option<&str>) -> Value {
    let r = client::get(&s.admin("/api/queues"), &[]).await;
    assert_eq!(r.status, 200, "/api/queues: {}", r.text());
    let v = r.json();
    v["queues"]
        .as_array()
        .unwrap_or_else(|| panic!("no queues array: {v}"))
        .iter()
        .find(|g| g["kind"] == kind && g["model"].as_str() == model)
        .unwrap_or_else(|| panic!("no {kind} gate for {model:?} in {v:#}"))
        .clone()
}

/// Polls `/api/queues` (up to `within`) until the gate shows `in_flight` and `queued`.
async fn wait_gate(
    s: &Sluice,
    kind: &str,
    model: Option<&str>,
    in_flight: u64,
    queued: u64,
    within: Duration,
) -> Value {
    let deadline = SystemClock.now() + within;
    loop {
        let g = gate(s, kind, model).await;
        if g["in_flight"] == in_flight && g["queued"] == queued {
            return g;
        }
        assert!(
            SystemClock.now() < deadline,
            "gate never showed in_flight {in_flight} / queued {queued} within {within:?}: {g:#}"
        );
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
}

fn retry_after(r: &Resp) -> u64 {
    let v = r
        .header("retry-after")
        .unwrap_or_else(|| panic!("no retry-after on {} {}", r.status, r.text()));
    v.parse()
        .unwrap_or_else(|_| panic!("retry-after '{v}' is not whole seconds"))
}

/// Asserts a §5 rejection: 429, `retry-after`, the route's error shape, `sluice.code`.
fn assert_admission_429(r: &Resp, anthropic: bool, code: &str, reason: &str) {
    assert_eq!(r.status, 429, "{}", r.text());
    assert!(retry_after(r) >= 1);
    let v = r.json();
    if anthropic {
        assert_eq!(v["type"], "error", "anthropic error shape: {v}");
        assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
    } else {
        assert!(v.get("type").is_none(), "openai error shape: {v}");
        assert_eq!(v["error"]["type"], "rate_limit_error", "{v}");
        assert_eq!(v["error"]["code"], code, "{v}");
    }
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{v}"
    );
    assert_eq!(v["sluice"]["code"], code, "{v}");
    assert_eq!(v["sluice"]["diagnostics"]["reason"], reason, "{v}");
}

/// The connection, its breaker and its lockouts as the console shows them: untouched.
fn assert_no_penalty(s: &Sluice) {
    let snap = s.snapshot();
    let p = &snap.providers[0];
    assert_eq!(
        (p.breaker.state.as_str(), p.breaker.failure_count),
        ("closed", 0),
        "breaker: {:#?}",
        p.breaker
    );
    assert_eq!(p.failures, 0, "provider failures");
    let c = &p.connections[0];
    assert_eq!(
        c.status,
        sluice::snapshot::ConnectionStatus::Active,
        "{c:#?}"
    );
    assert_eq!(
        (c.failures, c.cooldown_until_unix_ms, c.backoff_level),
        (0, None, 0),
        "{c:#?}"
    );
    assert!(snap.lockouts.is_empty(), "lockouts: {:#?}", snap.lockouts);
}

#[tokio::test]
async fn a21_cap_2_dispatches_two_queues_three_and_rejects_the_sixth_at_once() {
    // Case A21 run 1, scaled: cap 2, depth 3, upstream 300 ms each. max_wait is 1 s rather
    // than 500 ms: the last queued request waits two service times (~600 ms) for its slot.
    let mock = MockUpstream::start().await;
    slow_anthropic(&mock, SLOW);
    let cfg = config(
        &mock,
        "anthropic",
        "max_concurrent = 2",
        "[resilience.queue]\nmax_queue_depth = 3\nmax_wait = \"1s\"",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let five: Vec<_> = (0..5).map(|_| spawn_messages(&s, "m")).collect();
    let g = wait_gate(&s, "connection", None, 2, 3, SLOW).await;
    assert_eq!(
        (g["cap"].as_u64(), g["max_queue_depth"].as_u64()),
        (Some(2), Some(3))
    );
    assert_eq!(mock.in_flight(), 2, "two upstream calls while three wait");

    let sixth = client::post_json(&s.url("/v1/messages"), &anthropic_body("m"), &[AV]).await;
    // Refused by the depth check at arrival (queue_full, not a timeout after waiting).
    assert_admission_429(&sixth, true, "RATE_LIMIT_QUEUE_FULL", "queue_full");

    for h in five {
        let (r, _) = h.await.unwrap();
        assert_eq!(r.status, 200, "queued requests are served: {}", r.text());
    }
    assert_eq!(
        mock.count(),
        5,
        "the rejected request never reached upstream"
    );
    assert_eq!(
        mock.max_concurrency(),
        2,
        "exactly two upstream calls at once"
    );
    let mut ex = mock.exchanges();
    ex.sort_by_key(|e| e.started);
    let first_free = ex[..2].iter().filter_map(|e| e.ended).min().unwrap();
    assert!(
        ex[2..].iter().all(|e| e.started >= first_free),
        "queued requests start only as slots free: {ex:#?}"
    );
    let g = wait_gate(&s, "connection", None, 0, 0, Duration::from_secs(1)).await;
    assert_eq!(
        (
            g["rejections"].as_u64(),
            g["timeouts"].as_u64(),
            g["admitted"].as_u64()
        ),
        (Some(1), Some(0), Some(5)),
        "{g:#}"
    );
}

#[tokio::test]
async fn a21_queued_request_past_max_wait_gets_a_fast_queue_timeout_and_the_running_one_is_not_cut()
{
    // max_wait bounds only the wait for a slot: the dispatched request runs 500 ms (over
    // max_wait) and succeeds; the queued one is refused at max_wait, in the OpenAI dialect.
    let mock = MockUpstream::start().await;
    mock.on("/v1/chat/completions")
        .reply(Reply::json(200, chat_completion("m", "done")).delay(Duration::from_millis(500)));
    let cfg = config(
        &mock,
        "openai",
        "max_concurrent = 1",
        "[resilience.queue]\nmax_queue_depth = 3\nmax_wait = \"150ms\"",
    );
    let s = Sluice::start(&cfg, ENV).await;
    let url = s.url("/v1/chat/completions");

    let running = {
        let url = url.clone();
        tokio::spawn(async move {
            let t = SystemClock.now();
            let r = client::post_json(&url, &chat_body("m"), &[]).await;
            (r, t.elapsed())
        })
    };
    mock.wait_for(1).await;
    let t = SystemClock.now();
    let queued = client::post_json(&url, &chat_body("m"), &[]).await;
    let waited = t.elapsed();
    let running_ended_before_refusal = mock.exchanges()[0].ended.is_some();

    assert_admission_429(&queued, false, "RATE_LIMIT_QUEUE_TIMEOUT", "queue_timeout");
    assert!(
        waited >= Duration::from_millis(150),
        "refused only after max_wait: {waited:?}"
    );
    assert!(
        !running_ended_before_refusal,
        "refused at max_wait while the slot was still busy, not when it freed"
    );
    let (r, took) = running.await.unwrap();
    assert_eq!(
        r.status,
        200,
        "the dispatched request is never cut: {}",
        r.text()
    );
    assert!(
        took >= Duration::from_millis(500),
        "ran its whole 500 ms: {took:?}"
    );
    assert_eq!(
        mock.count(),
        1,
        "the timed-out request never reached upstream"
    );
    let g = gate(&s, "connection", None).await;
    assert_eq!(g["timeouts"], 1, "{g:#}");
    assert_no_penalty(&s);
}

#[tokio::test]
async fn a21_cap_4_runs_four_upstream_calls_at_once() {
    // Case A21 run 2: guards against accidental serialization.
    let mock = MockUpstream::start().await;
    slow_anthropic(&mock, SLOW);
    let cfg = config(
        &mock,
        "anthropic",
        "max_concurrent = 4",
        "[resilience.queue]\nmax_queue_depth = 3\nmax_wait = \"1s\"",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let four: Vec<_> = (0..4).map(|_| spawn_messages(&s, "m")).collect();
    for h in four {
        let (r, _) = h.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }

    assert_eq!(mock.count(), 4);
    assert_eq!(mock.max_concurrency(), 4, "four concurrent upstream calls");
    let ex = mock.exchanges();
    let last_start = ex.iter().map(|e| e.started).max().unwrap();
    assert!(
        ex.iter().all(|e| e.ended.unwrap() > last_start),
        "all four were upstream at once: {ex:#?}"
    );
    assert_eq!(gate(&s, "connection", None).await["queued"], 0);
}

#[tokio::test]
async fn model_cap_serializes_that_model_while_another_model_does_not_wait() {
    // §4: model_concurrency { m1 = 1 } under max_concurrent = 4.
    let mock = MockUpstream::start().await;
    slow_anthropic(&mock, SLOW);
    let cfg = config(
        &mock,
        "anthropic",
        "max_concurrent = 4\n  model_concurrency = { \"m1\" = 1 }",
        "[resilience.queue]\nmax_wait = \"2s\"",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let first = spawn_messages(&s, "m1");
    mock.wait_for(1).await;
    let second = spawn_messages(&s, "m1");
    let g = wait_gate(&s, "model", Some("m1"), 1, 1, SLOW).await;
    assert_eq!(g["cap"], 1, "{g:#}");
    let other = client::post_json(&s.url("/v1/messages"), &anthropic_body("m2"), &[AV]).await;

    assert_eq!(other.status, 200, "{}", other.text());
    let (a, _) = first.await.unwrap();
    let (b, _) = second.await.unwrap();
    assert_eq!((a.status.as_u16(), b.status.as_u16()), (200, 200));
    assert_eq!(mock.max_concurrency_of("m1"), 1, "m1 calls serialize");
    assert!(mock.max_concurrency() >= 2, "m2 overlapped an m1 call");
    let ex = mock.exchanges();
    let m1: Vec<_> = ex
        .iter()
        .filter(|e| e.model.as_deref() == Some("m1"))
        .collect();
    let m2 = ex
        .iter()
        .find(|e| e.model.as_deref() == Some("m2"))
        .unwrap();
    assert!(
        m1[1].started >= m1[0].ended.unwrap(),
        "second m1 waited for the first: {m1:#?}"
    );
    assert!(
        m2.started < m1[1].started,
        "m2 went upstream while the second m1 still waited for its slot: {ex:#?}"
    );
}

#[tokio::test]
async fn saturation_is_not_failure_queue_full_leaves_connection_active_and_breaker_closed() {
    // §4: a saturated gate never opens a breaker, cools a connection or locks a model.
    let mock = MockUpstream::start().await;
    slow_anthropic(&mock, SLOW);
    let cfg = config(
        &mock,
        "anthropic",
        "max_concurrent = 1",
        "[resilience.queue]\nmax_queue_depth = 1\nmax_wait = \"2s\"\n\
         [resilience.model_lockout]\nenabled = true",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let running = spawn_messages(&s, "m");
    mock.wait_for(1).await;
    let queued = spawn_messages(&s, "m");
    wait_gate(&s, "connection", None, 1, 1, SLOW).await;
    let mut refused = Vec::new();
    for _ in 0..3 {
        refused.push(client::post_json(&s.url("/v1/messages"), &anthropic_body("m"), &[AV]).await);
    }
    for r in &refused {
        assert_admission_429(r, true, "RATE_LIMIT_QUEUE_FULL", "queue_full");
    }

    assert_no_penalty(&s);
    let health = client::get(&s.admin("/api/monitoring/health"), &[])
        .await
        .json();
    let b = health["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["provider"] == "p")
        .unwrap_or_else(|| panic!("{health:#}"))
        .clone();
    assert_eq!(b["state"], "closed", "{b:#}");
    let cool = client::get(&s.admin("/api/resilience/cooldowns?provider=p"), &[])
        .await
        .json();
    let k1 = cool["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["connection"] == "k1")
        .unwrap_or_else(|| panic!("{cool:#}"))
        .clone();
    assert_eq!(k1["status"], "active", "{k1:#}");
    let lock = client::get(&s.admin("/api/resilience/model-cooldowns"), &[])
        .await
        .json();
    assert_eq!(lock["lockouts"], json!([]), "{lock:#}");

    for h in [running, queued] {
        assert_eq!(h.await.unwrap().0.status, 200);
    }
    let next = client::post_json(&s.url("/v1/messages"), &anthropic_body("m"), &[AV]).await;
    assert_eq!(next.status, 200, "the connection serves the next request");
    assert_eq!(gate(&s, "connection", None).await["rejections"], 3);
    assert_no_penalty(&s);
}

/// `sluice_body_rewrites_total{kind}`: bodies sluice translated (`translate`) or rewrote
/// (`rewrite`) for an upstream so far.
fn body_rewrites(s: &Sluice, kind: &str) -> u64 {
    let text = s.core().metrics().render(&s.snapshot());
    let prefix = format!("sluice_body_rewrites_total{{kind=\"{kind}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {prefix}in /metrics:\n{text}"))
}

#[tokio::test]
async fn a_full_queue_refuses_a_translated_request_before_translating_it() {
    // An Anthropic client routed to an `openai` provider: every body sent is a translation.
    // The upstream holds each request for an hour and max_wait is an hour, so the running
    // request and the queued one stay put for the whole test: nothing here depends on timing.
    let mock = MockUpstream::start().await;
    mock.on("/v1/chat/completions")
        .reply(Reply::json(200, chat_completion("m", "done")).delay(Duration::from_secs(3600)));
    let cfg = config(
        &mock,
        "openai",
        "max_concurrent = 1",
        "[resilience.queue]\nmax_queue_depth = 1\nmax_wait = \"1h\"",
    );
    let s = Sluice::start(&cfg, ENV).await;
    assert_eq!(body_rewrites(&s, "translate"), 0);

    let running = spawn_messages(&s, "m");
    mock.wait_for(1).await;
    let queued = spawn_messages(&s, "m");
    wait_gate(&s, "connection", None, 1, 1, Duration::from_secs(5)).await;
    assert_eq!(
        body_rewrites(&s, "translate"),
        2,
        "the running request and the queued one were translated"
    );

    let mut body = anthropic_body("m");
    body["messages"][0]["content"] = json!("refused-before-translation");
    let refused = client::post_json(&s.url("/v1/messages"), &body, &[AV]).await;
    assert_admission_429(&refused, true, "RATE_LIMIT_QUEUE_FULL", "queue_full");
    assert!(
        retry_after(&refused) <= 3600,
        "at most the queue wait left: {:?}",
        refused.header("retry-after")
    );
    assert_eq!(
        (body_rewrites(&s, "translate"), body_rewrites(&s, "rewrite")),
        (2, 0),
        "the refused request was neither translated nor rewritten"
    );
    assert_eq!(mock.count(), 1, "only the running request reached upstream");
    assert!(
        mock.requests()
            .iter()
            .all(|r| !String::from_utf8_lossy(&r.body).contains("refused-before-translation")),
        "the upstream never saw the refused request"
    );
    let g = gate(&s, "connection", None).await;
    assert_eq!(
        (
            g["in_flight"].as_u64(),
            g["queued"].as_u64(),
            g["rejections"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{g:#}"
    );
    assert_no_penalty(&s);
    running.abort();
    queued.abort();
}

#[tokio::test]
async fn queued_client_that_disconnects_leaves_the_queue_at_once() {
    // §5: a client that disconnects while queued leaves the queue at once and never reaches
    // upstream.
    let mock = MockUpstream::start().await;
    slow_anthropic(&mock, SLOW);
    let cfg = config(
        &mock,
        "anthropic",
        "max_concurrent = 1",
        "[resilience.queue]\nmax_queue_depth = 1\nmax_wait = \"2s\"",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let running = spawn_messages(&s, "m");
    mock.wait_for(1).await;
    let queued = spawn_messages(&s, "m");
    wait_gate(&s, "connection", None, 1, 1, SLOW).await;
    queued.abort();
    let _ = queued.await;
    let g = wait_gate(&s, "connection", None, 1, 0, SLOW).await;
    assert_eq!(
        mock.count(),
        1,
        "left the queue before the slot freed: {g:#}"
    );
    // The freed queue place takes a new request at once (no queue-full).
    let next = spawn_messages(&s, "m");

    assert_eq!(running.await.unwrap().0.status, 200);
    let (r, _) = next.await.unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        mock.count(),
        2,
        "the departed request never reached upstream"
    );
    assert_eq!(mock.max_concurrency(), 1);
}

#[tokio::test]
async fn unprotected_fail_open_connection_proceeds_without_a_permit_after_max_wait() {
    // §4 concurrency_fail_open = true (default) on a connection not behind the §5 queue: a
    // request that timed out waiting proceeds without a permit instead of failing.
    let mock = MockUpstream::start().await;
    slow_anthropic(&mock, Duration::from_millis(400));
    let cfg = config(
        &mock,
        "anthropic",
        "max_concurrent = 1",
        "[resilience.queue]\nauto_enable_api_key_connections = false\nmax_wait = \"100ms\"",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let first = spawn_messages(&s, "m");
    mock.wait_for(1).await;
    let second = spawn_messages(&s, "m");

    for h in [first, second] {
        let (r, _) = h.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    let ex = mock.exchanges();
    let gap = ex[1].started.saturating_duration_since(ex[0].started);
    assert!(
        gap >= Duration::from_millis(100),
        "the second waited max_wait first: {gap:?}"
    );
    assert!(
        ex[1].started < ex[0].ended.unwrap(),
        "the second went upstream without waiting for the slot: {ex:#?}"
    );
    assert_eq!(mock.max_concurrency(), 2);
    let g = gate(&s, "connection", None).await;
    assert_eq!(g["enforcement"], "fail_open", "{g:#}");
    assert_eq!(g["fail_open_admits"], 1, "{g:#}");
    assert_no_penalty(&s);
}

#[tokio::test]
async fn strict_cap_refuses_with_semaphore_codes() {
    // §4 concurrency_fail_open = false on an unprotected connection: SEMAPHORE_QUEUE_FULL at
    // arrival, SEMAPHORE_TIMEOUT after max_wait; neither reaches upstream.
    let mock = MockUpstream::start().await;
    slow_anthropic(&mock, Duration::from_millis(1_000));
    let cfg = config(
        &mock,
        "anthropic",
        "max_concurrent = 1\n  concurrency_fail_open = false",
        "[resilience.queue]\nauto_enable_api_key_connections = false\nmax_queue_depth = 1\nmax_wait = \"400ms\"",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let first = spawn_messages(&s, "m");
    mock.wait_for(1).await;
    let second = spawn_messages(&s, "m");
    // The second waits (queued) for max_wait: 400 ms to see it and send the third.
    let g = wait_gate(&s, "connection", None, 1, 1, Duration::from_millis(390)).await;
    assert_eq!(g["enforcement"], "strict", "{g:#}");
    let full = client::post_json(&s.url("/v1/messages"), &anthropic_body("m"), &[AV]).await;
    let (timed_out, _) = second.await.unwrap();

    for (r, code) in [
        (&full, "SEMAPHORE_QUEUE_FULL"),
        (&timed_out, "SEMAPHORE_TIMEOUT"),
    ] {
        assert!(
            matches!(r.status.as_u16(), 429 | 503),
            "{code}: {} {}",
            r.status,
            r.text()
        );
        assert_eq!(r.json()["sluice"]["code"], code, "{}", r.text());
        assert_eq!(r.json()["type"], "error", "anthropic shape: {}", r.text());
        assert!(retry_after(r) >= 1);
    }
    assert_eq!(first.await.unwrap().0.status, 200);
    assert_eq!(mock.count(), 1);
    assert_no_penalty(&s);
}

/// `GET /api/queues` → the connection gate of `k1`, if listed.
async fn conn_gate(s: &Sluice) -> Option<Value> {
    let v = client::get(&s.admin("/api/queues"), &[]).await.json();
    v["queues"]
        .as_array()?
        .iter()
        .find(|g| g["kind"] == "connection" && g["connection"] == "k1")
        .cloned()
}

#[tokio::test]
async fn a_protected_uncapped_connection_learns_its_cap_from_concurrency_limit_429s() {
    // k1 has no max_concurrent; as an api_key connection it is protected, so it gets
    // protection_default_cap (6 here). A concurrency-limit 429 reported while K = 3 others
    // run (4 permits in flight with its own) teaches cap 3: further requests queue.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("busy")
        .reply(Reply::anthropic_error(
            429,
            "rate_limit_error",
            "Concurrency limit reached for this API key",
        ));
    // The first three hold their permits long enough for everything below to queue.
    mock.on("/v1/messages").model("m").times(3).reply(
        Reply::json(200, anthropic_message("m", "done")).delay(Duration::from_millis(1_200)),
    );
    mock.on("/v1/messages")
        .model("m")
        .reply(Reply::json(200, anthropic_message("m", "done")).delay(Duration::from_millis(150)));
    // disable_cooling: the 429 cools nothing, so later requests need not wait out 1 s.
    let cfg = config(
        &mock,
        "anthropic",
        "disable_cooling = true",
        "[resilience.queue]\nmax_wait = \"10s\"\nprotection_default_cap = 6",
    );
    let s = Sluice::start(&cfg, ENV).await;

    let g = conn_gate(&s)
        .await
        .expect("a protected connection has a gate");
    assert_eq!(
        (
            g["cap"].clone(),
            g["effective_cap"].as_u64(),
            g["cap_source"].as_str()
        ),
        (Value::Null, Some(6), Some("default")),
        "no configured cap, the default in force: {g:#}"
    );

    let first: Vec<_> = (0..3).map(|_| spawn_messages(&s, "m")).collect();
    wait_gate(&s, "connection", None, 3, 0, Duration::from_secs(1)).await;
    let busy = client::post_json(&s.url("/v1/messages"), &anthropic_body("busy"), &[AV]).await;
    assert_eq!(busy.status, 429, "{}", busy.text());

    let g = conn_gate(&s).await.unwrap();
    assert_eq!(
        (
            g["cap"].clone(),
            g["effective_cap"].as_u64(),
            g["cap_source"].as_str()
        ),
        (Value::Null, Some(3), Some("learned")),
        "4 in flight at the 429 → cap 3: {g:#}"
    );

    // Five more: all wait behind the three slow ones instead of reaching the upstream.
    let more: Vec<_> = (0..5).map(|_| spawn_messages(&s, "m")).collect();
    wait_gate(&s, "connection", None, 3, 5, Duration::from_millis(900)).await;
    assert_eq!(
        mock.requests_to("/v1/messages").len(),
        4,
        "3 slow + the 429"
    );

    for h in first.into_iter().chain(more) {
        let (r, _) = h.await.unwrap();
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(
        mock.max_concurrency_of("m"),
        3,
        "never more than the learned cap upstream at once"
    );
    let g = wait_gate(&s, "connection", None, 0, 0, Duration::from_secs(1)).await;
    assert_eq!(g["admitted"], 9, "{g:#}");
    assert_eq!(
        g["cap_source"], "learned",
        "eight successes do not raise it yet"
    );
}

#[tokio::test]
async fn protection_off_leaves_an_uncapped_connection_unlimited() {
    // The same 429 on a connection that is not protected teaches nothing and lists no gate:
    // today's behaviour without protection.
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("busy")
        .reply(Reply::anthropic_error(
            429,
            "rate_limit_error",
            "Concurrency limit reached for this API key",
        ));
    slow_anthropic(&mock, SLOW);
    let cfg = config(
        &mock,
        "anthropic",
        "disable_cooling = true",
        "[resilience.queue]\nauto_enable_api_key_connections = false",
    );
    let s = Sluice::start(&cfg, ENV).await;
    let first: Vec<_> = (0..3).map(|_| spawn_messages(&s, "m")).collect();
    mock.wait_for(3).await;
    let busy = client::post_json(&s.url("/v1/messages"), &anthropic_body("busy"), &[AV]).await;
    assert_eq!(busy.status, 429, "{}", busy.text());
    assert!(conn_gate(&s).await.is_none(), "no gate without protection");
    let more: Vec<_> = (0..5).map(|_| spawn_messages(&s, "m")).collect();
    for h in first.into_iter().chain(more) {
        assert_eq!(h.await.unwrap().0.status, 200);
    }
    assert!(
        mock.max_concurrency_of("m") > 3,
        "nothing held back: {}",
        mock.max_concurrency_of("m")
    );
}
