//! [`Ev`]s → Anthropic SSE (`event: <type>` + `data: <json>`).

use serde_json::json;

use super::{Block, Delta, Ev, merge_usage, sse};
use crate::translate::ResponseContext;
use crate::translate::response::chat_to_anthropic::message_id;
use crate::translate::response::stop::Usage;

/// Encoder state: the start's usage (message_delta reports the merged total).
pub(super) struct AnthropicEncoder {
    ctx: ResponseContext,
    usage: Usage,
}

impl AnthropicEncoder {
    pub(super) fn new(ctx: ResponseContext) -> Self {
        Self {
            ctx,
            usage: Usage::default(),
        }
    }

    pub(super) fn emit(&mut self, ev: Ev, out: &mut Vec<u8>) {
        let (name, data) = match ev {
            Ev::Start { id, model, usage } => {
                self.usage = usage;
                let model = if self.ctx.client_model.is_empty() {
                    model
                } else {
                    self.ctx.client_model.clone()
                };
                let id = message_id(&id);
                let mut u = usage.anthropic();
                u["output_tokens"] = json!(0);
                (
                    "message_start",
                    json!({"type": "message_start", "message": {
                    "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
                    "stop_reason": null, "stop_sequence": null, "usage": u}}),
                )
            }
            Ev::BlockStart { index, block } => {
                let cb = match block {
                    Block::Text => json!({"type": "text", "text": ""}),
                    Block::Thinking => json!({"type": "thinking", "thinking": "", "signature": ""}),
                    Block::ToolUse { id, name } => {
                        json!({"type": "tool_use", "id": id, "name": name, "input": {}})
                    }
                };
                (
                    "content_block_start",
                    json!({"type": "content_block_start", "index": index, "content_block": cb}),
                )
            }
            Ev::Delta { index, delta } => {
                let d = match delta {
                    Delta::Text(t) => json!({"type": "text_delta", "text": t}),
                    Delta::Thinking(t) => json!({"type": "thinking_delta", "thinking": t}),
                    Delta::Signature(t) => json!({"type": "signature_delta", "signature": t}),
                    Delta::InputJson(t) => json!({"type": "input_json_delta", "partial_json": t}),
                };
                (
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index, "delta": d}),
                )
            }
            Ev::BlockStop { index } => (
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ),
            Ev::MessageDelta {
                stop_reason,
                stop_sequence,
                usage,
            } => {
                merge_usage(&mut self.usage, usage);
                (
                    "message_delta",
                    json!({"type": "message_delta",
                    "delta": {"stop_reason": stop_reason, "stop_sequence": stop_sequence},
                    "usage": self.usage.anthropic()}),
                )
            }
            Ev::Stop => ("message_stop", json!({"type": "message_stop"})),
            Ev::Error { etype, message } => (
                "error",
                json!({"type": "error", "error": {"type": etype, "message": message}}),
            ),
        };
        sse(out, Some(name), &data);
    }
}
