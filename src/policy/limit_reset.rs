//! The Anthropic subscription session-limit reset (`auto_limit_reset`,
//! `docs/RESILIENCE.md#2e-anthropic-subscription-session-limit-reset-off-by-default`).
//!
//! A subscription (OAuth) connection with `auto_limit_reset = true` that hits its 5-hour
//! wall ([`is_five_hour_wall`]) asks the account's usage endpoint
//! (`GET {base_url}` + [`USAGE_PATH`]) about the reset program named [`PROGRAM`]
//! ([`usage_step`] reads its block: `arm`, `available`, `next_available_at`). When the
//! account is in the `reset` arm and one is `available` it requests the reset
//! (`POST {base_url}` + [`reset_path`]`(org_uuid)` with body [`RESET_BODY`]) and reads the
//! answer's `result` ([`reset_tried`]): `reset` / `not_limited` retry the request once on the
//! same connection at full speed; `already_used` / `not_offered` are remembered until the
//! announced `next_available_at` (default [`DEFAULT_UNAVAILABLE`] from now) with no query
//! before then. Any error (transport, non-2xx, unreadable JSON) backs off [`ERROR_BACKOFF`].
//!
//! Both endpoints are undocumented endpoints of the provider and may change without notice;
//! the readers are strict about what they act on (an unknown `result` is an error, never a
//! success) and lenient about the rest (a malformed `next_available_at` reads as absent).
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

/// The reset program: the block of the usage answer that describes it, and the `program`
/// of the reset request.
pub const PROGRAM: &str = "juniper_tide";
/// The usage route with its query, appended to the provider's `base_url` (`GET`).
pub const USAGE_PATH: &str = "/api/oauth/usage?at_wall=1&skip_spend=1";
/// The body of the reset request (`POST`, `content-type: application/json`).
pub const RESET_BODY: &str = r#"{"program":"juniper_tide"}"#;
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

/// The reset route for the organization `org_uuid` (the connection's `org_uuid`, validated
/// as a UUID at load), appended to the provider's `base_url` (`POST`).
pub fn reset_path(org_uuid: &str) -> String {
    format!("/api/organizations/{org_uuid}/reset_rate_limits")
}

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

/// Why no reset can be had now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unavailable {
    /// The account used its reset; the next one comes at `next_available_at`.
    AlreadyUsed,
    /// The account is not offered resets (until `next_available_at`, if given).
    NotOffered,
}

/// The program block of the usage answer (`juniper_tide`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tide {
    /// `arm`: the experiment arm the account is in; only `reset` offers resets.
    pub arm: String,
    /// `available`: a reset can be requested now.
    pub available: bool,
    /// `next_available_at` as Unix ms, when present and readable (see [`instant_ms`]).
    pub next_available_at_ms: Option<u64>,
}

/// Reads `next_available_at`: an RFC 3339 string, or a whole number of Unix seconds.
/// Anything else (missing, `null`, malformed, negative, fractional) reads as absent.
pub fn instant_ms(v: &Value) -> Option<u64> {
    match v {
        Value::String(s) => rfc3339_ms(s),
        Value::Number(n) => n.as_u64()?.checked_mul(1_000),
        _ => None,
    }
}

/// A JSON object from `body`, or an error naming `what`.
fn object(body: &[u8], what: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(format!("{what} is not a JSON object")),
        Err(e) => Err(format!("{what} is not JSON: {e}")),
    }
}

/// Reads the [`PROGRAM`] block of a usage answer body. Errors when the body is not a JSON
/// object, the block is missing or not an object, `arm` is not a string or `available` is
/// not a boolean.
pub fn parse_usage(body: &[u8]) -> Result<Tide, String> {
    let v = object(body, "usage answer")?;
    let Some(Value::Object(b)) = v.get(PROGRAM) else {
        return Err(format!("usage answer has no {PROGRAM} object"));
    };
    let Some(arm) = b.get("arm").and_then(Value::as_str) else {
        return Err(format!("usage answer: {PROGRAM}.arm is not a string"));
    };
    let Some(available) = b.get("available").and_then(Value::as_bool) else {
        return Err(format!(
            "usage answer: {PROGRAM}.available is not a boolean"
        ));
    };
    Ok(Tide {
        arm: arm.trim().to_ascii_lowercase(),
        available,
        next_available_at_ms: b.get("next_available_at").and_then(instant_ms),
    })
}

/// What to do after reading the usage answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Request the reset.
    RequestReset,
    /// No reset now: remember it (see [`LimitResetSlot::unavailable`]).
    Unavailable(Unavailable, Option<u64>),
}

/// The step a program block calls for: arm `reset` and `available` → request it; arm
/// `reset` but not available → [`Unavailable::AlreadyUsed`]; any other arm →
/// [`Unavailable::NotOffered`] (both until the block's `next_available_at`, if given).
pub fn decide(t: &Tide) -> Step {
    match (t.arm.as_str(), t.available) {
        ("reset", true) => Step::RequestReset,
        ("reset", false) => Step::Unavailable(Unavailable::AlreadyUsed, t.next_available_at_ms),
        _ => Step::Unavailable(Unavailable::NotOffered, t.next_available_at_ms),
    }
}

/// The step the usage endpoint's answer (`status`, `body`) calls for; an error (to back off)
/// for a non-2xx status or an unreadable body.
pub fn usage_step(status: u16, body: &[u8]) -> Result<Step, String> {
    if !(200..300).contains(&status) {
        return Err(format!("usage endpoint answered HTTP {status}"));
    }
    parse_usage(body).map(|t| decide(&t))
}

/// How the reset request's answer (`status`, `body`) ends the try: its `result` is `reset`,
/// `not_limited`, `already_used` or `not_offered` (trimmed, ASCII case-insensitive), the last
/// two with an optional `next_available_at`. A non-2xx status, a body that is not a JSON
/// object, or a missing or unknown `result` is [`Tried::Failed`].
pub fn reset_tried(status: u16, body: &[u8]) -> Tried {
    if !(200..300).contains(&status) {
        return Tried::Failed(format!("reset endpoint answered HTTP {status}"));
    }
    let v = match object(body, "reset answer") {
        Ok(v) => v,
        Err(e) => return Tried::Failed(e),
    };
    let Some(result) = v.get("result").and_then(Value::as_str) else {
        return Tried::Failed("reset answer has no result".into());
    };
    let next = v.get("next_available_at").and_then(instant_ms);
    match result.trim().to_ascii_lowercase().as_str() {
        "reset" => Tried::Reset,
        "not_limited" => Tried::NotLimited,
        "already_used" => Tried::Unavailable(Unavailable::AlreadyUsed, next),
        "not_offered" => Tried::Unavailable(Unavailable::NotOffered, next),
        other => Tried::Failed(format!("reset answer: unknown result '{}'", cut(other, 40))),
    }
}

/// How the last try ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The reset was requested and granted.
    Reset,
    /// The reset request answered that the account was not limited (nothing was spent).
    NotLimited,
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
            Self::NotLimited => "not_limited",
            Self::AlreadyUsed => "already_used",
            Self::NotOffered => "not_offered",
            Self::Error => "error",
        }
    }
}

impl From<Unavailable> for Outcome {
    fn from(a: Unavailable) -> Self {
        match a {
            Unavailable::AlreadyUsed => Self::AlreadyUsed,
            Unavailable::NotOffered => Self::NotOffered,
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

    /// The reset request answered `not_limited` at `now_unix_ms`: nothing was spent, any
    /// backoff ends and an earlier granted reset stays listed.
    pub fn not_limited(&mut self, now_unix_ms: u64) {
        *self = Self {
            last_outcome: Some(Outcome::NotLimited),
            last_at_ms: Some(now_unix_ms),
            reset_used_at_ms: self.reset_used_at_ms,
            ..Self::default()
        };
    }

    /// `already_used` / `not_offered` at `now_unix_ms`: no query until `next` (when it is
    /// later than now), else for [`DEFAULT_UNAVAILABLE`].
    pub fn unavailable(&mut self, why: Unavailable, next: Option<u64>, now_unix_ms: u64) {
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
    /// `result: reset`: the reset was granted; retry the request.
    Reset,
    /// `result: not_limited`: the account is not limited (any more); retry the request.
    NotLimited,
    /// `already_used` / `not_offered` (from the usage block or the reset answer), with
    /// `next_available_at` (Unix ms) when sent.
    Unavailable(Unavailable, Option<u64>),
    /// Any error, with a short text (never a credential).
    Failed(String),
}

impl Tried {
    /// True when the request is retried on the same connection at full speed.
    pub fn retries(&self) -> bool {
        matches!(self, Self::Reset | Self::NotLimited)
    }
}

impl LimitResetSlot {
    /// Folds one try in at `now_unix_ms`.
    pub fn record(&mut self, tried: &Tried, now_unix_ms: u64) {
        match tried {
            Tried::Reset => self.granted(now_unix_ms),
            Tried::NotLimited => self.not_limited(now_unix_ms),
            Tried::Unavailable(why, next) => self.unavailable(*why, *next, now_unix_ms),
            Tried::Failed(why) => self.failed(why, now_unix_ms),
        }
    }
}
