//! The Quota panel: per connection, one bar per live quota window (5 h, 7 d, requests,
//! tokens, …) with the percent used and a countdown to its reset, the binding window (the one
//! that limits the connection now) marked `▸` and bold, and the quota preflight state below
//! (`ok`, `warn`, `cut off until HH:MM UTC`). Everything comes from the snapshot's headroom
//! rows; countdowns use `now_unix_ms` (the injected clock), never a clock read.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::{fmt_clock_utc, fmt_countdown, frame};
use crate::console::app::{App, Focus, connection_rows};
use crate::console::theme::{Role, Theme};
use crate::policy::headroom::WindowStatus;
use crate::policy::headroom::preflight::Mark;
use crate::snapshot::{ConnectionView, HeadroomRowView, ProviderView};

/// Cells of one bar.
pub const BAR_W: usize = 10;

/// Width of the window label column (`output tokens`).
const LABEL_W: usize = 13;

/// Lines one connection takes: its name, one per window (or a "no readings" line), and the
/// preflight line.
fn block_lines(c: &ConnectionView) -> usize {
    2 + c.headroom.len().max(1)
}

/// Rows this panel would like (borders plus every connection's block).
pub fn wanted_height(app: &App) -> u16 {
    let n: usize = connection_rows(&app.snapshot)
        .map(|(_, c)| block_lines(c))
        .sum();
    u16::try_from(n.max(1) + 2).unwrap_or(u16::MAX)
}

/// Short label of a snapshot window name (`five_hour` → `5h`).
pub fn window_label(window: &str) -> &str {
    match window {
        "five_hour" => "5h",
        "seven_day" => "7d",
        "input_tokens" => "input tokens",
        "output_tokens" => "output tokens",
        other => other,
    }
}

/// A bar of [`BAR_W`] cells filled to `used` (0–1): `██████░░░░`.
pub fn bar(used: f64) -> String {
    let used = if used.is_finite() {
        used.clamp(0.0, 1.0)
    } else {
        0.0
    };
    // At most BAR_W, so the cast cannot truncate.
    let full = ((used * BAR_W as f64).round() as usize).min(BAR_W);
    format!("{}{}", "█".repeat(full), "░".repeat(BAR_W - full))
}

/// The role of a connection's preflight state (and of its binding bar): `warn`, `cut_off`,
/// else none.
fn preflight_role(c: &ConnectionView) -> Option<Role> {
    match c.preflight.as_ref().and_then(|p| p.state.known()) {
        Some(Mark::Warn) => Some(Role::QuotaWarn),
        Some(Mark::CutOff) => Some(Role::QuotaCutOff),
        _ => None,
    }
}

/// The preflight line's text: `ok`, `warn: 15% left in 5h`, `cut off until 14:05 UTC`.
pub fn preflight_text(c: &ConnectionView) -> String {
    let Some(p) = &c.preflight else {
        return "ok".to_owned();
    };
    let left = format!(
        "{:.0}% left in {}",
        p.remaining * 100.0,
        window_label(p.window.as_str())
    );
    match p.state.known() {
        Some(Mark::CutOff) => match p.reset_at_unix_ms {
            Some(t) => {
                let clock = fmt_clock_utc(t);
                format!(
                    "cut off until {} UTC ({left})",
                    clock.get(..5).unwrap_or(&clock)
                )
            }
            None => format!("cut off ({left}, reset unknown)"),
        },
        _ => format!("warn: {left}"),
    }
}

/// One window's line.
fn window_line<'a>(
    r: &HeadroomRowView,
    c: &ConnectionView,
    theme: &Theme,
    now_unix_ms: u64,
) -> Line<'a> {
    let muted = theme.style(Role::Muted);
    let used = r.remaining.map(|x| 1.0 - x);
    let rejected = r.status == Some(WindowStatus::Rejected.into());
    let bar_role = match (r.binding, preflight_role(c)) {
        _ if rejected => Role::QuotaCutOff,
        (true, Some(role)) => role,
        _ => Role::Ok,
    };
    let mut label_style = Style::default();
    if r.binding {
        label_style = label_style.add_modifier(Modifier::BOLD);
    }
    let mut label = window_label(r.window.as_str()).to_owned();
    if let Some(m) = &r.model {
        label = format!("{label} {m}");
    }
    let label: String = label.chars().take(LABEL_W + 12).collect();
    let countdown = r
        .reset_at_unix_ms
        .and_then(|t| fmt_countdown(t, now_unix_ms))
        .map_or_else(|| "reset unknown".to_owned(), |s| format!("resets in {s}"));
    let percent = used.map_or_else(|| "  ?".to_owned(), |u| format!("{:>3.0}%", u * 100.0));
    Line::from(vec![
        Span::styled(
            if r.binding { " ▸ " } else { "   " },
            theme.style(Role::Title),
        ),
        Span::styled(format!("{label:<LABEL_W$} "), label_style),
        Span::styled(bar(used.unwrap_or(0.0)), theme.style(bar_role)),
        Span::raw(format!(" {percent} used  ")),
        Span::styled(countdown, muted),
    ])
}

/// The lines of one connection's block.
fn connection_lines<'a>(
    p: &ProviderView,
    c: &ConnectionView,
    selected: bool,
    theme: &Theme,
    now_unix_ms: u64,
) -> Vec<Line<'a>> {
    let name_style = if selected {
        theme.style(Role::Selection)
    } else {
        theme.style(Role::Title).remove_modifier(Modifier::BOLD)
    };
    let mut out = vec![Line::from(Span::styled(
        format!("{}/{}", p.id, c.id),
        name_style,
    ))];
    if c.headroom.is_empty() {
        out.push(Line::from(Span::styled(
            "   no quota readings yet",
            theme.style(Role::Muted),
        )));
    }
    for r in &c.headroom {
        out.push(window_line(r, c, theme, now_unix_ms));
    }
    let state_style = preflight_role(c).map_or(theme.style(Role::Ok), |r| theme.style(r));
    out.push(Line::from(vec![
        Span::styled("   preflight: ", theme.style(Role::Muted)),
        Span::styled(preflight_text(c), state_style),
    ]));
    out
}

/// Draws the Quota panel into `area`, scrolled so the selected connection's block is in view.
pub fn render(
    f: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    focused: bool,
    now_unix_ms: u64,
) {
    let snap = &app.snapshot;
    let title = app.counted_title("Quota", Focus::Quota);
    let empty = app.empty_notice(Focus::Quota, "no connections configured");
    let Some(inner) = frame(f, area, &title, focused, theme, empty.as_deref()) else {
        return;
    };
    let mut lines = Vec::new();
    let mut selected_span = (0, 0);
    for (i, (p, c)) in connection_rows(snap).enumerate() {
        let selected = focused && i == app.quota_selected;
        let block = connection_lines(p, c, selected, theme, now_unix_ms);
        if i == app.quota_selected {
            selected_span = (lines.len(), lines.len() + block.len());
        }
        lines.extend(block);
    }
    let height = usize::from(inner.height);
    let skip = selected_span.1.saturating_sub(height).min(selected_span.0);
    let shown: Vec<Line<'_>> = lines.into_iter().skip(skip).take(height).collect();
    f.render_widget(Paragraph::new(shown), inner);
}
