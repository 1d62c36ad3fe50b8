//! [`Cursor`]: which candidate to try next in one pass over the ordered candidates. Each
//! candidate is offered once, in order; one whose admission gates are full (§4 caps) is
//! skipped at first and, if no other candidate served the request, queued on once (§5).
//!
//! Which one is queued on: the first saturated candidate whose queue had room when it was
//! offered, else the first whose queue was full then (its queue may have room by now). A
//! queue that is full when the request arrives at it refuses it at once
//! (`RATE_LIMIT_QUEUE_FULL`); the next such candidate is asked then, and the request ends
//! with the first refusal only when every one of them refused. A queue timeout ends it at
//! once: the request already waited its `max_wait`.

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
    /// Offered candidates whose gates were full but whose queue had room, in order.
    saturated: Vec<usize>,
    /// Offered candidates whose queue was full (their body was not prepared), in order.
    full: Vec<usize>,
    queued_once: bool,
}

impl Cursor {
    /// A fresh pass over `len` candidates.
    pub fn new(len: usize) -> Self {
        Self {
            next: 0,
            len,
            saturated: Vec::new(),
            full: Vec::new(),
            queued_once: false,
        }
    }

    /// Whether every candidate was offered once (only the queue step may follow).
    pub fn offered_all(&self) -> bool {
        self.next >= self.len
    }

    /// Candidate `index` found its gates full: queue on it later if nothing else serves.
    pub fn saturated(&mut self, index: usize) {
        if !self.saturated.contains(&index) {
            self.saturated.push(index);
        }
    }

    /// Candidate `index` found its queue full: ask it again (after every saturated one)
    /// if nothing else serves.
    pub fn full(&mut self, index: usize) {
        if !self.full.contains(&index) && !self.saturated.contains(&index) {
            self.full.push(index);
        }
    }

    /// The next candidate, or `None` when the pass is over. Queueing on a saturated candidate
    /// waits on the gates; a queue timeout ends the request, and so does a full queue when
    /// every candidate left to queue on is full (the first refusal is returned).
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
        if self.queued_once {
            return Ok(None);
        }
        self.queued_once = true;
        let order: Vec<usize> = self
            .saturated
            .drain(..)
            .chain(self.full.drain(..))
            .collect();
        let mut refused: Option<Refused> = None;
        for index in order {
            let Some(c) = candidates.get(index) else {
                continue;
            };
            let started = clock.now();
            match gates.acquire_for(c, queue).await {
                Ok(permit) => {
                    if permit.without_permit() {
                        tracing::info!(model = %c.model, "queue wait timed out; proceeding without a permit (concurrency_fail_open)");
                    }
                    return Ok(Some(Step {
                        index,
                        permit: Some(permit),
                        queued: clock.now().saturating_duration_since(started),
                    }));
                }
                Err(e) if e.code.is_timeout() => return Err(Box::new(e)),
                Err(e) => {
                    refused.get_or_insert(e);
                }
            }
        }
        refused.map_or(Ok(None), |e| Err(Box::new(e)))
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::*;
    use crate::clock::{Clock, SystemClock};
    use crate::config::{LoadEnv, from_str};
    use crate::policy::admission::AdmissionCode;

    /// Connections `a` and `b` of one api_key provider (behind the queue), each with one
    /// permit and room for one waiter; a waiter would wait an hour.
    fn two_connections() -> (Gates, QueueSettings, Vec<Candidate>) {
        let text = r#"
            [routing]
            default_provider = ["p"]
            [resilience.queue]
            max_wait = "1h"
            max_queue_depth = 1
            [[providers]]
            id = "p"
            dialect = "openai"
            base_url = "https://api.example.com"
            profile = "api_key"
              [[providers.connections]]
              id = "a"
              auth = { env = "K" }
              max_concurrent = 1
              [[providers.connections]]
              id = "b"
              auth = { env = "K" }
              max_concurrent = 1
        "#;
        let env = LoadEnv::fixed(&[("K", "secret-key-123")], "/tmp");
        let cfg = from_str(text, Path::new("t.toml"), &env).expect("valid config");
        let gates = Gates::new(&cfg, Arc::new(SystemClock));
        let cands = (0..2)
            .map(|connection| Candidate {
                provider: 0,
                connection,
                model: "m".into(),
                rewrite: false,
                target: 0,
                key: crate::config::keys::ConnKey::new(0, connection as u32),
            })
            .collect();
        (gates, cfg.resilience.queue.clone(), cands)
    }

    /// Takes the permit of `c` and, when `fill`, its one queue place; returns what holds them.
    async fn occupy(
        g: &Gates,
        q: &QueueSettings,
        c: &Candidate,
        fill: bool,
    ) -> (Admitted, Option<tokio::task::JoinHandle<()>>) {
        let held = g.acquire_for(c, q).await.expect("a free permit");
        let waiter = fill.then(|| {
            let (g, q, c) = (g.clone(), q.clone(), c.clone());
            tokio::spawn(async move {
                let _ = g.acquire_for(&c, &q).await;
            })
        });
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
        assert_eq!(g.queue_full_for(c, q), fill);
        (held, waiter)
    }

    fn rejections(g: &Gates, connection: &str) -> u64 {
        g.views()
            .iter()
            .find(|v| v.connection == connection)
            .map_or(0, |v| v.rejections)
    }

    /// Offers every candidate, marking each as `full` or saturated.
    async fn offer_all(cursor: &mut Cursor, g: &Gates, q: &QueueSettings, cands: &[Candidate]) {
        for (i, c) in cands.iter().enumerate() {
            let step = cursor.next(cands, g, q, &SystemClock).await;
            assert_eq!(step.ok().flatten().map(|s| s.index), Some(i));
            if g.queue_full_for(c, q) {
                cursor.full(i);
            } else {
                cursor.saturated(i);
            }
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_queue_first_in_order_is_passed_over_for_a_queue_with_room() {
        let (g, q, cands) = two_connections();
        let _a = occupy(&g, &q, &cands[0], true).await;
        let (b_held, _) = occupy(&g, &q, &cands[1], false).await;
        let mut cursor = Cursor::new(cands.len());
        offer_all(&mut cursor, &g, &q, &cands).await;
        // b's permit comes back while the request waits in b's queue.
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            drop(b_held);
        });
        let step = cursor.next(&cands, &g, &q, &SystemClock).await;
        let step = step.expect("not refused").expect("a queue step");
        assert_eq!(step.index, 1, "queued on b, the one with room");
        assert!(step.permit.as_ref().is_some_and(Admitted::holds_permit));
        assert_eq!(step.queued, Duration::from_secs(3));
        assert_eq!(rejections(&g, "a"), 0, "a's full queue was never joined");
        release.await.expect("release task");
        assert!(matches!(
            cursor.next(&cands, &g, &q, &SystemClock).await,
            Ok(None)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn every_queue_full_refuses_at_once_with_the_first_refusal() {
        let (g, q, cands) = two_connections();
        let _a = occupy(&g, &q, &cands[0], true).await;
        let _b = occupy(&g, &q, &cands[1], true).await;
        let mut cursor = Cursor::new(cands.len());
        offer_all(&mut cursor, &g, &q, &cands).await;
        let t = SystemClock.now();
        let Err(refused) = cursor.next(&cands, &g, &q, &SystemClock).await else {
            panic!("every queue is full: refused");
        };
        assert_eq!(SystemClock.now(), t, "at once");
        assert_eq!(refused.code, AdmissionCode::QueueFull);
        assert!(
            refused
                .retry_after
                .is_some_and(|r| r >= Duration::from_secs(1))
        );
        assert!(refused.message.contains("'a'"), "{}", refused.message);
        assert_eq!(
            (rejections(&g, "a"), rejections(&g, "b")),
            (1, 1),
            "each full queue refused it once"
        );
    }
}
