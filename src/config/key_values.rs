//! Renders a settings value (anything `Serialize`, e.g. a `SettingsPatch`) as the config-file
//! lines it stands for: `model_lockout.base_cooldown = "60s", queue.max_depth = 5`. Used for
//! log lines, so an operator reads the keys they would write in `config.toml`, not a Rust
//! struct dump.

use serde::Serialize;
use serde_json::Value;

/// `key.path = value` pairs joined by `", "`, sorted by key; strings are quoted
/// as in TOML, empty tables and nulls are left out. `(nothing)` when no field is set, and
/// `(unprintable)` if serialization fails.
pub fn key_values(value: &impl Serialize) -> String {
    let Ok(v) = serde_json::to_value(value) else {
        return "(unprintable)".into();
    };
    let mut out = Vec::new();
    flatten("", &v, &mut out);
    if out.is_empty() {
        "(nothing)".into()
    } else {
        out.join(", ")
    }
}

fn flatten(prefix: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Null => {}
        Value::Object(map) => {
            for (k, child) in map {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, child, out);
            }
        }
        leaf => out.push(format!("{prefix} = {leaf}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_fields_become_dotted_keys() {
        let v = json!({
            "stream_stall_cooldown": true,
            "model_lockout": {"enabled": true, "base_cooldown": "60s", "error_codes": [404, 429]},
            "queue": {"max_queue_depth": 5, "max_wait": null},
            "connection_cooldown": {}
        });
        assert_eq!(
            key_values(&v),
            "model_lockout.base_cooldown = \"60s\", model_lockout.enabled = true, model_lockout.error_codes = [404,429], queue.max_queue_depth = 5, stream_stall_cooldown = true"
        );
        assert_eq!(key_values(&json!({})), "(nothing)");
    }
}
