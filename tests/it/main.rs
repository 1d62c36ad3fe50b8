//! The one integration test binary: sluice in-process against a scripted mock upstream.

mod support;

mod admin;
mod claude_code;
mod config;
mod proxy;
