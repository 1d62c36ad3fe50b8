//! Soak: one sluice under moderate mixed load (8 client loops with a short pause, both
//! dialects, streaming and not, behind [`ChaosUpstream`] with a few 429s and 503s) for 2 min
//! (short mode) or 30 min (long mode). RSS is sampled every 10 s and must not trend upwards
//! after the warm-up; the p99 latency of the last window must not have drifted far from the
//! first post-warm-up window; every request gets one well-formed outcome; no permit leaks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::chaos::{REQUEST_BOUND, Tally, assert_counts, http_client, one, route_of, settled};
use crate::chaos_upstream::{ChaosUpstream, Mix};
use crate::proc::{Home, Proc};

/// Concurrent client loops.
const CLIENTS: usize = 8;
/// Pause of each loop between its requests.
const PAUSE: Duration = Duration::from_millis(20);
/// How often RSS is sampled.
const RSS_EVERY: Duration = Duration::from_secs(10);

/// One finished request: when it finished (since the start) and how long it took.
#[derive(Debug, Clone, Copy)]
struct Done {
    at: Duration,
    took: Duration,
}

/// One client loop: requests until `stop`, each request's route and stream flag from a shared
/// counter; an in-flight request is always finished (and counted) before the loop ends.
async fn client_loop(
    base: String,
    next: Arc<AtomicU64>,
    start: sluice::clock::Instant,
    stop: CancellationToken,
) -> (Tally, Vec<Done>) {
    let client = http_client();
    let mut tally = Tally::default();
    let mut done = Vec::new();
    while !stop.is_cancelled() {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let (route, stream) = route_of(i);
        let t = crate::now();
        let v = tokio::time::timeout(REQUEST_BOUND, one(&client, &base, route, stream))
            .await
            .map_err(|_| format!("{route:?} stream={stream} hung past {REQUEST_BOUND:?}"));
        let took = t.elapsed();
        tally.add(v, took);
        done.push(Done {
            at: start.elapsed(),
            took,
        });
        tokio::select! {
            () = tokio::time::sleep(PAUSE) => {}
            () = stop.cancelled() => {}
        }
    }
    (tally, done)
}

/// The `q` quantile (nearest rank) of `v`, sorted in place; zero when empty.
fn quantile(v: &mut [Duration], q: f64) -> Duration {
    if v.is_empty() {
        return Duration::ZERO;
    }
    v.sort_unstable();
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Least-squares slope of `(seconds, KiB)` samples, in MiB per minute.
fn slope_mib_per_min(samples: &[(f64, u64)]) -> f64 {
    let n = samples.len() as f64;
    if n < 2.0 {
        return 0.0;
    }
    let mx = samples.iter().map(|s| s.0).sum::<f64>() / n;
    let my = samples.iter().map(|s| s.1 as f64).sum::<f64>() / n;
    let sxy: f64 = samples.iter().map(|s| (s.0 - mx) * (s.1 as f64 - my)).sum();
    let sxx: f64 = samples.iter().map(|s| (s.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return 0.0;
    }
    sxy / sxx * 60.0 / 1024.0
}

/// Per-window request count, p50 and p99 (by finish time; late finishers go to the last).
fn windows(done: &[Done], window: Duration, count: usize) -> Vec<(usize, Duration, Duration)> {
    let mut buckets: Vec<Vec<Duration>> = vec![Vec::new(); count];
    for d in done {
        let i = (d.at.as_millis() / window.as_millis()) as usize;
        buckets[i.min(count - 1)].push(d.took);
    }
    buckets
        .into_iter()
        .map(|mut b| {
            let p50 = quantile(&mut b, 0.50);
            let p99 = quantile(&mut b, 0.99);
            (b.len(), p50, p99)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_holds_rss_and_p99_steady_under_mixed_load() {
    let run = crate::pick(Duration::from_secs(120), Duration::from_secs(30 * 60));
    let window = crate::pick(Duration::from_secs(30), Duration::from_secs(120));
    let count = (run.as_secs() / window.as_secs()) as usize;
    let up = ChaosUpstream::start(0x50AC_0001, Mix::soak()).await;
    let home = Home::new(&crate::chaos::config(&up.base_url()));
    let mut p = Proc::start(&home, &[]);

    let start = crate::now();
    let stop = CancellationToken::new();
    let next = Arc::new(AtomicU64::new(0));
    let loops: Vec<_> = (0..CLIENTS)
        .map(|_| tokio::spawn(client_loop(p.url(""), next.clone(), start, stop.clone())))
        .collect();

    // RSS at 0 s, 10 s, … up to the end of the run.
    let mut rss: Vec<(f64, u64)> = Vec::new();
    let mut k = 0u32;
    while RSS_EVERY * k <= run {
        tokio::time::sleep((RSS_EVERY * k).saturating_sub(start.elapsed())).await;
        assert!(p.alive(), "sluice exited mid-soak; stderr:\n{}", p.stderr());
        rss.push((start.elapsed().as_secs_f64(), p.rss_kib()));
        k += 1;
    }
    stop.cancel();
    let took = start.elapsed();

    let mut tally = Tally::default();
    let mut done = Vec::new();
    for l in loops {
        let (t, d) = l.await.unwrap();
        tally.merge(t);
        done.extend(d);
    }
    let s = settled(&p).await;
    p.assert_healthy();

    let warm = window.as_secs_f64();
    let after_warmup: Vec<(f64, u64)> = rss.iter().copied().filter(|s| s.0 >= warm).collect();
    let slope = slope_mib_per_min(&after_warmup);
    let w = windows(&done, window, count);
    let per_window: Vec<String> = w
        .iter()
        .map(|(n, p50, p99)| format!("{n} req p50 {p50:.0?} p99 {p99:.0?}"))
        .collect();
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "soak: {} requests in {took:.0?} ({:.0} rps, {CLIENTS} clients, slowest {:.1?}), {} upstream attempts {:?}; outcomes {:?}; RSS start {:.1} MiB, after warm-up {:.1} MiB, end {:.1} MiB, slope {slope:+.3} MiB/min (samples {:?} MiB); windows of {window:?}: [{}]",
        tally.requests,
        tally.requests as f64 / took.as_secs_f64(),
        tally.slowest,
        up.requests(),
        up.injected(),
        tally.verdicts,
        mib(rss[0].1),
        mib(after_warmup.first().map_or(0, |s| s.1)),
        mib(rss.last().map_or(0, |s| s.1)),
        rss.iter().map(|s| s.1 / 1024).collect::<Vec<_>>(),
        per_window.join("; ")
    );

    tally.assert_well_formed();
    assert_counts(&tally, &s);
    // Measured on the shared 2-core machine (debug build, ~195 rps): RSS rises from 35 to 41
    // MiB in the warm-up, then creeps 41.4 -> 42.3 MiB towards a plateau, a slope of +0.43
    // and +0.47 MiB/min in two runs. 1.5 MiB/min leaves 3x room for that creep on a slower
    // runner while a leak of ~130 bytes per request at this rate (or any per-connection or
    // per-stream leak) exceeds it. Long mode (not measured here) fits its line over 28 min,
    // where the creep flattens out, so it is held to 1 MiB/min.
    let bound = crate::pick(1.5, 1.0);
    assert!(
        slope < bound,
        "RSS grows {slope:.3} MiB/min after the warm-up (bound {bound}): {rss:?}"
    );
    let first = w[1].2;
    let last = w[count - 1].2;
    let allowed = (first * 3).max(first + Duration::from_millis(50));
    assert!(
        last <= allowed,
        "p99 drifted: first post-warm-up window {first:?}, last {last:?} (allowed {allowed:?})"
    );
    assert!(
        w.iter().all(|(n, _, _)| *n > 0),
        "a window without any finished request: {per_window:?}"
    );
}
