//! The fault picker ("rehearse an outage"): `i` on a Cooldowns row opens a confirm dialog
//! proposing a fault for that connection; `t` cycles the kind, `d` the duration preset, `y`
//! injects it through `Control::inject_fault`, `n` cancels. `F` clears every fault.

use std::time::Duration;

use super::{Action, App, Confirm};
use crate::core::operator::faults::FaultRequest;

/// Kinds in picker order (the admin API's words).
pub const KINDS: [&str; 8] = [
    "503", "429", "500", "529", "reset", "stall", "zombie", "latency",
];

/// Duration presets in picker order, seconds (the first is the default).
pub const DURATIONS: [u64; 4] = [60, 30, 300, 600];

/// What `t` / `d` cycles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cycle {
    /// The fault kind.
    Kind,
    /// The duration preset.
    Duration,
}

fn prompt(req: &FaultRequest) -> String {
    let secs = req.duration.map_or(60, |d| d.as_secs());
    let dur = if secs % 60 == 0 && secs >= 120 {
        format!("{}m", secs / 60)
    } else {
        format!("{secs}s")
    };
    format!(
        "Inject {} on {} for {dur}? (t kind, d duration)",
        req.kind, req.target
    )
}

fn next<T: PartialEq + Copy>(list: &[T], cur: T) -> T {
    let i = list.iter().position(|x| *x == cur).map_or(0, |i| i + 1);
    list[i % list.len()]
}

impl App {
    /// Opens the picker for the selected Cooldowns row (read-only mode refuses it).
    pub(super) fn open_fault_picker(&mut self) -> Option<Action> {
        let Some((p, c)) = self.selected_connection() else {
            self.flash("no connection selected");
            return None;
        };
        let req = FaultRequest {
            target: format!("{}/{}", p.id, c.id),
            kind: KINDS[0].to_owned(),
            duration: Some(Duration::from_secs(DURATIONS[0])),
            ..Default::default()
        };
        let text = prompt(&req);
        self.gate(Action::InjectFault(req), Some(text))
    }

    /// Moves the open picker to its next kind or duration (other dialogs ignore it).
    pub(super) fn cycle_fault(&mut self, what: Cycle) {
        let Some(Confirm {
            prompt: text,
            action: Action::InjectFault(req),
        }) = self.confirm.as_mut()
        else {
            return;
        };
        match what {
            Cycle::Kind => {
                let cur = KINDS
                    .iter()
                    .copied()
                    .find(|k| *k == req.kind)
                    .unwrap_or(KINDS[0]);
                req.kind = next(&KINDS, cur).to_owned();
            }
            Cycle::Duration => {
                let cur = req.duration.map_or(DURATIONS[0], |d| d.as_secs());
                req.duration = Some(Duration::from_secs(next(&DURATIONS, cur)));
            }
        }
        *text = prompt(req);
    }
}
