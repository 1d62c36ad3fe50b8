//! What dispatch hands back ([`Outcome`]) and the request's bookkeeping until it is answered
//! ([`Pending`]): turning an outcome into the client's response and recording the request
//! exactly once (or as `cancelled` when the client goes away first).

use bytes::Bytes;
use http::Response;
use http_body_util::Full;

use crate::clock::Instant;
use crate::core::admission::Admitted;
use crate::core::resilience::Ticket;
use crate::core::{AttemptGuard, RequestGuard};
use crate::proxy::Shared;
use crate::proxy::dialect::{self, ProxyError};
use crate::proxy::headers;
use crate::proxy::respond::relay::{Finish, RelayBody};
use crate::proxy::route::Route;
use crate::proxy::sse::guard::Guards;
use crate::proxy::sse::hold::Held;
use crate::proxy::translated::UpstreamBody;
use crate::snapshot::{RequestOutcome, RequestView};

/// A 2xx SSE attempt past its pre-commit hold, ready to relay.
pub struct Streamed {
    /// The upstream response (head and the rest of the body).
    pub resp: Response<UpstreamBody>,
    /// What the hold read.
    pub held: Box<Held>,
    /// The attempt (in-flight count) until the stream ends.
    pub attempt: AttemptGuard,
    /// Its resilience ticket, reported when the stream ends.
    pub ticket: Ticket,
    /// Its admission permits, released when the stream ends.
    pub permit: Option<Admitted>,
    /// The end of the execution budget, when one applies.
    pub deadline: Option<Instant>,
    /// Continues the stream once if it breaks after text (`continue_after_break`).
    pub continuer: Option<crate::proxy::respond::continuer::Continuer>,
}

/// How dispatch ended.
pub enum Outcome {
    /// Relay this stream.
    Stream(Box<Streamed>),
    /// A complete response: a 2xx body read whole, a local answer, or an upstream error
    /// passed through; `outcome` is the request log's word for it.
    Local {
        /// The response.
        resp: Response<Full<Bytes>>,
        /// `ok` or `upstream_error`.
        outcome: RequestOutcome,
    },
}

/// A request being served: its guard and view, recorded as `cancelled` if dropped before it
/// was answered (the client went away while sluice waited on an upstream).
pub struct Pending {
    state: Shared,
    guard: Option<RequestGuard>,
    /// What the request log and console will show.
    pub view: RequestView,
}

impl Pending {
    /// Starts the bookkeeping of a request on `route`.
    pub fn new(state: &Shared, route: Route) -> Self {
        Self {
            state: state.clone(),
            guard: Some(state.core.begin_request()),
            view: RequestView {
                route: route.path.to_string(),
                client_format: crate::proxy::translated::client_format(route)
                    .as_str()
                    .into(),
                ..Default::default()
            },
        }
    }

    fn finish(&mut self) {
        if let Some(g) = self.guard.take() {
            self.state
                .core
                .finish_request(&g, std::mem::take(&mut self.view));
        }
    }

    /// Records a complete response and returns it.
    pub fn local(
        mut self,
        resp: Response<Full<Bytes>>,
        outcome: RequestOutcome,
    ) -> Response<Full<Bytes>> {
        self.view.status = resp.status().as_u16();
        self.view.outcome = outcome;
        self.view.bytes = http_body::Body::size_hint(resp.body()).exact().unwrap_or(0);
        if let Some(u) = resp.extensions().get::<crate::proxy::usage::Usage>() {
            self.view.tokens_in = u.input;
            self.view.tokens_out = u.output;
        }
        self.finish();
        resp
    }

    /// Records `err` and renders it in the route's dialect.
    pub fn error(mut self, err: &ProxyError, route: Route) -> Response<Full<Bytes>> {
        self.record_error(err, err.status().as_u16());
        let resp = dialect::render::<Full<Bytes>>(err, route.dialect);
        self.view.bytes = http_body::Body::size_hint(resp.body()).exact().unwrap_or(0);
        self.finish();
        resp
    }

    /// Records `err` as answered with `status` (200 once an early stream head went out).
    pub fn record_error(&mut self, err: &ProxyError, status: u16) {
        let view = &mut self.view;
        view.status = status;
        view.outcome = match err {
            ProxyError::Unreachable(_)
            | ProxyError::EmptyTurn(_)
            | ProxyError::Timeout(_)
            | ProxyError::Restated { .. } => RequestOutcome::UpstreamError,
            ProxyError::Draining | ProxyError::Excluded(_) => RequestOutcome::SluiceError,
            _ => RequestOutcome::ClientError,
        };
        view.error = err.to_string();
        if let Some(w) = view.waits.last() {
            // Why it took this long: the request waited out a cooldown first.
            view.error = format!("{} ({} first)", view.error, w.describe());
        }
        if err.status().as_u16() >= 500 {
            tracing::warn!(route = %view.route, model = %view.client_model, target = %view.target, error = %err, "request failed");
        }
    }

    /// Records a 200 stream answered with one error event (early head) and finishes.
    pub fn stream_error(mut self, outcome: RequestOutcome, error: String, bytes: u64) {
        self.view.status = 200;
        self.view.stream = true;
        self.view.outcome = outcome;
        self.view.error = error;
        self.view.bytes = bytes;
        self.finish();
    }

    /// Hands the request to a relay of `s`; returns the upstream head and the body.
    pub fn relay(
        mut self,
        s: Streamed,
        route: Route,
    ) -> Option<(http::response::Parts, RelayBody)> {
        let (parts, body) = s.resp.into_parts();
        let mut view = std::mem::take(&mut self.view);
        view.status = parts.status.as_u16();
        view.stream = true;
        let guard = self.guard.take()?;
        let core = self.state.core.clone();
        let guards = Guards::from_settings(&core.settings_snapshot().stream);
        let finish = Finish::new(core, guard, view, Some(s.attempt), Some(s.ticket), s.permit);
        let stop = self.state.hard_stop.clone().cancelled_owned();
        let relay = RelayBody::new(
            body,
            stop,
            route.sse_kind(),
            *s.held,
            guards,
            finish,
            s.deadline,
        )
        .with_continuer(s.continuer);
        Some((parts, relay))
    }

    /// The client headers for a relayed stream's upstream head.
    pub fn stream_headers(parts: &http::response::Parts) -> http::HeaderMap {
        headers::client_response(&parts.headers, true)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.guard.is_some() {
            self.view.outcome = RequestOutcome::Cancelled;
            self.view.error = "client disconnected before the response head".into();
            self.finish();
        }
    }
}
