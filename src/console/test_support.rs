//! Shared fixtures for console tests: a hand-built [`Snapshot`] at a fixed `NOW` and helpers
//! that render into a `TestBackend` and read text and styles back.

use std::sync::Arc;

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::{Frame, Terminal};

use super::app::App;
use super::render;
use super::theme::Theme;
use crate::config::{Dialect, Profile, Strategy};
use crate::policy::OutcomeClass;
use crate::policy::admission::{Enforcement, GateKind};
use crate::policy::select::ExclusionReason;
use crate::snapshot::GateView;
use crate::snapshot::{
    AttemptView, BreakerView, ComboView, ConnectionView, LockoutView, ProviderView, RequestView,
    SkipReason, SkippedView, Snapshot, Totals, TransitionView, Window,
};

/// 2023-11-14 22:13:20 UTC.
pub(super) const NOW: u64 = 1_700_000_000_000;

pub(super) fn snapshot() -> Snapshot {
    Snapshot {
        version: 7,
        taken_at_unix_ms: NOW,
        started_at_unix_ms: NOW - (3600 + 2 * 60 + 3) * 1000,
        listen: "127.0.0.1:8787".into(),
        admin_listen: "127.0.0.1:8788".into(),
        config_path: "/tmp/sluice.toml".into(),
        draining: false,
        totals: Totals {
            requests: 40,
            ok: 38,
            errors: 2,
            in_flight: 3,
            bytes_out: 1234,
        },
        last_minute: Window {
            req_per_s: 1.5,
            success_ratio: 0.95,
            p50_ms: 123,
            p99_ms: 4567,
            sparkline: (0..60).map(|i| i % 7).collect(),
        },
        recent: vec![
            RequestView {
                tokens_in: None,
                tokens_out: None,
                id: 41,
                at_unix_ms: NOW - 2_000,
                route: "/v1/messages".into(),
                client_model: "claude-sonnet-4".into(),
                target: "openrouter:main/anthropic/claude-sonnet-4".into(),
                status: 502,
                latency_ms: 812,
                attempts: 2,
                bytes: 321,
                stream: true,
                outcome: crate::snapshot::RequestOutcome::UpstreamError,
                error: "upstream closed the stream".into(),
                attempt_log: vec![
                    AttemptView {
                        target: "openrouter:key-c/anthropic/claude-sonnet-4".into(),
                        status: 429,
                        class: crate::snapshot::AttemptClass::RateLimited,
                        reason: "rate_limit_exceeded".into(),
                        latency_ms: 95,
                        translated: "anthropic→openai".into(),
                        injected: false,
                    },
                    AttemptView {
                        target: "openrouter:main/anthropic/claude-sonnet-4".into(),
                        status: 502,
                        class: crate::snapshot::AttemptClass::Transient,
                        reason: "stream_closed".into(),
                        latency_ms: 700,
                        translated: "anthropic→openai".into(),
                        injected: false,
                    },
                ],
                skipped: vec![SkippedView {
                    target: "openrouter:key-b/anthropic/claude-sonnet-4".into(),
                    reason: SkipReason::from(ExclusionReason::Terminal).into(),
                }],
                waits: Vec::new(),
                client_format: "anthropic".into(),
                upstream_dialect: Some(Dialect::OpenAi.into()),
                injected: false,
                continued: false,
                adjusted: vec!["max_tokens 128000 → 32768 (max_output_tokens)".into()],
            },
            RequestView {
                tokens_in: None,
                tokens_out: None,
                id: 40,
                at_unix_ms: NOW - 5_000,
                route: "/v1/chat/completions".into(),
                client_model: "gpt-4o".into(),
                target: "local:direct/llama3".into(),
                status: 200,
                latency_ms: 245,
                attempts: 1,
                bytes: 2048,
                stream: false,
                outcome: crate::snapshot::RequestOutcome::Ok,
                error: String::new(),
                attempt_log: vec![AttemptView {
                    target: "local:direct/llama3".into(),
                    status: 200,
                    class: crate::snapshot::AttemptClass::Success,
                    reason: String::new(),
                    latency_ms: 240,
                    translated: String::new(),
                    injected: false,
                }],
                skipped: Vec::new(),
                waits: Vec::new(),
                client_format: "chat".into(),
                upstream_dialect: Some(Dialect::OpenAi.into()),
                injected: false,
                continued: false,
                adjusted: Vec::new(),
            },
        ],
        providers: vec![
            ProviderView {
                id: "openrouter".into(),
                dialect: Dialect::OpenAi.into(),
                base_url: "https://openrouter.ai/api".into(),
                profile: Profile::ApiKey.into(),
                attempts: 12,
                failures: 2,
                in_flight: 1,
                last_status: 502,
                last_latency_ms: 812,
                breaker: BreakerView {
                    state: crate::snapshot::BreakerState::Open,
                    failure_count: 12,
                    degrade_at: 7,
                    open_at: 12,
                    next_probe_at_unix_ms: Some(NOW + 65_000),
                    multiplier: 1,
                    transitions: vec![
                        TransitionView {
                            at_unix_ms: NOW - 40_000,
                            from: crate::snapshot::BreakerState::Closed,
                            to: crate::snapshot::BreakerState::Degraded,
                            reason: "failure_threshold".into(),
                        },
                        TransitionView {
                            at_unix_ms: NOW - 12_000,
                            from: crate::snapshot::BreakerState::Degraded,
                            to: crate::snapshot::BreakerState::Open,
                            reason: "failure_threshold".into(),
                        },
                    ],
                },
                connections: vec![
                    ConnectionView {
                        id: "main".into(),
                        auth: "env:OPENROUTER_API_KEY".into(),
                        attempts: 12,
                        failures: 2,
                        in_flight: 1,
                        status: crate::snapshot::ConnectionStatus::Cooling,
                        cooldown_until_unix_ms: Some(NOW + 12_000),
                        backoff_level: 2,
                        last_error_kind: Some(OutcomeClass::RateLimited.into()),
                        last_status: Some(429),
                        lockouts: 1,
                        ..Default::default()
                    },
                    ConnectionView {
                        id: "key-b".into(),
                        auth: "env:OR_KEY_B".into(),
                        status: crate::snapshot::ConnectionStatus::Banned,
                        last_error_kind: Some(OutcomeClass::Banned.into()),
                        ..Default::default()
                    },
                    ConnectionView {
                        id: "key-c".into(),
                        auth: "env:OR_KEY_C".into(),
                        status: crate::snapshot::ConnectionStatus::QuotaWait,
                        cooldown_until_unix_ms: Some(NOW + 65_000),
                        backoff_level: 1,
                        last_error_kind: Some(OutcomeClass::QuotaExhausted.into()),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            },
            ProviderView {
                id: "anthropic".into(),
                dialect: Dialect::Anthropic.into(),
                base_url: "https://api.anthropic.com".into(),
                profile: Profile::Oauth.into(),
                breaker: BreakerView {
                    state: crate::snapshot::BreakerState::Closed,
                    failure_count: 3,
                    degrade_at: 7,
                    open_at: 12,
                    multiplier: 1,
                    ..Default::default()
                },
                connections: vec![ConnectionView {
                    id: "pass".into(),
                    auth: "passthrough".into(),
                    status: crate::snapshot::ConnectionStatus::Active,
                    ..Default::default()
                }],
                ..Default::default()
            },
        ],
        combos: vec![ComboView {
            name: "fast".into(),
            strategy: Strategy::Priority.into(),
            targets: vec!["openrouter/a".into(), "anthropic/b".into()],
        }],
        lockouts: vec![
            LockoutView {
                provider: "anthropic".into(),
                connection: "pass".into(),
                model: "claude-opus-4".into(),
                scope: crate::snapshot::LockoutScope::Model,
                reason: "not_found".into(),
                failures: 1,
                until_unix_ms: NOW + 12_000,
            },
            LockoutView {
                provider: "openrouter".into(),
                connection: "main".into(),
                model: "z-ai/glm-5".into(),
                scope: crate::snapshot::LockoutScope::QuotaGroup,
                reason: "rate_limit_exceeded".into(),
                failures: 2,
                until_unix_ms: NOW + 65_000,
            },
        ],
        queues: vec![
            gate("openrouter", "main", None, (4, 4), (8, 8), 1_500),
            gate("openrouter", "main", Some("z-ai/glm-5"), (1, 2), (0, 8), 0),
        ],
        store: Default::default(),
        faults: Vec::new(),
        held: Vec::new(),
    }
}

/// A gate view: `(in_flight, cap)`, `(queued, depth)`, oldest wait in ms.
pub(super) fn gate(
    provider: &str,
    connection: &str,
    model: Option<&str>,
    (in_flight, cap): (u32, u32),
    (queued, depth): (usize, u32),
    oldest_wait_ms: u64,
) -> GateView {
    GateView {
        kind: if model.is_some() {
            GateKind::Model
        } else {
            GateKind::Connection
        },
        provider: provider.into(),
        connection: connection.into(),
        model: model.map(Into::into),
        in_flight,
        cap: Some(cap),
        effective_cap: Some(cap),
        cap_source: crate::policy::admission::CapSource::Config,
        queued,
        max_queue_depth: depth,
        enforcement: Enforcement::RateLimitQueue,
        oldest_wait_ms,
        timeouts: 3,
        rejections: 0,
        fail_open_admits: 0,
        admitted: 40,
    }
}

/// Renders with `paint` into a `w`×`h` test terminal and returns the buffer.
pub(super) fn paint(w: u16, h: u16, paint: impl FnOnce(&mut Frame)) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(paint).unwrap();
    terminal.backend().buffer().clone()
}

pub(super) fn draw(app: &App, theme: &Theme, w: u16, h: u16) -> Buffer {
    let mut terminal = Terminal::new(TestBackend::new(w, h)).unwrap();
    terminal.draw(|f| render(f, app, theme, NOW)).unwrap();
    terminal.backend().buffer().clone()
}

pub(super) fn lines(buf: &Buffer) -> Vec<String> {
    let area = buf.area;
    (area.top()..area.bottom())
        .map(|y| {
            (area.left()..area.right())
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect()
}

pub(super) fn text(buf: &Buffer) -> String {
    lines(buf).join("\n")
}

/// Position of the first cell where `needle` starts.
pub(super) fn find(buf: &Buffer, needle: &str) -> Option<(u16, u16)> {
    let area = buf.area;
    for y in area.top()..area.bottom() {
        let cells: Vec<&str> = (area.left()..area.right())
            .map(|x| buf[(x, y)].symbol())
            .collect();
        for x in 0..cells.len() {
            let rest: String = cells[x..].concat();
            if rest.starts_with(needle) {
                return Some((area.left() + u16::try_from(x).unwrap(), y));
            }
        }
    }
    None
}

pub(super) fn app() -> App {
    App::new(Arc::new(snapshot()))
}

/// The first screen line containing `needle`.
pub(super) fn line_with(buf: &Buffer, needle: &str) -> String {
    lines(buf)
        .into_iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{}", text(buf)))
}

/// Foreground colour of the first cell of `needle` on screen.
pub(super) fn fg_of(buf: &Buffer, needle: &str) -> ratatui::style::Color {
    let (x, y) =
        find(buf, needle).unwrap_or_else(|| panic!("{needle:?} not on screen:\n{}", text(buf)));
    buf[(x, y)].fg
}
