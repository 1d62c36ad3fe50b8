//! Live latency windows for `p2c` (`[resilience] p2c_latency_weight`): one
//! [`Rolling`](crate::policy::latency::Rolling) window of time-to-first-byte and outcome per
//! connection and per connection + model, fed from every attempt's response head (or its
//! absence) through [`Core::observe_latency`], read by the routing order.

use std::collections::HashMap;
use std::time::Duration;

use super::Core;
use crate::clock::Instant;
use crate::policy::latency::{Rolling, Summary};

/// At most this many connection + model windows are kept (1024); the one with the oldest
/// newest sample is dropped first, so a client cycling model names cannot grow the state.
pub const MAX_MODEL_WINDOWS: usize = 1024;

/// The windows, keyed by (provider, connection) indices and, within a connection, by the
/// upstream model (looked up by `&str`: recording an attempt allocates nothing once its
/// windows exist).
#[derive(Debug, Default)]
pub(crate) struct LatencyStats {
    connections: HashMap<(usize, usize), Rolling>,
    models: HashMap<(usize, usize), HashMap<String, Rolling>>,
    /// Connection + model windows held, across every connection (at most
    /// [`MAX_MODEL_WINDOWS`]).
    model_windows: usize,
}

impl LatencyStats {
    /// Moves the windows of kept connections to their new indices; removed ones go.
    pub(crate) fn relayout(&mut self, remap: &super::layout::Remap) {
        self.connections = std::mem::take(&mut self.connections)
            .into_iter()
            .filter_map(|((p, c), w)| Some((remap.connection(p, c)?, w)))
            .collect();
        self.models = std::mem::take(&mut self.models)
            .into_iter()
            .filter_map(|((p, c), w)| Some((remap.connection(p, c)?, w)))
            .collect();
        self.model_windows = self.models.values().map(HashMap::len).sum();
    }

    /// Records one attempt on (`p`, `c`) for `model` at `at`.
    pub(crate) fn record(
        &mut self,
        p: usize,
        c: usize,
        model: &str,
        at: Instant,
        ttfb: Duration,
        ok: bool,
    ) {
        self.connections
            .entry((p, c))
            .or_default()
            .record(at, ttfb, ok);
        if let Some(w) = self.models.get_mut(&(p, c)).and_then(|m| m.get_mut(model)) {
            w.record(at, ttfb, ok);
            return;
        }
        if self.model_windows >= MAX_MODEL_WINDOWS {
            self.drop_oldest_model_window();
        }
        let mut w = Rolling::default();
        w.record(at, ttfb, ok);
        self.models
            .entry((p, c))
            .or_default()
            .insert(model.to_owned(), w);
        self.model_windows += 1;
    }

    /// Drops the connection + model window whose newest sample is oldest.
    fn drop_oldest_model_window(&mut self) {
        let oldest = self
            .models
            .iter()
            .flat_map(|(pc, m)| m.iter().map(move |(model, r)| (*pc, model, r.newest())))
            .min_by_key(|(_, _, newest)| *newest)
            .map(|(pc, model, _)| (pc, model.clone()));
        let Some((pc, model)) = oldest else {
            return;
        };
        if let Some(m) = self.models.get_mut(&pc) {
            if m.remove(&model).is_some() {
                self.model_windows -= 1;
            }
            if m.is_empty() {
                self.models.remove(&pc);
            }
        }
    }

    /// The summary `p2c` weighs for (`p`, `c`, `model`) at `now`: the connection + model
    /// window when it has enough samples, else the connection's.
    pub(crate) fn health(&self, p: usize, c: usize, model: &str, now: Instant) -> Option<Summary> {
        self.models
            .get(&(p, c))
            .and_then(|m| m.get(model))
            .and_then(|r| r.summary(now))
            .or_else(|| self.connections.get(&(p, c)).and_then(|r| r.summary(now)))
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
        if let Some((p, c)) = self.locate(cand.layout, cand.provider, cand.connection) {
            r.routing.latency.record(p, c, &cand.model, now, ttfb, ok);
        }
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
            s.record(0, 0, m, now, Duration::from_millis(100), true);
        }
        let h = s
            .health(0, 0, "a", now)
            .expect("one sample for model a: the connection's three stand in");
        assert_eq!((h.samples, h.mean_ttfb_ms), (3, 100));
        assert_eq!(s.health(0, 0, "z", now), Some(h));
        for _ in 0..3 {
            s.record(0, 0, "a", now, Duration::from_millis(400), false);
        }
        let h = s.health(0, 0, "a", now).unwrap();
        assert_eq!((h.samples, h.errors, h.mean_ttfb_ms), (4, 3, 325));
        assert_eq!(s.health(1, 0, "a", now), None);
        for i in 0..MAX_MODEL_WINDOWS + 10 {
            s.record(0, 1, &format!("m{i}"), now, Duration::from_millis(1), true);
        }
        let held: usize = s.models.values().map(HashMap::len).sum();
        assert!(held <= MAX_MODEL_WINDOWS);
        assert_eq!(held, s.model_windows);
        let newest = format!("m{}", MAX_MODEL_WINDOWS + 9);
        assert!(
            s.models[&(0, 1)].contains_key(&newest),
            "the newest window is kept"
        );
    }
}
