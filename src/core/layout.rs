//! Provider/connection layouts across config reloads. Live state is held in vectors indexed
//! like `Config::providers[p].connections[c]`; a reload that adds, removes or reorders
//! providers or connections moves every kept entry (matched by provider id, then connection
//! id within its provider) to its new position, starts new ones fresh and drops removed ones.
//!
//! Each applied reload stamps the new config with the next layout generation
//! (`Config::layout`) and records one [`Remap`] from the previous generation. Work started
//! under an older generation (an admitted ticket, an attempt's in-flight guard, a held gate
//! permit) carries its generation and indices; [`History::locate`] translates them to the
//! current layout — the same provider and connection by identity, or `None` when it was
//! removed — and costs nothing when the generation is current.
//!
//! Pure: no locks, no clock.

use crate::config::Config;

/// How one layout maps onto the next: for each old index its new index (`None`: removed),
/// and for each new index its old one (`None`: added).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Remap {
    /// Old provider index → new provider index.
    providers: Vec<Option<usize>>,
    /// Old (provider, connection) → the connection's new index within its (moved) provider.
    connections: Vec<Vec<Option<usize>>>,
    /// New provider index → old provider index.
    providers_back: Vec<Option<usize>>,
    /// New (provider, connection) → the connection's old index within its old provider.
    connections_back: Vec<Vec<Option<usize>>>,
}

impl Remap {
    /// Matches `old` and `new` by provider id, then by connection id within each kept
    /// provider.
    pub fn between(old: &Config, new: &Config) -> Self {
        let providers_back: Vec<Option<usize>> = new
            .providers
            .iter()
            .map(|p| old.providers.iter().position(|o| o.id == p.id))
            .collect();
        let connections_back: Vec<Vec<Option<usize>>> = new
            .providers
            .iter()
            .zip(&providers_back)
            .map(|(p, back)| {
                let old_p = back.map(|i| &old.providers[i]);
                p.connections
                    .iter()
                    .map(|c| old_p.and_then(|o| o.connections.iter().position(|x| x.id == c.id)))
                    .collect()
            })
            .collect();
        let mut providers = vec![None; old.providers.len()];
        let mut connections: Vec<Vec<Option<usize>>> = old
            .providers
            .iter()
            .map(|p| vec![None; p.connections.len()])
            .collect();
        for (np, back) in providers_back.iter().enumerate() {
            let Some(op) = *back else { continue };
            providers[op] = Some(np);
            for (nc, ob) in connections_back[np].iter().enumerate() {
                if let Some(oc) = *ob {
                    connections[op][oc] = Some(nc);
                }
            }
        }
        Self {
            providers,
            connections,
            providers_back,
            connections_back,
        }
    }

    /// Where old provider `p` went (`None`: removed, or an unknown index).
    pub fn provider(&self, p: usize) -> Option<usize> {
        self.providers.get(p).copied().flatten()
    }

    /// Where old connection (`p`, `c`) went (`None`: it or its provider was removed).
    pub fn connection(&self, p: usize, c: usize) -> Option<(usize, usize)> {
        let np = self.provider(p)?;
        let nc = self.connections.get(p)?.get(c).copied().flatten()?;
        Some((np, nc))
    }

    /// The old index of new provider `p` (`None`: added).
    pub fn provider_from(&self, p: usize) -> Option<usize> {
        self.providers_back.get(p).copied().flatten()
    }

    /// The old index within its old provider of new connection (`p`, `c`) (`None`: added).
    pub fn connection_from(&self, p: usize, c: usize) -> Option<usize> {
        self.connections_back.get(p)?.get(c).copied().flatten()
    }

    /// Old provider indices that were removed.
    pub fn removed_providers(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.providers.len()).filter(|&p| self.providers[p].is_none())
    }

    /// Old (provider, connection) indices that were removed (with their provider or alone).
    pub fn removed_connections(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.connections
            .iter()
            .enumerate()
            .flat_map(move |(p, cs)| {
                cs.iter()
                    .enumerate()
                    .filter(|(_, n)| n.is_none())
                    .map(move |(c, _)| (p, c))
            })
    }

    /// Whether nothing moved, was added or was removed.
    pub fn is_identity(&self) -> bool {
        let same = |v: &[Option<usize>]| v.iter().enumerate().all(|(i, n)| *n == Some(i));
        self.providers.len() == self.providers_back.len()
            && same(&self.providers)
            && self.connections.len() == self.connections_back.len()
            && self
                .connections
                .iter()
                .zip(&self.connections_back)
                .all(|(a, b)| a.len() == b.len() && same(a))
    }

    /// `old` (indexed by old provider) rebuilt in the new order: kept entries move, new
    /// ones come from `fresh(new_index)`, removed ones are dropped.
    pub fn providers_vec<T>(&self, old: Vec<T>, fresh: impl FnMut(usize) -> T) -> Vec<T> {
        reorder(old, &self.providers_back, fresh)
    }

    /// `old` (the connections of old provider `op`, or nothing for a new provider) rebuilt in
    /// the order of new provider `np`.
    pub fn connections_vec<T>(
        &self,
        np: usize,
        old: Vec<T>,
        fresh: impl FnMut(usize) -> T,
    ) -> Vec<T> {
        match self.connections_back.get(np) {
            Some(back) => reorder(old, back, fresh),
            None => Vec::new(),
        }
    }
}

/// `old` in the order `back` gives (new index → old index), new entries from `fresh`.
fn reorder<T>(old: Vec<T>, back: &[Option<usize>], mut fresh: impl FnMut(usize) -> T) -> Vec<T> {
    let mut slots: Vec<Option<T>> = old.into_iter().map(Some).collect();
    back.iter()
        .enumerate()
        .map(|(n, o)| {
            o.and_then(|o| slots.get_mut(o).and_then(Option::take))
                .unwrap_or_else(|| fresh(n))
        })
        .collect()
}

/// Every [`Remap`] since start: `remaps[i]` maps generation `base + i` onto the next.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// The generation served at start (`Config::layout` of the first config, normally 0).
    base: u64,
    remaps: Vec<std::sync::Arc<Remap>>,
}

impl History {
    /// No steps yet; the config served at start has layout generation `base`.
    pub fn starting_at(base: u64) -> Self {
        Self {
            base,
            remaps: Vec::new(),
        }
    }

    /// The current generation (the start's plus the number of applied reloads).
    pub fn generation(&self) -> u64 {
        self.base
            .saturating_add(u64::try_from(self.remaps.len()).unwrap_or(u64::MAX))
    }

    /// Records the step from the current generation to the next; returns the new one.
    pub fn push(&mut self, remap: std::sync::Arc<Remap>) -> u64 {
        self.remaps.push(remap);
        self.generation()
    }

    /// Connection (`p`, `c`) of generation `from` in the current layout: the same indices
    /// when `from` is current, `None` when it (or its provider) was removed since.
    pub fn locate(&self, from: u64, p: usize, c: usize) -> Option<(usize, usize)> {
        let mut at = (p, c);
        for r in self.since(from) {
            at = r.connection(at.0, at.1)?;
        }
        Some(at)
    }

    /// Provider `p` of generation `from` in the current layout (`None`: removed since).
    pub fn locate_provider(&self, from: u64, p: usize) -> Option<usize> {
        let mut at = p;
        for r in self.since(from) {
            at = r.provider(at)?;
        }
        Some(at)
    }

    fn since(&self, from: u64) -> &[std::sync::Arc<Remap>] {
        let i = usize::try_from(from.saturating_sub(self.base)).unwrap_or(usize::MAX);
        self.remaps.get(i..).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};
    use std::path::Path;
    use std::sync::Arc;

    /// A config with providers `spec` = [(id, [connection ids])].
    fn layout_cfg(spec: &[(&str, &[&str])]) -> Config {
        let mut text = String::new();
        for (p, conns) in spec {
            text.push_str(&format!(
                "[[providers]]\nid = \"{p}\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n"
            ));
            for c in *conns {
                text.push_str(&format!(
                    "  [[providers.connections]]\n  id = \"{c}\"\n  auth = \"passthrough\"\n"
                ));
            }
        }
        from_str(&text, Path::new("t.toml"), &LoadEnv::fixed(&[], "/tmp")).unwrap()
    }

    #[test]
    fn kept_entries_are_matched_by_id_and_others_added_or_removed() {
        let old = layout_cfg(&[("a", &["a1", "a2"]), ("b", &["b1"])]);
        let new = layout_cfg(&[("n", &["n1"]), ("b", &["b0", "b1"]), ("a", &["a2"])]);
        let r = Remap::between(&old, &new);
        assert_eq!(r.provider(0), Some(2), "a moved to the end");
        assert_eq!(r.provider(1), Some(1));
        assert_eq!(r.connection(0, 0), None, "a1 was removed");
        assert_eq!(r.connection(0, 1), Some((2, 0)), "a2 is now first of a");
        assert_eq!(r.connection(1, 0), Some((1, 1)), "b1 moved behind b0");
        assert_eq!(r.provider_from(0), None, "n is new");
        assert_eq!(r.connection_from(1, 0), None, "b0 is new");
        assert_eq!(r.connection_from(1, 1), Some(0));
        assert_eq!(r.removed_connections().collect::<Vec<_>>(), [(0, 0)]);
        assert_eq!(r.removed_providers().count(), 0);
        assert!(!r.is_identity());
        assert!(Remap::between(&old, &old).is_identity());

        let moved = r.providers_vec(vec!["A", "B"], |_| "fresh");
        assert_eq!(moved, ["fresh", "B", "A"]);
        let b = r.connections_vec(1, vec!["b1"], |_| "fresh");
        assert_eq!(b, ["fresh", "b1"]);
        let a = r.connections_vec(2, vec!["a1", "a2"], |_| "fresh");
        assert_eq!(a, ["a2"]);
    }

    #[test]
    fn history_translates_across_generations_and_forgets_the_removed() {
        let g0 = layout_cfg(&[("a", &["a1"]), ("b", &["b1"])]);
        let g1 = layout_cfg(&[("b", &["b1"]), ("a", &["a1"])]);
        let g2 = layout_cfg(&[("x", &["x1"]), ("b", &["b1"])]);
        let mut h = History::default();
        assert_eq!(h.locate(0, 1, 0), Some((1, 0)), "current: unchanged");
        h.push(Arc::new(Remap::between(&g0, &g1)));
        h.push(Arc::new(Remap::between(&g1, &g2)));
        assert_eq!(h.generation(), 2);
        assert_eq!(h.locate(0, 1, 0), Some((1, 0)), "b1: 1 → 0 → 1");
        assert_eq!(h.locate(0, 0, 0), None, "a was removed in generation 2");
        assert_eq!(h.locate(1, 0, 0), Some((1, 0)));
        assert_eq!(h.locate_provider(0, 0), None);
        assert_eq!(h.locate_provider(1, 0), Some(1));
        assert_eq!(h.locate(2, 0, 0), Some((0, 0)), "current generation");

        let mut later = History::starting_at(7);
        assert_eq!(later.push(Arc::new(Remap::between(&g0, &g1))), 8);
        assert_eq!(later.locate(7, 0, 0), Some((1, 0)));
        assert_eq!(later.locate(8, 0, 0), Some((0, 0)));
    }
}
