//! Text formats behind retry hints: decimals, Go-style durations, HTTP-dates and RFC 3339.
//!
//! HTTP-dates come from the `httpdate` crate and RFC 3339 timestamps from `time`; decimals
//! and Go-style durations are hand-written because upstreams bend them slightly. Every
//! parser here rejects garbage (`abc`, `-5`, `1e309`, `NaN`, overflow) by returning `None`,
//! never by panicking or by clamping to zero; the vector tables below and in `tests.rs` are
//! the safety net for both.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Parses a non-negative decimal such as `120`, `1500`, `26.66` into `(whole, nanos)`
/// scaled by `unit_nanos` (nanoseconds per unit). `None` for signs, exponents, `NaN`, empty
/// text or overflow.
fn scaled_decimal(s: &str, unit_nanos: u128) -> Option<u128> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|b| b.is_ascii_digit()) || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut whole: u128 = 0;
    for b in int.bytes() {
        whole = whole.checked_mul(10)?.checked_add(u128::from(b - b'0'))?;
    }
    let mut total = whole.checked_mul(unit_nanos)?;
    // Fraction: digits beyond 18 cannot matter at nanosecond resolution for units <= 1 h.
    let mut num: u128 = 0;
    let mut den: u128 = 1;
    for b in frac.bytes().take(18) {
        num = num * 10 + u128::from(b - b'0');
        den *= 10;
    }
    total = total.checked_add(num.checked_mul(unit_nanos)? / den)?;
    Some(total)
}

/// Nanoseconds (u128) → `Duration`; `None` when the seconds do not fit in a `u64`.
fn duration_from_nanos(n: u128) -> Option<Duration> {
    let secs = u64::try_from(n / NANOS_PER_SEC).ok()?;
    let nanos = u32::try_from(n % NANOS_PER_SEC).ok()?;
    Some(Duration::new(secs, nanos))
}

/// A non-negative decimal number of `unit_nanos`-long units (e.g. `retry-after: 120` with
/// seconds, `retry-after-ms: 1500` with milliseconds) as a `Duration`. `None` for garbage.
pub(super) fn decimal_duration(s: &str, unit_nanos: u128) -> Option<Duration> {
    duration_from_nanos(scaled_decimal(s.trim(), unit_nanos)?)
}

/// A non-negative decimal number of seconds as signed nanoseconds (for epoch timestamps).
pub(super) fn decimal_seconds_nanos(s: &str) -> Option<i128> {
    i128::try_from(scaled_decimal(s.trim(), NANOS_PER_SEC)?).ok()
}

fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => NANOS_PER_SEC,
        "m" => 60 * NANOS_PER_SEC,
        "h" => 3_600 * NANOS_PER_SEC,
        _ => return None,
    })
}

/// Parses a Go-style duration (`time.Duration.String()` and `time.ParseDuration` syntax):
/// `6m0s`, `1m30s`, `2m30.5s`, `500ms`, `373.801628ms`, `1h30m`, `2h57m16.9s`, `26s`, `0`.
/// Units: `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`. Negative values, missing units, unknown
/// units and overflow give `None`. The result may be zero; flooring is the caller's job.
pub fn parse_go_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Some(Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: u128 = 0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() {
            return None;
        }
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, next) = tail.split_at(unit_len);
        let scale = unit_nanos(unit)?;
        total = total.checked_add(scaled_decimal(num, scale)?)?;
        rest = next;
    }
    duration_from_nanos(total)
}

/// Signed nanoseconds since the Unix epoch of a wall-clock time.
pub(super) fn wall_nanos(t: SystemTime) -> i128 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i128::try_from(d.as_nanos()).unwrap_or(i128::MAX),
        Err(e) => i128::try_from(e.duration().as_nanos()).map_or(i128::MIN, |n| -n),
    }
}

/// Parses an HTTP-date (RFC 9110 §5.6.7) with the `httpdate` crate: IMF-fixdate
/// `Wed, 21 Oct 2015 07:28:00 GMT`, the obsolete RFC 850 form
/// `Wednesday, 21-Oct-15 07:28:00 GMT` and asctime `Wed Oct 21 07:28:00 2015`. Returns signed
/// nanoseconds since the Unix epoch; `None` for anything else (an impossible date included).
pub(super) fn parse_http_date(s: &str) -> Option<i128> {
    httpdate::parse_http_date(s.trim()).ok().map(wall_nanos)
}

/// Parses an RFC 3339 timestamp with the `time` crate, such as `2030-01-01T00:00:01Z`,
/// `2030-01-01T00:00:01.5+02:00` or (RFC 3339 §5.6 allows a space and lower case)
/// `2030-01-01 00:00:01z`. Returns signed nanoseconds since the Unix epoch (UTC).
pub(super) fn parse_rfc3339(s: &str) -> Option<i128> {
    use time::format_description::well_known::Rfc3339;
    let s = s.trim();
    // The `time` parser wants `T` between date and time; RFC 3339 also permits a space.
    let normalized;
    let s = match s.as_bytes().get(10) {
        Some(b' ') if s.is_ascii() => {
            normalized = format!("{}T{}", &s[..10], &s[11..]);
            normalized.as_str()
        }
        _ => s,
    };
    let t = time::OffsetDateTime::parse(s, &Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos())
}

/// `target - reference` as a `Duration`; `Some(ZERO)` when the target is not in the future
/// (the caller floors it), `None` only if the gap overflows a `Duration`.
pub(super) fn until(target: i128, reference: i128) -> Option<Duration> {
    let gap = target.saturating_sub(reference);
    if gap <= 0 {
        return Some(Duration::ZERO);
    }
    duration_from_nanos(u128::try_from(gap).ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        let cases: &[(&str, Option<Duration>)] = &[
            ("6m0s", Some(Duration::from_secs(360))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("2m30.5s", Some(ms(150_500))),
            ("500ms", Some(ms(500))),
            ("1h30m", Some(Duration::from_secs(5400))),
            ("373.801628ms", Some(Duration::from_nanos(373_801_628))),
            ("2h57m16.9s", Some(ms(10_636_900))),
            ("1.5h", Some(Duration::from_secs(5400))),
            ("10µs", Some(Duration::from_micros(10))),
            ("0", Some(Duration::ZERO)),
            ("0s", Some(Duration::ZERO)),
            ("", None),
            ("abc", None),
            ("-5s", None),
            ("5", None),
            ("1e309s", None),
            ("NaNs", None),
            ("1.2.3s", None),
            ("s", None),
            ("99999999999999999999h", None),
            ("5d", None),
        ];
        for (input, want) in cases {
            assert_eq!(parse_go_duration(input), *want, "{input:?}");
        }
    }

    #[test]
    fn dates() {
        let fixdate = parse_http_date("Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(fixdate, Some(1_445_412_480 * NANOS_PER_SEC as i128));
        assert_eq!(
            parse_http_date("Wednesday, 21-Oct-15 07:28:00 GMT"),
            fixdate
        );
        assert_eq!(parse_http_date("Wed Oct 21 07:28:00 2015"), fixdate);
        assert_eq!(parse_http_date("Wed, 31 Feb 2015 07:28:00 GMT"), None);
        assert_eq!(parse_http_date("Wed, 21 Oct 2015 25:28:00 GMT"), None);
        assert_eq!(parse_http_date("tomorrow"), None);
        let z = parse_rfc3339("2030-01-01T00:00:01Z");
        assert_eq!(z, Some(1_893_456_001 * NANOS_PER_SEC as i128));
        assert_eq!(parse_rfc3339("2030-01-01T02:00:01+02:00"), z);
        assert_eq!(
            parse_rfc3339("2030-01-01T00:00:01.25Z"),
            z.map(|n| n + 250_000_000)
        );
        assert_eq!(parse_rfc3339("2030-01-01T00:00:01"), None);
        assert_eq!(parse_rfc3339("2030-13-01T00:00:01Z"), None);
        assert_eq!(parse_rfc3339("２０３０-01-01T00:00:01Z"), None);
        assert_eq!(
            parse_rfc3339("2030-01-01 00:00:01z"),
            z,
            "space and lower-case z"
        );
        assert_eq!(parse_rfc3339("2030-01-01t00:00:01Z"), z);
        assert_eq!(parse_rfc3339("  2030-01-01T00:00:01Z "), z);
        assert_eq!(parse_rfc3339("2029-12-31T19:00:01-05:00"), z);
        assert_eq!(
            parse_rfc3339("2030-02-29T00:00:00Z"),
            None,
            "not a leap year"
        );
        assert_eq!(parse_rfc3339("2030-01-01T00:00:01+24:00"), None);
        assert_eq!(parse_rfc3339("2030-01-01T00:00:01.Z"), None);
        assert_eq!(parse_rfc3339(""), None);
        assert_eq!(
            parse_http_date("Wed, 21 Oct 2015 07:28:00"),
            None,
            "no zone"
        );
        assert_eq!(parse_http_date("Wed, 21 Oct 2015 07:28:00 PST"), None);
        assert!(parse_http_date("Thu, 29 Feb 2024 00:00:00 GMT").is_some());
        assert_eq!(parse_http_date(" Wed, 21 Oct 2015 07:28:00 GMT "), fixdate);
    }
}
