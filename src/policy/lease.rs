//! Exclusive session leases (§2d): a lease gives one owner a connection (not
//! a model) until it expires or is released. Every acquire on a connection raises its
//! generation, so a request carrying an older generation is refused before dispatch.
//!
//! The owner token (`vlo_` + 43 base64url characters, 32 random bytes) is handed to the
//! client once; only its SHA-256 ([`OwnerHash`]) is kept, here and in the store. Plain data
//! with the time passed in: no clock, no I/O.

use std::collections::HashMap;
use std::time::Duration;

use crate::clock::Instant;

/// A connection by config indices: (provider, connection).
pub use crate::config::keys::ConnKey;

/// The prefix of every owner token.
pub const OWNER_PREFIX: &str = "vlo_";

/// Base64url characters after [`OWNER_PREFIX`] (32 bytes, no padding).
pub const OWNER_CHARS: usize = 43;

/// SHA-256 of an owner token: all sluice keeps of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerHash(pub [u8; 32]);

impl OwnerHash {
    /// The hash of `token` when it has the owner format (`vlo_` + 43 base64url chars).
    pub fn of_token(token: &str) -> Option<Self> {
        let rest = token.strip_prefix(OWNER_PREFIX)?;
        let well_formed = rest.len() == OWNER_CHARS
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        well_formed.then(|| Self::digest(token))
    }

    fn digest(token: &str) -> Self {
        let d = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        let mut out = [0u8; 32];
        out.copy_from_slice(d.as_ref());
        Self(out)
    }

    /// Lowercase hex, 64 characters (the stored form).
    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parses [`OwnerHash::hex`] back; `None` for anything else.
    pub fn from_hex(s: &str) -> Option<Self> {
        if s.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        for (i, byte) in out.iter_mut().enumerate() {
            *byte = u8::from_str_radix(s.get(i * 2..i * 2 + 2)?, 16).ok()?;
        }
        Some(Self(out))
    }

    /// A short, non-reversible label for logs and the console: the first 8 hex characters
    /// of the hash (never the token).
    pub fn fingerprint(&self) -> String {
        self.hex()[..8].to_string()
    }
}

/// A new owner token from 32 bytes of `rng`, and its hash. `None` only when the system
/// random source fails.
pub fn mint_owner(rng: &dyn ring::rand::SecureRandom) -> Option<(String, OwnerHash)> {
    let mut bytes = [0u8; 32];
    rng.fill(&mut bytes).ok()?;
    let token = format!("{OWNER_PREFIX}{}", base64url(&bytes));
    let hash = OwnerHash::digest(&token);
    Some((token, hash))
}

/// Base64url without padding (RFC 4648 §5).
pub fn base64url(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let emit = chunk.len() + 1;
        for i in 0..emit {
            let idx = (n >> (18 - 6 * i)) & 0x3f;
            out.push(char::from(ALPHABET[idx as usize]));
        }
    }
    out
}

/// One active lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease {
    /// Who holds it.
    pub owner: OwnerHash,
    /// The connection's generation when it was acquired.
    pub generation: u64,
    /// When it lapses unless renewed.
    pub expires: Instant,
}

/// Why a lease operation or a leased request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The owner holds no live lease with that generation (expired, released, or a newer
    /// acquire replaced it): `409 lease_generation_stale`.
    Stale,
    /// The connection is leased by another owner until `until`.
    Busy {
        /// When that lease lapses (unless renewed).
        until: Instant,
    },
}

/// One connection's saved lease state, for the store and for restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRecord {
    /// The connection.
    pub conn: ConnKey,
    /// Its last generation (kept after release so generations never repeat).
    pub generation: u64,
    /// The live lease, if any.
    pub lease: Option<Lease>,
}

/// Every connection's lease and generation.
#[derive(Debug, Default, Clone)]
pub struct Leases {
    active: HashMap<ConnKey, Lease>,
    generations: HashMap<ConnKey, u64>,
}

impl Leases {
    /// Keeps the leases and generations of the connections `keep` accepts (a config reload
    /// removed the others).
    pub fn retain(&mut self, keep: impl Fn(ConnKey) -> bool) {
        self.active.retain(|k, _| keep(*k));
        self.generations.retain(|k, _| keep(*k));
    }

    /// Rebuilds the table from saved records; leases already expired at `now` are dropped,
    /// their generations kept.
    pub fn restore(records: impl IntoIterator<Item = LeaseRecord>, now: Instant) -> Self {
        let mut t = Self::default();
        for r in records {
            let g = t.generations.entry(r.conn).or_default();
            *g = (*g).max(r.generation);
            if let Some(l) = r.lease.filter(|l| l.expires > now) {
                t.active.insert(r.conn, l);
            }
        }
        t
    }

    /// The live lease on `conn` at `now`.
    pub fn holder(&self, conn: ConnKey, now: Instant) -> Option<&Lease> {
        self.active.get(&conn).filter(|l| l.expires > now)
    }

    /// When `conn` is leased at `now` by someone other than `owner`: that lease's expiry.
    pub fn leased_by_other(
        &self,
        conn: ConnKey,
        owner: Option<&OwnerHash>,
        now: Instant,
    ) -> Option<Instant> {
        self.holder(conn, now)
            .filter(|l| Some(&l.owner) != owner)
            .map(|l| l.expires)
    }

    /// Leases `conn` to `owner` for `ttl` from `now` with the next generation; refused
    /// (`Busy`) while another live lease holds it.
    pub fn acquire(
        &mut self,
        conn: ConnKey,
        owner: OwnerHash,
        ttl: Duration,
        now: Instant,
    ) -> Result<Lease, Refusal> {
        if let Some(l) = self.holder(conn, now) {
            return Err(Refusal::Busy { until: l.expires });
        }
        let g = self.generations.entry(conn).or_default();
        *g = g.saturating_add(1);
        let lease = Lease {
            owner,
            generation: *g,
            expires: crate::policy::cooldown::deadline_after(now, ttl),
        };
        self.active.insert(conn, lease);
        Ok(lease)
    }

    /// The connection `owner` holds with `generation`, live at `now`; `Stale` otherwise.
    pub fn check(
        &self,
        owner: &OwnerHash,
        generation: u64,
        now: Instant,
    ) -> Result<ConnKey, Refusal> {
        self.active
            .iter()
            .find(|(_, l)| l.owner == *owner && l.generation == generation && l.expires > now)
            .map(|(k, _)| *k)
            .ok_or(Refusal::Stale)
    }

    /// Extends `owner`'s live lease to `now + ttl`.
    pub fn renew(
        &mut self,
        owner: &OwnerHash,
        generation: u64,
        ttl: Duration,
        now: Instant,
    ) -> Result<(ConnKey, Lease), Refusal> {
        let conn = self.check(owner, generation, now)?;
        let l = self.active.get_mut(&conn).ok_or(Refusal::Stale)?;
        l.expires = crate::policy::cooldown::deadline_after(now, ttl);
        Ok((conn, *l))
    }

    /// Ends `owner`'s live lease; the connection is free at once.
    pub fn release(
        &mut self,
        owner: &OwnerHash,
        generation: u64,
        now: Instant,
    ) -> Result<ConnKey, Refusal> {
        let conn = self.check(owner, generation, now)?;
        self.active.remove(&conn);
        Ok(conn)
    }

    /// `conn`'s record (generation and live lease) for the store.
    pub fn record(&self, conn: ConnKey, now: Instant) -> LeaseRecord {
        LeaseRecord {
            conn,
            generation: self.generations.get(&conn).copied().unwrap_or(0),
            lease: self.holder(conn, now).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    const TTL: Duration = Duration::from_secs(600);

    fn owner(n: u8) -> OwnerHash {
        OwnerHash([n; 32])
    }

    #[test]
    fn acquire_gives_one_owner_per_connection_and_raises_the_generation() {
        let c = ManualClock::new();
        let mut t = Leases::default();
        let a = t
            .acquire(ConnKey::new(0, 0), owner(1), TTL, c.now())
            .unwrap();
        assert_eq!(a.generation, 1);
        assert_eq!(
            t.acquire(ConnKey::new(0, 0), owner(2), TTL, c.now()),
            Err(Refusal::Busy { until: a.expires }),
            "a second owner is refused while the first holds the connection"
        );
        let b = t
            .acquire(ConnKey::new(0, 1), owner(2), TTL, c.now())
            .unwrap();
        assert_eq!(b.generation, 1, "generations are per connection");
        assert_eq!(
            t.leased_by_other(ConnKey::new(0, 0), Some(&owner(2)), c.now()),
            Some(a.expires)
        );
        assert_eq!(
            t.leased_by_other(ConnKey::new(0, 0), Some(&owner(1)), c.now()),
            None
        );
        assert_eq!(
            t.leased_by_other(ConnKey::new(0, 0), None, c.now()),
            Some(a.expires)
        );
        t.release(&owner(1), 1, c.now()).unwrap();
        let again = t
            .acquire(ConnKey::new(0, 0), owner(3), TTL, c.now())
            .unwrap();
        assert_eq!(
            again.generation, 2,
            "a new acquire fences the old generation"
        );
        assert_eq!(t.check(&owner(1), 1, c.now()), Err(Refusal::Stale));
    }

    #[test]
    fn a_reload_keeps_the_leases_of_kept_connections_and_drops_removed_ones() {
        let c = ManualClock::new();
        let mut t = Leases::default();
        t.acquire(ConnKey::new(0, 0), owner(1), TTL, c.now())
            .unwrap();
        t.acquire(ConnKey::new(0, 1), owner(2), TTL, c.now())
            .unwrap();
        // Connection (0, 1) was removed.
        t.retain(|k| k.slot.0 == 0);
        assert_eq!(t.check(&owner(1), 1, c.now()), Ok(ConnKey::new(0, 0)));
        assert_eq!(t.check(&owner(2), 1, c.now()), Err(Refusal::Stale));
        let again = t.acquire(ConnKey::new(0, 0), owner(3), TTL, c.now());
        assert!(again.is_err(), "still held by its owner");
    }

    #[test]
    fn renew_extends_and_expiry_frees_the_connection() {
        let c = ManualClock::new();
        let mut t = Leases::default();
        t.acquire(ConnKey::new(0, 0), owner(1), TTL, c.now())
            .unwrap();
        c.advance(Duration::from_secs(500));
        let (conn, l) = t.renew(&owner(1), 1, TTL, c.now()).unwrap();
        assert_eq!(conn, ConnKey::new(0, 0));
        assert_eq!(l.expires, c.now() + TTL);
        c.advance(Duration::from_secs(599));
        assert_eq!(t.check(&owner(1), 1, c.now()), Ok(ConnKey::new(0, 0)));
        c.advance(Duration::from_secs(1));
        assert_eq!(
            t.check(&owner(1), 1, c.now()),
            Err(Refusal::Stale),
            "expired at ttl"
        );
        assert_eq!(t.renew(&owner(1), 1, TTL, c.now()), Err(Refusal::Stale));
        assert!(t.holder(ConnKey::new(0, 0), c.now()).is_none());
        assert!(
            t.acquire(ConnKey::new(0, 0), owner(2), TTL, c.now())
                .is_ok()
        );
    }

    #[test]
    fn stale_generation_and_wrong_owner_are_refused() {
        let c = ManualClock::new();
        let mut t = Leases::default();
        t.acquire(ConnKey::new(1, 0), owner(1), TTL, c.now())
            .unwrap();
        assert_eq!(t.check(&owner(1), 2, c.now()), Err(Refusal::Stale));
        assert_eq!(t.check(&owner(1), 0, c.now()), Err(Refusal::Stale));
        assert_eq!(t.check(&owner(9), 1, c.now()), Err(Refusal::Stale));
        assert_eq!(t.release(&owner(9), 1, c.now()), Err(Refusal::Stale));
        assert_eq!(t.release(&owner(1), 1, c.now()), Ok(ConnKey::new(1, 0)));
        assert_eq!(
            t.release(&owner(1), 1, c.now()),
            Err(Refusal::Stale),
            "released once"
        );
    }

    #[test]
    fn restore_drops_expired_leases_and_keeps_generations() {
        let c = ManualClock::new();
        let live = Lease {
            owner: owner(1),
            generation: 4,
            expires: c.now() + TTL,
        };
        let dead = Lease {
            owner: owner(2),
            generation: 7,
            expires: c.now(),
        };
        let t = Leases::restore(
            [
                LeaseRecord {
                    conn: ConnKey::new(0, 0),
                    generation: 4,
                    lease: Some(live),
                },
                LeaseRecord {
                    conn: ConnKey::new(0, 1),
                    generation: 7,
                    lease: Some(dead),
                },
            ],
            c.now(),
        );
        assert_eq!(t.holder(ConnKey::new(0, 0), c.now()), Some(&live));
        assert!(t.holder(ConnKey::new(0, 1), c.now()).is_none());
        let mut t = t;
        let next = t
            .acquire(ConnKey::new(0, 1), owner(3), TTL, c.now())
            .unwrap();
        assert_eq!(
            next.generation, 8,
            "generations never repeat after a restart"
        );
    }

    #[test]
    fn tokens_are_vlo_and_43_base64url_chars_and_only_their_hash_is_kept() {
        let rng = ring::rand::SystemRandom::new();
        let (token, hash) = mint_owner(&rng).unwrap();
        assert!(token.starts_with("vlo_"), "{token}");
        assert_eq!(token.len(), 4 + 43, "{token}");
        assert!(
            token[4..]
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(OwnerHash::of_token(&token), Some(hash));
        let sha = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
        assert_eq!(hash.0.as_slice(), sha.as_ref(), "the SHA-256 of the token");
        assert!(!hash.hex().contains(&token[4..]));
        assert_eq!(OwnerHash::from_hex(&hash.hex()), Some(hash));
        assert_eq!(hash.fingerprint().len(), 8);
        let (other, _) = mint_owner(&rng).unwrap();
        assert_ne!(token, other);
        assert_eq!(OwnerHash::of_token("vlo_short"), None);
        assert_eq!(
            OwnerHash::of_token(&format!("vlo_{}", "+".repeat(43))),
            None
        );
        assert_eq!(
            OwnerHash::of_token(&format!("xyz_{}", "a".repeat(43))),
            None
        );
    }

    #[test]
    fn base64url_matches_rfc4648_vectors() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg");
        assert_eq!(base64url(b"fo"), "Zm8");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foobar"), "Zm9vYmFy");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
    }
}
