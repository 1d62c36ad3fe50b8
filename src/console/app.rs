//! `App`: the console's UI state (focus, selection, overlays, latest snapshot), TEA style.
//!
//! Keys go in through [`App::on_key`], which only changes UI state and returns an [`Action`] when
//! something outside the console must happen (today: quit). Rendering reads `App` immutably, so a
//! test can build one from a hand-made [`Snapshot`], press keys and render it.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::core::snapshot::Snapshot;

/// How long a status-bar message stays visible, in ms.
pub const MESSAGE_TTL_MS: u64 = 4_000;

/// Key bindings as shown in the help overlay: (keys, what they do).
pub const KEYMAP: &[(&str, &str)] = &[
    ("q, ctrl-c", "quit (drains and stops sluice)"),
    ("?", "toggle this help"),
    ("esc", "close help / details"),
    ("tab, shift-tab", "focus next / previous panel"),
    ("1, 2", "focus Providers / Requests"),
    ("j/k, ↓/↑", "move the selection"),
    ("g/G, home/end", "first / last row"),
    ("enter", "toggle request details (Requests)"),
];

/// One-line key hints for the status bar.
pub const HINTS: &str = "q quit  ? help  tab focus  j/k move  enter details";

/// Something the run loop must do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave the console and ask sluice to shut down.
    Quit,
}

/// The panel keys act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Focus {
    /// Providers and their connections.
    #[default]
    Providers,
    /// Recent requests.
    Requests,
}

impl Focus {
    /// Every panel in tab order.
    pub const ALL: [Focus; 2] = [Focus::Providers, Focus::Requests];

    /// Panel title.
    pub fn title(self) -> &'static str {
        match self {
            Focus::Providers => "Providers",
            Focus::Requests => "Requests",
        }
    }

    fn index(self) -> usize {
        Focus::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }

    fn step(self, forward: bool) -> Focus {
        let n = Focus::ALL.len();
        let i = if forward {
            self.index() + 1
        } else {
            self.index() + n - 1
        };
        Focus::ALL.get(i % n).copied().unwrap_or_default()
    }
}

/// A transient status-bar message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Text shown.
    pub text: String,
    /// When it disappears, Unix ms; `None` until the run loop stamps it.
    pub expires_at_unix_ms: Option<u64>,
}

/// The console's UI state.
#[derive(Debug, Clone, Default)]
pub struct App {
    /// Latest snapshot received.
    pub snapshot: Arc<Snapshot>,
    /// Focused panel.
    pub focus: Focus,
    /// Selected provider row (index into `snapshot.providers`).
    pub provider_selected: usize,
    /// Selected request row (index into `snapshot.recent`, newest first).
    pub request_selected: usize,
    /// Help overlay open.
    pub help: bool,
    /// Request details open (for the selected request).
    pub details: bool,
    /// Transient status-bar message.
    pub message: Option<Message>,
}

impl App {
    /// UI state showing `snapshot`, Providers focused, nothing open.
    pub fn new(snapshot: Arc<Snapshot>) -> Self {
        Self {
            snapshot,
            ..Self::default()
        }
    }

    /// Replaces the snapshot. While details are open the same request stays selected (by id);
    /// otherwise selections keep their index, clamped to the new lengths.
    pub fn set_snapshot(&mut self, snapshot: Arc<Snapshot>) {
        let followed = self
            .details
            .then(|| self.selected_request().map(|r| r.id))
            .flatten();
        self.snapshot = snapshot;
        if let Some(id) = followed {
            match self.snapshot.recent.iter().position(|r| r.id == id) {
                Some(i) => self.request_selected = i,
                None => self.details = false,
            }
        }
        self.clamp();
    }

    /// The selected request, if any.
    pub fn selected_request(&self) -> Option<&crate::core::snapshot::RequestView> {
        self.snapshot.recent.get(self.request_selected)
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

    /// Applies one key. Returns [`Action::Quit`] for `q` / `ctrl-c`; other keys only change UI state.
    pub fn on_key(&mut self, key: KeyEvent) -> Option<Action> {
        if key.kind == KeyEventKind::Release {
            return None;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('c') if ctrl => return Some(Action::Quit),
            KeyCode::Char('q') if !ctrl => return Some(Action::Quit),
            KeyCode::Char('?') => {
                self.help = !self.help;
                return None;
            }
            KeyCode::Esc => {
                if self.help {
                    self.help = false;
                } else {
                    self.details = false;
                }
                return None;
            }
            _ => {}
        }
        if self.help {
            return None;
        }
        match key.code {
            KeyCode::Tab => self.focus = self.focus.step(true),
            KeyCode::BackTab => self.focus = self.focus.step(false),
            KeyCode::Char('1') => self.focus = Focus::Providers,
            KeyCode::Char('2') => self.focus = Focus::Requests,
            KeyCode::Char('j') | KeyCode::Down => self.move_by(1),
            KeyCode::Char('k') | KeyCode::Up => self.move_by(-1),
            KeyCode::Char('g') | KeyCode::Home => self.move_by(isize::MIN),
            KeyCode::Char('G') | KeyCode::End => self.move_by(isize::MAX),
            KeyCode::Enter if self.focus == Focus::Requests => {
                if self.selected_request().is_some() {
                    self.details = !self.details;
                } else {
                    self.flash("no request selected");
                }
            }
            KeyCode::Enter => self.flash("details: focus Requests (2) first"),
            _ => {}
        }
        None
    }

    fn move_by(&mut self, delta: isize) {
        let (sel, len) = match self.focus {
            Focus::Providers => (&mut self.provider_selected, self.snapshot.providers.len()),
            Focus::Requests => (&mut self.request_selected, self.snapshot.recent.len()),
        };
        let max = len.saturating_sub(1);
        *sel = if delta < 0 {
            sel.saturating_sub(delta.unsigned_abs())
        } else {
            sel.saturating_add(delta.unsigned_abs()).min(max)
        };
    }

    fn clamp(&mut self) {
        self.provider_selected = self
            .provider_selected
            .min(self.snapshot.providers.len().saturating_sub(1));
        self.request_selected = self
            .request_selected
            .min(self.snapshot.recent.len().saturating_sub(1));
        if self.snapshot.recent.is_empty() {
            self.details = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use crossterm::event::{KeyEventState, KeyModifiers};

    use super::*;
    use crate::core::snapshot::{ProviderView, RequestView};

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn app_with(providers: usize, requests: u64) -> App {
        let snap = Snapshot {
            providers: (0..providers)
                .map(|i| ProviderView {
                    id: format!("p{i}"),
                    ..Default::default()
                })
                .collect(),
            recent: (0..requests)
                .rev()
                .map(|id| RequestView {
                    id,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        App::new(Arc::new(snap))
    }

    #[test]
    fn q_and_ctrl_c_quit() {
        let mut app = app_with(1, 1);
        assert_eq!(app.on_key(key(KeyCode::Char('q'))), Some(Action::Quit));
        assert_eq!(
            app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(
            app.on_key(key(KeyCode::Char('c'))),
            None,
            "plain c is not quit"
        );
        app.help = true;
        assert_eq!(
            app.on_key(key(KeyCode::Char('q'))),
            Some(Action::Quit),
            "quit works under help"
        );
    }

    #[test]
    fn key_release_is_ignored() {
        let mut app = app_with(1, 1);
        let mut release = key(KeyCode::Char('q'));
        release.kind = KeyEventKind::Release;
        release.state = KeyEventState::NONE;
        assert_eq!(app.on_key(release), None);
    }

    #[test]
    fn question_mark_toggles_help_and_esc_closes_it() {
        let mut app = app_with(1, 1);
        app.on_key(key(KeyCode::Char('?')));
        assert!(app.help);
        app.on_key(key(KeyCode::Char('?')));
        assert!(!app.help);
        app.on_key(key(KeyCode::Char('?')));
        app.on_key(key(KeyCode::Char('2')));
        assert_eq!(
            app.focus,
            Focus::Providers,
            "keys other than ?/esc/q are swallowed by help"
        );
        app.on_key(key(KeyCode::Esc));
        assert!(!app.help);
    }

    #[test]
    fn tab_backtab_and_digits_switch_focus() {
        let mut app = app_with(1, 1);
        assert_eq!(app.focus, Focus::Providers);
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.focus, Focus::Requests);
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.focus, Focus::Providers);
        app.on_key(key(KeyCode::BackTab));
        assert_eq!(app.focus, Focus::Requests);
        app.on_key(key(KeyCode::Char('1')));
        assert_eq!(app.focus, Focus::Providers);
        app.on_key(key(KeyCode::Char('2')));
        assert_eq!(app.focus, Focus::Requests);
    }

    #[test]
    fn j_k_move_the_focused_selection_within_bounds() {
        let mut app = app_with(2, 3);
        app.on_key(key(KeyCode::Char('k')));
        assert_eq!(app.provider_selected, 0);
        for _ in 0..5 {
            app.on_key(key(KeyCode::Char('j')));
        }
        assert_eq!(app.provider_selected, 1, "stops at the last provider");
        assert_eq!(
            app.request_selected, 0,
            "requests untouched while providers focused"
        );
        app.on_key(key(KeyCode::Char('2')));
        app.on_key(key(KeyCode::Down));
        app.on_key(key(KeyCode::Down));
        app.on_key(key(KeyCode::Down));
        assert_eq!(app.request_selected, 2);
        app.on_key(key(KeyCode::Up));
        assert_eq!(app.request_selected, 1);
        app.on_key(key(KeyCode::Char('g')));
        assert_eq!(app.request_selected, 0);
        app.on_key(key(KeyCode::Char('G')));
        assert_eq!(app.request_selected, 2);
        let mut empty = app_with(0, 0);
        empty.on_key(key(KeyCode::Char('j')));
        assert_eq!(empty.provider_selected, 0);
    }

    #[test]
    fn enter_toggles_details_only_on_requests() {
        let mut app = app_with(1, 2);
        app.on_key(key(KeyCode::Enter));
        assert!(!app.details);
        assert!(app.message.is_some(), "explains why nothing opened");
        app.on_key(key(KeyCode::Char('2')));
        app.on_key(key(KeyCode::Enter));
        assert!(app.details);
        app.on_key(key(KeyCode::Enter));
        assert!(!app.details);
        app.on_key(key(KeyCode::Enter));
        app.on_key(key(KeyCode::Esc));
        assert!(!app.details);
        let mut empty = app_with(0, 0);
        empty.on_key(key(KeyCode::Char('2')));
        empty.on_key(key(KeyCode::Enter));
        assert!(!empty.details);
    }

    #[test]
    fn details_follow_the_selected_request_across_snapshots() {
        let mut app = app_with(0, 3); // ids 2,1,0
        app.focus = Focus::Requests;
        app.on_key(key(KeyCode::Char('j'))); // id 1
        app.on_key(key(KeyCode::Enter));
        let newer = app_with(0, 5).snapshot; // ids 4..0
        app.set_snapshot(newer);
        assert_eq!(app.selected_request().map(|r| r.id), Some(1));
        assert!(app.details);
        app.set_snapshot(app_with(0, 0).snapshot);
        assert!(!app.details);
        assert_eq!(app.request_selected, 0);
    }

    #[test]
    fn messages_expire_after_ttl() {
        let mut app = app_with(0, 0);
        app.flash("hello");
        assert!(!app.on_tick(1_000));
        assert_eq!(
            app.message.as_ref().and_then(|m| m.expires_at_unix_ms),
            Some(1_000 + MESSAGE_TTL_MS)
        );
        assert!(!app.on_tick(1_000 + MESSAGE_TTL_MS - 1));
        assert!(app.on_tick(1_000 + MESSAGE_TTL_MS));
        assert!(app.message.is_none());
    }
}
