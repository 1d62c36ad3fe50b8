//! Table tests of [`plan`]: one row per rule of the module doc.

use std::time::Duration;

use super::*;
use crate::policy::{Classified, OutcomeClass as O, Scope};

fn outcome(class: O, status: Option<u16>, scope: Scope) -> Classified {
    Classified {
        class,
        status,
        retry_hint: None,
        reason: class.as_str().into(),
        scope,
        restated: None,
        message: String::new(),
        error_rule: None,
    }
}

fn lockout(enabled: bool) -> ModelLockoutSettings {
    ModelLockoutSettings {
        enabled,
        error_codes: vec![403, 404, 429, 502, 503, 504],
        base_cooldown: Duration::from_secs(120),
        max_cooldown: Duration::from_secs(1800),
        max_backoff_steps: 10,
        exponential: true,
    }
}

const CONNS: [ConnectionFacts<'static>; 3] = [
    ConnectionFacts {
        egress: "direct",
        disable_cooling: false,
    },
    ConnectionFacts {
        egress: "direct",
        disable_cooling: false,
    },
    ConnectionFacts {
        egress: "proxy-b",
        disable_cooling: false,
    },
];

/// Knobs of one row: lockout enabled, passthrough, per_model_quota, egress_bucketed.
#[derive(Clone, Copy)]
struct Knobs {
    lockout: bool,
    passthrough: bool,
    per_model_quota: bool,
    egress_bucketed: bool,
}

const OFF: Knobs = Knobs {
    lockout: false,
    passthrough: false,
    per_model_quota: false,
    egress_bucketed: false,
};

fn run(c: &Classified, k: Knobs, conns: &[ConnectionFacts<'_>]) -> ReportPlan {
    run_with(c, k, conns, None)
}

fn run_with(
    c: &Classified,
    k: Knobs,
    conns: &[ConnectionFacts<'_>],
    rule_base_cooldown: Option<Duration>,
) -> ReportPlan {
    let settings = lockout(k.lockout);
    let trip_statuses = StatusSet::of(&crate::config::DEFAULT_TRIP_STATUSES);
    plan(&ReportInput {
        trip_statuses: &trip_statuses,
        rule_base_cooldown,
        outcome: c,
        lockout: &settings,
        passthrough: k.passthrough,
        per_model_quota: k.per_model_quota,
        egress_bucketed: k.egress_bucketed,
        connection: 0,
        connections: conns,
    })
}

fn lock(scope: Scope, connections: &[usize]) -> LockoutStep {
    LockoutStep::Lock {
        scope,
        connections: connections.to_vec(),
        rejection: false,
    }
}

#[test]
fn plan_table() {
    use BreakerStep as B;
    use ConnectionStep as C;
    let on = Knobs {
        lockout: true,
        ..OFF
    };
    let rows: Vec<(&str, Classified, Knobs, B, C, LockoutStep)> = vec![
        (
            "success",
            outcome(O::Success, Some(200), Scope::Triple),
            OFF,
            B::Success,
            C::Success,
            LockoutStep::Decay,
        ),
        (
            "503 counts and cools",
            outcome(O::Transient, Some(503), Scope::Triple),
            OFF,
            B::Failure,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "transport error counts and cools",
            outcome(O::Transient, None, Scope::Triple),
            on,
            B::Failure,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "429 cools only",
            outcome(O::RateLimited, Some(429), Scope::QuotaGroup),
            OFF,
            B::Release,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "529 neither",
            outcome(O::Overloaded, Some(529), Scope::Triple),
            on,
            B::Release,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "empty turn counts for the breaker, only recorded on the connection",
            outcome(O::EmptyTurn, Some(200), Scope::Triple),
            OFF,
            B::Failure,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "empty turn never locks a model, lockout mode or per-model quota",
            outcome(O::EmptyTurn, Some(200), Scope::Triple),
            Knobs {
                lockout: true,
                per_model_quota: true,
                ..OFF
            },
            B::Failure,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "lockout mode: 503 locks the triple instead",
            outcome(O::Transient, Some(503), Scope::Triple),
            on,
            B::Failure,
            C::Untouched,
            lock(Scope::Triple, &[0]),
        ),
        (
            "lockout mode: 429 locks the quota group",
            outcome(O::RateLimited, Some(429), Scope::QuotaGroup),
            on,
            B::Release,
            C::Untouched,
            lock(Scope::QuotaGroup, &[0]),
        ),
        (
            "lockout mode: 404 locks the model",
            outcome(O::NotFound, Some(404), Scope::Model),
            on,
            B::Release,
            C::Untouched,
            lock(Scope::Model, &[0]),
        ),
        (
            "lockout mode: 500 not in error_codes cools",
            outcome(O::Transient, Some(500), Scope::Triple),
            on,
            B::Failure,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "lockout mode: 401 is never a lock",
            outcome(O::Auth, Some(401), Scope::Triple),
            on,
            B::Release,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "rule scope connection cools instead of locking",
            outcome(O::RateLimited, Some(429), Scope::Connection),
            on,
            B::Release,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "rule scope provider locks every connection",
            outcome(O::RateLimited, Some(429), Scope::Provider),
            on,
            B::Release,
            C::Untouched,
            lock(Scope::Provider, &[0, 1, 2]),
        ),
        (
            "per_model_quota: a 429 locks without the switch",
            outcome(O::RateLimited, Some(429), Scope::QuotaGroup),
            Knobs {
                per_model_quota: true,
                ..OFF
            },
            B::Release,
            C::Untouched,
            lock(Scope::QuotaGroup, &[0]),
        ),
        (
            "per_model_quota: quota text locks",
            outcome(O::QuotaExhausted, Some(403), Scope::QuotaGroup),
            Knobs {
                per_model_quota: true,
                ..OFF
            },
            B::Release,
            C::Untouched,
            lock(Scope::QuotaGroup, &[0]),
        ),
        (
            "per_model_quota: a 503 still cools",
            outcome(O::Transient, Some(503), Scope::Triple),
            Knobs {
                per_model_quota: true,
                ..OFF
            },
            B::Failure,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "passthrough 401 leaves the connection",
            outcome(O::Auth, Some(401), Scope::Triple),
            Knobs {
                passthrough: true,
                ..OFF
            },
            B::Release,
            C::Untouched,
            LockoutStep::None,
        ),
        (
            "passthrough ban leaves the connection",
            outcome(O::Banned, Some(403), Scope::QuotaGroup),
            Knobs {
                passthrough: true,
                ..OFF
            },
            B::Release,
            C::Untouched,
            LockoutStep::None,
        ),
        (
            "passthrough 503 still cools",
            outcome(O::Transient, Some(503), Scope::Triple),
            Knobs {
                passthrough: true,
                ..OFF
            },
            B::Failure,
            C::Failure,
            LockoutStep::None,
        ),
        (
            "client fault touches nothing",
            outcome(O::ClientFault, Some(400), Scope::Triple),
            on,
            B::Release,
            C::Untouched,
            LockoutStep::None,
        ),
        (
            "client gone touches nothing",
            outcome(O::ClientGone, None, Scope::Triple),
            on,
            B::Release,
            C::Untouched,
            LockoutStep::None,
        ),
    ];
    for (name, c, k, b, conn, l) in rows {
        let p = run(&c, k, &CONNS);
        assert_eq!((p.breaker, p.connection, p.lockout), (b, conn, l), "{name}");
        assert!(
            p.egress.is_empty(),
            "{name}: no egress fan-out without egress_bucketed"
        );
    }
}

#[test]
fn egress_bucketed_fans_a_429_out_to_the_same_egress_only() {
    let k = Knobs {
        egress_bucketed: true,
        ..OFF
    };
    let p = run(
        &outcome(O::RateLimited, Some(429), Scope::QuotaGroup),
        k,
        &CONNS,
    );
    assert_eq!(p.egress, vec![1], "k2 shares 'direct'; k3 is on proxy-b");
    let p = run(
        &outcome(O::QuotaExhausted, Some(429), Scope::QuotaGroup),
        k,
        &CONNS,
    );
    assert_eq!(p.egress, vec![1]);
    for class in [O::Transient, O::Auth, O::Success, O::Overloaded] {
        let p = run(&outcome(class, Some(503), Scope::Triple), k, &CONNS);
        assert!(p.egress.is_empty(), "{class:?} is not IP-scoped");
    }
    let mut conns = CONNS;
    conns[1].disable_cooling = true;
    let p = run(
        &outcome(O::RateLimited, Some(429), Scope::QuotaGroup),
        k,
        &conns,
    );
    assert!(
        p.egress.is_empty(),
        "disable_cooling connections are skipped"
    );
}

#[test]
fn an_error_rules_base_cooldown_travels_with_a_failure_only() {
    let b = Some(Duration::from_secs(45));
    let c = outcome(O::RateLimited, Some(429), Scope::Connection);
    assert_eq!(run_with(&c, OFF, &CONNS, b).base_cooldown, b);
    let ok = outcome(O::Success, Some(200), Scope::Triple);
    assert_eq!(run_with(&ok, OFF, &CONNS, b).base_cooldown, None);
}

#[test]
fn a_concurrency_limit_cools_the_connection_and_feeds_no_breaker_or_lock() {
    let c = outcome(O::ConcurrencyLimited, Some(429), Scope::QuotaGroup);
    assert!(!O::ConcurrencyLimited.counts_for_breaker());
    for k in [
        OFF,
        Knobs {
            lockout: true,
            ..OFF
        },
        Knobs {
            per_model_quota: true,
            egress_bucketed: true,
            ..OFF
        },
    ] {
        let p = run(&c, k, &CONNS);
        assert_eq!(
            (p.breaker, p.connection, p.lockout),
            (
                BreakerStep::Release,
                ConnectionStep::Failure,
                LockoutStep::None
            )
        );
        assert!(
            p.egress.is_empty(),
            "in-flight limits are per key, not per IP"
        );
    }
}

#[test]
fn a_rejection_locks_the_model_on_its_connection_lockout_mode_or_not() {
    let c = outcome(O::RequestRejected, Some(403), Scope::QuotaGroup);
    let want = LockoutStep::Lock {
        scope: Scope::Model,
        connections: vec![0],
        rejection: true,
    };
    for k in [
        OFF,
        Knobs {
            lockout: true,
            ..OFF
        },
    ] {
        let p = run(&c, k, &CONNS);
        assert_eq!(
            (p.breaker, p.connection, p.lockout.clone()),
            (BreakerStep::Release, ConnectionStep::Failure, want.clone()),
            "the connection records the error; the model is locked"
        );
    }
    let p = run(
        &c,
        Knobs {
            passthrough: true,
            ..OFF
        },
        &CONNS,
    );
    assert_eq!(
        (p.connection, p.lockout),
        (ConnectionStep::Untouched, LockoutStep::None),
        "a client's own key being rejected locks nothing shared"
    );
}

#[test]
fn a_model_scoped_entitlement_rule_locks_the_model_lockout_mode_or_not() {
    let mut c = outcome(O::Forbidden, Some(403), Scope::Model);
    c.error_rule = crate::policy::RuleIndex::new(0);
    let six_hours = Some(Duration::from_secs(6 * 3600));
    for k in [
        OFF,
        Knobs {
            lockout: true,
            ..OFF
        },
    ] {
        let p = run_with(&c, k, &CONNS, six_hours);
        assert_eq!(
            (p.connection, p.lockout.clone(), p.base_cooldown),
            (
                ConnectionStep::Untouched,
                lock(Scope::Model, &[0]),
                six_hours
            ),
            "only the model, for the rule's duration"
        );
    }
    let p = run_with(
        &c,
        Knobs {
            passthrough: true,
            ..OFF
        },
        &CONNS,
        six_hours,
    );
    assert_eq!(p.lockout, LockoutStep::None, "a client's own key");
    let table = outcome(O::Forbidden, Some(403), Scope::Model);
    assert_eq!(
        run_with(&table, OFF, &CONNS, None).lockout,
        LockoutStep::None,
        "without a rule a 403 follows lockout mode"
    );
}
