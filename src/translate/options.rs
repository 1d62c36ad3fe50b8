//! The inputs and outputs of the request seam: per-target options, the translated request,
//! and the context the response seam needs.

use bytes::Bytes;
use serde_json::{Map, Value};

use crate::config::{ReasoningEffort, SystemRole};

/// The wire format a client speaks, from the route it called.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientFormat {
    /// Anthropic Messages (`/v1/messages`).
    #[default]
    Anthropic,
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    Chat,
    /// OpenAI Responses (`/v1/responses`).
    Responses,
}

impl ClientFormat {
    /// `anthropic`, `chat` or `responses` (for logs: `translated: anthropic→openai`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Chat => "chat",
            Self::Responses => "responses",
        }
    }
}

/// Per-provider translation options (set by the provider's config; the defaults suit the
/// public APIs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TargetOptions {
    /// Top-level request fields removed after translation because this provider rejects
    /// them, e.g. `stream_options`, `parallel_tool_calls`, `user`. Default empty.
    pub drop_fields: Vec<String>,
    /// `max_tokens` to send when the client gave none. For an Anthropic target (which
    /// requires the field) `None` means [`DEFAULT_MAX_TOKENS`]; for an OpenAI target `None`
    /// sends no limit.
    pub default_max_tokens: Option<u32>,
    /// Whether this OpenAI-compatible target takes `reasoning_effort`. When false a thinking
    /// request is dropped (with a warning) instead of mapped. Ignored for Anthropic targets.
    pub reasoning_effort: bool,
    /// The highest effort the target takes: a client's `max` / `xhigh` becomes this, and no
    /// mapped effort goes above it. Default `high`.
    pub max_reasoning_effort: ReasoningEffort,
    /// Largest `max_tokens` the target model takes (tokens); a larger request is clamped and
    /// the clamp is listed in [`TranslatedRequest::adjusted`]. `None` (default): no clamp.
    pub max_output_tokens: Option<u32>,
    /// OpenAI targets: the limit goes out as `max_completion_tokens` instead of `max_tokens`.
    pub max_completion_tokens: bool,
    /// OpenAI targets: the role of system text (the `system` field and system messages
    /// inside the conversation). Default `system`.
    pub system_role: SystemRole,
}

/// The Anthropic `max_tokens` sent when neither the client nor the provider names one.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// What the response seam needs to know about the request it answers. Produced by
/// [`crate::translate::translate_request`]; the caller sets [`ResponseContext::created`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseContext {
    /// The client's format (what responses and streams are translated into).
    pub client: ClientFormat,
    /// The model name the client asked for; replies carry it instead of the upstream's.
    pub client_model: String,
    /// The client asked for thinking / reasoning; reasoning output is passed on only then.
    pub thinking: bool,
    /// Chat clients: `stream_options.include_usage` was set (a usage chunk ends the stream).
    pub include_usage: bool,
    /// The request's stop sequences (a stop caused by one maps to `stop_sequence`).
    pub stop_sequences: Vec<String>,
    /// Unix seconds for the `created` / `created_at` fields of OpenAI replies (the caller's
    /// clock; 0 when unset).
    pub created: u64,
    /// Tool names shortened for the upstream, as `(upstream name, client name)` pairs; tool
    /// calls in the reply get the client's name back. Empty when no name was changed.
    pub tool_names: Vec<(String, String)>,
    /// Responses clients: the names of the request's freeform (`custom`) tools, offered
    /// upstream as tools taking one string `input`; their calls go back as
    /// `custom_tool_call` items with that string. Empty when there were none.
    pub custom_tools: Vec<String>,
    /// Responses clients: the fields of the `response` object that repeat the request, as the
    /// request seam found them: `instructions` (a string), `tools` (the forwarded tools:
    /// function tools as `{"type":"function","name","description","parameters","strict"}`,
    /// custom tools as `{"type":"custom","name"}` plus their `description` and `format`),
    /// `tool_choice` (`"auto"`, `"none"`, `"required"` or `{"type":"function"|"custom","name"}`),
    /// `parallel_tool_calls`, `temperature` and `top_p` (as sent upstream) and `metadata` (an
    /// object of strings). A field missing here is written with its default: `tools: []`,
    /// `tool_choice: "auto"`, `parallel_tool_calls: true`, the others `null`.
    pub response_fields: Map<String, Value>,
}

/// A translated request: the upstream body plus what the response seam needs.
#[derive(Debug, Clone, PartialEq)]
pub struct TranslatedRequest {
    /// The upstream request body (JSON).
    pub body: Bytes,
    /// Keep this for [`crate::translate::translate_response`] or
    /// [`crate::translate::StreamTranslator::new`].
    pub context: ResponseContext,
    /// Whether the upstream request streams.
    pub stream: bool,
    /// Fields dropped on the way, one line each (for a debug log line; not an error).
    pub warnings: Vec<String>,
    /// Changes that alter what the upstream is asked, one line each, e.g.
    /// `max_tokens 128000 → 32768 (max_output_tokens)`; shown in the request's details.
    pub adjusted: Vec<String>,
    /// What the client asked for that is not honoured although the request is served, one
    /// line each, e.g. `background ignored: served synchronously`; told to the client in an
    /// `x-sluice-warning` response header and logged as a warning.
    pub downgrades: Vec<String>,
}
