//! The key map: one table ([`BINDINGS`]) drives key dispatch in
//! [`App::on_key`](super::app::App::on_key), the help overlay and the status-bar hints, so the
//! help can never miss a key the console handles.
//!
//! Panel keys (`r`, `c`, `x`, …) only act in their panel; pressed elsewhere they produce a hint
//! naming the panel to focus. Destructive commands open a confirm dialog first (DESIGN §5,
//! clients-and-conventions §6.2).

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::app::Focus;

/// Where a binding applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere (outside the confirm dialog).
    Global,
    /// Only while this panel has focus.
    Panel(Focus),
    /// Only while the confirm dialog is open.
    Dialog,
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
    /// Focus panel `1`–`5` (the digit pressed).
    FocusDigit,
    /// Selection down one row.
    Down,
    /// Selection up one row.
    Up,
    /// Selection to the first row.
    First,
    /// Selection to the last row.
    Last,
    /// Toggle details of the selected request.
    Details,
    /// Reset the selected provider's breaker (confirm).
    ResetBreaker,
    /// Reset every breaker (confirm).
    ResetAllBreakers,
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
    /// Confirm the dialog.
    Confirm,
    /// Cancel the dialog.
    Cancel,
}

/// One entry of the key map.
#[derive(Debug, Clone, Copy)]
pub struct Binding {
    /// Key codes that trigger it (case matters: `r` and `R` differ).
    pub keys: &'static [KeyCode],
    /// True when the control key must be held (`ctrl-c`); otherwise it must not be.
    pub ctrl: bool,
    /// Where it applies.
    pub scope: Scope,
    /// What it does.
    pub cmd: Cmd,
    /// Keys as written in the help, e.g. `j/k, ↓/↑`.
    pub label: &'static str,
    /// Help text.
    pub help: &'static str,
    /// Short status-bar hint (empty: none), e.g. `r reset`.
    pub hint: &'static str,
}

const fn bind(
    keys: &'static [KeyCode],
    scope: Scope,
    cmd: Cmd,
    label: &'static str,
    help: &'static str,
    hint: &'static str,
) -> Binding {
    Binding {
        keys,
        ctrl: false,
        scope,
        cmd,
        label,
        help,
        hint,
    }
}

use KeyCode::{BackTab, Char, Down, End, Enter, Esc, Home, Tab, Up};
use Scope::{Dialog, Global, Panel};

/// Every key the console handles, in help order.
pub const BINDINGS: &[Binding] = &[
    Binding {
        keys: &[Char('c')],
        ctrl: true,
        scope: Global,
        cmd: Cmd::Quit,
        label: "q, ctrl-c",
        help: "quit (drains and stops sluice)",
        hint: "",
    },
    bind(&[Char('q')], Global, Cmd::Quit, "", "", "q quit"),
    bind(
        &[Char('?')],
        Global,
        Cmd::Help,
        "?",
        "toggle this help",
        "? help",
    ),
    bind(
        &[Esc],
        Global,
        Cmd::Back,
        "esc",
        "close help / details, unmark all",
        "",
    ),
    bind(
        &[Tab],
        Global,
        Cmd::FocusNext,
        "tab, shift-tab",
        "focus next / previous panel",
        "tab focus",
    ),
    bind(&[BackTab], Global, Cmd::FocusPrev, "", "", ""),
    bind(
        &[Char('1'), Char('2'), Char('3'), Char('4'), Char('5')],
        Global,
        Cmd::FocusDigit,
        "1 … 5",
        "focus Circuits, Cooldowns, Lockouts, Providers, Requests",
        "",
    ),
    bind(
        &[Char('j'), Down],
        Global,
        Cmd::Down,
        "j/k, ↓/↑",
        "move the selection",
        "j/k move",
    ),
    bind(&[Char('k'), Up], Global, Cmd::Up, "", "", ""),
    bind(
        &[Char('g'), Home],
        Global,
        Cmd::First,
        "g/G, home/end",
        "first / last row",
        "",
    ),
    bind(&[Char('G'), End], Global, Cmd::Last, "", "", ""),
    bind(
        &[Char('r')],
        Panel(Focus::Circuits),
        Cmd::ResetBreaker,
        "r",
        "Circuits: reset the selected breaker (confirm)",
        "r reset",
    ),
    bind(
        &[Char('R')],
        Panel(Focus::Circuits),
        Cmd::ResetAllBreakers,
        "R",
        "Circuits: reset every breaker (confirm)",
        "R reset all",
    ),
    bind(
        &[Char(' ')],
        Panel(Focus::Cooldowns),
        Cmd::Mark,
        "space",
        "Cooldowns: mark / unmark the connection",
        "space mark",
    ),
    bind(
        &[Char('a')],
        Panel(Focus::Cooldowns),
        Cmd::MarkAll,
        "a",
        "Cooldowns: mark all / unmark all",
        "a all",
    ),
    bind(
        &[Char('c')],
        Panel(Focus::Cooldowns),
        Cmd::Clear,
        "c",
        "Cooldowns: clear the marked rows, or the selected one",
        "c clear",
    ),
    bind(
        &[Char('C')],
        Panel(Focus::Cooldowns),
        Cmd::ClearProvider,
        "C",
        "Cooldowns: clear all of the row's provider (confirm)",
        "C clear provider",
    ),
    bind(
        &[Char('x')],
        Panel(Focus::Lockouts),
        Cmd::Reenable,
        "x",
        "Lockouts: re-enable the selected model (confirm)",
        "x re-enable",
    ),
    bind(
        &[Enter],
        Panel(Focus::Requests),
        Cmd::Details,
        "enter",
        "Requests: toggle request details",
        "enter details",
    ),
    bind(
        &[Char('y'), Enter],
        Dialog,
        Cmd::Confirm,
        "y/enter, n/esc",
        "dialog: confirm / cancel",
        "y confirm",
    ),
    bind(&[Char('n'), Esc], Dialog, Cmd::Cancel, "", "", "n cancel"),
];

impl Binding {
    /// True when `key` triggers this binding (shift and alt are ignored; ctrl must match).
    pub fn matches(&self, key: &KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        ctrl == self.ctrl && self.keys.contains(&key.code)
    }
}

/// The binding `key` triggers in `scope`, if any.
pub fn lookup(key: &KeyEvent, scope: Scope) -> Option<&'static Binding> {
    BINDINGS.iter().find(|b| b.scope == scope && b.matches(key))
}

/// A panel binding for `key` in a panel other than `focus` (for "focus X first" hints).
pub fn elsewhere(key: &KeyEvent, focus: Focus) -> Option<&'static Binding> {
    BINDINGS
        .iter()
        .find(|b| matches!(b.scope, Panel(p) if p != focus) && b.matches(key))
}

/// Lines of the help overlay: (keys, text), one per labelled binding.
pub fn help_lines() -> impl Iterator<Item = (&'static str, &'static str)> {
    BINDINGS
        .iter()
        .filter(|b| !b.label.is_empty())
        .map(|b| (b.label, b.help))
}

/// Status-bar hints for the current state: the dialog's keys while it is open, otherwise the
/// global hints followed by the focused panel's.
pub fn hints(focus: Focus, dialog: bool) -> String {
    let wanted = |s: Scope| {
        if dialog {
            s == Dialog
        } else {
            s == Global || s == Panel(focus)
        }
    };
    BINDINGS
        .iter()
        .filter(|b| !b.hint.is_empty() && wanted(b.scope))
        .map(|b| b.hint)
        .collect::<Vec<_>>()
        .join("  ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(c: KeyCode) -> KeyEvent {
        KeyEvent::new(c, KeyModifiers::NONE)
    }

    #[test]
    fn ctrl_must_match() {
        let ctrl_c = KeyEvent::new(Char('c'), KeyModifiers::CONTROL);
        assert_eq!(lookup(&ctrl_c, Global).map(|b| b.cmd), Some(Cmd::Quit));
        assert!(lookup(&key(Char('c')), Global).is_none());
        assert_eq!(
            lookup(&key(Char('c')), Panel(Focus::Cooldowns)).map(|b| b.cmd),
            Some(Cmd::Clear)
        );
        let shift_r = KeyEvent::new(Char('R'), KeyModifiers::SHIFT);
        assert_eq!(
            lookup(&shift_r, Panel(Focus::Circuits)).map(|b| b.cmd),
            Some(Cmd::ResetAllBreakers)
        );
    }

    #[test]
    fn every_binding_is_reachable_from_the_help() {
        // Each binding is either labelled itself or follows a labelled one (its help line).
        assert!(!BINDINGS[0].label.is_empty());
        let labels: Vec<&str> = help_lines().map(|(k, _)| k).collect();
        for b in BINDINGS {
            for code in b.keys {
                let shown = match code {
                    Char(' ') => "space".to_owned(),
                    Char(c) if c.is_ascii_digit() => "1 … 5".to_owned(),
                    Char(c) => c.to_string(),
                    Tab => "tab".into(),
                    BackTab => "shift-tab".into(),
                    Esc => "esc".into(),
                    Enter => "enter".into(),
                    Up => "↑".into(),
                    Down => "↓".into(),
                    Home => "home".into(),
                    End => "end".into(),
                    other => format!("{other:?}"),
                };
                let shown = if b.ctrl {
                    format!("ctrl-{shown}")
                } else {
                    shown
                };
                assert!(
                    labels.iter().any(|l| l.contains(&shown)),
                    "{:?} ({shown}) is not in any help label",
                    b.cmd
                );
            }
        }
    }

    #[test]
    fn hints_follow_focus_and_dialog() {
        let h = hints(Focus::Cooldowns, false);
        assert!(h.starts_with("q quit  ? help"), "{h}");
        assert!(
            h.contains("space mark") && h.contains("C clear provider"),
            "{h}"
        );
        assert!(!h.contains("r reset"), "{h}");
        assert_eq!(hints(Focus::Circuits, true), "y confirm  n cancel");
    }
}
