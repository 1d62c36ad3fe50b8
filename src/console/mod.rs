//! The ratatui operator console: [`run`] owns the terminal, [`render`] draws one frame.
//!
//! The console reads `Arc<Snapshot>`s from a `watch` channel and acts only through
//! [`Control`] (`docs/ARCHITECTURE.md#the-operator-doors`): it never touches core state. The
//! loop is a `tokio::select!` over terminal events, new snapshots, a tick (uptime, message
//! expiry) and shutdown, with a dirty flag so it redraws only when something changed, at most
//! ~10 frames per second.
//! UI state lives in [`app::App`] (TEA style: keys in, [`app::Action`]s out); drawing is a pure
//! function of the app, the [`theme::Theme`] and `now`, so tests render into a `TestBackend`.
//!
//! Operator commands (reset breakers, clear cooldowns, re-enable models, settings edits) leave
//! `App::on_key` as [`action::Action`]s; [`action::perform`] runs them through a
//! [`door::Door`] — `Control` in-process ([`run`]), the admin API when attached to a running
//! sluice ([`run_attached`], with a "reconnecting…" header while the link is down) — and
//! the [`action::Outcome`] goes back to the app (status bar, settings editor). Destructive
//! ones pass a confirm dialog first; `readonly` refuses them all.
//!
//! The settings editor (`e`, [`settings`]) edits the §3 lockout settings and §2 tunables
//! through `Control::patch_settings`. Keys come from the effective [`keymap::Keymap`]
//! (built-in, or with `[console.keys]` overrides via [`keymap::keymap_from_config`]).
//!
//! Layout: a grid at ≥ 100×30 (left column Circuits, Cooldowns, Model lockouts and Queues;
//! right column Providers and Requests); below that one panel at a time with a tab bar
//! (`1`–`6`); below 60×15 only a "terminal too small" notice.

pub mod action;
pub mod app;
pub mod door;
pub mod focus;
pub mod keymap;
pub mod panels;
pub mod settings;
pub mod theme;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{Event, EventStream};
use futures_util::StreamExt;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Tabs, Wrap};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use self::app::{Action, App, Focus};
use self::door::{Door, Link};
use self::keymap::Cmd;
use self::theme::{Role, Theme};
use crate::clock::{Clock, unix_ms};
use crate::core::operator::control::Control;
use crate::snapshot::Snapshot;

/// Smallest usable terminal, columns × rows; below it only a notice is drawn.
pub const MIN_SIZE: (u16, u16) = (60, 15);
/// Smallest terminal for the grid layout, columns × rows; below it panels become tabs.
pub const GRID_SIZE: (u16, u16) = (100, 30);
/// Least time between two frames (≈ 10 fps).
pub const MIN_FRAME_INTERVAL: Duration = Duration::from_millis(100);
/// Shortest tick accepted (a smaller `tick` is raised to this).
const MIN_TICK: Duration = Duration::from_millis(50);

/// How the console looks and wakes up.
#[derive(Debug, Clone)]
pub struct ConsoleOptions {
    /// Resolved theme (see [`theme::load`]).
    pub theme: Theme,
    /// Tick period for uptime and countdowns (config `console.tick`, default 250 ms).
    pub tick: Duration,
    /// Read-only mode (CLI `--readonly`): operator actions are refused with a "read-only
    /// mode" status message and the status bar shows a `READ-ONLY` badge. Default false.
    pub readonly: bool,
    /// Effective key bindings: [`keymap::Keymap::default`] (built-in), or
    /// [`keymap::keymap_from_config`] applied to `[console.keys]`. Drives keys, help and hints.
    pub keymap: keymap::Keymap,
    /// Mouse capture: click to focus/select, wheel to move (CLI `--no-mouse` turns it off,
    /// e.g. to keep the terminal's own text selection). Default true.
    pub mouse: bool,
    /// Requests finished before this start, newest first (the newest `request_log` rows,
    /// read at startup by [`crate::app::request_history`]), shown below the live ones.
    pub history: Vec<crate::snapshot::RequestView>,
}

/// Which layout a terminal size gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayoutMode {
    /// Below [`MIN_SIZE`]: only the "terminal too small" notice.
    TooSmall,
    /// Between [`MIN_SIZE`] and [`GRID_SIZE`]: one panel at a time with a tab bar.
    Tabs,
    /// At least [`GRID_SIZE`]: all panels at once.
    Grid,
}

impl LayoutMode {
    /// The layout for a terminal of `area`'s size.
    pub fn for_area(area: Rect) -> Self {
        if area.width < MIN_SIZE.0 || area.height < MIN_SIZE.1 {
            LayoutMode::TooSmall
        } else if area.width < GRID_SIZE.0 || area.height < GRID_SIZE.1 {
            LayoutMode::Tabs
        } else {
            LayoutMode::Grid
        }
    }
}

/// Draws the whole screen for `app` into `frame`. `now_unix_ms` is wall-clock Unix ms (uptime,
/// message expiry). Never panics, whatever the frame size.
pub fn render(frame: &mut Frame, app: &app::App, theme: &theme::Theme, now_unix_ms: u64) {
    let area = frame.area();
    let mode = LayoutMode::for_area(area);
    if mode == LayoutMode::TooSmall {
        render_too_small(frame, area, theme);
        return;
    }
    let [header, tabs, body, status] = screen_areas(area, mode);
    let notice = app.link_lost.as_ref().map(|_| "reconnecting…");
    panels::header::render_with(frame, header, &app.snapshot, theme, now_unix_ms, notice);
    match mode {
        LayoutMode::Grid => render_grid(frame, body, app, theme, now_unix_ms),
        _ => {
            render_tabs(frame, tabs, app, theme);
            render_panel(frame, body, app, theme, app.focus, now_unix_ms);
        }
    }
    panels::status::render(frame, status, app, theme, now_unix_ms);
    if app.details {
        panels::overlay::render_details(frame, body, app, theme);
    }
    if let Some(editor) = &app.editor {
        panels::settings::render(frame, body, editor, theme);
    }
    if app.help {
        panels::overlay::render_help(frame, area, app, theme);
    }
    if let Some(confirm) = &app.confirm {
        panels::overlay::render_confirm(frame, area, confirm, theme);
    }
}

/// The header, tab bar (empty in the grid), body and status bar of a screen of `area`.
fn screen_areas(area: Rect, mode: LayoutMode) -> [Rect; 4] {
    let tab_h = if mode == LayoutMode::Tabs { 1 } else { 0 };
    Layout::vertical([
        Constraint::Length(panels::header::HEIGHT),
        Constraint::Length(tab_h),
        Constraint::Min(0),
        Constraint::Length(1),
    ])
    .areas(area)
}

/// Where [`render`] draws each panel on a screen of `area`: six in the grid (Quota in the
/// Providers slot while focused), the focused
/// one in tabs mode, none when too small. The run loop stores it in [`App::rects`] after each
/// frame so mouse clicks map to panels and rows.
pub fn panel_rects(area: Rect, app: &App) -> Vec<(Focus, Rect)> {
    let mode = LayoutMode::for_area(area);
    let [_, _, body, _] = screen_areas(area, mode);
    match mode {
        LayoutMode::TooSmall => Vec::new(),
        LayoutMode::Tabs => vec![(app.focus, body)],
        LayoutMode::Grid => grid_rects(body, app).to_vec(),
    }
}

/// Share of the width the resilience column (left) gets (under half: the right column, with
/// the Requests panel, is the wider one at every size)…
const LEFT_PERCENT: u16 = 45;
/// …but no more than this many columns (its tables are complete by then), so wide terminals
/// give the rest to Providers and Requests.
const LEFT_MAX: u16 = 96;

fn render_grid(frame: &mut Frame, body: Rect, app: &App, theme: &Theme, now_unix_ms: u64) {
    for (panel, area) in grid_rects(body, app) {
        render_panel(frame, area, app, theme, panel, now_unix_ms);
    }
}

/// The six panels' rectangles in the grid layout of `body` (the top right is Providers, or
/// Quota while it has focus).
fn grid_rects(body: Rect, app: &App) -> [(Focus, Rect); 6] {
    let left_w = u16::try_from(u32::from(body.width) * u32::from(LEFT_PERCENT) / 100)
        .unwrap_or(LEFT_MAX)
        .min(LEFT_MAX);
    let [left, right] =
        Layout::horizontal([Constraint::Length(left_w), Constraint::Fill(1)]).areas(body);
    let wants = [
        panels::circuits::wanted_height(app),
        panels::cooldowns::wanted_height(app),
        panels::lockouts::wanted_height(app),
        panels::queues::wanted_height(app),
    ];
    let heights = share(left.height, &wants);
    let mut y = left.y;
    let mut column = |h: u16| {
        let area = Rect {
            y,
            height: h,
            ..left
        };
        y = y.saturating_add(h);
        area
    };
    let h = |i: usize| heights.get(i).copied().unwrap_or(0);
    let circuits = column(h(0));
    let cooldowns = column(h(1));
    let lockouts = column(h(2));
    let queues = column(h(3));
    // The Quota panel shares the Providers slot: shown there while it has focus.
    let top_panel = if app.focus == Focus::Quota {
        Focus::Quota
    } else {
        Focus::Providers
    };
    let wanted = match top_panel {
        Focus::Quota => panels::quota::wanted_height(app),
        _ => panels::providers::wanted_height(&app.snapshot),
    };
    let providers_h = wanted.min(right.height / 2).max(5);
    let [top, bottom] =
        Layout::vertical([Constraint::Length(providers_h), Constraint::Min(0)]).areas(right);
    [
        (Focus::Circuits, circuits),
        (Focus::Cooldowns, cooldowns),
        (Focus::Lockouts, lockouts),
        (Focus::Queues, queues),
        (top_panel, top),
        (Focus::Requests, bottom),
    ]
}

/// Splits `total` rows among panels wanting `wants` rows: the smallest wants are met first,
/// larger ones share what is left evenly; spare rows go to the last panel. Sums to `total`.
fn share(total: u16, wants: &[u16]) -> Vec<u16> {
    let mut out = vec![0u16; wants.len()];
    let mut order: Vec<usize> = (0..wants.len()).collect();
    order.sort_by_key(|&i| wants.get(i).copied().unwrap_or(0));
    let mut left = total;
    for (k, &i) in order.iter().enumerate() {
        let panels_left = u16::try_from(order.len() - k).unwrap_or(u16::MAX);
        let give = wants.get(i).copied().unwrap_or(0).min(left / panels_left);
        if let Some(slot) = out.get_mut(i) {
            *slot = give;
        }
        left -= give;
    }
    if let Some(last) = out.last_mut() {
        *last = last.saturating_add(left);
    }
    out
}

fn render_panel(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    theme: &Theme,
    panel: Focus,
    now_unix_ms: u64,
) {
    let focused = app.focus == panel;
    match panel {
        Focus::Circuits => {
            panels::circuits::render(frame, area, app, theme, focused, now_unix_ms);
        }
        Focus::Cooldowns => {
            panels::cooldowns::render(frame, area, app, theme, focused, now_unix_ms);
        }
        Focus::Lockouts => {
            panels::lockouts::render(frame, area, app, theme, focused, now_unix_ms);
        }
        Focus::Queues => panels::queues::render(frame, area, app, theme, focused),
        Focus::Providers => panels::providers::render(frame, area, app, theme, focused),
        Focus::Requests => panels::requests::render(frame, area, app, theme, focused),
        Focus::Quota => panels::quota::render(frame, area, app, theme, focused, now_unix_ms),
    }
}

fn render_tabs(frame: &mut Frame, area: Rect, app: &App, theme: &Theme) {
    let title = |f: Focus, short: bool| {
        let key = app.keymap.first_key(Cmd::Focus(f));
        let name = if short { f.short_title() } else { f.title() };
        if key.is_empty() {
            name.to_owned()
        } else {
            format!("{key} {name}")
        }
    };
    // Width with one-cell padding on each side and a divider between titles.
    let width = |short: bool, pad: usize| -> usize {
        Focus::ALL
            .iter()
            .map(|f| title(*f, short).chars().count() + 2 * pad + 1)
            .sum()
    };
    let avail = usize::from(area.width);
    let (short, pad) = if width(false, 1) <= avail {
        (false, " ")
    } else if width(false, 0) <= avail {
        (false, "")
    } else {
        (true, "")
    };
    let titles = Focus::ALL.iter().map(|f| title(*f, short));
    let selected = Focus::ALL.iter().position(|f| *f == app.focus);
    let tabs = Tabs::new(titles)
        .select(selected)
        .padding(pad, pad)
        .style(theme.style(Role::Muted))
        .highlight_style(theme.style(Role::Title).add_modifier(Modifier::REVERSED));
    frame.render_widget(tabs, area);
}

fn render_too_small(frame: &mut Frame, area: Rect, theme: &Theme) {
    let text = format!(
        "terminal too small ({}×{}, need ≥ {}×{})",
        area.width, area.height, MIN_SIZE.0, MIN_SIZE.1
    );
    let line = Line::from(Span::styled(text, theme.style(Role::Error))).centered();
    let y_off = area.height.saturating_sub(1) / 2;
    let rect = Rect {
        x: area.x,
        y: area.y.saturating_add(y_off),
        width: area.width,
        height: area.height.saturating_sub(y_off),
    };
    frame.render_widget(Paragraph::new(line).wrap(Wrap { trim: true }), rect);
}

/// Restores the terminal when dropped, so every exit path (errors, unwinding) leaves raw mode
/// and the alternate screen.
struct RestoreOnDrop {
    /// Mouse capture was enabled and must be disabled too.
    mouse: bool,
}

impl Drop for RestoreOnDrop {
    fn drop(&mut self) {
        // Nothing useful to do if restoring fails; the console must not print.
        if self.mouse {
            disable_mouse();
        }
        let _ = ratatui::try_restore();
    }
}

/// Turns terminal mouse reporting on (best effort: a terminal without it just sends no
/// mouse events).
fn enable_mouse() {
    let _ = crossterm::execute!(io::stdout(), crossterm::event::EnableMouseCapture);
}

/// Turns terminal mouse reporting off; safe to call more than once.
fn disable_mouse() {
    let _ = crossterm::execute!(io::stdout(), crossterm::event::DisableMouseCapture);
}

/// Chains a panic hook that turns mouse reporting off before the previous hook (ratatui's,
/// which restores the screen) runs, so a panic never leaves the shell receiving mouse codes.
fn install_mouse_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        disable_mouse();
        previous(info);
    }));
}

/// Runs the console until the user quits (`q` / `ctrl-c`, which calls
/// [`Control::request_shutdown`]) or `shutdown` is cancelled. Blocking: call it on a dedicated
/// std thread; it builds its own current-thread tokio runtime.
///
/// Enters the alternate screen and raw mode and always restores them: on return, on error and
/// on panic (ratatui's panic hook plus a drop guard).
///
/// Errors: terminal setup, drawing, or reading terminal events failed.
pub fn run(
    snapshots: watch::Receiver<Arc<Snapshot>>,
    control: Control,
    clock: Arc<dyn Clock>,
    opts: ConsoleOptions,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let (_live, link) = watch::channel(Link::Live);
    run_attached(snapshots, Arc::new(control), link, clock, opts, shutdown)
}

/// [`run`] for any [`Door`]: `sluice console` passes the remote door and the link state of
/// its snapshot feed (the header shows "reconnecting…" while it is not [`Link::Live`]). `q`
/// calls [`Door::request_shutdown`] and returns.
///
/// Errors: terminal setup, drawing, or reading terminal events failed.
pub fn run_attached(
    snapshots: watch::Receiver<Arc<Snapshot>>,
    control: Arc<dyn Door>,
    link: watch::Receiver<Link>,
    clock: Arc<dyn Clock>,
    opts: ConsoleOptions,
    shutdown: CancellationToken,
) -> io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mouse = opts.mouse;
    let _restore = RestoreOnDrop { mouse };
    // Installs a panic hook that restores the terminal, enables raw mode, enters the alternate screen.
    let mut terminal = ratatui::try_init()?;
    if mouse {
        install_mouse_panic_hook();
        enable_mouse();
    }
    runtime.block_on(event_loop(
        &mut terminal,
        snapshots,
        link,
        control,
        clock.as_ref(),
        &opts,
        &shutdown,
    ))
}

/// The console's loop: draws when something changed (at most every [`MIN_FRAME_INTERVAL`])
/// and waits for a terminal event, a new snapshot, a slow action's outcome, a link change, a
/// tick or shutdown.
async fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    mut snapshots: watch::Receiver<Arc<Snapshot>>,
    mut link: watch::Receiver<Link>,
    control: Arc<dyn Door>,
    clock: &dyn Clock,
    opts: &ConsoleOptions,
    shutdown: &CancellationToken,
) -> io::Result<()> {
    let first = Arc::clone(&snapshots.borrow_and_update());
    let mut app = new_app(first, opts);
    let mut events = EventStream::new();
    let mut tick = tokio::time::interval(opts.tick.max(MIN_TICK));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    let mut snapshots_open = true;
    let mut link_open = true;
    app.set_link(&link.borrow_and_update());
    let mut frames = Frames {
        dirty: true,
        last_draw: None,
        drawn_second: 0,
        mode: LayoutMode::TooSmall,
    };
    let (slow_done, mut slow_outcomes) = tokio::sync::mpsc::unbounded_channel();

    loop {
        draw_if_due(terminal, &mut app, opts, clock, &mut frames)?;
        let next_frame = frames
            .last_draw
            .map_or_else(|| clock.now(), |t| t + MIN_FRAME_INTERVAL);
        tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            event = events.next() => match event {
                Some(Ok(Event::Key(key))) => {
                    if on_key(&mut app, key, &control, &slow_done, clock) {
                        return Ok(());
                    }
                    frames.dirty = true;
                }
                Some(Ok(Event::Mouse(m))) if opts.mouse => frames.dirty |= app.on_mouse(m),
                Some(Ok(Event::Resize(..))) => frames.dirty = true,
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
            changed = snapshots.changed(), if snapshots_open => match changed {
                Ok(()) => {
                    let snapshot = Arc::clone(&snapshots.borrow_and_update());
                    app.set_snapshot(snapshot);
                    frames.dirty = true;
                }
                Err(_) => snapshots_open = false,
            },
            Some(outcome) = slow_outcomes.recv() => {
                app.on_outcome(outcome);
                frames.dirty = true;
            }
            changed = link.changed(), if link_open => match changed {
                Ok(()) => {
                    app.set_link(&link.borrow_and_update());
                    frames.dirty = true;
                }
                Err(_) => link_open = false,
            },
            _ = tick.tick() => {
                let now_ms = unix_ms(clock.wall());
                // Uptime ticks once a second; running countdowns redraw on every tick.
                frames.dirty |= app.on_tick(now_ms)
                    || now_ms / 1000 != frames.drawn_second
                    || app.has_visible_countdowns(now_ms, frames.mode);
            }
            () = tokio::time::sleep_until(next_frame), if frames.dirty => {}
        }
    }
}

/// The app the console starts with: the first snapshot, the request history, read-only mode
/// and the key bindings of `opts`.
fn new_app(first: Arc<Snapshot>, opts: &ConsoleOptions) -> App {
    let mut app = App::new(first);
    app.set_history(opts.history.clone());
    app.readonly = opts.readonly;
    app.keymap = Arc::new(opts.keymap.clone());
    app
}

/// What the event loop knows about its frames.
struct Frames {
    /// Something changed since the last frame.
    dirty: bool,
    /// When the last frame was drawn (none yet: draw at once).
    last_draw: Option<crate::clock::Instant>,
    /// The wall-clock second of the last frame (uptime redraws when it moves on).
    drawn_second: u64,
    /// The layout of the last frame.
    mode: LayoutMode,
}

/// Draws a frame when one is needed and the last is at least [`MIN_FRAME_INTERVAL`] old, and
/// keeps the panels' rectangles for the mouse.
fn draw_if_due(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut App,
    opts: &ConsoleOptions,
    clock: &dyn Clock,
    frames: &mut Frames,
) -> io::Result<()> {
    if !frames.dirty {
        return Ok(());
    }
    let now = clock.now();
    if frames
        .last_draw
        .is_some_and(|t| now.saturating_duration_since(t) < MIN_FRAME_INTERVAL)
    {
        return Ok(());
    }
    let now_ms = unix_ms(clock.wall());
    let mut rects = Vec::new();
    let mut mode = frames.mode;
    terminal.draw(|f| {
        mode = LayoutMode::for_area(f.area());
        render(f, app, &opts.theme, now_ms);
        rects = panel_rects(f.area(), app);
    })?;
    frames.mode = mode;
    app.rects = rects;
    frames.drawn_second = now_ms / 1000;
    frames.last_draw = Some(now);
    frames.dirty = false;
    Ok(())
}

/// Handles one key: performs its action (a slow one off the loop, see [`perform_off_loop`]),
/// then ticks the app. Returns true when the key quits (shutdown is requested then).
fn on_key(
    app: &mut App,
    key: crossterm::event::KeyEvent,
    control: &Arc<dyn Door>,
    slow_done: &tokio::sync::mpsc::UnboundedSender<action::Outcome>,
    clock: &dyn Clock,
) -> bool {
    match app.on_key(key) {
        Some(Action::Quit) => {
            control.request_shutdown();
            return true;
        }
        Some(action) if action.is_slow() => {
            perform_off_loop(control, action, slow_done.clone());
        }
        Some(action) => app.on_outcome(action::perform(control.as_ref(), action)),
        None => {}
    }
    app.on_tick(unix_ms(clock.wall()));
    false
}

/// Performs a slow action ([`Action::is_slow`]) on a worker thread; its outcome comes back
/// through `done` into the event loop, which keeps drawing meanwhile.
fn perform_off_loop(
    control: &Arc<dyn Door>,
    action: Action,
    done: tokio::sync::mpsc::UnboundedSender<action::Outcome>,
) {
    let control = Arc::clone(control);
    let spawned = std::thread::Builder::new()
        .name("sluice-console-action".into())
        .spawn(move || {
            let _ = done.send(action::perform(control.as_ref(), action));
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the console's action thread");
    }
}

#[cfg(test)]
mod door_tests;
#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod filter_mouse_tests;
#[cfg(test)]
mod history_tests;
#[cfg(test)]
mod newcomer_tests;
#[cfg(test)]
mod panel_tests;
#[cfg(test)]
mod queue_tests;
#[cfg(test)]
mod quota_panel_tests;
#[cfg(test)]
mod snapshot_json_tests;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod verify_tests;
