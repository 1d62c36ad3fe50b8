//! `plan`: what one classified attempt outcome changes, as plain data (§0 table, §3 "Where the
//! lock is written", §7 error-rule scope and the egress-bucketed lock).
//!
//! The core's single choke point (`Core::report`) asks [`plan`] and only applies the answer
//! to its live breaker, cooldowns and lockouts and persists the changed rows. The rules:
//!
//! - **Breaker** (§1): a success is a success, a counted failure (a transient one with no
//!   HTTP error status or a status in the breaker's `trip_statuses`, or an empty turn;
//!   `breaker::counts`) a failure; anything else only releases a probe permit.
//! - **Empty turn** (§6): counted by the breaker as above; the connection only records it
//!   (`Cooldown::on_failure` never cools for it) and no model is locked (not lockable).
//! - **Lockout mode** (§0): `[resilience.model_lockout] enabled` and the status in its
//!   `error_codes`, for a model-scoped class (transient, rate limited, quota, forbidden, not
//!   found) — the failure becomes a model lockout *instead of* a connection cooldown. A
//!   provider with `per_model_quota = true` treats a rate-limit or quota failure this way even
//!   when the global switch is off: its quotas are per model, so one model's 429 says nothing
//!   about the connection's other models.
//! - **Lock scope** (§3, §7): the classification's scope — quota group for 429/403/402, the
//!   model for 404, the exact triple otherwise — unless an `[[error_rules]]` scope says
//!   otherwise: `model` locks that model id, `provider` locks the model on every connection
//!   of the provider, `connection` means the connection is at fault, so it cools instead.
//! - **The request's own fault** (400/413/422) and a client that went away touch nothing.
//! - **Request rejected** (a 403 matching `request_rejected_markers`): always — lockout mode
//!   or not — locks exactly that model on the attempt's connection, with the rejection
//!   durations (`lockout::rejection_settings`: doubling per repeat, at most 1 h); the
//!   connection only records the error and is never cooled or banned for it.
//! - **Passthrough credentials**: on an `auth = "passthrough"` connection a 401, 402, ban or
//!   "request not allowed" is the client's own key; it never cools or ends the connection.
//! - **Egress-bucketed lock** (§7): on an `egress_bucketed` provider, a 429 (rate limit or
//!   quota) also cools every other connection with the same `egress` label, except those
//!   with `disable_cooling`.
//! - **`base_cooldown`** of the matching error rule replaces the first ladder step and the
//!   lockout base for this failure.

use std::time::Duration;

use super::{Classified, OutcomeClass, Scope};
use crate::config::{ModelLockoutSettings, StatusSet};

#[cfg(test)]
mod tests;

/// What [`plan`] needs to know about one connection of the provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionFacts<'a> {
    /// Its `egress` label (default `direct`).
    pub egress: &'a str,
    /// Its `disable_cooling`.
    pub disable_cooling: bool,
}

/// Everything [`plan`] reads: the outcome and the relevant settings, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct ReportInput<'a> {
    /// The attempt's single classification.
    pub outcome: &'a Classified,
    /// The live `[resilience.model_lockout]` settings.
    pub lockout: &'a ModelLockoutSettings,
    /// The attempt's connection forwards the client's own credentials.
    pub passthrough: bool,
    /// The provider's `per_model_quota`.
    pub per_model_quota: bool,
    /// The provider's `egress_bucketed`.
    pub egress_bucketed: bool,
    /// Index of the attempt's connection in `connections`.
    pub connection: usize,
    /// Every connection of the provider, in config order.
    pub connections: &'a [ConnectionFacts<'a>],
    /// The `base_cooldown` of the error rule that classified the outcome, if any.
    pub rule_base_cooldown: Option<Duration>,
    /// The provider breaker's `trip_statuses` (profile's, or the provider's own).
    pub trip_statuses: &'a StatusSet,
}

/// The breaker's part (§1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerStep {
    /// A success (also closes a half-open probe).
    Success,
    /// A counted failure (also fails a half-open probe).
    Failure,
    /// Not a breaker signal: only a probe permit, if held, is released.
    Release,
}

/// The attempt's connection's part (§2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionStep {
    /// Clear errors and the backoff level.
    Success,
    /// Record the failure (cooldown, quota wait or terminal state by class).
    Failure,
    /// Leave the connection alone.
    Untouched,
}

/// The model lockout part (§3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockoutStep {
    /// Nothing.
    None,
    /// Success decay of the locks covering the model on the attempt's connection.
    Decay,
    /// Lock the model under `scope` on each of these connection indices.
    Lock {
        /// Key the lock is written under.
        scope: Scope,
        /// Connection indices (the attempt's own, or all of the provider's).
        connections: Vec<usize>,
        /// A `request_rejected` lock: `lockout::rejection_settings` durations, and the
        /// connection still records the error (it is not locked *instead of* cooled).
        rejection: bool,
    },
}

/// What one report changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportPlan {
    /// The provider breaker and §1b window.
    pub breaker: BreakerStep,
    /// The attempt's connection.
    pub connection: ConnectionStep,
    /// Model lockouts.
    pub lockout: LockoutStep,
    /// Other connections cooled by the egress-bucketed rule (indices, never the attempt's).
    pub egress: Vec<usize>,
    /// Base cooldown to use instead of the profile's / the lockout settings' (error rule).
    pub base_cooldown: Option<Duration>,
}

/// Classes a model lockout may record (§0 "lockout mode" column).
fn lockable(class: OutcomeClass) -> bool {
    matches!(
        class,
        OutcomeClass::Transient
            | OutcomeClass::RateLimited
            | OutcomeClass::QuotaExhausted
            | OutcomeClass::Forbidden
            | OutcomeClass::NotFound
    )
}

/// Classes that are a fault of the client's own credential on a passthrough connection.
fn client_credential_fault(class: OutcomeClass) -> bool {
    matches!(
        class,
        OutcomeClass::Auth
            | OutcomeClass::CreditsExhausted
            | OutcomeClass::Banned
            | OutcomeClass::RequestRejected
    )
}

fn quota_signal(class: OutcomeClass) -> bool {
    matches!(
        class,
        OutcomeClass::RateLimited | OutcomeClass::QuotaExhausted
    )
}

/// Decides what a report changes (rules in the module doc).
pub fn plan(input: &ReportInput<'_>) -> ReportPlan {
    let c = input.outcome;
    let breaker = match c.class {
        OutcomeClass::Success => BreakerStep::Success,
        _ if super::breaker::counts(c, input.trip_statuses) => BreakerStep::Failure,
        _ => BreakerStep::Release,
    };
    let egress = egress_fanout(input);
    if c.class == OutcomeClass::Success {
        return ReportPlan {
            breaker,
            connection: ConnectionStep::Success,
            lockout: LockoutStep::Decay,
            egress,
            base_cooldown: None,
        };
    }
    let lockout = lockout_step(input);
    let instead_of_cooldown = matches!(
        lockout,
        LockoutStep::Lock {
            rejection: false,
            ..
        }
    );
    let connection = if instead_of_cooldown
        || matches!(
            c.class,
            OutcomeClass::ClientFault | OutcomeClass::ClientGone
        )
        || input.passthrough && client_credential_fault(c.class)
    {
        ConnectionStep::Untouched
    } else {
        ConnectionStep::Failure
    };
    ReportPlan {
        breaker,
        connection,
        lockout,
        egress,
        base_cooldown: input.rule_base_cooldown,
    }
}

/// The lock a failure writes, if lockout mode (global or `per_model_quota`) applies.
fn lockout_step(input: &ReportInput<'_>) -> LockoutStep {
    let c = input.outcome;
    if entitlement_lock(c) {
        return if input.passthrough {
            LockoutStep::None
        } else {
            LockoutStep::Lock {
                scope: Scope::Model,
                connections: vec![input.connection],
                rejection: false,
            }
        };
    }
    if c.class == OutcomeClass::RequestRejected {
        return if input.passthrough {
            LockoutStep::None
        } else {
            LockoutStep::Lock {
                scope: Scope::Model,
                connections: vec![input.connection],
                rejection: true,
            }
        };
    }
    let global = input.lockout.enabled
        && c.status
            .is_some_and(|s| input.lockout.error_codes.contains(&s))
        && lockable(c.class);
    let per_model = input.per_model_quota && quota_signal(c.class);
    if !(global || per_model) {
        return LockoutStep::None;
    }
    match c.scope {
        Scope::Connection => LockoutStep::None,
        Scope::Provider => LockoutStep::Lock {
            scope: Scope::Provider,
            connections: (0..input.connections.len()).collect(),
            rejection: false,
        },
        scope => LockoutStep::Lock {
            scope,
            connections: vec![input.connection],
            rejection: false,
        },
    }
}

/// An `[[error_rules]]` rule scoped to the model saying the account may not use it (reason
/// `auth_error`, `banned` or `credits_exhausted`, e.g. the built-in `无权访问模型` rule): the
/// model is locked on the attempt's connection, lockout mode or not, instead of cooling or
/// ending the connection for one model's entitlement.
fn entitlement_lock(c: &Classified) -> bool {
    c.error_rule.is_some() && c.scope == Scope::Model && c.class == OutcomeClass::Forbidden
}

/// §7 egress-bucketed lock: the other connections sharing the attempt's egress.
fn egress_fanout(input: &ReportInput<'_>) -> Vec<usize> {
    if !input.egress_bucketed || !quota_signal(input.outcome.class) {
        return Vec::new();
    }
    let Some(mine) = input.connections.get(input.connection) else {
        return Vec::new();
    };
    input
        .connections
        .iter()
        .enumerate()
        .filter(|(j, o)| *j != input.connection && o.egress == mine.egress && !o.disable_cooling)
        .map(|(j, _)| j)
        .collect()
}
