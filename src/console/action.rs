//! `Action`: what a key asks the outside world to do; [`perform`] does it through a [`Door`]
//! (`Control` in-process, the admin API when attached) and returns an [`Outcome`], and
//! [`apply`] words that outcome for the status bar.
//!
//! The console never mutates state itself (`docs/ARCHITECTURE.md#the-operator-doors`):
//! [`App::on_key`](super::app::App::on_key) returns an `Action`, the run loop hands it to
//! [`perform`], and the outcome goes back into the app with
//! [`App::on_outcome`](super::app::App::on_outcome) (a status-bar line, or the settings
//! editor's data / refusal). Keeping these plain functions of `&dyn Door` lets tests drive them
//! against a real core (`&Control`) with a `ManualClock`.

use super::door::{Door, DoorError};
use super::settings::{Field, SettingsView};
use crate::core::operator::control::{ClearReport, ClearTarget, ControlError, SettingsPatch};
use crate::core::operator::verify::{VerifyReport, VerifyTarget};

/// Something the run loop must do after a key (TEA's command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Leave the console and ask sluice to shut down.
    Quit,
    /// Close the breaker of one provider (`Some(id)`) or of every provider (`None`); §1.
    ResetBreaker(Option<String>),
    /// Clear connection cooldowns and quota waits (terminal states are skipped); §2.
    ClearCooldowns(ClearTarget),
    /// Remove one model lockout; `model` is the quota-group name or model id as listed (§3).
    ReenableModel {
        /// Provider id.
        provider: String,
        /// Connection id.
        connection: String,
        /// Locked model or quota group.
        model: String,
    },
    /// Read the settings for the editor (not mutating).
    OpenSettings,
    /// Apply `patch` (the editor's `count` changed fields) through `Control::patch_settings`.
    SaveSettings {
        /// The changed fields only.
        patch: Box<SettingsPatch>,
        /// How many fields it changes (for "saved 3 settings").
        count: usize,
    },
    /// Revert one field's override to the config file's value (the rest stay).
    RevertSetting(Field),
    /// Drop every settings override (`Control::revert_settings`).
    RevertAllSettings,
    /// Re-read and apply the config file (`Control::reload_config`).
    ReloadConfig,
    /// Read one page of the request log (`Control::request_log_page`), not mutating.
    HistoryPage {
        /// Rows older than this row id; `None` = the newest page.
        before_id: Option<i64>,
        /// True when paging back (the page is pushed), false when returning to a newer one.
        older: bool,
    },
    /// Inject a fault for a bounded time (`Control::inject_fault`).
    InjectFault(crate::core::operator::faults::FaultRequest),
    /// Remove every injected fault (`Control::clear_faults`).
    ClearFaults,
    /// Probe a connection with one 1-token request for `model`, then clear its cooldown (or
    /// reset its provider's breaker) only if the probe answers 2xx (`Control::verify`).
    /// Slow (up to the probe timeout): the run loop performs it off the event loop.
    Verify {
        /// The connection to clear, or the provider whose breaker to reset.
        target: VerifyTarget,
        /// The model the probe names.
        model: String,
    },
}

/// Rows per page of the request log in the Requests panel.
pub const HISTORY_PAGE: usize = crate::snapshot::RECENT_CAP;

/// What came of an [`Action`].
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A status-bar line.
    Message(String),
    /// Settings for the editor (opened, or refreshed after a revert), with a status line.
    Settings {
        /// Live settings, overrides and the file's values (boxed: it is large).
        view: Box<SettingsView>,
        /// Status-bar line, if any.
        message: Option<String>,
    },
    /// The editor's patch was applied; `count` fields changed.
    Saved {
        /// Fields changed.
        count: usize,
    },
    /// A page of the request log (newest first, with row ids) for the Requests panel.
    History {
        /// The `before_id` the page was read with.
        before_id: Option<i64>,
        /// See [`Action::HistoryPage`].
        older: bool,
        /// The rows with their ids.
        rows: Vec<(i64, crate::snapshot::RequestView)>,
    },
    /// `Control` refused a settings change: `field` is the dotted key.
    Rejected {
        /// e.g. `model_lockout.max_cooldown`.
        field: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl Outcome {
    /// The outcome as one status-bar line.
    pub fn text(&self) -> String {
        match self {
            Outcome::Message(m) => m.clone(),
            Outcome::Settings { message, .. } => {
                message.clone().unwrap_or_else(|| "settings".to_owned())
            }
            Outcome::Saved { count } => saved_text(*count),
            Outcome::History { rows, .. } => format!("{} rows of the request log", rows.len()),
            Outcome::Rejected { field, message } => format!("not saved: {field}: {message}"),
        }
    }
}

/// `saved 1 setting`, `saved 3 settings`.
pub fn saved_text(count: usize) -> String {
    format!("saved {count} setting{}", if count == 1 { "" } else { "s" })
}

impl Action {
    /// True when the action changes live state (refused in read-only mode): all but `Quit`
    /// and `OpenSettings`.
    pub fn is_mutating(&self) -> bool {
        !matches!(
            self,
            Action::Quit | Action::OpenSettings | Action::HistoryPage { .. }
        )
    }

    /// True when the action may take seconds (it waits for an upstream): the run loop
    /// performs it on a worker thread and keeps drawing and reading keys meanwhile.
    pub fn is_slow(&self) -> bool {
        matches!(self, Action::Verify { .. })
    }
}

/// Applies `action` through `control` and returns one status-bar line describing the result,
/// e.g. `cleared 2, skipped 1 terminal: banned (key-b)` or `breaker 'openrouter' reset`.
/// Refusals (unknown ids) come back as `failed: …`; nothing here panics.
pub fn apply(control: &dyn Door, action: Action) -> String {
    perform(control, action).text()
}

/// The settings the editor shows, read from `control` now.
pub fn settings_view(control: &dyn Door) -> Result<SettingsView, DoorError> {
    control.settings().map(SettingsView::from)
}

fn refused(e: DoorError) -> Outcome {
    match e {
        DoorError::Control(ControlError::Invalid { field, message }) => {
            Outcome::Rejected { field, message }
        }
        other => Outcome::Message(format!("settings not changed: {other}")),
    }
}

/// The editor's data after a settings action, with `message`; a failed read is the message.
fn settings_outcome(control: &dyn Door, message: Option<String>) -> Outcome {
    match settings_view(control) {
        Ok(view) => Outcome::Settings {
            view: Box::new(view),
            message,
        },
        Err(e) => Outcome::Message(format!("cannot read the settings: {e}")),
    }
}

/// Applies `action` through `control` and returns what came of it.
pub fn perform(control: &dyn Door, action: Action) -> Outcome {
    let text = match action {
        Action::OpenSettings => return settings_outcome(control, None),
        Action::SaveSettings { patch, count } => {
            return match control.patch_settings(&patch) {
                Ok(_) => Outcome::Saved { count },
                Err(e) => refused(e),
            };
        }
        Action::RevertSetting(field) => return revert_one(control, field),
        Action::RevertAllSettings => return revert_all(control),
        Action::HistoryPage { before_id, older } => {
            return history_page(control, before_id, older);
        }
        Action::ReloadConfig => match control.reload_config() {
            Ok(summary) => summary,
            Err(DoorError::Refused(why)) => format!("reload refused: {why}"),
            Err(e) => return refused(e),
        },
        Action::Quit => {
            control.request_shutdown();
            "shutting down".to_owned()
        }
        Action::ResetBreaker(provider) => reset_breakers(control, provider),
        Action::InjectFault(req) => inject_fault(control, &req),
        Action::ClearFaults => match control.clear_faults() {
            Ok(n) => format!(
                "cleared {n} injected fault{}",
                if n == 1 { "" } else { "s" }
            ),
            Err(e) => format!("faults not cleared: {e}"),
        },
        Action::Verify { target, model } => match control.verify(&target, &model) {
            Ok(report) => verify_summary(&target, &report),
            Err(e) => format!("verify of '{}' not run: {e}", target.id()),
        },
        Action::ClearCooldowns(target) => match control.clear_cooldowns(&target) {
            Ok(report) => clear_summary(control, &report),
            Err(e) => format!("clear failed: {e}"),
        },
        Action::ReenableModel {
            provider,
            connection,
            model,
        } => match control.reenable_model(&provider, &connection, &model) {
            Ok(true) => format!("re-enabled '{model}' on {provider}:{connection}"),
            Ok(false) => format!("'{model}' on {provider}:{connection} was not locked (expired?)"),
            Err(e) => format!("re-enable failed: {e}"),
        },
    };
    Outcome::Message(text)
}

/// Drops every settings override, then shows the editor's data (or why nothing changed).
fn revert_all(control: &dyn Door) -> Outcome {
    if let Err(e) = control.revert_settings() {
        return refused(e);
    }
    settings_outcome(
        control,
        Some("reverted every setting to the config file".to_owned()),
    )
}

/// One page of the request log, older than row `before_id` (`None`: the newest page).
fn history_page(control: &dyn Door, before_id: Option<i64>, older: bool) -> Outcome {
    Outcome::History {
        before_id,
        older,
        rows: match control.request_log_page(before_id, HISTORY_PAGE) {
            Ok(rows) => rows,
            Err(e) => return refused(e),
        },
    }
}

/// Closes the breaker of `provider` (`None`: of every provider) and says which were reset.
fn reset_breakers(control: &dyn Door, provider: Option<String>) -> String {
    match control.reset_breakers(provider.as_deref()) {
        Ok(ids) => match (provider, ids.as_slice()) {
            (Some(_), [id]) => format!("breaker '{id}' reset to closed"),
            (_, []) => "no breakers to reset".to_owned(),
            (_, ids) => format!("reset {} breakers to closed: {}", ids.len(), ids.join(", ")),
        },
        Err(e) => format!("reset failed: {e}"),
    }
}

/// Injects the fault `req` and says what it does and for how long.
fn inject_fault(control: &dyn Door, req: &crate::core::operator::faults::FaultRequest) -> String {
    match control.inject_fault(req) {
        Ok(v) => format!(
            "fault injected: {} {} for {}s (F clears)",
            v.target,
            v.description,
            v.remaining_ms / 1000
        ),
        Err(e) => format!("fault not injected: {e}"),
    }
}

/// `verified 'c1' with claude-haiku (200 in 312 ms): cleared`, or why nothing changed.
pub fn verify_summary(target: &VerifyTarget, r: &VerifyReport) -> String {
    let seen = match r.probe.status {
        Some(s) => format!("{s} in {} ms", r.probe.latency_ms),
        None => format!("no answer after {} ms", r.probe.latency_ms),
    };
    let what = match target {
        VerifyTarget::Connection(_) => "cooldown cleared",
        VerifyTarget::Breaker(_) => "breaker reset to closed",
    };
    if r.passed {
        return format!(
            "verified '{}' with {} ({seen}): {what}",
            r.connection, r.model
        );
    }
    let why = r.probe.error.as_deref().unwrap_or("not a 2xx answer");
    format!(
        "verify failed on '{}' with {} ({seen}): {why}; nothing changed",
        r.connection, r.model
    )
}

/// Reverts one override: the remaining overrides replace the current ones in one step
/// (`Control::replace_settings`, validated against the file's values — dropping one may leave
/// the rest invalid, e.g. `max_cooldown` below the file's base — and refused as a whole then).
fn revert_one(control: &dyn Door, field: Field) -> Outcome {
    let settings = match settings_view(control) {
        Ok(s) => s,
        Err(e) => return refused(e),
    };
    let mut remaining = settings.overrides.clone();
    field.unset(&mut remaining);
    if let Err(e) = control.replace_settings(&remaining) {
        return refused(e);
    }
    settings_outcome(
        control,
        Some(format!(
            "{} reverted to the file's value {}",
            field.key(),
            settings.value(field, true)
        )),
    )
}

/// [`ClearReport::summary`] with the reason for each skipped terminal connection, e.g.
/// `cleared 0, skipped 1 terminal: banned (key-b)`.
fn clear_summary(control: &dyn Door, report: &ClearReport) -> String {
    let summary = report.summary();
    if report.skipped_terminal.is_empty() {
        return summary;
    }
    // Statuses only for the skipped ids; a rare path, so a fresh snapshot is fine.
    let Ok(snap) = control.snapshot() else {
        return summary;
    };
    let why: Vec<String> = report
        .skipped_terminal
        .iter()
        .map(|id| {
            let status = snap
                .providers
                .iter()
                .flat_map(|p| &p.connections)
                .find(|c| &c.id == id)
                .map_or("terminal", |c| c.status.as_str());
            format!("{status} ({id})")
        })
        .collect();
    let phrase = format!("skipped {} terminal", report.skipped_terminal.len());
    let detailed = format!("{phrase}: {}", why.join(", "));
    if summary.contains(&phrase) {
        summary.replacen(&phrase, &detailed, 1)
    } else {
        format!("{summary}; {detailed}")
    }
}

#[cfg(test)]
#[path = "action_tests.rs"]
mod tests;
