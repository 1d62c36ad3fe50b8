//! Open-loop load at a fixed rate: requests are sent on a schedule, whatever the answers do,
//! so a slow target meets more load rather than less (no coordinated omission). Half the
//! lanes send plain requests and half stream; every reading is filed in the interval (for
//! example the minute) its request was due in.
//!
//! Lane `k` of `L` sends its `j`-th request at `start + (j·L + k) / rps`: the lanes together
//! send one request every `1 / rps` seconds, each on its own keep-alive connection. A lane
//! whose answer takes longer than its period sends the next one late, and the lateness is part
//! of that request's latency (measured from when it was due, not from when it went out).
//! A lane that was idle at the due time measures from when the request went out, so the
//! timer's own millisecond ticks are not counted as the target's.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::BodyExt;

use crate::load::{self, Req, StreamSink};

/// Longest a request or stream may take before it counts as an error (a hung answer would
/// otherwise hold its lane, and the run, forever).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// What one interval of a paced run measured (requests are filed by when they were due).
#[derive(Debug)]
pub struct Interval {
    /// Plain requests' latency, ns: from when each was due if its lane was still busy then,
    /// else from when it went out (see the module doc).
    pub latency: Histogram<u64>,
    /// Streams' time to first byte, ns, counted the same way.
    pub ttfb: Histogram<u64>,
    /// Plain requests answered 2xx, read whole.
    pub ok: u64,
    /// Streams read to their end.
    pub streams: u64,
    /// Requests or streams that failed, were not 2xx, or broke.
    pub errors: u64,
    /// Requests sent more than one lane period after they were due.
    pub late: u64,
    /// SSE events received.
    pub frames: u64,
    /// SSE events the streams sent should have carried.
    pub expected: u64,
    /// Longest gap between two events of one stream, ns.
    pub max_gap_ns: u64,
}

impl Interval {
    fn new() -> Self {
        Self {
            latency: load::hist(),
            ttfb: load::hist(),
            ok: 0,
            streams: 0,
            errors: 0,
            late: 0,
            frames: 0,
            expected: 0,
            max_gap_ns: 0,
        }
    }

    /// Requests of either kind that were due in this interval.
    pub fn sent(&self) -> u64 {
        self.ok + self.streams + self.errors
    }
}

/// A paced run's shape.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Requests per second, all lanes together.
    pub rps: f64,
    /// Lanes (connections); the odd ones stream.
    pub lanes: usize,
    /// How long requests are sent for.
    pub dur: Duration,
    /// Length of one reporting interval.
    pub interval: Duration,
    /// The plain request.
    pub plain: Req,
    /// The streaming request, and the events each of its streams carries.
    pub stream: (Req, u64),
}

impl Plan {
    /// When lane `lane`'s `j`-th request is due, as an offset from the start.
    fn due(&self, lane: usize, j: u64) -> Duration {
        let slot = j as f64 * self.lanes as f64 + lane as f64;
        Duration::from_secs_f64(slot / self.rps.max(1e-3))
    }

    /// One lane's period: the time between two of its requests.
    fn period(&self) -> Duration {
        Duration::from_secs_f64(self.lanes as f64 / self.rps.max(1e-3))
    }

    fn intervals(&self) -> usize {
        let n = self.dur.as_secs_f64() / self.interval.as_secs_f64().max(1e-3);
        (n.ceil() as usize).max(1)
    }
}

/// Runs `plan` against `addr`; returns one [`Interval`] per `plan.interval` of sending.
pub async fn run(addr: SocketAddr, plan: &Plan) -> Vec<Interval> {
    let slots: Vec<Interval> = (0..plan.intervals()).map(|_| Interval::new()).collect();
    let slots = Arc::new(Mutex::new(slots));
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(plan.lanes);
    for lane in 0..plan.lanes {
        let (plan, slots) = (plan.clone(), slots.clone());
        tasks.push(tokio::spawn(async move {
            lane_loop(addr, &plan, lane, start, &slots).await;
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    match Arc::try_unwrap(slots) {
        Ok(m) => m.into_inner().unwrap_or_else(|p| p.into_inner()),
        Err(shared) => std::mem::take(&mut *shared.lock().unwrap_or_else(|p| p.into_inner())),
    }
}

/// One request's readings before they are filed.
struct Reading {
    ok: bool,
    latency_ns: Option<u64>,
    ttfb_ns: Option<u64>,
    frames: u64,
    expected: u64,
    max_gap_ns: u64,
    late: bool,
}

impl StreamSink for Reading {
    fn first_byte(&mut self, ns: u64) {
        self.ttfb_ns = Some(self.ttfb_ns.unwrap_or(0) + ns);
    }

    fn events(&mut self, events: u64, gap_ns: Option<u64>) {
        self.frames += events;
        self.max_gap_ns = self.max_gap_ns.max(gap_ns.unwrap_or(0));
    }
}

async fn lane_loop(
    addr: SocketAddr,
    plan: &Plan,
    lane: usize,
    start: Instant,
    slots: &Mutex<Vec<Interval>>,
) {
    let streaming = lane % 2 == 1;
    let mut send = None;
    let mut prev_done = start;
    for j in 0.. {
        let due_in = plan.due(lane, j);
        if due_in >= plan.dur {
            break;
        }
        let due = start + due_in;
        tokio::time::sleep_until(due.into()).await;
        // Latency counts from when the request was due if the target held the lane past
        // that (the answer before it came late); else from now, so the timer's own
        // lateness (tokio's timer ticks in whole ms) is not charged to the target.
        let from = if prev_done > due { due } else { Instant::now() };
        if send.is_none() {
            send = load::connect(addr).await;
        }
        let mut r = Reading {
            ok: false,
            latency_ns: None,
            ttfb_ns: streaming.then(|| from.elapsed().as_nanos() as u64),
            frames: 0,
            expected: 0,
            max_gap_ns: 0,
            late: due.elapsed() > plan.period(),
        };
        if let Some(s) = send.as_mut() {
            r.ok = if streaming {
                r.expected = plan.stream.1;
                let stream = load::one_stream(s, addr, &plan.stream.0, &mut r);
                matches!(
                    tokio::time::timeout(ANSWER_TIMEOUT, stream).await,
                    Ok(Some(()))
                )
            } else {
                let answer = plain(s, addr, &plan.plain);
                tokio::time::timeout(ANSWER_TIMEOUT, answer)
                    .await
                    .unwrap_or(false)
            };
            if !streaming && r.ok {
                r.latency_ns = Some(from.elapsed().as_nanos() as u64);
            }
        }
        prev_done = Instant::now();
        if !r.ok {
            send = None;
        }
        file(slots, plan, due_in, streaming, &r);
    }
}

/// Sends one plain request and reads its answer whole; whether it was a 2xx.
async fn plain(
    s: &mut hyper::client::conn::http1::SendRequest<http_body_util::Full<Bytes>>,
    addr: SocketAddr,
    req: &Req,
) -> bool {
    let Ok(resp) = s
        .send_request(load::request(addr, req, req.body.clone()))
        .await
    else {
        return false;
    };
    let good = resp.status().is_success();
    resp.into_body().collect().await.is_ok() && good
}

/// Files `r` in the interval its request was due in.
fn file(slots: &Mutex<Vec<Interval>>, plan: &Plan, due_in: Duration, streaming: bool, r: &Reading) {
    let i = (due_in.as_secs_f64() / plan.interval.as_secs_f64().max(1e-3)) as usize;
    let mut slots = slots.lock().unwrap_or_else(|p| p.into_inner());
    let Some(slot) = slots.get_mut(i) else {
        return;
    };
    if r.late {
        slot.late += 1;
    }
    slot.frames += r.frames;
    slot.expected += r.expected;
    slot.max_gap_ns = slot.max_gap_ns.max(r.max_gap_ns);
    if let Some(ns) = r.ttfb_ns.filter(|_| r.frames > 0) {
        slot.ttfb.saturating_record(ns.max(1_000));
    }
    match (r.ok, streaming) {
        (false, _) => slot.errors += 1,
        (true, true) => slot.streams += 1,
        (true, false) => {
            slot.ok += 1;
            if let Some(ns) = r.latency_ns {
                slot.latency.saturating_record(ns.max(1_000));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(rps: f64, lanes: usize, secs: u64) -> Plan {
        Plan {
            rps,
            lanes,
            dur: Duration::from_secs(secs),
            interval: Duration::from_secs(60),
            plain: Req::anthropic("m", "s=1", false),
            stream: (Req::anthropic("m", "f=1", true), 4),
        }
    }

    #[test]
    fn lanes_together_send_one_request_per_slot_at_the_rate() {
        let p = plan(2_000.0, 8, 1);
        assert_eq!(p.period(), Duration::from_millis(4));
        // The lanes' first requests are spread over the first period, one every 0.5 ms.
        assert_eq!(p.due(0, 0), Duration::ZERO);
        assert_eq!(p.due(3, 0), Duration::from_micros(1_500));
        assert_eq!(p.due(3, 1), Duration::from_micros(5_500));
        // Over one second every slot below 2,000 is due exactly once.
        let mut due: Vec<Duration> = (0..8)
            .flat_map(|lane| (0..1_000).map(move |j| (lane, j)))
            .map(|(lane, j)| p.due(lane, j))
            .filter(|d| *d < p.dur)
            .collect();
        due.sort();
        due.dedup();
        assert_eq!(due.len(), 2_000);
    }

    #[test]
    fn readings_are_filed_by_when_they_were_due() {
        let p = plan(10.0, 2, 150);
        assert_eq!(p.intervals(), 3);
        let slots = Mutex::new((0..p.intervals()).map(|_| Interval::new()).collect());
        let stream = Reading {
            ok: true,
            latency_ns: None,
            ttfb_ns: Some(2_000_000),
            frames: 3,
            expected: 4,
            max_gap_ns: 7,
            late: true,
        };
        file(&slots, &p, Duration::from_secs(61), true, &stream);
        let failed = Reading {
            ok: false,
            latency_ns: None,
            ttfb_ns: None,
            frames: 0,
            expected: 0,
            max_gap_ns: 0,
            late: false,
        };
        file(&slots, &p, Duration::from_secs(149), false, &failed);
        file(&slots, &p, Duration::from_secs(400), false, &failed);
        let slots = slots.into_inner().unwrap_or_default();
        assert_eq!(slots[0].sent(), 0);
        assert_eq!(
            (slots[1].streams, slots[1].frames, slots[1].expected),
            (1, 3, 4)
        );
        assert_eq!((slots[1].late, slots[1].max_gap_ns), (1, 7));
        assert_eq!(slots[1].ttfb.len(), 1);
        assert_eq!((slots[2].errors, slots[2].sent()), (1, 1));
    }
}
