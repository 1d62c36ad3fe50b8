//! `Control`: the single door for operator actions (DESIGN §2). The console, the admin API and
//! config reload all call it; nothing else mutates live state on an operator's behalf.
//!
//! The resilience actions (clear cooldowns, reset breakers, re-enable models, edit settings)
//! arrive with the resilience core; today it carries the shutdown request.

use tokio_util::sync::CancellationToken;

use super::Core;

/// Handle through which operators act on sluice.
#[derive(Clone)]
pub struct Control {
    core: Core,
    shutdown: CancellationToken,
}

impl Control {
    /// A door onto `core`; `shutdown` is cancelled to stop sluice.
    pub fn new(core: Core, shutdown: CancellationToken) -> Self {
        Self { core, shutdown }
    }

    /// Asks sluice to drain and stop (console `q`, SIGTERM).
    pub fn request_shutdown(&self) {
        self.shutdown.cancel();
    }

    /// The core this door acts on.
    pub fn core(&self) -> &Core {
        &self.core
    }
}
