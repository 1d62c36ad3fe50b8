use std::path::{Path, PathBuf};
use std::sync::mpsc::sync_channel;
use std::time::Duration;

use rusqlite::Connection;

use super::*;

pub(super) const T0: u64 = 1_700_000_000_000;

pub(super) fn cfg(path: &Path) -> StoreConfig {
    StoreConfig {
        path: path.to_path_buf(),
        request_log_max_rows: 10_000,
        request_log_max_age: Duration::from_secs(7 * 24 * 3600),
    }
}

pub(super) fn db_in(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join("state").join("sluice.db")
}

pub(super) fn row(at: u64, n: u32) -> RequestLogRow {
    RequestLogRow {
        tokens_in: None,
        tokens_out: None,
        at_unix_ms: at,
        route: "/v1/messages".into(),
        client_model: format!("model-{n}"),
        target: "anthropic:main/claude".into(),
        status: 200,
        latency_ms: 120 + u64::from(n),
        attempts: 1 + n % 3,
        bytes: 4096 * u64::from(n),
        outcome: "ok".into(),
        translated: String::new(),
        injected: n == 48,
        continued: n == 47,
    }
}

pub(super) fn raw(path: &Path) -> Connection {
    Connection::open(path).unwrap()
}

pub(super) fn tables(conn: &Connection) -> Vec<String> {
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .unwrap();
    stmt.query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

fn with_suffix(p: &Path, sfx: &str) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push(sfx);
    PathBuf::from(s)
}

#[test]
fn open_creates_dir_migrates_and_creates_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = Store::open(&cfg(&path)).unwrap();
    assert_eq!(store.path(), path);
    assert!(path.exists());
    let conn = raw(&path);
    assert_eq!(
        schema::user_version(&conn).unwrap(),
        i64::from(SCHEMA_VERSION)
    );
    let found = tables(&conn);
    for t in TABLES {
        assert!(found.iter().any(|f| f == t), "missing table {t}: {found:?}");
    }
    // connections never hold credentials.
    let cols: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('connections')")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert!(
        cols.iter()
            .all(|c| !c.contains("key") && !c.contains("token") && !c.contains("secret")),
        "{cols:?}"
    );
}

#[test]
fn wal_mode_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let _store = Store::open(&cfg(&path)).unwrap();
    let mode: String = raw(&path)
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn reopening_is_idempotent_and_keeps_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = Store::open(&cfg(&path)).unwrap();
    store.record_request(row(T0, 1));
    store.close();
    for _ in 0..2 {
        let store = Store::open(&cfg(&path)).unwrap();
        assert_eq!(store.request_log_count().unwrap(), 1);
        store.close();
    }
    assert_eq!(
        schema::user_version(&raw(&path)).unwrap(),
        i64::from(SCHEMA_VERSION)
    );
}

#[test]
fn newer_schema_version_is_refused_not_downgraded() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.db");
    raw(&path).pragma_update(None, "user_version", 99).unwrap();
    let err = Store::open(&cfg(&path)).unwrap_err();
    assert_eq!(err.kind(), "too_new");
    let msg = err.to_string();
    assert!(msg.starts_with(&format!("{}: ", path.display())), "{msg}");
    assert!(
        msg.contains("schema version 99") && msg.contains("upgrade sluice"),
        "{msg}"
    );
    assert!(msg.contains("'sluice --reset-state'"), "{msg}");
    assert_eq!(schema::user_version(&raw(&path)).unwrap(), 99);
}

#[test]
fn corrupt_file_names_the_path_and_offers_reset_state() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.db");
    let garbage: Vec<u8> = (0..8192u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&path, &garbage).unwrap();
    let err = Store::open(&cfg(&path)).unwrap_err();
    assert_eq!(err.kind(), "open");
    assert_eq!(
        err.to_string(),
        format!(
            "{}: cannot open the state database (file is not a database); move it aside with 'sluice --reset-state' or set [store] path",
            path.display()
        )
    );
    // The bad file is left untouched.
    assert_eq!(std::fs::read(&path).unwrap(), garbage);
}

#[test]
fn uncreatable_directory_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, b"x").unwrap();
    let path = blocker.join("sub").join("sluice.db");
    let err = Store::open(&cfg(&path)).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("{}: cannot create the directory", path.display())),
        "{msg}"
    );
    assert!(msg.contains("set [store] path"), "{msg}");
}

#[test]
fn failed_migration_keeps_the_old_version_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.db");
    // A v0 file that already has a clashing table: step 1 fails inside its transaction.
    raw(&path)
        .execute_batch("CREATE TABLE settings (x INTEGER);")
        .unwrap();
    let err = Store::open(&cfg(&path)).unwrap_err();
    assert_eq!(err.kind(), "migrate");
    let msg = err.to_string();
    assert!(
        msg.contains("cannot migrate the state database to schema version 1"),
        "{msg}"
    );
    assert!(
        msg.contains(&path.display().to_string()) && msg.contains("--reset-state"),
        "{msg}"
    );
    let conn = raw(&path);
    assert_eq!(schema::user_version(&conn).unwrap(), 0);
    assert_eq!(
        tables(&conn),
        vec!["settings".to_string()],
        "step rolled back"
    );
}

#[test]
fn reset_state_moves_db_wal_and_shm_aside_and_fresh_open_works() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.db");
    std::fs::write(&path, b"garbage garbage garbage").unwrap();
    std::fs::write(with_suffix(&path, "-wal"), b"wal").unwrap();
    std::fs::write(with_suffix(&path, "-shm"), b"shm").unwrap();
    // A failed open leaves every file as it was (SQLite would delete a WAL it cannot use).
    assert_eq!(Store::open(&cfg(&path)).unwrap_err().kind(), "open");
    assert_eq!(std::fs::read(with_suffix(&path, "-wal")).unwrap(), b"wal");

    let backup = reset_state(&path, 1234).unwrap().unwrap();
    assert_eq!(backup, dir.path().join("sluice.db.bak-1234"));
    assert_eq!(std::fs::read(&backup).unwrap(), b"garbage garbage garbage");
    assert_eq!(std::fs::read(with_suffix(&backup, "-wal")).unwrap(), b"wal");
    assert_eq!(std::fs::read(with_suffix(&backup, "-shm")).unwrap(), b"shm");
    assert!(
        !path.exists()
            && !with_suffix(&path, "-wal").exists()
            && !with_suffix(&path, "-shm").exists()
    );

    let store = Store::open(&cfg(&path)).unwrap();
    assert_eq!(store.request_log_count().unwrap(), 0);
}

#[test]
fn reset_state_keeps_a_real_database_readable_and_never_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.db");
    assert_eq!(reset_state(&path, 1).unwrap(), None, "nothing to move");

    let store = Store::open(&cfg(&path)).unwrap();
    store.record_request(row(T0, 1));
    store.close();
    let first = reset_state(&path, 7).unwrap().unwrap();
    let n: i64 = raw(&first)
        .query_row("SELECT COUNT(*) FROM request_log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 1);

    Store::open(&cfg(&path)).unwrap().close();
    let second = reset_state(&path, 7).unwrap().unwrap();
    assert_eq!(second, dir.path().join("sluice.db.bak-7.1"));
    assert!(first.exists() && second.exists());
}

#[test]
fn recorded_rows_are_readable_newest_first_after_flush() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    let rows: Vec<RequestLogRow> = (0..50).map(|n| row(T0 + u64::from(n) * 10, n)).collect();
    for r in &rows {
        store.record_request(r.clone());
    }
    store.flush();
    assert_eq!(store.request_log_count().unwrap(), 50);
    let recent = store.recent_requests(3).unwrap();
    assert_eq!(
        recent,
        vec![rows[49].clone(), rows[48].clone(), rows[47].clone()]
    );
    assert_eq!(store.recent_requests(1000).unwrap().len(), 50);
    assert_eq!(store.dropped(), 0);
}

#[test]
fn batches_span_at_most_about_a_second_of_requests() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    // Rows 2 s apart still all land, whether one batch or several.
    for n in 0..10 {
        store.record_request(row(T0 + u64::from(n) * 2_000, n));
    }
    store.flush();
    assert_eq!(store.request_log_count().unwrap(), 10);
}

#[test]
fn retention_keeps_only_the_newest_max_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(&db_in(&dir));
    c.request_log_max_rows = 5;
    let store = Store::open(&c).unwrap();
    for n in 0..12 {
        store.record_request(row(T0 + u64::from(n), n));
    }
    store.flush();
    assert_eq!(store.request_log_count().unwrap(), 5);
    let models: Vec<String> = store
        .recent_requests(10)
        .unwrap()
        .into_iter()
        .map(|r| r.client_model)
        .collect();
    assert_eq!(
        models,
        ["model-11", "model-10", "model-9", "model-8", "model-7"]
    );
}

#[test]
fn a_batch_larger_than_max_rows_commits_at_most_max_rows() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    Store::open(&cfg(&path)).unwrap().close();
    let mut conn = raw(&path);
    let batch = writer::Batch {
        rows: (0..25).map(|n| row(T0 + u64::from(n), n)).collect(),
        state: Vec::new(),
    };
    writer::write_batch(&mut conn, &batch, 10).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM request_log", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 10, "pruned in the inserting transaction, not after it");
    let oldest: String = conn
        .query_row(
            "SELECT client_model FROM request_log ORDER BY id LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(oldest, "model-15", "the newest rows are kept");
}

#[test]
fn rows_written_in_multi_row_chunks_and_a_tail_keep_their_order_and_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    Store::open(&cfg(&path)).unwrap().close();
    let mut conn = raw(&path);
    // Two full chunks of 32 and a tail of 6.
    let rows: Vec<RequestLogRow> = (0..70)
        .map(|n| RequestLogRow {
            tokens_in: (n % 2 == 0).then_some(u64::from(n) * 10),
            tokens_out: (n % 3 == 0).then_some(u64::from(n)),
            translated: if n % 5 == 0 {
                "anthropic→openai".into()
            } else {
                String::new()
            },
            status: 200 + u16::try_from(n).unwrap(),
            ..row(T0 + u64::from(n), n)
        })
        .collect();
    let batch = writer::Batch {
        rows: rows.clone(),
        state: Vec::new(),
    };
    writer::write_batch(&mut conn, &batch, 1_000).unwrap();
    let mut stmt = conn
        .prepare(
            "SELECT at_unix_ms, route, client_model, target, status, latency_ms, attempts, bytes, outcome, translated, tokens_in, tokens_out, injected, continued FROM request_log ORDER BY id",
        )
        .unwrap();
    let back: Vec<RequestLogRow> = stmt
        .query_map([], |r| {
            Ok(RequestLogRow {
                at_unix_ms: r.get::<_, i64>(0)?.try_into().unwrap(),
                route: r.get(1)?,
                client_model: r.get(2)?,
                target: r.get(3)?,
                status: r.get(4)?,
                latency_ms: r.get::<_, i64>(5)?.try_into().unwrap(),
                attempts: r.get(6)?,
                bytes: r.get::<_, i64>(7)?.try_into().unwrap(),
                outcome: r.get(8)?,
                translated: r.get(9)?,
                tokens_in: r.get::<_, Option<i64>>(10)?.map(|v| v.try_into().unwrap()),
                tokens_out: r.get::<_, Option<i64>>(11)?.map(|v| v.try_into().unwrap()),
                injected: r.get::<_, i64>(12)? != 0,
                continued: r.get::<_, i64>(13)? != 0,
            })
        })
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(back, rows, "every row, in order, with every value");
}

#[test]
fn a_burst_never_shows_more_than_max_rows_to_a_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let mut c = cfg(&path);
    c.request_log_max_rows = 1_000;
    let store = Store::open_with_capacity(&c, 20_000).unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        let conn = raw(&path);
        std::thread::spawn(move || {
            let mut max = 0i64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let n: i64 = conn
                    .query_row("SELECT COUNT(*) FROM request_log", [], |r| r.get(0))
                    .unwrap();
                max = max.max(n);
            }
            max
        })
    };
    for n in 0..18_000 {
        store.record_request(row(T0 + u64::from(n) / 100, n));
    }
    store.flush();
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let max_seen = watcher.join().unwrap();
    assert_eq!(store.dropped(), 0);
    assert_eq!(store.request_log_count().unwrap(), 1_000);
    assert!(max_seen <= 1_000, "a reader saw {max_seen} rows");
}

#[test]
fn retention_drops_rows_older_than_max_age_relative_to_newest_row() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(&db_in(&dir));
    c.request_log_max_age = Duration::from_secs(3600);
    let store = Store::open(&c).unwrap();
    store.record_request(row(T0, 0));
    store.record_request(row(T0 + 1_000, 1));
    store.record_request(row(T0 + 3_000_000, 2)); // 50 min later
    store.flush();
    assert_eq!(
        store.request_log_count().unwrap(),
        3,
        "all within an hour of the newest"
    );
    store.record_request(row(T0 + 3_600_500, 3)); // row 0 is now 1h0m0.5s old
    store.flush();
    let models: Vec<String> = store
        .recent_requests(10)
        .unwrap()
        .into_iter()
        .map(|r| r.client_model)
        .collect();
    assert_eq!(models, ["model-3", "model-2", "model-1"]);
}

#[test]
fn enforce_retention_measures_age_against_the_given_wall_time() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = cfg(&db_in(&dir));
    c.request_log_max_age = Duration::from_secs(60);
    let store = Store::open(&c).unwrap();
    store.record_request(row(T0, 0));
    store.flush();
    assert_eq!(store.request_log_count().unwrap(), 1);
    store.enforce_retention(T0 + 61_000);
    store.flush();
    assert_eq!(store.request_log_count().unwrap(), 0);
}

#[test]
fn retention_runs_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = Store::open(&cfg(&path)).unwrap();
    for n in 0..20 {
        store.record_request(row(T0 + u64::from(n), n));
    }
    store.close();
    let mut c = cfg(&path);
    c.request_log_max_rows = 4;
    let store = Store::open(&c).unwrap();
    assert_eq!(store.request_log_count().unwrap(), 4);
    assert_eq!(
        store.recent_requests(1).unwrap()[0].client_model,
        "model-19"
    );
}

#[test]
fn a_full_queue_drops_and_counts_instead_of_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_with_capacity(&cfg(&db_in(&dir)), 4).unwrap();
    let (entered_tx, entered_rx) = sync_channel(1);
    let (release_tx, release_rx) = sync_channel::<()>(1);
    store
        .sender()
        .send(writer::Msg::Pause {
            entered: entered_tx,
            release: release_rx,
        })
        .unwrap();
    entered_rx.recv().unwrap(); // the writer is parked; the queue is empty

    for n in 0..10 {
        store.record_request(row(T0 + u64::from(n), n)); // must return immediately
    }
    assert_eq!(store.dropped(), 6);

    drop(release_tx);
    store.flush();
    assert_eq!(store.request_log_count().unwrap(), 4);
    let models: Vec<String> = store
        .recent_requests(10)
        .unwrap()
        .into_iter()
        .map(|r| r.client_model)
        .collect();
    assert_eq!(
        models,
        ["model-3", "model-2", "model-1", "model-0"],
        "the first rows were kept"
    );
}

#[test]
fn close_is_idempotent_and_later_calls_are_harmless() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_in(&dir);
    let store = Store::open(&cfg(&path)).unwrap();
    store.record_request(row(T0, 0));
    store.close();
    assert!(
        !with_suffix(&path, "-wal").exists(),
        "WAL checkpointed and removed at close"
    );
    store.close();
    store.flush(); // returns at once
    store.record_request(row(T0 + 1, 1));
    assert_eq!(
        store.dropped(),
        1,
        "rows after close are counted, not written"
    );
    assert_eq!(
        store.request_log_count().unwrap(),
        1,
        "reads still work after close"
    );
    assert!(format!("{store:?}").contains("open: false"));
    drop(store); // Drop after close is a no-op
}

#[test]
fn flush_and_close_return_if_the_writer_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&cfg(&db_in(&dir))).unwrap();
    // Stop the thread behind the handle's back (as if it had died).
    store.sender().send(writer::Msg::Close).unwrap();
    let handle = lock(&store.thread).take().unwrap();
    handle.join().unwrap();
    *lock(&store.thread) = Some(std::thread::spawn(|| {}));
    // Bounded: a flush or close that waits on the dead writer fails here instead of hanging.
    let store = std::sync::Arc::new(store);
    let (tx, rx) = sync_channel(1);
    let s = std::sync::Arc::clone(&store);
    std::thread::spawn(move || {
        s.flush();
        s.close();
        s.close();
        let _ = tx.send(());
    });
    assert!(
        rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok(),
        "flush/close hung on a writer that is gone"
    );
    store.record_request(row(T0, 0));
    assert_eq!(store.dropped(), 1, "a row after close is counted as lost");
    assert_eq!(store.request_log_count().unwrap(), 0);
}

#[test]
fn store_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Store>();
    let dir = tempfile::tempdir().unwrap();
    let store = std::sync::Arc::new(Store::open(&cfg(&db_in(&dir))).unwrap());
    let handles: Vec<_> = (0..4)
        .map(|t| {
            let s = std::sync::Arc::clone(&store);
            std::thread::spawn(move || {
                for n in 0..100 {
                    s.record_request(row(T0 + n, t));
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    store.flush();
    assert_eq!(store.request_log_count().unwrap() + store.dropped(), 400);
}
