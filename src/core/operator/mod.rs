//! What operators change, through one door: `Control` (every action of the console, the
//! attached console and the admin API), the live settings and saved overrides, clear-and-verify,
//! and injected faults.

pub mod control;
pub mod faults;
pub mod settings;
pub mod verify;
