//! Unit tests for fault specs, validation and expiry, driven by a [`ManualClock`].

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn conn(p: u32, c: u32) -> FaultTarget {
    FaultTarget {
        provider: ProviderKey(p),
        connection: Some(ConnSlot(c)),
    }
}

fn key(p: u32, c: u32) -> ConnKey {
    ConnKey::new(p, c)
}

#[test]
fn parses_every_kind_with_defaults() {
    let none = FaultParams::default();
    assert_eq!(
        parse_kind("latency", &none),
        Ok(FaultKind::Latency(DEFAULT_LATENCY))
    );
    assert_eq!(
        parse_kind("429", &none),
        Ok(FaultKind::Status {
            status: 429,
            retry_after: Some(DEFAULT_RETRY_AFTER)
        })
    );
    for s in [500, 503, 529] {
        assert_eq!(
            parse_kind(&s.to_string(), &none),
            Ok(FaultKind::Status {
                status: s,
                retry_after: None
            })
        );
    }
    assert_eq!(parse_kind("RESET", &none), Ok(FaultKind::Reset));
    assert_eq!(
        parse_kind("stall", &none),
        Ok(FaultKind::Stall {
            frames: DEFAULT_STALL_FRAMES
        })
    );
    assert_eq!(parse_kind("zombie", &none), Ok(FaultKind::Zombie));
    let p = FaultParams {
        retry_after: Some(secs(7)),
        ..Default::default()
    };
    assert_eq!(
        parse_kind("429", &p).map(|k| k.describe()),
        Ok("429 retry-after 7s".to_string())
    );
}

#[test]
fn refuses_unknown_kinds_and_misplaced_params() {
    let none = FaultParams::default();
    for bad in ["404", "boom", "", "200"] {
        let e = parse_kind(bad, &none).unwrap_err();
        assert_eq!(e.field, "kind", "{bad}");
        assert!(e.message.contains("latency, 429"), "{}", e.message);
    }
    let frames = FaultParams {
        frames: Some(3),
        ..Default::default()
    };
    assert_eq!(
        parse_kind("503", &frames).unwrap_err().field,
        "params.frames"
    );
    let delay = FaultParams {
        delay: Some(secs(1)),
        ..Default::default()
    };
    assert_eq!(
        parse_kind("zombie", &delay).unwrap_err().field,
        "params.delay"
    );
    let retry = FaultParams {
        retry_after: Some(secs(1)),
        ..Default::default()
    };
    assert_eq!(
        parse_kind("503", &retry).unwrap_err().field,
        "params.retry_after"
    );
    let zero = FaultParams {
        delay: Some(Duration::ZERO),
        ..Default::default()
    };
    assert_eq!(
        parse_kind("latency", &zero).unwrap_err().field,
        "params.delay"
    );
}

#[test]
fn duration_defaults_to_60s_and_is_bounded() {
    assert_eq!(check_duration(None), Ok(secs(60)));
    assert_eq!(check_duration(Some(secs(1))), Ok(secs(1)));
    assert_eq!(check_duration(Some(secs(600))), Ok(secs(600)));
    let over = check_duration(Some(secs(601))).unwrap_err();
    assert_eq!(over.field, "duration");
    assert!(over.message.contains("10m"), "{}", over.message);
    assert!(check_duration(Some(Duration::from_millis(999))).is_err());
}

#[test]
fn a_fault_expires_on_the_clock() {
    let clock = ManualClock::new();
    let mut set = FaultSet::default();
    let f = set.inject(conn(0, 1), "p/c", FaultKind::Reset, secs(60), clock.now());
    assert_eq!(f.id, 1);
    assert!(set.active_for(key(0, 1), clock.now()).is_some());
    assert!(
        set.active_for(key(0, 0), clock.now()).is_none(),
        "other connection"
    );
    assert!(
        set.active_for(key(1, 1), clock.now()).is_none(),
        "other provider"
    );
    clock.advance(secs(42));
    assert_eq!(set.active(clock.now())[0].remaining(clock.now()), secs(18));
    clock.advance(secs(18));
    assert!(
        set.active_for(key(0, 1), clock.now()).is_none(),
        "expired at 60s"
    );
    assert!(set.active(clock.now()).is_empty());
}

#[test]
fn a_connection_fault_wins_over_its_providers_and_same_target_replaces() {
    let clock = ManualClock::new();
    let now = clock.now();
    let mut set = FaultSet::default();
    let provider = FaultTarget {
        provider: ProviderKey(0),
        connection: None,
    };
    set.inject(provider, "p", FaultKind::Zombie, secs(60), now);
    set.inject(conn(0, 1), "p/b", FaultKind::Reset, secs(60), now);
    assert_eq!(
        set.active_for(key(0, 1), now).map(|f| f.kind),
        Some(FaultKind::Reset)
    );
    assert_eq!(
        set.active_for(key(0, 0), now).map(|f| f.kind),
        Some(FaultKind::Zombie)
    );
    let again = set.inject(conn(0, 1), "p/b", FaultKind::Zombie, secs(5), now);
    assert_eq!(again.id, 3);
    assert_eq!(set.active(now).len(), 2, "replaced, not added");
}

#[test]
fn clears_by_id_target_or_all() {
    let clock = ManualClock::new();
    let now = clock.now();
    let mut set = FaultSet::default();
    let a = set.inject(conn(0, 0), "p/a", FaultKind::Reset, secs(60), now);
    set.inject(conn(0, 1), "p/b", FaultKind::Reset, secs(60), now);
    set.inject(conn(1, 0), "q/a", FaultKind::Reset, secs(60), now);
    assert_eq!(set.clear(&FaultSelector::Id(a.id), now).len(), 1);
    assert_eq!(set.clear(&FaultSelector::Id(99), now).len(), 0);
    let gone = set.clear(&FaultSelector::Target("q/a".into()), now);
    assert_eq!(gone[0].label, "q/a");
    assert_eq!(set.clear(&FaultSelector::All, now).len(), 1);
    assert!(set.active(now).is_empty());
}

#[test]
fn only_latency_lets_the_real_call_out() {
    assert!(!FaultKind::Latency(secs(1)).replaces_upstream());
    assert!(FaultKind::Reset.replaces_upstream());
    assert!(FaultKind::Zombie.replaces_upstream());
    assert!(FaultKind::Stall { frames: 1 }.replaces_upstream());
}

#[test]
fn retain_drops_the_faults_whose_target_left() {
    let clock = ManualClock::new();
    let now = clock.now();
    let mut set = FaultSet::default();
    set.inject(conn(0, 0), "p/a", FaultKind::Reset, secs(60), now);
    set.inject(conn(0, 1), "p/b", FaultKind::Zombie, secs(60), now);
    // Connection (0, 0) is gone; (0, 1) stays where it is.
    set.retain(|t| t != conn(0, 0));
    assert_eq!(set.active(now).len(), 1);
    assert!(set.active_for(key(0, 0), now).is_none());
    assert_eq!(
        set.active_for(key(0, 1), now).map(|f| f.kind),
        Some(FaultKind::Zombie)
    );
}
