//! The snapshot stream: live snapshots as Server-Sent Events, the wire between the admin
//! listener (`GET /api/snapshot/stream`, [`events`]) and an attached console
//! (`sluice console`, [`Decoder`]).
//!
//! Each event is `event: snapshot` with one `data:` line holding exactly the JSON of
//! `GET /api/snapshot` (the serde form of [`Snapshot`]), so the console rebuilds the same view
//! model it gets in-process. The stream reads the core's coalescing `watch` channel — the one
//! the in-process console reads — and is latest-wins on top: at most one event per
//! [`MIN_EVENT_SPACING`] (whatever changed in between is folded into the next one), and a
//! `: keep-alive` comment after [`KEEP_ALIVE`] without a change, so proxies and the client
//! can tell a quiet sluice from a dead connection.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::snapshot::Snapshot;

/// Least time between two snapshot events of one subscriber (at most 5 per second).
pub const MIN_EVENT_SPACING: Duration = Duration::from_millis(200);
/// Most snapshot bytes one subscriber is sent per second (2 MiB): a state of thousands of
/// lockouts makes snapshots of megabytes, and sending them 5 times a second would cost the
/// request path more than the console gains; such a stream slows down instead (a 3 MB
/// snapshot every 1.5 s). A snapshot of the usual tens of KB is not affected.
pub const MAX_STREAM_BYTES_PER_SEC: u64 = 2 * 1024 * 1024;
/// A keep-alive comment goes out after this long without a snapshot event.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The SSE event name of a snapshot.
pub const EVENT_NAME: &str = "snapshot";
/// The keep-alive comment, as sent.
pub const KEEP_ALIVE_COMMENT: &[u8] = b": keep-alive\n\n";
/// Largest event a [`Decoder`] buffers, in bytes (far above any real snapshot); a longer one
/// is an error, not unbounded memory.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One snapshot as an SSE event: `event: snapshot\ndata: <json>\n\n` (serde_json writes no
/// newlines, so the JSON is one `data:` line). Errors: the snapshot cannot be serialised.
pub fn encode(snap: &Snapshot) -> Result<Bytes, serde_json::Error> {
    let json = serde_json::to_string(snap)?;
    let mut out = Vec::with_capacity(json.len() + 24);
    out.extend_from_slice(b"event: ");
    out.extend_from_slice(EVENT_NAME.as_bytes());
    out.extend_from_slice(b"\ndata: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    Ok(Bytes::from(out))
}

/// How a subscriber's stream is paced; [`Pacing::default`] is what the admin route uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Least time between two snapshot events.
    pub spacing: Duration,
    /// Quiet time after which a keep-alive comment goes out.
    pub keep_alive: Duration,
    /// Most snapshot bytes per second: after a large event the next waits longer than
    /// `spacing`. Default [`MAX_STREAM_BYTES_PER_SEC`] (2 MiB).
    pub max_bytes_per_sec: u64,
}

impl Default for Pacing {
    fn default() -> Self {
        Pacing {
            spacing: MIN_EVENT_SPACING,
            keep_alive: KEEP_ALIVE,
            max_bytes_per_sec: MAX_STREAM_BYTES_PER_SEC,
        }
    }
}

impl Pacing {
    /// The pause before the next snapshot event after one of `bytes`: `spacing`, or the time
    /// `bytes` take at `max_bytes_per_sec` when that is longer.
    pub fn pause_after(&self, bytes: usize) -> Duration {
        let by_size = Duration::from_secs_f64(bytes as f64 / self.max_bytes_per_sec.max(1) as f64);
        self.spacing.max(by_size)
    }
}

/// The byte chunks of one subscriber's stream: the current snapshot at once, then the latest
/// snapshot after each change (spaced by `pacing.spacing`), keep-alive comments while nothing
/// changes. Ends when `stop` is cancelled or the channel closes. Each subscriber has its own
/// receiver, so any number can watch at once.
pub fn events(
    mut rx: watch::Receiver<Arc<Snapshot>>,
    pacing: Pacing,
    stop: CancellationToken,
) -> impl Stream<Item = Bytes> + Send + 'static {
    let first = Arc::clone(&rx.borrow_and_update());
    let state = (rx, Some(first), pacing, stop, pacing.spacing);
    futures_util::stream::unfold(state, |(mut rx, first, pacing, stop, pause)| async move {
        if let Some(snap) = first {
            let chunk = encode_off_worker(snap).await;
            let pause = pacing.pause_after(chunk.len());
            return Some((chunk, (rx, None, pacing, stop, pause)));
        }
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = stop.cancelled() => return None,
        }
        let changed = tokio::select! {
            changed = rx.changed() => match changed {
                Ok(()) => Some(Arc::clone(&rx.borrow_and_update())),
                Err(_) => return None,
            },
            () = tokio::time::sleep(pacing.keep_alive) => None,
            () = stop.cancelled() => return None,
        };
        let chunk = match changed {
            Some(snap) => encode_off_worker(snap).await,
            None => Bytes::from_static(KEEP_ALIVE_COMMENT),
        };
        let pause = pacing.pause_after(chunk.len());
        Some((chunk, (rx, None, pacing, stop, pause)))
    })
}

/// [`event_bytes`] on a blocking-pool thread in the background scheduling class: a large
/// state's snapshot is megabytes of JSON, and serialising it on a runtime worker would hold
/// back every request that worker serves.
async fn encode_off_worker(snap: Arc<Snapshot>) -> Bytes {
    crate::support::sched::spawn_background(move || event_bytes(&snap))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "serialising a snapshot for the stream failed");
            Bytes::from_static(b": snapshot not serialisable\n\n")
        })
}

/// [`encode`], or a comment naming the failure (the stream goes on; never happens with the
/// snapshot's plain fields).
fn event_bytes(snap: &Snapshot) -> Bytes {
    encode(snap).unwrap_or_else(|e| {
        tracing::warn!(error = %e, "cannot serialise a snapshot for the stream");
        Bytes::from_static(b": snapshot not serialisable\n\n")
    })
}

/// One decoded SSE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The `event:` name (`message` when the event named none).
    pub name: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

impl Event {
    /// The snapshot this event carries, when it is a snapshot event. Errors: not JSON of a
    /// snapshot (wrong event names give `Ok(None)`).
    pub fn snapshot(&self) -> Result<Option<Snapshot>, serde_json::Error> {
        if self.name != EVENT_NAME {
            return Ok(None);
        }
        serde_json::from_str(&self.data).map(Some)
    }
}

/// Why a stream could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// One event grew past [`MAX_EVENT_BYTES`] without ending.
    #[error("an event is longer than {MAX_EVENT_BYTES} bytes")]
    TooLong,
    /// A line was not UTF-8.
    #[error("the stream is not UTF-8 text")]
    NotText,
}

/// Incremental SSE decoder: feed it chunks as they arrive (split anywhere), get the complete
/// events. Understands `\n` and `\r\n` line ends, `event:`/`data:` fields (one optional space
/// after the colon), comments (`:`), and ignores other fields.
#[derive(Debug, Default)]
pub struct Decoder {
    /// Bytes of the line being read.
    line: Vec<u8>,
    /// Fields of the event being read.
    name: Option<String>,
    data: Option<String>,
    /// Bytes buffered for the event being read.
    size: usize,
}

impl Decoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `chunk`; returns the events it completed, in order. Errors end the stream (the
    /// caller reconnects).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, DecodeError> {
        let mut out = Vec::new();
        for &b in chunk {
            if b != b'\n' {
                self.line.push(b);
                self.size = self.size.saturating_add(1);
                if self.size > MAX_EVENT_BYTES {
                    return Err(DecodeError::TooLong);
                }
                continue;
            }
            if self.line.last() == Some(&b'\r') {
                self.line.pop();
            }
            let line = std::mem::take(&mut self.line);
            let line = String::from_utf8(line).map_err(|_| DecodeError::NotText)?;
            if line.is_empty() {
                if let Some(data) = self.data.take() {
                    out.push(Event {
                        name: self.name.take().unwrap_or_else(|| "message".to_owned()),
                        data,
                    });
                }
                self.name = None;
                self.size = 0;
                continue;
            }
            self.field(&line);
        }
        Ok(out)
    }

    fn field(&mut self, line: &str) {
        if line.starts_with(':') {
            return;
        }
        let (key, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match key {
            "event" => self.name = Some(value.to_owned()),
            "data" => match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_owned()),
            },
            _ => {}
        }
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
