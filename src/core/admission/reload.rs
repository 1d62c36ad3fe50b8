//! [`Gates::rekey`]: a config reload, including one that adds, removes or reorders
//! providers and connections. Gates are kept under the connection's stable key, so a kept
//! connection keeps its gates — permits held, waiters queued, lifetime counters — where they
//! are; new connections get fresh gates, removed ones are dropped (their waiters leave every
//! gate of their chain, their grant channels close and they go on without a permit). Permits booked before the reload are
//! released onto the same gates by key.
//!
//! A kept gate takes the new file's cap (`max_concurrent`, `model_concurrency`) with its
//! permits and waiters: a higher cap grants waiters at once, a lower one admits nobody new
//! until enough permits came back (nothing in flight is cut). A cap added to an uncapped
//! connection starts counting from the next admission; a cap removed lets its waiters go.
//! A protected connection without `max_concurrent` keeps its learned protection cap (at most
//! the new `protection_default_cap`); an explicit cap or protection turned off drops it.

use std::sync::Arc;

use super::{
    ConnLayout, ConnState, Gates, ProviderLayout, ProviderState, auto_cap_for, conn_state,
    layout_of,
};
use crate::config::keys::{ConnKey, KeyDiff};
use crate::config::{Config, Connection, Provider, QueueSettings};
use crate::policy::admission::{GateKind, GateState, effective_cap};

impl Gates {
    /// Serves the gates of `cfg` (already stamped with its keys), reached from the current
    /// config by the key changes `diff`. One critical section: no request sees half of it.
    pub(crate) fn rekey(&self, diff: &KeyDiff, cfg: &Config) {
        let layout = layout_of(cfg);
        let defaults = &cfg.resilience.queue;
        let mut st = self.inner.lock();
        for (key, _, _) in &diff.removed_connections {
            // Its waiters leave the provider's and the global queue too, or they would count
            // there as waiting ahead of every later arrival for good.
            st.leave_all(*key);
            if let Some(ps) = st.providers.get_mut(key.provider) {
                ps.conns.remove(key.slot);
            }
        }
        for (p, _) in &diff.removed_providers {
            st.providers.remove(*p);
        }
        for (i, p) in cfg.providers.iter().enumerate() {
            let pk = cfg.keys.provider(i);
            let Some(pl) = layout.providers.get(pk) else {
                continue;
            };
            let keys = cfg.keys.connections_of(i);
            let ps = match st.providers.get_mut(pk) {
                Some(ps) => ps,
                None => {
                    st.providers.insert(
                        pk,
                        ProviderState {
                            gate: None,
                            conns: Default::default(),
                        },
                    );
                    let Some(ps) = st.providers.get_mut(pk) else {
                        continue;
                    };
                    ps
                }
            };
            for (c, k) in p.connections.iter().zip(keys) {
                if ps.conns.get(k.slot).is_none()
                    && let Some(cl) = pl.conns.get(k.slot)
                {
                    ps.conns
                        .insert(k.slot, conn_state(c, cl, pl.profile, defaults));
                }
            }
            sync_provider_caps(ps, p, pl, keys, defaults);
        }
        *self.inner.layout.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(layout);
        // A raised or removed cap may admit waiters now.
        let now = self.inner.clock.now();
        for key in st.connection_keys(None) {
            st.pump_connection(key, now);
        }
    }
}

/// Gives `gate` the cap `cap` (`None` drops the gate), keeping its permits and waiters.
fn sync_gate(gate: &mut Option<GateState>, kind: GateKind, cap: Option<u32>) {
    match (gate.as_mut(), cap) {
        (Some(g), Some(c)) => g.cap = Some(c),
        (Some(_), None) => *gate = None,
        (None, Some(c)) => *gate = Some(GateState::new(kind, Some(c))),
        (None, None) => {}
    }
}

/// The provider's gate and every connection's gates at the caps `p` (facts `pl`) now says.
fn sync_provider_caps(
    ps: &mut ProviderState,
    p: &Provider,
    pl: &ProviderLayout,
    keys: &[ConnKey],
    defaults: &QueueSettings,
) {
    sync_gate(&mut ps.gate, GateKind::Provider, p.max_concurrent);
    for (c, k) in p.connections.iter().zip(keys) {
        if let (Some(cs), Some(cl)) = (ps.conns.get_mut(k.slot), pl.conns.get(k.slot)) {
            sync_connection_caps(cs, c, cl, defaults);
        }
    }
}

fn sync_connection_caps(
    cs: &mut ConnState,
    c: &Connection,
    cl: &ConnLayout,
    defaults: &QueueSettings,
) {
    cs.auto = auto_cap_for(c, cl, defaults, cs.auto.take());
    let cap = effective_cap(c.max_concurrent, cs.auto.as_ref()).map(|(cap, _)| cap);
    sync_gate(&mut cs.gate, GateKind::Connection, cap);
    cs.models.retain(|m, _| c.model_concurrency.contains_key(m));
    for (m, cap) in &c.model_concurrency {
        let mut slot = cs.models.remove(m);
        sync_gate(&mut slot, GateKind::Model, Some(*cap));
        if let Some(g) = slot {
            cs.models.insert(m.clone(), g);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use super::super::Gates;
    use crate::clock::SystemClock;
    use crate::config::keys::{ConnKey, Registry};
    use crate::config::{Config, LoadEnv, from_str};
    use crate::policy::OutcomeClass;
    use crate::policy::admission::CapSource;

    /// Provider `p` (api_key: protected queue, 5 s wait) with `conns` = [(id, extra keys)],
    /// stamped generation `generation`.
    fn cfg(conns: &[(&str, &str)], generation: u64) -> Config {
        let mut text = String::from(
            "[resilience.queue]\nmax_wait = \"5s\"\nmax_queue_depth = 3\n[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"https://api.example.com\"\nprofile = \"api_key\"\n",
        );
        for (id, extra) in conns {
            text.push_str(&format!(
                "  [[providers.connections]]\n  id = \"{id}\"\n  auth = {{ env = \"K\" }}\n  {extra}\n"
            ));
        }
        let env = LoadEnv::fixed(&[("K", "secret-key-123")], "/tmp");
        let mut c = from_str(&text, Path::new("t.toml"), &env).unwrap();
        c.generation = generation;
        c
    }

    /// Gates for `first` (stamped by `reg`, as the core does).
    fn gates(reg: &mut Registry, first: &Config) -> Gates {
        let mut c = first.clone();
        reg.stamp(&mut c);
        Gates::new(&c, Arc::new(SystemClock))
    }

    /// A reload to `to`, stamped by `reg` (the connection "c" keeps its key throughout).
    fn step(g: &Gates, reg: &mut Registry, to: &Config) {
        let mut to = to.clone();
        let diff = reg.stamp(&mut to);
        g.rekey(&diff, &to);
    }

    /// The key of the connection named "c" (the first one every test starts with).
    const C: ConnKey = ConnKey::new(0, 0);

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_moves_with_its_connection_and_goes_on_when_it_is_removed() {
        let c0 = cfg(&[("c", "max_concurrent = 1")], 0);
        let mut reg = Registry::default();
        let g = gates(&mut reg, &c0);
        let q = c0.resilience.queue.clone();
        let held = g.acquire(C, "m", &q).await.unwrap();
        assert!(held.holds_permit());
        let waiting = {
            let (g, q) = (g.clone(), q.clone());
            tokio::spawn(async move { g.acquire(C, "m", &q).await })
        };
        settle().await;
        assert!(!waiting.is_finished(), "queued behind the held permit");

        // "n" goes in front: "c" (with its permit and its waiter) moves to index 1.
        let c1 = cfg(
            &[("n", "max_concurrent = 1"), ("c", "max_concurrent = 1")],
            1,
        );
        step(&g, &mut reg, &c1);
        let views: Vec<(String, u32, usize)> = g
            .views()
            .into_iter()
            .map(|v| (v.connection, v.in_flight, v.queued))
            .collect();
        assert_eq!(views, [("n".into(), 0, 0), ("c".into(), 1, 1)]);
        drop(held);
        settle().await;
        let granted = waiting.await.unwrap().unwrap();
        assert!(
            granted.holds_permit(),
            "the released permit went to c's waiter"
        );

        // Now "c" is removed while a second waiter queues on it: it goes on at once, without
        // a permit, instead of waiting out max_wait or failing.
        let second = {
            let (g, q) = (g.clone(), q.clone());
            tokio::spawn(async move { g.acquire(C, "m", &q).await })
        };
        settle().await;
        assert!(!second.is_finished());
        let c2 = cfg(&[("n", "max_concurrent = 1")], 2);
        step(&g, &mut reg, &c2);
        let t = crate::clock::Clock::now(&SystemClock);
        let out = second.await.unwrap().unwrap();
        assert_eq!(crate::clock::Clock::now(&SystemClock), t, "no time passed");
        assert!(out.without_permit() && !out.holds_permit());
        drop(granted);
        assert_eq!(g.views().len(), 1);
        assert_eq!(g.views()[0].in_flight, 0);
    }

    /// Provider `p` with `max_concurrent = 1` and passthrough connections `conns`.
    fn provider_capped(conns: &[&str], generation: u64) -> Config {
        let mut text = String::from(
            "[resilience.queue]\nmax_wait = \"5s\"\n[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"https://api.example.com\"\nmax_concurrent = 1\n",
        );
        for id in conns {
            text.push_str(&format!(
                "  [[providers.connections]]\n  id = \"{id}\"\n  auth = \"passthrough\"\n"
            ));
        }
        let env = LoadEnv::fixed(&[], "/tmp");
        let mut c = from_str(&text, Path::new("t.toml"), &env).unwrap();
        c.generation = generation;
        c
    }

    #[tokio::test(start_paused = true)]
    async fn a_removed_connections_waiter_leaves_the_provider_queue_too() {
        let c0 = provider_capped(&["c1", "c2"], 0);
        let mut reg = Registry::default();
        let g = gates(&mut reg, &c0);
        let q = c0.resilience.queue.clone();
        let (c1, c2) = (ConnKey::new(0, 0), ConnKey::new(0, 1));
        let held = g.acquire(c1, "m", &q).await.unwrap();
        assert!(held.holds_permit(), "the provider's one permit");
        let waiting = {
            let (g, q) = (g.clone(), q.clone());
            tokio::spawn(async move { g.acquire(c1, "m", &q).await })
        };
        settle().await;
        assert!(!waiting.is_finished(), "queued on the provider gate");

        // c1 leaves: its waiter goes on without a permit, and leaves the provider's queue.
        step(&g, &mut reg, &provider_capped(&["c2"], 1));
        let out = waiting.await.unwrap().unwrap();
        assert!(out.without_permit());
        drop(held);
        assert!(
            g.try_acquire(c2, "m", &q).is_some(),
            "nobody waits ahead of c2 on the provider gate any more"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_gate_takes_the_new_cap_with_its_permits_and_waiters() {
        let c0 = cfg(&[("c", "max_concurrent = 1")], 0);
        let mut reg = Registry::default();
        let g = gates(&mut reg, &c0);
        let q = c0.resilience.queue.clone();
        let held = g.acquire(C, "m", &q).await.unwrap();
        let waiting = {
            let (g, q) = (g.clone(), q.clone());
            tokio::spawn(async move { g.acquire(C, "m", &q).await })
        };
        settle().await;
        assert!(!waiting.is_finished(), "queued at cap 1");

        // Raised to 2: the waiter is granted at once, the first permit still held.
        let c1 = cfg(&[("c", "max_concurrent = 2")], 1);
        step(&g, &mut reg, &c1);
        settle().await;
        let second = waiting.await.unwrap().unwrap();
        assert!(second.holds_permit());
        let v = &g.views()[0];
        assert_eq!((v.cap, v.in_flight, v.queued), (Some(2), 2, 0));

        // Lowered to 1 with 2 in flight: nothing is cut, nobody new gets in until one is back.
        let c2 = cfg(&[("c", "max_concurrent = 1")], 2);
        step(&g, &mut reg, &c2);
        assert_eq!(g.views()[0].in_flight, 2);
        assert!(g.try_acquire(C, "m", &q).is_none(), "over the new cap");
        drop(held);
        assert!(g.try_acquire(C, "m", &q).is_none(), "1 in flight = the cap");
        drop(second);
        assert!(g.try_acquire(C, "m", &q).is_some());

        // Cap removed from this protected (api_key) connection: its gate stays at the
        // protection default cap.
        let c3 = cfg(&[("c", "")], 3);
        step(&g, &mut reg, &c3);
        let v = &g.views()[0];
        assert_eq!(
            (v.cap, v.effective_cap, v.cap_source),
            (
                None,
                Some(crate::policy::admission::DEFAULT_PROTECTION_CAP),
                CapSource::Default
            )
        );

        // Protection off as well: no gate is listed any more.
        let c4 = cfg(&[("c", "rate_limit_protection = false")], 4);
        let mut c4 = c4;
        c4.resilience.queue.auto_enable_api_key_connections = false;
        step(&g, &mut reg, &c4);
        assert!(g.views().is_empty(), "{:?}", g.views());
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_keeps_a_learned_protection_cap_and_an_explicit_cap_replaces_it() {
        let c0 = cfg(&[("c", "")], 0);
        let mut reg = Registry::default();
        let g = gates(&mut reg, &c0);
        let q = c0.resilience.queue.clone();
        let held: Vec<_> = (0..3).map(|_| g.try_acquire(C, "m", &q).unwrap()).collect();
        g.observe_outcome(C, OutcomeClass::ConcurrencyLimited, false);
        let cap = |g: &Gates| {
            let v = &g.views()[0];
            (v.cap, v.effective_cap, v.cap_source)
        };
        assert_eq!(cap(&g), (None, Some(2), CapSource::Learned));

        // A new connection in front: "c" moves and keeps what it learned.
        let c1 = cfg(&[("n", ""), ("c", "")], 1);
        step(&g, &mut reg, &c1);
        assert_eq!(g.views()[1].effective_cap, Some(2));
        assert_eq!(g.views()[1].cap_source, CapSource::Learned);

        // An explicit cap wins and the learned one is gone.
        let c2 = cfg(&[("n", ""), ("c", "max_concurrent = 5")], 2);
        step(&g, &mut reg, &c2);
        let v = &g.views()[1];
        assert_eq!(
            (v.cap, v.effective_cap, v.cap_source),
            (Some(5), Some(5), CapSource::Config)
        );
        drop(held);
    }
}
