//! Requests held until a quota reset (a combo's `hold_until_reset`): a registry of the holds
//! in progress, so the console and the admin API can say "held until 14:05" while the
//! request waits. A hold is registered by [`Core::begin_hold`] and removed when its
//! [`HoldGuard`] drops (the hold ended, or the client went away).

use std::sync::Mutex;

use crate::core::Core;
use crate::snapshot::HeldView;

/// The holds in progress, in the order they began.
#[derive(Debug, Default)]
pub struct Holds {
    live: Mutex<Vec<HeldView>>,
}

impl Holds {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<HeldView>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The holds in progress, oldest first.
    pub fn views(&self) -> Vec<HeldView> {
        self.lock().clone()
    }
}

/// Keeps one hold listed until dropped.
pub struct HoldGuard {
    core: Core,
    request_id: u64,
}

impl Drop for HoldGuard {
    fn drop(&mut self) {
        self.core
            .inner
            .holds
            .lock()
            .retain(|h| h.request_id != self.request_id);
        self.core.mark_dirty();
    }
}

impl Core {
    /// Lists `view` as held until its guard drops.
    pub fn begin_hold(&self, view: HeldView) -> HoldGuard {
        let request_id = view.request_id;
        self.inner.holds.lock().push(view);
        self.mark_dirty();
        HoldGuard {
            core: self.clone(),
            request_id,
        }
    }

    /// The holds in progress (the snapshot's `held`).
    pub fn held(&self) -> Vec<HeldView> {
        self.inner.holds.views()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clock::ManualClock;
    use crate::config::{LoadEnv, from_str};

    #[test]
    fn a_hold_is_listed_until_its_guard_drops() {
        let env = LoadEnv::fixed(&[], "/tmp");
        let cfg = from_str(
            "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n",
            std::path::Path::new("t.toml"),
            &env,
        )
        .unwrap();
        let core = Core::new(Arc::new(cfg), Arc::new(ManualClock::new()), None);
        let view = |id| HeldView {
            request_id: id,
            model: "fast".into(),
            until_unix_ms: 5_000,
            ..Default::default()
        };
        let a = core.begin_hold(view(1));
        let b = core.begin_hold(view(2));
        assert_eq!(core.snapshot().held.len(), 2);
        drop(a);
        let ids: Vec<u64> = core.held().iter().map(|h| h.request_id).collect();
        assert_eq!(ids, vec![2]);
        drop(b);
        assert!(core.snapshot().held.is_empty());
    }
}
