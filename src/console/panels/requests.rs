//! Requests panel: the most recent finished requests, newest first.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Table, TableState};

use super::{
    Col, ellipsize, fill_width, fit, fmt_clock_utc, fmt_ms, fmt_status, frame, pick, status_style,
    table_frame, visible_rows,
};
use crate::console::app::{App, Focus};
use crate::console::theme::{Role, Theme};
use crate::snapshot::{RequestOutcome, RequestView};

/// Columns: time, model → target, status, latency, attempts, outcome. Narrow panels drop the
/// highest `drop` ranks first.
const COLS: [Col; 6] = [
    Col::fixed("time", 8, 2),
    Col::fill("model → target", 16, 0),
    Col::fixed("st", 3, 0),
    Col::fixed("latency", 7, 3),
    Col::fixed("att", 3, 4),
    Col::fixed("outcome", 14, 1),
];

/// Draws the Requests panel into `area`; `focused` highlights its border and selection.
pub fn render(f: &mut Frame, area: Rect, app: &App, theme: &Theme, focused: bool) {
    let snap = &app.snapshot;
    let title = app.counted_title("Requests", Focus::Requests);
    let empty = app.empty_notice(Focus::Requests, "no requests yet");
    let Some(inner) = frame(f, area, &title, focused, theme, empty.as_deref()) else {
        return;
    };
    let muted = theme.style(Role::Muted);
    let keep = fit(&COLS, inner.width);
    let route_w = fill_width(&COLS, &keep, inner.width);
    let (header, widths) = table_frame(&COLS, &keep, muted);
    let shown = visible_rows(snap.recent.len(), app.request_selected, inner.height);
    let selected = app.request_selected.saturating_sub(shown.start);
    let rows = snap
        .recent
        .get(shown)
        .unwrap_or_default()
        .iter()
        .map(|r| pick(cells(r, theme, route_w), &keep));
    let table = Table::new(rows, widths)
        .header(header)
        .row_highlight_style(if focused {
            theme.style(Role::Selection)
        } else {
            Default::default()
        });
    let mut state = TableState::default().with_selected(Some(selected));
    f.render_stateful_widget(table, inner, &mut state);
}

/// `client_model → target`, with `?` for a missing model and `—` when no target was tried.
pub fn route_label(r: &RequestView) -> String {
    let model = if r.client_model.is_empty() {
        "?"
    } else {
        &r.client_model
    };
    let target = if r.target.is_empty() {
        "—"
    } else {
        &r.target
    };
    format!("{model} → {target}")
}

/// The row's cells; the route is cut to `route_w` cells and the outcome to its column, each
/// with `…` when cut.
fn cells<'a>(r: &RequestView, theme: &Theme, route_w: u16) -> Vec<Cell<'a>> {
    let outcome_w = COLS[5].width;
    let outcome_role = if r.outcome == RequestOutcome::Ok {
        Role::Ok
    } else {
        Role::Error
    };
    vec![
        Cell::from(Span::styled(
            fmt_clock_utc(r.at_unix_ms),
            theme.style(Role::Muted),
        )),
        Cell::from(ellipsize(&route_label(r), route_w)),
        Cell::from(Span::styled(
            fmt_status(r.status),
            status_style(r.status, theme),
        )),
        Cell::from(Line::from(fmt_ms(r.latency_ms)).right_aligned()),
        Cell::from(Line::from(r.attempts.to_string()).right_aligned()),
        Cell::from(Span::styled(
            ellipsize(r.outcome.as_str(), outcome_w),
            theme.style(outcome_role),
        )),
    ]
}
