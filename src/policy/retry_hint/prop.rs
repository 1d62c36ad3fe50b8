//! Property tests (proptest) for the retry-hint parser: any header values and any body give
//! `None` or a non-zero delay, never a panic or an overflow; well-formed values
//! parse to exactly what they say; precedence holds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;

use super::{FLOOR, HintSource, cap, parse, parse_go_duration, whole_seconds_up};

/// Cases per property: 256, or 4096 with `SLUICE_RELIABILITY=long`.
fn config() -> ProptestConfig {
    let long = std::env::var("SLUICE_RELIABILITY").is_ok_and(|v| v == "long");
    ProptestConfig {
        cases: if long { 4096 } else { 256 },
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// Every header the parser reads (rate-limit headers included).
const NAMES: &[&str] = &[
    "retry-after",
    "retry-after-ms",
    "date",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "anthropic-ratelimit-unified-reset",
    "anthropic-ratelimit-unified-status",
    "anthropic-ratelimit-unified-5h-reset",
    "anthropic-ratelimit-unified-5h-status",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-tokens-remaining",
];

/// Header values: numbers of every size and sign, Go durations, dates, and printable garbage.
fn header_value() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u64>().prop_map(|n| format!("{n}{n}")),
        any::<f64>().prop_map(|f| f.to_string()),
        "[0-9]{1,4}(h|m|s|ms|us|ns|µs)([0-9]{1,3}(m|s|ms))?",
        "[0-9.]{1,6}s",
        Just("Wed, 21 Oct 2099 07:28:00 GMT".to_string()),
        Just("2030-01-01T00:00:01Z".to_string()),
        Just("rejected".to_string()),
        Just("allowed".to_string()),
        Just("0".to_string()),
        Just("NaN".to_string()),
        Just("1e309".to_string()),
        "[ -~]{0,40}",
    ]
}

fn headers() -> impl Strategy<Value = HeaderMap> {
    prop::collection::vec((prop::sample::select(NAMES), header_value()), 0..6).prop_map(|pairs| {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            if let Ok(v) = HeaderValue::from_str(&v) {
                map.append(HeaderName::from_static(k), v);
            }
        }
        map
    })
}

/// Bodies: provider error JSON with arbitrary delay strings, hint sentences, or raw bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        header_value().prop_map(|d| format!(
            r#"{{"error":{{"code":429,"details":[{{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"{d}"}}]}}}}"#
        ).into_bytes()),
        header_value().prop_map(|d| format!(
            r#"{{"error":{{"details":[{{"metadata":{{"quotaResetDelay":"{d}"}}}}]}}}}"#
        ).into_bytes()),
        header_value().prop_map(|d| format!("Please try again in {d}.").into_bytes()),
        header_value().prop_map(|d| format!("Please retry after {d} seconds.").into_bytes()),
        header_value().prop_map(|d| format!("Your quota will reset after {d}.").into_bytes()),
        prop::collection::vec(any::<u8>(), 0..64),
    ]
}

fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_893_456_000)
}

proptest! {
    #![proptest_config(config())]

    /// Whatever arrives: `None`, or a non-zero delay; capping and rounding never overflow.
    #[test]
    fn never_panics_never_zero(h in headers(), b in body(), wall in any::<u64>()) {
        let wall = UNIX_EPOCH.checked_add(Duration::from_millis(wall)).unwrap_or(now());
        if let Some(hint) = parse(&h, &b, wall) {
            // Sub-second hints are kept (test vector v13a); only zero becomes the floor.
            prop_assert!(!hint.delay.is_zero(), "{hint:?}");
            let capped = cap(hint.delay, Duration::from_secs(1800));
            prop_assert!(!capped.is_zero() && capped <= Duration::from_secs(1800));
            prop_assert!(whole_seconds_up(hint.delay) >= 1);
        }
    }

    /// `retry-after: N` is N seconds (floored to 1 s), whatever else the body says.
    #[test]
    fn retry_after_seconds_are_exact(n in 0u32..10_000_000, b in body()) {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from(n));
        let hint = parse(&h, &b, now()).unwrap();
        prop_assert_eq!(hint.source, HintSource::RetryAfter);
        prop_assert_eq!(hint.delay, Duration::from_secs(u64::from(n)).max(FLOOR));
    }

    /// A valid `retry-after-ms` wins over `retry-after`.
    #[test]
    fn retry_after_ms_wins(ms in 0u32..100_000_000, s in header_value()) {
        let mut h = HeaderMap::new();
        h.insert("retry-after-ms", HeaderValue::from(ms));
        if let Ok(v) = HeaderValue::from_str(&s) {
            h.insert("retry-after", v);
        }
        let hint = parse(&h, b"", now()).unwrap();
        prop_assert_eq!(hint.source, HintSource::RetryAfterMs);
        let want = if ms == 0 { FLOOR } else { Duration::from_millis(u64::from(ms)) };
        prop_assert_eq!(hint.delay, want);
    }

    /// Go durations built from parts parse to the sum of the parts.
    #[test]
    fn go_durations_sum_their_parts(h in 0u64..1000, m in 0u64..1000, s in 0u64..1000, ms in 0u64..1000) {
        let text = format!("{h}h{m}m{s}s{ms}ms");
        let want = Duration::from_secs(h * 3600 + m * 60 + s) + Duration::from_millis(ms);
        prop_assert_eq!(parse_go_duration(&text), Some(want));
    }

    /// Arbitrary text never panics the Go-duration parser.
    #[test]
    fn go_duration_never_panics(text in "[0-9hmsuµn.+-]{0,24}|.{0,24}") {
        let _ = parse_go_duration(&text);
    }
}
