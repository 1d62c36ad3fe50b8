//! Key map tests: every default key, `[console.keys]` overrides and their errors, hints.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::*;

fn ev(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    ev(KeyCode::Char(c))
}

fn overrides(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
    pairs
        .iter()
        .map(|(a, ks)| {
            (
                (*a).to_owned(),
                ks.iter().map(|k| (*k).to_owned()).collect(),
            )
        })
        .collect()
}

fn cmd(km: &Keymap, key: KeyEvent, scope: Scope) -> Option<Cmd> {
    km.lookup(&key, scope).map(|b| b.spec.cmd)
}

#[test]
fn every_default_key_gives_its_command() {
    use Scope::{Dialog, Editor, Global, Input, Panel};
    let km = Keymap::default();
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    let shift_tab = KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT);
    let cases: Vec<(KeyEvent, Scope, Cmd)> = vec![
        (ch('q'), Global, Cmd::Quit),
        (ctrl_c, Global, Cmd::Quit),
        (ch('?'), Global, Cmd::Help),
        (ev(KeyCode::Esc), Global, Cmd::Back),
        (ev(KeyCode::Tab), Global, Cmd::FocusNext),
        (shift_tab, Global, Cmd::FocusPrev),
        (ch('1'), Global, Cmd::Focus(Focus::Circuits)),
        (ch('2'), Global, Cmd::Focus(Focus::Cooldowns)),
        (ch('3'), Global, Cmd::Focus(Focus::Lockouts)),
        (ch('4'), Global, Cmd::Focus(Focus::Queues)),
        (ch('5'), Global, Cmd::Focus(Focus::Requests)),
        (ch('6'), Global, Cmd::Focus(Focus::Providers)),
        (ch('7'), Global, Cmd::Focus(Focus::Quota)),
        (ch('j'), Global, Cmd::Down),
        (ev(KeyCode::Down), Global, Cmd::Down),
        (ch('k'), Global, Cmd::Up),
        (ev(KeyCode::Up), Global, Cmd::Up),
        (ch('g'), Global, Cmd::First),
        (ev(KeyCode::Home), Global, Cmd::First),
        (
            KeyEvent::new(KeyCode::Char('G'), KeyModifiers::SHIFT),
            Global,
            Cmd::Last,
        ),
        (ev(KeyCode::End), Global, Cmd::Last),
        (ch('/'), Global, Cmd::Filter),
        (ch('e'), Global, Cmd::EditSettings),
        (
            KeyEvent::new(KeyCode::Char('L'), KeyModifiers::SHIFT),
            Global,
            Cmd::ReloadConfig,
        ),
        (ch('r'), Panel(Focus::Circuits), Cmd::ResetBreaker),
        (ch('R'), Panel(Focus::Circuits), Cmd::ResetAllBreakers),
        (ch(' '), Panel(Focus::Cooldowns), Cmd::Mark),
        (ch('a'), Panel(Focus::Cooldowns), Cmd::MarkAll),
        (ch('c'), Panel(Focus::Cooldowns), Cmd::Clear),
        (ch('C'), Panel(Focus::Cooldowns), Cmd::ClearProvider),
        (ch('x'), Panel(Focus::Lockouts), Cmd::Reenable),
        (ch('i'), Panel(Focus::Cooldowns), Cmd::InjectFault),
        (ch('F'), Global, Cmd::ClearFaults),
        (ch('t'), Dialog, Cmd::FaultKindNext),
        (ch('d'), Dialog, Cmd::FaultDurationNext),
        (ch('v'), Panel(Focus::Cooldowns), Cmd::VerifyClear),
        (ch('v'), Panel(Focus::Circuits), Cmd::VerifyReset),
        (ch('m'), Dialog, Cmd::VerifyModelNext),
        (ev(KeyCode::Enter), Panel(Focus::Requests), Cmd::Details),
        (
            ev(KeyCode::PageDown),
            Panel(Focus::Requests),
            Cmd::HistoryOlder,
        ),
        (
            ev(KeyCode::PageUp),
            Panel(Focus::Requests),
            Cmd::HistoryNewer,
        ),
        (ch('y'), Dialog, Cmd::Confirm),
        (ev(KeyCode::Enter), Dialog, Cmd::Confirm),
        (ch('n'), Dialog, Cmd::Cancel),
        (ev(KeyCode::Esc), Dialog, Cmd::Cancel),
        (ev(KeyCode::Tab), Editor, Cmd::FieldNext),
        (ch('j'), Editor, Cmd::FieldNext),
        (shift_tab, Editor, Cmd::FieldPrev),
        (ch('k'), Editor, Cmd::FieldPrev),
        (ev(KeyCode::Enter), Editor, Cmd::EditField),
        (ch('s'), Editor, Cmd::SaveSettings),
        (ch('u'), Editor, Cmd::RevertField),
        (ch('U'), Editor, Cmd::RevertAll),
        (ev(KeyCode::Esc), Editor, Cmd::CloseSettings),
        (ev(KeyCode::Enter), Input, Cmd::AcceptInput),
        (ev(KeyCode::Esc), Input, Cmd::CancelInput),
    ];
    for (key, scope, want) in &cases {
        assert_eq!(cmd(&km, *key, *scope), Some(*want), "{key:?} in {scope:?}");
    }
    // Every command of the table has at least one case above.
    for spec in table::COMMANDS {
        assert!(
            cases.iter().any(|(_, _, c)| *c == spec.cmd),
            "{} has no key test",
            spec.name
        );
    }
    assert_eq!(cmd(&km, ch('c'), Global), None, "c is a panel key only");
    assert_eq!(cmd(&km, ch('r'), Panel(Focus::Cooldowns)), None);
}

#[test]
fn built_in_map_passes_its_own_checks_and_names_are_unique() {
    let km = keymap_from_config(&BTreeMap::new()).unwrap();
    assert_eq!(km.bindings().len(), table::COMMANDS.len());
    let mut names: Vec<&str> = table::COMMANDS.iter().map(|c| c.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), table::COMMANDS.len());
}

#[test]
fn an_override_replaces_the_defaults_of_that_action_only() {
    let km = keymap_from_config(&overrides(&[
        ("reset_breaker", &["<C-r>", "b"]),
        ("quit", &["Q"]),
    ]))
    .unwrap();
    let circuits = Scope::Panel(Focus::Circuits);
    let ctrl_r = KeyEvent::new(KeyCode::Char('r'), KeyModifiers::CONTROL);
    assert_eq!(cmd(&km, ctrl_r, circuits), Some(Cmd::ResetBreaker));
    assert_eq!(cmd(&km, ch('b'), circuits), Some(Cmd::ResetBreaker));
    assert_eq!(cmd(&km, ch('r'), circuits), None, "the default r is gone");
    assert_eq!(cmd(&km, ch('R'), circuits), Some(Cmd::ResetAllBreakers));
    assert_eq!(cmd(&km, ch('Q'), Scope::Global), Some(Cmd::Quit));
    assert_eq!(cmd(&km, ch('q'), Scope::Global), None);
    assert!(
        km.hints(&[Scope::Global, circuits])
            .starts_with("Q quit  ? help")
    );
    assert!(km.hints(&[circuits]).starts_with("ctrl-r reset"));
}

#[test]
fn unknown_actions_are_refused_with_the_valid_names() {
    let e = keymap_from_config(&overrides(&[("frobnicate", &["f"])])).unwrap_err();
    assert_eq!(e.key_path, "console.keys.frobnicate");
    assert!(e.message.contains("unknown action 'frobnicate'"), "{e}");
    for name in [
        "quit",
        "clear_cooldown",
        "reset_breaker",
        "edit_settings",
        "save_settings",
    ] {
        assert!(e.message.contains(name), "{name} not listed: {e}");
    }
}

#[test]
fn bad_keys_and_empty_lists_are_refused() {
    let e = keymap_from_config(&overrides(&[("quit", &["<Hyper-q>"])])).unwrap_err();
    assert_eq!(e.key_path, "console.keys.quit");
    assert!(e.message.contains("'<Hyper-q>' is not a key"), "{e}");
    let e = keymap_from_config(&overrides(&[("quit", &[])])).unwrap_err();
    assert!(e.message.contains("bind at least one key"), "{e}");
}

#[test]
fn conflicts_in_one_panel_are_refused_naming_both() {
    let e = keymap_from_config(&overrides(&[("mark_all", &["c"])])).unwrap_err();
    assert_eq!(e.key_path, "console.keys.mark_all");
    assert!(
        e.message.contains("'c' is bound to both")
            && e.message.contains("mark_all (Cooldowns panel)")
            && e.message.contains("clear_cooldown (Cooldowns panel)"),
        "{e}"
    );
}

#[test]
fn a_panel_key_colliding_with_a_global_key_is_refused() {
    let e = keymap_from_config(&overrides(&[("reset_breaker", &["q"])])).unwrap_err();
    assert!(
        e.message.contains("quit (global)") && e.message.contains("reset_breaker (Circuits panel)"),
        "{e}"
    );
    let e = keymap_from_config(&overrides(&[("help", &["x"])])).unwrap_err();
    assert_eq!(e.key_path, "console.keys.help");
    assert!(e.message.contains("reenable_model (Lockouts panel)"), "{e}");
    let e = keymap_from_config(&overrides(&[("help", &["j"])])).unwrap_err();
    assert!(
        e.message.contains("help (global) and down (global)")
            || e.message.contains("down (global) and help (global)"),
        "{e}"
    );
}

#[test]
fn the_same_key_in_different_panels_or_modal_scopes_is_fine() {
    // `x` in Cooldowns and Lockouts; `s` in the editor and as a Cooldowns key.
    keymap_from_config(&overrides(&[("clear_cooldown", &["x"]), ("mark", &["s"])])).unwrap();
    // The editor may reuse a global key.
    keymap_from_config(&overrides(&[("save_settings", &["q"])])).unwrap();
    let e = keymap_from_config(&overrides(&[("save_settings", &["u"])])).unwrap_err();
    assert!(e.message.contains("revert_field"), "same editor scope: {e}");
}

#[test]
fn hints_follow_the_scopes() {
    let km = Keymap::default();
    let h = km.hints(&[Scope::Global, Scope::Panel(Focus::Cooldowns)]);
    assert!(
        h.starts_with("q quit  ? help  tab focus  j/k move  / filter  e settings"),
        "{h}"
    );
    assert!(
        h.contains("space mark") && h.contains("C clear provider"),
        "{h}"
    );
    assert!(!h.contains("r reset"), "{h}");
    assert_eq!(km.hints(&[Scope::Dialog]), "y confirm  n cancel");
    assert_eq!(
        km.hints(&[Scope::Editor]),
        "tab next  enter edit  s save  u revert  U revert all  esc close"
    );
    assert_eq!(km.hints(&[Scope::Input]), "enter accept  esc cancel");
}

#[test]
fn an_override_drives_the_app_and_its_focus_hints() {
    use std::sync::Arc;

    use crate::console::app::{Action, App};
    use crate::core::operator::control::ClearTarget;
    use crate::snapshot::{ConnectionView, ProviderView, Snapshot};

    let snap = Snapshot {
        providers: vec![ProviderView {
            id: "p".into(),
            connections: vec![ConnectionView {
                id: "k1".into(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut app = App::new(Arc::new(snap));
    app.keymap = Arc::new(
        keymap_from_config(&overrides(&[
            ("clear_cooldown", &["d"]),
            ("focus_cooldowns", &["<F2>"]),
        ]))
        .unwrap(),
    );
    assert_eq!(app.on_key(ch('d')), None);
    assert_eq!(
        app.message.as_ref().map(|m| m.text.as_str()),
        Some("d: focus Cooldowns (f2) first")
    );
    app.on_key(ev(KeyCode::F(2)));
    assert_eq!(app.focus, Focus::Cooldowns);
    assert_eq!(app.on_key(ch('c')), None, "the default c no longer clears");
    assert_eq!(
        app.on_key(ch('d')),
        Some(Action::ClearCooldowns(ClearTarget::Connections(vec![
            "k1".into()
        ])))
    );
}
