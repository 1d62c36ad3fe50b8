//! The scenarios (S1, S2, S4, saturation-then-c=1, S7, S8) and the short regression guard.
//! Each window runs direct → floor → sluice interleaved in one process tree; results are JSON
//! rows the report turns into Markdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::load::{self, Req};
use crate::mock::expected_events;
use crate::procfs;
use crate::targets::{self, Placement, Proc};

/// Run-wide settings.
#[derive(Debug, Clone)]
pub struct Opts {
    /// CPU placement.
    pub place: Placement,
    /// Rounds per S1 window.
    pub rounds: usize,
    /// Seconds per window.
    pub secs: f64,
    /// Seconds of saturation before the second c=1 run.
    pub sat_secs: f64,
    /// Seconds to wait before the recovered-RSS reading (S8).
    pub recover_secs: f64,
    /// Scratch directory for sluice's config, database and logs.
    pub work: PathBuf,
    /// Guard self-test: put a shim adding this many µs in front of sluice.
    pub inject_delay_us: u64,
    /// S2's concurrency levels.
    pub conc: Vec<usize>,
    /// Seconds of S8's soak (0: no soak).
    pub soak_secs: f64,
    /// Requests per second of S8's soak.
    pub soak_rps: f64,
}

impl Opts {
    pub(crate) fn dur(&self) -> Duration {
        Duration::from_secs_f64(self.secs)
    }
}

/// The processes of one run.
pub struct Rig {
    /// The upstream.
    pub mock: Proc,
    /// The pass-through floor.
    pub floor: Proc,
    /// sluice.
    pub sluice: Proc,
    /// A delay shim in front of sluice (guard self-test only); traffic for "sluice" goes here.
    pub shim: Option<Proc>,
    clk: u64,
}

/// One target as the scenarios address it.
#[derive(Clone, Copy)]
pub struct Target {
    /// Table name.
    pub name: &'static str,
    /// Where requests go.
    pub addr: SocketAddr,
    /// Whose CPU and RSS are sampled.
    pub pid: u32,
}

impl Rig {
    /// Starts mock, floor and sluice.
    pub async fn start(o: &Opts) -> std::io::Result<Self> {
        let mock = targets::mock(o.place).await?;
        let floor = targets::floor(o.place, mock.addr, 0).await?;
        let sluice = targets::sluice(o.place, mock.addr, &o.work).await?;
        let shim = if o.inject_delay_us > 0 {
            Some(targets::floor(o.place, sluice.addr, o.inject_delay_us).await?)
        } else {
            None
        };
        Ok(Self {
            mock,
            floor,
            sluice,
            shim,
            clk: procfs::clk_tck(),
        })
    }

    /// direct, floor, sluice in run order.
    pub fn targets(&self) -> [Target; 3] {
        let s_addr = self.shim.as_ref().map_or(self.sluice.addr, |s| s.addr);
        [
            Target {
                name: "direct",
                addr: self.mock.addr,
                pid: self.mock.pid(),
            },
            Target {
                name: "floor",
                addr: self.floor.addr,
                pid: self.floor.pid(),
            },
            Target {
                name: "sluice",
                addr: s_addr,
                pid: self.sluice.pid(),
            },
        ]
    }

    /// Restarts sluice (a fresh process for the saturation check and S8).
    pub async fn restart_sluice(&mut self, o: &Opts) -> std::io::Result<()> {
        self.sluice = targets::sluice(o.place, self.mock.addr, &o.work).await?;
        if o.inject_delay_us > 0 {
            self.shim = Some(targets::floor(o.place, self.sluice.addr, o.inject_delay_us).await?);
        }
        Ok(())
    }

    pub(crate) fn cpu_us(&self, ticks: u64) -> f64 {
        ticks as f64 * 1e6 / self.clk.max(1) as f64
    }
}

pub(crate) fn mib(kib: u64) -> f64 {
    (kib as f64 / 1024.0 * 10.0).round() / 10.0
}

pub(crate) fn r1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Direct c=1 p50 (µs) to a mock placed where sluice runs (Mode A: CPU 1, away from the
/// rig), the fair baseline for an answer sluice gives by itself: in Mode A the ordinary
/// direct mock shares the rig's CPU, so it never pays the two cross-CPU wake-ups every
/// request to sluice pays. `None` in Mode B (nothing is pinned, so direct already is it) or
/// when the mock cannot start.
pub(crate) async fn direct_on_proxy_cpu(rig: &Rig, o: &Opts) -> Option<f64> {
    if o.place != Placement::Pinned {
        return None;
    }
    let far = targets::mock_on(o.place, "1").await.ok()?;
    let t = Target {
        name: "direct (CPU 1)",
        addr: far.addr,
        pid: far.pid(),
    };
    let ok = Req::anthropic("claude-bench", "s=500", false);
    // Warmed up like every other target, so its first connection is not in the window.
    let _ = load::closed_loop(t.addr, &ok, 1, Duration::from_millis(500), 5_000_000).await;
    let w = window(rig, t, &ok, 1, o.dur()).await;
    (f(&w, "requests") > 0.0 && f(&w, "errors") == 0.0).then(|| f(&w, "p50_us"))
}

/// The fast-fail fields every fast-fail result carries: `direct_p50_us` and its goal (+50 µs),
/// and the same for the mock placed where sluice runs (`null` in Mode B).
pub(crate) fn fast_fail_baselines(direct_p50: f64, same_cpu: Option<f64>) -> Value {
    json!({
        "direct_p50_us": direct_p50, "goal_us": r1(direct_p50 + 50.0),
        "direct_proxy_cpu_p50_us": same_cpu,
        "goal_proxy_cpu_us": same_cpu.map(|p| r1(p + 50.0)),
    })
}

/// One closed-loop window on `t` with samples of its process around it.
pub(crate) async fn window(rig: &Rig, t: Target, req: &Req, c: usize, dur: Duration) -> Value {
    let before = procfs::sample(t.pid);
    let steal0 = (procfs::steal_ticks(), procfs::total_ticks());
    let r = load::closed_loop(t.addr, req, c, dur, 5_000_000).await;
    let after = procfs::sample(t.pid);
    let steal = procfs::steal_ticks().saturating_sub(steal0.0) as f64
        / procfs::total_ticks().saturating_sub(steal0.1).max(1) as f64;
    let n = (r.ok + r.errors).max(1) as f64;
    json!({
        "target": t.name, "c": c, "requests": r.ok + r.errors, "errors": r.errors,
        "connect_errors": r.connect_errors, "rps": r1(r.rps()),
        "p50_us": r1(r.us(50.0)), "p99_us": r1(r.us(99.0)), "p999_us": r1(r.us(99.9)),
        "cpu_us_per_req": r1(rig.cpu_us(after.cpu_ticks.saturating_sub(before.cpu_ticks)) / n),
        "cs_per_req": r1((after.vol_cs + after.nonvol_cs).saturating_sub(before.vol_cs + before.nonvol_cs) as f64 / n),
        "rss_mib": mib(after.rss_kib), "steal": r1(steal * 100.0),
    })
}

pub(crate) fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// One arm of an interleaved comparison: a target and the requests it is sent.
pub struct Arm {
    /// Where the traffic goes and whose CPU counts.
    pub target: Target,
    /// What each request asks for.
    pub req: Req,
}

/// `rounds` rounds over `arms` in order, each arm a c=1 window then a c=32 window; per arm
/// the median of its rounds, and its CPU per request as a ratio to the first arm's.
pub(crate) async fn compare(rig: &Rig, o: &Opts, arms: &[Arm], rounds: usize) -> Vec<Value> {
    for a in arms {
        let _ =
            load::closed_loop(a.target.addr, &a.req, 4, Duration::from_millis(500), 20_000).await;
    }
    let mut got: Vec<Vec<(Value, Value)>> = arms.iter().map(|_| Vec::new()).collect();
    for _ in 0..rounds.max(1) {
        for (a, out) in arms.iter().zip(got.iter_mut()) {
            let one = window(rig, a.target, &a.req, 1, o.dur()).await;
            let many = window(rig, a.target, &a.req, 32, o.dur()).await;
            out.push((one, many));
        }
    }
    let med = |rs: &[(Value, Value)], many: bool, k: &str| {
        median(
            rs.iter()
                .map(|(a, b)| f(if many { b } else { a }, k))
                .collect(),
        )
    };
    let base = got
        .first()
        .map_or(1.0, |rs| med(rs, false, "cpu_us_per_req").max(0.1));
    let base32 = got
        .first()
        .map_or(1.0, |rs| med(rs, true, "cpu_us_per_req").max(0.1));
    arms.iter()
        .zip(&got)
        .map(|(a, rs)| {
            let errors: f64 = rs.iter().map(|(x, y)| f(x, "errors") + f(y, "errors")).sum();
            json!({
                "target": a.target.name, "rounds": rs.len(), "errors": errors,
                "c1_p50_us": r1(med(rs, false, "p50_us")), "c1_p99_us": r1(med(rs, false, "p99_us")),
                "c1_p999_us": r1(med(rs, false, "p999_us")), "c1_cpu_us_per_req": r1(med(rs, false, "cpu_us_per_req")),
                "c32_rps": r1(med(rs, true, "rps")), "c32_p99_us": r1(med(rs, true, "p99_us")),
                "c32_cpu_us_per_req": r1(med(rs, true, "cpu_us_per_req")),
                "c1_cpu_ratio": (med(rs, false, "cpu_us_per_req") / base * 100.0).round() / 100.0,
                "c32_cpu_ratio": (med(rs, true, "cpu_us_per_req") / base32 * 100.0).round() / 100.0,
                "rss_mib": med(rs, true, "rss_mib"),
            })
        })
        .collect()
}

/// S1: c=1 non-streaming, 0.5 KB and 10 KB replies; medians of `rounds` round values.
pub async fn s1(rig: &Rig, o: &Opts, sizes: &[(bool, usize)]) -> Value {
    let mut out = Vec::new();
    for &(openai, size) in sizes {
        let req = if openai {
            Req::openai("gpt-bench", &format!("s={size}"), false)
        } else {
            Req::anthropic("claude-bench", &format!("s={size}"), false)
        };
        for t in rig.targets() {
            let _ = load::closed_loop(t.addr, &req, 1, Duration::from_millis(500), 1_000_000).await;
        }
        let mut rounds: Vec<[Value; 3]> = Vec::new();
        for _ in 0..o.rounds {
            let [d, fl, s] = rig.targets();
            rounds.push([
                window(rig, d, &req, 1, o.dur()).await,
                window(rig, fl, &req, 1, o.dur()).await,
                window(rig, s, &req, 1, o.dur()).await,
            ]);
        }
        for (i, t) in rig.targets().iter().enumerate() {
            let col = |k: &str| median(rounds.iter().map(|r| f(&r[i], k)).collect());
            let added =
                |k: &str| median(rounds.iter().map(|r| f(&r[i], k) - f(&r[0], k)).collect());
            out.push(json!({
                "target": t.name, "size": size, "dialect": if openai { "openai" } else { "anthropic" },
                "p50_us": r1(col("p50_us")), "p99_us": r1(col("p99_us")), "p999_us": r1(col("p999_us")),
                "added_p50_us": r1(added("p50_us")), "added_p99_us": r1(added("p99_us")), "added_p999_us": r1(added("p999_us")),
                "cpu_us_per_req": r1(col("cpu_us_per_req")), "cs_per_req": r1(col("cs_per_req")),
                "rss_mib": col("rss_mib"), "rounds": o.rounds,
            }));
        }
    }
    Value::Array(out)
}

/// S2: closed-loop sweep over `cs`; one window per target per concurrency, plus the frontier.
pub async fn s2(rig: &Rig, o: &Opts, cs: &[usize]) -> Value {
    let req = Req::anthropic("claude-bench", "s=500", false);
    let mut rows = Vec::new();
    for &c in cs {
        for t in rig.targets() {
            rows.push(window(rig, t, &req, c, o.dur()).await);
        }
    }
    let mut frontier = Vec::new();
    for t in rig.targets() {
        let mine: Vec<&Value> = rows.iter().filter(|r| r["target"] == t.name).collect();
        let best = |limit: f64| {
            mine.iter()
                .filter(|r| f(r, "p99_us") <= limit && f(r, "errors") == 0.0)
                .map(|r| f(r, "rps"))
                .fold(0.0, f64::max)
        };
        frontier.push(json!({
            "target": t.name, "rps_p99_le_1ms": best(1_000.0), "rps_p99_le_5ms": best(5_000.0),
            "rps_p99_le_10ms": best(10_000.0), "rps_max": best(f64::MAX),
        }));
    }
    json!({ "rows": rows, "frontier": frontier })
}

/// One SSE window on `t`.
async fn sse_window(
    rig: &Rig,
    t: Target,
    pace_ms: u64,
    c: usize,
    per_conn: u64,
    dur: Duration,
) -> Value {
    let frames = 64;
    let req = Req::anthropic("claude-bench", &format!("f={frames};i={pace_ms}"), true);
    let stall = if pace_ms == 0 {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(100.max(pace_ms * 5))
    };
    let before = procfs::sample(t.pid);
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watch = {
        let peak = peak.clone();
        let pid = t.pid;
        tokio::spawn(async move {
            for _ in 0..600 {
                let rss = procfs::sample(pid).rss_kib;
                peak.fetch_max(rss, std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };
    let events = expected_events(false, frames) as u64;
    let r = load::sse(t.addr, &req, events, c, per_conn, dur, stall).await;
    watch.abort();
    let after = procfs::sample(t.pid);
    let us =
        |h: &hdrhistogram::Histogram<u64>, q: f64| r1(h.value_at_percentile(q) as f64 / 1000.0);
    json!({
        "target": t.name, "pace_ms": pace_ms, "c": c, "streams": r.streams, "errors": r.errors,
        "ttfb_p50_us": us(&r.ttfb, 50.0), "ttfb_p99_us": us(&r.ttfb, 99.0),
        "gap_p50_us": us(&r.gaps, 50.0), "gap_p99_us": us(&r.gaps, 99.0),
        "frames": r.frames, "expected": r.expected, "lost": r.expected.saturating_sub(r.frames),
        "stalls": r.stalls, "max_gap_ms": r1(r.max_gap_ns as f64 / 1e6),
        "cpu_us_per_frame": r1(rig.cpu_us(after.cpu_ticks.saturating_sub(before.cpu_ticks)) / r.frames.max(1) as f64),
        "rss_mib": mib(after.rss_kib),
        "peak_rss_mib": mib(peak.load(std::sync::atomic::Ordering::Relaxed).max(after.rss_kib)),
    })
}

/// S4: SSE unpaced (64 frames) at each of `unpaced`, paced 20 ms × 64 at each of `paced`.
pub async fn s4(rig: &Rig, o: &Opts, unpaced: &[usize], paced: &[usize]) -> Value {
    let mut rows = Vec::new();
    for &c in unpaced {
        let mut group = Vec::new();
        for t in rig.targets() {
            group.push(sse_window(rig, t, 0, c, 1_000_000, o.dur()).await);
        }
        add_vs_direct(&mut group);
        rows.extend(group);
    }
    for &c in paced {
        let mut group = Vec::new();
        for t in rig.targets() {
            // Two streams each (about 2.6 s), bounded by 10 s.
            group.push(sse_window(rig, t, 20, c, 2, Duration::from_secs(10)).await);
        }
        add_vs_direct(&mut group);
        rows.extend(group);
    }
    Value::Array(rows)
}

fn add_vs_direct(group: &mut [Value]) {
    let (d_ttfb, d_gap) = (f(&group[0], "ttfb_p99_us"), f(&group[0], "gap_p99_us"));
    for g in group.iter_mut() {
        let (t, gp) = (f(g, "ttfb_p99_us"), f(g, "gap_p99_us"));
        g["added_ttfb_p99_us"] = json!(r1(t - d_ttfb));
        g["added_gap_p99_us"] = json!(r1(gp - d_gap));
    }
}

/// Saturation-then-c=1: a fresh sluice's c=1 p99, then `sat_secs` at c=32, then c=1 again.
pub async fn saturation(rig: &mut Rig, o: &Opts) -> std::io::Result<Value> {
    rig.restart_sluice(o).await?;
    let t = rig.targets()[2];
    Ok(sat_sequence(rig, t, o).await)
}

/// The same sequence on a fresh floor process, as the control for sluice's after/fresh
/// ratios: what the machine, the mock and the kernel's state after a burst do to a proxy
/// that keeps nothing. Run by `sat` and `all`, not by the guard (it doubles the time).
pub async fn saturation_floor(rig: &Rig, o: &Opts) -> std::io::Result<Value> {
    let fl = targets::floor(o.place, rig.mock.addr, 0).await?;
    let t = Target {
        name: "floor (fresh)",
        addr: fl.addr,
        pid: fl.pid(),
    };
    Ok(sat_sequence(rig, t, o).await)
}

/// c=1 on `t`, then `sat_secs` at c=32, then c=1 again, with the after/fresh ratios.
async fn sat_sequence(rig: &Rig, t: Target, o: &Opts) -> Value {
    let req = Req::anthropic("claude-bench", "s=500", false);
    let _ = load::closed_loop(t.addr, &req, 1, Duration::from_millis(500), 1_000_000).await;
    let fresh = window(rig, t, &req, 1, o.dur()).await;
    let rss_fresh = procfs::sample(t.pid).rss_kib;
    let sat = window(rig, t, &req, 32, Duration::from_secs_f64(o.sat_secs)).await;
    let after = window(rig, t, &req, 1, o.dur()).await;
    json!({
        "fresh": fresh, "saturation": sat, "after": after,
        "p99_ratio": ratio(f(&after, "p99_us"), f(&fresh, "p99_us")),
        "p999_ratio": ratio(f(&after, "p999_us"), f(&fresh, "p999_us")),
        "rss_fresh_mib": mib(rss_fresh), "sat_secs": o.sat_secs,
    })
}

/// `after / fresh` to two decimals (`fresh` taken as at least 1).
fn ratio(after: f64, fresh: f64) -> f64 {
    (after / fresh.max(1.0) * 100.0).round() / 100.0
}

pub(crate) async fn get_json(addr: SocketAddr, path: &str) -> Value {
    let Ok(mut s) = tokio::net::TcpStream::connect(addr).await else {
        return Value::Null;
    };
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let req = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    if s.write_all(req.as_bytes()).await.is_err() {
        return Value::Null;
    }
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut buf)).await;
    let text = String::from_utf8_lossy(&buf);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    // Tolerate chunked framing: parse from the first '{' to the last '}'.
    let (a, b) = (body.find('{'), body.rfind('}'));
    match (a, b) {
        (Some(a), Some(b)) if b > a => serde_json::from_str(&body[a..=b]).unwrap_or(Value::Null),
        _ => Value::Null,
    }
}

/// S7: fast-fail while the `bad` provider's breaker is open, vs direct c=1 p50.
pub async fn s7(rig: &Rig, o: &Opts) -> Value {
    let [d, _, s] = rig.targets();
    let ok = Req::anthropic("claude-bench", "s=500", false);
    let direct = window(rig, d, &ok, 1, o.dur()).await;
    let mut fail = Req::anthropic("broken", "x=500", false);
    fail.expect_ok = false;
    // Trip it: the local profile opens after 2 failures.
    let _ = load::closed_loop(s.addr, &fail, 1, Duration::from_secs(2), 5).await;
    let up0 = get_json(rig.mock.addr, "/stats").await["requests"]
        .as_u64()
        .unwrap_or(0);
    let open = window(rig, s, &fail, 1, o.dur().min(Duration::from_secs(5))).await;
    let up1 = get_json(rig.mock.addr, "/stats").await["requests"]
        .as_u64()
        .unwrap_or(0);
    let state = match rig.sluice.admin {
        Some(a) => {
            let snap = get_json(a, "/api/snapshot").await;
            snap["providers"]
                .as_array()
                .and_then(|ps| ps.iter().find(|p| p["id"] == "bad"))
                .map(|p| p["breaker"]["state"].clone())
                .unwrap_or(Value::Null)
        }
        None => Value::Null,
    };
    let mut v = fast_fail_baselines(f(&direct, "p50_us"), direct_on_proxy_cpu(rig, o).await);
    merge(
        &mut v,
        json!({
            "fast_fail": open, "fast_fail_p50_us": f(&open, "p50_us"),
            "fast_fail_p99_us": f(&open, "p99_us"),
            "upstream_requests_during": up1.saturating_sub(up0), "breaker_state": state,
        }),
    );
    v
}

/// Adds `more`'s fields to the object `v`.
pub(crate) fn merge(v: &mut Value, more: Value) {
    if let (Some(o), Value::Object(m)) = (v.as_object_mut(), more) {
        o.extend(m);
    }
}

/// S8: sluice RSS idle, at 1,024 paced streams, and `recover_secs` later (the floor too);
/// then, on a fresh sluice, the soak (`soak_secs` at `soak_rps`, see [`crate::soak`]).
pub async fn s8(rig: &mut Rig, o: &Opts) -> std::io::Result<Value> {
    rig.restart_sluice(o).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let [_, fl, s] = rig.targets();
    let idle = procfs::sample(s.pid).rss_kib;
    let idle_floor = procfs::sample(fl.pid).rss_kib;
    let mut rows = Vec::new();
    for t in [fl, s] {
        rows.push(sse_window(rig, t, 20, 1024, 1, Duration::from_secs(15)).await);
    }
    let at_load = procfs::sample(s.pid);
    tokio::time::sleep(Duration::from_secs_f64(o.recover_secs)).await;
    let rec = procfs::sample(s.pid).rss_kib;
    let rec_floor = procfs::sample(fl.pid).rss_kib;
    let goal = 1.5 * mib(idle) + 8.0;
    Ok(json!({
        "idle_mib": mib(idle), "peak_mib": f(&rows[1], "peak_rss_mib"), "hwm_mib": mib(at_load.hwm_kib),
        "after_streams_mib": mib(at_load.rss_kib), "recovered_mib": mib(rec), "recover_secs": o.recover_secs,
        "recovered_goal_mib": r1(goal), "floor_idle_mib": mib(idle_floor), "floor_peak_mib": f(&rows[0], "peak_rss_mib"),
        "floor_recovered_mib": mib(rec_floor), "streams": rows,
        "soak": if o.soak_secs > 0.0 { crate::soak::soak(rig, o).await? } else { Value::Null },
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_fail_goals_come_from_both_baselines() {
        let mut v = fast_fail_baselines(22.0, Some(86.5));
        merge(&mut v, json!({ "fast_fail_p50_us": 114.2 }));
        assert_eq!(f(&v, "goal_us"), 72.0);
        assert_eq!(f(&v, "goal_proxy_cpu_us"), 136.5);
        assert_eq!(f(&v, "fast_fail_p50_us"), 114.2);
        let free = fast_fail_baselines(22.0, None);
        assert!(
            free["goal_proxy_cpu_us"].is_null(),
            "Mode B has no second baseline"
        );
    }
}
