//! `Core`: the only writer of live state. It counts requests and attempts, stamps them with
//! the injected [`Clock`], and publishes an immutable [`Snapshot`] on a `watch` channel.
//!
//! The request path only takes short, uncontended locks (never across `.await`) and calls
//! `Notify::notify_one`; one publisher task coalesces changes into at most ~20 snapshots/s.

pub mod admission;
pub mod operator;
pub mod quota;
mod reload;
pub mod requests;
pub mod resilience;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::clock::{Clock, Instant, unix_ms};
use crate::config::Config;
use crate::config::keys::ConnKey;
use crate::snapshot::{ComboView, ConnectionView, ProviderView, RequestView, Snapshot, Totals};
use crate::store::{RequestLogRow, Store};
use requests::stats::{ProviderStats, Stats};

/// Per-connection counters, by connection key.
pub type ConnLoad = crate::support::fast_map::FastMap<crate::config::keys::ConnKey, u64>;

/// Minimum spacing between two published snapshots (at most 20 per second).
pub const PUBLISH_SPACING: Duration = Duration::from_millis(50);

/// Longest spacing [`publish_spacing`] sets (1 s, so a watcher still sees the last-minute
/// window age within about two seconds).
pub const MAX_PUBLISH_SPACING: Duration = Duration::from_secs(1);

/// The spacing after a snapshot that took `built` to build: nine times that, at least
/// [`PUBLISH_SPACING`] and at most [`MAX_PUBLISH_SPACING`]. While builds take under about
/// 110 ms (10,000 lockouts make a snapshot of several MB in a few ms), building snapshots for
/// a watcher takes at most about a tenth of a CPU; slower builds are spaced 1 s apart.
pub fn publish_spacing(built: Duration) -> Duration {
    built
        .saturating_mul(9)
        .clamp(PUBLISH_SPACING, MAX_PUBLISH_SPACING)
}

/// Cheap, cloneable handle to the core.
#[derive(Clone)]
pub struct Core {
    inner: Arc<Inner>,
}

struct Inner {
    clock: Arc<dyn Clock>,
    /// Swapped whole by a config reload; each request keeps the `Arc` it started with.
    config: std::sync::RwLock<Arc<Config>>,
    started_wall: SystemTime,
    addrs: Mutex<(String, String)>,
    stats: Mutex<Stats>,
    in_flight: AtomicU64,
    next_id: AtomicU64,
    version: AtomicU64,
    draining: AtomicBool,
    dirty: Notify,
    tx: watch::Sender<Arc<Snapshot>>,
    store: Option<Arc<Store>>,
    res: Mutex<resilience::ResState>,
    gates: admission::Gates,
    metrics: crate::metrics::Metrics,
    faults: operator::faults::Faults,
    holds: quota::reset_holds::Holds,
    /// The stable keys of every provider and connection name seen since start.
    registry: Mutex<crate::config::keys::Registry>,
    leases: Mutex<crate::policy::lease::Leases>,
}

/// Marks one client request as in flight until dropped.
pub struct RequestGuard {
    core: Core,
    /// Sequence number since start.
    pub id: u64,
    /// When it started (monotonic).
    pub started: Instant,
    /// When it started, Unix ms.
    pub started_unix_ms: u64,
}

impl Drop for RequestGuard {
    fn drop(&mut self) {
        self.core.inner.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.core.mark_dirty();
    }
}

/// Marks one upstream attempt as in flight on its provider and connection until dropped.
pub struct AttemptGuard {
    core: Core,
    key: ConnKey,
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        let mut s = self.core.stats();
        // A provider or connection removed by a reload while the attempt ran took its
        // counters with it.
        if let Some(ps) = s.providers.get_mut(self.key.provider) {
            ps.in_flight = ps.in_flight.saturating_sub(1);
            if let Some(cs) = ps.connections.get_mut(self.key.slot) {
                cs.in_flight = cs.in_flight.saturating_sub(1);
            }
        }
        drop(s);
        self.core.mark_dirty();
    }
}

impl Core {
    /// Creates the core for `config`; `store` receives write-behind rows when present.
    pub fn new(config: Arc<Config>, clock: Arc<dyn Clock>, store: Option<Arc<Store>>) -> Self {
        let mut config = Arc::unwrap_or_clone(config);
        let mut registry = crate::config::keys::Registry::default();
        registry.stamp(&mut config);
        let config = Arc::new(config);
        let stats = Stats::new(ProviderStats::for_config(&config), clock.now());
        let (tx, _rx) = watch::channel(Arc::new(Snapshot::default()));
        let mut res = resilience::ResState::new(&config);
        let gates = admission::Gates::new(&config, clock.clone());
        let mut lease_table = crate::policy::lease::Leases::default();
        if let Some(st) = &store {
            match st.load_state() {
                Ok(rows) => {
                    let tm = resilience::persist::TimeMap::new(clock.now(), unix_ms(clock.wall()));
                    operator::control::apply_saved_settings(&mut res, &config, &rows.settings);
                    resilience::persist::restore(&mut res, &config, &rows, &tm);
                    lease_table =
                        requests::leases::restore(&rows.leases, &config, &tm, clock.now());
                    quota::headroom::restore(&mut res, &config, &rows.settings, tm.wall_ms());
                    quota::lane::restore(&mut res, &config, &rows.settings, tm.wall_ms());
                    quota::limit_reset::restore(&mut res, &config, &rows.settings, tm.wall_ms());
                    for w in
                        resilience::credentials::reconcile(&mut res, &config, &rows.settings, &tm)
                    {
                        st.write(w);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not read saved resilience state; starting clean")
                }
            }
        }
        let core = Core {
            inner: Arc::new(Inner {
                started_wall: clock.wall(),
                clock,
                config: std::sync::RwLock::new(config),
                addrs: Mutex::new((String::new(), String::new())),
                stats: Mutex::new(stats),
                in_flight: AtomicU64::new(0),
                next_id: AtomicU64::new(1),
                version: AtomicU64::new(0),
                draining: AtomicBool::new(false),
                dirty: Notify::new(),
                tx,
                store,
                res: Mutex::new(res),
                gates,
                metrics: crate::metrics::Metrics::new(),
                faults: operator::faults::Faults::default(),
                holds: quota::reset_holds::Holds::default(),
                registry: Mutex::new(registry),
                leases: Mutex::new(lease_table),
            }),
        };
        core.publish();
        core
    }

    pub(crate) fn res(&self) -> MutexGuard<'_, resilience::ResState> {
        self.inner.res.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Prometheus metric families (`GET /metrics`).
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.inner.metrics
    }

    /// The admission gates (§4 caps, §5 queue).
    pub fn gates(&self) -> &admission::Gates {
        &self.inner.gates
    }

    /// Asks the publisher for a fresh snapshot soon; a no-op while nobody subscribes (the
    /// admin API builds its snapshots on demand).
    pub fn mark_dirty(&self) {
        if self.inner.tx.receiver_count() > 0 {
            self.inner.dirty.notify_one();
        }
    }

    fn stats(&self) -> MutexGuard<'_, Stats> {
        self.inner.stats.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The positions in the config served now of the connection keyed `key`, `hint` being
    /// its positions in the config it came from (right unless a reload moved it); `None`
    /// when a reload removed it. Call it while holding the lock of the state it goes into
    /// (a reload swaps the config under those locks).
    pub(crate) fn position(&self, key: ConnKey, hint: (usize, usize)) -> Option<(usize, usize)> {
        self.config().keys.find(key, hint)
    }

    /// The configuration this core serves now (a reload swaps it; a caller keeps the one
    /// it got for as long as it holds the `Arc`).
    pub fn config(&self) -> Arc<Config> {
        self.inner
            .config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The injected clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Records the bound listener addresses shown in the snapshot.
    pub fn set_addrs(&self, listen: String, admin: String) {
        *self.inner.addrs.lock().unwrap_or_else(|e| e.into_inner()) = (listen, admin);
        self.publish();
    }

    /// Marks sluice as draining (`/readyz` → 503).
    pub fn set_draining(&self) {
        self.inner.draining.store(true, Ordering::Relaxed);
        self.publish();
    }

    /// True once shutdown started.
    pub fn is_draining(&self) -> bool {
        self.inner.draining.load(Ordering::Relaxed)
    }

    /// Requests in flight now.
    pub fn in_flight(&self) -> u64 {
        self.inner.in_flight.load(Ordering::Relaxed)
    }

    /// A new receiver of published snapshots, starting from a fresh one. Snapshots are only
    /// published while at least one receiver is alive.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Snapshot>> {
        self.publish();
        self.inner.tx.subscribe()
    }

    /// Starts counting a client request.
    pub fn begin_request(&self) -> RequestGuard {
        self.inner.in_flight.fetch_add(1, Ordering::Relaxed);
        self.mark_dirty();
        RequestGuard {
            core: self.clone(),
            id: self.inner.next_id.fetch_add(1, Ordering::Relaxed),
            started: self.inner.clock.now(),
            started_unix_ms: unix_ms(self.inner.clock.wall()),
        }
    }

    /// Starts counting an upstream attempt on `cand`'s provider and connection.
    pub fn begin_attempt(&self, cand: &crate::policy::select::Candidate) -> AttemptGuard {
        let mut s = self.stats();
        if let Some(ps) = s.providers.get_mut(cand.key.provider) {
            ps.attempts += 1;
            ps.in_flight += 1;
            if let Some(cs) = ps.connections.get_mut(cand.key.slot) {
                cs.attempts += 1;
                cs.in_flight += 1;
            }
        }
        drop(s);
        self.mark_dirty();
        AttemptGuard {
            core: self.clone(),
            key: cand.key,
        }
    }

    /// In-flight and total attempts per connection, for the strategies.
    pub(crate) fn connection_load(&self) -> (ConnLoad, ConnLoad) {
        let s = self.stats();
        let mut inf = ConnLoad::default();
        let mut att = ConnLoad::default();
        for (provider, p) in s.providers.iter() {
            for (slot, c) in p.connections.iter() {
                let key = ConnKey { provider, slot };
                inf.insert(key, c.in_flight);
                att.insert(key, c.attempts);
            }
        }
        (inf, att)
    }

    /// Records how an attempt's response head came back: `status` (None = transport error)
    /// after `latency`. A failure is a transport error or a status >= 500.
    pub fn attempt_result(
        &self,
        cand: &crate::policy::select::Candidate,
        status: Option<u16>,
        latency: Duration,
    ) {
        let failed = status.is_none_or(|s| s >= 500);
        let mut s = self.stats();
        let cfg = self.config();
        if let Some((pi, ci)) = cand.positions_in(&cfg)
            && let Some(pv) = cfg.providers.get(pi)
            && let Some(cv) = pv.connections.get(ci)
        {
            self.inner.metrics.observe_attempt(&pv.id, &cv.id, failed);
        }
        if let Some(ps) = s.providers.get_mut(cand.key.provider) {
            ps.last_status = status.unwrap_or(0);
            ps.last_latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
            if failed {
                ps.failures += 1;
                if let Some(cs) = ps.connections.get_mut(cand.key.slot) {
                    cs.failures += 1;
                }
            }
        }
        drop(s);
        self.mark_dirty();
    }

    /// Records a finished request: counters, the recent list, the last-minute window and a
    /// write-behind `request_log` row. `view.id` and `view.at_unix_ms` come from the guard.
    pub fn finish_request(&self, guard: &RequestGuard, mut view: RequestView) {
        let now = self.inner.clock.now();
        view.id = guard.id;
        view.at_unix_ms = guard.started_unix_ms;
        view.latency_ms = u64::try_from(now.saturating_duration_since(guard.started).as_millis())
            .unwrap_or(u64::MAX);
        self.inner
            .metrics
            .observe_request(&view.route, view.outcome.as_str(), view.latency_ms);
        if let Some(store) = &self.inner.store {
            store.record_request(RequestLogRow {
                at_unix_ms: view.at_unix_ms,
                route: view.route.clone(),
                client_model: view.client_model.clone(),
                target: view.target.clone(),
                status: view.status,
                latency_ms: view.latency_ms,
                attempts: view.attempts,
                bytes: view.bytes,
                outcome: view.outcome.as_str().into(),
                translated: view
                    .attempt_log
                    .last()
                    .map(|a| a.translated.clone())
                    .unwrap_or_default(),
                tokens_in: view.tokens_in,
                tokens_out: view.tokens_out,
                injected: view.injected,
                continued: view.continued,
            });
        }
        self.stats().record_finish(now, view);
        self.mark_dirty();
    }

    /// Builds a snapshot of the current state at the clock's `now`.
    pub fn snapshot(&self) -> Snapshot {
        let now = self.inner.clock.now();
        let wall = self.inner.clock.wall();
        let (listen, admin_listen) = self
            .inner
            .addrs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        // Under the stats lock: O(buckets) window read, counter copies and Arc clones only.
        // The config is read under it too, so the counters follow its keys; a reload
        // between this and the resilience views (rare) builds both again.
        let (cfg, last_minute, totals, recent_shared, provider_stats, live) = loop {
            let mut s = self.stats();
            let cfg = self.config();
            let last_minute = s.window.view(now);
            let totals = Totals {
                in_flight: self.in_flight(),
                ..s.totals.clone()
            };
            let recent_shared: Vec<Arc<RequestView>> = s.recent.iter().cloned().collect();
            let provider_stats = s.providers.clone();
            drop(s);
            if let Some(live) = self.resilience_views(&cfg, now) {
                break (
                    cfg,
                    last_minute,
                    totals,
                    recent_shared,
                    provider_stats,
                    live,
                );
            }
        };
        let recent: Vec<RequestView> = recent_shared.iter().map(|v| (**v).clone()).collect();
        let mut providers = provider_views(&cfg, &provider_stats, live.providers);
        self.fill_lease_views(&cfg, &mut providers, now, &self.time_map());
        Snapshot {
            version: self.inner.version.fetch_add(1, Ordering::Relaxed) + 1,
            taken_at_unix_ms: unix_ms(wall),
            started_at_unix_ms: unix_ms(self.inner.started_wall),
            listen,
            admin_listen,
            config_path: cfg.file.display().to_string(),
            draining: self.is_draining(),
            totals,
            last_minute,
            recent,
            providers,
            combos: cfg
                .combos
                .iter()
                .map(|c| ComboView {
                    name: c.name.clone(),
                    strategy: c.strategy.into(),
                    targets: c.targets.iter().map(ToString::to_string).collect(),
                })
                .collect(),
            lockouts: live.lockouts,
            queues: self.inner.gates.views(),
            store: self.store_view(),
            faults: self.fault_views(),
            held: self.held(),
        }
    }

    /// Builds and publishes a snapshot now.
    pub fn publish(&self) {
        let snap = Arc::new(self.snapshot());
        self.inner.tx.send_replace(snap);
    }

    /// Runs the publisher until `shutdown`: waits for a change (or 1 s, so the last-minute
    /// window ages), then for [`publish_spacing`] of the last build, then publishes. Builds
    /// nothing while no receiver is subscribed (see [`Core::subscribe`]); on shutdown it
    /// publishes once more at once.
    pub async fn run_publisher(self, shutdown: CancellationToken) {
        let mut spacing = PUBLISH_SPACING;
        loop {
            tokio::select! {
                () = self.inner.dirty.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                () = shutdown.cancelled() => { self.publish_if_watched(); return; }
            }
            tokio::select! {
                () = tokio::time::sleep(spacing) => {}
                () = shutdown.cancelled() => { self.publish_if_watched(); return; }
            }
            spacing = self.publish_off_worker().await;
        }
    }

    /// Publishes (when watched) on a blocking-pool thread in the background scheduling
    /// class, so building a large snapshot never holds a runtime worker that requests need;
    /// returns the spacing its build time calls for.
    async fn publish_off_worker(&self) -> Duration {
        let core = self.clone();
        let built = crate::support::sched::spawn_background(move || {
            let start = core.inner.clock.now();
            core.publish_if_watched();
            core.inner.clock.now().saturating_duration_since(start)
        })
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "building a snapshot failed");
            Duration::ZERO
        });
        publish_spacing(built)
    }

    fn publish_if_watched(&self) {
        if self.inner.tx.receiver_count() > 0 {
            self.publish();
        }
    }

    /// The store, when one is attached.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.inner.store.as_ref()
    }
}

/// The provider views of `cfg`: its config, the counters `stats` (by key) and the
/// resilience views `live` (in config order).
fn provider_views(
    cfg: &Config,
    stats: &crate::config::keys::Keyed<crate::config::keys::ProviderKey, ProviderStats>,
    live: Vec<resilience::ProviderLive>,
) -> Vec<ProviderView> {
    cfg.providers
        .iter()
        .enumerate()
        .zip(live)
        .map(|((i, p), live)| {
            let fresh = ProviderStats::default();
            let ps = stats.get(cfg.keys.provider(i)).unwrap_or(&fresh);
            ProviderView {
                ramp_percent: live.ramp_percent,
                id: p.id.clone(),
                dialect: p.dialect.into(),
                base_url: p.base_url.to_string().trim_end_matches('/').to_string(),
                profile: p.profile.into(),
                attempts: ps.attempts,
                failures: ps.failures,
                in_flight: ps.in_flight,
                last_status: ps.last_status,
                last_latency_ms: ps.last_latency_ms,
                breaker: live.breaker,
                provider_cooldown_until_unix_ms: live.window_until,
                connections: p
                    .connections
                    .iter()
                    .zip(cfg.keys.connections_of(i))
                    .zip(live.connections)
                    .map(|((c, key), cv)| {
                        let cs = ps.connections.get(key.slot).cloned().unwrap_or_default();
                        ConnectionView {
                            id: c.id.clone(),
                            auth: c.auth.describe(),
                            attempts: cs.attempts,
                            failures: cs.failures,
                            in_flight: cs.in_flight,
                            ..cv
                        }
                    })
                    .collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod breaker_model;
#[cfg(test)]
mod leases_tests;
#[cfg(test)]
mod reload_tests;
#[cfg(test)]
mod slow_start_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
