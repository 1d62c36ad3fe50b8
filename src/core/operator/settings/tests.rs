//! `rate_limit_cooldown` through a settings patch (`PATCH /api/resilience`).

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::config::{LoadEnv, from_str};

fn base(global: &str) -> Resilience {
    let env = LoadEnv::fixed(&[], "/tmp");
    let text = format!(
        "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n[resilience.connection_cooldown]\n{global}\n"
    );
    from_str(&text, Path::new("t.toml"), &env)
        .unwrap()
        .resilience
}

fn patch(v: &str) -> SettingsPatch {
    SettingsPatch {
        rate_limit_cooldown: Some(v.into()),
        ..Default::default()
    }
}

#[test]
fn a_patch_sets_the_global_rate_limit_cooldown_and_keeps_the_rest() {
    let b = base("ban_markers = [\"gone\"]");
    let out = apply_patch(&b, &patch("20s")).unwrap();
    assert_eq!(
        out.connection_cooldown.rate_limit_cooldown,
        Some(Duration::from_secs(20))
    );
    assert_eq!(
        out.connection_cooldown.ban_markers,
        vec!["gone".to_string()],
        "the file's other connection_cooldown keys are untouched"
    );
    // A patch without the key keeps the file's value.
    let b = base("rate_limit_cooldown = \"1m\"");
    let other = SettingsPatch {
        stream_stall_cooldown: Some(true),
        ..Default::default()
    };
    assert_eq!(
        apply_patch(&b, &other)
            .unwrap()
            .connection_cooldown
            .rate_limit_cooldown,
        Some(Duration::from_secs(60))
    );
}

#[test]
fn a_patch_is_validated_like_the_file() {
    let b = base("");
    for bad in ["0s", "500ms", "7h", "soon", "300000000000y"] {
        match apply_patch(&b, &patch(bad)) {
            Err(ControlError::Invalid { field, message }) => {
                assert_eq!(field, "connection_cooldown.rate_limit_cooldown", "{bad}");
                assert!(message.contains("\"1s\" to \"6h\""), "{bad}: {message}");
            }
            other => panic!("{bad}: expected Invalid, got {other:?}"),
        }
    }
}

#[test]
fn patches_merge_and_report_emptiness_with_the_new_key() {
    let mut merged = SettingsPatch::default();
    assert!(merged.is_empty());
    merged.merge(&patch("20s"));
    assert!(!merged.is_empty());
    merged.merge(&SettingsPatch::default());
    assert_eq!(merged.rate_limit_cooldown.as_deref(), Some("20s"));
    merged.merge(&patch("45s"));
    assert_eq!(merged.rate_limit_cooldown.as_deref(), Some("45s"));
    let json = serde_json::to_value(&merged).unwrap();
    assert_eq!(json, serde_json::json!({"rate_limit_cooldown": "45s"}));
    let back: SettingsPatch = serde_json::from_value(json).unwrap();
    assert_eq!(back, merged);
}
