//! The §2c low-priority lane in dispatch: a `low_priority_mode` connection's failed attempt
//! that the lane answers — an offer just accepted, or a busy lane slot — is re-sent on the
//! same connection under the same admission ticket (like a re-opened stream), so the client
//! sees only the last attempt and the lane's 429s neither cool the connection nor count
//! toward its breaker. Busy waits run on the injected clock ([`wait::sleep_on`]).

use std::time::Duration;

use crate::policy::lane::{self, Verdict};
use crate::proxy::attempt::{Attempted, Target, send_attempt};
use crate::proxy::dialect::ProxyError;
use crate::proxy::dispatch::{Dispatch, log_attempt, wait};
use crate::proxy::translated::Prepared;
use crate::snapshot::WaitView;

use crate::clock::Instant;

impl Dispatch<'_> {
    /// Re-sends `a` on the same connection while the low-priority lane answers it: at once
    /// after an offer is accepted, after the lane's retry-after when a slot is busy (bounded
    /// by its max-wait and the request's remaining time less 5 s: its execution budget, and the
    /// client's own `x-stainless-timeout` when it sent one; past that the lane ends
    /// with its re-accept pause and the failure is reported as usual). Returns the attempt
    /// to settle. No-op for connections without `low_priority_mode`.
    pub(super) async fn lane(
        &mut self,
        t: &Target<'_>,
        mut a: Attempted,
        prepared: &Prepared,
        deadline: Instant,
        translated: String,
    ) -> Result<Attempted, ProxyError> {
        if !t.conn.low_priority_mode {
            return Ok(a);
        }
        let core = self.state.core.clone();
        let (mut accepted, mut waited) = (false, Duration::ZERO);
        loop {
            let Some((status, headers, classified)) = a.result.upstream_failure() else {
                return Ok(a);
            };
            let verdict = core.observe_lane(t.cand, status, headers, accepted);
            let (delay, word) = match verdict {
                Verdict::Report => return Ok(a),
                Verdict::Accepted => {
                    accepted = true;
                    tracing::info!(provider = %t.provider.id, connection = %t.conn.id, "usage wall: low-priority lane offered and accepted; retrying on the same connection with anthropic-usage-limit: slow");
                    (Duration::ZERO, "lane_accepted")
                }
                Verdict::Busy {
                    retry_after,
                    max_wait,
                } => {
                    let remaining = self.lane_remaining(t, deadline);
                    let draw = core.lane_draw();
                    match lane::busy_wait(retry_after, max_wait, waited, remaining, draw) {
                        Some(d) => (d, "lane_slot_busy"),
                        None => {
                            tracing::info!(provider = %t.provider.id, connection = %t.conn.id, waited_s = waited.as_secs(), "low-priority lane still busy past its wait bound; ending it (no new lane for 10 min)");
                            core.lane_give_up(t.cand);
                            return Ok(a);
                        }
                    }
                }
            };
            let mut logged = classified.clone();
            logged.reason = word.into();
            log_attempt(self.view, status, &logged, a.latency, translated.clone());
            drop(a);
            if !delay.is_zero() {
                Box::pin(self.lane_wait(t, delay)).await;
                waited += delay;
            }
            self.view.attempts += 1;
            let body = prepared.body.clone();
            a = Box::pin(send_attempt(
                self.state, t, self.req, self.route, body, deadline,
            ))
            .await?;
        }
    }

    /// What is left of this request's own time: its execution budget (`deadline`), and the
    /// client's own timeout (`x-stainless-timeout`) counted from the first dispatch (the
    /// budget's start; time queued for a permit is not counted).
    fn lane_remaining(&self, t: &Target<'_>, deadline: Instant) -> Duration {
        let core = &self.state.core;
        let now = core.clock().now();
        let left = deadline.saturating_duration_since(now);
        let Some(client) = wait::client_timeout(&self.req.parts.headers) else {
            return left;
        };
        let queue = core.settings_snapshot().queue.clone();
        let budget = core.gates().execution_budget(t.provider.timeout, &queue);
        let elapsed = budget.saturating_sub(left);
        left.min(client.saturating_sub(elapsed))
    }

    /// Waits `delay` on the injected clock for a lane slot, listed in the request's waits.
    async fn lane_wait(&mut self, t: &Target<'_>, delay: Duration) {
        let clock = self.state.core.clock().clone();
        let started = clock.now();
        tracing::info!(provider = %t.provider.id, connection = %t.conn.id, wait_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX), "low-priority lane slot busy; waiting to retry on the same connection");
        wait::sleep_on(clock.as_ref(), started + delay, delay).await;
        let waited = clock.now().saturating_duration_since(started);
        self.view.waits.push(WaitView {
            target: self.view.target.clone(),
            reason: crate::snapshot::WaitReason::LaneSlotBusy.into(),
            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        });
    }
}
