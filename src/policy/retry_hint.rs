//! `parse`: every retry-hint format of §2 (`docs/RESILIENCE.md#2-connection-cooldown`) → one
//! [`Hint`].
//!
//! Upstreams say "come back later" in many dialects: `retry-after-ms`, `retry-after` (seconds
//! or HTTP-date), Anthropic's unified and per-bucket reset headers, OpenAI's
//! `x-ratelimit-reset-*` Go durations, Gemini's `RetryInfo.retryDelay` and
//! `ErrorInfo.metadata.quotaResetDelay`, and free text ("try again in 1m9.696s"). This module
//! folds them into one `Duration` with this precedence, pinned by the vectors in `tests.rs`:
//! `retry-after-ms` > `retry-after` > provider-structured > body text.
//! A source whose value does not parse is skipped, never read as zero. Pure: no clock; absolute
//! times are measured against the upstream `date` header, else the `now_wall` argument.

mod formats;

use std::time::Duration;
use std::time::SystemTime;

use http::HeaderMap;
use serde_json::Value;

pub use formats::parse_go_duration;

/// Smallest hint ever returned: a zero or past hint means "retry now", which we floor to
/// 1 s so it still counts as a hint (test vectors v3 and v4).
pub const FLOOR: Duration = Duration::from_secs(1);

/// Where a [`Hint`] came from, in precedence order (the first present wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HintSource {
    /// `retry-after-ms` header (milliseconds).
    RetryAfterMs,
    /// `retry-after` header (integer seconds or HTTP-date).
    RetryAfter,
    /// `anthropic-ratelimit-unified-*-reset` (epoch seconds), latest rejected window.
    AnthropicUnified,
    /// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset` (RFC 3339).
    AnthropicBucket,
    /// `x-ratelimit-reset-{requests,tokens}` (Go durations), exhausted bucket first.
    OpenAiBucket,
    /// Gemini JSON body: `RetryInfo.retryDelay` and/or `ErrorInfo.metadata.quotaResetDelay`.
    GeminiBody,
    /// Free text in the body ("try again in 20s", "reset after 24h").
    BodyText,
}

impl HintSource {
    /// Short lowercase name for logs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RetryAfterMs => "retry_after_ms",
            Self::RetryAfter => "retry_after",
            Self::AnthropicUnified => "anthropic_unified",
            Self::AnthropicBucket => "anthropic_bucket",
            Self::OpenAiBucket => "openai_bucket",
            Self::GeminiBody => "gemini_body",
            Self::BodyText => "body_text",
        }
    }
}

/// One parsed upstream retry hint (§2 "Retry hints win for 429").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hint {
    /// How long to wait from now; at least [`FLOOR`] (1 s), uncapped (see [`cap`]).
    /// Fractions are kept (e.g. 45.837906927 s); use [`whole_seconds_up`] for `retry-after`.
    pub delay: Duration,
    /// Which source won the precedence.
    pub source: HintSource,
    /// The hint itself says a quota window resets ("reset after 16h26m14s", test
    /// vector v15): the classifier treats it as quota text.
    pub quota_text: bool,
}

/// Parses the upstream retry hint from response `headers` and the error `body` (raw bytes,
/// JSON or text). `now_wall` is used for absolute times only when the upstream sent no valid
/// `date` header. Returns `None` when no source parses; never panics, never returns a zero
/// delay (floored to [`FLOOR`]), never overflows.
pub fn parse(headers: &HeaderMap, body: &[u8], now_wall: SystemTime) -> Option<Hint> {
    let reference = header_str(headers, "date")
        .and_then(formats::parse_http_date)
        .unwrap_or_else(|| formats::wall_nanos(now_wall));
    let text = String::from_utf8_lossy(body);
    let json: Option<Value> = serde_json::from_slice(body).ok();

    let hint = |delay: Duration, source: HintSource| Hint {
        delay: floor(delay),
        source,
        quota_text: false,
    };
    if let Some(d) =
        header_str(headers, "retry-after-ms").and_then(|v| formats::decimal_duration(v, 1_000_000))
    {
        return Some(hint(d, HintSource::RetryAfterMs));
    }
    if let Some(d) = header_str(headers, "retry-after").and_then(|v| retry_after(v, reference)) {
        return Some(hint(d, HintSource::RetryAfter));
    }
    if let Some(d) = anthropic_unified(headers, reference) {
        return Some(hint(d, HintSource::AnthropicUnified));
    }
    if let Some(d) = anthropic_buckets(headers, reference) {
        return Some(hint(d, HintSource::AnthropicBucket));
    }
    if let Some(d) = openai_buckets(headers) {
        return Some(hint(d, HintSource::OpenAiBucket));
    }
    if let Some(d) = json.as_ref().and_then(gemini_body) {
        return Some(hint(d, HintSource::GeminiBody));
    }
    body_text(&text).map(|(d, quota_text)| Hint {
        quota_text,
        ..hint(d, HintSource::BodyText)
    })
}

/// Whole seconds, rounded up, for a client-facing `retry-after` header (A05: 26.66 s → 27).
/// Never 0 for a non-zero duration.
pub fn whole_seconds_up(d: Duration) -> u64 {
    if d.subsec_nanos() > 0 {
        d.as_secs().saturating_add(1)
    } else {
        d.as_secs()
    }
}

/// The `retry-after` value a client gets for a wait of `d`: whole seconds rounded up, and at
/// least 1 (a `retry-after: 0` makes clients retry in a tight loop). The one rounding every
/// client-facing retry hint uses (admission rejections, dialect errors).
pub fn retry_after_secs(d: Duration) -> u64 {
    whole_seconds_up(d).max(1)
}

#[cfg(test)]
mod rounding_tests {
    use std::time::Duration;

    #[test]
    fn retry_after_secs_rounds_up_and_is_never_zero() {
        let f = super::retry_after_secs;
        assert_eq!(f(Duration::ZERO), 1);
        assert_eq!(f(Duration::from_millis(1)), 1);
        assert_eq!(f(Duration::from_millis(26_660)), 27);
        assert_eq!(f(Duration::from_secs(60)), 60);
        assert_eq!(f(Duration::MAX), u64::MAX);
    }
}

/// `d` capped at `max` (test `vector_17_cap_and_rounding`: e.g. `max_cooldown`, default 30m, or
/// `max_quota_wait`, default 7d, §2); never below [`FLOOR`].
pub fn cap(d: Duration, max: Duration) -> Duration {
    floor(d.min(max))
}

fn floor(d: Duration) -> Duration {
    if d.is_zero() { FLOOR } else { d }
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// `retry-after`: delay-seconds (decimals tolerated) or an HTTP-date.
fn retry_after(v: &str, reference: i128) -> Option<Duration> {
    if v.starts_with(|c: char| c.is_ascii_digit() || c == '.') && !v.contains(' ') {
        return formats::decimal_duration(v, 1_000_000_000);
    }
    formats::until(formats::parse_http_date(v)?, reference)
}

/// The latest reset among `(reset, exhausted)` windows: the exhausted ones if any window is,
/// else every window present.
fn latest_of(windows: &[(Duration, bool)]) -> Option<Duration> {
    let exhausted = windows.iter().filter(|w| w.1).map(|w| w.0).max();
    exhausted.or_else(|| windows.iter().map(|w| w.0).max())
}

/// `anthropic-ratelimit-unified[-<window>]-reset` (epoch seconds) with its `-status`: the
/// latest reset among `rejected` windows; if no window carries a status, the latest present;
/// if statuses exist but none is rejected, no hint (test vectors v10, v10b).
fn anthropic_unified(headers: &HeaderMap, reference: i128) -> Option<Duration> {
    const PREFIX: &str = "anthropic-ratelimit-unified";
    let mut windows = Vec::new();
    let mut any_status = false;
    for (name, value) in headers {
        let name = name.as_str();
        let Some(window) = name
            .strip_prefix(PREFIX)
            .and_then(|n| n.strip_suffix("-reset"))
        else {
            if name.starts_with(PREFIX) && name.ends_with("-status") {
                any_status = true;
            }
            continue;
        };
        let Some(at) = value.to_str().ok().and_then(formats::decimal_seconds_nanos) else {
            continue;
        };
        let Some(delay) = formats::until(at, reference) else {
            continue;
        };
        let rejected = header_str(headers, &format!("{PREFIX}{window}-status"))
            .is_some_and(|s| s.eq_ignore_ascii_case("rejected"));
        windows.push((delay, rejected));
    }
    if any_status {
        windows.iter().filter(|w| w.1).map(|w| w.0).max()
    } else {
        windows.iter().map(|w| w.0).max()
    }
}

/// Remaining count of a bucket is zero (exhausted).
fn is_zero_remaining(headers: &HeaderMap, name: &str) -> bool {
    header_str(headers, name).is_some_and(|v| v.parse::<u64>().is_ok_and(|n| n == 0))
}

/// `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-reset` (RFC 3339): the
/// latest reset among exhausted buckets (`-remaining: 0`), else the latest present.
fn anthropic_buckets(headers: &HeaderMap, reference: i128) -> Option<Duration> {
    let mut windows = Vec::new();
    for bucket in ["requests", "tokens", "input-tokens", "output-tokens"] {
        let reset = header_str(headers, &format!("anthropic-ratelimit-{bucket}-reset"))
            .and_then(formats::parse_rfc3339)
            .and_then(|at| formats::until(at, reference));
        if let Some(d) = reset {
            let remaining = format!("anthropic-ratelimit-{bucket}-remaining");
            windows.push((d, is_zero_remaining(headers, &remaining)));
        }
    }
    latest_of(&windows)
}

/// `x-ratelimit-reset-{requests,tokens}` (Go durations): the exhausted bucket
/// (`x-ratelimit-remaining-*: 0`), else the larger (test vectors v6–v8, A07).
fn openai_buckets(headers: &HeaderMap) -> Option<Duration> {
    let mut windows = Vec::new();
    for bucket in ["requests", "tokens"] {
        let reset =
            header_str(headers, &format!("x-ratelimit-reset-{bucket}")).and_then(parse_go_duration);
        if let Some(d) = reset {
            let remaining = format!("x-ratelimit-remaining-{bucket}");
            windows.push((d, is_zero_remaining(headers, &remaining)));
        }
    }
    latest_of(&windows)
}

/// Gemini `error.details[]`: `RetryInfo.retryDelay` ("26s") and
/// `ErrorInfo.metadata.quotaResetDelay` ("2h57m16.9s"); the larger when both parse
/// (test vectors v11, v12, A05).
fn gemini_body(json: &Value) -> Option<Duration> {
    // Gemini REST sometimes wraps the error object in a one-element array.
    let root = match json {
        Value::Array(items) => items.first()?,
        other => other,
    };
    let details = root.get("error")?.get("details")?.as_array()?;
    details
        .iter()
        .flat_map(|d| {
            [
                d.get("retryDelay"),
                d.get("metadata").and_then(|m| m.get("quotaResetDelay")),
            ]
        })
        .flatten()
        .filter_map(|v| v.as_str().and_then(parse_go_duration))
        .max()
}

/// Phrases that introduce a delay in free text, with whether they mean a quota reset.
const PHRASES: [(&str, bool); 6] = [
    ("try again in ", false),
    ("try again after ", false),
    ("retry in ", false),
    ("retry after ", false),
    ("reset after ", true),
    ("resets in ", true),
];

/// Free-text hints (test vectors v13–v15): "Please try again in 1m9.696s.", "retry in
/// 26.66s", "Please retry after 3 seconds.", "reset after 16h26m14s" (quota). The longest
/// delay found wins; `true` when it came from a quota-reset phrase.
fn body_text(text: &str) -> Option<(Duration, bool)> {
    let lower = text.to_ascii_lowercase();
    let mut best: Option<(Duration, bool)> = None;
    for (phrase, quota) in PHRASES {
        for (at, _) in lower.match_indices(phrase) {
            let Some(d) = lower.get(at + phrase.len()..).and_then(text_delay) else {
                continue;
            };
            let better = match best {
                None => true,
                Some((b, bq)) => d > b || (d == b && quota && !bq),
            };
            if better {
                best = Some((d, quota));
            }
        }
    }
    best
}

/// The delay right after a phrase: a Go duration ("1m9.696s", "24h") or a number followed by
/// a unit word ("3 seconds", "2 minutes").
fn text_delay(after: &str) -> Option<Duration> {
    let after = after.trim_start_matches(['~', ' ']);
    let after = after.strip_prefix("about ").unwrap_or(after);
    let token_len = after
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == 'µ'))
        .unwrap_or(after.len());
    let token = after.get(..token_len)?.trim_end_matches('.');
    if let Some(d) = parse_go_duration(token) {
        return Some(d);
    }
    let number = token;
    let unit = after
        .get(token_len..)?
        .trim_start()
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()?;
    let unit_nanos: u128 = match unit {
        "ms" | "millisecond" | "milliseconds" => 1_000_000,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
        "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000_000_000,
        _ => return None,
    };
    formats::decimal_duration(number, unit_nanos)
}

#[cfg(test)]
mod prop;
#[cfg(test)]
mod tests;
