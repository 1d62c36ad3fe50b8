//! Anthropic messages under construction, shared by the Chat and Responses → Anthropic
//! directions: consecutive messages of one role merge, and `tool_result` blocks lead each
//! user message (Anthropic requires both).

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::translate::util::s;

/// Anthropic `system` texts, messages and the tool-call ids seen so far.
#[derive(Default)]
pub(crate) struct Turns {
    /// System texts, joined with a blank line at the end.
    pub(crate) system: Vec<String>,
    out: Vec<(String, Vec<Value>)>,
    /// `tool_use` ids produced so far (a result must answer one of them).
    pub(crate) calls: HashSet<String>,
}

impl Turns {
    /// Appends `blocks` as a `role` message, merging into the previous message of that role.
    pub(crate) fn push(&mut self, role: &str, blocks: Vec<Value>) {
        if blocks.is_empty() {
            return;
        }
        match self.out.last_mut() {
            Some((r, b)) if r == role => b.extend(blocks),
            _ => self.out.push((role.to_string(), blocks)),
        }
    }

    /// The `messages` array.
    pub(crate) fn messages(self) -> Value {
        Value::Array(
            self.out
                .into_iter()
                .map(|(role, mut blocks)| {
                    if role == "user" {
                        blocks.sort_by_key(|b| s(b, "type") != Some("tool_result"));
                    }
                    json!({"role": role, "content": blocks})
                })
                .collect(),
        )
    }
}
