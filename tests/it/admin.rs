//! admin integration tests.
