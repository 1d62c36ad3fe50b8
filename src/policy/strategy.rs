//! `order`: the try order of a combo's targets under each §4 strategy.
//!
//! A combo lists targets in configured order; [`order`] returns their indices in the order one
//! request tries them (§4 "Strategies"). Every target appears exactly once, so a
//! failed attempt before the first byte can still fall through to all the others. The inputs
//! are plain data ([`TargetStat`] per target, [`StrategyState`] per combo) and randomness comes
//! through [`RngLike`], so tests seed [`SplitMix64`] and get a fixed order.

use crate::config::Strategy;
use crate::policy::latency::{self, Summary};

#[cfg(test)]
mod tests;

/// Weight of a target that names none (the plain `"provider/model"` form).
pub const DEFAULT_WEIGHT: u32 = 1;

/// Live numbers of one combo target, in configured order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetStat {
    /// Requests in flight on it now.
    pub in_flight: u32,
    /// Its concurrency cap (the stricter of its connection and model caps, §4); `None` =
    /// unlimited, never saturated.
    pub cap: Option<u32>,
    /// Requests sent to it so far (for `least_used`).
    pub requests: u64,
    /// Relative weight for `weighted`; default [`DEFAULT_WEIGHT`]. Weight 0 = only after
    /// every positively weighted target, in configured order.
    pub weight: u32,
    /// Its recent time to first byte and errors (for `p2c` with
    /// `[resilience] p2c_latency_weight`); `None` while under [`latency::MIN_SAMPLES`].
    pub health: Option<Summary>,
}

impl Default for TargetStat {
    fn default() -> Self {
        Self {
            in_flight: 0,
            cap: None,
            requests: 0,
            weight: DEFAULT_WEIGHT,
            health: None,
        }
    }
}

impl TargetStat {
    /// True when it holds as many requests as its cap allows (`fill_first` moves on).
    pub fn is_saturated(&self) -> bool {
        self.cap.is_some_and(|c| self.in_flight >= c)
    }
}

/// Per-combo strategy state, owned by the core (one per combo, reset on config reload).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StrategyState {
    /// `round_robin`: how many requests have been ordered; the start is this modulo the
    /// target count.
    pub rotation: u64,
}

/// A source of uniform random `u64`s. Implemented by [`SplitMix64`]; the core may seed it
/// from anything (it need not be cryptographic).
pub trait RngLike {
    /// The next uniformly distributed `u64`.
    fn next_u64(&mut self) -> u64;

    /// Uniform in `0..n` without modulo bias; 0 when `n <= 1`.
    fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        // Reject the low `2^64 mod n` values so every residue is equally likely.
        let threshold = n.wrapping_neg() % n;
        loop {
            let x = self.next_u64();
            if x >= threshold {
                return x % n;
            }
        }
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, fast, seedable PRNG with full 2^64 period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator starting from `seed` (every seed, including 0, is fine).
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }
}

impl RngLike for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Uniform index in `0..n` (`n >= 1`).
fn pick(rng: &mut impl RngLike, n: usize) -> usize {
    usize::try_from(rng.below(n as u64)).unwrap_or(0)
}

/// Indices of `targets` in the order one request tries them (§4):
///
/// - `priority`: as configured.
/// - `round_robin`: configured order rotated to start at `state.rotation mod n`; advances
///   `state.rotation` by one per call (per request).
/// - `weighted`: weighted random order without replacement: each next target is drawn with
///   probability `weight / remaining weight`; weight-0 targets follow in configured order.
/// - `least_used`: fewest `requests` first, ties in configured order.
/// - `random`: uniform shuffle (Fisher–Yates).
/// - `p2c`: two distinct targets drawn at random; the one with fewer `in_flight` goes first
///   (tie: the earlier configured), then every other target by `in_flight`, ties in
///   configured order.
/// - `fill_first`: targets that are not saturated in configured order, then the saturated
///   ones in configured order (still fallbacks; admission decides whether they wait).
/// - `reset_aware`, `headroom`: as configured here; they order by quota headroom, which
///   [`TargetStat`] does not carry (the core orders them with
///   `policy::headroom::preflight::order_bindings_reset_aware` / `order_bindings_headroom`).
///
/// Empty `targets` gives an empty order. Only `round_robin` changes `state`; only the random
/// strategies draw from `rng`.
pub fn order(
    strategy: Strategy,
    targets: &[TargetStat],
    state: &mut StrategyState,
    rng: &mut impl RngLike,
) -> Vec<usize> {
    order_with_latency(strategy, targets, state, rng, 0)
}

/// [`order`], with `p2c` also weighing latency and errors: of the two drawn targets each
/// scores its `in_flight` plus [`latency::penalty`] against the other (up to
/// `p2c_latency_weight` points; 0 = plain in-flight), and the lower score goes first (tie: the
/// earlier configured). The other strategies ignore `p2c_latency_weight`.
pub fn order_with_latency(
    strategy: Strategy,
    targets: &[TargetStat],
    state: &mut StrategyState,
    rng: &mut impl RngLike,
    p2c_latency_weight: u32,
) -> Vec<usize> {
    let n = targets.len();
    let mut idx: Vec<usize> = (0..n).collect();
    if n == 0 {
        return idx;
    }
    match strategy {
        Strategy::Priority | Strategy::ResetAware | Strategy::Headroom => {}
        Strategy::RoundRobin => {
            let start = usize::try_from(state.rotation % n as u64).unwrap_or(0);
            state.rotation = state.rotation.wrapping_add(1);
            idx.rotate_left(start);
        }
        Strategy::Weighted => idx = weighted(targets, rng),
        Strategy::LeastUsed => idx.sort_by_key(|&i| (targets[i].requests, i)),
        Strategy::Random => shuffle(&mut idx, rng),
        Strategy::P2c => idx = p2c(targets, rng, p2c_latency_weight),
        Strategy::FillFirst => idx.sort_by_key(|&i| (targets[i].is_saturated(), i)),
    }
    idx
}

/// Fisher–Yates shuffle.
fn shuffle(idx: &mut [usize], rng: &mut impl RngLike) {
    for i in (1..idx.len()).rev() {
        let j = pick(rng, i + 1);
        idx.swap(i, j);
    }
}

/// Weighted random order without replacement (sequential draws, exact integer arithmetic).
fn weighted(targets: &[TargetStat], rng: &mut impl RngLike) -> Vec<usize> {
    let (mut pool, zero): (Vec<usize>, Vec<usize>) =
        (0..targets.len()).partition(|&i| targets[i].weight > 0);
    let mut out = Vec::with_capacity(targets.len());
    let mut total: u64 = pool.iter().map(|&i| u64::from(targets[i].weight)).sum();
    while !pool.is_empty() {
        let mut r = rng.below(total);
        let mut chosen = pool.len() - 1;
        for (k, &i) in pool.iter().enumerate() {
            let w = u64::from(targets[i].weight);
            if r < w {
                chosen = k;
                break;
            }
            r -= w;
        }
        let i = pool.remove(chosen);
        total = total.saturating_sub(u64::from(targets[i].weight));
        out.push(i);
    }
    out.extend(zero);
    out
}

/// Power of two choices on in-flight, then the rest by in-flight.
fn p2c(targets: &[TargetStat], rng: &mut impl RngLike, weight: u32) -> Vec<usize> {
    let n = targets.len();
    let load = |i: usize| (targets[i].in_flight, i);
    let a = pick(rng, n);
    let first = if n >= 2 {
        // A second, distinct draw: skip over `a`.
        let mut b = pick(rng, n - 1);
        if b >= a {
            b += 1;
        }
        let score = |i: usize, j: usize| {
            f64::from(targets[i].in_flight)
                + latency::penalty(
                    targets[i].health.as_ref(),
                    targets[j].health.as_ref(),
                    weight,
                )
        };
        let (sa, sb) = (score(a, b), score(b, a));
        if sb < sa || (sb == sa && b < a) { b } else { a }
    } else {
        a
    };
    let mut rest: Vec<usize> = (0..n).filter(|&i| i != first).collect();
    rest.sort_by_key(|&i| load(i));
    let mut out = Vec::with_capacity(n);
    out.push(first);
    out.extend(rest);
    out
}
