//! `Gates`: the async side of admission (§4 concurrency caps, §5 queue of `docs/RESILIENCE.md`).
//!
//! The pure decision lives in [`crate::policy::admission`]; this module is the stateful shell
//! around it. Every [`GateState`] of the process sits behind one `std::sync::Mutex`, taken for
//! short critical sections and never across an `.await`. A request routed to
//! (provider, connection, upstream model) passes the chain global → provider → connection →
//! model in that fixed order; [`decide`] / [`apply`] book the whole chain at once, so permits
//! are taken as one bundle and no deadlock is possible.
//!
//! - **Arrival** ([`Gates::acquire`]): admitted at once, refused at once (queue full), admitted
//!   without a permit (fail-open, queue full), or queued. [`Gates::queue_full_for`] asks the
//!   same question for "refused at once" without booking anything, so the request path can
//!   skip the body work for a candidate whose queue is full.
//! - **Queued**: each waiter owns a `oneshot` receiver. Whenever permits come back or a waiter
//!   leaves, the connection's waiters are re-checked with [`decide_queued`] in FIFO order and
//!   each one that now gets every permit is booked *under the lock* and handed its grant, so a
//!   released permit can never be stolen by a later arrival. The waiter races that grant
//!   against `tokio::time::sleep(max_wait)`; when the timer wins, [`decide_queued`] runs at the
//!   deadline: a free permit still wins, else `RATE_LIMIT_QUEUE_TIMEOUT` (protected),
//!   `SEMAPHORE_TIMEOUT` (strict) or admission without a permit (fail-open).
//! - **Cancel safety**: a queued future owns a `WaiterGuard`; dropping the future leaves the
//!   queue at once (and, if a grant raced in, returns those permits). [`Admitted`] is an RAII
//!   bundle whose `Drop` releases every permit exactly once and wakes the next waiter(s).
//! - **Fast path**: a connection/model with no cap has no gate; such a request is admitted
//!   without taking the lock or keeping any bookkeeping.
//! - **Protection caps**: a rate-limit-protected connection without `max_concurrent` has a
//!   connection gate at its [`AutoCap`] (`protection_default_cap`, or a cap learned from
//!   concurrency-limit 429s). [`Gates::observe_outcome`] feeds it every reported outcome of
//!   the connection; a lowered cap holds new arrivals back at once (nothing in flight is
//!   cut), a raised one grants waiters at once.
//!
//! `execution_max_wait` is *not* enforced here: the request path bounds its upstream call with
//! [`Gates::execution_budget`] (pure [`execution_deadline`]).
//!
//! **Saturation is not failure.** Nothing here reports to the breaker (§1), the connection
//! cooldown (§2) or the model lockout (§3): a full gate, a full queue, a queue timeout or a
//! fail-open admit must never open a breaker, cool a connection or lock a model (§4). Callers
//! must not feed [`Refused`] to those layers either.
//!
//! Time: `now` comes from the injected [`Clock`]; waiting uses `tokio::time`, so
//! `tokio::time::pause` drives the timers in tests. The tokio timer is authoritative for a
//! queue timeout: when it fires the wait counts as at least `max_wait`, whatever the clock says.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::clock::{Clock, Instant};
use crate::config::keys::{ConnKey, ConnSlot, Keyed, ProviderKey};
use crate::config::{Config, Profile, QueueSettings};
use crate::policy::OutcomeClass;
use crate::policy::admission::{
    AdmissionCode, AutoCap, CapSource, Decision, Enforcement, GateKind, GateState, QueueOverride,
    QueuePolicy, RequestId, Waiter, apply, clamp_depth, clamp_duration, decide, decide_queued,
    effective_cap, execution_deadline, leave, protection_enabled, release,
};
use crate::policy::cooldown::deadline_after;
use crate::snapshot::GateView;

mod reload;
#[cfg(test)]
mod tests;

/// The process's concurrency gates. Cheap to clone (one shared state); `Send + Sync`.
#[derive(Clone)]
pub struct Gates {
    inner: Arc<Inner>,
}

struct Inner {
    clock: Arc<dyn Clock>,
    /// Per-connection facts (fast path, policies, names) of the config served now, by key;
    /// replaced whole by a reload (under the state lock).
    layout: std::sync::RwLock<Arc<Layout>>,
    state: Mutex<State>,
}

/// The per-connection facts of one config, by key.
struct Layout {
    providers: Keyed<ProviderKey, ProviderLayout>,
    /// Every connection's key in config order (for listing).
    order: Vec<(ProviderKey, ConnSlot)>,
}

struct ProviderLayout {
    id: String,
    profile: Profile,
    /// The provider's `max_concurrent` is set, or the global cap is.
    capped: bool,
    conns: Keyed<ConnSlot, ConnLayout>,
}

struct ConnLayout {
    id: String,
    rate_limit_protection: Option<bool>,
    concurrency_fail_open: bool,
    /// Behind the §5 queue under the config's `auto_enable_api_key_connections`.
    protected: bool,
    /// `max_concurrent` is set, or the connection is protected (its [`AutoCap`]).
    capped: bool,
    /// Upstream model ids with a `model_concurrency` entry.
    model_caps: BTreeSet<String>,
    /// The connection's own `queue = { .. }` overrides (§5: they win over everything).
    queue: QueueOverride,
}

struct State {
    next_id: RequestId,
    /// `[resilience.concurrency] global_max`; `None` = uncapped.
    global: Option<GateState>,
    providers: Keyed<ProviderKey, ProviderState>,
}

struct ProviderState {
    /// The provider's `max_concurrent`; `None` = uncapped.
    gate: Option<GateState>,
    conns: Keyed<ConnSlot, ConnState>,
}

struct ConnState {
    gate: Option<GateState>,
    /// The effective cap of a protected connection without `max_concurrent` (its `gate`
    /// carries `cap()`); `None` otherwise.
    auto: Option<AutoCap>,
    models: BTreeMap<String, GateState>,
    /// Queued requests of this connection, by id (= arrival order).
    waiting: BTreeMap<RequestId, Slot>,
    /// The policy of the latest arrival (for [`GateView::max_queue_depth`]).
    policy: QueuePolicy,
}

struct Slot {
    model: Option<String>,
    enqueued_at: Instant,
    policy: QueuePolicy,
    /// Grant: the instant the permits were booked for this waiter.
    tx: oneshot::Sender<Instant>,
}

/// Which gates one request passes: `model` is `Some` only when that model has a gate. A
/// connection a reload removed has no gates any more (its provider's and the global remain).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Route {
    key: ConnKey,
    model: Option<String>,
}

/// A request was refused admission without reaching upstream (§5). Never an upstream failure:
/// do not report it to the breaker, cooldown or lockout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// Error code; [`AdmissionCode::status`] gives the HTTP status (429 or 503).
    pub code: AdmissionCode,
    /// `retry-after` for the client (whole seconds, at least 1 s).
    pub retry_after: Option<Duration>,
    /// Human-readable message naming the provider and connection.
    pub message: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.code(), self.message)
    }
}

impl std::error::Error for Refused {}

/// An admitted request: an RAII bundle of permits. Dropping it releases every permit exactly
/// once (in reverse acquisition order) and hands them to the next FIFO waiter(s). Keep it
/// alive for the whole upstream exchange, including the streamed body.
pub struct Admitted {
    held: Option<(Arc<Inner>, Route)>,
    queued_for: Duration,
    without_permit: bool,
}

impl Admitted {
    fn untracked(queued_for: Duration, without_permit: bool) -> Self {
        Self {
            held: None,
            queued_for,
            without_permit,
        }
    }

    /// How long the request waited in the queue (zero when admitted at once).
    pub fn queued_for(&self) -> Duration {
        self.queued_for
    }

    /// True when the request proceeds without a permit (`concurrency_fail_open`, §4): its
    /// wait timed out or the queue was full on an unprotected fail-open connection.
    pub fn without_permit(&self) -> bool {
        self.without_permit
    }

    /// True when this bundle holds permits (false for uncapped routes and fail-open admits).
    pub fn holds_permit(&self) -> bool {
        self.held.is_some()
    }
}

impl fmt::Debug for Admitted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Admitted")
            .field("route", &self.held.as_ref().map(|(_, r)| r))
            .field("queued_for", &self.queued_for)
            .field("without_permit", &self.without_permit)
            .finish()
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        if let Some((inner, route)) = self.held.take() {
            let now = inner.clock.now();
            let mut st = inner.lock();
            // A connection a reload removed took its gates with it; its provider's and the
            // global one remain.
            release(&mut st.chain(&route));
            st.pump(route.key, now);
        }
    }
}

/// What a new arrival got.
enum Arrival {
    Done(Result<Admitted, Refused>),
    Queued {
        id: RequestId,
        enqueued_at: Instant,
        rx: oneshot::Receiver<Instant>,
    },
}

// === impl Gates ===

impl Gates {
    /// One gate per `max_concurrent` and per `model_concurrency` entry of every connection of
    /// `cfg` (kept under the connection's key, `cfg.keys`), one per provider
    /// `max_concurrent`, and the global `global_max` one.
    pub fn new(cfg: &Config, clock: Arc<dyn Clock>) -> Self {
        let layout = layout_of(cfg);
        let providers = provider_states(cfg, &layout);
        Self {
            inner: Arc::new(Inner {
                clock,
                layout: std::sync::RwLock::new(Arc::new(layout)),
                state: Mutex::new(State {
                    next_id: 1,
                    global: cfg
                        .resilience
                        .concurrency
                        .global_max
                        .map(|cap| GateState::new(GateKind::Global, Some(cap))),
                    providers,
                }),
            }),
        }
    }

    /// The queue policy in force for connection `key` under `queue` (no saved or
    /// per-connection overrides); `None` for a key no connection has (removed by a reload).
    pub fn policy(&self, key: ConnKey, queue: &QueueSettings) -> Option<QueuePolicy> {
        let l = self.inner.layout();
        let p = l.providers.get(key.provider)?;
        Some(p.conns.get(key.slot)?.policy(p.profile, queue))
    }

    /// [`Self::acquire`] for `cand` (found by its key whatever reloads did since; a
    /// connection a reload removed is admitted at once).
    pub async fn acquire_for(
        &self,
        cand: &crate::policy::select::Candidate,
        queue: &QueueSettings,
    ) -> Result<Admitted, Refused> {
        self.acquire(cand.key, &cand.model, queue).await
    }

    /// [`Self::try_acquire`] for `cand` (see [`Self::acquire_for`]).
    pub fn try_acquire_for(
        &self,
        cand: &crate::policy::select::Candidate,
        queue: &QueueSettings,
    ) -> Option<Admitted> {
        self.try_acquire(cand.key, &cand.model, queue)
    }

    /// True when a new arrival for `cand` would be refused at once because its queue is
    /// full: no permit for it now, `max_queue_depth` requests already waiting, and a
    /// connection that refuses (`RATE_LIMIT_QUEUE_FULL` / `SEMAPHORE_QUEUE_FULL`) rather than
    /// proceeding without a permit. Books nothing (no counter, no queue entry): dispatch asks
    /// it before rewriting or translating the body for `cand`, and books the refusal through
    /// [`Self::acquire_for`] only if the request ends with it.
    pub fn queue_full_for(
        &self,
        cand: &crate::policy::select::Candidate,
        queue: &QueueSettings,
    ) -> bool {
        let (Some(policy), Some(route)) = (
            self.policy(cand.key, queue),
            self.route(cand.key, &cand.model),
        ) else {
            return false;
        };
        let policy = clamp_policy(policy);
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        matches!(
            decide(&st.chain(&route), &policy, now),
            Decision::Reject { .. }
        )
    }

    /// Acquires the permits of (connection `key`, upstream model) in the fixed
    /// order global → provider → connection → model, honouring FIFO, the queue depth,
    /// `max_wait` and the connection's enforcement (protected queue / strict / fail-open).
    ///
    /// Cancel-safe: dropping the future while queued leaves the queue at once (no leaked
    /// waiter, no leaked permit). Unknown keys and uncapped routes are admitted at once
    /// without bookkeeping.
    pub async fn acquire(
        &self,
        key: ConnKey,
        model: &str,
        queue: &QueueSettings,
    ) -> Result<Admitted, Refused> {
        match self.policy(key, queue) {
            Some(policy) => self.acquire_with(key, model, policy).await,
            None => Ok(Admitted::untracked(Duration::ZERO, false)),
        }
    }

    /// [`Self::acquire`] with an already resolved policy (e.g. [`QueuePolicy::resolve`] with
    /// saved console/API overrides). Durations and depth are clamped to the §5 ranges.
    pub async fn acquire_with(
        &self,
        key: ConnKey,
        model: &str,
        policy: QueuePolicy,
    ) -> Result<Admitted, Refused> {
        let Some(route) = self.route(key, model) else {
            return Ok(Admitted::untracked(Duration::ZERO, false));
        };
        let policy = clamp_policy(policy);
        let (id, enqueued_at, rx) = match self.arrive(&route, &policy) {
            Arrival::Done(out) => return out,
            Arrival::Queued {
                id,
                enqueued_at,
                rx,
            } => (id, enqueued_at, rx),
        };
        let mut guard = WaiterGuard {
            inner: &self.inner,
            route,
            id,
            rx,
            armed: true,
        };
        let timer = tokio::time::sleep(policy.max_wait);
        let granted = tokio::select! {
            biased;
            granted = &mut guard.rx => granted.ok(),
            () = timer => None,
        };
        match granted {
            Some(at) => Ok(guard.into_admitted(at.saturating_duration_since(enqueued_at))),
            // Timer fired (or, impossibly, the grant channel closed): decide at the deadline.
            None => guard.time_out(enqueued_at, &policy),
        }
    }

    /// Non-blocking variant for trying candidates in order before queueing on one: `Some`
    /// only when every gate has a permit for a new arrival right now (never overtaking a
    /// queued request). Books nothing otherwise (no counters, no queue entry).
    pub fn try_acquire(
        &self,
        key: ConnKey,
        model: &str,
        queue: &QueueSettings,
    ) -> Option<Admitted> {
        let policy = self.policy(key, queue)?;
        self.try_acquire_with(key, model, policy)
    }

    /// [`Self::try_acquire`] with an already resolved policy.
    pub fn try_acquire_with(
        &self,
        key: ConnKey,
        model: &str,
        policy: QueuePolicy,
    ) -> Option<Admitted> {
        let Some(route) = self.route(key, model) else {
            return Some(Admitted::untracked(Duration::ZERO, false));
        };
        let policy = clamp_policy(policy);
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        if decide(&st.chain(&route), &policy, now) != Decision::Admit {
            return None;
        }
        let id = st_next_id(&mut st);
        let mut chain = st.chain(&route);
        apply(&mut chain, id, &Decision::Admit, now);
        drop(st);
        Some(Admitted {
            held: Some((Arc::clone(&self.inner), route)),
            queued_for: Duration::ZERO,
            without_permit: false,
        })
    }

    /// Every connection gate and model gate as plain data, in config order (connection gate
    /// first, then its model gates by model id).
    pub fn views(&self) -> Vec<GateView> {
        let now = self.inner.clock.now();
        let st = self.inner.lock();
        let layout = self.inner.layout();
        let mut out = Vec::new();
        for (pk, slot) in &layout.order {
            let (Some(pl), Some(ps)) = (layout.providers.get(*pk), st.providers.get(*pk)) else {
                continue;
            };
            let (Some(cl), Some(cs)) = (pl.conns.get(*slot), ps.conns.get(*slot)) else {
                continue;
            };
            {
                let models = cs.models.iter().map(|(m, g)| (Some(m), g));
                for (model, g) in cs.gate.iter().map(|g| (None, g)).chain(models) {
                    let oldest = g.oldest_wait(now).unwrap_or(Duration::ZERO);
                    let auto = cs.auto.as_ref().filter(|_| model.is_none());
                    out.push(GateView {
                        kind: g.kind,
                        provider: pl.id.clone(),
                        connection: cl.id.clone(),
                        model: model.cloned(),
                        in_flight: g.in_flight,
                        cap: if auto.is_some() { None } else { g.cap },
                        effective_cap: g.cap,
                        cap_source: auto.map_or(CapSource::Config, AutoCap::source),
                        queued: g.depth(),
                        max_queue_depth: cs.policy.max_queue_depth,
                        enforcement: cs.policy.enforcement,
                        oldest_wait_ms: u64::try_from(oldest.as_millis()).unwrap_or(u64::MAX),
                        timeouts: g.counters.timeouts,
                        rejections: g.counters.rejections,
                        fail_open_admits: g.counters.fail_open_admits,
                        admitted: g.counters.admitted,
                    });
                }
            }
        }
        out
    }

    /// Feeds one reported outcome of connection `key` to its [`AutoCap`], when it is
    /// protected without a
    /// `max_concurrent` of its own. A concurrency-limit 429 is weighed against the permits of
    /// the connection gate in flight now (the reporting attempt still holds its own); a
    /// success may raise a learned cap, unless `headroom_low` (the connection's requests
    /// window is nearly empty). Other outcomes, other connections: nothing. A lowered cap
    /// stops new admissions at once and cuts nothing in flight; a raised one grants waiters.
    pub fn observe_outcome(&self, key: ConnKey, class: OutcomeClass, headroom_low: bool) {
        if !matches!(
            class,
            OutcomeClass::Success | OutcomeClass::ConcurrencyLimited
        ) {
            return;
        }
        let l = self.inner.layout();
        let Some((pl, cl)) = l
            .providers
            .get(key.provider)
            .and_then(|pl| Some((pl, pl.conns.get(key.slot)?)))
        else {
            return;
        };
        if !cl.protected {
            return;
        }
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let Some(cs) = st.conn_mut(key) else {
            return;
        };
        let (Some(auto), Some(gate)) = (cs.auto.as_mut(), cs.gate.as_mut()) else {
            return;
        };
        let (before, in_flight) = (auto.cap(), gate.in_flight);
        let changed = if class == OutcomeClass::ConcurrencyLimited {
            auto.on_concurrency_limited(in_flight, now)
        } else {
            auto.on_success(headroom_low, now)
        };
        if !changed {
            return;
        }
        let (cap, source) = (auto.cap(), auto.source());
        gate.cap = Some(cap);
        if cap > before {
            st.pump(key, now);
        }
        drop(st);
        tracing::info!(
            provider = %pl.id,
            connection = %cl.id,
            cap,
            previous = before,
            in_flight,
            source = source.as_str(),
            "protection concurrency cap changed"
        );
    }

    /// How long a request dispatched now may execute before `RATE_LIMIT_EXECUTION_TIMEOUT`
    /// (§5): `execution_max_wait` (clamped) raised to `provider_timeout` when that is longer.
    /// Not enforced here; the request path bounds its upstream call with it.
    pub fn execution_budget(&self, provider_timeout: Duration, queue: &QueueSettings) -> Duration {
        let now = self.inner.clock.now();
        execution_deadline(
            now,
            clamp_duration(queue.execution_max_wait),
            provider_timeout,
        )
        .saturating_duration_since(now)
    }

    /// The gates `model` on connection `key` passes; `None` when none is capped (the
    /// lock-free fast path) or no connection has the key (a reload removed it).
    fn route(&self, key: ConnKey, model: &str) -> Option<Route> {
        let l = self.inner.layout();
        let pl = l.providers.get(key.provider)?;
        let cl = pl.conns.get(key.slot)?;
        let model = cl.model_caps.contains(model).then(|| model.to_owned());
        (pl.capped || cl.capped || model.is_some()).then_some(Route { key, model })
    }

    /// Decides and books a new arrival under the lock.
    fn arrive(&self, route: &Route, policy: &QueuePolicy) -> Arrival {
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let id = st_next_id(&mut st);
        if let Some(c) = st.conn_mut(route.key) {
            c.policy = *policy;
        }
        let mut chain = st.chain(route);
        let d = decide(&chain, policy, now);
        apply(&mut chain, id, &d, now);
        match d {
            Decision::Admit => Arrival::Done(Ok(Admitted {
                held: Some((Arc::clone(&self.inner), route.clone())),
                queued_for: Duration::ZERO,
                without_permit: false,
            })),
            Decision::AdmitWithoutPermit => {
                Arrival::Done(Ok(Admitted::untracked(Duration::ZERO, true)))
            }
            Decision::Reject { code, retry_after } => {
                Arrival::Done(Err(self.refused(route, code, retry_after, policy)))
            }
            Decision::Queue { .. } => {
                let (tx, rx) = oneshot::channel();
                if let Some(c) = st.conn_mut(route.key) {
                    c.waiting.insert(
                        id,
                        Slot {
                            model: route.model.clone(),
                            enqueued_at: now,
                            policy: *policy,
                            tx,
                        },
                    );
                }
                Arrival::Queued {
                    id,
                    enqueued_at: now,
                    rx,
                }
            }
        }
    }

    fn refused(
        &self,
        route: &Route,
        code: AdmissionCode,
        retry_after: Duration,
        policy: &QueuePolicy,
    ) -> Refused {
        self.inner.refused(route, code, retry_after, policy)
    }
}

impl fmt::Debug for Gates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gates")
            .field("connections", &self.inner.layout().order.len())
            .finish_non_exhaustive()
    }
}

/// The per-connection facts of every provider of `cfg`, by key, with the config order.
fn layout_of(cfg: &Config) -> Layout {
    let providers = cfg
        .providers
        .iter()
        .enumerate()
        .map(|(i, p)| (cfg.keys.provider(i), provider_layout(cfg, i, p)))
        .collect();
    let order = (0..cfg.providers.len())
        .flat_map(|i| cfg.keys.connections_of(i).iter())
        .map(|k| (k.provider, k.slot))
        .collect();
    Layout { providers, order }
}

/// The per-connection facts of provider `p` (position `i` in `cfg`).
fn provider_layout(cfg: &Config, i: usize, p: &crate::config::Provider) -> ProviderLayout {
    let slots = cfg.keys.connections_of(i);
    ProviderLayout {
        id: p.id.clone(),
        profile: p.profile,
        capped: p.max_concurrent.is_some() || cfg.resilience.concurrency.global_max.is_some(),
        conns: p
            .connections
            .iter()
            .zip(slots)
            .map(|(c, k)| {
                let protected = protection_enabled(
                    p.profile,
                    c.rate_limit_protection,
                    cfg.resilience.queue.auto_enable_api_key_connections,
                );
                (
                    k.slot,
                    ConnLayout {
                        id: c.id.clone(),
                        rate_limit_protection: c.rate_limit_protection,
                        concurrency_fail_open: c.concurrency_fail_open,
                        protected,
                        capped: c.max_concurrent.is_some() || protected,
                        model_caps: c.model_concurrency.keys().cloned().collect(),
                        queue: QueueOverride {
                            max_wait: c.queue.max_wait,
                            execution_max_wait: c.queue.execution_max_wait,
                            max_queue_depth: c.queue.max_queue_depth,
                        },
                    },
                )
            })
            .collect(),
    }
}

/// Fresh gates (nothing held, nobody waiting) for every provider of `cfg`, by key.
fn provider_states(cfg: &Config, layout: &Layout) -> Keyed<ProviderKey, ProviderState> {
    cfg.providers
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let key = cfg.keys.provider(i);
            let pl = layout.providers.get(key)?;
            Some((
                key,
                provider_state(p, pl, cfg.keys.connections_of(i), &cfg.resilience.queue),
            ))
        })
        .collect()
}

/// Fresh gates for provider `p` (facts `pl`) under the queue `defaults`.
fn provider_state(
    p: &crate::config::Provider,
    pl: &ProviderLayout,
    keys: &[ConnKey],
    defaults: &QueueSettings,
) -> ProviderState {
    ProviderState {
        gate: p
            .max_concurrent
            .map(|cap| GateState::new(GateKind::Provider, Some(cap))),
        conns: p
            .connections
            .iter()
            .zip(keys)
            .filter_map(|(c, k)| {
                let cl = pl.conns.get(k.slot)?;
                Some((k.slot, conn_state(c, cl, pl.profile, defaults)))
            })
            .collect(),
    }
}

/// Fresh gates for connection `c` (facts `cl`) of a provider with `profile`.
fn conn_state(
    c: &crate::config::Connection,
    cl: &ConnLayout,
    profile: Profile,
    defaults: &QueueSettings,
) -> ConnState {
    let auto = auto_cap_for(c, cl, defaults, None);
    ConnState {
        gate: effective_cap(c.max_concurrent, auto.as_ref())
            .map(|(cap, _)| GateState::new(GateKind::Connection, Some(cap))),
        auto,
        models: c
            .model_concurrency
            .iter()
            .map(|(m, cap)| (m.clone(), GateState::new(GateKind::Model, Some(*cap))))
            .collect(),
        waiting: BTreeMap::new(),
        policy: cl.policy(profile, defaults),
    }
}

/// The [`AutoCap`] connection `c` (facts `cl`) gets under the queue `defaults`: `None` with
/// an explicit `max_concurrent` or without protection; else `kept` (a reload keeps what was
/// learned) at the new default, or a fresh one.
fn auto_cap_for(
    c: &crate::config::Connection,
    cl: &ConnLayout,
    defaults: &QueueSettings,
    kept: Option<AutoCap>,
) -> Option<AutoCap> {
    if c.max_concurrent.is_some() || !cl.protected {
        return None;
    }
    let default_cap = defaults.protection_default_cap;
    Some(match kept {
        Some(mut a) => {
            a.set_default(default_cap);
            a
        }
        None => AutoCap::new(default_cap),
    })
}

fn st_next_id(st: &mut State) -> RequestId {
    let id = st.next_id;
    st.next_id = st.next_id.wrapping_add(1);
    id
}

/// Clamps a caller-supplied policy to the §5 ranges.
fn clamp_policy(p: QueuePolicy) -> QueuePolicy {
    QueuePolicy {
        max_wait: clamp_duration(p.max_wait),
        execution_max_wait: clamp_duration(p.execution_max_wait),
        max_queue_depth: clamp_depth(p.max_queue_depth),
        enforcement: p.enforcement,
    }
}

/// `d` rounded up to whole seconds, at least 1 s.
fn retry_secs(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0)))
        .max(Duration::from_secs(1))
}

// === impl ConnLayout ===

impl ConnLayout {
    fn policy(&self, profile: Profile, queue: &QueueSettings) -> QueuePolicy {
        let protected = protection_enabled(
            profile,
            self.rate_limit_protection,
            queue.auto_enable_api_key_connections,
        );
        // `queue` already carries the saved console/API values (they are applied to the live
        // settings), so only the connection's own override is layered on top here.
        QueuePolicy::resolve(
            queue,
            &QueueOverride::default(),
            &self.queue,
            Enforcement::resolve(protected, self.concurrency_fail_open),
        )
    }
}

// === impl Inner ===

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The connection facts served now.
    fn layout(&self) -> Arc<Layout> {
        self.layout
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn refused(
        &self,
        route: &Route,
        code: AdmissionCode,
        retry_after: Duration,
        policy: &QueuePolicy,
    ) -> Refused {
        let layout = self.layout();
        let (p, c) = layout
            .providers
            .get(route.key.provider)
            .map(|p| {
                let c = p.conns.get(route.key.slot).map_or("?", |c| c.id.as_str());
                (p.id.as_str(), c)
            })
            .unwrap_or(("?", "?"));
        let target = match &route.model {
            Some(m) => format!("model '{m}' on connection '{c}' of provider '{p}'"),
            None => format!("connection '{c}' of provider '{p}'"),
        };
        let secs = retry_after.as_secs();
        let message = if code.is_timeout() {
            format!(
                "waited {} for a concurrency permit for {target} without getting one; retry after {secs}s",
                humantime::format_duration(policy.max_wait)
            )
        } else {
            format!(
                "{} requests already wait for {target} (max_queue_depth); retry after {secs}s",
                policy.max_queue_depth
            )
        };
        Refused {
            code,
            retry_after: code.has_retry_after().then_some(retry_after),
            message,
        }
    }
}

// === impl State ===

impl State {
    fn conn_mut(&mut self, key: ConnKey) -> Option<&mut ConnState> {
        self.providers
            .get_mut(key.provider)?
            .conns
            .get_mut(key.slot)
    }

    /// Takes every waiter of connection `key` off all the gates of its chain (the
    /// provider's and the global one included) and out of its queue: a reload is removing
    /// the connection. Each waiter's grant channel closes, so it goes on without a permit.
    fn leave_all(&mut self, key: ConnKey) {
        let Some(conn) = self.conn_mut(key) else {
            return;
        };
        let waiting: Vec<(RequestId, Option<String>)> = std::mem::take(&mut conn.waiting)
            .into_iter()
            .map(|(id, slot)| (id, slot.model))
            .collect();
        for (id, model) in waiting {
            leave(&mut self.chain(&Route { key, model }), id);
        }
    }

    /// The gates of `route` in the fixed order global → provider → connection → model.
    fn chain(&mut self, route: &Route) -> Vec<&mut GateState> {
        let mut v = Vec::with_capacity(4);
        if let Some(g) = self.global.as_mut() {
            v.push(g);
        }
        if let Some(ProviderState { gate, conns }) = self.providers.get_mut(route.key.provider) {
            if let Some(g) = gate.as_mut() {
                v.push(g);
            }
            if let Some(ConnState { gate, models, .. }) = conns.get_mut(route.key.slot) {
                if let Some(g) = gate.as_mut() {
                    v.push(g);
                }
                if let Some(g) = route.model.as_deref().and_then(|m| models.get_mut(m)) {
                    v.push(g);
                }
            }
        }
        v
    }

    /// Re-checks waiters after permits of connection `key` came back or one of its waiters
    /// left: that connection first, then — when a provider or global gate was involved —
    /// the provider's other connections, then every other provider's.
    fn pump(&mut self, key: ConnKey, now: Instant) {
        self.pump_connection(key, now);
        let provider_capped = self
            .providers
            .get(key.provider)
            .is_some_and(|p| p.gate.is_some());
        if provider_capped || self.global.is_some() {
            for other in self.connection_keys(Some(key.provider)) {
                if other != key {
                    self.pump_connection(other, now);
                }
            }
        }
        if self.global.is_some() {
            for other in self.connection_keys(None) {
                if other.provider != key.provider {
                    self.pump_connection(other, now);
                }
            }
        }
    }

    /// The keys of every connection with gates (of provider `only`, when given), in key
    /// order.
    fn connection_keys(&self, only: Option<ProviderKey>) -> Vec<ConnKey> {
        self.providers
            .iter()
            .filter(|(pk, _)| only.is_none_or(|o| o == *pk))
            .flat_map(|(provider, ps)| {
                ps.conns
                    .iter()
                    .map(move |(slot, _)| ConnKey { provider, slot })
            })
            .collect()
    }

    /// Re-checks the waiters of one connection in FIFO order and grants every one that now
    /// gets all its permits (booked here, under the lock). One pass suffices: a grant only
    /// takes permits and shortens the queue of *later* waiters.
    fn pump_connection(&mut self, key: ConnKey, now: Instant) {
        loop {
            let Some(conn) = self.conn_mut(key) else {
                return;
            };
            let queued: Vec<(RequestId, Option<String>, Instant, QueuePolicy)> = conn
                .waiting
                .iter()
                .map(|(id, s)| (*id, s.model.clone(), s.enqueued_at, s.policy))
                .collect();
            let mut again = false;
            for (id, model, enqueued_at, policy) in queued {
                let route = Route { key, model };
                let waiter = Waiter { id, enqueued_at };
                let mut chain = self.chain(&route);
                if decide_queued(&chain, &waiter, &policy, now) != Decision::Admit {
                    continue;
                }
                apply(&mut chain, id, &Decision::Admit, now);
                let slot = self.conn_mut(key).and_then(|c| c.waiting.remove(&id));
                let delivered = slot.is_some_and(|s| s.tx.send(now).is_ok());
                if !delivered {
                    // The waiter is gone (cannot happen while its guard lives): undo and
                    // re-run, the permits may serve an earlier waiter now.
                    release(&mut self.chain(&route));
                    again = true;
                    break;
                }
            }
            if !again {
                return;
            }
        }
    }
}

/// Owned by a queued `acquire` future; dropping it while still armed leaves the queue (and
/// returns the permits if a grant raced in), so cancelling the future leaks nothing.
struct WaiterGuard<'a> {
    inner: &'a Arc<Inner>,
    route: Route,
    id: RequestId,
    rx: oneshot::Receiver<Instant>,
    armed: bool,
}

impl WaiterGuard<'_> {
    /// The grant arrived: the permits are ours.
    fn into_admitted(mut self, queued_for: Duration) -> Admitted {
        self.armed = false;
        Admitted {
            held: Some((Arc::clone(self.inner), self.route.clone())),
            queued_for,
            without_permit: false,
        }
    }

    /// `max_wait` elapsed: decide at the deadline (a free permit still wins).
    fn time_out(mut self, enqueued_at: Instant, policy: &QueuePolicy) -> Result<Admitted, Refused> {
        let deadline = deadline_after(enqueued_at, policy.max_wait);
        let now = self.inner.clock.now().max(deadline);
        let waited = now.saturating_duration_since(enqueued_at);
        let mut st = self.inner.lock();
        let Some(conn) = st.conn_mut(self.route.key) else {
            // A reload removed the connection (and its queue) while this waited: it goes on
            // without a permit rather than fail a request the old config accepted.
            self.armed = false;
            return Ok(Admitted::untracked(waited, true));
        };
        let slot = conn.waiting.remove(&self.id);
        self.armed = false;
        if slot.is_none() {
            // A grant raced the timer and won.
            drop(st);
            return match self.rx.try_recv() {
                Ok(at) => Ok(self.into_admitted(at.saturating_duration_since(enqueued_at))),
                Err(_) => self.fallback(policy, waited),
            };
        }
        let waiter = Waiter {
            id: self.id,
            enqueued_at,
        };
        let mut chain = st.chain(&self.route);
        let mut d = decide_queued(&chain, &waiter, policy, now);
        if let Decision::Queue { .. } = d {
            // Unreachable: `now` is at or past the deadline. Resolve as a timeout anyway.
            d = match policy.enforcement.timeout_code() {
                Some(code) => Decision::Reject {
                    code,
                    retry_after: retry_secs(policy.max_wait),
                },
                None => Decision::AdmitWithoutPermit,
            };
        }
        apply(&mut chain, self.id, &d, now);
        st.pump(self.route.key, now);
        drop(st);
        match d {
            Decision::Admit => Ok(self.into_admitted(waited)),
            Decision::AdmitWithoutPermit | Decision::Queue { .. } => {
                Ok(Admitted::untracked(waited, true))
            }
            Decision::Reject { code, retry_after } => {
                Err(self.inner.refused(&self.route, code, retry_after, policy))
            }
        }
    }

    /// Timeout outcome without gate bookkeeping (only for states that cannot occur).
    fn fallback(&self, policy: &QueuePolicy, waited: Duration) -> Result<Admitted, Refused> {
        match policy.enforcement.timeout_code() {
            Some(code) => {
                Err(self
                    .inner
                    .refused(&self.route, code, retry_secs(policy.max_wait), policy))
            }
            None => Ok(Admitted::untracked(waited, true)),
        }
    }
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let now = self.inner.clock.now();
        let mut st = self.inner.lock();
        let queued = st
            .conn_mut(self.route.key)
            .and_then(|c| c.waiting.remove(&self.id))
            .is_some();
        if queued {
            // §5: a client that disconnects while queued leaves the queue at once.
            leave(&mut st.chain(&self.route), self.id);
        } else if self.rx.try_recv().is_ok() {
            // Granted but never observed: give the permits back.
            release(&mut st.chain(&self.route));
        } else {
            return;
        }
        st.pump(self.route.key, now);
    }
}
