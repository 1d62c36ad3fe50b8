//! Tests for [`Affinity`] and [`session_key`] with explicit instants (no clock, no timers).

use std::time::Duration;

use http::{HeaderMap, HeaderValue};

use super::*;
use crate::clock::{Clock, ManualClock};

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn t0() -> Instant {
    ManualClock::new().now()
}

/// Header name/value pairs of one case.
type Headers = Vec<(&'static str, &'static str)>;

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        h.append(*name, HeaderValue::from_bytes(value.as_bytes()).unwrap());
    }
    h
}

fn pinned(a: &mut Affinity, key: &str, now: Instant) -> Option<(String, String)> {
    a.pinned(key, now)
}

fn pair(p: &str, c: &str) -> Option<(String, String)> {
    Some((p.to_owned(), c.to_owned()))
}

#[test]
fn header_precedence_trimming_and_bounds() {
    let long = "s".repeat(500);
    let cases: Vec<(Headers, Option<String>)> = vec![
        (vec![], None),
        (vec![("x-session-id", "  abc  ")], Some("abc".into())),
        (
            vec![
                ("x-sluice-session", "z"),
                ("x-claude-code-session-id", "cc"),
            ],
            Some("cc".into()),
        ),
        (
            vec![("x-codex-session-id", "cx"), ("x-session-id", "s")],
            Some("s".into()),
        ),
        // Blank values fall through to the next header.
        (
            vec![("x-session-id", "   "), ("x-sluice-session", "sl")],
            Some("sl".into()),
        ),
        (vec![("x-other", "nope")], None),
        (vec![("x-session-id", "é")], Some("é".into())),
    ];
    for (pairs, want) in cases {
        assert_eq!(session_key(&headers(&pairs)), want, "{pairs:?}");
    }
    let k = session_key(&headers(&[("x-session-id", long.as_str())])).unwrap();
    assert!(k.len() <= MAX_SESSION_KEY_BYTES);
    assert!(k.starts_with(&"s".repeat(KEY_PREFIX_CHARS)));
    // Stable, and different long values with the same prefix stay apart.
    assert_eq!(
        session_key(&headers(&[("x-session-id", long.as_str())])),
        Some(k.clone())
    );
    let other = format!("{long}x");
    assert_ne!(
        session_key(&headers(&[("x-session-id", other.as_str())])),
        Some(k)
    );
    // Exactly at the bound: kept verbatim.
    let edge = "e".repeat(MAX_SESSION_KEY_BYTES);
    assert_eq!(
        session_key(&headers(&[("x-session-id", edge.as_str())])),
        Some(edge)
    );
}

#[test]
fn pins_expire_after_ttl_and_refresh_on_pin() {
    let t = t0();
    let mut a = Affinity::new(secs(3600));
    assert_eq!(pinned(&mut a, "s1", t), None);
    a.pin("s1", "p", "c1", t);
    assert_eq!(pinned(&mut a, "s1", t + secs(3599)), pair("p", "c1"));
    assert_eq!(pinned(&mut a, "s1", t + secs(3600)), None);
    assert!(a.is_empty(), "expired pins are dropped lazily");

    // Refresh extends; re-pin moves the session.
    a.pin("s1", "p", "c1", t);
    a.pin("s1", "p", "c1", t + secs(3000));
    assert_eq!(pinned(&mut a, "s1", t + secs(5000)), pair("p", "c1"));
    a.pin("s1", "q", "c2", t + secs(5000));
    assert_eq!(pinned(&mut a, "s1", t + secs(5001)), pair("q", "c2"));
    assert_eq!(a.len(), 1);
    assert!(a.unpin("s1"));
    assert!(!a.unpin("s1"));
}

#[test]
fn zero_ttl_disables() {
    let t = t0();
    let mut a = Affinity::new(Duration::ZERO);
    a.pin("s", "p", "c", t);
    assert_eq!(pinned(&mut a, "s", t), None);
    assert!(a.is_empty());
    let mut a = Affinity::new(secs(60));
    a.pin("s", "p", "c", t);
    a.set_ttl(Duration::ZERO);
    assert_eq!(pinned(&mut a, "s", t), None);
    assert!(a.is_empty());
    assert_eq!(a.ttl(), Duration::ZERO);
}

#[test]
fn bounded_size_evicts_the_oldest() {
    let t = t0();
    let mut a = Affinity::with_limit(secs(60), 3);
    for (i, k) in ["a", "", "c"].iter().enumerate() {
        a.pin(k, "p", "c", t + secs(i as u64));
    }
    a.pin("a", "p", "c", t + secs(3)); // refresh: "" is now the oldest
    a.pin("d", "p", "c", t + secs(4));
    assert_eq!(a.len(), 3);
    assert_eq!(pinned(&mut a, "", t + secs(4)), None);
    for k in ["a", "c", "d"] {
        assert!(pinned(&mut a, k, t + secs(4)).is_some(), "{k}");
    }
    // Expired pins are dropped before evicting a live one.
    a.pin("e", "p", "c", t + secs(62)); // "c" (expires 62) is expired
    assert!(pinned(&mut a, "a", t + secs(62)).is_some());
    assert!(pinned(&mut a, "d", t + secs(62)).is_some());

    // The default bound holds under a flood of sessions.
    let mut a = Affinity::new(secs(60));
    for i in 0..(MAX_PINS + 50) {
        a.pin(&format!("s{i}"), "p", "c", t);
    }
    assert_eq!(a.len(), MAX_PINS);
    assert_eq!(pinned(&mut a, "s0", t), None);
    assert!(pinned(&mut a, &format!("s{}", MAX_PINS + 49), t).is_some());
}

#[test]
fn persist_restore_and_saturation() {
    let t = t0();
    let mut a = Affinity::new(secs(60));
    a.pin("old", "p", "c1", t);
    a.pin("new", "p", "c2", t + secs(30));
    let rec = a.persist();
    assert_eq!(
        rec.iter().map(|r| r.key.as_str()).collect::<Vec<_>>(),
        ["old", "new"]
    );
    let mut b = Affinity::restore(secs(60), rec.clone(), t + secs(61));
    assert_eq!(b.len(), 1, "expired records are skipped");
    assert_eq!(pinned(&mut b, "new", t + secs(61)), pair("p", "c2"));
    assert!(Affinity::restore(Duration::ZERO, rec, t).is_empty());

    // A huge TTL saturates instead of overflowing.
    let mut a = Affinity::new(Duration::MAX);
    a.pin("s", "p", "c", t);
    assert_eq!(pinned(&mut a, "s", t + secs(86_400 * 365)), pair("p", "c"));
}
