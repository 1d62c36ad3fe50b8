//! The inference proxy: hyper server, routes, request lifecycle, upstream client, SSE relay
//! and client-dialect errors (DESIGN §2 "proxy/").

pub mod body;
pub mod dialect;
pub mod forward;
pub mod headers;
pub mod relay;
pub mod routes;
pub mod server;
pub mod upstream;

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
}

impl ProxyState {
    /// Bundles the handler state.
    pub fn new(core: Core, upstreams: upstream::Upstreams, hard_stop: CancellationToken) -> Self {
        Self {
            core,
            upstreams,
            hard_stop,
        }
    }
}

/// Shared handler state.
pub type Shared = Arc<ProxyState>;
