//! Stream translation: split-safe state machines fed upstream SSE bytes, writing client SSE.
//!
//! Upstream bytes are framed by the proxy's [`SseFramer`] (any split, CRLF, comments), each
//! event is decoded into the Anthropic-shaped [`Ev`] sequence by an upstream decoder
//! (`decode_anthropic`, `decode_chat`), and each [`Ev`] is written in the client's format by an
//! encoder (`encode_anthropic`, `encode_chat`, `encode_responses`). Output is whole SSE events
//! only. The translator ends with exactly one terminal event of the client's format:
//! the translated end of the upstream stream, the translated upstream error event, or — when
//! the upstream stops early ([`StreamTranslator::finish`] without a terminal event, or an
//! oversized event) — one error event of its own. Input after the terminal event is ignored.

mod decode_anthropic;
mod decode_chat;
mod encode_anthropic;
mod encode_chat;
mod encode_responses;

use bytes::Bytes;
use serde_json::Value;

use super::response::stop::Usage;
use super::{ClientFormat, ResponseContext, TranslateError, wire_names};
use crate::config::Dialect;
use crate::wire::sse::SseFramer;

/// Largest upstream event accepted (a whole tool call's arguments may come in one chunk).
pub const MAX_EVENT_SIZE: usize = 16 << 20;

/// A content block kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Block {
    /// Text.
    Text,
    /// Thinking / reasoning.
    Thinking,
    /// A tool call with its id and name.
    ToolUse {
        /// Tool-call id (kept unchanged in both directions).
        id: String,
        /// Tool name.
        name: String,
    },
}

/// A block delta.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delta {
    /// Text.
    Text(String),
    /// Thinking text.
    Thinking(String),
    /// Thinking signature (only meaningful to Anthropic clients).
    Signature(String),
    /// A fragment of the tool call's JSON arguments.
    InputJson(String),
}

/// One event of the pivot sequence (the Anthropic stream's shape).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ev {
    /// The message begins.
    Start {
        /// Upstream message / completion id.
        id: String,
        /// Upstream model name.
        model: String,
        /// Usage known at the start (input tokens, often 0 for chat upstreams).
        usage: Usage,
    },
    /// Block `index` opens.
    BlockStart {
        /// Block index (0-based, in order).
        index: usize,
        /// Its kind.
        block: Block,
    },
    /// A delta for block `index`.
    Delta {
        /// Block index.
        index: usize,
        /// The delta.
        delta: Delta,
    },
    /// Block `index` closes.
    BlockStop {
        /// Block index.
        index: usize,
    },
    /// The stop reason (Anthropic terms) and the final usage.
    MessageDelta {
        /// `end_turn`, `max_tokens`, `stop_sequence`, `tool_use`, `refusal`, `pause_turn`.
        stop_reason: String,
        /// The matched stop sequence.
        stop_sequence: Option<String>,
        /// Usage so far (fields that are 0 keep the start's value).
        usage: Usage,
    },
    /// The message ended (terminal).
    Stop,
    /// The upstream reported an error inside the stream (terminal).
    Error {
        /// Anthropic error type, e.g. `overloaded_error`.
        etype: String,
        /// Message, verbatim.
        message: String,
    },
}

impl Ev {
    fn is_terminal(&self) -> bool {
        matches!(self, Self::Stop | Self::Error { .. })
    }
}

enum Decoder {
    Anthropic(decode_anthropic::AnthropicDecoder),
    Chat(Box<decode_chat::ChatDecoder>),
}

enum Encoder {
    Anthropic(encode_anthropic::AnthropicEncoder),
    Chat(encode_chat::ChatEncoder),
    Responses(encode_responses::ResponsesEncoder),
}

impl Encoder {
    fn emit(&mut self, ev: Ev, out: &mut Vec<u8>) {
        match self {
            Self::Anthropic(e) => e.emit(ev, out),
            Self::Chat(e) => e.emit(ev, out),
            Self::Responses(e) => e.emit(ev, out),
        }
    }
}

/// Translates one upstream SSE stream into the client's format. Feed it every upstream
/// chunk as it arrives; each call returns the client bytes ready so far (possibly empty).
pub struct StreamTranslator {
    framer: SseFramer,
    decoder: Decoder,
    encoder: Encoder,
    done: bool,
    evs: Vec<Ev>,
    client: ClientFormat,
    /// `(upstream name, client name)` pairs of shortened tool names.
    tool_names: Vec<(String, String)>,
}

impl StreamTranslator {
    /// A translator from an upstream of dialect `upstream` to `ctx.client`.
    ///
    /// # Errors
    /// [`TranslateError::SameDialect`] when the stream needs no translation.
    pub fn new(upstream: Dialect, ctx: &ResponseContext) -> Result<Self, TranslateError> {
        let decoder = match (upstream, ctx.client) {
            (Dialect::Anthropic, ClientFormat::Anthropic)
            | (Dialect::OpenAi, ClientFormat::Chat) => {
                return Err(TranslateError::SameDialect);
            }
            (Dialect::Anthropic, _) => {
                Decoder::Anthropic(decode_anthropic::AnthropicDecoder::default())
            }
            (Dialect::OpenAi, _) => {
                Decoder::Chat(Box::new(decode_chat::ChatDecoder::new(ctx.clone())))
            }
        };
        let encoder = match ctx.client {
            ClientFormat::Anthropic => {
                Encoder::Anthropic(encode_anthropic::AnthropicEncoder::new(ctx.clone()))
            }
            ClientFormat::Chat => Encoder::Chat(encode_chat::ChatEncoder::new(ctx.clone())),
            ClientFormat::Responses => {
                Encoder::Responses(encode_responses::ResponsesEncoder::new(ctx.clone()))
            }
        };
        Ok(Self {
            framer: SseFramer::with_max_event_size(MAX_EVENT_SIZE),
            decoder,
            encoder,
            done: false,
            evs: Vec::new(),
            client: ctx.client,
            tool_names: ctx.tool_names.clone(),
        })
    }

    /// Whether the terminal event has been written (later input is ignored).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds the next upstream chunk; returns the client bytes it completes.
    pub fn feed(&mut self, chunk: &[u8]) -> Bytes {
        let mut out = Vec::new();
        if self.done {
            return Bytes::new();
        }
        let pushed = self.framer.push(chunk);
        while let Some(ev) = self.framer.next_event() {
            self.event(ev.event.as_deref(), &ev.data, ev.has_data, &mut out);
        }
        if let Err(e) = pushed {
            if !self.done {
                self.fail(
                    &format!("upstream stream cannot be translated: {e}"),
                    &mut out,
                );
            }
        }
        Bytes::from(out)
    }

    /// Ends the upstream input. Returns the remaining client bytes: events completed by the
    /// end of input, and — if no terminal event was written — the graceful end the upstream
    /// implied (a chat stream that finished without `[DONE]`) or one error event. Calling it
    /// again returns nothing.
    pub fn finish(&mut self) -> Bytes {
        let mut out = self.finish_input().to_vec();
        if !self.done {
            self.fail("upstream stream ended before its terminal event", &mut out);
        }
        Bytes::from(out)
    }

    /// Ends the upstream input like [`StreamTranslator::finish`], but writes no error event
    /// of its own when the upstream implied no end: [`StreamTranslator::is_done`] then stays
    /// false and the caller ends the stream (the proxy's relay does, with its truncation
    /// handling). Calling it again returns nothing.
    pub fn finish_input(&mut self) -> Bytes {
        let mut out = Vec::new();
        if self.done {
            return Bytes::new();
        }
        let trailing = std::mem::take(&mut self.framer).finish();
        for ev in trailing.events {
            self.event(ev.event.as_deref(), &ev.data, ev.has_data, &mut out);
        }
        if !self.done {
            let mut evs = std::mem::take(&mut self.evs);
            match &mut self.decoder {
                Decoder::Anthropic(d) => d.finish(&mut evs),
                Decoder::Chat(d) => d.finish(&mut evs),
            }
            self.write(&mut evs, &mut out);
            self.evs = evs;
        }
        Bytes::from(out)
    }

    fn event(&mut self, name: Option<&str>, data: &str, has_data: bool, out: &mut Vec<u8>) {
        if self.done || !has_data {
            return;
        }
        let mut evs = std::mem::take(&mut self.evs);
        match &mut self.decoder {
            Decoder::Anthropic(d) => d.event(name, data, &mut evs),
            Decoder::Chat(d) => d.event(data, &mut evs),
        }
        self.write(&mut evs, out);
        self.evs = evs;
    }

    fn write(&mut self, evs: &mut Vec<Ev>, out: &mut Vec<u8>) {
        for ev in evs.drain(..) {
            if self.done {
                break;
            }
            self.done = ev.is_terminal();
            let ev = match ev {
                Ev::BlockStart {
                    index,
                    block: Block::ToolUse { id, name },
                } => {
                    let (id, name) =
                        wire_names::for_client(self.client, &self.tool_names, &id, &name);
                    Ev::BlockStart {
                        index,
                        block: Block::ToolUse { id, name },
                    }
                }
                other => other,
            };
            self.encoder.emit(ev, out);
        }
    }

    fn fail(&mut self, message: &str, out: &mut Vec<u8>) {
        self.encoder.emit(
            Ev::Error {
                etype: "api_error".into(),
                message: message.into(),
            },
            out,
        );
        self.done = true;
    }
}

/// Appends one SSE event: `event: <name>` (when given) and `data: <json>`.
pub(crate) fn sse(out: &mut Vec<u8>, name: Option<&str>, data: &Value) {
    if let Some(n) = name {
        out.extend_from_slice(b"event: ");
        out.extend_from_slice(n.as_bytes());
        out.push(b'\n');
    }
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(data.to_string().as_bytes());
    out.extend_from_slice(b"\n\n");
}

/// Merges a later usage report into the start's: non-zero fields win.
pub(crate) fn merge_usage(base: &mut Usage, later: Usage) {
    for (b, l) in [
        (&mut base.input, later.input),
        (&mut base.output, later.output),
        (&mut base.cache_read, later.cache_read),
        (&mut base.cache_creation, later.cache_creation),
    ] {
        if l > 0 {
            *b = l;
        }
    }
}
