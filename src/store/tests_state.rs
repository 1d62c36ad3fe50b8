//! Resilience state persistence: round trips, upserts, deletes, pruning, the v1 → v2 migration
//! and restarts.

use std::path::Path;
use std::sync::mpsc::sync_channel;

use rusqlite::{Connection, params};

use super::tests::{T0, cfg, db_in, raw, row, tables};
use super::*;

fn breaker(provider: &str, failures: u32) -> BreakerRow {
    BreakerRow {
        provider: provider.into(),
        state: "open".into(),
        failure_count: failures,
        open_until_unix_ms: Some(T0 + 60_000),
        multiplier: 2,
        cycles: 4,
        transitions_json: r#"[{"from":"closed","to":"open","at":1700000000000}]"#.into(),
        updated_at_unix_ms: T0,
    }
}

fn connection(provider: &str, conn: &str, level: u32) -> ConnectionRow {
    ConnectionRow {
        provider: provider.into(),
        connection: conn.into(),
        status: "cooling".into(),
        cooldown_until_unix_ms: Some(T0 + 5_000),
        cooldown_started_at_unix_ms: Some(T0),
        backoff_level: level,
        last_error: "429 rate limited".into(),
        last_error_kind: "rate_limited".into(),
        reason: "rate_limit_exceeded".into(),
        last_status: Some(429),
        last_failure_at_unix_ms: Some(T0),
        consecutive_auth_failures: 1,
        consecutive_rejections: 2,
        updated_at_unix_ms: T0,
    }
}

fn lockout(provider: &str, conn: &str, model: &str, until: u64) -> LockoutRow {
    LockoutRow {
        provider: provider.into(),
        connection: conn.into(),
        model: model.into(),
        scope: "group".into(),
        reason: "quota_exhausted".into(),
        failures: 3,
        until_unix_ms: until,
        updated_at_unix_ms: T0,
    }
}

fn pin(key: &str, conn: &str, expires: u64) -> AffinityRow {
    AffinityRow {
        session_key: key.into(),
        provider: "anthropic".into(),
        connection: conn.into(),
        expires_at_unix_ms: expires,
    }
}

fn setting(key: &str, value_json: &str) -> SettingRow {
    SettingRow {
        key: key.into(),
        value_json: value_json.into(),
        updated_at_unix_ms: T0,
    }
}

/// One row of every kind, as `load_state` returns them (sorted by key).
fn sample() -> PersistedState {
    PersistedState {
        breakers: vec![breaker("anthropic", 8), breaker("openai", 12)],
        connections: vec![
            connection("anthropic", "main", 3),
            ConnectionRow {
                status: "active".into(),
                cooldown_until_unix_ms: None,
                cooldown_started_at_unix_ms: None,
                last_status: None,
                last_failure_at_unix_ms: None,
                ..connection("anthropic", "spare", 0)
            },
        ],
        lockouts: vec![
            lockout("anthropic", "main", "claude-opus", T0 + 120_000),
            lockout("openai", "k1", "gpt-5", T0 + 240_000),
        ],
        affinity: vec![pin("s1", "main", T0 + 3_600_000)],
        settings: vec![setting("resilience.model_lockout.enabled", "true")],
        leases: vec![LeaseRow {
            provider: "anthropic".into(),
            connection: "main".into(),
            generation: 3,
            owner_sha256: "ab".repeat(32),
            expires_at_unix_ms: T0 + 600_000,
            updated_at_unix_ms: T0,
        }],
    }
}

fn write_all(store: &Store, s: &PersistedState) {
    s.breakers
        .iter()
        .for_each(|r| store.write(StateWrite::Breaker(r.clone())));
    s.connections
        .iter()
        .for_each(|r| store.write(StateWrite::Connection(r.clone())));
    s.lockouts
        .iter()
        .for_each(|r| store.write(StateWrite::Lockout(r.clone())));
    s.affinity
        .iter()
        .for_each(|r| store.write(StateWrite::Affinity(r.clone())));
    s.settings
        .iter()
        .for_each(|r| store.write(StateWrite::Setting(r.clone())));
    s.leases
        .iter()
        .for_each(|r| store.write(StateWrite::Lease(r.clone())));
}

fn columns(conn: &Connection, table: &str) -> Vec<String> {
    conn.prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
        .unwrap()
        .query_map([table], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Column name, type, not-null, default and pk position of every column of `table`.
fn shape(conn: &Connection, table: &str) -> Vec<(String, String, i64, Option<String>, i64)> {
    conn.prepare(
        "SELECT name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?1) ORDER BY cid",
    )
    .unwrap()
    .query_map([table], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

fn indexes(conn: &Connection) -> Vec<(String, String)> {
    conn.prepare(
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name",
    )
    .unwrap()
    .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Creates a schema-v1 database at `path` (only migration step 1), as the previous build left it.
fn create_v1(path: &Path) -> Connection {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let conn = raw(path);
    conn.execute_batch(schema::MIGRATIONS[0]).unwrap();
    conn.pragma_update(None, "user_version", 1).unwrap();
    conn
}

#[test]
fn load_state_on_a_fresh_database_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    let state = store.load_state().unwrap();
    assert!(state.is_empty(), "{state:?}");
    assert_eq!(state, PersistedState::default());
}

#[test]
fn every_write_kind_round_trips_through_flush_and_load_state() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    let want = sample();
    write_all(&store, &want);
    store.flush();
    assert_eq!(store.load_state().unwrap(), want);
    assert_eq!(store.dropped_state(), 0);
}

#[test]
fn extreme_values_round_trip_without_panicking() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    let max = ConnectionRow {
        backoff_level: u32::MAX,
        consecutive_auth_failures: u32::MAX,
        consecutive_rejections: u32::MAX,
        last_status: Some(u16::MAX),
        last_error: "quota \u{989d}\u{5ea6} 'quoted' \"x\"".into(),
        cooldown_until_unix_ms: Some(i64::MAX as u64),
        ..connection("p", "c", 0)
    };
    store.write(StateWrite::Connection(max.clone()));
    // u64 beyond SQLite's i64 saturates rather than wrapping.
    store.write(StateWrite::Lockout(lockout("p", "c", "m", u64::MAX)));
    store.flush();
    let state = store.load_state().unwrap();
    assert_eq!(state.connections, vec![max]);
    assert_eq!(state.lockouts[0].until_unix_ms, i64::MAX as u64);
}

#[test]
fn upserts_replace_the_row_with_the_same_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    write_all(&store, &sample());
    store.flush();

    let b = BreakerRow {
        state: "closed".into(),
        failure_count: 0,
        open_until_unix_ms: None,
        multiplier: 1,
        cycles: 0,
        transitions_json: "[]".into(),
        updated_at_unix_ms: T0 + 1,
        ..breaker("anthropic", 0)
    };
    let c = ConnectionRow {
        status: "banned".into(),
        cooldown_until_unix_ms: None,
        last_error: "account has been disabled".into(),
        last_status: Some(403),
        ..connection("anthropic", "main", 5)
    };
    let l = LockoutRow {
        failures: 4,
        until_unix_ms: T0 + 999_000,
        ..lockout("anthropic", "main", "claude-opus", 0)
    };
    let a = pin("s1", "spare", T0 + 7_200_000);
    let s = setting("resilience.model_lockout.enabled", "false");
    store.write(StateWrite::Breaker(b.clone()));
    store.write(StateWrite::Connection(c.clone()));
    store.write(StateWrite::Lockout(l.clone()));
    store.write(StateWrite::Affinity(a.clone()));
    store.write(StateWrite::Setting(s.clone()));
    store.flush();

    let got = store.load_state().unwrap();
    let mut want = sample();
    want.breakers[0] = b;
    want.connections[0] = c;
    want.lockouts[0] = l;
    want.affinity[0] = a;
    want.settings[0] = s;
    assert_eq!(got, want);
}

#[test]
fn the_last_write_per_key_wins_within_one_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    // Park the writer so everything below lands in one batch with a request row.
    let (entered_tx, entered_rx) = sync_channel(1);
    let (release_tx, release_rx) = sync_channel::<()>(1);
    store
        .sender()
        .send(writer::Msg::Pause {
            entered: entered_tx,
            release: release_rx,
        })
        .unwrap();
    entered_rx.recv().unwrap();

    store.write(StateWrite::Lockout(lockout("p", "c", "m1", T0 + 1)));
    store.record_request(row(T0, 1));
    store.write(StateWrite::Lockout(lockout("p", "c", "m2", T0 + 2)));
    store.write(StateWrite::DeleteLockoutsOf {
        provider: "p".into(),
        connection: "c".into(),
    });
    store.write(StateWrite::Lockout(lockout("p", "c", "m1", T0 + 3)));
    store.write(StateWrite::Setting(setting("k", "1")));
    store.write(StateWrite::Setting(setting("k", "2")));
    store.write(StateWrite::Affinity(pin("s", "a", T0 + 10)));
    store.write(StateWrite::DeleteAffinity {
        session_key: "s".into(),
    });
    drop(release_tx);
    store.flush();

    let state = store.load_state().unwrap();
    assert_eq!(state.lockouts, vec![lockout("p", "c", "m1", T0 + 3)]);
    assert_eq!(state.settings, vec![setting("k", "2")]);
    assert!(state.affinity.is_empty());
    assert_eq!(store.request_log_count().unwrap(), 1);
}

#[test]
fn deletes_remove_only_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    for (p, c, m) in [
        ("anthropic", "main", "opus"),
        ("anthropic", "main", "sonnet"),
        ("anthropic", "main", "haiku"),
        ("anthropic", "spare", "opus"),
        ("openai", "main", "opus"),
    ] {
        store.write(StateWrite::Lockout(lockout(p, c, m, T0 + 1_000)));
    }
    store.write(StateWrite::Affinity(pin("s1", "main", T0 + 1)));
    store.write(StateWrite::Affinity(pin("s2", "main", T0 + 1)));
    store.write(StateWrite::Setting(setting("a", "1")));
    store.write(StateWrite::Setting(setting("b", "2")));
    store.flush();

    store.write(StateWrite::DeleteLockout {
        provider: "anthropic".into(),
        connection: "main".into(),
        model: "haiku".into(),
    });
    // Deleting what is not there is harmless.
    store.write(StateWrite::DeleteLockout {
        provider: "anthropic".into(),
        connection: "nope".into(),
        model: "opus".into(),
    });
    store.write(StateWrite::DeleteAffinity {
        session_key: "s1".into(),
    });
    store.write(StateWrite::DeleteSetting { key: "a".into() });
    store.flush();
    let state = store.load_state().unwrap();
    let keys: Vec<(String, String, String)> = state
        .lockouts
        .iter()
        .map(|l| (l.provider.clone(), l.connection.clone(), l.model.clone()))
        .collect();
    let k = |p: &str, c: &str, m: &str| (p.to_string(), c.to_string(), m.to_string());
    assert_eq!(
        keys,
        vec![
            k("anthropic", "main", "opus"),
            k("anthropic", "main", "sonnet"),
            k("anthropic", "spare", "opus"),
            k("openai", "main", "opus"),
        ]
    );
    assert_eq!(state.affinity, vec![pin("s2", "main", T0 + 1)]);
    assert_eq!(state.settings, vec![setting("b", "2")]);

    // Every lockout of anthropic/main goes; other connections and providers keep theirs.
    store.write(StateWrite::DeleteLockoutsOf {
        provider: "anthropic".into(),
        connection: "main".into(),
    });
    store.flush();
    let keys: Vec<(String, String, String)> = store
        .load_state()
        .unwrap()
        .lockouts
        .iter()
        .map(|l| (l.provider.clone(), l.connection.clone(), l.model.clone()))
        .collect();
    assert_eq!(
        keys,
        vec![k("anthropic", "spare", "opus"), k("openai", "main", "opus")]
    );
}

#[test]
fn deleting_a_removed_connection_and_provider_takes_only_their_rows() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    for (p, c) in [("a", "gone"), ("a", "kept"), ("b", "gone")] {
        store.write(StateWrite::Connection(connection(p, c, 2)));
        store.write(StateWrite::Lockout(lockout(p, c, "m", T0 + 1_000)));
    }
    store.write(StateWrite::Breaker(breaker("a", 1)));
    store.write(StateWrite::Breaker(breaker("b", 1)));
    store.flush();
    store.write(StateWrite::DeleteConnection {
        provider: "a".into(),
        connection: "gone".into(),
    });
    store.write(StateWrite::DeleteBreaker {
        provider: "b".into(),
    });
    store.flush();
    let state = store.load_state().unwrap();
    let conns: Vec<(String, String)> = state
        .connections
        .iter()
        .map(|c| (c.provider.clone(), c.connection.clone()))
        .collect();
    let pair = |p: &str, c: &str| (p.to_string(), c.to_string());
    assert_eq!(conns, [pair("a", "kept"), pair("b", "gone")]);
    let locks: Vec<(String, String)> = state
        .lockouts
        .iter()
        .map(|l| (l.provider.clone(), l.connection.clone()))
        .collect();
    assert_eq!(locks, [pair("a", "kept"), pair("b", "gone")]);
    let breakers: Vec<&str> = state.breakers.iter().map(|b| b.provider.as_str()).collect();
    assert_eq!(breakers, ["a"]);
}

#[test]
fn retention_prunes_expired_lockouts_and_pins_against_the_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    store.write(StateWrite::Lockout(lockout("p", "c", "old", T0 - 1)));
    store.write(StateWrite::Lockout(lockout("p", "c", "now", T0)));
    store.write(StateWrite::Lockout(lockout("p", "c", "live", T0 + 1)));
    store.write(StateWrite::Affinity(pin("old", "c", T0 - 1)));
    store.write(StateWrite::Affinity(pin("live", "c", T0 + 1)));
    // Breakers and connections are never pruned, whatever their deadlines.
    store.write(StateWrite::Breaker(BreakerRow {
        open_until_unix_ms: Some(1),
        ..breaker("p", 1)
    }));
    store.write(StateWrite::Connection(ConnectionRow {
        cooldown_until_unix_ms: Some(1),
        ..connection("p", "c", 1)
    }));
    // A request row far in the future does not prune state (only the handed-in wall time does).
    store.record_request(row(T0 + 86_400_000, 1));
    store.flush();
    assert_eq!(store.load_state().unwrap().lockouts.len(), 3);

    store.enforce_retention(T0);
    store.flush();
    let state = store.load_state().unwrap();
    let models: Vec<&str> = state.lockouts.iter().map(|l| l.model.as_str()).collect();
    assert_eq!(models, ["live", "now"]);
    assert_eq!(state.affinity, vec![pin("live", "c", T0 + 1)]);
    assert_eq!(state.breakers.len(), 1);
    assert_eq!(state.connections.len(), 1);
}

#[test]
fn connections_hold_exactly_the_state_columns_and_no_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let _store = Store::open(&cfg(&path)).unwrap();
    let cols = columns(&raw(&path), "connections");
    assert_eq!(
        cols,
        [
            "provider",
            "connection",
            "status",
            "cooldown_until_unix_ms",
            "cooldown_started_at_unix_ms",
            "backoff_level",
            "last_error",
            "last_error_kind",
            "last_status",
            "last_failure_at_unix_ms",
            "consecutive_auth_failures",
            "consecutive_rejections",
            "updated_at_unix_ms",
            "reason",
        ]
    );
    for c in &cols {
        for bad in [
            "key",
            "token",
            "secret",
            "password",
            "credential",
            "auth_header",
        ] {
            assert!(!c.contains(bad), "credential-looking column {c}");
        }
    }
}

#[test]
fn v1_database_migrates_to_v2_keeping_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    {
        let conn = create_v1(&path);
        conn.execute(
            "INSERT INTO request_log (at_unix_ms, route, client_model, target, status, latency_ms, attempts, bytes, outcome)
             VALUES (?1, '/v1/messages', 'claude', 'anthropic:main/claude', 200, 12, 1, 34, 'ok')",
            params![T0 as i64],
        )
        .unwrap();
        conn.execute_batch(&format!(
            "INSERT INTO settings (key, value, updated_at_unix_ms) VALUES ('resilience.model_lockout.enabled', 'true', {T0});
             INSERT INTO circuit_breakers (provider, state, consecutive_failures, open_cycles, opened_at_unix_ms, retry_at_unix_ms, last_error, updated_at_unix_ms)
                 VALUES ('anthropic', 'open', 8, 4, {T0}, {}, 'boom', {T0});
             INSERT INTO connections (provider, connection, state, reason, backoff_level, consecutive_failures, cooldown_until_unix_ms, last_error, updated_at_unix_ms)
                 VALUES ('anthropic', 'main', 'cooling', 'rate_limited', 2, 3, {}, NULL, {T0});
             INSERT INTO model_lockouts (provider, connection, model, scope, reason, failures, backoff_level, locked_until_unix_ms, updated_at_unix_ms)
                 VALUES ('anthropic', 'main', 'opus', 'group', NULL, 2, 1, {}, {T0});
             INSERT INTO session_affinity (session_key, route, target, expires_at_unix_ms, updated_at_unix_ms) VALUES
                 ('s1', '/v1/messages', 'anthropic:main/claude', {}, {T0}),
                 ('s2', '', 'openai:k2', {}, {T0}),
                 ('s3', '', 'garbage', {}, {T0});",
            T0 + 60_000,
            T0 + 5_000,
            T0 + 120_000,
            T0 + 1,
            T0 + 2,
            T0 + 3,
        ))
        .unwrap();
    }

    let store = Store::open(&cfg(&path)).unwrap();
    assert_eq!(
        schema::user_version(&raw(&path)).unwrap(),
        i64::from(schema::SCHEMA_VERSION),
        "migrated all the way (v3 adds the token columns)"
    );
    assert_eq!(store.request_log_count().unwrap(), 1);
    let old_row = &store.recent_requests(1).unwrap()[0];
    assert_eq!(
        (old_row.tokens_in, old_row.tokens_out),
        (None, None),
        "rows from before the token columns read as unknown"
    );
    assert_eq!(
        store.recent_requests(1).unwrap()[0].target,
        "anthropic:main/claude"
    );
    let state = store.load_state().unwrap();
    assert_eq!(
        state.settings,
        vec![setting("resilience.model_lockout.enabled", "true")]
    );
    assert_eq!(
        state.breakers,
        vec![BreakerRow {
            provider: "anthropic".into(),
            state: "open".into(),
            failure_count: 8,
            open_until_unix_ms: Some(T0 + 60_000),
            multiplier: 1,
            cycles: 4,
            transitions_json: "[]".into(),
            updated_at_unix_ms: T0,
        }]
    );
    assert_eq!(
        state.connections,
        vec![ConnectionRow {
            provider: "anthropic".into(),
            connection: "main".into(),
            status: "cooling".into(),
            cooldown_until_unix_ms: Some(T0 + 5_000),
            backoff_level: 2,
            last_error_kind: "rate_limited".into(),
            reason: String::new(),
            updated_at_unix_ms: T0,
            ..ConnectionRow::default()
        }]
    );
    assert_eq!(
        state.lockouts,
        vec![LockoutRow {
            provider: "anthropic".into(),
            connection: "main".into(),
            model: "opus".into(),
            scope: "group".into(),
            reason: String::new(),
            failures: 2,
            until_unix_ms: T0 + 120_000,
            updated_at_unix_ms: T0,
        }]
    );
    // `provider:connection[/model]` targets are split; anything else is dropped (pins are soft).
    assert_eq!(
        state.affinity,
        vec![
            AffinityRow {
                provider: "anthropic".into(),
                ..pin("s1", "main", T0 + 1)
            },
            AffinityRow {
                provider: "openai".into(),
                ..pin("s2", "k2", T0 + 2)
            },
        ]
    );

    // The migrated database is usable as v2.
    store.write(StateWrite::Setting(setting("x", "1")));
    store.flush();
    assert_eq!(store.load_state().unwrap().settings.len(), 2);
}

#[test]
fn a_migrated_v1_database_has_the_same_schema_as_a_fresh_one() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.db");
    let migrated = dir.path().join("migrated.db");
    create_v1(&migrated);
    Store::open(&cfg(&fresh)).unwrap().close();
    Store::open(&cfg(&migrated)).unwrap().close();
    let (f, m) = (raw(&fresh), raw(&migrated));
    assert_eq!(tables(&f), tables(&m));
    assert!(
        !tables(&m).iter().any(|t| t.ends_with("_v1")),
        "{:?}",
        tables(&m)
    );
    for t in TABLES {
        assert_eq!(shape(&f, t), shape(&m, t), "table {t}");
    }
    assert_eq!(indexes(&f), indexes(&m));
}

#[test]
fn reopening_after_close_restores_every_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let want = sample();
    let store = Store::open(&cfg(&path)).unwrap();
    write_all(&store, &want);
    store.record_request(row(T0, 1));
    store.close(); // close flushes what is queued
    drop(store);

    let store = Store::open(&cfg(&path)).unwrap();
    assert_eq!(store.load_state().unwrap(), want);
    assert_eq!(store.request_log_count().unwrap(), 1);
    store.close();

    // And once more, after a retention pass that prunes nothing.
    let store = Store::open(&cfg(&path)).unwrap();
    store.enforce_retention(T0);
    store.flush();
    assert_eq!(store.load_state().unwrap(), want);
}

#[test]
fn a_full_queue_drops_and_counts_state_writes_separately() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with_capacity(&cfg(&db_in(&dir)), 2).unwrap();
    let (entered_tx, entered_rx) = sync_channel(1);
    let (release_tx, release_rx) = sync_channel::<()>(1);
    store
        .sender()
        .send(writer::Msg::Pause {
            entered: entered_tx,
            release: release_rx,
        })
        .unwrap();
    entered_rx.recv().unwrap();
    for n in 0..5 {
        store.write(StateWrite::Setting(setting(&format!("k{n}"), "1"))); // never blocks
    }
    store.record_request(row(T0, 1));
    assert_eq!(store.dropped_state(), 3);
    assert_eq!(store.dropped(), 1);
    drop(release_tx);
    store.flush();
    let keys: Vec<String> = store
        .load_state()
        .unwrap()
        .settings
        .into_iter()
        .map(|s| s.key)
        .collect();
    assert_eq!(keys, ["k0", "k1"]);

    store.close();
    store.write(StateWrite::DeleteSetting { key: "k0".into() });
    assert_eq!(store.dropped_state(), 4, "writes after close are counted");
    assert_eq!(store.load_state().unwrap().settings.len(), 2);
}
