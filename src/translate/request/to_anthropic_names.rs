//! The last step of every translation to an Anthropic upstream: tool names and tool-call ids
//! in the forms Anthropic accepts (see [`crate::translate::wire_names`]), and the one shape
//! rule the source formats do not enforce (at least one message).

use serde_json::Value;

use super::Draft;
use crate::translate::TranslateError;
use crate::translate::wire_names::{id_for_anthropic, shorten_into};

/// Rewrites `tools[].name`, `tool_choice.name` and every `tool_use` / `tool_result` block's
/// name and id in `d.body`; shortened names are recorded in `d.context.tool_names`.
///
/// # Errors
/// [`TranslateError::Invalid`] on `messages` when no user or assistant message is left (a
/// request of system text alone): Anthropic rejects an empty `messages`.
pub fn finish(d: &mut Draft) -> Result<(), TranslateError> {
    let names = &mut d.context.tool_names;
    if let Some(tools) = d.body.get_mut("tools").and_then(Value::as_array_mut) {
        for t in tools {
            rename(t, names);
        }
    }
    if let Some(c) = d.body.get_mut("tool_choice") {
        rename(c, names);
    }
    let messages = d.body.get_mut("messages").and_then(Value::as_array_mut);
    let Some(messages) = messages.filter(|m| !m.is_empty()) else {
        return Err(TranslateError::invalid(
            "messages",
            "has no user or assistant message; Anthropic needs at least one besides the system text",
        ));
    };
    for block in messages
        .iter_mut()
        .filter_map(|m| m.get_mut("content").and_then(Value::as_array_mut))
        .flatten()
    {
        match block.get("type").and_then(Value::as_str) {
            Some("tool_use") => {
                rename(block, names);
                reid(block, "id");
            }
            Some("tool_result") => reid(block, "tool_use_id"),
            _ => {}
        }
    }
    Ok(())
}

fn rename(v: &mut Value, names: &mut Vec<(String, String)>) {
    if let Some(n) = v.get("name").and_then(Value::as_str) {
        let wire = shorten_into(names, n);
        v["name"] = Value::String(wire);
    }
}

fn reid(v: &mut Value, key: &str) {
    if let Some(id) = v.get(key).and_then(Value::as_str) {
        let id = id_for_anthropic(id).into_owned();
        v[key] = Value::String(id);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn draft(body: Value) -> Draft {
        Draft {
            body: body.as_object().cloned().unwrap_or_default(),
            ..Draft::default()
        }
    }

    #[test]
    fn ids_and_names_become_valid_and_consistent() {
        let long = "mcp__".to_string() + &"x".repeat(70);
        let mut d = draft(json!({
            "tools": [{"name": long, "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "tool", "name": long},
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "functions.Bash:0", "name": long, "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "functions.Bash:0", "content": "ok"}]}
            ]
        }));
        finish(&mut d).unwrap();
        let b = Value::Object(d.body);
        let wire = b["tools"][0]["name"].as_str().unwrap().to_string();
        assert!(wire.len() <= 64 && wire != long);
        assert_eq!(b["tool_choice"]["name"], wire);
        assert_eq!(b["messages"][1]["content"][0]["name"], wire);
        assert_eq!(
            b["messages"][1]["content"][0]["id"],
            "sx_functions_2EBash_3A0"
        );
        assert_eq!(
            b["messages"][2]["content"][0]["tool_use_id"],
            "sx_functions_2EBash_3A0"
        );
        assert_eq!(d.context.tool_names, vec![(wire, long)]);
    }

    #[test]
    fn no_messages_is_a_clear_error() {
        let mut d = draft(json!({"system": "be brief", "messages": []}));
        let e = finish(&mut d).unwrap_err();
        assert!(e.to_string().contains("messages"), "{e}");
    }
}
