//! Status bar: key hints on the left, the transient message (if any) after them.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::console::app::{App, HINTS};
use crate::console::theme::{Role, Theme};

/// Draws the one-row status bar into `area`; messages past their expiry (`now_unix_ms`) are hidden.
pub fn render(f: &mut Frame, area: Rect, app: &App, theme: &Theme, now_unix_ms: u64) {
    let mut spans = vec![Span::styled(HINTS, theme.style(Role::Muted))];
    let live = app
        .message
        .as_ref()
        .filter(|m| m.expires_at_unix_ms.is_none_or(|t| now_unix_ms < t));
    if let Some(m) = live {
        spans.push(Span::styled("  │ ", theme.style(Role::Muted)));
        spans.push(Span::styled(m.text.clone(), theme.style(Role::Title)));
    }
    f.render_widget(Paragraph::new(Line::from(spans)), area);
}
