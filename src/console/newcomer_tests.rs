//! Console texts and layout a newcomer reads first: the empty-filter notice, the idle header,
//! the sparkline label, the Requests panel's width and truncation, rows from before a
//! restart, read-only hints, `probe ready`, and the Providers error column.

use std::sync::Arc;

use super::app::{App, Focus};
use super::panels::{circuits, header, providers, requests};

use super::test_support::*;
use super::theme::Theme;
use super::*;
use crate::snapshot::{RECENT_CAP, RequestView, Window};

#[test]
fn a_filter_without_matches_says_so_in_every_panel() {
    let mut a = app();
    a.set_filter("zzz-nothing");
    let t = text(&draw(&a, &Theme::default(), 200, 60));
    assert!(t.contains("no rows match filter \"zzz-nothing\""), "{t}");
    assert!(!t.contains("no providers configured"), "{t}");
    assert!(!t.contains("no connections configured"), "{t}");
    assert!(!t.contains("no requests yet"), "{t}");
    let mut none = snapshot();
    none.recent.clear();
    let t = text(&draw(&App::new(Arc::new(none)), &Theme::default(), 200, 60));
    assert!(t.contains("no requests yet"), "without a filter: {t}");
}

#[test]
fn the_header_shows_a_dash_without_traffic_and_labels_the_sparkline() {
    let theme = Theme::default();
    let mut idle = snapshot();
    idle.last_minute = Window {
        success_ratio: 1.0,
        sparkline: vec![0; 60],
        ..Window::default()
    };
    let buf = paint(160, 2, |f| header::render(f, f.area(), &idle, &theme, NOW));
    let line = line_with(&buf, "in-flight");
    assert!(line.contains("ok —  p50 —  p99 —"), "{line}");
    assert!(!line.contains("100.0%"), "{line}");
    let busy = snapshot();
    let buf = paint(160, 2, |f| header::render(f, f.area(), &busy, &theme, NOW));
    assert!(line_with(&buf, "in-flight").contains("ok 95.0%"));
    assert!(
        lines(&buf)[0].trim_end().ends_with(header::SPARK_LABEL),
        "the label sits above the bars: {}",
        text(&buf)
    );
}

#[test]
fn the_requests_panel_gets_the_widest_column_at_every_size() {
    let a = app();
    for (w, h) in [(100, 30), (120, 34), (160, 40), (200, 60), (300, 80)] {
        let rects = panel_rects(Rect::new(0, 0, w, h), &a);
        let width = |p: Focus| rects.iter().find(|(f, _)| *f == p).unwrap().1.width;
        let req = width(Focus::Requests);
        for (p, r) in &rects {
            assert!(
                req >= r.width,
                "{w}x{h}: Requests {req} < {p:?} {}",
                r.width
            );
        }
    }
}

#[test]
fn long_routes_are_cut_with_an_ellipsis_and_outcomes_fit_whole() {
    let mut snap = snapshot();
    snap.recent[0].client_model = "a-very-long-client-model-name".into();
    snap.recent[0].outcome = crate::snapshot::RequestOutcome::UpstreamError;
    let a = App::new(Arc::new(snap));
    let buf = paint(44, 6, |f| {
        requests::render(f, f.area(), &a, &Theme::default(), true)
    });
    let row = line_with(&buf, "a-very");
    assert!(row.contains("a-very-long-client-mod… 502"), "{row}");
    assert!(row.contains("502"), "the status stays visible: {row}");
    // The longest outcome word (`upstream_error`) fits its column whole.
    assert!(row.contains("502 upstream_error"), "{row}");
}

fn logged(i: u64) -> RequestView {
    RequestView {
        at_unix_ms: NOW - 3_600_000 - i,
        route: "/v1/messages".into(),
        client_model: format!("before-restart-{i}"),
        target: "anthropic".into(),
        status: 200,
        outcome: crate::snapshot::RequestOutcome::Ok,
        ..RequestView::default()
    }
}

#[test]
fn rows_from_before_a_restart_show_below_the_live_ones() {
    let mut a = app();
    let live = a.snapshot.recent.len();
    a.set_history((0..3).map(logged).collect());
    assert_eq!(a.snapshot.recent.len(), live + 3);
    assert_eq!(a.snapshot.recent[live].client_model, "before-restart-0");
    let t = text(&draw(&a, &Theme::default(), 200, 60));
    assert!(t.contains("before-restart-0"), "{t}");
    // A new snapshot keeps them; a full live list pushes them out.
    a.set_snapshot(Arc::new(snapshot()));
    assert_eq!(a.snapshot.recent.len(), live + 3);
    let mut full = snapshot();
    full.recent = (0..RECENT_CAP as u64)
        .map(|id| RequestView {
            id,
            ..RequestView::default()
        })
        .collect();
    a.set_snapshot(Arc::new(full));
    assert_eq!(a.snapshot.recent.len(), RECENT_CAP);
    assert!(a.snapshot.recent.iter().all(|r| r.client_model.is_empty()));
}

#[test]
fn readonly_leaves_action_hints_out_of_the_status_bar() {
    let mut a = app();
    a.focus = Focus::Circuits;
    let bar = |a: &App| {
        lines(&draw(a, &Theme::default(), 200, 60))
            .last()
            .cloned()
            .unwrap()
    };
    let normal = bar(&a);
    assert!(normal.contains("r reset"), "{normal}");
    a.readonly = true;
    let ro = bar(&a);
    assert!(ro.contains("READ-ONLY") && ro.contains("q quit"), "{ro}");
    assert!(!ro.contains("reset"), "{ro}");
    a.focus = Focus::Cooldowns;
    assert!(!bar(&a).contains("clear"), "{}", bar(&a));
}

#[test]
fn half_open_without_a_probe_in_flight_says_probe_ready() {
    let theme = Theme::default();
    let mut snap = snapshot();
    snap.providers[0].breaker.state = crate::snapshot::BreakerState::HalfOpen;
    snap.providers[0].breaker.multiplier = 1;
    snap.providers[0].breaker.next_probe_at_unix_ms = None;
    let a = App::new(Arc::new(snap.clone()));
    let buf = paint(100, 8, |f| {
        circuits::render(f, f.area(), &a, &theme, true, NOW)
    });
    let row = line_with(&buf, &snap.providers[0].id);
    assert!(row.contains("probe ready"), "{row}");
    snap.providers[0].breaker.next_probe_at_unix_ms = Some(NOW + 5_000);
    let a = App::new(Arc::new(snap.clone()));
    let buf = paint(100, 8, |f| {
        circuits::render(f, f.area(), &a, &theme, true, NOW)
    });
    let row = line_with(&buf, &snap.providers[0].id);
    assert!(row.contains("probing") && !row.contains("ready"), "{row}");
}

#[test]
fn the_providers_error_column_is_headed_err() {
    let a = app();
    let buf = paint(100, 12, |f| {
        providers::render(f, f.area(), &a, &Theme::default(), true)
    });
    let head = line_with(&buf, "provider");
    assert!(head.contains(" err ") && !head.contains("fail"), "{head}");
}

#[test]
fn the_requests_panel_scrolled_far_down_shows_the_selected_row_last_and_highlighted() {
    let mut snap = snapshot();
    let template = snap.recent.first().cloned().unwrap_or_default();
    snap.recent = (0..500)
        .map(|i| crate::snapshot::RequestView {
            client_model: format!("model-{i:03}"),
            ..template.clone()
        })
        .collect();
    let mut a = App::new(Arc::new(snap));
    a.request_selected = 300;
    let theme = Theme::default();
    let buf = paint(120, 12, |f| requests::render(f, f.area(), &a, &theme, true));
    let shown = text(&buf);
    // 12 lines: borders, a header and 9 rows, scrolled so that row 300 is the last one.
    assert!(shown.contains("model-300"), "{shown}");
    assert!(shown.contains("model-292"), "{shown}");
    assert!(
        !shown.contains("model-291") && !shown.contains("model-301"),
        "{shown}"
    );
    let row = line_with(&buf, "model-300");
    let y = lines(&buf).iter().position(|l| *l == row).unwrap();
    let x = row.find("model-300").unwrap();
    let cell = &buf[(u16::try_from(x).unwrap(), u16::try_from(y).unwrap())];
    assert_eq!(
        cell.style().bg,
        theme.style(crate::console::theme::Role::Selection).bg,
        "the selected row is highlighted"
    );
}
