//! Stop reasons and usage across dialects (shared by responses and streams).

use serde_json::{Value, json};

use crate::translate::util::u;

/// Chat `finish_reason` → Anthropic `stop_reason`.
pub fn chat_to_anthropic(finish: Option<&str>, has_tool_calls: bool) -> &'static str {
    match finish {
        Some("length") => "max_tokens",
        Some("tool_calls" | "function_call") => "tool_use",
        Some("content_filter") => "refusal",
        _ if has_tool_calls => "tool_use",
        _ => "end_turn",
    }
}

/// Anthropic `stop_reason` → Chat `finish_reason`.
pub fn anthropic_to_chat(stop: Option<&str>) -> &'static str {
    match stop {
        Some("max_tokens") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        _ => "stop",
    }
}

/// Token counts in Anthropic terms: `input` excludes cached tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Uncached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation: u64,
}

impl Usage {
    /// From an Anthropic `usage` object (missing fields are 0).
    pub fn from_anthropic(v: &Value) -> Self {
        Self {
            input: u(v, "input_tokens").unwrap_or(0),
            output: u(v, "output_tokens").unwrap_or(0),
            cache_read: u(v, "cache_read_input_tokens").unwrap_or(0),
            cache_creation: u(v, "cache_creation_input_tokens").unwrap_or(0),
        }
    }

    /// From a chat `usage` object: input = prompt − cached.
    pub fn from_chat(v: &Value) -> Self {
        let cached = v
            .get("prompt_tokens_details")
            .and_then(|d| u(d, "cached_tokens"))
            .unwrap_or(0);
        Self {
            input: u(v, "prompt_tokens").unwrap_or(0).saturating_sub(cached),
            output: u(v, "completion_tokens").unwrap_or(0),
            cache_read: cached,
            cache_creation: 0,
        }
    }

    fn prompt(&self) -> u64 {
        self.input
            .saturating_add(self.cache_read)
            .saturating_add(self.cache_creation)
    }

    /// The Anthropic `usage` object.
    pub fn anthropic(&self) -> Value {
        json!({"input_tokens": self.input, "output_tokens": self.output,
               "cache_read_input_tokens": self.cache_read, "cache_creation_input_tokens": self.cache_creation})
    }

    /// The chat `usage` object (`prompt_tokens` includes cached tokens).
    pub fn chat(&self) -> Value {
        json!({"prompt_tokens": self.prompt(), "completion_tokens": self.output,
               "total_tokens": self.prompt().saturating_add(self.output),
               "prompt_tokens_details": {"cached_tokens": self.cache_read}})
    }

    /// The Responses `usage` object.
    pub fn responses(&self) -> Value {
        json!({"input_tokens": self.prompt(), "input_tokens_details": {"cached_tokens": self.cache_read},
               "output_tokens": self.output, "output_tokens_details": {"reasoning_tokens": 0},
               "total_tokens": self.prompt().saturating_add(self.output)})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_reasons_map_both_ways() {
        for (chat, anth) in [
            ("stop", "end_turn"),
            ("length", "max_tokens"),
            ("tool_calls", "tool_use"),
            ("content_filter", "refusal"),
        ] {
            assert_eq!(chat_to_anthropic(Some(chat), false), anth);
            assert_eq!(anthropic_to_chat(Some(anth)), chat);
        }
        assert_eq!(anthropic_to_chat(Some("stop_sequence")), "stop");
        assert_eq!(chat_to_anthropic(Some("stop"), true), "tool_use");
        assert_eq!(chat_to_anthropic(None, false), "end_turn");
    }

    #[test]
    fn cached_tokens_move_between_prompt_and_cache_read() {
        let u = Usage::from_chat(
            &json!({"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}}),
        );
        assert_eq!(
            u,
            Usage {
                input: 40,
                output: 7,
                cache_read: 60,
                cache_creation: 0
            }
        );
        assert_eq!(u.chat()["prompt_tokens"], 100);
        assert_eq!(u.responses()["input_tokens_details"]["cached_tokens"], 60);
        let bad = Usage::from_chat(
            &json!({"prompt_tokens": 1, "prompt_tokens_details": {"cached_tokens": 5}}),
        );
        assert_eq!(bad.input, 0, "saturates, never underflows");
    }
}
