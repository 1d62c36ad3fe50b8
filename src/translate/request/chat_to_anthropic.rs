//! OpenAI Chat Completions request → Anthropic Messages request.

use serde_json::{Value, json};

use super::turns::Turns;
use super::{Draft, client_model, stop_list};
use crate::translate::options::DEFAULT_MAX_TOKENS;
use crate::translate::util::{Obj, arr, budget_for_effort, join_text, s, u, url_to_image_source};
use crate::translate::{TargetOptions, TranslateError};

/// Top-level fields this direction reads; any other is dropped with a warning.
const HANDLED: &[&str] = &[
    "model",
    "messages",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "stream",
    "stream_options",
    "user",
    "reasoning_effort",
    "n",
    "response_format",
    "functions",
    "function_call",
    "modalities",
    "audio",
];

/// Translates the parsed chat body.
///
/// # Errors
/// `n > 1`, `response_format` other than `text`, legacy `functions`, audio, non-function
/// tools, content parts other than text and images, tool-call `arguments` that are not a JSON
/// object, and a `tool` message whose `tool_call_id` no earlier call produced.
pub fn translate(v: Obj, opts: &TargetOptions) -> Result<Draft, TranslateError> {
    let mut d = Draft::default();
    d.context.client_model = client_model(&v);
    let v = Value::Object(v);
    refuse(&v)?;
    let mut turns = Turns::default();
    for (i, m) in arr(&v, "messages").iter().enumerate() {
        turns.message(i, m)?;
    }
    if !turns.system.is_empty() {
        d.body
            .insert("system".into(), json!(turns.system.join("\n\n")));
    }
    d.body.insert("messages".into(), turns.messages());
    tools(&v, &mut d)?;
    scalars(&v, opts, &mut d);
    let schema = v
        .get("response_format")
        .and_then(|f| f.get("json_schema"))
        .and_then(|j| j.get("schema"));
    if let Some(schema) = schema {
        d.body.insert(
            "output_config".into(),
            json!({"format": {"type": "json_schema", "schema": schema}}),
        );
    }
    if let Some(obj) = v.as_object() {
        for k in obj.keys().filter(|k| !HANDLED.contains(&k.as_str())) {
            d.warn(format!("dropped '{k}' (no Anthropic Messages counterpart)"));
        }
    }
    Ok(d)
}

fn refuse(v: &Value) -> Result<(), TranslateError> {
    if u(v, "n").is_some_and(|n| n > 1) {
        return Err(TranslateError::unsupported(
            "n",
            "Anthropic returns one choice per request; send n=1",
        ));
    }
    if let Some(f) = v
        .get("response_format")
        .and_then(|f| s(f, "type"))
        .filter(|t| !matches!(*t, "text" | "json_schema"))
    {
        return Err(TranslateError::unsupported(
            format!("response_format.type={f}"),
            "only json_schema structured output translates to Anthropic (output_config.format)",
        ));
    }
    for k in ["functions", "function_call", "audio"] {
        if v.get(k).is_some_and(|x| !x.is_null()) {
            return Err(TranslateError::unsupported(
                k,
                "use tools / tool_choice; legacy functions and audio do not translate",
            ));
        }
    }
    Ok(())
}

impl Turns {
    fn message(&mut self, i: usize, m: &Value) -> Result<(), TranslateError> {
        let content = m.get("content").unwrap_or(&Value::Null);
        match s(m, "role").unwrap_or_default() {
            "system" | "developer" => {
                let t = join_text(content, "\n\n");
                if !t.is_empty() {
                    self.system.push(t);
                }
            }
            "user" => {
                let blocks = user_blocks(i, content)?;
                self.push("user", blocks);
            }
            "assistant" => {
                let blocks = self.assistant_blocks(i, m, content)?;
                self.push("assistant", blocks);
            }
            "tool" => {
                let id = s(m, "tool_call_id").unwrap_or_default();
                if !self.calls.contains(id) {
                    return Err(TranslateError::invalid(
                        format!("messages[{i}].tool_call_id"),
                        format!("no earlier assistant tool call has id '{id}'"),
                    ));
                }
                let text = join_text(content, "\n");
                self.push(
                    "user",
                    vec![json!({"type": "tool_result", "tool_use_id": id, "content": text})],
                );
            }
            r => {
                return Err(TranslateError::invalid(
                    format!("messages[{i}].role"),
                    format!("unknown role '{r}'"),
                ));
            }
        }
        Ok(())
    }

    fn assistant_blocks(
        &mut self,
        i: usize,
        m: &Value,
        content: &Value,
    ) -> Result<Vec<Value>, TranslateError> {
        let mut blocks = Vec::new();
        let text = match content {
            Value::Array(parts) => parts
                .iter()
                .filter_map(|p| s(p, "text").or_else(|| s(p, "refusal")))
                .collect::<Vec<_>>()
                .join(""),
            other => join_text(other, ""),
        };
        if !text.is_empty() {
            blocks.push(json!({"type": "text", "text": text}));
        }
        for (j, c) in arr(m, "tool_calls").iter().enumerate() {
            let field = format!("messages[{i}].tool_calls[{j}].function.arguments");
            let f = c.get("function").unwrap_or(&Value::Null);
            let raw = s(f, "arguments").unwrap_or_default();
            let input = if raw.trim().is_empty() {
                json!({})
            } else {
                match serde_json::from_str::<Value>(raw) {
                    Ok(o @ Value::Object(_)) => o,
                    Ok(_) => return Err(TranslateError::invalid(field, "must be a JSON object")),
                    Err(e) => {
                        return Err(TranslateError::invalid(
                            field,
                            format!("not valid JSON: {e}"),
                        ));
                    }
                }
            };
            let id = s(c, "id").unwrap_or_default();
            self.calls.insert(id.to_string());
            blocks.push(json!({"type": "tool_use", "id": id, "name": s(f, "name").unwrap_or_default(), "input": input}));
        }
        Ok(blocks)
    }
}

fn user_blocks(i: usize, content: &Value) -> Result<Vec<Value>, TranslateError> {
    let parts = match content {
        Value::String(t) if t.is_empty() => return Ok(Vec::new()),
        Value::String(t) => return Ok(vec![json!({"type": "text", "text": t})]),
        Value::Array(p) => p,
        _ => {
            return Err(TranslateError::invalid(
                format!("messages[{i}].content"),
                "must be a string or an array of parts",
            ));
        }
    };
    let mut blocks = Vec::new();
    for (j, p) in parts.iter().enumerate() {
        let field = format!("messages[{i}].content[{j}]");
        match s(p, "type") {
            Some("text") => {
                let t = s(p, "text").unwrap_or_default();
                if !t.is_empty() {
                    blocks.push(json!({"type": "text", "text": t}));
                }
            }
            Some("image_url") => {
                let url = p
                    .get("image_url")
                    .and_then(|x| s(x, "url").or(x.as_str()))
                    .unwrap_or_default();
                let source = url_to_image_source(url).ok_or_else(|| {
                    TranslateError::unsupported(
                        format!("{field}.image_url.url"),
                        "only data: and http(s) image URLs translate",
                    )
                })?;
                blocks.push(json!({"type": "image", "source": source}));
            }
            Some("file") => {
                let f = p.get("file").unwrap_or(&Value::Null);
                blocks.push(document_block(
                    &format!("{field}.file"),
                    s(f, "file_data"),
                    s(f, "filename"),
                )?);
            }
            t => {
                return Err(TranslateError::unsupported(
                    format!("{field}.type={}", t.unwrap_or("")),
                    "only text, image_url and file (PDF) parts translate to Anthropic",
                ));
            }
        }
    }
    Ok(blocks)
}

/// A file given as a `data:application/pdf;base64,…` URL → an Anthropic `document` block
/// (`title` from the file name).
///
/// # Errors
/// A file given by id (uploaded to OpenAI) or not as a base64 PDF.
pub(crate) fn document_block(
    field: &str,
    data: Option<&str>,
    filename: Option<&str>,
) -> Result<Value, TranslateError> {
    let pdf = data.and_then(|d| d.strip_prefix("data:application/pdf;base64,"));
    let Some(pdf) = pdf else {
        return Err(TranslateError::unsupported(
            field,
            "only PDF files given inline as base64 data translate to Anthropic (not file ids)",
        ));
    };
    let mut b = json!({"type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": pdf}});
    if let Some(name) = filename {
        b["title"] = json!(name);
    }
    Ok(b)
}

/// `tools` and `tool_choice`. A function without `parameters` (or with `null`, as typed
/// clients send an unset field) takes no arguments. `tool_choice` `allowed_tools` keeps only
/// the allowed tools, with its mode (`auto` / `required`); Anthropic has no such choice.
fn tools(v: &Value, d: &mut Draft) -> Result<(), TranslateError> {
    let mut out = Vec::new();
    for (i, t) in arr(v, "tools").iter().enumerate() {
        if s(t, "type") != Some("function") {
            return Err(TranslateError::unsupported(
                format!("tools[{i}].type"),
                "only function tools translate to Anthropic",
            ));
        }
        let f = t.get("function").unwrap_or(&Value::Null);
        let schema = f
            .get("parameters")
            .filter(|p| !p.is_null())
            .cloned()
            .unwrap_or_else(|| json!({"type": "object", "properties": {}}));
        let mut tool = json!({"name": s(f, "name").unwrap_or_default(), "input_schema": schema});
        if let Some(desc) = f.get("description").filter(|x| !x.is_null()) {
            tool["description"] = desc.clone();
        }
        out.push(tool);
    }
    let no_parallel = v.get("parallel_tool_calls") == Some(&Value::Bool(false));
    let mut choice = match v.get("tool_choice") {
        Some(Value::String(c)) if c == "required" => Some(json!({"type": "any"})),
        Some(Value::String(c)) if c == "none" => Some(json!({"type": "none"})),
        Some(Value::String(_)) => Some(json!({"type": "auto"})),
        Some(c @ Value::Object(_)) if s(c, "type") == Some("allowed_tools") => {
            let a = c.get("allowed_tools").unwrap_or(&Value::Null);
            let allowed: Vec<&str> = arr(a, "tools")
                .iter()
                .filter_map(|t| t.get("function").and_then(|f| s(f, "name")))
                .collect();
            out.retain(|t| allowed.contains(&s(t, "name").unwrap_or_default()));
            d.warn(
                "offered only the tools in tool_choice.allowed_tools (no Anthropic counterpart)",
            );
            let mode = if s(a, "mode") == Some("required") {
                "any"
            } else {
                "auto"
            };
            Some(json!({"type": mode}))
        }
        Some(c @ Value::Object(_)) => {
            let name = c
                .get("function")
                .and_then(|f| s(f, "name"))
                .unwrap_or_default();
            Some(json!({"type": "tool", "name": name}))
        }
        _ => None,
    };
    if out.is_empty() {
        return Ok(());
    }
    d.body.insert("tools".into(), Value::Array(out));
    if no_parallel {
        let c = choice.get_or_insert_with(|| json!({"type": "auto"}));
        if s(c, "type") != Some("none") {
            c["disable_parallel_tool_use"] = Value::Bool(true);
        }
    }
    if let Some(c) = choice {
        d.body.insert("tool_choice".into(), c);
    }
    Ok(())
}

fn scalars(v: &Value, opts: &TargetOptions, d: &mut Draft) {
    let asked = u(v, "max_completion_tokens")
        .or_else(|| u(v, "max_tokens"))
        .unwrap_or_else(|| u64::from(opts.default_max_tokens.unwrap_or(DEFAULT_MAX_TOKENS)));
    let max = d.output_limit(Some(asked), opts).unwrap_or(asked);
    d.body.insert("max_tokens".into(), json!(max));
    let budget = s(v, "reasoning_effort").and_then(budget_for_effort);
    let thinking = thinking_budget(budget, max, d);
    if let Some(b) = thinking {
        d.body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": b}),
        );
        d.context.thinking = true;
    }
    for k in ["temperature", "top_p"] {
        let Some(x) = v.get(k).and_then(Value::as_f64) else {
            continue;
        };
        if thinking.is_some() {
            d.warn(format!(
                "dropped '{k}' (Anthropic thinking requires the default)"
            ));
        } else if k == "temperature" && x > 1.0 {
            d.warn("clamped 'temperature' to 1.0 (the Anthropic maximum)");
            d.body.insert(k.into(), json!(1.0));
        } else {
            d.body.insert(k.into(), json!(x));
        }
    }
    let stops = stop_list(v.get("stop"));
    if !stops.is_empty() {
        d.body.insert("stop_sequences".into(), json!(stops));
    }
    d.context.stop_sequences = stops;
    if v.get("stream") == Some(&Value::Bool(true)) {
        d.body.insert("stream".into(), Value::Bool(true));
    }
    d.context.include_usage =
        v.get("stream_options").and_then(|o| o.get("include_usage")) == Some(&Value::Bool(true));
    if let Some(user) = s(v, "user") {
        d.body.insert("metadata".into(), json!({"user_id": user}));
    }
}

/// A budget that fits under `max_tokens` (Anthropic requires `budget_tokens < max_tokens`
/// and at least 1024), or `None` with a warning.
pub(crate) fn thinking_budget(budget: Option<u64>, max: u64, d: &mut Draft) -> Option<u64> {
    let b = budget?;
    if b < max {
        return Some(b);
    }
    let half = max / 2;
    if half >= 1024 {
        Some(half)
    } else {
        d.warn(
            "dropped reasoning effort (max_tokens is too small for an Anthropic thinking budget)",
        );
        None
    }
}
