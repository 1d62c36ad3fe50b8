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
