//! Status bar: a `READ-ONLY` badge when set, the filter being typed (`/glm█`) or the active
//! filter (`filter: glm`), the transient message (if any; it is the result
//! of the last action, so it comes first), then the key hints for the focused panel or dialog.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::app::App;
use crate::console::keymap::Cmd;
use crate::console::theme::{Role, Theme};

/// Draws the one-row status bar into `area`; messages past their expiry (`now_unix_ms`) are hidden.
pub fn render(f: &mut Frame, area: Rect, app: &App, theme: &Theme, now_unix_ms: u64) {
    let muted = theme.style(Role::Muted);
    let mut spans = Vec::new();
    if app.readonly {
        spans.push(Span::styled(
            " READ-ONLY ",
            theme.style(Role::Title).add_modifier(Modifier::REVERSED),
        ));
        spans.push(Span::raw(" "));
    }
    if let Some(input) = &app.filter_input {
        spans.push(Span::styled(format!("/{input}"), theme.style(Role::Title)));
        spans.push(Span::styled("█", muted));
        spans.push(Span::styled("  │ ", muted));
    } else if !app.filter.is_empty() {
        spans.push(Span::styled(
            format!("filter: {}", app.filter),
            theme.style(Role::Title).add_modifier(Modifier::REVERSED),
        ));
        spans.push(Span::raw(" "));
    }
    let live = app
        .message
        .as_ref()
        .filter(|m| m.expires_at_unix_ms.is_none_or(|t| now_unix_ms < t));
    if let Some(m) = live {
        spans.push(Span::styled(m.text.clone(), theme.style(Role::Title)));
        spans.push(Span::styled("  │ ", muted));
    }
    let km = &app.keymap;
    let hints = if app.help && app.confirm.is_none() {
        format!(
            "{} close  {}/{} scroll",
            km.first_key(Cmd::Help),
            km.first_key(Cmd::Down),
            km.first_key(Cmd::Up)
        )
    } else {
        km.hints_for(&app.hint_scopes(), app.readonly)
    };
    spans.push(Span::styled(hints, muted));
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}
