//! Table-driven tests for §1 (breaker) and §1b (windowed provider cooldown), explicit instants.

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::config::validate::{default_breaker, default_provider_cooldown};
use crate::config::{Profile, ProviderCooldownProfile};
use crate::policy::OutcomeClass;

use BreakerState::{Closed, Degraded, HalfOpen, Open};

fn t0() -> Instant {
    ManualClock::new().now()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn settings(degrade_at: u32, open_at: u32, reset_s: u64) -> BreakerSettings {
    BreakerSettings {
        degrade_at,
        open_at,
        reset_timeout: secs(reset_s),
        degraded_quiet_window: secs(60),
        probe_timeout: secs(60),
        max_backoff_multiplier: 16,
        trip_statuses: StatusSet::of(&crate::config::DEFAULT_TRIP_STATUSES),
    }
}

#[derive(Debug, Clone, Copy)]
enum Ev {
    Fail,
    Ok,
    Read,
}

/// Runs `(at, event, expected state, expected count)` rows against one breaker.
fn run(b: &mut Breaker, t0: Instant, rows: &[(u64, Ev, BreakerState, u32)]) {
    for (i, &(at, ev, state, count)) in rows.iter().enumerate() {
        let now = t0 + ms(at);
        match ev {
            Ev::Fail => {
                let _ = b.on_failure(None, now);
            }
            Ev::Ok => {
                let _ = b.on_success(None, now);
            }
            Ev::Read => {}
        }
        let v = b.view(now);
        assert_eq!(
            (v.state, v.failure_count),
            (state, count),
            "row {i}: {ev:?} at +{at}ms"
        );
    }
}

/// Opens `b` at `now` with counted failures; returns the instant it opened.
fn trip(b: &mut Breaker, now: Instant) -> Instant {
    for _ in 0..b.settings().open_at {
        b.on_failure(None, now);
    }
    assert_eq!(b.state(now), Open);
    now
}

/// Moves an OPEN breaker to HALF_OPEN and takes the probe; returns (ticket, admitted at).
fn probe(b: &mut Breaker, now: Instant) -> (ProbeTicket, Instant) {
    let at = b.view(now).next_probe_at.unwrap_or(now).max(now);
    match b.admit(at) {
        Admit::Probe(t) => (t, at),
        other => panic!("expected a probe at {at:?}, got {other:?}"),
    }
}

/// A10 invariant: never HALF_OPEN with no free permit and no in-flight probe.
fn assert_no_wedge(b: &mut Breaker, now: Instant) {
    let v = b.view(now);
    if v.state == HalfOpen {
        assert!(
            v.probe_in_flight || b.is_available(now),
            "wedged at {now:?}"
        );
    }
}

// --- §1 thresholds and counting ---

#[test]
fn default_profiles_match_spec_table() {
    let table = [
        (Profile::Oauth, 5, 8, 60),
        (Profile::ApiKey, 7, 12, 30),
        (Profile::Local, 1, 2, 15),
    ];
    for (p, degrade_at, open_at, reset) in table {
        let s = default_breaker(p);
        assert_eq!(
            (s.degrade_at, s.open_at, s.reset_timeout),
            (degrade_at, open_at, secs(reset)),
            "{p:?}"
        );
        assert_eq!(
            (
                s.degraded_quiet_window,
                s.probe_timeout,
                s.max_backoff_multiplier
            ),
            (secs(60), secs(60), 16)
        );
    }
}

#[test]
fn exact_thresholds_per_profile() {
    for p in Profile::ALL {
        let s = default_breaker(p);
        let t = t0();
        let mut b = Breaker::new(s);
        for n in 1..=s.open_at {
            let tr = b.on_failure(None, t + ms(u64::from(n)));
            let now = t + ms(u64::from(n));
            let want = if n >= s.open_at {
                Open
            } else if n >= s.degrade_at {
                Degraded
            } else {
                Closed
            };
            assert_eq!(b.state(now), want, "{p:?} after {n} failures");
            let changed = n == s.degrade_at || n == s.open_at;
            assert_eq!(tr.is_some(), changed, "{p:?} transition at {n}");
            if let Some(tr) = tr {
                assert_eq!(tr.reason, TransitionReason::FailureThreshold);
                assert_eq!(tr.to, want);
            }
        }
        let opened = t + ms(u64::from(s.open_at));
        assert_eq!(
            b.admit(opened),
            Admit::Rejected {
                retry_after: s.reset_timeout
            },
            "{p:?}"
        );
    }
}

#[test]
fn sparse_503s_among_successes_never_open_api_key() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::ApiKey));
    for i in 0..16u64 {
        b.on_failure(None, t + secs(2 * i));
        assert_eq!(b.view(t + secs(2 * i)).failure_count, 1);
        b.on_success(None, t + secs(2 * i + 1));
        assert_eq!(b.state(t + secs(2 * i + 1)), Closed);
        assert_eq!(b.admit(t + secs(2 * i + 1)), Admit::Allowed);
    }
    assert_eq!(b.transition_count(), 0);
    assert_eq!(b.view(t + secs(40)).failure_count, 0);
}

#[test]
fn success_decrements_and_degraded_recovers_below_threshold() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::ApiKey)); // 7 / 12
    let mut rows = Vec::new();
    for n in 1..=6u32 {
        rows.push((u64::from(n), Ev::Fail, Closed, n));
    }
    rows.extend([
        (7, Ev::Fail, Degraded, 7),
        (8, Ev::Fail, Degraded, 8),
        (9, Ev::Ok, Degraded, 7),
        (10, Ev::Ok, Closed, 6),
        (11, Ev::Ok, Closed, 5),
        (12, Ev::Fail, Closed, 6),
        (13, Ev::Fail, Degraded, 7),
    ]);
    rows.extend((14..=15).map(|i| (i, Ev::Fail, Degraded, u32::try_from(i).unwrap() - 6)));
    rows.extend([
        (16, Ev::Fail, Degraded, 10),
        (17, Ev::Fail, Degraded, 11),
        (18, Ev::Fail, Open, 12),
        // OPEN ignores stragglers admitted before the trip.
        (19, Ev::Ok, Open, 12),
        (20, Ev::Fail, Open, 12),
    ]);
    run(&mut b, t, &rows);
    let reasons: Vec<_> = b.transitions().map(|t| (t.to, t.reason)).collect();
    assert_eq!(
        reasons,
        [
            (Degraded, TransitionReason::FailureThreshold),
            (Closed, TransitionReason::Recovered),
            (Degraded, TransitionReason::FailureThreshold),
            (Open, TransitionReason::FailureThreshold),
        ]
    );
}

#[test]
fn degraded_quiet_window_closes_and_resets_count() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::Oauth)); // 5 / 8, quiet 60s
    let rows = [
        (0, Ev::Fail, Closed, 1),
        (0, Ev::Fail, Closed, 2),
        (0, Ev::Fail, Closed, 3),
        (0, Ev::Fail, Closed, 4),
        (1_000, Ev::Fail, Degraded, 5),
        // A new failure restarts the window.
        (30_000, Ev::Fail, Degraded, 6),
        // Successes decrement but do not restart the window.
        (50_000, Ev::Ok, Degraded, 5),
        (30_000 + 59_999, Ev::Read, Degraded, 5),
        (30_000 + 60_000, Ev::Read, Closed, 0),
        (200_000, Ev::Read, Closed, 0),
    ];
    run(&mut b, t, &rows);
    let last = b.transitions().last().copied();
    assert_eq!(
        last,
        Some(Transition {
            at: t + ms(90_000),
            from: Degraded,
            to: Closed,
            reason: TransitionReason::QuietWindow
        })
    );
}

// --- §1 lazy OPEN → HALF_OPEN and the single probe ---

#[test]
fn open_turns_half_open_on_any_read_after_reset_timeout() {
    type Read = fn(&mut Breaker, Instant);
    let reads: [(&str, Read); 5] = [
        ("state", |b, n| {
            let _ = b.state(n);
        }),
        ("admit", |b, n| {
            let _ = b.admit(n);
        }),
        ("is_available", |b, n| {
            let _ = b.is_available(n);
        }),
        ("retry_after", |b, n| {
            let _ = b.retry_after(n);
        }),
        ("view", |b, n| {
            let _ = b.view(n);
        }),
    ];
    for (name, read) in reads {
        let t = t0();
        let mut b = Breaker::new(default_breaker(Profile::ApiKey)); // reset 30s
        let opened = trip(&mut b, t);
        read(&mut b, opened + ms(29_999));
        assert_eq!(b.persist().state, Open, "{name} before the timeout");
        assert_eq!(b.retry_after(opened + ms(29_999)), Some(ms(1)));
        // Read long after: the transition is stamped when it became due.
        read(&mut b, opened + secs(45));
        assert_eq!(b.persist().state, HalfOpen, "{name} after the timeout");
        let last = b.transitions().last().copied();
        assert_eq!(
            last.map(|t| (t.at, t.from, t.to, t.reason)),
            Some((
                opened + secs(30),
                Open,
                HalfOpen,
                TransitionReason::ResetTimeout
            )),
            "{name}"
        );
    }
}

#[test]
fn half_open_admits_exactly_one_probe() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::Local)); // reset 15s, probe 60s
    let opened = trip(&mut b, t);
    let at = opened + secs(15);
    assert!(b.is_available(at), "is_available does not take the permit");
    assert!(b.is_available(at));
    let Admit::Probe(ticket) = b.admit(at) else {
        panic!("first admit must be the probe")
    };
    for (dt, left) in [(0, 60_000), (1, 59_999), (59_999, 1)] {
        let now = at + ms(dt);
        assert_eq!(
            b.admit(now),
            Admit::Rejected {
                retry_after: ms(left)
            }
        );
        assert!(!b.is_available(now));
        assert_eq!(b.retry_after(now), Some(ms(left)));
        assert_eq!(b.state(now), HalfOpen);
    }
    // Stragglers (no ticket) cannot close or re-open it.
    assert_eq!(b.on_success(None, at + secs(1)), None);
    assert_eq!(b.on_failure(None, at + secs(1)), None);
    assert_eq!(b.state(at + secs(1)), HalfOpen);
    let tr = b.on_success(Some(ticket), at + secs(2));
    assert_eq!(
        tr.map(|t| (t.from, t.to, t.reason)),
        Some((HalfOpen, Closed, TransitionReason::ProbeSucceeded))
    );
    let v = b.view(at + secs(2));
    assert_eq!((v.state, v.failure_count, v.multiplier), (Closed, 0, 1));
    assert_eq!(b.admit(at + secs(2)), Admit::Allowed);
}

#[test]
fn probe_failure_reopens_for_another_reset_timeout() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::ApiKey));
    let opened = trip(&mut b, t);
    let (ticket, at) = probe(&mut b, opened);
    let failed = at + secs(3);
    let tr = b.on_failure(Some(ticket), failed);
    assert_eq!(
        tr.map(|t| (t.at, t.from, t.to, t.reason)),
        Some((failed, HalfOpen, Open, TransitionReason::ProbeFailed))
    );
    let v = b.view(failed);
    assert_eq!(v.next_probe_at, Some(failed + secs(30)));
    assert_eq!(v.failure_count, 13);
    assert_eq!(v.open_cycles, 1);
    // The ticket is spent: a duplicate verdict changes nothing.
    assert_eq!(b.on_failure(Some(ticket), failed + secs(1)), None);
    assert_eq!(b.view(failed + secs(1)).open_cycles, 1);
}

#[test]
fn a10_hung_probe_times_out_counts_and_reopens_then_healthy_probe_closes() {
    let s = BreakerSettings {
        degrade_at: 3,
        open_at: 5,
        ..default_breaker(Profile::Oauth) // reset 60s, probe 60s
    };
    let t = t0();
    let mut b = Breaker::new(s);
    for i in 0..5 {
        b.on_failure(None, t + ms(i)); // 5 × 503
    }
    let opened = t + ms(4);
    assert_eq!(b.state(opened), Open);
    let (hung, at) = probe(&mut b, opened);
    assert_eq!(at, opened + secs(60));
    let count_before = b.view(at).failure_count;
    // Sample every 5s for 10 minutes of test clock: never wedged.
    for k in 0..=120u64 {
        assert_no_wedge(&mut b, at + secs(5 * k));
    }
    // The hung probe lost its permit at at+60s; counted; re-opened, stamped at the deadline.
    let timed_out = at + secs(60);
    let hist: Vec<_> = b.transitions().copied().collect();
    let tr = hist
        .iter()
        .find(|t| t.reason == TransitionReason::ProbeTimedOut)
        .copied();
    assert_eq!(
        tr.map(|t| (t.at, t.from, t.to)),
        Some((timed_out, HalfOpen, Open))
    );
    assert!(b.view(timed_out).failure_count > count_before);
    // Its late verdict and guard drop are stale: they change nothing.
    let now = at + secs(600);
    assert_eq!(b.on_success(Some(hung), now), None);
    assert!(!b.release_probe(hung, now));
    // Upstream is healthy again: the next probe closes the breaker.
    let (ok, at2) = probe(&mut b, now);
    assert!(
        !b.release_probe(hung, at2),
        "stale ticket cannot free the new permit"
    );
    assert!(!b.is_available(at2));
    b.on_success(Some(ok), at2 + ms(200));
    assert_eq!(b.state(at2 + ms(200)), Closed);
    assert_eq!(b.view(at2 + ms(200)).failure_count, 0);
}

#[test]
fn probe_timeout_is_exact_and_restarts_open_from_the_deadline() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::Local)); // reset 15s, probe 60s
    let opened = trip(&mut b, t);
    let (_ticket, at) = probe(&mut b, opened);
    assert_eq!(b.state(at + ms(59_999)), HalfOpen);
    assert_eq!(b.state(at + secs(60)), Open);
    assert_eq!(b.retry_after(at + secs(60)), Some(secs(15)));
    // Noticed late (deadline + reset already passed): HALF_OPEN again, permit free.
    let mut late = Breaker::new(default_breaker(Profile::Local));
    let opened = trip(&mut late, t);
    let (_ticket, at) = probe(&mut late, opened);
    assert_eq!(late.state(at + secs(80)), HalfOpen);
    assert!(late.is_available(at + secs(80)));
}

#[test]
fn released_probe_frees_the_permit_without_counting() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::Oauth));
    let opened = trip(&mut b, t);
    let (ticket, at) = probe(&mut b, opened);
    let before = b.view(at);
    let transitions = b.transition_count();
    assert!(b.release_probe(ticket, at + secs(1)));
    let after = b.view(at + secs(1));
    assert_eq!(after.state, HalfOpen);
    assert_eq!(after.failure_count, before.failure_count);
    assert_eq!(after.open_cycles, before.open_cycles);
    assert!(!after.probe_in_flight);
    assert_eq!(
        b.transition_count(),
        transitions,
        "a release is not a transition"
    );
    assert!(
        !b.release_probe(ticket, at + secs(1)),
        "second release is a no-op"
    );
    assert!(matches!(b.admit(at + secs(2)), Admit::Probe(t) if t != ticket));
}

#[test]
fn reset_timeout_escalates_after_three_cycles_up_to_the_cap() {
    // (max_backoff_multiplier, multiplier after each failed probe cycle 1..=9)
    let table: [(u32, [u32; 9]); 3] = [
        (16, [1, 1, 1, 2, 4, 8, 16, 16, 16]),
        (5, [1, 1, 1, 2, 4, 5, 5, 5, 5]),
        (1, [1; 9]),
    ];
    for (cap, want) in table {
        let s = BreakerSettings {
            max_backoff_multiplier: cap,
            ..settings(1, 2, 10)
        };
        let t = t0();
        let mut b = Breaker::new(s);
        let mut now = trip(&mut b, t);
        assert_eq!(b.retry_after(now), Some(secs(10)), "first open is 1×");
        for (cycle, &m) in want.iter().enumerate() {
            let (ticket, at) = probe(&mut b, now);
            now = at + secs(1);
            b.on_failure(Some(ticket), now);
            let v = b.view(now);
            assert_eq!(
                (v.open_cycles, v.multiplier),
                (u32::try_from(cycle).unwrap() + 1, m),
                "cap {cap}"
            );
            assert_eq!(v.retry_after, Some(secs(10 * u64::from(m))), "cap {cap}");
        }
        // A probe success resets the multiplier; the next trip is 1× again.
        let (ticket, at) = probe(&mut b, now);
        b.on_success(Some(ticket), at);
        assert_eq!(b.view(at).multiplier, 1);
        let reopened = trip(&mut b, at + secs(1));
        assert_eq!(b.retry_after(reopened), Some(secs(10)));
    }
}

#[test]
fn hung_probes_also_escalate() {
    let t = t0();
    let mut b = Breaker::new(settings(1, 2, 10)); // probe timeout 60s
    let mut now = trip(&mut b, t);
    for _ in 0..5 {
        let (_ticket, at) = probe(&mut b, now);
        now = at + secs(60); // never settles
    }
    let v = b.view(now);
    assert_eq!((v.state, v.open_cycles, v.multiplier), (Open, 5, 4));
    assert_eq!(v.retry_after, Some(secs(40)));
}

// --- history, reset, settings ---

#[test]
fn transition_history_keeps_the_last_twenty() {
    let t = t0();
    let mut b = Breaker::new(settings(1, 3, 10));
    for i in 0..15u64 {
        b.on_failure(None, t + secs(2 * i)); // → DEGRADED
        b.on_success(None, t + secs(2 * i + 1)); // → CLOSED (recovered)
    }
    assert_eq!(b.transition_count(), 30);
    let hist = b.view(t + secs(30)).transitions;
    assert_eq!(hist.len(), TRANSITION_HISTORY);
    // Oldest 10 dropped: the first kept is the 6th failure's DEGRADED at +10s.
    assert_eq!((hist[0].at, hist[0].to), (t + secs(10), Degraded));
    assert_eq!((hist[19].at, hist[19].to), (t + secs(29), Closed));
    assert!(hist.windows(2).all(|w| w[0].at <= w[1].at));
}

#[test]
fn operator_reset_from_every_state() {
    let t = t0();
    let s = settings(1, 2, 10);
    // (name, setup returning the live probe ticket if any)
    type Setup = fn(&mut Breaker, Instant) -> Option<ProbeTicket>;
    let cases: [(&str, BreakerState, Setup); 4] = [
        ("closed", Closed, |b, n| {
            b.on_success(None, n);
            None
        }),
        ("degraded", Degraded, |b, n| {
            b.on_failure(None, n);
            None
        }),
        ("open", Open, |b, n| {
            trip(b, n);
            None
        }),
        ("half_open busy", HalfOpen, |b, n| {
            // Escalate first so the reset must also reset the multiplier.
            let mut now = trip(b, n);
            for _ in 0..5 {
                let (ticket, at) = probe(b, now);
                now = at;
                b.on_failure(Some(ticket), at);
            }
            Some(probe(b, now).0)
        }),
    ];
    for (name, state, setup) in cases {
        let mut b = Breaker::new(s);
        let ticket = setup(&mut b, t);
        let now = b.transitions().last().map_or(t, |x| x.at) + ms(1);
        assert_eq!(b.persist().state, state, "{name}");
        let tr = b.reset(now);
        assert_eq!(tr.is_some(), state != Closed, "{name}");
        if let Some(tr) = tr {
            assert_eq!(
                (tr.from, tr.to, tr.reason),
                (state, Closed, TransitionReason::OperatorReset)
            );
        }
        let v = b.view(now);
        assert_eq!(
            (
                v.state,
                v.failure_count,
                v.multiplier,
                v.open_cycles,
                v.probe_in_flight
            ),
            (Closed, 0, 1, 0, false),
            "{name}"
        );
        if let Some(ticket) = ticket {
            assert!(!b.release_probe(ticket, now), "{name}: ticket is stale");
            // A stale verdict now counts as an ordinary outcome.
            b.on_failure(Some(ticket), now);
            assert_eq!(b.state(now), Degraded);
        }
    }
}

#[test]
fn live_settings_edit_applies_to_the_next_outcome_and_read() {
    let t = t0();
    let mut b = Breaker::new(default_breaker(Profile::ApiKey));
    for i in 0..3 {
        b.on_failure(None, t + ms(i));
    }
    assert_eq!(b.state(t + ms(3)), Closed, "no transition on edit");
    b.set_settings(settings(2, 4, 10));
    assert_eq!(b.state(t + ms(3)), Closed);
    b.on_failure(None, t + ms(4));
    assert_eq!(b.state(t + ms(4)), Open);
    let (_ticket, at) = probe(&mut b, t + ms(4));
    b.set_settings(BreakerSettings {
        probe_timeout: secs(5),
        ..settings(2, 4, 10)
    });
    assert_eq!(b.retry_after(at + secs(1)), Some(secs(4)));
    assert_eq!(b.state(at + secs(5)), Open);
}

#[test]
fn out_of_order_instants_do_not_panic() {
    let t = t0() + secs(3600);
    let mut b = Breaker::new(settings(1, 2, 10));
    trip(&mut b, t);
    let earlier = t - secs(5);
    assert_eq!(
        b.admit(earlier),
        Admit::Rejected {
            retry_after: secs(15)
        }
    );
    let huge = BreakerSettings {
        reset_timeout: Duration::MAX,
        degraded_quiet_window: Duration::MAX,
        probe_timeout: Duration::MAX,
        ..settings(1, 2, 10)
    };
    let mut b = Breaker::new(huge);
    trip(&mut b, t);
    assert_eq!(b.state(t + secs(86_400)), Open);
}

#[test]
fn names_and_serde() {
    for s in [Closed, Degraded, Open, HalfOpen] {
        assert_eq!(BreakerState::parse(s.as_str()), Some(s));
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            format!("\"{}\"", s.as_str())
        );
    }
    assert_eq!(BreakerState::parse("bogus"), None);
    assert_eq!(
        serde_json::to_string(&TransitionReason::ProbeTimedOut).unwrap(),
        "\"probe_timed_out\""
    );
    assert_eq!(TransitionReason::QuietWindow.as_str(), "quiet_window");
    for r in TransitionReason::ALL {
        assert_eq!(TransitionReason::parse(r.as_str()), Some(r));
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            format!("\"{}\"", r.as_str())
        );
    }
    assert_eq!(TransitionReason::parse("bogus"), None);
}

// --- persistence ---

/// What the core does across a restart: instant → wall ms (saved at `saved`) → instant
/// (loaded at `loaded`), for instants in the past and the future alike.
fn rebase(x: Instant, saved: Instant, loaded: Instant) -> Instant {
    if x >= saved {
        loaded + (x - saved)
    } else {
        loaded.checked_sub(saved - x).unwrap_or(loaded)
    }
}

fn rebase_record(r: &BreakerRecord, saved: Instant, loaded: Instant) -> BreakerRecord {
    let f = |x: Instant| rebase(x, saved, loaded);
    BreakerRecord {
        opened_at: r.opened_at.map(f),
        open_until: r.open_until.map(f),
        last_failure_at: r.last_failure_at.map(f),
        transitions: r
            .transitions
            .iter()
            .map(|t| Transition { at: f(t.at), ..*t })
            .collect(),
        ..r.clone()
    }
}

#[test]
fn open_breaker_restored_mid_timeout_keeps_its_remaining_time() {
    let t = t0();
    let s = settings(1, 2, 10);
    let mut b = Breaker::new(s);
    // Escalate to 4 cycles (2×) so the record carries cycles and history too.
    let mut now = trip(&mut b, t);
    for _ in 0..4 {
        let (ticket, at) = probe(&mut b, now);
        now = at + secs(1);
        b.on_failure(Some(ticket), now);
    }
    let saved = now + secs(5);
    assert_eq!(b.retry_after(saved), Some(secs(15)));
    let rec = b.persist();
    assert_eq!((rec.state, rec.open_cycles), (Open, 4));

    let loaded = t0() + secs(7200); // a later process
    let mut r = Breaker::restore(s, &rebase_record(&rec, saved, loaded), loaded);
    let v = r.view(loaded);
    assert_eq!((v.state, v.multiplier, v.open_cycles), (Open, 2, 4));
    assert_eq!(v.retry_after, Some(secs(15)));
    assert_eq!(v.failure_count, b.view(saved).failure_count);
    assert_eq!(v.transitions.len(), rec.transitions.len());
    assert_eq!(r.state(loaded + ms(14_999)), Open);
    assert_eq!(r.state(loaded + secs(15)), HalfOpen);
    // Round trip of an unchanged record is the identity.
    let again = Breaker::restore(s, &rec, saved).persist();
    assert_eq!(again, rec);
}

#[test]
fn restore_fills_missing_instants_conservatively() {
    let t = t0();
    let s = settings(2, 4, 10);
    let blank = BreakerRecord {
        state: Closed,
        failure_count: 0,
        open_cycles: 0,
        opened_at: None,
        open_until: None,
        last_failure_at: None,
        transitions: Vec::new(),
    };
    // OPEN without a deadline: a full (escalated) reset timeout from now.
    let mut b = Breaker::restore(
        s,
        &BreakerRecord {
            state: Open,
            failure_count: 4,
            open_cycles: 5,
            ..blank.clone()
        },
        t,
    );
    assert_eq!(b.retry_after(t), Some(secs(40)));
    // DEGRADED without a last failure: the quiet window starts now.
    let mut b = Breaker::restore(
        s,
        &BreakerRecord {
            state: Degraded,
            failure_count: 3,
            ..blank.clone()
        },
        t,
    );
    assert_eq!(b.state(t + ms(59_999)), Degraded);
    assert_eq!(b.state(t + secs(60)), Closed);
    // HALF_OPEN: the permit is free after a restart.
    let mut b = Breaker::restore(
        s,
        &BreakerRecord {
            state: HalfOpen,
            ..blank.clone()
        },
        t,
    );
    assert!(matches!(b.admit(t), Admit::Probe(_)));
    // Over-long history is trimmed to the newest 20.
    let tr = Transition {
        at: t,
        from: Closed,
        to: Degraded,
        reason: TransitionReason::FailureThreshold,
    };
    let long: Vec<_> = (0..25u64)
        .map(|i| Transition {
            at: t + secs(i),
            ..tr
        })
        .collect();
    let b = Breaker::restore(
        s,
        &BreakerRecord {
            transitions: long,
            ..blank
        },
        t,
    );
    let kept: Vec<_> = b.transitions().map(|x| x.at).collect();
    assert_eq!(kept.len(), 20);
    assert_eq!(kept[0], t + secs(5));
}

// --- §1b windowed provider cooldown ---

fn window(threshold: u32, window_s: u64, cooldown_s: u64) -> ProviderCooldownProfile {
    ProviderCooldownProfile {
        failure_threshold: threshold,
        failure_window: secs(window_s),
        cooldown: secs(cooldown_s),
    }
}

#[test]
fn provider_cooldown_defaults_match_spec_table() {
    let table = [
        (Profile::Oauth, 10, 15 * 60, 5 * 60),
        (Profile::ApiKey, 15, 30 * 60, 10 * 60),
        (Profile::Local, 2, 5 * 60, 60),
    ];
    for (p, n, w, c) in table {
        assert_eq!(default_provider_cooldown(p), window(n, w, c), "{p:?}");
    }
}

#[test]
fn provider_cooldown_is_off_unless_enabled() {
    let t = t0();
    let mut c = ProviderCooldown::new(false, window(2, 60, 30));
    for i in 0..10 {
        assert_eq!(c.on_failure(t + secs(i)), None);
    }
    assert_eq!(c.is_cooling(t + secs(10)), None);
    assert_eq!(c.view(t).failures_in_window, 0);
}

#[test]
fn provider_cooldown_threshold_window_and_success() {
    #[derive(Debug, Clone, Copy)]
    enum E {
        Fail,
        Ok,
        Read,
    }
    /// (at s, event, cooldown started until, cooling until, failures in window)
    type Row = (u64, E, Option<u64>, Option<u64>, u32);
    // threshold 3 in 60s, cool 30s.
    let rows: &[Row] = &[
        (0, E::Fail, None, None, 1),
        (10, E::Fail, None, None, 2),
        // Success clears the window.
        (20, E::Ok, None, None, 0),
        (30, E::Fail, None, None, 1),
        (40, E::Fail, None, None, 2),
        // The +30s failure slides out at +90s.
        (90, E::Fail, None, None, 2),
        (99, E::Fail, Some(129), Some(129), 0),
        // Stragglers while cooling neither extend nor end it.
        (100, E::Fail, None, Some(129), 0),
        (101, E::Ok, None, Some(129), 0),
        (128, E::Read, None, Some(129), 0),
        (129, E::Read, None, None, 0),
        // Afterwards the window starts empty.
        (130, E::Fail, None, None, 1),
        (131, E::Fail, None, None, 2),
        (132, E::Fail, Some(162), Some(162), 0),
    ];
    let t = t0();
    let mut c = ProviderCooldown::new(true, window(3, 60, 30));
    let at = |s: Option<u64>| s.map(|s| t + secs(s));
    for (i, &(s, e, started, cooling, n)) in rows.iter().enumerate() {
        let now = t + secs(s);
        let got = match e {
            E::Fail => c.on_failure(now),
            E::Ok => {
                c.on_success(now);
                None
            }
            E::Read => None,
        };
        assert_eq!(got, at(started), "row {i}");
        let v = c.view(now);
        assert_eq!(
            (v.cooling_until, v.failures_in_window),
            (at(cooling), n),
            "row {i}"
        );
        assert_eq!(c.retry_after(now), at(cooling).map(|u| u - now), "row {i}");
    }
}

#[test]
fn provider_cooldown_disable_and_clear() {
    let t = t0();
    let mut c = ProviderCooldown::new(true, default_provider_cooldown(Profile::Local));
    c.on_failure(t);
    assert_eq!(c.on_failure(t + secs(1)), Some(t + secs(61)));
    c.set_settings(false, default_provider_cooldown(Profile::Local));
    assert_eq!(c.is_cooling(t + secs(2)), None);
    c.set_settings(true, default_provider_cooldown(Profile::Local));
    assert_eq!(
        c.is_cooling(t + secs(2)),
        None,
        "disabling dropped the cooldown"
    );
    c.on_failure(t + secs(3));
    c.on_failure(t + secs(4));
    assert!(c.is_cooling(t + secs(5)).is_some());
    c.clear();
    assert_eq!(c.is_cooling(t + secs(5)), None);
    assert_eq!(c.view(t + secs(5)).failures_in_window, 0);
}

/// One attempt's end through the real classifier (no rules, default markers): `status`
/// `None` is a transport error; `stream_error` an `event: error` inside a 200 stream.
fn classified(status: Option<u16>, stream_error: Option<&str>, truncated: bool) -> Classified {
    use crate::config::ConnectionCooldownSettings;
    use crate::policy::classify::{Input, Rules, classify};
    let cooldown = ConnectionCooldownSettings {
        max_cooldown: secs(1800),
        quota_wait_threshold: secs(600),
        max_quota_wait: secs(7 * 86_400),
        expired_retry_max: 3,
        ban_markers: vec![],
        request_rejected_markers: vec![],
        quota_markers: vec![],
        concurrency_markers: vec![],
        rate_limit_cooldown: None,
        stream_stall_cooldown: false,
    };
    let rules = Rules {
        restatements: &[],
        builtins: &[],
        error_rules: &[],
        cooldown: &cooldown,
    };
    let headers = http::HeaderMap::new();
    let input = Input {
        provider: "p",
        dialect: crate::config::Dialect::Anthropic,
        status,
        headers: Some(&headers),
        body: br#"{"type":"error","error":{"type":"api_error","message":"x"}}"#,
        in_stream_error_type: stream_error,
        client_gone: false,
        truncated,
    };
    classify(&input, &rules, std::time::UNIX_EPOCH + secs(1_893_456_000))
}

fn http_status(s: u16) -> Classified {
    classified(Some(s), None, false)
}

#[test]
fn only_trip_statuses_and_transport_errors_count() {
    let defaults = StatusSet::of(&crate::config::DEFAULT_TRIP_STATUSES);
    for s in [408, 500, 502, 503, 504] {
        assert!(counts(&http_status(s), &defaults), "{s} counts");
    }
    let never = [
        400, 401, 402, 403, 404, 409, 413, 422, 429, 501, 505, 520, 521, 522, 523, 524, 525, 526,
        527, 529,
    ];
    for s in never {
        assert!(!counts(&http_status(s), &defaults), "{s} does not count");
    }
    // 501, 505 and 520–527 are still server errors for the connection (it cools); only the
    // breaker leaves them out.
    assert_eq!(http_status(501).class, OutcomeClass::Transient);
    assert_eq!(
        http_status(529).class,
        OutcomeClass::Overloaded,
        "529 is its own class"
    );

    assert!(
        counts(&classified(None, None, false), &defaults),
        "transport error"
    );
    assert!(
        counts(&classified(Some(200), None, true), &defaults),
        "a stream cut short after a 200 head"
    );
    assert!(
        counts(&classified(Some(200), Some("api_error"), false), &defaults),
        "an in-stream api_error reads as 500"
    );
    assert!(
        !counts(
            &classified(Some(200), Some("overloaded_error"), false),
            &defaults
        ),
        "an in-stream overload reads as 529"
    );

    // A custom list: 501 now counts, 503 no longer does; 529 and 429 stay out even when
    // listed (their classes belong to other layers); an empty list leaves transport only.
    let custom = StatusSet::of(&[501, 529, 429]);
    assert!(counts(&http_status(501), &custom));
    assert!(!counts(&http_status(503), &custom));
    assert!(!counts(&http_status(529), &custom));
    assert!(!counts(&http_status(429), &custom));
    let empty = StatusSet::default();
    assert!(!counts(&http_status(500), &empty));
    assert!(counts(&classified(None, None, false), &empty));

    // An empty turn (a 200 with no answer) has no error status to list: it counts like a
    // transport failure, whatever `trip_statuses` says.
    let empty_turn = Classified {
        class: OutcomeClass::EmptyTurn,
        reason: "empty_turn".into(),
        ..classified(Some(200), None, true)
    };
    assert!(counts(&empty_turn, &defaults), "an empty turn counts");
    assert!(counts(&empty_turn, &empty), "with any trip_statuses");
}

#[test]
fn excluded_statuses_never_open_the_breaker() {
    // local profile: degraded at 1, open at 2. A run of 501/505/520–527 at explicit instants
    // leaves it closed at 0; two 503s then open it.
    let mut b = Breaker::new(default_breaker(Profile::Local));
    let trip = b.settings().trip_statuses;
    let t = t0();
    let feed = |b: &mut Breaker, s: u16, at: Instant| {
        if counts(&http_status(s), &trip) {
            b.on_failure(None, at);
        }
    };
    let excluded = [
        501, 505, 520, 521, 522, 523, 524, 525, 526, 527, 529, 429, 401,
    ];
    for (i, s) in (0u64..).zip(excluded) {
        feed(&mut b, s, t + ms(i));
        let v = b.view(t + ms(i));
        assert_eq!((v.state, v.failure_count), (Closed, 0), "after {s}");
    }
    feed(&mut b, 503, t + ms(100));
    assert_eq!(b.state(t + ms(100)), Degraded);
    feed(&mut b, 502, t + ms(200));
    assert_eq!(b.state(t + ms(200)), Open);
    // Open for the local reset timeout (15 s), then half-open.
    assert_eq!(b.state(t + ms(200) + secs(15)), HalfOpen);

    // A provider override listing 501 makes it count there.
    let mut b = Breaker::new(BreakerSettings {
        trip_statuses: StatusSet::of(&[501]),
        ..default_breaker(Profile::Local)
    });
    let trip = b.settings().trip_statuses;
    for (i, s) in (0u64..).zip([501, 501]) {
        if counts(&http_status(s), &trip) {
            b.on_failure(None, t + ms(i));
        }
    }
    assert_eq!(b.state(t + ms(1)), Open);
}
