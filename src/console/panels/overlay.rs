//! Overlays drawn over the panels: the help list (generated from the
//! [key map](crate::console::keymap)), request details and the confirm dialog.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use super::{block, centered, fmt_clock_utc, fmt_ms, fmt_status, status_style};
use crate::console::app::{App, Confirm};
use crate::console::keymap;
use crate::console::panels::requests::route_label;
use crate::console::theme::{Role, Theme};

/// Draws the help overlay centred in `area`.
pub fn render_help(f: &mut Frame, area: Rect, theme: &Theme) {
    let key_w = keymap::help_lines()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let text_w = keymap::help_lines()
        .map(|(_, t)| t.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines: Vec<Line> = keymap::help_lines()
        .map(|(keys, what)| {
            Line::from(vec![
                Span::styled(format!(" {keys:<key_w$}  "), theme.style(Role::Title)),
                Span::raw(what),
            ])
        })
        .collect();
    lines.push(Line::from(Span::styled(
        " esc or ? to close",
        theme.style(Role::Muted),
    )));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let width = u16::try_from(key_w + text_w + 5).unwrap_or(u16::MAX);
    let popup = centered(area, width, height);
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines).block(block("Help", true, theme)),
        popup,
    );
}

/// Draws the confirm dialog centred in `area`: the question, then `y/n`.
pub fn render_confirm(f: &mut Frame, area: Rect, confirm: &Confirm, theme: &Theme) {
    let question = format!("{} y/n", confirm.prompt);
    let lines = vec![
        Line::from(Span::styled(
            question.clone(),
            theme.style(Role::Title).add_modifier(Modifier::BOLD),
        ))
        .centered(),
        Line::from(Span::styled(
            "y/enter confirm · n/esc cancel",
            theme.style(Role::Muted),
        ))
        .centered(),
    ];
    let width = u16::try_from(question.chars().count() + 6)
        .unwrap_or(u16::MAX)
        .max(36);
    let popup = centered(area, width, 4);
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: true })
            .block(block("Confirm", true, theme)),
        popup,
    );
}

/// Draws the details of the selected request centred in `area` (nothing when none is selected).
pub fn render_details(f: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let Some(r) = app.selected_request() else {
        return;
    };
    let label = |s: &'static str| Span::styled(format!(" {s:<9}"), theme.style(Role::Muted));
    let outcome_role = if r.outcome == "ok" {
        Role::Ok
    } else {
        Role::Error
    };
    let mut lines = vec![
        Line::from(vec![
            label("request"),
            Span::raw(format!("#{} at {} UTC", r.id, fmt_clock_utc(r.at_unix_ms))),
        ]),
        Line::from(vec![label("route"), Span::raw(r.route.clone())]),
        Line::from(vec![label("model"), Span::raw(route_label(r))]),
        Line::from(vec![
            label("status"),
            Span::styled(fmt_status(r.status), status_style(r.status, theme)),
            Span::raw("  "),
            Span::styled(r.outcome.clone(), theme.style(outcome_role)),
        ]),
        Line::from(vec![
            label("latency"),
            Span::raw(format!("{}  attempts {}", fmt_ms(r.latency_ms), r.attempts)),
        ]),
        Line::from(vec![
            label("bytes"),
            Span::raw(format!(
                "{}  stream {}",
                r.bytes,
                if r.stream { "yes" } else { "no" }
            )),
        ]),
    ];
    if !r.error.is_empty() {
        lines.push(Line::from(vec![
            label("error"),
            Span::styled(r.error.clone(), theme.style(Role::Error)),
        ]));
    }
    lines.push(Line::from(Span::styled(
        " enter or esc to close",
        theme.style(Role::Muted),
    )));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let popup = centered(area, area.width.saturating_sub(4).min(90), height);
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines)
            .wrap(Wrap { trim: false })
            .block(block("Request details", true, theme)),
        popup,
    );
}
