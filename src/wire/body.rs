//! Helpers on request bodies as bytes, shared by the proxy and the translation.

/// Rough local token estimate for `count_tokens` when no upstream can count (A23): about
/// four bytes of JSON text per token.
pub fn estimate_tokens(body: &[u8]) -> u64 {
    (body.len() as u64).div_ceil(4).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_is_positive() {
        assert_eq!(estimate_tokens(b""), 1);
        assert_eq!(estimate_tokens(&[b'a'; 400]), 100);
    }
}
