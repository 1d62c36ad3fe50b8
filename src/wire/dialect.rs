//! What each client dialect looks like on the wire, as far as both the proxy and the
//! translation need it: the error `type` names each dialect gives a status, the SSE wire
//! format of a route ([`SseKind`]) and the well-formed error event that ends a stream of it.
//! The error JSON of sluice's own errors is built in `proxy::dialect`; translated upstream
//! errors in `translate::error_body`.

use bytes::Bytes;
use http::StatusCode;
use serde_json::json;

/// Anthropic error `type` for a status (Anthropic API errors table).
pub fn anthropic_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 405 | 422 => "invalid_request_error",
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        409 => "conflict_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        503 | 529 => "overloaded_error",
        504 => "timeout_error",
        _ => "api_error",
    }
}

/// OpenAI error `type` for a status.
pub fn openai_type(status: StatusCode) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "api_error",
    }
}

/// The well-formed error event that ends an SSE stream sluice must cut short (shutdown
/// deadline, upstream break after the head). Anthropic: `event: error` (`api_error` or
/// `overloaded_error`); OpenAI chat: an error chunk then `data: [DONE]`; Responses:
/// `response.failed`. `overloaded` picks the retryable overload type.
pub fn sse_error_event(kind: SseKind, message: &str, overloaded: bool) -> Bytes {
    let etype = if overloaded {
        "overloaded_error"
    } else {
        "api_error"
    };
    let s = match kind {
        SseKind::Anthropic => format!(
            "event: error\ndata: {}\n\n",
            json!({"type": "error", "error": {"type": etype, "message": message}})
        ),
        SseKind::OpenAiChat => format!(
            "data: {}\n\ndata: [DONE]\n\n",
            json!({"error": {"message": message, "type": "server_error", "param": null, "code": if overloaded { "server_is_overloaded" } else { "server_error" }}})
        ),
        SseKind::OpenAiResponses => format!(
            "event: response.failed\ndata: {}\n\n",
            json!({"type": "response.failed", "response": {"status": "failed", "error": {"code": if overloaded { "server_is_overloaded" } else { "server_error" }, "message": message}}})
        ),
    };
    Bytes::from(s)
}

/// Which SSE wire format a stream uses, from the route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseKind {
    /// Anthropic Messages events.
    Anthropic,
    /// OpenAI chat completion chunks.
    OpenAiChat,
    /// OpenAI Responses semantic events.
    OpenAiResponses,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn sse_error_events_are_well_formed() {
        let a = sse_error_event(SseKind::Anthropic, "cut", true);
        let s = std::str::from_utf8(&a).unwrap();
        assert!(s.starts_with("event: error\ndata: {") && s.ends_with("}\n\n"));
        let data: Value =
            serde_json::from_str(s.lines().nth(1).unwrap().strip_prefix("data: ").unwrap())
                .unwrap();
        assert_eq!(data["error"]["type"], "overloaded_error");
        let c = sse_error_event(SseKind::OpenAiChat, "cut", false);
        assert!(
            std::str::from_utf8(&c)
                .unwrap()
                .ends_with("data: [DONE]\n\n")
        );
        let r = sse_error_event(SseKind::OpenAiResponses, "cut", false);
        assert!(
            std::str::from_utf8(&r)
                .unwrap()
                .starts_with("event: response.failed\n")
        );
    }
}
