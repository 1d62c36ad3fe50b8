//! The retry-hint parser vectors (v1–v17, and cases A05, A07) as one table, plus a
//! generated-garbage property test.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};

use super::{FLOOR, Hint, HintSource, cap, parse, parse_go_duration, whole_seconds_up};

/// 2030-01-01T00:00:00Z.
const NOW_2030: u64 = 1_893_456_000;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(
            HeaderName::from_bytes(k.as_bytes()).expect("header name"),
            HeaderValue::from_str(v).expect("header value"),
        );
    }
    map
}

struct Row {
    name: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
    now: u64,
    want: Option<(Duration, HintSource, bool)>,
}

const fn row(
    name: &'static str,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
    now: u64,
    want: Option<(Duration, HintSource, bool)>,
) -> Row {
    Row {
        name,
        headers,
        body,
        now,
        want,
    }
}

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

const fn ms(m: u64) -> Duration {
    Duration::from_millis(m)
}

#[test]
fn vectors() {
    use HintSource::*;
    #[rustfmt::skip]
    let rows = [
        row("v1 retry-after seconds", &[("retry-after", "120")], "", NOW_2030, Some((secs(120), RetryAfter, false))),
        row("v2 retry-after date against upstream date", &[("retry-after", "Wed, 21 Oct 2099 07:28:00 GMT"), ("date", "Wed, 21 Oct 2099 07:27:30 GMT")], "", NOW_2030, Some((secs(30), RetryAfter, false))),
        row("v2b retry-after date against now_wall when no date header", &[("retry-after", "Tue, 01 Jan 2030 00:00:45 GMT")], "", NOW_2030, Some((secs(45), RetryAfter, false))),
        row("v2c invalid date header falls back to now_wall", &[("retry-after", "Tue, 01 Jan 2030 00:00:45 GMT"), ("date", "yesterday")], "", NOW_2030, Some((secs(45), RetryAfter, false))),
        row("v3 retry-after date in the past", &[("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")], "", NOW_2030, Some((FLOOR, RetryAfter, false))),
        row("v4 retry-after 0", &[("retry-after", "0")], "", NOW_2030, Some((FLOOR, RetryAfter, false))),
        row("v5 retry-after-ms", &[("retry-after-ms", "1500")], "", NOW_2030, Some((ms(1500), RetryAfterMs, false))),
        row("v5b retry-after-ms beats retry-after", &[("retry-after", "120"), ("retry-after-ms", "1500")], "", NOW_2030, Some((ms(1500), RetryAfterMs, false))),
        row("v6 reset-requests", &[("x-ratelimit-reset-requests", "1m30s")], "", NOW_2030, Some((secs(90), OpenAiBucket, false))),
        row("v7a 6m0s", &[("x-ratelimit-reset-tokens", "6m0s")], "", NOW_2030, Some((secs(360), OpenAiBucket, false))),
        row("v7b 2m30.5s", &[("x-ratelimit-reset-tokens", "2m30.5s")], "", NOW_2030, Some((ms(150_500), OpenAiBucket, false))),
        row("v7c 500ms", &[("x-ratelimit-reset-tokens", "500ms")], "", NOW_2030, Some((ms(500), OpenAiBucket, false))),
        row("v7d 1h30m", &[("x-ratelimit-reset-tokens", "1h30m")], "", NOW_2030, Some((secs(5400), OpenAiBucket, false))),
        row("v8 only tokens exhausted", &[("x-ratelimit-reset-requests", "1m30s"), ("x-ratelimit-reset-tokens", "20s"), ("x-ratelimit-remaining-tokens", "0")], "", NOW_2030, Some((secs(20), OpenAiBucket, false))),
        row("v8b no remaining headers: the larger", &[("x-ratelimit-reset-requests", "1m30s"), ("x-ratelimit-reset-tokens", "20s")], "", NOW_2030, Some((secs(90), OpenAiBucket, false))),
        row("A07 exhausted tokens bucket beats body text", &[("x-ratelimit-remaining-requests", "12"), ("x-ratelimit-remaining-tokens", "0"), ("x-ratelimit-reset-requests", "1m30s"), ("x-ratelimit-reset-tokens", "6m0s")], r#"{"error":{"code":"rate_limit_exceeded","message":"TPM limit. Please try again in 1m9.696s."}}"#, NOW_2030, Some((secs(360), OpenAiBucket, false))),
        row("A07 without reset headers: body text", &[], r#"{"error":{"code":"rate_limit_exceeded","message":"TPM limit. Please try again in 1m9.696s."}}"#, NOW_2030, Some((ms(69_696), BodyText, false))),
        row("v9 anthropic bucket RFC 3339 against date", &[("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:01Z"), ("date", "Tue, 01 Jan 2030 00:00:00 GMT")], "", NOW_2030 + 500, Some((secs(1), AnthropicBucket, false))),
        row("v9b anthropic buckets: latest exhausted", &[("anthropic-ratelimit-requests-reset", "2030-01-01T00:00:10Z"), ("anthropic-ratelimit-requests-remaining", "0"), ("anthropic-ratelimit-tokens-reset", "2030-01-01T00:00:30Z"), ("anthropic-ratelimit-tokens-remaining", "5000"), ("anthropic-ratelimit-output-tokens-reset", "2030-01-01T00:00:20Z"), ("anthropic-ratelimit-output-tokens-remaining", "0")], "", NOW_2030, Some((secs(20), AnthropicBucket, false))),
        row("v10 unified: latest of the rejected windows", &[("anthropic-ratelimit-unified-status", "rejected"), ("anthropic-ratelimit-unified-reset", "1893459600"), ("anthropic-ratelimit-unified-5h-status", "rejected"), ("anthropic-ratelimit-unified-5h-reset", "1893459600"), ("anthropic-ratelimit-unified-7d-status", "rejected"), ("anthropic-ratelimit-unified-7d-reset", "1893466800"), ("anthropic-ratelimit-unified-7d_opus-status", "allowed"), ("anthropic-ratelimit-unified-7d_opus-reset", "1893542400")], "", NOW_2030, Some((secs(10_800), AnthropicUnified, false))),
        row("v10b unified: no rejected window is no hint", &[("anthropic-ratelimit-unified-5h-status", "allowed"), ("anthropic-ratelimit-unified-5h-reset", "1893459600")], "", NOW_2030, None),
        row("v11a gemini retryDelay", &[], r#"{"error":{"code":429,"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#, NOW_2030, Some((secs(26), GeminiBody, false))),
        row("v11b gemini fractional retryDelay kept", &[], r#"{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"45.837906927s"}]}}"#, NOW_2030, Some((Duration::new(45, 837_906_927), GeminiBody, false))),
        row("v12a quotaResetDelay ms", &[], r#"{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"QUOTA_EXHAUSTED","metadata":{"quotaResetDelay":"373.801628ms"}}]}}"#, NOW_2030, Some((Duration::from_nanos(373_801_628), GeminiBody, false))),
        row("v12b quotaResetDelay hours", &[], r#"[{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","metadata":{"quotaResetDelay":"2h57m16.9s"}}]}}]"#, NOW_2030, Some((ms(10_636_900), GeminiBody, false))),
        row("A05 structured retryDelay beats message text", &[], r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"Quota hit. Please retry in 26.66s.","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#, NOW_2030, Some((secs(26), GeminiBody, false))),
        row("v13a 579ms", &[], "Please try again in 579ms.", NOW_2030, Some((ms(579), BodyText, false))),
        row("v13b 12.441s", &[], "Please try again in 12.441s.", NOW_2030, Some((ms(12_441), BodyText, false))),
        row("v13c 1m9.696s", &[], "Please try again in 1m9.696s.", NOW_2030, Some((ms(69_696), BodyText, false))),
        row("v13d retry in", &[], "Quota hit. Please retry in 26.66s.", NOW_2030, Some((ms(26_660), BodyText, false))),
        row("v14 azure seconds", &[], "Please retry after 3 seconds.", NOW_2030, Some((secs(3), BodyText, false))),
        row("v15a quota reset", &[], "Your quota will reset after 16h26m14s.", NOW_2030, Some((secs(59_174), BodyText, true))),
        row("v15b parenthesised reset", &[], "usage limit reached (reset after 24h)", NOW_2030, Some((secs(86_400), BodyText, true))),
        row("v16a garbage abc falls through", &[("retry-after", "abc"), ("retry-after-ms", "abc")], "", NOW_2030, None),
        row("v16b -5 falls through to body", &[("retry-after", "-5")], "try again in 4s", NOW_2030, Some((secs(4), BodyText, false))),
        row("v16c empty", &[("retry-after", ""), ("retry-after-ms", "")], "", NOW_2030, None),
        row("v16d 1e309", &[("retry-after", "1e309")], "", NOW_2030, None),
        row("v16e huge integer", &[("retry-after", "99999999999999999999"), ("retry-after-ms", "99999999999999999999999999")], "", NOW_2030, None),
        row("v16f NaN", &[("retry-after", "NaN"), ("x-ratelimit-reset-tokens", "NaN")], "try again in NaN", NOW_2030, None),
        row("v16g garbage ms falls through to retry-after", &[("retry-after-ms", "-5"), ("retry-after", "7")], "", NOW_2030, Some((secs(7), RetryAfter, false))),
        row("v16h garbage bucket falls through to gemini", &[("x-ratelimit-reset-tokens", "soon")], r#"{"error":{"details":[{"retryDelay":"9s"}]}}"#, NOW_2030, Some((secs(9), GeminiBody, false))),
        row("zero structured hint floors", &[("x-ratelimit-reset-tokens", "0s")], "", NOW_2030, Some((FLOOR, OpenAiBucket, false))),
        row("no hint at all", &[("content-type", "application/json")], r#"{"error":{"message":"slow down"}}"#, NOW_2030, None),
    ];
    for r in rows {
        let got = parse(&headers(r.headers), r.body.as_bytes(), at(r.now));
        let want = r.want.map(|(delay, source, quota_text)| Hint {
            delay,
            source,
            quota_text,
        });
        assert_eq!(got, want, "{}", r.name);
    }
}

#[test]
fn vector_17_cap_and_rounding() {
    assert_eq!(cap(secs(86_400), secs(1_800)), secs(1_800));
    assert_eq!(cap(secs(5), secs(1_800)), secs(5));
    assert_eq!(cap(Duration::MAX, secs(7 * 86_400)), secs(7 * 86_400));
    assert_eq!(cap(secs(5), Duration::ZERO), FLOOR);
    let huge = parse(
        &headers(&[("retry-after", "18446744073709551615")]),
        b"",
        at(NOW_2030),
    );
    assert_eq!(huge.map(|h| cap(h.delay, secs(1_800))), Some(secs(1_800)));
    assert_eq!(whole_seconds_up(ms(26_660)), 27);
    assert_eq!(whole_seconds_up(secs(26)), 26);
    assert_eq!(whole_seconds_up(ms(1)), 1);
    assert_eq!(whole_seconds_up(Duration::MAX), u64::MAX);
}

/// Tiny xorshift64 so the property test needs no extra crate and is reproducible.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let i = usize::try_from(self.next() % items.len() as u64).expect("index");
        items[i]
    }
}

#[test]
fn generated_garbage_never_panics_never_zero() {
    const ATOMS: &[&str] = &[
        "0",
        "1",
        "9",
        "-",
        "+",
        ".",
        "e",
        "E",
        "309",
        "NaN",
        "inf",
        "s",
        "ms",
        "m",
        "h",
        "µs",
        "ns",
        "d",
        " ",
        ",",
        ":",
        "GMT",
        "Wed",
        "Oct",
        "21",
        "2099",
        "2015",
        "T",
        "Z",
        "-00:00",
        "99999999999999999999",
        "18446744073709551615",
        "abc",
        "try again in ",
        "retry after ",
        "reset after ",
        "seconds",
        "\"",
        "{",
        "}",
        "[",
        "]",
        "retryDelay",
        "quotaResetDelay",
        "\u{989d}",
        "(",
        ")",
        "~",
        "about ",
    ];
    const NAMES: &[&str] = &[
        "retry-after",
        "retry-after-ms",
        "date",
        "x-ratelimit-reset-tokens",
        "x-ratelimit-reset-requests",
        "x-ratelimit-remaining-tokens",
        "anthropic-ratelimit-unified-reset",
        "anthropic-ratelimit-unified-status",
        "anthropic-ratelimit-unified-5h-reset",
        "anthropic-ratelimit-tokens-reset",
        "anthropic-ratelimit-tokens-remaining",
    ];
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for i in 0..20_000u64 {
        let mut map = HeaderMap::new();
        let mut value = String::new();
        for _ in 0..(rng.next() % 8) {
            value.push_str(rng.pick(ATOMS));
        }
        if let Ok(v) = HeaderValue::from_str(&value) {
            map.insert(HeaderName::from_static(rng.pick(NAMES)), v);
        }
        let mut body = String::new();
        for _ in 0..(rng.next() % 16) {
            body.push_str(rng.pick(ATOMS));
        }
        let gemini = format!(r#"{{"error":{{"details":[{{"retryDelay":"{value}"}}]}}}}"#);
        let now = at(rng.next() % (NOW_2030 * 2));
        for b in [body.as_bytes(), gemini.as_bytes(), value.as_bytes()] {
            if let Some(h) = parse(&map, b, now) {
                assert!(
                    !h.delay.is_zero(),
                    "zero hint at iteration {i}: {value:?} / {body:?}"
                );
            }
        }
        // The Go-duration parser alone on the raw atom soup.
        let _ = parse_go_duration(&value);
        let _ = parse_go_duration(&body);
    }
    // And raw random bytes as bodies.
    for _ in 0..5_000 {
        let len = usize::try_from(rng.next() % 64).expect("len");
        let bytes: Vec<u8> = (0..len).map(|_| (rng.next() & 0xff) as u8).collect();
        if let Some(h) = parse(&HeaderMap::new(), &bytes, at(NOW_2030)) {
            assert!(!h.delay.is_zero());
        }
    }
}
