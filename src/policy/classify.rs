//! `classify`: one upstream result → one [`Classified`] (§0, §2, §3, §7 of
//! `docs/RESILIENCE.md`).
//!
//! Classification happens once, at the boundary; breaker, cooldown and lockout consume the
//! class and never re-parse statuses (`docs/ARCHITECTURE.md#the-one-choke-point`). The order
//! is fixed:
//!
//! 1. **Restatement** (§7): config rules, then built-ins; first match wins. A matching rule
//!    rewrites the status (e.g. a 403 saying `额度不足` becomes a 429) before anything else
//!    looks at it.
//! 2. **Provider error rules** (§7 `[[error_rules]]`), for every error status including 400.
//! 3. **The §0 table** by status, body markers and the retry hint.
//!
//! Decisions `docs/RESILIENCE.md` leaves open (each is tested):
//! - *Quota vs rate limit* (429 and 403; §2 "Two kinds of waiting"): a hint longer
//!   than `quota_wait_threshold` → `QuotaExhausted` (`quota_wait`); quota text with no hint
//!   → `QuotaExhausted` (ladder, so repeats escalate); quota text with a short hint →
//!   `RateLimited` with that hint (A05's bug was exactly locking a "retry in 26s" quota
//!   message until the next day). Quota text is a `quota_markers` match that does not overlap
//!   a `concurrency_markers` match ("Concurrency limit reached" holds `limit reached`), or a
//!   hint phrased as a quota reset ("reset after 16h26m14s", retry-hint vector v15).
//! - *Concurrency limits* (§2): a 429 whose body matches `concurrency_markers` and
//!   that [`quota_or_rate`] would call a plain rate limit (no quota text, no long hint) is
//!   `ConcurrencyLimited` (`concurrency_limited`): too many requests in flight says nothing
//!   about the account's quota. Quota text or a long hint keeps the quota verdict.
//! - *Ban and credit markers* apply to any 4xx (Anthropic reports a disabled organization and
//!   a too-low credit balance as 400); request-rejected markers only to 403 (§2).
//! - *Credit markers* are [`DEFAULT_CREDIT_MARKERS`]; bare "billing" is deliberately absent,
//!   because OpenAI's `insufficient_quota` text ("check your plan and billing details") is a
//!   §2 quota marker, not a terminal credits state.
//! - *In-stream errors* (`event: error` inside a 200) take the status of their error type
//!   ([`in_stream_status`]); `Classified::status` carries that status, not the 200.
//! - *Error rules* with scope `connection` never produce a terminal or terminal-escalating
//!   class (`banned`, `credits_exhausted`, `auth_error` → `Forbidden`, a ladder cooldown),
//!   keeping the rule's reason word.
//! - *Scope* follows §3 by status (429/403/402 → quota group, 404 → model, else triple); an
//!   error rule's scope wins.

mod body;

use std::time::{Duration, SystemTime};

use http::HeaderMap;

use self::body::Body;
use super::retry_hint;
use super::{Classified, OutcomeClass, Restated, Scope};
use crate::config::{ConnectionCooldownSettings, Dialect, ErrorRule, Restatement};

/// Body markers of an exhausted prepaid balance → terminal `credits_exhausted` (§2 "Terminal
/// states": "a credit/billing marker"; the list is sluice's own default).
/// Matched case-insensitively on any 4xx.
pub const DEFAULT_CREDIT_MARKERS: [&str; 9] = [
    "credit balance is too low",
    "insufficient credits",
    "insufficient_credits",
    "insufficient balance",
    "insufficient_balance",
    "out of credits",
    "billing_hard_limit_reached",
    "payment required",
    "余额不足",
];

/// One attempt's outcome as seen by the proxy: plain data, borrowed from the attempt.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// Provider id (matched against rule `provider` filters, exact).
    pub provider: &'a str,
    /// Upstream dialect of the route (informational; classification is dialect-agnostic).
    pub dialect: Dialect,
    /// HTTP status of the response head; `None` = transport error before the head.
    pub status: Option<u16>,
    /// Response headers, when a head arrived (read for retry hints and rule header markers;
    /// never copied into messages).
    pub headers: Option<&'a HeaderMap>,
    /// Error body, or the `data:` of an in-stream error event. May be empty.
    pub body: &'a [u8],
    /// Error type of an `event: error` inside a 200 stream, e.g. `overloaded_error`.
    pub in_stream_error_type: Option<&'a str>,
    /// The client disconnected: no penalty anywhere (§0).
    pub client_gone: bool,
    /// The stream ended without its terminal marker or broke after the head (§0).
    pub truncated: bool,
}

/// The rules classification reads: plain data borrowed from the live config.
#[derive(Debug, Clone, Copy)]
pub struct Rules<'a> {
    /// `[[restatement]]` rules from the config file, tried first (§7).
    pub restatements: &'a [Restatement],
    /// Built-in restatements (`config::builtin_restatements()`), tried after config rules.
    pub builtins: &'a [Restatement],
    /// `[[error_rules]]` (§7), first match wins.
    pub error_rules: &'a [ErrorRule],
    /// Markers and thresholds of `[resilience.connection_cooldown]` (§2).
    pub cooldown: &'a ConnectionCooldownSettings,
}

/// Classifies one attempt (order in the module doc). `now_wall` converts absolute retry
/// hints when the upstream sent no `date` header. The retry hint is capped at
/// `max_quota_wait` (default 7d, §2).
pub fn classify(input: &Input<'_>, rules: &Rules<'_>, now_wall: SystemTime) -> Classified {
    if let Some(done) = cheap_exit(input) {
        return done;
    }

    let body = Body::new(input.body);
    let empty = HeaderMap::new();
    let headers = input.headers.unwrap_or(&empty);
    let hint = retry_hint::parse(headers, input.body, now_wall);
    let hint_delay = hint.map(|h| retry_hint::cap(h.delay, rules.cooldown.max_quota_wait));
    let out = |class: OutcomeClass, status: Option<u16>, reason: &str, scope: Scope| Classified {
        class,
        status,
        retry_hint: hint_delay,
        reason: reason.to_string(),
        scope,
        restated: None,
        message: fallback_message(body.message(), status, reason),
        error_rule: None,
    };
    let status = match (input.in_stream_error_type, input.status) {
        (Some(kind), _) => stream_status(kind, &body),
        (None, status) if input.truncated => {
            return out(OutcomeClass::Transient, status, "truncated", Scope::Triple);
        }
        (None, Some(s)) => s,
        (None, None) => {
            return out(
                OutcomeClass::Transient,
                None,
                "transport_error",
                Scope::Triple,
            );
        }
    };

    // (1) §7 restatement.
    let restated = restatement(rules, input.provider, status, &body, hint_delay);
    let status = restated.as_ref().map_or(status, |r| r.to);

    // (2) §7 provider error rules, then (3) the §0 table.
    let rule = rules
        .error_rules
        .iter()
        .enumerate()
        .find(|(_, r)| error_rule_matches(r, input.provider, status, headers, &body));
    let (class, reason, scope) = rule
        .map(|(_, r)| from_error_rule(r, status, &body, hint, rules))
        .unwrap_or_else(|| by_table(status, &body, hint, rules.cooldown));
    Classified {
        restated,
        error_rule: rule.and_then(|(i, r)| {
            super::RuleIndex::new(i).map(|x| x.with_base_cooldown(r.base_cooldown))
        }),
        ..out(class, Some(status), reason, scope)
    }
}

/// The outcome of an attempt the client left, or of a plain success, without looking at the
/// body: a success body (possibly a whole completion) is never parsed. `None` for the rest.
fn cheap_exit(input: &Input<'_>) -> Option<Classified> {
    let plain =
        |class: OutcomeClass, status: Option<u16>, reason: &str, message: &str| Classified {
            class,
            status,
            retry_hint: None,
            reason: reason.to_string(),
            scope: Scope::Triple,
            restated: None,
            message: message.to_string(),
            error_rule: None,
        };
    if input.client_gone {
        let message = "client disconnected";
        return Some(plain(
            OutcomeClass::ClientGone,
            None,
            "client_gone",
            message,
        ));
    }
    if let (None, false, Some(s @ 200..=299)) =
        (input.in_stream_error_type, input.truncated, input.status)
    {
        return Some(plain(OutcomeClass::Success, Some(s), "success", ""));
    }
    None
}

/// The first restatement rule (the config file's, then the built-in ones) that restates
/// `status` from `provider` with `body`, with the retry hint the upstream sent or the rule's
/// default.
fn restatement(
    rules: &Rules<'_>,
    provider: &str,
    status: u16,
    body: &Body,
    hint_delay: Option<Duration>,
) -> Option<Restated> {
    rules
        .restatements
        .iter()
        .chain(rules.builtins)
        .find(|r| restates(r, provider, status, body))
        .map(|r| Restated {
            rule: r.id.clone(),
            from: status,
            to: r.to_status,
            retry_after: hint_delay.unwrap_or(r.default_retry_after),
        })
}

/// The HTTP status an in-stream error type stands for (§0 last row): overloaded → 529,
/// api_error → 500, rate_limit → 429, and the other Anthropic/OpenAI error types by their
/// documented status. The body's `error.type`/`error.code` are consulted too; an overload
/// signal anywhere wins (A14 b: `service_unavailable_error` with code
/// `server_is_overloaded` → 529). Unknown types count as 500. `body` is the event's `data:`.
pub fn in_stream_status(error_type: &str, body: &[u8]) -> u16 {
    stream_status(error_type, &Body::new(body))
}

/// The short, single-line, key-masked message of an upstream error body: its
/// `error.message` (or top-level `message`), else the start of its text; at most 200
/// characters.
pub fn error_message(body: &[u8]) -> String {
    Body::new(body).message()
}

fn stream_status(error_type: &str, body: &Body) -> u16 {
    let mut kinds = vec![error_type.to_lowercase()];
    kinds.extend(body.error_kinds());
    let mapped: Vec<u16> = kinds.iter().filter_map(|k| error_type_status(k)).collect();
    if mapped.contains(&529) {
        return 529;
    }
    mapped.first().copied().unwrap_or(500)
}

fn error_type_status(kind: &str) -> Option<u16> {
    Some(match kind {
        "overloaded_error" | "overloaded" | "server_is_overloaded" => 529,
        "api_error" | "server_error" | "internal_error" | "internal_server_error" => 500,
        "service_unavailable_error" | "service_unavailable" | "unavailable" => 503,
        "timeout_error" | "timeout" => 504,
        "rate_limit_error"
        | "rate_limit_exceeded"
        | "insufficient_quota"
        | "resource_exhausted" => 429,
        "authentication_error" | "invalid_api_key" | "unauthenticated" => 401,
        "billing_error" => 402,
        "permission_error" | "permission_denied" => 403,
        "not_found_error" | "model_not_found" | "not_found" => 404,
        "request_too_large" => 413,
        "invalid_request_error" | "invalid_argument" => 400,
        _ => return None,
    })
}

fn provider_ok(filter: Option<&String>, provider: &str) -> bool {
    filter.is_none_or(|p| p == provider)
}

/// A §7 restatement applies: provider filter, `from_statuses`, at least one text marker and
/// no exclude marker.
fn restates(r: &Restatement, provider: &str, status: u16, body: &Body) -> bool {
    provider_ok(r.provider.as_ref(), provider)
        && r.from_statuses.contains(&status)
        && body.contains_any(&r.text_markers)
        && !body.contains_any(&r.exclude_markers)
}

/// A §7 error rule applies: provider filter, `statuses` (empty = any), and every non-empty
/// condition list has at least one match (`error_types` against the body's error
/// type/code/status, `header_markers` name → case-insensitive substring, `text_markers`);
/// no `exclude_markers` match.
fn error_rule_matches(
    r: &ErrorRule,
    provider: &str,
    status: u16,
    headers: &HeaderMap,
    body: &Body,
) -> bool {
    if !provider_ok(r.provider.as_ref(), provider)
        || !(r.statuses.is_empty() || r.statuses.contains(&status))
        || body.contains_any(&r.exclude_markers)
    {
        return false;
    }
    let types_ok = r.error_types.is_empty() || {
        let kinds = body.error_kinds();
        r.error_types
            .iter()
            .any(|t| kinds.iter().any(|k| k.eq_ignore_ascii_case(t.trim())))
    };
    let headers_ok = r.header_markers.is_empty()
        || r.header_markers.iter().any(|(name, needle)| {
            headers
                .get_all(name.trim().to_ascii_lowercase().as_str())
                .iter()
                .filter_map(|v| v.to_str().ok())
                .any(|v| {
                    v.to_ascii_lowercase()
                        .contains(&needle.to_ascii_lowercase())
                })
        });
    let text_ok = r.text_markers.is_empty() || body.contains_any(&r.text_markers);
    types_ok && headers_ok && text_ok
}

/// The class an error rule's reason names (§7 reason words); `connection` scope never yields
/// a terminal class. Unknown reasons keep the table's class with the rule's reason and scope.
fn from_error_rule<'r>(
    r: &'r ErrorRule,
    status: u16,
    body: &Body,
    hint: Option<retry_hint::Hint>,
    rules: &Rules<'_>,
) -> (OutcomeClass, &'r str, Scope) {
    let scope = match r.scope.as_str() {
        "model" => Scope::Model,
        "provider" => Scope::Provider,
        _ => Scope::Connection,
    };
    // A connection-scoped rule never ends the connection (§7), and a model-scoped one is
    // about that model only: both are a (lockable) refusal, never a terminal state.
    let non_terminal = scope != Scope::Provider;
    let class = match r.reason.as_str() {
        "rate_limit_exceeded" => OutcomeClass::RateLimited,
        "quota_exhausted" => OutcomeClass::QuotaExhausted,
        "not_found" => OutcomeClass::NotFound,
        "server_error" => OutcomeClass::Transient,
        "auth_error" | "banned" | "credits_exhausted" if non_terminal => OutcomeClass::Forbidden,
        "auth_error" => OutcomeClass::Auth,
        "banned" => OutcomeClass::Banned,
        "credits_exhausted" => OutcomeClass::CreditsExhausted,
        _ => by_table(status, body, hint, rules.cooldown).0,
    };
    (class, r.reason.as_str(), scope)
}

/// §3 "Scope by status".
fn scope_for(status: u16) -> Scope {
    match status {
        402 | 403 | 429 => Scope::QuotaGroup,
        404 => Scope::Model,
        _ => Scope::Triple,
    }
}

/// The §0 table for an error status (not 2xx).
fn by_table(
    status: u16,
    body: &Body,
    hint: Option<retry_hint::Hint>,
    cd: &ConnectionCooldownSettings,
) -> (OutcomeClass, &'static str, Scope) {
    use OutcomeClass as C;
    let scope = scope_for(status);
    let (class, reason) = match status {
        400..=499 if body.contains_any(&cd.ban_markers) => (C::Banned, "banned"),
        402 => (C::CreditsExhausted, "credits_exhausted"),
        400..=499 if body.contains_any(&DEFAULT_CREDIT_MARKERS) => {
            (C::CreditsExhausted, "credits_exhausted")
        }
        401 => (C::Auth, "auth_error"),
        403 if body.contains_any(&cd.request_rejected_markers) => {
            (C::RequestRejected, "request_rejected")
        }
        403 | 429 => quota_or_rate(status, body, hint, cd),
        404 => (C::NotFound, "not_found"),
        529 => (C::Overloaded, "overloaded"),
        408 | 500..=599 => (C::Transient, "server_error"),
        400..=499 => (C::ClientFault, "client_error"),
        // 1xx/3xx where an error was expected: upstream misbehaved; transient, try the next.
        _ => (C::Transient, "server_error"),
    };
    (class, reason, scope)
}

/// §2 "Two kinds of waiting" for a 429 or a 403, and the concurrency-limit 429 (rules in
/// the module doc).
fn quota_or_rate(
    status: u16,
    body: &Body,
    hint: Option<retry_hint::Hint>,
    cd: &ConnectionCooldownSettings,
) -> (OutcomeClass, &'static str) {
    // Quota text inside a concurrency phrase ("Concurrency limit reached" holds the quota
    // marker "limit reached") is about concurrency: only a quota match apart from every
    // concurrency match counts.
    let quota_text = body.contains_any_apart(&cd.quota_markers, &cd.concurrency_markers)
        || hint.is_some_and(|h| h.quota_text);
    let long = hint.is_some_and(|h| h.delay > cd.quota_wait_threshold);
    if !long && !quota_text && status == 429 && body.contains_any(&cd.concurrency_markers) {
        return (OutcomeClass::ConcurrencyLimited, "concurrency_limited");
    }
    match (long, quota_text, hint.is_some(), status) {
        (true, _, _, _) | (false, true, false, _) => {
            (OutcomeClass::QuotaExhausted, "quota_exhausted")
        }
        (false, true, true, _) | (false, false, _, 429) => {
            (OutcomeClass::RateLimited, "rate_limit_exceeded")
        }
        _ => (OutcomeClass::Forbidden, "forbidden"),
    }
}

/// The upstream message, or a plain description when the body had none.
fn fallback_message(message: String, status: Option<u16>, reason: &str) -> String {
    if !message.is_empty() {
        return message;
    }
    match (reason, status) {
        ("truncated", _) => "stream ended without its terminal marker".into(),
        (_, None) => "transport error before the response head".into(),
        (_, Some(s)) => format!("HTTP {s}"),
    }
}

#[cfg(test)]
mod tests;
