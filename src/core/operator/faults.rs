//! Live injected faults ("rehearse an outage"): the core's [`FaultSet`] behind a short lock,
//! resolved against the config. Never persisted: a restart starts with none. Operators
//! change it only through `Control` ([`Control::inject_fault`](crate::core::operator::control::Control),
//! `clear_faults`); the request path asks [`Core::fault_for`] once per attempt.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::clock::unix_ms;
use crate::core::Core;
use crate::core::operator::control::ControlError;
use crate::policy::fault::{
    Fault, FaultKind, FaultParams, FaultSelector, FaultSet, FaultTarget, check_duration, parse_kind,
};
use crate::snapshot::FaultView;

/// The faults of one sluice (a field of the core).
#[derive(Debug, Default)]
pub struct Faults(Mutex<FaultSet>);

impl Faults {
    pub(crate) fn lock(&self) -> MutexGuard<'_, FaultSet> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// What an operator asks to inject (the admin API body, the console picker).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultRequest {
    /// `provider` or `provider/connection`.
    pub target: String,
    /// `latency`, `429`, `500`, `503`, `529`, `reset`, `stall` or `zombie`.
    pub kind: String,
    /// Kind parameters (delay, retry_after, frames).
    pub params: FaultParams,
    /// How long it lasts; `None` is 60 s. At least 1 s, at most 10 min.
    pub duration: Option<Duration>,
}

fn view(f: &Fault, now: crate::clock::Instant, wall_ms: u64) -> FaultView {
    let remaining = f.remaining(now);
    let ms = u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX);
    FaultView {
        id: f.id,
        target: f.label.clone(),
        kind: f
            .kind
            .kind_word()
            .map_or_else(|| crate::snapshot::Word::Other(f.kind.word()), Into::into),
        description: f.kind.describe(),
        remaining_ms: ms,
        expires_at_unix_ms: wall_ms.saturating_add(ms),
    }
}

impl Core {
    /// The fault applying to an attempt on `cand`'s connection now, counted in the
    /// `sluice_injected_faults` metric when there is one.
    pub fn fault_for(&self, cand: &crate::policy::select::Candidate) -> Option<FaultKind> {
        let now = self.clock().now();
        let faults = self.inner.faults.lock();
        let cfg = self.config();
        let kind = faults.active_for(cand.key, now).map(|f| f.kind)?;
        drop(faults);
        if let Some((pi, ci)) = cand.positions_in(&cfg)
            && let Some(p) = cfg.providers.get(pi)
            && let Some(c) = p.connections.get(ci)
        {
            self.metrics().observe_injected(&p.id, &c.id, &kind.word());
        }
        Some(kind)
    }

    /// The active faults at the clock's `now`, oldest first.
    pub fn fault_views(&self) -> Vec<FaultView> {
        let now = self.clock().now();
        let wall = unix_ms(self.clock().wall());
        self.inner
            .faults
            .lock()
            .active(now)
            .iter()
            .map(|f| view(f, now, wall))
            .collect()
    }

    /// Validates and injects `req` (replacing a fault on the same target).
    pub(crate) fn inject_fault(&self, req: &FaultRequest) -> Result<FaultView, ControlError> {
        let target = self.resolve_fault_target(&req.target)?;
        let kind = parse_kind(&req.kind, &req.params).map_err(invalid)?;
        let duration = check_duration(req.duration).map_err(invalid)?;
        let now = self.clock().now();
        let wall = unix_ms(self.clock().wall());
        let label = req.target.trim().to_string();
        let f = self
            .inner
            .faults
            .lock()
            .inject(target, &label, kind, duration, now);
        self.mark_dirty();
        Ok(view(&f, now, wall))
    }

    /// Removes the faults `sel` names; returns the ones removed.
    pub(crate) fn clear_faults(&self, sel: &FaultSelector) -> Vec<FaultView> {
        let now = self.clock().now();
        let wall = unix_ms(self.clock().wall());
        let gone = self.inner.faults.lock().clear(sel, now);
        self.mark_dirty();
        gone.iter().map(|f| view(f, now, wall)).collect()
    }

    fn resolve_fault_target(&self, target: &str) -> Result<FaultTarget, ControlError> {
        let target = target.trim();
        if target.is_empty() {
            return Err(ControlError::Invalid {
                field: "target".into(),
                message: "name a provider or provider/connection, e.g. \"anthropic/key-a\"".into(),
            });
        }
        let (pid, cid) = match target.split_once('/') {
            Some((p, c)) => (p, Some(c)),
            None => (target, None),
        };
        let cfg = self.config();
        let provider = cfg
            .providers
            .iter()
            .position(|p| p.id == pid)
            .ok_or_else(|| ControlError::UnknownProvider(pid.to_string()))?;
        let connection = match cid {
            None => None,
            Some(c) => Some(
                cfg.providers[provider]
                    .connections
                    .iter()
                    .position(|x| x.id == c)
                    .ok_or_else(|| ControlError::UnknownConnection(c.to_string()))?,
            ),
        };
        Ok(FaultTarget {
            provider: cfg.keys.provider(provider),
            connection: connection.map(|c| cfg.keys.connection(provider, c).slot),
        })
    }
}

fn invalid(e: crate::policy::fault::FaultError) -> ControlError {
    ControlError::Invalid {
        field: e.field,
        message: e.message,
    }
}
