//! Upstream error bodies (non-2xx) → the client's error JSON, same status.

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use super::ClientFormat;
use crate::config::Dialect;
use crate::wire::dialect::{anthropic_type, openai_type};

/// Renders an upstream error body of dialect `upstream` (answered with `status`) as the
/// client's error JSON. The message is kept verbatim (clients and the classifier match on its
/// wording); the error `type` follows the status in the client's dialect; an OpenAI client
/// gets the upstream's `code` (or the Anthropic error type) as `code`. A body that is not the
/// dialect's error JSON becomes the message as text (at most 2000 characters). The caller
/// keeps the status and `retry-after` header.
pub fn translate_error(upstream: Dialect, client: ClientFormat, status: u16, body: &[u8]) -> Bytes {
    let (message, code) = parse(upstream, body);
    let st = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    let v = match client {
        ClientFormat::Anthropic => {
            json!({"type": "error", "error": {"type": anthropic_type(st), "message": message}})
        }
        ClientFormat::Chat | ClientFormat::Responses => json!({"error": {
            "message": message, "type": openai_type(st), "param": null, "code": code}}),
    };
    Bytes::from(v.to_string())
}

/// (message, code) of an error body.
fn parse(upstream: Dialect, body: &[u8]) -> (String, Value) {
    let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let err = v.get("error");
    let message = err
        .and_then(|e| e.get("message").and_then(Value::as_str).or(e.as_str()))
        .or_else(|| v.get("message").and_then(Value::as_str))
        .map(str::to_string)
        .unwrap_or_else(|| String::from_utf8_lossy(body).chars().take(2000).collect());
    let code = match upstream {
        Dialect::Anthropic => err.and_then(|e| e.get("type")).cloned(),
        Dialect::OpenAi => err
            .and_then(|e| e.get("code").filter(|c| !c.is_null()).or(e.get("type")))
            .cloned(),
    };
    (message, code.unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(b: Bytes) -> Value {
        serde_json::from_slice(&b).unwrap()
    }

    #[test]
    fn openai_errors_become_anthropic_errors_with_the_status_type() {
        let body = br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
        let v = j(translate_error(
            Dialect::OpenAi,
            ClientFormat::Anthropic,
            429,
            body,
        ));
        assert_eq!(
            v,
            json!({"type":"error","error":{"type":"rate_limit_error","message":"Rate limit reached"}})
        );
        let v = j(translate_error(
            Dialect::OpenAi,
            ClientFormat::Anthropic,
            529,
            b"upstream overloaded",
        ));
        assert_eq!(v["error"]["type"], "overloaded_error");
        assert_eq!(v["error"]["message"], "upstream overloaded");
    }

    #[test]
    fn anthropic_errors_become_openai_errors_keeping_the_type_as_code() {
        let body =
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        for c in [ClientFormat::Chat, ClientFormat::Responses] {
            let v = j(translate_error(Dialect::Anthropic, c, 529, body));
            assert_eq!(v["error"]["message"], "Overloaded");
            assert_eq!(v["error"]["code"], "overloaded_error");
            assert_eq!(v["error"]["type"], "api_error");
        }
        let v = j(translate_error(
            Dialect::Anthropic,
            ClientFormat::Chat,
            401,
            b"",
        ));
        assert_eq!(v["error"]["type"], "authentication_error");
    }
}
