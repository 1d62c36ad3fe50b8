//! `BreakerState` and `Transition`: the vocabulary of the §1 state machine and its history.

use serde::{Deserialize, Serialize};

use crate::clock::Instant;

/// Transitions kept per breaker, oldest dropped first (§1 "Persistence": the last 20).
pub const TRANSITION_HISTORY: usize = 20;

/// The four breaker states of §1. Serialized (and shown) as `closed`, `degraded`, `open`,
/// `half_open`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Normal operation.
    #[default]
    Closed,
    /// Still passing traffic; `failure_count >= degrade_at` (an early warning).
    Degraded,
    /// Provider skipped until the (escalated) reset timeout passes.
    Open,
    /// Reset timeout passed; exactly one probe request may run.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `degraded`, `open` or `half_open` (snapshot, store and console).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Degraded => "degraded",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }

    /// Parses [`as_str`](Self::as_str) output (used when restoring from the store).
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "closed" => Some(Self::Closed),
            "degraded" => Some(Self::Degraded),
            "open" => Some(Self::Open),
            "half_open" => Some(Self::HalfOpen),
            _ => None,
        }
    }
}

impl std::fmt::Display for BreakerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// Why a breaker changed state. Serialized as the snake_case of the variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransitionReason {
    /// A counted failure reached `degrade_at` (→ DEGRADED) or `open_at` (→ OPEN).
    FailureThreshold,
    /// Successes brought the count below `degrade_at` (DEGRADED → CLOSED).
    Recovered,
    /// `degraded_quiet_window` passed without a failure (DEGRADED → CLOSED, count 0).
    QuietWindow,
    /// The (escalated) reset timeout passed (OPEN → HALF_OPEN).
    ResetTimeout,
    /// The probe succeeded (HALF_OPEN → CLOSED).
    ProbeSucceeded,
    /// The probe failed with a counted outcome (HALF_OPEN → OPEN).
    ProbeFailed,
    /// The probe did not settle within `probe_timeout` (HALF_OPEN → OPEN, A10).
    ProbeTimedOut,
    /// An operator reset it (any → CLOSED).
    OperatorReset,
}

impl TransitionReason {
    /// Every reason, in declaration order.
    pub const ALL: [Self; 8] = [
        Self::FailureThreshold,
        Self::Recovered,
        Self::QuietWindow,
        Self::ResetTimeout,
        Self::ProbeSucceeded,
        Self::ProbeFailed,
        Self::ProbeTimedOut,
        Self::OperatorReset,
    ];

    /// Parses [`as_str`](Self::as_str) output (used when restoring from the store).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Short snake_case name for logs and the console.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FailureThreshold => "failure_threshold",
            Self::Recovered => "recovered",
            Self::QuietWindow => "quiet_window",
            Self::ResetTimeout => "reset_timeout",
            Self::ProbeSucceeded => "probe_succeeded",
            Self::ProbeFailed => "probe_failed",
            Self::ProbeTimedOut => "probe_timed_out",
            Self::OperatorReset => "operator_reset",
        }
    }
}

/// One state change. Lazy transitions (quiet window, reset timeout, probe timeout) are stamped
/// with the instant they became due, not the read that noticed them, so the history reads as
/// if a timer had fired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    /// When it happened (monotonic; the core converts to wall time for display and storage).
    pub at: Instant,
    /// State before.
    pub from: BreakerState,
    /// State after.
    pub to: BreakerState,
    /// Why.
    pub reason: TransitionReason,
}
