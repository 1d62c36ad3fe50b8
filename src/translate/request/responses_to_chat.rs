//! OpenAI Responses request → OpenAI Chat Completions request, through the Anthropic form
//! (Responses items map onto Anthropic blocks one to one, and Anthropic → Chat is already
//! one mapping): one set of rules instead of two.

use super::{Draft, anthropic_to_chat, responses_to_anthropic};
use crate::translate::util::Obj;
use crate::translate::{TargetOptions, TranslateError};

/// Translates the parsed Responses body.
///
/// # Errors
/// Everything [`responses_to_anthropic::to_anthropic`] refuses.
pub fn translate(v: Obj, opts: &TargetOptions) -> Result<Draft, TranslateError> {
    let mid = responses_to_anthropic::to_anthropic(v, opts, false)?;
    let mut body = mid.body;
    body.insert(
        "model".into(),
        serde_json::Value::String(mid.context.client_model.clone()),
    );
    let mut out = anthropic_to_chat::translate(body, opts)?;
    let names = std::mem::take(&mut out.context.tool_names);
    out.context = mid.context;
    out.context.tool_names = names;
    let mut warnings = mid.warnings;
    warnings.append(&mut out.warnings);
    out.warnings = warnings;
    out.downgrades = mid.downgrades;
    Ok(out)
}
