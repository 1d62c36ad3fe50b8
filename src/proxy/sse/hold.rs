//! The §6 pre-content hold of one 2xx SSE attempt, before anything of it reaches the client.
//!
//! Reads the stream until its first content-bearing event (or a complete turn), holding the
//! lifecycle frames (`message_start`, `ping`, empty block starts, role-only chunks). An
//! error event, a break, an end, a zombie or an empty turn (complete with nothing
//! content-bearing, `proxy::turn`) before content fails the attempt, so the next candidate
//! can be tried with none of this attempt's bytes sent.
//!
//! The readiness check comes before any commitment: once `heartbeat_interval` (or the
//! shorter readiness window) has passed, the hold commits to this attempt only if a useful
//! event has arrived; a stream that is still silent is held until its readiness window ends
//! and, if nothing useful came, fails as a zombie. (The client's connection is kept alive meanwhile by the request's own
//! heartbeats, see `proxy::commit`.)

use bytes::BytesMut;
use http_body_util::BodyExt;

use crate::clock::{Clock, Instant};
use crate::proxy::sse::guard::{Guards, Inspect};
use crate::proxy::sse::{Readiness, StreamError, StreamKind};
use crate::proxy::translated::UpstreamBody;

/// What the hold read from a 2xx SSE stream it commits to.
pub struct Held {
    /// The inspector, fed with every byte read so far.
    pub inspect: Inspect,
    /// The frames read so far, not yet relayed.
    pub bytes: BytesMut,
    /// Content (or a complete turn) arrived: flush `bytes` and relay. Else the relay keeps
    /// holding (with heartbeats) until content arrives.
    pub content: bool,
}

/// Why an attempt failed during the hold (nothing of it reached the client).
#[derive(Debug, Clone)]
pub enum HoldFailure {
    /// No useful event within the readiness timeout.
    Zombie,
    /// The body ended before any content.
    Ended,
    /// The body broke (transport error) before any content.
    Broke(String),
    /// An error event arrived before any content.
    ErrorEvent(StreamError),
    /// The turn completed with nothing content-bearing: an empty turn.
    EmptyTurn,
}

impl HoldFailure {
    /// A short description for logs and the client.
    pub fn message(&self) -> String {
        match self {
            Self::Zombie => "the upstream stream sent no event within the readiness timeout".into(),
            Self::Ended => "the upstream stream ended before any content".into(),
            Self::Broke(e) => format!("the upstream stream broke before any content: {e}"),
            Self::ErrorEvent(e) => {
                format!("error event before content: {} {}", e.error_type, e.message)
            }
            Self::EmptyTurn => EMPTY_STREAM.into(),
        }
    }
}

/// What an empty turn before content is called in logs and the client's error.
pub const EMPTY_STREAM: &str =
    "the upstream stream ended with no text and no tool call (an empty turn)";

/// How the hold ended.
pub enum HoldEnd {
    /// Relay this attempt.
    Held(Box<Held>),
    /// The attempt failed before content: try the next candidate.
    Failed(HoldFailure),
}

/// Runs the hold on `body`, a stream of `kind` whose head arrived now.
pub async fn pre_commit_hold(
    clock: &dyn Clock,
    kind: StreamKind,
    g: Guards,
    body: &mut UpstreamBody,
) -> HoldEnd {
    let started = clock.now();
    let mut inspect = Inspect::new(kind, started);
    let mut bytes = BytesMut::new();
    let mut check_at = started + g.heartbeat.min(g.readiness);
    loop {
        let next = tokio::time::timeout_at(check_at, body.frame()).await;
        let now = clock.now();
        let frame = match next {
            Err(_) => match silent_verdict(&inspect, now, g) {
                Some(end) => return end.with(inspect, bytes),
                None => {
                    check_at = at_readiness_end(started, g, now);
                    continue;
                }
            },
            Ok(None) if inspect.may_flush() => return flush(inspect, bytes),
            Ok(None) => return HoldEnd::Failed(HoldFailure::Ended),
            Ok(Some(Err(e))) => return HoldEnd::Failed(HoldFailure::Broke(e.to_string())),
            Ok(Some(Ok(frame))) => frame,
        };
        let Some(d) = frame.data_ref() else { continue };
        inspect.feed(now, d);
        bytes.extend_from_slice(d);
        if inspect.may_flush() {
            return flush(inspect, bytes);
        }
        if let Some(err) = inspect.error().cloned() {
            return HoldEnd::Failed(HoldFailure::ErrorEvent(err));
        }
    }
}

/// What a silent check decides: commit (useful events came), fail (zombie), or keep holding
/// until the readiness window ends (`None`).
enum Silent {
    Commit,
    Zombie,
}

impl Silent {
    fn with(self, inspect: Inspect, bytes: BytesMut) -> HoldEnd {
        match self {
            Self::Commit => held(inspect, bytes, false),
            Self::Zombie => HoldEnd::Failed(HoldFailure::Zombie),
        }
    }
}

fn silent_verdict(inspect: &Inspect, now: Instant, g: Guards) -> Option<Silent> {
    match inspect.readiness(now, g.readiness) {
        Readiness::Ready => Some(Silent::Commit),
        Readiness::Zombie => Some(Silent::Zombie),
        Readiness::Waiting => None,
    }
}

/// The next silent check while readiness is pending: just past the readiness window.
fn at_readiness_end(started: Instant, g: Guards, now: Instant) -> Instant {
    (started + g.readiness + std::time::Duration::from_millis(1)).max(now)
}

/// Content, or a complete turn, arrived: relay it — unless the turn is empty with nothing
/// content-bearing, which fails the attempt (nothing of it was sent).
fn flush(inspect: Inspect, bytes: BytesMut) -> HoldEnd {
    if inspect.empty_before_content() {
        return HoldEnd::Failed(HoldFailure::EmptyTurn);
    }
    held(inspect, bytes, true)
}

fn held(inspect: Inspect, bytes: BytesMut, content: bool) -> HoldEnd {
    HoldEnd::Held(Box::new(Held {
        inspect,
        bytes,
        content,
    }))
}
