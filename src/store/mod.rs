//! `Store`: SQLite persistence owned by one writer thread (placeholder; being written).

use std::path::{Path, PathBuf};

use crate::config::StoreConfig;

/// Why the store could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be opened, migrated or written.
    #[error("{path}: {message}")]
    Open {
        /// The database file.
        path: PathBuf,
        /// What went wrong and what to do.
        message: String,
    },
}

/// One `request_log` row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestLogRow {
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
}

/// Handle to the writer thread.
#[derive(Debug)]
pub struct Store {
    path: PathBuf,
}

impl Store {
    /// Opens (creating if needed) the database at `cfg.path`.
    pub fn open(cfg: &StoreConfig) -> Result<Store, StoreError> {
        Ok(Store { path: cfg.path.clone() })
    }
    /// Queues a row; never blocks.
    pub fn record_request(&self, _row: RequestLogRow) {}
    /// Waits until every queued write is committed.
    pub fn flush(&self) {}
    /// Flushes and stops the writer thread.
    pub fn close(&self) {}
    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
