//! Console panels: one module per panel, each with `render(frame, area, …)`, plus shared helpers.
//!
//! Panels are pure functions of the [`App`](super::app::App) (and its snapshot), the
//! [`Theme`] and, where time shows, `now_unix_ms`; they never read a clock themselves.

pub mod header;
pub mod overlay;
pub mod providers;
pub mod requests;
pub mod status;

use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Span;
use ratatui::widgets::{Block, BorderType};

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
    }

    #[test]
    fn centered_clamps() {
        let r = centered(Rect::new(0, 0, 10, 4), 20, 2);
        assert_eq!(r, Rect::new(0, 1, 10, 2));
    }
}
