//! Whole-screen console tests: render a hand-built snapshot into a `TestBackend` and read it back.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier};

use super::app::{App, Focus};
use super::test_support::*;
use super::theme::{Role, Theme};
use super::*;
use crate::snapshot::Snapshot;

#[test]
fn grid_shows_header_providers_and_requests() {
    let buf = draw(&app(), &Theme::default(), 200, 60);
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
        "q quit  ? help  tab focus  j/k move  / filter  e settings  r reset  R reset all",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    assert!(!t.contains("DRAINING"));
    assert!(!t.contains("1 Circuits"), "no tab bar in grid mode");
}

#[test]
fn grid_shows_all_five_panels_at_the_minimum_grid_size() {
    let t = text(&draw(&app(), &Theme::default(), 100, 30));
    for want in [
        "Circuits",
        "Cooldowns",
        "Model lockouts (2)",
        "Providers",
        "Requests",
        "open",
        "cooling",
        "claude-opus-4",
    ] {
        assert!(t.contains(want), "missing {want:?} in:\n{t}");
    }
    assert!(!t.contains("1 Circuits"), "grid, not tabs");
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
    let buf = draw(&app(), &theme, 200, 60);
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
    let (x, y) = find(&buf, "200 ").unwrap();
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
    let t = text(&draw(&app, &Theme::default(), 80, 24));
    for tab in [
        "1 Circuits",
        "2 Cooldowns",
        "3 Lockouts",
        "4 Queues",
        "5 Requests",
        "6 Providers",
    ] {
        assert!(t.contains(tab), "missing tab {tab:?}:\n{t}");
    }
    assert!(t.contains("failure_threshold"), "Circuits shown:\n{t}");
    assert!(
        !t.contains("env:OPENROUTER_API_KEY"),
        "Providers hidden:\n{t}"
    );
    app.on_key(KeyEvent::new(KeyCode::Char('6'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 80, 24));
    assert!(t.contains("env:OPENROUTER_API_KEY"), "{t}");
    assert!(!t.contains("failure_threshold"));
    app.on_key(KeyEvent::new(KeyCode::Char('5'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 80, 24));
    assert!(t.contains("gpt-4o → local:direct/llama3"), "{t}");
    let t = text(&draw(&app, &Theme::default(), 60, 15));
    assert!(
        t.contains("1 Circ") && t.contains("6 Prov"),
        "all six tabs fit at 60 columns (short titles):\n{t}"
    );
    app.on_key(KeyEvent::new(KeyCode::Char('4'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 80, 24));
    assert!(t.contains("Queues") && t.contains("main/z-ai/glm-5"), "{t}");
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
    let mut dialog = app();
    dialog.marked.insert("main".into());
    dialog.readonly = true;
    dialog.on_key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE));
    dialog.readonly = false;
    dialog.on_key(KeyEvent::new(KeyCode::Char('r'), KeyModifiers::NONE));
    assert!(dialog.confirm.is_some());
    let empty = App::new(Arc::new(Snapshot::default()));
    let mut huge = snapshot();
    huge.providers[0].id = "p".repeat(300);
    huge.providers[0].breaker.transitions[1].reason = "r".repeat(500);
    huge.providers[0].connections[0].last_error_kind =
        Some(crate::snapshot::Word::Other("k".repeat(500)));
    huge.lockouts[0].model = "m".repeat(500);
    huge.providers[0].breaker.next_probe_at_unix_ms = Some(u64::MAX);
    huge.lockouts[1].until_unix_ms = u64::MAX;
    let huge = App::new(Arc::new(huge));
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
        for app in [&app(), &busy, &dialog, &empty, &huge] {
            for focus in Focus::ALL {
                let mut app = app.clone();
                app.focus = focus;
                draw(&app, &Theme::default(), w, h);
            }
        }
    }
}

#[test]
fn help_overlay_lists_every_bound_command_with_its_keys_and_name() {
    let mut app = app();
    app.on_key(KeyEvent::new(KeyCode::Char('?'), KeyModifiers::NONE));
    let mut n = 0;
    // Page through the help with `j`, collecting every line shown.
    let mut seen = String::new();
    for _ in 0..60 {
        seen.push_str(&text(&draw(&app, &Theme::default(), 120, 40)));
        app.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE));
    }
    assert!(seen.contains("Help"));
    for b in app.keymap.bindings() {
        let line = seen
            .lines()
            .find(|l| l.contains(&format!(" {}  ", b.spec.name)) && l.contains(b.spec.help))
            .unwrap_or_else(|| panic!("no help line for {}:\n{seen}", b.spec.name));
        assert!(
            line.contains(&b.label()),
            "help line for {} lacks {:?}: {line}",
            b.spec.name,
            b.label()
        );
        n += 1;
    }
    assert_eq!(n, keymap::table::COMMANDS.len());
    for label in [
        "q, ctrl-c",
        "space",
        "j, ↓",
        "1",
        "6",
        "y, enter",
        "shift-tab",
    ] {
        assert!(seen.contains(label), "{label} missing from help");
    }
    for section in ["everywhere", "Circuits", "Cooldowns", "settings editor (e)"] {
        assert!(seen.contains(section), "{section} heading missing");
    }
}

#[test]
fn help_follows_an_overridden_keymap() {
    let keys = [("reset_breaker".to_owned(), vec!["<C-r>".to_owned()])].into();
    let mut app = app();
    app.keymap = Arc::new(keymap::keymap_from_config(&keys).unwrap());
    app.help = true;
    let t = text(&draw(&app, &Theme::default(), 160, 48));
    let line = line_with(&draw(&app, &Theme::default(), 160, 48), "reset_breaker ");
    assert!(line.contains("ctrl-r"), "{line}\n{t}");
    app.help = false;
    let t = text(&draw(&app, &Theme::default(), 160, 48));
    assert!(t.contains("ctrl-r reset"), "hint follows the keymap:\n{t}");
    assert!(!t.contains(" r reset"), "{t}");
}

#[test]
fn details_overlay_shows_the_selected_request() {
    let mut app = app();
    app.focus = Focus::Requests;
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 200, 60));
    for want in [
        "Request details",
        "#41 at 22:13:18 UTC",
        "/v1/messages",
        "bytes    321  stream yes",
        "upstream closed the stream",
        "format   client anthropic → upstream openai (translated)",
        "adjusted max_tokens 128000 → 32768 (max_output_tokens)",
        "anthropic→openai",
    ] {
        assert!(t.contains(want), "missing {want:?}:\n{t}");
    }
    app.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 200, 60));
    assert!(
        t.contains("/v1/chat/completions") && t.contains("stream no"),
        "{t}"
    );
    assert!(t.contains("client chat → upstream openai"), "{t}");
    assert!(!t.contains("(translated)"), "{t}");
    assert!(!t.contains("adjusted"), "no adjustment, no line: {t}");
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
    for want in [
        "no providers configured",
        "no requests yet",
        "no connections configured",
        "no model lockouts",
    ] {
        assert!(t.contains(want), "missing {want:?}:\n{t}");
    }
}

#[test]
fn grid_rows_are_shared_smallest_first_and_sum_to_the_height() {
    assert_eq!(
        share(27, &[5, 7, 4]),
        vec![5, 7, 15],
        "spare rows go to the last panel"
    );
    assert_eq!(
        share(12, &[5, 20, 20]),
        vec![4, 4, 4],
        "an even split when all want more"
    );
    assert_eq!(share(14, &[3, 20, 20]), vec![3, 5, 6]);
    assert_eq!(share(0, &[5, 7, 4]), vec![0, 0, 0]);
    assert_eq!(share(27, &[]), Vec::<u16>::new());
    for total in 0..60 {
        assert_eq!(share(total, &[9, 3, 30]).iter().sum::<u16>(), total);
    }
}

#[test]
fn details_overlay_marks_an_attempt_answered_by_an_injected_fault() {
    let mut app = app();
    let mut snap = (*app.snapshot).clone();
    snap.recent[0].attempt_log[0].injected = true;
    app.snapshot = Arc::new(snap);
    app.focus = Focus::Requests;
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 200, 60));
    assert_eq!(t.matches(" injected").count(), 1, "{t}");
    app.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 200, 60));
    assert!(!t.contains(" injected"), "{t}");
}

#[test]
fn details_overlay_says_a_continued_stream_was_continued() {
    let mut app = app();
    let mut snap = (*app.snapshot).clone();
    snap.recent[0].continued = true;
    app.snapshot = Arc::new(snap);
    app.focus = Focus::Requests;
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 200, 60));
    assert_eq!(t.matches("continued after a break").count(), 1, "{t}");
    app.on_key(KeyEvent::new(KeyCode::Char('j'), KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 200, 60));
    assert!(!t.contains("continued after a break"), "{t}");
}

#[test]
fn details_overlay_wraps_a_long_error_under_its_label() {
    let mut app = app();
    let mut snap = (*app.snapshot).clone();
    let words: Vec<String> = (0..60).map(|i| format!("word{i:02}")).collect();
    snap.recent[0].error = format!("{} end-of-error", words.join(" "));
    app.snapshot = Arc::new(snap);
    app.focus = Focus::Requests;
    app.on_key(KeyEvent::new(KeyCode::Enter, KeyModifiers::NONE));
    let t = text(&draw(&app, &Theme::default(), 120, 60));
    assert!(
        t.contains("end-of-error"),
        "the end of the error is on screen:\n{t}"
    );
    for w in &words {
        assert!(t.contains(w.as_str()), "{w} missing:\n{t}");
    }
}

#[test]
fn wrap_words_breaks_at_spaces_and_cuts_overlong_words() {
    use crate::console::panels::overlay::wrap_words;
    assert_eq!(wrap_words("aa bb cc", 5), ["aa bb", "cc"]);
    assert_eq!(wrap_words("abcdefgh", 3), ["abc", "def", "gh"]);
    assert_eq!(wrap_words("  ", 3), Vec::<String>::new());
}
