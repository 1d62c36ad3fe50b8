//! Dialect translation between the three client formats (Anthropic Messages, OpenAI Chat
//! Completions, OpenAI Responses) and the two upstream dialects (`anthropic`, `openai` chat).
//!
//! Pure: bytes in, bytes out. No I/O, no clock (the caller passes `created` timestamps), no
//! randomness (ids come from the upstream or from the request). Nothing here panics on
//! outside input: every failure is a [`TranslateError`] naming the field.
//!
//! # The two seams
//!
//! The request pipeline calls this module at exactly two points:
//!
//! 1. **Request**, after routing picked a target whose dialect differs from the client's
//!    format: [`translate_request`] turns the client's body into the upstream's body (with
//!    the target's model name and [`TargetOptions`]) and returns a [`ResponseContext`] to keep
//!    for the reply. An `Err` is decided before anything is sent: answer it with
//!    [`TranslateError::status`] and [`TranslateError::client_body`] in the client's format, or
//!    try a same-dialect target instead.
//! 2. **Response**, on the way to the relay:
//!    - a non-streaming 2xx body: [`translate_response`];
//!    - a stream: one [`StreamTranslator`] per attempt, fed each upstream chunk with
//!      [`StreamTranslator::feed`] (any split, even mid-UTF-8) and ended with
//!      [`StreamTranslator::finish`]; its output is complete client-format SSE events, so the
//!      SSE guards can frame and classify the translated stream like a native one. It always
//!      ends with exactly one terminal event of the client's format;
//!    - an upstream error body (non-2xx): [`translate_error`] keeps the message and maps the
//!      type from the status (the caller keeps the status and `retry-after`).
//!
//! `count_tokens` for a translated target is answered locally: [`count_tokens_body`].
//!
//! ```
//! use sluice::config::Dialect;
//! use sluice::translate::{ClientFormat, StreamTranslator, TargetOptions, translate_request};
//!
//! // Seam 1: Claude Code's request, routed to an OpenAI-compatible target.
//! let body = br#"{"model":"sonnet","max_tokens":512,"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
//! let opts = TargetOptions { drop_fields: vec!["stream_options".into()], ..Default::default() };
//! let t = translate_request(ClientFormat::Anthropic, Dialect::OpenAi, body, "deepseek-chat", &opts)?;
//! assert!(t.stream && !t.body.is_empty());
//!
//! // Seam 2: the upstream's chat chunks, relayed as Anthropic events.
//! let mut ctx = t.context;
//! ctx.created = 1_764_460_800; // the caller's wall clock, Unix seconds
//! let mut s = StreamTranslator::new(Dialect::OpenAi, &ctx)?;
//! let mut out = s.feed(b"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel");
//! assert!(out.is_empty()); // nothing complete yet
//! out = s.feed(b"lo\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
//! assert!(out.starts_with(b"event: message_start\n"));
//! assert!(out.ends_with(b"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
//! assert!(s.finish().is_empty()); // already ended with its terminal event
//! # Ok::<(), sluice::translate::TranslateError>(())
//! ```
//!
//! # Shape
//!
//! Requests translate directly (`request/`), except Responses → Chat, which goes through the
//! Anthropic form. Responses and streams use the Anthropic message / event sequence as the
//! pivot: upstream decoders (`stream::decode_*`) produce [`stream::Ev`] events and client
//! encoders (`stream::encode_*`) write them, so every upstream/client pair is one decoder plus
//! one encoder. What maps to what, and what is dropped or refused, is in `docs/TRANSLATION.md`.

mod count;
mod error;
mod error_body;
mod foreign_thinking;
mod options;
pub mod request;
pub mod response;
pub mod stream;
mod util;
pub(crate) mod wire_names;

#[cfg(test)]
mod tests;

pub use count::{count_tokens_body, estimate_input_tokens};
pub use error::TranslateError;
pub use error_body::translate_error;
pub use foreign_thinking::strip_unsigned_thinking;
pub use options::{ClientFormat, ResponseContext, TargetOptions, TranslatedRequest};
pub use response::translate_response;
pub use stream::StreamTranslator;

use crate::config::Dialect;

/// Translates a client request body into the body for an upstream of dialect `upstream`,
/// with `model` (the target's upstream model name) as its model.
///
/// The same format in and out (Anthropic client → `anthropic`, Chat client → `openai`) is not
/// a translation: it returns [`TranslateError::SameDialect`] so the caller forwards the body
/// unchanged. Responses clients are always translated (no upstream dialect speaks Responses).
///
/// # Errors
/// [`TranslateError`] naming the field that is invalid or has no counterpart upstream.
pub fn translate_request(
    client: ClientFormat,
    upstream: Dialect,
    body: &[u8],
    model: &str,
    opts: &TargetOptions,
) -> Result<TranslatedRequest, TranslateError> {
    let v = util::parse_object(body)?;
    let mut draft = match (client, upstream) {
        (ClientFormat::Anthropic, Dialect::OpenAi) => {
            request::anthropic_to_chat::translate(v, opts)?
        }
        (ClientFormat::Chat, Dialect::Anthropic) => request::chat_to_anthropic::translate(v, opts)?,
        (ClientFormat::Responses, Dialect::Anthropic) => {
            request::responses_to_anthropic::translate(v, opts)?
        }
        (ClientFormat::Responses, Dialect::OpenAi) => {
            request::responses_to_chat::translate(v, opts)?
        }
        (ClientFormat::Anthropic, Dialect::Anthropic) | (ClientFormat::Chat, Dialect::OpenAi) => {
            return Err(TranslateError::SameDialect);
        }
    };
    if upstream == Dialect::Anthropic {
        request::to_anthropic_names::finish(&mut draft)?;
    }
    draft.context.client = client;
    request::finish(draft, model, opts)
}
