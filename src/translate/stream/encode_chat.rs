//! [`Ev`]s → Chat completion chunks (`data: <chunk>` … `data: [DONE]`).

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{Block, Delta, Ev, merge_usage, sse};
use crate::translate::ResponseContext;
use crate::translate::response::stop::{self, Usage};

/// Encoder state: chunk identity, tool-call indices by block, usage, finish sent.
pub(super) struct ChatEncoder {
    ctx: ResponseContext,
    id: String,
    model: String,
    tools: HashMap<usize, usize>,
    usage: Usage,
    finished: bool,
}

impl ChatEncoder {
    pub(super) fn new(ctx: ResponseContext) -> Self {
        let model = ctx.client_model.clone();
        Self {
            ctx,
            id: "chatcmpl-translated".into(),
            model,
            tools: HashMap::new(),
            usage: Usage::default(),
            finished: false,
        }
    }

    fn chunk(&self, out: &mut Vec<u8>, delta: Value, finish: Option<&str>) {
        let c = json!({"id": self.id, "object": "chat.completion.chunk", "created": self.ctx.created,
                       "model": self.model, "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]});
        sse(out, None, &c);
    }

    /// Appends what `ev` becomes on the Chat stream to `out` (nothing for some events).
    pub(super) fn emit(&mut self, ev: Ev, out: &mut Vec<u8>) {
        match ev {
            Ev::Start { id, model, usage } => self.start(id, model, usage, out),
            Ev::BlockStart {
                index,
                block: Block::ToolUse { id, name },
            } => {
                let n = self.tools.len();
                self.tools.insert(index, n);
                let tc = json!([{"index": n, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]);
                self.chunk(out, json!({"tool_calls": tc}), None);
            }
            Ev::Delta {
                delta: Delta::Text(t),
                ..
            } => self.chunk(out, json!({"content": t}), None),
            Ev::Delta {
                delta: Delta::Thinking(t),
                ..
            } if self.ctx.thinking => {
                self.chunk(out, json!({"reasoning_content": t}), None);
            }
            Ev::Delta {
                index,
                delta: Delta::InputJson(t),
            } if !t.is_empty() => {
                if let Some(&n) = self.tools.get(&index) {
                    self.chunk(
                        out,
                        json!({"tool_calls": [{"index": n, "function": {"arguments": t}}]}),
                        None,
                    );
                }
            }
            Ev::MessageDelta {
                stop_reason, usage, ..
            } => {
                merge_usage(&mut self.usage, usage);
                self.finished = true;
                self.chunk(
                    out,
                    json!({}),
                    Some(stop::anthropic_to_chat(Some(&stop_reason))),
                );
            }
            Ev::Stop => self.stop(out),
            Ev::Error { etype, message } => error(&etype, &message, out),
            _ => {}
        }
    }

    /// The first chunk: the assistant role with empty content. Keeps the upstream's id (when
    /// it sent one), its model (when the client's is unknown) and the usage known so far.
    fn start(&mut self, id: String, model: String, usage: Usage, out: &mut Vec<u8>) {
        if !id.is_empty() {
            self.id = id;
        }
        if self.model.is_empty() {
            self.model = model;
        }
        self.usage = usage;
        self.chunk(out, json!({"role": "assistant", "content": ""}), None);
    }

    /// The end: a `stop` finish when none was sent, the usage chunk when the client asked for
    /// it, then `[DONE]`.
    fn stop(&self, out: &mut Vec<u8>) {
        if !self.finished {
            self.chunk(out, json!({}), Some("stop"));
        }
        if self.ctx.include_usage {
            let c = json!({"id": self.id, "object": "chat.completion.chunk", "created": self.ctx.created,
                           "model": self.model, "choices": [], "usage": self.usage.chat()});
            sse(out, None, &c);
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }
}

/// A stream error as a Chat error event (the Anthropic error type mapped to an OpenAI type and
/// code), then `[DONE]`.
fn error(etype: &str, message: &str, out: &mut Vec<u8>) {
    let code = match etype {
        "overloaded_error" => "server_is_overloaded",
        "rate_limit_error" => "rate_limit_exceeded",
        "api_error" => "server_error",
        other => other,
    };
    let t = if etype == "invalid_request_error" {
        "invalid_request_error"
    } else {
        "server_error"
    };
    sse(
        out,
        None,
        &json!({"error": {"message": message, "type": t, "param": null, "code": code}}),
    );
    out.extend_from_slice(b"data: [DONE]\n\n");
}
