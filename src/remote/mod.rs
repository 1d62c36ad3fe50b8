//! `sluice console`: the operator console attached to a running sluice over its admin API.
//!
//! - [`client`]: the HTTP client for the admin listener (bearer token, bounded calls).
//! - [`feed`]: follows `GET /api/snapshot/stream` into a `watch` channel like the one the
//!   in-process console reads, reconnecting with backoff (0.5 s doubling to 5 s) and
//!   publishing the link state the header shows ("reconnecting…").
//! - [`door`]: the console's [`Door`](crate::console::door::Door) over the admin API: each
//!   action goes to the endpoint that calls the same `Control` method.
//! - [`attach`]: wires them to the console for the `console` subcommand.

pub mod attach;
pub mod client;
pub mod door;
pub mod feed;
