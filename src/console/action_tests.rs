//! `apply` against a real `Control` over a `Core` driven by a `ManualClock`.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::*;
use crate::clock::ManualClock;
use crate::config::{LoadEnv, from_str};
use crate::core::Core;
use crate::core::operator::control::Control;
use crate::policy::select::Candidate;
use crate::snapshot::ConnectionStatus;

const CONFIG: &str = r#"
[[providers]]
id = "openrouter"
dialect = "openai"
base_url = "https://openrouter.ai/api"
profile = "api_key"
  [[providers.connections]]
  id = "key-a"
  auth = "passthrough"
  [[providers.connections]]
  id = "key-b"
  auth = { env = "KEY_B" }

[[providers]]
id = "anthropic"
dialect = "anthropic"
base_url = "https://api.anthropic.com"
  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;

fn control() -> (Control, CancellationToken) {
    control_with(CONFIG)
}

fn control_with(config: &str) -> (Control, CancellationToken) {
    let (control, _, token) = rig_with(config);
    (control, token)
}

/// The door plus the core behind it: tests drive failures through the request path's own
/// handle (`Core::report`), as the proxy does, and act through the door.
fn rig_with(config: &str) -> (Control, Core, CancellationToken) {
    // key-b injects its own key: a ban marker on a passthrough connection is the client's
    // own credential and never terminates the shared connection.
    let env = LoadEnv::fixed(&[("KEY_B", "sk-test-key-b-0123")], "/tmp");
    let cfg = from_str(config, Path::new("t.toml"), &env).unwrap();
    let clock = ManualClock::new();
    let core = Core::new(Arc::new(cfg), Arc::new(clock), None);
    let token = CancellationToken::new();
    (Control::new(core.clone(), token.clone()), core, token)
}

/// Sends one failed attempt through the core's choke point for provider 0, connection `conn`.
fn fail(core: &Core, conn: usize, status: u16, body: &str) {
    let cand = Candidate {
        provider: 0,
        connection: conn,
        model: "z-ai/glm-5".into(),
        rewrite: false,
        target: 0,
        key: crate::config::keys::ConnKey::new(0, conn as u32),
    };
    let ticket = core
        .admit_candidate(&cand, core.clock().now())
        .expect("admitted");
    let end = sluice_end(status, body.as_bytes());
    let classified = core.classify(0, &end);
    core.report(ticket, &classified);
}

fn sluice_end(status: u16, body: &[u8]) -> crate::core::resilience::AttemptEnd<'_> {
    crate::core::resilience::AttemptEnd {
        status: Some(status),
        body,
        ..Default::default()
    }
}

fn status_of(control: &Control, id: &str) -> ConnectionStatus {
    let snap = control.snapshot();
    snap.providers
        .iter()
        .flat_map(|p| &p.connections)
        .find(|c| c.id == id)
        .map(|c| c.status)
        .unwrap()
}

#[test]
fn reset_of_a_closed_breaker_names_the_provider() {
    let (control, _) = control();
    let msg = apply(&control, Action::ResetBreaker(Some("openrouter".into())));
    assert_eq!(msg, "breaker 'openrouter' reset to closed");
    let msg = apply(&control, Action::ResetBreaker(None));
    assert_eq!(msg, "reset 2 breakers to closed: openrouter, anthropic");
}

#[test]
fn reset_of_an_unknown_provider_reports_the_error() {
    let (control, _) = control();
    let msg = apply(&control, Action::ResetBreaker(Some("nope".into())));
    assert_eq!(msg, "reset failed: unknown provider 'nope'");
}

#[test]
fn clear_on_an_active_connection_changes_nothing() {
    let (control, _) = control();
    let msg = apply(
        &control,
        Action::ClearCooldowns(ClearTarget::Connections(vec!["mine".into()])),
    );
    assert_eq!(msg, "cleared 0, 1 unchanged");
    let msg = apply(
        &control,
        Action::ClearCooldowns(ClearTarget::Connections(vec!["ghost".into()])),
    );
    assert_eq!(msg, "clear failed: unknown connection 'ghost'");
}

#[test]
fn clear_removes_a_cooldown_and_says_why_a_terminal_row_stays() {
    let (control, core, _) = rig_with(CONFIG);
    fail(&core, 0, 429, "{\"error\":\"slow down\"}");
    fail(&core, 1, 403, "{\"error\":\"account has been disabled\"}");
    assert_eq!(status_of(&control, "key-a"), ConnectionStatus::Cooling);
    assert_eq!(status_of(&control, "key-b"), ConnectionStatus::Banned);

    let msg = apply(
        &control,
        Action::ClearCooldowns(ClearTarget::All {
            provider: Some("openrouter".into()),
        }),
    );
    assert_eq!(msg, "cleared 1, skipped 1 terminal: banned (key-b)");
    assert_eq!(status_of(&control, "key-a"), ConnectionStatus::Active);
    assert_eq!(
        status_of(&control, "key-b"),
        ConnectionStatus::Banned,
        "terminal never cleared"
    );
}

#[test]
fn reenable_removes_a_live_lockout() {
    let config = format!("{CONFIG}\n[resilience.model_lockout]\nenabled = true\n");
    let (control, core, _) = rig_with(&config);
    fail(&core, 0, 503, "{\"error\":\"unavailable\"}");
    let locks = control.snapshot().lockouts;
    assert_eq!(locks.len(), 1, "{locks:?}");
    let l = &locks[0];
    let action = Action::ReenableModel {
        provider: l.provider.clone(),
        connection: l.connection.clone(),
        model: l.model.clone(),
    };
    assert_eq!(
        apply(&control, action.clone()),
        "re-enabled 'z-ai/glm-5' on openrouter:key-a"
    );
    assert!(control.snapshot().lockouts.is_empty());
    assert_eq!(
        apply(&control, action),
        "'z-ai/glm-5' on openrouter:key-a was not locked (expired?)"
    );
}

#[test]
fn reenable_of_a_missing_lockout_says_so() {
    let (control, _) = control();
    let msg = apply(
        &control,
        Action::ReenableModel {
            provider: "openrouter".into(),
            connection: "key-a".into(),
            model: "z-ai/glm-5".into(),
        },
    );
    assert_eq!(
        msg,
        "'z-ai/glm-5' on openrouter:key-a was not locked (expired?)"
    );
    let msg = apply(
        &control,
        Action::ReenableModel {
            provider: "openrouter".into(),
            connection: "mine".into(),
            model: "m".into(),
        },
    );
    assert_eq!(msg, "re-enable failed: unknown connection 'mine'");
}

#[test]
fn quit_requests_shutdown_and_is_the_only_non_mutating_action() {
    let (control, token) = control();
    assert!(!Action::Quit.is_mutating());
    assert!(Action::ResetBreaker(None).is_mutating());
    assert!(Action::ClearCooldowns(ClearTarget::All { provider: None }).is_mutating());
    assert_eq!(apply(&control, Action::Quit), "shutting down");
    assert!(token.is_cancelled());
}
