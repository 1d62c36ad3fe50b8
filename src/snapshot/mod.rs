//! `Snapshot`: the immutable view model the console and the admin API read
//! (`docs/ARCHITECTURE.md#the-operator-doors`).
//!
//! Built by the core after changes (coalesced, at most ~20 Hz) and published on a
//! `tokio::sync::watch` channel as `Arc<Snapshot>`. Plain data: tests build one by hand.
//! Times are wall-clock Unix milliseconds so the same struct serialises for `/api/snapshot`.
//!
//! The view types only, split by concern: requests (`requests.rs`), providers and their
//! connections (`providers.rs`), admission gates (`queues.rs`) and injected faults (`faults.rs`);
//! [`stream`] sends snapshots to attached consoles. Building a snapshot from live state is the
//! core's job. This module may import `policy`, `store` (a request-log row read back) and the
//! support modules; never `core`, `proxy`, `metrics` or `console`, which all read it.

use serde::{Deserialize, Serialize};

mod faults;
mod providers;
mod queues;
mod requests;
pub mod stream;
pub mod word;

pub use faults::FaultView;
pub use providers::{
    BreakerView, ComboView, ConnectionView, HeadroomRowView, LaneView, LeaseView, LimitResetView,
    LockoutView, PreflightView, ProviderView, TransitionView,
};
pub use queues::GateView;
pub use requests::{
    AttemptView, HeldView, RequestOutcome, RequestView, SkipReason, SkippedView, WaitReason,
    WaitView,
};
pub use word::Word;

pub use crate::policy::OutcomeClass as AttemptClass;
pub use crate::policy::Scope as LockoutScope;
pub use crate::policy::breaker::BreakerState;
pub use crate::policy::cooldown::ConnectionStatus;

/// Read-only view of sluice at one moment.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Snapshot {
    /// Increases with every published snapshot.
    pub version: u64,
    /// When it was taken, Unix ms.
    pub taken_at_unix_ms: u64,
    /// When sluice started, Unix ms.
    pub started_at_unix_ms: u64,
    /// Inference listener address, e.g. `127.0.0.1:8787`.
    pub listen: String,
    /// Admin listener address, e.g. `127.0.0.1:8788`.
    pub admin_listen: String,
    /// Config file path as loaded.
    pub config_path: String,
    /// True once shutdown started (`/readyz` answers 503).
    pub draining: bool,
    /// Counters since start.
    pub totals: Totals,
    /// Rolling last-minute statistics.
    pub last_minute: Window,
    /// Most recent finished requests, newest first (at most [`RECENT_CAP`]). Read back when a
    /// snapshot is parsed, so an attached console (`sluice console`) shows them too.
    pub recent: Vec<RequestView>,
    /// Configured providers with live per-provider counters.
    pub providers: Vec<ProviderView>,
    /// Configured combos.
    pub combos: Vec<ComboView>,
    /// Active model lockouts (§3), soonest expiry first.
    pub lockouts: Vec<LockoutView>,
    /// Admission gates with a cap (§4, §5): in-flight / cap, queued / depth cap, oldest
    /// wait, timeouts, rejections.
    pub queues: Vec<GateView>,
    /// Write-behind losses of the store since start (zero without a store).
    pub store: StoreView,
    /// Operator-injected faults on now (never persisted), oldest first; serialised only when
    /// there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<FaultView>,
    /// Requests held until a quota reset now (a combo's `hold_until_reset`), oldest first;
    /// serialised only when there is one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub held: Vec<HeldView>,
}

/// The store's write-behind counters: rows and state changes dropped because its queue was
/// full (the request path never waits on disk, so these are the price of a stalled disk).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StoreView {
    /// `request_log` rows dropped.
    pub dropped_request_rows: u64,
    /// Resilience state writes (breaker, connection, lockout, pin, setting rows) dropped.
    pub dropped_state_writes: u64,
}

/// How many finished requests a snapshot keeps.
pub const RECENT_CAP: usize = 200;

/// Request counters since start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Totals {
    /// Requests finished (any outcome).
    pub requests: u64,
    /// Finished with a 2xx and, for streams, a complete stream.
    pub ok: u64,
    /// Finished with an error status or a broken stream.
    pub errors: u64,
    /// Requests currently being served.
    pub in_flight: u64,
    /// Bytes relayed to clients.
    pub bytes_out: u64,
}

/// Statistics over the last 60 seconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Window {
    /// Requests finished in the window, divided by 60 (req/s).
    pub req_per_s: f64,
    /// ok / finished in the window (0.0–1.0); 1.0 when nothing finished.
    pub success_ratio: f64,
    /// Median latency in ms (0 when empty).
    pub p50_ms: u64,
    /// 99th percentile latency in ms (0 when empty).
    pub p99_ms: u64,
    /// Requests finished per second, oldest first, 60 buckets.
    pub sparkline: Vec<u64>,
}
