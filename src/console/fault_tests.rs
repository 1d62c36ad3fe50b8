//! Fault injection in the console: the header banner (rendered into a `TestBackend`), the
//! picker on the Cooldowns panel, `F` to clear, read-only refusal, and the actions through a
//! real `Control`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::Modifier;
use tokio_util::sync::CancellationToken;

use super::action::{Action, perform};
use super::app::{App, Focus};
use super::test_support::{NOW, draw, find, snapshot};
use super::theme::Theme;
use crate::clock::ManualClock;
use crate::config::{LoadEnv, from_str};
use crate::core::Core;
use crate::core::operator::control::Control;
use crate::core::operator::faults::FaultRequest;
use crate::snapshot::FaultView;

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn fault(target: &str, description: &str, left_ms: u64) -> FaultView {
    FaultView {
        id: 1,
        target: target.into(),
        kind: crate::snapshot::Word::parse(description),
        description: description.into(),
        remaining_ms: left_ms,
        expires_at_unix_ms: NOW + left_ms,
    }
}

#[test]
fn the_header_shows_a_banner_with_a_countdown_while_a_fault_is_on() {
    let mut snap = snapshot();
    snap.faults = vec![fault("openrouter/main", "503", 42_000)];
    let buf = draw(
        &App::new(Arc::new(snap.clone())),
        &Theme::default(),
        160,
        40,
    );
    let (x, y) =
        find(&buf, "FAULT INJECTED: openrouter/main 503 · 42s left").expect("banner in the header");
    assert_eq!(y, 0, "first header row");
    assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));

    snap.faults.push(fault("anthropic", "zombie 200", 5_000));
    let banner = super::panels::header::fault_banner(&snap, NOW + 2_000);
    assert_eq!(
        banner.as_deref(),
        Some(" FAULT INJECTED: openrouter/main 503 · 40s left +1 more ")
    );
    assert_eq!(
        super::panels::header::fault_banner(&snap, NOW + 42_000),
        None,
        "expired by the console's clock: no banner even before the next snapshot"
    );
    let none = draw(&App::new(Arc::new(snapshot())), &Theme::default(), 160, 40);
    assert!(find(&none, "FAULT INJECTED").is_none());
}

#[test]
fn the_picker_cycles_kind_and_duration_and_injects_on_confirm() {
    let mut app = App::new(Arc::new(snapshot()));
    app.focus = Focus::Cooldowns;
    let (p, c) = app
        .selected_connection()
        .map(|(p, c)| (p.id.clone(), c.id.clone()))
        .unwrap();
    let target = format!("{p}/{c}");
    assert_eq!(app.on_key(key('i')), None, "opens the picker");
    let prompt = app.confirm.as_ref().map(|d| d.prompt.clone()).unwrap();
    assert_eq!(
        prompt,
        format!("Inject 503 on {target} for 60s? (t kind, d duration)")
    );
    app.on_key(key('t'));
    app.on_key(key('d'));
    app.on_key(key('d'));
    let prompt = app.confirm.as_ref().map(|d| d.prompt.clone()).unwrap();
    assert_eq!(
        prompt,
        format!("Inject 429 on {target} for 5m? (t kind, d duration)")
    );
    assert_eq!(
        app.on_key(key('y')),
        Some(Action::InjectFault(FaultRequest {
            target,
            kind: "429".into(),
            duration: Some(Duration::from_secs(300)),
            ..Default::default()
        }))
    );
    assert_eq!(app.on_key(key('F')), Some(Action::ClearFaults));
}

#[test]
fn read_only_refuses_the_picker_and_the_clear() {
    let mut app = App::new(Arc::new(snapshot()));
    app.readonly = true;
    app.focus = Focus::Cooldowns;
    assert_eq!(app.on_key(key('i')), None);
    assert!(app.confirm.is_none(), "no picker in read-only mode");
    assert_eq!(app.on_key(key('F')), None);
    assert!(
        app.message
            .as_ref()
            .is_some_and(|m| m.text.contains("read-only")),
        "{:?}",
        app.message
    );
}

const CONFIG: &str = r#"
[[providers]]
id = "p"
dialect = "anthropic"
base_url = "https://api.anthropic.com"
profile = "api_key"
  [[providers.connections]]
  id = "k1"
  auth = "passthrough"
"#;

#[test]
fn the_actions_go_through_control() {
    let env = LoadEnv::fixed(&[], "/tmp");
    let cfg = from_str(CONFIG, Path::new("t.toml"), &env).unwrap();
    let clock = ManualClock::new();
    let core = Core::new(Arc::new(cfg), Arc::new(clock.clone()), None);
    let control = Control::new(core, CancellationToken::new());
    let req = FaultRequest {
        target: "p/k1".into(),
        kind: "reset".into(),
        ..Default::default()
    };
    let out = perform(&control, Action::InjectFault(req)).text();
    assert_eq!(out, "fault injected: p/k1 reset for 60s (F clears)");
    assert_eq!(control.snapshot().faults.len(), 1);
    let bad = FaultRequest {
        target: "p/nope".into(),
        kind: "503".into(),
        ..Default::default()
    };
    let out = perform(&control, Action::InjectFault(bad)).text();
    assert_eq!(out, "fault not injected: unknown connection 'nope'");
    assert_eq!(
        perform(&control, Action::ClearFaults).text(),
        "cleared 1 injected fault"
    );
    assert!(control.faults().is_empty());
    let short = FaultRequest {
        target: "p".into(),
        kind: "503".into(),
        duration: Some(Duration::from_secs(5)),
        ..Default::default()
    };
    perform(&control, Action::InjectFault(short));
    clock.advance(Duration::from_secs(5));
    assert!(control.faults().is_empty(), "expired on the injected clock");
}

#[test]
fn the_header_says_which_requests_are_held_until_a_quota_reset() {
    use crate::snapshot::HeldView;
    let mut snap = snapshot();
    let held = |model: &str, until| HeldView {
        request_id: 7,
        model: model.into(),
        target: "anthropic:team-a/claude-x".into(),
        since_unix_ms: NOW,
        until_unix_ms: until,
    };
    // 14:05:00 UTC on the day of NOW, 2m13s from now.
    let until = NOW + 133_000;
    snap.held = vec![held("fast", until)];
    let clock = super::panels::fmt_clock_utc(until);
    assert_eq!(
        super::panels::header::held_banner(&snap, NOW).as_deref(),
        Some(format!(" HELD: fast until {clock} UTC (2m13s) ").as_str())
    );
    let buf = draw(
        &App::new(Arc::new(snap.clone())),
        &Theme::default(),
        160,
        40,
    );
    let (_, y) = find(&buf, " HELD: fast until").expect("a banner in the header");
    assert_eq!(y, 0);
    snap.held.push(held("slow", until + 60_000));
    let banner = super::panels::header::held_banner(&snap, until + 1).unwrap();
    assert!(banner.contains("(due) +1 more"), "{banner}");
    assert!(App::new(Arc::new(snap)).has_visible_countdowns(NOW, super::LayoutMode::Grid));
    let none = draw(&App::new(Arc::new(snapshot())), &Theme::default(), 160, 40);
    assert!(find(&none, "HELD").is_none());
}
