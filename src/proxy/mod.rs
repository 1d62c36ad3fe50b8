//! The inference proxy: hyper server, routes, the request path as stages (read the request,
//! dispatch over candidates, one attempt at a time, commit the head, relay), the upstream
//! client, the SSE guards and client-dialect errors. `docs/ARCHITECTURE.md` walks through it.

pub mod attempt;
pub mod body;
pub mod commit;
pub mod continuation;
pub mod continuer;
pub mod dialect;
pub mod dispatch;
pub mod forward;
pub mod headers;
pub mod injected;
pub mod leases;
pub mod outcome;
pub mod probe;
pub mod relay;
pub mod request;
pub mod response;
pub mod route;
pub mod routes;
pub mod server;
pub mod sniff;
pub mod sse;
pub mod translated;
pub mod turn;
pub mod upstream;
pub mod usage;

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::core::Core;

/// Everything a request handler needs.
pub struct ProxyState {
    /// The core.
    pub core: Core,
    /// Upstream clients per provider.
    pub upstreams: upstream::Upstreams,
    /// Cancelled when in-flight streams must end now (drain deadline passed).
    pub hard_stop: CancellationToken,
    /// (provider, beta value) pairs already logged as dropped (A24: log once).
    dropped_betas: std::sync::Mutex<std::collections::HashSet<(String, String)>>,
}

impl ProxyState {
    /// Bundles the handler state.
    pub fn new(core: Core, upstreams: upstream::Upstreams, hard_stop: CancellationToken) -> Self {
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
