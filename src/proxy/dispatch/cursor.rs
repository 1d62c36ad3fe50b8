//! [`Cursor`]: which candidate to try next in one pass over the ordered candidates. Each
//! candidate is offered once, in order; one whose admission gates are full (§4 caps) is
//! skipped at first and, if no other candidate served the request, queued on once (§5).

use std::time::Duration;

use crate::config::QueueSettings;
use crate::core::admission::{Admitted, Gates, Refused};
use crate::policy::select::Candidate;

/// One candidate to try.
pub struct Step {
    /// Index into the candidate list.
    pub index: usize,
    /// Permits already taken by the queue, when this step came from queueing.
    pub permit: Option<Admitted>,
    /// Time spent queued for `permit` (not part of the execution budget).
    pub queued: Duration,
}

/// A pass over `len` candidates.
pub struct Cursor {
    next: usize,
    len: usize,
    saturated: Option<usize>,
    queued_once: bool,
}

impl Cursor {
    /// A fresh pass over `len` candidates.
    pub fn new(len: usize) -> Self {
        Self {
            next: 0,
            len,
            saturated: None,
            queued_once: false,
        }
    }

    /// Whether every candidate was offered once (only the queue step may follow).
    pub fn offered_all(&self) -> bool {
        self.next >= self.len
    }

    /// Candidate `index` found its gates full: queue on it later if nothing else serves.
    pub fn saturated(&mut self, index: usize) {
        self.saturated.get_or_insert(index);
    }

    /// The next candidate, or `None` when the pass is over. Queueing on a saturated candidate
    /// waits on the gates; a refusal (queue full, queue timeout) ends the request.
    pub async fn next(
        &mut self,
        candidates: &[Candidate],
        gates: &Gates,
        queue: &QueueSettings,
        clock: &dyn crate::clock::Clock,
    ) -> Result<Option<Step>, Box<Refused>> {
        if self.next < self.len {
            self.next += 1;
            return Ok(Some(Step {
                index: self.next - 1,
                permit: None,
                queued: Duration::ZERO,
            }));
        }
        let Some(index) = self.saturated.take().filter(|_| !self.queued_once) else {
            return Ok(None);
        };
        self.queued_once = true;
        let Some(c) = candidates.get(index) else {
            return Ok(None);
        };
        let started = clock.now();
        let permit = gates.acquire_for(c, queue).await.map_err(Box::new)?;
        if permit.without_permit() {
            tracing::info!(model = %c.model, "queue wait timed out; proceeding without a permit (concurrency_fail_open)");
        }
        Ok(Some(Step {
            index,
            permit: Some(permit),
            queued: clock.now().saturating_duration_since(started),
        }))
    }
}
