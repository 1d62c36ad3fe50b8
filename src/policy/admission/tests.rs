//! Tests for [`decide`], [`decide_queued`], [`apply`] and [`QueuePolicy`] with explicit
//! instants (§4, §5; case A21).

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::config::{Auth, Connection, Profile, QueueSettings};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn t0() -> Instant {
    ManualClock::new().now()
}

fn policy(max_wait: Duration, depth: u32, enforcement: Enforcement) -> QueuePolicy {
    QueuePolicy {
        max_wait,
        execution_max_wait: secs(600),
        max_queue_depth: depth,
        enforcement,
    }
}

fn conn_gate(cap: Option<u32>) -> GateState {
    GateState::new(GateKind::Connection, cap)
}

/// Decides a new arrival `id` at `now` and books it; returns the decision.
fn arrive(gates: &mut [GateState], id: RequestId, q: &QueuePolicy, now: Instant) -> Decision {
    let d = decide(gates, q, now);
    apply(gates, id, &d, now);
    d
}

/// Re-checks waiter `id` (found on the last gate) at `now` and books the decision.
fn recheck(gates: &mut [GateState], id: RequestId, q: &QueuePolicy, now: Instant) -> Decision {
    let w = gates
        .iter()
        .flat_map(|g| g.waiters.iter())
        .find(|w| w.id == id)
        .copied()
        .unwrap();
    let d = decide_queued(gates, &w, q, now);
    apply(gates, id, &d, now);
    d
}

fn is_queue(d: &Decision) -> bool {
    matches!(d, Decision::Queue { .. })
}

#[test]
fn a21_run1_cap2_depth3_six_arrivals() {
    let t = t0();
    let q = policy(secs(5), 3, Enforcement::RateLimitQueue);
    let mut gates = vec![conn_gate(Some(2))];
    let got: Vec<Decision> = (1..=6)
        .map(|id| arrive(&mut gates, id, &q, t + ms(id)))
        .collect();
    assert_eq!(got[0], Decision::Admit);
    assert_eq!(got[1], Decision::Admit);
    for d in &got[2..5] {
        assert_eq!(
            *d,
            Decision::Queue {
                blocked_by: GateKind::Connection
            }
        );
    }
    let Decision::Reject { code, retry_after } = got[5] else {
        panic!("6th must be rejected at once: {:?}", got[5]);
    };
    assert_eq!(code, AdmissionCode::QueueFull);
    assert_eq!((code.status(), code.code()), (429, "RATE_LIMIT_QUEUE_FULL"));
    assert_eq!(code.reason(), "queue_full");
    // Oldest waiter queued at t+3ms, now t+6ms: ~5 s left, rounded up.
    assert_eq!(retry_after, secs(5));
    let g = &gates[0];
    assert_eq!((g.in_flight, g.depth()), (2, 3));
    assert_eq!(
        g.counters,
        GateCounters {
            admitted: 2,
            queued: 3,
            timeouts: 0,
            rejections: 1,
            fail_open_admits: 0
        }
    );
    // Both dispatched finish: the two oldest waiters take the permits, in arrival order.
    release(&mut gates);
    release(&mut gates);
    let later = t + secs(1);
    assert!(
        is_queue(&recheck(&mut gates, 5, &q, later)),
        "5 waits behind 3 and 4"
    );
    assert_eq!(recheck(&mut gates, 3, &q, later), Decision::Admit);
    assert_eq!(recheck(&mut gates, 4, &q, later), Decision::Admit);
    assert!(is_queue(&recheck(&mut gates, 5, &q, later)));
}

#[test]
fn a21_run2_cap4_four_arrivals_all_admitted() {
    let t = t0();
    let q = policy(secs(5), 3, Enforcement::RateLimitQueue);
    let mut gates = vec![conn_gate(Some(4))];
    for id in 1..=4 {
        assert_eq!(arrive(&mut gates, id, &q, t), Decision::Admit);
    }
    assert_eq!(gates[0].in_flight, 4);
}

#[test]
fn a21_dispatched_never_cut_by_queue_wait_and_waiter_times_out_fast() {
    let t = t0();
    let q = policy(secs(5), 3, Enforcement::RateLimitQueue);
    let mut gates = vec![conn_gate(Some(2))];
    arrive(&mut gates, 1, &q, t);
    arrive(&mut gates, 2, &q, t);
    assert!(is_queue(&arrive(&mut gates, 3, &q, t)));
    // At 4.999 s the waiter still waits; at 5 s it is refused (not executed).
    assert!(is_queue(&recheck(&mut gates, 3, &q, t + ms(4999))));
    let d = recheck(&mut gates, 3, &q, t + secs(5));
    assert!(matches!(
        d,
        Decision::Reject {
            code: AdmissionCode::QueueTimeout,
            retry_after
        } if retry_after >= secs(1)
    ));
    assert_eq!(gates[0].counters.timeouts, 1);
    assert_eq!(gates[0].depth(), 0);
    // The two dispatched requests are bounded only by the execution deadline (10 min).
    assert!(!execution_timed_out(
        t,
        t + secs(8),
        q.execution_max_wait,
        secs(600)
    ));
}

#[test]
fn fifo_later_arrival_never_overtakes_earlier_waiter() {
    let t = t0();
    let q = policy(secs(30), 0, Enforcement::RateLimitQueue);
    let mut gates = vec![GateState::new(GateKind::Provider, None), conn_gate(Some(1))];
    assert_eq!(arrive(&mut gates, 1, &q, t), Decision::Admit);
    assert!(is_queue(&arrive(&mut gates, 2, &q, t + ms(1))));
    assert!(is_queue(&arrive(&mut gates, 3, &q, t + ms(2))));
    // Permit released; before the core re-checks, a new arrival sees the reserved permit.
    release(&mut gates);
    assert!(is_queue(&arrive(&mut gates, 4, &q, t + ms(3))));
    // Waiter 3 cannot jump waiter 2 either.
    assert!(is_queue(&recheck(&mut gates, 3, &q, t + ms(4))));
    assert_eq!(recheck(&mut gates, 2, &q, t + ms(4)), Decision::Admit);
    let order: Vec<RequestId> = gates[1].waiters.iter().map(|w| w.id).collect();
    assert_eq!(order, vec![3, 4]);
    release(&mut gates);
    assert!(is_queue(&recheck(&mut gates, 4, &q, t + ms(5))));
    assert_eq!(recheck(&mut gates, 3, &q, t + ms(5)), Decision::Admit);
}

#[test]
fn stricter_model_cap_governs_and_blocks_only_its_model() {
    let t = t0();
    let q = policy(secs(30), 0, Enforcement::RateLimitQueue);
    let conn = conn_gate(Some(4));
    let glm = GateState::new(GateKind::Model, Some(1));
    let other = GateState::new(GateKind::Model, None);
    // Chains are built from shared gates; simulate with &mut borrows of separate states.
    let (mut conn, mut glm, mut other) = (conn, glm, other);
    let d = decide(&[&conn, &glm], &q, t);
    assert_eq!(d, Decision::Admit);
    apply(&mut [&mut conn, &mut glm], 1, &d, t);
    let d = decide(&[&conn, &glm], &q, t + ms(1));
    assert_eq!(
        d,
        Decision::Queue {
            blocked_by: GateKind::Model
        }
    );
    apply(&mut [&mut conn, &mut glm], 2, &d, t + ms(1));
    // Another model on the same connection still gets one of the 3 free connection permits,
    // as the glm waiter keeps one reserved.
    let d = decide(&[&conn, &other], &q, t + ms(2));
    assert_eq!(d, Decision::Admit);
    apply(&mut [&mut conn, &mut other], 3, &d, t + ms(2));
    assert_eq!(conn.in_flight, 2);
}

#[test]
fn gates_in_fixed_order_and_first_blocker_reported_in_that_order() {
    assert_eq!(
        GateKind::ORDER.map(GateKind::as_str),
        ["global", "provider", "connection", "model"]
    );
    let mut sorted = GateKind::ORDER;
    sorted.reverse();
    sorted.sort();
    assert_eq!(sorted, GateKind::ORDER);
    let t = t0();
    let q = policy(secs(30), 0, Enforcement::RateLimitQueue);
    let full = |kind| GateState {
        in_flight: 1,
        ..GateState::new(kind, Some(1))
    };
    let open = |kind| GateState::new(kind, Some(1));
    let cases = [
        (
            [
                full(GateKind::Global),
                full(GateKind::Provider),
                full(GateKind::Connection),
                full(GateKind::Model),
            ],
            Some(GateKind::Global),
        ),
        (
            [
                open(GateKind::Global),
                full(GateKind::Provider),
                full(GateKind::Connection),
                full(GateKind::Model),
            ],
            Some(GateKind::Provider),
        ),
        (
            [
                open(GateKind::Global),
                open(GateKind::Provider),
                full(GateKind::Connection),
                full(GateKind::Model),
            ],
            Some(GateKind::Connection),
        ),
        (
            [
                open(GateKind::Global),
                open(GateKind::Provider),
                open(GateKind::Connection),
                full(GateKind::Model),
            ],
            Some(GateKind::Model),
        ),
        (
            [
                open(GateKind::Global),
                open(GateKind::Provider),
                open(GateKind::Connection),
                open(GateKind::Model),
            ],
            None,
        ),
    ];
    for (mut gates, want) in cases {
        assert!(in_fixed_order(&gates));
        let d = decide(&gates, &q, t);
        match want {
            Some(k) => assert_eq!(d, Decision::Queue { blocked_by: k }),
            None => {
                assert_eq!(d, Decision::Admit);
                apply(&mut gates, 9, &d, t);
                assert!(
                    gates.iter().all(|g| g.in_flight == 1),
                    "one bundle, every gate"
                );
                release(&mut gates);
                assert!(gates.iter().all(|g| g.in_flight == 0));
            }
        }
    }
    let gates = [conn_gate(None), GateState::new(GateKind::Global, None)];
    assert!(!in_fixed_order(&gates));
}

#[test]
fn shared_gate_waiter_held_elsewhere_keeps_its_reservation_only() {
    let t = t0();
    let q = policy(secs(30), 0, Enforcement::RateLimitQueue);
    let mut provider = GateState::new(GateKind::Provider, Some(2));
    let mut a = conn_gate(Some(1));
    let b = conn_gate(Some(1));
    let d = decide(&[&provider, &a], &q, t);
    apply(&mut [&mut provider, &mut a], 1, &d, t);
    // Request 2 on connection A waits for A; it reserves one provider permit.
    let d = decide(&[&provider, &a], &q, t + ms(1));
    assert!(is_queue(&d));
    apply(&mut [&mut provider, &mut a], 2, &d, t + ms(1));
    // Provider: 1 in flight + 1 reserved = 2 = cap, so B's arrival waits on the provider.
    assert_eq!(
        decide(&[&provider, &b], &q, t + ms(2)),
        Decision::Queue {
            blocked_by: GateKind::Provider
        }
    );
    // With cap 3, B gets the surplus permit and the waiter's reservation stays intact.
    provider.cap = Some(3);
    assert_eq!(decide(&[&provider, &b], &q, t + ms(2)), Decision::Admit);
}

#[test]
fn queue_timeout_and_execution_deadline_are_independent() {
    let t = t0();
    // (enqueued/dispatched offset, now offset, max_wait, exec, provider timeout) →
    // (queue timed out, execution timed out)
    let cases = [
        (0, 4_999, secs(5), secs(600), secs(600), false, false),
        (0, 5_000, secs(5), secs(600), secs(600), true, false),
        (0, 600_000, secs(5), secs(600), secs(600), true, true),
        // execution raised to a longer provider timeout
        (0, 700_000, secs(5), secs(600), secs(900), true, false),
        (0, 900_000, secs(5), secs(600), secs(900), true, true),
        // a short execution budget does not shorten queue waiting
        (0, 2_000, secs(30), secs(1), ms(500), false, true),
    ];
    for (start, now, max_wait, exec, prov, want_q, want_e) in cases {
        let (s, n) = (t + ms(start), t + ms(now));
        assert_eq!(queue_timed_out(s, n, max_wait), want_q, "queue {now}");
        assert_eq!(execution_timed_out(s, n, exec, prov), want_e, "exec {now}");
    }
    assert_eq!(execution_deadline(t, secs(600), secs(900)), t + secs(900));
    assert_eq!(execution_deadline(t, secs(600), secs(10)), t + secs(600));
    // `now` before `enqueued_at` (clock skew between stamps) is not a timeout.
    assert!(!queue_timed_out(t + secs(1), t, ms(1)));
    let c = AdmissionCode::ExecutionTimeout;
    assert_eq!(
        (c.status(), c.code(), c.has_retry_after()),
        (504, "RATE_LIMIT_EXECUTION_TIMEOUT", false)
    );
}

fn settings(max_wait: Duration, exec: Duration, depth: u32, auto: bool) -> QueueSettings {
    QueueSettings {
        max_wait,
        execution_max_wait: exec,
        max_queue_depth: depth,
        auto_enable_api_key_connections: auto,
        protection_default_cap: DEFAULT_PROTECTION_CAP,
    }
}

#[test]
fn clamping() {
    let cases = [
        (Duration::ZERO, ms(1)),
        (Duration::from_micros(10), ms(1)),
        (ms(1), ms(1)),
        (secs(30), secs(30)),
        (secs(24 * 3600), secs(24 * 3600)),
        (secs(24 * 3600 + 1), secs(24 * 3600)),
        (Duration::MAX, secs(24 * 3600)),
    ];
    for (input, want) in cases {
        assert_eq!(clamp_duration(input), want, "{input:?}");
    }
    for (input, want) in [
        (0, 0),
        (7, 7),
        (100_000, 100_000),
        (100_001, 100_000),
        (u32::MAX, 100_000),
    ] {
        assert_eq!(clamp_depth(input), want);
    }
    let p = QueuePolicy::resolve(
        &settings(Duration::ZERO, Duration::MAX, u32::MAX, true),
        &QueueOverride::default(),
        &QueueOverride::default(),
        Enforcement::FailOpen,
    );
    assert_eq!(
        (p.max_wait, p.execution_max_wait, p.max_queue_depth),
        (ms(1), MAX_QUEUE_DURATION, MAX_QUEUE_DEPTH)
    );
}

#[test]
fn precedence_default_then_saved_then_connection() {
    let defaults = settings(secs(30), secs(600), 0, true);
    let saved = QueueOverride {
        max_wait: Some(secs(10)),
        execution_max_wait: None,
        max_queue_depth: Some(5),
    };
    let per_conn = QueueOverride {
        max_wait: Some(secs(2)),
        execution_max_wait: None,
        max_queue_depth: None,
    };
    let none = QueueOverride::default();
    let e = Enforcement::RateLimitQueue;
    // (saved, connection) → (max_wait, exec, depth)
    let cases = [
        (&none, &none, (secs(30), secs(600), 0)),
        (&saved, &none, (secs(10), secs(600), 5)),
        (&none, &per_conn, (secs(2), secs(600), 0)),
        (&saved, &per_conn, (secs(2), secs(600), 5)),
    ];
    for (s, c, want) in cases {
        let p = QueuePolicy::resolve(&defaults, s, c, e);
        assert_eq!((p.max_wait, p.execution_max_wait, p.max_queue_depth), want);
        assert_eq!(p.enforcement, e);
    }
    // A saved/connection override of 0 depth (unlimited) still wins over a default.
    let p = QueuePolicy::resolve(
        &settings(secs(30), secs(600), 9, true),
        &none,
        &QueueOverride {
            max_queue_depth: Some(0),
            ..none
        },
        e,
    );
    assert_eq!(p.max_queue_depth, 0);
}

#[test]
fn protection_rules() {
    use Profile::*;
    // (profile, rate_limit_protection, auto) → protected
    let cases = [
        (ApiKey, None, true, true),
        (ApiKey, Some(false), true, true),
        (ApiKey, Some(true), true, true),
        (ApiKey, None, false, false),
        (ApiKey, Some(false), false, false),
        (ApiKey, Some(true), false, true),
        (Oauth, None, true, false),
        (Oauth, Some(false), true, false),
        (Oauth, Some(true), true, true),
        (Local, None, true, false),
        (Local, Some(true), false, true),
    ];
    for (profile, explicit, auto, want) in cases {
        assert_eq!(
            protection_enabled(profile, explicit, auto),
            want,
            "{profile:?} {explicit:?} {auto}"
        );
    }
}

fn connection(protection: Option<bool>, fail_open: bool) -> Connection {
    Connection {
        id: "c".into(),
        auth: Auth::Passthrough,
        max_concurrent: Some(1),
        model_concurrency: Default::default(),
        disable_cooling: false,
        rate_limit_protection: protection,
        concurrency_fail_open: fail_open,
        egress: "direct".into(),
        low_priority_mode: false,
        auto_limit_reset: false,
        org_uuid: None,
        queue: Default::default(),
        rate_limit_cooldown: None,
    }
}

#[test]
fn enforcement_from_connection() {
    let d = settings(secs(30), secs(600), 0, true);
    let none = QueueOverride::default();
    // (profile, protection, fail_open) → enforcement
    let cases = [
        (Profile::ApiKey, None, true, Enforcement::RateLimitQueue),
        (Profile::ApiKey, None, false, Enforcement::RateLimitQueue),
        (Profile::Oauth, None, true, Enforcement::FailOpen),
        (Profile::Oauth, Some(false), false, Enforcement::Strict),
        (
            Profile::Oauth,
            Some(true),
            false,
            Enforcement::RateLimitQueue,
        ),
    ];
    for (profile, prot, fo, want) in cases {
        let p = QueuePolicy::for_connection(&d, &none, &none, profile, &connection(prot, fo));
        assert_eq!(p.enforcement, want, "{profile:?} {prot:?} {fo}");
    }
}

#[test]
fn fail_open_versus_fail_closed_codes() {
    let t = t0();
    // enforcement → (timeout outcome, full outcome)
    let cases = [
        (
            Enforcement::RateLimitQueue,
            Some((AdmissionCode::QueueTimeout, 429, "RATE_LIMIT_QUEUE_TIMEOUT")),
            Some((AdmissionCode::QueueFull, 429, "RATE_LIMIT_QUEUE_FULL")),
        ),
        (
            Enforcement::Strict,
            Some((AdmissionCode::SemaphoreTimeout, 503, "SEMAPHORE_TIMEOUT")),
            Some((
                AdmissionCode::SemaphoreQueueFull,
                503,
                "SEMAPHORE_QUEUE_FULL",
            )),
        ),
        (Enforcement::FailOpen, None, None),
    ];
    for (e, on_timeout, on_full) in cases {
        let q = policy(secs(2), 1, e);
        let mut gates = vec![conn_gate(Some(1))];
        assert_eq!(arrive(&mut gates, 1, &q, t), Decision::Admit);
        assert!(is_queue(&arrive(&mut gates, 2, &q, t)));
        let full = arrive(&mut gates, 3, &q, t + ms(500));
        let timeout = recheck(&mut gates, 2, &q, t + secs(2));
        for (got, want) in [(full, on_full), (timeout, on_timeout)] {
            match want {
                Some((code, status, wire)) => {
                    assert!(
                        matches!(got, Decision::Reject { code: c, retry_after } if c == code && retry_after >= secs(1)),
                        "{e:?}: {got:?}"
                    );
                    assert_eq!(
                        (code.status(), code.code(), code.has_retry_after()),
                        (status, wire, true)
                    );
                }
                None => assert_eq!(got, Decision::AdmitWithoutPermit, "{e:?}"),
            }
        }
        let c = gates[0].counters;
        if e == Enforcement::FailOpen {
            assert_eq!((c.fail_open_admits, c.timeouts, c.rejections), (2, 0, 0));
            assert_eq!(gates[0].in_flight, 1, "no permit taken");
        } else {
            assert_eq!((c.fail_open_admits, c.timeouts, c.rejections), (0, 1, 1));
        }
        assert_eq!(gates[0].depth(), 0);
    }
}

#[test]
fn free_permit_at_timeout_instant_admits() {
    let t = t0();
    let q = policy(secs(2), 0, Enforcement::Strict);
    let mut gates = vec![conn_gate(Some(1))];
    arrive(&mut gates, 1, &q, t);
    arrive(&mut gates, 2, &q, t);
    release(&mut gates);
    assert_eq!(recheck(&mut gates, 2, &q, t + secs(3)), Decision::Admit);
}

#[test]
fn oldest_wait_leave_and_retry_after_estimate() {
    let t = t0();
    let q = policy(secs(10), 2, Enforcement::RateLimitQueue);
    let mut gates = vec![conn_gate(Some(1))];
    assert_eq!(gates[0].oldest_wait(t), None);
    arrive(&mut gates, 1, &q, t);
    arrive(&mut gates, 2, &q, t + ms(100));
    arrive(&mut gates, 3, &q, t + secs(4));
    assert_eq!(gates[0].oldest_wait(t + secs(7)), Some(ms(6900)));
    // Full: oldest waited 8.6 s of 10 s → 1.4 s → 2 s.
    let d = decide(&gates, &q, t + ms(8700));
    assert_eq!(
        d,
        Decision::Reject {
            code: AdmissionCode::QueueFull,
            retry_after: secs(2)
        }
    );
    // Past max_wait the estimate floors at 1 s.
    let d = decide(&gates, &q, t + secs(60));
    assert!(matches!(d, Decision::Reject { retry_after, .. } if retry_after == secs(1)));
    // A client that leaves frees its place; no counter moves.
    let before = gates[0].counters;
    leave(&mut gates, 2);
    assert_eq!(gates[0].counters, before);
    assert_eq!(gates[0].depth(), 1);
    assert!(is_queue(&decide(&gates, &q, t + secs(5))));
    // Releasing more than was taken saturates at zero.
    release(&mut gates);
    release(&mut gates);
    assert_eq!(gates[0].in_flight, 0);
}

#[test]
fn uncapped_chain_always_admits_and_queue_is_idempotent() {
    let t = t0();
    let q = policy(secs(1), 1, Enforcement::Strict);
    let mut gates = vec![GateState::new(GateKind::Global, None), conn_gate(None)];
    for id in 0..1000 {
        assert_eq!(arrive(&mut gates, id, &q, t), Decision::Admit);
    }
    let mut gates = vec![conn_gate(Some(0))];
    let d = Decision::Queue {
        blocked_by: GateKind::Connection,
    };
    apply(&mut gates, 1, &d, t);
    apply(&mut gates, 1, &d, t + secs(1));
    assert_eq!((gates[0].depth(), gates[0].counters.queued), (1, 1));
}
