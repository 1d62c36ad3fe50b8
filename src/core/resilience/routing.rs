//! Routing order: the order one request tries its candidates in.
//!
//! 1. [`Core::order_candidates`]: a combo's targets by the combo's strategy, then each
//!    provider's connections (within one target) by the provider's `connection_strategy` —
//!    both through `policy::strategy::order`, fed with live per-connection load, except
//!    `reset_aware` and `headroom`, which order by each connection's binding quota window
//!    (`policy::headroom::preflight`; a combo target stands for its best connection).
//! 2. [`Core::order_by_affinity`]: the connection a session is pinned to goes first (§2a).
//!
//! [`Core::pin_session`] records the pin after a successful response head.

use crate::support::fast_map::FastMap;

use crate::clock::unix_ms;
use crate::config::keys::ProviderKey;
use crate::config::{Config, Strategy};
use crate::core::{ConnLoad, Core};
use crate::policy::headroom::Binding;
use crate::policy::headroom::preflight;
use crate::policy::latency::Summary;
use crate::policy::select::{Candidate, Plan};
use crate::policy::strategy::{self, SplitMix64, StrategyState, TargetStat};

/// Strategy state (round-robin rotation per combo and per provider) and the process's seeded
/// randomness.
pub(crate) struct Routing {
    /// Per combo name.
    pub(crate) states: FastMap<String, StrategyState>,
    /// Per provider index, for `connection_strategy`.
    pub(crate) connection_states: FastMap<ProviderKey, StrategyState>,
    pub(crate) rng: SplitMix64,
    /// Time-to-first-byte and outcome windows for `p2c`'s latency weight.
    pub(crate) latency: crate::core::resilience::latency::LatencyStats,
}

impl Routing {
    /// Fresh state with the strategies' randomness seeded by `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self {
            states: FastMap::default(),
            connection_states: FastMap::default(),
            rng: SplitMix64::new(seed),
            latency: Default::default(),
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
    health: Option<Summary>,
) -> TargetStat {
    let key = c.key;
    TargetStat {
        in_flight: u32::try_from(in_flight.get(&key).copied().unwrap_or(0)).unwrap_or(u32::MAX),
        cap: connection_cap(cfg, c),
        requests: attempts.get(&key).copied().unwrap_or(0),
        weight: strategy::DEFAULT_WEIGHT,
        health,
    }
}

/// Positions of `bindings` in `reset_aware` or `headroom` order (any other strategy: as
/// given).
fn order_bindings(strat: Strategy, bindings: &[Option<Binding>]) -> Vec<usize> {
    match strat {
        Strategy::ResetAware => preflight::order_bindings_reset_aware(bindings),
        Strategy::Headroom => preflight::order_bindings_headroom(bindings),
        _ => (0..bindings.len()).collect(),
    }
}

/// The binding that goes first under `strat` among one target's connections (the first of
/// equals); `None` when the target has no connection.
fn best_binding<'a>(
    strat: Strategy,
    bindings: impl Iterator<Item = Option<&'a Binding>>,
) -> Option<&'a Binding> {
    let mut best: Option<Option<&Binding>> = None;
    for b in bindings {
        let better = match best {
            None => true,
            Some(cur) if strat == Strategy::ResetAware => {
                preflight::reset_aware_key(b) < preflight::reset_aware_key(cur)
            }
            Some(cur) => preflight::headroom_key(b) > preflight::headroom_key(cur),
        };
        if better {
            best = Some(b);
        }
    }
    best.flatten()
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
    /// Orders a request's candidates (§0, §4): a combo's targets by its strategy, then
    /// within each target the provider's connections by its `connection_strategy` (config
    /// order for `priority`). Every candidate appears exactly once.
    pub fn order_candidates(&self, plan: &Plan) -> Vec<Candidate> {
        // Planned under a config a reload just replaced: keep the planned order rather than
        // weigh positions of the old config with the new one.
        let cfg = self.config();
        if !is_current(&cfg, &plan.candidates) {
            return plan.candidates.clone();
        }
        let by_target = self.order_targets(&cfg, plan);
        self.order_connections(&cfg, by_target)
    }

    /// Reorders the connections of each target by its provider's `connection_strategy`.
    fn order_connections(&self, cfg: &Config, cands: Vec<Candidate>) -> Vec<Candidate> {
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
            if let Some(order) = self.quota_order(strat, &group) {
                let mut slots: Vec<Option<Candidate>> = group.into_iter().map(Some).collect();
                out.extend(order.into_iter().filter_map(|i| slots.get_mut(i)?.take()));
                continue;
            }
            let healths = self.healths(strat, &group);
            let stats: Vec<TargetStat> = group
                .iter()
                .zip(healths)
                .map(|(c, h)| connection_stat(cfg, c, &in_flight, &attempts, h))
                .collect();
            let order = {
                let mut r = self.res();
                let weight = r.settings.p2c_latency_weight;
                let routing = &mut r.routing;
                let state = routing
                    .connection_states
                    .entry(group[0].key.provider)
                    .or_default();
                strategy::order_with_latency(strat, &stats, state, &mut routing.rng, weight)
            };
            let mut slots: Vec<Option<Candidate>> = group.into_iter().map(Some).collect();
            out.extend(order.into_iter().filter_map(|i| slots.get_mut(i)?.take()));
        }
        out
    }

    /// Orders a combo's targets by its strategy (§4) from live per-target stats
    /// (in-flight, attempts, cap, weight); each target's connections keep their order. A
    /// plain model is unchanged.
    fn order_targets(&self, cfg: &Config, plan: &Plan) -> Vec<Candidate> {
        let Some(combo) = plan.combo.as_deref().and_then(|n| cfg.combo(n)) else {
            return plan.candidates.clone();
        };
        if combo.strategy == Strategy::Priority || combo.targets.len() < 2 {
            return plan.candidates.clone();
        }
        if let Some(order) = self.quota_target_order(combo.strategy, combo.targets.len(), plan) {
            return order
                .into_iter()
                .flat_map(|ti| {
                    plan.candidates
                        .iter()
                        .filter(move |c| c.target == ti)
                        .cloned()
                })
                .collect();
        }
        let (in_flight, attempts) = self.connection_load();
        let firsts: Vec<Candidate> = (0..combo.targets.len())
            .filter_map(|ti| plan.candidates.iter().find(|c| c.target == ti).cloned())
            .collect();
        let healths = self.healths(combo.strategy, &firsts);
        let stats: Vec<TargetStat> = combo
            .targets
            .iter()
            .enumerate()
            .map(|(ti, t)| {
                let mine: Vec<&Candidate> =
                    plan.candidates.iter().filter(|c| c.target == ti).collect();
                // A target weighs as its first connection.
                let health = firsts
                    .iter()
                    .position(|c| c.target == ti)
                    .and_then(|k| healths.get(k).copied().flatten());
                let load = |m: &ConnLoad| {
                    mine.iter()
                        .map(|c| m.get(&c.key).copied().unwrap_or(0))
                        .sum::<u64>()
                };
                let cap = mine
                    .iter()
                    .map(|c| connection_cap(cfg, c))
                    .try_fold(0u32, |acc, c| c.map(|c| acc.saturating_add(c)));
                TargetStat {
                    in_flight: u32::try_from(load(&in_flight)).unwrap_or(u32::MAX),
                    cap: if mine.is_empty() { None } else { cap },
                    requests: load(&attempts),
                    weight: t.weight,
                    health,
                }
            })
            .collect();
        let order = {
            let mut r = self.res();
            let weight = r.settings.p2c_latency_weight;
            let routing = &mut r.routing;
            let state = routing.states.entry(combo.name.clone()).or_default();
            strategy::order_with_latency(combo.strategy, &stats, state, &mut routing.rng, weight)
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

    /// Each candidate's recent latency and errors, for `p2c` with a latency weight (all
    /// `None` for other strategies or with the weight off).
    fn healths(&self, strat: Strategy, cands: &[Candidate]) -> Vec<Option<Summary>> {
        let now = self.clock().now();
        let r = self.res();
        if strat != Strategy::P2c || r.settings.p2c_latency_weight == 0 {
            return vec![None; cands.len()];
        }
        cands
            .iter()
            .map(|c| r.routing.latency.health(c.key, &c.model, now))
            .collect()
    }

    /// Each candidate's binding quota window for its own model, now (wall clock).
    fn bindings(&self, cands: &[&Candidate]) -> Vec<Option<Binding>> {
        let now_ms = unix_ms(self.clock().wall());
        let r = self.res();
        cands
            .iter()
            .map(|c| {
                r.providers
                    .get(c.key.provider)?
                    .headroom
                    .get(c.key.slot)?
                    .state
                    .binding(Some(&c.model), now_ms)
            })
            .collect()
    }

    /// The `reset_aware` / `headroom` order of `cands` (positions); `None` for the other
    /// strategies.
    fn quota_order(&self, strat: Strategy, cands: &[Candidate]) -> Option<Vec<usize>> {
        if !matches!(strat, Strategy::ResetAware | Strategy::Headroom) {
            return None;
        }
        let refs: Vec<&Candidate> = cands.iter().collect();
        let bindings = self.bindings(&refs);
        Some(order_bindings(strat, &bindings))
    }

    /// The `reset_aware` / `headroom` order of a combo's `n` targets: each target stands for
    /// its best connection (soonest reset, or most left); `None` for the other strategies.
    fn quota_target_order(&self, strat: Strategy, n: usize, plan: &Plan) -> Option<Vec<usize>> {
        if !matches!(strat, Strategy::ResetAware | Strategy::Headroom) {
            return None;
        }
        let refs: Vec<&Candidate> = plan.candidates.iter().collect();
        let all = self.bindings(&refs);
        let best: Vec<Option<Binding>> = (0..n)
            .map(|ti| {
                let mine = plan
                    .candidates
                    .iter()
                    .zip(&all)
                    .filter(|(c, _)| c.target == ti)
                    .map(|(_, b)| b.as_ref());
                best_binding(strat, mine).cloned()
            })
            .collect();
        Some(order_bindings(strat, &best))
    }

    /// Moves the candidates on the connection `session` is pinned to (§2a) to the front,
    /// keeping the rest in order. Without a session or pin the order is unchanged.
    pub fn order_by_affinity(
        &self,
        mut cands: Vec<Candidate>,
        session: Option<&str>,
    ) -> Vec<Candidate> {
        let Some(key) = session else { return cands };
        let cfg = self.config();
        if !is_current(&cfg, &cands) {
            return cands;
        }
        let now = self.clock().now();
        let Some((pid, cid)) = self.res().affinity.pinned(key, now) else {
            return cands;
        };
        let pinned = |c: &Candidate| {
            cfg.providers.get(c.provider).is_some_and(|p| {
                p.id == pid && p.connections.get(c.connection).is_some_and(|x| x.id == cid)
            })
        };
        cands.sort_by_key(|c| !pinned(c));
        cands
    }

    /// Pins `session` to `cand`'s connection after a successful head (§2a; refreshes the
    /// TTL).
    pub fn pin_session(&self, session: &str, cand: &Candidate) {
        let mut r = self.res();
        let cfg = self.config();
        let Some((provider, connection)) = cand.positions_in(&cfg) else {
            return;
        };
        let (Some(p), Some(c)) = (
            cfg.providers.get(provider),
            cfg.providers
                .get(provider)
                .and_then(|p| p.connections.get(connection)),
        ) else {
            return;
        };
        let now = self.clock().now();
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

/// Whether the positions of `cands` are those of `cfg` (no reload moved them since they were
/// planned). Checked against the same config the ordering then reads.
fn is_current(cfg: &Config, cands: &[Candidate]) -> bool {
    cands
        .iter()
        .all(|c| cfg.keys.connection(c.provider, c.connection) == c.key)
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
            key: crate::config::keys::ConnKey::new(provider as u32, connection as u32),
        }
    }

    #[test]
    fn a_target_stands_for_its_best_connection() {
        let b = |remaining: f64, reset: Option<u64>| Binding {
            window: crate::policy::headroom::Window::FiveHour,
            model: None,
            remaining,
            reset_at_ms: reset,
            status: None,
            by_claim: false,
        };
        let (x, y) = (b(0.2, Some(100)), b(0.8, Some(5_000)));
        let all = [Some(&y), None, Some(&x)];
        let pick = |s| best_binding(s, all.iter().copied()).map(|b| b.remaining);
        assert_eq!(pick(Strategy::ResetAware), Some(0.2), "soonest reset");
        assert_eq!(pick(Strategy::Headroom), None, "unknown counts as full");
        let known = [Some(&x), Some(&y)];
        assert_eq!(
            best_binding(Strategy::Headroom, known.iter().copied()).map(|b| b.remaining),
            Some(0.8)
        );
        assert!(best_binding(Strategy::Headroom, std::iter::empty()).is_none());
        assert_eq!(
            order_bindings(Strategy::ResetAware, &[Some(y.clone()), Some(x.clone())]),
            vec![1, 0]
        );
        assert_eq!(
            order_bindings(Strategy::Priority, &[Some(y), Some(x)]),
            vec![0, 1]
        );
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
