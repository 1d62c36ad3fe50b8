//! One constant-time comparison for every credential sluice checks itself: the admin bearer
//! token and the client keys of `server.client_keys_env`. Built on the `subtle` crate, so the
//! time taken does not depend on where two equal-length values first differ (a length
//! mismatch returns early; lengths are not secret enough to matter here).

use subtle::ConstantTimeEq;

/// `true` when `a` and `b` are byte-for-byte equal, compared in constant time.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_only_when_every_byte_matches() {
        assert!(constant_time_eq(b"tok-123", b"tok-123"));
        assert!(constant_time_eq(b"", b""));
        assert!(!constant_time_eq(b"tok-123", b"tok-124"));
        assert!(!constant_time_eq(b"tok-123", b"tok-12"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
