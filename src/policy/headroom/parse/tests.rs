//! Vector tests for the header parsers, plus a hostile-input sweep.

use super::*;

/// 2026-12-02T02:40:00Z.
const NOW: u64 = 1_796_179_200_000;

fn obs(headers: &[(&str, &str)]) -> Observation {
    parse(headers.iter().copied(), NOW)
}

fn window(o: &Observation, w: Window) -> WindowState {
    o.windows
        .iter()
        .find(|(x, _)| *x == w)
        .map(|(_, s)| *s)
        .unwrap_or_else(|| panic!("window {w:?} missing in {o:?}"))
}

#[test]
fn rfc3339_vectors() {
    let cases: &[(&str, Option<u64>)] = &[
        ("1970-01-01T00:00:00Z", Some(0)),
        ("2030-01-01T00:00:01Z", Some(1_893_456_001_000)),
        ("2030-01-01 00:00:01z", Some(1_893_456_001_000)),
        ("2030-01-01t00:00:01Z", Some(1_893_456_001_000)),
        ("  2030-01-01T00:00:01Z  ", Some(1_893_456_001_000)),
        ("2024-02-29T12:00:00.5+02:00", Some(1_709_200_800_500)),
        ("2030-01-01T00:00:01.123456789Z", Some(1_893_456_001_123)),
        ("2030-01-01T00:00:00-01:00", Some(1_893_459_600_000)),
        // A leap second reads as the last millisecond of second 59, and only at a month's end.
        ("2016-12-31T23:59:60Z", Some(1_483_228_799_999)),
        ("2016-12-30T23:59:60Z", None),
        ("2026-01-01T00:00:00Z", Some(1_767_225_600_000)),
        ("2026-01-01T02:00:00.250+02:00", Some(1_767_225_600_250)),
        ("1969-12-31T23:59:59.999Z", None),
        ("2000-03-01T00:00:00Z", Some(951_868_800_000)),
        ("9999-12-31T23:59:59Z", Some(253_402_300_799_000)),
        ("1969-12-31T23:59:59Z", None),
        ("1970-01-01T00:30:00+01:00", None),
        ("2023-02-29T00:00:00Z", None),
        ("1900-02-29T00:00:00Z", None),
        ("2030-13-01T00:00:00Z", None),
        ("2030-00-01T00:00:00Z", None),
        ("2030-04-31T00:00:00Z", None),
        ("2030-01-01T24:00:00Z", None),
        ("2030-01-01T00:60:00Z", None),
        ("2030-01-01T00:00:61Z", None),
        ("2030-01-01T00:00:00+24:00", None),
        ("2030-01-01T00:00:00+01:60", None),
        ("2030-01-01T00:00:00+0100", None),
        ("2030-01-01T00:00:00", None),
        ("2030-01-01T00:00:00.Z", None),
        ("2030-01-01T00:00:00ZZ", None),
        ("2030-01-01X00:00:00Z", None),
        ("2030/01/01T00:00:00Z", None),
        ("+030-01-01T00:00:00Z", None),
        ("2030-01-01T00:00:00é", None),
        ("２０３０-01-01T00:00:00Z", None),
        ("1893456001", None),
        ("", None),
    ];
    for (input, want) in cases {
        assert_eq!(rfc3339_ms(input), *want, "{input:?}");
    }
}

#[test]
fn unix_seconds_vectors() {
    let cases: &[(&str, Option<u64>)] = &[
        ("0", Some(0)),
        ("1796197200", Some(1_796_197_200_000)),
        (" 1796197200 ", Some(1_796_197_200_000)),
        ("1796197200.5", Some(1_796_197_200_500)),
        ("1796197200.123456", Some(1_796_197_200_123)),
        ("1796197200.", None),
        (".5", None),
        ("-1", None),
        ("+1796197200", None),
        ("1e9", None),
        ("18446744073709551615", None),
        ("99999999999999999999999", None),
        ("1.2.3", None),
        ("2030-01-01T00:00:00Z", None),
        ("", None),
    ];
    for (input, want) in cases {
        assert_eq!(unix_seconds_ms(input), *want, "{input:?}");
    }
}

#[test]
fn go_reset_vectors() {
    let cases: &[(&str, Option<u64>)] = &[
        ("6m0s", Some(NOW + 360_000)),
        ("1s", Some(NOW + 1_000)),
        ("20ms", Some(NOW + 20)),
        ("1h2m3.5s", Some(NOW + 3_723_500)),
        ("0s", Some(NOW)),
        ("", None),
        ("6", None),
        ("-1s", None),
        ("1d", None),
        ("abc", None),
    ];
    for (input, want) in cases {
        assert_eq!(go_reset_ms(input, NOW), *want, "{input:?}");
    }
    assert_eq!(go_reset_ms("1000000h", u64::MAX - 5), Some(u64::MAX));
}

#[test]
fn count_and_fraction_vectors() {
    assert_eq!(count("4000"), Some(4000));
    assert_eq!(count(" 0 "), Some(0));
    for bad in ["", "-1", "1.5", "1e3", "18446744073709551616", "12a", "+3"] {
        assert_eq!(count(bad), None, "{bad:?}");
    }
    let fr: &[(&str, Option<f64>)] = &[
        ("0", Some(0.0)),
        ("0.25", Some(0.25)),
        (".5", Some(0.5)),
        ("1", Some(1.0)),
        ("1.07", Some(1.0)),
        ("2", Some(1.0)),
        ("2.5", None),
        ("45", None),
        ("-0.1", None),
        ("NaN", None),
        ("inf", None),
        ("1e-3", None),
        ("0.5.5", None),
        (".", None),
        ("", None),
        ("25%", None),
    ];
    for (input, want) in fr {
        assert_eq!(fraction_used(input), *want, "{input:?}");
    }
}

#[test]
fn anthropic_api_buckets() {
    let o = obs(&[
        ("anthropic-ratelimit-requests-limit", "50"),
        ("anthropic-ratelimit-requests-remaining", "49"),
        ("anthropic-ratelimit-requests-reset", "2026-12-02T02:40:01Z"),
        ("Anthropic-RateLimit-Tokens-Limit", "100000"),
        ("anthropic-ratelimit-tokens-remaining", "25000"),
        ("anthropic-ratelimit-input-tokens-limit", "80000"),
        ("anthropic-ratelimit-input-tokens-remaining", "0"),
        (
            "anthropic-ratelimit-input-tokens-reset",
            "2026-12-02T02:41:00Z",
        ),
        ("anthropic-ratelimit-output-tokens-remaining", "0"),
        ("anthropic-ratelimit-output-tokens-reset", "not a date"),
        ("anthropic-ratelimit-weird-tokens-limit", "5"),
        ("content-type", "application/json"),
    ]);
    assert!(o.unified.is_none() && o.overage.is_none());
    let r = window(&o, Window::Requests);
    assert_eq!(r.remaining, Some(0.98));
    assert_eq!((r.limit, r.remaining_count), (Some(50), Some(49)));
    assert_eq!(r.reset_at_ms, Some(NOW + 1_000));
    assert_eq!(r.observed_at_ms, NOW);
    let t = window(&o, Window::Tokens);
    assert_eq!((t.remaining, t.reset_at_ms), (Some(0.25), None));
    let i = window(&o, Window::InputTokens);
    assert_eq!(
        (i.remaining, i.reset_at_ms),
        (Some(0.0), Some(NOW + 60_000))
    );
    let out = window(&o, Window::OutputTokens);
    assert_eq!((out.remaining, out.reset_at_ms), (Some(0.0), None));
    assert_eq!(o.windows.len(), 4);
}

#[test]
fn anthropic_subscription_windows_and_summary() {
    let o = obs(&[
        ("anthropic-ratelimit-unified-status", "allowed_warning"),
        ("anthropic-ratelimit-unified-reset", "1796197200"),
        (
            "anthropic-ratelimit-unified-representative-claim",
            "five_hour",
        ),
        ("anthropic-ratelimit-unified-5h-utilization", "0.91"),
        ("anthropic-ratelimit-unified-5h-reset", "1796197200"),
        ("anthropic-ratelimit-unified-5h-status", "allowed_warning"),
        ("anthropic-ratelimit-unified-7d-utilization", "0.4"),
        ("anthropic-ratelimit-unified-7d-reset", "1796700000"),
        ("anthropic-ratelimit-unified-7d-status", "allowed"),
        ("anthropic-ratelimit-unified-overage-status", "rejected"),
        (
            "anthropic-ratelimit-unified-overage-disabled-reason",
            "out_of_credits",
        ),
        ("anthropic-ratelimit-unified-overage-reset", "1796700000"),
        ("anthropic-ratelimit-unified-fallback-percentage", "0.5"),
    ]);
    let five = window(&o, Window::FiveHour);
    assert!((five.remaining.unwrap() - 0.09).abs() < 1e-9);
    assert_eq!(five.reset_at_ms, Some(1_796_197_200_000));
    assert_eq!(five.status, Some(WindowStatus::AllowedWarning));
    let seven = window(&o, Window::SevenDay);
    assert!((seven.remaining.unwrap() - 0.6).abs() < 1e-9);
    assert_eq!(seven.status, Some(WindowStatus::Allowed));
    let u = o.unified.unwrap();
    assert_eq!(u.status, Some(WindowStatus::AllowedWarning));
    assert_eq!(u.reset_at_ms, Some(1_796_197_200_000));
    assert_eq!(u.representative_claim, Some(Window::FiveHour));
    assert_eq!(u.observed_at_ms, NOW);
    let ov = o.overage.unwrap();
    assert_eq!(ov.status, Some(WindowStatus::Rejected));
    assert_eq!(ov.disabled_reason.as_deref(), Some("out_of_credits"));
    assert_eq!(ov.reset_at_ms, Some(1_796_700_000_000));
}

#[test]
fn subscription_claims_and_statuses() {
    let claim = |v: &str| {
        obs(&[("anthropic-ratelimit-unified-representative-claim", v)])
            .unified
            .and_then(|u| u.representative_claim)
    };
    assert_eq!(claim("seven_day"), Some(Window::SevenDay));
    assert_eq!(claim(" Five_Hour "), Some(Window::FiveHour));
    assert_eq!(claim("seven_day_opus"), None);
    assert_eq!(claim(""), None);
    let st = |v: &str| obs(&[("anthropic-ratelimit-unified-5h-status", v)]);
    assert_eq!(
        window(&st("rejected"), Window::FiveHour).status,
        Some(WindowStatus::Rejected)
    );
    assert!(st("throttled").is_empty());
    let reason = |v: &str| obs(&[("anthropic-ratelimit-unified-overage-disabled-reason", v)]);
    assert!(reason("has space").is_empty());
    assert!(reason(&"x".repeat(MAX_REASON_LEN + 1)).is_empty());
    assert_eq!(
        reason("org_level_disabled")
            .overage
            .unwrap()
            .disabled_reason,
        Some("org_level_disabled".into())
    );
    let over = obs(&[("anthropic-ratelimit-unified-overage-utilization", "0.25")]);
    assert_eq!(over.overage.unwrap().remaining, Some(0.75));
}

#[test]
fn openai_buckets() {
    let o = obs(&[
        ("x-ratelimit-limit-requests", "10000"),
        ("x-ratelimit-remaining-requests", "9999"),
        ("x-ratelimit-reset-requests", "6ms"),
        ("x-ratelimit-limit-tokens", "200000"),
        ("x-ratelimit-remaining-tokens", "150000"),
        ("x-ratelimit-reset-tokens", "6m0s"),
        ("x-ratelimit-reset-images", "1s"),
        ("x-ratelimit-limit", "5"),
    ]);
    assert_eq!(o.windows.len(), 2);
    let r = window(&o, Window::Requests);
    assert_eq!(r.remaining, Some(0.9999));
    assert_eq!(r.reset_at_ms, Some(NOW + 6));
    let t = window(&o, Window::Tokens);
    assert_eq!(t.remaining, Some(0.75));
    assert_eq!(t.reset_at_ms, Some(NOW + 360_000));
}

#[test]
fn remaining_fraction_rules() {
    let rem = |h: &[(&str, &str)]| window(&obs(h), Window::Tokens).remaining;
    // remaining above limit caps at 1; limit 0 gives no fraction unless remaining is 0.
    assert_eq!(
        rem(&[
            ("x-ratelimit-limit-tokens", "10"),
            ("x-ratelimit-remaining-tokens", "20")
        ]),
        Some(1.0)
    );
    assert_eq!(
        rem(&[
            ("x-ratelimit-limit-tokens", "0"),
            ("x-ratelimit-remaining-tokens", "5")
        ]),
        None
    );
    assert_eq!(rem(&[("x-ratelimit-remaining-tokens", "0")]), Some(0.0));
    assert_eq!(rem(&[("x-ratelimit-remaining-tokens", "7")]), None);
    assert_eq!(rem(&[("x-ratelimit-limit-tokens", "7")]), None);
    // a later duplicate wins; an unreadable later duplicate does not erase the earlier value.
    assert_eq!(
        rem(&[
            ("x-ratelimit-limit-tokens", "100"),
            ("x-ratelimit-remaining-tokens", "10"),
            ("x-ratelimit-remaining-tokens", "50"),
            ("x-ratelimit-remaining-tokens", "oops"),
        ]),
        Some(0.5)
    );
}

#[test]
fn nothing_readable_is_empty() {
    assert!(obs(&[]).is_empty());
    assert!(
        obs(&[
            ("anthropic-ratelimit-unified-5h-utilization", "lots"),
            ("anthropic-ratelimit-unified-status", "maybe"),
            ("anthropic-ratelimit-requests-remaining", "-3"),
            ("x-ratelimit-reset-tokens", "soon"),
            ("anthropic-ratelimit-", "1"),
            ("x-ratelimit-", "1"),
            ("retry-after", "30"),
        ])
        .is_empty()
    );
}

#[test]
fn header_map_adapter_skips_opaque_values() {
    let mut map = http::HeaderMap::new();
    map.insert("x-ratelimit-remaining-tokens", "0".parse().unwrap());
    map.insert(
        "x-ratelimit-limit-tokens",
        http::HeaderValue::from_bytes(b"\xff10").unwrap(),
    );
    let o = parse(header_pairs(&map), NOW);
    let t = window(&o, Window::Tokens);
    assert_eq!((t.remaining, t.limit), (Some(0.0), None));
}

#[test]
fn header_map_adapter_yields_only_the_rate_limit_families() {
    let mut map = http::HeaderMap::new();
    for (n, v) in [
        ("content-type", "application/json"),
        ("retry-after", "30"),
        ("anthropic-ratelimit-unified-status", "allowed"),
        ("x-ratelimit-remaining-requests", "9"),
        ("x-request-id", "req_1"),
    ] {
        map.insert(n, v.parse().unwrap());
    }
    let names: Vec<&str> = header_pairs(&map).map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "anthropic-ratelimit-unified-status",
            "x-ratelimit-remaining-requests"
        ]
    );
}

/// Every header name this module reads, for the hostile sweep.
const NAMES: &[&str] = &[
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
    "anthropic-ratelimit-unified-status",
    "anthropic-ratelimit-unified-reset",
    "anthropic-ratelimit-unified-representative-claim",
    "anthropic-ratelimit-unified-5h-utilization",
    "anthropic-ratelimit-unified-5h-reset",
    "anthropic-ratelimit-unified-7d-status",
    "anthropic-ratelimit-unified-7d-utilization",
    "anthropic-ratelimit-unified-overage-status",
    "anthropic-ratelimit-unified-overage-reset",
    "anthropic-ratelimit-unified-overage-utilization",
    "anthropic-ratelimit-unified-overage-disabled-reason",
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
];

fn check_invariants(o: &Observation) {
    for (_, s) in &o.windows {
        if let Some(r) = s.remaining {
            assert!((0.0..=1.0).contains(&r), "remaining {r} out of range");
        }
        assert_eq!(s.observed_at_ms, NOW);
    }
    if let Some(r) = o.overage.as_ref().and_then(|o| o.remaining) {
        assert!((0.0..=1.0).contains(&r));
    }
}

#[test]
fn hostile_values_are_ignored_never_panic() {
    let long = "9".repeat(10_000);
    let hostile: &[&str] = &[
        "",
        " ",
        "\t",
        "-",
        ".",
        "..",
        "-0",
        "NaN",
        "nan",
        "inf",
        "-inf",
        "1e308",
        "1e309",
        "0x10",
        "18446744073709551616",
        "340282366920938463463374607431768211456",
        "99999999999999999999h",
        "9999999999999999999.9999s",
        "2030-02-30T00:00:00Z",
        "2030-01-01T00:00:00+99:99",
        "9999-99-99T99:99:99Z",
        "0000-01-01T00:00:00Z",
        "é",
        "日本語の値",
        "\u{0}",
        "1\u{0}",
        "١٢٣",
        "５",
        &long,
    ];
    for name in NAMES {
        for v in hostile {
            let o = obs(&[(name, v)]);
            check_invariants(&o);
            // Only the free-form reason token may accept words like `nan` or `0x10`.
            if !name.ends_with("disabled-reason") {
                assert!(o.is_empty(), "{name}: {v:?} was read as {o:?}");
            }
        }
    }
}

/// SplitMix64, so the random sweep is the same on every run.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn seeded_random_bytes_never_panic() {
    const ALPHABET: &[u8] = b"0123456789.:-+TZtz sm hun\xc2\xb5\xff\x00e";
    let mut seed = 0x5EED_u64;
    for _ in 0..10_000 {
        let len = (next(&mut seed) % 40) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| {
                let r = next(&mut seed);
                if r % 4 == 0 {
                    (r >> 8) as u8
                } else {
                    ALPHABET[(r >> 8) as usize % ALPHABET.len()]
                }
            })
            .collect();
        let value = String::from_utf8_lossy(&bytes);
        let name = NAMES[(next(&mut seed) as usize) % NAMES.len()];
        let o = obs(&[(name, &value)]);
        check_invariants(&o);
        let mut h = super::super::Headroom::default();
        h.merge(o, Some("m"));
        let _ = h.binding(None, NOW);
        let _ = h.rows(NOW);
    }
}
