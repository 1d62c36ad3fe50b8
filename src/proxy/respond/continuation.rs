//! Mid-stream continuation (`[resilience.stream] continue_after_break`, opt-in): the pure
//! parts. When an Anthropic text turn's stream breaks after text reached the client, the
//! request is re-issued once with the text so far as an assistant prefill, and the
//! continuation is spliced into the same client stream so the client sees one message.
//!
//! - [`TextTurn`] watches the client stream's events: one `text` block at index 0, still
//!   open, and the text it carried (any other block type makes the turn ineligible).
//! - [`eligible`] is the whole rule, over a [`Context`] of the request's facts.
//! - [`prefill`] builds the continuation's body (the text appended as a final assistant
//!   message, trailing whitespace trimmed and remembered).
//! - [`Splice`] rewrites the continuation stream for the client: its `message_start`, the
//!   `ping`s before content and its `content_block_start` for index 0 are dropped, and the
//!   trimmed whitespace is taken off its first text delta; everything after passes byte-exact.
//!
//! No I/O and no clock here; the relay does the sending.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::wire::sse::{Event, SseFramer};

/// What the client stream showed so far, for the continuation rule.
#[derive(Debug, Clone, Default)]
pub struct TextTurn {
    /// Text of block 0 so far.
    text: String,
    /// Block 0 is a `text` block and still open.
    open: bool,
    /// Blocks started so far.
    blocks: u32,
    /// Something other than plain text happened (another block type, another index, a
    /// non-text delta): never continued.
    other: bool,
}

impl TextTurn {
    /// Records one Anthropic event of the client stream.
    pub fn observe(&mut self, ev: &Event) {
        let name = ev.event.as_deref().unwrap_or("");
        if !name.starts_with("content_block_") || self.other {
            return;
        }
        let Ok(v) = serde_json::from_str::<Value>(&ev.data) else {
            self.other = true;
            return;
        };
        let index = v.get("index").and_then(Value::as_u64);
        match name {
            "content_block_start" => {
                let block = v.get("content_block");
                let kind = block.and_then(|b| b.get("type")).and_then(Value::as_str);
                if self.blocks == 0 && index == Some(0) && kind == Some("text") {
                    self.open = true;
                    let text = block.and_then(|b| b.get("text")).and_then(Value::as_str);
                    self.text.push_str(text.unwrap_or(""));
                } else {
                    self.other = true;
                }
                self.blocks += 1;
            }
            "content_block_delta" => {
                let delta = v.get("delta");
                let kind = delta.and_then(|d| d.get("type")).and_then(Value::as_str);
                let text = delta.and_then(|d| d.get("text")).and_then(Value::as_str);
                match (index, kind, text) {
                    (Some(0), Some("text_delta"), Some(t)) if self.open => self.text.push_str(t),
                    _ => self.other = true,
                }
            }
            "content_block_stop" if index == Some(0) => self.open = false,
            _ => self.other = true,
        }
    }

    /// The text of block 0 so far.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Exactly one block was started, it is a `text` block at index 0, it is still open,
    /// and nothing but text deltas arrived for it.
    pub fn single_open_text(&self) -> bool {
        !self.other && self.blocks == 1 && self.open
    }
}

/// The request's facts the continuation rule looks at.
#[derive(Debug, Clone, Copy, Default)]
pub struct Context {
    /// `[resilience.stream] continue_after_break` is on.
    pub enabled: bool,
    /// The client route is Anthropic `/v1/messages` and the request streams.
    pub anthropic_stream: bool,
    /// The upstream speaks Anthropic and the request is not translated.
    pub anthropic_upstream: bool,
    /// The request's last message is already an assistant prefill.
    pub ends_with_assistant: bool,
    /// The request was already continued once.
    pub continued: bool,
    /// The execution deadline has not passed.
    pub before_deadline: bool,
    /// The client stream ends on an event boundary (nothing of a cut event was sent).
    pub at_boundary: bool,
}

/// Whether a stream that broke with `turn` shown to the client is continued.
pub fn eligible(ctx: &Context, turn: &TextTurn) -> bool {
    ctx.enabled
        && ctx.anthropic_stream
        && ctx.anthropic_upstream
        && !ctx.ends_with_assistant
        && !ctx.continued
        && ctx.before_deadline
        && ctx.at_boundary
        && turn.single_open_text()
        && !turn.text().trim_end().is_empty()
}

/// Whether the JSON request `body`'s last message has role `assistant` (a prefill). A body
/// that cannot be read counts as one (it is never continued).
pub fn ends_with_assistant(body: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Msgs<'a> {
        #[serde(borrow)]
        messages: Vec<&'a RawValue>,
    }
    let Ok(m) = serde_json::from_slice::<Msgs<'_>>(body) else {
        return true;
    };
    let Some(last) = m.messages.last() else {
        return true;
    };
    serde_json::from_str::<Value>(last.get())
        .ok()
        .and_then(|v| {
            v.get("role")
                .and_then(Value::as_str)
                .map(|r| r == "assistant")
        })
        .unwrap_or(true)
}

/// A continuation request's body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prefill {
    /// The original body with the assistant prefill appended to `messages`.
    pub body: Bytes,
    /// The trailing whitespace trimmed off the prefill (Anthropic rejects a final assistant
    /// message ending in whitespace); taken off the continuation's first text instead.
    pub trimmed: String,
}

/// The continuation body for `body` after the client received `text`: `{"role":
/// "assistant","content": text}` appended to `messages`, trailing whitespace trimmed off;
/// every other field (`stream: true` included) and every earlier message kept byte for
/// byte. `None` when the body has no `messages` array or the trimmed text is empty.
pub fn prefill(body: &[u8], text: &str) -> Option<Prefill> {
    let kept = text.trim_end();
    if kept.is_empty() {
        return None;
    }
    let mut top: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(body).ok()?;
    let mut messages: Vec<Box<RawValue>> = serde_json::from_str(top.get("messages")?.get()).ok()?;
    let msg = serde_json::json!({ "role": "assistant", "content": kept });
    messages.push(RawValue::from_string(msg.to_string()).ok()?);
    let joined = serde_json::to_string(&messages).ok()?;
    top.insert("messages".into(), RawValue::from_string(joined).ok()?);
    let out = serde_json::to_vec(&top).ok()?;
    Some(Prefill {
        body: Bytes::from(out),
        trimmed: text[kept.len()..].to_string(),
    })
}

/// Why a continuation stream cannot be spliced onto the client's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpliceError {
    /// The continuation did not open with a plain, empty text block at index 0.
    #[error("the continuation did not continue the text block: {0}")]
    Unexpected(String),
    /// The continuation's SSE could not be framed.
    #[error("the continuation stream could not be framed: {0}")]
    Frame(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Before the continuation's text block start: lifecycle events are dropped.
    Head,
    /// After the text block start, before its first text: pings are dropped, and the
    /// trimmed whitespace is taken off the first text deltas.
    Strip,
    /// Everything passes byte-exact.
    Pass,
}

/// Rewrites a continuation stream for a client that already has its message and text
/// block open. Feed every upstream chunk in order; send what [`feed`](Self::feed) returns.
#[derive(Debug)]
pub struct Splice {
    framer: Option<SseFramer>,
    strip: String,
    phase: Phase,
}

impl Splice {
    /// A splice for a continuation whose prefill had `trimmed` whitespace taken off.
    pub fn new(trimmed: String) -> Self {
        Self {
            framer: Some(SseFramer::new()),
            strip: trimmed,
            phase: Phase::Head,
        }
    }

    /// Whether the lifecycle head was dropped and the continuation's own text is flowing.
    pub fn spliced(&self) -> bool {
        self.phase != Phase::Head
    }

    /// The bytes to send the client for the continuation's next `chunk`.
    ///
    /// # Errors
    /// [`SpliceError`] when the continuation does not continue the text block (the relay then
    /// ends the stream with one error event).
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Bytes, SpliceError> {
        let Some(framer) = self.framer.as_mut() else {
            return Ok(Bytes::copy_from_slice(chunk));
        };
        framer
            .push(chunk)
            .map_err(|e| SpliceError::Frame(e.to_string()))?;
        let ready: Vec<Event> = framer.by_ref().collect();
        let mut out = BytesMut::new();
        for ev in ready {
            if self.phase == Phase::Pass {
                out.extend_from_slice(&ev.raw);
                continue;
            }
            let keep = self.event(&ev)?;
            out.extend_from_slice(&keep);
        }
        if self.phase == Phase::Pass
            && let Some(framer) = self.framer.take()
        {
            out.extend_from_slice(framer.pending());
        }
        Ok(out.freeze())
    }

    /// One event before the pass phase: what of it the client gets.
    fn event(&mut self, ev: &Event) -> Result<Bytes, SpliceError> {
        let name = ev.event.as_deref().unwrap_or("");
        let keepalive = ev.is_blank || ev.is_comment_only || name == "ping";
        match self.phase {
            Phase::Head if keepalive || name == "message_start" => Ok(Bytes::new()),
            Phase::Head if name == "content_block_start" => {
                check_text_start(&ev.data)?;
                self.phase = Phase::Strip;
                Ok(Bytes::new())
            }
            Phase::Head if name == "error" => {
                self.phase = Phase::Pass;
                Ok(ev.raw.clone())
            }
            Phase::Head => Err(SpliceError::Unexpected(format!(
                "`{name}` before the text block start"
            ))),
            // Pings before the continuation's first text are dropped too.
            Phase::Strip if keepalive => Ok(Bytes::new()),
            Phase::Strip if name == "content_block_delta" && !self.strip.is_empty() => {
                Ok(self.strip_delta(ev))
            }
            _ => {
                self.phase = Phase::Pass;
                Ok(ev.raw.clone())
            }
        }
    }

    /// Takes what is left of the trimmed whitespace off a text delta's front.
    fn strip_delta(&mut self, ev: &Event) -> Bytes {
        let v: Option<Value> = serde_json::from_str(&ev.data).ok();
        let text = v
            .as_ref()
            .and_then(|v| v.get("delta"))
            .filter(|d| d.get("type").and_then(Value::as_str) == Some("text_delta"))
            .and_then(|d| d.get("text"))
            .and_then(Value::as_str);
        let (Some(v), Some(text)) = (v.as_ref(), text) else {
            self.phase = Phase::Pass;
            return ev.raw.clone();
        };
        let n = common_prefix(&self.strip, text);
        let rest = &text[n..];
        self.strip.drain(..n);
        if !rest.is_empty() || self.strip.is_empty() {
            self.phase = Phase::Pass;
        }
        if n == 0 {
            return ev.raw.clone();
        }
        if rest.is_empty() {
            return Bytes::new();
        }
        rewrite_text(ev, v, &text[..n], rest)
    }
}

/// The continuation's block start must be a plain, empty text block at index 0.
fn check_text_start(data: &str) -> Result<(), SpliceError> {
    let v: Value = serde_json::from_str(data)
        .map_err(|_| SpliceError::Unexpected("an unreadable content_block_start".into()))?;
    let block = v.get("content_block");
    let kind = block.and_then(|b| b.get("type")).and_then(Value::as_str);
    let text = block.and_then(|b| b.get("text")).and_then(Value::as_str);
    let index = v.get("index").and_then(Value::as_u64);
    if index == Some(0) && kind == Some("text") && text.is_none_or(str::is_empty) {
        return Ok(());
    }
    Err(SpliceError::Unexpected(format!(
        "a `{}` block at index {}",
        kind.unwrap_or("unknown"),
        index.map_or("?".into(), |i| i.to_string())
    )))
}

/// Bytes of the longest common prefix of `a` and `b`, on a character boundary.
fn common_prefix(a: &str, b: &str) -> usize {
    a.char_indices()
        .zip(b.chars())
        .take_while(|((_, x), y)| x == y)
        .map(|((i, x), _)| i + x.len_utf8())
        .last()
        .unwrap_or(0)
}

/// The delta `ev` with its text `removed + rest` replaced by `rest`: in place in the raw
/// bytes when the encoded text is found there (byte-exact otherwise), else re-serialised.
fn rewrite_text(ev: &Event, v: &Value, removed: &str, rest: &str) -> Bytes {
    let enc = |s: &str| {
        let q = serde_json::to_string(s).unwrap_or_default();
        q[1..q.len().saturating_sub(1).max(1)].to_string()
    };
    let needle = format!("\"text\":\"{}", enc(removed));
    if let Ok(raw) = std::str::from_utf8(&ev.raw)
        && let Some(at) = raw.find(&needle)
    {
        let cut = at + "\"text\":\"".len();
        let mut s = String::with_capacity(raw.len());
        s.push_str(&raw[..cut]);
        s.push_str(&raw[cut + needle.len() - "\"text\":\"".len()..]);
        return Bytes::from(s);
    }
    let mut v = v.clone();
    if let Some(d) = v.get_mut("delta") {
        d["text"] = Value::String(rest.to_string());
    }
    Bytes::from(format!("event: content_block_delta\ndata: {v}\n\n"))
}

#[cfg(test)]
mod tests;
