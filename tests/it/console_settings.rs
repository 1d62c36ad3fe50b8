//! Console settings editor → live settings → restart (issue 5): a value saved through the
//! editor's own save path (`App` keys → `Action::SaveSettings` → `console::action::perform`,
//! i.e. `Control::patch_settings`) is live in `GET /api/resilience` with its override marker,
//! and both are still there after sluice restarts on the same database.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use serde_json::Value;
use sluice::console::action::{Action, Outcome, perform};
use sluice::console::app::App;
use sluice::core::operator::control::Control;
use tokio_util::sync::CancellationToken;

use crate::support::Sluice;
use crate::support::client;

const ENV: &[(&str, &str)] = &[("K1", "key-one")];

fn config(db: &std::path::Path) -> String {
    format!(
        r#"
[store]
path = "{db}"

[routing]
default_provider = ["p1"]

[[providers]]
id = "p1"
dialect = "openai"
base_url = "{{CLOSED}}"
profile = "api_key"
  [[providers.connections]]
  id = "k1"
  auth = {{ env = "K1" }}

[resilience.model_lockout]
enabled = false
base_cooldown = "300s"
max_cooldown = "3600s"
"#,
        db = db.display()
    )
}

async fn resilience(s: &Sluice) -> Value {
    let r = client::get(&s.admin("/api/resilience"), &[]).await;
    assert_eq!(r.status, 200, "GET /api/resilience: {}", r.text());
    r.json()
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// Opens the settings editor as the console does, edits `base_cooldown` (third field) to
/// `value` with the editor's keys and saves; returns the status-bar text.
fn save_base_cooldown_through_the_editor(s: &Sluice, value: &str) -> String {
    let control = Control::new(s.core().clone(), CancellationToken::new());
    let mut app = App::new(Arc::new(s.snapshot()));
    let open = app
        .on_key(key(KeyCode::Char('e')))
        .expect("e opens the editor");
    app.on_outcome(perform(&control, open));
    let editor = app.editor.as_ref().expect("editor open");
    assert_eq!(editor.selected, 0);
    for k in [KeyCode::Down, KeyCode::Down, KeyCode::Enter] {
        assert!(app.on_key(key(k)).is_none());
    }
    for _ in 0..32 {
        app.on_key(key(KeyCode::Backspace));
    }
    for c in value.chars() {
        app.on_key(key(KeyCode::Char(c)));
    }
    app.on_key(key(KeyCode::Enter));
    let save = app.on_key(key(KeyCode::Char('s'))).expect("s saves");
    assert!(
        matches!(&save, Action::SaveSettings { count: 1, .. }),
        "{save:?}"
    );
    let outcome = perform(&control, save);
    assert!(
        matches!(outcome, Outcome::Saved { count: 1 }),
        "{outcome:?}"
    );
    app.on_outcome(outcome);
    assert!(app.editor.is_none(), "a successful save closes the editor");
    app.message.map(|m| m.text).unwrap_or_default()
}

#[tokio::test]
async fn a_setting_saved_in_the_console_is_live_and_survives_a_restart() {
    let db_dir = tempfile::tempdir().unwrap();
    let cfg = config(&db_dir.path().join("state.db"));

    let s = Sluice::start(&cfg, ENV).await;
    let before = resilience(&s).await;
    assert_eq!(
        before["settings"]["model_lockout"]["base_cooldown"], "5m",
        "{before:#}"
    );
    assert!(
        before["overrides"]["model_lockout"]["base_cooldown"].is_null(),
        "no override yet: {before:#}"
    );

    let msg = save_base_cooldown_through_the_editor(&s, "45s");
    assert!(msg.contains("saved"), "{msg}");
    let live = resilience(&s).await;
    assert_eq!(
        live["settings"]["model_lockout"]["base_cooldown"], "45s",
        "{live:#}"
    );
    assert_eq!(
        live["overrides"]["model_lockout"]["base_cooldown"], "45s",
        "override marker: {live:#}"
    );
    s.stop().await;

    // A new instance on the same database (the config file still says 300s).
    let s = Sluice::start(&cfg, ENV).await;
    let after = resilience(&s).await;
    assert_eq!(
        after["settings"]["model_lockout"]["base_cooldown"], "45s",
        "the saved value is restored: {after:#}"
    );
    assert_eq!(
        after["overrides"]["model_lockout"]["base_cooldown"], "45s",
        "and still marked as an override: {after:#}"
    );
    s.stop().await;
}
