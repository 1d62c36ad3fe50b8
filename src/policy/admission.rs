//! `Admission`: the pure §4/§5 admission decision over a chain of concurrency gates.
//!
//! A request routed to (provider, connection, model) passes up to four gates in a fixed order:
//! global → provider → connection → model ([`GateKind`]). Each [`GateState`] is plain data: a
//! cap, the permits in flight, a FIFO of [`Waiter`]s and counters. [`decide`] (a new arrival)
//! and [`decide_queued`] (a waiter re-checked when a permit is released or its timer fires)
//! look at the whole chain at once and return a [`Decision`]; [`apply`] then books it on every
//! gate together, so the async side takes all permits as one bundle in the fixed order and no
//! deadlock is possible (§4). [`release`] returns the bundle.
//!
//! **FIFO by reservation.** A capped gate lends a later request a permit only when enough
//! permits remain for every earlier waiter on that gate: it blocks when
//! `in_flight + earlier_waiters >= cap`. So a later arrival never overtakes an earlier waiter
//! for a gate's permits (FIFO within a connection), yet waiters held back by a
//! *different* gate (another model's cap, another connection's cap under a shared provider
//! cap) do not stall requests that need none of the permits they wait for. An uncapped gate
//! never blocks and orders nothing.
//!
//! **Saturation is not failure.** Nothing here reports to the breaker (§1), the connection
//! cooldown (§2) or the model lockout (§3): a full gate, a queue timeout, a full queue or an
//! execution timeout never opens a breaker, cools a connection or locks a model (§4 "A
//! saturated gate never …"). The core must not feed these outcomes to those layers either.

use std::borrow::{Borrow, BorrowMut};
use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Instant;

mod auto_cap;
mod queue;
#[cfg(test)]
mod tests;

pub use auto_cap::{
    AutoCap, CapSource, DEFAULT_PROTECTION_CAP, LOW_REQUESTS_HEADROOM, MAX_PROTECTION_CAP,
    RAISE_AFTER_SUCCESSES, RAISE_INTERVAL, effective_cap, requests_headroom_low,
};

pub use queue::{
    AdmissionCode, Enforcement, MAX_QUEUE_DEPTH, MAX_QUEUE_DURATION, MIN_QUEUE_DURATION,
    QueueOverride, QueuePolicy, clamp_depth, clamp_duration, execution_deadline,
    execution_timed_out, protection_enabled, queue_timed_out,
};

/// Id of one request in the admission queue, assigned by the core (unique per process,
/// increasing in arrival order; it breaks ties between equal `enqueued_at`).
pub type RequestId = u64;

/// Which gate of the chain, in acquisition order (§4: global → provider → connection →
/// model). `Ord` follows that order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateKind {
    /// Process-wide cap (all providers).
    Global,
    /// One provider (all its connections).
    Provider,
    /// One connection entry: `max_concurrent` (§4).
    Connection,
    /// One upstream model id on one connection: `model_concurrency` (§4).
    Model,
}

impl GateKind {
    /// All kinds in acquisition order.
    pub const ORDER: [GateKind; 4] = [
        GateKind::Global,
        GateKind::Provider,
        GateKind::Connection,
        GateKind::Model,
    ];

    /// `global`, `provider`, `connection` or `model`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Provider => "provider",
            Self::Connection => "connection",
            Self::Model => "model",
        }
    }
}

/// True when `gates` are in the fixed acquisition order (each kind at most once). The core
/// builds chains this way; [`decide`] does not depend on it, but permit acquisition does.
pub fn in_fixed_order<G: Borrow<GateState>>(gates: &[G]) -> bool {
    gates
        .windows(2)
        .all(|w| w[0].borrow().kind < w[1].borrow().kind)
}

/// One queued request on a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Waiter {
    /// The request.
    pub id: RequestId,
    /// When it joined the queue (the §5 `max_wait` timer starts here).
    pub enqueued_at: Instant,
}

impl Waiter {
    /// FIFO order key: arrival time, then id.
    fn key(&self) -> (Instant, RequestId) {
        (self.enqueued_at, self.id)
    }
}

/// Lifetime counters of one gate (for the snapshot and console). Each decision booked by
/// [`apply`] counts once on every gate of its chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GateCounters {
    /// Requests that took a permit.
    pub admitted: u64,
    /// Requests that had to wait (counted once per request, when first queued).
    pub queued: u64,
    /// Waiters that ran out of `max_wait` and were refused (`*_TIMEOUT`).
    pub timeouts: u64,
    /// Requests refused at once because the queue was full (`*_QUEUE_FULL`).
    pub rejections: u64,
    /// Requests that proceeded without a permit under `concurrency_fail_open` (§4).
    pub fail_open_admits: u64,
}

/// Accounting of one gate as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateState {
    /// Which gate.
    pub kind: GateKind,
    /// Most permits in flight at once; `None` = unlimited (the config default, §4).
    pub cap: Option<u32>,
    /// Permits currently held. Requests admitted without a permit are not counted.
    pub in_flight: u32,
    /// Queued requests, oldest first.
    pub waiters: VecDeque<Waiter>,
    /// Lifetime counters.
    pub counters: GateCounters,
}

// === impl GateState ===

impl GateState {
    /// An idle gate of `kind` with `cap` (`None` = unlimited).
    pub fn new(kind: GateKind, cap: Option<u32>) -> Self {
        Self {
            kind,
            cap,
            in_flight: 0,
            waiters: VecDeque::new(),
            counters: GateCounters::default(),
        }
    }

    /// Permits free right now; `None` when uncapped.
    pub fn free_permits(&self) -> Option<u32> {
        self.cap.map(|c| c.saturating_sub(self.in_flight))
    }

    /// Requests waiting on this gate.
    pub fn depth(&self) -> usize {
        self.waiters.len()
    }

    /// How long the oldest waiter has waited at `now`; `None` when nobody waits.
    pub fn oldest_wait(&self, now: Instant) -> Option<Duration> {
        self.waiters
            .iter()
            .map(|w| now.saturating_duration_since(w.enqueued_at))
            .max()
    }

    /// True when `id` waits here.
    pub fn is_waiting(&self, id: RequestId) -> bool {
        self.waiters.iter().any(|w| w.id == id)
    }

    /// Waiters that arrived before `w` (FIFO order; `w` itself excluded).
    fn ahead_of(&self, w: &Waiter) -> usize {
        self.waiters
            .iter()
            .filter(|x| x.id != w.id && x.key() < w.key())
            .count()
    }

    /// True when this gate holds back a request with `ahead` earlier waiters.
    fn blocks(&self, ahead: usize) -> bool {
        self.cap.is_some_and(|cap| {
            u64::from(self.in_flight).saturating_add(u64::try_from(ahead).unwrap_or(u64::MAX))
                >= u64::from(cap)
        })
    }

    /// Adds `w` at the back unless it already waits; true when it was added.
    fn enqueue(&mut self, w: Waiter) -> bool {
        if self.is_waiting(w.id) {
            return false;
        }
        // Keep FIFO order even if the core books arrivals slightly out of order.
        let at = self
            .waiters
            .iter()
            .position(|x| x.key() > w.key())
            .unwrap_or(self.waiters.len());
        self.waiters.insert(at, w);
        true
    }

    /// Removes `id` from the queue (admitted, refused, or the client left); true if it waited.
    pub fn leave(&mut self, id: RequestId) -> bool {
        let before = self.waiters.len();
        self.waiters.retain(|w| w.id != id);
        self.waiters.len() != before
    }

    /// Returns one permit (saturating at zero).
    pub fn release(&mut self) {
        self.in_flight = self.in_flight.saturating_sub(1);
    }
}

/// What to do with a request at one moment (§4, §5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Take one permit on every gate of the chain (as one bundle) and dispatch.
    Admit,
    /// Wait; `blocked_by` is the first gate, in the fixed order, that holds it back.
    Queue {
        /// The first blocking gate.
        blocked_by: GateKind,
    },
    /// Refuse without reaching upstream: queue full (at once) or queue wait exceeded.
    Reject {
        /// Error code, HTTP status and diagnostic reason ([`AdmissionCode`]).
        code: AdmissionCode,
        /// `retry-after` for the client: whole seconds, at least 1 s.
        retry_after: Duration,
    },
    /// Dispatch without taking any permit (`concurrency_fail_open = true`, §4): the wait
    /// timed out or the queue was full on a connection that is not behind the §5 queue.
    AdmitWithoutPermit,
}

/// The first gate (in the fixed order) that holds back a request with the given earlier
/// waiters per gate; `None` when every gate has a permit for it.
fn first_blocking<G: Borrow<GateState>>(
    gates: &[G],
    ahead: impl Fn(&GateState) -> usize,
) -> Option<GateKind> {
    gates
        .iter()
        .map(Borrow::borrow)
        .filter(|g| g.blocks(ahead(g)))
        .map(|g| g.kind)
        .min()
}

/// Requests waiting in this chain's §5 queue: the connection gate's waiters (the queue is
/// per provider+connection); without a connection gate, the deepest gate's.
fn queue_depth<G: Borrow<GateState>>(gates: &[G]) -> usize {
    let gates = || gates.iter().map(Borrow::borrow);
    gates()
        .find(|g| g.kind == GateKind::Connection)
        .map(GateState::depth)
        .or_else(|| gates().map(GateState::depth).max())
        .unwrap_or(0)
}

/// `retry-after` estimate: the oldest other waiter leaves (dispatched or timed out) within
/// `max_wait − its wait`. Rounded up to whole seconds, at least 1 s.
fn retry_after<G: Borrow<GateState>>(
    gates: &[G],
    except: Option<RequestId>,
    max_wait: Duration,
    now: Instant,
) -> Duration {
    let oldest = gates
        .iter()
        .flat_map(|g| g.borrow().waiters.iter())
        .filter(|w| Some(w.id) != except)
        .map(|w| now.saturating_duration_since(w.enqueued_at))
        .max();
    let left = match oldest {
        Some(waited) => max_wait.saturating_sub(waited),
        None => max_wait,
    };
    Duration::from_secs(crate::policy::retry_hint::retry_after_secs(left))
}

/// Decision for a **new arrival** on the chain `gates` (in the fixed order global → provider →
/// connection → model; gates the request does not pass are simply absent).
///
/// - Every gate lends it a permit (every earlier waiter on each gate keeps its reserved
///   permit, see the module doc) → [`Decision::Admit`].
/// - Otherwise, with `max_queue_depth > 0` and that many already waiting on the connection's
///   queue → refused at once (§5): `RATE_LIMIT_QUEUE_FULL` behind the §5 queue,
///   `SEMAPHORE_QUEUE_FULL` when fail-closed, [`Decision::AdmitWithoutPermit`] when fail-open.
/// - Otherwise → [`Decision::Queue`].
pub fn decide<G: Borrow<GateState>>(gates: &[G], queue: &QueuePolicy, now: Instant) -> Decision {
    let Some(blocked_by) = first_blocking(gates, GateState::depth) else {
        return Decision::Admit;
    };
    let depth = queue_depth(gates);
    let full = queue.max_queue_depth > 0
        && u64::try_from(depth).unwrap_or(u64::MAX) >= u64::from(queue.max_queue_depth);
    if !full {
        return Decision::Queue { blocked_by };
    }
    match queue.enforcement.queue_full_code() {
        Some(code) => Decision::Reject {
            code,
            retry_after: retry_after(gates, None, queue.max_wait, now),
        },
        None => Decision::AdmitWithoutPermit,
    }
}

/// Decision for a request **already queued** as `waiter`, re-checked when a permit is
/// released or its `max_wait` timer fires.
///
/// - Every gate lends it a permit, counting only waiters that arrived before it →
///   [`Decision::Admit`] (even at the timeout instant: a free permit wins).
/// - Else, once `now − enqueued_at >= max_wait` (§5: the queue-wait budget only) → refused
///   with `RATE_LIMIT_QUEUE_TIMEOUT` (429) or `SEMAPHORE_TIMEOUT`, or
///   [`Decision::AdmitWithoutPermit`] when fail-open.
/// - Else → [`Decision::Queue`].
pub fn decide_queued<G: Borrow<GateState>>(
    gates: &[G],
    waiter: &Waiter,
    queue: &QueuePolicy,
    now: Instant,
) -> Decision {
    let Some(blocked_by) = first_blocking(gates, |g| g.ahead_of(waiter)) else {
        return Decision::Admit;
    };
    if !queue_timed_out(waiter.enqueued_at, now, queue.max_wait) {
        return Decision::Queue { blocked_by };
    }
    match queue.enforcement.timeout_code() {
        Some(code) => Decision::Reject {
            code,
            retry_after: retry_after(gates, Some(waiter.id), queue.max_wait, now),
        },
        None => Decision::AdmitWithoutPermit,
    }
}

/// Books `decision` for request `id` on every gate of its chain at once:
///
/// - `Admit`: leaves the queue, takes one permit per gate, counts `admitted`.
/// - `Queue`: joins the FIFO of every gate (stamped `now`) unless already there; counts
///   `queued` the first time.
/// - `Reject`: leaves the queue; counts `timeouts` or `rejections` by code.
/// - `AdmitWithoutPermit`: leaves the queue; counts `fail_open_admits`; takes no permit.
pub fn apply<G: BorrowMut<GateState>>(
    gates: &mut [G],
    id: RequestId,
    decision: &Decision,
    now: Instant,
) {
    for gate in gates.iter_mut().map(BorrowMut::borrow_mut) {
        match decision {
            Decision::Admit => {
                gate.leave(id);
                gate.in_flight = gate.in_flight.saturating_add(1);
                gate.counters.admitted = gate.counters.admitted.saturating_add(1);
            }
            Decision::Queue { .. } => {
                if gate.enqueue(Waiter {
                    id,
                    enqueued_at: now,
                }) {
                    gate.counters.queued = gate.counters.queued.saturating_add(1);
                }
            }
            Decision::Reject { code, .. } => {
                gate.leave(id);
                let c = if code.is_timeout() {
                    &mut gate.counters.timeouts
                } else {
                    &mut gate.counters.rejections
                };
                *c = c.saturating_add(1);
            }
            Decision::AdmitWithoutPermit => {
                gate.leave(id);
                gate.counters.fail_open_admits = gate.counters.fail_open_admits.saturating_add(1);
            }
        }
    }
}

/// Returns the permit bundle of one admitted request (after it finished, failed or the client
/// went away), in reverse acquisition order. Not for requests admitted without a permit.
pub fn release<G: BorrowMut<GateState>>(gates: &mut [G]) {
    for gate in gates.iter_mut().rev() {
        gate.borrow_mut().release();
    }
}

/// Removes a queued request from every gate of its chain (the client disconnected while
/// queued, §5: it leaves at once). No counter changes.
pub fn leave<G: BorrowMut<GateState>>(gates: &mut [G], id: RequestId) {
    for gate in gates.iter_mut() {
        gate.borrow_mut().leave(id);
    }
}
