//! The reliability suite: hostile input, security, crash, chaos and memory checks against the
//! built `sluice` binary (a child process) and the mock upstreams.
//!
//! Every part has a bounded short mode (the default, for CI) and a long mode
//! (`SLUICE_RELIABILITY=long`, for release checks). Each test prints a one-line summary of
//! what it did (`cargo test --test reliability -- --nocapture` shows them).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs,
    reason = "test code: a failed expectation should panic with its message"
)]

#[allow(
    unused_imports,
    reason = "the shared support re-exports more than this suite uses"
)]
#[path = "../it/support/mod.rs"]
mod support;

mod chaos;
mod chaos_upstream;
mod crash;
mod hostile;
mod memory;
mod outcome;
mod proc;
mod raw;
mod security;
mod soak;

/// Whether `SLUICE_RELIABILITY=long` asks for the long (release) mode.
pub fn long_mode() -> bool {
    std::env::var("SLUICE_RELIABILITY").is_ok_and(|v| v == "long")
}

/// `short` in the default mode, `long` in long mode.
pub fn pick<T>(short: T, long: T) -> T {
    if long_mode() { long } else { short }
}

/// The real monotonic time (through sluice's clock, as the lints ask).
pub fn now() -> sluice::clock::Instant {
    use sluice::clock::Clock;
    sluice::clock::SystemClock.now()
}
