//! Token counts from upstream replies, for the request log: [`Usage`] reads the `usage`
//! object of a JSON body or of SSE events without parsing the rest of the document — it
//! finds the last `"usage"` key and parses only the value after it.
//!
//! Understood shapes: Anthropic `usage.input_tokens` / `output_tokens` (a JSON reply, the
//! stream's `message_start` and its cumulative `message_delta`), OpenAI chat
//! `usage.prompt_tokens` / `completion_tokens` (a JSON reply, the stream's final chunk) and
//! Responses `usage.input_tokens` / `output_tokens` (`response.completed`). A later count
//! replaces an earlier one (stream counts are cumulative). Pure: no I/O, no clock.

use std::sync::LazyLock;

use memchr::memmem::FinderRev;
use serde::Deserialize;

/// Tokens in (prompt) and out (completion) seen so far; `None` while the upstream said none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens (`input_tokens` / `prompt_tokens`).
    pub input: Option<u64>,
    /// Completion tokens (`output_tokens` / `completion_tokens`).
    pub output: Option<u64>,
}

#[derive(Deserialize)]
struct RawUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
}

/// The key searched for, quotes included.
const KEY: &[u8] = b"\"usage\"";

/// A backward searcher for [`KEY`], built once (every reply and usage-bearing event is
/// scanned).
static LAST_KEY: LazyLock<FinderRev<'static>> = LazyLock::new(|| FinderRev::new(KEY));

impl Usage {
    /// The usage of a whole JSON reply body (none when it has no `usage` object).
    pub fn of_json(body: &[u8]) -> Self {
        let mut u = Self::default();
        u.observe(body);
        u
    }

    /// Takes the counts of one more JSON document (a reply body or one SSE event's data):
    /// the last `"usage"` object in it, when there is one, replaces the fields it carries.
    pub fn observe(&mut self, json: &[u8]) {
        let Some(raw) = last_usage(json) else {
            return;
        };
        if let Some(n) = raw.input_tokens.or(raw.prompt_tokens) {
            self.input = Some(n);
        }
        if let Some(n) = raw.output_tokens.or(raw.completion_tokens) {
            self.output = Some(n);
        }
    }

    /// True when either count is known.
    pub fn is_known(&self) -> bool {
        self.input.is_some() || self.output.is_some()
    }
}

/// The object after the last `"usage":` key in `json`, if it parses as a usage object.
fn last_usage(json: &[u8]) -> Option<RawUsage> {
    let at = LAST_KEY.rfind(json)?;
    let rest = json.get(at + KEY.len()..)?;
    let colon = rest.iter().position(|b| !b.is_ascii_whitespace())?;
    if rest.get(colon) != Some(&b':') {
        return None;
    }
    let value = rest.get(colon + 1..)?;
    let mut de = serde_json::Deserializer::from_slice(value).into_iter::<RawUsage>();
    de.next()?.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_json_and_stream_events() {
        let body = br#"{"id":"m","content":[{"type":"text","text":"the word \"usage\" in text"}],"usage":{"input_tokens":12,"output_tokens":34,"cache_read_input_tokens":0}}"#;
        assert_eq!(
            Usage::of_json(body),
            Usage {
                input: Some(12),
                output: Some(34)
            }
        );
        let mut u = Usage::default();
        u.observe(br#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":25,"output_tokens":1}}}"#);
        u.observe(br#"{"type":"content_block_delta","delta":{"text":"hi"}}"#);
        u.observe(br#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}"#);
        assert_eq!(
            u,
            Usage {
                input: Some(25),
                output: Some(15)
            },
            "message_delta's cumulative count wins; the input from message_start stays"
        );
    }

    #[test]
    fn openai_chat_and_responses() {
        let chat = br#"{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}"#;
        assert_eq!(
            Usage::of_json(chat),
            Usage {
                input: Some(7),
                output: Some(3)
            }
        );
        let mut u = Usage::default();
        u.observe(br#"{"choices":[{"delta":{"content":"x"}}],"usage":null}"#);
        assert!(!u.is_known(), "a null usage says nothing");
        u.observe(br#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4}}"#);
        assert_eq!((u.input, u.output), (Some(9), Some(4)));
        let completed = br#"{"type":"response.completed","response":{"id":"r","output":[],"usage":{"input_tokens":5,"output_tokens":6,"output_tokens_details":{"reasoning_tokens":2}}}}"#;
        assert_eq!(Usage::of_json(completed).output, Some(6));
    }

    #[test]
    fn bodies_without_usage_or_broken_ones_give_nothing() {
        assert!(!Usage::of_json(b"").is_known());
        assert!(!Usage::of_json(br#"{"error":{"message":"no"}}"#).is_known());
        assert!(!Usage::of_json(br#"{"usage":{"input_tokens":-1}}"#).is_known());
        assert!(!Usage::of_json(br#"{"usage": "#).is_known());
        assert!(!Usage::of_json(br#"{"text":"usage"}"#).is_known());
    }
}
