//! Quota awareness per connection: headroom read from rate-limit headers (and the preflight
//! that skips a nearly spent connection), the subscription low-priority lane, and the
//! session-limit reset record, and the requests a combo holds until a quota reset
//! (`reset_holds`). Their state lives in the resilience state's per-connection
//! tables; these modules read and change it and save it behind.

pub mod headroom;
pub mod lane;
pub mod limit_reset;
pub mod reset_holds;
