//! The inference proxy: the request path as stages in folders — `serve/` (accept a
//! connection, route, run one request), `request/` (read and check what the client sent),
//! `dispatch/` (plan and walk the candidates), `attempt/` (one upstream attempt, the upstream
//! clients), `respond/` (commit the head, relay, continue a broken stream) — over shared
//! pieces: the routes, client-dialect errors, headers, translation seams, SSE guards, the
//! empty-turn rule, usage counting and session leases. `docs/ARCHITECTURE.md` walks through it.

// The stages of a request, in order; each imports the stages after it and the shared pieces
// below, never back (the architecture test checks it).
pub mod attempt;
pub mod dispatch;
pub mod request;
pub mod respond;
pub mod serve;

// Shared pieces the stages use.
pub mod dialect;
pub mod headers;
pub mod leases;
pub mod route;
pub mod sse;
pub mod translated;
pub mod turn;
pub mod usage;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::core::Core;

/// Everything a request handler needs.
pub struct ProxyState {
    /// The core.
    pub core: Core,
    /// Upstream clients per provider.
    pub upstreams: attempt::upstream::Upstreams,
    /// Cancelled when in-flight streams must end now (drain deadline passed).
    pub hard_stop: CancellationToken,
    /// (provider, beta value) pairs already logged as dropped (logged once).
    dropped_betas: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

impl ProxyState {
    /// Bundles the handler state.
    pub fn new(
        core: Core,
        upstreams: attempt::upstream::Upstreams,
        hard_stop: CancellationToken,
    ) -> Self {
        Self {
            core,
            upstreams,
            hard_stop,
            dropped_betas: Default::default(),
        }
    }

    /// Applies a provider's `anthropic_beta_allowlist` to outgoing headers, logging each
    /// dropped value once per provider.
    pub fn filter_betas(&self, h: &mut http::HeaderMap, provider: &str, allow: &[String]) {
        let Some(v) = h
            .get("anthropic-beta")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
        else {
            return;
        };
        let (kept, dropped) = headers::filter_betas(&v, allow);
        match kept.and_then(|k| http::HeaderValue::from_str(&k).ok()) {
            Some(k) => {
                h.insert("anthropic-beta", k);
            }
            None => {
                h.remove("anthropic-beta");
            }
        }
        if dropped.is_empty() {
            return;
        }
        let mut seen = self.dropped_betas.lock().unwrap_or_else(|e| e.into_inner());
        for d in dropped {
            if seen.len() < 10_000 && seen.insert((provider.to_string(), d.clone())) {
                tracing::info!(provider, beta = %d, "dropping an anthropic-beta value this provider does not allow (logged once)");
            }
        }
    }
}

/// Shared handler state.
pub type Shared = Arc<ProxyState>;
