//! [`Ev`]s → Responses SSE (`event: response.*` with `sequence_number`), ending in
//! `response.completed` (`response.incomplete` for a length stop, `response.failed` for an
//! error). Item ids match the non-streaming translation of the same message.

use serde_json::{Value, json};

use super::{Block, Delta, Ev, merge_usage, sse};
use crate::translate::ResponseContext;
use crate::translate::response::anthropic_to_responses::{
    base_id, call_item, custom_input, custom_item, is_custom, message_item, output_text,
    reasoning_item, response_object,
};
use crate::translate::response::stop::Usage;

/// The item being streamed.
struct Item {
    block: usize,
    output_index: usize,
    kind: Block,
    /// Text, reasoning text or arguments so far.
    buf: String,
}

/// Encoder state.
pub(super) struct ResponsesEncoder {
    ctx: ResponseContext,
    seq: u64,
    base: String,
    model: String,
    open: Option<Item>,
    output: Vec<Value>,
    stop: Option<String>,
    usage: Usage,
}

impl ResponsesEncoder {
    pub(super) fn new(ctx: ResponseContext) -> Self {
        Self {
            ctx,
            seq: 0,
            base: "translated".into(),
            model: String::new(),
            open: None,
            output: Vec::new(),
            stop: None,
            usage: Usage::default(),
        }
    }

    fn send(&mut self, out: &mut Vec<u8>, kind: &str, mut data: Value) {
        data["type"] = json!(kind);
        data["sequence_number"] = json!(self.seq);
        self.seq += 1;
        sse(out, Some(kind), &data);
    }

    fn response(&self, stop: Option<&str>, usage: Option<Usage>) -> Value {
        response_object(
            &self.base,
            &self.ctx,
            Some(&self.model),
            stop,
            self.output.clone(),
            usage,
        )
    }

    pub(super) fn emit(&mut self, ev: Ev, out: &mut Vec<u8>) {
        match ev {
            Ev::Start { id, model, usage } => {
                self.base = base_id(&id);
                self.model = model;
                self.usage = usage;
                let r = self.response(None, None);
                self.send(out, "response.created", json!({"response": r}));
                self.send(out, "response.in_progress", json!({"response": r}));
            }
            Ev::BlockStart { index, block } => self.open_item(index, block, out),
            Ev::Delta { index, delta } => self.delta(index, delta, out),
            Ev::BlockStop { index } => {
                if self.open.as_ref().is_some_and(|i| i.block == index) {
                    self.close_item(out);
                }
            }
            Ev::MessageDelta {
                stop_reason, usage, ..
            } => {
                merge_usage(&mut self.usage, usage);
                self.stop = Some(stop_reason);
            }
            Ev::Stop => {
                self.close_item(out);
                let stop = self.stop.clone().unwrap_or_else(|| "end_turn".into());
                let r = self.response(Some(&stop), Some(self.usage));
                let kind = if r["status"] == "incomplete" {
                    "response.incomplete"
                } else {
                    "response.completed"
                };
                self.send(out, kind, json!({"response": r}));
            }
            Ev::Error { etype, message } => {
                let mut r = self.response(Some("end_turn"), Some(self.usage));
                r["status"] = json!("failed");
                // `ResponseErrorCode` has no overloaded code: a server error.
                let code = match etype.as_str() {
                    "rate_limit_error" => "rate_limit_exceeded",
                    "invalid_request_error" => "invalid_prompt",
                    _ => "server_error",
                };
                r["error"] = json!({"code": code, "message": message});
                self.send(out, "response.failed", json!({"response": r}));
            }
        }
    }

    fn item_id(&self, item: &Item) -> String {
        let p = match &item.kind {
            Block::Text => "msg",
            Block::Thinking => "rs",
            Block::ToolUse { name, .. } if is_custom(&self.ctx, name) => "ctc",
            Block::ToolUse { .. } => "fc",
        };
        format!("{p}_{}_{}", self.base, item.block)
    }

    fn open_item(&mut self, block: usize, kind: Block, out: &mut Vec<u8>) {
        if kind == Block::Thinking && !self.ctx.thinking {
            return;
        }
        self.close_item(out);
        let item = Item {
            block,
            output_index: self.output.len(),
            kind,
            buf: String::new(),
        };
        let id = self.item_id(&item);
        let oi = item.output_index;
        match &item.kind {
            Block::Text => {
                let it = json!({"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []});
                self.send(
                    out,
                    "response.output_item.added",
                    json!({"output_index": oi, "item": it}),
                );
                self.send(
                    out,
                    "response.content_part.added",
                    json!({"item_id": id, "output_index": oi, "content_index": 0,
                    "part": output_text("")}),
                );
            }
            Block::Thinking => {
                let it = json!({"id": id, "type": "reasoning", "summary": []});
                self.send(
                    out,
                    "response.output_item.added",
                    json!({"output_index": oi, "item": it}),
                );
                self.send(
                    out,
                    "response.reasoning_summary_part.added",
                    json!({"item_id": id, "output_index": oi,
                    "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
                );
            }
            Block::ToolUse { id: call_id, name } if is_custom(&self.ctx, name) => {
                let it = json!({"id": id, "type": "custom_tool_call", "status": "in_progress", "call_id": call_id, "name": name, "input": ""});
                self.send(
                    out,
                    "response.output_item.added",
                    json!({"output_index": oi, "item": it}),
                );
            }
            Block::ToolUse { id: call_id, name } => {
                let it = json!({"id": id, "type": "function_call", "status": "in_progress", "call_id": call_id, "name": name, "arguments": ""});
                self.send(
                    out,
                    "response.output_item.added",
                    json!({"output_index": oi, "item": it}),
                );
            }
        }
        self.open = Some(item);
    }

    fn delta(&mut self, block: usize, delta: Delta, out: &mut Vec<u8>) {
        let Some(item) = self.open.as_mut().filter(|i| i.block == block) else {
            return;
        };
        let custom =
            matches!(&item.kind, Block::ToolUse { name, .. } if is_custom(&self.ctx, name));
        let (kind, text) = match (&item.kind, delta) {
            // A freeform call's text is inside its JSON arguments: kept whole, sent at close.
            (Block::ToolUse { .. }, Delta::InputJson(t)) if custom => {
                item.buf.push_str(&t);
                return;
            }
            (Block::Text, Delta::Text(t)) => ("response.output_text.delta", t),
            (Block::Thinking, Delta::Thinking(t)) => ("response.reasoning_summary_text.delta", t),
            (Block::ToolUse { .. }, Delta::InputJson(t)) if !t.is_empty() => {
                ("response.function_call_arguments.delta", t)
            }
            _ => return,
        };
        item.buf.push_str(&text);
        let oi = item.output_index;
        let id = self
            .open
            .as_ref()
            .map(|i| self.item_id(i))
            .unwrap_or_default();
        let data = match kind {
            "response.output_text.delta" => {
                json!({"item_id": id, "output_index": oi, "content_index": 0, "delta": text, "logprobs": []})
            }
            "response.reasoning_summary_text.delta" => {
                json!({"item_id": id, "output_index": oi, "summary_index": 0, "delta": text})
            }
            _ => json!({"item_id": id, "output_index": oi, "delta": text}),
        };
        self.send(out, kind, data);
    }

    fn close_item(&mut self, out: &mut Vec<u8>) {
        let Some(item) = self.open.take() else { return };
        let id = self.item_id(&item);
        let oi = item.output_index;
        let done = match &item.kind {
            Block::Text => {
                self.send(out, "response.output_text.done", json!({"item_id": id, "output_index": oi, "content_index": 0, "text": item.buf, "logprobs": []}));
                self.send(
                    out,
                    "response.content_part.done",
                    json!({"item_id": id, "output_index": oi, "content_index": 0,
                    "part": output_text(&item.buf)}),
                );
                message_item(&self.base, item.block, &item.buf)
            }
            Block::Thinking => {
                self.send(out, "response.reasoning_summary_text.done", json!({"item_id": id, "output_index": oi, "summary_index": 0, "text": item.buf}));
                self.send(
                    out,
                    "response.reasoning_summary_part.done",
                    json!({"item_id": id, "output_index": oi, "summary_index": 0,
                    "part": {"type": "summary_text", "text": item.buf}}),
                );
                reasoning_item(&self.base, item.block, &item.buf)
            }
            Block::ToolUse { id: call_id, name } if is_custom(&self.ctx, name) => {
                let input = custom_input(&item.buf);
                self.send(
                    out,
                    "response.custom_tool_call_input.delta",
                    json!({"item_id": id, "output_index": oi, "delta": input}),
                );
                self.send(
                    out,
                    "response.custom_tool_call_input.done",
                    json!({"item_id": id, "output_index": oi, "input": input}),
                );
                custom_item(&self.base, item.block, call_id, name, &input)
            }
            Block::ToolUse { id: call_id, name } => {
                let args = if item.buf.is_empty() { "{}" } else { &item.buf };
                self.send(
                    out,
                    "response.function_call_arguments.done",
                    json!({"item_id": id, "output_index": oi, "name": name, "arguments": args}),
                );
                call_item(&self.base, item.block, call_id, name, args)
            }
        };
        self.send(
            out,
            "response.output_item.done",
            json!({"output_index": oi, "item": done}),
        );
        self.output.push(done);
    }
}
