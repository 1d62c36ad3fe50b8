//! Small pieces every layer may use, each behind one name: the fast hash map of the request
//! path, one constant-time comparison for credentials, the scheduling class of background
//! threads, and the tracing setup.

pub mod ct;
pub mod fast_map;
pub mod sched;
pub mod telemetry;
