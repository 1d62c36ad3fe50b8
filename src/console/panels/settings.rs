//! The settings editor modal: one line per field in config syntax under its `[table]`
//! heading, a `*` (title role) on fields that override the config file with the file's value
//! beside them, a `~` on unsaved edits, the input cursor while typing, and validation messages
//! (error role) under their field. Scrolls to keep the selected field in view.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};

use super::{block, centered};
use crate::console::settings::{Editor, FIELDS};
use crate::console::theme::{Role, Theme};

/// Widest field name (`stream_stall_cooldown`).
const NAME_W: usize = 21;

/// `text` split at spaces into lines of at most `width` chars (a longer word gets its own line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let fits = line.chars().count() + 1 + word.chars().count() <= width;
        if !line.is_empty() && !fits {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push(line);
    out
}

/// The editor's lines for an inner `width`, and the index of the selected field's line.
fn lines<'a>(editor: &Editor, theme: &Theme, width: usize) -> (Vec<Line<'a>>, usize) {
    let muted = theme.style(Role::Muted);
    let mut out = Vec::new();
    let mut selected_line = 0;
    let mut section = String::new();
    for (i, field) in FIELDS.iter().enumerate() {
        if field.section() != section {
            section = field.section();
            out.push(Line::from(Span::styled(
                format!("[{section}]"),
                theme.style(Role::Title),
            )));
        }
        let overridden = field.is_overridden(&editor.view.overrides);
        let pending = editor.pending.get(i).is_some_and(Option::is_some);
        let selected = i == editor.selected;
        let mut spans = vec![
            Span::styled(if overridden { "*" } else { " " }, theme.style(Role::Title)),
            Span::styled(if pending { "~" } else { " " }, theme.style(Role::Cooling)),
            Span::raw(format!(" {:<NAME_W$} = ", field.name())),
        ];
        match (&editor.input, selected) {
            (Some(input), true) => {
                spans.push(Span::styled(
                    input.clone(),
                    Style::default().add_modifier(Modifier::UNDERLINED),
                ));
                spans.push(Span::styled(
                    " ",
                    Style::default().add_modifier(Modifier::REVERSED),
                ));
            }
            _ => spans.push(Span::styled(
                format!("{:<8}", editor.shown(i)),
                if pending {
                    Style::default().add_modifier(Modifier::BOLD)
                } else {
                    Style::default()
                },
            )),
        }
        if overridden {
            spans.push(Span::styled(
                format!("   file: {}", editor.view.value(*field, true)),
                muted,
            ));
        }
        let mut line = Line::from(spans);
        if selected {
            selected_line = out.len();
            line = line.style(theme.style(Role::Selection));
        }
        out.push(line);
        if let Some(Some(message)) = editor.errors.get(i) {
            for (n, part) in wrap(message, width.saturating_sub(6).max(20))
                .into_iter()
                .enumerate()
            {
                let lead = if n == 0 { "    ↳ " } else { "      " };
                out.push(Line::from(Span::styled(
                    format!("{lead}{part}"),
                    theme.style(Role::Error),
                )));
            }
        }
    }
    if let Some(notice) = &editor.notice {
        out.push(Line::from(Span::styled(
            notice.clone(),
            theme.style(Role::Error),
        )));
    }
    out.push(Line::from(Span::styled(
        "* overrides the config file   ~ unsaved edit   values in config syntax",
        muted,
    )));
    (out, selected_line)
}

/// Draws the editor centred in `area` (the body, so the status bar with its hints stays
/// visible). Never panics, whatever the size.
pub fn render(f: &mut Frame, area: Rect, editor: &Editor, theme: &Theme) {
    let width = area.width.saturating_sub(2).min(90);
    let (lines, selected_line) = lines(editor, theme, usize::from(width.saturating_sub(2)));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let popup = centered(area, width, height);
    let title = if editor.readonly {
        "Settings (read-only)"
    } else {
        "Settings"
    };
    let outer = block(title, true, theme);
    let visible = usize::from(outer.inner(popup).height);
    // Keep the selected field and the message under it in view.
    let scroll = (selected_line + 2).saturating_sub(visible);
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines)
            .scroll((u16::try_from(scroll).unwrap_or(u16::MAX), 0))
            .block(outer),
        popup,
    );
}

#[cfg(test)]
mod tests {
    use super::wrap;

    #[test]
    fn wrap_splits_at_spaces_within_the_width() {
        assert_eq!(wrap("aa bb cc", 5), vec!["aa bb", "cc"]);
        assert_eq!(wrap("toolongword x", 4), vec!["toolongword", "x"]);
        assert_eq!(wrap("", 4), vec![""]);
    }
}
