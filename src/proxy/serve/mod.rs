//! The first stage: accept a connection (HTTP/1 or HTTP/2, sniffed), route a request by its
//! path, and run one inference request through reading, dispatch and the answer.

pub mod forward;
pub mod routes;
pub mod server;
pub mod sniff;
