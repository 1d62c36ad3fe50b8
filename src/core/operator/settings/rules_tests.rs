//! Live `[[error_rules]]` / `[[restatement]]` lists (`PATCH /api/resilience`): a saved list
//! replaces the file's, is validated with the file's rules, and the built-in rules stay last.

use std::path::Path;

use super::*;
use crate::config::raw::{RawErrorRule, RawRestatement};
use crate::config::{LoadEnv, from_str};

const FILE: &str = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n\n[[error_rules]]\nid = \"file-rule\"\nstatuses = [400]\ntext_markers = [\"from the file\"]\nreason = \"quota_exhausted\"\n\n[[restatement]]\nid = \"file-restate\"\nfrom_statuses = [400]\nto_status = 429\ntext_markers = [\"restate me\"]\n";

fn cfg() -> Config {
    from_str(FILE, Path::new("t.toml"), &LoadEnv::fixed(&[], "/tmp")).unwrap()
}

fn rule(id: &str, reason: &str) -> RawErrorRule {
    RawErrorRule {
        id: Some(id.into()),
        statuses: vec![403],
        text_markers: vec!["live marker".into()],
        reason: Some(reason.into()),
        scope: Some("model".into()),
        base_cooldown: Some("10m".into()),
        ..Default::default()
    }
}

fn ids(r: &LiveRules) -> Vec<&str> {
    r.error_rules.iter().map(|r| r.id.as_str()).collect()
}

#[test]
fn without_a_saved_list_the_files_rules_apply_then_the_built_in_ones() {
    let r = live_rules(&cfg(), &SettingsPatch::default()).unwrap();
    assert_eq!(ids(&r), vec!["file-rule", "cn-model-access"]);
    assert_eq!(r.restatement[0].id, "file-restate");
    let listed = r.listing();
    assert_eq!(listed["error_rules"][0]["id"], "file-rule");
    assert_eq!(
        listed["error_rules"].as_array().unwrap().len(),
        1,
        "built-ins apart"
    );
    assert_eq!(listed["builtin"]["error_rules"][0]["id"], "cn-model-access");
    assert_eq!(listed["builtin"]["error_rules"][0]["base_cooldown"], "6h");
}

#[test]
fn a_saved_list_replaces_the_files_and_an_empty_one_switches_it_off() {
    let patch = SettingsPatch {
        error_rules: Some(vec![rule("live", "auth_error")]),
        ..Default::default()
    };
    let r = live_rules(&cfg(), &patch).unwrap();
    assert_eq!(ids(&r), vec!["live", "cn-model-access"]);
    assert_eq!(
        r.error_rules[0].base_cooldown,
        Some(std::time::Duration::from_secs(600))
    );
    assert_eq!(
        r.restatement[0].id, "file-restate",
        "restatements untouched"
    );

    let off = SettingsPatch {
        error_rules: Some(Vec::new()),
        restatement: Some(Vec::new()),
        ..Default::default()
    };
    let r = live_rules(&cfg(), &off).unwrap();
    assert_eq!(ids(&r), vec!["cn-model-access"], "the built-in rule stays");
    assert!(r.restatement.is_empty());
}

#[test]
fn a_saved_list_is_checked_with_the_files_rules() {
    let bad = |patch: SettingsPatch| match live_rules(&cfg(), &patch) {
        Err(ControlError::Invalid { field, message }) => (field, message),
        other => panic!("accepted: {other:?}"),
    };
    let (field, message) = bad(SettingsPatch {
        error_rules: Some(vec![rule("x", "sleepy")]),
        ..Default::default()
    });
    assert_eq!(field, "error_rules.x.reason");
    assert!(message.contains("'sleepy' is not a reason"), "{message}");
    let mut other = rule("y", "auth_error");
    other.provider = Some("nope".into());
    let (field, _) = bad(SettingsPatch {
        error_rules: Some(vec![other]),
        ..Default::default()
    });
    assert_eq!(field, "error_rules.y.provider");
    let (field, _) = bad(SettingsPatch {
        error_rules: Some(vec![rule("dup", "auth_error"), rule("dup", "banned")]),
        ..Default::default()
    });
    assert!(field.starts_with("error_rules.dup"), "{field}");
    let (field, _) = bad(SettingsPatch {
        restatement: Some(vec![RawRestatement {
            id: Some("r".into()),
            from_statuses: vec![400],
            to_status: Some(200),
            text_markers: vec!["x".into()],
            ..Default::default()
        }]),
        ..Default::default()
    });
    assert_eq!(field, "restatement.r.to_status");
}

#[test]
fn a_saved_list_merges_as_a_whole_and_round_trips_through_json() {
    let mut all = SettingsPatch {
        error_rules: Some(vec![rule("a", "auth_error")]),
        ..Default::default()
    };
    all.merge(&SettingsPatch {
        error_rules: Some(vec![rule("b", "banned")]),
        ..Default::default()
    });
    let names: Vec<_> = all
        .error_rules
        .iter()
        .flatten()
        .map(|r| r.id.clone())
        .collect();
    assert_eq!(
        names,
        vec![Some("b".to_string())],
        "a later list replaces the earlier one"
    );
    assert!(!all.is_empty());
    let json = serde_json::to_string(&all).unwrap();
    assert!(!json.contains("null"), "{json}");
    let back: SettingsPatch = serde_json::from_str(&json).unwrap();
    assert_eq!(back, all);
}
