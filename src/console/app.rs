//! `App`: the console's UI state (focus, selections, marks, overlays, the confirm dialog and the
//! latest snapshot), TEA style.
//!
//! Keys go in through [`App::on_key`], which looks them up in the [key map](super::keymap),
//! changes only UI state and returns an [`Action`] when something outside the console must
//! happen (quit, or an operator command through `Control`). Destructive commands first open a
//! [`Confirm`] dialog and yield their action only on `y`/`enter`. With [`App::readonly`] every
//! mutating command becomes a "read-only mode" status message instead. While the settings
//! [`Editor`] is open, keys go to it; what comes back from `Control` returns through
//! [`App::on_outcome`]. Rendering reads `App` immutably, so a test can build one from a
//! hand-made [`Snapshot`], press keys and render it.

use std::collections::BTreeSet;
use std::sync::Arc;

use crossterm::event::{KeyEvent, KeyEventKind};

use super::LayoutMode;
pub use super::action::Action;
pub use super::focus::Focus;
use super::keymap::{Cmd, Keymap, Scope};
use super::settings::{Editor, EditorEvent};
use crate::core::operator::control::ClearTarget;
use crate::snapshot::{
    ConnectionView, LockoutView, ProviderView, RECENT_CAP, RequestView, Snapshot,
};

/// How long a status-bar message stays visible, in ms.
pub const MESSAGE_TTL_MS: u64 = 4_000;

/// A transient status-bar message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Text shown.
    pub text: String,
    /// When it disappears, Unix ms; `None` until the run loop stamps it.
    pub expires_at_unix_ms: Option<u64>,
}

/// An open confirm dialog: the question and the action `y` dispatches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    /// Question shown, e.g. `Reset breaker 'openrouter'?`.
    pub prompt: String,
    /// What confirming yields.
    pub action: Action,
}

/// The console's UI state.
#[derive(Debug, Clone, Default)]
pub struct App {
    /// Latest snapshot received.
    pub snapshot: Arc<Snapshot>,
    /// Focused panel.
    pub focus: Focus,
    /// Selected Circuits row (index into `snapshot.providers`).
    pub circuit_selected: usize,
    /// Selected Cooldowns row (index into [`connection_rows`]).
    pub cooldown_selected: usize,
    /// Selected Lockouts row (index into `snapshot.lockouts`).
    pub lockout_selected: usize,
    /// Selected Providers row (index into `snapshot.providers`).
    pub provider_selected: usize,
    /// Selected request row (index into `snapshot.recent`, newest first).
    pub request_selected: usize,
    /// Selected Queues row (index into `snapshot.queues`).
    pub queue_selected: usize,
    /// Selected Quota row (index into [`connection_rows`]).
    pub quota_selected: usize,
    /// Marked connection ids (Cooldowns `space` / `a`).
    pub marked: BTreeSet<String>,
    /// Help overlay open.
    pub help: bool,
    /// First help line shown (the help scrolls with the move keys).
    pub help_scroll: u16,
    /// The settings editor, when open.
    pub editor: Option<Editor>,
    /// The effective key map (built-in, or with `[console.keys]` overrides).
    pub keymap: Arc<Keymap>,
    /// Request details open (for the selected request).
    pub details: bool,
    /// Confirm dialog, when open.
    pub confirm: Option<Confirm>,
    /// Read-only mode: mutating commands only print "read-only mode" (CLI `--readonly`).
    pub readonly: bool,
    /// Transient status-bar message.
    pub message: Option<Message>,
    /// Active row filter (`/`; empty: none): see [`filter`].
    pub filter: String,
    /// The filter being typed in the status bar, when the input is open.
    pub filter_input: Option<String>,
    /// The received snapshot while a filter is active ([`App::snapshot`] is then its filtered
    /// copy); `None` without a filter.
    unfiltered: Option<Arc<Snapshot>>,
    /// Panel rectangles of the last rendered frame, for mouse hits (see [`mouse`]).
    pub rects: Vec<(Focus, ratatui::layout::Rect)>,
    /// Requests finished before this start (the newest `request_log` rows, newest first),
    /// shown below the live ones until [`RECENT_CAP`] live rows push them out; set with
    /// [`App::set_history`].
    history: Arc<Vec<RequestView>>,
    /// An attached console lost its sluice: why (the header shows "reconnecting…"); `None`
    /// while snapshots arrive (always, in-process). Set with [`App::set_link`].
    pub link_lost: Option<String>,
    /// Paging back through the request log (PgDn / PgUp): the `before_id` of every page
    /// shown so far, the current one last; empty = live rows (with the startup history).
    history_pages: Vec<Option<i64>>,
    /// The oldest row id of the page shown (the next older page starts below it).
    history_oldest_id: Option<i64>,
    /// The startup history, put back when paging returns to the live rows.
    startup_history: Arc<Vec<RequestView>>,
}

/// Every connection in provider order, with its provider: the Cooldowns panel's rows.
pub fn connection_rows(snap: &Snapshot) -> impl Iterator<Item = (&ProviderView, &ConnectionView)> {
    snap.providers
        .iter()
        .flat_map(|p| p.connections.iter().map(move |c| (p, c)))
}

impl App {
    /// UI state showing `snapshot`, Circuits focused, nothing open.
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        Self {
            snapshot,
            ..Self::default()
        }
    }

    /// Follows the snapshot feed's state (see [`super::door::Link`]).
    pub fn set_link(&mut self, link: &super::door::Link) {
        self.link_lost = match link {
            super::door::Link::Live => None,
            super::door::Link::Reconnecting(why) => Some(why.clone()),
        };
    }

    /// Replaces the snapshot (filtered by [`App::filter`] when one is active). Open request
    /// details, the selected lockout, circuit and connection follow their item (by id / key)
    /// while it is still shown; other selections keep their index, clamped; marks of vanished
    /// connections are dropped.
    pub fn set_snapshot(&mut self, snapshot: Arc<Snapshot>) {
        let snapshot = self.with_history(snapshot);
        let followed = self
            .details
            .then(|| self.selected_request().map(|r| r.id))
            .flatten();
        let lock_key = self.selected_lockout().map(lockout_key);
        let circuit = self
            .snapshot
            .providers
            .get(self.circuit_selected)
            .map(|p| p.id.clone());
        let connection = self
            .selected_connection()
            .map(|(p, c)| (p.id.clone(), c.id.clone()));
        self.snapshot = self.view_of(snapshot);
        if let Some(id) = circuit
            && let Some(i) = self.snapshot.providers.iter().position(|p| p.id == id)
        {
            self.circuit_selected = i;
        }
        if let Some((pid, cid)) = connection
            && let Some(i) =
                connection_rows(&self.snapshot).position(|(p, c)| p.id == pid && c.id == cid)
        {
            self.cooldown_selected = i;
        }
        if let Some(id) = followed {
            match self.snapshot.recent.iter().position(|r| r.id == id) {
                Some(i) => self.request_selected = i,
                None => self.details = false,
            }
        }
        if let Some(key) = lock_key
            && let Some(i) = self
                .snapshot
                .lockouts
                .iter()
                .position(|l| lockout_key(l) == key)
        {
            self.lockout_selected = i;
        }
        let known: BTreeSet<&str> = connection_rows(&self.snapshot)
            .map(|(_, c)| c.id.as_str())
            .collect();
        self.marked.retain(|id| known.contains(id.as_str()));
        self.clamp();
    }

    /// Sets the rows shown below the live requests (newest first; see [`App::history`]) and
    /// re-applies the current snapshot. Their ids are renumbered from `u64::MAX` down so they
    /// never collide with this run's request ids.
    pub fn set_history(&mut self, mut rows: Vec<RequestView>) {
        rows.truncate(RECENT_CAP);
        for (i, r) in rows.iter_mut().enumerate() {
            r.id = u64::MAX - i as u64;
        }
        self.history = Arc::new(rows);
        if self.history_pages.is_empty() {
            self.startup_history = Arc::clone(&self.history);
        }
        let raw = Arc::clone(self.unfiltered());
        self.set_snapshot(raw);
    }

    /// True while the Requests panel shows a page of the request log instead of live rows.
    pub fn paging_history(&self) -> bool {
        !self.history_pages.is_empty()
    }

    /// PgDn: the page below the one shown (the newest page when showing live rows).
    fn history_older(&self) -> Action {
        let before_id = if self.paging_history() {
            self.history_oldest_id
        } else {
            None
        };
        Action::HistoryPage {
            before_id,
            older: true,
        }
    }

    /// PgUp: the page above the one shown, or back to the live rows from the newest page.
    fn history_newer(&mut self) -> Option<Action> {
        if self.history_pages.len() <= 1 {
            if self.history_pages.pop().is_some() {
                let rows = (*self.startup_history).clone();
                self.set_history(rows);
                self.request_selected = 0;
                self.flash("live requests");
            }
            return None;
        }
        self.history_pages.pop();
        Some(Action::HistoryPage {
            before_id: self.history_pages.last().copied().flatten(),
            older: false,
        })
    }

    /// Shows a page read for [`Action::HistoryPage`]; an empty older page keeps the one shown.
    pub(crate) fn show_history_page(
        &mut self,
        before_id: Option<i64>,
        older: bool,
        rows: Vec<(i64, RequestView)>,
    ) {
        if rows.is_empty() {
            self.flash(if self.paging_history() {
                "no older requests in the log"
            } else {
                "the request log is empty"
            });
            return;
        }
        if older {
            self.history_pages.push(before_id);
        }
        self.history_oldest_id = rows.last().map(|(id, _)| *id);
        let page = self.history_pages.len();
        let oldest = rows.last().map(|(_, r)| r.at_unix_ms).unwrap_or_default();
        let views: Vec<RequestView> = rows.into_iter().map(|(_, r)| r).collect();
        self.set_history(views);
        self.request_selected = 0;
        self.flash(format!(
            "request log page {page}, back to {} UTC; PgUp newer, PgDn older",
            crate::clock::utc_text(oldest)
        ));
    }

    /// `snap` with the history rows appended to `recent` (at most [`RECENT_CAP`] in all);
    /// unchanged when there is no history or `recent` already holds them or is full.
    fn with_history(&self, snap: Arc<Snapshot>) -> Arc<Snapshot> {
        let first_history = self.history.first().map(|r| r.id);
        let has_them = snap.recent.iter().any(|r| Some(r.id) == first_history);
        if self.paging_history() {
            // A page of the log replaces the live rows.
            let mut paged = (*snap).clone();
            paged.recent = (*self.history).clone();
            return Arc::new(paged);
        }
        if self.history.is_empty() || has_them || snap.recent.len() >= RECENT_CAP {
            return snap;
        }
        let mut merged = (*snap).clone();
        let room = RECENT_CAP - merged.recent.len();
        merged
            .recent
            .extend(self.history.iter().take(room).cloned());
        Arc::new(merged)
    }

    /// The selected request, if any.
    pub fn selected_request(&self) -> Option<&RequestView> {
        self.snapshot.recent.get(self.request_selected)
    }

    /// The selected lockout, if any.
    pub fn selected_lockout(&self) -> Option<&LockoutView> {
        self.snapshot.lockouts.get(self.lockout_selected)
    }

    /// The selected Cooldowns row, if any.
    pub fn selected_connection(&self) -> Option<(&ProviderView, &ConnectionView)> {
        connection_rows(&self.snapshot).nth(self.cooldown_selected)
    }

    /// Shows `text` in the status bar for [`MESSAGE_TTL_MS`] from the next [`App::on_tick`].
    pub fn flash(&mut self, text: impl Into<String>) {
        self.message = Some(Message {
            text: text.into(),
            expires_at_unix_ms: None,
        });
    }

    /// Stamps a new message's expiry and drops an expired one; returns true when the screen changed.
    pub fn on_tick(&mut self, now_unix_ms: u64) -> bool {
        match &mut self.message {
            Some(m) if m.expires_at_unix_ms.is_none() => {
                m.expires_at_unix_ms = Some(now_unix_ms.saturating_add(MESSAGE_TTL_MS));
                false
            }
            Some(m) if m.expires_at_unix_ms.is_some_and(|t| now_unix_ms >= t) => {
                self.message = None;
                true
            }
            _ => false,
        }
    }

    /// True when a panel visible in `mode` shows a countdown that is still running at
    /// `now_unix_ms` (the tick then redraws at its own rate, not only once a second).
    pub fn has_visible_countdowns(&self, now_unix_ms: u64, mode: LayoutMode) -> bool {
        let shown = |f: Focus| match mode {
            LayoutMode::Grid => true,
            LayoutMode::Tabs => self.focus == f,
            LayoutMode::TooSmall => false,
        };
        let running = |t: Option<u64>| t.is_some_and(|t| t > now_unix_ms);
        let snap = &self.snapshot;
        (shown(Focus::Circuits)
            && snap.providers.iter().any(|p| {
                running(p.breaker.next_probe_at_unix_ms)
                    || running(p.provider_cooldown_until_unix_ms)
            }))
            || (shown(Focus::Cooldowns)
                && connection_rows(snap).any(|(_, c)| running(c.cooldown_until_unix_ms)))
            || (shown(Focus::Lockouts)
                && snap.lockouts.iter().any(|l| running(Some(l.until_unix_ms))))
            || (mode != LayoutMode::TooSmall
                && snap
                    .faults
                    .iter()
                    .any(|f| running(Some(f.expires_at_unix_ms)))
                || !snap.held.is_empty())
    }

    /// Applies one key. Returns an [`Action`] for quit and for operator commands (after the
    /// confirm dialog where one is needed); every other key only changes UI state. Keys are
    /// looked up in [`App::keymap`]; the quit keys that use ctrl work in every mode.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let km = Arc::clone(&self.keymap);
        if km
            .binding(Cmd::Quit)
            .is_some_and(|b| b.keys.iter().any(|k| k.ctrl && k.matches(&key)))
        {
            return Some(Action::Quit);
        }
        if self.filter_input.is_some() {
            self.filter_key(key);
            return None;
        }
        if self.confirm.is_some() {
            let cmd = km.lookup(&key, Scope::Dialog)?.spec.cmd;
            return self.command(cmd);
        }
        if self.help {
            let cmd = km.lookup(&key, Scope::Global)?.spec.cmd;
            match cmd {
                Cmd::Quit if self.editor.is_none() => return Some(Action::Quit),
                Cmd::Help | Cmd::Back => self.help = false,
                Cmd::Down => self.help_scroll = self.help_scroll.saturating_add(1),
                Cmd::Up => self.help_scroll = self.help_scroll.saturating_sub(1),
                Cmd::First => self.help_scroll = 0,
                Cmd::Last => self.help_scroll = u16::MAX,
                _ => {}
            }
            return None;
        }
        if let Some(editor) = self.editor.as_mut() {
            let typing = editor.input.is_some();
            if !typing && km.lookup(&key, Scope::Global).map(|b| b.spec.cmd) == Some(Cmd::Help) {
                self.help = true;
                self.help_scroll = 0;
                return None;
            }
            return match editor.on_key(&km, key) {
                EditorEvent::None => None,
                EditorEvent::Close(message) => {
                    self.editor = None;
                    if let Some(m) = message {
                        self.flash(m);
                    }
                    None
                }
                EditorEvent::Flash(m) => {
                    self.flash(m);
                    None
                }
                EditorEvent::Act(action) => self.gate(action, None),
            };
        }
        let binding = km
            .lookup(&key, Scope::Panel(self.focus))
            .or_else(|| km.lookup(&key, Scope::Global));
        let Some(binding) = binding else {
            if let Some(b) = km.elsewhere(&key, self.focus)
                && let Scope::Panel(p) = b.spec.scope
                && let Some(pressed) = b.keys.iter().find(|k| k.matches(&key))
            {
                let focus_key = km.first_key(Cmd::Focus(p));
                self.flash(format!(
                    "{pressed}: focus {} ({focus_key}) first",
                    p.title()
                ));
            }
            return None;
        };
        self.command(binding.spec.cmd)
    }

    /// Carries out one command: changes the view, or returns the action to perform (behind a
    /// confirm dialog where the command asks for one).
    fn command(&mut self, cmd: Cmd) -> Option<Action> {
        match cmd {
            Cmd::Quit => return Some(Action::Quit),
            Cmd::Help => {
                self.help = !self.help;
                self.help_scroll = 0;
            }
            Cmd::Back => self.back(),
            Cmd::FocusNext => self.focus = self.focus.step(true),
            Cmd::FocusPrev => self.focus = self.focus.step(false),
            Cmd::Focus(f) => self.focus = f,
            Cmd::Filter => self.open_filter(),
            Cmd::EditSettings => return self.gate(Action::OpenSettings, None),
            Cmd::Down => self.move_by(1),
            Cmd::Up => self.move_by(-1),
            Cmd::First => self.move_by(isize::MIN),
            Cmd::Last => self.move_by(isize::MAX),
            Cmd::Details => self.toggle_details(),
            Cmd::Confirm => {
                let c = self.confirm.take()?;
                return self.gate(c.action, None);
            }
            Cmd::Cancel => {
                self.confirm = None;
                self.flash("cancelled");
            }
            Cmd::InjectFault => return self.open_fault_picker(),
            Cmd::VerifyClear => return self.open_verify_clear(),
            Cmd::VerifyReset => return self.open_verify_reset(),
            Cmd::VerifyModelNext => self.cycle_verify_model(),
            Cmd::ClearFaults => return self.gate(Action::ClearFaults, None),
            Cmd::FaultKindNext => self.cycle_fault(fault_picker::Cycle::Kind),
            Cmd::FaultDurationNext => self.cycle_fault(fault_picker::Cycle::Duration),
            Cmd::ResetBreaker => return self.reset_selected_breaker(),
            Cmd::ReloadConfig => return self.gate(Action::ReloadConfig, None),
            Cmd::HistoryOlder => return Some(self.history_older()),
            Cmd::HistoryNewer => return self.history_newer(),
            Cmd::ResetAllBreakers => return self.reset_all_breakers(),
            Cmd::Mark => self.toggle_mark(),
            Cmd::MarkAll => self.toggle_mark_all(),
            Cmd::Clear => return self.clear_marked_or_current(),
            Cmd::ClearProvider => return self.clear_selected_provider(),
            Cmd::FieldNext
            | Cmd::FieldPrev
            | Cmd::EditField
            | Cmd::SaveSettings
            | Cmd::RevertField
            | Cmd::RevertAll
            | Cmd::CloseSettings
            | Cmd::AcceptInput
            | Cmd::CancelInput => {}
            Cmd::Reenable => return self.reenable_selected(),
        }
        None
    }

    /// `Esc`: closes the details, else unmarks all, else clears the filter.
    fn back(&mut self) {
        if self.details {
            self.details = false;
        } else if !self.marked.is_empty() {
            self.marked.clear();
            self.flash("unmarked all");
        } else if !self.filter.is_empty() {
            self.set_filter("");
            self.flash("filter cleared");
        }
    }

    /// Opens or closes the details of the selected request.
    fn toggle_details(&mut self) {
        if self.selected_request().is_some() {
            self.details = !self.details;
        } else {
            self.flash("no request selected");
        }
    }

    /// Asks to reset the breaker of the selected provider.
    fn reset_selected_breaker(&mut self) -> Option<Action> {
        let Some(p) = self.snapshot.providers.get(self.circuit_selected) else {
            self.flash("no provider selected");
            return None;
        };
        let prompt = format!("Reset breaker '{}'?", p.id);
        self.gate(Action::ResetBreaker(Some(p.id.clone())), Some(prompt))
    }

    /// Asks to reset every breaker, hidden by the filter or not.
    fn reset_all_breakers(&mut self) -> Option<Action> {
        // Resets every breaker, hidden by the filter or not.
        let n = self.unfiltered().providers.len();
        if n == 0 {
            self.flash("no providers");
            return None;
        }
        let prompt = format!("Reset all {n} breakers?");
        self.gate(Action::ResetBreaker(None), Some(prompt))
    }

    /// Marks or unmarks the selected connection.
    fn toggle_mark(&mut self) {
        let Some(id) = self.selected_connection().map(|(_, c)| c.id.clone()) else {
            self.flash("no connection selected");
            return;
        };
        if !self.marked.remove(&id) {
            self.marked.insert(id);
        }
    }

    /// Marks every connection, or unmarks all when all are marked.
    fn toggle_mark_all(&mut self) {
        let all: BTreeSet<String> = connection_rows(&self.snapshot)
            .map(|(_, c)| c.id.clone())
            .collect();
        if !all.is_empty() && self.marked == all {
            self.marked.clear();
            self.flash("unmarked all");
        } else {
            self.flash(format!("marked {}", all.len()));
            self.marked = all;
        }
    }

    /// Asks to clear every cooldown of the selected connection's provider.
    fn clear_selected_provider(&mut self) -> Option<Action> {
        let Some(pid) = self.selected_connection().map(|(p, _)| p.id.clone()) else {
            self.flash("no connection selected");
            return None;
        };
        let prompt = format!("Clear all cooldowns of provider '{pid}'?");
        let target = ClearTarget::All {
            provider: Some(pid),
        };
        self.gate(Action::ClearCooldowns(target), Some(prompt))
    }

    /// Asks to re-enable the selected locked-out model on its connection.
    fn reenable_selected(&mut self) -> Option<Action> {
        let Some(l) = self.selected_lockout() else {
            self.flash("no lockout selected");
            return None;
        };
        let prompt = format!(
            "Re-enable '{}' on {}:{}?",
            l.model, l.provider, l.connection
        );
        let action = Action::ReenableModel {
            provider: l.provider.clone(),
            connection: l.connection.clone(),
            model: l.model.clone(),
        };
        self.gate(action, Some(prompt))
    }

    /// `c`: the marked connections in row order, else the selected one; no confirm dialog.
    fn clear_marked_or_current(&mut self) -> Option<Action> {
        let ids: Vec<String> = if self.marked.is_empty() {
            self.selected_connection()
                .map(|(_, c)| c.id.clone())
                .into_iter()
                .collect()
        } else {
            connection_rows(&self.snapshot)
                .map(|(_, c)| c.id.clone())
                .filter(|id| self.marked.contains(id))
                .collect()
        };
        if ids.is_empty() {
            self.flash("no connection selected");
            return None;
        }
        let action = self.gate(Action::ClearCooldowns(ClearTarget::Connections(ids)), None);
        if action.is_some() {
            self.marked.clear();
        }
        action
    }

    /// The single gate for operator commands: read-only mode refuses mutating ones; with a
    /// `prompt` the confirm dialog opens (and the action waits for `y`), otherwise it goes out.
    fn gate(&mut self, action: Action, prompt: Option<String>) -> Option<Action> {
        if self.readonly && action.is_mutating() {
            self.confirm = None;
            self.flash("read-only mode: operator actions are disabled");
            return None;
        }
        if prompt.is_none()
            && let Action::Verify { target, model } = &action
        {
            self.flash(format!(
                "probing '{}' with {model}… (the answer shows here)",
                target.id()
            ));
        }
        match prompt {
            Some(prompt) => {
                self.confirm = Some(Confirm { prompt, action });
                None
            }
            None => Some(action),
        }
    }

    fn move_by(&mut self, delta: isize) {
        let len = self.len_of(self.focus);
        let sel = match self.focus {
            Focus::Circuits => &mut self.circuit_selected,
            Focus::Cooldowns => &mut self.cooldown_selected,
            Focus::Lockouts => &mut self.lockout_selected,
            Focus::Providers => &mut self.provider_selected,
            Focus::Requests => &mut self.request_selected,
            Focus::Queues => &mut self.queue_selected,
            Focus::Quota => &mut self.quota_selected,
        };
        let max = len.saturating_sub(1);
        *sel = if delta < 0 {
            sel.saturating_sub(delta.unsigned_abs())
        } else {
            sel.saturating_add(delta.unsigned_abs()).min(max)
        };
    }

    fn len_of(&self, focus: Focus) -> usize {
        let snap = &self.snapshot;
        match focus {
            Focus::Circuits | Focus::Providers => snap.providers.len(),
            Focus::Cooldowns | Focus::Quota => connection_rows(snap).count(),
            Focus::Lockouts => snap.lockouts.len(),
            Focus::Requests => snap.recent.len(),
            Focus::Queues => snap.queues.len(),
        }
    }

    fn clamp(&mut self) {
        let last = |n: usize| n.saturating_sub(1);
        self.circuit_selected = self
            .circuit_selected
            .min(last(self.len_of(Focus::Circuits)));
        self.cooldown_selected = self
            .cooldown_selected
            .min(last(self.len_of(Focus::Cooldowns)));
        self.lockout_selected = self
            .lockout_selected
            .min(last(self.len_of(Focus::Lockouts)));
        self.provider_selected = self
            .provider_selected
            .min(last(self.len_of(Focus::Providers)));
        self.request_selected = self
            .request_selected
            .min(last(self.len_of(Focus::Requests)));
        self.queue_selected = self.queue_selected.min(last(self.len_of(Focus::Queues)));
        self.quota_selected = self.quota_selected.min(last(self.len_of(Focus::Quota)));
        if self.snapshot.recent.is_empty() {
            self.details = false;
        }
    }
}

fn lockout_key(l: &LockoutView) -> (String, String, String) {
    (l.provider.clone(), l.connection.clone(), l.model.clone())
}

mod fault_picker;
pub mod filter;
pub mod mouse;
mod outcome;
mod verify_picker;

#[cfg(test)]
#[path = "app_tests.rs"]
mod tests;
