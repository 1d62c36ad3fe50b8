//! Pure policy: decisions as plain data and functions of `now` (no tokio, hyper, rusqlite or
//! ratatui). The resilience layers (breaker, cooldown, lockout, classification) land here.

pub mod select;
