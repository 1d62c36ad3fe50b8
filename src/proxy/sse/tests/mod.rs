//! Tests for the SSE framer, classifier and tracker, driven by the shared fixtures.

mod classify;
mod framing;
mod prop;
mod tracker;

use super::StreamKind;
use crate::wire::sse::{DEFAULT_MAX_EVENT_SIZE, Event, SseFramer, Trailing};

/// The fixtures (copies of the shared reference fixtures) with their stream kinds.
pub(super) const FIXTURES: [(&str, StreamKind, &[u8]); 7] = [
    (
        "anthropic-text",
        StreamKind::Anthropic,
        include_bytes!("../../../../tests/fixtures/sse/anthropic-text.sse"),
    ),
    (
        "anthropic-thinking-tool",
        StreamKind::Anthropic,
        include_bytes!("../../../../tests/fixtures/sse/anthropic-thinking-tool.sse"),
    ),
    (
        "anthropic-thinking-omitted",
        StreamKind::Anthropic,
        include_bytes!("../../../../tests/fixtures/sse/anthropic-thinking-omitted.sse"),
    ),
    (
        "anthropic-error-before-content",
        StreamKind::Anthropic,
        include_bytes!("../../../../tests/fixtures/sse/anthropic-error-before-content.sse"),
    ),
    (
        "openai-chat-text",
        StreamKind::OpenAiChat,
        include_bytes!("../../../../tests/fixtures/sse/openai-chat-text.sse"),
    ),
    (
        "openai-chat-tools",
        StreamKind::OpenAiChat,
        include_bytes!("../../../../tests/fixtures/sse/openai-chat-tools.sse"),
    ),
    (
        "openai-responses",
        StreamKind::OpenAiResponses,
        include_bytes!("../../../../tests/fixtures/sse/openai-responses.sse"),
    ),
];

/// The fixture named `name`.
pub(super) fn fixture(name: &str) -> &'static [u8] {
    FIXTURES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, _, b)| *b)
        .unwrap()
}

/// Feeds `input` cut at `cuts` (sorted offsets) and returns every event and the trailing state.
pub(super) fn feed_cuts(input: &[u8], cuts: &[usize], max: usize) -> (Vec<Event>, Trailing) {
    let mut f = SseFramer::with_max_event_size(max);
    let mut events = Vec::new();
    let mut from = 0;
    for &c in cuts.iter().chain(std::iter::once(&input.len())) {
        f.push(&input[from..c]).unwrap();
        events.extend(f.by_ref());
        from = c;
    }
    let t = f.finish();
    events.extend(t.events.iter().cloned());
    (events, t)
}

/// Feeds `input` whole.
pub(super) fn feed(input: &[u8]) -> (Vec<Event>, Trailing) {
    feed_cuts(input, &[], DEFAULT_MAX_EVENT_SIZE)
}

/// Tiny deterministic xorshift64 generator.
pub(super) struct XorShift(pub u64);

impl XorShift {
    pub(super) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Rewrites every `\n` line ending of an LF stream with `ending`.
pub(super) fn with_endings(input: &[u8], ending: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() * 2);
    for &b in input {
        if b == b'\n' {
            out.extend_from_slice(ending);
        } else {
            out.push(b);
        }
    }
    out
}

/// Rewrites `\n` line endings cycling through `\n`, `\r\n`, `\r`, never letting a lone `\r`
/// be followed by a lone `\n` (that pair would be one CRLF line ending).
pub(super) fn with_mixed_endings(input: &[u8]) -> Vec<u8> {
    let endings: [&[u8]; 3] = [b"\n", b"\r\n", b"\r"];
    let mut out = Vec::with_capacity(input.len() * 2);
    let mut i = 0;
    let mut prev_cr = false;
    for &b in input {
        if b == b'\n' {
            let mut e = endings[i % 3];
            if prev_cr && e == b"\n" {
                e = b"\r\n";
            }
            out.extend_from_slice(e);
            prev_cr = e == b"\r";
            i += 1;
        } else {
            out.push(b);
            prev_cr = false;
        }
    }
    out
}
