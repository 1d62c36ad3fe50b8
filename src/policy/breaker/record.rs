//! `BreakerView` and `BreakerRecord`: a breaker as plain data, for the snapshot and for the
//! store (§1; table `circuit_breakers`).

use std::time::Duration;

use crate::clock::Instant;
use crate::config::BreakerSettings;

use super::{Breaker, BreakerState, TRANSITION_HISTORY, Transition, later};

/// Plain-data view of a breaker at one instant, for the snapshot, admin API and console.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerView {
    /// State after the lazy refresh.
    pub state: BreakerState,
    /// Counted failures (decremented by successes in CLOSED/DEGRADED).
    pub failure_count: u32,
    /// DEGRADED threshold in use.
    pub degrade_at: u32,
    /// OPEN threshold in use.
    pub open_at: u32,
    /// When it last opened, while OPEN or HALF_OPEN.
    pub opened_at: Option<Instant>,
    /// OPEN: when it turns HALF_OPEN. HALF_OPEN with a probe in flight: when the probe times
    /// out. Otherwise `None`.
    pub next_probe_at: Option<Instant>,
    /// `next_probe_at - now`.
    pub retry_after: Option<Duration>,
    /// A HALF_OPEN probe holds the permit.
    pub probe_in_flight: bool,
    /// Consecutive OPEN→HALF_OPEN→OPEN cycles since the last probe success or reset.
    pub open_cycles: u32,
    /// Current reset-timeout multiplier, 1 up to `max_backoff_multiplier`.
    pub multiplier: u32,
    /// `reset_timeout × multiplier`: how long the next (or current) OPEN lasts.
    pub effective_reset_timeout: Duration,
    /// Last counted failure.
    pub last_failure_at: Option<Instant>,
    /// Last transitions, oldest first (at most [`TRANSITION_HISTORY`]).
    pub transitions: Vec<Transition>,
}

/// What is persisted for a breaker (§1 "Persistence", table `circuit_breakers`). Instants are
/// monotonic; the core converts them to wall-clock unix ms when saving
/// (`wall_now + (t - now)`, signed) and back when loading (`now + (wall - wall_now)`,
/// saturating), so an OPEN breaker keeps its remaining time across a restart. A probe in flight
/// is not persisted: a restored HALF_OPEN breaker has its permit free.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BreakerRecord {
    /// State (raw, without a lazy refresh; the next read refreshes).
    pub state: BreakerState,
    /// Counted failures.
    pub failure_count: u32,
    /// Consecutive OPEN→HALF_OPEN→OPEN cycles (the multiplier is derived from it).
    pub open_cycles: u32,
    /// When it last opened (OPEN / HALF_OPEN).
    pub opened_at: Option<Instant>,
    /// OPEN: when it turns HALF_OPEN (column `retry_at_unix_ms`).
    pub open_until: Option<Instant>,
    /// Last counted failure (drives the DEGRADED quiet window).
    pub last_failure_at: Option<Instant>,
    /// Last transitions, oldest first.
    pub transitions: Vec<Transition>,
}

// === impl Breaker (view and persistence) ===

impl Breaker {
    /// Plain-data view at `now` (after the lazy refresh).
    pub fn view(&mut self, now: Instant) -> BreakerView {
        self.refresh(now);
        BreakerView {
            state: self.state,
            failure_count: self.failure_count,
            degrade_at: self.degrade_at(),
            open_at: self.open_at(),
            opened_at: self.opened_at,
            next_probe_at: self.next_probe_at(),
            retry_after: self.retry_after_raw(now),
            probe_in_flight: self.probe.is_some(),
            open_cycles: self.open_cycles,
            multiplier: self.multiplier(),
            effective_reset_timeout: self.effective_reset_timeout(),
            last_failure_at: self.last_failure_at,
            transitions: self.transitions.iter().copied().collect(),
        }
    }

    /// The record to persist. Raw state (no refresh): the restored breaker refreshes on its
    /// first read.
    pub fn persist(&self) -> BreakerRecord {
        BreakerRecord {
            state: self.state,
            failure_count: self.failure_count,
            open_cycles: self.open_cycles,
            opened_at: self.opened_at,
            open_until: self.open_until,
            last_failure_at: self.last_failure_at,
            transitions: self.transitions.iter().copied().collect(),
        }
    }

    /// Rebuilds a breaker from a record whose instants the core already converted from wall
    /// time. Missing instants are filled conservatively at `now`: an OPEN record without
    /// `open_until` stays OPEN for a full (escalated) reset timeout; a DEGRADED record without
    /// `last_failure_at` starts its quiet window at `now`. A HALF_OPEN record comes back with
    /// its permit free.
    pub fn restore(settings: BreakerSettings, rec: &BreakerRecord, now: Instant) -> Self {
        let mut b = Self::new(settings);
        b.state = rec.state;
        b.failure_count = rec.failure_count;
        b.open_cycles = rec.open_cycles;
        b.last_failure_at = rec.last_failure_at;
        let skip = rec.transitions.len().saturating_sub(TRANSITION_HISTORY);
        b.transitions
            .extend(rec.transitions.iter().skip(skip).copied());
        match rec.state {
            BreakerState::Closed => {}
            BreakerState::Degraded => {
                b.last_failure_at = Some(rec.last_failure_at.unwrap_or(now));
            }
            BreakerState::Open => {
                b.opened_at = Some(rec.opened_at.unwrap_or(now));
                b.open_until = Some(
                    rec.open_until
                        .unwrap_or_else(|| later(now, b.effective_reset_timeout())),
                );
            }
            BreakerState::HalfOpen => b.opened_at = rec.opened_at,
        }
        b
    }
}
