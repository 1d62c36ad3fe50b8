//! Tests (filled in the next commit).
