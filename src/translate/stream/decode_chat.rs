//! Chat completion chunks → [`Ev`]s.
//!
//! Chat streams have no blocks, so this decoder opens and closes them: reasoning →
//! thinking block, content → text block, each tool call (by its `index`) → its own
//! `tool_use` block, at most one open at a time and in order of first appearance.
//!
//! Interleaving: a tool call that starts while another is still streaming is buffered
//! (`Pending`) and opened as soon as the streaming one's arguments form a complete JSON
//! object (they cannot grow after that), or at the finish. So the common sequential stream is
//! relayed without delay, and an interleaved one still gives every call its exact arguments.

use std::collections::HashMap;

use serde_json::Value;

use super::{Block, Delta, Ev};
use crate::translate::ResponseContext;
use crate::translate::response::chat_to_anthropic::stop_of;
use crate::translate::response::stop::Usage;
use crate::translate::util::{arr, s, u};

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum State {
    Pending,
    Live(usize),
    Done,
}

#[derive(Debug)]
struct Tool {
    id: String,
    name: String,
    args: String,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    Text(usize),
    Thinking(usize),
    Tool(usize),
}

/// Decoder state.
#[derive(Debug)]
pub(super) struct ChatDecoder {
    ctx: ResponseContext,
    started: bool,
    next_block: usize,
    open: Option<Open>,
    tools: Vec<Tool>,
    by_index: HashMap<u64, usize>,
    finish: Option<(String, Option<String>)>,
    usage: Usage,
}

impl ChatDecoder {
    pub(super) fn new(ctx: ResponseContext) -> Self {
        Self {
            ctx,
            started: false,
            next_block: 0,
            open: None,
            tools: Vec::new(),
            by_index: HashMap::new(),
            finish: None,
            usage: Usage::default(),
        }
    }

    /// Decodes one `data:` payload.
    pub(super) fn event(&mut self, data: &str, out: &mut Vec<Ev>) {
        if data.trim() == "[DONE]" {
            self.end(out);
            return;
        }
        let v: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(_) => {
                return out.push(error("api_error", "upstream sent a chunk that is not JSON"));
            }
        };
        if let Some(e) = v.get("error").filter(|e| !e.is_null()) {
            let code = s(e, "code").or_else(|| s(e, "type")).unwrap_or_default();
            let message = s(e, "message").or(e.as_str()).unwrap_or("upstream error");
            return out.push(error(anthropic_type(code), message));
        }
        let is_chunk = v.get("choices").is_some() || v.get("usage").is_some_and(Value::is_object);
        if !is_chunk {
            return; // not a chunk (an unknown event): ignored
        }
        if !self.started {
            self.started = true;
            out.push(Ev::Start {
                id: s(&v, "id").unwrap_or_default().into(),
                model: s(&v, "model").unwrap_or_default().into(),
                usage: Usage::default(),
            });
        }
        if let Some(usage) = v.get("usage").filter(|x| x.is_object()) {
            self.usage = Usage::from_chat(usage);
        }
        if self.finish.is_none() {
            if let Some(choice) = arr(&v, "choices").first() {
                self.choice(choice, out);
            }
        }
        if self.finish.is_some() && v.get("usage").is_some_and(Value::is_object) {
            self.end(out);
        }
    }

    fn choice(&mut self, choice: &Value, out: &mut Vec<Ev>) {
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if self.ctx.thinking {
            if let Some(t) = s(delta, "reasoning_content")
                .or_else(|| s(delta, "reasoning"))
                .filter(|t| !t.is_empty())
            {
                let i = self.ensure_open(Block::Thinking, out);
                out.push(Ev::Delta {
                    index: i,
                    delta: Delta::Thinking(t.into()),
                });
            }
        }
        if let Some(t) = s(delta, "content")
            .or_else(|| s(delta, "refusal"))
            .filter(|t| !t.is_empty())
        {
            let i = self.ensure_open(Block::Text, out);
            out.push(Ev::Delta {
                index: i,
                delta: Delta::Text(t.into()),
            });
        }
        for (pos, tc) in arr(delta, "tool_calls").iter().enumerate() {
            if let Err(e) = self.tool_fragment(pos, tc, out) {
                return out.push(e);
            }
        }
        self.promote(out);
        if choice.get("finish_reason").is_some_and(|f| !f.is_null()) {
            let (reason, seq) = stop_of(choice, !self.tools.is_empty(), &self.ctx);
            self.finish = Some((reason.into(), seq.as_str().map(str::to_string)));
            self.close_all(out);
        }
    }

    fn tool_fragment(&mut self, pos: usize, tc: &Value, out: &mut Vec<Ev>) -> Result<(), Ev> {
        let key = u(tc, "index").unwrap_or(pos as u64);
        let f = tc.get("function").unwrap_or(&Value::Null);
        let args = s(f, "arguments").unwrap_or_default();
        let t = match self.by_index.get(&key) {
            Some(&t) => t,
            None => {
                let t = self.tools.len();
                self.by_index.insert(key, t);
                let id = s(tc, "id").map_or_else(|| format!("call_{key}"), str::to_string);
                let name = s(f, "name").unwrap_or_default().to_string();
                self.tools.push(Tool {
                    id,
                    name,
                    args: String::new(),
                    state: State::Pending,
                });
                if !matches!(self.open, Some(Open::Tool(_))) {
                    self.go_live(t, out);
                }
                t
            }
        };
        if args.is_empty() {
            return Ok(());
        }
        let tool = &mut self.tools[t];
        match tool.state {
            State::Live(index) => {
                tool.args.push_str(args);
                out.push(Ev::Delta {
                    index,
                    delta: Delta::InputJson(args.into()),
                });
            }
            State::Pending => tool.args.push_str(args),
            State::Done if args.trim().is_empty() => {}
            State::Done => {
                return Err(error(
                    "api_error",
                    "upstream continued a tool call after it was closed",
                ));
            }
        }
        Ok(())
    }

    /// Opens tool `t` as a block, with its buffered arguments as the first delta.
    fn go_live(&mut self, t: usize, out: &mut Vec<Ev>) {
        self.close_open(out);
        let index = self.next_block;
        self.next_block += 1;
        let tool = &mut self.tools[t];
        tool.state = State::Live(index);
        out.push(Ev::BlockStart {
            index,
            block: Block::ToolUse {
                id: tool.id.clone(),
                name: tool.name.clone(),
            },
        });
        if !tool.args.is_empty() {
            out.push(Ev::Delta {
                index,
                delta: Delta::InputJson(tool.args.clone()),
            });
        }
        self.open = Some(Open::Tool(t));
    }

    /// While a pending call waits and the live call's arguments are complete, switch.
    fn promote(&mut self, out: &mut Vec<Ev>) {
        while let Some(Open::Tool(live)) = self.open {
            let Some(next) = self.tools.iter().position(|t| t.state == State::Pending) else {
                return;
            };
            let args = self.tools[live].args.trim_end();
            if !args.ends_with('}') || serde_json::from_str::<Value>(args).is_err() {
                return;
            }
            self.go_live(next, out);
        }
    }

    /// The open block if it is of `kind`, else closes the open one and opens a new one.
    fn ensure_open(&mut self, kind: Block, out: &mut Vec<Ev>) -> usize {
        match (self.open, &kind) {
            (Some(Open::Text(i)), Block::Text) | (Some(Open::Thinking(i)), Block::Thinking) => {
                return i;
            }
            _ => {}
        }
        self.close_open(out);
        let index = self.next_block;
        self.next_block += 1;
        self.open = Some(if kind == Block::Text {
            Open::Text(index)
        } else {
            Open::Thinking(index)
        });
        out.push(Ev::BlockStart { index, block: kind });
        index
    }

    fn close_open(&mut self, out: &mut Vec<Ev>) {
        match self.open.take() {
            Some(Open::Thinking(i)) => {
                out.push(Ev::Delta {
                    index: i,
                    delta: Delta::Signature(String::new()),
                });
                out.push(Ev::BlockStop { index: i });
            }
            Some(Open::Text(i)) => out.push(Ev::BlockStop { index: i }),
            Some(Open::Tool(t)) => {
                if let State::Live(i) = self.tools[t].state {
                    out.push(Ev::BlockStop { index: i });
                }
                self.tools[t].state = State::Done;
            }
            None => {}
        }
    }

    /// Closes the open block and writes every pending call whole, in order.
    fn close_all(&mut self, out: &mut Vec<Ev>) {
        while let Some(next) = self.tools.iter().position(|t| t.state == State::Pending) {
            self.go_live(next, out);
        }
        self.close_open(out);
    }

    /// The message's end: stop reason, usage, stop.
    fn end(&mut self, out: &mut Vec<Ev>) {
        if !self.started {
            out.push(Ev::Start {
                id: String::new(),
                model: String::new(),
                usage: Usage::default(),
            });
            self.started = true;
        }
        self.close_all(out);
        let (stop_reason, stop_sequence) = self.finish.take().unwrap_or_else(|| {
            (
                if self.tools.is_empty() {
                    "end_turn"
                } else {
                    "tool_use"
                }
                .into(),
                None,
            )
        });
        out.push(Ev::MessageDelta {
            stop_reason,
            stop_sequence,
            usage: self.usage,
        });
        out.push(Ev::Stop);
    }

    /// End of input: a stream that gave its `finish_reason` is complete even without
    /// `[DONE]`.
    pub(super) fn finish(&mut self, out: &mut Vec<Ev>) {
        if self.finish.is_some() {
            self.end(out);
        }
    }
}

fn error(etype: &str, message: &str) -> Ev {
    Ev::Error {
        etype: etype.into(),
        message: message.into(),
    }
}

/// An OpenAI error code / type → the Anthropic error type.
fn anthropic_type(code: &str) -> &'static str {
    match code {
        "rate_limit_exceeded" | "rate_limit_error" | "insufficient_quota" => "rate_limit_error",
        "server_is_overloaded" | "overloaded_error" | "slow_down" => "overloaded_error",
        "invalid_request_error" | "context_length_exceeded" => "invalid_request_error",
        "authentication_error" | "invalid_api_key" => "authentication_error",
        _ => "api_error",
    }
}
