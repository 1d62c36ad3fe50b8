//! `sluice-bench`: the benchmark harness. `cargo run --release -p sluice-bench -- all` builds
//! sluice, starts the mock, the floor proxy and sluice as child processes on 127.0.0.1, runs the
//! scenarios direct → floor → sluice interleaved, and writes `bench/results/all.{json,md}`.
//! `guard` is the short CI regression check (exit 1 when a ratio is out of bounds).
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::disallowed_methods,
    reason = "a benchmark tool reads real time and prints its tables"
)]

mod floor;
mod ladder;
mod load;
mod mock;
mod paced;
mod procfs;
mod report;
mod scaling;
mod scenarios;
mod soak;
mod targets;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use serde_json::{Value, json};

use scenarios::{Opts, Rig};
use targets::Placement;

#[derive(Parser)]
#[command(about = "sluice benchmark harness (mock upstream, floor proxy, load, SSE probe)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// `pinned` (Mode A: servers under test on CPU 1 with one worker) or `free` (Mode B).
    #[arg(long, global = true, default_value = "pinned")]
    mode: String,
    /// Rounds of S1.
    #[arg(long, global = true, default_value_t = 5)]
    rounds: usize,
    /// Seconds per measurement window.
    #[arg(long, global = true, default_value_t = 3.0)]
    secs: f64,
    /// Seconds of saturation before the second c=1 run.
    #[arg(long, global = true, default_value_t = 60.0)]
    sat_secs: f64,
    /// Seconds to wait before reading recovered RSS (S8).
    #[arg(long, global = true, default_value_t = 60.0)]
    recover_secs: f64,
    /// S2's concurrency levels, comma-separated (default: the sweep 1,2,4,…,1024).
    #[arg(
        long,
        global = true,
        value_delimiter = ',',
        default_value = "1,2,4,8,16,32,64,128,256,512,1024"
    )]
    conc: Vec<usize>,
    /// Seconds of S8's soak (open-loop, half the requests streaming; 0 leaves it out).
    #[arg(long, global = true, default_value_t = 600.0)]
    soak_secs: f64,
    /// Requests per second of S8's soak.
    #[arg(long, global = true, default_value_t = 2000.0)]
    soak_rps: f64,
    /// Where JSON and Markdown results go.
    #[arg(long, global = true, default_value = "bench/results")]
    out: PathBuf,
    /// Guard self-test: a shim adding this many µs per request sits in front of sluice.
    #[arg(
        long,
        global = true,
        env = "SLUICE_BENCH_INJECT_DELAY_US",
        default_value_t = 0
    )]
    inject_delay_us: u64,
}

#[derive(Subcommand, Clone, PartialEq, Eq)]
enum Cmd {
    /// Runs the mock upstream.
    Mock {
        #[arg(long)]
        listen: SocketAddr,
    },
    /// Runs the floor pass-through proxy.
    Floor {
        #[arg(long)]
        listen: SocketAddr,
        #[arg(long)]
        upstream: SocketAddr,
        #[arg(long, default_value_t = 0)]
        delay_us: u64,
    },
    /// Every scenario: S1, S2, S4, S5, S6 (with S9's console A/B), saturation-then-c=1, S7,
    /// S8.
    All,
    /// S1: c=1 added latency.
    S1,
    /// S2: concurrency sweep and throughput frontier.
    S2,
    /// S4: SSE unpaced and paced.
    S4,
    /// S5: state scaling (1×1 … 50 providers × 200 models, up to 10,000 lockouts).
    S5,
    /// S6: the feature ladder, ending with the console drawn in a pty (S9's A/B).
    S6,
    /// Saturation then c=1.
    Sat,
    /// S7: breaker fast-fail.
    S7,
    /// S8: memory idle / 1,024 streams / recovered, then the soak (10 min at 2,000 req/s,
    /// half streaming, by default).
    S8,
    /// The short CI regression guard (≤ 60 s); exits 1 on failure.
    Guard,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd.clone() {
        Cmd::Mock { listen } => serve(move || mock::run(listen)),
        Cmd::Floor {
            listen,
            upstream,
            delay_us,
        } => serve(move || floor::run(listen, upstream, Duration::from_micros(delay_us))),
        cmd => drive(&cli, cmd),
    }
}

fn serve<F, Fut>(f: F) -> ExitCode
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = std::io::Result<()>>,
{
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(f()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("server: {e}");
            ExitCode::FAILURE
        }
    }
}

fn drive(cli: &Cli, cmd: Cmd) -> ExitCode {
    let place = if cli.mode == "free" {
        Placement::Free
    } else {
        Placement::Pinned
    };
    if let Err(e) = targets::build_sluice() {
        eprintln!("sluice-bench: {e}");
        return ExitCode::FAILURE;
    }
    targets::pin_self(place);
    let work = std::env::temp_dir().join(format!("sluice-bench-{}", std::process::id()));
    let mut o = Opts {
        place,
        rounds: cli.rounds,
        secs: cli.secs,
        sat_secs: cli.sat_secs,
        recover_secs: cli.recover_secs,
        work: work.clone(),
        inject_delay_us: cli.inject_delay_us,
        conc: cli.conc.clone(),
        soak_secs: cli.soak_secs,
        soak_rps: cli.soak_rps,
    };
    if cmd == Cmd::Guard {
        o.rounds = o.rounds.min(3);
        o.secs = o.secs.min(2.0);
        o.sat_secs = o.sat_secs.min(15.0);
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let name = match cmd {
        Cmd::All => "all",
        Cmd::S1 => "s1",
        Cmd::S2 => "s2",
        Cmd::S4 => "s4",
        Cmd::S5 => "s5",
        Cmd::S6 => "s6",
        Cmd::Sat => "sat",
        Cmd::S7 => "s7",
        Cmd::S8 => "s8",
        _ => "guard",
    };
    let mut result = rt.block_on(run(cmd.clone(), &o));
    // A noisy machine can fail one guard run; it fails only when a second run fails too.
    if cmd == Cmd::Guard
        && let Ok(first) = &result
        && first["guard_failed"].as_bool().unwrap_or(false)
    {
        println!("{}", report::markdown(first));
        eprintln!("sluice-bench guard: a check failed; running the guard once more");
        result = rt.block_on(run(cmd.clone(), &o));
    }
    let _ = std::fs::remove_dir_all(&work);
    let mut res = match result {
        Ok(v) => v,
        Err(e) => {
            eprintln!("sluice-bench: {e}");
            return ExitCode::FAILURE;
        }
    };
    res["command"] = json!(std::env::args().skip(1).collect::<Vec<_>>().join(" "));
    let md = report::markdown(&res);
    println!("{md}");
    let out = if cmd == Cmd::Guard && cli.out == *"bench/results" {
        PathBuf::from("target/bench-guard")
    } else {
        cli.out.clone()
    };
    let _ = std::fs::create_dir_all(&out);
    let json_text = serde_json::to_string_pretty(&res).unwrap_or_default();
    if std::fs::write(out.join(format!("{name}.json")), json_text).is_err()
        || std::fs::write(out.join(format!("{name}.md")), md).is_err()
    {
        eprintln!("sluice-bench: cannot write results under {}", out.display());
    }
    if res["guard_failed"].as_bool().unwrap_or(false) {
        eprintln!("sluice-bench guard: FAILED (see the table above)");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

async fn run(cmd: Cmd, o: &Opts) -> std::io::Result<Value> {
    let mut rig = Rig::start(o).await?;
    let mut res = json!({
        "machine": report::machine(),
        "placement": if o.place == Placement::Pinned { "Mode A (sluice and floor pinned to CPU 1 with one runtime worker; mock and rig on CPU 0)" } else { "Mode B (unpinned, default runtimes)" },
        "secs": o.secs,
        "started_unix": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
    });
    let all = cmd == Cmd::All;
    if all || cmd == Cmd::S1 {
        eprintln!("S1 …");
        res["s1"] = scenarios::s1(&rig, o, &[(false, 500), (false, 10_240), (true, 500)]).await;
    }
    if all || cmd == Cmd::S2 {
        eprintln!("S2 …");
        res["s2"] = scenarios::s2(&rig, o, &o.conc).await;
    }
    if all || cmd == Cmd::S4 {
        eprintln!("S4 …");
        res["s4"] = scenarios::s4(&rig, o, &[1, 16], &[1, 64, 256, 1024]).await;
    }
    if all || cmd == Cmd::S5 {
        eprintln!("S5 …");
        res["s5"] = scaling::s5(&rig, o).await?;
    }
    if all || cmd == Cmd::S6 {
        eprintln!("S6 …");
        res["s6"] = ladder::s6(&rig, o).await?;
    }
    if all || cmd == Cmd::S7 {
        eprintln!("S7 …");
        res["s7"] = scenarios::s7(&rig, o).await;
    }
    if all || cmd == Cmd::Sat {
        eprintln!("saturation …");
        res["saturation"] = scenarios::saturation(&mut rig, o).await?;
        res["saturation"]["floor"] = scenarios::saturation_floor(&rig, o).await?;
    }
    if all || cmd == Cmd::S8 {
        eprintln!("S8 …");
        res["s8"] = scenarios::s8(&mut rig, o).await?;
    }
    if cmd == Cmd::Guard {
        guard(&mut rig, o, &mut res).await?;
    }
    Ok(res)
}

/// S10: S1 + S4 + saturation-then-c=1 with generous ratio bounds and one absolute bound.
async fn guard(rig: &mut Rig, o: &Opts, res: &mut Value) -> std::io::Result<()> {
    res["s1"] = scenarios::s1(rig, o, &[(false, 500)]).await;
    res["s4"] = scenarios::s4(rig, o, &[1], &[64]).await;
    res["saturation"] = scenarios::saturation(rig, o).await?;
    let by = |v: &Value, t: &str| {
        v.as_array()
            .and_then(|a| a.iter().find(|r| r["target"] == t).cloned())
            .unwrap_or(Value::Null)
    };
    let g = |v: &Value, k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(f64::NAN);
    let (fl, sl) = (by(&res["s1"], "floor"), by(&res["s1"], "sluice"));
    let s4 = res["s4"].as_array().cloned().unwrap_or_default();
    let sse_unpaced = s4
        .iter()
        .find(|r| r["target"] == "sluice" && r["pace_ms"] == 0)
        .cloned()
        .unwrap_or(Value::Null);
    let sse_paced = s4
        .iter()
        .find(|r| r["target"] == "sluice" && r["pace_ms"] == 20)
        .cloned()
        .unwrap_or(Value::Null);
    let floor_added = g(&fl, "added_p99_us").max(20.0);
    let mut checks = Vec::new();
    let mut check = |name: &str, measured: f64, limit: f64| {
        checks.push(json!({ "check": name, "measured": (measured * 100.0).round() / 100.0, "limit": (limit * 100.0).round() / 100.0, "pass": measured <= limit }));
    };
    check(
        "S1 sluice added p99 / floor added p99 (c=1)",
        g(&sl, "added_p99_us") / floor_added,
        8.0,
    );
    check(
        "S1 sluice added p50, µs (limit: 4 × floor's + 100)",
        g(&sl, "added_p50_us"),
        4.0 * g(&fl, "added_p50_us").max(0.0) + 100.0,
    );
    check(
        "S1 sluice CPU per request / floor's",
        g(&sl, "cpu_us_per_req") / g(&fl, "cpu_us_per_req").max(1.0),
        6.0,
    );
    // 5 ms absolute (a missing TCP_NODELAY shows as ~40 ms); on a machine so loaded that the
    // floor itself is over 5 ms, 4× the floor's, which still catches the 40 ms signature.
    let fl_unpaced = s4
        .iter()
        .find(|r| r["target"] == "floor" && r["pace_ms"] == 0)
        .cloned()
        .unwrap_or(Value::Null);
    let fl_ttfb = g(&fl_unpaced, "ttfb_p99_us");
    check(
        "S4 sluice streaming TTFB p99 at c=1, µs (limit 5,000; 4 × floor if the floor is over)",
        g(&sse_unpaced, "ttfb_p99_us"),
        if fl_ttfb < 5_000.0 {
            5_000.0
        } else {
            4.0 * fl_ttfb
        },
    );
    let fl_paced = s4
        .iter()
        .find(|r| r["target"] == "floor" && r["pace_ms"] == 20)
        .cloned()
        .unwrap_or(Value::Null);
    check(
        "S4 sluice TTFB p99 at 64 paced streams, µs (limit: 4 × floor + 5,000)",
        g(&sse_paced, "ttfb_p99_us"),
        4.0 * g(&fl_paced, "ttfb_p99_us") + 5_000.0,
    );
    check(
        "S4 frames lost (64 paced streams)",
        g(&sse_paced, "lost") + g(&sse_unpaced, "lost"),
        0.0,
    );
    let sat = &res["saturation"];
    let (fresh, after) = (g(&sat["fresh"], "p99_us"), g(&sat["after"], "p99_us"));
    // Generous: this VM's c=1 p99 swings 3× between runs; the defect it guards against (cost
    // growing with recent load) showed as 564 µs → 13.4 ms, far past this bound.
    check(
        "c=1 p99 after saturation, µs (limit: 4 × fresh + 1,000)",
        after,
        4.0 * fresh + 1_000.0,
    );
    let failed = checks.iter().any(|c| c["pass"] != Value::Bool(true));
    res["guard"] = Value::Array(checks);
    res["guard_failed"] = json!(failed);
    Ok(())
}
