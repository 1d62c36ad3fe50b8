use super::*;

const NOW: u64 = 1_800_000_000_000;
const HOUR: u64 = 3_600_000;
const DAY: u64 = 24 * HOUR;

fn wall<'a>(extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![("anthropic-ratelimit-unified-status", "rejected")];
    h.extend_from_slice(extra);
    h
}

#[test]
fn the_five_hour_wall_is_a_rejected_429_naming_the_five_hour_window() {
    let claim = wall(&[(
        "anthropic-ratelimit-unified-representative-claim",
        "five_hour",
    )]);
    assert!(is_five_hour_wall(429, claim.clone()));
    let five = wall(&[("Anthropic-Ratelimit-Unified-5h-Status", "rejected")]);
    assert!(is_five_hour_wall(429, five));
    assert!(!is_five_hour_wall(529, claim), "not a 429");
    let weekly = wall(&[
        (
            "anthropic-ratelimit-unified-representative-claim",
            "seven_day",
        ),
        ("anthropic-ratelimit-unified-7d-status", "rejected"),
    ]);
    assert!(!is_five_hour_wall(429, weekly), "the weekly wall");
    let allowed = vec![
        ("anthropic-ratelimit-unified-status", "allowed"),
        ("anthropic-ratelimit-unified-5h-status", "rejected"),
    ];
    assert!(!is_five_hour_wall(429, allowed), "not rejected overall");
    assert!(!is_five_hour_wall(429, Vec::new()), "no headers");
}

#[test]
fn a_usage_answer_is_read_with_every_field() {
    let body = br#"{"five_hour": {"utilization": 1.0, "resets_at": "2027-01-15T08:00:00Z"},
        "limit_reset": {"status": "already_used", "next_available_at": "2027-01-20T00:00:00Z"}}"#;
    let u = parse_usage(body).expect("usage");
    assert_eq!(u.five_hour_utilization, Some(1.0));
    assert_eq!(u.five_hour_resets_at_ms, rfc3339_ms("2027-01-15T08:00:00Z"));
    assert!(u.five_hour_resets_at_ms.is_some());
    assert_eq!(u.status, Some(Availability::AlreadyUsed));
    assert_eq!(u.next_available_at_ms, rfc3339_ms("2027-01-20T00:00:00Z"));
    assert!(u.next_available_at_ms.is_some());
}

#[test]
fn a_usage_answer_tolerates_missing_and_malformed_fields() {
    let u = parse_usage(br#"{"limit_reset": {"status": " Available "}}"#).expect("usage");
    assert_eq!(
        u,
        Usage {
            status: Some(Availability::Available),
            ..Usage::default()
        }
    );
    let odd = br#"{"five_hour": {"utilization": "full", "resets_at": 12},
        "limit_reset": {"status": "not-offered", "next_available_at": "soon"}}"#;
    let u = parse_usage(odd).expect("usage");
    assert_eq!(u.five_hour_utilization, None);
    assert_eq!(u.five_hour_resets_at_ms, None);
    assert_eq!(u.status, Some(Availability::NotOffered));
    assert_eq!(u.next_available_at_ms, None);
    let u = parse_usage(br#"{"five_hour": {"utilization": 7.5}, "limit_reset": 3}"#).unwrap();
    assert_eq!((u.five_hour_utilization, u.status), (None, None));
    assert_eq!(
        decide(&u),
        Step::Unreadable,
        "no status: treated as an error"
    );
    assert!(parse_usage(b"not json").is_err());
    assert!(parse_usage(b"[1, 2]").is_err());
    assert!(parse_usage(b"").is_err());
}

#[test]
fn available_requests_the_reset_and_the_others_are_remembered() {
    let at = |status: &str| {
        let body = format!(r#"{{"limit_reset": {{"status": "{status}"}}}}"#);
        decide(&parse_usage(body.as_bytes()).expect("usage"))
    };
    assert_eq!(at("available"), Step::RequestReset);
    assert_eq!(
        at("already_used"),
        Step::Unavailable(Availability::AlreadyUsed, None)
    );
    assert_eq!(
        at("not_offered"),
        Step::Unavailable(Availability::NotOffered, None)
    );
    assert_eq!(at("maybe"), Step::Unreadable);
}

#[test]
fn a_granted_reset_is_recorded_and_leaves_queries_open() {
    let mut s = LimitResetSlot::default();
    assert!(s.may_query(NOW));
    assert!(!s.is_listed(NOW));
    s.failed("boom", NOW - HOUR);
    s.granted(NOW);
    assert!(
        s.may_query(NOW),
        "a granted reset does not block the next wall"
    );
    assert_eq!(s.reset_used_at_ms, Some(NOW));
    assert_eq!(s.last_outcome, Some(Outcome::Reset));
    assert_eq!(s.last_error, None);
    assert!(s.is_listed(NOW + DAY - 1));
    assert!(s.refresh(NOW + DAY), "dropped after 24 h");
    assert_eq!(s, LimitResetSlot::default());
}

#[test]
fn already_used_without_a_date_blocks_queries_for_seven_days() {
    let mut s = LimitResetSlot::default();
    s.unavailable(Availability::AlreadyUsed, None, NOW);
    assert_eq!(s.next_available_at_ms, Some(NOW + 7 * DAY));
    assert_eq!(s.last_outcome, Some(Outcome::AlreadyUsed));
    assert!(
        !s.may_query(NOW + 7 * DAY - 1),
        "no query while unavailable"
    );
    assert!(s.may_query(NOW + 7 * DAY));
    assert!(!s.refresh(NOW + DAY), "still listed");
    assert!(s.refresh(NOW + 7 * DAY));
}

#[test]
fn not_offered_with_a_date_blocks_queries_until_then() {
    let mut s = LimitResetSlot::default();
    s.unavailable(Availability::NotOffered, Some(NOW + 2 * DAY), NOW);
    assert_eq!(s.next_available_at_ms, Some(NOW + 2 * DAY));
    assert_eq!(s.last_outcome, Some(Outcome::NotOffered));
    assert!(!s.may_query(NOW + 2 * DAY - 1));
    assert!(s.may_query(NOW + 2 * DAY));
    let mut past = LimitResetSlot::default();
    past.unavailable(Availability::NotOffered, Some(NOW - 1), NOW);
    assert_eq!(
        past.next_available_at_ms,
        Some(NOW + 7 * DAY),
        "a date already past reads as the default"
    );
}

#[test]
fn an_error_backs_off_fifteen_minutes_with_a_short_text() {
    let mut s = LimitResetSlot::default();
    let long = "é".repeat(300);
    s.failed(&long, NOW);
    assert_eq!(s.last_outcome, Some(Outcome::Error));
    assert_eq!(s.next_query_after_ms, Some(NOW + 15 * 60_000));
    assert!(
        s.last_error
            .as_ref()
            .is_some_and(|e| e.len() <= MAX_ERROR_LEN)
    );
    assert!(
        !s.may_query(NOW + 15 * 60_000 - 1),
        "no query during the backoff"
    );
    assert!(s.may_query(NOW + 15 * 60_000));
    assert!(s.is_listed(NOW));
}

#[test]
fn the_record_round_trips_as_json() {
    let mut s = LimitResetSlot::default();
    s.unavailable(Availability::AlreadyUsed, Some(NOW + DAY), NOW);
    let json = serde_json::to_string(&s).expect("json");
    assert!(json.contains("\"already_used\""), "{json}");
    let back: LimitResetSlot = serde_json::from_str(&json).expect("back");
    assert_eq!(back, s);
    let partial: LimitResetSlot = serde_json::from_str("{}").expect("defaults");
    assert_eq!(partial, LimitResetSlot::default());
}

#[test]
fn a_claimed_try_blocks_a_second_one_until_recorded_or_lapsed() {
    let mut s = LimitResetSlot::default();
    assert!(s.claim(NOW));
    assert!(!s.claim(NOW + 1), "one try at a time");
    assert!(!s.is_listed(NOW + 1), "a claim alone is not listed");
    assert!(
        s.claim(NOW + 2 * 10_000),
        "a lapsed claim frees the next try"
    );
    s.granted(NOW + 20_001);
    assert!(s.claim(NOW + 20_002), "recorded: free again");
    s.failed("HTTP 502", NOW + 20_003);
    assert!(!s.claim(NOW + 20_004), "now the backoff blocks it");
    let json = serde_json::to_string(&s).expect("json");
    assert!(!json.contains("in_flight"), "not persisted: {json}");
}
