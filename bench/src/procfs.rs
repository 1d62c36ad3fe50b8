//! The `/proc` sampler: CPU time, RSS and context switches of one process (all its threads).

use std::fs;

/// One reading of a process.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// Resident set, KiB.
    pub rss_kib: u64,
    /// Peak resident set, KiB.
    pub hwm_kib: u64,
    /// Voluntary context switches, all threads.
    pub vol_cs: u64,
    /// Involuntary context switches, all threads.
    pub nonvol_cs: u64,
    /// Threads.
    pub threads: u64,
}

fn status_field(text: &str, key: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Reads `pid` now (zeros for a process that is gone).
pub fn sample(pid: u32) -> Sample {
    let mut s = Sample::default();
    if let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) {
        // Fields after the `(comm)`: state is field 3; utime 14, stime 15, threads 20.
        if let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            let at = |i: usize| {
                f.get(i - 3)
                    .and_then(|v| v.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            s.cpu_ticks = at(14) + at(15);
            s.threads = at(20);
        }
    }
    if let Ok(st) = fs::read_to_string(format!("/proc/{pid}/status")) {
        s.rss_kib = status_field(&st, "VmRSS:");
        s.hwm_kib = status_field(&st, "VmHWM:");
    }
    if let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(st) = fs::read_to_string(t.path().join("status")) {
                s.vol_cs += status_field(&st, "voluntary_ctxt_switches:");
                s.nonvol_cs += status_field(&st, "nonvoluntary_ctxt_switches:");
            }
        }
    }
    s
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 when unknown).
pub fn clk_tck() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// Steal ticks of the whole machine so far (`/proc/stat`, field 8 of the `cpu` line).
pub fn steal_ticks() -> u64 {
    fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().next().map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(8).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// Total busy + idle ticks of the machine (`/proc/stat` `cpu` line sum).
pub fn total_ticks() -> u64 {
    fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|s| s.lines().next().map(str::to_string))
        .map(|l| {
            l.split_whitespace()
                .skip(1)
                .filter_map(|v| v.parse::<u64>().ok())
                .sum()
        })
        .unwrap_or(0)
}
