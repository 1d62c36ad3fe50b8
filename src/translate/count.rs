//! `count_tokens` for a translated target: the upstream cannot be asked (it speaks another
//! dialect), so the answer is the proxy's local estimate.

use bytes::Bytes;

/// Estimated input tokens of a client request body: [`crate::wire::body::estimate_tokens`]
/// (about four bytes of JSON per token, at least 1).
pub fn estimate_input_tokens(body: &[u8]) -> u64 {
    crate::wire::body::estimate_tokens(body)
}

/// The Anthropic `count_tokens` answer for `body`: `{"input_tokens": N}`.
pub fn count_tokens_body(body: &[u8]) -> Bytes {
    Bytes::from(serde_json::json!({"input_tokens": estimate_input_tokens(body)}).to_string())
}

#[cfg(test)]
mod tests {
    #[test]
    fn count_tokens_answers_with_the_local_estimate() {
        let v: serde_json::Value =
            serde_json::from_slice(&super::count_tokens_body(&[b'x'; 40])).unwrap();
        assert_eq!(v["input_tokens"], 10);
    }
}
