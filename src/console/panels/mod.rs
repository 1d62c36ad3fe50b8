//! Console panels: one module per panel, each with `render(frame, area, …)`, plus shared helpers.
//!
//! Panels are pure functions of the [`App`](super::app::App) (and its snapshot), the
//! [`Theme`] and, where time shows, `now_unix_ms`; they never read a clock themselves.

pub mod circuits;
pub mod cooldowns;
pub mod header;
pub mod lockouts;
pub mod overlay;
pub mod providers;
pub mod queues;
pub mod quota;
pub mod requests;
pub mod settings;
pub mod status;

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Block, BorderType, Cell, Row};

use super::theme::{Role, Theme};

/// A bordered panel block titled `title`; the focused panel gets the `border` role and a bold
/// title, the others a `muted` border.
pub fn block<'a>(title: &'a str, focused: bool, theme: &Theme) -> Block<'a> {
    let (border, title_style) = if focused {
        (theme.style(Role::Border), theme.style(Role::Title))
    } else {
        (
            theme.style(Role::Muted),
            theme.style(Role::Title).remove_modifier(Modifier::BOLD),
        )
    };
    Block::bordered()
        .border_type(if focused {
            BorderType::Thick
        } else {
            BorderType::Plain
        })
        .border_style(border)
        .title(Span::styled(format!(" {title} "), title_style))
}

/// Draws a panel's selectable table into `area`: the muted `cols` header kept to `keep`,
/// `rows` (already [`pick`]ed), columns packed from the left, and the `selected` row
/// highlighted while the panel has focus.
#[allow(
    clippy::too_many_arguments,
    reason = "the panels' shared table call; each argument is a plain input"
)]
pub fn selectable_table<'a, T>(
    f: &mut ratatui::Frame,
    area: Rect,
    cols: &[Col],
    keep: &[usize],
    (items, row): (&[T], impl Fn(&T) -> Row<'a>),
    focused: bool,
    theme: &Theme,
    selected: usize,
) {
    let (header, widths) = table_frame(cols, keep, theme.style(Role::Muted));
    let highlight = if focused {
        theme.style(Role::Selection)
    } else {
        Style::default()
    };
    let shown = visible_rows(items.len(), selected, area.height);
    let selected = selected.saturating_sub(shown.start);
    let rows = items.get(shown).unwrap_or_default().iter().map(row);
    let table = ratatui::widgets::Table::new(rows, widths)
        .flex(ratatui::layout::Flex::Start)
        .header(header)
        .row_highlight_style(highlight);
    let mut state = ratatui::widgets::TableState::default().with_selected(Some(selected));
    f.render_stateful_widget(table, area, &mut state);
}

/// The rows a table of `len` one-line rows under a one-line header shows in `height` lines
/// with row `selected` in view, scrolled as ratatui's table scrolls a fresh state (from the
/// top, just far enough). Panels build only these rows, so a frame costs the same with 20
/// rows or 10,000.
pub fn visible_rows(len: usize, selected: usize, height: u16) -> std::ops::Range<usize> {
    let lines = usize::from(height.saturating_sub(1)).max(1);
    let selected = selected.min(len.saturating_sub(1));
    let start = (selected + 1).saturating_sub(lines);
    start..start.saturating_add(lines).min(len)
}

/// Draws a panel's bordered block and returns the inner area to fill, or `None` when there is
/// nothing more to draw: the area is empty, or `empty` is `Some(message)` (the panel has no
/// rows), in which case the muted message was drawn instead.
pub fn frame(
    f: &mut ratatui::Frame,
    area: Rect,
    title: &str,
    focused: bool,
    theme: &Theme,
    empty: Option<&str>,
) -> Option<Rect> {
    let outer = block(title, focused, theme);
    let inner = outer.inner(area);
    f.render_widget(outer, area);
    if inner.is_empty() {
        return None;
    }
    if let Some(message) = empty {
        let text = Span::styled(message.to_owned(), theme.style(Role::Muted));
        f.render_widget(
            ratatui::widgets::Paragraph::new(text).wrap(ratatui::widgets::Wrap { trim: true }),
            inner,
        );
        return None;
    }
    Some(inner)
}

/// A duration in ms for humans: `950ms`, `12.3s` (from 10 s), `4m05s` (from 100 s).
pub fn fmt_ms(ms: u64) -> String {
    if ms < 10_000 {
        format!("{ms}ms")
    } else if ms < 100_000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else {
        fmt_uptime(ms)
    }
}

/// An elapsed time in ms as `42s`, `3m07s`, `2h05m09s` or `3d04h12m`.
pub fn fmt_uptime(ms: u64) -> String {
    let s = ms / 1000;
    let (d, h, m, sec) = (s / 86_400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    if d > 0 {
        format!("{d}d{h:02}h{m:02}m")
    } else if h > 0 {
        format!("{h}h{m:02}m{sec:02}s")
    } else if m > 0 {
        format!("{m}m{sec:02}s")
    } else {
        format!("{sec}s")
    }
}

/// Time left until `until_unix_ms` as a countdown (`12s`, `1m05s`, `2h05m09s`), rounded up to
/// the second so it reads `1s` until the deadline passes; `None` once it has.
pub fn fmt_countdown(until_unix_ms: u64, now_unix_ms: u64) -> Option<String> {
    let left = until_unix_ms.saturating_sub(now_unix_ms);
    (left > 0).then(|| fmt_uptime(left.div_ceil(1000).saturating_mul(1000)))
}

/// Time since `at_unix_ms` as `12s ago`, `3m07s ago` (`0s ago` for the future).
pub fn fmt_ago(at_unix_ms: u64, now_unix_ms: u64) -> String {
    format!("{} ago", fmt_uptime(now_unix_ms.saturating_sub(at_unix_ms)))
}

/// One table column that may be dropped when the panel is narrow.
#[derive(Debug, Clone, Copy)]
pub struct Col {
    /// Header text.
    pub header: &'static str,
    /// Width in cells (the minimum when `fill`).
    pub width: u16,
    /// Takes the remaining width.
    pub fill: bool,
    /// Drop order when the row does not fit: higher goes first; 0 is never dropped.
    pub drop: u8,
}

impl Col {
    /// A fixed-width column.
    pub const fn fixed(header: &'static str, width: u16, drop: u8) -> Self {
        Self {
            header,
            width,
            fill: false,
            drop,
        }
    }

    /// A column taking the remaining width, at least `min`.
    pub const fn fill(header: &'static str, min: u16, drop: u8) -> Self {
        Self {
            header,
            width: min,
            fill: true,
            drop,
        }
    }
}

/// Indices of the columns that fit in `width` (with one cell between columns), dropping the
/// highest `drop` ranks first; columns with rank 0 always stay.
pub fn fit(cols: &[Col], width: u16) -> Vec<usize> {
    let mut keep: Vec<usize> = (0..cols.len()).collect();
    let need = |keep: &[usize]| -> u32 {
        let w: u32 = keep
            .iter()
            .filter_map(|&i| cols.get(i))
            .map(|c| u32::from(c.width))
            .sum();
        w + u32::try_from(keep.len().saturating_sub(1)).unwrap_or(u32::MAX)
    };
    while need(&keep) > u32::from(width) {
        let victim = keep
            .iter()
            .enumerate()
            .filter(|(_, i)| cols.get(**i).is_some_and(|c| c.drop > 0))
            .max_by_key(|(_, i)| cols.get(**i).map_or(0, |c| c.drop))
            .map(|(pos, _)| pos);
        match victim {
            Some(pos) => {
                keep.remove(pos);
            }
            None => break,
        }
    }
    keep
}

/// The header row and width constraints of the kept columns.
pub fn table_frame<'a>(cols: &[Col], keep: &[usize], style: Style) -> (Row<'a>, Vec<Constraint>) {
    let kept = || keep.iter().filter_map(|&i| cols.get(i));
    let header = Row::new(kept().map(|c| Cell::from(c.header))).style(style);
    let widths = kept()
        .map(|c| {
            if c.fill {
                Constraint::Fill(1)
            } else {
                Constraint::Length(c.width)
            }
        })
        .collect();
    (header, widths)
}

/// Keeps the cells of the kept columns, in order.
pub fn pick<'a>(cells: Vec<Cell<'a>>, keep: &[usize]) -> Row<'a> {
    Row::new(
        cells
            .into_iter()
            .enumerate()
            .filter(|(i, _)| keep.contains(i))
            .map(|(_, c)| c),
    )
}

/// Width in cells left for the fill column of `cols` (when kept) in a panel `width` wide:
/// `width` minus the kept fixed columns and the one-cell gaps between kept columns.
pub fn fill_width(cols: &[Col], keep: &[usize], width: u16) -> u16 {
    let kept = || keep.iter().filter_map(|&i| cols.get(i));
    let fixed: u32 = kept().filter(|c| !c.fill).map(|c| u32::from(c.width)).sum();
    let gaps = u32::try_from(keep.len().saturating_sub(1)).unwrap_or(u32::MAX);
    u16::try_from(u32::from(width).saturating_sub(fixed.saturating_add(gaps))).unwrap_or(0)
}

/// `text` cut to at most `width` terminal cells, ending in `…` when anything was cut.
pub fn ellipsize(text: &str, width: u16) -> String {
    let width = usize::from(width);
    if Span::raw(text).width() <= width {
        return text.to_owned();
    }
    if width == 0 {
        return String::new();
    }
    let mut out = String::new();
    let mut used = 0;
    for ch in text.chars() {
        let w = Span::raw(ch.to_string()).width();
        if used + w > width - 1 {
            break;
        }
        out.push(ch);
        used += w;
    }
    out.push('…');
    out
}

/// Width of the widest of `names` (in chars), clamped to `min..=max`.
pub fn name_width<'a>(names: impl Iterator<Item = &'a str>, min: u16, max: u16) -> u16 {
    let w = names.map(|n| n.chars().count()).max().unwrap_or(0);
    u16::try_from(w).unwrap_or(u16::MAX).clamp(min, max)
}

/// Unix ms as a UTC wall-clock time `HH:MM:SS`.
pub fn fmt_clock_utc(unix_ms: u64) -> String {
    let s = (unix_ms / 1000) % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, (s / 60) % 60, s % 60)
}

/// The style of an HTTP status: `ok` for 1xx–3xx, `error` for ≥ 400, `muted` for 0 (none).
pub fn status_style(status: u16, theme: &Theme) -> Style {
    match status {
        0 => theme.style(Role::Muted),
        s if s >= 400 => theme.style(Role::Error),
        _ => theme.style(Role::Ok),
    }
}

/// An HTTP status as shown: `200`, or `—` for 0 (no status).
pub fn fmt_status(status: u16) -> String {
    if status == 0 {
        "—".to_owned()
    } else {
        status.to_string()
    }
}

/// A `width`×`height` rectangle centred in `area`, clamped to it.
pub fn centered(area: Rect, width: u16, height: u16) -> Rect {
    let w = width.min(area.width);
    let h = height.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_rows_scroll_only_as_far_as_the_selection_needs() {
        // 21 lines: a header and 20 rows.
        assert_eq!(visible_rows(0, 0, 21), 0..0);
        assert_eq!(visible_rows(5, 3, 21), 0..5);
        assert_eq!(visible_rows(500, 0, 21), 0..20);
        assert_eq!(visible_rows(500, 19, 21), 0..20);
        assert_eq!(visible_rows(500, 20, 21), 1..21);
        assert_eq!(visible_rows(500, 499, 21), 480..500);
        assert_eq!(
            visible_rows(500, 9_999, 21),
            480..500,
            "a stale selection clamps"
        );
        assert_eq!(
            visible_rows(500, 7, 1),
            7..8,
            "a header-only area still shows a row"
        );
    }

    #[test]
    fn formats() {
        assert_eq!(fmt_ms(950), "950ms");
        assert_eq!(fmt_ms(12_340), "12.3s");
        assert_eq!(fmt_uptime(42_999), "42s");
        assert_eq!(fmt_uptime(187_000), "3m07s");
        assert_eq!(fmt_uptime((2 * 3600 + 5 * 60 + 9) * 1000), "2h05m09s");
        assert_eq!(
            fmt_uptime((3 * 86_400 + 4 * 3600 + 12 * 60) * 1000),
            "3d04h12m"
        );
        assert_eq!(fmt_clock_utc(1_700_000_000_000), "22:13:20");
        assert_eq!(fmt_status(0), "—");
        assert_eq!(fmt_countdown(1_012_000, 1_000_000).as_deref(), Some("12s"));
        assert_eq!(
            fmt_countdown(1_064_001, 1_000_000).as_deref(),
            Some("1m05s")
        );
        assert_eq!(fmt_countdown(1_000_001, 1_000_000).as_deref(), Some("1s"));
        assert_eq!(fmt_countdown(1_000_000, 1_000_000), None);
        assert_eq!(fmt_countdown(5, 1_000_000), None);
        assert_eq!(fmt_ago(988_000, 1_000_000), "12s ago");
        assert_eq!(fmt_ago(2_000_000, 1_000_000), "0s ago");
    }

    #[test]
    fn fit_drops_the_highest_rank_first_and_keeps_rank_zero() {
        let cols = [
            Col::fixed("a", 10, 0),
            Col::fixed("b", 10, 2),
            Col::fill("c", 10, 1),
            Col::fixed("d", 10, 3),
        ];
        assert_eq!(fit(&cols, 43), vec![0, 1, 2, 3]);
        assert_eq!(fit(&cols, 42), vec![0, 1, 2]);
        assert_eq!(fit(&cols, 21), vec![0, 2]);
        assert_eq!(fit(&cols, 5), vec![0]);
        assert_eq!(fit(&cols, 0), vec![0]);
    }

    #[test]
    fn ellipsize_cuts_to_width_with_an_ellipsis() {
        assert_eq!(
            ellipsize("fast → anthropic:mine", 30),
            "fast → anthropic:mine"
        );
        assert_eq!(ellipsize("fast → anthropic:mine", 10), "fast → an…");
        assert_eq!(
            Span::raw(ellipsize("fast → anthropic:mine", 10)).width(),
            10
        );
        assert_eq!(ellipsize("abc", 1), "…");
        assert_eq!(ellipsize("abc", 0), "");
        assert_eq!(ellipsize("模型名字", 5), "模型…");
    }

    #[test]
    fn fill_width_is_what_the_fixed_columns_leave() {
        let cols = [
            Col::fixed("a", 8, 0),
            Col::fill("b", 10, 0),
            Col::fixed("c", 3, 0),
        ];
        assert_eq!(fill_width(&cols, &[0, 1, 2], 40), 40 - 8 - 3 - 2);
        assert_eq!(fill_width(&cols, &[1, 2], 40), 36);
        assert_eq!(fill_width(&cols, &[0, 1, 2], 5), 0);
    }

    #[test]
    fn centered_clamps() {
        let r = centered(Rect::new(0, 0, 10, 4), 20, 2);
        assert_eq!(r, Rect::new(0, 1, 10, 2));
    }
}
