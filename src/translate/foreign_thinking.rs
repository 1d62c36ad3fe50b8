//! Thinking blocks that a translated turn produced (empty `signature`), removed before an
//! Anthropic request is forwarded natively: Anthropic rejects a thinking block whose
//! signature it did not issue, and a mixed combo may send the next turn of a translated
//! conversation to an Anthropic provider unchanged.

use std::sync::LazyLock;

use bytes::Bytes;
use memchr::memmem::Finder;
use serde_json::Value;

/// Finders for the markers a translated thinking block carries in the client's next request
/// (compact and spaced JSON), built once: this scan runs on every native Anthropic request.
static EMPTY_SIGNATURE: LazyLock<[Finder<'static>; 2]> = LazyLock::new(|| {
    [
        Finder::new(b"\"signature\":\"\""),
        Finder::new(b"\"signature\": \"\""),
    ]
});

/// `body` without the `thinking` blocks whose `signature` is empty, or `None` when it has
/// none (the common case costs one byte scan, no parse) or is not a JSON object.
pub fn strip_unsigned_thinking(body: &[u8]) -> Option<Bytes> {
    if !EMPTY_SIGNATURE.iter().any(|m| m.find(body).is_some()) {
        return None;
    }
    let mut v: Value = serde_json::from_slice(body).ok()?;
    let messages = v.get_mut("messages")?.as_array_mut()?;
    let mut removed = false;
    for m in messages.iter_mut() {
        let Some(blocks) = m.get_mut("content").and_then(Value::as_array_mut) else {
            continue;
        };
        let before = blocks.len();
        blocks.retain(|b| !is_unsigned_thinking(b));
        removed |= blocks.len() != before;
    }
    removed.then(|| Bytes::from(v.to_string()))
}

fn is_unsigned_thinking(b: &Value) -> bool {
    b.get("type").and_then(Value::as_str) == Some("thinking")
        && b.get("signature")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn drops_only_unsigned_thinking_blocks() {
        let body = json!({"model": "m", "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "from elsewhere", "signature": ""},
                {"type": "thinking", "thinking": "signed", "signature": "abc"},
                {"type": "text", "text": "hello"}
            ]}
        ]});
        let out = strip_unsigned_thinking(body.to_string().as_bytes()).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        let blocks = v["messages"][1]["content"].as_array().unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0]["signature"], "abc");
        assert_eq!(v["messages"][0]["content"], "hi");
    }

    #[test]
    fn leaves_other_bodies_alone() {
        assert!(
            strip_unsigned_thinking(br#"{"messages":[{"role":"user","content":"x"}]}"#).is_none()
        );
        assert!(strip_unsigned_thinking(br#"{"signature":"" not json"#).is_none());
        let signed_text = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "\"signature\":\"\""}]}]});
        assert!(strip_unsigned_thinking(signed_text.to_string().as_bytes()).is_none());
    }
}
