//! Model lockouts panel (§3): provider, connection, model (or quota group),
//! scope, reason, failures and a live "expires in" countdown, soonest expiry first.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::selectable_table;
use super::{Col, fit, fmt_countdown, frame, name_width, pick};
use crate::console::app::{App, Focus};
use crate::console::theme::{Role, Theme};
use crate::snapshot::LockoutView;

/// Rows this panel would like (borders, header, one per lockout).
pub fn wanted_height(app: &App) -> u16 {
    u16::try_from(app.snapshot.lockouts.len().max(1) + 3).unwrap_or(u16::MAX)
}

/// Draws the Lockouts panel into `area`; `focused` highlights its border and selection.
pub fn render(
    f: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    focused: bool,
    now_unix_ms: u64,
) {
    let snap = &app.snapshot;
    let title = match app.filter_counts(Focus::Lockouts) {
        Some((n, m)) => format!("Model lockouts {n}/{m}"),
        None if snap.lockouts.is_empty() => "Model lockouts".to_owned(),
        None => format!("Model lockouts ({})", snap.lockouts.len()),
    };
    let empty = app.empty_notice(Focus::Lockouts, "no model lockouts");
    let Some(inner) = frame(f, area, &title, focused, theme, empty.as_deref()) else {
        return;
    };
    let _muted = theme.style(Role::Muted);
    let locks = &snap.lockouts;
    let cols = [
        Col::fixed(
            "provider",
            name_width(locks.iter().map(|l| l.provider.as_str()), 8, 16),
            3,
        ),
        Col::fixed(
            "connection",
            name_width(locks.iter().map(|l| l.connection.as_str()), 10, 16),
            2,
        ),
        Col::fill("model", 12, 0),
        Col::fixed(
            "scope",
            name_width(locks.iter().map(|l| l.scope.as_str()), 5, 11),
            4,
        ),
        Col::fixed(
            "reason",
            name_width(locks.iter().map(|l| l.reason.as_str()), 6, 22),
            5,
        ),
        Col::fixed("fails", 5, 6),
        Col::fixed("expires in", 10, 0),
    ];
    let keep = fit(&cols, inner.width);
    let row = |l: &_| pick(cells(l, theme, now_unix_ms), &keep);
    selectable_table(
        f,
        inner,
        &cols,
        &keep,
        (locks, row),
        focused,
        theme,
        app.lockout_selected,
    );
}

fn cells<'a>(l: &LockoutView, theme: &Theme, now: u64) -> Vec<Cell<'a>> {
    let muted = theme.style(Role::Muted);
    let lockout = theme.style(Role::Lockout);
    let expires = match fmt_countdown(l.until_unix_ms, now) {
        Some(left) => Span::styled(left, lockout),
        None => Span::styled("expired", muted),
    };
    vec![
        Cell::from(l.provider.clone()),
        Cell::from(l.connection.clone()),
        Cell::from(Span::styled(l.model.clone(), lockout)),
        Cell::from(Span::styled(l.scope.as_str(), muted)),
        Cell::from(l.reason.clone()),
        Cell::from(l.failures.to_string()),
        Cell::from(expires),
    ]
}
