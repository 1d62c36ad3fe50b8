//! The last step of every translation to an Anthropic upstream: tool names and tool-call ids
//! in the forms Anthropic accepts (see [`crate::translate::wire_names`]), and the shape rules
//! Anthropic enforces that the source formats do not (at least one message, no thinking with
//! a forced tool, `temperature` at most 1).

use serde_json::Value;

use super::Draft;
use crate::translate::TranslateError;
use crate::translate::wire_names::{id_for_anthropic, shorten_into};

/// Rewrites `tools[].name`, `tool_choice.name` and every `tool_use` / `tool_result` block's
/// name and id in `d.body`; shortened names are recorded in `d.context.tool_names`. Then
/// applies [`forced_tool_without_thinking`] and [`temperature_in_range`].
///
/// # Errors
/// [`TranslateError::Invalid`] on `messages` when no user or assistant message is left (a
/// request of system text alone): Anthropic rejects an empty `messages`.
pub fn finish(d: &mut Draft) -> Result<(), TranslateError> {
    forced_tool_without_thinking(d);
    temperature_in_range(d);
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

/// Anthropic rejects thinking together with a `tool_choice` that forces a tool (`any` or
/// `tool`; "Thinking may not be enabled when tool_choice forces tool use"), which OpenAI
/// clients combine freely (`tool_choice: "required"` with a reasoning effort). The forced
/// tool is what the client's code depends on, so thinking is dropped, with a warning.
fn forced_tool_without_thinking(d: &mut Draft) {
    let forced = d
        .body
        .get("tool_choice")
        .and_then(|c| c.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| matches!(t, "any" | "tool"));
    let thinking = d
        .body
        .get("thinking")
        .and_then(|t| t.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|t| t != "disabled");
    if forced && thinking {
        d.body.remove("thinking");
        d.warn("dropped reasoning effort (Anthropic allows no thinking when tool_choice forces a tool)");
    }
}

/// OpenAI's `temperature` goes to 2, Anthropic's to 1: a higher value is clamped to 1, with a
/// warning.
fn temperature_in_range(d: &mut Draft) {
    if d.body
        .get("temperature")
        .and_then(Value::as_f64)
        .is_some_and(|x| x > 1.0)
    {
        d.body.insert("temperature".into(), serde_json::json!(1.0));
        d.warn("clamped 'temperature' to 1.0 (the Anthropic maximum)");
    }
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
    fn a_forced_tool_drops_thinking_and_temperature_is_clamped() {
        let mut d = draft(json!({
            "messages": [{"role": "user", "content": "go"}],
            "tools": [{"name": "t", "input_schema": {"type": "object"}}],
            "tool_choice": {"type": "any"},
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "temperature": 1.5
        }));
        finish(&mut d).unwrap();
        assert!(d.body.get("thinking").is_none(), "{:?}", d.body);
        assert_eq!(d.body["temperature"], json!(1.0));
        assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
        let mut d = draft(json!({"messages": [{"role": "user", "content": "go"}],
            "tool_choice": {"type": "auto"}, "thinking": {"type": "adaptive"}}));
        finish(&mut d).unwrap();
        assert!(
            d.body.get("thinking").is_some(),
            "kept with tool_choice auto"
        );
    }

    #[test]
    fn no_messages_is_a_clear_error() {
        let mut d = draft(json!({"system": "be brief", "messages": []}));
        let e = finish(&mut d).unwrap_err();
        assert!(e.to_string().contains("messages"), "{e}");
    }
}
