//! Queues panel (§4–§5): one row per capped admission gate (a connection's
//! `max_concurrent`, a model's `model_concurrency` entry, or the protection cap of a
//! rate-limit-protected connection without `max_concurrent`): in-flight / effective cap,
//! where that cap comes from (`config`, `learned` from concurrency-limit 429s, or the
//! `default`), queued / depth cap, the oldest waiter's wait, and lifetime timeouts and
//! rejections. A full queue (queued ≥ depth cap) is drawn with the `queue_full` role and says
//! `full`; a learned cap with the `cooling` role.

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::selectable_table;
use super::{Col, fit, fmt_ms, frame, name_width, pick};
use crate::console::app::{App, Focus};
use crate::console::theme::{Role, Theme};
use crate::policy::admission::{CapSource, GateKind};
use crate::snapshot::GateView;

/// Rows this panel would like (borders, header, one per gate; 3 when there are none).
pub fn wanted_height(app: &App) -> u16 {
    let n = app.snapshot.queues.len();
    if n == 0 {
        3
    } else {
        u16::try_from(n + 3).unwrap_or(u16::MAX)
    }
}

/// The gate's name: `connection` for a connection gate, `connection/model` for a model gate,
/// the provider id for a provider gate and `global` for the process-wide one.
pub fn gate_label(g: &GateView) -> String {
    match (g.kind, &g.model) {
        (GateKind::Model, Some(m)) => format!("{}/{m}", g.connection),
        (GateKind::Provider, _) => g.provider.clone(),
        (GateKind::Global, _) => "global".to_owned(),
        _ => g.connection.clone(),
    }
}

/// True when the gate's queue is at its depth cap (a cap of 0 means unlimited).
pub fn queue_full(g: &GateView) -> bool {
    g.max_queue_depth > 0 && g.queued >= usize::try_from(g.max_queue_depth).unwrap_or(usize::MAX)
}

/// Draws the Queues panel into `area`; `focused` highlights its border and selection.
pub fn render(f: &mut Frame, area: Rect, app: &App, theme: &Theme, focused: bool) {
    let gates = &app.snapshot.queues;
    let full = gates.iter().filter(|g| queue_full(g)).count();
    let mut title = app.counted_title("Queues", Focus::Queues);
    if full > 0 {
        title = format!("{title} · {full} full");
    }
    let empty = app.empty_notice(
        Focus::Queues,
        "no capped gates (set max_concurrent or model_concurrency)",
    );
    let Some(inner) = frame(f, area, &title, focused, theme, empty.as_deref()) else {
        return;
    };
    let _muted = theme.style(Role::Muted);
    let labels: Vec<String> = gates.iter().map(gate_label).collect();
    let cols = [
        Col::fixed(
            "gate",
            name_width(labels.iter().map(String::as_str), 8, 32),
            0,
        ),
        Col::fixed(
            "provider",
            name_width(gates.iter().map(|g| g.provider.as_str()), 8, 16),
            5,
        ),
        Col::fixed("in-flight", 9, 0),
        Col::fixed("cap", 7, 4),
        Col::fixed("queued", 11, 0),
        Col::fixed("oldest", 7, 1),
        Col::fixed("timeouts", 8, 2),
        Col::fixed("rejected", 8, 3),
    ];
    let keep = fit(&cols, inner.width);
    let items: Vec<(&GateView, String)> = gates.iter().zip(labels).collect();
    let row = |(g, label): &(&GateView, String)| pick(cells(g, label.clone(), theme), &keep);
    selectable_table(
        f,
        inner,
        &cols,
        &keep,
        (&items, row),
        focused,
        theme,
        app.queue_selected,
    );
}

fn count<'a>(n: u64, theme: &Theme) -> Cell<'a> {
    let style = if n == 0 {
        theme.style(Role::Muted)
    } else {
        theme.style(Role::Error)
    };
    Cell::from(Span::styled(n.to_string(), style))
}

fn cells<'a>(g: &GateView, label: String, theme: &Theme) -> Vec<Cell<'a>> {
    let muted = theme.style(Role::Muted);
    // A snapshot from an older sluice has no `effective_cap`: its `cap` is the one in force.
    let limit = g.effective_cap.or(g.cap);
    let cap = limit.map_or_else(|| "∞".to_owned(), |c| c.to_string());
    let at_cap = limit.is_some_and(|c| g.in_flight >= c);
    let source = Span::styled(
        g.cap_source.as_str(),
        match g.cap_source {
            CapSource::Learned => theme.style(Role::Cooling),
            CapSource::Config | CapSource::Default => muted,
        },
    );
    let depth = if g.max_queue_depth == 0 {
        "∞".to_owned()
    } else {
        g.max_queue_depth.to_string()
    };
    let queued = if queue_full(g) {
        Span::styled(
            format!("{}/{depth} full", g.queued),
            theme.style(Role::QueueFull),
        )
    } else if g.queued == 0 {
        Span::styled(format!("0/{depth}"), muted)
    } else {
        Span::styled(format!("{}/{depth}", g.queued), theme.style(Role::Cooling))
    };
    let oldest = if g.queued == 0 || g.oldest_wait_ms == 0 {
        Span::styled("—", muted)
    } else {
        Span::raw(fmt_ms(g.oldest_wait_ms))
    };
    vec![
        Cell::from(label),
        Cell::from(Span::styled(g.provider.clone(), muted)),
        Cell::from(Span::styled(
            format!("{}/{cap}", g.in_flight),
            if at_cap {
                theme.style(Role::Cooling)
            } else {
                Style::default()
            },
        )),
        Cell::from(source),
        Cell::from(queued),
        Cell::from(oldest),
        count(g.timeouts, theme),
        count(g.rejections, theme),
    ]
}
