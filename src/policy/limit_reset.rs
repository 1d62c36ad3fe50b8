//! The Anthropic subscription session-limit reset (`auto_limit_reset`,
//! `docs/RESILIENCE.md#2e-anthropic-subscription-session-limit-reset-off-by-default`).
//!
//! A subscription (OAuth) connection with `auto_limit_reset = true` that hits its 5-hour
//! wall ([`is_five_hour_wall`]) asks the account's usage endpoint whether a reset of the
//! session limit is offered (`GET {base_url}/api/oauth/usage`, parsed by [`parse_usage`]);
//! when one is `available` it requests it (`POST {base_url}/api/oauth/usage/reset`, any 2xx
//! = done) and the request is retried once on the same connection at full speed.
//! `already_used` / `not_offered` are remembered until the announced `next_available_at`
//! (default [`DEFAULT_UNAVAILABLE`] from now): no query before then. Any error (transport,
//! non-2xx, unreadable JSON) backs off [`ERROR_BACKOFF`]. Both routes and the JSON shape
//! follow sluice's own specification: Anthropic does not publish such an endpoint.
//!
//! Pure: no clock reads, no I/O. Every time-dependent call takes `now_unix_ms` (wall clock:
//! availability instants are wall-clock instants).

#[cfg(test)]
mod tests;

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::headroom::parse::{self, rfc3339_ms};
use crate::policy::headroom::{Window, WindowStatus};

/// The usage route, appended to the provider's `base_url` (`GET`).
pub const USAGE_PATH: &str = "/api/oauth/usage";
/// The reset route, appended to the provider's `base_url` (`POST`).
pub const RESET_PATH: &str = "/api/oauth/usage/reset";
/// Bound on each of the two calls (10 s), unless the provider's own `timeout` is shorter.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(10);
/// `already_used` / `not_offered` without `next_available_at`: no query for 7 days.
pub const DEFAULT_UNAVAILABLE: Duration = Duration::from_secs(7 * 86_400);
/// After any error no query for 15 min.
pub const ERROR_BACKOFF: Duration = Duration::from_secs(15 * 60);
/// A used reset stays listed (for the console and API) this long (24 h).
pub const USED_SHOWN: Duration = Duration::from_secs(86_400);
/// Longest error text kept (200 bytes).
pub const MAX_ERROR_LEN: usize = 200;

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// True for the 5-hour wall: a 429 whose `anthropic-ratelimit-unified-status` is `rejected`
/// and whose representative claim is `five_hour` or whose `…-5h-status` is `rejected`.
/// `headers` are `(name, value)` pairs (names case-insensitive).
pub fn is_five_hour_wall<'a, I>(status: u16, headers: I) -> bool
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    if status != 429 {
        return false;
    }
    let o = parse::parse(headers, 0);
    let Some(u) = o.unified else { return false };
    let five_rejected = o
        .windows
        .iter()
        .any(|(w, s)| *w == Window::FiveHour && s.status == Some(WindowStatus::Rejected));
    u.status == Some(WindowStatus::Rejected)
        && (u.representative_claim == Some(Window::FiveHour) || five_rejected)
}

/// `limit_reset.status` of the usage answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Availability {
    /// A reset can be requested now.
    Available,
    /// The account used its reset; the next one comes at `next_available_at`.
    AlreadyUsed,
    /// The account is not offered resets (until `next_available_at`, if given).
    NotOffered,
}

impl Availability {
    /// Parses the status word (trimmed, ASCII case-insensitive, `-` and `_` alike).
    pub fn parse(s: &str) -> Option<Self> {
        Some(
            match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
                "available" => Self::Available,
                "already_used" => Self::AlreadyUsed,
                "not_offered" => Self::NotOffered,
                _ => return None,
            },
        )
    }
}

/// What the usage endpoint said (unreadable fields read as absent).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// `five_hour.utilization` (0–1), when readable.
    pub five_hour_utilization: Option<f64>,
    /// `five_hour.resets_at` (RFC 3339) as Unix ms, when readable.
    pub five_hour_resets_at_ms: Option<u64>,
    /// `limit_reset.status`, when readable.
    pub status: Option<Availability>,
    /// `limit_reset.next_available_at` (RFC 3339) as Unix ms, when readable.
    pub next_available_at_ms: Option<u64>,
}

/// Parses a usage answer body. Errors only when the body is not a JSON object; fields that
/// are missing or of the wrong shape read as `None`.
pub fn parse_usage(body: &[u8]) -> Result<Usage, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("usage answer: {e}"))?;
    if !v.is_object() {
        return Err("usage answer is not a JSON object".into());
    }
    let five = &v["five_hour"];
    let reset = &v["limit_reset"];
    Ok(Usage {
        five_hour_utilization: five["utilization"]
            .as_f64()
            .filter(|u| u.is_finite() && (0.0..=1.0).contains(u)),
        five_hour_resets_at_ms: five["resets_at"].as_str().and_then(rfc3339_ms),
        status: reset["status"].as_str().and_then(Availability::parse),
        next_available_at_ms: reset["next_available_at"].as_str().and_then(rfc3339_ms),
    })
}

/// What to do after reading the usage answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Request the reset.
    RequestReset,
    /// No reset now: remember it (see [`LimitResetSlot::unavailable`]).
    Unavailable(Availability, Option<u64>),
    /// The answer did not say: back off like an error.
    Unreadable,
}

/// The step a usage answer calls for.
pub fn decide(u: &Usage) -> Step {
    match u.status {
        Some(Availability::Available) => Step::RequestReset,
        Some(s) => Step::Unavailable(s, u.next_available_at_ms),
        None => Step::Unreadable,
    }
}

/// How the last try ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The reset was requested and granted.
    Reset,
    /// `already_used`.
    AlreadyUsed,
    /// `not_offered`.
    NotOffered,
    /// Transport error, non-2xx or unreadable answer.
    Error,
}

impl Outcome {
    /// snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reset => "reset",
            Self::AlreadyUsed => "already_used",
            Self::NotOffered => "not_offered",
            Self::Error => "error",
        }
    }
}

impl From<Availability> for Outcome {
    fn from(a: Availability) -> Self {
        match a {
            Availability::Available => Self::Reset,
            Availability::AlreadyUsed => Self::AlreadyUsed,
            Availability::NotOffered => Self::NotOffered,
        }
    }
}

/// One connection's reset record (persisted as JSON; every instant is Unix ms).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LimitResetSlot {
    /// No usage query before this (an error's backoff or the remembered unavailability).
    pub next_query_after_ms: Option<u64>,
    /// When the next reset becomes available (`already_used` / `not_offered`).
    pub next_available_at_ms: Option<u64>,
    /// How the last try ended.
    pub last_outcome: Option<Outcome>,
    /// When it ended.
    pub last_at_ms: Option<u64>,
    /// When a reset was last granted.
    pub reset_used_at_ms: Option<u64>,
    /// The last error's short text (never a credential).
    pub last_error: Option<String>,
    /// A try is under way until this (see [`LimitResetSlot::claim`]); not persisted.
    #[serde(skip)]
    pub in_flight_until_ms: Option<u64>,
}

impl LimitResetSlot {
    /// True when the usage endpoint may be asked at `now_unix_ms`: no backoff and no
    /// remembered unavailability still running.
    pub fn may_query(&self, now_unix_ms: u64) -> bool {
        !self.blocked(now_unix_ms) && self.in_flight_until_ms.is_none_or(|t| now_unix_ms >= t)
    }

    /// True while an error backoff or a remembered unavailability runs at `now_unix_ms`.
    fn blocked(&self, now_unix_ms: u64) -> bool {
        self.next_query_after_ms.is_some_and(|t| now_unix_ms < t)
            || self.next_available_at_ms.is_some_and(|t| now_unix_ms < t)
    }

    /// Claims the next try at `now_unix_ms` when [`LimitResetSlot::may_query`]: no other
    /// request starts one for twice [`QUERY_TIMEOUT`] (both calls' bound) or until the try
    /// is recorded. False when a try may not start now.
    pub fn claim(&mut self, now_unix_ms: u64) -> bool {
        if !self.may_query(now_unix_ms) {
            return false;
        }
        self.in_flight_until_ms = Some(now_unix_ms.saturating_add(2 * ms(QUERY_TIMEOUT)));
        true
    }

    /// True while the record is worth listing at `now_unix_ms`: a backoff or unavailability
    /// still running, or a reset granted within [`USED_SHOWN`].
    pub fn is_listed(&self, now_unix_ms: u64) -> bool {
        self.blocked(now_unix_ms)
            || self
                .reset_used_at_ms
                .is_some_and(|t| now_unix_ms < t.saturating_add(ms(USED_SHOWN)))
    }

    /// Forgets a record that is no longer listed; true when it changed.
    pub fn refresh(&mut self, now_unix_ms: u64) -> bool {
        if self.is_listed(now_unix_ms) || *self == Self::default() {
            return false;
        }
        *self = Self::default();
        true
    }

    /// A reset was granted at `now_unix_ms`.
    pub fn granted(&mut self, now_unix_ms: u64) {
        *self = Self {
            last_outcome: Some(Outcome::Reset),
            last_at_ms: Some(now_unix_ms),
            reset_used_at_ms: Some(now_unix_ms),
            ..Self::default()
        };
    }

    /// `already_used` / `not_offered` at `now_unix_ms`: no query until `next` (when it is
    /// later than now), else for [`DEFAULT_UNAVAILABLE`].
    pub fn unavailable(&mut self, why: Availability, next: Option<u64>, now_unix_ms: u64) {
        self.in_flight_until_ms = None;
        let until = next
            .filter(|t| *t > now_unix_ms)
            .unwrap_or_else(|| now_unix_ms.saturating_add(ms(DEFAULT_UNAVAILABLE)));
        self.next_query_after_ms = Some(until);
        self.next_available_at_ms = Some(until);
        self.last_outcome = Some(why.into());
        self.last_at_ms = Some(now_unix_ms);
        self.last_error = None;
    }

    /// Any error at `now_unix_ms`: no query for [`ERROR_BACKOFF`]; `why` is kept (cut to
    /// [`MAX_ERROR_LEN`] bytes).
    pub fn failed(&mut self, why: &str, now_unix_ms: u64) {
        self.in_flight_until_ms = None;
        self.next_query_after_ms = Some(now_unix_ms.saturating_add(ms(ERROR_BACKOFF)));
        self.last_outcome = Some(Outcome::Error);
        self.last_at_ms = Some(now_unix_ms);
        self.last_error = Some(cut(why, MAX_ERROR_LEN));
    }
}

/// `s` cut to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// How one try at a reset ended, as dispatch reports it to the core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tried {
    /// The reset was granted: retry the request.
    Granted,
    /// `already_used` / `not_offered`, with `next_available_at` (Unix ms) when sent.
    Unavailable(Availability, Option<u64>),
    /// Any error, with a short text (never a credential).
    Failed(String),
}

impl LimitResetSlot {
    /// Folds one try in at `now_unix_ms`.
    pub fn record(&mut self, tried: &Tried, now_unix_ms: u64) {
        match tried {
            Tried::Granted => self.granted(now_unix_ms),
            Tried::Unavailable(why, next) => self.unavailable(*why, *next, now_unix_ms),
            Tried::Failed(why) => self.failed(why, now_unix_ms),
        }
    }
}
