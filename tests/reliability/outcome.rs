//! Judges what a client received: a complete 2xx, an error in the route's dialect, or a stream
//! that ended with exactly one terminal marker (success) or one terminal error event.

use serde_json::Value;

/// The client-facing inference routes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Route {
    /// `POST /v1/messages` (Anthropic).
    Messages,
    /// `POST /v1/chat/completions` (OpenAI).
    Chat,
    /// `POST /v1/responses` (OpenAI).
    Responses,
}

impl Route {
    /// All three.
    pub const ALL: [Route; 3] = [Route::Messages, Route::Chat, Route::Responses];

    /// The path.
    pub fn path(self) -> &'static str {
        match self {
            Route::Messages => "/v1/messages",
            Route::Chat => "/v1/chat/completions",
            Route::Responses => "/v1/responses",
        }
    }

    /// A request body for `model`.
    pub fn body(self, model: &str, stream: bool) -> Value {
        match self {
            Route::Messages => {
                serde_json::json!({"model": model, "max_tokens": 32, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]})
            }
            Route::Chat => serde_json::json!({"model": model, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]}),
            Route::Responses => {
                serde_json::json!({"model": model, "stream": stream, "input": "hi"})
            }
        }
    }

    /// Extra headers the route's clients send.
    pub fn headers(self) -> Vec<(&'static str, &'static str)> {
        match self {
            Route::Messages => vec![("anthropic-version", "2023-06-01")],
            _ => vec![],
        }
    }
}

/// One request's verdict.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Verdict {
    /// A complete 2xx (JSON, or a stream with its terminal marker).
    Ok,
    /// An error status with a body in the route's dialect.
    Error(u16),
    /// A 200 stream that ended with exactly one terminal error event.
    StreamError,
    /// Anything else: the reason.
    Malformed(String),
}

/// Whether `body` is an error object in the route's dialect.
pub fn is_dialect_error(route: Route, body: &[u8]) -> bool {
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return false;
    };
    match route {
        Route::Messages => {
            v["type"] == "error"
                && v["error"]["type"].is_string()
                && v["error"]["message"].is_string()
        }
        Route::Chat | Route::Responses => {
            v["error"]["message"].is_string() && v["error"].get("type").is_some()
        }
    }
}

/// Judges a non-streaming response.
pub fn judge_json(route: Route, status: u16, body: &[u8]) -> Verdict {
    if (200..300).contains(&status) {
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            return Verdict::Malformed(format!(
                "2xx body is not complete JSON ({} bytes): {}",
                body.len(),
                String::from_utf8_lossy(&body[..body.len().min(200)])
            ));
        };
        let ok = match route {
            Route::Messages => v["type"] == "message",
            Route::Chat => v["object"] == "chat.completion",
            Route::Responses => v["object"] == "response",
        };
        return if ok {
            Verdict::Ok
        } else {
            Verdict::Malformed(format!("2xx body is not a {route:?} object: {v}"))
        };
    }
    if status >= 400 && is_dialect_error(route, body) {
        Verdict::Error(status)
    } else {
        Verdict::Malformed(format!(
            "status {status} with a body not in the {route:?} error shape: {}",
            String::from_utf8_lossy(&body[..body.len().min(300)])
        ))
    }
}

/// One SSE event as the client saw it.
#[derive(Debug)]
struct Ev {
    event: Option<String>,
    data: String,
}

fn events(bytes: &[u8]) -> Vec<Ev> {
    let text = String::from_utf8_lossy(bytes).replace("\r\n", "\n");
    text.split("\n\n")
        .filter_map(|block| {
            let mut event = None;
            let mut data: Vec<&str> = Vec::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    event = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            (event.is_some() || !data.is_empty()).then(|| Ev {
                event,
                data: data.join("\n"),
            })
        })
        .filter(|e| e.event.as_deref() != Some("ping"))
        .collect()
}

/// What one event means for the outcome.
#[derive(Debug, PartialEq, Eq)]
enum Mark {
    Done,
    Error,
    Start,
    Other,
}

fn mark(route: Route, e: &Ev) -> Mark {
    let json: Option<Value> = serde_json::from_str(&e.data).ok();
    let ty = json
        .as_ref()
        .and_then(|v| v["type"].as_str().map(str::to_string));
    match route {
        Route::Messages => match e.event.as_deref().or(ty.as_deref()) {
            Some("message_stop") => Mark::Done,
            Some("error") => Mark::Error,
            Some("message_start") => Mark::Start,
            _ => Mark::Other,
        },
        Route::Chat => {
            if e.data.trim() == "[DONE]" {
                Mark::Done
            } else if json.as_ref().is_some_and(|v| v.get("error").is_some()) {
                Mark::Error
            } else {
                Mark::Other
            }
        }
        Route::Responses => match e.event.as_deref().or(ty.as_deref()) {
            Some("response.completed") => Mark::Done,
            Some("response.failed" | "error") => Mark::Error,
            Some("response.created") => Mark::Start,
            _ => Mark::Other,
        },
    }
}

/// Judges a 200 stream: `bytes` as received, `clean` whether the body ended without a
/// transport error.
pub fn judge_stream(route: Route, bytes: &[u8], clean: bool) -> Verdict {
    let evs = events(bytes);
    let marks: Vec<Mark> = evs.iter().map(|e| mark(route, e)).collect();
    let starts = marks.iter().filter(|m| **m == Mark::Start).count();
    if starts > 1 {
        return Verdict::Malformed(format!("{starts} stream starts"));
    }
    let errors = marks.iter().filter(|m| **m == Mark::Error).count();
    let dones = marks.iter().filter(|m| **m == Mark::Done).count();
    let tail = String::from_utf8_lossy(&bytes[bytes.len().saturating_sub(300)..]).into_owned();
    if !clean {
        return Verdict::Malformed(format!("stream broke without a terminal event: …{tail}"));
    }
    match route {
        // OpenAI chat: an error chunk is followed by `[DONE]`.
        Route::Chat => match (errors, dones, marks.last()) {
            (0, 1, Some(Mark::Done)) => Verdict::Ok,
            (1, 1, Some(Mark::Done))
                if marks.get(marks.len().wrapping_sub(2)) == Some(&Mark::Error) =>
            {
                Verdict::StreamError
            }
            _ => Verdict::Malformed(format!("{errors} errors, {dones} [DONE]: …{tail}")),
        },
        _ => match (errors, dones, marks.last()) {
            (0, 1, Some(Mark::Done)) => Verdict::Ok,
            (1, 0, Some(Mark::Error)) => Verdict::StreamError,
            _ => Verdict::Malformed(format!(
                "{errors} errors, {dones} terminal markers: …{tail}"
            )),
        },
    }
}
