//! `request_rejected` locks (§2, §3): per connection and model, doubling per repeat,
//! capped at 1 h, with explicit instants.

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// The file defaults, with lockout mode off and no doubling: the rejection rules must not
/// depend on either.
fn live() -> ModelLockoutSettings {
    ModelLockoutSettings {
        enabled: false,
        error_codes: vec![],
        base_cooldown: secs(120),
        max_cooldown: secs(1800),
        max_backoff_steps: 0,
        exponential: false,
    }
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
fn repeated_rejections_double_the_lock_up_to_one_hour() {
    let s = rejection_settings(&live());
    let groups = BTreeMap::new();
    let mut l = Lockouts::default();
    let mut t = ManualClock::new().now();
    let want = [120, 240, 480, 960, 1920, 3600, 3600, 3600];
    for (i, w) in want.iter().enumerate() {
        let until = l.on_failure(
            at("k1", "model-a", &groups),
            Scope::Model,
            "request_rejected",
            None,
            &s,
            t,
        );
        assert_eq!(until, t + secs(*w), "rejection {}", i + 1);
        let v = l.locked(at("k1", "model-a", &groups), t).expect("locked");
        assert_eq!(
            (v.reason.as_str(), v.failures),
            ("request_rejected", i as u32 + 1)
        );
        // The next one arrives after this lock ran out.
        t = until;
    }
    assert_eq!(REQUEST_REJECTED_MAX_LOCK, secs(3600));
}

#[test]
fn a_rejection_locks_one_model_on_one_connection() {
    let s = rejection_settings(&live());
    let groups = BTreeMap::from([("family".to_owned(), vec!["model-*".to_owned()])]);
    let mut l = Lockouts::default();
    let t = ManualClock::new().now();
    l.on_failure(
        at("k1", "model-a", &groups),
        Scope::Model,
        "request_rejected",
        None,
        &s,
        t,
    );
    assert!(l.locked(at("k1", "model-a", &groups), t).is_some());
    assert!(
        l.locked(at("k1", "model-b", &groups), t).is_none(),
        "same quota group, other model: free"
    );
    assert!(
        l.locked(at("k2", "model-a", &groups), t).is_none(),
        "same model, other connection: free"
    );
}

#[test]
fn the_cap_holds_for_long_bases_and_long_hints() {
    let s = rejection_settings(&ModelLockoutSettings {
        base_cooldown: secs(5 * 3600),
        ..live()
    });
    assert_eq!(lock_duration(1, None, &s), secs(3600));
    let s = rejection_settings(&live());
    assert_eq!(
        lock_duration(1, Some(secs(600)), &s),
        secs(600),
        "hint wins"
    );
    assert_eq!(lock_duration(1, Some(secs(86_400)), &s), secs(3600));
    assert_eq!(lock_duration(u32::MAX, None, &s), secs(3600), "no overflow");
}
