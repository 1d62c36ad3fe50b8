//! `FastMap`: the hash map of the request path's own lookups (latency windows, metric handles,
//! combo and provider positions, strategy state), keyed by small indexes and short names.
//!
//! The standard map hashes with SipHash-1-3, which cost about 2 % of the instructions of a
//! proxied request across these lookups; foldhash's fast hasher costs a fraction of that. Its
//! seed is random per process, so keys a client chooses (model names) cannot be lined up in
//! advance, and every map it is used for is bounded by the config or by a fixed cap.

/// A `HashMap` with foldhash's per-process-seeded fast hasher. Build with `default()` or
/// `collect()`; `new()` is only for the standard hasher.
pub type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
