//! `Breaker`: the provider circuit breaker (`docs/RESILIENCE.md#1-provider-circuit-breaker`), and
//! [`ProviderCooldown`], the optional windowed provider cooldown (§1b).
//!
//! Both are pure: plain data plus functions of `now`. Nothing here reads a clock, spawns a
//! timer or takes a lock; the core owns one `Breaker` (and one `ProviderCooldown`) per provider,
//! feeds it the outcomes that [`counts`] selects, and asks it for
//! admission. Every time-dependent method takes `now`, and every read refreshes lazily (§1 "Lazy
//! recovery"), so an expired OPEN or a hung probe is noticed by the next caller, not by a timer
//! that might never fire (a probe that hangs).

mod record;
mod transition;
mod window;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::Instant;
use crate::config::{BreakerSettings, StatusSet};
use crate::policy::Classified;

pub use record::{BreakerRecord, BreakerView};
pub use transition::{BreakerState, TRANSITION_HISTORY, Transition, TransitionReason};
pub use window::{ProviderCooldown, ProviderCooldownView};

/// Whether `c` counts toward the provider breaker (§1 "What counts"): a provider-level
/// failure ([`OutcomeClass::counts_for_breaker`]) that either carries no HTTP error status — a
/// transport error, a stream cut short after a 2xx head, an empty turn (a 2xx answer with no
/// text and no tool call, which has no error status to list) — or whose status is one of the
/// breaker's `trip_statuses` (default 408, 500, 502, 503, 504). So a 501, 505 or 520–527
/// cools the connection but leaves the breaker alone unless listed, and 401/403/429/404/529
/// and the request's own 4xx never count, listed or not: they are classified as another
/// layer's business before this is asked.
///
/// [`OutcomeClass::counts_for_breaker`]: crate::policy::OutcomeClass::counts_for_breaker
pub fn counts(c: &Classified, trip_statuses: &StatusSet) -> bool {
    c.class.counts_for_breaker()
        && match c.status {
            Some(s) if !(200..300).contains(&s) => trip_statuses.contains(s),
            _ => true,
        }
}

/// Consecutive OPEN→HALF_OPEN→OPEN cycles tolerated before the reset timeout starts doubling
/// (§1 "more than 3").
pub const ESCALATION_FREE_CYCLES: u32 = 3;

/// Longest span ever added to an `Instant` (about 100 years), so a huge configured duration
/// cannot overflow the platform's instant.
const FAR: Duration = Duration::from_secs(100 * 365 * 24 * 60 * 60);

/// `t + d`, saturating at a far-future instant instead of panicking.
fn later(t: Instant, d: Duration) -> Instant {
    t.checked_add(d.min(FAR)).unwrap_or(t)
}

/// The single HALF_OPEN probe permit. Opaque; hand it back to exactly one of
/// [`Breaker::on_success`], [`Breaker::on_failure`] or [`Breaker::release_probe`]. A ticket
/// whose probe already timed out (or was reset away) is stale: its verdict is treated as an
/// ordinary outcome and releasing it frees nothing, so a late guard drop can never free a newer
/// probe's permit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProbeTicket(u64);

/// Answer of [`Breaker::admit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// CLOSED or DEGRADED: send the request.
    Allowed,
    /// HALF_OPEN: send the request as the one probe; the caller now holds the permit and must
    /// return the ticket on every exit path (use an RAII guard that calls
    /// [`Breaker::release_probe`] on drop).
    Probe(ProbeTicket),
    /// OPEN, or HALF_OPEN with the probe in flight: skip this provider.
    Rejected {
        /// Until the breaker may admit again: OPEN → until HALF_OPEN; HALF_OPEN busy → until
        /// the in-flight probe times out. Always > 0.
        retry_after: Duration,
    },
}

impl Admit {
    /// True for `Allowed` and `Probe`.
    pub fn is_admitted(&self) -> bool {
        !matches!(self, Self::Rejected { .. })
    }

    /// The probe ticket, when this admission is the probe.
    pub fn probe(&self) -> Option<ProbeTicket> {
        match self {
            Self::Probe(t) => Some(*t),
            _ => None,
        }
    }
}

/// The in-flight HALF_OPEN probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Probe {
    ticket: ProbeTicket,
    /// When it was admitted; it times out at `admitted_at + probe_timeout`.
    admitted_at: Instant,
}

/// The provider circuit breaker of §1.
///
/// # States
///
/// - **CLOSED**: traffic flows. Each counted failure (a `trip_statuses` status or a transport
///   error, see [`counts`]) increments `failure_count`; each success decrements
///   it by one. Reaching `degrade_at` → DEGRADED; reaching `open_at` → OPEN.
/// - **DEGRADED**: traffic still flows (a console warning). It returns to CLOSED when successes
///   bring the count below `degrade_at`, or when `degraded_quiet_window` passes with no new
///   failure (count reset to 0). Reaching `open_at` → OPEN.
/// - **OPEN**: [`admit`](Self::admit) rejects with a `retry_after`. After
///   `reset_timeout × multiplier` the next read (any of `admit`, `is_available`, `state`,
///   `retry_after`, `view` and the `on_*` events) moves it to HALF_OPEN. There is no timer.
/// - **HALF_OPEN**: exactly one request is admitted as the probe ([`Admit::Probe`]); others
///   are rejected until the probe settles. Probe success → CLOSED (count 0, multiplier 1).
///   Probe failure → OPEN again. A probe that does not settle within `probe_timeout` loses its
///   permit and counts as a failure (→ OPEN), detected on the next read, so the breaker is
///   never HALF_OPEN with no free permit and no live probe. A probe that ends
///   without a verdict (client cancel, or a non-counted outcome such as 429, 401, 403, 529 or a
///   client 4xx) must be handed to [`release_probe`](Self::release_probe): the permit is freed
///   without counting and the next request probes.
///
/// After more than [`ESCALATION_FREE_CYCLES`] consecutive OPEN→HALF_OPEN→OPEN cycles, each
/// further cycle doubles the reset timeout, capped at `max_backoff_multiplier` (16×); a probe
/// success or [`reset`](Self::reset) sets it back to 1×.
///
/// Outcomes of requests admitted before the breaker opened (stragglers) do not change an OPEN
/// or HALF_OPEN breaker; only the probe's verdict does.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use sluice::clock::{Clock, ManualClock};
/// use sluice::config::validate::default_breaker;
/// use sluice::config::Profile;
/// use sluice::policy::breaker::{Admit, Breaker, BreakerState};
///
/// let t0 = ManualClock::new().now();
/// let s = default_breaker(Profile::Local); // degrade_at 1, open_at 2, reset_timeout 15s
/// let mut b = Breaker::new(s);
///
/// b.on_failure(None, t0);
/// assert_eq!(b.state(t0), BreakerState::Degraded);
/// b.on_failure(None, t0);
/// assert_eq!(
///     b.admit(t0),
///     Admit::Rejected { retry_after: Duration::from_secs(15) }
/// );
///
/// // No timer: the first read after the reset timeout sees HALF_OPEN and takes the probe.
/// let t1 = t0 + Duration::from_secs(15);
/// let Admit::Probe(ticket) = b.admit(t1) else { unreachable!() };
/// assert!(!b.is_available(t1)); // the one permit is taken
/// let t2 = t1 + Duration::from_millis(300);
/// b.on_success(Some(ticket), t2);
/// assert_eq!(b.state(t2), BreakerState::Closed);
/// ```
#[derive(Debug, Clone)]
pub struct Breaker {
    settings: BreakerSettings,
    state: BreakerState,
    failure_count: u32,
    last_failure_at: Option<Instant>,
    opened_at: Option<Instant>,
    /// OPEN only: when it turns HALF_OPEN.
    open_until: Option<Instant>,
    /// HALF_OPEN only: the probe holding the permit.
    probe: Option<Probe>,
    open_cycles: u32,
    next_ticket: u64,
    transitions: VecDeque<Transition>,
    transitions_total: u64,
}

// === impl Breaker ===

impl Breaker {
    /// A CLOSED breaker with count 0 and multiplier 1.
    pub fn new(settings: BreakerSettings) -> Self {
        Self {
            settings,
            state: BreakerState::Closed,
            failure_count: 0,
            last_failure_at: None,
            opened_at: None,
            open_until: None,
            probe: None,
            open_cycles: 0,
            next_ticket: 0,
            transitions: VecDeque::with_capacity(TRANSITION_HISTORY),
            transitions_total: 0,
        }
    }

    /// Replaces the settings (live config edit). Thresholds apply from the next outcome; an
    /// OPEN deadline already set is kept; `probe_timeout` and `degraded_quiet_window` apply from
    /// the next read (measured from the stored admission / last-failure instants). No
    /// transition happens here.
    pub fn set_settings(&mut self, settings: BreakerSettings) {
        self.settings = settings;
    }

    /// The settings in use.
    pub fn settings(&self) -> &BreakerSettings {
        &self.settings
    }

    /// Asks to send one request at `now`. Takes the single probe permit when HALF_OPEN and
    /// free (the caller then holds an [`Admit::Probe`] ticket).
    pub fn admit(&mut self, now: Instant) -> Admit {
        self.refresh(now);
        match self.state {
            BreakerState::Closed | BreakerState::Degraded => Admit::Allowed,
            BreakerState::HalfOpen if self.probe.is_none() => {
                let ticket = ProbeTicket(self.next_ticket);
                self.next_ticket = self.next_ticket.wrapping_add(1);
                self.probe = Some(Probe {
                    ticket,
                    admitted_at: now,
                });
                Admit::Probe(ticket)
            }
            BreakerState::Open | BreakerState::HalfOpen => Admit::Rejected {
                retry_after: self.retry_after_raw(now).unwrap_or(Duration::ZERO),
            },
        }
    }

    /// Whether [`admit`](Self::admit) would admit at `now`, without taking the probe permit
    /// (candidate planning, diagnostics).
    pub fn is_available(&mut self, now: Instant) -> bool {
        self.refresh(now);
        match self.state {
            BreakerState::Closed | BreakerState::Degraded => true,
            BreakerState::HalfOpen => self.probe.is_none(),
            BreakerState::Open => false,
        }
    }

    /// Records a success at `now`. Pass the ticket when this request was the probe. Returns the
    /// transition this success caused, if any (lazy ones are in the history; see
    /// [`transition_count`](Self::transition_count)).
    pub fn on_success(&mut self, probe: Option<ProbeTicket>, now: Instant) -> Option<Transition> {
        self.refresh(now);
        if self.take_probe(probe) {
            self.failure_count = 0;
            self.open_cycles = 0;
            self.opened_at = None;
            self.open_until = None;
            return Some(self.go(BreakerState::Closed, TransitionReason::ProbeSucceeded, now));
        }
        match self.state {
            BreakerState::Closed => {
                self.failure_count = self.failure_count.saturating_sub(1);
                None
            }
            BreakerState::Degraded => {
                self.failure_count = self.failure_count.saturating_sub(1);
                (self.failure_count < self.degrade_at())
                    .then(|| self.go(BreakerState::Closed, TransitionReason::Recovered, now))
            }
            BreakerState::Open | BreakerState::HalfOpen => None,
        }
    }

    /// Records a **counted** failure at `now` (only outcomes for which [`counts`] is true;
    /// for any other outcome of a probe call [`release_probe`](Self::release_probe)). Pass the
    /// ticket when this request was the probe. Returns the transition this failure caused, if
    /// any.
    pub fn on_failure(&mut self, probe: Option<ProbeTicket>, now: Instant) -> Option<Transition> {
        self.refresh(now);
        if self.take_probe(probe) {
            return Some(self.reopen(TransitionReason::ProbeFailed, now));
        }
        match self.state {
            BreakerState::Closed | BreakerState::Degraded => {
                self.failure_count = self.failure_count.saturating_add(1);
                self.last_failure_at = Some(now);
                if self.failure_count >= self.open_at() {
                    Some(self.open(TransitionReason::FailureThreshold, now))
                } else if self.state == BreakerState::Closed
                    && self.failure_count >= self.degrade_at()
                {
                    Some(self.go(
                        BreakerState::Degraded,
                        TransitionReason::FailureThreshold,
                        now,
                    ))
                } else {
                    None
                }
            }
            BreakerState::Open | BreakerState::HalfOpen => None,
        }
    }

    /// The probe ended without a verdict: the client cancelled, the task was dropped, or the
    /// outcome does not count for the breaker (429, 401, 403, 529, client 4xx, stream stall).
    /// Frees the permit without counting; the breaker stays HALF_OPEN and the next request
    /// probes. Returns false (and changes nothing) for a stale ticket.
    pub fn release_probe(&mut self, ticket: ProbeTicket, now: Instant) -> bool {
        self.refresh(now);
        self.take_probe(Some(ticket))
    }

    /// Operator reset (`POST /api/resilience/reset`): CLOSED, count 0, multiplier 1, probe
    /// permit freed (its ticket becomes stale). Returns the transition unless already CLOSED.
    pub fn reset(&mut self, now: Instant) -> Option<Transition> {
        self.refresh(now);
        self.failure_count = 0;
        self.open_cycles = 0;
        self.opened_at = None;
        self.open_until = None;
        self.probe = None;
        self.last_failure_at = None;
        (self.state != BreakerState::Closed)
            .then(|| self.go(BreakerState::Closed, TransitionReason::OperatorReset, now))
    }

    /// State at `now`, after the lazy refresh. Never read the raw field to decide eligibility
    /// (§1 "Lazy recovery").
    pub fn state(&mut self, now: Instant) -> BreakerState {
        self.refresh(now);
        self.state
    }

    /// How long until it may admit again: OPEN → until HALF_OPEN; HALF_OPEN with the probe in
    /// flight → until the probe times out; otherwise `None`.
    pub fn retry_after(&mut self, now: Instant) -> Option<Duration> {
        self.refresh(now);
        self.retry_after_raw(now)
    }

    /// Transitions ever made by this instance (including lazy ones). Compare before and after
    /// a call to know whether to persist or log.
    pub fn transition_count(&self) -> u64 {
        self.transitions_total
    }

    /// The last transitions, oldest first (at most [`TRANSITION_HISTORY`]).
    pub fn transitions(&self) -> impl ExactSizeIterator<Item = &Transition> {
        self.transitions.iter()
    }

    // --- internals ---

    fn degrade_at(&self) -> u32 {
        self.settings.degrade_at.max(1)
    }

    fn open_at(&self) -> u32 {
        self.settings.open_at.max(1)
    }

    /// `2^(cycles - 3)` once cycles exceed 3, capped at `max_backoff_multiplier` (at least 1).
    fn multiplier(&self) -> u32 {
        let cap = self.settings.max_backoff_multiplier.max(1);
        let doublings = self.open_cycles.saturating_sub(ESCALATION_FREE_CYCLES);
        1u32.checked_shl(doublings).map_or(cap, |m| m.min(cap))
    }

    fn effective_reset_timeout(&self) -> Duration {
        self.settings
            .reset_timeout
            .saturating_mul(self.multiplier())
    }

    fn next_probe_at(&self) -> Option<Instant> {
        match self.state {
            BreakerState::Open => self.open_until,
            BreakerState::HalfOpen => self.probe.map(|p| self.probe_deadline(p)),
            _ => None,
        }
    }

    fn probe_deadline(&self, p: Probe) -> Instant {
        later(p.admitted_at, self.settings.probe_timeout)
    }

    fn retry_after_raw(&self, now: Instant) -> Option<Duration> {
        self.next_probe_at()
            .map(|t| t.saturating_duration_since(now))
    }

    /// Frees the permit if `ticket` is the live probe's; true if it was.
    fn take_probe(&mut self, ticket: Option<ProbeTicket>) -> bool {
        match (ticket, self.probe) {
            (Some(t), Some(p)) if p.ticket == t => {
                self.probe = None;
                true
            }
            _ => false,
        }
    }

    /// Lazy transitions due at `now`, in causal order: an expired probe re-opens (stamped at
    /// its deadline), an expired OPEN turns HALF_OPEN (stamped at its deadline), a quiet
    /// DEGRADED closes (stamped when the window ended).
    fn refresh(&mut self, now: Instant) {
        if let Some(p) = self.probe
            && self.state == BreakerState::HalfOpen
        {
            let deadline = self.probe_deadline(p);
            if now >= deadline {
                self.probe = None;
                self.reopen(TransitionReason::ProbeTimedOut, deadline);
            }
        }
        if self.state == BreakerState::Open
            && let Some(until) = self.open_until
            && now >= until
        {
            self.open_until = None;
            self.go(
                BreakerState::HalfOpen,
                TransitionReason::ResetTimeout,
                until,
            );
        }
        if self.state == BreakerState::Degraded {
            let quiet_end = later(
                self.last_failure_at.unwrap_or(now),
                self.settings.degraded_quiet_window,
            );
            if now >= quiet_end {
                self.failure_count = 0;
                self.go(
                    BreakerState::Closed,
                    TransitionReason::QuietWindow,
                    quiet_end,
                );
            }
        }
    }

    /// HALF_OPEN → OPEN after a failed or timed-out probe: one more cycle, escalated timeout.
    fn reopen(&mut self, reason: TransitionReason, at: Instant) -> Transition {
        self.failure_count = self.failure_count.saturating_add(1);
        self.last_failure_at = Some(at);
        self.open_cycles = self.open_cycles.saturating_add(1);
        self.open(reason, at)
    }

    fn open(&mut self, reason: TransitionReason, at: Instant) -> Transition {
        self.probe = None;
        self.opened_at = Some(at);
        self.open_until = Some(later(at, self.effective_reset_timeout()));
        self.go(BreakerState::Open, reason, at)
    }

    fn go(&mut self, to: BreakerState, reason: TransitionReason, at: Instant) -> Transition {
        let t = Transition {
            at,
            from: self.state,
            to,
            reason,
        };
        self.state = to;
        if to == BreakerState::Closed {
            self.opened_at = None;
        }
        if self.transitions.len() >= TRANSITION_HISTORY {
            self.transitions.pop_front();
        }
        self.transitions.push_back(t);
        self.transitions_total = self.transitions_total.saturating_add(1);
        t
    }
}
