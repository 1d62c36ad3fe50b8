//! Event classification for the §6 stream guards, the guards' per-attempt state ([`guard`])
//! and the pre-content hold ([`hold`]), on top of the SSE framer
//! ([`crate::wire::sse::SseFramer`]). The request path's `attempt` (which holds) and `relay`
//! (which relays) both build on this module.
//!
//! Two layers, neither of which does I/O or reads a clock (time-dependent helpers take `now`):
//!
//! - [`classify_event`]: what an event means for the guards in a given [`StreamKind`]
//!   (lifecycle, content, reasoning, keepalive, metadata, terminal, error, other), with the two
//!   independent flags §6 needs: `content_bearing` (ends the pre-content hold) and `progress`
//!   (restarts the content-stall budget). A blank line that ends no event is
//!   [`EventKind::Blank`], which the guards ignore.
//! - [`StreamTracker`]: per-attempt state on top (open Anthropic blocks, content seen, terminal
//!   marker seen, last progress instant, text throughput), answering completion, stall and
//!   readiness questions, and producing the well-formed terminal error event and heartbeat
//!   frame for the stream kind.

mod classify;
pub mod guard;
pub mod hold;
mod tracker;

#[cfg(test)]
mod tests;

pub use classify::{
    ANTHROPIC_HEARTBEAT, Activity, BlockEdge, EXCUSING_STOPS, EventClass, EventKind,
    OPENAI_HEARTBEAT, StreamError, StreamKind, Terminal, classify_event, heartbeat,
};
pub use tracker::{Readiness, StreamEnd, StreamTracker, Throughput};
