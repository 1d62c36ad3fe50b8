//! Quota panel tests: sample headroom rendered into a `TestBackend`, checked for bars, percent
//! used, live countdowns, the binding mark, the preflight line and the themed roles.

use std::sync::Arc;

use super::app::{App, Focus};
use super::panels::quota;
use super::test_support::*;
use super::theme::{Role, Theme};
use crate::policy::headroom::Window;
use crate::policy::headroom::preflight::Mark;
use crate::snapshot::{ConnectionView, HeadroomRowView, PreflightView, ProviderView, Snapshot};

const HOUR: u64 = 3_600_000;

fn row(window: &str, remaining: f64, reset_in: u64, binding: bool) -> HeadroomRowView {
    HeadroomRowView {
        window: crate::snapshot::Word::parse(window),
        remaining: Some(remaining),
        reset_at_unix_ms: Some(NOW + reset_in),
        binding,
        observed_at_unix_ms: NOW,
        ..Default::default()
    }
}

/// k1: 5 h window 99 % used (binding, cut off), 7 d 40 % used; k2: 85 % of a requests bucket
/// used (warn); k3: nothing known.
fn quota_app() -> App {
    let k1 = ConnectionView {
        id: "k1".into(),
        headroom: vec![
            row("five_hour", 0.01, HOUR, true),
            row("seven_day", 0.6, 24 * HOUR, false),
        ],
        preflight: Some(PreflightView {
            state: Mark::CutOff.into(),
            window: Window::FiveHour.into(),
            remaining: 0.01,
            // NOW + 1 h = 1_700_003_600_000 ms = 23:13:20 UTC.
            reset_at_unix_ms: Some(NOW + HOUR),
        }),
        ..Default::default()
    };
    let k2 = ConnectionView {
        id: "k2".into(),
        headroom: vec![HeadroomRowView {
            model: Some("claude-x".into()),
            ..row("requests", 0.15, 90_000, true)
        }],
        preflight: Some(PreflightView {
            state: Mark::Warn.into(),
            window: Window::Requests.into(),
            remaining: 0.15,
            reset_at_unix_ms: Some(NOW + 90_000),
        }),
        ..Default::default()
    };
    let k3 = ConnectionView {
        id: "k3".into(),
        ..Default::default()
    };
    let snap = Snapshot {
        providers: vec![ProviderView {
            id: "anthropic".into(),
            connections: vec![k1, k2, k3],
            ..Default::default()
        }],
        ..Default::default()
    };
    let mut app = App::new(Arc::new(snap));
    app.focus = Focus::Quota;
    app
}

fn quota_buf(app: &App, theme: &Theme, now: u64) -> ratatui::buffer::Buffer {
    paint(90, 16, |f| {
        quota::render(f, f.area(), app, theme, true, now)
    })
}

#[test]
fn bars_show_percent_used_countdown_binding_and_preflight_state() {
    let theme = Theme::default();
    let buf = quota_buf(&quota_app(), &theme, NOW);
    let five = line_with(&buf, "5h");
    for want in ["▸", "██████████", "99% used", "resets in 1h00m00s"] {
        assert!(five.contains(want), "missing {want:?} in {five:?}");
    }
    let seven = line_with(&buf, "7d");
    for want in ["████░░░░░░", "40% used", "resets in 1d00h00m"] {
        assert!(seven.contains(want), "missing {want:?} in {seven:?}");
    }
    assert!(!seven.contains('▸'), "7d does not bind: {seven:?}");
    assert!(
        line_with(&buf, "cut off until").contains("cut off until 23:13 UTC (1% left in 5h)"),
        "{}",
        text(&buf)
    );
    let req = line_with(&buf, "requests claude-x");
    assert!(
        req.contains("85% used") && req.contains("resets in 1m30s"),
        "{req:?}"
    );
    assert!(line_with(&buf, "warn:").contains("15% left in requests"));
    assert!(line_with(&buf, "no quota readings").contains("no quota readings yet"));
    assert!(line_with(&buf, "anthropic/k3").contains("anthropic/k3"));

    // Themed: the binding bar and state take the preflight roles.
    assert_eq!(
        fg_of(&buf, "cut off until"),
        theme.style(Role::QuotaCutOff).fg.unwrap()
    );
    assert_eq!(
        fg_of(&buf, "warn:"),
        theme.style(Role::QuotaWarn).fg.unwrap()
    );
    assert_eq!(
        fg_of(&buf, "██████████"),
        theme.style(Role::QuotaCutOff).fg.unwrap()
    );
    assert_eq!(fg_of(&buf, "████░░░░░░"), theme.style(Role::Ok).fg.unwrap());
    assert_ne!(
        theme.style(Role::QuotaWarn).fg,
        theme.style(Role::Ok).fg,
        "the test can tell the roles apart"
    );
}

#[test]
fn countdowns_follow_the_snapshot_clock() {
    let theme = Theme::default();
    let buf = quota_buf(&quota_app(), &theme, NOW + 61_000);
    assert!(line_with(&buf, "5h").contains("resets in 58m59s"));
    assert!(line_with(&buf, "requests claude-x").contains("resets in 29s"));
    let buf = quota_buf(&quota_app(), &theme, NOW + 91_000);
    assert!(
        line_with(&buf, "requests claude-x").contains("reset unknown"),
        "a passed reset shows no countdown"
    );
}

#[test]
fn quota_takes_the_providers_slot_in_the_grid_and_scrolls_to_the_selection() {
    let theme = Theme::default();
    let mut app = quota_app();
    let buf = draw(&app, &theme, 160, 40);
    assert!(text(&buf).contains(" Quota "), "{}", text(&buf));
    assert!(text(&buf).contains("cut off until 23:13 UTC"));
    app.focus = Focus::Providers;
    let buf = draw(&app, &theme, 160, 40);
    assert!(!text(&buf).contains("cut off until"), "Providers is back");

    // A short panel keeps the selected connection's block in view.
    let mut app = quota_app();
    app.quota_selected = 2;
    let buf = paint(90, 6, |f| {
        quota::render(f, f.area(), &app, &theme, true, NOW)
    });
    assert!(text(&buf).contains("anthropic/k3"), "{}", text(&buf));
    assert!(!text(&buf).contains("anthropic/k1"));
}

#[test]
fn bars_are_bounded_for_any_fraction() {
    assert_eq!(quota::bar(0.0), "░░░░░░░░░░");
    assert_eq!(quota::bar(1.0), "██████████");
    assert_eq!(quota::bar(7.0), "██████████");
    assert_eq!(quota::bar(-1.0), "░░░░░░░░░░");
    assert_eq!(quota::bar(f64::NAN), "░░░░░░░░░░");
    assert_eq!(quota::window_label("five_hour"), "5h");
    assert_eq!(quota::window_label("tokens"), "tokens");
}
