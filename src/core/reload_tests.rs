//! A live reload that adds, removes and reorders providers and connections: kept state stays
//! under its key, new entries start fresh, removed ones leave the snapshot, and work started
//! before the reload (a ticket, an attempt guard, a gate permit) lands on the same connection.

use std::path::Path;
use std::sync::Arc;

use http::HeaderMap;

use super::Core;
use super::resilience::AttemptEnd;
use crate::clock::{Clock, ManualClock};
use crate::config::{Config, LoadEnv, from_str};
use crate::policy::cooldown::ConnectionStatus;
use crate::policy::select::{Candidate, ExclusionReason};

/// Providers `spec` = [(id, [(connection id, extra keys)])], all passthrough.
fn cfg(spec: &[(&str, &[(&str, &str)])]) -> Config {
    let mut text = String::new();
    for (p, conns) in spec {
        text.push_str(&format!(
            "[[providers]]\nid = \"{p}\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n"
        ));
        for (c, extra) in *conns {
            text.push_str(&format!(
                "  [[providers.connections]]\n  id = \"{c}\"\n  auth = \"passthrough\"\n  {extra}\n"
            ));
        }
    }
    from_str(&text, Path::new("t.toml"), &LoadEnv::fixed(&[], "/tmp")).unwrap()
}

/// The candidate at positions (`provider`, `connection`) of the first config (key =
/// position).
fn cand(provider: usize, connection: usize) -> Candidate {
    Candidate {
        provider,
        connection,
        model: "m".into(),
        rewrite: false,
        target: 0,
        key: crate::config::keys::ConnKey::new(provider as u32, connection as u32),
    }
}

/// The candidate at positions (`provider`, `connection`) of the config `core` serves now.
fn cand_now(core: &Core, provider: usize, connection: usize) -> Candidate {
    Candidate {
        key: core.config().keys.connection(provider, connection),
        ..cand(provider, connection)
    }
}

fn fail_503(core: &Core, c: &Candidate) -> super::resilience::ReportEffect {
    let headers = HeaderMap::new();
    let t = core
        .admit_candidate(c, core.clock().now())
        .expect("admitted");
    let classified = core.classify_in(
        c.key.provider,
        c.provider,
        &AttemptEnd::response(503, &headers, b""),
    );
    core.report(t, &classified)
}

/// One connection in the snapshot: (id, status, in flight).
type ConnRow = (String, ConnectionStatus, u64);

/// (provider id, its connections) of every provider in the snapshot.
fn layout_of(core: &Core) -> Vec<(String, Vec<ConnRow>)> {
    core.snapshot()
        .providers
        .into_iter()
        .map(|p| {
            let conns = p
                .connections
                .into_iter()
                .map(|c| (c.id, c.status, c.in_flight))
                .collect();
            (p.id, conns)
        })
        .collect()
}

#[test]
fn kept_state_stays_under_its_key_and_an_in_flight_attempt_reports_to_its_own_connection() {
    let clock = ManualClock::new();
    let old = cfg(&[("p", &[("gone", ""), ("cooled", ""), ("busy", "")])]);
    let core = Core::new(Arc::new(old), Arc::new(clock.clone()), None);
    let effect = fail_503(&core, &cand(0, 1));
    assert!(effect.connection_changed, "the 503 cooled 'cooled'");
    // An attempt in flight on "busy" (position 2 of the old config) across the reload.
    let busy = cand(0, 2);
    let ticket = core
        .admit_candidate(&busy, clock.now())
        .expect("busy is fresh");
    let guard = core.begin_attempt(&busy);
    // And one on "gone", which the reload removes.
    let gone = cand(0, 0);
    let gone_ticket = core
        .admit_candidate(&gone, clock.now())
        .expect("gone is fresh");
    let gone_guard = core.begin_attempt(&gone);

    // A provider added before "p", "gone" removed: "cooled" and "busy" move.
    core.replace_config(cfg(&[
        ("n", &[("n1", "")]),
        ("p", &[("cooled", ""), ("busy", "")]),
    ]));
    assert_eq!(core.config().generation, 1);
    use ConnectionStatus::{Active, Cooling};
    let s = |id: &str, st, inf| (id.to_string(), st, inf);
    assert_eq!(
        layout_of(&core),
        vec![
            ("n".to_string(), vec![s("n1", Active, 0)]),
            (
                "p".to_string(),
                vec![s("cooled", Cooling, 0), s("busy", Active, 1)]
            ),
        ],
        "cooled keeps its cooldown under its id, n1 is fresh, gone is gone, busy is in flight"
    );

    assert_eq!(
        core.snapshot().providers[1].in_flight,
        2,
        "busy's and gone's attempts"
    );
    // The attempt on "gone" ends after the reload: its provider's count goes down, its
    // failure lands nowhere.
    let c = core.classify(0, &AttemptEnd::response(503, &HeaderMap::new(), b""));
    assert_eq!(core.report(gone_ticket, &c), Default::default());
    drop(gone_guard);
    assert_eq!(core.snapshot().providers[1].in_flight, 1);

    // The old attempt fails after the reload: it lands on "busy" by identity, not on
    // whatever sits at its old index now.
    let headers = HeaderMap::new();
    let c = core.classify_in(
        busy.key.provider,
        busy.provider,
        &AttemptEnd::response(503, &headers, b""),
    );
    let effect = core.report(ticket, &c);
    assert!(effect.connection_changed);
    drop(guard);
    assert_eq!(
        layout_of(&core),
        vec![
            ("n".to_string(), vec![s("n1", Active, 0)]),
            (
                "p".to_string(),
                vec![s("cooled", Cooling, 0), s("busy", Cooling, 0)]
            ),
        ]
    );
    let snap = core.snapshot();
    assert_eq!(
        snap.providers[0].failures, 0,
        "nothing landed on the new provider"
    );
    assert_eq!(snap.providers[0].breaker.failure_count, 0);

    // Candidates of the old config still find their connection by key; new ones index the
    // new file.
    let excluded = core.admit_candidate(&cand(0, 1), clock.now()).err();
    assert_eq!(
        excluded.map(|e| e.reason),
        Some(ExclusionReason::ConnectionCooldown)
    );
    let gone = core.admit_candidate(&cand(0, 0), clock.now()).err();
    assert_eq!(gone.map(|e| e.reason), Some(ExclusionReason::Unavailable));
    let fresh = core.admit_candidate(&cand_now(&core, 0, 0), clock.now());
    assert!(fresh.is_ok(), "n1 is admitted");
}

#[test]
fn a_permit_held_across_a_reload_is_released_onto_the_same_gate() {
    let clock = ManualClock::new();
    let old = cfg(&[("p", &[("a", ""), ("capped", "max_concurrent = 1")])]);
    let core = Core::new(Arc::new(old), Arc::new(clock.clone()), None);
    let queue = core.settings_snapshot().queue.clone();
    let held = core
        .gates()
        .try_acquire_for(&cand(0, 1), &queue)
        .expect("a free permit");
    assert!(held.holds_permit());

    // "a" removed, a capped provider added in front: "capped" moves to (1, 0).
    core.replace_config(cfg(&[
        ("n", &[("n1", "max_concurrent = 1")]),
        ("p", &[("capped", "max_concurrent = 1")]),
    ]));
    let now_capped = cand_now(&core, 1, 0);
    assert!(
        core.gates().try_acquire_for(&now_capped, &queue).is_none(),
        "the permit held before the reload still counts on 'capped'"
    );
    let n1 = core.gates().try_acquire_for(&cand_now(&core, 0, 0), &queue);
    assert!(n1.is_some_and(|p| p.holds_permit()), "n1's gate is fresh");
    drop(held);
    assert!(
        core.gates().try_acquire_for(&now_capped, &queue).is_some(),
        "released onto 'capped', not onto what sits at its old index"
    );
    let views = core.gates().views();
    let ids: Vec<(&str, &str)> = views
        .iter()
        .map(|v| (v.provider.as_str(), v.connection.as_str()))
        .collect();
    assert_eq!(ids, [("n", "n1"), ("p", "capped")]);
}

#[test]
fn removed_connections_leave_the_store_and_new_ones_persist_under_their_id() {
    let dir = tempfile::tempdir().unwrap();
    let load = |spec: &[(&str, &[(&str, &str)])]| {
        let mut c = cfg(spec);
        c.store.path = dir.path().join("state.db");
        c
    };
    let old = load(&[("p", &[("gone", ""), ("kept", "")]), ("q", &[("q1", "")])]);
    let store = Arc::new(crate::store::Store::open(&old.store).unwrap());
    let clock = ManualClock::new();
    let core = Core::new(Arc::new(old), Arc::new(clock.clone()), Some(store.clone()));
    fail_503(&core, &cand(0, 0));
    fail_503(&core, &cand(0, 1));
    fail_503(&core, &cand(1, 0));
    store.flush();
    let rows = |store: &crate::store::Store| -> Vec<(String, String)> {
        let mut v: Vec<(String, String)> = store
            .load_state()
            .unwrap()
            .connections
            .into_iter()
            .map(|r| (r.provider, r.connection))
            .collect();
        v.sort();
        v
    };
    let pair = |p: &str, c: &str| (p.to_string(), c.to_string());
    assert_eq!(
        rows(&store),
        [pair("p", "gone"), pair("p", "kept"), pair("q", "q1")]
    );
    let breakers = |store: &crate::store::Store| -> Vec<String> {
        let state = store.load_state().unwrap();
        state.breakers.into_iter().map(|b| b.provider).collect()
    };
    assert!(
        breakers(&store).iter().any(|b| b == "q"),
        "q's breaker moved"
    );

    // "gone" and the whole of "q" leave; provider "r" comes in front of "p".
    core.replace_config(load(&[("r", &[("new", "")]), ("p", &[("kept", "")])]));
    store.flush();
    assert_eq!(
        rows(&store),
        [pair("p", "kept")],
        "no row left to come back at a restart"
    );
    assert!(
        !breakers(&store).iter().any(|b| b == "q"),
        "q's breaker row went with it"
    );
    fail_503(&core, &cand_now(&core, 0, 0));
    store.flush();
    assert_eq!(rows(&store), [pair("p", "kept"), pair("r", "new")]);
}

#[test]
fn a_limit_reset_record_stays_with_its_connection_and_leaves_with_it() {
    use crate::policy::limit_reset::{Tried, Unavailable};
    let dir = tempfile::tempdir().unwrap();
    let load = |spec: &[(&str, &[(&str, &str)])]| {
        let mut c = cfg(spec);
        c.store.path = dir.path().join("state.db");
        c
    };
    let old = load(&[("p", &[("gone", ""), ("kept", "")])]);
    let store = Arc::new(crate::store::Store::open(&old.store).unwrap());
    let clock = ManualClock::new();
    let core = Core::new(Arc::new(old), Arc::new(clock.clone()), Some(store.clone()));
    let used = Tried::Unavailable(Unavailable::AlreadyUsed, None);
    core.record_limit_reset(&cand(0, 0), &used);
    core.record_limit_reset(&cand(0, 1), &used);
    store.flush();
    let keys = |store: &crate::store::Store| -> Vec<String> {
        let mut v: Vec<String> = store
            .load_state()
            .unwrap()
            .settings
            .into_iter()
            .map(|r| r.key)
            .filter(|k| k.starts_with(super::quota::limit_reset::SETTINGS_PREFIX))
            .collect();
        v.sort();
        v
    };
    assert_eq!(keys(&store), ["limit_reset/p/gone", "limit_reset/p/kept"]);

    // "gone" leaves; "new" comes in front of "kept".
    core.replace_config(load(&[("p", &[("new", ""), ("kept", "")])]));
    store.flush();
    let snap = core.snapshot();
    let conns = &snap.providers[0].connections;
    assert_eq!(conns[0].id, "new");
    assert!(conns[0].limit_reset.is_none(), "new starts fresh");
    assert_eq!(
        conns[1]
            .limit_reset
            .as_ref()
            .map(|v| crate::snapshot::word::or_empty(&v.last_outcome)),
        Some("already_used"),
        "kept's record moved with it"
    );
    assert_eq!(
        keys(&store),
        ["limit_reset/p/kept"],
        "gone's row is deleted"
    );
}
