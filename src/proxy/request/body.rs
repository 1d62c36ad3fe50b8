//! Request bodies: reading under the size limit, probing the JSON for `model` and `stream`
//! without building a DOM, and rewriting only the top-level `model` for combo targets.

use std::borrow::Cow;
use std::fmt;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::proxy::dialect::ProxyError;

/// Reads the whole request body, refusing more than `limit` bytes. A `content-length` over
/// the limit is refused before reading anything; a chunked body stops at the limit.
pub async fn read_limited(
    body: Incoming,
    content_length: Option<u64>,
    limit: u64,
) -> Result<Bytes, ProxyError> {
    if content_length.is_some_and(|n| n > limit) {
        return Err(ProxyError::TooLarge { limit });
    }
    let cap = usize::try_from(limit).unwrap_or(usize::MAX);
    match Limited::new(body, cap).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(ProxyError::TooLarge { limit })
        }
        Err(e) => Err(ProxyError::BadRequest(format!(
            "could not read the request body: {e}"
        ))),
    }
}

/// What sluice needs from an inference body.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Probe {
    /// Top-level `model`.
    pub model: String,
    /// Top-level `stream` (false when absent).
    pub stream: bool,
    /// Byte range of the `model` value (a JSON string, quotes included) in the probed body,
    /// so a combo target's model can be spliced in without parsing the body again
    /// ([`splice_model`]). `None` for a request built without a body.
    pub model_at: Option<std::ops::Range<usize>>,
}

#[derive(serde::Deserialize)]
struct RawProbe<'a> {
    #[serde(borrow, default)]
    model: Option<&'a serde_json::value::RawValue>,
    #[serde(default)]
    stream: Option<serde_json::Value>,
}

/// Longest `model` a client may send, in bytes. Real model ids (Bedrock ARNs included) stay
/// far below it; a longer one is refused before sluice keeps it in the snapshot or the
/// request log.
pub const MAX_MODEL_LEN: usize = 1024;

/// Parses the body as a JSON object and extracts `model` (required, non-empty string of at
/// most [`MAX_MODEL_LEN`] bytes) and `stream`. Errors are `BadRequest` with a message fit for
/// the client.
pub fn probe(body: &[u8]) -> Result<Probe, ProxyError> {
    let trimmed = body
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .map(|i| &body[i..])
        .unwrap_or(&[]);
    if trimmed.first() != Some(&b'{') {
        return Err(ProxyError::BadRequest(
            "request body must be a JSON object".into(),
        ));
    }
    let raw: RawProbe<'_> = serde_json::from_slice(body)
        .map_err(|e| ProxyError::BadRequest(format!("request body is not valid JSON: {e}")))?;
    let model: Option<Cow<'_, str>> = match raw.model {
        None => None,
        Some(v) => match serde_json::from_str::<Cow<'_, str>>(v.get()) {
            Ok(m) => Some(m),
            Err(_) => {
                return Err(ProxyError::BadRequest(format!(
                    "'model' must be a string, not {}",
                    v.get().chars().take(40).collect::<String>()
                )));
            }
        },
    };
    let model = match model {
        Some(m) if m.len() > MAX_MODEL_LEN => {
            return Err(ProxyError::BadRequest(format!(
                "'model' is {} bytes long; at most {MAX_MODEL_LEN} are accepted",
                m.len()
            )));
        }
        Some(m) if !m.trim().is_empty() => m.into_owned(),
        Some(_) => return Err(ProxyError::BadRequest("'model' must not be empty".into())),
        None => {
            return Err(ProxyError::BadRequest(
                "missing required field 'model'".into(),
            ));
        }
    };
    let stream = matches!(raw.stream, Some(serde_json::Value::Bool(true)));
    let model_at = raw.model.and_then(|v| span_in(body, v.get()));
    Ok(Probe {
        model,
        stream,
        model_at,
    })
}

/// Where `part`, a slice borrowed from `body`, lies in it.
fn span_in(body: &[u8], part: &str) -> Option<std::ops::Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    let range = start..start.checked_add(part.len())?;
    (body.get(range.clone()) == Some(part.as_bytes())).then_some(range)
}

/// `body` with the JSON string at `at` (the `model` value [`probe`] found in this same body)
/// replaced by `model`; every other byte is kept, and nothing is parsed again. `None` when
/// `at` does not hold a JSON string of `body` (then use [`rewrite_model`]).
pub fn splice_model(body: &[u8], at: std::ops::Range<usize>, model: &str) -> Option<Bytes> {
    let old = body.get(at.clone())?;
    // One whole JSON string (at most MAX_MODEL_LEN bytes, so this check is cheap), not a
    // slice of a body that changed since it was probed.
    if old.first() != Some(&b'"') || serde_json::from_slice::<Cow<'_, str>>(old).is_err() {
        return None;
    }
    let new_model = serde_json::to_string(model).ok()?;
    let mut out = Vec::with_capacity(body.len() - old.len() + new_model.len());
    out.extend_from_slice(body.get(..at.start)?);
    out.extend_from_slice(new_model.as_bytes());
    out.extend_from_slice(body.get(at.end..)?);
    Some(Bytes::from(out))
}

/// Returns `body` with the top-level `model` set to `model`. Every other top-level value is
/// kept byte-for-byte and in order (only whitespace between top-level members may change).
pub fn rewrite_model(body: &[u8], model: &str) -> Result<Bytes, ProxyError> {
    let members = TopLevel::parse(body)
        .map_err(|e| ProxyError::BadRequest(format!("request body is not valid JSON: {e}")))?;
    let new_model =
        serde_json::to_string(model).map_err(|e| ProxyError::BadRequest(e.to_string()))?;
    let mut out = Vec::with_capacity(body.len() + model.len());
    out.push(b'{');
    let mut seen = false;
    for (i, (k, v)) in members.0.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let key = serde_json::to_string(k).map_err(|e| ProxyError::BadRequest(e.to_string()))?;
        out.extend_from_slice(key.as_bytes());
        out.push(b':');
        if k == "model" {
            out.extend_from_slice(new_model.as_bytes());
            seen = true;
        } else {
            out.extend_from_slice(v.get().as_bytes());
        }
    }
    if !seen {
        if !members.0.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(b"\"model\":");
        out.extend_from_slice(new_model.as_bytes());
    }
    out.push(b'}');
    Ok(Bytes::from(out))
}

struct TopLevel<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> TopLevel<'a> {
    fn parse(body: &'a [u8]) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_slice(body);
        let v = de.deserialize_map(TopLevelVisitor)?;
        de.end()?;
        Ok(v)
    }
}

struct TopLevelVisitor;

impl<'de> Visitor<'de> for TopLevelVisitor {
    type Value = TopLevel<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            let v: &'de RawValue = map.next_value()?;
            out.push((k, v));
        }
        Ok(TopLevel(out))
    }
}

#[cfg(test)]
#[path = "body_prop.rs"]
mod prop;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_extracts_model_and_stream() {
        let p =
            probe(br#"{"model":"claude-x","max_tokens":5,"stream":true,"messages":[]}"#).unwrap();
        assert_eq!(
            p,
            Probe {
                model: "claude-x".into(),
                stream: true,
                model_at: Some(9..19),
            }
        );
        let p =
            probe(br#" {"messages":[{"role":"user","content":"hi"}],"model":"m\u00e9"} "#).unwrap();
        assert_eq!(
            p,
            Probe {
                model: "mé".into(),
                stream: false,
                model_at: Some(54..63),
            }
        );
    }

    #[test]
    fn splice_replaces_only_the_model_string_and_refuses_a_wrong_span() {
        let body = br#"{ "model" : "a\"b",  "x":[1, 2] }"#;
        let at = probe(body).unwrap().model_at.unwrap();
        assert_eq!(&body[at.clone()], br#""a\"b""#);
        let out = splice_model(body, at, "glm/5 \"q\"").unwrap();
        assert_eq!(&out[..], br#"{ "model" : "glm/5 \"q\"",  "x":[1, 2] }"#);
        assert_eq!(splice_model(body, 0..3, "m"), None, "not a string");
        let two = br#"{"model":"a","b":"c"}"#;
        assert_eq!(splice_model(two, 9..20, "m"), None, "two strings, not one");
        // An escaped key and a tab before the value: the span is the value alone.
        let escaped = br#"{"m\u006fdel" :	"x" }"#;
        let at = probe(escaped).unwrap().model_at.unwrap();
        assert_eq!(
            &splice_model(escaped, at, "y").unwrap()[..],
            br#"{"m\u006fdel" :	"y" }"#
        );
        assert_eq!(splice_model(body, 30..90, "m"), None, "out of the body");
    }

    #[test]
    fn probe_rejects_bad_bodies_with_client_messages() {
        for (body, frag) in [
            (&b"not json"[..], "JSON object"),
            (b"[1,2]", "JSON object"),
            (b"{\"model\":", "not valid JSON"),
            (b"{\"messages\":[]}", "missing required field 'model'"),
            (b"{\"model\":\"  \"}", "must not be empty"),
            (b"{\"model\":5}", "must be a string"),
            (b"", "JSON object"),
        ] {
            let e = probe(body).unwrap_err();
            assert!(matches!(e, ProxyError::BadRequest(_)));
            assert!(e.to_string().contains(frag), "{e} should contain {frag}");
        }
    }

    #[test]
    fn probe_bounds_the_model_length() {
        let at = format!("{{\"model\":\"{}\"}}", "m".repeat(MAX_MODEL_LEN));
        assert_eq!(probe(at.as_bytes()).unwrap().model.len(), MAX_MODEL_LEN);
        let over = format!("{{\"model\":\"{}\"}}", "m".repeat(MAX_MODEL_LEN + 1));
        let e = probe(over.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("at most 1024"), "{e}");
    }

    #[test]
    fn rewrite_changes_only_model_and_keeps_order_and_bytes() {
        let body = br#"{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}], "model" : "fast","thinking":{"type":"adaptive","display":"omitted"},"n":1.50}"#;
        let out = rewrite_model(body, "z-ai/glm-5").unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"system":[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}],"model":"z-ai/glm-5","thinking":{"type":"adaptive","display":"omitted"},"n":1.50}"#
        );
        let out = rewrite_model(br#"{}"#, "m").unwrap();
        assert_eq!(&out[..], br#"{"model":"m"}"#);
        assert!(rewrite_model(b"{\"a\":1} trailing", "m").is_err());
    }
}
