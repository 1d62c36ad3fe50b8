//! The built-in key map: every command the console knows, its `[console.keys]` action name,
//! where it applies, its default keys, and its help and hint text. Order is help order.

use crossterm::event::KeyCode::{BackTab, Down, End, Enter, Esc, Home, PageDown, PageUp, Tab, Up};

use super::key::Key;
use super::{Cmd, Scope};
use crate::console::app::Focus;

/// One command of the key map, with its default keys.
#[derive(Debug, Clone, Copy)]
pub struct CommandSpec {
    /// Action name in `[console.keys]`, e.g. `clear_cooldown`.
    pub name: &'static str,
    /// What it does.
    pub cmd: Cmd,
    /// Where it applies.
    pub scope: Scope,
    /// Keys bound when the config does not override the action.
    pub defaults: &'static [Key],
    /// Help text.
    pub help: &'static str,
    /// Status-bar hint word (empty: no hint), shown after the first key, e.g. `r reset`.
    pub hint: &'static str,
    /// A command whose first key joins this hint's, e.g. `j/k move` (down with up).
    pub hint_pair: Option<Cmd>,
}

const fn spec(
    name: &'static str,
    cmd: Cmd,
    scope: Scope,
    defaults: &'static [Key],
    help: &'static str,
    hint: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        cmd,
        scope,
        defaults,
        help,
        hint,
        hint_pair: None,
    }
}

const fn focus(
    name: &'static str,
    f: Focus,
    keys: &'static [Key],
    help: &'static str,
) -> CommandSpec {
    spec(name, Cmd::Focus(f), Scope::Global, keys, help, "")
}

/// A `&'static [Key]` from const key expressions (a const item, so it lives forever).
macro_rules! keys {
    ($($k:expr),* $(,)?) => {{
        const KEYS: &[Key] = &[$($k),*];
        KEYS
    }};
}

use Scope::{Dialog, Editor, Global, Input, Panel};

/// Every command, in help order.
pub const COMMANDS: &[CommandSpec] = &[
    spec(
        "quit",
        Cmd::Quit,
        Global,
        keys![Key::ch('q'), Key::ctrl('c')],
        "quit (drains and stops sluice)",
        "quit",
    ),
    spec(
        "help",
        Cmd::Help,
        Global,
        keys![Key::ch('?')],
        "toggle this help",
        "help",
    ),
    spec(
        "back",
        Cmd::Back,
        Global,
        keys![Key::code(Esc)],
        "close help / details, unmark all",
        "",
    ),
    spec(
        "focus_next",
        Cmd::FocusNext,
        Global,
        keys![Key::code(Tab)],
        "focus the next panel",
        "focus",
    ),
    spec(
        "focus_prev",
        Cmd::FocusPrev,
        Global,
        keys![Key::code(BackTab)],
        "focus the previous panel",
        "",
    ),
    focus(
        "focus_circuits",
        Focus::Circuits,
        keys![Key::ch('1')],
        "focus Circuits",
    ),
    focus(
        "focus_cooldowns",
        Focus::Cooldowns,
        keys![Key::ch('2')],
        "focus Cooldowns",
    ),
    focus(
        "focus_lockouts",
        Focus::Lockouts,
        keys![Key::ch('3')],
        "focus Model lockouts",
    ),
    focus(
        "focus_queues",
        Focus::Queues,
        keys![Key::ch('4')],
        "focus Queues",
    ),
    focus(
        "focus_requests",
        Focus::Requests,
        keys![Key::ch('5')],
        "focus Requests",
    ),
    focus(
        "focus_providers",
        Focus::Providers,
        keys![Key::ch('6')],
        "focus Providers",
    ),
    focus(
        "focus_quota",
        Focus::Quota,
        keys![Key::ch('7')],
        "focus Quota (headroom per connection)",
    ),
    CommandSpec {
        hint_pair: Some(Cmd::Up),
        ..spec(
            "down",
            Cmd::Down,
            Global,
            keys![Key::ch('j'), Key::code(Down)],
            "selection (or help) down",
            "move",
        )
    },
    spec(
        "up",
        Cmd::Up,
        Global,
        keys![Key::ch('k'), Key::code(Up)],
        "selection (or help) up",
        "",
    ),
    spec(
        "first",
        Cmd::First,
        Global,
        keys![Key::ch('g'), Key::code(Home)],
        "first row",
        "",
    ),
    spec(
        "last",
        Cmd::Last,
        Global,
        keys![Key::ch('G'), Key::code(End)],
        "last row",
        "",
    ),
    spec(
        "filter",
        Cmd::Filter,
        Global,
        keys![Key::ch('/')],
        "filter rows by provider / connection / model text (enter apply, esc clear)",
        "filter",
    ),
    spec(
        "edit_settings",
        Cmd::EditSettings,
        Global,
        keys![Key::ch('e')],
        "open the lockout / cooldown settings editor",
        "settings",
    ),
    spec(
        "reset_breaker",
        Cmd::ResetBreaker,
        Panel(Focus::Circuits),
        keys![Key::ch('r')],
        "reset the selected breaker (confirm)",
        "reset",
    ),
    spec(
        "reset_all_breakers",
        Cmd::ResetAllBreakers,
        Panel(Focus::Circuits),
        keys![Key::ch('R')],
        "reset every breaker (confirm)",
        "reset all",
    ),
    spec(
        "verify_reset",
        Cmd::VerifyReset,
        Panel(Focus::Circuits),
        keys![Key::ch('v')],
        "probe the provider with 1 token, reset its breaker if it answers (confirm)",
        "verify",
    ),
    spec(
        "history_older",
        Cmd::HistoryOlder,
        Panel(Focus::Requests),
        keys![Key::code(PageDown)],
        "page back through the request log (older rows)",
        "",
    ),
    spec(
        "history_newer",
        Cmd::HistoryNewer,
        Panel(Focus::Requests),
        keys![Key::code(PageUp)],
        "page forward through the request log; past the newest page, back to live rows",
        "",
    ),
    spec(
        "reload_config",
        Cmd::ReloadConfig,
        Global,
        keys![Key::ch('L')],
        "reload the config file (live state kept; a bad file changes nothing)",
        "",
    ),
    spec(
        "mark",
        Cmd::Mark,
        Panel(Focus::Cooldowns),
        keys![Key::ch(' ')],
        "mark / unmark the connection",
        "mark",
    ),
    spec(
        "mark_all",
        Cmd::MarkAll,
        Panel(Focus::Cooldowns),
        keys![Key::ch('a')],
        "mark all / unmark all",
        "all",
    ),
    spec(
        "clear_cooldown",
        Cmd::Clear,
        Panel(Focus::Cooldowns),
        keys![Key::ch('c')],
        "clear the marked rows, or the selected one",
        "clear",
    ),
    spec(
        "clear_provider",
        Cmd::ClearProvider,
        Panel(Focus::Cooldowns),
        keys![Key::ch('C')],
        "clear all of the row's provider (confirm)",
        "clear provider",
    ),
    spec(
        "verify_clear",
        Cmd::VerifyClear,
        Panel(Focus::Cooldowns),
        keys![Key::ch('v')],
        "probe the connection with 1 token, clear it if it answers (confirm)",
        "verify",
    ),
    spec(
        "inject_fault",
        Cmd::InjectFault,
        Panel(Focus::Cooldowns),
        keys![Key::ch('i')],
        "inject a fault on the connection (picker, confirm)",
        "fault",
    ),
    spec(
        "clear_faults",
        Cmd::ClearFaults,
        Global,
        keys![Key::ch('F')],
        "clear every injected fault",
        "",
    ),
    spec(
        "reenable_model",
        Cmd::Reenable,
        Panel(Focus::Lockouts),
        keys![Key::ch('x')],
        "re-enable the selected model (confirm)",
        "re-enable",
    ),
    spec(
        "details",
        Cmd::Details,
        Panel(Focus::Requests),
        keys![Key::code(Enter)],
        "toggle the selected request's details (attempts, skipped targets)",
        "details",
    ),
    spec(
        "confirm",
        Cmd::Confirm,
        Dialog,
        keys![Key::ch('y'), Key::code(Enter)],
        "confirm",
        "confirm",
    ),
    spec(
        "cancel",
        Cmd::Cancel,
        Dialog,
        keys![Key::ch('n'), Key::code(Esc)],
        "cancel",
        "cancel",
    ),
    spec(
        "verify_model_next",
        Cmd::VerifyModelNext,
        Dialog,
        keys![Key::ch('m')],
        "verify dialog: next model to probe with",
        "",
    ),
    spec(
        "fault_kind_next",
        Cmd::FaultKindNext,
        Dialog,
        keys![Key::ch('t')],
        "fault picker: next kind",
        "",
    ),
    spec(
        "fault_duration_next",
        Cmd::FaultDurationNext,
        Dialog,
        keys![Key::ch('d')],
        "fault picker: next duration",
        "",
    ),
    spec(
        "field_next",
        Cmd::FieldNext,
        Editor,
        keys![Key::code(Tab), Key::ch('j'), Key::code(Down)],
        "next field",
        "next",
    ),
    spec(
        "field_prev",
        Cmd::FieldPrev,
        Editor,
        keys![Key::code(BackTab), Key::ch('k'), Key::code(Up)],
        "previous field",
        "",
    ),
    spec(
        "edit_field",
        Cmd::EditField,
        Editor,
        keys![Key::code(Enter)],
        "edit the field (type a value in config syntax)",
        "edit",
    ),
    spec(
        "save_settings",
        Cmd::SaveSettings,
        Editor,
        keys![Key::ch('s')],
        "save the edited fields (validated; applies live and persists)",
        "save",
    ),
    spec(
        "revert_field",
        Cmd::RevertField,
        Editor,
        keys![Key::ch('u')],
        "drop the field's edit, or revert its override to the file's value",
        "revert",
    ),
    spec(
        "revert_all",
        Cmd::RevertAll,
        Editor,
        keys![Key::ch('U')],
        "revert every override to the config file's values",
        "revert all",
    ),
    spec(
        "close_settings",
        Cmd::CloseSettings,
        Editor,
        keys![Key::code(Esc)],
        "close the editor (unsaved edits are dropped)",
        "close",
    ),
    spec(
        "accept_input",
        Cmd::AcceptInput,
        Input,
        keys![Key::code(Enter)],
        "accept the typed value",
        "accept",
    ),
    spec(
        "cancel_input",
        Cmd::CancelInput,
        Input,
        keys![Key::code(Esc)],
        "cancel the field edit",
        "cancel",
    ),
];
