//! proxy integration tests.
