//! Admission gate views: each gate with a cap, for the snapshot's `queues` and
//! `GET /api/queues`.

use serde::{Deserialize, Serialize};

use crate::policy::admission::{CapSource, Enforcement, GateKind};

/// One gate as plain data, for the snapshot and `GET /api/queues`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub struct GateView {
    /// `connection` or `model`.
    pub kind: GateKind,
    /// Provider id.
    pub provider: String,
    /// Connection id.
    pub connection: String,
    /// Upstream model id (model gates only).
    pub model: Option<String>,
    /// Permits held now.
    pub in_flight: u32,
    /// The cap (`max_concurrent` or the `model_concurrency` entry).
    pub cap: Option<u32>,
    /// The cap in force: `cap` when one is configured; for a rate-limit-protected
    /// connection without `max_concurrent`, its learned or default protection cap.
    #[serde(default)]
    pub effective_cap: Option<u32>,
    /// Where `effective_cap` comes from: `config`, `learned` or `default`.
    #[serde(default)]
    pub cap_source: CapSource,
    /// Requests waiting on this gate now.
    pub queued: usize,
    /// Queue depth limit in force for the connection (0 = unlimited).
    pub max_queue_depth: u32,
    /// How the connection enforces its caps.
    pub enforcement: Enforcement,
    /// How long the oldest waiter has waited, in ms (0 when nobody waits).
    pub oldest_wait_ms: u64,
    /// Lifetime: waiters refused after `max_wait`.
    pub timeouts: u64,
    /// Lifetime: arrivals refused because the queue was full.
    pub rejections: u64,
    /// Lifetime: requests that proceeded without a permit (fail-open).
    pub fail_open_admits: u64,
    /// Lifetime: requests that took a permit.
    pub admitted: u64,
}
