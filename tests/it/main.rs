//! The one integration test binary: sluice in-process against a scripted mock upstream.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs,
    reason = "test code: a failed expectation should panic with its message"
)]

mod support;

mod admin;
mod admission;
mod aider;
mod architecture;
mod claude_code;
mod cli;
mod codex_cli;
mod config;
mod console_attach;
mod console_e2e;
mod console_settings;
mod edge;
mod faults;
mod history;
mod pipeline;
mod proxy;
mod python_sdks;
mod reload;
mod resilience;
mod streams;
mod translation;
