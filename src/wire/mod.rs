//! The wire formats shared by the proxy (`proxy/`) and the translation (`translate/`): each
//! dialect's error type names and SSE wire format ([`dialect`]), SSE framing ([`sse`]) and
//! helpers on request bodies ([`body`]).
//!
//! Plain functions and data, no I/O. May import outside crates and the support modules only;
//! never `proxy`, `translate` or `core` (both of the first two build on this module).

pub mod body;
pub mod dialect;
pub mod sse;
