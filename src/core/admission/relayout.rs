//! [`Gates::relayout`]: a config reload that adds, removes or reorders providers and
//! connections moves every kept connection's gates — permits held, waiters queued, lifetime
//! counters — to its new position; new connections get fresh gates, removed ones are dropped
//! (their waiters' grant channels close and they go on without a permit). Permits booked
//! under the old layout are released onto the same gates by identity (`State::here`).
//!
//! A kept gate takes the new file's cap (`max_concurrent`, `model_concurrency`) with its
//! permits and waiters: a higher cap grants waiters at once, a lower one admits nobody new
//! until enough permits came back (nothing in flight is cut). A cap added to an uncapped
//! connection starts counting from the next admission; a cap removed lets its waiters go.
//! A protected connection without `max_concurrent` keeps its learned protection cap (at most
//! the new `protection_default_cap`); an explicit cap or protection turned off drops it.

use std::sync::Arc;

use super::{
    ConnLayout, ConnState, Gates, Layout, ProviderLayout, ProviderState, auto_cap_for, conn_state,
    layout_of, provider_state,
};
use crate::config::{Config, Connection, Provider, QueueSettings};
use crate::core::layout::Remap;
use crate::policy::admission::{GateKind, GateState, effective_cap};

impl Gates {
    /// Serves the layout of `cfg` (generation `cfg.layout`), reached from the current one
    /// by `remap`. One critical section: no request sees half of it.
    pub(crate) fn relayout(&self, remap: &Arc<Remap>, cfg: &Config) {
        let layout = layout_of(cfg);
        let defaults = &cfg.resilience.queue;
        let mut st = self.inner.lock();
        let old = std::mem::take(&mut st.providers);
        let mut moved = remap.providers_vec(old, |np| {
            provider_state(&cfg.providers[np], &layout[np], defaults)
        });
        for (np, ps) in moved.iter_mut().enumerate() {
            let (p, pl) = (&cfg.providers[np], &layout[np]);
            let conns = std::mem::take(&mut ps.conns);
            ps.conns = remap.connections_vec(np, conns, |nc| {
                conn_state(&p.connections[nc], &pl.conns[nc], pl.profile, defaults)
            });
            sync_provider_caps(ps, p, pl, defaults);
        }
        st.providers = moved;
        st.history.push(Arc::clone(remap));
        st.generation = cfg.layout;
        *self.inner.layout.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Layout {
            generation: cfg.layout,
            providers: layout,
        });
        // A raised or removed cap may admit waiters now.
        let now = self.inner.clock.now();
        for i in 0..st.providers.len() {
            for j in 0..st.providers[i].conns.len() {
                st.pump_connection(i, j, now);
            }
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
    defaults: &QueueSettings,
) {
    sync_gate(&mut ps.gate, GateKind::Provider, p.max_concurrent);
    for ((cs, c), cl) in ps.conns.iter_mut().zip(&p.connections).zip(&pl.conns) {
        sync_connection_caps(cs, c, cl, defaults);
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
    use crate::config::{Config, LoadEnv, from_str};
    use crate::core::layout::Remap;
    use crate::policy::OutcomeClass;
    use crate::policy::admission::CapSource;

    /// Provider `p` (api_key: protected queue, 5 s wait) with `conns` = [(id, extra keys)],
    /// stamped layout generation `layout`.
    fn cfg(conns: &[(&str, &str)], layout: u64) -> Config {
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
        c.layout = layout;
        c
    }

    fn step(g: &Gates, from: &Config, to: &Config) {
        g.relayout(&Arc::new(Remap::between(from, to)), to);
    }

    async fn settle() {
        for _ in 0..20 {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_moves_with_its_connection_and_goes_on_when_it_is_removed() {
        let c0 = cfg(&[("c", "max_concurrent = 1")], 0);
        let g = Gates::new(&c0, Arc::new(SystemClock));
        let q = c0.resilience.queue.clone();
        let held = g.acquire(0, 0, "m", &q).await.unwrap();
        assert!(held.holds_permit());
        let waiting = {
            let (g, q) = (g.clone(), q.clone());
            tokio::spawn(async move { g.acquire(0, 0, "m", &q).await })
        };
        settle().await;
        assert!(!waiting.is_finished(), "queued behind the held permit");

        // "n" goes in front: "c" (with its permit and its waiter) moves to index 1.
        let c1 = cfg(
            &[("n", "max_concurrent = 1"), ("c", "max_concurrent = 1")],
            1,
        );
        step(&g, &c0, &c1);
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
            tokio::spawn(async move { g.acquire(0, 1, "m", &q).await })
        };
        settle().await;
        assert!(!second.is_finished());
        let c2 = cfg(&[("n", "max_concurrent = 1")], 2);
        step(&g, &c1, &c2);
        let t = crate::clock::Clock::now(&SystemClock);
        let out = second.await.unwrap().unwrap();
        assert_eq!(crate::clock::Clock::now(&SystemClock), t, "no time passed");
        assert!(out.without_permit() && !out.holds_permit());
        drop(granted);
        assert_eq!(g.views().len(), 1);
        assert_eq!(g.views()[0].in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_kept_gate_takes_the_new_cap_with_its_permits_and_waiters() {
        let c0 = cfg(&[("c", "max_concurrent = 1")], 0);
        let g = Gates::new(&c0, Arc::new(SystemClock));
        let q = c0.resilience.queue.clone();
        let held = g.acquire(0, 0, "m", &q).await.unwrap();
        let waiting = {
            let (g, q) = (g.clone(), q.clone());
            tokio::spawn(async move { g.acquire(0, 0, "m", &q).await })
        };
        settle().await;
        assert!(!waiting.is_finished(), "queued at cap 1");

        // Raised to 2: the waiter is granted at once, the first permit still held.
        let c1 = cfg(&[("c", "max_concurrent = 2")], 1);
        step(&g, &c0, &c1);
        settle().await;
        let second = waiting.await.unwrap().unwrap();
        assert!(second.holds_permit());
        let v = &g.views()[0];
        assert_eq!((v.cap, v.in_flight, v.queued), (Some(2), 2, 0));

        // Lowered to 1 with 2 in flight: nothing is cut, nobody new gets in until one is back.
        let c2 = cfg(&[("c", "max_concurrent = 1")], 2);
        step(&g, &c1, &c2);
        assert_eq!(g.views()[0].in_flight, 2);
        assert!(g.try_acquire(0, 0, "m", &q).is_none(), "over the new cap");
        drop(held);
        assert!(
            g.try_acquire(0, 0, "m", &q).is_none(),
            "1 in flight = the cap"
        );
        drop(second);
        assert!(g.try_acquire(0, 0, "m", &q).is_some());

        // Cap removed from this protected (api_key) connection: its gate stays at the
        // protection default cap.
        let c3 = cfg(&[("c", "")], 3);
        step(&g, &c2, &c3);
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
        step(&g, &c3, &c4);
        assert!(g.views().is_empty(), "{:?}", g.views());
    }

    #[tokio::test(start_paused = true)]
    async fn a_reload_keeps_a_learned_protection_cap_and_an_explicit_cap_replaces_it() {
        let c0 = cfg(&[("c", "")], 0);
        let g = Gates::new(&c0, Arc::new(SystemClock));
        let q = c0.resilience.queue.clone();
        let held: Vec<_> = (0..3)
            .map(|_| g.try_acquire(0, 0, "m", &q).unwrap())
            .collect();
        g.observe_outcome(0, 0, 0, OutcomeClass::ConcurrencyLimited, false);
        let cap = |g: &Gates| {
            let v = &g.views()[0];
            (v.cap, v.effective_cap, v.cap_source)
        };
        assert_eq!(cap(&g), (None, Some(2), CapSource::Learned));

        // A new connection in front: "c" moves and keeps what it learned.
        let c1 = cfg(&[("n", ""), ("c", "")], 1);
        step(&g, &c0, &c1);
        assert_eq!(g.views()[1].effective_cap, Some(2));
        assert_eq!(g.views()[1].cap_source, CapSource::Learned);

        // An explicit cap wins and the learned one is gone.
        let c2 = cfg(&[("n", ""), ("c", "max_concurrent = 5")], 2);
        step(&g, &c1, &c2);
        let v = &g.views()[1];
        assert_eq!(
            (v.cap, v.effective_cap, v.cap_source),
            (Some(5), Some(5), CapSource::Config)
        );
        drop(held);
    }
}
