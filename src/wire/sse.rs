//! Incremental SSE framing: feed [`SseFramer`] arbitrary byte chunks, get complete [`Event`]s
//! back. No I/O, no clock. The proxy's stream guards (`proxy::sse`) classify and track the
//! events; the translation's stream re-encoders (`translate::stream`) decode them.
//!
//! Every event carries the **exact raw bytes** it was framed from, including its terminating
//! blank line, so a relay can pass bytes through unchanged: concatenating every yielded `raw`
//! and then [`SseFramer::pending`] always equals the input. Works on bytes; decodes each
//! complete line (lossy on invalid UTF-8), so a multi-byte character split across chunks is
//! reassembled.
//!
//! # Line endings
//!
//! `\n`, `\r\n` and lone `\r` are all line endings, mixed freely. A `\r` that is the last
//! buffered byte may be the first half of a `\r\n` split across reads, so the line it ends is
//! not processed until the next byte arrives (or [`SseFramer::finish`]). For the rare upstream
//! that uses lone `\r` and then goes quiet, [`SseFramer::resolve_trailing_cr`] releases an event
//! held that way (the relay may call it when the upstream has been silent).
//!
//! # Blank lines
//!
//! A blank line that ends no event (extra blank lines between events) is yielded as an
//! [`Event`] with `is_blank` set and only its raw bytes, so the byte-exact property holds; the
//! proxy's classifier calls it a blank event and its guards ignore it.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};

/// Default limit on one event's raw size (1 MiB).
pub const DEFAULT_MAX_EVENT_SIZE: usize = 1 << 20;

/// Input is fed to the line scanner in slices of at most this many bytes, so the partial-event
/// buffer never holds more than `max_event_size` plus one slice, whatever the chunk size.
pub(crate) const FEED_SLICE: usize = 64 * 1024;

/// One complete SSE event (or a run-on blank line), as framed from the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The exact bytes of the event, including its terminating blank line.
    pub raw: Bytes,
    /// The `event:` field (last one wins; an empty value counts as absent).
    pub event: Option<String>,
    /// All `data:` fields joined with `\n` (empty when there were none).
    pub data: String,
    /// Whether at least one `data:` field was present (`data:` with an empty value counts).
    pub has_data: bool,
    /// The event consists only of comment lines (`: ping`).
    pub is_comment_only: bool,
    /// A blank line that ends no event (no fields, no comments): raw passthrough bytes only.
    pub is_blank: bool,
}

/// Why the framer gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// One event exceeded the configured maximum size; the stream cannot be framed further.
    #[error(
        "SSE event exceeds the {limit}-byte limit ({size} bytes buffered without an event boundary)"
    )]
    EventTooLarge {
        /// The configured limit.
        limit: usize,
        /// Bytes of the event seen when the limit was crossed.
        size: usize,
    },
}

/// What was left when the input ended: see [`SseFramer::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trailing {
    /// Complete events not yet taken with [`SseFramer::next_event`], including one completed
    /// by the end of input itself (a final blank line ended by a lone `\r`).
    pub events: Vec<Event>,
    /// Bytes after the last complete event: a truncated event when not empty.
    pub partial: Bytes,
    /// The framing error, if the framer had failed.
    pub error: Option<FrameError>,
}

impl Trailing {
    /// Whether bytes of an unfinished event remain (the stream was cut mid-event).
    pub fn is_truncated(&self) -> bool {
        !self.partial.is_empty()
    }
}

/// Fields of the event being read.
#[derive(Debug, Default)]
struct Partial {
    event: Option<String>,
    data: String,
    has_data: bool,
    fields: bool,
    comments: bool,
}

/// Incremental SSE framer: [`push`](Self::push) chunks, then take events with
/// [`next_event`](Self::next_event) (or iterate).
#[derive(Debug)]
pub struct SseFramer {
    /// Bytes not yet yielded: the event being read, from its first byte.
    buf: BytesMut,
    /// Start of the current (incomplete) line in `buf`.
    line_start: usize,
    /// `buf[line_start..searched]` is known to hold no line terminator.
    searched: usize,
    cur: Partial,
    ready: VecDeque<Event>,
    max: usize,
    error: Option<FrameError>,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::new()
    }
}

impl SseFramer {
    /// A framer with the default 1 MiB event limit.
    pub fn new() -> Self {
        Self::with_max_event_size(DEFAULT_MAX_EVENT_SIZE)
    }

    /// A framer whose events may be at most `max` raw bytes (at least 1).
    pub fn with_max_event_size(max: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            line_start: 0,
            searched: 0,
            cur: Partial::default(),
            ready: VecDeque::new(),
            max: max.max(1),
            error: None,
        }
    }

    /// Bytes allocated for the event being read (the bound the framing tests check).
    #[cfg(test)]
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// The configured event size limit.
    pub fn max_event_size(&self) -> usize {
        self.max
    }

    /// Feeds the next chunk of the stream. Complete events become available through
    /// [`next_event`](Self::next_event); events completed before an error stay available.
    ///
    /// # Errors
    /// [`FrameError::EventTooLarge`] when an event grows past the limit. The error is sticky:
    /// the partial event is dropped (memory stays bounded) and every later push fails.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), FrameError> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        for piece in chunk.chunks(FEED_SLICE) {
            self.buf.extend_from_slice(piece);
            self.scan_lines(false)?;
            if self.buf.len() > self.max {
                return Err(self.fail(self.buf.len()));
            }
        }
        Ok(())
    }

    /// The next complete event, in stream order.
    pub fn next_event(&mut self) -> Option<Event> {
        self.ready.pop_front()
    }

    /// Bytes received after the last complete event (the event being read).
    pub fn pending(&self) -> &[u8] {
        &self.buf
    }

    /// Whether the input so far ends exactly on an event boundary (nothing pending), which is
    /// where a relay may inject a heartbeat without splitting an upstream event.
    pub fn at_boundary(&self) -> bool {
        self.buf.is_empty()
    }

    /// The sticky framing error, if any.
    pub fn error(&self) -> Option<&FrameError> {
        self.error.as_ref()
    }

    /// Treats a trailing `\r` that ends a blank line as a complete line ending now, instead of
    /// waiting to see whether `\n` follows; returns whether an event was released.
    ///
    /// Only for lone-`\r` upstreams that go quiet after an event. If a `\n` does follow, it
    /// is then yielded as a blank passthrough event (harmless, still byte-exact).
    pub fn resolve_trailing_cr(&mut self) -> bool {
        if self.error.is_some()
            || self.buf.last() != Some(&b'\r')
            || self.line_start + 1 != self.buf.len()
        {
            return false;
        }
        let end = self.buf.len();
        self.dispatch(end).is_ok()
    }

    /// Ends the input: resolves a final lone `\r`, and returns the events not yet taken and
    /// the bytes of any unfinished event (see [`Trailing::is_truncated`]).
    pub fn finish(mut self) -> Trailing {
        if self.error.is_none() {
            // An oversized event completed only by EOF is recorded in `self.error`.
            let _ = self.scan_lines(true);
        }
        Trailing {
            events: self.ready.into_iter().collect(),
            partial: self.buf.freeze(),
            error: self.error,
        }
    }

    /// Splits complete lines out of `buf`, updating the partial event and dispatching events.
    fn scan_lines(&mut self, eof: bool) -> Result<(), FrameError> {
        loop {
            let Some(off) = self.buf[self.searched..]
                .iter()
                .position(|&b| b == b'\n' || b == b'\r')
            else {
                self.searched = self.buf.len();
                return Ok(());
            };
            let at = self.searched + off;
            let term = if self.buf[at] == b'\n' {
                1
            } else if at + 1 < self.buf.len() {
                if self.buf[at + 1] == b'\n' { 2 } else { 1 }
            } else if eof {
                1
            } else {
                // A `\r` ends the input so far: wait for the next byte to know its length.
                self.searched = at;
                return Ok(());
            };
            let next = at + term;
            if at == self.line_start {
                self.dispatch(next)?;
            } else {
                process_line(&mut self.cur, &self.buf[self.line_start..at]);
                self.line_start = next;
                self.searched = next;
            }
        }
    }

    /// Emits `buf[..end]` (ending with a blank line) as one event.
    fn dispatch(&mut self, end: usize) -> Result<(), FrameError> {
        if end > self.max {
            return Err(self.fail(end));
        }
        let raw = self.buf.split_to(end).freeze();
        self.line_start = 0;
        self.searched = 0;
        let p = std::mem::take(&mut self.cur);
        self.ready.push_back(Event {
            raw,
            event: p.event,
            data: p.data,
            has_data: p.has_data,
            is_comment_only: p.comments && !p.fields,
            is_blank: !p.comments && !p.fields,
        });
        Ok(())
    }

    /// Records the sticky error and drops the partial event.
    fn fail(&mut self, size: usize) -> FrameError {
        let e = FrameError::EventTooLarge {
            limit: self.max,
            size,
        };
        self.buf = BytesMut::new();
        self.line_start = 0;
        self.searched = 0;
        self.cur = Partial::default();
        self.error = Some(e.clone());
        e
    }
}

impl Iterator for SseFramer {
    type Item = Event;

    fn next(&mut self) -> Option<Event> {
        self.next_event()
    }
}

/// Applies one non-empty line (without its terminator) to the partial event.
fn process_line(cur: &mut Partial, line: &[u8]) {
    if line.first() == Some(&b':') {
        cur.comments = true;
        return;
    }
    cur.fields = true;
    let (name, value) = match line.iter().position(|&b| b == b':') {
        Some(i) => {
            let v = &line[i + 1..];
            (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
        }
        None => (line, &[][..]),
    };
    match name {
        b"event" => {
            cur.event = (!value.is_empty()).then(|| String::from_utf8_lossy(value).into_owned());
        }
        b"data" => {
            if cur.has_data {
                cur.data.push('\n');
            }
            cur.data.push_str(&String::from_utf8_lossy(value));
            cur.has_data = true;
        }
        // `id`, `retry` and unknown fields are kept in `raw` and otherwise ignored.
        _ => {}
    }
}
