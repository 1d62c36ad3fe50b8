//! Overlays drawn over the panels: the help list (generated from the
//! [key map](crate::console::keymap)), request details and the confirm dialog.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Wrap};

use super::{block, centered, fmt_clock_utc, fmt_ms, fmt_status, status_style};
use crate::console::app::{App, Confirm};
use crate::console::keymap::{Keymap, Scope};
use crate::console::panels::requests::route_label;
use crate::console::theme::{Role, Theme};
use crate::policy::select::ExclusionReason as E;
use crate::snapshot::{AttemptClass, AttemptView, RequestOutcome, RequestView, SkipReason};

/// The help's lines: a heading per scope, then one line per command: its keys, its
/// `[console.keys]` action name and what it does. Generated from the effective key map.
pub fn help_lines(keymap: &Keymap) -> Vec<(Option<Scope>, String, &'static str, &'static str)> {
    let mut out = Vec::new();
    let mut scope = None;
    for b in keymap.bindings() {
        if scope != Some(b.spec.scope) {
            scope = Some(b.spec.scope);
            out.push((scope, String::new(), "", ""));
        }
        out.push((None, b.label(), b.spec.name, b.spec.help));
    }
    out
}

/// Draws the help overlay centred in `area`, scrolled by `app.help_scroll`.
pub fn render_help(f: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let entries = help_lines(&app.keymap);
    let key_w = entries
        .iter()
        .map(|e| e.1.chars().count())
        .max()
        .unwrap_or(0);
    let name_w = entries.iter().map(|e| e.2.len()).max().unwrap_or(0);
    let text_w = entries
        .iter()
        .map(|e| e.3.chars().count())
        .max()
        .unwrap_or(0);
    let mut lines: Vec<Line> = entries
        .iter()
        .map(|(scope, keys, name, what)| match scope {
            Some(s) => Line::from(Span::styled(
                format!(" {}", s.title()),
                theme.style(Role::Title).add_modifier(Modifier::UNDERLINED),
            )),
            None => Line::from(vec![
                Span::styled(format!("   {keys:<key_w$}  "), theme.style(Role::Title)),
                Span::styled(format!("{name:<name_w$}  "), theme.style(Role::Muted)),
                Span::raw(*what),
            ]),
        })
        .collect();
    lines.push(Line::from(Span::styled(
        " [console.keys] action = \"key\" or [\"key\", …] rebinds an action; esc or ? closes",
        theme.style(Role::Muted),
    )));
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let width = u16::try_from(key_w + name_w + text_w + 9).unwrap_or(u16::MAX);
    let popup = centered(area, width, height);
    let inner_h = popup.height.saturating_sub(2);
    let max_scroll = height.saturating_sub(2).saturating_sub(inner_h);
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines)
            .scroll((app.help_scroll.min(max_scroll), 0))
            .block(block("Help", true, theme)),
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
    let outcome_role = if r.outcome == RequestOutcome::Ok {
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
        Line::from(vec![label("format"), Span::raw(format_label(r))]),
    ];
    // What translation changed in what the target was asked (e.g. a clamped max_tokens).
    lines.extend(labelled(
        label("adjusted"),
        r.adjusted.iter().cloned(),
        theme.style(Role::Cooling),
    ));
    lines.extend([
        Line::from(vec![label("model"), Span::raw(route_label(r))]),
        Line::from(vec![
            label("status"),
            Span::styled(fmt_status(r.status), status_style(r.status, theme)),
            Span::raw("  "),
            Span::styled(r.outcome.as_str(), theme.style(outcome_role)),
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
    ]);
    if !r.error.is_empty() {
        // The popup is at most 140 columns (and the screen): a long error wraps under its label.
        let room = usize::from(area.width.min(140).saturating_sub(4 + 3)).saturating_sub(10);
        lines.extend(labelled(
            label("error"),
            wrap_words(&r.error, room.max(20)),
            theme.style(Role::Error),
        ));
    }
    lines.extend(attempt_lines(r, theme));
    lines.push(Line::from(Span::styled(
        " enter or esc to close",
        theme.style(Role::Muted),
    )));
    render_popup(f, area, lines, theme);
}

/// One line per part, the first under `label`, the rest indented to line up with it.
fn labelled<'a>(
    label: Span<'a>,
    parts: impl IntoIterator<Item = String>,
    style: Style,
) -> Vec<Line<'a>> {
    let mut label = Some(label);
    parts
        .into_iter()
        .map(|part| {
            Line::from(vec![
                label.take().unwrap_or_else(|| Span::raw(" ".repeat(10))),
                Span::styled(part, style),
            ])
        })
        .collect()
}

/// Draws the request details' `lines` in a popup centred in `area`, sized to the widest line
/// (tables must not wrap); narrow terminals clip on the right.
fn render_popup(f: &mut Frame, area: Rect, lines: Vec<Line<'_>>, theme: &Theme) {
    let height = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let widest = lines.iter().map(Line::width).max().unwrap_or(0);
    let width = u16::try_from(widest + 3)
        .unwrap_or(u16::MAX)
        .clamp(40, 140)
        .min(area.width.saturating_sub(4));
    let popup = centered(area, width, height);
    f.render_widget(Clear, popup);
    f.render_widget(
        Paragraph::new(lines).block(block("Request details", true, theme)),
        popup,
    );
}

/// `client anthropic → upstream openai (translated)`: the client's format and the dialect
/// of the last target tried.
fn format_label(r: &RequestView) -> String {
    let client = if r.client_format.is_empty() {
        "—"
    } else {
        &r.client_format
    };
    let Some(upstream) = &r.upstream_dialect else {
        return format!("client {client}");
    };
    let translated = r
        .attempt_log
        .last()
        .is_some_and(|a| !a.translated.is_empty());
    format!(
        "client {client} → upstream {}{}",
        upstream,
        if translated { " (translated)" } else { "" }
    )
}

/// `text` in lines of at most `width` characters, broken at spaces (a longer word is cut).
pub(crate) fn wrap_words(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let mut word: Vec<char> = word.chars().collect();
        while word.len() > width {
            if !line.is_empty() {
                out.push(std::mem::take(&mut line));
            }
            out.push(word.drain(..width).collect());
        }
        let word: String = word.into_iter().collect();
        let len = line.chars().count();
        if len > 0 && len + 1 + word.chars().count() > width {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(&word);
    }
    if !line.is_empty() {
        out.push(line);
    }
    out
}

/// The attempt log (`#`, target, status, class, reason, latency) and the skipped targets
/// with why, for the details overlay.
fn attempt_lines<'a>(r: &RequestView, theme: &Theme) -> Vec<Line<'a>> {
    let muted = theme.style(Role::Muted);
    let mut lines = Vec::new();
    if r.attempt_log.is_empty() {
        lines.push(Line::from(Span::styled(" no upstream attempts", muted)));
    } else {
        lines.extend(attempt_table(&r.attempt_log, theme));
    }
    if !r.skipped.is_empty() {
        lines.push(Line::from(Span::styled(
            format!(" skipped {}", r.skipped.len()),
            theme.style(Role::Title),
        )));
        for s in &r.skipped {
            let role = match s.reason.known() {
                Some(SkipReason::Excluded(E::ConnectionCooldown | E::ProviderCooldown)) => {
                    Role::Cooling
                }
                Some(SkipReason::Excluded(E::QuotaWait)) => Role::QuotaWait,
                Some(SkipReason::Excluded(E::ModelLockout)) => Role::Lockout,
                Some(SkipReason::Excluded(E::CircuitOpen)) => Role::BreakerOpen,
                Some(SkipReason::Excluded(E::Terminal)) => Role::Terminal,
                _ => Role::Muted,
            };
            lines.push(Line::from(vec![
                Span::raw(format!("    {}  ", s.target)),
                Span::styled(s.reason.to_string(), theme.style(role)),
            ]));
        }
    }
    for w in &r.waits {
        lines.push(Line::from(Span::styled(
            format!(" {}", w.describe()),
            theme.style(Role::Cooling),
        )));
    }
    if r.continued {
        // `[resilience.stream] continue_after_break`: the stream broke after text and was
        // re-issued once with that text as an assistant prefill.
        lines.push(Line::from(Span::styled(
            " continued after a break",
            theme.style(Role::Cooling),
        )));
    }
    lines
}

/// The attempt log as a table: a header, then per attempt its `#`, target, status, class,
/// reason, latency, translation and whether a fault was injected.
fn attempt_table<'a>(log: &[AttemptView], theme: &Theme) -> Vec<Line<'a>> {
    let target_w = log
        .iter()
        .map(|a| a.target.chars().count())
        .max()
        .unwrap_or(0)
        .clamp(6, 48);
    let mut lines = vec![Line::from(Span::styled(
        format!(
            " {:<2} {:<target_w$} {:>3}  {:<12} {:<22} {:>7}  {}",
            "#", "target", "st", "class", "reason", "latency", "translated"
        ),
        theme.style(Role::Title),
    ))];
    for (i, a) in log.iter().enumerate() {
        let class_role = if a.class == AttemptClass::Success {
            Role::Ok
        } else {
            Role::Error
        };
        let reason = if a.reason.is_empty() {
            "—"
        } else {
            &a.reason
        };
        lines.push(Line::from(vec![
            Span::raw(format!(" {:<2} {:<target_w$} ", i + 1, a.target)),
            Span::styled(
                format!("{:>3}", fmt_status(a.status)),
                status_style(a.status, theme),
            ),
            Span::raw("  "),
            Span::styled(format!("{:<12}", a.class), theme.style(class_role)),
            Span::raw(format!(" {reason:<22} {:>7}", fmt_ms(a.latency_ms))),
            Span::styled(format!("  {}", a.translated), theme.style(Role::Muted)),
            Span::styled(
                if a.injected { "  injected" } else { "" },
                theme.style(Role::Error).add_modifier(Modifier::BOLD),
            ),
        ]));
    }
    lines
}
