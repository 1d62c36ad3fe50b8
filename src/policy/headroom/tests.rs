//! Tests for [`Headroom`] merge, staleness, binding window, pruning and persistence.

use super::*;

/// 2026-12-02T02:40:00Z.
const NOW: u64 = 1_796_179_200_000;
/// NOW + 5 h, in Unix seconds (as the unified headers send it).
const FIVE_H_RESET_S: &str = "1796197200";
const FIVE_H_RESET_MS: u64 = 1_796_197_200_000;
/// NOW + ~6 days, in Unix seconds.
const SEVEN_D_RESET_S: &str = "1796700000";
const SEVEN_D_RESET_MS: u64 = 1_796_700_000_000;

fn subscription(
    five_used: &str,
    seven_used: &str,
    claim: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut h = vec![
        (
            "anthropic-ratelimit-unified-5h-utilization",
            five_used.to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-5h-reset",
            FIVE_H_RESET_S.to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-7d-utilization",
            seven_used.to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-7d-reset",
            SEVEN_D_RESET_S.to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-reset",
            FIVE_H_RESET_S.to_owned(),
        ),
    ];
    if let Some(c) = claim {
        h.push((
            "anthropic-ratelimit-unified-representative-claim",
            c.to_owned(),
        ));
    }
    h
}

fn openai_tokens(remaining: u64, reset: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-ratelimit-limit-tokens", "1000".to_owned()),
        ("x-ratelimit-remaining-tokens", remaining.to_string()),
        ("x-ratelimit-reset-tokens", reset.to_owned()),
    ]
}

fn feed(h: &mut Headroom, headers: &[(&'static str, String)], model: Option<&str>, now: u64) {
    let any = h.observe(headers.iter().map(|(n, v)| (*n, v.as_str())), model, now);
    assert!(any, "headers were not read: {headers:?}");
}

fn approx(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn subscription_windows_are_per_connection_and_buckets_per_model() {
    let mut h = Headroom::default();
    feed(
        &mut h,
        &subscription("0.5", "0.1", None),
        Some("claude-opus-4"),
        NOW,
    );
    feed(&mut h, &openai_tokens(250, "1m0s"), Some("gpt-5"), NOW);
    feed(&mut h, &openai_tokens(900, "1m0s"), None, NOW);
    assert_eq!(
        h.connection.keys().copied().collect::<Vec<_>>(),
        vec![Window::FiveHour, Window::SevenDay, Window::Tokens]
    );
    assert_eq!(h.models.keys().collect::<Vec<_>>(), vec!["gpt-5"]);
    assert_eq!(h.models["gpt-5"][&Window::Tokens].remaining, Some(0.25));
    assert_eq!(
        h.unified.map(|u| u.reset_at_ms),
        Some(Some(FIVE_H_RESET_MS))
    );
    assert!(!h.observe([("content-type", "text/plain")], None, NOW));
}

#[test]
fn newer_observation_wins_per_window_and_absent_windows_are_kept() {
    let mut h = Headroom::default();
    feed(&mut h, &subscription("0.2", "0.3", None), None, NOW);
    // A later response carries only the 5 h window.
    let later = vec![(
        "anthropic-ratelimit-unified-5h-utilization",
        "0.6".to_owned(),
    )];
    feed(&mut h, &later, None, NOW + 1_000);
    assert!(approx(
        h.connection[&Window::FiveHour].remaining.unwrap(),
        0.4
    ));
    assert_eq!(h.connection[&Window::FiveHour].observed_at_ms, NOW + 1_000);
    assert!(approx(
        h.connection[&Window::SevenDay].remaining.unwrap(),
        0.7
    ));
    // A response that finished late, observed earlier, does not overwrite.
    let stale = vec![(
        "anthropic-ratelimit-unified-5h-utilization",
        "0.1".to_owned(),
    )];
    feed(&mut h, &stale, None, NOW + 500);
    assert!(approx(
        h.connection[&Window::FiveHour].remaining.unwrap(),
        0.4
    ));
    // Same instant: the newer call wins.
    let same = vec![(
        "anthropic-ratelimit-unified-5h-utilization",
        "0.7".to_owned(),
    )];
    feed(&mut h, &same, None, NOW + 1_000);
    assert!(approx(
        h.connection[&Window::FiveHour].remaining.unwrap(),
        0.3
    ));
}

#[test]
fn staleness_vectors() {
    let s = |reset: Option<u64>| WindowState {
        remaining: Some(0.5),
        reset_at_ms: reset,
        observed_at_ms: NOW,
        ..WindowState::default()
    };
    let cases: &[(Option<u64>, u64, bool)] = &[
        (Some(NOW + 10), NOW, false),
        (Some(NOW + 10), NOW + 9, false),
        (Some(NOW + 10), NOW + 10, true),
        (Some(NOW + 10), NOW + 11, true),
        (None, NOW, false),
        (None, NOW + STALE_WITHOUT_RESET_MS - 1, false),
        (None, NOW + STALE_WITHOUT_RESET_MS, true),
    ];
    for (reset, now, want) in cases {
        assert_eq!(s(*reset).is_stale(*now), *want, "reset {reset:?} at {now}");
    }
    let far = WindowState {
        observed_at_ms: u64::MAX - 1,
        ..WindowState::default()
    };
    assert!(!far.is_stale(u64::MAX - 1));
}

#[test]
fn binding_is_least_remaining_without_claim() {
    let mut h = Headroom::default();
    feed(&mut h, &subscription("0.91", "0.4", None), None, NOW);
    let b = h.binding(None, NOW).unwrap();
    assert_eq!(b.window, Window::FiveHour);
    assert!(approx(b.remaining, 0.09));
    assert_eq!(b.reset_at_ms, Some(FIVE_H_RESET_MS));
    assert!(!b.by_claim);
    // After the 5 h reset passes, the 7 d window binds.
    let b = h.binding(None, FIVE_H_RESET_MS).unwrap();
    assert_eq!(
        (b.window, b.reset_at_ms),
        (Window::SevenDay, Some(SEVEN_D_RESET_MS))
    );
    // After both resets nothing is known.
    assert_eq!(h.binding(None, SEVEN_D_RESET_MS), None);
}

#[test]
fn representative_claim_wins_among_subscription_windows() {
    let mut h = Headroom::default();
    feed(
        &mut h,
        &subscription("0.91", "0.4", Some("seven_day")),
        None,
        NOW,
    );
    let b = h.binding(None, NOW).unwrap();
    assert_eq!(b.window, Window::SevenDay);
    assert!(approx(b.remaining, 0.6));
    assert!(b.by_claim);
    // A bucket with strictly less remaining still binds.
    feed(&mut h, &openai_tokens(100, "30s"), Some("m"), NOW);
    let b = h.binding(Some("m"), NOW).unwrap();
    assert_eq!((b.window, b.model.as_deref()), (Window::Tokens, Some("m")));
    assert!(!b.by_claim);
    // ...but not for another model.
    assert_eq!(
        h.binding(Some("other"), NOW).unwrap().window,
        Window::SevenDay
    );
    // The claim lapses with the summary (its reset = the 5 h reset): least remaining again.
    let mut h = Headroom::default();
    feed(
        &mut h,
        &subscription("0.1", "0.95", Some("five_hour")),
        None,
        NOW,
    );
    assert_eq!(h.binding(None, NOW).unwrap().window, Window::FiveHour);
    let b = h.binding(None, FIVE_H_RESET_MS).unwrap();
    assert_eq!((b.window, b.by_claim), (Window::SevenDay, false));
}

#[test]
fn claim_naming_an_unknown_window_falls_back_to_least() {
    let mut h = Headroom::default();
    let mut headers = vec![
        (
            "anthropic-ratelimit-unified-7d-utilization",
            "0.5".to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-7d-reset",
            SEVEN_D_RESET_S.to_owned(),
        ),
    ];
    headers.push((
        "anthropic-ratelimit-unified-representative-claim",
        "five_hour".to_owned(),
    ));
    feed(&mut h, &headers, None, NOW);
    let b = h.binding(None, NOW).unwrap();
    assert_eq!((b.window, b.by_claim), (Window::SevenDay, false));
}

#[test]
fn rejected_status_counts_as_zero_and_ties_keep_window_order() {
    let mut h = Headroom::default();
    let headers = vec![
        (
            "anthropic-ratelimit-unified-5h-utilization",
            "0.3".to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-5h-reset",
            FIVE_H_RESET_S.to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-7d-status",
            "rejected".to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-7d-reset",
            SEVEN_D_RESET_S.to_owned(),
        ),
    ];
    feed(&mut h, &headers, None, NOW);
    let b = h.binding(None, NOW).unwrap();
    assert_eq!((b.window, b.remaining), (Window::SevenDay, 0.0));
    assert_eq!(b.status, Some(WindowStatus::Rejected));

    let mut h = Headroom::default();
    let both_empty = vec![
        ("anthropic-ratelimit-requests-remaining", "0".to_owned()),
        ("anthropic-ratelimit-tokens-remaining", "0".to_owned()),
    ];
    feed(&mut h, &both_empty, None, NOW);
    assert_eq!(h.binding(None, NOW).unwrap().window, Window::Requests);
}

#[test]
fn window_without_a_number_never_binds() {
    let mut h = Headroom::default();
    let headers = vec![(
        "anthropic-ratelimit-tokens-reset",
        "2026-12-02T03:00:00Z".to_owned(),
    )];
    feed(&mut h, &headers, Some("m"), NOW);
    assert_eq!(h.binding(Some("m"), NOW), None);
    assert_eq!(h.rows(NOW).len(), 1);
}

#[test]
fn rows_flag_the_binding_window() {
    let mut h = Headroom::default();
    feed(&mut h, &subscription("0.5", "0.2", None), None, NOW);
    feed(&mut h, &openai_tokens(900, "1m0s"), Some("m"), NOW);
    let rows = h.rows(NOW);
    let got: Vec<_> = rows
        .iter()
        .map(|r| (r.window, r.model.as_deref(), r.binding))
        .collect();
    assert_eq!(
        got,
        vec![
            (Window::FiveHour, None, true),
            (Window::SevenDay, None, false),
            (Window::Tokens, Some("m"), false),
        ]
    );
    // The tokens bucket resets after 60 s and leaves the rows.
    assert_eq!(h.rows(NOW + 60_000).len(), 2);
}

#[test]
fn prune_drops_stale_state() {
    let mut h = Headroom::default();
    feed(
        &mut h,
        &subscription("0.5", "0.2", Some("five_hour")),
        None,
        NOW,
    );
    feed(&mut h, &openai_tokens(900, "1m0s"), Some("m"), NOW);
    let overage = vec![(
        "anthropic-ratelimit-unified-overage-status",
        "allowed".to_owned(),
    )];
    feed(&mut h, &overage, None, NOW);
    h.prune(NOW + 60_000);
    assert!(h.models.is_empty());
    assert_eq!(h.connection.len(), 2);
    assert!(h.unified.is_some() && h.overage.is_some());
    h.prune(NOW + STALE_WITHOUT_RESET_MS);
    assert!(
        h.overage.is_none(),
        "overage without a reset lapses after 1 h"
    );
    h.prune(FIVE_H_RESET_MS);
    assert!(h.unified.is_none());
    assert_eq!(
        h.connection.keys().copied().collect::<Vec<_>>(),
        vec![Window::SevenDay]
    );
    h.prune(SEVEN_D_RESET_MS);
    assert!(h.is_empty());
}

#[test]
fn model_count_is_capped_dropping_the_oldest() {
    let mut h = Headroom::default();
    for i in 0..MAX_MODELS as u64 {
        feed(
            &mut h,
            &openai_tokens(500, "1h0m0s"),
            Some(&format!("m{i}")),
            NOW + i,
        );
    }
    // m0 is refreshed, so m1 is now the oldest.
    feed(
        &mut h,
        &openai_tokens(400, "1h0m0s"),
        Some("m0"),
        NOW + 1_000,
    );
    feed(
        &mut h,
        &openai_tokens(300, "1h0m0s"),
        Some("new"),
        NOW + 2_000,
    );
    assert_eq!(h.models.len(), MAX_MODELS);
    assert!(h.models.contains_key("m0") && h.models.contains_key("new"));
    assert!(!h.models.contains_key("m1"));
}

#[test]
fn serde_round_trip_is_snake_case() {
    let mut h = Headroom::default();
    feed(
        &mut h,
        &subscription("0.5", "0.2", Some("seven_day")),
        None,
        NOW,
    );
    feed(&mut h, &openai_tokens(900, "1m0s"), Some("gpt-5"), NOW);
    let reason = vec![
        (
            "anthropic-ratelimit-unified-overage-status",
            "rejected".to_owned(),
        ),
        (
            "anthropic-ratelimit-unified-overage-disabled-reason",
            "out_of_credits".to_owned(),
        ),
    ];
    feed(&mut h, &reason, None, NOW);
    let json = serde_json::to_value(&h).unwrap();
    assert_eq!(
        json["connection"]["five_hour"]["reset_at_ms"],
        FIVE_H_RESET_MS
    );
    assert_eq!(json["unified"]["representative_claim"], "seven_day");
    assert_eq!(json["overage"]["status"], "rejected");
    assert_eq!(json["models"]["gpt-5"]["tokens"]["limit"], 1000);
    let back: Headroom = serde_json::from_value(json).unwrap();
    assert_eq!(back, h);
    // Older or partial rows still load (every field defaults).
    let partial: Headroom = serde_json::from_str(r#"{"connection":{"seven_day":{}}}"#).unwrap();
    assert_eq!(partial.connection[&Window::SevenDay].remaining, None);
    let b = serde_json::to_value(h.binding(None, NOW).unwrap()).unwrap();
    assert_eq!(b["window"], "seven_day");
    assert_eq!(b["by_claim"], true);
}

#[test]
fn window_names() {
    let names: Vec<_> = Window::ALL.iter().map(|w| w.as_str()).collect();
    assert_eq!(
        names,
        [
            "five_hour",
            "seven_day",
            "requests",
            "tokens",
            "input_tokens",
            "output_tokens"
        ]
    );
    for w in Window::ALL {
        let json = serde_json::to_value(w).unwrap();
        assert_eq!(json, w.as_str());
    }
    assert_eq!(Window::FiveHour.label(), "5h");
    assert_eq!(WindowStatus::AllowedWarning.as_str(), "allowed_warning");
}
