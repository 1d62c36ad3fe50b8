//! Routing order: the order one request tries its candidates in.
//!
//! 1. [`Core::order_candidates`]: a combo's targets by the combo's strategy, then each
//!    provider's connections (within one target) by the provider's `connection_strategy` —
//!    both through `policy::strategy::order`, fed with live per-connection load.
//! 2. [`Core::order_by_affinity`]: the connection a session is pinned to goes first (§2a).
//!
//! [`Core::pin_session`] records the pin after a successful response head.

use std::collections::HashMap;

use super::{ConnLoad, Core};
use crate::config::{Config, Strategy};
use crate::policy::select::{Candidate, Plan};
use crate::policy::strategy::{self, SplitMix64, StrategyState, TargetStat};

/// Strategy state (round-robin rotation per combo and per provider) and the process's seeded
/// randomness.
pub(crate) struct Routing {
    /// Per combo name.
    pub(crate) states: HashMap<String, StrategyState>,
    /// Per provider index, for `connection_strategy`.
    pub(crate) connection_states: HashMap<usize, StrategyState>,
    pub(crate) rng: SplitMix64,
}

impl Routing {
    /// Fresh state with the strategies' randomness seeded by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            states: HashMap::new(),
            connection_states: HashMap::new(),
            rng: SplitMix64::new(seed),
        }
    }
}

/// The stricter of a connection's cap and its cap for `model` (§4); `None` = unlimited.
fn connection_cap(cfg: &Config, c: &Candidate) -> Option<u32> {
    let conn = cfg
        .providers
        .get(c.provider)
        .and_then(|p| p.connections.get(c.connection))?;
    let model_cap = conn.model_concurrency.get(&c.model).copied();
    match (conn.max_concurrent, model_cap) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Live numbers of one candidate's connection, for the strategies.
fn connection_stat(
    cfg: &Config,
    c: &Candidate,
    in_flight: &ConnLoad,
    attempts: &ConnLoad,
) -> TargetStat {
    let key = (c.provider, c.connection);
    TargetStat {
        in_flight: u32::try_from(in_flight.get(&key).copied().unwrap_or(0)).unwrap_or(u32::MAX),
        cap: connection_cap(cfg, c),
        requests: attempts.get(&key).copied().unwrap_or(0),
        weight: strategy::DEFAULT_WEIGHT,
    }
}

/// Splits `cands` into runs of one target on one provider (consecutive candidates that differ
/// only in their connection), in order.
fn groups(cands: Vec<Candidate>) -> Vec<Vec<Candidate>> {
    let mut out: Vec<Vec<Candidate>> = Vec::new();
    for c in cands {
        match out.last_mut() {
            Some(g) if g[0].target == c.target && g[0].provider == c.provider => g.push(c),
            _ => out.push(vec![c]),
        }
    }
    out
}

impl Core {
    /// Orders a request's candidates (spec §0, §4): a combo's targets by its strategy, then
    /// within each target the provider's connections by its `connection_strategy` (config
    /// order for `priority`). Every candidate appears exactly once.
    pub fn order_candidates(&self, plan: &Plan) -> Vec<Candidate> {
        let by_target = self.order_targets(plan);
        self.order_connections(by_target)
    }

    /// Reorders the connections of each target by its provider's `connection_strategy`.
    fn order_connections(&self, cands: Vec<Candidate>) -> Vec<Candidate> {
        let cfg = self.config().clone();
        let strategy_of = |c: &Candidate| {
            cfg.providers
                .get(c.provider)
                .map_or(Strategy::Priority, |p| p.connection_strategy)
        };
        if cands.iter().all(|c| strategy_of(c) == Strategy::Priority) {
            return cands;
        }
        let (in_flight, attempts) = self.connection_load();
        let mut out = Vec::with_capacity(cands.len());
        for group in groups(cands) {
            let strat = strategy_of(&group[0]);
            if strat == Strategy::Priority || group.len() < 2 {
                out.extend(group);
                continue;
            }
            let stats: Vec<TargetStat> = group
                .iter()
                .map(|c| connection_stat(&cfg, c, &in_flight, &attempts))
                .collect();
            let order = {
                let mut r = self.res();
                let routing = &mut r.routing;
                let state = routing
                    .connection_states
                    .entry(group[0].provider)
                    .or_default();
                strategy::order(strat, &stats, state, &mut routing.rng)
            };
            let mut slots: Vec<Option<Candidate>> = group.into_iter().map(Some).collect();
            out.extend(order.into_iter().filter_map(|i| slots.get_mut(i)?.take()));
        }
        out
    }

    /// Orders a combo's targets by its strategy (spec §4) from live per-target stats
    /// (in-flight, attempts, cap, weight); each target's connections keep their order. A
    /// plain model is unchanged.
    fn order_targets(&self, plan: &Plan) -> Vec<Candidate> {
        let cfg = self.config().clone();
        let Some(combo) = plan.combo.as_deref().and_then(|n| cfg.combo(n)) else {
            return plan.candidates.clone();
        };
        if combo.strategy == Strategy::Priority || combo.targets.len() < 2 {
            return plan.candidates.clone();
        }
        let (in_flight, attempts) = self.connection_load();
        let stats: Vec<TargetStat> = combo
            .targets
            .iter()
            .enumerate()
            .map(|(ti, t)| {
                let mine: Vec<&Candidate> =
                    plan.candidates.iter().filter(|c| c.target == ti).collect();
                let load = |m: &ConnLoad| {
                    mine.iter()
                        .map(|c| m.get(&(c.provider, c.connection)).copied().unwrap_or(0))
                        .sum::<u64>()
                };
                let cap = mine
                    .iter()
                    .map(|c| connection_cap(&cfg, c))
                    .try_fold(0u32, |acc, c| c.map(|c| acc.saturating_add(c)));
                TargetStat {
                    in_flight: u32::try_from(load(&in_flight)).unwrap_or(u32::MAX),
                    cap: if mine.is_empty() { None } else { cap },
                    requests: load(&attempts),
                    weight: t.weight,
                }
            })
            .collect();
        let order = {
            let mut r = self.res();
            let routing = &mut r.routing;
            let state = routing.states.entry(combo.name.clone()).or_default();
            strategy::order(combo.strategy, &stats, state, &mut routing.rng)
        };
        order
            .into_iter()
            .flat_map(|ti| {
                plan.candidates
                    .iter()
                    .filter(move |c| c.target == ti)
                    .cloned()
            })
            .collect()
    }

    /// Moves the candidates on the connection `session` is pinned to (§2a) to the front,
    /// keeping the rest in order. Without a session or pin the order is unchanged.
    pub fn order_by_affinity(
        &self,
        mut cands: Vec<Candidate>,
        session: Option<&str>,
    ) -> Vec<Candidate> {
        let Some(key) = session else { return cands };
        let now = self.clock().now();
        let Some((pid, cid)) = self.res().affinity.pinned(key, now) else {
            return cands;
        };
        let cfg = self.config().clone();
        let pinned = |c: &Candidate| {
            cfg.providers.get(c.provider).is_some_and(|p| {
                p.id == pid && p.connections.get(c.connection).is_some_and(|x| x.id == cid)
            })
        };
        cands.sort_by_key(|c| !pinned(c));
        cands
    }

    /// Pins `session` to a connection after a successful head (§2a; refreshes the TTL).
    pub fn pin_session(&self, session: &str, provider: usize, connection: usize) {
        let cfg = self.config().clone();
        let (Some(p), Some(c)) = (
            cfg.providers.get(provider),
            cfg.providers
                .get(provider)
                .and_then(|p| p.connections.get(connection)),
        ) else {
            return;
        };
        let now = self.clock().now();
        let mut r = self.res();
        let ttl = r.affinity.ttl();
        if ttl.is_zero() {
            return;
        }
        let before = r.affinity.pinned(session, now);
        r.affinity.pin(session, &p.id, &c.id, now);
        drop(r);
        // Persist new or moved pins; a refresh of the same pin is not worth a write each turn.
        if before
            .as_ref()
            .is_none_or(|(bp, bc)| bp != &p.id || bc != &c.id)
        {
            let until = crate::policy::cooldown::deadline_after(now, ttl);
            self.persist_pin(session, &p.id, &c.id, until);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(target: usize, provider: usize, connection: usize) -> Candidate {
        Candidate {
            provider,
            connection,
            model: "m".into(),
            rewrite: false,
            target,
        }
    }

    #[test]
    fn groups_split_on_target_and_provider() {
        let g = groups(vec![
            cand(0, 0, 0),
            cand(0, 0, 1),
            cand(1, 0, 0),
            cand(1, 1, 0),
        ]);
        let shape: Vec<usize> = g.iter().map(Vec::len).collect();
        assert_eq!(shape, vec![2, 1, 1]);
    }
}
