//! `Store`: SQLite persistence (request log, cooldowns, breakers, lockouts, pins, settings)
//! owned by one writer thread.
//!
//! # Design
//!
//! One dedicated thread (`sluice-store`) owns the read-write `rusqlite::Connection`. The
//! [`Store`] handle talks to it over a bounded `std::sync::mpsc::sync_channel`
//! ([`DEFAULT_QUEUE_CAPACITY`] messages). The request path only ever calls
//! [`Store::record_request`], which uses `try_send`: when the queue is full the row is dropped
//! and counted ([`Store::dropped`]) — the proxy never waits on disk. Resilience state changes
//! ([`StateWrite`], from the core) take the same road through [`Store::write`] (lost ones are
//! counted in [`Store::dropped_state`]) and are read back once at startup with
//! [`Store::load_state`] (see `state.rs`; the store never depends on `crate::policy`).
//!
//! The writer drains everything available (at most ~1 s of request time or 4096 rows and state
//! writes) and writes it in one transaction (write-behind); state writes are full-row UPSERTs
//! (or deletes) applied in queue order, so the last write per key wins. The database runs in WAL mode with
//! `synchronous=NORMAL`, so a kill -9 loses at most the last uncommitted batch and never corrupts
//! the file. `request_log` retention keeps the newest `request_log_max_rows` rows in the same
//! transaction that inserts a batch (the bound holds at every commit, bursts included), and
//! drops rows older than `request_log_max_age` at open, on flush, and after writes at most
//! once per 5 s of request time. Age is measured against the newest row's `at_unix_ms` (or a wall time handed
//! in via [`Store::enforce_retention`]); the store never reads the clock itself. The wall time
//! handed to [`Store::enforce_retention`] also prunes lockouts whose `until` and pins whose
//! `expires_at` have passed.
//!
//! Opening is synchronous (directory, WAL, migrations via `PRAGMA user_version`, see
//! `schema.rs`), so a bad file is a clear startup error naming the path and offering
//! `sluice --reset-state` ([`reset_state`]). Reading helpers use a separate read-only connection,
//! which WAL lets run beside the writer.

pub mod history;
mod schema;
pub mod secret;
mod state;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_state;
mod writer;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;

use rusqlite::{Connection, params};

pub use schema::{SCHEMA_VERSION, TABLES};
pub use state::{
    AffinityRow, BreakerRow, ConnectionRow, LeaseRow, LockoutRow, PersistedState, SettingRow,
    StateWrite,
};

use crate::config::StoreConfig;
use writer::{Dropped, Msg, Retention, Writer};

/// Messages the writer queue holds before [`Store::record_request`] starts dropping rows.
pub const DEFAULT_QUEUE_CAPACITY: usize = 8192;

/// Why the store could not be opened or used. Display names the file and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database (or its directory) could not be created or opened, e.g. a corrupt file.
    #[error("{path}: {message}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
    /// The file's schema version is newer than this binary knows; it is never downgraded.
    #[error(
        "{path}: the state database has schema version {found} but this sluice only knows versions up to {known} (written by a newer sluice?); upgrade sluice, or {hint}",
        hint = schema::RESET_HINT
    )]
    TooNew {
        /// The database file.
        path: PathBuf,
        /// `PRAGMA user_version` found in the file.
        found: i64,
        /// Newest schema version this binary knows ([`SCHEMA_VERSION`]).
        known: u32,
    },
    /// A migration step failed (the database stays at the previous version).
    #[error(
        "{path}: cannot migrate the state database to schema version {version} ({message}); {hint}",
        hint = schema::RESET_HINT
    )]
    Migrate {
        /// The database file.
        path: PathBuf,
        /// The version the failed step was migrating to.
        version: u32,
        /// SQLite's message.
        message: String,
    },
    /// A reading helper failed.
    #[error("{path}: cannot read the state database ({message}); check the file, or {hint}", hint = schema::RESET_HINT)]
    Read {
        /// The database file.
        path: PathBuf,
        /// SQLite's message.
        message: String,
    },
    /// [`reset_state`] could not move a file aside.
    #[error(
        "{path}: cannot move the state database aside ({message}); check permissions on its directory"
    )]
    Reset {
        /// The file that could not be moved.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
}

impl StoreError {
    /// Short machine-readable kind for log fields: `open`, `too_new`, `migrate`, `read`, `reset`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Open { .. } => "open",
            Self::TooNew { .. } => "too_new",
            Self::Migrate { .. } => "migrate",
            Self::Read { .. } => "read",
            Self::Reset { .. } => "reset",
        }
    }
}

/// One `request_log` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestLogRow {
    /// Prompt tokens the upstream reported (NULL when unknown or written by an older sluice).
    pub tokens_in: Option<u64>,
    /// Completion tokens the upstream reported (NULL when unknown).
    pub tokens_out: Option<u64>,
    /// Start time, Unix ms.
    pub at_unix_ms: u64,
    /// Client route path.
    pub route: String,
    /// Model the client asked for.
    pub client_model: String,
    /// Last target tried, `provider:connection/model`.
    pub target: String,
    /// Status returned to the client.
    pub status: u16,
    /// Latency in ms.
    pub latency_ms: u64,
    /// Upstream attempts.
    pub attempts: u32,
    /// Bytes relayed to the client.
    pub bytes: u64,
    /// Outcome word (see `RequestView::outcome`).
    pub outcome: String,
    /// `anthropic→openai` when the last attempt was translated; empty otherwise.
    pub translated: String,
    /// Whether an attempt met an operator-injected fault (`RequestView::injected`).
    pub injected: bool,
    /// Whether the stream was continued after a break (`RequestView::continued`).
    pub continued: bool,
}

/// Handle to the writer thread. Share it as `Arc<Store>`; every method takes `&self`.
pub struct Store {
    path: PathBuf,
    tx: SyncSender<Msg>,
    /// Request rows and state writes lost: queue full, store closed, or a failed write.
    dropped: Arc<Dropped>,
    /// The writer thread; `None` once closed.
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Lazily opened read-only connection for the reading helpers.
    reader: Mutex<Option<Connection>>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("path", &self.path)
            .field("dropped", &self.dropped())
            .field("dropped_state", &self.dropped_state())
            .field("open", &lock(&self.thread).is_some())
            .finish()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Store {
    /// Opens (creating if needed) the database at `cfg.path`: creates the parent directory,
    /// enables WAL, migrates the schema, enforces `request_log` retention, and starts the writer
    /// thread with a queue of [`DEFAULT_QUEUE_CAPACITY`] messages.
    pub fn open(cfg: &StoreConfig) -> Result<Store, StoreError> {
        Self::open_with_capacity(cfg, DEFAULT_QUEUE_CAPACITY)
    }

    /// [`Store::open`] with a queue of `capacity` messages (tests use a tiny one).
    pub(crate) fn open_with_capacity(
        cfg: &StoreConfig,
        capacity: usize,
    ) -> Result<Store, StoreError> {
        let path = cfg.path.clone();
        let conn = schema::open_writer(&path)?;
        let retention = Retention::new(cfg.request_log_max_rows, cfg.request_log_max_age);
        let retention_err = |e: rusqlite::Error| StoreError::Open {
            path: path.clone(),
            message: format!(
                "cannot open the state database ({e}); {}",
                schema::RESET_HINT
            ),
        };
        let reference_ms = writer::newest_at(&conn).map_err(retention_err)?;
        writer::prune(&conn, retention, reference_ms).map_err(retention_err)?;

        let (tx, rx) = sync_channel(capacity);
        let dropped = Arc::new(Dropped::default());
        let w = Writer::new(
            conn,
            path.clone(),
            rx,
            Arc::clone(&dropped),
            retention,
            reference_ms,
        );
        let thread = std::thread::Builder::new()
            .name("sluice-store".into())
            .spawn(move || {
                crate::support::sched::background_thread();
                w.run()
            })
            .map_err(|e| StoreError::Open {
                path: path.clone(),
                message: format!(
                    "cannot start the store thread ({e}); free some resources and retry"
                ),
            })?;
        Ok(Store {
            path,
            tx,
            dropped,
            thread: Mutex::new(Some(thread)),
            reader: Mutex::new(None),
        })
    }

    /// Queues a `request_log` row; never blocks. When the queue is full or the store is closed
    /// the row is dropped and counted in [`Store::dropped`].
    pub fn record_request(&self, row: RequestLogRow) {
        match self.tx.try_send(Msg::Row(Box::new(row))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.rows.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Queues a state change; never blocks. When the queue is full or the store is closed the
    /// write is dropped and counted in [`Store::dropped_state`]. Writes are applied in queue
    /// order, so send each key's writes in the order its state changed (the last one wins).
    pub fn write(&self, w: StateWrite) {
        match self.tx.try_send(Msg::State(Box::new(w))) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.state.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// `request_log` rows lost so far (queue full, store closed, or a failed write), in rows.
    pub fn dropped(&self) -> u64 {
        self.dropped.rows.load(Ordering::Relaxed)
    }

    /// State writes lost so far (queue full, store closed, or a failed write).
    pub fn dropped_state(&self) -> u64 {
        self.dropped.state.load(Ordering::Relaxed)
    }

    /// Reads every persisted breaker, connection, lockout, pin and setting (at startup, before
    /// serving), as one consistent snapshot of what is committed; call [`Store::flush`] first
    /// to include queued writes. Expired lockouts and pins may still be present, and rows for
    /// providers or connections no longer in the config are the caller's to ignore.
    pub fn load_state(&self) -> Result<PersistedState, StoreError> {
        self.with_reader(state::load)
    }

    /// Queues a retention pass measuring `request_log` age against `now_unix_ms` (wall clock,
    /// Unix ms) as well as the newest row, and deleting lockouts and session pins that expired
    /// before `now_unix_ms`; never blocks (skipped if the queue is full).
    pub fn enforce_retention(&self, now_unix_ms: u64) {
        let _ = self.tx.try_send(Msg::Retain { now_unix_ms });
    }

    /// Blocks until every row and state write queued before this call is committed (and
    /// retention has run).
    /// Returns quietly if the store is closed or its thread died.
    pub fn flush(&self) {
        if lock(&self.thread).is_none() {
            return;
        }
        let (ack_tx, ack_rx) = sync_channel(1);
        if self.tx.send(Msg::Flush(ack_tx)).is_err() {
            return;
        }
        // Err means the writer dropped the ack without answering (it died): return quietly.
        let _ = ack_rx.recv();
    }

    /// Flushes, checkpoints the WAL and stops the writer thread. Idempotent; also runs on drop.
    /// Later rows and state writes are dropped and counted.
    pub fn close(&self) {
        let mut thread = lock(&self.thread);
        let Some(handle) = thread.take() else {
            return;
        };
        // Close our reader first so the writer's close is the last one and removes -wal/-shm.
        lock(&self.reader).take();
        // A failed send means the thread already exited, so joining cannot block.
        let _ = self.tx.send(Msg::Close);
        let _ = handle.join();
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The newest `limit` `request_log` rows, newest (most recently recorded) first. Reads what
    /// is committed; call [`Store::flush`] first to include queued rows.
    pub fn recent_requests(&self, limit: usize) -> Result<Vec<RequestLogRow>, StoreError> {
        self.with_reader(|conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT at_unix_ms, route, client_model, target, status, latency_ms, attempts, bytes, outcome, translated, tokens_in, tokens_out, injected, continued
                 FROM request_log ORDER BY id DESC LIMIT ?1",
            )?;
            let limit = i64::try_from(limit).unwrap_or(i64::MAX);
            let rows = stmt.query_map(params![limit], |r| {
                Ok(RequestLogRow {
                    at_unix_ms: from_sql_int(r.get(0)?),
                    route: r.get(1)?,
                    client_model: r.get(2)?,
                    target: r.get(3)?,
                    status: u16::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
                    latency_ms: from_sql_int(r.get(5)?),
                    attempts: u32::try_from(r.get::<_, i64>(6)?).unwrap_or(0),
                    bytes: from_sql_int(r.get(7)?),
                    outcome: r.get(8)?,
                    translated: r.get(9)?,
                    tokens_in: r.get::<_, Option<i64>>(10)?.map(from_sql_int),
                    tokens_out: r.get::<_, Option<i64>>(11)?.map(from_sql_int),
                    injected: r.get::<_, i64>(12)? != 0,
                    continued: r.get::<_, i64>(13)? != 0,
                })
            })?;
            rows.collect()
        })
    }

    /// Number of committed `request_log` rows.
    pub fn request_log_count(&self) -> Result<u64, StoreError> {
        self.with_reader(|conn| {
            let n: i64 = conn.query_row("SELECT COUNT(*) FROM request_log", [], |r| r.get(0))?;
            Ok(from_sql_int(n))
        })
    }

    /// Runs `f` on the (lazily opened) read-only connection.
    fn with_reader<T>(
        &self,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let read_err = |e: rusqlite::Error| StoreError::Read {
            path: self.path.clone(),
            message: e.to_string(),
        };
        let mut reader = lock(&self.reader);
        let conn = match reader.take() {
            Some(c) => c,
            None => schema::open_reader(&self.path).map_err(read_err)?,
        };
        let out = f(&conn).map_err(read_err);
        *reader = Some(conn);
        out
    }

    #[cfg(test)]
    pub(crate) fn sender(&self) -> &SyncSender<Msg> {
        &self.tx
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.close();
    }
}

fn from_sql_int(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// Moves the database at `path` and its `-wal`/`-shm` files aside to
/// `<name>.bak-<now_unix_ms>` (plus `-wal`/`-shm`, so the backup opens with its WAL); never
/// deletes and never overwrites (a `.N` suffix is added on a name clash). Call it while no
/// `Store` has the file open. Returns the backup path, or `None` if there was no database file.
pub fn reset_state(path: &Path, now_unix_ms: u64) -> Result<Option<PathBuf>, StoreError> {
    let reset_err = |p: &Path, message: String| StoreError::Reset {
        path: p.to_path_buf(),
        message,
    };
    let Some(name) = path.file_name() else {
        return Err(reset_err(path, "the path has no file name".into()));
    };
    let sidecar = |base: &Path, suffix: &str| {
        let mut s = base.as_os_str().to_os_string();
        s.push(suffix);
        PathBuf::from(s)
    };
    let exists = |p: &Path| p.symlink_metadata().is_ok();
    let present: Vec<&str> = ["", "-wal", "-shm"]
        .into_iter()
        .filter(|sfx| exists(&sidecar(path, sfx)))
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    // Pick a backup name none of whose files exist yet.
    let mut n = 0u32;
    let backup = loop {
        let mut stem = name.to_os_string();
        stem.push(format!(".bak-{now_unix_ms}"));
        if n > 0 {
            stem.push(format!(".{n}"));
        }
        let candidate = path.with_file_name(stem);
        if ["", "-wal", "-shm"]
            .iter()
            .all(|sfx| !exists(&sidecar(&candidate, sfx)))
        {
            break candidate;
        }
        n = n.saturating_add(1);
        if n == u32::MAX {
            return Err(reset_err(path, "no free backup name".into()));
        }
    };
    for sfx in &present {
        let from = sidecar(path, sfx);
        let to = sidecar(&backup, sfx);
        std::fs::rename(&from, &to)
            .map_err(|e| reset_err(&from, format!("rename to '{}': {e}", to.display())))?;
        tracing::info!(from = %from.display(), to = %to.display(), "state file moved aside");
    }
    Ok(present.contains(&"").then_some(backup))
}
