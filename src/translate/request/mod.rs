//! Request translation, one file per direction. Each `translate` takes the parsed client body
//! and returns a [`Draft`]; [`finish`] sets the model, drops the provider's `drop_fields` and
//! serialises.

pub mod anthropic_to_chat;
pub mod chat_to_anthropic;
pub mod responses_to_anthropic;
pub mod responses_to_chat;
pub mod to_anthropic_names;
mod turns;

use bytes::Bytes;
use serde_json::Value;

use super::util::Obj;
use super::{ResponseContext, TargetOptions, TranslateError, TranslatedRequest};

/// A translated body before the model is set and fields are dropped.
#[derive(Debug, Default)]
pub struct Draft {
    /// The upstream body.
    pub body: Obj,
    /// What the response seam needs.
    pub context: ResponseContext,
    /// Fields dropped on the way.
    pub warnings: Vec<String>,
    /// Changes to what the upstream is asked (see [`TranslatedRequest::adjusted`]).
    pub adjusted: Vec<String>,
    /// What is served otherwise than asked (see [`TranslatedRequest::downgrades`]).
    pub downgrades: Vec<String>,
}

impl Draft {
    pub(crate) fn warn(&mut self, line: impl Into<String>) {
        self.warnings.push(line.into());
    }

    /// The output limit to send: the client's `asked` (else the provider's default),
    /// clamped to `opts.max_output_tokens` with the clamp recorded.
    pub(crate) fn output_limit(&mut self, asked: Option<u64>, opts: &TargetOptions) -> Option<u64> {
        let n = asked.or(opts.default_max_tokens.map(u64::from))?;
        match opts.max_output_tokens.map(u64::from) {
            Some(cap) if n > cap => {
                self.adjusted
                    .push(format!("max_tokens {n} → {cap} (max_output_tokens)"));
                Some(cap)
            }
            _ => Some(n),
        }
    }
}

/// Sets `model`, removes `opts.drop_fields` and serialises the draft.
///
/// # Errors
/// Only if serialisation fails (it does not for values built from JSON).
pub fn finish(
    mut draft: Draft,
    model: &str,
    opts: &TargetOptions,
) -> Result<TranslatedRequest, TranslateError> {
    draft
        .body
        .insert("model".into(), Value::String(model.into()));
    for f in &opts.drop_fields {
        if draft.body.remove(f).is_some() {
            draft.warn(format!("dropped '{f}' (provider drop_fields)"));
        }
    }
    let stream = matches!(draft.body.get("stream"), Some(Value::Bool(true)));
    let body =
        serde_json::to_vec(&draft.body).map_err(|e| TranslateError::InvalidJson(e.to_string()))?;
    Ok(TranslatedRequest {
        body: Bytes::from(body),
        context: draft.context,
        stream,
        warnings: draft.warnings,
        adjusted: draft.adjusted,
        downgrades: draft.downgrades,
    })
}

/// Client model name from the body (for replies).
pub(crate) fn client_model(v: &Obj) -> String {
    v.get("model")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// `stop` / `stop_sequences`: a string or an array of strings.
pub(crate) fn stop_list(v: Option<&Value>) -> Vec<String> {
    match v {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        _ => Vec::new(),
    }
}
