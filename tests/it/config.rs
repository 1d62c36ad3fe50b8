//! config integration tests.
