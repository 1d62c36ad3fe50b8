//! Providers panel: one row per provider with its live counters, an indented row per
//! connection (auth shown as `passthrough` / `env:VAR`, never a key), then the combos.

use ratatui::Frame;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Table, TableState};

use super::{Col, block, fit, fmt_ms, fmt_status, pick, status_style, table_frame};
use crate::console::app::{App, Focus};
use crate::console::theme::{Role, Theme};
use crate::snapshot::{ConnectionView, ProviderView, Snapshot};

/// Columns after the first (provider/connection, sized to the names): dialect/auth, profile,
/// attempts, errors (`err`: attempts answered with a 5xx or not at all — transport error or
/// timeout — exactly what the snapshot's `failures` counts; a 429 or 401 that moved on is not
/// one), in-flight, last status, last latency. Narrow panels drop the
/// highest `drop` ranks first.
const COLS: [Col; 7] = [
    Col::fixed("dialect / auth", 24, 4),
    Col::fixed("profile", 8, 5),
    Col::fixed("att", 6, 3),
    Col::fixed("err", 5, 2),
    Col::fixed("infl", 5, 1),
    Col::fixed("last", 4, 0),
    Col::fixed("lat", 7, 6),
];

/// Rows this panel would like (borders, header, providers, connections, combos).
pub fn wanted_height(snap: &Snapshot) -> u16 {
    let rows: usize = snap.providers.iter().map(|p| 1 + p.connections.len()).sum();
    let combos = if snap.combos.is_empty() {
        0
    } else {
        snap.combos.len() + 1
    };
    u16::try_from(rows + combos + 3).unwrap_or(u16::MAX)
}

/// Draws the Providers panel into `area`; `focused` highlights its border and selection.
pub fn render(f: &mut Frame, area: Rect, app: &App, theme: &Theme, focused: bool) {
    let snap = &app.snapshot;
    let title = app.counted_title("Providers", Focus::Providers);
    let outer = block(&title, focused, theme);
    let inner = outer.inner(area);
    f.render_widget(outer, area);
    if inner.is_empty() {
        return;
    }
    let combo_rows = if snap.combos.is_empty() {
        0
    } else {
        snap.combos.len() + 1
    };
    let combo_h = u16::try_from(combo_rows)
        .unwrap_or(u16::MAX)
        .min(inner.height / 2);
    let [table_area, combo_area] =
        Layout::vertical([Constraint::Min(0), Constraint::Length(combo_h)]).areas(inner);

    let muted = theme.style(Role::Muted);
    let cols = columns(snap);
    let keep = fit(&cols, table_area.width);
    let (header, widths) = table_frame(&cols, &keep, muted);
    let mut rows = Vec::new();
    let mut selected_row = None;
    for (i, p) in snap.providers.iter().enumerate() {
        if i == app.provider_selected {
            selected_row = Some(rows.len());
        }
        rows.push(pick(provider_cells(p, theme), &keep));
        for c in &p.connections {
            rows.push(pick(connection_cells(c, theme), &keep));
        }
    }
    if let Some(notice) = app.empty_notice(Focus::Providers, "no providers configured") {
        f.render_widget(Paragraph::new(Span::styled(notice, muted)), table_area);
    } else {
        let table = Table::new(rows, widths)
            .flex(Flex::Start)
            .header(header)
            .row_highlight_style(if focused {
                theme.style(Role::Selection)
            } else {
                Default::default()
            });
        let mut state = TableState::default().with_selected(selected_row);
        f.render_stateful_widget(table, table_area, &mut state);
    }

    if !combo_area.is_empty() {
        render_combos(f, combo_area, snap, theme);
    }
}

/// The table's columns: the provider/connection names, as wide as the longest (12 to 32
/// characters, a connection's indent included), then [`COLS`].
fn columns(snap: &Snapshot) -> Vec<Col> {
    let name_w = snap
        .providers
        .iter()
        .flat_map(|p| {
            std::iter::once(p.id.chars().count())
                .chain(p.connections.iter().map(|c| c.id.chars().count() + 4))
        })
        .max()
        .unwrap_or(0)
        .clamp(12, 32);
    std::iter::once(Col::fixed(
        "provider",
        u16::try_from(name_w).unwrap_or(12),
        0,
    ))
    .chain(COLS)
    .collect()
}

/// The indented row of one connection under its provider: its auth in the dialect column,
/// its counters, no profile or last status.
fn connection_cells<'a>(c: &ConnectionView, theme: &Theme) -> Vec<Cell<'a>> {
    let fail_style = if c.failures > 0 {
        theme.style(Role::Error)
    } else {
        theme.style(Role::Muted)
    };
    vec![
        Cell::from(format!("  └ {}", c.id)),
        Cell::from(c.auth.clone()),
        Cell::from(""),
        Cell::from(c.attempts.to_string()),
        Cell::from(Span::styled(c.failures.to_string(), fail_style)),
        Cell::from(c.in_flight.to_string()),
        Cell::from(""),
        Cell::from(""),
    ]
}

/// The combos below the table: a title line, then one line per combo with its strategy and
/// targets.
fn render_combos(f: &mut Frame, area: Rect, snap: &Snapshot, theme: &Theme) {
    let muted = theme.style(Role::Muted);
    let mut lines = vec![Line::from(Span::styled("combos", theme.style(Role::Title)))];
    lines.extend(snap.combos.iter().map(|c| {
        Line::from(vec![
            Span::raw(format!("  {}", c.name)),
            Span::styled(format!(" ({}) → ", c.strategy), muted),
            Span::raw(c.targets.join(", ")),
        ])
    }));
    f.render_widget(Paragraph::new(lines), area);
}

fn provider_cells<'a>(p: &ProviderView, theme: &Theme) -> Vec<Cell<'a>> {
    let muted = theme.style(Role::Muted);
    let fail_style = if p.failures > 0 {
        theme.style(Role::Error)
    } else {
        muted
    };
    let (last, lat) = if p.attempts == 0 {
        (Span::styled("—", muted), Span::styled("—", muted))
    } else {
        (
            Span::styled(
                fmt_status(p.last_status),
                status_style(p.last_status, theme),
            ),
            Span::raw(fmt_ms(p.last_latency_ms)),
        )
    };
    vec![
        Cell::from(Span::styled(p.id.clone(), theme.style(Role::Title))),
        Cell::from(p.dialect.to_string()),
        Cell::from(p.profile.to_string()),
        Cell::from(p.attempts.to_string()),
        Cell::from(Span::styled(p.failures.to_string(), fail_style)),
        Cell::from(p.in_flight.to_string()),
        Cell::from(last),
        Cell::from(lat),
    ]
}
