//! Text formats behind retry hints: decimals, Go-style durations, HTTP-dates and RFC 3339.
//!
//! Hand-written because each upstream bends the formats slightly and every parser here must
//! reject garbage (`abc`, `-5`, `1e309`, `NaN`, overflow) by returning `None`, never by
//! panicking or by clamping to zero (resilience-spec §2, cases.md vector 16).

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

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Validated calendar fields → signed nanoseconds since the epoch (UTC).
fn civil_nanos(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32, nanos: u32) -> Option<i128> {
    if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y, mo) {
        return None;
    }
    if h > 23 || mi > 59 || s > 60 || !(0..=9999).contains(&y) {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400
        + i64::from(h) * 3_600
        + i64::from(mi) * 60
        + i64::from(s);
    Some(i128::from(secs) * NANOS_PER_SEC as i128 + i128::from(nanos))
}

fn month_number(name: &str) -> Option<u32> {
    const MONTHS: [&str; 12] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    let lower = name.to_ascii_lowercase();
    MONTHS
        .iter()
        .position(|m| *m == lower)
        .and_then(|i| u32::try_from(i + 1).ok())
}

fn digits<T: std::str::FromStr>(s: &str) -> Option<T> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn hms(s: &str) -> Option<(u32, u32, u32)> {
    let mut it = s.split(':');
    let h = digits(it.next()?)?;
    let m = digits(it.next()?)?;
    let sec = digits(it.next()?)?;
    if it.next().is_some() {
        return None;
    }
    Some((h, m, sec))
}

/// Parses an HTTP-date (RFC 9110 §5.6.7): IMF-fixdate `Wed, 21 Oct 2015 07:28:00 GMT`, the
/// obsolete RFC 850 form `Wednesday, 21-Oct-15 07:28:00 GMT` and asctime
/// `Wed Oct 21 07:28:00 2015`. Returns signed nanoseconds since the Unix epoch.
pub(super) fn parse_http_date(s: &str) -> Option<i128> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    match parts.as_slice() {
        // IMF-fixdate.
        [wd, day, mon, year, time, zone] if wd.ends_with(',') => {
            if !zone.eq_ignore_ascii_case("GMT") && !zone.eq_ignore_ascii_case("UTC") {
                return None;
            }
            let (h, mi, sec) = hms(time)?;
            civil_nanos(
                digits(year)?,
                month_number(mon)?,
                digits(day)?,
                h,
                mi,
                sec,
                0,
            )
        }
        // RFC 850.
        [wd, date, time, zone] if wd.ends_with(',') => {
            if !zone.eq_ignore_ascii_case("GMT") {
                return None;
            }
            let mut it = date.split('-');
            let day = digits(it.next()?)?;
            let mon = month_number(it.next()?)?;
            let yy_text = it.next()?;
            let yy: i64 = digits(yy_text)?;
            let year = match yy_text.len() {
                2 if yy < 70 => 2000 + yy,
                2 => 1900 + yy,
                _ => yy,
            };
            let (h, mi, sec) = hms(time)?;
            civil_nanos(year, mon, day, h, mi, sec, 0)
        }
        // asctime.
        [_wd, mon, day, time, year] => {
            let (h, mi, sec) = hms(time)?;
            civil_nanos(
                digits(year)?,
                month_number(mon)?,
                digits(day)?,
                h,
                mi,
                sec,
                0,
            )
        }
        _ => None,
    }
}

/// Parses an RFC 3339 timestamp such as `2030-01-01T00:00:01Z`, `2030-01-01T00:00:01.5+02:00`
/// or `2030-01-01 00:00:01z`. Returns signed nanoseconds since the Unix epoch (UTC).
pub(super) fn parse_rfc3339(s: &str) -> Option<i128> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() < 20 || !s.is_ascii() {
        return None;
    }
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year: i64 = digits(&s[0..4])?;
    let mon: u32 = digits(&s[5..7])?;
    let day: u32 = digits(&s[8..10])?;
    let h: u32 = digits(&s[11..13])?;
    let mi: u32 = digits(&s[14..16])?;
    let sec: u32 = digits(&s[17..19])?;
    let mut rest = &s[19..];
    let mut nanos: u32 = 0;
    if let Some(frac_and_zone) = rest.strip_prefix('.') {
        let len = frac_and_zone
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(frac_and_zone.len());
        if len == 0 {
            return None;
        }
        let (frac, zone) = frac_and_zone.split_at(len);
        let scaled = scaled_decimal(&format!("0.{frac}"), NANOS_PER_SEC)?;
        nanos = u32::try_from(scaled).ok()?;
        rest = zone;
    }
    let offset_secs: i64 = match rest {
        "Z" | "z" => 0,
        _ => {
            let (sign, hhmm) = match rest.split_at_checked(1)? {
                ("+", t) => (1, t),
                ("-", t) => (-1, t),
                _ => return None,
            };
            let (oh, om) = hhmm.split_once(':')?;
            if oh.len() != 2 || om.len() != 2 {
                return None;
            }
            let oh: i64 = digits(oh)?;
            let om: i64 = digits(om)?;
            if oh > 23 || om > 59 {
                return None;
            }
            sign * (oh * 3_600 + om * 60)
        }
    };
    let local = civil_nanos(year, mon, day, h, mi, sec, nanos)?;
    Some(local - i128::from(offset_secs) * NANOS_PER_SEC as i128)
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
    }
}
