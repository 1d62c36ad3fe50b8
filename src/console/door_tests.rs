//! The console over a [`Door`] that is not `Control` (what an attached console has): refusals
//! and an unreachable sluice end up in the status bar, and a lost link shows "reconnecting…"
//! in the header until snapshots come back.

use std::sync::Mutex;

use super::action::{Action, Outcome, perform};
use super::door::{Door, DoorError, Link, Settings};
use super::test_support::*;
use super::theme::Theme;
use crate::core::operator::control::{ClearReport, ClearTarget, ControlError, SettingsPatch};
use crate::snapshot::Snapshot;

/// A door that answers every call with `answer` and records the calls.
struct Scripted {
    answer: DoorError,
    calls: Mutex<Vec<String>>,
}

impl Scripted {
    fn new(answer: DoorError) -> Self {
        Scripted {
            answer,
            calls: Mutex::new(Vec::new()),
        }
    }

    fn refuse<T>(&self, call: &str) -> Result<T, DoorError> {
        self.calls.lock().unwrap().push(call.to_owned());
        Err(self.answer.clone())
    }
}

impl Door for Scripted {
    fn settings(&self) -> Result<Settings, DoorError> {
        self.refuse("settings")
    }
    fn patch_settings(&self, _: &SettingsPatch) -> Result<(), DoorError> {
        self.refuse("patch_settings")
    }
    fn replace_settings(&self, _: &SettingsPatch) -> Result<(), DoorError> {
        self.refuse("replace_settings")
    }
    fn revert_settings(&self) -> Result<(), DoorError> {
        self.refuse("revert_settings")
    }
    fn reset_breakers(&self, _: Option<&str>) -> Result<Vec<String>, DoorError> {
        self.refuse("reset_breakers")
    }
    fn clear_cooldowns(&self, _: &ClearTarget) -> Result<ClearReport, DoorError> {
        self.refuse("clear_cooldowns")
    }
    fn reenable_model(&self, _: &str, _: &str, _: &str) -> Result<bool, DoorError> {
        self.refuse("reenable_model")
    }
    fn inject_fault(
        &self,
        _: &crate::core::operator::faults::FaultRequest,
    ) -> Result<crate::snapshot::FaultView, DoorError> {
        self.refuse("inject_fault")
    }
    fn clear_faults(&self) -> Result<usize, DoorError> {
        self.refuse("clear_faults")
    }
    fn snapshot(&self) -> Result<Snapshot, DoorError> {
        self.refuse("snapshot")
    }
    fn reload_config(&self) -> Result<String, DoorError> {
        self.refuse("reload_config")
    }
    fn verify(
        &self,
        _: &crate::core::operator::verify::VerifyTarget,
        _: &str,
    ) -> Result<crate::core::operator::verify::VerifyReport, DoorError> {
        self.refuse("verify")
    }
    fn request_log_page(
        &self,
        _: Option<i64>,
        _: usize,
    ) -> Result<Vec<(i64, crate::snapshot::RequestView)>, DoorError> {
        self.refuse("request_log_page")
    }
    fn request_shutdown(&self) {
        self.calls.lock().unwrap().push("request_shutdown".into());
    }
}

const READONLY: &str = "sluice runs read-only (--readonly): operator actions are refused";

#[test]
fn a_refusal_from_the_running_sluice_is_the_status_line() {
    let door = Scripted::new(DoorError::Refused(READONLY.into()));
    let clear = perform(
        &door,
        Action::ClearCooldowns(ClearTarget::Connections(vec!["key-a".into()])),
    );
    assert_eq!(clear.text(), format!("clear failed: {READONLY}"));
    let reset = perform(&door, Action::ResetBreaker(None));
    assert_eq!(reset.text(), format!("reset failed: {READONLY}"));
    let save = perform(
        &door,
        Action::SaveSettings {
            patch: Box::default(),
            count: 1,
        },
    );
    assert_eq!(save.text(), format!("settings not changed: {READONLY}"));
    assert_eq!(
        *door.calls.lock().unwrap(),
        ["clear_cooldowns", "reset_breakers", "patch_settings"],
        "each action is one door call"
    );
}

#[test]
fn an_unreachable_sluice_and_an_invalid_value_read_as_such() {
    let door = Scripted::new(DoorError::Unreachable("connection refused".into()));
    let open = perform(&door, Action::OpenSettings);
    assert_eq!(
        open.text(),
        "cannot read the settings: cannot reach sluice: connection refused"
    );
    assert!(
        matches!(open, Outcome::Message(_)),
        "the editor does not open"
    );
    let invalid = Scripted::new(DoorError::Control(ControlError::Invalid {
        field: "queue.max_wait".into(),
        message: "not a duration".into(),
    }));
    let save = perform(
        &invalid,
        Action::SaveSettings {
            patch: Box::default(),
            count: 1,
        },
    );
    assert!(
        matches!(&save, Outcome::Rejected { field, .. } if field == "queue.max_wait"),
        "a field refusal keeps the editor's field message: {save:?}"
    );
    perform(&door, Action::Quit);
    assert_eq!(
        door.calls.lock().unwrap().last().unwrap(),
        "request_shutdown"
    );
}

#[test]
fn a_lost_link_shows_reconnecting_in_the_header_until_it_is_back() {
    let theme = Theme::default();
    let mut a = app();
    assert!(!text(&draw(&a, &theme, 160, 40)).contains("reconnecting"));
    a.set_link(&Link::Reconnecting("connection refused".into()));
    let lost = draw(&a, &theme, 160, 40);
    assert!(lines(&lost)[0].contains("reconnecting…"), "{}", text(&lost));
    assert!(
        text(&lost).contains("key-b"),
        "the last snapshot stays on screen"
    );
    a.set_link(&Link::Live);
    assert!(!text(&draw(&a, &theme, 160, 40)).contains("reconnecting"));
}
