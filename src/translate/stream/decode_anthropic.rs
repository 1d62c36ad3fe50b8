//! Anthropic SSE events → [`Ev`]s (nearly one to one). Blocks of unknown types (server tool
//! blocks, …) are skipped with their deltas; unknown events and `ping` are ignored.

use std::collections::HashSet;

use serde_json::Value;

use super::{Block, Delta, Ev};
use crate::translate::response::stop::Usage;
use crate::translate::util::{s, u};

/// Decoder state: skipped block indices and whether a stop reason was seen.
#[derive(Debug, Default)]
pub(super) struct AnthropicDecoder {
    skipped: HashSet<u64>,
    open: HashSet<u64>,
    stopped: bool,
}

impl AnthropicDecoder {
    /// Decodes one event (`name` is the `event:` field; the data's `type` wins).
    pub(super) fn event(&mut self, name: Option<&str>, data: &str, out: &mut Vec<Ev>) {
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(_) => {
                out.push(Ev::Error {
                    etype: "api_error".into(),
                    message: "upstream sent an event whose data is not JSON".into(),
                });
                return;
            }
        };
        let index = u(&v, "index").unwrap_or(0);
        match s(&v, "type").or(name).unwrap_or_default() {
            "message_start" => {
                let m = v.get("message").unwrap_or(&Value::Null);
                out.push(Ev::Start {
                    id: s(m, "id").unwrap_or_default().into(),
                    model: s(m, "model").unwrap_or_default().into(),
                    usage: m
                        .get("usage")
                        .map(Usage::from_anthropic)
                        .unwrap_or_default(),
                });
            }
            "content_block_start" => self.block_start(index, &v, out),
            "content_block_delta" if !self.skipped.contains(&index) => {
                if let Some(delta) = delta(v.get("delta").unwrap_or(&Value::Null)) {
                    out.push(Ev::Delta {
                        index: idx(index),
                        delta,
                    });
                }
            }
            "content_block_stop" if self.open.remove(&index) => {
                out.push(Ev::BlockStop { index: idx(index) })
            }
            "message_delta" => {
                let d = v.get("delta").unwrap_or(&Value::Null);
                if let Some(reason) = s(d, "stop_reason") {
                    self.stopped = true;
                    out.push(Ev::MessageDelta {
                        stop_reason: reason.into(),
                        stop_sequence: s(d, "stop_sequence").map(str::to_string),
                        usage: v
                            .get("usage")
                            .map(Usage::from_anthropic)
                            .unwrap_or_default(),
                    });
                }
            }
            "message_stop" => out.push(Ev::Stop),
            "error" => {
                let e = v.get("error").unwrap_or(&Value::Null);
                out.push(Ev::Error {
                    etype: s(e, "type").unwrap_or("api_error").into(),
                    message: s(e, "message").unwrap_or("upstream error").into(),
                });
            }
            _ => {}
        }
    }

    fn block_start(&mut self, index: u64, v: &Value, out: &mut Vec<Ev>) {
        let b = v.get("content_block").unwrap_or(&Value::Null);
        let block = match s(b, "type") {
            Some("text") => Block::Text,
            Some("thinking" | "redacted_thinking") => Block::Thinking,
            Some("tool_use") => Block::ToolUse {
                id: s(b, "id").unwrap_or_default().into(),
                name: s(b, "name").unwrap_or_default().into(),
            },
            _ => {
                self.skipped.insert(index);
                return;
            }
        };
        self.open.insert(index);
        out.push(Ev::BlockStart {
            index: idx(index),
            block,
        });
        if let Some(t) = s(b, "text").filter(|t| !t.is_empty()) {
            out.push(Ev::Delta {
                index: idx(index),
                delta: Delta::Text(t.into()),
            });
        }
    }

    /// End of input: a stream that reported its stop reason and closed its blocks is
    /// complete even without `message_stop` (as Anthropic clients count it).
    pub(super) fn finish(&mut self, out: &mut Vec<Ev>) {
        if self.stopped && self.open.is_empty() {
            out.push(Ev::Stop);
        }
    }
}

fn idx(i: u64) -> usize {
    usize::try_from(i).unwrap_or(usize::MAX)
}

fn delta(d: &Value) -> Option<Delta> {
    match s(d, "type")? {
        "text_delta" => Some(Delta::Text(s(d, "text")?.into())),
        "thinking_delta" => Some(Delta::Thinking(s(d, "thinking")?.into())),
        "signature_delta" => Some(Delta::Signature(s(d, "signature")?.into())),
        "input_json_delta" => Some(Delta::InputJson(s(d, "partial_json")?.into())),
        _ => None,
    }
}
