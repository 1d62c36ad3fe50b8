//! Stage 2: dispatch. Plans the candidates for the client's model, walks them with a
//! [`Cursor`], admits each through the resilience layers (`Core::admit_candidate`, then the
//! admission gates), sends one attempt at a time ([`send_attempt`]), reports every attempt's
//! outcome through the core's one choke point (`Core::report`), waits out short cooldowns
//! (§4), and answers from the last failure when no candidate served.
//!
//! The rarely taken branches (re-open, session-limit reset, low-priority lane) box the
//! attempt they send: an async fn's future is as large as its largest await point, and each
//! enclosing level copies its child's future when it creates it, so an unboxed 3 KiB branch
//! would cost every request that copy at every level.
//!
//! The §5 execution budget (`[resilience.queue] execution_max_wait`, never shorter than the
//! provider's `timeout`) starts at the first dispatch; time spent queued is not counted.

mod answer;
mod cursor;
mod lane;
mod limit_reset;
mod wait;

use std::time::Duration;

pub use answer::pass_through;
pub use cursor::{Cursor, Step};
pub use wait::{CooldownWait, Wait};

use crate::clock::Instant;
use crate::core::admission::Admitted;
use crate::core::resilience::{Ticket, success};
use crate::policy::select::{
    self, Candidate, Exclusion, ExclusionCause, ExclusionReason, target_label,
};
use crate::policy::{Classified, OutcomeClass, affinity};
use crate::proxy::Shared;
use crate::proxy::attempt::{AttemptResult, Attempted, LastFailure, Target, send_attempt};
use crate::proxy::dialect::ProxyError;
use crate::proxy::request::ClientRequest;
use crate::proxy::respond::outcome::{Outcome, Streamed};
use crate::proxy::respond::response::json_response;
use crate::proxy::route::{Route, RouteKind};
use crate::proxy::translated::{self, Prepared, Seam};
use crate::snapshot::{
    AttemptView, RequestOutcome, RequestView, SkipReason, SkippedView, WaitReason, WaitView,
};
use crate::wire::body::estimate_tokens;
use http::Response;
use http_body_util::Full;

/// Serves `req` on `route`: the outcome to answer with, or the error to render. Fills `view`
/// with the targets tried, every attempt, every wait and the exclusions.
pub async fn run(
    state: &Shared,
    req: &ClientRequest,
    route: Route,
    view: &mut RequestView,
) -> Result<Outcome, ProxyError> {
    let cfg = state.core.config().clone();
    let plan = select::plan(&cfg, route.dialect, &req.probe.model);
    let mismatched: Vec<Exclusion> = plan
        .skipped
        .iter()
        .map(|s| Exclusion {
            target: s.target.clone(),
            reason: ExclusionReason::DialectMismatch,
            retry_after: None,
            cause: ExclusionCause::Transient,
        })
        .collect();
    if plan.candidates.is_empty() {
        return no_candidates(route, req, mismatched);
    }
    let session = affinity::session_key(&req.parts.headers);
    let ordered = state.core.order_candidates(&plan);
    let candidates = state.core.order_by_affinity(ordered, session.as_deref());
    let candidates = crate::proxy::leases::gate(state, req, candidates, view)?;
    run_candidates(
        state, &cfg, req, route, view, candidates, session, mismatched,
    )
    .await
}

/// Dispatches `req` over `candidates` (already ordered, planned from `cfg`: the config the
/// request started with, which it keeps to the end even when a reload replaces it). Used by
/// [`run`] and by routes that plan their own candidates (`/v1/models`).
#[expect(clippy::too_many_arguments, reason = "one request's dispatch inputs")]
pub async fn run_candidates(
    state: &Shared,
    cfg: &std::sync::Arc<crate::config::Config>,
    req: &ClientRequest,
    route: Route,
    view: &mut RequestView,
    candidates: Vec<Candidate>,
    session: Option<String>,
    mismatched: Vec<Exclusion>,
) -> Result<Outcome, ProxyError> {
    if let Err(e) = state.upstreams.follow(cfg) {
        tracing::warn!(error = %e, "cannot build upstream clients for the reloaded config");
    }
    let mut d = Dispatch {
        state,
        cfg: std::sync::Arc::clone(cfg),
        req,
        route,
        view,
        candidates,
        session,
        prepared: None,
        refused: None,
        last: None,
        excluded: Vec::new(),
        ramped: Vec::new(),
        deadline: None,
    };
    let settings = state.core.settings_snapshot();
    let combo = cfg.combo(&req.probe.model);
    let mut waits = CooldownWait::new(wait::settings_for(settings.combo_cooldown_wait, combo));
    let mut hold_for = hold_limit(cfg, req, &settings.queue);
    let client = wait::client_timeout(&req.parts.headers);
    let started = state.core.clock().now();
    loop {
        if let Some(outcome) = d.pass().await? {
            return Ok(outcome);
        }
        // A model list is never worth waiting for: it answers with the combos at once.
        if d.last.is_some() || d.excluded.is_empty() || route.kind == RouteKind::Models {
            break;
        }
        let w = match waits.next(&d.excluded) {
            Some(w) => Some(w),
            // At most one hold per request.
            None => hold_for.take().and_then(|max| {
                let elapsed = state.core.clock().now().saturating_duration_since(started);
                wait::hold(&d.excluded, wait::within_client(max, client, elapsed))
            }),
        };
        let Some(w) = w else {
            break;
        };
        d.wait(w).await;
        // A connection may have been leased (or this request's lease lapsed) meanwhile.
        let candidates = std::mem::take(&mut d.candidates);
        d.candidates = crate::proxy::leases::gate(state, req, candidates, d.view)?;
    }
    let exclusions: Vec<Exclusion> = std::mem::take(&mut d.excluded);
    log_skipped(d.view, exclusions.iter().chain(&mismatched));
    if let (None, true, Some(e)) = (&d.last, exclusions.is_empty(), d.refused.take()) {
        return Err(e);
    }
    let wall = state.core.clock().wall();
    answer::answer(
        d.last.take(),
        exclusions,
        mismatched,
        wall,
        &req.probe.model,
    )
}

/// The longest hold until a quota reset this request may make: the combo's `max_hold` when
/// it sets `hold_until_reset`, bounded by the execution budget (`execution_max_wait`);
/// `None` for plain models and combos without it.
fn hold_limit(
    cfg: &crate::config::Config,
    req: &ClientRequest,
    queue: &crate::config::QueueSettings,
) -> Option<Duration> {
    let combo = cfg.combo(&req.probe.model)?;
    combo
        .hold_until_reset
        .then(|| combo.max_hold.min(queue.execution_max_wait))
}

/// No candidate for this model on this route: count_tokens estimates locally,
/// anything else is `no_executable_targets` (with the other dialect's targets listed).
fn no_candidates(
    route: Route,
    req: &ClientRequest,
    mismatched: Vec<Exclusion>,
) -> Result<Outcome, ProxyError> {
    if route.kind == RouteKind::CountTokens {
        let v = serde_json::json!({ "input_tokens": estimate_tokens(&req.body) });
        return Ok(Outcome::Local {
            resp: json_response(http::StatusCode::OK, v),
            outcome: RequestOutcome::Ok,
        });
    }
    let hint = if mismatched.is_empty() {
        String::new()
    } else {
        format!(" ({} target(s) skipped: other dialect)", mismatched.len())
    };
    Err(ProxyError::NoTargets {
        model: req.probe.model.clone(),
        hint,
        excluded: mismatched,
    })
}

/// What one candidate step came to.
enum Tried {
    /// Answer with this.
    Served(Outcome),
    /// Its gates are full: maybe queue on it later.
    Saturated(usize),
    /// Its queue is full: its body was not prepared; asked again only when no candidate
    /// served and none with room is left to queue on.
    Full(usize),
    /// Go on with the next candidate.
    Next,
    /// End the request with this error.
    Fatal(ProxyError),
}

/// One request's dispatch state.
struct Dispatch<'a> {
    state: &'a Shared,
    /// The config the request started with (its candidates index into it).
    cfg: std::sync::Arc<crate::config::Config>,
    req: &'a ClientRequest,
    route: Route,
    view: &'a mut RequestView,
    candidates: Vec<Candidate>,
    session: Option<String>,
    /// The body prepared for the last (provider, model): rewritten or translated.
    prepared: Option<(usize, String, Prepared)>,
    /// Why the request could not be translated for a target (answered only when no other
    /// target was tried or excluded).
    refused: Option<ProxyError>,
    last: Option<LastFailure>,
    excluded: Vec<Exclusion>,
    /// Candidates (indices) this pass skipped only for slow start, in order: tried past
    /// their ramp at the end of the pass if nothing else served.
    ramped: Vec<usize>,
    /// The end of the execution budget, once the first attempt was dispatched.
    deadline: Option<Instant>,
}

impl Dispatch<'_> {
    /// One pass over the candidates; `Some` when one served (or the answer is final).
    async fn pass(&mut self) -> Result<Option<Outcome>, ProxyError> {
        self.excluded.clear();
        self.ramped.clear();
        let mut cursor = Cursor::new(self.candidates.len());
        let core = &self.state.core;
        let (gates, queue) = (core.gates().clone(), core.settings_snapshot().queue.clone());
        loop {
            // Once every candidate was offered, the ones skipped for slow start go anyway
            // (before queueing on a saturated one), so a ramp never fails or delays a
            // request that has nowhere else to go.
            let (step, ramp) = if cursor.offered_all() && !self.ramped.is_empty() {
                let index = self.ramped.remove(0);
                let step = Step {
                    index,
                    permit: None,
                    queued: Duration::ZERO,
                };
                (step, false)
            } else {
                let step = cursor
                    .next(&self.candidates, &gates, &queue, core.clock().as_ref())
                    .await
                    .map_err(ProxyError::Admission)?;
                match step {
                    Some(step) => (step, true),
                    None => return Ok(None),
                }
            };
            match self.try_candidate(step, ramp, &gates, &queue).await? {
                Tried::Served(o) => return Ok(Some(o)),
                Tried::Saturated(i) => cursor.saturated(i),
                Tried::Full(i) => cursor.full(i),
                Tried::Next => {}
                Tried::Fatal(e) => return Err(e),
            }
        }
    }

    /// Admits candidate `step.index` and, if it passes every layer, sends one attempt.
    /// `ramp` false admits it past a slow-start ramp (the end-of-pass retry).
    async fn try_candidate(
        &mut self,
        step: Step,
        ramp: bool,
        gates: &crate::core::admission::Gates,
        queue: &crate::config::QueueSettings,
    ) -> Result<Tried, ProxyError> {
        let Some(cand) = self.candidates.get(step.index).cloned() else {
            return Ok(Tried::Next);
        };
        // A full queue refuses a new arrival before any body work: its body is neither
        // rewritten nor translated unless it is queued on later and gets a permit.
        let exempt = self.route.kind.admission_exempt();
        let full = step.permit.is_none() && !exempt && gates.queue_full_for(&cand, queue);
        // Translation is decided before admission: a refusal is no attempt and no failure.
        let prepared = if full {
            None
        } else {
            match self.prepare(&cand) {
                Ok(p) => Some(p),
                Err(e @ ProxyError::Untranslatable(_)) => return Ok(self.refuse(&cand, e)),
                Err(e) => return Err(e),
            }
        };
        if let Some(p) = &prepared
            && self.route.kind == RouteKind::CountTokens
            && p.seam.is_some()
        {
            return Ok(Tried::Served(local_count(&self.req.body)));
        }
        let core = &self.state.core;
        let admitted = if ramp {
            core.admit_candidate(&cand, core.clock().now())
        } else {
            // Tried after all: no longer listed as skipped for its ramp.
            let target = self.target_name(&cand);
            self.view.skipped.retain(|s| {
                !(s.target == target && s.reason == SkipReason::from(ExclusionReason::SlowStart))
            });
            core.admit_past_ramp(&cand, core.clock().now())
        };
        let ticket = match admitted {
            Ok(t) => t,
            Err(e) if e.reason == ExclusionReason::SlowStart => {
                self.ramped.push(step.index);
                log_skipped(self.view, std::iter::once(&e));
                return Ok(Tried::Next);
            }
            Err(e) => {
                self.excluded.push(e);
                return Ok(Tried::Next);
            }
        };
        // Past the other layers (a cooling candidate is excluded, not queued on), a full
        // queue is remembered for the end of the pass.
        let Some(prepared) = prepared else {
            core.release(ticket);
            return Ok(Tried::Full(step.index));
        };
        // Token counts and model lists never take slots meant for generations.
        let permit = match step.permit {
            Some(p) => Some(p),
            None if exempt => None,
            None => match gates.try_acquire_for(&cand, queue) {
                Some(p) => Some(p),
                None => return Ok(Tried::Saturated(step.index)),
            },
        };
        let deadline = self.start_budget(step.queued, &cand, queue);
        self.attempt(&cand, ticket, permit, deadline, &prepared)
            .await
    }

    /// The body for `cand` (cached per provider and model): rewritten, or translated when
    /// its provider speaks another format than the client. Each rewrite or translation made
    /// is counted (`sluice_body_rewrites_total`).
    fn prepare(&mut self, cand: &Candidate) -> Result<Prepared, ProxyError> {
        if let Some((p, m, b)) = &self.prepared
            && *p == cand.provider
            && *m == cand.model
        {
            return Ok(b.clone());
        }
        let cfg = self.cfg.clone();
        let Some(provider) = cfg.providers.get(cand.provider) else {
            return Err(ProxyError::Unreachable("provider left the config".into()));
        };
        let created = crate::clock::unix_ms(self.state.core.clock().wall()) / 1000;
        let client = translated::client_format(self.route);
        let b = translated::prepare(
            client,
            provider,
            &self.req.body,
            &cand.model,
            cand.rewrite,
            self.req.probe.model_at.clone(),
            created,
        )?;
        if let Some(kind) = b.rewrite {
            self.state.core.metrics().observe_body_rewrite(kind);
        }
        self.prepared = Some((cand.provider, cand.model.clone(), b.clone()));
        Ok(b)
    }

    /// `cand` cannot take this request in translation: listed as skipped, kept to answer
    /// with if no other target is tried; nothing is sent and nothing is penalised.
    fn refuse(&mut self, cand: &Candidate, e: ProxyError) -> Tried {
        tracing::info!(model = %self.view.client_model, provider = cand.provider, error = %e, "request cannot be translated for this target");
        let target = self.target_name(cand);
        if !self.view.skipped.iter().any(|s| s.target == target) {
            self.view.skipped.push(SkippedView {
                target,
                reason: SkipReason::Untranslatable.into(),
            });
        }
        self.refused.get_or_insert(e);
        Tried::Next
    }

    /// `provider:connection/model` of `cand`.
    fn target_name(&self, cand: &Candidate) -> String {
        let cfg = &self.cfg;
        let p = cfg.providers.get(cand.provider);
        let c = p.and_then(|p| p.connections.get(cand.connection));
        match (p, c) {
            (Some(p), Some(c)) => target_label(&p.id, &c.id, &cand.model),
            _ => cand.model.clone(),
        }
    }

    /// The execution deadline: set at the first dispatch, moved by time spent queued.
    fn start_budget(
        &mut self,
        queued: Duration,
        cand: &Candidate,
        queue: &crate::config::QueueSettings,
    ) -> Instant {
        let core = &self.state.core;
        let timeout = self
            .cfg
            .providers
            .get(cand.provider)
            .map_or(Duration::ZERO, |p| p.timeout);
        let budget = core.gates().execution_budget(timeout, queue);
        let now = core.clock().now();
        let deadline = match self.deadline {
            Some(d) => d + queued,
            None => now + budget,
        };
        *self.deadline.insert(deadline)
    }

    /// Sends one attempt to an admitted candidate and settles its result.
    async fn attempt(
        &mut self,
        cand: &Candidate,
        ticket: Ticket,
        permit: Option<Admitted>,
        deadline: Instant,
        prepared: &Prepared,
    ) -> Result<Tried, ProxyError> {
        let cfg = self.cfg.clone();
        let (Some(provider), Some(conn)) = (
            cfg.providers.get(cand.provider),
            cfg.providers
                .get(cand.provider)
                .and_then(|p| p.connections.get(cand.connection)),
        ) else {
            return Ok(Tried::Next);
        };
        self.view.target = target_label(&provider.id, &conn.id, &cand.model);
        self.view.upstream_dialect = Some(provider.dialect.into());
        self.view.attempts += 1;
        let seam = prepared.seam.as_ref();
        self.view.adjusted = seam.map(|s| s.adjusted.clone()).unwrap_or_default();
        let t = Target {
            cand,
            provider,
            conn,
            seam,
        };
        let body = prepared.body.clone();
        let mut a = send_attempt(self.state, &t, self.req, self.route, body, deadline).await?;
        let label = seam.map(Seam::label).unwrap_or_default();
        if self.recovers(&a) {
            a = self
                .reopen(&t, a, prepared, deadline, label.clone())
                .await?;
        }
        a = self
            .limit_reset(&t, a, prepared, deadline, label.clone())
            .await?;
        a = self.lane(&t, a, prepared, deadline, label.clone()).await?;
        let injected = a.injected;
        let tried = self.settle(cand, ticket, permit, deadline, a, label);
        if injected {
            crate::proxy::attempt::injected::mark(self.view);
        }
        Ok(tried)
    }

    /// Whether `a` is a stream that broke before any content and may be re-opened once on
    /// the same connection (`[resilience.stream] recover_before_content`, on by default).
    fn recovers(&self, a: &Attempted) -> bool {
        matches!(a.result, AttemptResult::BrokeBeforeContent { .. })
            && self
                .state
                .core
                .settings_snapshot()
                .stream
                .recover_before_content
    }

    /// Re-opens a stream that broke before any content, once, on the same connection under
    /// the same admission ticket: nothing reached the client, so the client sees only the
    /// second attempt. The broken attempt is listed in the request's attempt log (outcome
    /// `recovered`) but not reported: a recovered blip neither cools the connection nor
    /// counts toward its breaker; if the re-open fails too, that failure is reported.
    async fn reopen(
        &mut self,
        t: &Target<'_>,
        broken: Attempted,
        prepared: &Prepared,
        deadline: Instant,
        translated: String,
    ) -> Result<Attempted, ProxyError> {
        if let AttemptResult::BrokeBeforeContent { classified, .. } = &broken.result {
            let mut recovered = classified.clone();
            recovered.reason = "recovered".into();
            log_attempt(self.view, 200, &recovered, broken.latency, translated);
            tracing::info!(provider = %t.provider.id, connection = %t.conn.id, "stream broke before any content; re-opening it once on the same connection");
        }
        drop(broken);
        self.view.attempts += 1;
        let body = prepared.body.clone();
        Box::pin(send_attempt(
            self.state, t, self.req, self.route, body, deadline,
        ))
        .await
    }

    /// Reports an attempt's result through the one choke point and decides what is next.
    fn settle(
        &mut self,
        cand: &Candidate,
        ticket: Ticket,
        permit: Option<Admitted>,
        deadline: Instant,
        a: Attempted,
        translated: String,
    ) -> Tried {
        let core = &self.state.core;
        let ok = |resp_status: u16| success(resp_status);
        match a.result {
            AttemptResult::Stream { resp, held } => {
                let continuer = crate::proxy::respond::continuer::Continuer::new(
                    self.state,
                    &self.cfg,
                    cand,
                    self.req,
                    self.route,
                    !translated.is_empty(),
                    deadline,
                );
                self.served(
                    cand,
                    resp.status().as_u16(),
                    a.latency,
                    &ok(resp.status().as_u16()),
                    translated,
                );
                Tried::Served(Outcome::Stream(Box::new(Streamed {
                    resp,
                    held,
                    attempt: a.guard,
                    ticket,
                    permit,
                    deadline: Some(deadline),
                    continuer,
                })))
            }
            AttemptResult::Complete(resp) => {
                let c = ok(resp.status().as_u16());
                self.served(cand, resp.status().as_u16(), a.latency, &c, translated);
                core.report(ticket, &c);
                Tried::Served(Outcome::Local {
                    resp,
                    outcome: RequestOutcome::Ok,
                })
            }
            AttemptResult::Failed {
                status,
                classified,
                last,
            } => {
                log_attempt(self.view, status, &classified, a.latency, translated);
                core.report(ticket, &classified);
                self.failed(classified, *last)
            }
            AttemptResult::BrokeBeforeContent { classified, last } => {
                log_attempt(self.view, 200, &classified, a.latency, translated);
                core.report(ticket, &classified);
                self.failed(classified, *last)
            }
            AttemptResult::OutOfTime => {
                core.release(ticket);
                Tried::Fatal(execution_timeout())
            }
        }
    }

    /// A 2xx is being answered: pin the session and log the attempt and the exclusions.
    fn served(
        &mut self,
        cand: &Candidate,
        status: u16,
        latency: Duration,
        c: &Classified,
        translated: String,
    ) {
        if let Some(key) = &self.session {
            self.state.core.pin_session(key, cand);
        }
        log_attempt(self.view, status, c, latency, translated);
        log_skipped(self.view, self.excluded.iter());
    }

    /// A failed attempt: a client fault is answered at once (another target would refuse it
    /// too); anything else is kept as the last failure and the next candidate is tried.
    fn failed(&mut self, c: Classified, last: LastFailure) -> Tried {
        if let (
            OutcomeClass::ClientFault,
            None,
            LastFailure::Upstream {
                status,
                headers,
                body,
                ..
            },
        ) = (c.class, &c.restated, &last)
        {
            return Tried::Served(Outcome::Local {
                resp: pass_through(*status, headers, body.clone()),
                outcome: RequestOutcome::UpstreamError,
            });
        }
        self.last = Some(last);
        Tried::Next
    }

    /// Waits out `w` (§4), shown in the request's details and the log.
    async fn wait(&mut self, w: Wait) {
        let clock = self.state.core.clock().clone();
        let started = clock.now();
        let _listed = (w.reason == WaitReason::QuotaHold).then(|| self.list_hold(&w));
        wait::sleep_on(clock.as_ref(), started + w.delay, w.delay).await;
        let waited = clock.now().saturating_duration_since(started);
        let view = WaitView {
            target: w.target,
            reason: w.reason.into(),
            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        };
        tracing::info!(model = %self.view.client_model, target = %view.target, reason = w.reason.as_str(), "{}", view.describe());
        self.view.waits.push(view);
    }
}

impl Dispatch<'_> {
    /// Lists this request as held until `w` ends (the console's "held until 14:05").
    fn list_hold(&self, w: &Wait) -> crate::core::quota::reset_holds::HoldGuard {
        let core = &self.state.core;
        let now_ms = crate::clock::unix_ms(core.clock().wall());
        let delay_ms = u64::try_from(w.delay.as_millis()).unwrap_or(u64::MAX);
        tracing::info!(model = %self.view.client_model, target = %w.target, wait_ms = delay_ms, "every target is out of quota; holding the request until the earliest reset");
        core.begin_hold(crate::snapshot::HeldView {
            request_id: self.view.id,
            model: self.view.client_model.clone(),
            target: w.target.clone(),
            since_unix_ms: now_ms,
            until_unix_ms: now_ms.saturating_add(delay_ms),
        })
    }
}

fn execution_timeout() -> ProxyError {
    ProxyError::Timeout(
        "the request's execution budget ([resilience.queue] execution_max_wait)".into(),
    )
}

/// The local count_tokens answer for a translated target (it cannot be asked upstream).
fn local_count(body: &[u8]) -> Outcome {
    let mut resp = Response::new(Full::new(crate::translate::count_tokens_body(body)));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Outcome::Local {
        resp,
        outcome: RequestOutcome::Ok,
    }
}

/// Appends one attempt to the request's log (console details).
fn log_attempt(
    view: &mut RequestView,
    status: u16,
    c: &Classified,
    latency: Duration,
    translated: String,
) {
    view.attempt_log.push(AttemptView {
        target: view.target.clone(),
        status,
        class: c.class,
        reason: c.reason.clone(),
        latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
        translated,
        ..Default::default()
    });
}

/// Records the candidates excluded before dispatch (console details).
fn log_skipped<'a>(view: &mut RequestView, exclusions: impl Iterator<Item = &'a Exclusion>) {
    for e in exclusions {
        if !view.skipped.iter().any(|s| s.target == e.target) {
            view.skipped.push(SkippedView {
                target: e.target.clone(),
                reason: SkipReason::from(e.reason).into(),
            });
        }
    }
}
