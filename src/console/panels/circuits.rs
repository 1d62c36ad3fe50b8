//! Circuits panel (§1): one row per provider breaker with its state (themed and
//! written out), failures / thresholds, a live "next probe in" countdown and the last
//! transition. A §1b provider cooldown in force adds `cooling 42s` (cooling role) to the state;
//! a provider ramping up after its breaker closed (`slow_start`) adds `ramping 40 %`.
//! Countdowns are computed here from deadlines and `now_unix_ms`.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Cell;

use super::selectable_table;
use super::{Col, fit, fmt_ago, fmt_countdown, frame, name_width, pick};
use crate::console::app::{App, Focus};
use crate::console::theme::{Role, Theme};
use crate::snapshot::{BreakerState, BreakerView, ProviderView};

/// Rows this panel would like (borders, header, one per provider).
pub fn wanted_height(app: &App) -> u16 {
    u16::try_from(app.snapshot.providers.len().max(1) + 3).unwrap_or(u16::MAX)
}

/// The theme role of a breaker state word (`muted` for an unknown one).
pub fn state_role(state: BreakerState) -> Role {
    match state {
        BreakerState::Closed => Role::BreakerClosed,
        BreakerState::Degraded => Role::BreakerDegraded,
        BreakerState::Open => Role::BreakerOpen,
        BreakerState::HalfOpen => Role::BreakerHalfOpen,
    }
}

/// Draws the Circuits panel into `area`; `focused` highlights its border and selection.
pub fn render(
    f: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    focused: bool,
    now_unix_ms: u64,
) {
    let snap = &app.snapshot;
    let title = app.counted_title("Circuits", Focus::Circuits);
    let empty = app.empty_notice(Focus::Circuits, "no providers configured");
    let Some(inner) = frame(f, area, &title, focused, theme, empty.as_deref()) else {
        return;
    };
    let _muted = theme.style(Role::Muted);
    let cols = [
        Col::fixed(
            "provider",
            name_width(snap.providers.iter().map(|p| p.id.as_str()), 8, 20),
            0,
        ),
        Col::fixed("state", state_width(snap.providers.iter(), now_unix_ms), 0),
        Col::fixed("fail/thr", 8, 2),
        Col::fixed("probe in", 11, 1),
        Col::fill("last transition", 16, 3),
    ];
    let keep = fit(&cols, inner.width);
    let row = |p: &ProviderView| pick(cells(p, theme, now_unix_ms), &keep);
    selectable_table(
        f,
        inner,
        &cols,
        &keep,
        (&snap.providers, row),
        focused,
        theme,
        app.circuit_selected,
    );
}

/// The §1b provider cooldown still running at `now`, as a countdown (`42s`).
pub fn provider_cooling(p: &ProviderView, now_unix_ms: u64) -> Option<String> {
    p.provider_cooldown_until_unix_ms
        .and_then(|t| fmt_countdown(t, now_unix_ms))
}

/// `ramping 40 %` while the provider's slow-start ramp runs.
pub fn provider_ramping(p: &ProviderView) -> Option<String> {
    p.ramp_percent.map(|n| format!("ramping {n} %"))
}

/// Width of the state column: the breaker word plus ` · cooling 1m05s` and
/// ` · ramping 40 %` where they show.
fn state_width<'a>(providers: impl Iterator<Item = &'a ProviderView>, now: u64) -> u16 {
    let w = providers
        .map(|p| {
            let cool = provider_cooling(p, now).map_or(0, |c| " · cooling ".len() + c.len());
            let ramp = provider_ramping(p).map_or(0, |r| " · ".len() + r.len());
            p.breaker.state.as_str().len() + cool + ramp
        })
        .max()
        .unwrap_or(0)
        .max(9);
    u16::try_from(w).unwrap_or(9)
}

fn cells<'a>(p: &ProviderView, theme: &Theme, now: u64) -> Vec<Cell<'a>> {
    let b = &p.breaker;
    let muted = theme.style(Role::Muted);
    let mut state = vec![Span::styled(
        b.state.as_str(),
        theme.style(state_role(b.state)),
    )];
    if let Some(left) = provider_cooling(p, now) {
        state.push(Span::styled(" · ", muted));
        state.push(Span::styled(
            format!("cooling {left}"),
            theme.style(Role::Cooling),
        ));
    }
    if let Some(ramp) = provider_ramping(p) {
        state.push(Span::styled(" · ", muted));
        state.push(Span::styled(ramp, theme.style(Role::BreakerHalfOpen)));
    }
    let state = Line::from(state);
    let fail_style = if b.failure_count == 0 {
        muted
    } else if b.failure_count >= b.degrade_at {
        theme.style(state_role(b.state))
    } else {
        Style::default()
    };
    vec![
        Cell::from(p.id.clone()),
        Cell::from(state),
        Cell::from(Span::styled(
            format!("{}/{}/{}", b.failure_count, b.degrade_at, b.open_at),
            fail_style,
        )),
        Cell::from(probe(b, theme, now)),
        Cell::from(last_transition(b, theme, now)),
    ]
}

/// `25s` (OPEN, counting down), `due` (OPEN, the next request probes), `probe ready`
/// (HALF_OPEN, no probe sent yet: the next request is the probe), `probing` (HALF_OPEN, a
/// probe in flight, which has a timeout), `—` otherwise; `×4` appended while the reset timeout is multiplied.
fn probe<'a>(b: &BreakerView, theme: &Theme, now: u64) -> Line<'a> {
    let muted = theme.style(Role::Muted);
    let mut spans = match (b.state.as_str(), b.next_probe_at_unix_ms) {
        ("open", Some(at)) => vec![match fmt_countdown(at, now) {
            Some(left) => Span::styled(left, theme.style(Role::BreakerOpen)),
            None => Span::styled("due", theme.style(Role::BreakerHalfOpen)),
        }],
        ("half_open", None) => vec![Span::styled(
            "probe ready",
            theme.style(Role::BreakerHalfOpen),
        )],
        ("half_open", Some(_)) => {
            vec![Span::styled("probing", theme.style(Role::BreakerHalfOpen))]
        }
        _ => vec![Span::styled("—", muted)],
    };
    if b.multiplier > 1 {
        spans.push(Span::styled(format!(" ×{}", b.multiplier), muted));
    }
    Line::from(spans)
}

/// `open ← failure_threshold 12s ago`, or `—` when the breaker never moved.
fn last_transition<'a>(b: &BreakerView, theme: &Theme, now: u64) -> Line<'a> {
    let muted = theme.style(Role::Muted);
    match b.transitions.last() {
        Some(t) => Line::from(vec![
            Span::styled(t.to.as_str(), theme.style(state_role(t.to))),
            Span::raw(format!(" ← {} ", t.reason)),
            Span::styled(fmt_ago(t.at_unix_ms, now), muted),
        ]),
        None => Line::from(Span::styled("—", muted)),
    }
}
