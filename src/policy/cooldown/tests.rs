//! Table-driven tests for [`Cooldown`] with explicit instants (no clock, no timers).

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::config::resilience::{ConnectionCooldownSettings, CooldownProfile};
use crate::policy::{Classified, OutcomeClass, Scope};

use OutcomeClass as O;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn t0() -> Instant {
    ManualClock::new().now()
}

/// Spec defaults.
fn settings() -> ConnectionCooldownSettings {
    ConnectionCooldownSettings {
        max_cooldown: secs(30 * 60),
        quota_wait_threshold: secs(10 * 60),
        max_quota_wait: secs(7 * 86_400),
        expired_retry_max: 3,
        ban_markers: vec![],
        request_rejected_markers: vec![],
        quota_markers: vec![],
        concurrency_markers: vec![],
        rate_limit_cooldown: None,
        stream_stall_cooldown: false,
    }
}

fn rules(s: &ConnectionCooldownSettings, base: Duration, max_level: u32) -> CooldownRules<'_> {
    CooldownRules {
        profile: CooldownProfile {
            base,
            max_backoff_level: max_level,
        },
        settings: s,
        oauth: false,
        disable_cooling: false,
        rate_limit_cooldown: None,
    }
}

/// api_key defaults: base 3 s, max level 5.
fn api_key(s: &ConnectionCooldownSettings) -> CooldownRules<'_> {
    rules(s, secs(3), 5)
}

/// oauth defaults: base 5 s, max level 8.
fn oauth(s: &ConnectionCooldownSettings) -> CooldownRules<'_> {
    CooldownRules {
        oauth: true,
        ..rules(s, secs(5), 8)
    }
}

fn out(class: OutcomeClass, status: Option<u16>, hint: Option<Duration>) -> Classified {
    Classified {
        class,
        status,
        retry_hint: hint,
        reason: match class {
            O::RateLimited => "rate_limit_exceeded".into(),
            O::Transient => "server_error".into(),
            _ => String::new(),
        },
        scope: Scope::Connection,
        restated: None,
        message: format!("{} from upstream", class.as_str()),
        error_rule: None,
    }
}

fn until_of(e: CooldownEffect) -> Instant {
    match e {
        CooldownEffect::Excluded { until, .. } => until,
        other => panic!("expected an exclusion, got {other:?}"),
    }
}

#[test]
fn a01_in_flight_429_without_hint_extends_a_hinted_deadline() {
    let s = settings();
    // (profile, expected r2 cooldown): api_key → ladder level 0 (3 s); oauth → 60 s.
    let cases = [(api_key(&s), secs(3)), (oauth(&s), secs(60))];
    for (r, expected) in cases {
        let t = t0();
        let mut c = Cooldown::default();
        // r1 and r2 dispatched together at `t`; r1's verdict lands 10 ms later (the clock
        // moves between dispatch and verdict): 429 retry-after 1 s.
        let e1 = c.on_failure(
            &out(O::RateLimited, Some(429), Some(secs(1))),
            t,
            &r,
            t + ms(10),
        );
        assert_eq!(until_of(e1), t + ms(10) + secs(1));
        assert_eq!(
            c.backoff_level(),
            0,
            "a hinted 429 does not raise the level"
        );
        // r2 (in flight, 250 ms later): 429 without a hint.
        let e2 = c.on_failure(&out(O::RateLimited, Some(429), None), t, &r, t + ms(250));
        let CooldownEffect::Excluded {
            until, extended, ..
        } = e2
        else {
            panic!("expected an exclusion, got {e2:?}");
        };
        assert!(extended);
        assert_eq!(until, (t + ms(250) + expected).max(t + ms(10) + secs(1)));
        assert_eq!(c.backoff_level(), 1);
        assert!(matches!(
            c.eligibility(t + ms(1500)),
            Eligibility::Cooling { .. }
        ));
        assert!(c.is_eligible(until));
    }
}

/// Two requests in flight on one connection, both dispatched at `t`: one gets `429
/// retry-after: 30`, the other a bare 429; the first verdict lands at `t + 10 ms`, the second
/// at `t + 210 ms`, in either order. Returns the state after both and the hinted deadline.
fn hinted_and_bare_race(r: &CooldownRules<'_>, hinted_first: bool) -> (Cooldown, Instant, Instant) {
    let t = t0();
    let (first, second) = (t + ms(10), t + ms(210));
    let (at_hint, at_bare) = if hinted_first {
        (first, second)
    } else {
        (second, first)
    };
    let hinted = out(O::RateLimited, Some(429), Some(secs(30)));
    let bare = out(O::RateLimited, Some(429), None);
    let mut c = Cooldown::default();
    let mut verdicts = [(at_hint, &hinted), (at_bare, &bare)];
    verdicts.sort_by_key(|(at, _)| *at);
    for (at, o) in verdicts {
        let e = c.on_failure(o, t, r, at);
        assert!(
            matches!(e, CooldownEffect::Excluded { .. }),
            "hinted first: {hinted_first}; verdict at +{:?}: {e:?}",
            at - t
        );
    }
    (c, t, at_hint + secs(30))
}

#[test]
fn a_hinted_cooldown_and_a_racing_bare_429_agree_in_either_order() {
    let s = settings();
    // (profile, its hint-less 429 cooldown at level 0): api_key's ladder step is shorter than
    // the hint, so the hinted deadline stands; oauth's 60 s is longer, so it wins (max rule).
    for (name, r, step) in [
        ("api_key", api_key(&s), secs(3)),
        ("oauth", oauth(&s), secs(60)),
    ] {
        for hinted_first in [true, false] {
            let (mut c, t, hinted) = hinted_and_bare_race(&r, hinted_first);
            let at_bare = if hinted_first {
                t + ms(210)
            } else {
                t + ms(10)
            };
            let want = hinted.max(at_bare + step);
            let case = format!("{name}, hinted first: {hinted_first}");
            assert_eq!(
                c.eligibility(t + ms(300)),
                Eligibility::Cooling { until: want },
                "{case}"
            );
            assert_eq!(
                c.backoff_level(),
                1,
                "{case}: one ladder step for the burst"
            );
            // A third failure of the same burst changes nothing.
            let third = c.on_failure(&out(O::RateLimited, Some(429), None), t, &r, t + ms(400));
            assert_eq!(third, CooldownEffect::Stale, "{case}");
            assert_eq!(
                (c.eligibility(t + ms(400)), c.backoff_level()),
                (Eligibility::Cooling { until: want }, 1),
                "{case}"
            );
            assert!(!c.is_eligible(want - ms(1)), "{case}");
            assert!(c.is_eligible(want), "{case}");
        }
    }
}

#[test]
fn a_later_shorter_deadline_never_shortens_a_cooldown() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    c.on_failure(&out(O::RateLimited, Some(429), Some(secs(10))), t, &r, t);
    let e = c.on_failure(
        &out(O::RateLimited, Some(429), Some(secs(2))),
        t,
        &r,
        t + ms(1),
    );
    assert_eq!(
        e,
        CooldownEffect::Excluded {
            status: ConnectionStatus::Cooling,
            until: t + secs(10),
            backoff_level: 0,
            extended: false,
        }
    );
    // A non-stale ladder step shorter than the live deadline keeps the deadline too.
    let e = c.on_failure(
        &out(O::Transient, Some(503), None),
        t + ms(5),
        &r,
        t + ms(6),
    );
    assert_eq!(until_of(e), t + secs(10));
    assert_eq!(c.backoff_level(), 1);
}

#[test]
fn a02_a_burst_raises_the_level_once_and_is_capped() {
    let mut s = settings();
    s.max_cooldown = secs(600);
    let r = rules(&s, secs(5), 8);
    let t = t0();
    let mut c = Cooldown::default();
    let mut effects = Vec::new();
    for i in 0..8u64 {
        effects.push(c.on_failure(
            &out(O::RateLimited, Some(429), None),
            t,
            &r,
            t + ms(1 + i * 7),
        ));
    }
    assert_eq!(until_of(effects[0]), t + ms(1) + secs(5));
    assert!(effects[1..].iter().all(|e| *e == CooldownEffect::Stale));
    assert_eq!(c.backoff_level(), 1);
    assert!(!c.is_eligible(t + secs(5)));
    assert!(c.is_eligible(t + ms(1) + secs(5)));

    // A fresh failure after expiry takes the next step: 10 s, level 2.
    let t1 = t + secs(6);
    assert_eq!(
        until_of(c.on_failure(&out(O::Transient, Some(503), None), t1, &r, t1)),
        t1 + secs(10)
    );
    assert_eq!(c.backoff_level(), 2);

    // Huge base: capped at max_cooldown at every level, level capped at max_backoff_level.
    let r = rules(&s, secs(60), 8);
    let mut c = Cooldown::default();
    let mut t = t0();
    for _ in 0..20 {
        let until = until_of(c.on_failure(&out(O::Transient, Some(500), None), t, &r, t));
        assert!(until - t <= secs(600));
        t = until;
    }
    assert_eq!(c.backoff_level(), 8);
}

#[test]
fn a03_backoff_persists_across_expiry_and_resets_only_on_success() {
    let s = settings();
    let r = oauth(&s);
    let quota = Classified {
        message: "subscription quota exceeded".into(),
        ..out(O::QuotaExhausted, Some(429), None)
    };
    let start = t0();
    let mut c = Cooldown::default();
    let mut calls = Vec::new();
    let mut cooldowns = Vec::new();
    for step in 0..30u64 {
        let now = start + secs(step * 2);
        if !c.is_eligible(now) {
            continue;
        }
        calls.push(now - start);
        let until = until_of(c.on_failure(&quota, now, &r, now));
        cooldowns.push(until - now);
        assert_eq!(c.view(now).reason, "quota_exhausted");
    }
    assert_eq!(cooldowns, [secs(5), secs(10), secs(20), secs(40)]);
    assert!((4..=5).contains(&calls.len()), "{calls:?}");
    assert_eq!(c.backoff_level(), 4);
    assert!(c.on_success());
    assert_eq!(c.backoff_level(), 0);
    let now = start + secs(120);
    assert_eq!(
        until_of(c.on_failure(&quota, now, &r, now)),
        now + secs(5),
        "back to the base after a success"
    );
}

#[test]
fn overload_not_found_empty_turn_and_client_outcomes_never_cool() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let cases = [
        (O::Overloaded, Some(529), CooldownEffect::Recorded),
        (O::NotFound, Some(404), CooldownEffect::Recorded),
        (O::EmptyTurn, Some(200), CooldownEffect::Recorded),
        (O::ClientFault, Some(400), CooldownEffect::Ignored),
        (O::ClientGone, None, CooldownEffect::Ignored),
        (O::Success, Some(200), CooldownEffect::Ignored),
    ];
    for (class, status, expected) in cases {
        let mut c = Cooldown::default();
        assert_eq!(c.on_failure(&out(class, status, None), t, &r, t), expected);
        assert!(c.is_eligible(t), "{class:?}");
        assert_eq!(c.backoff_level(), 0);
        let v = c.view(t);
        if expected == CooldownEffect::Recorded {
            assert_eq!(v.last_status, status);
            assert_eq!(v.last_error_kind, class.as_str());
        } else {
            assert_eq!(v.last_failure_at, None);
        }
    }
}

#[test]
fn quota_wait_versus_cooling() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    use ConnectionStatus::{Cooling, QuotaWait};
    // (class, hint, expected status, expected duration, expected level after)
    let cases = [
        (
            O::RateLimited,
            Some(secs(20 * 60)),
            QuotaWait,
            secs(20 * 60),
            0,
        ),
        (
            O::QuotaExhausted,
            Some(secs(7200)),
            QuotaWait,
            secs(7200),
            0,
        ),
        (O::Forbidden, Some(secs(3600)), QuotaWait, secs(3600), 0),
        (
            O::QuotaExhausted,
            Some(secs(30 * 86_400)),
            QuotaWait,
            secs(7 * 86_400),
            0,
        ),
        (
            O::RateLimited,
            Some(Duration::MAX),
            QuotaWait,
            secs(7 * 86_400),
            0,
        ),
        (O::QuotaExhausted, None, Cooling, secs(3), 1),
        (O::QuotaExhausted, Some(secs(26)), Cooling, secs(26), 1),
        (O::RateLimited, Some(secs(30)), Cooling, secs(30), 0),
        (O::RateLimited, Some(secs(600)), Cooling, secs(600), 0),
        (O::RateLimited, Some(Duration::ZERO), Cooling, secs(3), 1),
        (O::Forbidden, None, Cooling, secs(3), 1),
        (O::Transient, Some(secs(20)), Cooling, secs(20), 1),
    ];
    for (class, hint, status, d, level) in cases {
        let mut c = Cooldown::default();
        let e = c.on_failure(&out(class, Some(429), hint), t, &r, t);
        assert_eq!(
            e,
            CooldownEffect::Excluded {
                status,
                until: t + d,
                backoff_level: level,
                extended: true,
            },
            "{class:?} {hint:?}"
        );
        let expected = match status {
            QuotaWait => Eligibility::QuotaWait { until: t + d },
            _ => Eligibility::Cooling { until: t + d },
        };
        assert_eq!(c.eligibility(t), expected);
        assert_eq!(c.view(t).status, status);
        assert_eq!(c.view(t).remaining, d);
    }
}

#[test]
fn a_cooling_deadline_is_capped_at_max_cooldown() {
    let mut s = settings();
    s.quota_wait_threshold = secs(3600);
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    // 45 min hint below a 1 h threshold: cooling, capped at 30 min.
    let e = c.on_failure(&out(O::RateLimited, Some(429), Some(secs(2700))), t, &r, t);
    assert_eq!(until_of(e), t + secs(1800));
}

#[test]
fn third_consecutive_401_expires_unless_a_success_intervenes() {
    let s = settings();
    let r = api_key(&s);
    let auth = out(O::Auth, Some(401), None);
    // Each failure is a fresh dispatch after the previous cooldown expired.
    let run = |script: &str| {
        let mut c = Cooldown::default();
        let mut now = t0();
        for step in script.chars() {
            now += secs(3600);
            match step {
                'F' => {
                    c.on_failure(&auth, now, &r, now);
                }
                _ => {
                    c.on_success();
                }
            }
        }
        (c.status(), c.view(now).consecutive_auth_failures)
    };
    assert_eq!(run("F"), (ConnectionStatus::Cooling, 1));
    assert_eq!(run("FF"), (ConnectionStatus::Cooling, 2));
    assert_eq!(run("FFF"), (ConnectionStatus::Expired, 3));
    assert_eq!(run("FFSFF"), (ConnectionStatus::Cooling, 2));
    assert_eq!(run("FFSFFF"), (ConnectionStatus::Expired, 3));
}

#[test]
fn a_burst_of_401s_counts_once() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    for i in 0..5u64 {
        c.on_failure(&out(O::Auth, Some(401), None), t, &r, t + ms(1 + i));
    }
    assert_eq!(c.status(), ConnectionStatus::Cooling);
    assert_eq!(c.view(t).consecutive_auth_failures, 1);
}

#[test]
fn rejections_are_recorded_and_counted_but_never_cool_or_ban() {
    let s = settings();
    let r = api_key(&s);
    let rejected = out(O::RequestRejected, Some(403), None);
    let mut c = Cooldown::default();
    let t = t0();
    for i in 0..5u64 {
        let at = t + secs(60 * i);
        assert_eq!(
            c.on_failure(&rejected, at, &r, at),
            CooldownEffect::Recorded
        );
        assert_eq!(c.eligibility(at), Eligibility::Eligible, "rejection {i}");
    }
    let v = c.view(t + secs(300));
    assert_eq!(v.status, ConnectionStatus::Active);
    assert_eq!(v.consecutive_rejections, 5);
    assert_eq!(v.backoff_level, 0);
    assert_eq!(v.last_error_kind, "request_rejected");
}

#[test]
fn markers_and_402_are_terminal_at_once() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let cases = [
        (
            O::CreditsExhausted,
            Some(402),
            ConnectionStatus::CreditsExhausted,
        ),
        (O::Banned, Some(403), ConnectionStatus::Banned),
    ];
    for (class, status, terminal) in cases {
        let mut c = Cooldown::default();
        // Already cooling, and the terminal outcome comes from a stale request: still applies.
        c.on_failure(&out(O::Transient, Some(503), None), t, &r, t + ms(10));
        let e = c.on_failure(&out(class, status, None), t, &r, t + ms(20));
        assert_eq!(e, CooldownEffect::Terminal(terminal));
        assert_eq!(c.eligibility(t), Eligibility::Terminal(terminal));
        assert_eq!(c.view(t).status, terminal);
        assert_eq!(c.view(t).until, None);
    }
}

#[test]
fn terminal_states_are_never_overwritten() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    c.on_failure(&out(O::CreditsExhausted, Some(402), None), t, &r, t);
    let later = [
        out(O::Transient, Some(503), None),
        out(O::RateLimited, Some(429), Some(secs(5))),
        out(O::QuotaExhausted, Some(429), Some(secs(86_400))),
        out(O::Banned, Some(403), None),
        out(O::Auth, Some(401), None),
    ];
    for (i, o) in later.iter().enumerate() {
        let now = t + secs(10 * (i as u64 + 1));
        assert_eq!(
            c.on_failure(o, now, &r, now),
            CooldownEffect::AlreadyTerminal(ConnectionStatus::CreditsExhausted)
        );
        assert_eq!(c.view(now).last_error_kind, o.class.as_str());
    }
    assert!(!c.on_success(), "a success does not clear a terminal state");
    assert_eq!(c.status(), ConnectionStatus::CreditsExhausted);
    assert_eq!(c.clear(t), ClearResult::SkippedTerminal);
    assert!(c.reset_terminal());
    assert!(c.is_eligible(t));
    assert_eq!(c.view(t).consecutive_auth_failures, 0);
    assert!(!c.reset_terminal());
}

#[test]
fn operator_clear() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    // Cooling → cleared, level reset.
    let mut c = Cooldown::default();
    c.on_failure(&out(O::Transient, Some(502), None), t, &r, t);
    assert_eq!(c.clear(t + secs(1)), ClearResult::Cleared);
    assert!(c.is_eligible(t + secs(1)));
    assert_eq!(c.backoff_level(), 0);
    assert_eq!(c.view(t).last_status, Some(502), "history kept");
    // Quota wait → cleared.
    let mut c = Cooldown::default();
    c.on_failure(&out(O::RateLimited, Some(429), Some(secs(3600))), t, &r, t);
    assert_eq!(c.clear(t), ClearResult::Cleared);
    // Expired cooling and active → unchanged.
    let mut c = Cooldown::default();
    c.on_failure(&out(O::Transient, Some(502), None), t, &r, t);
    assert_eq!(c.clear(t + secs(3)), ClearResult::Unchanged);
    assert_eq!(c.backoff_level(), 1);
    assert_eq!(Cooldown::default().clear(t), ClearResult::Unchanged);
}

#[test]
fn disable_cooling_records_but_never_cools() {
    let s = settings();
    let r = CooldownRules {
        disable_cooling: true,
        ..api_key(&s)
    };
    let t = t0();
    for (class, hint) in [
        (O::Transient, None),
        (O::RateLimited, Some(secs(5))),
        (O::RateLimited, None),
        (O::QuotaExhausted, Some(secs(86_400))),
        (O::Forbidden, None),
    ] {
        let mut c = Cooldown::default();
        assert_eq!(
            c.on_failure(&out(class, Some(429), hint), t, &r, t),
            CooldownEffect::Recorded
        );
        assert!(c.is_eligible(t));
        assert_eq!(c.backoff_level(), 0);
        assert_eq!(c.view(t).last_error_kind, class.as_str());
    }
    // Terminal states still apply.
    let mut c = Cooldown::default();
    c.on_failure(&out(O::CreditsExhausted, Some(402), None), t, &r, t);
    assert_eq!(c.status(), ConnectionStatus::CreditsExhausted);
    let mut c = Cooldown::default();
    for i in 1..=3u64 {
        let now = t + secs(i);
        c.on_failure(&out(O::Auth, Some(401), None), now, &r, now);
    }
    assert_eq!(c.status(), ConnectionStatus::Expired);
}

#[test]
fn stream_stalls_cool_only_when_enabled() {
    let mut s = settings();
    let t = t0();
    let stall = out(O::StreamStall, Some(200), None);
    let mut c = Cooldown::default();
    assert_eq!(
        c.on_failure(&stall, t, &api_key(&s), t),
        CooldownEffect::Recorded
    );
    assert!(c.is_eligible(t));
    assert_eq!(c.view(t).last_error_kind, "stream_stall");
    s.stream_stall_cooldown = true;
    let mut c = Cooldown::default();
    assert_eq!(
        until_of(c.on_failure(&stall, t, &api_key(&s), t)),
        t + secs(3)
    );
}

#[test]
fn huge_values_saturate_instead_of_panicking() {
    let mut s = settings();
    s.max_cooldown = Duration::MAX;
    s.max_quota_wait = Duration::MAX;
    s.quota_wait_threshold = Duration::MAX;
    let r = rules(&s, Duration::MAX, u32::MAX);
    let t = t0();
    let mut c = Cooldown::default();
    for i in 0..40u64 {
        let now = t + secs(i);
        c.on_failure(&out(O::Transient, Some(500), None), now, &r, now);
        c.clear(now);
        c.on_failure(
            &out(O::RateLimited, Some(429), Some(Duration::MAX)),
            now,
            &r,
            now,
        );
    }
    assert!(!c.is_eligible(t + secs(86_400 * 365)));
    s.quota_wait_threshold = secs(1);
    let r = rules(&s, Duration::MAX, u32::MAX);
    c.on_failure(
        &out(O::QuotaExhausted, Some(429), Some(Duration::MAX)),
        t,
        &r,
        t,
    );
    assert_eq!(doubled(secs(1), 64), Duration::MAX);
    assert_eq!(doubled(secs(3), 2), secs(12));
    assert_eq!(doubled(Duration::ZERO, 64), Duration::ZERO);
    assert!(deadline_after(t, Duration::MAX) > t);
}

#[test]
fn lowering_max_backoff_level_takes_effect_at_once() {
    let s = settings();
    let t = t0();
    let mut c = Cooldown::default();
    let wide = rules(&s, secs(1), 10);
    for i in 0..6u64 {
        let now = t + secs(100 * i);
        c.on_failure(&out(O::Transient, Some(500), None), now, &wide, now);
    }
    assert_eq!(c.backoff_level(), 6);
    let narrow = rules(&s, secs(1), 2);
    let now = t + secs(1000);
    let until = until_of(c.on_failure(&out(O::Transient, Some(500), None), now, &narrow, now));
    assert_eq!(until, now + secs(4));
    assert_eq!(c.backoff_level(), 2);
}

#[test]
fn view_is_lazy_and_persist_round_trips() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    let long = Classified {
        message: "x".repeat(1000),
        ..out(O::Transient, Some(503), None)
    };
    c.on_failure(&long, t, &r, t);
    let v = c.view(t + secs(1));
    assert_eq!(v.status, ConnectionStatus::Cooling);
    assert_eq!(v.remaining, secs(2));
    assert_eq!(v.reason, "server_error");
    assert_eq!(v.last_error.chars().count(), MAX_ERROR_CHARS);
    // Past the deadline: effective status active, stored status still cooling.
    let v = c.view(t + secs(3));
    assert_eq!(v.status, ConnectionStatus::Active);
    assert_eq!(
        (v.until, v.remaining, v.backoff_level),
        (None, Duration::ZERO, 1)
    );
    assert_eq!(c.status(), ConnectionStatus::Cooling);

    let rec = c.persist();
    assert_eq!(Cooldown::restore(rec.clone()), c);
    assert_eq!(Cooldown::restore(rec).persist(), c.persist());

    // Normalization of inconsistent records.
    let bad = CooldownRecord {
        status: ConnectionStatus::Cooling,
        cooldown_until: None,
        ..CooldownRecord::default()
    };
    assert_eq!(Cooldown::restore(bad).status(), ConnectionStatus::Active);
    let bad = CooldownRecord {
        status: ConnectionStatus::Banned,
        cooldown_until: Some(t),
        ..CooldownRecord::default()
    };
    assert_eq!(Cooldown::restore(bad).persist().cooldown_until, None);
}

#[test]
fn status_spelling_round_trips() {
    use ConnectionStatus as S;
    for s in [
        S::Active,
        S::Cooling,
        S::QuotaWait,
        S::Banned,
        S::Expired,
        S::CreditsExhausted,
    ] {
        assert_eq!(S::parse(s.as_str()), Some(s));
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            format!("\"{}\"", s.as_str())
        );
    }
    assert_eq!(S::parse("frozen"), None);
    assert_eq!(truncate_chars("héllo", 2), "hé");
}

#[test]
fn a_stale_failure_applies_its_upstream_hint_but_takes_no_ladder_step() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    // Requests sent together at `t`; the first verdict (a bare 429, 10 ms later) takes a
    // ladder step: 3 s, level 1, and every other request of the burst is now stale.
    let first = c.on_failure(&out(O::RateLimited, Some(429), None), t, &r, t + ms(10));
    assert_eq!(until_of(first), t + ms(10) + secs(3));
    // A stale 429 saying "retry in 60 s" is an upstream fact: it extends (max rule) but does
    // not raise the level.
    let second = c.on_failure(
        &out(O::RateLimited, Some(429), Some(secs(60))),
        t,
        &r,
        t + ms(20),
    );
    assert_eq!(
        second,
        CooldownEffect::Excluded {
            status: ConnectionStatus::Cooling,
            until: t + ms(20) + secs(60),
            backoff_level: 1,
            extended: true,
        }
    );
    // A shorter stale hint never shortens it.
    let third = c.on_failure(
        &out(O::RateLimited, Some(429), Some(secs(5))),
        t,
        &r,
        t + ms(30),
    );
    assert_eq!(until_of(third), t + ms(20) + secs(60));
    // A stale long hint is a quota wait until the reset.
    let fourth = c.on_failure(
        &out(O::QuotaExhausted, Some(429), Some(secs(3600))),
        t,
        &r,
        t + ms(40),
    );
    assert_eq!(
        c.eligibility(t + ms(50)),
        Eligibility::QuotaWait {
            until: t + ms(40) + secs(3600)
        },
        "{fourth:?}"
    );
    // Our own guesses stay anti-herd: a stale 503 (its hint only floors a ladder step) and
    // a stale bare 429 change nothing.
    for o in [
        out(O::Transient, Some(503), Some(secs(7200))),
        out(O::RateLimited, Some(429), None),
    ] {
        assert_eq!(c.on_failure(&o, t, &r, t + ms(60)), CooldownEffect::Stale);
    }
    assert_eq!(c.backoff_level(), 1);
    // A request sent after the ladder step takes the next one (the deadline stays the later).
    let t1 = t + ms(70);
    let fresh = c.on_failure(&out(O::Transient, Some(503), None), t1, &r, t1 + ms(5));
    assert_eq!(until_of(fresh), t + ms(40) + secs(3600));
    assert_eq!(c.backoff_level(), 2);
}

#[test]
fn lapsed_deadline_is_the_passed_deadline_until_a_success_or_clear() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    assert_eq!(c.lapsed_deadline(t), None, "never cooled");
    let until = until_of(c.on_failure(&out(O::Transient, Some(503), None), t, &r, t));
    assert_eq!(c.lapsed_deadline(t), None, "still cooling");
    assert_eq!(
        c.lapsed_deadline(until),
        Some(until),
        "eligible again at the deadline"
    );
    assert_eq!(c.lapsed_deadline(until + secs(60)), Some(until));
    assert!(c.on_success());
    assert_eq!(
        c.lapsed_deadline(until + secs(60)),
        None,
        "a success resets it"
    );
    c.on_failure(&out(O::Transient, Some(503), None), t, &r, t);
    c.clear(t);
    assert_eq!(
        c.lapsed_deadline(until + secs(60)),
        None,
        "an operator clear too"
    );
}

#[test]
fn cooling_cause_names_the_failure_behind_the_live_deadline() {
    let s = settings();
    let r = api_key(&s);
    let t = t0();
    let mut c = Cooldown::default();
    assert_eq!(c.cooling_cause(t), None, "never failed");

    // A 401 cools on the ladder (3 s): the exclusion is the auth failure's.
    c.on_failure(&out(O::Auth, Some(401), None), t, &r, t);
    assert_eq!(c.cooling_cause(t + secs(1)), Some(O::Auth));

    // A stale 429 from the same burst is recorded but changes neither deadline nor cause.
    let stale = c.on_failure(
        &out(O::RateLimited, Some(429), None),
        t - ms(10),
        &r,
        t + ms(500),
    );
    assert_eq!(stale, CooldownEffect::Stale);
    assert_eq!(c.view(t + secs(1)).last_error_kind, "rate_limited");
    assert_eq!(c.cooling_cause(t + secs(1)), Some(O::Auth));

    // Restored from the store, the last recorded failure stands in for the class.
    let restored = Cooldown::restore(c.persist());
    assert_eq!(restored.cooling_cause(t + secs(1)), Some(O::RateLimited));

    // No live deadline, no cause: lapsed, cleared, or after a success.
    assert_eq!(c.cooling_cause(t + secs(3)), None, "lapsed");
    let mut cleared = c.clone();
    assert_eq!(cleared.clear(t + secs(1)), ClearResult::Cleared);
    assert_eq!(cleared.cooling_cause(t + secs(1)), None);

    // After the 401's cooldown a 429 with a hint takes over the exclusion and its cause.
    let t2 = t + secs(3);
    c.on_failure(&out(O::RateLimited, Some(429), Some(secs(20))), t2, &r, t2);
    assert_eq!(c.cooling_cause(t2 + secs(1)), Some(O::RateLimited));
    c.on_success();
    assert_eq!(c.cooling_cause(t2 + secs(1)), None);

    // A generic 403 is an auth failure too; a terminal state has no cooling cause.
    let mut f = Cooldown::default();
    f.on_failure(&out(O::Forbidden, Some(403), None), t, &r, t);
    assert_eq!(f.cooling_cause(t), Some(O::Forbidden));
    f.on_failure(
        &out(O::Banned, Some(403), None),
        t + secs(5),
        &r,
        t + secs(5),
    );
    assert_eq!(f.cooling_cause(t + secs(5)), None);
}

#[test]
fn every_outcome_class_round_trips_through_its_word() {
    for class in OutcomeClass::ALL {
        assert_eq!(OutcomeClass::from_word(class.as_str()), Some(class));
    }
    assert_eq!(OutcomeClass::from_word(""), None);
    assert_eq!(OutcomeClass::from_word("auth_error"), None);
}
