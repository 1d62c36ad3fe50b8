//! Header: listen/admin addresses, uptime, draining flag, last-minute stats and a sparkline.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};

use super::{fmt_ms, fmt_uptime};
use crate::console::theme::{Role, Theme};
use crate::core::snapshot::Snapshot;

/// Rows the header needs.
pub const HEIGHT: u16 = 2;

/// Narrowest sparkline worth drawing, in columns.
const MIN_SPARK: u16 = 10;

/// Draws the header into `area` (two rows). `now_unix_ms` drives the uptime.
pub fn render(f: &mut Frame, area: Rect, snap: &Snapshot, theme: &Theme, now_unix_ms: u64) {
    let muted = theme.style(Role::Muted);
    let mut first = Vec::new();
    if snap.draining {
        first.push(Span::styled(
            " DRAINING ",
            theme
                .style(Role::Error)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ));
        first.push(Span::raw(" "));
    }
    let uptime = fmt_uptime(now_unix_ms.saturating_sub(snap.started_at_unix_ms));
    first.extend([
        Span::styled("sluice", theme.style(Role::Title)),
        Span::styled("  listen ", muted),
        Span::raw(snap.listen.clone()),
        Span::styled("  admin ", muted),
        Span::raw(snap.admin_listen.clone()),
        Span::styled("  up ", muted),
        Span::raw(uptime),
    ]);
    let w = &snap.last_minute;
    let ratio_role = if w.success_ratio >= 0.95 {
        Role::Ok
    } else {
        Role::Error
    };
    let second = vec![
        Span::styled("req/s ", muted),
        Span::raw(format!("{:.2}", w.req_per_s)),
        Span::styled("  in-flight ", muted),
        Span::raw(snap.totals.in_flight.to_string()),
        Span::styled("  ok ", muted),
        Span::styled(
            format!("{:.1}%", w.success_ratio * 100.0),
            theme.style(ratio_role),
        ),
        Span::styled("  p50 ", muted),
        Span::raw(fmt_ms(w.p50_ms)),
        Span::styled("  p99 ", muted),
        Span::raw(fmt_ms(w.p99_ms)),
        Span::styled("  (1m)", muted),
    ];
    let (first, second) = (Line::from(first), Line::from(second));
    let text_w = u16::try_from(first.width().max(second.width())).unwrap_or(u16::MAX);
    let spark_w = area.width.saturating_sub(text_w.saturating_add(2)).min(60);
    let [text_area, _, spark_area] = if spark_w >= MIN_SPARK {
        Layout::horizontal([
            Constraint::Fill(1),
            Constraint::Length(2),
            Constraint::Length(spark_w),
        ])
        .areas(area)
    } else {
        [area, Rect::default(), Rect::default()]
    };
    f.render_widget(Paragraph::new(vec![first, second]), text_area);
    if !spark_area.is_empty() {
        let data = &w.sparkline;
        let tail = data
            .get(data.len().saturating_sub(usize::from(spark_area.width))..)
            .unwrap_or(&[]);
        f.render_widget(
            Sparkline::default().data(tail).style(theme.style(Role::Ok)),
            spark_area,
        );
    }
}
