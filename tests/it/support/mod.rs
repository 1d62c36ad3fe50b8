//! Test support: the scripted mock upstream, the in-process sluice harness and an HTTP client.
//!
//! Every test gets its own [`MockUpstream`] and its own [`Sluice`] on `127.0.0.1:0`, so tests
//! run in parallel without fixed ports or shared state.

#![allow(dead_code, reason = "not every test module uses every helper")]

pub mod body;
pub mod client;
pub mod client_tool;
pub mod harness;
pub mod mock_upstream;
pub mod recorded;
pub mod tmux;
pub mod wire;

pub use harness::{Sluice, fill};
pub use mock_upstream::{MockUpstream, Reply, fixture};
