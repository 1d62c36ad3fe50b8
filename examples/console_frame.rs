//! S9, the console's frame cost: how long one frame of the operator console takes to build
//! and draw, at 120×40 and 200×60, for 50 providers × 2 connections with 50 and with 500
//! recent requests (with their attempts), in release mode.
//!
//! Measures, each as median and p99 over N frames (default 2,000, after 200 warm-up), for
//! each number of recent requests:
//! - `snapshot`: `Core::snapshot()`, what the publisher builds for an attached console (at
//!   most 10 a second, only while one is attached);
//! - `render`: one frame of every panel drawn into a 120×40 and a 200×60 buffer (ratatui's
//!   `TestBackend`; writing the changed cells to a real terminal is not included).
//!
//! Run: `cargo run --release --example console_frame [-- N]`.
#![allow(clippy::print_stdout, clippy::unwrap_used, missing_docs)]

use std::sync::Arc;

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use sluice::clock::{Clock, SystemClock, unix_ms};

#[path = "support/timing.rs"]
mod timing;
use sluice::console::app::App;
use sluice::console::theme::Theme;
use sluice::core::Core;
use sluice::snapshot::{AttemptView, RequestOutcome, RequestView};

const PROVIDERS: usize = 50;
/// Recent requests in the state, one measurement each.
const REQUESTS: [usize; 2] = [50, 500];
/// Terminal sizes (columns, rows) drawn for each.
const SIZES: [(u16, u16); 2] = [(120, 40), (200, 60)];

fn config_text() -> String {
    let mut t = String::new();
    for p in 0..PROVIDERS {
        let dialect = if p % 2 == 0 { "anthropic" } else { "openai" };
        t.push_str(&format!(
            "[[providers]]\nid = \"provider-{p:02}\"\ndialect = \"{dialect}\"\nbase_url = \"http://127.0.0.1:9\"\n"
        ));
        for c in 0..2 {
            t.push_str(&format!(
                "  [[providers.connections]]\n  id = \"p{p:02}-key-{c}\"\n  auth = \"passthrough\"\n"
            ));
        }
    }
    t
}

fn request(i: usize) -> RequestView {
    let p = i % PROVIDERS;
    let failed = i % 7 == 0;
    RequestView {
        route: "/v1/messages".into(),
        client_model: format!("claude-model-{}", i % 12),
        target: format!(
            "provider-{p:02}:p{p:02}-key-{}/claude-model-{}",
            i % 2,
            i % 12
        ),
        status: if failed { 429 } else { 200 },
        attempts: if failed { 2 } else { 1 },
        bytes: 4_096,
        stream: i % 3 == 0,
        outcome: if failed {
            RequestOutcome::UpstreamError
        } else {
            RequestOutcome::Ok
        },
        error: if failed {
            "upstream 429: rate limited (retry in 12s)".into()
        } else {
            String::new()
        },
        attempt_log: vec![AttemptView::default(); if failed { 2 } else { 1 }],
        client_format: "anthropic".into(),
        tokens_in: Some(1_200),
        tokens_out: Some(340),
        ..Default::default()
    }
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000);
    println!("S9 console frame, {PROVIDERS} providers x 2 connections, {n} frames each");
    for requests in REQUESTS {
        measure(requests, n);
    }
}

/// Times the snapshot and a frame at each of [`SIZES`] with `requests` recent requests.
fn measure(requests: usize, n: usize) {
    let dir = tempfile::tempdir().unwrap();
    let env = sluice::config::LoadEnv::fixed(&[], dir.path());
    let cfg =
        sluice::config::from_str(&config_text(), std::path::Path::new("s9.toml"), &env).unwrap();
    let core = Core::new(Arc::new(cfg), Arc::new(SystemClock), None);
    for i in 0..requests {
        let guard = core.begin_request();
        core.finish_request(&guard, request(i));
    }
    let snap = timing::timed(n, || {
        std::hint::black_box(core.snapshot());
    });
    println!(
        "{requests:>3} requests  snapshot build  median {:8.1} us   p99 {:8.1} us",
        snap.median, snap.p99
    );
    let app = App::new(Arc::new(core.snapshot()));
    let theme = Theme::default();
    let now = unix_ms(SystemClock.wall());
    for (cols, rows) in SIZES {
        let mut terminal = Terminal::new(TestBackend::new(cols, rows)).unwrap();
        let draw = timing::timed(n, || {
            terminal
                .draw(|f| sluice::console::render(f, &app, &theme, now))
                .unwrap();
        });
        println!(
            "{requests:>3} requests  render {cols}x{rows}  median {:8.1} us   p99 {:8.1} us",
            draw.median, draw.p99
        );
    }
}
