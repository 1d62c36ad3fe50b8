//! Panel tests for the resilience panels (Circuits, Cooldowns, Model lockouts) and the confirm
//! dialog: each panel rendered alone into a buffer, checked for text and themed styles.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier};

use super::app::{App, Focus};
use super::panels::{circuits, cooldowns, lockouts, providers};
use super::test_support::*;
use super::theme::{Role, Theme};

fn fg(theme: &Theme, role: Role) -> Color {
    theme.style(role).fg.unwrap()
}

fn circuits_buf(app: &App, theme: &Theme, w: u16, now: u64) -> ratatui::buffer::Buffer {
    paint(w, 8, |f| {
        circuits::render(f, f.area(), app, theme, true, now)
    })
}

#[test]
fn circuits_show_state_thresholds_countdown_and_last_transition() {
    let theme = Theme::default();
    let buf = circuits_buf(&app(), &theme, 100, NOW);
    let open = line_with(&buf, "openrouter");
    for want in [
        "open",
        "12/7/12",
        "1m05s",
        "open ← failure_threshold 12s ago",
    ] {
        assert!(open.contains(want), "missing {want:?} in {open:?}");
    }
    let closed = line_with(&buf, "anthropic");
    for want in ["closed", "3/7/12", "—"] {
        assert!(closed.contains(want), "missing {want:?} in {closed:?}");
    }
    for header in [
        "provider",
        "state",
        "fail/thr",
        "probe in",
        "last transition",
    ] {
        assert!(text(&buf).contains(header), "missing header {header}");
    }
    // Themed state words.
    let (x, y) = find(&buf, "open ").unwrap();
    assert_eq!(buf[(x, y)].fg, fg(&theme, Role::BreakerOpen));
    assert!(buf[(x, y)].modifier.contains(Modifier::BOLD));
    assert_eq!(fg_of(&buf, "closed"), fg(&theme, Role::BreakerClosed));
    assert_ne!(
        fg(&theme, Role::BreakerOpen),
        fg(&theme, Role::BreakerClosed),
        "the test can tell the roles apart"
    );
}

#[test]
fn circuits_countdown_is_computed_at_render_time() {
    let app = app();
    let theme = Theme::default();
    let later = line_with(&circuits_buf(&app, &theme, 100, NOW + 53_000), "openrouter");
    assert!(later.contains("12s"), "{later}");
    assert!(later.contains("1m05s ago"), "transition ages too: {later}");
    let due = line_with(&circuits_buf(&app, &theme, 100, NOW + 65_000), "openrouter");
    assert!(due.contains("due"), "{due}");
}

#[test]
fn circuits_half_open_degraded_and_multiplier() {
    let mut snap = snapshot();
    snap.providers[0].breaker.state = crate::snapshot::BreakerState::HalfOpen;
    snap.providers[0].breaker.multiplier = 4;
    snap.providers[1].breaker.state = crate::snapshot::BreakerState::Degraded;
    snap.providers[1].breaker.failure_count = 7;
    let theme = Theme::default();
    let buf = circuits_buf(&App::new(Arc::new(snap)), &theme, 100, NOW);
    assert!(line_with(&buf, "openrouter").contains("probing ×4"));
    assert_eq!(fg_of(&buf, "half_open"), fg(&theme, Role::BreakerHalfOpen));
    assert_eq!(fg_of(&buf, "degraded"), fg(&theme, Role::BreakerDegraded));
    assert_eq!(fg_of(&buf, "7/7/12"), fg(&theme, Role::BreakerDegraded));
}

#[test]
fn circuits_show_a_slow_start_ramp() {
    let mut snap = snapshot();
    snap.providers[1].ramp_percent = Some(40);
    let theme = Theme::default();
    let buf = circuits_buf(&App::new(Arc::new(snap)), &theme, 100, NOW);
    let row = line_with(&buf, "anthropic");
    assert!(row.contains("closed · ramping 40 %"), "{row}");
    assert_eq!(fg_of(&buf, "ramping"), fg(&theme, Role::BreakerHalfOpen));
    assert!(
        !line_with(&buf, "openrouter").contains("ramping"),
        "only the ramping provider"
    );
}

#[test]
fn circuits_drop_the_least_important_columns_when_narrow() {
    let buf = circuits_buf(&app(), &Theme::default(), 40, NOW);
    let row = line_with(&buf, "openrouter");
    assert!(row.contains("open"), "{row}");
    assert!(!text(&buf).contains("last transition"), "{}", text(&buf));
}

#[test]
fn cooldowns_show_a_ramping_connection_and_keep_cooling_ones_cooling() {
    let mut snap = snapshot();
    snap.providers[1].connections[0].ramp_percent = Some(40);
    // A cooling connection's word wins over a ramp (it is not admitted at all yet).
    snap.providers[0].connections[0].ramp_percent = Some(70);
    let theme = Theme::default();
    let app = App::new(Arc::new(snap));
    let buf = paint(110, 8, |f| {
        cooldowns::render(f, f.area(), &app, &theme, true, NOW)
    });
    let pass = line_with(&buf, " pass ");
    assert!(pass.contains("ramping 40 %"), "{pass}");
    assert_eq!(fg_of(&buf, "ramping 40"), fg(&theme, Role::BreakerHalfOpen));
    let main = line_with(&buf, " main ");
    assert!(
        main.contains("cooling") && !main.contains("ramping"),
        "{main}"
    );
}

#[test]
fn cooldowns_show_a_leased_connection_with_its_countdown() {
    let mut snap = snapshot();
    snap.providers[1].connections[0].lease = Some(crate::snapshot::LeaseView {
        generation: 3,
        expires_at_unix_ms: NOW + 125_000,
        owner_fingerprint: "abcd1234".into(),
    });
    // A lease that already lapsed at `now` is not shown.
    snap.providers[0].connections[0].lease = Some(crate::snapshot::LeaseView {
        generation: 1,
        expires_at_unix_ms: NOW,
        owner_fingerprint: "ffff0000".into(),
    });
    let theme = Theme::default();
    let app = App::new(Arc::new(snap));
    let buf = paint(110, 8, |f| {
        cooldowns::render(f, f.area(), &app, &theme, true, NOW)
    });
    let pass = line_with(&buf, " pass ");
    assert!(pass.contains("leased") && pass.contains("2m05s"), "{pass}");
    assert_eq!(fg_of(&buf, "leased"), fg(&theme, Role::Lockout));
    let main = line_with(&buf, " main ");
    assert!(!main.contains("leased"), "{main}");
}

#[test]
fn cooldowns_show_status_words_countdowns_and_counts() {
    let theme = Theme::default();
    let app = app();
    let buf = paint(110, 8, |f| {
        cooldowns::render(f, f.area(), &app, &theme, true, NOW)
    });
    let t = text(&buf);
    for header in [
        "connection",
        "provider",
        "status",
        "remaining",
        "lvl",
        "last error",
        "locks",
    ] {
        assert!(t.contains(header), "missing header {header}:\n{t}");
    }
    let main = line_with(&buf, " main ");
    for want in ["openrouter", "cooling", "12s", "2", "rate_limited", "1"] {
        assert!(main.contains(want), "missing {want:?} in {main:?}");
    }
    let banned = line_with(&buf, "key-b");
    assert!(
        banned.contains("banned") && banned.contains("—"),
        "{banned}"
    );
    let quota = line_with(&buf, "key-c");
    assert!(
        quota.contains("quota wait") && quota.contains("1m05s"),
        "{quota}"
    );
    assert!(line_with(&buf, "pass").contains("active"));
    assert_eq!(fg_of(&buf, "cooling"), fg(&theme, Role::Cooling));
    assert_eq!(fg_of(&buf, "quota wait"), fg(&theme, Role::QuotaWait));
    let (x, y) = find(&buf, "banned").unwrap();
    assert_eq!(buf[(x, y)].fg, fg(&theme, Role::Terminal));
    assert!(buf[(x, y)].modifier.contains(Modifier::BOLD));
    assert_eq!(fg_of(&buf, "active"), fg(&theme, Role::Ok));
}

#[test]
fn cooldowns_show_marks_and_expired_deadlines_as_active() {
    let theme = Theme::default();
    let mut app = app();
    app.marked.insert("key-c".into());
    let buf = paint(110, 8, |f| {
        cooldowns::render(f, f.area(), &app, &theme, true, NOW + 13_000);
    });
    assert!(
        text(&buf).contains("Cooldowns · 1 marked"),
        "{}",
        text(&buf)
    );
    assert!(line_with(&buf, "key-c").starts_with("┃●"), "{}", text(&buf));
    assert!(!line_with(&buf, " main ").contains('●'));
    let main = line_with(&buf, " main ");
    assert!(
        main.contains("active") && !main.contains("cooling"),
        "{main}"
    );
    let (w, r, left) = cooldowns::status(&snapshot().providers[0].connections[1], NOW);
    assert_eq!((w, r, left), ("banned", Role::Terminal, None));
}

#[test]
fn cooldowns_credits_exhausted_is_written_in_full() {
    let mut snap = snapshot();
    snap.providers[0].connections[1].status = crate::snapshot::ConnectionStatus::CreditsExhausted;
    let app = App::new(Arc::new(snap));
    let buf = paint(60, 8, |f| {
        cooldowns::render(f, f.area(), &app, &Theme::default(), true, NOW);
    });
    assert!(
        line_with(&buf, "key-b").contains("credits_exhausted"),
        "{}",
        text(&buf)
    );
}

#[test]
fn lockouts_show_every_column_and_a_countdown() {
    let theme = Theme::default();
    let app = app();
    let buf = paint(120, 6, |f| {
        lockouts::render(f, f.area(), &app, &theme, true, NOW)
    });
    let t = text(&buf);
    assert!(t.contains("Model lockouts (2)"), "{t}");
    for header in [
        "provider",
        "connection",
        "model",
        "scope",
        "reason",
        "fails",
        "expires in",
    ] {
        assert!(t.contains(header), "missing header {header}:\n{t}");
    }
    let glm = line_with(&buf, "z-ai/glm-5");
    for want in [
        "openrouter",
        "main",
        "quota_group",
        "rate_limit_exceeded",
        "2",
        "1m05s",
    ] {
        assert!(glm.contains(want), "missing {want:?} in {glm:?}");
    }
    let opus = line_with(&buf, "claude-opus-4");
    assert!(opus.contains("not_found") && opus.contains("12s"), "{opus}");
    assert_eq!(fg_of(&buf, "z-ai/glm-5"), fg(&theme, Role::Lockout));
    assert_eq!(fg_of(&buf, "1m05s"), fg(&theme, Role::Lockout));
    let later = paint(120, 6, |f| {
        lockouts::render(f, f.area(), &app, &theme, true, NOW + 20_000);
    });
    assert!(line_with(&later, "claude-opus-4").contains("expired"));
    assert!(line_with(&later, "z-ai/glm-5").contains("45s"));
}

#[test]
fn selection_highlights_the_focused_panels_row() {
    let theme = Theme::default();
    let mut app = app();
    app.focus = Focus::Lockouts;
    app.lockout_selected = 1;
    let buf = paint(120, 6, |f| {
        lockouts::render(f, f.area(), &app, &theme, true, NOW)
    });
    let (_, y) = find(&buf, "z-ai/glm-5").unwrap();
    assert_eq!(buf[(2, y)].bg, theme.style(Role::Selection).bg.unwrap());
    let (_, y) = find(&buf, "claude-opus-4").unwrap();
    assert_ne!(buf[(2, y)].bg, theme.style(Role::Selection).bg.unwrap());
}

#[test]
fn confirm_dialog_is_centred_and_only_shown_while_open() {
    let theme = Theme::default();
    let mut app = app();
    app.on_key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE));
    let buf = draw(&app, &theme, 100, 30);
    let (x, y) = find(&buf, "Reset breaker 'openrouter'? y/n").expect("dialog shown");
    let len = "Reset breaker 'openrouter'? y/n".chars().count() as u16;
    let (left, right) = (x, 100 - (x + len));
    assert!(left.abs_diff(right) <= 1, "centred: {left} vs {right}");
    assert!((13..=16).contains(&y), "vertically centred, row {y}");
    assert!(
        text(&buf).contains("y confirm  n cancel"),
        "dialog hints in the status bar"
    );
    app.on_key(KeyEvent::new(KeyCode::Char('n'), KeyModifiers::NONE));
    let t = text(&draw(&app, &theme, 100, 30));
    assert!(!t.contains("Reset breaker"), "{t}");
    assert!(t.contains("cancelled"));
}

#[test]
fn action_results_and_read_only_show_in_the_status_bar() {
    let theme = Theme::default();
    let mut app = app();
    app.flash("cleared 0, skipped 1 terminal: banned (key-b)");
    let bar = lines(&draw(&app, &theme, 100, 30)).pop().unwrap();
    assert!(
        bar.starts_with("cleared 0, skipped 1 terminal: banned (key-b)"),
        "{bar}"
    );
    app.readonly = true;
    app.focus = Focus::Cooldowns;
    app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::NONE));
    let bar = lines(&draw(&app, &theme, 100, 30)).pop().unwrap();
    assert!(
        bar.contains("READ-ONLY") && bar.contains("read-only mode"),
        "{bar}"
    );
}

#[test]
fn providers_show_each_providers_dialect() {
    let theme = Theme::default();
    let buf = paint(120, 12, |f| {
        providers::render(f, f.area(), &app(), &theme, true)
    });
    assert!(line_with(&buf, "openrouter").contains("openai"));
    let row = line_with(&buf, "anthropic");
    assert_eq!(row.matches("anthropic").count(), 2, "id and dialect: {row}");
}
