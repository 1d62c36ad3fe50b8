//! S8's soak: a fresh sluice under open-loop load (by default 2,000 requests a second for 10
//! minutes, half of them 8-frame streams paced 20 ms) while its RSS and CPU time are sampled every
//! 5 s; then its RSS once the load has been gone for `recover_secs`. Memory must plateau:
//! the growth figure is the least-squares slope of RSS over time, for the whole run after a
//! warm-up and for its second half alone, in MiB per minute.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::load::Req;
use crate::mock::expected_events;
use crate::paced::{self, Interval, Plan};
use crate::procfs;
use crate::scenarios::{Opts, Rig, mib, r1};

/// Seconds between two RSS and CPU samples.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// Frames per soak stream.
const STREAM_FRAMES: usize = 8;
/// Milliseconds between two frames of a soak stream.
const STREAM_PACE_MS: u64 = 20;
/// A second-half slope at or under this (MiB per minute: 1 MiB in 10 minutes) is a plateau.
pub const PLATEAU_MIB_PER_MIN: f64 = 0.1;

/// One sample of the process under soak.
#[derive(Debug, Clone, Copy)]
struct Point {
    /// Seconds since the load started.
    t: f64,
    rss_kib: u64,
    cpu_ticks: u64,
}

/// Runs the soak on a fresh sluice (see the module doc).
pub async fn soak(rig: &mut Rig, o: &Opts) -> std::io::Result<Value> {
    rig.restart_sluice(o).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let s = rig.targets()[2];
    let idle = procfs::sample(s.pid).rss_kib;
    let plan = plan(o);
    let points = Arc::new(Mutex::new(Vec::new()));
    let sampler = tokio::spawn(sample(s.pid, points.clone()));
    let intervals = paced::run(s.addr, &plan).await;
    sampler.abort();
    let secs = plan.dur.as_secs_f64();
    let mut points = std::mem::take(&mut *points.lock().unwrap_or_else(|p| p.into_inner()));
    // A sample taken after the last request was due belongs to the recovery, not the soak.
    points.retain(|p| p.t <= secs);
    tokio::time::sleep(Duration::from_secs_f64(o.recover_secs)).await;
    let recovered = procfs::sample(s.pid).rss_kib;
    let warm = (secs / 5.0).min(60.0);
    let rss = |p: &Point| mib(p.rss_kib);
    let after_warm: Vec<Point> = points.iter().copied().filter(|p| p.t >= warm).collect();
    let second_half: Vec<Point> = points
        .iter()
        .copied()
        .filter(|p| p.t >= secs / 2.0)
        .collect();
    let half_slope = slope_per_min(&second_half);
    // No verdict from too few samples, or when sluice was gone (a sample of a dead process
    // reads 0 and would fit a falling line).
    let judged = second_half.len() >= 3 && points.iter().all(|p| p.rss_kib > 0);
    let errors: u64 = intervals.iter().map(|i| i.errors).sum();
    Ok(json!({
        "secs": secs, "rps": plan.rps, "lanes": plan.lanes,
        "streaming_share": 0.5, "stream_frames": STREAM_FRAMES, "stream_pace_ms": STREAM_PACE_MS,
        "idle_mib": mib(idle),
        "steady_median_mib": r1(crate::scenarios::median(after_warm.iter().map(rss).collect())),
        "peak_mib": points.iter().map(rss).fold(mib(idle), f64::max),
        "end_mib": points.last().map_or(0.0, rss),
        "growth_mib_per_min": r2(slope_per_min(&after_warm)),
        "growth_second_half_mib_per_min": r2(half_slope),
        "plateau": if judged { json!(half_slope <= PLATEAU_MIB_PER_MIN) } else { Value::Null },
        "errors": errors,
        "recovered_mib": mib(recovered), "recover_secs": o.recover_secs,
        "rows": rows(rig, &plan, &intervals, &points),
        "rss_samples": points.iter().map(|p| json!([r1(p.t), mib(p.rss_kib)])).collect::<Vec<_>>(),
    }))
}

/// The soak's load: `soak_rps` for `soak_secs`, lanes sized so each sends about twice a
/// second, reported per minute (per tenth of the run when it is shorter than ten minutes, and
/// never per less than one sample period).
fn plan(o: &Opts) -> Plan {
    let lanes = ((o.soak_rps / 2.0).round() as usize).clamp(2, 1024) & !1;
    let dur = Duration::from_secs_f64(o.soak_secs.max(1.0));
    let interval =
        Duration::from_secs_f64((o.soak_secs / 10.0).clamp(SAMPLE_EVERY.as_secs_f64(), 60.0));
    Plan {
        rps: o.soak_rps,
        lanes,
        dur,
        interval,
        plain: Req::anthropic("claude-bench", "s=500", false),
        stream: (
            Req::anthropic(
                "claude-bench",
                &format!("f={STREAM_FRAMES};i={STREAM_PACE_MS}"),
                true,
            ),
            expected_events(false, STREAM_FRAMES) as u64,
        ),
    }
}

/// Samples `pid` into `points` every [`SAMPLE_EVERY`], the first at once, on a schedule
/// that does not drift, until aborted.
async fn sample(pid: u32, points: Arc<Mutex<Vec<Point>>>) {
    let start = Instant::now();
    let mut every = tokio::time::interval(SAMPLE_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        every.tick().await;
        let s = procfs::sample(pid);
        let point = Point {
            t: start.elapsed().as_secs_f64(),
            rss_kib: s.rss_kib,
            cpu_ticks: s.cpu_ticks,
        };
        points.lock().unwrap_or_else(|p| p.into_inner()).push(point);
    }
}

/// Least-squares slope of RSS over time, MiB per minute (0 with fewer than two points).
fn slope_per_min(points: &[Point]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let xs = points.iter().map(|p| p.t / 60.0);
    let ys = points.iter().map(|p| p.rss_kib as f64 / 1024.0);
    let (mx, my) = (xs.clone().sum::<f64>() / n, ys.clone().sum::<f64>() / n);
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in xs.zip(ys) {
        num += (x - mx) * (y - my);
        den += (x - mx) * (x - mx);
    }
    if den == 0.0 { 0.0 } else { num / den }
}

fn r2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// One table row per interval: rate, errors, latency, streams, RSS and CPU per request.
fn rows(rig: &Rig, plan: &Plan, intervals: &[Interval], points: &[Point]) -> Vec<Value> {
    let (len, secs) = (plan.interval.as_secs_f64(), plan.dur.as_secs_f64());
    let at = |t: f64| {
        points
            .iter()
            .min_by(|a, b| (a.t - t).abs().total_cmp(&(b.t - t).abs()))
            .copied()
    };
    let us =
        |h: &hdrhistogram::Histogram<u64>, q: f64| r1(h.value_at_percentile(q) as f64 / 1000.0);
    intervals
        .iter()
        .enumerate()
        .map(|(i, iv)| {
            // The last interval is shorter when the run is not a whole number of them.
            let (t0, t1) = (i as f64 * len, ((i as f64 + 1.0) * len).min(secs));
            let span = (t1 - t0).max(1e-3);
            let (a, b) = (at(t0), at(t1));
            let cpu = match (a, b) {
                (Some(a), Some(b)) if b.t > a.t && iv.sent() > 0 => {
                    let per_s = iv.sent() as f64 / span;
                    let ticks = b.cpu_ticks.saturating_sub(a.cpu_ticks) as f64 / (b.t - a.t);
                    Some(r1(rig.cpu_us(ticks.round() as u64) / per_s.max(1e-9)))
                }
                // No two samples around this interval (a short last one), or nothing sent.
                _ => None,
            };
            json!({
                "from_s": r1(t0), "sent_per_s": r1(iv.sent() as f64 / span),
                "ok": iv.ok, "streams": iv.streams, "errors": iv.errors, "late": iv.late,
                "p50_us": us(&iv.latency, 50.0), "p99_us": us(&iv.latency, 99.0),
                "p999_us": us(&iv.latency, 99.9), "ttfb_p99_us": us(&iv.ttfb, 99.0),
                "lost": iv.expected.saturating_sub(iv.frames),
                "max_gap_ms": r1(iv.max_gap_ns as f64 / 1e6),
                "rss_mib": b.map_or(0.0, |p| mib(p.rss_kib)), "cpu_us_per_req": cpu,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(rss_mib: &[f64]) -> Vec<Point> {
        rss_mib
            .iter()
            .enumerate()
            .map(|(i, m)| Point {
                t: i as f64 * 30.0,
                rss_kib: (m * 1024.0) as u64,
                cpu_ticks: 0,
            })
            .collect()
    }

    #[test]
    fn slope_is_mib_per_minute_and_flat_memory_is_a_plateau() {
        // +1 MiB every 30 s sample = 2 MiB per minute.
        assert!((slope_per_min(&pts(&[10.0, 11.0, 12.0, 13.0])) - 2.0).abs() < 0.01);
        let flat = slope_per_min(&pts(&[30.0, 30.5, 29.5, 30.0, 30.2, 29.8]));
        assert!(flat.abs() <= PLATEAU_MIB_PER_MIN, "{flat}");
        assert_eq!(slope_per_min(&pts(&[5.0])), 0.0);
    }
}
