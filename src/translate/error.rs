//! `TranslateError`: why a request, response or stream could not be translated.

use bytes::Bytes;
use serde_json::json;

use super::ClientFormat;

/// Why a body could not be translated. Request errors are decided before anything is sent;
/// each names the field so the client (or a fallback decision) knows what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// Client format and upstream dialect are the same: forward unchanged.
    #[error("no translation needed: the client and the upstream speak the same dialect")]
    SameDialect,
    /// The body is not a JSON object.
    #[error("request body is not a valid JSON object: {0}")]
    InvalidJson(String),
    /// A field (or value) has no counterpart in the target dialect.
    #[error("'{field}' cannot be translated for this provider: {reason}")]
    Unsupported {
        /// JSON path of the field, e.g. `messages[2].content[0].type=document`.
        field: String,
        /// What is missing upstream, and what the client can do.
        reason: String,
    },
    /// A field is malformed (e.g. tool-call `arguments` that are not JSON, a tool result
    /// with no matching call).
    #[error("'{field}' is invalid: {reason}")]
    Invalid {
        /// JSON path of the field.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// The upstream's reply is not what its dialect promises (no choices, not JSON, …).
    #[error("the upstream reply cannot be translated: {0}")]
    Upstream(String),
}

impl TranslateError {
    pub(crate) fn unsupported(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Unsupported {
            field: field.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The field the error names, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            Self::Unsupported { field, .. } | Self::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }

    /// The HTTP status to answer with: 400 for request errors, 502 for an upstream reply
    /// that cannot be translated.
    pub fn status(&self) -> u16 {
        match self {
            Self::Upstream(_) => 502,
            _ => 400,
        }
    }

    /// The error JSON in the client's format: Anthropic
    /// `{"type":"error","error":{"type","message"}}` or OpenAI
    /// `{"error":{"message","type","param","code"}}` (`param` = the field).
    pub fn client_body(&self, client: ClientFormat) -> Bytes {
        let message = self.to_string();
        let v = match client {
            ClientFormat::Anthropic => {
                let t = if self.status() == 502 {
                    "api_error"
                } else {
                    "invalid_request_error"
                };
                json!({"type": "error", "error": {"type": t, "message": message}})
            }
            ClientFormat::Chat | ClientFormat::Responses => {
                let (t, code) = match self {
                    Self::Upstream(_) => ("api_error", "upstream_untranslatable"),
                    Self::Unsupported { .. } => ("invalid_request_error", "untranslatable_field"),
                    _ => ("invalid_request_error", "invalid_request"),
                };
                json!({"error": {"message": message, "type": t, "param": self.field(), "code": code}})
            }
        };
        Bytes::from(v.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_bodies_name_the_field_in_each_format() {
        let e = TranslateError::unsupported("n", "only one choice");
        let a: serde_json::Value =
            serde_json::from_slice(&e.client_body(ClientFormat::Anthropic)).unwrap();
        assert_eq!(a["error"]["type"], "invalid_request_error");
        assert!(a["error"]["message"].as_str().unwrap().contains("'n'"));
        let o: serde_json::Value =
            serde_json::from_slice(&e.client_body(ClientFormat::Chat)).unwrap();
        assert_eq!(o["error"]["param"], "n");
        assert_eq!(o["error"]["code"], "untranslatable_field");
        assert_eq!(e.status(), 400);
        assert_eq!(TranslateError::Upstream("x".into()).status(), 502);
    }
}
