//! What the app does with the outcome of an action, and which key-map scopes it hints.

use super::App;
use crate::console::action::{Outcome, saved_text};
use crate::console::keymap::Scope;
use crate::console::settings::Editor;

impl App {
    /// Takes what came of an action: a status line, the settings editor's data (opens or
    /// refreshes it), a save (closes it), or a refusal (shown under its field).
    pub fn on_outcome(&mut self, outcome: Outcome) {
        match outcome {
            Outcome::Message(m) => self.flash(m),
            Outcome::Settings { view, message } => {
                match self.editor.as_mut() {
                    Some(editor) => editor.refresh(*view),
                    None => self.editor = Some(Editor::new(*view, self.readonly)),
                }
                if let Some(m) = message {
                    self.flash(m);
                }
            }
            Outcome::History {
                before_id,
                older,
                rows,
            } => self.show_history_page(before_id, older, rows),
            Outcome::Saved { count } => {
                self.editor = None;
                self.flash(saved_text(count));
            }
            Outcome::Rejected { field, message } => match self.editor.as_mut() {
                Some(editor) => {
                    editor.reject(&field, message);
                    self.flash(format!("not saved: {field} is invalid"));
                }
                None => self.flash(format!("not saved: {field}: {message}")),
            },
        }
    }

    /// Key-map scopes whose hints the status bar shows now.
    pub fn hint_scopes(&self) -> Vec<Scope> {
        if self.filter_input.is_some() {
            vec![Scope::Input]
        } else if self.confirm.is_some() {
            vec![Scope::Dialog]
        } else if let Some(editor) = &self.editor {
            vec![if editor.input.is_some() {
                Scope::Input
            } else {
                Scope::Editor
            }]
        } else {
            vec![Scope::Global, Scope::Panel(self.focus)]
        }
    }
}
