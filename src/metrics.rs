//! `Metrics`: the Prometheus exposition of `GET /metrics` on the admin listener, built on the
//! `prometheus-client` crate with one registry per running sluice (no global recorder, so
//! several instances can run in one process, as the tests do).
//!
//! Events (finished requests, upstream attempts) update counters and the latency histogram as
//! they happen; state gauges (breakers, excluded connections, queues, lockouts, in-flight) are
//! set from a fresh snapshot at scrape time. Labels are provider, connection and model ids and
//! outcome words only — no request ids, no keys.

use crate::support::fast_map::FastMap;
use std::sync::RwLock;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::snapshot::{BreakerState, ConnectionStatus, Snapshot};

type Labels = Vec<(String, String)>;

/// Counter handles by two label values (route → outcome, provider → connection), so the
/// per-request path looks a counter up by `&str` without building a label set; a miss (the
/// first request of a pair) registers it once in its family.
type CounterCache<V> = RwLock<FastMap<String, FastMap<String, V>>>;

/// The metric families of one sluice.
pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    duration: Histogram,
    attempts: Family<Labels, Counter>,
    failures: Family<Labels, Counter>,
    in_flight: Gauge,
    breaker: Family<Labels, Gauge>,
    excluded: Family<Labels, Gauge>,
    traffic_share: Family<Labels, Gauge>,
    queue_in_flight: Family<Labels, Gauge>,
    queue_depth: Family<Labels, Gauge>,
    lockouts: Gauge,
    store_dropped: Family<Labels, Gauge>,
    headroom_remaining: Family<Labels, Gauge<f64, AtomicU64>>,
    headroom_reset: Family<Labels, Gauge<f64, AtomicU64>>,
    uptime: Gauge<f64, AtomicU64>,
    injected: Family<Labels, Counter>,
    /// One counter per [`BodyRewrite`], in [`BodyRewrite::ALL`] order, made at start so the
    /// request path increments without a label lookup.
    body_rewrites: [Counter; 2],
    request_counters: CounterCache<Counter>,
    attempt_counters: CounterCache<(Counter, Counter)>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

impl Metrics {
    /// Registers every family under the `sluice_` prefix.
    // long-table: one registration (name, help, family) per metric family, in exposition order
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sluice");
        let requests = Family::<Labels, Counter>::default();
        registry.register(
            "requests",
            "Finished client requests by route and outcome",
            requests.clone(),
        );
        // 1 ms … ~65 s in powers of two: latency through an LLM proxy spans both.
        let duration = Histogram::new(exponential_buckets(0.001, 2.0, 17));
        registry.register(
            "request_duration_seconds",
            "Client request latency, head to last byte",
            duration.clone(),
        );
        let attempts = Family::<Labels, Counter>::default();
        registry.register(
            "upstream_attempts",
            "Upstream attempts per provider and connection",
            attempts.clone(),
        );
        let failures = Family::<Labels, Counter>::default();
        registry.register(
            "upstream_failures",
            "Failed upstream attempts (transport or 5xx head)",
            failures.clone(),
        );
        let in_flight = Gauge::default();
        registry.register(
            "in_flight_requests",
            "Client requests being served",
            in_flight.clone(),
        );
        let breaker = Family::<Labels, Gauge>::default();
        registry.register(
            "breaker_state",
            "Provider breaker: 0 closed, 1 degraded, 2 half_open, 3 open",
            breaker.clone(),
        );
        let excluded = Family::<Labels, Gauge>::default();
        registry.register(
            "connection_excluded",
            "1 while a connection is cooling, in quota wait or terminal",
            excluded.clone(),
        );
        let traffic_share = Family::<Labels, Gauge>::default();
        registry.register(
            "traffic_share_percent",
            "Share of traffic a connection is admitted for: 100, or 10-99 while its provider or it ramps up after recovery (slow start)",
            traffic_share.clone(),
        );
        let queue_in_flight = Family::<Labels, Gauge>::default();
        registry.register(
            "queue_in_flight",
            "Requests holding a permit of a capped gate",
            queue_in_flight.clone(),
        );
        let queue_depth = Family::<Labels, Gauge>::default();
        registry.register(
            "queue_depth",
            "Requests waiting in the admission queue of a gate",
            queue_depth.clone(),
        );
        let lockouts = Gauge::default();
        registry.register("model_lockouts", "Active model lockouts", lockouts.clone());
        let store_dropped = Family::<Labels, Gauge>::default();
        registry.register(
            "store_dropped_writes",
            "Store writes dropped since start because the write-behind queue was full (kind = request_log | state)",
            store_dropped.clone(),
        );
        let headroom_remaining = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "headroom_remaining_ratio",
            "Remaining fraction (0-1) of a connection's quota window, from upstream rate-limit headers (model empty for account-wide windows)",
            headroom_remaining.clone(),
        );
        let headroom_reset = Family::<Labels, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "headroom_reset_seconds",
            "Seconds until a connection's quota window resets",
            headroom_reset.clone(),
        );
        let uptime = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "uptime_seconds",
            "Seconds since sluice started",
            uptime.clone(),
        );
        let injected = Family::<Labels, Counter>::default();
        registry.register(
            "injected_faults",
            "Upstream attempts answered (or delayed) by an operator-injected fault, by provider, connection and kind",
            injected.clone(),
        );
        let body_rewrites = Family::<Labels, Counter>::default();
        registry.register(
            "body_rewrites",
            "Request bodies rewritten for an upstream: kind = translate (into the upstream's dialect) | rewrite (model set or unsigned thinking stripped)",
            body_rewrites.clone(),
        );
        // Made (and so listed at 0) from the start: a scrape tells "none yet" from "not
        // counted", and the request path never looks a label set up.
        let body_rewrites = BodyRewrite::ALL.map(|kind| {
            body_rewrites
                .get_or_create(&labels(&[("kind", kind.as_str())]))
                .clone()
        });
        Self {
            registry,
            requests,
            duration,
            attempts,
            failures,
            in_flight,
            breaker,
            excluded,
            traffic_share,
            queue_in_flight,
            queue_depth,
            lockouts,
            store_dropped,
            headroom_remaining,
            headroom_reset,
            uptime,
            injected,
            body_rewrites,
            request_counters: RwLock::default(),
            attempt_counters: RwLock::default(),
        }
    }

    /// Counts a finished request (`route` path, `outcome` word) that took `latency_ms`.
    pub fn observe_request(&self, route: &str, outcome: &str, latency_ms: u64) {
        cached(&self.request_counters, route, outcome, || {
            self.requests
                .get_or_create(&labels(&[("route", route), ("outcome", outcome)]))
                .clone()
        })
        .inc();
        self.duration.observe(latency_ms as f64 / 1000.0);
    }

    /// Counts an upstream attempt and, when `failed`, its failure.
    pub fn observe_attempt(&self, provider: &str, connection: &str, failed: bool) {
        let (attempts, failures) = cached(&self.attempt_counters, provider, connection, || {
            let l = labels(&[("provider", provider), ("connection", connection)]);
            (
                self.attempts.get_or_create(&l).clone(),
                self.failures.get_or_create(&l).clone(),
            )
        });
        attempts.inc();
        if failed {
            failures.inc();
        }
    }

    /// Counts an attempt that met an injected fault of `kind` (`503`, `reset`, `latency`, …).
    pub fn observe_injected(&self, provider: &str, connection: &str, kind: &str) {
        self.injected
            .get_or_create(&labels(&[
                ("provider", provider),
                ("connection", connection),
                ("kind", kind),
            ]))
            .inc();
    }

    /// Counts one request body rewritten or translated for an upstream.
    pub fn observe_body_rewrite(&self, kind: BodyRewrite) {
        self.body_rewrites[kind as usize].inc();
    }

    /// Sets the state gauges from `snap` and renders the text exposition.
    pub fn render(&self, snap: &Snapshot) -> String {
        self.in_flight
            .set(i64::try_from(snap.totals.in_flight).unwrap_or(i64::MAX));
        self.uptime.set(
            snap.taken_at_unix_ms
                .saturating_sub(snap.started_at_unix_ms) as f64
                / 1000.0,
        );
        self.lockouts
            .set(i64::try_from(snap.lockouts.len()).unwrap_or(i64::MAX));
        for p in &snap.providers {
            let v = match p.breaker.state {
                BreakerState::Degraded => 1,
                BreakerState::HalfOpen => 2,
                BreakerState::Open => 3,
                BreakerState::Closed => 0,
            };
            self.breaker
                .get_or_create(&labels(&[("provider", &p.id)]))
                .set(v);
            for c in &p.connections {
                let out = i64::from(c.status != ConnectionStatus::Active);
                let l = labels(&[("provider", &p.id), ("connection", &c.id)]);
                self.excluded.get_or_create(&l).set(out);
                self.traffic_share
                    .get_or_create(&l)
                    .set(i64::from(effective_ramp(p.ramp_percent, c.ramp_percent)));
            }
        }
        self.set_headroom(snap);
        for (kind, n) in [
            ("request_log", snap.store.dropped_request_rows),
            ("state", snap.store.dropped_state_writes),
        ] {
            self.store_dropped
                .get_or_create(&labels(&[("kind", kind)]))
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        for q in &snap.queues {
            let model = q.model.clone().unwrap_or_default();
            let l = labels(&[
                ("provider", &q.provider),
                ("connection", &q.connection),
                ("model", &model),
            ]);
            self.queue_in_flight
                .get_or_create(&l)
                .set(i64::from(q.in_flight));
            self.queue_depth
                .get_or_create(&l)
                .set(i64::try_from(q.queued).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

/// What was done to a request body before sending it upstream
/// (`sluice_body_rewrites_total{kind}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyRewrite {
    /// Translated into the upstream's dialect.
    Translate = 0,
    /// Kept in the client's dialect, but changed: the model set to the target's, or unsigned
    /// thinking blocks stripped.
    Rewrite = 1,
}

impl BodyRewrite {
    /// Every kind, in discriminant order (the index of its counter).
    pub const ALL: [BodyRewrite; 2] = [BodyRewrite::Translate, BodyRewrite::Rewrite];

    /// The `kind` label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Translate => "translate",
            Self::Rewrite => "rewrite",
        }
    }
}

/// The handle cached under (`a`, `b`), made by `make` (and kept) on the first call for the pair.
/// A poisoned lock is used as is: the map only ever holds complete entries.
fn cached<V: Clone>(cache: &CounterCache<V>, a: &str, b: &str, make: impl FnOnce() -> V) -> V {
    let hit = cache
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(a)
        .and_then(|m| m.get(b))
        .cloned();
    if let Some(v) = hit {
        return v;
    }
    let mut map = cache.write().unwrap_or_else(|e| e.into_inner());
    map.entry(a.to_string())
        .or_default()
        .entry(b.to_string())
        .or_insert_with(make)
        .clone()
}

/// The share a connection gets now, in percent: the lower of its provider's and its own
/// slow-start ramp (`None` = not ramping), 100 when neither ramps.
pub fn effective_ramp(provider: Option<u8>, connection: Option<u8>) -> u8 {
    provider.unwrap_or(100).min(connection.unwrap_or(100))
}

impl Metrics {
    /// Sets the headroom gauges from `snap`, dropping series of windows no longer live.
    fn set_headroom(&self, snap: &Snapshot) {
        self.headroom_remaining.clear();
        self.headroom_reset.clear();
        for p in &snap.providers {
            for c in &p.connections {
                for h in &c.headroom {
                    let model = h.model.clone().unwrap_or_default();
                    let l = labels(&[
                        ("provider", &p.id),
                        ("connection", &c.id),
                        ("window", h.window.as_str()),
                        ("model", &model),
                    ]);
                    if let Some(r) = h.remaining {
                        self.headroom_remaining.get_or_create(&l).set(r);
                    }
                    if let Some(at) = h.reset_at_unix_ms {
                        let secs = at.saturating_sub(snap.taken_at_unix_ms) as f64 / 1000.0;
                        self.headroom_reset.get_or_create(&l).set(secs);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{BreakerView, ConnectionView, ProviderView, Totals};

    #[test]
    fn cached_counters_keep_each_label_pair_apart() {
        let m = Metrics::new();
        m.observe_request("/v1/messages", "ok", 1);
        m.observe_request("/v1/messages", "error", 1);
        m.observe_request("/v1/messages", "ok", 1);
        m.observe_request("/v1/chat/completions", "ok", 1);
        m.observe_attempt("p", "a", true);
        m.observe_attempt("p", "b", false);
        let text = m.render(&Snapshot::default());
        for line in [
            "sluice_requests_total{route=\"/v1/messages\",outcome=\"ok\"} 2",
            "sluice_requests_total{route=\"/v1/messages\",outcome=\"error\"} 1",
            "sluice_requests_total{route=\"/v1/chat/completions\",outcome=\"ok\"} 1",
            "sluice_upstream_failures_total{provider=\"p\",connection=\"a\"} 1",
            "sluice_upstream_failures_total{provider=\"p\",connection=\"b\"} 0",
            "sluice_upstream_attempts_total{provider=\"p\",connection=\"b\"} 1",
        ] {
            assert!(text.contains(line), "missing {line} in {text}");
        }
    }

    #[test]
    fn renders_counters_histogram_and_state_gauges() {
        let m = Metrics::new();
        m.observe_request("/v1/messages", "ok", 120);
        m.observe_request("/v1/messages", "ok", 80);
        m.observe_attempt("anthropic", "mine", false);
        m.observe_attempt("anthropic", "mine", true);
        let snap = Snapshot {
            started_at_unix_ms: 1_000,
            taken_at_unix_ms: 3_500,
            totals: Totals {
                in_flight: 2,
                ..Default::default()
            },
            providers: vec![ProviderView {
                id: "anthropic".into(),
                breaker: BreakerView {
                    state: crate::snapshot::BreakerState::Open,
                    ..Default::default()
                },
                ramp_percent: Some(40),
                connections: vec![
                    ConnectionView {
                        id: "mine".into(),
                        status: crate::snapshot::ConnectionStatus::Cooling,
                        ..Default::default()
                    },
                    ConnectionView {
                        id: "other".into(),
                        ramp_percent: Some(20),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }],
            store: crate::snapshot::StoreView {
                dropped_request_rows: 5,
                dropped_state_writes: 3,
            },
            ..Default::default()
        };
        let text = m.render(&snap);
        assert!(
            text.contains("sluice_store_dropped_writes{kind=\"request_log\"} 5")
                && text.contains("sluice_store_dropped_writes{kind=\"state\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("sluice_requests_total{route=\"/v1/messages\",outcome=\"ok\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("sluice_request_duration_seconds_count 2"),
            "{text}"
        );
        assert!(text.contains(
            "sluice_upstream_attempts_total{provider=\"anthropic\",connection=\"mine\"} 2"
        ));
        assert!(text.contains(
            "sluice_upstream_failures_total{provider=\"anthropic\",connection=\"mine\"} 1"
        ));
        assert!(text.contains("sluice_breaker_state{provider=\"anthropic\"} 3"));
        assert!(
            text.contains(
                "sluice_connection_excluded{provider=\"anthropic\",connection=\"mine\"} 1"
            )
        );
        assert!(text.contains("sluice_in_flight_requests 2"));
        assert!(text.contains("sluice_uptime_seconds 2.5"));
        assert!(
            text.contains(
                "sluice_traffic_share_percent{provider=\"anthropic\",connection=\"mine\"} 40"
            ) && text.contains(
                "sluice_traffic_share_percent{provider=\"anthropic\",connection=\"other\"} 20"
            ),
            "the lower of the provider's and the connection's ramp: {text}"
        );
    }

    #[test]
    fn headroom_gauges_follow_the_snapshot_rows() {
        use crate::snapshot::HeadroomRowView;
        let m = Metrics::new();
        let mut snap = Snapshot {
            taken_at_unix_ms: 10_000,
            providers: vec![ProviderView {
                id: "anthropic".into(),
                connections: vec![ConnectionView {
                    id: "mine".into(),
                    headroom: vec![HeadroomRowView {
                        window: crate::policy::headroom::Window::FiveHour.into(),
                        remaining: Some(0.25),
                        reset_at_unix_ms: Some(70_000),
                        binding: true,
                        ..Default::default()
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = m.render(&snap);
        let labels = "{provider=\"anthropic\",connection=\"mine\",window=\"five_hour\",model=\"\"}";
        assert!(
            text.contains(&format!("sluice_headroom_remaining_ratio{labels} 0.25")),
            "{text}"
        );
        assert!(
            text.contains(&format!("sluice_headroom_reset_seconds{labels} 60.0")),
            "{text}"
        );
        snap.providers[0].connections[0].headroom.clear();
        let text = m.render(&snap);
        assert!(!text.contains("sluice_headroom_remaining_ratio{"), "{text}");
    }
}
