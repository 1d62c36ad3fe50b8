//! Live request counters and the last-minute window the snapshot reads.
//!
//! Every finishing request takes the stats lock once, so everything here is O(1) per request
//! and O(buckets) per snapshot: the last minute is 60 one-second slots, each with a count, an
//! ok count and a fixed-size latency histogram (`hdrhistogram`, 2 significant digits, exact
//! below 256 ms, within 1 % above), plus a running sum of the live slots. Nothing grows with the
//! number of recent requests and nothing is sorted.

use std::collections::VecDeque;
use std::sync::Arc;

use hdrhistogram::Histogram;

use crate::clock::Instant;
use crate::config::keys::{ConnSlot, KeyDiff, Keyed, ProviderKey};
use crate::snapshot::{RECENT_CAP, RequestOutcome, RequestView, Totals, Window};

/// Seconds the rolling window covers (one slot each).
pub const WINDOW_SECS: usize = 60;

/// Largest latency the window tells apart, ms (1 hour); longer requests count as this.
pub const MAX_TRACKED_MS: u64 = 3_600_000;

/// Counters since start, the recent list and the last-minute window, behind the core's
/// stats lock.
pub(crate) struct Stats {
    pub(crate) totals: Totals,
    /// Newest first, at most [`RECENT_CAP`]; shared with snapshots so building one never deep
    /// copies under the lock.
    pub(crate) recent: VecDeque<Arc<RequestView>>,
    pub(crate) window: LastMinute,
    pub(crate) providers: Keyed<ProviderKey, ProviderStats>,
}

/// Per-provider attempt counters, by provider key.
#[derive(Default, Clone)]
pub(crate) struct ProviderStats {
    pub(crate) attempts: u64,
    pub(crate) failures: u64,
    pub(crate) in_flight: u64,
    pub(crate) last_status: u16,
    pub(crate) last_latency_ms: u64,
    pub(crate) connections: Keyed<ConnSlot, ConnStats>,
}

/// Per-connection attempt counters.
#[derive(Default, Clone, Copy)]
pub(crate) struct ConnStats {
    pub(crate) attempts: u64,
    pub(crate) failures: u64,
    pub(crate) in_flight: u64,
}

impl ProviderStats {
    /// Zero counters for every provider and connection of `cfg`, by key.
    pub(crate) fn for_config(cfg: &crate::config::Config) -> Keyed<ProviderKey, Self> {
        let mut out = Keyed::default();
        for i in 0..cfg.providers.len() {
            out.insert(cfg.keys.provider(i), Self::default());
        }
        for i in 0..cfg.providers.len() {
            for key in cfg.keys.connections_of(i) {
                if let Some(ps) = out.get_mut(key.provider) {
                    ps.connections.insert(key.slot, ConnStats::default());
                }
            }
        }
        out
    }
}

impl Stats {
    /// Follows a reload's key changes: removed providers and connections lose their
    /// counters, new ones start at zero, kept ones are untouched.
    pub(crate) fn rekey(&mut self, diff: &KeyDiff) {
        for (key, _, _) in &diff.removed_connections {
            if let Some(ps) = self.providers.get_mut(key.provider) {
                ps.connections.remove(key.slot);
            }
        }
        for (p, _) in &diff.removed_providers {
            self.providers.remove(*p);
        }
        for p in &diff.added_providers {
            self.providers.insert(*p, ProviderStats::default());
        }
        for key in &diff.added_connections {
            if let Some(ps) = self.providers.get_mut(key.provider) {
                ps.connections.insert(key.slot, ConnStats::default());
            }
        }
    }

    /// Empty counters for `providers` (each with its connection count), window starting at
    /// `origin`.
    pub(crate) fn new(providers: Keyed<ProviderKey, ProviderStats>, origin: Instant) -> Self {
        Self {
            totals: Totals::default(),
            recent: VecDeque::with_capacity(RECENT_CAP),
            window: LastMinute::new(origin),
            providers,
        }
    }

    /// Counts one finished request at `now`: totals, window, recent list. O(1).
    pub(crate) fn record_finish(&mut self, now: Instant, view: RequestView) {
        let ok = view.outcome == RequestOutcome::Ok;
        self.totals.requests += 1;
        if ok {
            self.totals.ok += 1;
        } else {
            self.totals.errors += 1;
        }
        self.totals.bytes_out = self.totals.bytes_out.saturating_add(view.bytes);
        self.window.record(now, view.latency_ms, ok);
        if self.recent.len() == RECENT_CAP {
            self.recent.pop_back();
        }
        self.recent.push_front(Arc::new(view));
    }
}

/// One second of the window.
struct Slot {
    /// Absolute second (since the window's origin) this slot holds; stale when older than
    /// the window.
    sec: u64,
    count: u64,
    ok: u64,
    latency: Histogram<u32>,
}

/// Rolling last-minute statistics in 60 one-second slots plus their running sum.
pub(crate) struct LastMinute {
    origin: Instant,
    /// Newest second rolled to.
    head: u64,
    slots: Vec<Slot>,
    /// Sum of the live slots' histograms.
    total: Histogram<u32>,
    count: u64,
    ok: u64,
}

#[expect(
    clippy::expect_used,
    reason = "constant bounds that hdrhistogram accepts (high >= 2, sigfig <= 5)"
)]
fn histogram() -> Histogram<u32> {
    Histogram::new_with_max(MAX_TRACKED_MS, 2).expect("valid histogram bounds")
}

impl LastMinute {
    /// An empty window whose second 0 starts at `origin`.
    pub(crate) fn new(origin: Instant) -> Self {
        Self {
            origin,
            head: 0,
            slots: (0..WINDOW_SECS)
                .map(|_| Slot {
                    sec: 0,
                    count: 0,
                    ok: 0,
                    latency: histogram(),
                })
                .collect(),
            total: histogram(),
            count: 0,
            ok: 0,
        }
    }

    fn second(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.origin).as_secs()
    }

    /// Expires the slots that fell out of the window by `now`. At most 60 slot resets however
    /// long it was idle; amortised O(1) per request.
    fn roll(&mut self, now: Instant) {
        let cur = self.second(now);
        if cur <= self.head {
            return;
        }
        let from = self
            .head
            .saturating_add(1)
            .max(cur.saturating_sub(WINDOW_SECS as u64 - 1));
        for sec in from..=cur {
            let i = (sec % WINDOW_SECS as u64) as usize;
            self.expire(i);
            self.slots[i].sec = sec;
        }
        self.head = cur;
    }

    fn expire(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        if slot.count == 0 {
            return;
        }
        self.count -= slot.count;
        self.ok -= slot.ok;
        if self.total.subtract(&slot.latency).is_err() {
            self.total.reset();
        }
        slot.latency.reset();
        slot.count = 0;
        slot.ok = 0;
    }

    /// Records one request that finished at `now` after `latency_ms`.
    pub(crate) fn record(&mut self, now: Instant, latency_ms: u64, ok: bool) {
        self.roll(now);
        let sec = self.second(now);
        if sec.saturating_add(WINDOW_SECS as u64) <= self.head {
            return; // older than the window (a clock that went back)
        }
        let slot = &mut self.slots[(sec % WINDOW_SECS as u64) as usize];
        slot.count += 1;
        slot.latency.saturating_record(latency_ms);
        self.total.saturating_record(latency_ms);
        self.count += 1;
        if ok {
            slot.ok += 1;
            self.ok += 1;
        }
    }

    /// The window as of `now`: rate, success ratio, nearest-rank p50 / p99 and the per-second
    /// sparkline. O(buckets).
    pub(crate) fn view(&mut self, now: Instant) -> Window {
        self.roll(now);
        let n = self.count;
        let pct = |q: f64| {
            if n == 0 {
                0
            } else {
                self.total.value_at_quantile(q)
            }
        };
        let mut sparkline = vec![0u64; WINDOW_SECS];
        for slot in &self.slots {
            let ago = self.head.saturating_sub(slot.sec);
            if slot.count > 0 && ago < WINDOW_SECS as u64 {
                sparkline[WINDOW_SECS - 1 - ago as usize] = slot.count;
            }
        }
        Window {
            req_per_s: n as f64 / WINDOW_SECS as f64,
            success_ratio: if n == 0 {
                1.0
            } else {
                self.ok as f64 / n as f64
            },
            p50_ms: pct(0.50),
            p99_ms: pct(0.99),
            sparkline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};
    use std::time::Duration;

    const SECOND: Duration = Duration::from_secs(1);

    fn window() -> (LastMinute, ManualClock) {
        let clock = ManualClock::new();
        (LastMinute::new(clock.now()), clock)
    }

    #[test]
    fn empty_window_reads_zero_latency_and_full_success() {
        let (mut w, clock) = window();
        let v = w.view(clock.now());
        assert_eq!(
            (v.p50_ms, v.p99_ms, v.success_ratio, v.req_per_s),
            (0, 0, 1.0, 0.0)
        );
        assert_eq!(v.sparkline, vec![0; 60]);
    }

    #[test]
    fn percentiles_are_nearest_rank_on_exact_vectors() {
        let (mut w, clock) = window();
        for ms in [7, 1, 3, 3, 9, 2, 5, 8, 4, 6] {
            w.record(clock.now(), ms, true);
        }
        let v = w.view(clock.now());
        // sorted: 1 2 3 3 4 5 6 7 8 9 → rank ceil(0.5·10)=5 → 4; rank ceil(0.99·10)=10 → 9
        assert_eq!((v.p50_ms, v.p99_ms), (4, 9));
        let (mut w, clock) = window();
        for ms in 0..1000 {
            w.record(clock.now(), ms % 200, ms % 4 != 0);
        }
        let v = w.view(clock.now());
        // 0..199 five times each: rank 500 → 99, rank 990 → 197
        assert_eq!((v.p50_ms, v.p99_ms), (99, 197));
        assert!((v.success_ratio - 0.75).abs() < 1e-9);
        assert!((v.req_per_s - 1000.0 / 60.0).abs() < 1e-9);
    }

    #[test]
    fn large_latencies_stay_within_one_percent_and_saturate() {
        let (mut w, clock) = window();
        w.record(clock.now(), 12_345, true);
        let p = w.view(clock.now()).p50_ms;
        assert!((12_345..=12_345 + 124).contains(&p), "{p}");
        w.record(clock.now(), u64::MAX, true);
        let p = w.view(clock.now()).p99_ms;
        assert!(
            (MAX_TRACKED_MS..=MAX_TRACKED_MS + MAX_TRACKED_MS / 100).contains(&p),
            "{p}"
        );
    }

    #[test]
    fn slots_roll_over_with_the_clock() {
        let (mut w, clock) = window();
        w.record(clock.now(), 100, true); // second 0
        clock.advance(SECOND * 30);
        w.record(clock.now(), 10, false); // second 30
        w.record(clock.now(), 10, false);
        let v = w.view(clock.now());
        assert_eq!(v.sparkline[59], 2);
        assert_eq!(v.sparkline[29], 1);
        assert_eq!((v.p50_ms, v.p99_ms), (10, 100));
        assert!((v.success_ratio - 1.0 / 3.0).abs() < 1e-9);
        clock.advance(SECOND * 30); // second 60: second 0 expired
        let v = w.view(clock.now());
        assert_eq!(v.sparkline.iter().sum::<u64>(), 2);
        assert_eq!(v.sparkline[29], 2);
        assert_eq!((v.p50_ms, v.p99_ms, v.success_ratio), (10, 10, 0.0));
        clock.advance(SECOND * 29); // second 89: still there
        assert_eq!(w.view(clock.now()).sparkline[0], 2);
        clock.advance(SECOND); // second 90: gone
        let v = w.view(clock.now());
        assert_eq!((v.p50_ms, v.p99_ms, v.success_ratio), (0, 0, 1.0));
        assert_eq!(v.sparkline, vec![0; 60]);
    }

    #[test]
    fn a_long_idle_gap_resets_every_slot_and_recording_continues() {
        let (mut w, clock) = window();
        for s in 0..60 {
            w.record(clock.now(), s, true);
            clock.advance(SECOND);
        }
        assert_eq!(w.view(clock.now()).sparkline.iter().sum::<u64>(), 59);
        clock.advance(SECOND * 3600);
        w.record(clock.now(), 42, true);
        let v = w.view(clock.now());
        assert_eq!(v.sparkline.iter().sum::<u64>(), 1);
        assert_eq!((v.p50_ms, v.p99_ms), (42, 42));
    }

    #[test]
    fn recent_list_is_bounded_and_totals_count_every_outcome() {
        let clock = ManualClock::new();
        let mut s = Stats::new(Keyed::default(), clock.now());
        for i in 0..(RECENT_CAP as u64 + 3) {
            let outcome = if i % 2 == 0 {
                RequestOutcome::Ok
            } else {
                RequestOutcome::UpstreamError
            };
            s.record_finish(
                clock.now(),
                RequestView {
                    id: i,
                    bytes: 1,
                    outcome,
                    ..Default::default()
                },
            );
        }
        assert_eq!(s.recent.len(), RECENT_CAP);
        assert_eq!(s.recent[0].id, RECENT_CAP as u64 + 2);
        assert_eq!(
            (
                s.totals.requests,
                s.totals.ok,
                s.totals.errors,
                s.totals.bytes_out
            ),
            (203, 102, 101, 203)
        );
    }
}
