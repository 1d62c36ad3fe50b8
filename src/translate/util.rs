//! Small shared helpers: JSON access, the effort ⇄ thinking-budget scale, image URLs.

use serde_json::{Map, Value};

use super::TranslateError;

/// A JSON object.
pub(crate) type Obj = Map<String, Value>;

/// Parses `body` as a JSON object.
pub(crate) fn parse_object(body: &[u8]) -> Result<Obj, TranslateError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(TranslateError::InvalidJson("not an object".into())),
        Err(e) => Err(TranslateError::InvalidJson(e.to_string())),
    }
}

/// `v[key]` as a string.
pub(crate) fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// `v[key]` as an array (empty when absent or not an array).
pub(crate) fn arr<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// `v[key]` as a u64.
pub(crate) fn u(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Thinking budget (tokens) → OpenAI `reasoning_effort`: `low` < 4096 ≤ `medium` < 16384 ≤
/// `high`.
pub(crate) fn effort_for_budget(budget: u64) -> &'static str {
    match budget {
        0..4096 => "low",
        4096..16384 => "medium",
        _ => "high",
    }
}

/// OpenAI `reasoning_effort` / Responses `reasoning.effort` → a thinking budget in the middle
/// of that effort's band, so the mapping survives a round trip. `minimal`/`none` → no
/// thinking; unknown values → `None`.
pub(crate) fn budget_for_effort(effort: &str) -> Option<u64> {
    match effort {
        "low" => Some(2048),
        "medium" => Some(8192),
        "high" | "xhigh" | "max" => Some(24576),
        _ => None,
    }
}

/// Anthropic image `source` → an OpenAI image URL (`data:` URL for base64).
pub(crate) fn image_source_to_url(source: &Value) -> Option<String> {
    match s(source, "type") {
        Some("base64") => Some(format!(
            "data:{};base64,{}",
            s(source, "media_type").unwrap_or("image/png"),
            s(source, "data")?
        )),
        Some("url") => s(source, "url").map(str::to_string),
        _ => None,
    }
}

/// An OpenAI image URL → an Anthropic image `source` (base64 for `data:` URLs).
pub(crate) fn url_to_image_source(url: &str) -> Option<Value> {
    if let Some(rest) = url.strip_prefix("data:") {
        let (media, data) = rest.split_once(";base64,")?;
        return Some(serde_json::json!({"type": "base64", "media_type": media, "data": data}));
    }
    (url.starts_with("http://") || url.starts_with("https://"))
        .then(|| serde_json::json!({"type": "url", "url": url}))
}

/// Joins the text of a string or an array of `{type:"text"|"input_text"|"output_text", text}`
/// parts with `sep`; other parts are skipped.
pub(crate) fn join_text(content: &Value, sep: &str) -> String {
    match content {
        Value::String(t) => t.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| match s(p, "type") {
                Some("text" | "input_text" | "output_text") => s(p, "text"),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(sep),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effort_and_budget_round_trip() {
        for e in ["low", "medium", "high"] {
            assert_eq!(effort_for_budget(budget_for_effort(e).unwrap()), e);
        }
        assert_eq!(effort_for_budget(1024), "low");
        assert_eq!(effort_for_budget(4096), "medium");
        assert_eq!(effort_for_budget(16384), "high");
        assert_eq!(budget_for_effort("minimal"), None);
    }

    #[test]
    fn image_urls_round_trip() {
        let src = serde_json::json!({"type":"base64","media_type":"image/jpeg","data":"QUJD"});
        let url = image_source_to_url(&src).unwrap();
        assert_eq!(url, "data:image/jpeg;base64,QUJD");
        assert_eq!(url_to_image_source(&url).unwrap(), src);
        assert_eq!(
            url_to_image_source("https://x/y.png").unwrap(),
            serde_json::json!({"type":"url","url":"https://x/y.png"})
        );
        assert!(url_to_image_source("ftp://x").is_none());
        assert!(url_to_image_source("data:image/png,raw").is_none());
    }
}
