//! Settings editor tests: keys through `App`, actions through a real `Control`, and the modal
//! rendered into a `TestBackend`.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use tokio_util::sync::CancellationToken;

use super::*;
use crate::clock::ManualClock;
use crate::config::{LoadEnv, from_str};
use crate::console::action::perform;
use crate::console::app::App;
use crate::console::test_support::{draw, line_with, snapshot, text};
use crate::console::theme::{Role, Theme};
use crate::core::Core;
use crate::core::operator::control::Control;

/// The file sets `base_cooldown = "2m"` (the default) and `max_cooldown = "30m"`.
const CONFIG: &str = r#"
[resilience.model_lockout]
enabled = true
base_cooldown = "2m"

[[providers]]
id = "openrouter"
dialect = "openai"
base_url = "https://openrouter.ai/api"
profile = "api_key"
  [[providers.connections]]
  id = "key-a"
  auth = "passthrough"
"#;

fn control() -> Control {
    let env = LoadEnv::fixed(&[], "/tmp");
    let cfg = from_str(CONFIG, Path::new("t.toml"), &env).unwrap();
    let core = Core::new(Arc::new(cfg), Arc::new(ManualClock::new()), None);
    Control::new(core, CancellationToken::new())
}

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

/// Presses `k`; an action goes through `control` and its outcome back into the app.
fn press(app: &mut App, control: &Control, k: KeyEvent) {
    if let Some(action) = app.on_key(k) {
        app.on_outcome(perform(control, action));
    }
}

fn open(readonly: bool) -> (App, Control) {
    let control = control();
    let mut app = App::new(Arc::new(snapshot()));
    app.readonly = readonly;
    press(&mut app, &control, key(KeyCode::Char('e')));
    assert!(app.editor.is_some(), "e opens the editor");
    (app, control)
}

fn select(app: &mut App, control: &Control, field: Field) {
    for _ in 0..FIELDS.len() {
        if app.editor.as_ref().unwrap().field() == field {
            return;
        }
        press(app, control, key(KeyCode::Tab));
    }
    panic!("{field:?} not reachable with tab");
}

/// Selects `field`, starts editing, replaces the text with `value` and accepts it.
fn set(app: &mut App, control: &Control, field: Field, value: &str) {
    select(app, control, field);
    press(app, control, key(KeyCode::Enter));
    for _ in 0..40 {
        press(app, control, key(KeyCode::Backspace));
    }
    for c in value.chars() {
        press(app, control, key(KeyCode::Char(c)));
    }
    press(app, control, key(KeyCode::Enter));
}

fn message(app: &App) -> &str {
    app.message.as_ref().map_or("", |m| m.text.as_str())
}

#[test]
fn max_below_base_is_refused_and_the_message_shows_under_the_field() {
    let (mut app, control) = open(false);
    set(&mut app, &control, Field::MaxCooldown, "1m");
    press(&mut app, &control, key(KeyCode::Char('s')));
    let editor = app.editor.as_ref().expect("stays open on a refusal");
    let i = FIELDS
        .iter()
        .position(|f| *f == Field::MaxCooldown)
        .unwrap();
    let err = editor.errors[i].clone().expect("message on max_cooldown");
    assert!(err.contains("base_cooldown"), "{err}");
    assert!(message(&app).contains("not saved"), "{}", message(&app));
    let (live, overrides) = control.settings();
    assert_eq!(
        live.model_lockout.max_cooldown,
        Duration::from_secs(30 * 60)
    );
    assert!(overrides.is_empty(), "nothing applied");
    let buf = draw(&app, &Theme::default(), 120, 40);
    let t = text(&buf);
    let rows: Vec<&str> = t.lines().collect();
    let at = rows
        .iter()
        .position(|l| l.contains("max_cooldown "))
        .unwrap();
    assert!(
        rows[at].contains("\"1m\"") || rows[at].contains("1m"),
        "{}",
        rows[at]
    );
    assert!(
        rows[at + 1].contains("↳") && rows[at + 1].contains("base_cooldown"),
        "{t}"
    );
    let error_fg = Theme::default().style(Role::Error).fg;
    let (x, y) = crate::console::test_support::find(&buf, "↳").unwrap();
    assert_eq!(Some(buf[(x, y)].fg), error_fg);
}

#[test]
fn a_valid_save_changes_the_live_settings_and_marks_the_overrides() {
    let (mut app, control) = open(false);
    set(&mut app, &control, Field::BaseCooldown, "3m");
    set(&mut app, &control, Field::MaxCooldown, "\"45m\"");
    set(
        &mut app,
        &control,
        Field::Base(crate::config::Profile::ApiKey),
        "5s",
    );
    press(&mut app, &control, key(KeyCode::Char('s')));
    assert!(app.editor.is_none(), "closes on success");
    assert_eq!(message(&app), "saved 3 settings");
    let (live, overrides) = control.settings();
    assert_eq!(live.model_lockout.base_cooldown, Duration::from_secs(180));
    assert_eq!(
        live.model_lockout.max_cooldown,
        Duration::from_secs(45 * 60)
    );
    let api = live.cooldown.get(&crate::config::Profile::ApiKey).unwrap();
    assert_eq!(api.base, Duration::from_secs(5));
    assert!(Field::BaseCooldown.is_overridden(&overrides));
    assert!(!Field::Enabled.is_overridden(&overrides));

    // Reopen: the overridden fields carry `*` in the title role and the file's value.
    press(&mut app, &control, key(KeyCode::Char('e')));
    let buf = draw(&app, &Theme::default(), 120, 40);
    let base = line_with(&buf, "base_cooldown ");
    assert!(
        base.contains("*") && base.contains("\"3m\"") && base.contains("file: \"2m\""),
        "{base}"
    );
    let enabled = line_with(&buf, "enabled ");
    assert!(
        !enabled.contains('*') && !enabled.contains("file:"),
        "{enabled}"
    );
    let (x, y) = crate::console::test_support::find(&buf, "*  base_cooldown").unwrap();
    assert_eq!(
        buf[(x, y)].fg,
        Theme::default().style(Role::Title).fg.unwrap()
    );
}

#[test]
fn u_reverts_one_override_and_keeps_the_others() {
    let (mut app, control) = open(false);
    set(&mut app, &control, Field::BaseCooldown, "3m");
    set(&mut app, &control, Field::Exponential, "false");
    press(&mut app, &control, key(KeyCode::Char('s')));
    press(&mut app, &control, key(KeyCode::Char('e')));
    select(&mut app, &control, Field::BaseCooldown);
    press(&mut app, &control, key(KeyCode::Char('u')));
    assert!(
        message(&app).contains("model_lockout.base_cooldown reverted to the file's value \"2m\""),
        "{}",
        message(&app)
    );
    let (live, overrides) = control.settings();
    assert_eq!(live.model_lockout.base_cooldown, Duration::from_secs(120));
    assert!(!live.model_lockout.exponential, "the other override stays");
    assert!(!Field::BaseCooldown.is_overridden(&overrides));
    assert!(Field::Exponential.is_overridden(&overrides));
    let editor = app.editor.as_ref().expect("stays open, refreshed");
    assert!(!Field::BaseCooldown.is_overridden(&editor.view.overrides));
    // `u` on a field without an override says so; `U` drops every override.
    press(&mut app, &control, key(KeyCode::Char('u')));
    assert!(message(&app).contains("already has the file's value"));
    press(&mut app, &control, key(KeyCode::Char('U')));
    assert!(control.settings().1.is_empty());
    assert!(control.settings().0.model_lockout.exponential);
}

#[test]
fn a_revert_that_would_leave_the_rest_invalid_is_refused() {
    let (mut app, control) = open(false);
    set(&mut app, &control, Field::BaseCooldown, "40m");
    set(&mut app, &control, Field::MaxCooldown, "1h");
    press(&mut app, &control, key(KeyCode::Char('s')));
    assert_eq!(message(&app), "saved 2 settings");
    press(&mut app, &control, key(KeyCode::Char('e')));
    select(&mut app, &control, Field::MaxCooldown);
    press(&mut app, &control, key(KeyCode::Char('u')));
    let (live, overrides) = control.settings();
    assert_eq!(
        live.model_lockout.max_cooldown,
        Duration::from_secs(3600),
        "unchanged"
    );
    assert!(Field::MaxCooldown.is_overridden(&overrides));
    let editor = app.editor.as_ref().unwrap();
    let i = FIELDS
        .iter()
        .position(|f| *f == Field::MaxCooldown)
        .unwrap();
    assert!(
        editor.errors[i].is_some(),
        "the refusal shows under the field"
    );
}

#[test]
fn type_errors_are_caught_before_control_and_esc_cancels_a_field_edit() {
    let (mut app, control) = open(false);
    set(&mut app, &control, Field::Enabled, "maybe");
    let i = FIELDS.iter().position(|f| *f == Field::Enabled).unwrap();
    assert_eq!(
        app.editor.as_ref().unwrap().errors[i].as_deref(),
        Some("expected true or false")
    );
    press(&mut app, &control, key(KeyCode::Char('s')));
    assert_eq!(message(&app), "not saved: fix the marked field");
    assert!(control.settings().1.is_empty());
    // Esc while typing cancels only the field edit; esc again closes the editor.
    press(&mut app, &control, key(KeyCode::Enter));
    press(&mut app, &control, key(KeyCode::Char('x')));
    press(&mut app, &control, key(KeyCode::Esc));
    let editor = app.editor.as_ref().unwrap();
    assert!(editor.input.is_none());
    assert_eq!(editor.pending[i].as_deref(), Some("maybe"));
    press(&mut app, &control, key(KeyCode::Esc));
    assert!(app.editor.is_none());
    assert_eq!(message(&app), "settings: dropped 1 unsaved edits");
}

#[test]
fn read_only_mode_opens_the_editor_for_viewing_only() {
    let (mut app, control) = open(true);
    let t = text(&draw(&app, &Theme::default(), 120, 40));
    assert!(t.contains("Settings (read-only)"), "{t}");
    select(&mut app, &control, Field::MaxCooldown);
    press(&mut app, &control, key(KeyCode::Enter));
    assert!(app.editor.as_ref().unwrap().input.is_none());
    assert!(message(&app).contains("read-only"));
    press(&mut app, &control, key(KeyCode::Char('U')));
    assert!(message(&app).contains("read-only"));
}

#[test]
fn every_field_sets_and_unsets_cleanly() {
    let control = control();
    let view = crate::console::action::settings_view(&control).unwrap();
    for field in FIELDS {
        let shown = view.value(field, true);
        let value = field
            .parse(&shown)
            .unwrap_or_else(|e| panic!("{field:?} {shown}: {e}"));
        let mut patch = crate::core::operator::control::SettingsPatch::default();
        field.set(&mut patch, value);
        assert!(field.is_overridden(&patch), "{field:?}");
        assert!(FIELDS.iter().filter(|f| f.is_overridden(&patch)).count() == 1);
        control
            .patch_settings(&patch)
            .unwrap_or_else(|e| panic!("{field:?}: the file's own value must validate: {e}"));
        field.unset(&mut patch);
        assert!(patch.is_empty(), "{field:?} left {patch:?}");
        assert!(field.owns(&field.key()));
        assert!(field.owns(&format!("resilience.{}[0]", field.key())));
    }
    assert!(
        !Field::Base(crate::config::Profile::Oauth)
            .owns("connection_cooldown.oauth.max_backoff_level")
    );
    assert_eq!(
        Field::ErrorCodes.parse("429, 503"),
        Ok(Value::Codes(vec![429, 503]))
    );
    assert_eq!(
        Field::BaseCooldown.parse("90s"),
        Ok(Value::Duration("90s".into()))
    );
    assert!(Field::MaxBackoffSteps.parse("ten").is_err());
}

#[test]
fn the_editor_never_panics_at_small_sizes() {
    let (mut app, control) = open(false);
    set(&mut app, &control, Field::MaxCooldown, "1m");
    press(&mut app, &control, key(KeyCode::Char('s')));
    select(
        &mut app,
        &control,
        Field::MaxLevel(crate::config::Profile::Local),
    );
    press(&mut app, &control, key(KeyCode::Enter));
    for (w, h) in [(59, 14), (60, 15), (80, 24), (160, 48), (200, 60), (1, 1)] {
        let t = text(&draw(&app, &Theme::default(), w, h));
        if (w, h) == (60, 15) {
            assert!(
                t.contains("max_backoff_level"),
                "selected field scrolled into view:\n{t}"
            );
        }
    }
}

#[test]
fn preflight_thresholds_parse_as_finite_fractions_and_control_checks_their_order() {
    assert_eq!(
        Field::PreflightCutoff.parse("0.05"),
        Ok(Value::Fraction("0.05".into()))
    );
    assert_eq!(
        Field::PreflightWarn.parse("1"),
        Ok(Value::Fraction("1".into()))
    );
    for bad in ["abc", "nan", "inf", "\"0.1\""] {
        assert!(Field::PreflightCutoff.parse(bad).is_err(), "{bad}");
    }
    let control = control();
    let mut patch = crate::core::operator::control::SettingsPatch::default();
    Field::PreflightCutoff.set(&mut patch, Value::Fraction("0.5".into()));
    let err = control.patch_settings(&patch).unwrap_err();
    let crate::core::operator::control::ControlError::Invalid { field, .. } = err else {
        panic!("{err:?}");
    };
    assert!(Field::PreflightWarn.owns(&field), "{field}");
    Field::PreflightWarn.set(&mut patch, Value::Fraction("0.6".into()));
    let s = control.patch_settings(&patch).unwrap();
    assert_eq!(
        (s.quota_preflight.cutoff, s.quota_preflight.warn),
        (0.5, 0.6)
    );
}

#[test]
fn the_rule_lists_are_edited_as_toml_and_checked_by_control() {
    let control = control();
    let view = crate::console::action::settings_view(&control).unwrap();
    assert_eq!(
        view.value(Field::ErrorRules, false),
        "[]",
        "the test file has none"
    );
    let text = r#"[{ id = "gw", statuses = [400], text_markers = ["plan exhausted"], reason = "quota_exhausted" }]"#;
    let Ok(value) = Field::ErrorRules.parse(text) else {
        panic!("a rule list parses");
    };
    let mut patch = crate::core::operator::control::SettingsPatch::default();
    Field::ErrorRules.set(&mut patch, value);
    control.patch_settings(&patch).unwrap();
    let view = crate::console::action::settings_view(&control).unwrap();
    let shown = view.value(Field::ErrorRules, false);
    assert!(
        shown.contains("id = \"gw\"") && shown.contains("reason = \"quota_exhausted\""),
        "{shown}"
    );
    assert_eq!(view.value(Field::ErrorRules, true), "[]", "the file's");
    assert!(Field::ErrorRules.is_overridden(&view.overrides));

    let bad = r#"[{ id = "gw", statuses = [400], text_markers = ["x"], reason = "sleepy" }]"#;
    let mut patch = crate::core::operator::control::SettingsPatch::default();
    Field::ErrorRules.set(&mut patch, Field::ErrorRules.parse(bad).unwrap());
    match control.patch_settings(&patch) {
        Err(crate::core::operator::control::ControlError::Invalid { field, .. }) => {
            assert!(Field::ErrorRules.owns(&field), "{field}");
        }
        other => panic!("accepted: {other:?}"),
    }
    for junk in ["gw", "[1, 2]", "[{ id = 3 }]", "{ id = \"x\" }"] {
        assert!(Field::ErrorRules.parse(junk).is_err(), "{junk}");
    }
    assert!(Field::Restatements.parse("[]").is_ok());
}
