//! [`Gates::relayout`]: a config reload that adds, removes or reorders providers and
//! connections moves every kept connection's gates — permits held, waiters queued, lifetime
//! counters — to its new position; new connections get fresh gates, removed ones are dropped
//! (their waiters' grant channels close and they go on without a permit). Permits booked
//! under the old layout are released onto the same gates by identity (`State::here`).
//!
//! The caps of kept gates do not change here: a reload that changes a kept provider's or
//! connection's `max_concurrent` or `model_concurrency` is refused (restart needed), so a
//! kept gate's booked permits always match its cap.

use std::sync::Arc;

use super::{Gates, Layout, conn_state, layout_of, provider_state};
use crate::config::Config;
use crate::core::layout::Remap;

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
        }
        st.providers = moved;
        st.history.push(Arc::clone(remap));
        st.generation = cfg.layout;
        *self.inner.layout.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(Layout {
            generation: cfg.layout,
            providers: layout,
        });
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
}
