//! Markdown tables regenerated from the JSON results, and the machine description.

use std::fmt::Write as _;

use serde_json::Value;

fn n(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::Number(x)) => x.to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Null) | None => "–".into(),
        Some(other) => other.to_string(),
    }
}

fn table(out: &mut String, rows: &[Value], cols: &[(&str, &str)]) {
    let _ = writeln!(
        out,
        "| {} |",
        cols.iter().map(|c| c.1).collect::<Vec<_>>().join(" | ")
    );
    let _ = writeln!(out, "|{}", "---|".repeat(cols.len()));
    for r in rows {
        let _ = writeln!(
            out,
            "| {} |",
            cols.iter()
                .map(|c| n(r, c.0))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
    out.push('\n');
}

fn arr(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// A description of this machine: CPU model, cores, kernel, load.
pub fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let load = std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string();
    // Counted from /proc/cpuinfo: the rig pins itself, so available_parallelism says 1.
    let cores = std::fs::read_to_string("/proc/cpuinfo").map_or(0, |s| {
        s.lines().filter(|l| l.starts_with("processor")).count()
    });
    serde_json::json!({ "cpu": cpu, "cores": cores, "kernel": kernel, "loadavg_at_start": load })
}

/// Renders every scenario present in `res`.
pub fn markdown(res: &Value) -> String {
    let mut o = String::new();
    let m = &res["machine"];
    let _ = writeln!(o, "# sluice benchmark results\n");
    let _ = writeln!(o, "Command: `{}`  ", n(res, "command"));
    let _ = writeln!(
        o,
        "Machine: {} ({} cores), kernel {}, load average at start {}  ",
        n(m, "cpu"),
        n(m, "cores"),
        n(m, "kernel"),
        n(m, "loadavg_at_start")
    );
    let _ = writeln!(
        o,
        "Placement: {}; {} s windows; started {} (Unix s)\n",
        n(res, "placement"),
        n(res, "secs"),
        n(res, "started_unix")
    );
    let _ = writeln!(
        o,
        "Times in µs; \"added\" is the target minus direct-to-mock in the same round (median of rounds). CPU is the target process's own utime+stime per request.\n"
    );
    if let Some(s1) = res.get("s1") {
        let _ = writeln!(o, "## S1 — c=1 non-streaming added latency\n");
        table(
            &mut o,
            &arr(s1),
            &[
                ("target", "target"),
                ("dialect", "dialect"),
                ("size", "reply B"),
                ("p50_us", "p50"),
                ("p99_us", "p99"),
                ("p999_us", "p99.9"),
                ("added_p50_us", "added p50"),
                ("added_p99_us", "added p99"),
                ("added_p999_us", "added p99.9"),
                ("cpu_us_per_req", "CPU µs/req"),
                ("cs_per_req", "ctx sw/req"),
                ("rss_mib", "RSS MiB"),
            ],
        );
    }
    if let Some(s2) = res.get("s2") {
        let _ = writeln!(o, "## S2 — concurrency sweep\n");
        table(
            &mut o,
            &arr(&s2["rows"]),
            &[
                ("target", "target"),
                ("c", "c"),
                ("rps", "req/s"),
                ("p50_us", "p50"),
                ("p99_us", "p99"),
                ("p999_us", "p99.9"),
                ("errors", "errors"),
                ("cpu_us_per_req", "CPU µs/req"),
                ("cs_per_req", "ctx sw/req"),
                ("rss_mib", "RSS MiB"),
            ],
        );
        let _ = writeln!(
            o,
            "Throughput frontier (max req/s with p99 under the limit, no errors):\n"
        );
        table(
            &mut o,
            &arr(&s2["frontier"]),
            &[
                ("target", "target"),
                ("rps_p99_le_1ms", "p99 ≤ 1 ms"),
                ("rps_p99_le_5ms", "p99 ≤ 5 ms"),
                ("rps_p99_le_10ms", "p99 ≤ 10 ms"),
                ("rps_max", "max"),
            ],
        );
    }
    if let Some(s4) = res.get("s4") {
        let _ = writeln!(
            o,
            "## S4 — SSE (64 frames; pace 0 = unpaced, 20 = 20 ms apart)\n"
        );
        table(
            &mut o,
            &arr(s4),
            &[
                ("target", "target"),
                ("pace_ms", "pace ms"),
                ("c", "streams at once"),
                ("streams", "streams"),
                ("ttfb_p50_us", "TTFB p50"),
                ("ttfb_p99_us", "TTFB p99"),
                ("added_ttfb_p99_us", "added TTFB p99"),
                ("gap_p99_us", "gap p99"),
                ("added_gap_p99_us", "added gap p99"),
                ("lost", "frames lost"),
                ("stalls", "stalls"),
                ("max_gap_ms", "max gap ms"),
                ("cpu_us_per_frame", "CPU µs/frame"),
                ("peak_rss_mib", "peak RSS MiB"),
                ("errors", "errors"),
            ],
        );
    }
    if let Some(s) = res.get("saturation") {
        let _ = writeln!(o, "## Saturation then c=1 (sluice, fresh process)\n");
        let rows: Vec<Value> = ["fresh", "saturation", "after"]
            .iter()
            .map(|k| {
                let mut r = s[*k].clone();
                r["phase"] = Value::String((*k).into());
                r
            })
            .collect();
        table(
            &mut o,
            &rows,
            &[
                ("phase", "phase"),
                ("c", "c"),
                ("rps", "req/s"),
                ("p50_us", "p50"),
                ("p99_us", "p99"),
                ("p999_us", "p99.9"),
                ("cpu_us_per_req", "CPU µs/req"),
                ("rss_mib", "RSS MiB"),
            ],
        );
        let _ = writeln!(
            o,
            "After {} s of saturation: c=1 p99 ratio after/fresh = {}, p99.9 ratio = {}\n",
            n(s, "sat_secs"),
            n(s, "p99_ratio"),
            n(s, "p999_ratio")
        );
        if let Some(fl) = s.get("floor") {
            let _ = writeln!(
                o,
                "Control, the same sequence on a fresh floor process: p99 ratio after/fresh = {}, p99.9 ratio = {} (fresh p99 {} µs, after {} µs)\n",
                n(fl, "p99_ratio"),
                n(fl, "p999_ratio"),
                n(&fl["fresh"], "p99_us"),
                n(&fl["after"], "p99_us")
            );
        }
    }
    if let Some(s5) = res.get("s5") {
        s5_tables(&mut o, s5);
    }
    if let Some(s6) = res.get("s6") {
        s6_tables(&mut o, s6);
    }
    if let Some(s7) = res.get("s7") {
        let _ = writeln!(o, "## S7 — fast-fail with the breaker open\n");
        let _ = writeln!(
            o,
            "| direct c=1 p50 | direct c=1 p50, mock on sluice's CPU | fast-fail p50 | fast-fail p99 | goal (direct p50 + 50) | goal, mock on sluice's CPU | upstream requests during window | breaker |\n|---|---|---|---|---|---|---|---|"
        );
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            n(s7, "direct_p50_us"),
            n(s7, "direct_proxy_cpu_p50_us"),
            n(s7, "fast_fail_p50_us"),
            n(s7, "fast_fail_p99_us"),
            n(s7, "goal_us"),
            n(s7, "goal_proxy_cpu_us"),
            n(s7, "upstream_requests_during"),
            n(s7, "breaker_state")
        );
    }
    if let Some(s8) = res.get("s8") {
        let _ = writeln!(o, "## S8 — memory (MiB)\n");
        let _ = writeln!(
            o,
            "| process | idle | peak at 1,024 paced streams | recovered ({} s later) | recovered goal |\n|---|---|---|---|---|",
            n(s8, "recover_secs")
        );
        let _ = writeln!(
            o,
            "| sluice | {} | {} | {} | {} |",
            n(s8, "idle_mib"),
            n(s8, "peak_mib"),
            n(s8, "recovered_mib"),
            n(s8, "recovered_goal_mib")
        );
        let _ = writeln!(
            o,
            "| floor | {} | {} | {} | – |\n",
            n(s8, "floor_idle_mib"),
            n(s8, "floor_peak_mib"),
            n(s8, "floor_recovered_mib")
        );
        table(
            &mut o,
            &arr(&s8["streams"]),
            &[
                ("target", "target"),
                ("c", "streams"),
                ("streams", "completed"),
                ("lost", "frames lost"),
                ("stalls", "stalls"),
                ("max_gap_ms", "max gap ms"),
                ("ttfb_p99_us", "TTFB p99"),
                ("errors", "errors"),
            ],
        );
        if s8["soak"].is_object() {
            soak_tables(&mut o, &s8["soak"]);
        }
    }
    if let Some(g) = res.get("guard") {
        let _ = writeln!(o, "## Regression guard\n");
        table(
            &mut o,
            &arr(g),
            &[
                ("check", "check"),
                ("measured", "measured"),
                ("limit", "limit"),
                ("pass", "pass"),
            ],
        );
    }
    o
}

fn soak_tables(o: &mut String, soak: &Value) {
    let _ = writeln!(
        o,
        "### S8 soak — a fresh sluice, {} s open-loop at {} req/s (half of them {}-frame streams paced {} ms), RSS sampled every 5 s\n",
        n(soak, "secs"),
        n(soak, "rps"),
        n(soak, "stream_frames"),
        n(soak, "stream_pace_ms")
    );
    let recovered = format!("recovered ({} s later)", n(soak, "recover_secs"));
    table(
        o,
        std::slice::from_ref(soak),
        &[
            ("idle_mib", "idle"),
            ("steady_median_mib", "steady (median)"),
            ("peak_mib", "peak"),
            ("end_mib", "end"),
            ("growth_mib_per_min", "growth after warm-up, MiB/min"),
            ("growth_second_half_mib_per_min", "growth, second half"),
            ("plateau", "plateau"),
            ("errors", "errors"),
            ("recovered_mib", &recovered),
        ],
    );
    table(
        o,
        &arr(&soak["rows"]),
        &[
            ("from_s", "from s"),
            ("sent_per_s", "sent/s"),
            ("errors", "errors"),
            ("late", "late"),
            ("p50_us", "p50 µs"),
            ("p99_us", "p99 µs"),
            ("p999_us", "p99.9 µs"),
            ("ttfb_p99_us", "stream TTFB p99 µs"),
            ("lost", "frames lost"),
            ("max_gap_ms", "max gap ms"),
            ("cpu_us_per_req", "CPU µs/req"),
            ("rss_mib", "RSS MiB"),
        ],
    );
}

fn s5_tables(o: &mut String, s5: &Value) {
    let _ = writeln!(
        o,
        "## S5 — state scaling (one combo per model, requested model chosen at random; CPU ratio to 1×1)\n"
    );
    table(
        o,
        &arr(&s5["rows"]),
        &[
            ("target", "state"),
            ("models", "models"),
            ("lockouts", "lockouts held"),
            ("c1_p50_us", "c=1 p50"),
            ("c1_p99_us", "c=1 p99"),
            ("c1_cpu_us_per_req", "c=1 CPU µs/req"),
            ("c1_cpu_ratio", "c=1 CPU ratio"),
            ("c32_rps", "c=32 req/s"),
            ("c32_cpu_us_per_req", "c=32 CPU µs/req"),
            ("c32_cpu_ratio", "c=32 CPU ratio"),
            ("rss_mib", "RSS MiB"),
            ("start_ms", "start ms"),
            ("snapshot_ms", "snapshot ms"),
            ("snapshot_kib", "snapshot KiB"),
            ("errors", "errors"),
        ],
    );
    let f = &s5["lockout_fast_fail"];
    if !f.is_null() {
        let _ = writeln!(
            o,
            "Lockout fast-fail (requests for locked models, 10,000 lockouts held): p50 {} µs, p99 {} µs, goal (direct p50 + 50) {} µs, goal with the mock on sluice's CPU {} µs, {} requests, {} reached the upstream\n",
            n(f, "fast_fail_p50_us"),
            n(f, "fast_fail_p99_us"),
            n(f, "goal_us"),
            n(f, "goal_proxy_cpu_us"),
            n(f, "requests"),
            n(f, "upstream_requests_during")
        );
    }
}

fn s6_tables(o: &mut String, s6: &Value) {
    let _ = writeln!(
        o,
        "## S6 — feature ladder (Δ = change from the row above; CPU ratio to the floor)\n"
    );
    table(
        o,
        &arr(&s6["rows"]),
        &[
            ("target", "step"),
            ("c1_cpu_us_per_req", "c=1 CPU µs/req"),
            ("delta_c1_cpu_us_per_req", "Δ"),
            ("c32_cpu_us_per_req", "c=32 CPU µs/req"),
            ("delta_c32_cpu_us_per_req", "Δ"),
            ("c32_cpu_ratio", "c=32 CPU ratio"),
            ("c1_p99_us", "c=1 p99"),
            ("delta_c1_p99_us", "Δ"),
            ("c1_p999_us", "c=1 p99.9"),
            ("delta_c1_p999_us", "Δ"),
            ("c32_rps", "c=32 req/s"),
            ("errors", "errors"),
        ],
    );
    let c = &s6["console_ab"];
    if !c.is_null() {
        let _ = writeln!(
            o,
            "S9 console A/B (last two rows): c=1 p99.9 {} → {} µs (Δ {}), c=1 p99 {} → {} µs, c=32 {} → {} req/s, CPU {} → {} µs/req\n",
            n(c, "off_c1_p999_us"),
            n(c, "on_c1_p999_us"),
            n(c, "delta_c1_p999_us"),
            n(c, "off_c1_p99_us"),
            n(c, "on_c1_p99_us"),
            n(c, "off_c32_rps"),
            n(c, "on_c32_rps"),
            n(c, "off_c32_cpu_us_per_req"),
            n(c, "on_c32_cpu_us_per_req")
        );
    }
}
