//! Schema migrations, versioned with `PRAGMA user_version`, and connection setup.
//!
//! `MIGRATIONS[i]` takes the database from version `i` to `i + 1`. Each step runs in its own
//! `IMMEDIATE` transaction together with the `user_version` bump, so a crash mid-migration leaves
//! the previous version intact. Never edit a shipped step: append a new one (`ALTER TABLE … ADD
//! COLUMN`, or rename aside / create / copy / drop when columns change shape, as v2 does).

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

use super::StoreError;

/// How long a statement waits for a lock held by another connection before failing.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Schema v1: every table the store keeps. Deadlines are wall-clock Unix ms (converted to
/// monotonic deadlines on load); `connections` never holds credentials.
const V1: &str = "
CREATE TABLE request_log (
    id            INTEGER PRIMARY KEY,
    at_unix_ms    INTEGER NOT NULL,
    route         TEXT    NOT NULL,
    client_model  TEXT    NOT NULL,
    target        TEXT    NOT NULL,
    status        INTEGER NOT NULL,
    latency_ms    INTEGER NOT NULL,
    attempts      INTEGER NOT NULL,
    bytes         INTEGER NOT NULL,
    outcome       TEXT    NOT NULL
);
CREATE INDEX request_log_at ON request_log (at_unix_ms);

CREATE TABLE circuit_breakers (
    provider              TEXT    PRIMARY KEY,
    state                 TEXT    NOT NULL DEFAULT 'closed',
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    open_cycles           INTEGER NOT NULL DEFAULT 0,
    opened_at_unix_ms     INTEGER,
    retry_at_unix_ms      INTEGER,
    last_transition_unix_ms INTEGER,
    last_error            TEXT,
    updated_at_unix_ms    INTEGER NOT NULL
);

CREATE TABLE connections (
    provider              TEXT    NOT NULL,
    connection            TEXT    NOT NULL,
    state                 TEXT    NOT NULL DEFAULT 'active',
    reason                TEXT,
    backoff_level         INTEGER NOT NULL DEFAULT 0,
    consecutive_failures  INTEGER NOT NULL DEFAULT 0,
    cooldown_until_unix_ms INTEGER,
    last_error            TEXT,
    updated_at_unix_ms    INTEGER NOT NULL,
    PRIMARY KEY (provider, connection)
);

CREATE TABLE model_lockouts (
    provider              TEXT    NOT NULL,
    connection            TEXT    NOT NULL,
    model                 TEXT    NOT NULL,
    scope                 TEXT    NOT NULL DEFAULT 'model',
    reason                TEXT,
    failures              INTEGER NOT NULL DEFAULT 0,
    backoff_level         INTEGER NOT NULL DEFAULT 0,
    locked_until_unix_ms  INTEGER,
    updated_at_unix_ms    INTEGER NOT NULL,
    PRIMARY KEY (provider, connection, model)
);

CREATE TABLE session_affinity (
    session_key           TEXT    PRIMARY KEY,
    route                 TEXT    NOT NULL DEFAULT '',
    target                TEXT    NOT NULL,
    expires_at_unix_ms    INTEGER NOT NULL,
    updated_at_unix_ms    INTEGER NOT NULL
);
CREATE INDEX session_affinity_expires ON session_affinity (expires_at_unix_ms);

CREATE TABLE settings (
    key                   TEXT    PRIMARY KEY,
    value                 TEXT    NOT NULL,
    updated_at_unix_ms    INTEGER NOT NULL
);
";

/// Schema v2: the resilience state tables take the shapes of the store's row types
/// (`state.rs`). The v1 tables were never written by a released sluice, but v1 databases exist,
/// so each table is rebuilt (rename aside, create, copy what maps, drop) rather than edited in
/// place; `settings` only renames `value` to `value_json`. v1 affinity `target`s of the form
/// `provider:connection[/model]` are split; any other v1 pin is dropped (pins are soft).
const V2: &str = "
ALTER TABLE circuit_breakers RENAME TO circuit_breakers_v1;
CREATE TABLE circuit_breakers (
    provider              TEXT    PRIMARY KEY,
    state                 TEXT    NOT NULL DEFAULT 'closed',
    failure_count         INTEGER NOT NULL DEFAULT 0,
    open_until_unix_ms    INTEGER,
    multiplier            INTEGER NOT NULL DEFAULT 1,
    cycles                INTEGER NOT NULL DEFAULT 0,
    transitions_json      TEXT    NOT NULL DEFAULT '[]',
    updated_at_unix_ms    INTEGER NOT NULL
);
INSERT INTO circuit_breakers (provider, state, failure_count, open_until_unix_ms, cycles, updated_at_unix_ms)
    SELECT provider, state, consecutive_failures, retry_at_unix_ms, open_cycles, updated_at_unix_ms
    FROM circuit_breakers_v1;
DROP TABLE circuit_breakers_v1;

ALTER TABLE connections RENAME TO connections_v1;
CREATE TABLE connections (
    provider                     TEXT    NOT NULL,
    connection                   TEXT    NOT NULL,
    status                       TEXT    NOT NULL DEFAULT 'active',
    cooldown_until_unix_ms       INTEGER,
    cooldown_started_at_unix_ms  INTEGER,
    backoff_level                INTEGER NOT NULL DEFAULT 0,
    last_error                   TEXT    NOT NULL DEFAULT '',
    last_error_kind              TEXT    NOT NULL DEFAULT '',
    last_status                  INTEGER,
    last_failure_at_unix_ms      INTEGER,
    consecutive_auth_failures    INTEGER NOT NULL DEFAULT 0,
    consecutive_rejections       INTEGER NOT NULL DEFAULT 0,
    updated_at_unix_ms           INTEGER NOT NULL,
    reason                       TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (provider, connection)
);
INSERT INTO connections (provider, connection, status, cooldown_until_unix_ms, backoff_level, last_error, last_error_kind, updated_at_unix_ms)
    SELECT provider, connection, state, cooldown_until_unix_ms, backoff_level,
           COALESCE(last_error, ''), COALESCE(reason, ''), updated_at_unix_ms
    FROM connections_v1;
DROP TABLE connections_v1;

ALTER TABLE model_lockouts RENAME TO model_lockouts_v1;
CREATE TABLE model_lockouts (
    provider              TEXT    NOT NULL,
    connection            TEXT    NOT NULL,
    model                 TEXT    NOT NULL,
    scope                 TEXT    NOT NULL DEFAULT 'model',
    reason                TEXT    NOT NULL DEFAULT '',
    failures              INTEGER NOT NULL DEFAULT 0,
    until_unix_ms         INTEGER NOT NULL,
    updated_at_unix_ms    INTEGER NOT NULL,
    PRIMARY KEY (provider, connection, model)
);
CREATE INDEX model_lockouts_until ON model_lockouts (until_unix_ms);
INSERT INTO model_lockouts (provider, connection, model, scope, reason, failures, until_unix_ms, updated_at_unix_ms)
    SELECT provider, connection, model, scope, COALESCE(reason, ''), failures,
           COALESCE(locked_until_unix_ms, 0), updated_at_unix_ms
    FROM model_lockouts_v1;
DROP TABLE model_lockouts_v1;

ALTER TABLE session_affinity RENAME TO session_affinity_v1;
DROP INDEX session_affinity_expires;
CREATE TABLE session_affinity (
    session_key           TEXT    PRIMARY KEY,
    provider              TEXT    NOT NULL,
    connection            TEXT    NOT NULL,
    expires_at_unix_ms    INTEGER NOT NULL
);
CREATE INDEX session_affinity_expires ON session_affinity (expires_at_unix_ms);
INSERT INTO session_affinity (session_key, provider, connection, expires_at_unix_ms)
    SELECT session_key, provider,
           CASE WHEN instr(rest, '/') > 0 THEN substr(rest, 1, instr(rest, '/') - 1) ELSE rest END,
           expires_at_unix_ms
    FROM (SELECT session_key, expires_at_unix_ms,
                 substr(target, 1, instr(target, ':') - 1) AS provider,
                 substr(target, instr(target, ':') + 1) AS rest
          FROM session_affinity_v1 WHERE instr(target, ':') > 1)
    WHERE rest <> '' AND substr(rest, 1, 1) <> '/';
DROP TABLE session_affinity_v1;

ALTER TABLE settings RENAME COLUMN value TO value_json;
";

/// Schema v3, additive (old rows keep working): `request_log.translated` — how the request
/// was translated for the last target tried (`anthropic→openai`), empty when it was forwarded
/// in the client's format — and the upstream's token counts `tokens_in` / `tokens_out` (NULL
/// when the reply carried no usage).
const V3: &str = "
ALTER TABLE request_log ADD COLUMN translated TEXT NOT NULL DEFAULT '';
ALTER TABLE request_log ADD COLUMN tokens_in INTEGER;
ALTER TABLE request_log ADD COLUMN tokens_out INTEGER;
";

/// Schema v4: `request_log.injected` (1 when an attempt of the request met an operator-injected
/// fault; rows written before it read 0).
const V4: &str = "
ALTER TABLE request_log ADD COLUMN injected INTEGER NOT NULL DEFAULT 0;
";

/// Schema v5: `session_leases` — one row per connection that was ever leased: its last lease
/// generation (kept after release so generations never repeat), and while leased the owner
/// token's SHA-256 (hex; never the token) and the expiry. `owner_sha256` is '' once released.
const V5: &str = "
CREATE TABLE session_leases (
    provider              TEXT    NOT NULL,
    connection            TEXT    NOT NULL,
    generation            INTEGER NOT NULL DEFAULT 0,
    owner_sha256          TEXT    NOT NULL DEFAULT '',
    expires_at_unix_ms    INTEGER NOT NULL DEFAULT 0,
    updated_at_unix_ms    INTEGER NOT NULL,
    PRIMARY KEY (provider, connection)
);
";

/// Schema v6: `request_log.continued` (1 when the request's stream broke after text and was
/// continued once with that text as an assistant prefill; rows written before it read 0).
const V6: &str = "
ALTER TABLE request_log ADD COLUMN continued INTEGER NOT NULL DEFAULT 0;
";

/// Every migration step, in order; `MIGRATIONS[i]` moves `user_version` from `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6];

/// Schema version this binary writes (the number of migration steps).
pub const SCHEMA_VERSION: u32 = MIGRATIONS.len() as u32;

/// Every table the current schema has (for tests and diagnostics).
pub const TABLES: [&str; 7] = [
    "request_log",
    "circuit_breakers",
    "connections",
    "model_lockouts",
    "session_affinity",
    "settings",
    "session_leases",
];

/// The fix appended to every "cannot open / migrate" message.
pub(crate) const RESET_HINT: &str = "move it aside with 'sluice --reset-state' or set [store] path";

/// Opens the writer connection: creates the parent directory, checks the file is a writable
/// SQLite database, turns on WAL, `synchronous=NORMAL` and the busy timeout, and migrates.
pub(crate) fn open_writer(path: &Path) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Open {
            path: path.to_path_buf(),
            message: format!(
                "cannot create the directory '{}' for the state database ({e}); check its permissions or set [store] path",
                dir.display()
            ),
        })?;
    }
    let open_err = |e: &dyn std::fmt::Display| StoreError::Open {
        path: path.to_path_buf(),
        message: format!("cannot open the state database ({e}); {RESET_HINT}"),
    };
    check_header(path).map_err(|e| open_err(&e))?;
    let mut conn = Connection::open(path).map_err(|e| open_err(&e))?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(|e| open_err(&e))?;
    // The first statement that reads the header: a garbage file fails here with
    // "file is not a database".
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .map_err(|e| open_err(&e))?;
    if conn
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(|e| open_err(&e))?
    {
        return Err(StoreError::Open {
            path: path.to_path_buf(),
            message: format!(
                "cannot open the state database for writing (the file or its directory is read-only); check permissions, or {RESET_HINT}"
            ),
        });
    }
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(path = %path.display(), mode = %mode, "state database is not in WAL mode");
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(|e| open_err(&e))?;
    migrate(&mut conn, path)?;
    Ok(conn)
}

/// Refuses a non-empty file that does not start with the SQLite header before SQLite touches
/// it: SQLite would otherwise delete a `-wal` it cannot use, and reset-state must keep it.
fn check_header(path: &Path) -> Result<(), String> {
    use std::io::Read;
    const MAGIC: &[u8; 16] = b"SQLite format 3\0";
    let mut file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e.to_string()),
    };
    let mut head = Vec::with_capacity(MAGIC.len());
    file.by_ref()
        .take(MAGIC.len() as u64)
        .read_to_end(&mut head)
        .map_err(|e| e.to_string())?;
    if head.is_empty() || head == MAGIC {
        Ok(())
    } else {
        Err("file is not a database".into())
    }
}

/// Opens a read-only connection for the reading helpers (WAL allows readers beside the writer).
pub(crate) fn open_reader(path: &Path) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_URI,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    Ok(conn)
}

/// The database's `user_version`.
pub(crate) fn user_version(conn: &Connection) -> rusqlite::Result<i64> {
    conn.pragma_query_value(None, "user_version", |r| r.get(0))
}

/// Runs every migration step above the database's `user_version`. A database newer than
/// [`SCHEMA_VERSION`] is refused, never downgraded.
pub(crate) fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let open_err = |e: rusqlite::Error| StoreError::Open {
        path: path.to_path_buf(),
        message: format!("cannot open the state database ({e}); {RESET_HINT}"),
    };
    let found = user_version(conn).map_err(open_err)?;
    check_version(path, found)?;
    for (step, sql) in MIGRATIONS.iter().enumerate() {
        let to = u32::try_from(step + 1).unwrap_or(u32::MAX);
        let migrate_err = |e: rusqlite::Error| StoreError::Migrate {
            path: path.to_path_buf(),
            version: to,
            message: e.to_string(),
        };
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(migrate_err)?;
        // Re-read inside the write lock: another process may have migrated meanwhile.
        let current = user_version(&tx).map_err(migrate_err)?;
        check_version(path, current)?;
        if current > i64::try_from(step).unwrap_or(i64::MAX) {
            continue;
        }
        tx.execute_batch(sql).map_err(migrate_err)?;
        tx.pragma_update(None, "user_version", i64::from(to))
            .map_err(migrate_err)?;
        tx.commit().map_err(migrate_err)?;
        tracing::info!(path = %path.display(), version = to, "state database migrated");
    }
    Ok(())
}

fn check_version(path: &Path, found: i64) -> Result<(), StoreError> {
    if found < 0 || found > i64::from(SCHEMA_VERSION) {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    Ok(())
}
