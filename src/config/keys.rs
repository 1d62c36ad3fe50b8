//! Stable keys for providers and connections: the identity every piece of live state is kept
//! under, for the life of the process.
//!
//! A config names a provider by its `id` and a connection by its `id` within that provider.
//! The [`Registry`] interns those names into small copyable keys: a [`ProviderKey`] and, for
//! each connection, a [`ConnKey`] (its provider's key and a [`ConnSlot`] within it). A key is
//! a slot number in the state tables ([`Keyed`]), so a lookup is an index, and it never
//! changes while the name stays in the config: a reload that reorders providers or
//! connections moves nothing. A name that leaves the config has its state dropped; if it
//! comes back later it gets a new key and fresh state, so work started before (a ticket, a
//! held permit) can never touch the state of the newcomer.
//!
//! Each [`Config`] carries the keys of its providers and connections in a [`KeyTable`]
//! (positional — key = position — as loaded, which is what the registry hands out for the
//! first config). The core stamps every config it serves through [`Registry::stamp`], which
//! also reports what a reload added and removed.
//!
//! Pure: no locks, no clock.

use std::fmt;

use super::Config;

/// A provider's stable key: its slot in every per-provider state table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderKey(pub u32);

/// A connection's stable slot within its provider: its index in that provider's
/// per-connection state tables.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnSlot(pub u32);

/// A connection's stable key: its provider's key and its slot within that provider.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnKey {
    /// The provider's key.
    pub provider: ProviderKey,
    /// The connection's slot within the provider.
    pub slot: ConnSlot,
}

impl ConnKey {
    /// The key of connection `slot` of provider `provider` (plain numbers, as tests and the
    /// first config use them).
    pub const fn new(provider: u32, slot: u32) -> Self {
        Self {
            provider: ProviderKey(provider),
            slot: ConnSlot(slot),
        }
    }
}

impl fmt::Display for ConnKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}/{}", self.provider.0, self.slot.0)
    }
}

/// Something usable as an index into a [`Keyed`] table.
pub trait Key: Copy {
    /// The slot number.
    fn index(self) -> usize;
}

impl Key for ProviderKey {
    fn index(self) -> usize {
        self.0 as usize
    }
}

impl Key for ConnSlot {
    fn index(self) -> usize {
        self.0 as usize
    }
}

/// A state table keyed by stable keys: a slot per key ever handed out, `None` for a key whose
/// name left the config (its state was dropped). Looking up a removed key finds nothing.
#[derive(Debug, Clone)]
pub struct Keyed<K, T> {
    slots: Vec<Option<T>>,
    _key: std::marker::PhantomData<K>,
}

impl<K, T> Default for Keyed<K, T> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            _key: std::marker::PhantomData,
        }
    }
}

impl<K: Key, T> Keyed<K, T> {
    /// The state of `k`, `None` when `k` was removed or never added.
    pub fn get(&self, k: K) -> Option<&T> {
        self.slots.get(k.index()).and_then(Option::as_ref)
    }

    /// [`Self::get`], mutable.
    pub fn get_mut(&mut self, k: K) -> Option<&mut T> {
        self.slots.get_mut(k.index()).and_then(Option::as_mut)
    }

    /// Puts `value` under `k` (growing the table as needed), replacing what was there.
    pub fn insert(&mut self, k: K, value: T) {
        let i = k.index();
        if self.slots.len() <= i {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some(value);
    }

    /// Drops the state of `k` and returns it.
    pub fn remove(&mut self, k: K) -> Option<T> {
        self.slots.get_mut(k.index()).and_then(Option::take)
    }

    /// Every live entry, in key order.
    pub fn values(&self) -> impl Iterator<Item = &T> {
        self.slots.iter().flatten()
    }

    /// Every live entry, mutable, in key order.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.slots.iter_mut().flatten()
    }
}

impl<T> Keyed<ConnSlot, T> {
    /// Every live entry with its slot, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (ConnSlot, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((ConnSlot(i as u32), v.as_ref()?)))
    }
}

impl<T> Keyed<ProviderKey, T> {
    /// Every live entry with its key, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (ProviderKey, &T)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, v)| Some((ProviderKey(i as u32), v.as_ref()?)))
    }
}

impl<'a, K, T> IntoIterator for &'a Keyed<K, T> {
    type Item = &'a T;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Option<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter().flatten()
    }
}

impl<'a, K, T> IntoIterator for &'a mut Keyed<K, T> {
    type Item = &'a mut T;
    type IntoIter = std::iter::Flatten<std::slice::IterMut<'a, Option<T>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.slots.iter_mut().flatten()
    }
}

/// Tests read a slot by its number; a missing one panics there, as a failed assertion would.
#[cfg(test)]
impl<K, T> std::ops::Index<usize> for Keyed<K, T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        self.slots[i].as_ref().expect("a live slot")
    }
}

#[cfg(test)]
impl<K, T> std::ops::IndexMut<usize> for Keyed<K, T> {
    fn index_mut(&mut self, i: usize) -> &mut T {
        self.slots[i].as_mut().expect("a live slot")
    }
}

impl<K: Key, T> FromIterator<(K, T)> for Keyed<K, T> {
    fn from_iter<I: IntoIterator<Item = (K, T)>>(iter: I) -> Self {
        let mut out = Self::default();
        for (k, v) in iter {
            out.insert(k, v);
        }
        out
    }
}

/// The keys of one config's providers and connections, index-aligned with
/// `Config::providers` and each provider's `connections`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyTable {
    providers: Vec<ProviderKey>,
    connections: Vec<Vec<ConnKey>>,
}

impl KeyTable {
    /// Key = position: the keys of a config as loaded (and the registry's for the first one).
    pub fn positional(providers: &[super::Provider]) -> Self {
        Self {
            providers: (0..providers.len())
                .map(|p| ProviderKey(p as u32))
                .collect(),
            connections: providers
                .iter()
                .enumerate()
                .map(|(p, pr)| {
                    (0..pr.connections.len())
                        .map(|c| ConnKey::new(p as u32, c as u32))
                        .collect()
                })
                .collect(),
        }
    }

    /// The key of provider `p` (position in `Config::providers`); `ProviderKey(u32::MAX)`,
    /// which no table holds, for a position out of range.
    pub fn provider(&self, p: usize) -> ProviderKey {
        self.providers
            .get(p)
            .copied()
            .unwrap_or(ProviderKey(u32::MAX))
    }

    /// The key of connection `c` of provider `p` (positions); a key no table holds for a
    /// position out of range.
    pub fn connection(&self, p: usize, c: usize) -> ConnKey {
        self.connections
            .get(p)
            .and_then(|cs| cs.get(c))
            .copied()
            .unwrap_or(ConnKey::new(u32::MAX, u32::MAX))
    }

    /// The position in `Config::providers` of the provider keyed `k`, `None` when this
    /// config does not hold it.
    pub fn provider_position(&self, k: ProviderKey) -> Option<usize> {
        self.providers.iter().position(|x| *x == k)
    }

    /// [`Self::position`], checking `hint` (the positions `k` had in the config it came
    /// from) first: one comparison when no reload moved it.
    pub fn find(&self, k: ConnKey, hint: (usize, usize)) -> Option<(usize, usize)> {
        if self.connection(hint.0, hint.1) == k {
            return Some(hint);
        }
        self.position(k)
    }

    /// [`Self::provider_position`], checking `hint` first.
    pub fn find_provider(&self, k: ProviderKey, hint: usize) -> Option<usize> {
        if self.provider(hint) == k {
            return Some(hint);
        }
        self.provider_position(k)
    }

    /// The keys of provider `p`'s connections, in config order (empty for a position out
    /// of range).
    pub fn connections_of(&self, p: usize) -> &[ConnKey] {
        self.connections.get(p).map(Vec::as_slice).unwrap_or(&[])
    }

    /// The positions (provider, connection) of the connection keyed `k`, `None` when this
    /// config does not hold it.
    pub fn position(&self, k: ConnKey) -> Option<(usize, usize)> {
        let p = self.provider_position(k.provider)?;
        let c = self.connections.get(p)?.iter().position(|x| *x == k)?;
        Some((p, c))
    }
}

/// What one [`Registry::stamp`] changed: keys whose names are new and keys whose names left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyDiff {
    /// Providers new in this config.
    pub added_providers: Vec<ProviderKey>,
    /// Providers gone from this config, with the ids they had (their connections are
    /// listed in `removed_connections` too).
    pub removed_providers: Vec<(ProviderKey, String)>,
    /// Connections new in this config (those of a new provider included).
    pub added_connections: Vec<ConnKey>,
    /// Connections gone from this config, with the provider and connection ids they had.
    pub removed_connections: Vec<(ConnKey, String, String)>,
}

impl KeyDiff {
    /// Whether nothing was added or removed.
    pub fn is_empty(&self) -> bool {
        self.added_providers.is_empty()
            && self.removed_providers.is_empty()
            && self.added_connections.is_empty()
            && self.removed_connections.is_empty()
    }
}

/// Interns provider and connection names into stable keys (see the module doc). One per
/// process, owned by the core.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    providers: Vec<ProviderEntry>,
}

#[derive(Debug, Clone)]
struct ProviderEntry {
    id: String,
    live: bool,
    connections: Vec<(String, bool)>,
}

impl Registry {
    /// Gives `cfg` the keys of its names (new keys for new names), marks the names it no
    /// longer holds as gone, and returns what changed.
    pub fn stamp(&mut self, cfg: &mut Config) -> KeyDiff {
        let mut diff = KeyDiff::default();
        let mut table = KeyTable::default();
        let mut seen = vec![false; self.providers.len()];
        for p in &cfg.providers {
            let pk = self.provider_key(&p.id, &mut diff);
            if let Some(s) = seen.get_mut(pk.index()) {
                *s = true;
            }
            let entry = &mut self.providers[pk.index()];
            let mut conn_seen = vec![false; entry.connections.len()];
            let mut keys = Vec::with_capacity(p.connections.len());
            for c in &p.connections {
                let slot = conn_slot(entry, &c.id);
                let key = ConnKey { provider: pk, slot };
                match conn_seen.get_mut(slot.index()) {
                    Some(s) => *s = true,
                    None => diff.added_connections.push(key),
                }
                keys.push(key);
            }
            for (i, (id, live)) in entry.connections.iter_mut().enumerate() {
                if *live && !conn_seen.get(i).copied().unwrap_or(true) {
                    *live = false;
                    diff.removed_connections.push((
                        ConnKey {
                            provider: pk,
                            slot: ConnSlot(i as u32),
                        },
                        p.id.clone(),
                        id.clone(),
                    ));
                }
            }
            table.providers.push(pk);
            table.connections.push(keys);
        }
        self.retire_unseen(&seen, &mut diff);
        cfg.keys = table;
        diff
    }

    /// The live key of provider `id`, a new one when there is none.
    fn provider_key(&mut self, id: &str, diff: &mut KeyDiff) -> ProviderKey {
        if let Some(i) = self.providers.iter().position(|e| e.live && e.id == id) {
            return ProviderKey(i as u32);
        }
        let k = ProviderKey(self.providers.len() as u32);
        self.providers.push(ProviderEntry {
            id: id.to_string(),
            live: true,
            connections: Vec::new(),
        });
        diff.added_providers.push(k);
        k
    }

    /// Marks every live provider not in `seen` (and its connections) as gone.
    fn retire_unseen(&mut self, seen: &[bool], diff: &mut KeyDiff) {
        for (i, e) in self.providers.iter_mut().enumerate() {
            if !e.live || seen.get(i).copied().unwrap_or(true) {
                continue;
            }
            e.live = false;
            let pk = ProviderKey(i as u32);
            diff.removed_providers.push((pk, e.id.clone()));
            for (j, (id, live)) in e.connections.iter_mut().enumerate() {
                if std::mem::replace(live, false) {
                    diff.removed_connections.push((
                        ConnKey {
                            provider: pk,
                            slot: ConnSlot(j as u32),
                        },
                        e.id.clone(),
                        id.clone(),
                    ));
                }
            }
        }
    }

    /// `provider/connection` of `k` as configured, `None` for a key never handed out.
    pub fn name(&self, k: ConnKey) -> Option<(&str, &str)> {
        let p = self.providers.get(k.provider.index())?;
        let (c, _) = p.connections.get(k.slot.index())?;
        Some((&p.id, c))
    }
}

/// The live slot of connection `id` in `entry`, a new one when there is none.
fn conn_slot(entry: &mut ProviderEntry, id: &str) -> ConnSlot {
    if let Some(i) = entry
        .connections
        .iter()
        .position(|(c, live)| *live && c == id)
    {
        return ConnSlot(i as u32);
    }
    entry.connections.push((id.to_string(), true));
    ConnSlot((entry.connections.len() - 1) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};

    /// Providers `(id, [connection ids])`.
    fn cfg(providers: &[(&str, &[&str])]) -> Config {
        let mut text = String::new();
        for (id, conns) in providers {
            text.push_str(&format!(
                "[[providers]]\nid = \"{id}\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n"
            ));
            for c in *conns {
                text.push_str(&format!(
                    "  [[providers.connections]]\n  id = \"{c}\"\n  auth = \"passthrough\"\n"
                ));
            }
        }
        from_str(
            &text,
            std::path::Path::new("t.toml"),
            &LoadEnv::fixed(&[], "/tmp"),
        )
        .expect("test config")
    }

    #[test]
    fn the_first_config_gets_its_positions_as_keys() {
        let mut c = cfg(&[("a", &["a1", "a2"]), ("b", &["b1"])]);
        let loaded = c.keys.clone();
        let mut reg = Registry::default();
        let diff = reg.stamp(&mut c);
        assert_eq!(c.keys, loaded);
        assert_eq!(diff.added_providers.len(), 2);
        assert_eq!(diff.added_connections.len(), 3);
        assert!(diff.removed_connections.is_empty());
        assert_eq!(reg.name(c.keys.connection(1, 0)), Some(("b", "b1")));
    }

    #[test]
    fn a_reorder_keeps_every_key_and_changes_nothing() {
        let mut reg = Registry::default();
        let mut c0 = cfg(&[("a", &["a1", "a2"]), ("b", &["b1"])]);
        reg.stamp(&mut c0);
        let mut c1 = cfg(&[("b", &["b1"]), ("a", &["a2", "a1"])]);
        let diff = reg.stamp(&mut c1);
        assert!(diff.is_empty(), "{diff:?}");
        assert_eq!(c1.keys.connection(0, 0), c0.keys.connection(1, 0));
        assert_eq!(c1.keys.connection(1, 0), c0.keys.connection(0, 1));
        assert_eq!(c1.keys.position(c0.keys.connection(0, 0)), Some((1, 1)));
    }

    #[test]
    fn a_name_that_leaves_and_comes_back_gets_a_new_key() {
        let mut reg = Registry::default();
        let mut c0 = cfg(&[("a", &["a1", "a2"]), ("b", &["b1"])]);
        reg.stamp(&mut c0);
        let mut c1 = cfg(&[("a", &["a1"])]);
        let diff = reg.stamp(&mut c1);
        assert_eq!(diff.removed_providers, [(ProviderKey(1), "b".to_string())]);
        let removed: Vec<_> = diff
            .removed_connections
            .iter()
            .map(|(k, p, c)| (*k, p.as_str(), c.as_str()))
            .collect();
        assert_eq!(
            removed,
            [
                (ConnKey::new(0, 1), "a", "a2"),
                (ConnKey::new(1, 0), "b", "b1")
            ]
        );
        assert_eq!(c1.keys.position(ConnKey::new(0, 1)), None);
        let mut c2 = cfg(&[("a", &["a1", "a2"]), ("b", &["b1"])]);
        let diff = reg.stamp(&mut c2);
        assert_eq!(c2.keys.connection(0, 0), ConnKey::new(0, 0), "kept");
        assert_eq!(c2.keys.connection(0, 1), ConnKey::new(0, 2), "a new slot");
        assert_eq!(c2.keys.provider(1), ProviderKey(2), "a new provider key");
        assert_eq!(diff.added_providers, [ProviderKey(2)]);
        assert_eq!(diff.added_connections.len(), 2);
    }

    #[test]
    fn a_keyed_table_finds_nothing_under_a_removed_key() {
        let mut t: Keyed<ConnSlot, &str> = Keyed::default();
        t.insert(ConnSlot(2), "x");
        assert_eq!(t.get(ConnSlot(0)), None);
        assert_eq!(t.get(ConnSlot(2)), Some(&"x"));
        assert_eq!(t.remove(ConnSlot(2)), Some("x"));
        assert_eq!(t.get(ConnSlot(2)), None);
        assert_eq!(t.get(ConnSlot(99)), None);
    }
}
