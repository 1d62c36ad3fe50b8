//! `Affinity`: session → connection pins (`docs/RESILIENCE.md#2a-session-affinity`).
//!
//! A client session (named by one of [`SESSION_HEADERS`]) is pinned to the connection that
//! last served it, so a multi-turn agent stays on one account. A pin is soft: the router
//! consults it first and, when the pinned connection is not eligible, picks another and
//! re-pins with [`Affinity::pin`]. Pins expire `ttl` after their last refresh; expiry is lazy.
//! The table is bounded (oldest pins are evicted first) because session ids come from
//! clients.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use http::{HeaderMap, HeaderName};

use super::cooldown::{deadline_after, truncate_chars};
use crate::clock::Instant;

#[cfg(test)]
mod tests;

/// Session key headers, in precedence order (§2a). Never forwarded upstream.
pub static SESSION_HEADERS: [HeaderName; 4] = [
    HeaderName::from_static("x-session-id"),
    HeaderName::from_static("x-claude-code-session-id"),
    HeaderName::from_static("x-codex-session-id"),
    HeaderName::from_static("x-sluice-session"),
];

/// Longest session key kept verbatim, in bytes. A longer value is shortened to its first
/// [`KEY_PREFIX_CHARS`] chars plus `#` and a 64-bit FNV-1a hash (hex) of the whole value.
pub const MAX_SESSION_KEY_BYTES: usize = 128;

/// Chars of a long session value kept before its hash.
pub const KEY_PREFIX_CHARS: usize = 64;

/// Most pins held; beyond it the pin expiring first (the least recently refreshed) is evicted.
pub const MAX_PINS: usize = 10_000;

/// The session key of a request: the first of [`SESSION_HEADERS`] that is present with a
/// non-empty (after trimming) value, bounded to [`MAX_SESSION_KEY_BYTES`] (see there).
/// Non-UTF-8 bytes are replaced (lossy). `None` when no header names a session.
pub fn session_key(headers: &HeaderMap) -> Option<String> {
    SESSION_HEADERS.iter().find_map(|name| {
        headers.get_all(name).iter().find_map(|v| {
            let raw = String::from_utf8_lossy(v.as_bytes());
            let trimmed = raw.trim();
            (!trimmed.is_empty()).then(|| bound_key(trimmed))
        })
    })
}

/// Keeps short keys verbatim; shortens long ones to a stable prefix + hash.
fn bound_key(s: &str) -> String {
    if s.len() <= MAX_SESSION_KEY_BYTES {
        return s.to_owned();
    }
    format!(
        "{}#{:016x}",
        truncate_chars(s, KEY_PREFIX_CHARS),
        fnv1a(s.as_bytes())
    )
}

/// 64-bit FNV-1a: stable across builds and restarts (pins are persisted).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One pin as plain data, for persistence (table `session_affinity`) and the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinRecord {
    /// Session key (already bounded by [`session_key`]).
    pub key: String,
    /// Provider id.
    pub provider: String,
    /// Connection id.
    pub connection: String,
    /// The pin holds while `now < expires`.
    pub expires: Instant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Pin {
    provider: String,
    connection: String,
    expires: Instant,
    seq: u64,
}

/// Session pins with a TTL (§2a `session_affinity_ttl`, default 1 h; zero disables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Affinity {
    ttl: Duration,
    limit: usize,
    pins: HashMap<String, Pin>,
    /// `(expires, seq)` → key: the eviction and expiry order.
    order: BTreeMap<(Instant, u64), String>,
    seq: u64,
}

impl Affinity {
    /// Empty pins with `ttl` (zero disables) and the default bound [`MAX_PINS`].
    pub fn new(ttl: Duration) -> Self {
        Self::with_limit(ttl, MAX_PINS)
    }

    /// Empty pins holding at most `limit` (at least 1).
    pub fn with_limit(ttl: Duration, limit: usize) -> Self {
        Self {
            ttl,
            limit: limit.max(1),
            pins: HashMap::new(),
            order: BTreeMap::new(),
            seq: 0,
        }
    }

    /// Current TTL.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// Changes the TTL (config reload). Existing pins keep their expiry; zero disables
    /// lookups and pinning and drops every pin.
    pub fn set_ttl(&mut self, ttl: Duration) {
        self.ttl = ttl;
        if ttl.is_zero() {
            self.pins.clear();
            self.order.clear();
        }
    }

    /// The `(provider, connection)` `key` is pinned to at `now`, if any. An expired pin is
    /// dropped (lazily, along with every other pin expired by `now`). Reading does not
    /// refresh: call [`Self::pin`] after the request is routed. Always `None` when disabled.
    pub fn pinned(&mut self, key: &str, now: Instant) -> Option<(String, String)> {
        if self.ttl.is_zero() {
            return None;
        }
        self.drop_expired(now);
        self.pins
            .get(key)
            .map(|p| (p.provider.clone(), p.connection.clone()))
    }

    /// Pins `key` to `(provider, connection)` until `now + ttl` (a refresh when already
    /// pinned, a re-pin when the connection differs). No-op when disabled. When full, pins
    /// expired by `now` go first, then the pin expiring first.
    pub fn pin(&mut self, key: &str, provider: &str, connection: &str, now: Instant) {
        if self.ttl.is_zero() {
            return;
        }
        let expires = deadline_after(now, self.ttl);
        self.insert(key.to_owned(), provider, connection, expires, now);
    }

    /// Forgets one pin. Returns whether it existed.
    pub fn unpin(&mut self, key: &str) -> bool {
        match self.pins.remove(key) {
            Some(p) => {
                self.order.remove(&(p.expires, p.seq));
                true
            }
            None => false,
        }
    }

    /// Pins held (some may have expired but not yet been dropped).
    pub fn len(&self) -> usize {
        self.pins.len()
    }

    /// No pins held.
    pub fn is_empty(&self) -> bool {
        self.pins.is_empty()
    }

    /// Every pin, oldest first, for persistence.
    pub fn persist(&self) -> Vec<PinRecord> {
        self.order
            .values()
            .filter_map(|k| {
                self.pins.get(k).map(|p| PinRecord {
                    key: k.clone(),
                    provider: p.provider.clone(),
                    connection: p.connection.clone(),
                    expires: p.expires,
                })
            })
            .collect()
    }

    /// Rebuilds pins from records; pins expired by `now` are skipped, and at most
    /// [`MAX_PINS`] of the latest-expiring are kept. Nothing is restored when `ttl` is zero.
    pub fn restore(ttl: Duration, records: Vec<PinRecord>, now: Instant) -> Self {
        let mut out = Self::new(ttl);
        if ttl.is_zero() {
            return out;
        }
        let mut records = records;
        records.sort_by_key(|r| r.expires);
        for r in records.into_iter().filter(|r| now < r.expires) {
            out.insert(r.key, &r.provider, &r.connection, r.expires, now);
        }
        out
    }

    fn insert(
        &mut self,
        key: String,
        provider: &str,
        connection: &str,
        expires: Instant,
        now: Instant,
    ) {
        if !self.unpin(&key) && self.pins.len() >= self.limit {
            self.drop_expired(now);
            while self.pins.len() >= self.limit {
                let Some((_, oldest)) = self.order.pop_first() else {
                    break;
                };
                self.pins.remove(&oldest);
            }
        }
        self.seq = self.seq.wrapping_add(1);
        self.order.insert((expires, self.seq), key.clone());
        self.pins.insert(
            key,
            Pin {
                provider: provider.to_owned(),
                connection: connection.to_owned(),
                expires,
                seq: self.seq,
            },
        );
    }

    fn drop_expired(&mut self, now: Instant) {
        while let Some(entry) = self.order.first_entry() {
            if now < entry.key().0 {
                break;
            }
            let key = entry.remove();
            self.pins.remove(&key);
        }
    }
}
