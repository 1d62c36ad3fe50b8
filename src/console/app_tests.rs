//! Key handling: focus, selection, marks, the confirm dialog and read-only mode.

use crossterm::event::{KeyCode, KeyEventState, KeyModifiers};

use super::*;
use crate::snapshot::{BreakerView, ConnectionView, LockoutView, ProviderView, RequestView};

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

fn app_with(providers: usize, requests: u64) -> App {
    let snap = Snapshot {
        providers: (0..providers)
            .map(|i| ProviderView {
                id: format!("p{i}"),
                connections: vec![
                    ConnectionView {
                        id: format!("p{i}-a"),
                        ..Default::default()
                    },
                    ConnectionView {
                        id: format!("p{i}-b"),
                        ..Default::default()
                    },
                ],
                breaker: BreakerView {
                    state: crate::snapshot::BreakerState::Closed,
                    ..Default::default()
                },
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
        lockouts: vec![
            LockoutView {
                provider: "p0".into(),
                connection: "p0-a".into(),
                model: "glm-5".into(),
                until_unix_ms: 10,
                ..Default::default()
            },
            LockoutView {
                provider: "p1".into(),
                connection: "p1-b".into(),
                model: "opus".into(),
                until_unix_ms: 20,
                ..Default::default()
            },
        ],
        ..Default::default()
    };
    App::new(Arc::new(snap))
}

#[test]
fn q_and_ctrl_c_quit() {
    let mut app = app_with(1, 1);
    assert_eq!(app.on_key(ch('q')), Some(Action::Quit));
    let ctrl_c = KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL);
    assert_eq!(app.on_key(ctrl_c), Some(Action::Quit));
    app.help = true;
    assert_eq!(
        app.on_key(ch('q')),
        Some(Action::Quit),
        "quit works under help"
    );
    app.help = false;
    app.on_key(ch('r'));
    assert!(app.confirm.is_some());
    assert_eq!(app.on_key(ch('q')), None, "q does not quit from the dialog");
    assert_eq!(
        app.on_key(ctrl_c),
        Some(Action::Quit),
        "ctrl-c always quits"
    );
}

#[test]
fn key_release_is_ignored() {
    let mut app = app_with(1, 1);
    let mut release = ch('q');
    release.kind = KeyEventKind::Release;
    release.state = KeyEventState::NONE;
    assert_eq!(app.on_key(release), None);
}

#[test]
fn question_mark_toggles_help_and_esc_closes_it() {
    let mut app = app_with(1, 1);
    app.on_key(ch('?'));
    assert!(app.help);
    app.on_key(ch('?'));
    assert!(!app.help);
    app.on_key(ch('?'));
    app.on_key(ch('2'));
    app.on_key(ch('r'));
    assert_eq!(app.focus, Focus::Circuits, "keys are swallowed by help");
    assert!(app.confirm.is_none());
    app.on_key(key(KeyCode::Esc));
    assert!(!app.help);
}

#[test]
fn tab_backtab_and_digits_cycle_all_seven_panels() {
    let mut app = app_with(1, 1);
    assert_eq!(app.focus, Focus::Circuits);
    for want in [
        Focus::Cooldowns,
        Focus::Lockouts,
        Focus::Queues,
        Focus::Requests,
        Focus::Providers,
        Focus::Quota,
        Focus::Circuits,
    ] {
        app.on_key(key(KeyCode::Tab));
        assert_eq!(app.focus, want);
    }
    app.on_key(key(KeyCode::BackTab));
    assert_eq!(app.focus, Focus::Quota);
    for (digit, want) in ('1'..='7').zip(Focus::ALL) {
        app.on_key(ch(digit));
        assert_eq!(app.focus, want);
    }
    app.on_key(ch('8'));
    assert_eq!(app.focus, Focus::Quota, "8 is not a panel");
}

#[test]
fn j_k_move_the_focused_selection_within_bounds() {
    let mut app = app_with(2, 3);
    app.on_key(ch('k'));
    assert_eq!(app.circuit_selected, 0);
    for _ in 0..5 {
        app.on_key(ch('j'));
    }
    assert_eq!(app.circuit_selected, 1, "stops at the last provider");
    app.on_key(ch('2'));
    for _ in 0..9 {
        app.on_key(key(KeyCode::Down));
    }
    assert_eq!(app.cooldown_selected, 3, "four connection rows");
    assert_eq!(
        app.selected_connection().map(|(_, c)| c.id.as_str()),
        Some("p1-b")
    );
    app.on_key(ch('3'));
    app.on_key(ch('G'));
    assert_eq!(app.lockout_selected, 1);
    app.on_key(ch('5'));
    app.on_key(key(KeyCode::Down));
    app.on_key(key(KeyCode::Down));
    assert_eq!(app.request_selected, 2);
    app.on_key(key(KeyCode::Up));
    assert_eq!(app.request_selected, 1);
    app.on_key(ch('g'));
    assert_eq!(app.request_selected, 0);
    assert_eq!(app.provider_selected, 0, "Providers untouched");
    let mut empty = App::new(Arc::new(Snapshot::default()));
    empty.on_key(ch('j'));
    assert_eq!(empty.circuit_selected, 0);
}

#[test]
fn r_opens_a_confirm_and_only_y_yields_the_reset() {
    let mut app = app_with(2, 0);
    app.on_key(ch('j'));
    assert_eq!(app.on_key(ch('r')), None, "no dispatch before confirm");
    let c = app.confirm.clone().expect("dialog open");
    assert_eq!(c.prompt, "Reset breaker 'p1'?");
    assert_eq!(
        app.on_key(ch('j')),
        None,
        "other keys do nothing in the dialog"
    );
    assert_eq!(app.circuit_selected, 1);
    assert_eq!(app.on_key(ch('n')), None);
    assert!(app.confirm.is_none());
    assert_eq!(
        app.message.as_ref().map(|m| m.text.as_str()),
        Some("cancelled")
    );

    app.on_key(ch('r'));
    assert_eq!(app.on_key(key(KeyCode::Esc)), None);
    assert!(app.confirm.is_none(), "esc cancels");

    app.on_key(ch('r'));
    assert_eq!(
        app.on_key(ch('y')),
        Some(Action::ResetBreaker(Some("p1".into())))
    );
    assert!(app.confirm.is_none());
    app.on_key(ch('R'));
    assert_eq!(
        app.confirm.as_ref().map(|c| c.prompt.as_str()),
        Some("Reset all 2 breakers?")
    );
    assert_eq!(
        app.on_key(key(KeyCode::Enter)),
        Some(Action::ResetBreaker(None))
    );
}

#[test]
fn panel_keys_elsewhere_say_which_panel_to_focus() {
    let mut app = app_with(1, 1);
    assert_eq!(app.on_key(ch('x')), None);
    assert!(app.confirm.is_none());
    assert_eq!(
        app.message.as_ref().map(|m| m.text.as_str()),
        Some("x: focus Lockouts (3) first")
    );
    app.on_key(key(KeyCode::Enter));
    assert_eq!(
        app.message.as_ref().map(|m| m.text.as_str()),
        Some("enter: focus Requests (5) first")
    );
    assert!(!app.details);
}

#[test]
fn space_and_a_mark_and_c_clears_the_marked_rows() {
    let mut app = app_with(2, 0);
    app.on_key(ch('2'));
    app.on_key(ch(' '));
    app.on_key(ch('j'));
    app.on_key(ch('j'));
    app.on_key(ch(' '));
    assert_eq!(app.marked.len(), 2);
    app.on_key(ch(' '));
    app.on_key(ch('k'));
    app.on_key(ch(' '));
    assert_eq!(
        app.on_key(ch('c')),
        Some(Action::ClearCooldowns(ClearTarget::Connections(vec![
            "p0-a".into(),
            "p0-b".into()
        ])))
    );
    assert!(app.marked.is_empty(), "marks are consumed");
    // No marks: the current row.
    assert_eq!(
        app.on_key(ch('c')),
        Some(Action::ClearCooldowns(ClearTarget::Connections(vec![
            "p0-b".into()
        ])))
    );
    app.on_key(ch('a'));
    assert_eq!(app.marked.len(), 4);
    app.on_key(ch('a'));
    assert!(app.marked.is_empty(), "a again unmarks all");
    app.on_key(ch('a'));
    app.on_key(key(KeyCode::Esc));
    assert!(app.marked.is_empty(), "esc unmarks all");
}

#[test]
fn shift_c_clears_the_rows_provider_after_confirm() {
    let mut app = app_with(2, 0);
    app.on_key(ch('2'));
    app.on_key(ch('G'));
    assert_eq!(app.on_key(ch('C')), None);
    assert_eq!(
        app.confirm.as_ref().map(|c| c.prompt.as_str()),
        Some("Clear all cooldowns of provider 'p1'?")
    );
    assert_eq!(
        app.on_key(ch('y')),
        Some(Action::ClearCooldowns(ClearTarget::All {
            provider: Some("p1".into())
        }))
    );
}

#[test]
fn x_reenables_the_selected_lockout_after_confirm() {
    let mut app = app_with(2, 0);
    app.on_key(ch('3'));
    app.on_key(ch('j'));
    assert_eq!(app.on_key(ch('x')), None);
    assert_eq!(
        app.confirm.as_ref().map(|c| c.prompt.as_str()),
        Some("Re-enable 'opus' on p1:p1-b?")
    );
    assert_eq!(
        app.on_key(ch('y')),
        Some(Action::ReenableModel {
            provider: "p1".into(),
            connection: "p1-b".into(),
            model: "opus".into(),
        })
    );
    let mut empty = App::new(Arc::new(Snapshot::default()));
    empty.on_key(ch('3'));
    assert_eq!(empty.on_key(ch('x')), None);
    assert!(empty.confirm.is_none());
}

#[test]
fn readonly_blocks_every_mutating_action() {
    let mut app = app_with(2, 0);
    app.readonly = true;
    let blocked = |app: &mut App, keys: &[KeyEvent]| {
        app.message = None;
        let mut out = None;
        for k in keys {
            out = out.or(app.on_key(*k));
        }
        assert_eq!(out, None);
        assert!(app.confirm.is_none(), "no dialog in read-only mode");
        let text = app
            .message
            .as_ref()
            .map(|m| m.text.clone())
            .unwrap_or_default();
        assert!(text.contains("read-only mode"), "{text:?}");
    };
    blocked(&mut app, &[ch('1'), ch('r')]);
    blocked(&mut app, &[ch('R')]);
    blocked(&mut app, &[ch('2'), ch('c')]);
    blocked(&mut app, &[ch(' '), ch('c')]);
    assert_eq!(app.marked.len(), 1, "marking is harmless and allowed");
    blocked(&mut app, &[ch('C')]);
    blocked(&mut app, &[ch('3'), ch('x')]);
    blocked(&mut app, &[ch('L')]);
    assert_eq!(app.on_key(ch('q')), Some(Action::Quit), "quit still works");
}

#[test]
fn enter_toggles_details_only_on_requests() {
    let mut app = app_with(1, 2);
    app.on_key(key(KeyCode::Enter));
    assert!(!app.details);
    app.on_key(ch('5'));
    app.on_key(key(KeyCode::Enter));
    assert!(app.details);
    app.on_key(key(KeyCode::Enter));
    assert!(!app.details);
    app.on_key(key(KeyCode::Enter));
    app.on_key(key(KeyCode::Esc));
    assert!(!app.details);
    let mut empty = app_with(0, 0);
    empty.on_key(ch('5'));
    empty.on_key(key(KeyCode::Enter));
    assert!(!empty.details);
}

#[test]
fn details_and_lockout_selection_follow_their_item_across_snapshots() {
    let mut app = app_with(0, 3); // ids 2,1,0
    app.focus = Focus::Requests;
    app.on_key(ch('j')); // id 1
    app.on_key(key(KeyCode::Enter));
    app.lockout_selected = 1; // opus
    let mut newer = (*app_with(0, 5).snapshot).clone(); // ids 4..0
    newer.lockouts.reverse();
    app.set_snapshot(Arc::new(newer));
    assert_eq!(app.selected_request().map(|r| r.id), Some(1));
    assert!(app.details);
    assert_eq!(
        app.selected_lockout().map(|l| l.model.as_str()),
        Some("opus")
    );
    assert_eq!(app.lockout_selected, 0);
    app.set_snapshot(Arc::new(Snapshot::default()));
    assert!(!app.details);
    assert_eq!((app.request_selected, app.lockout_selected), (0, 0));
}

#[test]
fn marks_of_vanished_connections_are_dropped() {
    let mut app = app_with(2, 0);
    app.marked = ["p1-a".to_owned(), "gone".to_owned()].into();
    app.set_snapshot(app_with(2, 0).snapshot);
    assert_eq!(app.marked, ["p1-a".to_owned()].into());
}

#[test]
fn countdowns_count_only_when_visible_and_running() {
    let mut app = app_with(1, 0);
    let mode = LayoutMode::Grid;
    // Lockouts end at 10 and 20 ms.
    assert!(app.has_visible_countdowns(5, mode));
    assert!(!app.has_visible_countdowns(20, mode), "all expired");
    assert!(!app.has_visible_countdowns(5, LayoutMode::TooSmall));
    assert!(
        !app.has_visible_countdowns(5, LayoutMode::Tabs),
        "Lockouts tab not shown"
    );
    app.focus = Focus::Lockouts;
    assert!(app.has_visible_countdowns(5, LayoutMode::Tabs));
    let mut snap = (*app.snapshot).clone();
    snap.lockouts.clear();
    snap.providers[0].connections[1].cooldown_until_unix_ms = Some(1_000);
    app.set_snapshot(Arc::new(snap));
    assert!(!app.has_visible_countdowns(5, LayoutMode::Tabs));
    app.focus = Focus::Cooldowns;
    assert!(app.has_visible_countdowns(5, LayoutMode::Tabs));
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
