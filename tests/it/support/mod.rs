//! Test support: mock upstream and in-process harness.
