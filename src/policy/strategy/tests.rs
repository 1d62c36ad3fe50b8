//! Tests for [`order`] with fixed seeds and stats (§4 "Strategies").

use super::*;
use crate::policy::latency::Summary;

fn stat(in_flight: u32, cap: Option<u32>, requests: u64, weight: u32) -> TargetStat {
    TargetStat {
        in_flight,
        cap,
        requests,
        weight,
        health: None,
    }
}

fn idle(n: usize) -> Vec<TargetStat> {
    vec![TargetStat::default(); n]
}

fn is_permutation(v: &[usize], n: usize) -> bool {
    let mut s = v.to_vec();
    s.sort_unstable();
    s == (0..n).collect::<Vec<_>>()
}

#[test]
fn every_strategy_returns_a_permutation_and_handles_empty_and_single() {
    let all = [
        Strategy::Priority,
        Strategy::RoundRobin,
        Strategy::Weighted,
        Strategy::LeastUsed,
        Strategy::Random,
        Strategy::P2c,
        Strategy::FillFirst,
    ];
    let mut rng = SplitMix64::new(7);
    for s in all {
        let mut st = StrategyState::default();
        assert!(order(s, &[], &mut st, &mut rng).is_empty(), "{s:?}");
        assert_eq!(order(s, &idle(1), &mut st, &mut rng), vec![0], "{s:?}");
        for n in 2..8 {
            let stats: Vec<TargetStat> = (0..n)
                .map(|i| stat(i as u32 % 3, Some(2), (n - i) as u64, i as u32 % 4))
                .collect();
            let o = order(s, &stats, &mut st, &mut rng);
            assert!(is_permutation(&o, n), "{s:?} {o:?}");
        }
    }
}

#[test]
fn priority_keeps_configured_order() {
    let mut st = StrategyState::default();
    let mut rng = SplitMix64::new(1);
    let stats = vec![
        stat(9, Some(1), 100, 0),
        stat(0, None, 0, 5),
        stat(3, None, 1, 1),
    ];
    assert_eq!(
        order(Strategy::Priority, &stats, &mut st, &mut rng),
        vec![0, 1, 2]
    );
    assert_eq!(st, StrategyState::default());
}

#[test]
fn round_robin_rotates_per_call_and_survives_resizing() {
    let mut st = StrategyState::default();
    let mut rng = SplitMix64::new(1);
    let t = idle(3);
    let got: Vec<Vec<usize>> = (0..4)
        .map(|_| order(Strategy::RoundRobin, &t, &mut st, &mut rng))
        .collect();
    assert_eq!(
        got,
        vec![vec![0, 1, 2], vec![1, 2, 0], vec![2, 0, 1], vec![0, 1, 2]]
    );
    assert_eq!(st.rotation, 4);
    // A reload that drops a target keeps rotating without panicking: 4 mod 2 = 0.
    assert_eq!(
        order(Strategy::RoundRobin, &idle(2), &mut st, &mut rng),
        vec![0, 1]
    );
    assert_eq!(
        order(Strategy::RoundRobin, &idle(2), &mut st, &mut rng),
        vec![1, 0]
    );
    st.rotation = u64::MAX;
    assert!(is_permutation(
        &order(Strategy::RoundRobin, &t, &mut st, &mut rng),
        3
    ));
    assert_eq!(st.rotation, 0, "wraps");
}

#[test]
fn least_used_fewest_requests_first_ties_in_config_order() {
    let mut st = StrategyState::default();
    let mut rng = SplitMix64::new(1);
    let cases: [(&[u64], &[usize]); 3] = [
        (&[5, 1, 3], &[1, 2, 0]),
        (&[2, 2, 1, 2], &[2, 0, 1, 3]),
        (&[0, 0, 0], &[0, 1, 2]),
    ];
    for (reqs, want) in cases {
        let stats: Vec<TargetStat> = reqs.iter().map(|&r| stat(0, None, r, 1)).collect();
        assert_eq!(order(Strategy::LeastUsed, &stats, &mut st, &mut rng), want);
    }
}

#[test]
fn fill_first_moves_on_only_when_saturated() {
    /// `(in_flight, cap)` per target.
    type Load = [(u32, Option<u32>)];
    let mut st = StrategyState::default();
    let mut rng = SplitMix64::new(1);
    // (in_flight, cap) per target → order
    let cases: [(&Load, &[usize]); 5] = [
        (&[(0, Some(2)), (0, Some(2)), (0, None)], &[0, 1, 2]),
        (&[(1, Some(2)), (0, Some(2)), (0, None)], &[0, 1, 2]),
        (&[(2, Some(2)), (0, Some(2)), (0, None)], &[1, 2, 0]),
        (&[(2, Some(2)), (3, Some(2)), (50, None)], &[2, 0, 1]),
        (&[(1, Some(1)), (1, Some(1))], &[0, 1]),
    ];
    for (load, want) in cases {
        let stats: Vec<TargetStat> = load.iter().map(|&(f, c)| stat(f, c, 0, 1)).collect();
        assert_eq!(
            order(Strategy::FillFirst, &stats, &mut st, &mut rng),
            want,
            "{load:?}"
        );
    }
}

#[test]
fn random_is_deterministic_per_seed_and_roughly_uniform() {
    let t = idle(4);
    let mut st = StrategyState::default();
    let a = order(Strategy::Random, &t, &mut st, &mut SplitMix64::new(42));
    let b = order(Strategy::Random, &t, &mut st, &mut SplitMix64::new(42));
    assert_eq!(a, b);
    let mut rng = SplitMix64::new(42);
    let mut first = [0u32; 4];
    for _ in 0..10_000 {
        first[order(Strategy::Random, &t, &mut st, &mut rng)[0]] += 1;
    }
    for c in first {
        assert!((2_200..=2_800).contains(&c), "{first:?}");
    }
}

#[test]
fn weighted_first_pick_is_proportional_over_10000_draws() {
    let stats = vec![
        stat(0, None, 0, 1),
        stat(0, None, 0, 3),
        stat(0, None, 0, 6),
    ];
    let mut st = StrategyState::default();
    let mut rng = SplitMix64::new(2024);
    let mut first = [0u32; 3];
    for _ in 0..10_000 {
        let o = order(Strategy::Weighted, &stats, &mut st, &mut rng);
        assert!(is_permutation(&o, 3));
        first[o[0]] += 1;
    }
    // Expected 1000 / 3000 / 6000; allow ±10 % relative.
    for (got, want) in first.iter().zip([1_000u32, 3_000, 6_000]) {
        let tol = want / 10;
        assert!(got.abs_diff(want) <= tol, "{first:?}");
    }
}

#[test]
fn weighted_without_replacement_and_zero_weights_last() {
    // Second position given first = 2 (weight 6): remaining 1 vs 3 → 25 % / 75 %.
    let stats = vec![
        stat(0, None, 0, 1),
        stat(0, None, 0, 3),
        stat(0, None, 0, 6),
    ];
    let mut st = StrategyState::default();
    let mut rng = SplitMix64::new(99);
    let (mut n, mut second_is_1) = (0u32, 0u32);
    for _ in 0..10_000 {
        let o = order(Strategy::Weighted, &stats, &mut st, &mut rng);
        if o[0] == 2 {
            n += 1;
            second_is_1 += u32::from(o[1] == 1);
        }
    }
    let share = f64::from(second_is_1) / f64::from(n);
    assert!((0.70..=0.80).contains(&share), "{share}");
    // Zero weights come after every weighted target, in configured order.
    let stats = vec![
        stat(0, None, 0, 0),
        stat(0, None, 0, 2),
        stat(0, None, 0, 0),
        stat(0, None, 0, 1),
    ];
    for seed in 0..50 {
        let o = order(
            Strategy::Weighted,
            &stats,
            &mut st,
            &mut SplitMix64::new(seed),
        );
        assert_eq!(&o[2..], &[0, 2], "{o:?}");
    }
    // All zero: configured order.
    let o = order(
        Strategy::Weighted,
        &[stat(0, None, 0, 0); 3],
        &mut st,
        &mut rng,
    );
    assert_eq!(o, vec![0, 1, 2]);
}

#[test]
fn p2c_prefers_the_less_loaded_of_the_two_then_rest_by_in_flight() {
    let mut st = StrategyState::default();
    // Two targets: both are always drawn, so the less loaded is always first.
    let two = vec![stat(5, None, 0, 1), stat(1, None, 0, 1)];
    for seed in 0..100 {
        assert_eq!(
            order(Strategy::P2c, &two, &mut st, &mut SplitMix64::new(seed)),
            vec![1, 0]
        );
    }
    // Equal load: tie goes to the earlier configured.
    let tie = vec![stat(2, None, 0, 1), stat(2, None, 0, 1)];
    assert_eq!(
        order(Strategy::P2c, &tie, &mut st, &mut SplitMix64::new(3)),
        vec![0, 1]
    );
    // Four targets; the most loaded one (index 0) is never first, since any pair containing it
    // has a less loaded partner.
    let four = vec![
        stat(9, None, 0, 1),
        stat(1, None, 0, 1),
        stat(4, None, 0, 1),
        stat(2, None, 0, 1),
    ];
    let mut rng = SplitMix64::new(11);
    let mut first = [0u32; 4];
    for _ in 0..10_000 {
        let o = order(Strategy::P2c, &four, &mut st, &mut rng);
        first[o[0]] += 1;
        // The rest ascend by in-flight.
        let rest: Vec<u32> = o[1..].iter().map(|&i| four[i].in_flight).collect();
        assert!(rest.windows(2).all(|w| w[0] <= w[1]), "{o:?}");
    }
    assert_eq!(first[0], 0, "{first:?}");
    // P(first = least loaded, index 1) = pairs containing it = 3 of 6 = 50 %.
    assert!((4_500..=5_500).contains(&first[1]), "{first:?}");
    // A fixed seed gives a fixed order.
    let a = order(Strategy::P2c, &four, &mut st, &mut SplitMix64::new(5));
    let b = order(Strategy::P2c, &four, &mut st, &mut SplitMix64::new(5));
    assert_eq!(a, b);
}

#[test]
fn splitmix_reference_values_and_unbiased_below() {
    // Reference outputs of SplitMix64 seeded with 0.
    let mut r = SplitMix64::new(0);
    assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
    assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    let mut r = SplitMix64::new(1);
    assert_eq!(r.below(0), 0);
    assert_eq!(r.below(1), 0);
    for _ in 0..1000 {
        assert!(r.below(7) < 7);
    }
    // A generator that yields a biased-zone value first is re-drawn.
    struct Seq(Vec<u64>);
    impl RngLike for Seq {
        fn next_u64(&mut self) -> u64 {
            self.0.remove(0)
        }
    }
    let n = 3u64;
    let threshold = n.wrapping_neg() % n; // 2^64 mod 3 = 1
    assert_eq!(threshold, 1);
    let mut s = Seq(vec![0, 5]);
    assert_eq!(s.below(3), 2, "0 is rejected, 5 mod 3 = 2");
}

#[test]
fn p2c_latency_weight_penalises_the_slower_or_failing_of_the_two() {
    let health = |ms, errors| {
        Some(Summary {
            mean_ttfb_ms: ms,
            errors,
            samples: 10,
        })
    };
    let with = |in_flight, h| TargetStat {
        in_flight,
        health: h,
        ..TargetStat::default()
    };
    let mut state = StrategyState::default();
    // Two targets, so both are always drawn; target 0 is twice as slow.
    let slow_first = [with(0, health(200, 0)), with(0, health(100, 0))];
    for seed in 0..20 {
        let mut rng = SplitMix64::new(seed);
        let got = order_with_latency(Strategy::P2c, &slow_first, &mut state, &mut rng, 10);
        assert_eq!(got[0], 1, "seed {seed}: the faster goes first");
        let mut rng = SplitMix64::new(seed);
        let off = order_with_latency(Strategy::P2c, &slow_first, &mut state, &mut rng, 0);
        assert_eq!(
            off[0], 0,
            "seed {seed}: weight 0 = plain in-flight, tie keeps order"
        );
    }
    // The 5-point penalty (weight 10, 2x slower) loses to 6 more requests in flight.
    let busy_fast = [with(0, health(200, 0)), with(6, health(100, 0))];
    let mut rng = SplitMix64::new(1);
    assert_eq!(
        order_with_latency(Strategy::P2c, &busy_fast, &mut state, &mut rng, 10)[0],
        0
    );
    // Errors count too: 60 % failing = 3 of 5 points at weight 10.
    let failing = [with(0, health(100, 6)), with(2, health(100, 0))];
    let mut rng = SplitMix64::new(1);
    assert_eq!(
        order_with_latency(Strategy::P2c, &failing, &mut state, &mut rng, 10)[0],
        1
    );
    // Under three samples on either side: no penalty.
    let unknown = [with(0, health(900, 9)), with(0, None)];
    let mut rng = SplitMix64::new(1);
    assert_eq!(
        order_with_latency(Strategy::P2c, &unknown, &mut state, &mut rng, 20)[0],
        0
    );
}
