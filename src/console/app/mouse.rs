//! Mouse input: a left click focuses the panel under the pointer and selects the clicked row;
//! the wheel focuses the panel under the pointer and moves its selection (or scrolls the help).
//!
//! Hit-testing is a pure function of the event and [`App::rects`], the panel rectangles of the
//! last rendered frame (see [`panel_rects`](crate::console::panel_rects)), so tests drive it
//! without a terminal. Panels draw a border and a one-row table header; the table scrolls so
//! the selection is the last visible row when it would fall below the panel, which
//! `first_visible` reproduces.

use crossterm::event::{MouseButton, MouseEvent, MouseEventKind};
use ratatui::layout::{Position, Rect};

use super::{App, Focus};

/// Rows of border and table header above a panel's first data row.
const TOP: u16 = 2;

/// Index of the first visible row of a table showing `visible` rows with row `selected`
/// selected (ratatui scrolls just enough to keep the selection in view).
fn first_visible(selected: usize, visible: u16) -> usize {
    selected.saturating_sub(usize::from(visible.max(1)) - 1)
}

impl App {
    /// Applies one mouse event; returns true when the screen may have changed. Clicks and
    /// wheel events over no panel, or while a dialog, the editor or the filter input is open,
    /// do nothing (the wheel scrolls the help while it is open).
    pub fn on_mouse(&mut self, ev: MouseEvent) -> bool {
        if self.confirm.is_some() || self.editor.is_some() || self.filter_input.is_some() {
            return false;
        }
        let wheel = match ev.kind {
            MouseEventKind::ScrollDown => Some(1),
            MouseEventKind::ScrollUp => Some(-1),
            _ => None,
        };
        if self.help {
            match wheel {
                Some(1) => self.help_scroll = self.help_scroll.saturating_add(1),
                Some(_) => self.help_scroll = self.help_scroll.saturating_sub(1),
                None => return false,
            }
            return true;
        }
        let at = Position::new(ev.column, ev.row);
        let Some((panel, rect)) = self.rects.iter().copied().find(|(_, r)| r.contains(at)) else {
            return false;
        };
        match (ev.kind, wheel) {
            (_, Some(delta)) => {
                self.focus = panel;
                self.move_by(delta);
                true
            }
            (MouseEventKind::Down(MouseButton::Left), None) => {
                self.focus = panel;
                if let Some(row) = self.row_at(panel, rect, ev.row) {
                    self.select(panel, row);
                }
                true
            }
            _ => false,
        }
    }

    /// The row index of `panel` (in its selection's terms) drawn at screen row `y`, if any.
    fn row_at(&self, panel: Focus, rect: Rect, y: u16) -> Option<usize> {
        let data_y = rect.y.saturating_add(TOP);
        let bottom = rect.bottom().saturating_sub(1);
        if y < data_y || y >= bottom {
            return None;
        }
        let line = usize::from(y - data_y);
        if panel == Focus::Providers {
            return self.provider_at(rect, line);
        }
        if panel == Focus::Quota {
            // Several lines per connection: a click focuses the panel, keys select.
            return None;
        }
        let visible = bottom - data_y;
        let row = first_visible(self.selected_index(panel), visible) + line;
        (row < self.len_of(panel)).then_some(row)
    }

    /// The Providers panel lists each provider followed by its connections; the table shares
    /// the panel with the combos list at the bottom. Returns the provider whose block holds
    /// table line `line`.
    fn provider_at(&self, rect: Rect, line: usize) -> Option<usize> {
        let snap = &self.snapshot;
        let inner_h = rect.height.saturating_sub(2);
        let combo_rows = if snap.combos.is_empty() {
            0
        } else {
            snap.combos.len() + 1
        };
        let combo_h = u16::try_from(combo_rows)
            .unwrap_or(u16::MAX)
            .min(inner_h / 2);
        let visible = inner_h.saturating_sub(combo_h).saturating_sub(1);
        if line >= usize::from(visible) {
            return None;
        }
        let starts: Vec<usize> = snap
            .providers
            .iter()
            .scan(0, |row, p| {
                let start = *row;
                *row += 1 + p.connections.len();
                Some(start)
            })
            .collect();
        let selected_row = starts.get(self.provider_selected).copied().unwrap_or(0);
        let display = first_visible(selected_row, visible) + line;
        let total: usize = snap.providers.iter().map(|p| 1 + p.connections.len()).sum();
        if display >= total {
            return None;
        }
        starts.iter().rposition(|&s| s <= display)
    }

    fn selected_index(&self, panel: Focus) -> usize {
        match panel {
            Focus::Circuits => self.circuit_selected,
            Focus::Cooldowns => self.cooldown_selected,
            Focus::Lockouts => self.lockout_selected,
            Focus::Providers => self.provider_selected,
            Focus::Requests => self.request_selected,
            Focus::Queues => self.queue_selected,
            Focus::Quota => self.quota_selected,
        }
    }

    fn select(&mut self, panel: Focus, row: usize) {
        let slot = match panel {
            Focus::Circuits => &mut self.circuit_selected,
            Focus::Cooldowns => &mut self.cooldown_selected,
            Focus::Lockouts => &mut self.lockout_selected,
            Focus::Providers => &mut self.provider_selected,
            Focus::Requests => &mut self.request_selected,
            Focus::Queues => &mut self.queue_selected,
            Focus::Quota => &mut self.quota_selected,
        };
        *slot = row;
    }
}
