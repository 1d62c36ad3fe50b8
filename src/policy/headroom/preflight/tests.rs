//! Tests for [`decide`], [`earliest_cut_off`] and the two orderings, with explicit instants.

use super::*;

/// 2026-12-02T02:40:00Z.
const NOW: u64 = 1_796_179_200_000;

fn on() -> PreflightSettings {
    PreflightSettings {
        enabled: true,
        ..PreflightSettings::default()
    }
}

/// A connection whose only window is a tokens bucket with `remaining` of 10 000 tokens left
/// resetting `reset_in` (Go duration) after NOW.
fn tokens(remaining: u64, reset_in: &str) -> Headroom {
    let mut h = Headroom::default();
    let r = remaining.to_string();
    let headers = [
        ("x-ratelimit-limit-tokens", "10000"),
        ("x-ratelimit-remaining-tokens", r.as_str()),
        ("x-ratelimit-reset-tokens", reset_in),
    ];
    assert!(h.observe(headers, None, NOW));
    h
}

#[test]
fn defaults_are_off_two_and_twenty_percent() {
    let d = PreflightSettings::default();
    assert!(!d.enabled);
    assert_eq!(d.cut_off_at, 0.02);
    assert_eq!(d.warn_at, 0.20);
    assert_eq!(d.validate(), Ok(()));
    let parsed: PreflightSettings = toml::from_str("enabled = true").unwrap();
    assert_eq!(parsed, on());
    assert!(toml::from_str::<PreflightSettings>("cut_off = 0.1").is_err());
}

#[test]
fn validate_names_the_key() {
    let bad = |cut_off_at, warn_at| PreflightSettings {
        enabled: true,
        cut_off_at,
        warn_at,
    };
    assert!(
        bad(-0.1, 0.2)
            .validate()
            .unwrap_err()
            .contains("cut_off_at")
    );
    assert!(bad(0.02, 1.5).validate().unwrap_err().contains("warn_at"));
    assert!(
        bad(0.02, f64::NAN)
            .validate()
            .unwrap_err()
            .contains("warn_at")
    );
    assert!(
        bad(0.3, 0.2)
            .validate()
            .unwrap_err()
            .contains("must not exceed")
    );
    assert_eq!(bad(0.0, 0.0).validate(), Ok(()));
    assert_eq!(bad(1.0, 1.0).validate(), Ok(()));
}

#[test]
fn decide_vectors() {
    let reset = Some(NOW + 60_000);
    // (tokens remaining of 10 000, expected state name)
    let cases: &[(u64, &str)] = &[
        (10_000, "ok"),
        (5_000, "ok"),
        (2_001, "ok"),
        (2_000, "warn"),
        (201, "warn"),
        (200, "cut_off"),
        (1, "cut_off"),
        (0, "cut_off"),
    ];
    for (remaining, want) in cases {
        let v = decide(&tokens(*remaining, "1m0s"), None, &on(), NOW);
        assert_eq!(v.as_str(), *want, "remaining {remaining}");
        match v {
            Verdict::Ok => {}
            Verdict::Warn {
                window,
                remaining: r,
                reset_at_ms,
            }
            | Verdict::CutOff {
                window,
                remaining: r,
                reset_at_ms,
            } => {
                assert_eq!(window, Window::Tokens);
                assert_eq!(r, *remaining as f64 / 10_000.0);
                assert_eq!(reset_at_ms, reset);
            }
        }
    }
}

#[test]
fn decide_is_ok_when_off_unknown_or_reset_passed() {
    let empty = tokens(0, "1m0s");
    assert_eq!(
        decide(&empty, None, &PreflightSettings::default(), NOW),
        Verdict::Ok
    );
    assert_eq!(decide(&Headroom::default(), None, &on(), NOW), Verdict::Ok);
    assert!(decide(&empty, None, &on(), NOW + 59_999).is_cut_off());
    assert_eq!(decide(&empty, None, &on(), NOW + 60_000), Verdict::Ok);
}

#[test]
fn decide_follows_live_thresholds_and_model() {
    let h = tokens(1_000, "1m0s");
    assert_eq!(decide(&h, None, &on(), NOW).as_str(), "warn");
    let strict = PreflightSettings {
        enabled: true,
        cut_off_at: 0.10,
        warn_at: 0.50,
    };
    assert!(decide(&h, None, &strict, NOW).is_cut_off());
    // Per-model buckets: an exhausted model does not cut off another model.
    let mut m = Headroom::default();
    let headers = [
        ("x-ratelimit-remaining-tokens", "0"),
        ("x-ratelimit-reset-tokens", "30s"),
    ];
    assert!(m.observe(headers, Some("gpt-5"), NOW));
    assert!(decide(&m, Some("gpt-5"), &on(), NOW).is_cut_off());
    assert_eq!(decide(&m, Some("gpt-5-mini"), &on(), NOW), Verdict::Ok);
    assert!(decide(&m, None, &on(), NOW).is_cut_off());
}

#[test]
fn decide_uses_the_subscription_binding_window() {
    let mut h = Headroom::default();
    let headers = [
        ("anthropic-ratelimit-unified-5h-utilization", "0.99"),
        ("anthropic-ratelimit-unified-5h-reset", "1796197200"),
        ("anthropic-ratelimit-unified-7d-utilization", "0.5"),
        ("anthropic-ratelimit-unified-7d-reset", "1796700000"),
    ];
    assert!(h.observe(headers, Some("claude-sonnet-4"), NOW));
    let v = decide(&h, Some("claude-sonnet-4"), &on(), NOW);
    assert_eq!(
        v,
        Verdict::CutOff {
            window: Window::FiveHour,
            remaining: 1.0 - 0.99,
            reset_at_ms: Some(1_796_197_200_000),
        }
    );
    let json = serde_json::to_value(v).unwrap();
    assert_eq!(json["state"], "cut_off");
    assert_eq!(json["window"], "five_hour");
    assert_eq!(json["reset_at_ms"], 1_796_197_200_000_u64);
    // After the 5 h reset the 7 d window (50 % left) binds: ok.
    assert_eq!(decide(&h, None, &on(), 1_796_197_200_000), Verdict::Ok);
}

fn cut(reset: Option<u64>) -> Verdict {
    Verdict::CutOff {
        window: Window::FiveHour,
        remaining: 0.0,
        reset_at_ms: reset,
    }
}

#[test]
fn earliest_cut_off_vectors() {
    let warn = Verdict::Warn {
        window: Window::Tokens,
        remaining: 0.1,
        reset_at_ms: Some(NOW),
    };
    let vs = [
        cut(None),
        cut(Some(NOW + 300)),
        Verdict::Ok,
        warn,
        cut(Some(NOW + 100)),
        cut(Some(NOW + 100)),
    ];
    let pick = earliest_cut_off(vs.iter().enumerate()).unwrap();
    assert_eq!((pick.index, pick.reset_at_ms), (4, Some(NOW + 100)));
    // Only unknown resets: the first one.
    let unknown = [Verdict::Ok, cut(None), cut(None)];
    assert_eq!(
        earliest_cut_off(unknown.iter().enumerate()).unwrap().index,
        1
    );
    // Indices are the caller's, not positions.
    let sparse = [(7, &vs[1]), (3, &vs[4])];
    assert_eq!(earliest_cut_off(sparse).unwrap().index, 3);
    assert_eq!(earliest_cut_off([(0, &Verdict::Ok), (1, &warn)]), None);
    assert_eq!(earliest_cut_off(std::iter::empty()), None);
}

#[test]
fn reset_aware_order_soonest_first_ties_keep_priority() {
    let a = tokens(5_000, "10m0s");
    let b = tokens(9_000, "1m0s");
    let c = tokens(100, "10m0s");
    let cands = [
        (0, Some(&a)),
        (1, None),
        (2, Some(&b)),
        (3, Some(&c)),
        (4, Some(&Headroom::default())),
    ];
    assert_eq!(order_reset_aware(&cands, None, NOW), vec![2, 0, 3, 1, 4]);
    // Once b's window resets, it has no known reset and drops behind the known ones.
    assert_eq!(
        order_reset_aware(&cands, None, NOW + 60_000),
        vec![0, 3, 1, 2, 4]
    );
    assert!(order_reset_aware(&[], None, NOW).is_empty());
}

#[test]
fn headroom_order_most_remaining_first_ties_keep_priority() {
    let a = tokens(5_000, "10m0s");
    let b = tokens(9_000, "1m0s");
    let c = tokens(5_000, "1m0s");
    let d = tokens(0, "10m0s");
    let cands = [
        (10, Some(&a)),
        (11, Some(&d)),
        (12, Some(&b)),
        (13, Some(&c)),
        (14, None),
    ];
    // Unknown (14) counts as full.
    assert_eq!(order_headroom(&cands, None, NOW), vec![14, 12, 10, 13, 11]);
    // After 1 min b and c reset (unknown = full) and keep priority among the full ones.
    assert_eq!(
        order_headroom(&cands, None, NOW + 60_000),
        vec![12, 13, 14, 10, 11]
    );
}

#[test]
fn binding_orders_take_resolved_bindings_and_keep_priority_on_ties() {
    let b = |remaining: f64, reset: Option<u64>| {
        Some(Binding {
            window: Window::FiveHour,
            model: None,
            remaining,
            reset_at_ms: reset,
            status: None,
            by_claim: false,
        })
    };
    let bindings = [
        b(0.5, Some(900)),
        None,
        b(0.9, Some(100)),
        b(0.5, None),
        b(0.9, Some(100)),
    ];
    assert_eq!(order_bindings_reset_aware(&bindings), vec![2, 4, 0, 1, 3]);
    assert_eq!(order_bindings_headroom(&bindings), vec![1, 2, 4, 0, 3]);
    assert!(order_bindings_headroom(&[]).is_empty());
    assert_eq!(reset_aware_key(None), (true, 0));
    assert_eq!(headroom_key(None), 1.0);
}
