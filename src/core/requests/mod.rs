//! Requests and attempts as they pass: counters and the last-minute window, and session
//! leases.

pub mod leases;
pub mod stats;
