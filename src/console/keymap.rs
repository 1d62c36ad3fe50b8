//! The key map: one table ([`table::COMMANDS`]) of named commands with default keys, which
//! `[console.keys]` may override ([`keymap_from_config`]). The effective [`Keymap`] drives key
//! dispatch in [`App::on_key`](super::app::App::on_key), the help overlay and the status-bar
//! hints, so the help can never miss or misstate a key the console handles.
//!
//! Panel keys (`r`, `c`, `x`, …) only act in their panel; pressed elsewhere they produce a hint
//! naming the panel to focus. Destructive commands open a confirm dialog first (README "The
//! console"). The settings editor and its field input have scopes of their own, so their keys
//! may reuse global ones. The `quit` keys that use ctrl (`ctrl-c`)
//! work in every mode, dialogs and field input included.
//!
//! Config errors: an unknown action names `console.keys.<action>` and lists the valid ones;
//! two commands bound to one key in the same scope, or a panel key that is also a global key,
//! name both commands.

pub mod key;
pub mod table;

use std::collections::BTreeMap;
use std::fmt;

use crossterm::event::KeyEvent;

pub use self::key::{Key, KeyParseError};
use self::table::{COMMANDS, CommandSpec};
use super::app::Focus;

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere outside dialogs and the settings editor.
    Global,
    /// Only while this panel has focus.
    Panel(Focus),
    /// Only while the confirm dialog is open.
    Dialog,
    /// Only while the settings editor is open (and no field is being typed).
    Editor,
    /// Only while a settings field is being typed; other printable keys are typed.
    Input,
}

impl Scope {
    /// Section title in the help.
    pub fn title(self) -> &'static str {
        match self {
            Scope::Global => "everywhere",
            Scope::Panel(f) => f.title(),
            Scope::Dialog => "confirm dialog",
            Scope::Editor => "settings editor (e)",
            Scope::Input => "typing a field value",
        }
    }

    /// True when one key may not mean two things in `self` and `other`: the same scope, or a
    /// panel and the global scope (the panel would shadow the global key).
    fn clashes_with(self, other: Scope) -> bool {
        self == other
            || matches!(
                (self, other),
                (Scope::Global, Scope::Panel(_)) | (Scope::Panel(_), Scope::Global)
            )
    }

    fn describe(self) -> String {
        match self {
            Scope::Global => "global".to_owned(),
            Scope::Panel(f) => format!("{} panel", f.title()),
            other => other.title().to_owned(),
        }
    }
}

/// What a key means to the UI; [`App::on_key`](super::app::App::on_key) turns it into state
/// changes and, for operator commands, an [`Action`](super::action::Action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmd {
    /// Leave the console and stop sluice.
    Quit,
    /// Toggle the help overlay.
    Help,
    /// Close the topmost overlay, or unmark all connections.
    Back,
    /// Focus the next panel.
    FocusNext,
    /// Focus the previous panel.
    FocusPrev,
    /// Focus this panel.
    Focus(Focus),
    /// Selection (or help) down one row.
    Down,
    /// Selection (or help) up one row.
    Up,
    /// Selection to the first row.
    First,
    /// Selection to the last row.
    Last,
    /// Open the one-line row filter (`/`) in the status bar.
    Filter,
    /// Open the settings editor.
    EditSettings,
    /// Toggle details of the selected request.
    Details,
    /// Reset the selected provider's breaker (confirm).
    ResetBreaker,
    /// Reset every breaker (confirm).
    ResetAllBreakers,
    /// Reload the config file (`Control::reload_config`).
    ReloadConfig,
    /// Requests panel: the next older page of the request log.
    HistoryOlder,
    /// Requests panel: the next newer page of the request log (the live view after the
    /// first page).
    HistoryNewer,
    /// Mark / unmark the selected connection.
    Mark,
    /// Mark every connection (or unmark all when all are marked).
    MarkAll,
    /// Clear the marked connections, or the selected one when none is marked.
    Clear,
    /// Clear every connection of the selected row's provider (confirm).
    ClearProvider,
    /// Re-enable the selected model lockout (confirm).
    Reenable,
    /// Open the fault picker for the selected connection (confirm dialog).
    InjectFault,
    /// Remove every injected fault.
    ClearFaults,
    /// Verify and clear the selected connection (probe first; confirm dialog).
    VerifyClear,
    /// Verify and reset the selected provider's breaker (probe first; confirm dialog).
    VerifyReset,
    /// Verify dialog: the next model to probe with.
    VerifyModelNext,
    /// Fault picker: next fault kind.
    FaultKindNext,
    /// Fault picker: next duration preset.
    FaultDurationNext,
    /// Confirm the dialog.
    Confirm,
    /// Cancel the dialog.
    Cancel,
    /// Settings editor: next field.
    FieldNext,
    /// Settings editor: previous field.
    FieldPrev,
    /// Settings editor: start typing the selected field.
    EditField,
    /// Settings editor: save the edited fields.
    SaveSettings,
    /// Settings editor: drop the field's edit, or revert its override to the file's value.
    RevertField,
    /// Settings editor: revert every override.
    RevertAll,
    /// Settings editor: close.
    CloseSettings,
    /// Field input: accept the typed value.
    AcceptInput,
    /// Field input: cancel.
    CancelInput,
}

impl Cmd {
    /// True for commands that change sluice's state (resets, clears, re-enables, settings
    /// edits, and the marks that only serve a clear): `--readonly` refuses them and leaves
    /// their hints out of the status bar.
    pub fn changes_state(self) -> bool {
        matches!(
            self,
            Cmd::ResetBreaker
                | Cmd::ResetAllBreakers
                | Cmd::ReloadConfig
                | Cmd::Mark
                | Cmd::MarkAll
                | Cmd::Clear
                | Cmd::ClearProvider
                | Cmd::Reenable
                | Cmd::InjectFault
                | Cmd::VerifyClear
                | Cmd::VerifyReset
                | Cmd::ClearFaults
                | Cmd::EditField
                | Cmd::SaveSettings
                | Cmd::RevertField
                | Cmd::RevertAll
        )
    }
}

/// One command with its effective keys.
#[derive(Debug, Clone)]
pub struct Binding {
    /// The command's entry in the built-in table (name, scope, help).
    pub spec: &'static CommandSpec,
    /// Keys that trigger it (the defaults unless `[console.keys]` overrides them).
    pub keys: Vec<Key>,
}

impl Binding {
    /// True when `event` triggers this binding.
    pub fn matches(&self, event: &KeyEvent) -> bool {
        self.keys.iter().any(|k| k.matches(event))
    }

    /// The keys as shown in the help, e.g. `j, ↓`.
    pub fn label(&self) -> String {
        self.keys
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The effective key map: one [`Binding`] per command of [`table::COMMANDS`], in help order.
#[derive(Debug, Clone)]
pub struct Keymap {
    bindings: Vec<Binding>,
}

impl Default for Keymap {
    /// The built-in bindings (the key table in README "The console").
    fn default() -> Self {
        Self {
            bindings: COMMANDS
                .iter()
                .map(|spec| Binding {
                    spec,
                    keys: spec.defaults.to_vec(),
                })
                .collect(),
        }
    }
}

/// A `[console.keys]` problem; `key_path` is `console.keys.<action>` (or `console.keys`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key_path}: {message}")]
pub struct KeymapError {
    /// Dotted config key, e.g. `console.keys.clear_cooldown`.
    pub key_path: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// The built-in key map with the `[console.keys]` overrides applied: `action = [keys]`, the
/// action names being those of [`table::COMMANDS`] (shown by `?`). Unlisted actions keep their
/// defaults; a listed action gets exactly the listed keys.
///
/// Errors: an unknown action (the message lists every valid one), a key that does not parse,
/// an empty list, or a key bound to two commands in one scope (or in a panel and globally).
pub fn keymap_from_config(keys: &BTreeMap<String, Vec<String>>) -> Result<Keymap, KeymapError> {
    let mut map = Keymap::default();
    for (action, list) in keys {
        let key_path = format!("console.keys.{action}");
        let Some(binding) = map.bindings.iter_mut().find(|b| b.spec.name == action) else {
            let valid: Vec<&str> = COMMANDS.iter().map(|c| c.name).collect();
            return Err(KeymapError {
                key_path,
                message: format!(
                    "unknown action '{action}'; valid actions: {}",
                    valid.join(", ")
                ),
            });
        };
        if list.is_empty() {
            return Err(KeymapError {
                key_path,
                message: "no keys given; bind at least one key, e.g. \"c\"".to_owned(),
            });
        }
        let mut parsed: Vec<Key> = Vec::with_capacity(list.len());
        for text in list {
            let k: Key = text.parse().map_err(|e: KeyParseError| KeymapError {
                key_path: key_path.clone(),
                message: e.to_string(),
            })?;
            if !parsed.contains(&k) {
                parsed.push(k);
            }
        }
        binding.keys = parsed;
    }
    map.check(keys)?;
    Ok(map)
}

impl Keymap {
    /// Every binding, in help order.
    pub fn bindings(&self) -> &[Binding] {
        &self.bindings
    }

    /// The binding `event` triggers in `scope`, if any.
    pub fn lookup(&self, event: &KeyEvent, scope: Scope) -> Option<&Binding> {
        self.bindings
            .iter()
            .find(|b| b.spec.scope == scope && b.matches(event))
    }

    /// A panel binding for `event` in a panel other than `focus` (for "focus X first" hints).
    pub fn elsewhere(&self, event: &KeyEvent, focus: Focus) -> Option<&Binding> {
        self.bindings
            .iter()
            .find(|b| matches!(b.spec.scope, Scope::Panel(p) if p != focus) && b.matches(event))
    }

    /// The binding of `cmd`, if the table has it.
    pub fn binding(&self, cmd: Cmd) -> Option<&Binding> {
        self.bindings.iter().find(|b| b.spec.cmd == cmd)
    }

    /// The first key of `cmd` as shown, e.g. `c` (empty when unbound).
    pub fn first_key(&self, cmd: Cmd) -> String {
        self.binding(cmd)
            .and_then(|b| b.keys.first())
            .map(ToString::to_string)
            .unwrap_or_default()
    }

    /// Status-bar hints for the given scopes, in table order, e.g. `q quit  ? help  j/k move`.
    pub fn hints(&self, scopes: &[Scope]) -> String {
        self.hints_for(scopes, false)
    }

    /// [`Keymap::hints`], leaving out commands that change state when `readonly` (see
    /// [`Cmd::changes_state`]): a `--readonly` console advertises only what it will do.
    pub fn hints_for(&self, scopes: &[Scope], readonly: bool) -> String {
        self.bindings
            .iter()
            .filter(|b| !b.spec.hint.is_empty() && scopes.contains(&b.spec.scope))
            .filter(|b| !(readonly && b.spec.cmd.changes_state()))
            .filter_map(|b| {
                let first = b.keys.first()?.to_string();
                let keys = match b.spec.hint_pair.map(|c| self.first_key(c)) {
                    Some(other) if !other.is_empty() => format!("{first}/{other}"),
                    _ => first,
                };
                Some(format!("{keys} {}", b.spec.hint))
            })
            .collect::<Vec<_>>()
            .join("  ")
    }

    /// Refuses a key bound to two commands whose scopes clash; the error names the overridden
    /// action (from `overrides`) when there is one.
    fn check(&self, overrides: &BTreeMap<String, Vec<String>>) -> Result<(), KeymapError> {
        for (i, a) in self.bindings.iter().enumerate() {
            for b in self.bindings.iter().skip(i + 1) {
                if !a.spec.scope.clashes_with(b.spec.scope) {
                    continue;
                }
                if let Some(k) = a.keys.iter().find(|k| b.keys.contains(k)) {
                    let blamed = [b.spec.name, a.spec.name]
                        .into_iter()
                        .find(|n| overrides.contains_key(*n))
                        .map_or_else(
                            || "console.keys".to_owned(),
                            |n| format!("console.keys.{n}"),
                        );
                    return Err(KeymapError {
                        key_path: blamed,
                        message: format!(
                            "'{k}' is bound to both {} ({}) and {} ({}); give one of them another key",
                            a.spec.name,
                            a.spec.scope.describe(),
                            b.spec.name,
                            b.spec.scope.describe(),
                        ),
                    });
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Keymap {
    /// One `action = [keys]` line per command, in `[console.keys]` syntax-ish (for docs).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in &self.bindings {
            writeln!(f, "{:<20} {}", b.spec.name, b.label())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
