//! The request path of an inference route, as stages:
//!
//! 1. [`request::read`](crate::proxy::request::read): check and read what the client sent;
//! 2. [`dispatch::run`](crate::proxy::dispatch::run): plan candidates, admit, send attempts
//!    ([`send_attempt`](crate::proxy::attempt::send_attempt)), report each through `Core::report`,
//!    fall back, wait, answer;
//! 3. commit the head: a complete answer at once; a stream's head when its dispatch serves,
//!    or early with heartbeats ([`commit`](crate::proxy::respond::commit)) when that takes longer than
//!    `heartbeat_interval`;
//! 4. relay ([`RelayBody`](crate::proxy::respond::relay::RelayBody)) until the stream ends.

use http::{Request, Response};
use http_body_util::Either;
use hyper::body::Incoming;

use crate::proxy::Shared;
use crate::proxy::dialect::ProxyError;
use crate::proxy::dispatch;
use crate::proxy::request::{self, ClientRequest};
use crate::proxy::respond::commit::{self, Serving};
use crate::proxy::respond::outcome::{Outcome, Pending};
use crate::proxy::respond::response::{ProxyBody, complete, error_response};
use crate::proxy::route::{Route, RouteKind};

/// Serves one inference request end to end; never fails (errors are rendered in the route's
/// dialect).
pub async fn handle(state: Shared, req: Request<Incoming>, route: Route) -> Response<ProxyBody> {
    let mut pending = Pending::new(&state, route);
    let req = match request::read(&state, req).await {
        Ok(r) => r,
        Err(e) => return complete(pending.error(&e, route)),
    };
    pending.view.client_model = req.probe.model.clone();
    pending.view.stream = req.probe.stream;
    let streaming = req.probe.stream && route.kind != RouteKind::CountTokens;
    // `serve` is boxed on both paths: its future (about 7.5 KiB) then lives only until the
    // answer is ready, instead of enlarging this one, which hyper keeps for the connection's
    // whole life (through a whole stream, and between keep-alive requests).
    if !streaming {
        let (result, pending) = Box::pin(serve(state.clone(), req, route, pending)).await;
        return respond(route, result, pending);
    }
    let mut serving: Serving = Box::pin(serve(state.clone(), req, route, pending));
    let heartbeat = state.core.settings_snapshot().stream.heartbeat_interval;
    match tokio::time::timeout(heartbeat, serving.as_mut()).await {
        Ok((result, pending)) => respond(route, result, pending),
        Err(_) => {
            commit::early_head(state, route, serving).map(|b| Either::Right(Either::Right(b)))
        }
    }
}

/// Runs dispatch, keeping the bookkeeping with it (dropped with it if the client leaves).
async fn serve(
    state: Shared,
    req: ClientRequest,
    route: Route,
    mut pending: Pending,
) -> (Result<Outcome, ProxyError>, Pending) {
    let result = dispatch::run(&state, &req, route, &mut pending.view).await;
    (result, pending)
}

/// Turns dispatch's result into the client's response (head not yet sent).
fn respond(
    route: Route,
    result: Result<Outcome, ProxyError>,
    pending: Pending,
) -> Response<ProxyBody> {
    match result {
        Ok(Outcome::Stream(s)) => match pending.relay(*s, route) {
            Some((parts, relay)) => {
                let mut out = Response::new(Either::Right(Either::Left(relay)));
                *out.status_mut() = parts.status;
                *out.headers_mut() = Pending::stream_headers(&parts);
                out
            }
            None => error_response(&ProxyError::Draining, route.dialect),
        },
        Ok(Outcome::Local { resp, outcome }) => complete(pending.local(resp, outcome)),
        Err(e) => complete(pending.error(&e, route)),
    }
}
