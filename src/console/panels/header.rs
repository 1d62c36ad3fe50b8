//! Header: listen/admin addresses, uptime, draining flag, last-minute stats and a sparkline.

use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Sparkline};

use super::{fmt_ms, fmt_uptime};
use crate::console::theme::{Role, Theme};
use crate::snapshot::Snapshot;

/// Rows the header needs.
pub const HEIGHT: u16 = 2;

/// The sparkline's label, drawn right-aligned above it (fits [`MIN_SPARK`]).
pub const SPARK_LABEL: &str = "req/s, 60s";

/// Narrowest sparkline worth drawing, in columns.
const MIN_SPARK: u16 = 10;

/// Tokens in plus out of the requests in `snap.recent` that finished in the minute before
/// `now_unix_ms` (the panel's rows: at most `RECENT_CAP`, so a busier minute reads low).
pub fn tokens_last_minute(snap: &Snapshot, now_unix_ms: u64) -> u64 {
    let from = now_unix_ms.saturating_sub(60_000);
    snap.recent
        .iter()
        .filter(|r| r.at_unix_ms.saturating_add(r.latency_ms) >= from)
        .map(|r| {
            r.tokens_in
                .unwrap_or(0)
                .saturating_add(r.tokens_out.unwrap_or(0))
        })
        .fold(0u64, u64::saturating_add)
}

/// The banner while an operator-injected fault is on, e.g.
/// ` FAULT INJECTED: p/c 503 · 42s left ` (` +2 more` when several are); `None` when none is.
/// The countdown runs from each fault's `expires_at_unix_ms` against `now_unix_ms`.
pub fn fault_banner(snap: &Snapshot, now_unix_ms: u64) -> Option<String> {
    let live: Vec<_> = snap
        .faults
        .iter()
        .filter(|f| f.expires_at_unix_ms > now_unix_ms)
        .collect();
    let first = live.first()?;
    let left = (first.expires_at_unix_ms - now_unix_ms).div_ceil(1000);
    let more = match live.len() {
        1 => String::new(),
        n => format!(" +{} more", n - 1),
    };
    Some(format!(
        " FAULT INJECTED: {} {} · {left}s left{more} ",
        first.target, first.description
    ))
}

/// The banner while requests are held until a quota reset, e.g.
/// ` HELD: fast until 14:05:00 UTC (2m13s) ` (` +1 more` when several are); `None` when none
/// is. The countdown runs from the hold's `until_unix_ms` against `now_unix_ms`.
pub fn held_banner(snap: &Snapshot, now_unix_ms: u64) -> Option<String> {
    let first = snap.held.first()?;
    let left =
        super::fmt_countdown(first.until_unix_ms, now_unix_ms).unwrap_or_else(|| "due".to_owned());
    let more = match snap.held.len() {
        1 => String::new(),
        n => format!(" +{} more", n - 1),
    };
    Some(format!(
        " HELD: {} until {} UTC ({}){more} ",
        first.model,
        super::fmt_clock_utc(first.until_unix_ms),
        left
    ))
}

/// Draws the header into `area` (two rows). `now_unix_ms` drives the uptime.
pub fn render(f: &mut Frame, area: Rect, snap: &Snapshot, theme: &Theme, now_unix_ms: u64) {
    render_with(f, area, snap, theme, now_unix_ms, None);
}

/// [`render`] with a `notice` badge first on the top row (an attached console's
/// "reconnecting…"), in the error style like `DRAINING`.
pub fn render_with(
    f: &mut Frame,
    area: Rect,
    snap: &Snapshot,
    theme: &Theme,
    now_unix_ms: u64,
    notice: Option<&str>,
) {
    let first = top_line(snap, theme, now_unix_ms, notice);
    let second = traffic_line(snap, theme, now_unix_ms);
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
    render_sparkline(f, spark_area, snap, theme);
}

/// The top row: the badges (`notice`, `DRAINING`, injected faults, held requests), then
/// name, listen and admin addresses and uptime.
fn top_line(
    snap: &Snapshot,
    theme: &Theme,
    now_unix_ms: u64,
    notice: Option<&str>,
) -> Line<'static> {
    let muted = theme.style(Role::Muted);
    let mut first = Vec::new();
    if let Some(n) = notice {
        first.push(Span::styled(
            format!(" {n} "),
            theme
                .style(Role::Error)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ));
        first.push(Span::raw(" "));
    }
    if snap.draining {
        first.push(Span::styled(
            " DRAINING ",
            theme
                .style(Role::Error)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ));
        first.push(Span::raw(" "));
    }
    if let Some(text) = fault_banner(snap, now_unix_ms) {
        first.push(Span::styled(
            text,
            theme
                .style(Role::Error)
                .add_modifier(Modifier::BOLD | Modifier::REVERSED),
        ));
        first.push(Span::raw(" "));
    }
    if let Some(text) = held_banner(snap, now_unix_ms) {
        first.push(Span::styled(
            text,
            theme
                .style(Role::QuotaWarn)
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
    Line::from(first)
}

/// The second row: the last minute's traffic (req/s, in-flight, success ratio, p50 / p99),
/// and tokens per minute once an upstream reported them.
fn traffic_line(snap: &Snapshot, theme: &Theme, now_unix_ms: u64) -> Line<'static> {
    let muted = theme.style(Role::Muted);
    let w = &snap.last_minute;
    // Nothing finished in the window: no ratio or latency to show, so `—`, not `ok 100.0%`.
    let idle = w.req_per_s <= 0.0 && w.sparkline.iter().all(|&n| n == 0);
    let (ratio, p50, p99) = if idle {
        (
            Span::styled("—", muted),
            Span::styled("—", muted),
            Span::styled("—", muted),
        )
    } else {
        let role = if w.success_ratio >= 0.95 {
            Role::Ok
        } else {
            Role::Error
        };
        (
            Span::styled(
                format!("{:.1}%", w.success_ratio * 100.0),
                theme.style(role),
            ),
            Span::raw(fmt_ms(w.p50_ms)),
            Span::raw(fmt_ms(w.p99_ms)),
        )
    };
    let mut second = vec![
        Span::styled("req/s ", muted),
        Span::raw(format!("{:.2}", w.req_per_s)),
        Span::styled("  in-flight ", muted),
        Span::raw(snap.totals.in_flight.to_string()),
        Span::styled("  ok ", muted),
        ratio,
        Span::styled("  p50 ", muted),
        p50,
        Span::styled("  p99 ", muted),
        p99,
        Span::styled("  (1m)", muted),
    ];
    // Shown once an upstream reported token counts in the last minute.
    let tpm = tokens_last_minute(snap, now_unix_ms);
    if tpm > 0 {
        second.push(Span::styled("  tok/min ", muted));
        second.push(Span::raw(tpm.to_string()));
    }
    Line::from(second)
}

/// The sparkline of requests finished per second over the last minute, under its label, in
/// `area` (nothing when the header had no room for it).
fn render_sparkline(f: &mut Frame, area: Rect, snap: &Snapshot, theme: &Theme) {
    let muted = theme.style(Role::Muted);
    let w = &snap.last_minute;
    if !area.is_empty() {
        // Row one labels the bars on row two (requests finished per second, last minute).
        let [label_area, spark_area] =
            Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
        f.render_widget(
            Paragraph::new(Span::styled(SPARK_LABEL, muted)).right_aligned(),
            label_area,
        );
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

#[cfg(test)]
mod token_tests {
    use super::*;
    use crate::snapshot::RequestView;

    #[test]
    fn tokens_per_minute_counts_only_the_last_minute() {
        let row = |at: u64, i: Option<u64>, o: Option<u64>| RequestView {
            at_unix_ms: at,
            latency_ms: 500,
            tokens_in: i,
            tokens_out: o,
            ..Default::default()
        };
        let snap = Snapshot {
            recent: vec![
                row(100_000, Some(10), Some(20)),
                row(50_000, Some(1), None),
                row(10_000, Some(1000), Some(1000)),
            ],
            ..Default::default()
        };
        assert_eq!(tokens_last_minute(&snap, 105_000), 31);
        assert_eq!(tokens_last_minute(&snap, 200_000), 0);
    }
}
