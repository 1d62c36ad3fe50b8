//! `Action`: what a key asks the outside world to do, and [`apply`], which does it through
//! [`Control`] and words the result for the status bar.
//!
//! The console never mutates state itself (house-style §4.3): [`App::on_key`](super::app::App::on_key)
//! returns an `Action`, the run loop hands it to [`apply`], and the returned line goes into the
//! status bar with [`App::flash`](super::app::App::flash). Keeping `apply` a plain function of
//! `&Control` lets tests drive it against a real core with a `ManualClock`.

use crate::core::control::{ClearReport, ClearTarget, Control};

/// Something the run loop must do after a key (TEA's command).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Leave the console and ask sluice to shut down.
    Quit,
    /// Close the breaker of one provider (`Some(id)`) or of every provider (`None`); spec §1.
    ResetBreaker(Option<String>),
    /// Clear connection cooldowns and quota waits (terminal states are skipped); spec §3a.
    ClearCooldowns(ClearTarget),
    /// Remove one model lockout; `model` is the quota-group name or model id as listed (§3a).
    ReenableModel {
        /// Provider id.
        provider: String,
        /// Connection id.
        connection: String,
        /// Locked model or quota group.
        model: String,
    },
}

impl Action {
    /// True when the action changes live state (refused in read-only mode). Only `Quit` is not.
    pub fn is_mutating(&self) -> bool {
        !matches!(self, Action::Quit)
    }
}

/// Applies `action` through `control` and returns one status-bar line describing the result,
/// e.g. `cleared 2, skipped 1 terminal: banned (key-b)` or `breaker 'openrouter' reset`.
/// Refusals (unknown ids) come back as `failed: …`; nothing here panics.
pub fn apply(control: &Control, action: Action) -> String {
    match action {
        Action::Quit => {
            control.request_shutdown();
            "shutting down".to_owned()
        }
        Action::ResetBreaker(provider) => match control.reset_breakers(provider.as_deref()) {
            Ok(ids) => match (provider, ids.as_slice()) {
                (Some(_), [id]) => format!("breaker '{id}' reset to closed"),
                (_, []) => "no breakers to reset".to_owned(),
                (_, ids) => format!("reset {} breakers to closed: {}", ids.len(), ids.join(", ")),
            },
            Err(e) => format!("reset failed: {e}"),
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
    }
}

/// [`ClearReport::summary`] with the reason for each skipped terminal connection, e.g.
/// `cleared 0, skipped 1 terminal: banned (key-b)`.
fn clear_summary(control: &Control, report: &ClearReport) -> String {
    let summary = report.summary();
    if report.skipped_terminal.is_empty() {
        return summary;
    }
    // Statuses only for the skipped ids; a rare path, so a fresh snapshot is fine.
    let snap = control.core().snapshot();
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
