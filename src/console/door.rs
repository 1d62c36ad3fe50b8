//! `Door`: what the console acts through. In-process it is [`Control`] itself; an attached
//! console (`sluice console`) gets a remote door that sends each call to the admin API
//! endpoint wired to the same `Control` method (`crate::remote::door`). Either way one
//! operator action has one code path: the `Control` method behind it.

use super::settings::RuleLists;
use crate::config::Resilience;
use crate::core::operator::control::{
    ClearReport, ClearTarget, Control, ControlError, SettingsPatch,
};
use crate::core::operator::faults::FaultRequest;
use crate::core::operator::verify::{VerifyReport, VerifyTarget};
use crate::snapshot::FaultView;
use crate::snapshot::{RequestView, Snapshot};

/// The state of an attached console's connection to its sluice (an in-process console is
/// always [`Link::Live`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Link {
    /// Snapshots are arriving.
    Live,
    /// The connection dropped or could not be made; the console shows "reconnecting…" and
    /// its last snapshot until snapshots arrive again. The text says why (no secrets).
    Reconnecting(String),
}

/// Why a [`Door`] call did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DoorError {
    /// `Control` refused it (unknown id, invalid value).
    #[error("{0}")]
    Control(ControlError),
    /// The running sluice refused it (started `--readonly`, wrong admin token); the text is
    /// its reason.
    #[error("{0}")]
    Refused(String),
    /// The running sluice could not be reached or answered something unreadable.
    #[error("cannot reach sluice: {0}")]
    Unreachable(String),
}

impl From<ControlError> for DoorError {
    fn from(e: ControlError) -> Self {
        DoorError::Control(e)
    }
}

/// The settings the editor shows.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Settings in force (the file's, with the overrides applied).
    pub effective: Resilience,
    /// Operator overrides in force.
    pub overrides: SettingsPatch,
    /// The config file's settings (what a revert goes back to).
    pub file: Resilience,
    /// The error and restatement rules in force.
    pub rules: RuleLists,
    /// The config file's rules (what a revert goes back to).
    pub file_rules: RuleLists,
}

/// The operator actions the console can take, each one `Control` method (see the module
/// doc). Calls block until done; a remote door bounds each by a timeout.
pub trait Door: Send + Sync {
    /// [`Control::settings`] and [`Control::file_settings`].
    fn settings(&self) -> Result<Settings, DoorError>;
    /// [`Control::patch_settings`].
    fn patch_settings(&self, patch: &SettingsPatch) -> Result<(), DoorError>;
    /// [`Control::replace_settings`].
    fn replace_settings(&self, overrides: &SettingsPatch) -> Result<(), DoorError>;
    /// [`Control::revert_settings`].
    fn revert_settings(&self) -> Result<(), DoorError>;
    /// [`Control::reset_breakers`]: the provider ids reset.
    fn reset_breakers(&self, provider: Option<&str>) -> Result<Vec<String>, DoorError>;
    /// [`Control::clear_cooldowns`].
    fn clear_cooldowns(&self, target: &ClearTarget) -> Result<ClearReport, DoorError>;
    /// [`Control::reenable_model`]: whether a live lockout was removed.
    fn reenable_model(
        &self,
        provider: &str,
        connection: &str,
        model: &str,
    ) -> Result<bool, DoorError>;
    /// [`Control::inject_fault`]: the fault as injected.
    fn inject_fault(&self, req: &FaultRequest) -> Result<FaultView, DoorError>;
    /// [`Control::clear_faults`] of every fault: how many were removed.
    fn clear_faults(&self) -> Result<usize, DoorError>;
    /// [`Control::snapshot`].
    fn snapshot(&self) -> Result<Snapshot, DoorError>;
    /// [`Control::reload_config`]: the status-line summary of what changed. A refused
    /// reload (invalid file, restart-only key) is [`DoorError::Refused`] with the reason, its
    /// lines joined with ` | ` (the status bar is one line).
    fn reload_config(&self) -> Result<String, DoorError>;
    /// [`Control::request_log_page`]: at most `limit` request-log rows older than row
    /// `before_id` (the newest when `None`), newest first, each with its row id.
    fn request_log_page(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, RequestView)>, DoorError>;
    /// [`Control::verify`]: one probe, then the clear or reset when it passed. Takes up to
    /// the probe's timeout (`crate::proxy::attempt::probe::PROBE_TIMEOUT`): the console calls it off its
    /// event loop.
    fn verify(&self, target: &VerifyTarget, model: &str) -> Result<VerifyReport, DoorError>;
    /// The console's `q`: in-process [`Control::request_shutdown`] (sluice stops with its
    /// console); an attached console only leaves, the instance keeps running.
    fn request_shutdown(&self);
}

impl Door for Control {
    fn settings(&self) -> Result<Settings, DoorError> {
        let (effective, overrides) = Control::settings(self);
        Ok(Settings {
            effective,
            overrides,
            file: self.file_settings(),
            rules: RuleLists::from_listing(&self.rules()),
            file_rules: RuleLists::from_listing(&self.file_rules()),
        })
    }

    fn patch_settings(&self, patch: &SettingsPatch) -> Result<(), DoorError> {
        Control::patch_settings(self, patch)
            .map(drop)
            .map_err(DoorError::from)
    }

    fn replace_settings(&self, overrides: &SettingsPatch) -> Result<(), DoorError> {
        Control::replace_settings(self, overrides)
            .map(drop)
            .map_err(DoorError::from)
    }

    fn revert_settings(&self) -> Result<(), DoorError> {
        Control::revert_settings(self);
        Ok(())
    }

    fn reset_breakers(&self, provider: Option<&str>) -> Result<Vec<String>, DoorError> {
        Control::reset_breakers(self, provider).map_err(DoorError::from)
    }

    fn clear_cooldowns(&self, target: &ClearTarget) -> Result<ClearReport, DoorError> {
        Control::clear_cooldowns(self, target).map_err(DoorError::from)
    }

    fn reenable_model(
        &self,
        provider: &str,
        connection: &str,
        model: &str,
    ) -> Result<bool, DoorError> {
        Control::reenable_model(self, provider, connection, model).map_err(DoorError::from)
    }

    fn inject_fault(&self, req: &FaultRequest) -> Result<FaultView, DoorError> {
        Control::inject_fault(self, req).map_err(DoorError::from)
    }

    fn clear_faults(&self) -> Result<usize, DoorError> {
        Ok(Control::clear_faults(self, &crate::policy::fault::FaultSelector::All).len())
    }

    fn snapshot(&self) -> Result<Snapshot, DoorError> {
        Ok(Control::snapshot(self))
    }

    fn reload_config(&self) -> Result<String, DoorError> {
        Control::reload_config(self)
            .map(|diff| diff.summary())
            .map_err(|e| DoorError::Refused(e.to_string().replace('\n', " | ")))
    }

    fn request_log_page(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, RequestView)>, DoorError> {
        Ok(Control::request_log_page(self, before_id, limit))
    }

    fn verify(&self, target: &VerifyTarget, model: &str) -> Result<VerifyReport, DoorError> {
        // The probe itself runs on the proxy's runtime; this thread only waits for it, on a
        // runtime of its own (the caller may be inside another runtime).
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| DoorError::Unreachable(e.to_string()))?;
                rt.block_on(Control::verify(self, target, model))
                    .map_err(DoorError::from)
            })
            .join()
            .unwrap_or_else(|_| Err(DoorError::Unreachable("the probe thread panicked".into())))
        })
    }

    fn request_shutdown(&self) {
        Control::request_shutdown(self);
    }
}
