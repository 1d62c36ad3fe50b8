//! The settings editor (console key `e`): the §3 model-lockout settings and
//! the §2 tunables (stream-stall switch, the hint-less `rate_limit_cooldown` — `"none"` when
//! unset — and `base` and `max_backoff_level` per profile) and the quota preflight switch and
//! thresholds as a form.
//!
//! Values are shown and typed in config syntax (`"2m"`, `true`, `[429, 503]`; a bare `2m` is
//! accepted for durations). Edits stay pending until `s`, which builds one
//! [`SettingsPatch`] of the changed fields; [`Control::patch_settings`] validates it with the
//! config file's rules, and a refusal keeps the editor open with the message under its field.
//! A `*` marks each field whose value overrides the config file (it is in the saved
//! overrides); `u` reverts one field to the file's value (the other overrides are re-applied),
//! `U` reverts them all. In read-only mode the editor only shows.
//!
//! [`Control::patch_settings`]: crate::core::operator::control::Control::patch_settings

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::action::Action;
use super::keymap::{Cmd, Keymap, Scope};
use crate::config::raw::{RawErrorRule, RawRestatement};
use crate::config::validate::default_cooldown;
use crate::config::{Profile, Resilience};
use crate::core::operator::control::{CooldownPatch, LockoutPatch, PreflightPatch, SettingsPatch};
use crate::core::operator::settings::RATE_LIMIT_COOLDOWN_NONE;

/// What the editor shows: the live settings, the overrides in force and the file's values.
#[derive(Debug, Clone)]
pub struct SettingsView {
    /// Settings in force (file + overrides).
    pub effective: Resilience,
    /// Operator overrides in force (from `Control::settings().1`).
    pub overrides: SettingsPatch,
    /// The config file's settings (what a revert goes back to).
    pub file: Resilience,
    /// The error and restatement rules in force.
    pub rules: RuleLists,
    /// The config file's rules.
    pub file_rules: RuleLists,
}

impl From<super::door::Settings> for SettingsView {
    fn from(s: super::door::Settings) -> Self {
        Self {
            effective: s.effective,
            overrides: s.overrides,
            file: s.file,
            rules: s.rules,
            file_rules: s.file_rules,
        }
    }
}

impl SettingsView {
    /// `field`'s value in config syntax: in force, or the file's when `file`.
    pub fn value(&self, field: Field, file: bool) -> String {
        let (r, rules) = if file {
            (&self.file, &self.file_rules)
        } else {
            (&self.effective, &self.rules)
        };
        match field {
            Field::ErrorRules => rules.error_rules.clone(),
            Field::Restatements => rules.restatement.clone(),
            other => other.value(r),
        }
    }
}

/// `[[error_rules]]` and `[[restatement]]` lists as the editor shows and takes them: TOML
/// arrays of inline tables with the config file's keys, e.g.
/// `[{ id = "gw", statuses = [400], text_markers = ["plan exhausted"], reason = "quota_exhausted" }]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleLists {
    /// The provider error rules (the built-in ones are not listed: they always apply).
    pub error_rules: String,
    /// The restatement rules.
    pub restatement: String,
}

impl RuleLists {
    /// From the admin API's listing `{"error_rules": [...], "restatement": [...]}`; a missing
    /// or unreadable list shows as `[]`.
    pub fn from_listing(v: &serde_json::Value) -> Self {
        Self {
            error_rules: toml_inline(v.get("error_rules")),
            restatement: toml_inline(v.get("restatement")),
        }
    }
}

fn toml_inline(v: Option<&serde_json::Value>) -> String {
    v.and_then(|v| toml::Value::try_from(v).ok())
        .map_or_else(|| "[]".to_owned(), |t| t.to_string())
}

/// One editable setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `model_lockout.enabled`.
    Enabled,
    /// `model_lockout.error_codes`.
    ErrorCodes,
    /// `model_lockout.base_cooldown`.
    BaseCooldown,
    /// `model_lockout.max_cooldown`.
    MaxCooldown,
    /// `model_lockout.max_backoff_steps`.
    MaxBackoffSteps,
    /// `model_lockout.exponential`.
    Exponential,
    /// `connection_cooldown.stream_stall_cooldown`.
    StreamStall,
    /// `connection_cooldown.rate_limit_cooldown` (`"none"` when unset: the ladder).
    RateLimitCooldown,
    /// `connection_cooldown.<profile>.base`.
    Base(Profile),
    /// `connection_cooldown.<profile>.max_backoff_level`.
    MaxLevel(Profile),
    /// `quota_preflight.enabled`.
    PreflightEnabled,
    /// `quota_preflight.cutoff`.
    PreflightCutoff,
    /// `quota_preflight.warn`.
    PreflightWarn,
    /// `[[error_rules]]`: the whole list, as a TOML array of inline tables.
    ErrorRules,
    /// `[[restatement]]`: the whole list, as a TOML array of inline tables.
    Restatements,
}

/// Every field, in form order.
pub const FIELDS: [Field; 19] = [
    Field::Enabled,
    Field::ErrorCodes,
    Field::BaseCooldown,
    Field::MaxCooldown,
    Field::MaxBackoffSteps,
    Field::Exponential,
    Field::StreamStall,
    Field::RateLimitCooldown,
    Field::Base(Profile::Oauth),
    Field::MaxLevel(Profile::Oauth),
    Field::Base(Profile::ApiKey),
    Field::MaxLevel(Profile::ApiKey),
    Field::Base(Profile::Local),
    Field::MaxLevel(Profile::Local),
    Field::PreflightEnabled,
    Field::PreflightCutoff,
    Field::PreflightWarn,
    Field::ErrorRules,
    Field::Restatements,
];

/// A parsed field value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// `true` / `false`.
    Bool(bool),
    /// A whole number.
    Int(i64),
    /// A duration as written (validated by `Control`).
    Duration(String),
    /// HTTP statuses.
    Codes(Vec<i64>),
    /// A finite fraction as written, e.g. `0.02` (range checked by `Control`).
    Fraction(String),
    /// A whole `[[error_rules]]` list (validated by `Control`).
    ErrorRules(Vec<RawErrorRule>),
    /// A whole `[[restatement]]` list (validated by `Control`).
    Restatements(Vec<RawRestatement>),
}

/// A threshold as the editor shows it (`0.02`, `0.2`, `1`).
fn fraction(f: f64) -> String {
    format!("{f}")
}

/// A TOML array of inline tables as rules of type `T` (the file's keys).
fn rule_list<T: serde::de::DeserializeOwned>(v: Option<toml::Value>) -> Result<Vec<T>, String> {
    let example = "a TOML list of rules, e.g. [{ id = \"gw\", statuses = [400], text_markers = [\"plan exhausted\"], reason = \"quota_exhausted\" }] ([] for none)";
    match v {
        Some(list @ toml::Value::Array(_)) => list
            .try_into::<Vec<T>>()
            .map_err(|e| format!("expected {example}: {}", e.message())),
        _ => Err(format!("expected {example}")),
    }
}

fn dur(d: std::time::Duration) -> String {
    format!("\"{}\"", humantime::format_duration(d))
}

impl Field {
    /// The config table it lives in, e.g. `resilience.connection_cooldown.oauth`.
    pub fn section(self) -> String {
        match self {
            Field::StreamStall | Field::RateLimitCooldown => {
                "resilience.connection_cooldown".to_owned()
            }
            Field::Base(p) | Field::MaxLevel(p) => {
                format!("resilience.connection_cooldown.{}", p.as_str())
            }
            Field::PreflightEnabled | Field::PreflightCutoff | Field::PreflightWarn => {
                "resilience.quota_preflight".to_owned()
            }
            Field::ErrorRules | Field::Restatements => "rules".to_owned(),
            _ => "resilience.model_lockout".to_owned(),
        }
    }

    /// The key within its table, e.g. `max_cooldown`.
    pub fn name(self) -> &'static str {
        match self {
            Field::Enabled => "enabled",
            Field::ErrorCodes => "error_codes",
            Field::BaseCooldown => "base_cooldown",
            Field::MaxCooldown => "max_cooldown",
            Field::MaxBackoffSteps => "max_backoff_steps",
            Field::Exponential => "exponential",
            Field::StreamStall => "stream_stall_cooldown",
            Field::RateLimitCooldown => "rate_limit_cooldown",
            Field::Base(_) => "base",
            Field::MaxLevel(_) => "max_backoff_level",
            Field::PreflightEnabled => "enabled",
            Field::PreflightCutoff => "cutoff",
            Field::PreflightWarn => "warn",
            Field::ErrorRules => "error_rules",
            Field::Restatements => "restatement",
        }
    }

    /// Dotted key as `Control` names it in errors, e.g. `model_lockout.max_cooldown`
    /// (`error_rules` for the rule lists).
    pub fn key(self) -> String {
        if matches!(self, Field::ErrorRules | Field::Restatements) {
            return self.name().to_owned();
        }
        let section = self.section();
        let table = section.trim_start_matches("resilience.");
        format!("{table}.{}", self.name())
    }

    /// True when an error about `error_field` (e.g. `model_lockout.error_codes[1]`) is about
    /// this field.
    pub fn owns(self, error_field: &str) -> bool {
        let key = self.key();
        let error_field = error_field.trim_start_matches("resilience.");
        error_field == key
            || error_field
                .strip_prefix(key.as_str())
                .is_some_and(|rest| rest.starts_with(['.', '[']))
    }

    /// The value in `r`, in config syntax (`"2m"`, `true`, `[429, 503]`, `10`); empty for
    /// the rule lists, which are not in `r` (see [`SettingsView::value`]).
    pub fn value(self, r: &Resilience) -> String {
        let ml = &r.model_lockout;
        let cd = |p: Profile| r.cooldown.get(&p).copied().unwrap_or(default_cooldown(p));
        match self {
            Field::Enabled => ml.enabled.to_string(),
            Field::ErrorCodes => format!(
                "[{}]",
                ml.error_codes
                    .iter()
                    .map(u16::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Field::BaseCooldown => dur(ml.base_cooldown),
            Field::MaxCooldown => dur(ml.max_cooldown),
            Field::MaxBackoffSteps => ml.max_backoff_steps.to_string(),
            Field::Exponential => ml.exponential.to_string(),
            Field::StreamStall => r.connection_cooldown.stream_stall_cooldown.to_string(),
            Field::RateLimitCooldown => r
                .connection_cooldown
                .rate_limit_cooldown
                .map_or_else(|| format!("\"{RATE_LIMIT_COOLDOWN_NONE}\""), dur),
            Field::Base(p) => dur(cd(p).base),
            Field::MaxLevel(p) => cd(p).max_backoff_level.to_string(),
            Field::PreflightEnabled => r.quota_preflight.enabled.to_string(),
            Field::PreflightCutoff => fraction(r.quota_preflight.cutoff),
            Field::PreflightWarn => fraction(r.quota_preflight.warn),
            Field::ErrorRules | Field::Restatements => String::new(),
        }
    }

    /// True when `overrides` sets this field (its value overrides the config file).
    pub fn is_overridden(self, overrides: &SettingsPatch) -> bool {
        let ml = overrides.model_lockout.as_ref();
        let cd = |p: Profile| overrides.connection_cooldown.get(p.as_str());
        let qp = overrides.quota_preflight.as_ref();
        match self {
            Field::Enabled => ml.is_some_and(|l| l.enabled.is_some()),
            Field::ErrorCodes => ml.is_some_and(|l| l.error_codes.is_some()),
            Field::BaseCooldown => ml.is_some_and(|l| l.base_cooldown.is_some()),
            Field::MaxCooldown => ml.is_some_and(|l| l.max_cooldown.is_some()),
            Field::MaxBackoffSteps => ml.is_some_and(|l| l.max_backoff_steps.is_some()),
            Field::Exponential => ml.is_some_and(|l| l.exponential.is_some()),
            Field::StreamStall => overrides.stream_stall_cooldown.is_some(),
            Field::RateLimitCooldown => overrides.rate_limit_cooldown.is_some(),
            Field::Base(p) => cd(p).is_some_and(|c| c.base.is_some()),
            Field::MaxLevel(p) => cd(p).is_some_and(|c| c.max_backoff_level.is_some()),
            Field::PreflightEnabled => qp.is_some_and(|q| q.enabled.is_some()),
            Field::PreflightCutoff => qp.is_some_and(|q| q.cutoff.is_some()),
            Field::PreflightWarn => qp.is_some_and(|q| q.warn.is_some()),
            Field::ErrorRules => overrides.error_rules.is_some(),
            Field::Restatements => overrides.restatement.is_some(),
        }
    }

    /// Parses `text` (config syntax) into this field's type. Range and ordering rules are left
    /// to `Control` (the config file's validation).
    pub fn parse(self, text: &str) -> Result<Value, String> {
        let text = text.trim();
        let toml_value = |t: &str| {
            toml::from_str::<toml::Table>(&format!("v = {t}"))
                .ok()
                .and_then(|mut t| t.remove("v"))
        };
        match self {
            Field::Enabled | Field::Exponential | Field::StreamStall | Field::PreflightEnabled => {
                match toml_value(text) {
                    Some(toml::Value::Boolean(b)) => Ok(Value::Bool(b)),
                    _ => Err("expected true or false".to_owned()),
                }
            }
            Field::MaxBackoffSteps | Field::MaxLevel(_) => match toml_value(text) {
                Some(toml::Value::Integer(n)) => Ok(Value::Int(n)),
                _ => Err("expected a whole number, e.g. 5".to_owned()),
            },
            Field::PreflightCutoff | Field::PreflightWarn => match toml_value(text) {
                Some(toml::Value::Float(f)) if f.is_finite() => Ok(Value::Fraction(text.into())),
                Some(toml::Value::Integer(n)) => Ok(Value::Fraction(n.to_string())),
                _ => Err("expected a fraction, e.g. 0.02".to_owned()),
            },
            Field::ErrorCodes => {
                let wrapped = if text.starts_with('[') {
                    text.to_owned()
                } else {
                    format!("[{text}]")
                };
                match toml_value(&wrapped) {
                    Some(toml::Value::Array(items)) => items
                        .iter()
                        .map(|v| v.as_integer().ok_or(()))
                        .collect::<Result<Vec<i64>, ()>>()
                        .map(Value::Codes)
                        .map_err(|()| "expected a list of statuses, e.g. [429, 503]".to_owned()),
                    _ => Err("expected a list of statuses, e.g. [429, 503]".to_owned()),
                }
            }
            Field::ErrorRules => rule_list(toml_value(text)).map(Value::ErrorRules),
            Field::Restatements => rule_list(toml_value(text)).map(Value::Restatements),
            Field::BaseCooldown
            | Field::MaxCooldown
            | Field::Base(_)
            | Field::RateLimitCooldown => {
                let inner = match toml_value(text) {
                    Some(toml::Value::String(s)) => s,
                    _ if !text.contains(['"', '\'']) => text.to_owned(),
                    _ => String::new(),
                };
                if inner.trim().is_empty() {
                    Err("expected a duration, e.g. \"2m\" or \"90s\"".to_owned())
                } else {
                    Ok(Value::Duration(inner.trim().to_owned()))
                }
            }
        }
    }

    /// Sets this field in `patch` (the value's type is the field's; others are ignored).
    pub fn set(self, patch: &mut SettingsPatch, value: Value) {
        fn lockout(patch: &mut SettingsPatch) -> &mut LockoutPatch {
            patch
                .model_lockout
                .get_or_insert_with(LockoutPatch::default)
        }
        fn preflight(patch: &mut SettingsPatch) -> &mut PreflightPatch {
            patch
                .quota_preflight
                .get_or_insert_with(PreflightPatch::default)
        }
        fn profile(patch: &mut SettingsPatch, p: Profile) -> &mut CooldownPatch {
            patch
                .connection_cooldown
                .entry(p.as_str().to_owned())
                .or_default()
        }
        match (self, value) {
            (Field::Enabled, Value::Bool(b)) => lockout(patch).enabled = Some(b),
            (Field::Exponential, Value::Bool(b)) => lockout(patch).exponential = Some(b),
            (Field::StreamStall, Value::Bool(b)) => patch.stream_stall_cooldown = Some(b),
            (Field::RateLimitCooldown, Value::Duration(d)) => patch.rate_limit_cooldown = Some(d),
            (Field::ErrorCodes, Value::Codes(c)) => lockout(patch).error_codes = Some(c),
            (Field::BaseCooldown, Value::Duration(d)) => lockout(patch).base_cooldown = Some(d),
            (Field::MaxCooldown, Value::Duration(d)) => lockout(patch).max_cooldown = Some(d),
            (Field::MaxBackoffSteps, Value::Int(n)) => lockout(patch).max_backoff_steps = Some(n),
            (Field::Base(p), Value::Duration(d)) => profile(patch, p).base = Some(d),
            (Field::MaxLevel(p), Value::Int(n)) => profile(patch, p).max_backoff_level = Some(n),
            (Field::PreflightEnabled, Value::Bool(b)) => preflight(patch).enabled = Some(b),
            (Field::PreflightCutoff, Value::Fraction(f)) => {
                preflight(patch).cutoff = f.parse::<f64>().ok().filter(|f| f.is_finite());
            }
            (Field::PreflightWarn, Value::Fraction(f)) => {
                preflight(patch).warn = f.parse::<f64>().ok().filter(|f| f.is_finite());
            }
            (Field::ErrorRules, Value::ErrorRules(r)) => patch.error_rules = Some(r),
            (Field::Restatements, Value::Restatements(r)) => patch.restatement = Some(r),
            _ => {}
        }
    }

    /// Removes this field from `patch`, dropping tables left empty (so
    /// [`SettingsPatch::is_empty`] holds once every field is gone).
    pub fn unset(self, patch: &mut SettingsPatch) {
        match self {
            Field::StreamStall => patch.stream_stall_cooldown = None,
            Field::RateLimitCooldown => patch.rate_limit_cooldown = None,
            Field::ErrorRules => patch.error_rules = None,
            Field::Restatements => patch.restatement = None,
            Field::PreflightEnabled | Field::PreflightCutoff | Field::PreflightWarn => {
                if let Some(q) = patch.quota_preflight.as_mut() {
                    match self {
                        Field::PreflightEnabled => q.enabled = None,
                        Field::PreflightCutoff => q.cutoff = None,
                        _ => q.warn = None,
                    }
                    if *q == PreflightPatch::default() {
                        patch.quota_preflight = None;
                    }
                }
            }
            Field::Base(p) | Field::MaxLevel(p) => {
                if let Some(c) = patch.connection_cooldown.get_mut(p.as_str()) {
                    if self == Field::Base(p) {
                        c.base = None;
                    } else {
                        c.max_backoff_level = None;
                    }
                    if c.base.is_none() && c.max_backoff_level.is_none() {
                        patch.connection_cooldown.remove(p.as_str());
                    }
                }
            }
            _ => {
                if let Some(l) = patch.model_lockout.as_mut() {
                    match self {
                        Field::Enabled => l.enabled = None,
                        Field::ErrorCodes => l.error_codes = None,
                        Field::BaseCooldown => l.base_cooldown = None,
                        Field::MaxCooldown => l.max_cooldown = None,
                        Field::MaxBackoffSteps => l.max_backoff_steps = None,
                        _ => l.exponential = None,
                    }
                    if *l == LockoutPatch::default() {
                        patch.model_lockout = None;
                    }
                }
            }
        }
    }
}

/// What a key in the editor asks of the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditorEvent {
    /// Nothing beyond the editor's own state.
    None,
    /// Close the editor, with an optional status-bar line.
    Close(Option<String>),
    /// A status-bar line.
    Flash(String),
    /// An operator command to run through `Control`.
    Act(Action),
}

/// The open settings editor.
#[derive(Debug, Clone)]
pub struct Editor {
    /// Settings as last read from `Control`.
    pub view: SettingsView,
    /// Selected field (index into [`FIELDS`]).
    pub selected: usize,
    /// Unsaved edits per field (config syntax), by [`FIELDS`] index.
    pub pending: Vec<Option<String>>,
    /// Text being typed into the selected field, while editing.
    pub input: Option<String>,
    /// Validation messages per field, by [`FIELDS`] index.
    pub errors: Vec<Option<String>>,
    /// A refusal not tied to one field.
    pub notice: Option<String>,
    /// Read-only mode: showing only.
    pub readonly: bool,
}

const READ_ONLY: &str = "read-only mode: settings cannot be changed";

impl Editor {
    /// An editor over `view`, first field selected, nothing pending.
    pub fn new(view: SettingsView, readonly: bool) -> Self {
        Self {
            view,
            selected: 0,
            pending: vec![None; FIELDS.len()],
            input: None,
            errors: vec![None; FIELDS.len()],
            notice: None,
            readonly,
        }
    }

    /// Replaces the settings shown (after a revert), keeping the selection and other edits.
    pub fn refresh(&mut self, view: SettingsView) {
        self.view = view;
        self.notice = None;
    }

    /// The selected field.
    pub fn field(&self) -> Field {
        FIELDS.get(self.selected).copied().unwrap_or(Field::Enabled)
    }

    /// The value shown for field `i`: the pending edit, else the live value.
    pub fn shown(&self, i: usize) -> String {
        match (self.pending.get(i).cloned().flatten(), FIELDS.get(i)) {
            (Some(p), _) => p,
            (None, Some(f)) => self.view.value(*f, false),
            (None, None) => String::new(),
        }
    }

    /// Number of fields with an unsaved edit.
    pub fn pending_count(&self) -> usize {
        self.pending.iter().filter(|p| p.is_some()).count()
    }

    /// Shows a `Control` refusal under the field it names (or as a notice).
    pub fn reject(&mut self, field: &str, message: String) {
        match FIELDS.iter().position(|f| f.owns(field)) {
            Some(i) => {
                if let Some(slot) = self.errors.get_mut(i) {
                    *slot = Some(message);
                }
                self.selected = i;
            }
            None => self.notice = Some(format!("{field}: {message}")),
        }
    }

    /// Applies one key (the app has already handled quit and help).
    pub fn on_key(&mut self, keymap: &Keymap, key: KeyEvent) -> EditorEvent {
        if let Some(input) = self.input.as_mut() {
            match keymap.lookup(&key, Scope::Input).map(|b| b.spec.cmd) {
                Some(Cmd::AcceptInput) => self.accept(),
                Some(Cmd::CancelInput) => self.input = None,
                _ => match key.code {
                    KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                        input.push(c);
                    }
                    KeyCode::Backspace => {
                        input.pop();
                    }
                    _ => {}
                },
            }
            return EditorEvent::None;
        }
        let Some(cmd) = keymap.lookup(&key, Scope::Editor).map(|b| b.spec.cmd) else {
            return EditorEvent::None;
        };
        let n = FIELDS.len();
        match cmd {
            Cmd::FieldNext => self.selected = (self.selected + 1) % n,
            Cmd::FieldPrev => self.selected = (self.selected + n - 1) % n,
            Cmd::CloseSettings => {
                let dropped = self.pending_count();
                return EditorEvent::Close(
                    (dropped > 0).then(|| format!("settings: dropped {dropped} unsaved edits")),
                );
            }
            _ if self.readonly => return EditorEvent::Flash(READ_ONLY.to_owned()),
            Cmd::EditField => self.input = Some(self.shown(self.selected)),
            Cmd::SaveSettings => return self.save(),
            Cmd::RevertField => return self.revert_field(),
            Cmd::RevertAll => {
                if self.view.overrides.is_empty() && self.pending_count() == 0 {
                    return EditorEvent::Flash("nothing to revert: no overrides".to_owned());
                }
                self.pending.iter_mut().for_each(|p| *p = None);
                self.errors.iter_mut().for_each(|e| *e = None);
                return EditorEvent::Act(Action::RevertAllSettings);
            }
            _ => {}
        }
        EditorEvent::None
    }

    fn accept(&mut self) {
        let Some(text) = self.input.take() else {
            return;
        };
        let i = self.selected;
        let Some(field) = FIELDS.get(i) else {
            return;
        };
        let text = text.trim().to_owned();
        let live = self.view.value(*field, false);
        let error = field.parse(&text).err();
        if let Some(slot) = self.pending.get_mut(i) {
            *slot = (text != live).then_some(text);
        }
        if let Some(slot) = self.errors.get_mut(i) {
            *slot = error;
        }
    }

    fn save(&mut self) -> EditorEvent {
        let mut patch = SettingsPatch::default();
        let mut count = 0;
        let mut first_bad = None;
        for (i, field) in FIELDS.iter().enumerate() {
            let Some(text) = self.pending.get(i).cloned().flatten() else {
                continue;
            };
            match field.parse(&text) {
                Ok(v) => {
                    field.set(&mut patch, v);
                    count += 1;
                }
                Err(e) => {
                    if let Some(slot) = self.errors.get_mut(i) {
                        *slot = Some(e);
                    }
                    first_bad.get_or_insert(i);
                }
            }
        }
        if let Some(i) = first_bad {
            self.selected = i;
            return EditorEvent::Flash("not saved: fix the marked field".to_owned());
        }
        if count == 0 {
            return EditorEvent::Flash("no changes to save".to_owned());
        }
        self.errors.iter_mut().for_each(|e| *e = None);
        self.notice = None;
        EditorEvent::Act(Action::SaveSettings {
            patch: Box::new(patch),
            count,
        })
    }

    fn revert_field(&mut self) -> EditorEvent {
        let i = self.selected;
        let field = self.field();
        if let Some(slot) = self.pending.get_mut(i)
            && slot.take().is_some()
        {
            if let Some(e) = self.errors.get_mut(i) {
                *e = None;
            }
            return EditorEvent::Flash(format!("{}: edit dropped", field.key()));
        }
        if field.is_overridden(&self.view.overrides) {
            EditorEvent::Act(Action::RevertSetting(field))
        } else {
            EditorEvent::Flash(format!("{} already has the file's value", field.key()))
        }
    }
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
