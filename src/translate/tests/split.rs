//! Split safety.
