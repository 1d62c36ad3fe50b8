use super::*;
use crate::clock::ManualClock;
use crate::config::{LoadEnv, from_str};
use crate::snapshot::{RECENT_CAP, RequestOutcome};
use std::path::Path;

fn core() -> (Core, ManualClock) {
    let env = LoadEnv::fixed(&[], "/tmp");
    let cfg = from_str(
        r#"
        [[providers]]
        id = "anthropic"
        dialect = "anthropic"
        base_url = "https://api.anthropic.com"
          [[providers.connections]]
          id = "mine"
          auth = "passthrough"
        "#,
        Path::new("t.toml"),
        &env,
    )
    .unwrap();
    let clock = ManualClock::new();
    (
        Core::new(Arc::new(cfg), Arc::new(clock.clone()), None),
        clock,
    )
}

fn finish(core: &Core, clock: &ManualClock, latency_ms: u64, outcome: RequestOutcome) {
    let g = core.begin_request();
    clock.advance(Duration::from_millis(latency_ms));
    core.finish_request(
        &g,
        RequestView {
            outcome,
            status: 200,
            ..Default::default()
        },
    );
}

#[test]
fn counts_requests_and_in_flight() {
    let (core, clock) = core();
    let g = core.begin_request();
    assert_eq!(core.snapshot().totals.in_flight, 1);
    clock.advance(Duration::from_millis(40));
    core.finish_request(
        &g,
        RequestView {
            outcome: crate::snapshot::RequestOutcome::Ok,
            bytes: 10,
            ..Default::default()
        },
    );
    drop(g);
    let s = core.snapshot();
    assert_eq!(
        (
            s.totals.requests,
            s.totals.ok,
            s.totals.in_flight,
            s.totals.bytes_out
        ),
        (1, 1, 0, 10)
    );
    assert_eq!(s.recent[0].latency_ms, 40);
    assert_eq!(s.recent[0].id, 1);
}

#[test]
fn last_minute_percentiles_and_expiry() {
    let (core, clock) = core();
    for ms in 1..=100 {
        finish(
            &core,
            &clock,
            ms,
            if ms % 10 == 0 {
                RequestOutcome::UpstreamError
            } else {
                RequestOutcome::Ok
            },
        );
    }
    let w = core.snapshot().last_minute;
    assert_eq!(w.p50_ms, 50);
    assert_eq!(w.p99_ms, 99);
    assert!((w.success_ratio - 0.9).abs() < 1e-9);
    assert_eq!(w.sparkline.iter().sum::<u64>(), 100);
    clock.advance(Duration::from_secs(61));
    let w = core.snapshot().last_minute;
    assert_eq!((w.p50_ms, w.p99_ms, w.success_ratio), (0, 0, 1.0));
    assert_eq!(core.snapshot().totals.requests, 100, "totals never expire");
}

#[test]
fn attempts_are_counted_per_provider_and_connection() {
    let (core, _clock) = core();
    let a = core.begin_attempt(&super::test_support::cand());
    core.attempt_result(
        &super::test_support::cand(),
        Some(503),
        Duration::from_millis(5),
    );
    let s = core.snapshot();
    assert_eq!(
        (
            s.providers[0].attempts,
            s.providers[0].failures,
            s.providers[0].in_flight
        ),
        (1, 1, 1)
    );
    assert_eq!(s.providers[0].connections[0].auth, "passthrough");
    drop(a);
    assert_eq!(core.snapshot().providers[0].in_flight, 0);
}

#[test]
fn recent_is_bounded_newest_first() {
    let (core, clock) = core();
    for _ in 0..(RECENT_CAP + 5) {
        finish(&core, &clock, 1, RequestOutcome::Ok);
    }
    let s = core.snapshot();
    assert_eq!(s.recent.len(), RECENT_CAP);
    assert!(s.recent[0].id > s.recent[1].id);
}

#[test]
fn publish_spacing_grows_with_the_build_time_within_its_bounds() {
    assert_eq!(publish_spacing(Duration::ZERO), PUBLISH_SPACING);
    assert_eq!(publish_spacing(Duration::from_millis(5)), PUBLISH_SPACING);
    assert_eq!(
        publish_spacing(Duration::from_millis(20)),
        Duration::from_millis(180)
    );
    assert_eq!(
        publish_spacing(Duration::from_millis(400)),
        MAX_PUBLISH_SPACING
    );
    assert_eq!(publish_spacing(Duration::MAX), MAX_PUBLISH_SPACING);
}

#[tokio::test(start_paused = true)]
async fn publisher_builds_snapshots_only_while_someone_watches() {
    let (core, clock) = core();
    let stop = CancellationToken::new();
    let task = tokio::spawn(core.clone().run_publisher(stop.clone()));
    for _ in 0..50 {
        finish(&core, &clock, 1, RequestOutcome::Ok);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    // Only the construction-time snapshot was built; this call builds the second.
    assert_eq!(
        core.snapshot().version,
        2,
        "nothing published while unwatched"
    );
    let rx = core.subscribe();
    let seen = rx.borrow().version;
    finish(&core, &clock, 1, RequestOutcome::Ok);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let now = rx.borrow().clone();
    assert!(
        now.version > seen,
        "a watched core republishes after a change"
    );
    assert_eq!(now.totals.requests, 51);
    stop.cancel();
    task.await.unwrap();
}
