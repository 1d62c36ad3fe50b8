//! Whole-screen console tests: render a hand-built snapshot into a `TestBackend` and read it back.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};

use super::app::{App, Focus};
use super::theme::{Role, Theme};
use super::*;
use crate::core::snapshot::{
    ComboView, ConnectionView, ProviderView, RequestView, Snapshot, Totals, Window,
};

/// 2023-11-14 22:13:20 UTC.
const NOW: u64 = 1_700_000_000_000;

fn snapshot() -> Snapshot {
    Snapshot {
        version: 7,
        taken_at_unix_ms: NOW,
        started_at_unix_ms: NOW - (3600 + 2 * 60 + 3) * 1000,
        listen: "127.0.0.1:8787".into(),
        admin_listen: "127.0.0.1:8788".into(),
        config_path: "/tmp/sluice.toml".into(),
        draining: false,
        totals: Totals {
            requests: 40,
            ok: 38,
            errors: 2,
            in_flight: 3,
            bytes_out: 1234,
        },
        last_minute: Window {
            req_per_s: 1.5,
            success_ratio: 0.95,
            p50_ms: 123,
            p99_ms: 4567,
            sparkline: (0..60).map(|i| i % 7).collect(),
        },
        recent: vec![
            RequestView {
                id: 41,
                at_unix_ms: NOW - 2_000,
                route: "/v1/messages".into(),
                client_model: "claude-sonnet-4".into(),
                target: "openrouter:main/anthropic/claude-sonnet-4".into(),
                status: 502,
                latency_ms: 812,
                attempts: 2,
                bytes: 321,
                stream: true,
                outcome: "upstream_error".into(),
                error: "upstream closed the stream".into(),
            },
            RequestView {
                id: 40,
                at_unix_ms: NOW - 5_000,
                route: "/v1/chat/completions".into(),
                client_model: "gpt-4o".into(),
                target: "local:direct/llama3".into(),
                status: 200,
                latency_ms: 245,
                attempts: 1,
                bytes: 2048,
                stream: false,
                outcome: "ok".into(),
                error: String::new(),
            },
        ],
        providers: vec![
            ProviderView {
                id: "openrouter".into(),
                dialect: "openai".into(),
                base_url: "https://openrouter.ai/api".into(),
                profile: "api_key".into(),
                attempts: 12,
                failures: 2,
                in_flight: 1,
                last_status: 502,
                last_latency_ms: 812,
                connections: vec![ConnectionView {
                    id: "main".into(),
                    auth: "env:OPENROUTER_API_KEY".into(),
                    attempts: 12,
                    failures: 2,
                    in_flight: 1,
                    ..Default::default()
                }],
                ..Default::default()
            },
            ProviderView {
                id: "anthropic".into(),
                dialect: "anthropic".into(),
                base_url: "https://api.anthropic.com".into(),
                profile: "oauth".into(),
                connections: vec![ConnectionView {
                    id: "pass".into(),
                    auth: "passthrough".into(),
                    ..Default::default()
                }],
                ..Default::default()
            },
        ],
        combos: vec![ComboView {
            name: "fast".into(),
            strategy: "priority".into(),
            targets: vec!["openrouter/a".into(), "anthropic/b".into()],
        }],
        lockouts: Vec::new(),
    }
}

fn draw(app: &App, theme: &Theme, w: u16, h: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| render(f, app, theme, NOW)).unwrap();
    terminal.backend().buffer().clone()
}

fn lines(buf: &Buffer) -> Vec<String> {
    let area = buf.area;
    (area.top()..area.bottom())
        .map(|y| {
            (area.left()..area.right())
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

fn text(buf: &Buffer) -> String {
    lines(buf).join("\n")
}

/// Position of the first cell where `needle` starts.
fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let area = buf.area;
    for y in area.top()..area.bottom() {
        let cells: Vec<&str> = (area.left()..area.right())
            .map(|x| buf[(x, y)].symbol())
            .collect();
        for x in 0..cells.len() {
            let rest: String = cells[x..].concat();
            if rest.starts_with(needle) {
                return Some((area.left() + u16::try_from(x).unwrap(), y));
            }
        }
    }
    None
}

fn app() -> App {
    App::new(Arc::new(snapshot()))
}

#[test]
fn grid_shows_header_providers_and_requests() {
    let buf = draw(&app(), &Theme::default(), 120, 40);
    let t = text(&buf);
    for want in [
        "listen 127.0.0.1:8787",
        "admin 127.0.0.1:8788",
        "up 1h02m03s",
        "req/s 1.50",
        "in-flight 3",
        "ok 95.0%",
        "p50 123ms",
        "p99 4567ms",
        "Providers",
        "openrouter",
        "env:OPENROUTER_API_KEY",
        "└ main",
        "passthrough",
        "api_key",
        "fast (priority) → openrouter/a, anthropic/b",
        "Requests",
        "22:13:18",
        "claude-sonnet-4 → openrouter:main/anthropic/claude-sonnet-4",
        "gpt-4o → local:direct/llama3",
        "200",
        "502",
        "upstream_error",
        "q quit  ? help  tab focus  j/k move  enter details",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    assert!(!t.contains("DRAINING"));
    assert!(!t.contains("1 Providers"), "no tab bar in grid mode");
}

#[test]
fn header_draws_a_sparkline() {
    let buf = draw(&app(), &Theme::default(), 160, 40);
    let header = &lines(&buf)[..2].join("");
    assert!(
        header.chars().any(|c| ('▁'..='█').contains(&c)),
        "no sparkline bars in {header:?}"
    );
}

#[test]
fn draining_is_shown_in_the_header() {
    let mut snap = snapshot();
    snap.draining = true;
    let buf = draw(&App::new(Arc::new(snap)), &Theme::default(), 120, 40);
    let (x, y) = find(&buf, "DRAINING").expect("DRAINING shown");
    assert_eq!(y, 0);
    assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));
}

#[test]
fn status_cells_use_theme_roles() {
    let theme = Theme::default();
    let buf = draw(&app(), &theme, 120, 40);
    let t = text(&buf);
    let requests_top = t.lines().position(|l| l.contains("Requests")).unwrap();
    let (x, y) = find(&buf, "502 ").unwrap();
    assert!(
        usize::from(y) < requests_top,
        "first 502 is the provider's last status"
    );
    assert_eq!(buf[(x, y)].fg, theme.style(Role::Error).fg.unwrap());
    // The request row's 502 and 200.
    let rows = lines(&buf);
    let y502 = rows
        .iter()
        .position(|l| l.contains("claude-sonnet-4 →"))
        .unwrap();
    let x502 = rows[y502]
        .chars()
        .collect::<Vec<_>>()
        .windows(3)
        .position(|w| w == ['5', '0', '2'])
        .unwrap();
    let cell = &buf[(u16::try_from(x502).unwrap(), u16::try_from(y502).unwrap())];
    assert_eq!(cell.fg, Color::Red);
    let (x, y) = find(&buf, "200").unwrap();
    assert_eq!(buf[(x, y)].fg, theme.style(Role::Ok).fg.unwrap());
}

#[test]
fn custom_theme_colours_reach_the_screen() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t.toml"), "[roles]\nerror = \"#112233\"\n").unwrap();
    let theme = theme::load_with("t", &[dir.path().to_path_buf()], false).unwrap();
    let buf = draw(&app(), &theme, 120, 40);
    let (x, y) = find(&buf, "upstream_error").unwrap();
    assert_eq!(buf[(x, y)].fg, Color::Rgb(0x11, 0x22, 0x33));
}

#[test]
fn tabs_below_grid_size_show_one_panel() {
    let mut app = app();
    let buf = draw(&app, &Theme::default(), 80, 24);
    let t = text(&buf);
    assert!(t.contains("1 Providers") && t.contains("2 Requests"), "{t}");
    assert!(t.contains("env:OPENROUTER_API_KEY"));
    assert!(
        !t.contains("gpt-4o →"),
        "requests hidden while providers focused:\n{t}"
    );
    app.on_key(KeyEvent::new(KeyCode::Char('2'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 80, 24));
    assert!(t.contains("gpt-4o → local:direct/llama3"), "{t}");
    assert!(!t.contains("env:OPENROUTER_API_KEY"));
}

#[test]
fn too_small_shows_a_notice() {
    let t = text(&draw(&app(), &Theme::default(), 50, 10));
    assert!(
        t.contains("terminal too small (50×10, need ≥ 60×15)"),
        "{t}"
    );
    assert!(!t.contains("openrouter"));
    assert_eq!(
        LayoutMode::for_area(Rect::new(0, 0, 59, 14)),
        LayoutMode::TooSmall
    );
    assert_eq!(
        LayoutMode::for_area(Rect::new(0, 0, 60, 15)),
        LayoutMode::Tabs
    );
    assert_eq!(
        LayoutMode::for_area(Rect::new(0, 0, 99, 30)),
        LayoutMode::Tabs
    );
    assert_eq!(
        LayoutMode::for_area(Rect::new(0, 0, 100, 30)),
        LayoutMode::Grid
    );
}

#[test]
fn never_panics_at_any_size() {
    let mut busy = app();
    busy.help = true;
    busy.details = true;
    busy.focus = Focus::Requests;
    busy.flash("hello");
    let empty = App::new(Arc::new(Snapshot::default()));
    for (w, h) in [
        (0, 0),
        (1, 1),
        (59, 14),
        (60, 15),
        (80, 24),
        (99, 29),
        (100, 30),
        (200, 60),
        (300, 3),
        (3, 300),
    ] {
        for app in [&app(), &busy, &empty] {
            draw(app, &Theme::default(), w, h);
        }
    }
}

#[test]
fn help_overlay_lists_every_key() {
    let mut app = app();
    app.on_key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 100, 30));
    assert!(t.contains("Help"));
    for (keys, what) in app::KEYMAP {
        assert!(
            t.contains(keys) && t.contains(what),
            "help lacks {keys}: {what}\n{t}"
        );
    }
}

#[test]
fn details_overlay_shows_the_selected_request() {
    let mut app = app();
    app.focus = Focus::Requests;
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 120, 40));
    for want in [
        "Request details",
        "#41 at 22:13:18 UTC",
        "/v1/messages",
        "bytes    321  stream yes",
        "upstream closed the stream",
    ] {
        assert!(t.contains(want), "missing {want:?}:\n{t}");
    }
    app.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 120, 40));
    assert!(
        t.contains("/v1/chat/completions") && t.contains("stream no"),
        "{t}"
    );
}

#[test]
fn status_bar_shows_message_until_it_expires() {
    let mut app = app();
    app.flash("nothing to do");
    app.on_tick(NOW - 1_000);
    let t = text(&draw(&app, &Theme::default(), 120, 40));
    assert!(t.contains("nothing to do"));
    app.on_tick(NOW + app::MESSAGE_TTL_MS);
    let t = text(&draw(&app, &Theme::default(), 120, 40));
    assert!(!t.contains("nothing to do"));
}

#[test]
fn empty_snapshot_renders_placeholders() {
    let t = text(&draw(
        &App::new(Arc::new(Snapshot::default())),
        &Theme::default(),
        100,
        30,
    ));
    assert!(
        t.contains("no providers configured") && t.contains("no requests yet"),
        "{t}"
    );
}
