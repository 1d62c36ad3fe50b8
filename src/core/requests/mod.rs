//! Requests and attempts as they pass: counters and the last-minute window, requests held
//! before their first byte, and session leases.

pub mod holds;
pub mod leases;
pub mod stats;
