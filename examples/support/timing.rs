//! Timing for the cost examples (`translate_cost`, `console_frame`), included with
//! `#[path = "support/timing.rs"] mod timing;`.

use sluice::clock::{Clock, SystemClock};

/// Microseconds one call of a measured function took.
pub struct Timing {
    /// The median over the measured runs.
    pub median: f64,
    /// The 99th percentile over the measured runs.
    #[allow(dead_code, reason = "translate_cost reports medians only")]
    pub p99: f64,
}

/// Times `f` over `n` runs (at least one), after `n / 10` warm-up runs.
pub fn timed(n: usize, mut f: impl FnMut()) -> Timing {
    let clock = SystemClock;
    for _ in 0..n / 10 {
        f();
    }
    let mut v: Vec<f64> = (0..n.max(1))
        .map(|_| {
            let t0 = clock.now();
            f();
            clock.now().duration_since(t0).as_secs_f64() * 1e6
        })
        .collect();
    v.sort_by(f64::total_cmp);
    Timing {
        median: v[v.len() / 2],
        p99: v[v.len() * 99 / 100],
    }
}
