//! The request lifecycle of an inference route: read and check the body, plan candidates,
//! admit each through the resilience layers, send attempts in order (falling back before the
//! first byte reached the client), report every outcome through the core's one choke point,
//! and hand a successful upstream response to a [`RelayBody`].

use std::error::Error as _;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;

use super::Shared;
use super::body::{estimate_tokens, probe, read_limited, rewrite_model};
use super::dialect::{self, Excluded, ProxyError, SseKind};
use super::headers;
use super::relay::{Finish, Guards, Inspect, RelayBody};
use super::routes::{ProxyBody, Route, RouteKind};
use crate::clock::{Clock, SystemClock, unix_ms};
use crate::core::admission::Admitted;
use crate::core::resilience::Ticket;
use crate::core::snapshot::RequestView;
use crate::core::{AttemptGuard, RequestGuard};
use crate::policy::affinity;
use crate::policy::select::{self, Candidate, Exclusion, none_eligible};
use crate::policy::{Classified, OutcomeClass};

/// Error bodies are read (for classification and pass-through) up to this many bytes.
pub const MAX_ERROR_BODY: usize = 1 << 20;

enum Outcome {
    /// Relay this successful upstream response (`hold` is set for SSE after the pre-commit
    /// hold of spec §6).
    Relay {
        resp: Response<Incoming>,
        attempt: AttemptGuard,
        ticket: Ticket,
        hold: Option<Box<Held>>,
        permit: Option<Admitted>,
    },
    /// A complete response: a local answer (`ok`) or an upstream error passed through.
    Local {
        resp: Response<Full<Bytes>>,
        outcome: &'static str,
    },
}

/// What the pre-commit hold read from a 2xx SSE stream.
struct Held {
    inspect: Inspect,
    bytes: BytesMut,
    /// Content (or a complete turn) arrived: flush and relay. Else the head is committed and
    /// the body keeps holding with heartbeats.
    content: bool,
}

/// How the pre-commit hold ended.
enum HoldEnd {
    Held(Held),
    /// The attempt failed before content (nothing reached the client): try the next one.
    Failed {
        classified: Classified,
        last: LastFailure,
    },
}

/// The last failed attempt, kept to answer the client when every candidate failed (§8 row 2).
enum LastFailure {
    Upstream {
        status: StatusCode,
        headers: HeaderMap,
        body: Bytes,
        classified: Classified,
    },
    Transport(ProxyError),
}

/// A request being served: its guard and view, recorded as `cancelled` if dropped before it
/// finished (the client went away while sluice waited on the upstream head).
struct Pending {
    state: Shared,
    guard: Option<RequestGuard>,
    view: RequestView,
}

impl Pending {
    fn finish(&mut self) {
        if let Some(g) = self.guard.take() {
            self.state
                .core
                .finish_request(&g, std::mem::take(&mut self.view));
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.guard.is_some() {
            self.view.outcome = "cancelled".into();
            self.view.error = "client disconnected before the response head".into();
            self.finish();
        }
    }
}

/// Serves one inference request end to end; never fails (errors are rendered in the route's
/// dialect).
pub async fn handle(state: Shared, req: Request<Incoming>, route: Route) -> Response<ProxyBody> {
    let guard = state.core.begin_request();
    let view = RequestView {
        route: route.path.to_string(),
        ..Default::default()
    };
    let mut pending = Pending {
        state: state.clone(),
        guard: Some(guard),
        view,
    };
    let result = run(&state, req, route, &mut pending.view).await;
    match result {
        Ok(Outcome::Relay {
            resp,
            attempt,
            ticket,
            hold,
            permit,
        }) => {
            let (parts, body) = resp.into_parts();
            let is_sse = headers::is_event_stream(&parts.headers);
            let mut view = std::mem::take(&mut pending.view);
            view.status = parts.status.as_u16();
            view.stream = is_sse;
            let sse = is_sse.then_some(route.sse_kind());
            let Some(guard) = pending.guard.take() else {
                return dialect::render::<Full<Bytes>>(&ProxyError::Draining, route.dialect)
                    .map(Either::Left);
            };
            let finish = Finish::new(state.core.clone(), guard, view, Some(attempt), Some(ticket))
                .with_permit(permit);
            let stop = state.hard_stop.clone().cancelled_owned();
            let relay = match (hold, sse) {
                (Some(h), Some(kind)) => RelayBody::guarded(
                    body,
                    stop,
                    kind,
                    h.inspect,
                    h.bytes,
                    h.content,
                    guards(&state.core),
                    finish,
                ),
                _ => RelayBody::new(body, stop, sse, parts.status.is_success(), finish),
            };
            let mut out = Response::new(Either::Right(relay));
            *out.status_mut() = parts.status;
            *out.headers_mut() = headers::client_response(&parts.headers, is_sse);
            out
        }
        Ok(Outcome::Local { resp, outcome }) => {
            pending.view.status = resp.status().as_u16();
            pending.view.outcome = outcome.into();
            pending.view.bytes = http_body::Body::size_hint(resp.body()).exact().unwrap_or(0);
            pending.finish();
            resp.map(Either::Left)
        }
        Err(err) => {
            let view = &mut pending.view;
            view.status = err.status().as_u16();
            view.outcome = match err {
                ProxyError::Unreachable(_)
                | ProxyError::Timeout(_)
                | ProxyError::Restated { .. } => "upstream_error",
                ProxyError::Draining | ProxyError::Excluded(_) => "sluice_error",
                _ => "client_error",
            }
            .into();
            view.error = err.to_string();
            if view.status >= 500 {
                tracing::warn!(route = route.path, model = %view.client_model, target = %view.target, error = %err, "request failed");
            }
            pending.finish();
            dialect::render::<Full<Bytes>>(&err, route.dialect).map(Either::Left)
        }
    }
}

async fn run(
    state: &Shared,
    req: Request<Incoming>,
    route: Route,
    view: &mut RequestView,
) -> Result<Outcome, ProxyError> {
    if state.core.is_draining() {
        return Err(ProxyError::Draining);
    }
    let cfg = state.core.config().clone();
    let (parts, body) = req.into_parts();
    let client_key = headers::check_client_key(&parts.headers, &cfg.server.client_keys)
        .map_err(|_| ProxyError::Unauthorized)?;
    let content_length = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    let body = read_limited(body, content_length, cfg.server.max_body).await?;
    let p = probe(&body)?;
    view.client_model = p.model.clone();
    view.stream = p.stream;

    let plan = select::plan(&cfg, route.dialect, &p.model);
    if plan.candidates.is_empty() {
        if route.kind == RouteKind::CountTokens {
            let v = serde_json::json!({ "input_tokens": estimate_tokens(&body) });
            return Ok(Outcome::Local {
                resp: json_response(StatusCode::OK, v),
                outcome: "ok",
            });
        }
        let hint = if plan.skipped.is_empty() {
            String::new()
        } else {
            format!(" ({} target(s) skipped: other dialect)", plan.skipped.len())
        };
        return Err(ProxyError::NoTargets {
            model: p.model,
            hint,
        });
    }
    let session = affinity::session_key(&parts.headers);
    let ordered = state.core.order_candidates(&plan);
    let candidates = state.core.order_by_affinity(ordered, session.as_deref());

    let path_and_query = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str())
        .unwrap_or(route.path);
    let clock = state.core.clock().clone();
    let wait = state.core.settings_snapshot().combo_cooldown_wait;
    let (mut waits, mut waited) = (0u32, Duration::ZERO);
    let mut rewritten: Option<(String, Bytes)> = None;
    let mut last: Option<LastFailure> = None;
    let mut exclusions: Vec<Exclusion> = Vec::new();
    let queue = state.core.settings_snapshot().queue;
    let gates = state.core.gates().clone();
    loop {
        exclusions.clear();
        // Candidates in order; a saturated one (§4 caps) is skipped at first, and queued on
        // (§5) only when no other candidate served the request.
        let (mut next, mut saturated, mut queued, mut queued_once) =
            (0usize, None::<usize>, None::<(usize, Admitted)>, false);
        loop {
            let (idx, pre_permit) = if let Some((qi, p)) = queued.take() {
                (qi, Some(p))
            } else if next < candidates.len() {
                next += 1;
                (next - 1, None)
            } else if let (Some(si), false) = (saturated.take(), queued_once) {
                queued_once = true;
                let c = &candidates[si];
                match gates
                    .acquire(c.provider, c.connection, &c.model, &queue)
                    .await
                {
                    Ok(p) => {
                        if p.without_permit() {
                            tracing::info!(model = %c.model, "queue wait timed out; proceeding without a permit (concurrency_fail_open)");
                        }
                        queued = Some((si, p));
                        continue;
                    }
                    Err(refused) => return Err(ProxyError::Admission(Box::new(refused))),
                }
            } else {
                break;
            };
            let cand = &candidates[idx];
            let ticket = match state.core.admit_candidate(cand, clock.now()) {
                Ok(t) => t,
                Err(e) => {
                    exclusions.push(e);
                    continue;
                }
            };
            // Token counts never take concurrency slots meant for generations (case A23).
            let permit = match pre_permit {
                Some(p) => Some(p),
                None if route.kind == RouteKind::CountTokens => None,
                None => {
                    match gates.try_acquire(cand.provider, cand.connection, &cand.model, &queue) {
                        Some(p) => Some(p),
                        None => {
                            saturated.get_or_insert(idx);
                            drop(ticket);
                            continue;
                        }
                    }
                }
            };
            let Some(provider) = cfg.providers.get(cand.provider) else {
                continue;
            };
            let Some(conn) = provider.connections.get(cand.connection) else {
                continue;
            };
            let Some(client) = state.upstreams.client(cand.provider) else {
                continue;
            };
            view.target = format!("{}:{}/{}", provider.id, conn.id, cand.model);
            view.attempts += 1;
            let send_body = body_for(&body, cand, &mut rewritten)?;
            let uri = state
                .upstreams
                .uri(cand.provider, path_and_query)
                .map_err(|e| {
                    ProxyError::Unreachable(format!(
                        "bad upstream URL for provider '{}': {e}",
                        provider.id
                    ))
                })?;
            let mut up = Request::new(Full::new(send_body.clone()));
            *up.method_mut() = parts.method.clone();
            *up.uri_mut() = uri;
            *up.headers_mut() = headers::upstream_request(
                &parts.headers,
                &conn.auth,
                provider.dialect,
                client_key,
                send_body.len(),
            );
            if let Some(allow) = &provider.anthropic_beta_allowlist {
                state.filter_betas(up.headers_mut(), &provider.id, allow);
            }

            let attempt = state.core.begin_attempt(cand.provider, cand.connection);
            let started = clock.now();
            // The response head is bounded by the provider's `timeout`; the §5 execution budget
            // is never shorter than it (it is raised to the provider timeout), so the provider
            // timeout is the one that can fire first before the head.
            let budget = provider
                .timeout
                .min(gates.execution_budget(provider.timeout, &queue));
            let res = tokio::time::timeout(budget, client.request(up)).await;
            let latency = clock.now().saturating_duration_since(started);
            match res {
                Err(_) | Ok(Err(_)) => {
                    state
                        .core
                        .attempt_result(cand.provider, cand.connection, None, latency);
                    let err = match res {
                        Err(_) => ProxyError::Timeout(format!(
                            "{} waiting for provider '{}'",
                            humantime::format_duration(budget),
                            provider.id
                        )),
                        Ok(Err(e)) => ProxyError::Unreachable(format!(
                            "provider '{}': {}",
                            provider.id,
                            describe(&e)
                        )),
                        Ok(Ok(_)) => ProxyError::Unreachable("unreachable".into()),
                    };
                    tracing::warn!(target = %view.target, attempt = view.attempts, error = %err, "upstream transport error before the response head");
                    let c = state
                        .core
                        .classify(cand.provider, None, None, b"", None, false);
                    log_attempt(view, 0, &c, latency);
                    state.core.report(ticket, &c);
                    last = Some(LastFailure::Transport(err));
                }
                Ok(Ok(resp)) => {
                    let status = resp.status();
                    state.core.attempt_result(
                        cand.provider,
                        cand.connection,
                        Some(status.as_u16()),
                        latency,
                    );
                    if status.is_success() {
                        let mut resp = resp;
                        let mut hold = None;
                        if headers::is_event_stream(resp.headers()) {
                            match pre_commit_hold(
                                state,
                                cand.provider,
                                route.sse_kind(),
                                resp.body_mut(),
                            )
                            .await
                            {
                                HoldEnd::Held(h) => hold = Some(Box::new(h)),
                                HoldEnd::Failed {
                                    classified,
                                    last: lf,
                                } => {
                                    tracing::info!(target = %view.target, class = classified.class.as_str(), reason = %classified.reason, "stream failed before content; trying the next target");
                                    log_attempt(view, 200, &classified, latency);
                                    state.core.report(ticket, &classified);
                                    last = Some(lf);
                                    drop(attempt);
                                    continue;
                                }
                            }
                        }
                        if let Some(key) = &session {
                            state.core.pin_session(key, cand.provider, cand.connection);
                        }
                        log_attempt(
                            view,
                            status.as_u16(),
                            &crate::core::resilience::success(status.as_u16()),
                            latency,
                        );
                        log_skipped(view, &exclusions);
                        return Ok(Outcome::Relay {
                            resp,
                            attempt,
                            ticket,
                            hold,
                            permit,
                        });
                    }
                    let (head, b) = resp.into_parts();
                    let bytes = read_error_body(b, provider.timeout).await;
                    let c = state.core.classify(
                        cand.provider,
                        Some(status.as_u16()),
                        Some(&head.headers),
                        &bytes,
                        None,
                        false,
                    );
                    log_attempt(view, status.as_u16(), &c, latency);
                    state.core.report(ticket, &c);
                    tracing::info!(target = %view.target, status = status.as_u16(), class = c.class.as_str(), reason = %c.reason, "upstream error");
                    if c.class == OutcomeClass::ClientFault && c.restated.is_none() {
                        return Ok(Outcome::Local {
                            resp: pass_through(status, &head.headers, bytes),
                            outcome: "upstream_error",
                        });
                    }
                    last = Some(LastFailure::Upstream {
                        status,
                        headers: head.headers,
                        body: bytes,
                        classified: c,
                    });
                }
            }
            drop(attempt);
        }
        if last.is_some() || exclusions.is_empty() {
            break;
        }
        // Nothing was attempted: every candidate is excluded. §4 cooldown-aware wait when only
        // short transient timers stand in the way.
        let earliest = exclusions.iter().filter_map(|e| e.retry_after).min();
        let all_waitable = exclusions
            .iter()
            .all(|e| e.reason.is_waitable() && e.retry_after.is_some());
        match earliest {
            Some(d)
                if wait.enabled
                    && all_waitable
                    && !d.is_zero()
                    && d <= wait.max_wait
                    && waits < wait.max_attempts
                    && waited + d <= wait.budget =>
            {
                tracing::info!(model = %view.client_model, wait_ms = d.as_millis() as u64, "every target is cooling down; waiting for the earliest to expire");
                tokio::time::sleep(d).await;
                waits += 1;
                waited += d;
            }
            _ => break,
        }
    }
    log_skipped(view, &exclusions);
    match last {
        Some(LastFailure::Upstream {
            status,
            headers,
            body,
            classified,
        }) => match classified.restated {
            Some(ref r) => Err(ProxyError::Restated {
                status: r.to,
                retry_after: r.retry_after,
                message: upstream_message(&body, &classified),
            }),
            None => {
                let mut resp = pass_through(status, &headers, body);
                add_retry_after(&mut resp, &classified);
                Ok(Outcome::Local {
                    resp,
                    outcome: "upstream_error",
                })
            }
        },
        Some(LastFailure::Transport(e)) => Err(e),
        None => {
            let verdict = none_eligible(&exclusions);
            let now_ms = unix_ms(clock.wall());
            let reset_at_unix_ms = verdict
                .retry_after
                .map(|d| now_ms.saturating_add(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)));
            let detail: Vec<String> = exclusions
                .iter()
                .map(|e| {
                    format!(
                        "{} {} {}s",
                        e.target,
                        e.reason.as_str(),
                        e.retry_after.map_or(0, |d| d.as_secs())
                    )
                })
                .collect();
            tracing::warn!(model = %view.client_model, status = verdict.status, code = verdict.code, excluded = %detail.join(", "), "no target eligible");
            Err(ProxyError::Excluded(Box::new(Excluded {
                verdict,
                excluded: exclusions,
                reset_at_unix_ms,
            })))
        }
    }
}

/// Appends one attempt to the request's log (console details).
fn log_attempt(view: &mut RequestView, status: u16, c: &Classified, latency: Duration) {
    view.attempt_log.push(crate::core::snapshot::AttemptView {
        target: view.target.clone(),
        status,
        class: c.class.as_str().into(),
        reason: c.reason.clone(),
        latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
    });
}

/// Records the candidates excluded before dispatch (console details).
fn log_skipped(view: &mut RequestView, exclusions: &[Exclusion]) {
    for e in exclusions {
        if !view.skipped.iter().any(|s| s.target == e.target) {
            view.skipped.push(crate::core::snapshot::SkippedView {
                target: e.target.clone(),
                reason: e.reason.as_str().into(),
            });
        }
    }
}

/// The stream guards in force (spec §6).
fn guards(core: &crate::core::Core) -> Guards {
    let st = core.settings_snapshot().stream;
    Guards {
        readiness: st.readiness_timeout,
        heartbeat: st.heartbeat_interval,
        stall: st.content_stall_timeout,
        throughput: st.throughput_watchdog.enabled.then_some((
            st.throughput_watchdog.min_bytes_per_sec,
            st.throughput_watchdog.warmup,
            st.throughput_watchdog.window,
        )),
    }
}

/// Spec §6 pre-content hold, before anything reaches the client: reads the 2xx SSE body
/// until its first content-bearing event (or a complete empty turn), holding the lifecycle
/// frames. An error event, a break, an end or a zombie (no useful event within the readiness
/// timeout) before content fails the attempt, so the next candidate can be tried with nothing
/// sent. After `heartbeat_interval` without content the head is committed and the body keeps
/// holding (with heartbeats) — from then on no other candidate is tried.
async fn pre_commit_hold(
    state: &Shared,
    provider: usize,
    kind: SseKind,
    body: &mut Incoming,
) -> HoldEnd {
    let g = guards(&state.core);
    let started = SystemClock.now();
    let mut inspect = Inspect::new(kind, started);
    let mut bytes = BytesMut::new();
    let commit_at = started + g.heartbeat.min(g.readiness);
    let failed = |state: &Shared,
                  status: Option<u16>,
                  body: &[u8],
                  in_stream: Option<&str>,
                  truncated: bool| {
        state
            .core
            .classify(provider, status, None, body, in_stream, truncated)
    };
    loop {
        let next = tokio::time::timeout_at(commit_at, body.frame()).await;
        let now = SystemClock.now();
        match next {
            Err(_) => {
                if inspect.zombie(now, g.readiness) {
                    let msg = "the upstream stream sent no event within the readiness timeout";
                    let mut c = failed(state, Some(200), msg.as_bytes(), None, true);
                    c.reason = "zombie_stream".into();
                    return HoldEnd::Failed {
                        classified: c,
                        last: LastFailure::Transport(ProxyError::Unreachable(msg.into())),
                    };
                }
                return HoldEnd::Held(Held {
                    inspect,
                    bytes,
                    content: false,
                });
            }
            Ok(None) => {
                if inspect.may_flush() {
                    return HoldEnd::Held(Held {
                        inspect,
                        bytes,
                        content: true,
                    });
                }
                let msg = "the upstream stream ended before any content";
                let c = failed(state, Some(200), msg.as_bytes(), None, true);
                return HoldEnd::Failed {
                    classified: c,
                    last: LastFailure::Transport(ProxyError::Unreachable(msg.into())),
                };
            }
            Ok(Some(Err(e))) => {
                let msg = format!("the upstream stream broke before any content: {e}");
                let c = failed(state, None, msg.as_bytes(), None, true);
                return HoldEnd::Failed {
                    classified: c,
                    last: LastFailure::Transport(ProxyError::Unreachable(msg)),
                };
            }
            Ok(Some(Ok(frame))) => {
                let Some(d) = frame.data_ref() else { continue };
                inspect.feed(now, d);
                bytes.extend_from_slice(d);
                if inspect.may_flush() {
                    return HoldEnd::Held(Held {
                        inspect,
                        bytes,
                        content: true,
                    });
                }
                if let Some(err) = inspect.error().cloned() {
                    // Case A14(a)/(b): an error event before content is the HTTP error of its
                    // type; its JSON is passed on if no other candidate succeeds.
                    let c = failed(
                        state,
                        None,
                        err.body.as_bytes(),
                        Some(&err.error_type),
                        false,
                    );
                    let status = StatusCode::from_u16(c.status.unwrap_or(502))
                        .unwrap_or(StatusCode::BAD_GATEWAY);
                    let mut h = HeaderMap::new();
                    h.insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/json"),
                    );
                    let body = Bytes::from(err.body.clone());
                    return HoldEnd::Failed {
                        last: LastFailure::Upstream {
                            status,
                            headers: h,
                            body,
                            classified: c.clone(),
                        },
                        classified: c,
                    };
                }
            }
        }
    }
}

/// The body for `cand`: the client's, or a copy with `model` rewritten (cached per model).
fn body_for(
    body: &Bytes,
    cand: &Candidate,
    cache: &mut Option<(String, Bytes)>,
) -> Result<Bytes, ProxyError> {
    if !cand.rewrite {
        return Ok(body.clone());
    }
    if let Some((m, b)) = cache
        && *m == cand.model
    {
        return Ok(b.clone());
    }
    let b = rewrite_model(body, &cand.model)?;
    *cache = Some((cand.model.clone(), b.clone()));
    Ok(b)
}

/// Reads an upstream error body (at most [`MAX_ERROR_BODY`] bytes, within `timeout`); an
/// unreadable body reads as empty.
async fn read_error_body(body: Incoming, timeout: Duration) -> Bytes {
    match tokio::time::timeout(timeout, Limited::new(body, MAX_ERROR_BODY).collect()).await {
        Ok(Ok(c)) => c.to_bytes(),
        _ => Bytes::new(),
    }
}

/// The upstream's error response, unchanged but for hop-by-hop headers.
fn pass_through(status: StatusCode, h: &HeaderMap, body: Bytes) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    *r.headers_mut() = headers::client_response(h, false);
    r.headers_mut().remove(header::CONTENT_LENGTH);
    r
}

/// A retryable upstream error (429, 503, 529) whose only retry hint was in the body (e.g. a
/// Gemini `retryDelay`, case A05) gets that hint as an integer `retry-after` header, the one
/// form every client reads. An upstream `retry-after` is never replaced.
fn add_retry_after(resp: &mut Response<Full<Bytes>>, c: &Classified) {
    let retryable = matches!(resp.status().as_u16(), 429 | 503 | 529);
    if retryable
        && !resp.headers().contains_key(header::RETRY_AFTER)
        && let Some(hint) = c.retry_hint
    {
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(dialect::whole_seconds_up(hint)),
        );
    }
}

/// The upstream's own error message for a restated error (falls back to the classifier's).
fn upstream_message(body: &[u8], c: &Classified) -> String {
    if c.message.is_empty() {
        String::from_utf8_lossy(body).chars().take(500).collect()
    } else {
        c.message.clone()
    }
}

/// A short description of a transport error, with its cause chain (never a credential:
/// hyper errors carry no headers).
fn describe(e: &hyper_util::client::legacy::Error) -> String {
    let mut s = if e.is_connect() {
        "connect failed".to_string()
    } else {
        "request failed".to_string()
    };
    let mut src = e.source();
    while let Some(c) = src {
        s.push_str(": ");
        s.push_str(&c.to_string());
        src = c.source();
    }
    s
}

/// A JSON response with `status`.
pub fn json_response(status: StatusCode, v: serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(v.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

impl Route {
    /// The SSE format of this route's streams.
    pub fn sse_kind(&self) -> SseKind {
        match self.kind {
            RouteKind::Messages | RouteKind::CountTokens => SseKind::Anthropic,
            RouteKind::ChatCompletions => SseKind::OpenAiChat,
            RouteKind::Responses => SseKind::OpenAiResponses,
        }
    }
}
