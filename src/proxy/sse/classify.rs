//! Dialect-aware classification of framed SSE events for the §6 stream guards.
//!
//! Two flags are kept apart because §6 defines them differently:
//!
//! - `content_bearing` ends the **pre-content hold**: "any text, thinking, signature or
//!   tool-input delta, or an OpenAI chunk with content, reasoning or tool calls". Reading:
//!   an *empty* text, thinking or signature delta carries nothing and does not count; a
//!   tool-input delta always counts (an empty `partial_json` is how a no-argument tool call is
//!   streamed, and the tool block itself is model output).
//! - `progress` restarts the **content-stall** budget: model output, plus reasoning progress
//!   (`thinking_delta`, Responses reasoning items and reasoning events, non-empty signatures).
//!   Keepalives and metadata never do.
//!
//! Decisions recorded here:
//! - Anthropic `signature_delta` (non-empty) is both progress and content-bearing, following
//!   the §6 text exactly; the fixtures README calls a signature-only thinking block "not
//!   content", which is what [`EventKind::Reasoning`] expresses: reasoning is never part of
//!   the answer ([`EventClass::answer`]), so a turn with only reasoning is still reported as
//!   an empty turn (`proxy::turn`).
//! - `response.failed` is a terminal marker ([`Terminal::Failed`], the stream is not
//!   truncated) **and** an error (`error` is set, kind [`EventKind::Error`]): the attempt
//!   failed and is classified by its error code.
//! - An unknown delta type inside an Anthropic `content_block_delta` is content (a block
//!   delta is model output by definition); every other unknown event is [`EventKind::Other`]
//!   and never an error.

use serde_json::Value;

use crate::wire::dialect::SseKind;

use crate::wire::sse::Event;

/// Stop reasons that explain a turn without an answer: Anthropic `max_tokens`,
/// `model_context_window_exceeded`, `stop_sequence`, `refusal`; Chat `length`,
/// `content_filter`.
pub const EXCUSING_STOPS: [&str; 6] = [
    "max_tokens",
    "model_context_window_exceeded",
    "stop_sequence",
    "refusal",
    "length",
    "content_filter",
];

/// Which SSE wire format a stream uses (the dialect module's [`SseKind`], reused).
pub type StreamKind = SseKind;

/// Anthropic heartbeat: a `ping` event, which clients accept even before `message_start`.
pub const ANTHROPIC_HEARTBEAT: &[u8] = b"event: ping\ndata: {\"type\":\"ping\"}\n\n";

/// OpenAI (chat and Responses) heartbeat: an SSE comment.
pub const OPENAI_HEARTBEAT: &[u8] = b": ping\n\n";

/// The heartbeat frame sluice injects (only at event boundaries) for a stream kind.
pub fn heartbeat(kind: StreamKind) -> &'static [u8] {
    match kind {
        SseKind::Anthropic => ANTHROPIC_HEARTBEAT,
        SseKind::OpenAiChat | SseKind::OpenAiResponses => OPENAI_HEARTBEAT,
    }
}

/// The broad kind of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Stream structure without output: `message_start`, empty `content_block_start`,
    /// `content_block_stop`, the role-only chat chunk, `response.created`, …
    Lifecycle,
    /// Model output: text, tool input, citations, refusals.
    Content,
    /// Reasoning: thinking and signature deltas, Responses reasoning items and events, chat
    /// `reasoning` / `reasoning_content` deltas.
    Reasoning,
    /// `ping`, SSE comments, empty `data:`.
    Keepalive,
    /// Usage-only chunks, `message_delta` without `stop_reason`, events with neither name nor
    /// data.
    Metadata,
    /// A terminal marker (see [`EventClass::terminal`]).
    Terminal,
    /// An error inside the stream (see [`EventClass::error`]).
    Error,
    /// Unknown or informational: passes unchanged, never an error.
    Other,
    /// A run-on blank line (raw passthrough bytes only).
    Blank,
}

/// Which terminal marker an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terminal {
    /// `message_stop`, chat `data: [DONE]`, `response.completed`.
    Done,
    /// Anthropic `message_delta` with a `stop_reason`: complete only once no block is open
    /// (a block still open means the connection dropped); the tracker decides.
    StopReason,
    /// `response.incomplete` (e.g. output token limit): a proper end, not a failure.
    Incomplete,
    /// `response.failed`: a proper end of a failed response (the event also carries `error`).
    Failed,
}

/// What kind of output an event belongs to, for the throughput watchdog's pause rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Activity {
    /// Says nothing about the current output kind.
    #[default]
    None,
    /// Text output is (or becomes) in progress.
    Text,
    /// A tool call is in progress.
    ToolCall,
    /// Reasoning is in progress.
    Reasoning,
}

/// An Anthropic content block opening or closing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockEdge {
    /// `content_block_start` with this index.
    Start(u64),
    /// `content_block_stop` with this index.
    Stop(u64),
}

/// An error reported inside a 200 stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamError {
    /// The error's type: Anthropic `error.type`; OpenAI `error.type`, else its `code`;
    /// `"unknown"` when neither is present.
    pub error_type: String,
    /// The OpenAI `code`, when present (numbers rendered as text).
    pub code: Option<String>,
    /// The human-readable message, when present.
    pub message: String,
    /// The event's whole `data`, for classification by body text.
    pub body: String,
}

impl StreamError {
    /// Whether the error reports an overload (Anthropic `overloaded_error`, OpenAI
    /// `server_is_overloaded`, …): classified like 529 / 503 rather than 500.
    pub fn is_overloaded(&self) -> bool {
        self.error_type.contains("overloaded")
            || self
                .code
                .as_deref()
                .is_some_and(|c| c.contains("overloaded"))
    }
}

/// What one event means to the stream guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventClass {
    /// The broad kind.
    pub kind: EventKind,
    /// Ends the pre-content hold (§6 "content-bearing").
    pub content_bearing: bool,
    /// Restarts the content-stall budget (§6 "reasoning progress" and model output).
    pub progress: bool,
    /// The terminal marker this event is, if any.
    pub terminal: Option<Terminal>,
    /// The error this event reports, if any.
    pub error: Option<StreamError>,
    /// Output kind for the throughput watchdog.
    pub activity: Activity,
    /// UTF-8 bytes of text-delta output (text, refusal) this event carries.
    pub text_bytes: usize,
    /// Anthropic block opened or closed by this event.
    pub block: Option<BlockEdge>,
    /// Part of the answer itself, as opposed to reasoning or structure: text, a tool call
    /// (even one whose input is still empty), a server tool result, a citation, a refusal, or
    /// a block or output item of a kind not known here. A complete turn with none is empty
    /// (`proxy::turn`).
    pub answer: bool,
    /// A stop reason that explains a turn without an answer ([`EXCUSING_STOPS`]:
    /// an output limit, the client's stop sequence, a refusal, a content filter; or
    /// `response.incomplete`). Such a turn is not empty.
    pub excused_stop: bool,
}

impl EventClass {
    fn of(kind: EventKind) -> Self {
        Self {
            kind,
            content_bearing: false,
            progress: false,
            terminal: None,
            error: None,
            activity: Activity::None,
            text_bytes: 0,
            block: None,
            answer: false,
            excused_stop: false,
        }
    }

    /// Model output or reasoning that both ends the hold and restarts the stall budget;
    /// non-empty output ([`EventKind::Content`]) is part of the answer.
    fn output(kind: EventKind, activity: Activity, non_empty: bool) -> Self {
        Self {
            content_bearing: non_empty,
            progress: non_empty,
            activity,
            answer: non_empty && kind == EventKind::Content,
            ..Self::of(kind)
        }
    }

    /// Structure that is still part of the answer: a tool call opening with no input yet,
    /// a block or output item of a kind not known here.
    fn answer_start(activity: Activity) -> Self {
        Self {
            answer: true,
            ..Self::of(EventKind::Lifecycle).with_activity(activity)
        }
    }

    fn text(s: &str) -> Self {
        Self {
            text_bytes: s.len(),
            ..Self::output(EventKind::Content, Activity::Text, !s.is_empty())
        }
    }

    fn terminal(t: Terminal) -> Self {
        Self {
            terminal: Some(t),
            ..Self::of(EventKind::Terminal)
        }
    }

    fn error(e: StreamError) -> Self {
        Self {
            error: Some(e),
            ..Self::of(EventKind::Error)
        }
    }

    fn with_activity(mut self, a: Activity) -> Self {
        self.activity = a;
        self
    }

    /// A keepalive (ping, comment, empty data).
    pub fn is_keepalive(&self) -> bool {
        self.kind == EventKind::Keepalive
    }

    /// Counts for readiness: anything but keepalives and blank lines.
    pub fn is_useful(&self) -> bool {
        !matches!(self.kind, EventKind::Keepalive | EventKind::Blank)
    }
}

/// Classifies one framed event of a `kind` stream. Never fails: what it does not recognise is
/// [`EventKind::Other`].
pub fn classify_event(kind: StreamKind, ev: &Event) -> EventClass {
    if ev.is_blank {
        return EventClass::of(EventKind::Blank);
    }
    if ev.is_comment_only {
        return EventClass::of(EventKind::Keepalive);
    }
    if !ev.has_data && ev.event.is_none() {
        // Only `id:` / `retry:` / unknown fields.
        return EventClass::of(EventKind::Metadata);
    }
    let data = ev.data.trim();
    if data.is_empty() && ev.event.is_none() {
        return EventClass::of(EventKind::Keepalive);
    }
    let json: Option<Value> = serde_json::from_str(data).ok();
    match kind {
        SseKind::Anthropic => anthropic(ev, json.as_ref()),
        SseKind::OpenAiChat => chat(ev, data, json.as_ref()),
        SseKind::OpenAiResponses => responses(ev, json.as_ref()),
    }
}

fn str_at<'a>(v: Option<&'a Value>, key: &str) -> Option<&'a str> {
    v.and_then(|v| v.get(key)).and_then(Value::as_str)
}

fn non_empty_str(v: Option<&Value>, key: &str) -> bool {
    str_at(v, key).is_some_and(|s| !s.is_empty())
}

/// The event's type: the JSON `type`, else the `event:` name.
fn event_type<'a>(ev: &'a Event, v: Option<&'a Value>) -> &'a str {
    str_at(v, "type")
        .or(ev.event.as_deref())
        .unwrap_or_default()
}

/// Builds a [`StreamError`] from an error object (or a top-level error event carrying
/// `code` / `message` directly); a bare string is taken as the message.
fn stream_error(err: Option<&Value>, body: &str) -> StreamError {
    let s = |k: &str| {
        err.and_then(|e| e.get(k))
            .and_then(|v| match v {
                Value::String(s) => Some(s.clone()),
                Value::Number(n) => Some(n.to_string()),
                _ => None,
            })
            .filter(|s| !s.is_empty())
    };
    let code = s("code");
    let error_type = s("type")
        .filter(|t| t != "error")
        .or_else(|| code.clone())
        .unwrap_or_else(|| "unknown".to_string());
    let message = match err {
        Some(Value::String(m)) => m.clone(),
        _ => s("message").unwrap_or_default(),
    };
    StreamError {
        error_type,
        code,
        message,
        body: body.to_string(),
    }
}

fn index(v: Option<&Value>) -> u64 {
    v.and_then(|v| v.get("index"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
}

/// What one event of an Anthropic Messages stream is, by its type.
fn anthropic(ev: &Event, v: Option<&Value>) -> EventClass {
    match event_type(ev, v) {
        "message_start" => EventClass::of(EventKind::Lifecycle),
        "ping" => EventClass::of(EventKind::Keepalive),
        "content_block_start" => anthropic_block_start(v),
        "content_block_delta" => anthropic_block_delta(v),
        "content_block_stop" => EventClass {
            block: Some(BlockEdge::Stop(index(v))),
            ..EventClass::of(EventKind::Lifecycle)
        },
        "message_delta" => {
            let stop = v
                .and_then(|v| v.get("delta"))
                .and_then(|d| d.get("stop_reason"))
                .filter(|s| !s.is_null());
            match stop {
                Some(reason) => EventClass {
                    excused_stop: excuses(reason.as_str()),
                    ..EventClass::terminal(Terminal::StopReason)
                },
                None => EventClass::of(EventKind::Metadata),
            }
        }
        "message_stop" => EventClass::terminal(Terminal::Done),
        "error" => EventClass::error(stream_error(v.and_then(|v| v.get("error")), &ev.data)),
        _ => EventClass::of(EventKind::Other),
    }
}

/// An Anthropic `content_block_start`, by the block's type: text or a tool call with its
/// input already there is output, a thinking block is reasoning (structure when empty), a
/// server tool result is output, an unknown kind starts the answer.
fn anthropic_block_start(v: Option<&Value>) -> EventClass {
    let block = v.and_then(|v| v.get("content_block"));
    let mut c = match str_at(block, "type").unwrap_or_default() {
        "text" => match str_at(block, "text") {
            Some(t) if !t.is_empty() => EventClass::text(t),
            _ => EventClass::of(EventKind::Lifecycle).with_activity(Activity::Text),
        },
        "thinking" => EventClass::output(
            EventKind::Reasoning,
            Activity::Reasoning,
            non_empty_str(block, "thinking") || non_empty_str(block, "signature"),
        ),
        "redacted_thinking" => EventClass::output(EventKind::Reasoning, Activity::Reasoning, true),
        t if t.ends_with("tool_use") => {
            let has_input = block
                .and_then(|b| b.get("input"))
                .and_then(Value::as_object)
                .is_some_and(|o| !o.is_empty());
            if has_input {
                EventClass::output(EventKind::Content, Activity::ToolCall, true)
            } else {
                EventClass::answer_start(Activity::ToolCall)
            }
        }
        // Server tool results arrive whole in their start event.
        t if t.ends_with("_tool_result") => {
            EventClass::output(EventKind::Content, Activity::None, true)
        }
        // A block kind not known here: not reasoning, so part of the answer.
        _ => EventClass::answer_start(Activity::None),
    };
    if c.kind == EventKind::Reasoning && !c.progress {
        // An empty thinking block opening is structure, not progress.
        c.kind = EventKind::Lifecycle;
    }
    c.block = Some(BlockEdge::Start(index(v)));
    c
}

/// An Anthropic `content_block_delta`, by the delta's type: text, tool input, thinking and
/// signatures (progress when not empty), anything else is model output.
fn anthropic_block_delta(v: Option<&Value>) -> EventClass {
    let delta = v.and_then(|v| v.get("delta"));
    match str_at(delta, "type").unwrap_or_default() {
        "text_delta" => EventClass::text(str_at(delta, "text").unwrap_or_default()),
        "input_json_delta" => EventClass::output(EventKind::Content, Activity::ToolCall, true),
        "thinking_delta" => EventClass::output(
            EventKind::Reasoning,
            Activity::Reasoning,
            non_empty_str(delta, "thinking"),
        ),
        "signature_delta" => EventClass::output(
            EventKind::Reasoning,
            Activity::Reasoning,
            non_empty_str(delta, "signature"),
        ),
        // citations_delta and any future block delta: model output.
        _ => EventClass::output(EventKind::Content, Activity::None, true),
    }
}

fn chat(ev: &Event, data: &str, v: Option<&Value>) -> EventClass {
    if data == "[DONE]" {
        return EventClass::terminal(Terminal::Done);
    }
    let Some(v) = v else {
        return EventClass::of(EventKind::Other);
    };
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return EventClass::error(stream_error(Some(err), &ev.data));
    }
    if str_at(Some(v), "type") == Some("ping") {
        return EventClass::of(EventKind::Keepalive);
    }
    let Some(choices) = v.get("choices").and_then(Value::as_array) else {
        // `choices: null` or absent: usage-only or informational.
        return EventClass::of(EventKind::Metadata);
    };
    if choices.is_empty() {
        return EventClass::of(EventKind::Metadata);
    }
    let (mut text, mut tools, mut reasoning, mut audio) = (0usize, false, false, false);
    let (mut saw_text_field, mut excused_stop) = (false, false);
    for choice in choices {
        excused_stop |= excuses(str_at(Some(choice), "finish_reason"));
        let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
            continue;
        };
        for key in ["content", "refusal"] {
            if let Some(s) = str_at(Some(delta), key) {
                saw_text_field |= key == "content";
                text += s.len();
            }
        }
        tools |= delta
            .get("tool_calls")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
            || delta.get("function_call").is_some_and(Value::is_object);
        // Audio output (`delta.audio`: data and transcript) is model output without text.
        audio |= delta.get("audio").is_some_and(Value::is_object);
        reasoning |= non_empty_str(Some(delta), "reasoning")
            || non_empty_str(Some(delta), "reasoning_content")
            || delta
                .get("reasoning_details")
                .and_then(Value::as_array)
                .is_some_and(|a| !a.is_empty());
    }
    let kind = if text > 0 || tools || audio {
        EventKind::Content
    } else if reasoning {
        EventKind::Reasoning
    } else {
        EventKind::Lifecycle
    };
    let activity = if text > 0 {
        Activity::Text
    } else if tools {
        Activity::ToolCall
    } else if reasoning {
        Activity::Reasoning
    } else if saw_text_field {
        Activity::Text
    } else {
        Activity::None
    };
    let output = text > 0 || tools || audio || reasoning;
    EventClass {
        text_bytes: text,
        excused_stop,
        ..EventClass::output(kind, activity, output)
    }
}

/// Whether a stop reason explains a turn without an answer (see [`EventClass::excused_stop`]).
fn excuses(reason: Option<&str>) -> bool {
    reason.is_some_and(|r| EXCUSING_STOPS.contains(&r))
}

fn reasoning_item_has_payload(item: Option<&Value>) -> bool {
    let non_empty_array = |k: &str| {
        item.and_then(|i| i.get(k))
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty())
    };
    non_empty_array("summary")
        || non_empty_array("content")
        || non_empty_str(item, "encrypted_content")
}

fn responses(ev: &Event, v: Option<&Value>) -> EventClass {
    let ty = event_type(ev, v);
    match ty {
        "response.created" | "response.in_progress" | "response.queued" => {
            EventClass::of(EventKind::Lifecycle)
        }
        "response.completed" => EventClass::terminal(Terminal::Done),
        "response.incomplete" => EventClass {
            excused_stop: true,
            ..EventClass::terminal(Terminal::Incomplete)
        },
        "response.failed" => {
            let err = v
                .and_then(|v| v.get("response"))
                .and_then(|r| r.get("error"))
                .filter(|e| !e.is_null());
            EventClass {
                terminal: Some(Terminal::Failed),
                ..EventClass::error(stream_error(err, &ev.data))
            }
        }
        "error" => {
            let err = v
                .and_then(|v| v.get("error"))
                .filter(|e| !e.is_null())
                .or(v);
            EventClass::error(stream_error(err, &ev.data))
        }
        "keepalive" | "ping" => EventClass::of(EventKind::Keepalive),
        "response.output_item.added" | "response.output_item.done" => {
            let item = v.and_then(|v| v.get("item"));
            let added = ty.ends_with(".added");
            match str_at(item, "type").unwrap_or_default() {
                // A reasoning item is reasoning progress; it bears content once it carries a
                // summary or its encrypted content (the Responses analogue of a signature).
                "reasoning" => EventClass {
                    content_bearing: reasoning_item_has_payload(item),
                    ..EventClass::output(EventKind::Reasoning, Activity::Reasoning, true)
                },
                "message" if added => {
                    EventClass::of(EventKind::Lifecycle).with_activity(Activity::Text)
                }
                "message" => EventClass::of(EventKind::Lifecycle),
                // A tool call (function, custom, server-side `*_call`) or an item of a kind not
                // known here: part of the answer.
                t if added && t.ends_with("_call") => EventClass::answer_start(Activity::ToolCall),
                _ => EventClass::answer_start(Activity::None),
            }
        }
        "response.output_text.delta" | "response.refusal.delta" => {
            EventClass::text(str_at(v, "delta").unwrap_or_default())
        }
        "response.output_text.annotation.added" => {
            EventClass::output(EventKind::Content, Activity::None, true)
        }
        t if t.starts_with("response.reasoning") => EventClass {
            content_bearing: t.ends_with(".delta") && non_empty_str(v, "delta"),
            ..EventClass::output(EventKind::Reasoning, Activity::Reasoning, true)
        },
        t if t.ends_with("_arguments.delta") || t.ends_with("_input.delta") => {
            EventClass::output(EventKind::Content, Activity::ToolCall, true)
        }
        "response.content_part.added" => {
            EventClass::of(EventKind::Lifecycle).with_activity(Activity::Text)
        }
        t if t.starts_with("response.") && (t.ends_with(".done") || t.ends_with(".added")) => {
            EventClass::of(EventKind::Lifecycle)
        }
        _ => EventClass::of(EventKind::Other),
    }
}
