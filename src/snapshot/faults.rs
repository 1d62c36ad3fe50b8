//! Injected fault views: the operator-injected faults on now.

use serde::{Deserialize, Serialize};

use super::word::Word;
use crate::policy::fault::FaultWord;

/// One active fault as the admin API and the console show it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct FaultView {
    /// Id since start (for `DELETE /api/faults?id=`).
    pub id: u64,
    /// `provider` or `provider/connection`.
    pub target: String,
    /// Kind word: `latency`, `429`, `500`, `503`, `529`, `reset`, `stall`, `zombie`.
    pub kind: Word<FaultWord>,
    /// Short description, e.g. `503`, `429 retry-after 30s`, `stall after 2 frames`.
    pub description: String,
    /// Time left, ms.
    pub remaining_ms: u64,
    /// When it ends, Unix ms.
    pub expires_at_unix_ms: u64,
}
