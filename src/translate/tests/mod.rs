//! Golden, split-safety, property and bad-input tests of the translation layer. Fixtures live
//! in `tests/fixtures/translation/`; `SLUICE_BLESS=1` fills in missing `expected` values
//! (review the diff before committing), without it a missing value fails.

mod bad_input;
mod corpus;
mod current_clients;
mod golden;
mod property;
mod schema;
mod split;

use std::path::PathBuf;

use serde_json::Value;

use super::{ClientFormat, ResponseContext, TargetOptions};
use crate::config::Dialect;

pub(super) fn fixture_dir(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/translation")
        .join(sub)
}

pub(super) fn bless() -> bool {
    std::env::var_os("SLUICE_BLESS").is_some()
}

pub(super) fn client(s: &str) -> ClientFormat {
    match s {
        "anthropic" => ClientFormat::Anthropic,
        "chat" => ClientFormat::Chat,
        "responses" => ClientFormat::Responses,
        other => panic!("unknown client format {other}"),
    }
}

pub(super) fn dialect(s: &str) -> Dialect {
    match s {
        "anthropic" => Dialect::Anthropic,
        "openai" => Dialect::OpenAi,
        other => panic!("unknown dialect {other}"),
    }
}

/// A context from a case's optional `context` object.
pub(super) fn context(client_fmt: ClientFormat, v: Option<&Value>) -> ResponseContext {
    let v = v.cloned().unwrap_or(Value::Null);
    ResponseContext {
        client: client_fmt,
        client_model: v
            .get("client_model")
            .and_then(Value::as_str)
            .unwrap_or("client-model")
            .into(),
        thinking: v.get("thinking").and_then(Value::as_bool).unwrap_or(false),
        include_usage: v
            .get("include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        stop_sequences: v
            .get("stop_sequences")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        created: 1_764_460_800,
        ..Default::default()
    }
}

pub(super) fn options(v: Option<&Value>) -> TargetOptions {
    let v = v.cloned().unwrap_or(Value::Null);
    TargetOptions {
        drop_fields: v
            .get("drop_fields")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default(),
        default_max_tokens: v
            .get("default_max_tokens")
            .and_then(Value::as_u64)
            .map(|n| n as u32),
        reasoning_effort: v
            .get("reasoning_effort")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        max_output_tokens: v
            .get("max_output_tokens")
            .and_then(Value::as_u64)
            .map(|n| n as u32),
        max_completion_tokens: v
            .get("max_completion_tokens")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        ..Default::default()
    }
}
