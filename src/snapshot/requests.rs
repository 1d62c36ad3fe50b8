//! Request views: finished requests with their attempts, skips and waits, how each ended,
//! and the requests held until a quota reset.

use serde::{Deserialize, Serialize};

use super::AttemptClass;
use super::word::{Word, empty_is_none};
use crate::config::Dialect;
use crate::policy::select::ExclusionReason;

impl RequestView {
    /// A `request_log` row as the Requests panel shows it (no attempt details; `id` 0). An
    /// outcome word this build does not know (a newer sluice wrote it) reads as sluice's own
    /// error rather than as a success.
    pub fn from_log(r: crate::store::RequestLogRow) -> Self {
        Self {
            at_unix_ms: r.at_unix_ms,
            route: r.route,
            client_model: r.client_model,
            target: r.target,
            status: r.status,
            latency_ms: r.latency_ms,
            attempts: r.attempts,
            bytes: r.bytes,
            outcome: RequestOutcome::parse(&r.outcome).unwrap_or(RequestOutcome::SluiceError),
            tokens_in: r.tokens_in,
            tokens_out: r.tokens_out,
            injected: r.injected,
            continued: r.continued,
            ..Default::default()
        }
    }
}

/// One finished request as the Requests panel shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RequestView {
    /// Sequence number since start.
    pub id: u64,
    /// When it started, Unix ms.
    pub at_unix_ms: u64,
    /// Prompt tokens the upstream reported (JSON `usage`, or the stream's usage events);
    /// left out of JSON while unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_in: Option<u64>,
    /// Completion tokens the upstream reported; left out of JSON while unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_out: Option<u64>,
    /// Client route path, e.g. `/v1/messages`.
    pub route: String,
    /// Model name the client sent (empty when none was readable).
    pub client_model: String,
    /// Last target tried, `provider:connection/model`; empty when none was tried.
    pub target: String,
    /// HTTP status returned to the client (0 when the client went away first).
    pub status: u16,
    /// Total latency in ms.
    pub latency_ms: u64,
    /// Upstream attempts made.
    pub attempts: u32,
    /// Body bytes relayed to the client.
    pub bytes: u64,
    /// Whether the response was an SSE stream.
    pub stream: bool,
    /// `ok`, `upstream_error`, `sluice_error`, `client_error`, `cancelled` or `truncated`.
    pub outcome: RequestOutcome,
    /// Short error text (no secrets), empty when ok.
    pub error: String,
    /// Every attempt in order (for the console's request details).
    pub attempt_log: Vec<AttemptView>,
    /// Candidates left out before dispatch, with why (the §8 reasons).
    pub skipped: Vec<SkippedView>,
    /// Every cooldown-aware wait (§4) the request made, in order.
    pub waits: Vec<WaitView>,
    /// The client's format: `anthropic`, `chat` or `responses` (empty for `/v1/models`).
    pub client_format: String,
    /// The dialect of the last target tried (`anthropic` or `openai`); `None` (an empty
    /// string in JSON) when none was tried.
    #[serde(with = "empty_is_none")]
    pub upstream_dialect: Option<Word<Dialect>>,
    /// True when an attempt met an operator-injected fault (serialised only when true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub injected: bool,
    /// True when the stream broke after text reached the client and a continuation was sent
    /// once with that text as an assistant prefill (`[resilience.stream]
    /// continue_after_break`; its own attempt shows whether it served; serialised only when
    /// true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub continued: bool,
    /// What translation changed in what the last target tried was asked, one line each,
    /// e.g. `max_tokens 128000 → 32768 (max_output_tokens)` (serialised only when
    /// non-empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adjusted: Vec<String>,
}

impl WaitView {
    /// "waited 9.9 s for key-a's cooldown" (or "… for model-x's lockout on key-a").
    pub fn describe(&self) -> String {
        let (pc, model) = self.target.split_once('/').unwrap_or((&self.target, ""));
        let conn = pc.split_once(':').map_or(pc, |(_, c)| c);
        let what = match self.reason.known() {
            Some(WaitReason::ModelLockout) => format!("{model}'s lockout on {conn}"),
            Some(WaitReason::QuotaHold) => format!("{conn}'s quota reset (held)"),
            Some(WaitReason::LaneSlotBusy) => format!("a low-priority lane slot on {conn}"),
            Some(WaitReason::ConnectionCooldown) | None => format!("{conn}'s cooldown"),
        };
        // Tenths of a second, rounded down: 9_950 ms reads "9.9 s".
        let tenths = self.waited_ms / 100;
        format!("waited {}.{} s for {what}", tenths / 10, tenths % 10)
    }
}

/// One cooldown-aware wait of a request: every candidate was excluded by a short cooldown or
/// lockout, and the request waited for the earliest to end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WaitView {
    /// The target whose exclusion ended first, `provider:connection/model`.
    pub target: String,
    /// `connection_cooldown`, `model_lockout`, `quota_hold` (a combo's hold until a quota
    /// reset) or `lane_slot_busy`.
    pub reason: Word<WaitReason>,
    /// How long the request waited, ms.
    pub waited_ms: u64,
}

/// One upstream attempt of a request.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AttemptView {
    /// `provider:connection/model`.
    pub target: String,
    /// Response status (0 = transport error before the head).
    pub status: u16,
    /// Outcome class, e.g. `success`, `rate_limited`, `transient`, `overloaded`.
    pub class: AttemptClass,
    /// Reason word, e.g. `rate_limit_exceeded`.
    pub reason: String,
    /// Time to the response head (or the failure), ms.
    pub latency_ms: u64,
    /// `client→upstream` when the request was translated for this target, e.g.
    /// `anthropic→openai`; empty when it was forwarded in the client's format.
    pub translated: String,
    /// True when an operator-injected fault answered (or delayed) this attempt (serialised
    /// only when true).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub injected: bool,
}

/// A candidate excluded before dispatch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SkippedView {
    /// `provider:connection/model`.
    pub target: String,
    /// `circuit_open`, `connection_cooldown`, `quota_wait`, `model_lockout`, `terminal`,
    /// `provider_cooldown`, `unavailable`, or `slow_start` (skipped for a
    /// recovering provider's ramp, and served elsewhere), `leased`, `quota_preflight`, or
    /// `untranslatable`.
    pub reason: Word<SkipReason>,
}

/// What a request waited for (a [`WaitView`]'s `reason`). Serialized snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReason {
    /// A connection's cooldown (the cooldown-aware wait).
    ConnectionCooldown,
    /// A model lockout on a connection (the cooldown-aware wait).
    ModelLockout,
    /// A combo's hold until the earliest quota reset (`hold_until_reset`).
    QuotaHold,
    /// A busy low-priority lane slot, retried on the same connection.
    LaneSlotBusy,
}

impl WaitReason {
    /// The wait word, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ConnectionCooldown => "connection_cooldown",
            Self::ModelLockout => "model_lockout",
            Self::QuotaHold => "quota_hold",
            Self::LaneSlotBusy => "lane_slot_busy",
        }
    }

    /// The wait for a waitable exclusion (a connection cooldown or a model lockout); `None`
    /// for any other reason.
    pub fn of_exclusion(r: ExclusionReason) -> Option<Self> {
        match r {
            ExclusionReason::ConnectionCooldown => Some(Self::ConnectionCooldown),
            ExclusionReason::ModelLockout => Some(Self::ModelLockout),
            _ => None,
        }
    }
}

/// Why a candidate was skipped before dispatch (a [`SkippedView`]'s `reason`): a selection
/// exclusion, or a target the request cannot be translated for. Serialized snake_case, the
/// same words as [`ExclusionReason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The request cannot be translated for that target (nothing was sent).
    Untranslatable,
    /// Left out at selection time (written as the exclusion's own word).
    #[serde(untagged)]
    Excluded(ExclusionReason),
}

impl SkipReason {
    /// The skip word, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Excluded(r) => r.as_str(),
            Self::Untranslatable => "untranslatable",
        }
    }
}

impl From<ExclusionReason> for SkipReason {
    fn from(r: ExclusionReason) -> Self {
        Self::Excluded(r)
    }
}

/// How a finished request ended, as the request log, metrics and console name it. Serialized
/// snake_case (`ok`, `upstream_error`, …).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestOutcome {
    /// A 2xx and, for streams, a complete stream.
    #[default]
    Ok,
    /// The upstream failed (error status passed through, unreachable, timed out).
    UpstreamError,
    /// sluice refused it (draining, every candidate excluded).
    SluiceError,
    /// The client's request was bad (unknown model, unreadable body, …).
    ClientError,
    /// The client went away before it was answered.
    Cancelled,
    /// A stream that ended before its terminal event.
    Truncated,
}

impl RequestOutcome {
    /// `ok`, `upstream_error`, `sluice_error`, `client_error`, `cancelled` or `truncated`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::UpstreamError => "upstream_error",
            Self::SluiceError => "sluice_error",
            Self::ClientError => "client_error",
            Self::Cancelled => "cancelled",
            Self::Truncated => "truncated",
        }
    }

    /// Parses [`as_str`](Self::as_str) output (request-log rows read back from the store);
    /// `None` for any other word.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "ok" => Self::Ok,
            "upstream_error" => Self::UpstreamError,
            "sluice_error" => Self::SluiceError,
            "client_error" => Self::ClientError,
            "cancelled" => Self::Cancelled,
            "truncated" => Self::Truncated,
            _ => return None,
        })
    }
}

impl std::fmt::Display for RequestOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One request waiting for a quota reset.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HeldView {
    /// The request's id (as in the Requests panel).
    pub request_id: u64,
    /// The model the client asked for (the combo).
    pub model: String,
    /// The target whose quota resets first (`provider:connection/model`).
    pub target: String,
    /// When the hold began, Unix ms.
    pub since_unix_ms: u64,
    /// When it dispatches again (the reset), Unix ms.
    pub until_unix_ms: u64,
}
