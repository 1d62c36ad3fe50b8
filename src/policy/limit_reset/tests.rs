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

/// A usage answer whose program block is `block` (other blocks around it, as the endpoint
/// also reports the windows).
fn usage(block: &str) -> Vec<u8> {
    format!(r#"{{"five_hour": {{"utilization": 1.0}}, "juniper_tide": {block}}}"#).into_bytes()
}

#[test]
fn the_routes_and_the_body_name_the_program() {
    assert_eq!(USAGE_PATH, "/api/oauth/usage?at_wall=1&skip_spend=1");
    let org = "123e4567-e89b-12d3-a456-426614174000";
    assert_eq!(
        reset_path(org),
        "/api/organizations/123e4567-e89b-12d3-a456-426614174000/reset_rate_limits"
    );
    let body: Value = serde_json::from_str(RESET_BODY).expect("json");
    assert_eq!(body, serde_json::json!({"program": "juniper_tide"}));
}

#[test]
fn the_program_block_is_read_with_every_field() {
    let t = parse_usage(&usage(
        r#"{"arm": "reset", "available": false, "next_available_at": "2027-01-20T00:00:00Z"}"#,
    ))
    .expect("block");
    assert_eq!(t.arm, "reset");
    assert!(!t.available);
    assert_eq!(t.next_available_at_ms, rfc3339_ms("2027-01-20T00:00:00Z"));
    assert!(t.next_available_at_ms.is_some());
    let t = parse_usage(&usage(
        r#"{"arm": " Reset ", "available": true, "next_available_at": 1800000000}"#,
    ))
    .expect("block");
    assert_eq!((t.arm.as_str(), t.available), ("reset", true));
    assert_eq!(t.next_available_at_ms, Some(NOW), "Unix seconds");
}

#[test]
fn a_malformed_next_available_at_reads_as_absent() {
    for v in [r#""soon""#, "null", "-5", "1.5", "[]", r#""2027-01-20""#] {
        let block = format!(r#"{{"arm": "reset", "available": false, "next_available_at": {v}}}"#);
        let t = parse_usage(&usage(&block)).expect("block");
        assert_eq!(t.next_available_at_ms, None, "{v}");
    }
}

#[test]
fn an_unreadable_usage_answer_is_an_error() {
    let cases: [&[u8]; 9] = [
        b"not json",
        b"[1, 2]",
        b"",
        br#"{"five_hour": {"utilization": 1.0}}"#,
        br#"{"juniper_tide": null}"#,
        br#"{"juniper_tide": "reset"}"#,
        br#"{"juniper_tide": {"available": true}}"#,
        br#"{"juniper_tide": {"arm": "reset"}}"#,
        br#"{"juniper_tide": {"arm": "reset", "available": "true"}}"#,
    ];
    for body in cases {
        let e = usage_step(200, body).expect_err("unreadable");
        assert!(
            e.starts_with("usage answer"),
            "{}: {e}",
            String::from_utf8_lossy(body)
        );
    }
}

#[test]
fn only_an_available_reset_arm_requests_the_reset() {
    let at = |block: &str| usage_step(200, &usage(block)).expect("step");
    assert_eq!(
        at(r#"{"arm": "reset", "available": true}"#),
        Step::RequestReset
    );
    let day2 = r#""2027-01-20T00:00:00Z""#;
    assert_eq!(
        at(&format!(
            r#"{{"arm": "reset", "available": false, "next_available_at": {day2}}}"#
        )),
        Step::Unavailable(Unavailable::AlreadyUsed, rfc3339_ms("2027-01-20T00:00:00Z"))
    );
    assert_eq!(
        at(r#"{"arm": "control", "available": true}"#),
        Step::Unavailable(Unavailable::NotOffered, None),
        "another arm is not offered resets, whatever `available` says"
    );
    assert_eq!(
        at(r#"{"arm": "", "available": false}"#),
        Step::Unavailable(Unavailable::NotOffered, None)
    );
}

#[test]
fn a_non_2xx_answer_is_an_error_whatever_its_body() {
    let ok = usage(r#"{"arm": "reset", "available": true}"#);
    assert_eq!(
        usage_step(503, &ok),
        Err("usage endpoint answered HTTP 503".into())
    );
    assert_eq!(
        reset_tried(403, br#"{"result": "reset"}"#),
        Tried::Failed("reset endpoint answered HTTP 403".into())
    );
    assert_eq!(
        reset_tried(302, br#"{"result": "reset"}"#),
        Tried::Failed("reset endpoint answered HTTP 302".into())
    );
}

#[test]
fn the_reset_answer_maps_each_result() {
    let next = r#""2027-01-20T00:00:00Z""#;
    let at = |body: &str| reset_tried(200, body.as_bytes());
    assert_eq!(at(r#"{"result": "reset"}"#), Tried::Reset);
    assert_eq!(at(r#"{"result": "NOT_LIMITED"}"#), Tried::NotLimited);
    assert_eq!(
        at(&format!(
            r#"{{"result": "already_used", "next_available_at": {next}}}"#
        )),
        Tried::Unavailable(Unavailable::AlreadyUsed, rfc3339_ms("2027-01-20T00:00:00Z"))
    );
    assert_eq!(
        at(r#"{"result": "not_offered"}"#),
        Tried::Unavailable(Unavailable::NotOffered, None)
    );
    assert_eq!(
        reset_tried(201, br#"{"result": "reset"}"#),
        Tried::Reset,
        "any 2xx"
    );
    assert!(Tried::Reset.retries() && Tried::NotLimited.retries());
    assert!(!Tried::Unavailable(Unavailable::NotOffered, None).retries());
}

#[test]
fn an_unreadable_reset_answer_is_an_error_never_a_success() {
    for body in [
        "",
        "ok",
        "[]",
        "{}",
        r#"{"result": 1}"#,
        r#"{"status": "reset"}"#,
        r#"{"result": "granted"}"#,
    ] {
        let t = reset_tried(200, body.as_bytes());
        assert!(matches!(t, Tried::Failed(_)), "{body}: {t:?}");
        assert!(!t.retries(), "{body}");
    }
    let long = format!(r#"{{"result": "{}"}}"#, "x".repeat(500));
    let Tried::Failed(text) = reset_tried(200, long.as_bytes()) else {
        panic!("failed")
    };
    assert!(text.len() < 100, "the unknown word is cut: {text}");
}

#[test]
fn not_limited_ends_a_backoff_and_keeps_a_granted_reset_listed() {
    let mut s = LimitResetSlot::default();
    s.granted(NOW - HOUR);
    s.failed("HTTP 502", NOW - 1);
    s.record(&Tried::NotLimited, NOW);
    assert!(s.may_query(NOW), "no backoff");
    assert_eq!(s.last_outcome, Some(Outcome::NotLimited));
    assert_eq!((s.last_at_ms, s.last_error.as_deref()), (Some(NOW), None));
    assert_eq!(s.reset_used_at_ms, Some(NOW - HOUR), "nothing spent");
    assert!(s.is_listed(NOW + DAY - HOUR - 1));
    assert!(s.refresh(NOW + DAY - HOUR), "dropped with the reset");
    let mut fresh = LimitResetSlot::default();
    fresh.record(&Tried::NotLimited, NOW);
    assert!(!fresh.is_listed(NOW), "nothing worth listing");
}

#[test]
fn recording_a_try_moves_the_slot_like_its_step() {
    let mut s = LimitResetSlot::default();
    assert!(s.claim(NOW));
    s.record(&Tried::Reset, NOW);
    assert_eq!(
        (s.last_outcome, s.reset_used_at_ms),
        (Some(Outcome::Reset), Some(NOW))
    );
    s.record(
        &Tried::Unavailable(Unavailable::AlreadyUsed, Some(NOW + DAY)),
        NOW + 1,
    );
    assert_eq!(s.next_available_at_ms, Some(NOW + DAY));
    assert!(!s.may_query(NOW + DAY - 1));
    s.record(&Tried::Failed("HTTP 500".into()), NOW + 2);
    assert_eq!(s.next_query_after_ms, Some(NOW + 2 + 15 * 60_000));
    assert_eq!(s.last_outcome, Some(Outcome::Error));
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
    s.unavailable(Unavailable::AlreadyUsed, None, NOW);
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
    s.unavailable(Unavailable::NotOffered, Some(NOW + 2 * DAY), NOW);
    assert_eq!(s.next_available_at_ms, Some(NOW + 2 * DAY));
    assert_eq!(s.last_outcome, Some(Outcome::NotOffered));
    assert!(!s.may_query(NOW + 2 * DAY - 1));
    assert!(s.may_query(NOW + 2 * DAY));
    let mut past = LimitResetSlot::default();
    past.unavailable(Unavailable::NotOffered, Some(NOW - 1), NOW);
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
    s.unavailable(Unavailable::AlreadyUsed, Some(NOW + DAY), NOW);
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
