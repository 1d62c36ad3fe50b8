//! The concurrency-limit and `rate_limit_cooldown` rules of [`Cooldown::on_failure`] (§2),
//! with explicit instants.

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};
use crate::config::resilience::{ConnectionCooldownSettings, CooldownProfile};
use crate::policy::{Classified, OutcomeClass as O, Scope};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn t0() -> Instant {
    ManualClock::new().now()
}

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

/// api_key ladder (3 s, level cap 5) with an optional resolved override.
fn rules(s: &ConnectionCooldownSettings, over: Option<Duration>) -> CooldownRules<'_> {
    CooldownRules {
        profile: CooldownProfile {
            base: secs(3),
            max_backoff_level: 5,
        },
        settings: s,
        oauth: false,
        disable_cooling: false,
        rate_limit_cooldown: over,
    }
}

fn out(class: O, status: u16, hint: Option<Duration>) -> Classified {
    Classified {
        class,
        status: Some(status),
        retry_hint: hint,
        reason: class.as_str().into(),
        scope: Scope::QuotaGroup,
        restated: None,
        message: "upstream said no".into(),
        error_rule: None,
    }
}

/// A connection at backoff level `level` whose last cooldown has lapsed at the returned
/// instant (each step is taken after the previous deadline).
fn at_level(level: u32, r: &CooldownRules<'_>) -> (Cooldown, Instant) {
    let mut c = Cooldown::default();
    let mut t = t0();
    for _ in 0..level {
        c.on_failure(&out(O::Transient, 503, None), t, r, t);
        t += secs(3600);
    }
    assert_eq!(c.backoff_level(), level);
    assert!(c.is_eligible(t));
    (c, t)
}

fn cooling_until(c: &Cooldown, now: Instant) -> Option<Instant> {
    match c.eligibility(now) {
        Eligibility::Cooling { until } => Some(until),
        _ => None,
    }
}

#[test]
fn concurrency_limit_cools_one_second_and_keeps_the_level() {
    let s = settings();
    let r = rules(&s, None);
    let (mut c, t) = at_level(2, &r);
    let e = c.on_failure(&out(O::ConcurrencyLimited, 429, None), t, &r, t);
    assert_eq!(
        e,
        CooldownEffect::Excluded {
            status: ConnectionStatus::Cooling,
            until: t + CONCURRENCY_LIMIT_COOLDOWN,
            backoff_level: 2,
            extended: true,
        }
    );
    assert_eq!(CONCURRENCY_LIMIT_COOLDOWN, secs(1));
    assert_eq!(c.backoff_level(), 2, "the level does not move");
    let v = c.view(t);
    assert_eq!(
        (v.reason.as_str(), v.last_error_kind.as_str()),
        ("concurrency_limited", "concurrency_limited")
    );
    assert!(c.is_eligible(t + secs(1)), "eligible again after 1 s");
    // The next ladder step continues from level 2 (3 s * 2^2).
    let t2 = t + secs(1);
    c.on_failure(&out(O::Transient, 503, None), t2, &r, t2);
    assert_eq!(cooling_until(&c, t2), Some(t2 + secs(12)));
}

#[test]
fn concurrency_limit_honours_the_hint_and_ignores_the_override() {
    let s = settings();
    let r = rules(&s, Some(secs(20)));
    let t = t0();
    let mut hinted = Cooldown::default();
    hinted.on_failure(
        &out(
            O::ConcurrencyLimited,
            429,
            Some(Duration::from_millis(2500)),
        ),
        t,
        &r,
        t,
    );
    assert_eq!(
        cooling_until(&hinted, t),
        Some(t + Duration::from_millis(2500))
    );
    let mut plain = Cooldown::default();
    plain.on_failure(&out(O::ConcurrencyLimited, 429, None), t, &r, t);
    assert_eq!(
        cooling_until(&plain, t),
        Some(t + secs(1)),
        "rate_limit_cooldown is for rate limits only"
    );
    assert_eq!(plain.backoff_level(), 0);
}

#[test]
fn concurrency_limit_obeys_anti_herd_and_disable_cooling() {
    let s = settings();
    let r = rules(&s, None);
    let t = t0();
    let mut c = Cooldown::default();
    c.on_failure(&out(O::Transient, 503, None), t + secs(1), &r, t + secs(1));
    let stale = c.on_failure(&out(O::ConcurrencyLimited, 429, None), t, &r, t + secs(2));
    assert_eq!(stale, CooldownEffect::Stale);
    let off = CooldownRules {
        disable_cooling: true,
        ..r
    };
    let mut d = Cooldown::default();
    assert_eq!(
        d.on_failure(&out(O::ConcurrencyLimited, 429, None), t, &off, t),
        CooldownEffect::Recorded
    );
    assert!(d.is_eligible(t));
}

#[test]
fn rate_limit_override_precedence_table() {
    let (c, p, g) = (Some(secs(5)), Some(secs(20)), Some(secs(90)));
    #[rustfmt::skip]
    let rows = [
        // (connection, provider, global) → resolved
        ((c, p, g), c),
        ((None, p, g), p),
        ((None, None, g), g),
        ((c, None, g), c),
        ((c, p, None), c),
        ((None, None, None), None),
    ];
    for ((conn, prov, glob), want) in rows {
        assert_eq!(
            rate_limit_override(conn, prov, glob),
            want,
            "{conn:?} {prov:?} {glob:?}"
        );
    }
    // Then the cooldown: hint > override > oauth 60 s / ladder.
    let s = settings();
    let t = t0();
    let oauth = |over| CooldownRules {
        oauth: true,
        ..rules(&s, over)
    };
    #[rustfmt::skip]
    let cooldowns: [(&str, CooldownRules<'_>, Option<Duration>, Duration); 5] = [
        ("hint wins over the override", rules(&s, Some(secs(20))), Some(secs(7)), secs(7)),
        ("override without a hint", rules(&s, Some(secs(20))), None, secs(20)),
        ("override wins over oauth's 60 s", oauth(Some(secs(20))), None, secs(20)),
        ("no override: oauth 60 s", oauth(None), None, secs(60)),
        ("no override: the ladder", rules(&s, None), None, secs(3)),
    ];
    for (name, r, hint, want) in cooldowns {
        let mut cd = Cooldown::default();
        cd.on_failure(&out(O::RateLimited, 429, hint), t, &r, t);
        assert_eq!(cooling_until(&cd, t), Some(t + want), "{name}");
    }
}

#[test]
fn applying_the_override_resets_the_level() {
    let s = settings();
    let r = rules(&s, Some(secs(20)));
    let (mut c, t) = at_level(3, &r);
    let e = c.on_failure(&out(O::RateLimited, 429, None), t, &r, t);
    assert_eq!(
        e,
        CooldownEffect::Excluded {
            status: ConnectionStatus::Cooling,
            until: t + secs(20),
            backoff_level: 0,
            extended: true,
        }
    );
    assert_eq!(c.view(t).reason, "rate_limited");
    // A failure sent before the override was applied is stale: no change at all.
    let before = c.clone();
    let stale = c.on_failure(
        &out(O::RateLimited, 429, None),
        t - secs(1),
        &r,
        t + secs(1),
    );
    assert_eq!(stale, CooldownEffect::Stale);
    assert_eq!(
        (cooling_until(&c, t), c.backoff_level()),
        (cooling_until(&before, t), 0)
    );
    // A hinted 429 keeps the level where it is (no reset): the override did not apply.
    let (mut h, th) = at_level(3, &r);
    h.on_failure(&out(O::RateLimited, 429, Some(secs(4))), th, &r, th);
    assert_eq!(h.backoff_level(), 3);
}

#[test]
fn the_override_is_its_own_bound_not_max_cooldown() {
    let s = ConnectionCooldownSettings {
        max_cooldown: secs(60),
        ..settings()
    };
    let r = rules(&s, Some(secs(2 * 3600)));
    let t = t0();
    let mut c = Cooldown::default();
    c.on_failure(&out(O::RateLimited, 429, None), t, &r, t);
    assert_eq!(cooling_until(&c, t), Some(t + secs(2 * 3600)));
}

#[test]
fn the_override_never_applies_to_5xx_quota_forbidden_or_terminal_states() {
    let s = settings();
    let r = rules(&s, Some(secs(20)));
    let t = t0();
    #[rustfmt::skip]
    let rows: [(&str, Classified, Option<Duration>); 4] = [
        ("503 takes the ladder", out(O::Transient, 503, None), Some(secs(3))),
        ("quota text takes the ladder", out(O::QuotaExhausted, 429, None), Some(secs(3))),
        ("403 takes the ladder", out(O::Forbidden, 403, None), Some(secs(3))),
        ("a long hint is a quota wait, not the override", out(O::RateLimited, 429, Some(secs(3600))), None),
    ];
    for (name, o, want) in rows {
        let mut c = Cooldown::default();
        c.on_failure(&o, t, &r, t);
        assert_eq!(cooling_until(&c, t), want.map(|d| t + d), "{name}");
        assert_eq!(
            c.backoff_level(),
            u32::from(want.is_some()),
            "{name}: level"
        );
    }
    let mut quota = Cooldown::default();
    quota.on_failure(&out(O::RateLimited, 429, Some(secs(3600))), t, &r, t);
    assert_eq!(
        quota.eligibility(t),
        Eligibility::QuotaWait {
            until: t + secs(3600)
        }
    );
    let mut banned = Cooldown::default();
    banned.on_failure(&out(O::Banned, 403, None), t, &r, t);
    assert_eq!(
        banned.on_failure(&out(O::RateLimited, 429, None), t, &r, t + secs(1)),
        CooldownEffect::AlreadyTerminal(ConnectionStatus::Banned)
    );
    assert_eq!(
        banned.eligibility(t + secs(86_400)),
        Eligibility::Terminal(ConnectionStatus::Banned)
    );
}
