//! `parse`: one response's rate-limit headers → one [`Observation`].
//!
//! Reads three families (names ASCII case-insensitive; any other header is skipped):
//! - Anthropic API buckets: `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-
//!   {limit,remaining,reset}`; limit and remaining are counts, reset is RFC 3339.
//! - Anthropic subscription: `anthropic-ratelimit-unified-{status,reset,representative-claim}`,
//!   `-unified-{5h,7d}-{utilization,reset,status}` and `-unified-overage-{status,reset,
//!   utilization,disabled-reason}`; utilization is a 0–1 fraction, resets are Unix seconds.
//! - OpenAI style: `x-ratelimit-{limit,remaining,reset}-{requests,tokens}`; reset is a Go
//!   duration (`6m0s`, `20ms`, `1h2m3.5s`) counted from `now_unix_ms`.
//!
//! A value that does not parse is ignored (as if the header were absent); nothing here
//! panics, allocates without bound or overflows, whatever the bytes.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use super::{OverageState, UnifiedState, Window, WindowState, WindowStatus};
use crate::policy::retry_hint::parse_go_duration;

/// Longest `overage-disabled-reason` token kept (64 bytes); longer values are ignored.
pub const MAX_REASON_LEN: usize = 64;

/// What one response said, ready for [`super::Headroom::merge`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Observation {
    /// Windows that had at least one readable header, in [`Window`] order.
    pub windows: Vec<(Window, WindowState)>,
    /// The subscription summary, when any of its headers was readable.
    pub unified: Option<UnifiedState>,
    /// The overage state, when any of its headers was readable.
    pub overage: Option<OverageState>,
}

impl Observation {
    /// True when no header was readable.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty() && self.unified.is_none() && self.overage.is_none()
    }
}

/// Adapts an `http::HeaderMap` into the `(name, value)` pairs [`parse`] takes: only the
/// rate-limit families it reads (a map's names are already lowercase, so the prefix test is
/// exact, and the other headers of every response cost one comparison each); values that are
/// not visible ASCII are skipped.
pub fn header_pairs(headers: &http::HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers.iter().filter_map(|(n, v)| {
        let n = n.as_str();
        let read = n.starts_with("anthropic-ratelimit-") || n.starts_with("x-ratelimit-");
        read.then_some(())?;
        Some((n, v.to_str().ok()?))
    })
}

/// The raw fields of one window, before the remaining fraction is derived.
#[derive(Debug, Clone, Copy, Default)]
struct Fields {
    limit: Option<u64>,
    remaining: Option<u64>,
    utilization: Option<f64>,
    reset_at_ms: Option<u64>,
    status: Option<WindowStatus>,
}

impl Fields {
    fn is_empty(&self) -> bool {
        self.limit.is_none()
            && self.remaining.is_none()
            && self.utilization.is_none()
            && self.reset_at_ms.is_none()
            && self.status.is_none()
    }

    /// Remaining fraction: 1 − utilization, else remaining / limit (limit > 0, capped at 1),
    /// else 0 when the remaining count is 0.
    fn fraction(&self) -> Option<f64> {
        if let Some(u) = self.utilization {
            return Some((1.0 - u).clamp(0.0, 1.0));
        }
        match (self.remaining, self.limit) {
            (Some(r), Some(l)) if l > 0 => Some((r as f64 / l as f64).clamp(0.0, 1.0)),
            (Some(0), _) => Some(0.0),
            _ => None,
        }
    }

    fn into_state(self, now_unix_ms: u64) -> WindowState {
        WindowState {
            remaining: self.fraction(),
            limit: self.limit,
            remaining_count: self.remaining,
            reset_at_ms: self.reset_at_ms,
            status: self.status,
            observed_at_ms: now_unix_ms,
        }
    }
}

/// Everything read so far from one response.
#[derive(Default)]
struct Acc {
    windows: BTreeMap<Window, Fields>,
    unified: UnifiedState,
    unified_any: bool,
    overage: OverageState,
    overage_any: bool,
}

/// Parses one response's headers (`(name, value)` pairs; later duplicates win) observed at
/// `now_unix_ms`. Unknown headers and unreadable values are skipped.
pub fn parse<'a, I>(headers: I, now_unix_ms: u64) -> Observation
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut acc = Acc::default();
    for (name, value) in headers {
        let name = lowercase(name);
        if let Some(rest) = name.strip_prefix("anthropic-ratelimit-unified-") {
            unified_header(&mut acc, rest, value);
        } else if let Some(rest) = name.strip_prefix("anthropic-ratelimit-") {
            anthropic_bucket(&mut acc, rest, value);
        } else if let Some(rest) = name.strip_prefix("x-ratelimit-") {
            openai_bucket(&mut acc, rest, value, now_unix_ms);
        }
    }
    finish(acc, now_unix_ms)
}

/// `name` trimmed and lowercased, borrowed when it already is (an `http::HeaderMap`'s names
/// always are: this runs for every header of every response).
fn lowercase(name: &str) -> std::borrow::Cow<'_, str> {
    let name = name.trim();
    if name.bytes().any(|b| b.is_ascii_uppercase()) {
        std::borrow::Cow::Owned(name.to_ascii_lowercase())
    } else {
        std::borrow::Cow::Borrowed(name)
    }
}

fn finish(acc: Acc, now_unix_ms: u64) -> Observation {
    let windows = acc
        .windows
        .into_iter()
        .filter(|(_, f)| !f.is_empty())
        .map(|(w, f)| (w, f.into_state(now_unix_ms)))
        .collect();
    let unified = acc.unified_any.then_some(UnifiedState {
        observed_at_ms: now_unix_ms,
        ..acc.unified
    });
    let overage = acc.overage_any.then_some(OverageState {
        observed_at_ms: now_unix_ms,
        ..acc.overage
    });
    Observation {
        windows,
        unified,
        overage,
    }
}

/// `anthropic-ratelimit-unified-<rest>`.
fn unified_header(acc: &mut Acc, rest: &str, value: &str) {
    let window = if let Some(field) = rest.strip_prefix("5h-") {
        Some((Window::FiveHour, field))
    } else {
        rest.strip_prefix("7d-").map(|f| (Window::SevenDay, f))
    };
    if let Some((window, field)) = window {
        let f = acc.windows.entry(window).or_default();
        match field {
            "utilization" => set(&mut f.utilization, fraction_used(value)),
            "reset" => set(&mut f.reset_at_ms, unix_seconds_ms(value)),
            "status" => set(&mut f.status, WindowStatus::parse(value)),
            _ => false,
        };
        return;
    }
    if let Some(field) = rest.strip_prefix("overage-") {
        overage_header(acc, field, value);
        return;
    }
    let read = match rest {
        "status" => set(&mut acc.unified.status, WindowStatus::parse(value)),
        "reset" => set(&mut acc.unified.reset_at_ms, unix_seconds_ms(value)),
        "representative-claim" => set(
            &mut acc.unified.representative_claim,
            Window::from_claim(value),
        ),
        _ => false,
    };
    acc.unified_any |= read;
}

/// `anthropic-ratelimit-unified-overage-<field>`.
fn overage_header(acc: &mut Acc, field: &str, value: &str) {
    let o = &mut acc.overage;
    let read = match field {
        "status" => set(&mut o.status, WindowStatus::parse(value)),
        "reset" => set(&mut o.reset_at_ms, unix_seconds_ms(value)),
        "utilization" => set(&mut o.remaining, fraction_used(value).map(|u| 1.0 - u)),
        "disabled-reason" => set(&mut o.disabled_reason, reason_token(value)),
        _ => false,
    };
    acc.overage_any |= read;
}

/// `anthropic-ratelimit-<bucket>-<field>`.
fn anthropic_bucket(acc: &mut Acc, rest: &str, value: &str) {
    let Some((bucket, field)) = rest.rsplit_once('-') else {
        return;
    };
    let window = match bucket {
        "requests" => Window::Requests,
        "tokens" => Window::Tokens,
        "input-tokens" => Window::InputTokens,
        "output-tokens" => Window::OutputTokens,
        _ => return,
    };
    let f = acc.windows.entry(window).or_default();
    match field {
        "limit" => set(&mut f.limit, count(value)),
        "remaining" => set(&mut f.remaining, count(value)),
        "reset" => set(&mut f.reset_at_ms, rfc3339_ms(value)),
        _ => false,
    };
}

/// `x-ratelimit-<field>-<bucket>`.
fn openai_bucket(acc: &mut Acc, rest: &str, value: &str, now_unix_ms: u64) {
    let Some((field, bucket)) = rest.split_once('-') else {
        return;
    };
    let window = match bucket {
        "requests" => Window::Requests,
        "tokens" => Window::Tokens,
        _ => return,
    };
    let f = acc.windows.entry(window).or_default();
    match field {
        "limit" => set(&mut f.limit, count(value)),
        "remaining" => set(&mut f.remaining, count(value)),
        "reset" => set(&mut f.reset_at_ms, go_reset_ms(value, now_unix_ms)),
        _ => false,
    };
}

/// Stores `v` when it parsed; returns whether it did.
fn set<T>(slot: &mut Option<T>, v: Option<T>) -> bool {
    match v {
        Some(v) => {
            *slot = Some(v);
            true
        }
        None => false,
    }
}

/// A non-negative integer count (ASCII digits only, fits `u64`).
pub fn count(s: &str) -> Option<u64> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Largest utilization read (2.0): an account over its limit reports a little more than 1,
/// but a value such as `45` is a percentage or garbage, not a fraction, and is ignored.
pub const MAX_UTILIZATION: f64 = 2.0;

/// A utilization fraction: a plain decimal from 0 to [`MAX_UTILIZATION`], capped at 1.0.
/// Negative, exponent, NaN, infinite and larger values give `None`.
pub fn fraction_used(s: &str) -> Option<f64> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let v: f64 = s.parse().ok()?;
    (v.is_finite() && (0.0..=MAX_UTILIZATION).contains(&v)).then_some(v.min(1.0))
}

/// Unix seconds (`1767225600`, optionally with a fraction `1767225600.5`) → Unix ms.
pub fn unix_seconds_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) || (s.contains('.') && frac.is_empty()) {
        return None;
    }
    let secs: u64 = whole.parse().ok()?;
    secs.checked_mul(1_000)?.checked_add(frac_ms(frac))
}

/// The first three digits of a decimal fraction as milliseconds (`"5"` → 500).
fn frac_ms(frac: &str) -> u64 {
    frac.bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0, |acc, b| acc * 10 + u64::from(b - b'0'))
}

/// A Go duration counted from `now_unix_ms` → Unix ms (saturating).
pub fn go_reset_ms(s: &str, now_unix_ms: u64) -> Option<u64> {
    let d = parse_go_duration(s)?;
    let ms = u64::try_from(d.as_millis()).ok()?;
    Some(now_unix_ms.saturating_add(ms))
}

/// An `overage-disabled-reason` token: 1–[`MAX_REASON_LEN`] bytes of `[A-Za-z0-9_-]`.
fn reason_token(s: &str) -> Option<String> {
    let s = s.trim();
    let ok = !s.is_empty()
        && s.len() <= MAX_REASON_LEN
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then(|| s.to_owned())
}

/// RFC 3339 (`2030-01-01T00:00:01Z`, `2030-01-01T00:00:01.5+02:00`, `t`/space separator,
/// `z`) → Unix ms, truncating below a millisecond, parsed by the `time` crate. Dates before
/// 1970, a separator other than `T`/`t`/space, and invalid fields (month 13, 30 February,
/// hour 24, offset ±24:00) give `None`; second 60 (a leap second, accepted only at the end of
/// a UTC month) is read as the last millisecond of second 59.
pub fn rfc3339_ms(s: &str) -> Option<u64> {
    let s = s.trim();
    // `time` accepts any byte between date and time; upstreams send `T`, and RFC 3339 also
    // names `t` and a space.
    if !matches!(s.as_bytes().get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    let secs = u64::try_from(t.unix_timestamp()).ok()?;
    secs.checked_mul(1_000)?
        .checked_add(u64::from(t.millisecond()))
}
