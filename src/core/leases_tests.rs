//! Session leases through the core's doors on a manual clock: acquire skips a cooling
//! connection and one leased by another owner, the gate keeps unleased requests off leased
//! connections and fences leased ones, and `retry-after` is bounded by the configured ttl.

use crate::config::keys::ConnKey;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::Core;
use super::requests::leases::{AcquireRefused, LeaseGate};
use super::test_support::{cand, cool};
use crate::clock::ManualClock;
use crate::config::{LoadEnv, from_str};
use crate::policy::lease::OwnerHash;
use crate::policy::select::{Candidate, ExclusionReason};

const CONFIG: &str = r#"
[[providers]]
id = "p"
dialect = "anthropic"
base_url = "https://api.example.com"
profile = "api_key"
  [[providers.connections]]
  id = "a"
  auth = "passthrough"
  [[providers.connections]]
  id = "b"
  auth = "passthrough"

[session_leases]
enabled = true
ttl = "2m"
"#;

fn core() -> (Core, ManualClock) {
    let env = LoadEnv::fixed(&[], "/tmp");
    let cfg = from_str(CONFIG, Path::new("t.toml"), &env).expect("test config is valid");
    let clock = ManualClock::new();
    let core = Core::new(Arc::new(cfg), Arc::new(clock.clone()), None);
    (core, clock)
}

fn both() -> Vec<Candidate> {
    vec![
        cand(),
        Candidate {
            connection: 1,
            key: ConnKey::new(0, 1),
            ..cand()
        },
    ]
}

#[test]
fn acquire_skips_a_cooling_connection_then_a_leased_one_then_refuses() {
    let (core, clock) = core();
    cool(&core, &clock);
    let a = core
        .lease_acquire(&both(), Duration::from_secs(120))
        .expect("b is free and healthy");
    assert_eq!(
        a.conn,
        ConnKey::new(0, 1),
        "the cooling connection a is passed over"
    );
    let b = core
        .lease_acquire(&both(), Duration::from_secs(120))
        .expect("a is free (cooling, but no healthy one is left)");
    assert_eq!(b.conn, ConnKey::new(0, 0));
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        core.lease_acquire(&both(), Duration::from_secs(120))
            .map(|a| a.conn),
        Err(AcquireRefused::Busy {
            retry_after: Duration::from_secs(90)
        })
    );
    let snap = core.snapshot();
    let fp = snap.providers[0].connections[1]
        .lease
        .as_ref()
        .map(|l| l.owner_fingerprint.clone());
    assert_eq!(fp, Some(a.lease.owner.fingerprint()));
    assert_ne!(
        fp.as_deref(),
        Some(&a.token.expose()[..8]),
        "a fingerprint of the hash, not the token"
    );
}

#[test]
fn the_gate_fences_leased_requests_and_skips_leased_connections() {
    let (core, _clock) = core();
    let a = core
        .lease_acquire(&both(), Duration::from_secs(600))
        .unwrap();
    let owner = OwnerHash::of_token(a.token.expose()).unwrap();
    let LeaseGate::Dispatch { candidates, leased } = core.lease_gate(both(), None) else {
        panic!("an unleased request may use the free connection");
    };
    assert_eq!(candidates.len(), 1);
    assert_ne!(candidates[0].key, a.conn);
    assert_eq!(leased.len(), 1);
    assert_eq!(leased[0].reason, ExclusionReason::Leased);
    let LeaseGate::Dispatch { candidates, .. } =
        core.lease_gate(both(), Some((owner, a.lease.generation)))
    else {
        panic!("the owner's request passes");
    };
    assert_eq!(candidates.len(), 1);
    assert_eq!(candidates[0].key, a.conn);
    assert_eq!(
        core.lease_gate(both(), Some((owner, a.lease.generation + 1))),
        LeaseGate::Stale
    );
    // Both leased: an unleased request waits for the earliest expiry, at most the ttl (2m).
    core.lease_acquire(&both(), Duration::from_secs(600))
        .unwrap();
    match core.lease_gate(both(), None) {
        LeaseGate::AllLeased {
            leased,
            retry_after,
        } => {
            assert_eq!(leased.len(), 2);
            assert_eq!(retry_after, Duration::from_secs(120), "bounded by ttl");
        }
        other => panic!("expected AllLeased, got {other:?}"),
    }
    core.lease_release(&owner, a.lease.generation).unwrap();
    assert_eq!(
        core.lease_gate(both(), Some((owner, a.lease.generation))),
        LeaseGate::Stale,
        "released"
    );
}
