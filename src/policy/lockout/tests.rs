//! Table-driven tests for [`Lockouts`] with explicit instants (no clock, no timers).

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn t0() -> Instant {
    ManualClock::new().now()
}

/// Spec defaults, enabled.
fn settings() -> ModelLockoutSettings {
    ModelLockoutSettings {
        enabled: true,
        error_codes: vec![403, 404, 429, 502, 503, 504],
        base_cooldown: secs(120),
        max_cooldown: secs(1800),
        max_backoff_steps: 10,
        exponential: true,
    }
}

fn groups() -> BTreeMap<String, Vec<String>> {
    BTreeMap::from([
        ("claude".to_owned(), vec!["claude-*".to_owned()]),
        ("gpt-5".to_owned(), vec!["gpt-5*".to_owned()]),
        (
            "minis".to_owned(),
            vec!["*-mini".to_owned(), "tiny".to_owned()],
        ),
    ])
}

fn at<'a>(conn: &'a str, model: &'a str, g: &'a BTreeMap<String, Vec<String>>) -> LockTarget<'a> {
    LockTarget {
        provider: "p",
        connection: conn,
        model,
        quota_groups: g,
    }
}

#[test]
fn glob_and_quota_group() {
    let cases = [
        ("*", "", true),
        ("*", "anything", true),
        ("gpt-5*", "gpt-5", true),
        ("gpt-5*", "gpt-5-mini", true),
        ("gpt-5*", "xgpt-5", false),
        ("*-mini", "o3-mini", true),
        ("a*b*c", "aXXbYYc", true),
        ("a*b*c", "aXXbYY", false),
        ("a*b", "abab", true),
        ("exact", "exact", true),
        ("exact", "exactly", false),
        ("", "", true),
        ("", "x", false),
        ("**x", "yx", true),
        ("模型*", "模型-1", true),
    ];
    for (p, s, want) in cases {
        assert_eq!(glob_match(p, s), want, "{p:?} vs {s:?}");
    }
    let g = groups();
    let cases = [
        ("claude-opus", "claude"),
        ("gpt-5", "gpt-5"),
        // Matches "gpt-5" and "minis"; the first in map order wins.
        ("gpt-5-mini", "gpt-5"),
        ("o3-mini", "minis"),
        ("tiny", "minis"),
        ("llama", "llama"),
    ];
    for (model, group) in cases {
        assert_eq!(quota_group(model, &g), group, "{model}");
    }
    assert_eq!(quota_group("m", &BTreeMap::new()), "m");
}

#[test]
fn lock_durations() {
    let s = settings();
    let two_steps = ModelLockoutSettings {
        max_backoff_steps: 2,
        ..settings()
    };
    let flat = ModelLockoutSettings {
        exponential: false,
        ..settings()
    };
    // (settings, failures, hint, expected)
    let cases = [
        (&s, 1, None, secs(120)),
        (&s, 2, None, secs(240)),
        (&s, 3, None, secs(480)),
        (&s, 4, None, secs(960)),
        (&s, 5, None, secs(1800)),
        (&s, u32::MAX, None, secs(1800)),
        (&two_steps, 5, None, secs(480)),
        (&flat, 7, None, secs(120)),
        (&s, 1, Some(secs(27)), secs(120)),
        (&s, 1, Some(secs(600)), secs(600)),
        (&s, 1, Some(secs(7200)), secs(1800)),
        (&s, 1, Some(Duration::MAX), secs(1800)),
    ];
    for (set, n, hint, want) in cases {
        assert_eq!(lock_duration(n, hint, set), want, "{n} {hint:?}");
    }
    let huge = ModelLockoutSettings {
        base_cooldown: Duration::MAX,
        max_cooldown: Duration::MAX,
        max_backoff_steps: u32::MAX,
        ..settings()
    };
    assert_eq!(lock_duration(u32::MAX, None, &huge), Duration::MAX);
    let mut l = Lockouts::default();
    let g = groups();
    let t = t0();
    assert!(l.on_failure(at("c1", "m", &g), Scope::Model, "x", None, &huge, t) > t);
}

#[test]
fn a05_hint_wins_over_a_shorter_base() {
    let s = ModelLockoutSettings {
        base_cooldown: secs(10),
        ..settings()
    };
    let g = groups();
    let t = t0();
    let mut l = Lockouts::default();
    let until = l.on_failure(
        at("c1", "gemini-x", &g),
        Scope::QuotaGroup,
        "rate_limit_exceeded",
        Some(secs(27)),
        &s,
        t,
    );
    assert_eq!(until, t + secs(27));
    assert!(l.locked(at("c1", "gemini-x", &g), t).is_some());
    assert!(l.locked(at("c1", "gemini-y", &g), t).is_none());
}

#[test]
fn not_found_locks_exactly_one_model() {
    let (s, g, t) = (settings(), groups(), t0());
    let mut l = Lockouts::default();
    l.on_failure(
        at("c1", "gpt-5-mini", &g),
        Scope::Model,
        "not_found",
        None,
        &s,
        t,
    );
    assert!(l.locked(at("c1", "gpt-5-mini", &g), t).is_some());
    assert!(l.locked(at("c1", "gpt-5", &g), t).is_none());
    assert!(l.locked(at("c2", "gpt-5-mini", &g), t).is_none());
    // A 404 on a model named like its group does not lock the group's other models.
    l.on_failure(
        at("c1", "gpt-5", &g),
        Scope::Model,
        "not_found",
        None,
        &s,
        t,
    );
    assert!(l.locked(at("c1", "gpt-5", &g), t).is_some());
    assert!(l.locked(at("c1", "gpt-5-pro", &g), t).is_none());
    let v = l.locked(at("c1", "gpt-5-mini", &g), t).unwrap();
    assert_eq!((v.model.as_str(), v.scope), ("gpt-5-mini", Scope::Model));
}

#[test]
fn rate_limit_locks_the_quota_group() {
    let (s, g, t) = (settings(), groups(), t0());
    let mut l = Lockouts::default();
    let until = l.on_failure(
        at("c1", "gpt-5", &g),
        Scope::QuotaGroup,
        "rate_limit_exceeded",
        None,
        &s,
        t,
    );
    assert_eq!(until, t + secs(120));
    for (conn, model, locked) in [
        ("c1", "gpt-5", true),
        ("c1", "gpt-5-mini", true),
        ("c1", "o3", false),
        ("c2", "gpt-5", false),
    ] {
        assert_eq!(
            l.locked(at(conn, model, &g), t).is_some(),
            locked,
            "{conn}/{model}"
        );
    }
    let v = l.list(t);
    assert_eq!(v.len(), 1);
    assert_eq!(
        (v[0].model.as_str(), v[0].scope, v[0].failures),
        ("gpt-5", Scope::QuotaGroup, 1)
    );
    // A later 404 under the same key keeps the wider group scope.
    l.on_failure(
        at("c1", "gpt-5", &g),
        Scope::Model,
        "not_found",
        None,
        &s,
        t,
    );
    let v = l.locked(at("c1", "gpt-5-mini", &g), t).unwrap();
    assert_eq!((v.scope, v.failures), (Scope::QuotaGroup, 2));
}

#[test]
fn triple_scope_locks_only_that_model() {
    let (s, g, t) = (settings(), groups(), t0());
    let mut l = Lockouts::default();
    l.on_failure(
        at("c1", "claude-a", &g),
        Scope::Triple,
        "server_error",
        None,
        &s,
        t,
    );
    assert!(l.locked(at("c1", "claude-a", &g), t).is_some());
    assert!(l.locked(at("c1", "claude-b", &g), t).is_none());
}

#[test]
fn repeated_failures_double_and_never_shorten() {
    let (s, g, t) = (settings(), groups(), t0());
    let mut l = Lockouts::default();
    let m = at("c1", "x", &g);
    let u1 = l.on_failure(m, Scope::Triple, "a", Some(secs(1500)), &s, t);
    assert_eq!(u1, t + secs(1500));
    // Second failure: 240 s < the existing 1500 s deadline: kept, reason kept.
    let u2 = l.on_failure(m, Scope::Triple, "b", None, &s, t + secs(1));
    assert_eq!(u2, u1);
    assert_eq!(l.locked(m, t).unwrap().reason, "a");
    // Expiry re-enables lazily but the count is remembered: the next failure doubles again.
    assert!(l.locked(m, u1 - Duration::from_millis(1)).is_some());
    assert!(l.locked(m, u1).is_none());
    assert!(l.list(u1).is_empty());
    let u3 = l.on_failure(m, Scope::Triple, "c", None, &s, u1);
    assert_eq!(u3, u1 + secs(480));
    assert_eq!(l.locked(m, u1).unwrap().failures, 3);
}

#[test]
fn success_decay_halves_and_removes() {
    let (s, g, t) = (settings(), groups(), t0());
    let mut l = Lockouts::default();
    let m = at("c1", "gpt-5-mini", &g);
    for _ in 0..5 {
        l.on_failure(m, Scope::QuotaGroup, "rate_limit_exceeded", None, &s, t);
    }
    l.on_failure(m, Scope::Model, "not_found", None, &s, t);
    // A success of another model in the group decays the group lock, not the exact lock.
    assert!(l.on_success(at("c1", "gpt-5", &g)));
    let failures: Vec<u32> = l.list(t).iter().map(|v| v.failures).collect();
    assert_eq!(failures, [2, 1]);
    // A success of the model itself decays both: 2 → 1 and 1 → 0 (removed while unexpired).
    assert!(l.on_success(m));
    let v = l.list(t);
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].model.as_str(), v[0].failures), ("gpt-5", 1));
    assert!(l.on_success(m));
    assert!(l.locked(m, t).is_none());
    assert!(l.is_empty());
    assert!(!l.on_success(m));
    // Another connection is untouched.
    l.on_failure(at("c2", "gpt-5", &g), Scope::QuotaGroup, "r", None, &s, t);
    assert!(!l.on_success(m));
    assert_eq!(l.len(), 1);
}

#[test]
fn operator_remove_and_clear_connection() {
    let (s, g, t) = (settings(), groups(), t0());
    let mut l = Lockouts::default();
    l.on_failure(
        at("c1", "gpt-5-mini", &g),
        Scope::QuotaGroup,
        "r",
        None,
        &s,
        t,
    );
    l.on_failure(
        at("c1", "llama", &g),
        Scope::Model,
        "not_found",
        None,
        &s,
        t,
    );
    l.on_failure(
        at("c2", "llama", &g),
        Scope::Model,
        "not_found",
        None,
        &s,
        t,
    );
    assert_eq!(l.for_connection("p", "c1", t).len(), 2);
    // The DELETE key is the group name for group locks.
    assert!(!l.remove("p", "c1", "gpt-5-mini", t));
    assert!(l.remove("p", "c1", "gpt-5", t));
    assert!(l.locked(at("c1", "gpt-5-mini", &g), t).is_none());
    // Expired entries are dropped but not counted.
    l.on_failure(at("c1", "old", &g), Scope::Model, "x", None, &s, t);
    let later = t + secs(121);
    l.on_failure(at("c1", "new", &g), Scope::Model, "x", None, &s, later);
    assert_eq!(l.clear_connection("p", "c1", later), 1);
    assert_eq!(l.len(), 1);
    assert!(l.locked(at("c2", "llama", &g), t).is_some());
    assert_eq!(l.clear_connection("p", "c9", t), 0);
}

#[test]
fn persist_restore_round_trip_and_bounds() {
    let (s, g, t) = (settings(), groups(), t0());
    let mut l = Lockouts::default();
    l.on_failure(at("c1", "gpt-5", &g), Scope::QuotaGroup, "r", None, &s, t);
    l.on_failure(at("c1", "x", &g), Scope::Triple, "e", None, &s, t);
    l.on_failure(at("c1", "x", &g), Scope::Triple, "e", None, &s, t);
    let rec = l.persist();
    assert_eq!(rec.len(), 2);
    assert_eq!(Lockouts::restore(rec.clone()), l);
    // Zero-failure records are skipped; duplicates merge.
    let mut dup = rec.clone();
    dup.push(LockoutRecord {
        failures: 9,
        scope: Scope::QuotaGroup,
        until: t,
        ..rec[1].clone()
    });
    dup.push(LockoutRecord {
        failures: 0,
        model: "zero".into(),
        ..rec[0].clone()
    });
    let r = Lockouts::restore(dup);
    assert_eq!(r.len(), 2);
    let x = r.list(t).into_iter().find(|v| v.model == "x").unwrap();
    assert_eq!(
        (x.failures, x.scope, x.until),
        (9, Scope::QuotaGroup, t + secs(240))
    );

    // Bounded: at the limit, expired entries go first, then the one expiring first.
    let mut l = Lockouts::with_limit(2);
    l.on_failure(at("c1", "a", &g), Scope::Model, "r", Some(secs(600)), &s, t);
    l.on_failure(at("c1", "b", &g), Scope::Model, "r", None, &s, t);
    l.on_failure(at("c1", "c", &g), Scope::Model, "r", Some(secs(900)), &s, t);
    let names: Vec<String> = l.list(t).into_iter().map(|v| v.model).collect();
    assert_eq!(names, ["a", "c"]);

    for scope in [
        Scope::Provider,
        Scope::Connection,
        Scope::QuotaGroup,
        Scope::Model,
        Scope::Triple,
    ] {
        assert_eq!(parse_scope(scope_as_str(scope)), Some(scope));
        assert_eq!(
            serde_json::to_string(&scope).unwrap(),
            format!("\"{}\"", scope_as_str(scope))
        );
    }
    assert_eq!(parse_scope("galaxy"), None);
}

#[test]
fn pages_together_list_exactly_the_live_locks_whatever_the_page_size() {
    let (s, t) = (settings(), t0());
    let mut l = Lockouts::default();
    let empty = BTreeMap::new();
    for i in 0..23 {
        // Every fourth is locked 100 s earlier, so it has expired (120 s) at `later`: it is
        // remembered, not live.
        let when = if i % 4 == 0 { t } else { t + secs(100) };
        let model = format!("m{i:02}");
        l.on_failure(
            at("c1", &model, &empty),
            Scope::Model,
            "not_found",
            None,
            &s,
            when,
        );
    }
    let later = t + secs(150);
    let all = l.list(later);
    assert_eq!(all.len(), 23 - 6);
    for max in [1, 2, 5, 64] {
        let (mut got, mut after) = (Vec::new(), None);
        loop {
            let (page, next) = l.list_page(later, after.as_ref(), max);
            assert!(page.len() <= max);
            got.extend(page);
            match next {
                Some(k) => after = Some(k),
                None => break,
            }
        }
        assert_eq!(got, all, "page size {max}");
    }
}
