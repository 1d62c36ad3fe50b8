//! The writer thread: owns the `rusqlite::Connection`, batches queued `request_log` rows and
//! state writes into transactions and enforces retention.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

use super::RequestLogRow;
use super::state::{self, StateWrite};

/// Most rows (request rows plus state writes) written in one transaction.
pub(crate) const MAX_BATCH_ROWS: usize = 4096;
/// Most request time (by `at_unix_ms`, ms) one batch spans: kill -9 loses at most ~1 s of rows.
pub(crate) const BATCH_SPAN_MS: u64 = 1_000;
/// Retention runs at most once per this much request time (ms), unless forced.
pub(crate) const PRUNE_INTERVAL_MS: u64 = 5_000;
/// How long the writer waits after the first row of an idle period before writing, so rows
/// of a burst share one wake-up and one transaction (25 ms; far inside the one second of
/// writes a crash may lose).
pub(crate) const WRITE_LINGER: std::time::Duration = std::time::Duration::from_millis(25);

/// A message to the writer thread.
pub(crate) enum Msg {
    /// Append one `request_log` row (boxed, like `State`, so a queue slot is a few words: the
    /// queue preallocates and touches every slot at startup).
    Row(Box<RequestLogRow>),
    /// Apply one state change (UPSERT or delete).
    State(Box<StateWrite>),
    /// Ack once everything queued before this message is committed.
    Flush(SyncSender<()>),
    /// Enforce retention now, measuring age against `now_unix_ms` (wall clock, ms), and prune
    /// lockouts and pins that expired before it.
    Retain {
        /// Wall-clock now, Unix ms.
        now_unix_ms: u64,
    },
    /// Commit, enforce retention, checkpoint the WAL and stop.
    Close,
    /// Test hook: signal `entered`, then block until `release` yields or disconnects.
    #[cfg(test)]
    Pause {
        /// Signalled once the writer is paused.
        entered: SyncSender<()>,
        /// The writer resumes when this yields or its sender is dropped.
        release: Receiver<()>,
    },
}

/// `request_log` bounds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retention {
    /// Keep at most this many rows (the newest).
    pub(crate) max_rows: u64,
    /// Keep rows at most this old, ms.
    pub(crate) max_age_ms: u64,
}

impl Retention {
    /// Bounds from the config values.
    pub(crate) fn new(max_rows: u64, max_age: Duration) -> Self {
        Self {
            max_rows,
            max_age_ms: u64::try_from(max_age.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Saturating `u64` → SQLite integer.
pub(crate) fn to_sql_int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Newest `at_unix_ms` in `request_log` (0 when empty).
pub(crate) fn newest_at(conn: &Connection) -> rusqlite::Result<u64> {
    let v: Option<i64> =
        conn.query_row("SELECT MAX(at_unix_ms) FROM request_log", [], |r| r.get(0))?;
    Ok(v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0))
}

/// Deletes rows beyond the newest `max_rows` (by id) and rows older than `reference_ms -
/// max_age_ms`; returns how many rows were deleted.
pub(crate) fn prune(
    conn: &Connection,
    retention: Retention,
    reference_ms: u64,
) -> rusqlite::Result<usize> {
    let by_rows = prune_rows(conn, retention.max_rows)?;
    let by_age = match reference_ms.checked_sub(retention.max_age_ms) {
        Some(cutoff) => conn.execute(
            "DELETE FROM request_log WHERE at_unix_ms < ?1",
            params![to_sql_int(cutoff)],
        )?,
        None => 0,
    };
    Ok(by_rows + by_age)
}

/// Deletes rows whose id is `max_rows` or more below the newest id; returns how many. Runs
/// inside every batch's own transaction, so `request_log` never holds more than `max_rows`
/// committed rows. Ids are assigned in insert order, so this keeps exactly the newest
/// `max_rows` rows (fewer only where age retention already left a gap). Finding the bound
/// is one index lookup; the former `OFFSET max_rows` walk cost ~0.5 ms per batch at 100k rows.
fn prune_rows(conn: &Connection, max_rows: u64) -> rusqlite::Result<usize> {
    conn.prepare_cached(
        "DELETE FROM request_log WHERE id <= (SELECT MAX(id) FROM request_log) - ?1",
    )?
    .execute(params![to_sql_int(max_rows)])
}

/// Loss counters shared between the [`Store`](super::Store) handle and the writer.
#[derive(Debug, Default)]
pub(crate) struct Dropped {
    /// `request_log` rows lost.
    pub(crate) rows: AtomicU64,
    /// State writes lost.
    pub(crate) state: AtomicU64,
}

/// One write-behind batch: committed in one transaction.
#[derive(Default)]
pub(crate) struct Batch {
    pub(crate) rows: Vec<RequestLogRow>,
    /// Applied in queue order, so the last write per key wins.
    pub(crate) state: Vec<StateWrite>,
}

impl Batch {
    fn len(&self) -> usize {
        self.rows.len() + self.state.len()
    }
}

/// State owned by the writer thread.
pub(crate) struct Writer {
    conn: Connection,
    path: PathBuf,
    rx: Receiver<Msg>,
    dropped: Arc<Dropped>,
    retention: Retention,
    /// A non-row message read while draining a batch; handled next.
    carry: Option<Msg>,
    /// Newest time seen (row `at_unix_ms` or a `Retain` wall time), ms.
    reference_ms: u64,
    /// `reference_ms` at the last retention pass.
    last_prune_ms: u64,
    /// Rows written since the last retention pass.
    since_prune: u64,
}

impl Writer {
    /// A writer over an open, migrated connection whose retention already ran at `reference_ms`.
    pub(crate) fn new(
        conn: Connection,
        path: PathBuf,
        rx: Receiver<Msg>,
        dropped: Arc<Dropped>,
        retention: Retention,
        reference_ms: u64,
    ) -> Self {
        Self {
            conn,
            path,
            rx,
            dropped,
            retention,
            carry: None,
            reference_ms,
            last_prune_ms: reference_ms,
            since_prune: 0,
        }
    }

    /// The thread body: runs until `Close` or until every sender is gone.
    ///
    /// Rows are written in batches: after the first row of an idle period the thread waits
    /// [`WRITE_LINGER`] before collecting, so bursts become one transaction.
    pub(crate) fn run(mut self) {
        loop {
            let msg = match self.carry.take() {
                Some(m) => m,
                None => match self.rx.recv() {
                    Ok(m) => m,
                    Err(_) => break,
                },
            };
            match msg {
                Msg::Row(_) | Msg::State(_) => {
                    // Linger briefly so a busy proxy's rows share one wake-up and one
                    // transaction: senders only wake this thread when it is idle in `recv`,
                    // which keeps futex wake-ups off the request path (≤ 1 s loss bound holds).
                    if matches!(msg, Msg::Row(_)) {
                        std::thread::sleep(WRITE_LINGER);
                    }
                    let batch = self.collect(msg);
                    self.write(batch);
                    // The row bound is kept inside each batch's transaction (`write_batch`);
                    // the age bound is checked at most once per `PRUNE_INTERVAL_MS`.
                    if self.since_prune > 0
                        && self.reference_ms >= self.last_prune_ms.saturating_add(PRUNE_INTERVAL_MS)
                    {
                        self.prune();
                    }
                }
                Msg::Flush(ack) => {
                    if self.since_prune > 0 {
                        self.prune();
                    }
                    let _ = ack.send(());
                }
                Msg::Retain { now_unix_ms } => {
                    self.reference_ms = self.reference_ms.max(now_unix_ms);
                    self.prune();
                    self.prune_state(now_unix_ms);
                }
                Msg::Close => break,
                #[cfg(test)]
                Msg::Pause { entered, release } => {
                    let _ = entered.send(());
                    let _ = release.recv();
                }
            }
        }
        self.shutdown();
    }

    /// Drains available rows and state writes after `first` (a `Row` or `State`) into one
    /// batch: stops at any other message (kept in `carry`), an empty queue, [`MAX_BATCH_ROWS`],
    /// or a row more than [`BATCH_SPAN_MS`] after the batch's first row.
    fn collect(&mut self, first: Msg) -> Batch {
        let mut batch = Batch::default();
        let mut span_end = None;
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            match msg {
                Msg::Row(row) => match span_end {
                    Some(end) if row.at_unix_ms > end => {
                        self.carry = Some(Msg::Row(row));
                        break;
                    }
                    Some(_) => batch.rows.push(*row),
                    None => {
                        span_end = Some(row.at_unix_ms.saturating_add(BATCH_SPAN_MS));
                        batch.rows.push(*row);
                    }
                },
                Msg::State(w) => batch.state.push(*w),
                other => {
                    self.carry = Some(other);
                    break;
                }
            }
            if batch.len() >= MAX_BATCH_ROWS {
                break;
            }
            next = self.rx.try_recv().ok();
        }
        batch
    }

    /// Writes `batch` in one transaction; on failure logs and counts its rows and state writes
    /// as dropped.
    fn write(&mut self, batch: Batch) {
        match write_batch(&mut self.conn, &batch, self.retention.max_rows) {
            Ok(()) => {
                self.since_prune += batch.rows.len() as u64;
                if let Some(newest) = batch.rows.iter().map(|r| r.at_unix_ms).max() {
                    self.reference_ms = self.reference_ms.max(newest);
                }
            }
            Err(e) => {
                self.dropped
                    .rows
                    .fetch_add(batch.rows.len() as u64, Ordering::Relaxed);
                self.dropped
                    .state
                    .fetch_add(batch.state.len() as u64, Ordering::Relaxed);
                tracing::warn!(path = %self.path.display(), rows = batch.rows.len(), state_writes = batch.state.len(), error = %e, "store batch not written");
            }
        }
    }

    /// Deletes lockouts and pins that expired before `now_unix_ms` (wall clock).
    fn prune_state(&mut self, now_unix_ms: u64) {
        match state::prune_expired(&self.conn, now_unix_ms) {
            Ok(n) if n > 0 => tracing::debug!(rows = n, "expired lockouts and pins deleted"),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "pruning expired state failed")
            }
        }
    }

    fn prune(&mut self) {
        match prune(&self.conn, self.retention, self.reference_ms) {
            Ok(n) if n > 0 => tracing::debug!(rows = n, "request_log retention deleted rows"),
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "request_log retention failed")
            }
        }
        self.last_prune_ms = self.reference_ms;
        self.since_prune = 0;
    }

    /// Handles anything queued after `Close` (rows count as dropped, flushes are acked), runs a
    /// last retention pass and checkpoints the WAL so the file stands alone.
    fn shutdown(mut self) {
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                Msg::Row(_) => {
                    self.dropped.rows.fetch_add(1, Ordering::Relaxed);
                }
                Msg::State(_) => {
                    self.dropped.state.fetch_add(1, Ordering::Relaxed);
                }
                Msg::Flush(ack) => {
                    let _ = ack.send(());
                }
                _ => {}
            }
        }
        if self.since_prune > 0 {
            self.prune();
        }
        if let Err(e) = self
            .conn
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        {
            tracing::debug!(path = %self.path.display(), error = %e, "WAL checkpoint at close failed");
        }
        if let Err((_, e)) = self.conn.close() {
            tracing::warn!(path = %self.path.display(), error = %e, "closing the state database failed");
        }
    }
}

/// Rows inserted between two offers of the CPU (see [`yield_between_rows`]): ~32 × 3 µs, so a
/// request that becomes ready while a batch is written waits at most ~0.1 ms.
const ROWS_PER_YIELD: usize = 32;

/// Before every [`ROWS_PER_YIELD`]th row after the first, offers the CPU to any runnable
/// thread. A thread that just woke from a long sleep (the writer, after its linger) usually
/// keeps the CPU against a request thread that wakes after it; without this a 350-row batch
/// held a CPU it shared with the runtime worker for ~1.2 ms. Nothing the request path needs
/// is held meanwhile (the transaction locks only the database file).
fn yield_between_rows(i: usize) {
    if i > 0 && i % ROWS_PER_YIELD == 0 {
        std::thread::yield_now();
    }
}

/// The `request_log` columns a row writes, in bind order.
const ROW_COLUMNS: &str = "at_unix_ms, route, client_model, target, status, latency_ms, attempts, bytes, outcome, translated, tokens_in, tokens_out, injected, continued";

/// Values bound per row (the length of [`ROW_COLUMNS`]).
const ROW_PARAMS: usize = 14;

/// `INSERT INTO request_log (…) VALUES (?,…), …` for `n` rows.
fn insert_sql(n: usize) -> String {
    let one = format!("({})", vec!["?"; ROW_PARAMS].join(", "));
    format!(
        "INSERT INTO request_log ({ROW_COLUMNS}) VALUES {}",
        vec![one; n].join(", ")
    )
}

/// The statement for a full chunk of [`ROWS_PER_YIELD`] rows, built once.
static INSERT_CHUNK: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| insert_sql(ROWS_PER_YIELD));

/// The statement for one row.
static INSERT_ONE: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| insert_sql(1));

/// Inserts `rows` (at most [`ROWS_PER_YIELD`]): a full chunk as one multi-row statement (a
/// statement's fixed cost, about a fifth of a one-row insert, paid once per chunk), a
/// shorter tail row by row.
fn insert_rows(conn: &Connection, rows: &[RequestLogRow]) -> rusqlite::Result<()> {
    if rows.len() == ROWS_PER_YIELD {
        let mut stmt = conn.prepare_cached(&INSERT_CHUNK)?;
        for (i, r) in rows.iter().enumerate() {
            bind_row(&mut stmt, i * ROW_PARAMS, r)?;
        }
        stmt.raw_execute()?;
        return Ok(());
    }
    let mut stmt = conn.prepare_cached(&INSERT_ONE)?;
    for r in rows {
        bind_row(&mut stmt, 0, r)?;
        stmt.raw_execute()?;
    }
    Ok(())
}

/// Binds `r`'s values to parameters `at + 1 ..= at + ROW_PARAMS` of `stmt`.
fn bind_row(
    stmt: &mut rusqlite::Statement<'_>,
    at: usize,
    r: &RequestLogRow,
) -> rusqlite::Result<()> {
    stmt.raw_bind_parameter(at + 1, to_sql_int(r.at_unix_ms))?;
    stmt.raw_bind_parameter(at + 2, &r.route)?;
    stmt.raw_bind_parameter(at + 3, &r.client_model)?;
    stmt.raw_bind_parameter(at + 4, &r.target)?;
    stmt.raw_bind_parameter(at + 5, r.status)?;
    stmt.raw_bind_parameter(at + 6, to_sql_int(r.latency_ms))?;
    stmt.raw_bind_parameter(at + 7, r.attempts)?;
    stmt.raw_bind_parameter(at + 8, to_sql_int(r.bytes))?;
    stmt.raw_bind_parameter(at + 9, &r.outcome)?;
    stmt.raw_bind_parameter(at + 10, &r.translated)?;
    stmt.raw_bind_parameter(at + 11, r.tokens_in.map(to_sql_int))?;
    stmt.raw_bind_parameter(at + 12, r.tokens_out.map(to_sql_int))?;
    stmt.raw_bind_parameter(at + 13, i64::from(r.injected))?;
    stmt.raw_bind_parameter(at + 14, i64::from(r.continued))?;
    Ok(())
}

/// Inserts the batch's rows, deletes the rows now beyond the newest `max_rows`, and applies
/// its state writes (in order), all in one `IMMEDIATE` transaction: a reader never sees more
/// than `max_rows` rows, even during a burst.
pub(crate) fn write_batch(
    conn: &mut Connection,
    batch: &Batch,
    max_rows: u64,
) -> rusqlite::Result<()> {
    let rows = &batch.rows;
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    for (i, chunk) in rows.chunks(ROWS_PER_YIELD).enumerate() {
        yield_between_rows(i * ROWS_PER_YIELD);
        insert_rows(&tx, chunk)?;
    }
    if !rows.is_empty() {
        prune_rows(&tx, max_rows)?;
    }
    for w in &batch.state {
        state::apply(&tx, w)?;
    }
    tx.commit()
}
