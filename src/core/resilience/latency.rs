//! Live latency windows for `p2c` (`[resilience] p2c_latency_weight`): one
//! [`Rolling`](crate::policy::latency::Rolling) window of time-to-first-byte and outcome per
//! connection and per connection + model, fed from every attempt's response head (or its
//! absence) through [`Core::observe_latency`], read by the routing order.

use crate::support::fast_map::FastMap;
use std::time::Duration;

use crate::clock::Instant;
use crate::config::keys::ConnKey;
use crate::core::Core;
use crate::policy::latency::{Rolling, Summary};

/// At most this many connection + model windows are kept (1024); when they are all taken,
/// the [`EVICT_BATCH`] whose newest samples are oldest are dropped, so a client cycling model
/// names cannot grow the state.
pub const MAX_MODEL_WINDOWS: usize = 1024;

/// How many windows one eviction drops (a quarter of [`MAX_MODEL_WINDOWS`]): the scan that
/// finds them visits every window, so it runs once per this many new windows instead of on
/// every request once more models than the bound are in use.
pub const EVICT_BATCH: usize = MAX_MODEL_WINDOWS / 4;

/// The windows, keyed by connection and, within a connection, by the
/// upstream model (looked up by `&str`: recording an attempt allocates nothing once its
/// windows exist).
#[derive(Debug, Default)]
pub(crate) struct LatencyStats {
    connections: FastMap<ConnKey, Rolling>,
    models: FastMap<ConnKey, FastMap<String, Rolling>>,
    /// Connection + model windows held, across every connection (at most
    /// [`MAX_MODEL_WINDOWS`]).
    model_windows: usize,
}

impl LatencyStats {
    /// Keeps the windows of the connections `keep` holds; the others go.
    pub(crate) fn retain(&mut self, keep: impl Fn(ConnKey) -> bool) {
        self.connections.retain(|k, _| keep(*k));
        self.models.retain(|k, _| keep(*k));
        self.model_windows = self.models.values().map(FastMap::len).sum();
    }

    /// Records one attempt on connection `key` for `model` at `at`.
    pub(crate) fn record(
        &mut self,
        key: ConnKey,
        model: &str,
        at: Instant,
        ttfb: Duration,
        ok: bool,
    ) {
        self.connections
            .entry(key)
            .or_default()
            .record(at, ttfb, ok);
        if let Some(w) = self.models.get_mut(&key).and_then(|m| m.get_mut(model)) {
            w.record(at, ttfb, ok);
            return;
        }
        if self.model_windows >= MAX_MODEL_WINDOWS {
            self.drop_oldest_model_windows(EVICT_BATCH);
        }
        let mut w = Rolling::default();
        w.record(at, ttfb, ok);
        self.models
            .entry(key)
            .or_default()
            .insert(model.to_owned(), w);
        self.model_windows += 1;
    }

    /// Drops the `n` connection + model windows whose newest samples are oldest.
    fn drop_oldest_model_windows(&mut self, n: usize) {
        let mut by_age: Vec<(Option<Instant>, ConnKey, &str)> = self
            .models
            .iter()
            .flat_map(|(pc, m)| {
                m.iter()
                    .map(move |(model, r)| (r.newest(), *pc, model.as_str()))
            })
            .collect();
        let n = n.min(by_age.len());
        if n == 0 {
            return;
        }
        if n < by_age.len() {
            by_age.select_nth_unstable_by_key(n - 1, |(newest, _, _)| *newest);
        }
        let victims: Vec<(ConnKey, String)> = by_age[..n]
            .iter()
            .map(|(_, pc, model)| (*pc, (*model).to_owned()))
            .collect();
        for (pc, model) in victims {
            if let Some(m) = self.models.get_mut(&pc) {
                if m.remove(&model).is_some() {
                    self.model_windows -= 1;
                }
                if m.is_empty() {
                    self.models.remove(&pc);
                }
            }
        }
    }

    /// The summary `p2c` weighs for connection `key` and `model` at `now`: the connection +
    /// model window when it has enough samples, else the connection's.
    pub(crate) fn health(&self, key: ConnKey, model: &str, now: Instant) -> Option<Summary> {
        self.models
            .get(&key)
            .and_then(|m| m.get(model))
            .and_then(|r| r.summary(now))
            .or_else(|| self.connections.get(&key).and_then(|r| r.summary(now)))
    }
}

impl Core {
    /// Records one attempt's time to its response head (`ttfb`) and whether the head was a
    /// success (`ok`: a status under 500; a transport failure or a 5xx is not) for
    /// `cand`'s connection and model, at the injected clock's now.
    pub fn observe_latency(
        &self,
        cand: &crate::policy::select::Candidate,
        ttfb: Duration,
        ok: bool,
    ) {
        let now = self.clock().now();
        let mut r = self.res();
        r.routing
            .latency
            .record(cand.key, &cand.model, now, ttfb, ok);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    #[test]
    fn model_windows_fall_back_to_the_connection_and_are_bounded() {
        let clock = ManualClock::new();
        let now = clock.now();
        let mut s = LatencyStats::default();
        for m in ["a", "b", "c"] {
            s.record(ConnKey::new(0, 0), m, now, Duration::from_millis(100), true);
        }
        let h = s
            .health(ConnKey::new(0, 0), "a", now)
            .expect("one sample for model a: the connection's three stand in");
        assert_eq!((h.samples, h.mean_ttfb_ms), (3, 100));
        assert_eq!(s.health(ConnKey::new(0, 0), "z", now), Some(h));
        for _ in 0..3 {
            s.record(
                ConnKey::new(0, 0),
                "a",
                now,
                Duration::from_millis(400),
                false,
            );
        }
        let h = s.health(ConnKey::new(0, 0), "a", now).unwrap();
        assert_eq!((h.samples, h.errors, h.mean_ttfb_ms), (4, 3, 325));
        assert_eq!(s.health(ConnKey::new(1, 0), "a", now), None);
        for i in 0..MAX_MODEL_WINDOWS + 10 {
            s.record(
                ConnKey::new(0, 1),
                &format!("m{i}"),
                now,
                Duration::from_millis(1),
                true,
            );
        }
        let held: usize = s.models.values().map(FastMap::len).sum();
        assert!(held <= MAX_MODEL_WINDOWS);
        assert_eq!(held, s.model_windows);
        let newest = format!("m{}", MAX_MODEL_WINDOWS + 9);
        assert!(
            s.models[&ConnKey::new(0, 1)].contains_key(&newest),
            "the newest window is kept"
        );
    }

    #[test]
    fn a_full_set_drops_its_oldest_quarter_at_once() {
        let clock = ManualClock::new();
        let mut s = LatencyStats::default();
        for i in 0..MAX_MODEL_WINDOWS {
            clock.advance(Duration::from_millis(1));
            s.record(
                ConnKey::new(0, 0),
                &format!("m{i}"),
                clock.now(),
                Duration::from_millis(1),
                true,
            );
        }
        // Touch the oldest window so it is no longer among the oldest.
        clock.advance(Duration::from_millis(1));
        s.record(
            ConnKey::new(0, 0),
            "m0",
            clock.now(),
            Duration::from_millis(1),
            true,
        );
        assert_eq!(s.model_windows, MAX_MODEL_WINDOWS);
        clock.advance(Duration::from_millis(1));
        s.record(
            ConnKey::new(0, 0),
            "new",
            clock.now(),
            Duration::from_millis(1),
            true,
        );
        assert_eq!(s.model_windows, MAX_MODEL_WINDOWS - EVICT_BATCH + 1);
        let m = &s.models[&ConnKey::new(0, 0)];
        assert!(m.contains_key("m0") && m.contains_key("new"));
        assert!(!m.contains_key("m1") && !m.contains_key(&format!("m{EVICT_BATCH}")));
        assert!(m.contains_key(&format!("m{}", EVICT_BATCH + 1)));
    }
}
