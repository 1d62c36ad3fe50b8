//! The `/` row filter and mouse input: keys and mouse events into `App`, rendered into a
//! `TestBackend`, with clicks aimed at where a row was actually drawn.

use std::collections::BTreeMap;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;

use super::action::Action;
use super::app::{App, Focus};
use super::keymap::keymap_from_config;
use super::test_support::*;
use super::theme::Theme;
use super::*;
use crate::core::operator::control::ClearTarget;
use crate::snapshot::{RequestView, Snapshot};

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ch(c: char) -> KeyEvent {
    key(KeyCode::Char(c))
}

fn type_filter(app: &mut App, text: &str) {
    assert_eq!(app.on_key(ch('/')), None);
    assert!(app.filter_input.is_some(), "/ opens the filter input");
    for c in text.chars() {
        assert_eq!(app.on_key(ch(c)), None);
    }
    assert_eq!(app.on_key(key(KeyCode::Enter)), None);
}

/// Renders `app` at `w`×`h` and stores the panel rectangles as the run loop does.
fn frame(app: &mut App, w: u16, h: u16) -> Buffer {
    let buf = draw(app, &Theme::default(), w, h);
    app.rects = panel_rects(Rect::new(0, 0, w, h), app);
    buf
}

fn rect_of(app: &App, panel: Focus) -> Rect {
    app.rects
        .iter()
        .find(|(p, _)| *p == panel)
        .map(|(_, r)| *r)
        .unwrap_or_else(|| panic!("{panel:?} not laid out"))
}

/// Where `needle` is drawn inside `area`.
fn find_in(buf: &Buffer, area: Rect, needle: &str) -> (u16, u16) {
    for y in area.top()..area.bottom() {
        let row: Vec<&str> = (area.left()..area.right())
            .map(|x| buf[(x, y)].symbol())
            .collect();
        for x in 0..row.len() {
            if row[x..].concat().starts_with(needle) {
                return (area.left() + u16::try_from(x).unwrap(), y);
            }
        }
    }
    panic!("{needle:?} not drawn in {area:?}:\n{}", text(buf));
}

fn mouse(kind: MouseEventKind, (column, row): (u16, u16)) -> MouseEvent {
    MouseEvent {
        kind,
        column,
        row,
        modifiers: KeyModifiers::NONE,
    }
}

fn click(at: (u16, u16)) -> MouseEvent {
    mouse(MouseEventKind::Down(MouseButton::Left), at)
}

// ---- filter ----

#[test]
fn slash_filters_every_table_and_titles_show_counts() {
    let mut app = app();
    type_filter(&mut app, "GLM");
    assert_eq!(app.filter, "GLM");
    assert!(app.filter_input.is_none());
    assert_eq!(app.snapshot.lockouts.len(), 1);
    assert_eq!(app.snapshot.lockouts[0].model, "z-ai/glm-5");
    assert_eq!(app.snapshot.queues.len(), 1);
    assert!(app.snapshot.providers.is_empty());
    assert!(app.snapshot.recent.is_empty());
    assert_eq!(
        app.unfiltered().lockouts.len(),
        2,
        "the raw snapshot is kept"
    );

    let t = text(&draw(&app, &Theme::default(), 160, 48));
    for want in [
        "filter: GLM",
        "Model lockouts 1/2",
        "Queues 1/2",
        "Circuits 0/2",
        "Cooldowns 0/4",
        "Requests 0/2",
        "Providers 0/2",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    assert!(!t.contains("claude-opus-4"), "filtered-out lockout hidden");
}

#[test]
fn connection_text_filters_cooldowns_and_selection_stays_valid() {
    let mut app = app();
    app.focus = Focus::Cooldowns;
    app.cooldown_selected = 3; // anthropic / pass
    app.lockout_selected = 1;
    type_filter(&mut app, "key-b");
    assert_eq!(app.filter_counts(Focus::Cooldowns), Some((1, 4)));
    assert_eq!(app.filter_counts(Focus::Circuits), Some((1, 2)));
    assert_eq!(app.cooldown_selected, 0);
    assert_eq!(app.lockout_selected, 0);
    let (p, c) = app.selected_connection().unwrap();
    assert_eq!((p.id.as_str(), c.id.as_str()), ("openrouter", "key-b"));
    // Actions act on the visible row.
    assert_eq!(
        app.on_key(ch('c')),
        Some(Action::ClearCooldowns(ClearTarget::Connections(vec![
            "key-b".into()
        ])))
    );
    // A request matches by its tried targets (key-c was attempted), not by skipped ones.
    assert!(app.snapshot.recent.is_empty());
    app.set_filter("KEY-C");
    assert_eq!(app.snapshot.recent.len(), 1);
    assert_eq!(app.snapshot.recent[0].id, 41);
}

#[test]
fn filter_follows_new_snapshots_and_the_selected_row() {
    let mut app = app();
    app.focus = Focus::Cooldowns;
    app.cooldown_selected = 2; // openrouter / key-c
    type_filter(&mut app, "key");
    assert_eq!(app.selected_connection().unwrap().1.id, "key-c");
    app.set_snapshot(Arc::new(snapshot()));
    assert_eq!(app.filter_counts(Focus::Cooldowns), Some((2, 4)));
    assert_eq!(app.selected_connection().unwrap().1.id, "key-c");
    // Clearing the filter keeps the row selected at its unfiltered index.
    app.set_filter("");
    assert_eq!(app.filter_counts(Focus::Cooldowns), None);
    assert_eq!(app.cooldown_selected, 2);
}

#[test]
fn typing_edits_esc_clears_and_keys_do_not_leak() {
    let mut app = app();
    type_filter(&mut app, "main");
    assert_eq!(app.filter, "main");
    // Reopen: pre-filled; typing q / ? edits, backspace deletes, esc clears the filter.
    app.on_key(ch('/'));
    assert_eq!(app.filter_input.as_deref(), Some("main"));
    for k in [ch('q'), ch('?'), key(KeyCode::Backspace)] {
        assert_eq!(app.on_key(k), None);
    }
    assert_eq!(app.filter_input.as_deref(), Some("mainq"));
    assert!(!app.help);
    let t = text(&draw(&app, &Theme::default(), 160, 48));
    assert!(t.contains("/mainq█"), "{t}");
    assert!(t.contains("enter accept  esc cancel"), "{t}");
    app.on_key(key(KeyCode::Esc));
    assert!(app.filter_input.is_none());
    assert_eq!(app.filter, "");
    assert_eq!(app.filter_counts(Focus::Lockouts), None);
    // esc outside the input clears an active filter too; ctrl-c still quits while typing.
    type_filter(&mut app, "anthropic");
    assert_eq!(app.snapshot.providers.len(), 1);
    app.on_key(key(KeyCode::Esc));
    assert_eq!(app.filter, "");
    assert_eq!(app.snapshot.providers.len(), 2);
    app.on_key(ch('/'));
    assert_eq!(
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Some(Action::Quit)
    );
}

#[test]
fn reset_all_counts_hidden_breakers_too() {
    let mut app = app();
    type_filter(&mut app, "anthropic");
    assert_eq!(app.on_key(ch('R')), None);
    assert_eq!(app.confirm.unwrap().prompt, "Reset all 2 breakers?");
}

#[test]
fn filter_is_rebindable_in_console_keys() {
    let keys = BTreeMap::from([("filter".to_owned(), vec!["f".to_owned()])]);
    let mut app = app();
    app.keymap = Arc::new(keymap_from_config(&keys).unwrap());
    assert_eq!(app.on_key(ch('/')), None);
    assert!(app.filter_input.is_none(), "/ no longer filters");
    app.on_key(ch('f'));
    assert!(app.filter_input.is_some());
}

// ---- mouse ----

#[test]
fn click_focuses_the_panel_and_selects_the_clicked_row() {
    let mut app = app();
    let buf = frame(&mut app, 160, 48);
    let at = find_in(&buf, rect_of(&app, Focus::Cooldowns), "key-c");
    assert!(app.on_mouse(click(at)));
    assert_eq!(app.focus, Focus::Cooldowns);
    assert_eq!(app.selected_connection().unwrap().1.id, "key-c");

    let at = find_in(&buf, rect_of(&app, Focus::Lockouts), "z-ai/glm-5");
    app.on_mouse(click(at));
    assert_eq!(app.focus, Focus::Lockouts);
    assert_eq!(app.selected_lockout().unwrap().model, "z-ai/glm-5");

    // A click on a border or the header row focuses without changing the selection.
    let r = rect_of(&app, Focus::Circuits);
    app.circuit_selected = 1;
    app.on_mouse(click((r.x + 3, r.y + 1)));
    assert_eq!(app.focus, Focus::Circuits);
    assert_eq!(app.circuit_selected, 1);
}

#[test]
fn providers_click_selects_the_provider_of_a_connection_line() {
    let mut app = app();
    let buf = frame(&mut app, 160, 48);
    let area = rect_of(&app, Focus::Providers);
    app.on_mouse(click(find_in(&buf, area, "anthropic")));
    assert_eq!((app.focus, app.provider_selected), (Focus::Providers, 1));
    app.on_mouse(click(find_in(&buf, area, "└ key-b")));
    assert_eq!(app.provider_selected, 0);
}

#[test]
fn wheel_moves_the_selection_of_the_panel_under_the_pointer() {
    let mut app = app();
    frame(&mut app, 160, 48);
    let r = rect_of(&app, Focus::Requests);
    let inside = (r.x + 2, r.y + 2);
    assert!(app.on_mouse(mouse(MouseEventKind::ScrollDown, inside)));
    assert_eq!((app.focus, app.request_selected), (Focus::Requests, 1));
    app.on_mouse(mouse(MouseEventKind::ScrollDown, inside));
    assert_eq!(app.request_selected, 1, "clamped to the last row");
    app.on_mouse(mouse(MouseEventKind::ScrollUp, inside));
    assert_eq!(app.request_selected, 0);
}

#[test]
fn clicks_off_panels_or_under_a_dialog_do_nothing() {
    let mut app = app();
    frame(&mut app, 160, 48);
    assert!(!app.on_mouse(click((5, 47))), "status bar");
    assert_eq!(app.focus, Focus::Circuits);
    app.on_key(ch('R'));
    assert!(app.confirm.is_some());
    let r = rect_of(&app, Focus::Requests);
    assert!(!app.on_mouse(click((r.x + 2, r.y + 2))));
    assert_eq!(app.focus, Focus::Circuits);
    // Moving the pointer is no click.
    app.confirm = None;
    assert!(!app.on_mouse(mouse(MouseEventKind::Moved, (r.x + 2, r.y + 2))));
}

#[test]
fn click_in_a_scrolled_table_selects_the_drawn_row() {
    let recent: Vec<RequestView> = (0..40)
        .map(|i| RequestView {
            id: i,
            client_model: format!("model-{i:02}"),
            ..Default::default()
        })
        .collect();
    let mut app = App::new(Arc::new(Snapshot {
        recent,
        ..snapshot()
    }));
    app.focus = Focus::Requests;
    app.request_selected = 30;
    // 80×24 is tabs mode: only Requests is laid out, and it scrolls to keep row 30 visible.
    let buf = frame(&mut app, 80, 24);
    assert_eq!(app.rects.len(), 1);
    let area = rect_of(&app, Focus::Requests);
    app.on_mouse(click(find_in(&buf, area, "model-25")));
    assert_eq!(app.selected_request().unwrap().client_model, "model-25");
    // Re-rendered with row 25 selected, the same row is still where model-25 is drawn.
    let buf = frame(&mut app, 80, 24);
    app.on_mouse(click(find_in(&buf, area, "model-22")));
    assert_eq!(app.selected_request().unwrap().client_model, "model-22");
}

#[test]
fn panel_rects_match_the_layout_modes() {
    let app = app();
    assert_eq!(panel_rects(Rect::new(0, 0, 160, 48), &app).len(), 6);
    assert_eq!(
        panel_rects(Rect::new(0, 0, 80, 24), &app),
        vec![(Focus::Circuits, Rect::new(0, 3, 80, 20))]
    );
    assert!(panel_rects(Rect::new(0, 0, 40, 10), &app).is_empty());
}
