//! Clear-and-verify in the console: `v` on a Cooldowns row or a Circuits row opens a dialog
//! naming the probe's model, `m` cycles it, `y` yields the action; passthrough connections
//! and read-only mode are refused; the action runs through a real `Control` with a fake
//! probe and words its outcome.

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tokio_util::sync::CancellationToken;

use super::action::{Action, perform};
use super::app::{App, Focus};
use super::test_support::snapshot;
use crate::clock::ManualClock;
use crate::config::{Connection, LoadEnv, Provider, from_str};
use crate::core::Core;
use crate::core::operator::control::Control;
use crate::core::operator::verify::{Probe, ProbeResult, VerifyTarget};

fn key(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)
}

fn prompt(app: &App) -> String {
    app.confirm
        .as_ref()
        .map(|d| d.prompt.clone())
        .unwrap_or_default()
}

fn select_connection(app: &mut App, id: &str) {
    app.focus = Focus::Cooldowns;
    for _ in 0..10 {
        if app.selected_connection().is_some_and(|(_, c)| c.id == id) {
            return;
        }
        app.on_key(key('j'));
    }
    panic!("no Cooldowns row for '{id}'");
}

#[test]
fn v_on_a_cooldowns_row_probes_with_a_model_the_operator_cycles() {
    let mut app = App::new(Arc::new(snapshot()));
    select_connection(&mut app, "main");
    assert_eq!(app.on_key(key('v')), None, "opens the dialog");
    assert_eq!(
        prompt(&app),
        "Probe 'main' with anthropic/claude-sonnet-4 (1 token), clear it if it answers? (m model)",
        "the model its requests used lately comes first"
    );
    app.on_key(key('m'));
    assert!(
        prompt(&app).contains("with a (1 token)"),
        "{}",
        prompt(&app)
    );
    app.on_key(key('m'));
    assert!(
        prompt(&app).contains("with anthropic/claude-sonnet-4"),
        "wraps around"
    );
    assert_eq!(
        app.on_key(key('y')),
        Some(Action::Verify {
            target: VerifyTarget::Connection("main".into()),
            model: "anthropic/claude-sonnet-4".into(),
        })
    );
    let status = app
        .message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default();
    assert!(status.starts_with("probing 'main'"), "{status}");
}

#[test]
fn v_on_a_circuits_row_resets_the_breaker_after_a_probe() {
    let mut app = App::new(Arc::new(snapshot()));
    app.focus = Focus::Circuits;
    app.on_key(key('v'));
    assert!(
        prompt(&app).starts_with("Probe provider 'openrouter'"),
        "{}",
        prompt(&app)
    );
    assert_eq!(
        app.on_key(key('y')),
        Some(Action::Verify {
            target: VerifyTarget::Breaker("openrouter".into()),
            model: "anthropic/claude-sonnet-4".into(),
        })
    );
}

#[test]
fn passthrough_unknown_models_and_read_only_are_refused() {
    let mut app = App::new(Arc::new(snapshot()));
    select_connection(&mut app, "pass");
    assert_eq!(app.on_key(key('v')), None);
    assert!(app.confirm.is_none());
    let text = app
        .message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default();
    assert!(
        text.contains("passthrough") && text.contains("c clears"),
        "{text}"
    );

    let mut snap = snapshot();
    snap.recent.clear();
    snap.combos.clear();
    let mut app = App::new(Arc::new(snap));
    select_connection(&mut app, "main");
    app.on_key(key('v'));
    assert!(app.confirm.is_none());
    let text = app
        .message
        .as_ref()
        .map(|m| m.text.clone())
        .unwrap_or_default();
    assert!(text.contains("no model known"), "{text}");

    let mut app = App::new(Arc::new(snapshot()));
    app.readonly = true;
    select_connection(&mut app, "main");
    assert_eq!(app.on_key(key('v')), None);
    assert!(app.confirm.is_none(), "no dialog in read-only mode");
}

/// Answers every probe with `status`.
struct Answers(u16);

impl Probe for Answers {
    fn probe<'a>(
        &'a self,
        _: &'a Provider,
        _: &'a Connection,
        _: &'a str,
    ) -> Pin<Box<dyn Future<Output = ProbeResult> + Send + 'a>> {
        let status = self.0;
        Box::pin(async move {
            ProbeResult {
                status: Some(status),
                latency_ms: 40,
                error: (status >= 300).then(|| format!("HTTP {status}: Overloaded")),
            }
        })
    }
}

const CONFIG: &str = r#"
[[providers]]
id = "p"
dialect = "anthropic"
base_url = "https://api.anthropic.com"
profile = "api_key"
  [[providers.connections]]
  id = "k1"
  auth = { env = "K1" }
"#;

fn control(status: u16) -> Control {
    let env = LoadEnv::fixed(&[("K1", "sk-ant-test")], "/tmp");
    let cfg = from_str(CONFIG, Path::new("t.toml"), &env).unwrap();
    let core = Core::new(Arc::new(cfg), Arc::new(ManualClock::new()), None);
    let control = Control::new(core, CancellationToken::new());
    control.set_probe(Arc::new(Answers(status)));
    control
}

#[test]
fn the_action_runs_through_control_and_words_the_probe() {
    let passing = control(200);
    let verify = |m: &str| Action::Verify {
        target: VerifyTarget::Connection("k1".into()),
        model: m.into(),
    };
    assert_eq!(
        perform(&passing, verify("claude-haiku")).text(),
        "verified 'k1' with claude-haiku (200 in 40 ms): cooldown cleared"
    );
    let failing = control(529);
    assert_eq!(
        perform(&failing, verify("claude-haiku")).text(),
        "verify failed on 'k1' with claude-haiku (529 in 40 ms): HTTP 529: Overloaded; nothing changed"
    );
    assert_eq!(
        perform(&failing, verify(" ")).text(),
        "verify of 'k1' not run: verify: name the model to probe, e.g. \"verify\": \"claude-haiku-4-5\""
    );
}
