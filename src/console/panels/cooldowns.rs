//! Cooldown manager panel (§2): one row per connection with its status
//! (themed and written out), remaining time, backoff level, last error kind and lockout count.
//! Marked rows (for `c`) carry a `●`.
//!
//! A cooling or quota-waiting connection whose deadline has passed by `now` is shown `active`:
//! recovery is lazy (§2), so that is what the next request will see.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::selectable_table;
use super::{Col, fit, fmt_countdown, frame, name_width, pick};
use crate::console::app::{App, Focus, connection_rows};
use crate::console::theme::{Role, Theme};
use crate::policy::lane::State as LaneState;
use crate::policy::limit_reset::Outcome;
use crate::snapshot::{ConnectionView, ProviderView, Word};

/// Rows this panel would like (borders, header, one per connection).
pub fn wanted_height(app: &App) -> u16 {
    let n = connection_rows(&app.snapshot).count();
    u16::try_from(n.max(1) + 3).unwrap_or(u16::MAX)
}

/// Status word as shown, its theme role, and the countdown (if still running at `now`).
pub fn status(c: &ConnectionView, now_unix_ms: u64) -> (&'static str, Role, Option<String>) {
    let left = c
        .cooldown_until_unix_ms
        .and_then(|t| fmt_countdown(t, now_unix_ms));
    match c.status.as_str() {
        "cooling" if left.is_some() => ("cooling", Role::Cooling, left),
        "quota_wait" if left.is_some() => ("quota wait", Role::QuotaWait, left),
        "active" | "cooling" | "quota_wait" => ("active", Role::Ok, None),
        "banned" => ("banned", Role::Terminal, None),
        "expired" => ("expired", Role::Terminal, None),
        "credits_exhausted" => ("credits_exhausted", Role::Terminal, None),
        _ => ("—", Role::Muted, None),
    }
}

/// The countdown of the live session lease holding `c`, if any at `now`.
pub fn lease_left(c: &ConnectionView, now_unix_ms: u64) -> Option<String> {
    c.lease
        .as_ref()
        .and_then(|l| fmt_countdown(l.expires_at_unix_ms, now_unix_ms))
}

/// The status cell: [`status`]'s word; `leased` (lockout role) for an active connection
/// held by a live session lease; or `ramping 40 %` (half-open role) for an active
/// connection still ramping up after recovery (`slow_start`).
pub fn status_cell(c: &ConnectionView, now_unix_ms: u64) -> (String, Role) {
    let leased = lease_left(c, now_unix_ms).is_some();
    match (status(c, now_unix_ms), c.ramp_percent) {
        (("active", ..), _) if leased => ("leased".to_owned(), Role::Lockout),
        (("active", ..), Some(n)) => (format!("ramping {n} %"), Role::BreakerHalfOpen),
        ((word, role, _), _) => (word.to_owned(), role),
    }
}

/// The low-priority lane note of a connection's "last error" cell: `lane active 1h 05m`,
/// `lane paused 9m 59s (slot_busy_timeout)`, `lane ended (weekly_limit)`; `None` without a
/// listed lane.
pub fn lane_note(c: &ConnectionView, now_unix_ms: u64) -> Option<String> {
    let l = c.lane.as_ref()?;
    let left = fmt_countdown(l.until_unix_ms, now_unix_ms);
    Some(match (l.state.known(), left) {
        (Some(LaneState::Active), Some(left)) => format!("lane active {left}"),
        (Some(LaneState::Paused), Some(left)) => format!("lane paused {left} ({})", l.reason),
        (Some(LaneState::Active | LaneState::Paused), None) => return None,
        _ => format!("lane {} ({})", l.state, l.reason),
    })
}

/// The session-limit reset note of a connection's "last error" cell: `reset used`,
/// `reset already_used, next 6d 23h`, `reset not_offered, next …`, `reset error, retry 14m`;
/// `None` without a listed record.
pub fn limit_reset_note(c: &ConnectionView, now_unix_ms: u64) -> Option<String> {
    let r = c.limit_reset.as_ref()?;
    let next = |t: Option<u64>| t.and_then(|t| fmt_countdown(t, now_unix_ms));
    let word = r.last_outcome.as_ref().map_or("", Word::as_str);
    Some(match r.last_outcome.as_ref().and_then(Word::known) {
        Some(Outcome::Reset) => "reset used".to_owned(),
        Some(Outcome::Error) => match next(r.next_query_after_unix_ms) {
            Some(left) => format!("reset error, retry {left}"),
            None => "reset error".to_owned(),
        },
        _ => match next(r.next_available_at_unix_ms) {
            Some(left) => format!("reset {word}, next {left}"),
            None => format!("reset {word}"),
        },
    })
}

/// The "last error" cell text: the last error kind, then the limit-reset and lane notes;
/// empty when none.
fn last_error_text(c: &ConnectionView, now_unix_ms: u64) -> String {
    let notes: Vec<String> = [
        c.last_error_kind.as_ref().map(ToString::to_string),
        limit_reset_note(c, now_unix_ms),
        lane_note(c, now_unix_ms),
    ]
    .into_iter()
    .flatten()
    .collect();
    notes.join(" · ")
}

/// Draws the Cooldowns panel into `area`; `focused` highlights its border and selection.
pub fn render(
    f: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    focused: bool,
    now_unix_ms: u64,
) {
    let snap = &app.snapshot;
    let mut title = app.counted_title("Cooldowns", Focus::Cooldowns);
    if !app.marked.is_empty() {
        title = format!("{title} · {} marked", app.marked.len());
    }
    let empty = app.empty_notice(Focus::Cooldowns, "no connections configured");
    let Some(inner) = frame(f, area, &title, focused, theme, empty.as_deref()) else {
        return;
    };
    let _muted = theme.style(Role::Muted);
    let status_w = connection_rows(snap)
        .map(|(_, c)| status_cell(c, now_unix_ms).0.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let cols = [
        Col::fixed("", 1, 0),
        Col::fixed(
            "connection",
            name_width(connection_rows(snap).map(|(_, c)| c.id.as_str()), 10, 20),
            0,
        ),
        Col::fixed(
            "provider",
            name_width(snap.providers.iter().map(|p| p.id.as_str()), 8, 16),
            4,
        ),
        Col::fixed("status", u16::try_from(status_w).unwrap_or(17), 0),
        Col::fixed("remaining", 9, 1),
        Col::fixed("lvl", 3, 3),
        Col::fill("last error", 10, 2),
        Col::fixed("locks", 5, 5),
    ];
    let keep = fit(&cols, inner.width);
    let pairs: Vec<_> = connection_rows(snap).collect();
    let row = |&(p, c): &(&ProviderView, &ConnectionView)| {
        let marked = app.marked.contains(&c.id);
        pick(cells(p, c, marked, theme, now_unix_ms), &keep)
    };
    selectable_table(
        f,
        inner,
        &cols,
        &keep,
        (&pairs, row),
        focused,
        theme,
        app.cooldown_selected,
    );
}

fn cells<'a>(
    p: &ProviderView,
    c: &ConnectionView,
    marked: bool,
    theme: &Theme,
    now: u64,
) -> Vec<Cell<'a>> {
    let muted = theme.style(Role::Muted);
    let (word0, mut role, mut left) = status(c, now);
    if word0 == "active"
        && let Some(l) = lease_left(c, now)
    {
        (role, left) = (Role::Lockout, Some(l));
    }
    let style = theme.style(role);
    let (word, word_role) = status_cell(c, now);
    let dash = || Span::styled("—", muted);
    vec![
        Cell::from(if marked {
            Span::styled("●", theme.style(Role::Title))
        } else {
            Span::raw(" ")
        }),
        Cell::from(c.id.clone()),
        Cell::from(Span::styled(p.id.clone(), muted)),
        Cell::from(Span::styled(word, theme.style(word_role))),
        Cell::from(left.map_or_else(dash, |l| Span::styled(l, style))),
        Cell::from(Span::styled(
            c.backoff_level.to_string(),
            if c.backoff_level == 0 {
                muted
            } else {
                Style::default()
            },
        )),
        Cell::from({
            let text = last_error_text(c, now);
            if text.is_empty() {
                dash()
            } else {
                Span::raw(text)
            }
        }),
        Cell::from(Span::styled(
            c.lockouts.to_string(),
            if c.lockouts == 0 {
                muted
            } else {
                theme.style(Role::Lockout)
            },
        )),
    ]
}

#[cfg(test)]
mod lane_tests {
    use super::*;
    use crate::snapshot::LaneView;

    #[test]
    fn the_last_error_cell_shows_the_lane() {
        let now = 1_700_000_000_000;
        let mut c = ConnectionView::default();
        assert_eq!(last_error_text(&c, now), "");
        c.lane = Some(LaneView {
            state: LaneState::Active.into(),
            until_unix_ms: now + 3_900_000,
            reason: "treatment".into(),
        });
        let active = last_error_text(&c, now);
        assert!(active.starts_with("lane active "), "{active}");
        c.last_error_kind = Some(crate::policy::OutcomeClass::RateLimited.into());
        c.lane = Some(LaneView {
            state: LaneState::Ended.into(),
            until_unix_ms: now + 1_000,
            reason: "weekly_limit".into(),
        });
        assert_eq!(
            last_error_text(&c, now),
            "rate_limited · lane ended (weekly_limit)"
        );
        c.lane = Some(LaneView {
            state: LaneState::Paused.into(),
            until_unix_ms: now - 1,
            reason: "slot_busy_timeout".into(),
        });
        assert_eq!(last_error_text(&c, now), "rate_limited", "pause over");
    }

    #[test]
    fn the_last_error_cell_shows_the_limit_reset() {
        use crate::snapshot::LimitResetView;
        let now = 1_700_000_000_000;
        let mut c = ConnectionView {
            last_error_kind: Some(crate::policy::OutcomeClass::RateLimited.into()),
            ..ConnectionView::default()
        };
        c.limit_reset = Some(LimitResetView {
            last_outcome: Some(Outcome::AlreadyUsed.into()),
            next_available_at_unix_ms: Some(now + 7 * 86_400_000),
            ..LimitResetView::default()
        });
        let text = last_error_text(&c, now);
        assert!(
            text.starts_with("rate_limited · reset already_used, next "),
            "{text}"
        );
        c.limit_reset = Some(LimitResetView {
            last_outcome: Some(Outcome::Error.into()),
            next_query_after_unix_ms: Some(now + 900_000),
            ..LimitResetView::default()
        });
        let text = last_error_text(&c, now);
        assert!(text.contains("reset error, retry "), "{text}");
        c.limit_reset = Some(LimitResetView {
            last_outcome: Some(Outcome::Reset.into()),
            ..LimitResetView::default()
        });
        assert_eq!(last_error_text(&c, now), "rate_limited · reset used");
    }
}
