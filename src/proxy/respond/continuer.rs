//! Sends a mid-stream continuation (`[resilience.stream] continue_after_break`): the owned
//! request details a relay needs to re-issue the request once, on the same connection, with
//! the text so far as an assistant prefill. The pure rules are in
//! [`continuation`](crate::proxy::respond::continuation); the splice is the relay's.
//!
//! The continuation attempt is admitted (its own resilience ticket) before the broken
//! attempt is reported, and reported through the core's one choke point like any attempt:
//! here when it fails before content, by the relay when its stream ends.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Response;

use crate::clock::Instant;
use crate::config::{Config, Dialect};
use crate::core::AttemptGuard;
use crate::core::resilience::{Ticket, success};
use crate::policy::Classified;
use crate::policy::select::Candidate;
use crate::proxy::Shared;
use crate::proxy::attempt::{AttemptResult, Target, send_attempt};
use crate::proxy::request::ClientRequest;
use crate::proxy::respond::continuation::Context;
use crate::proxy::route::{Route, RouteKind};
use crate::proxy::sse::hold::Held;
use crate::proxy::translated::UpstreamBody;

/// What a relay needs to continue its stream once.
pub struct Continuer {
    state: Shared,
    cfg: Arc<Config>,
    cand: Candidate,
    req: ClientRequest,
    route: Route,
    deadline: Instant,
    anthropic_stream: bool,
    anthropic_upstream: bool,
    ends_with_assistant: bool,
}

/// A continuation attempt's result.
pub enum Continued {
    /// A 2xx stream past its hold: splice it.
    Stream {
        /// The continuation's response.
        resp: Response<UpstreamBody>,
        /// What its hold read.
        held: Box<Held>,
        /// Its in-flight guard.
        guard: AttemptGuard,
        /// Its ticket, reported when the stream ends.
        ticket: Ticket,
        /// Time to its head.
        latency: Duration,
    },
    /// It failed before content (already reported); the client gets one error event.
    Failed {
        /// Why, for the request log.
        message: String,
        /// How it was classified, when it was an attempt (`None`: it was never sent).
        classified: Option<(u16, Classified, Duration)>,
    },
}

impl Continuer {
    /// The continuer for a stream served by `cand` (planned from `cfg`), or `None` when
    /// `continue_after_break` is off.
    pub fn new(
        state: &Shared,
        cfg: &Arc<Config>,
        cand: &Candidate,
        req: &ClientRequest,
        route: Route,
        translated: bool,
        deadline: Instant,
    ) -> Option<Self> {
        if !state.core.settings_snapshot().stream.continue_after_break {
            return None;
        }
        let dialect = cfg.providers.get(cand.provider).map(|p| p.dialect);
        Some(Self {
            state: state.clone(),
            cfg: Arc::clone(cfg),
            cand: cand.clone(),
            req: req.clone(),
            route,
            deadline,
            anthropic_stream: route.kind == RouteKind::Messages && req.probe.stream,
            anthropic_upstream: !translated && dialect == Some(Dialect::Anthropic),
            ends_with_assistant: crate::proxy::respond::continuation::ends_with_assistant(
                &req.body,
            ),
        })
    }

    /// The facts the continuation rule needs, with the relay's own.
    pub fn context(&self, continued: bool, now: Instant, at_boundary: bool) -> Context {
        Context {
            enabled: true,
            anthropic_stream: self.anthropic_stream,
            anthropic_upstream: self.anthropic_upstream,
            ends_with_assistant: self.ends_with_assistant,
            continued,
            before_deadline: now < self.deadline,
            at_boundary,
        }
    }

    /// The original request body.
    pub fn body(&self) -> &[u8] {
        &self.req.body
    }

    /// Admits the continuation on the same connection; `None` when its layers refuse it
    /// (then it is not sent).
    pub fn admit(&self) -> Option<Ticket> {
        let core = &self.state.core;
        core.admit_past_ramp(&self.cand, core.clock().now()).ok()
    }

    /// Sends `body` under `ticket` and judges it like any attempt.
    pub async fn send(self, ticket: Ticket, body: Bytes) -> Continued {
        let core = self.state.core.clone();
        let cfg = self.cfg.clone();
        let provider = cfg.providers.get(self.cand.provider);
        let conn = provider.and_then(|p| p.connections.get(self.cand.connection));
        let (Some(provider), Some(conn)) = (provider, conn) else {
            core.release(ticket);
            return failed("the connection left the config", None);
        };
        let t = Target {
            cand: &self.cand,
            provider,
            conn,
            seam: None,
        };
        tracing::info!(provider = %provider.id, connection = %conn.id, "stream broke after text; continuing it once with the text as an assistant prefill");
        let sent = send_attempt(&self.state, &t, &self.req, self.route, body, self.deadline).await;
        let a = match sent {
            Ok(a) => a,
            Err(e) => {
                core.release(ticket);
                return failed(&e.to_string(), None);
            }
        };
        let latency = a.latency;
        match a.result {
            AttemptResult::Stream { resp, held } => Continued::Stream {
                resp,
                held,
                guard: a.guard,
                ticket,
                latency,
            },
            AttemptResult::Complete(resp) => {
                let status = resp.status().as_u16();
                let c = success(status);
                core.report(ticket, &c);
                failed(
                    "the continuation was not a stream",
                    Some((status, c, latency)),
                )
            }
            AttemptResult::Failed {
                status, classified, ..
            } => {
                core.report(ticket, &classified);
                let msg = format!("the continuation failed: {}", classified.reason);
                failed(&msg, Some((status, classified, latency)))
            }
            AttemptResult::BrokeBeforeContent { classified, .. } => {
                core.report(ticket, &classified);
                let msg = "the continuation broke before any content";
                failed(msg, Some((200, classified, latency)))
            }
            AttemptResult::OutOfTime => {
                core.release(ticket);
                failed("the execution budget ran out before the continuation", None)
            }
        }
    }
}

fn failed(message: &str, classified: Option<(u16, Classified, Duration)>) -> Continued {
    Continued::Failed {
        message: message.to_string(),
        classified,
    }
}
