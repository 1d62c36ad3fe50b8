//! claude_code integration tests.
