//! `GET/POST/DELETE /api/faults`: inject, list and clear operator faults through `Control`.
//!
//! `POST` body: `{"target": "provider" | "provider/connection", "kind": "503", "duration":
//! "60s", "params": {"delay": "2s", "retry_after": "30s", "frames": 2}}` (`duration` and
//! `params` optional; durations are strings like `90s` or `2m`, or whole seconds as a number).
//! `DELETE` clears every fault, or one with `?id=3` or `?target=provider/connection`.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{answer, error, parse_json, query_param};
use crate::core::operator::control::{Control, ControlError};
use crate::core::operator::faults::FaultRequest;
use crate::policy::fault::{FaultParams, FaultSelector};

/// A duration in the body: `"90s"`, `"2m"`, or whole seconds.
#[derive(Deserialize)]
#[serde(untagged)]
enum DurationField {
    Secs(u64),
    Text(String),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InjectBody {
    target: Option<String>,
    kind: Option<String>,
    duration: Option<DurationField>,
    #[serde(default)]
    params: ParamsBody,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ParamsBody {
    delay: Option<DurationField>,
    retry_after: Option<DurationField>,
    frames: Option<u32>,
}

fn duration(field: &str, d: Option<DurationField>) -> Result<Option<Duration>, ControlError> {
    match d {
        None => Ok(None),
        Some(DurationField::Secs(s)) => Ok(Some(Duration::from_secs(s))),
        Some(DurationField::Text(t)) => {
            humantime::parse_duration(t.trim())
                .map(Some)
                .map_err(|e| ControlError::Invalid {
                    field: field.into(),
                    message: format!("'{t}' is not a duration ({e}); write e.g. \"90s\" or \"2m\""),
                })
        }
    }
}

fn request(b: InjectBody) -> Result<FaultRequest, ControlError> {
    let missing = |field: &str, example: &str| ControlError::Invalid {
        field: field.into(),
        message: format!("required, e.g. \"{field}\": \"{example}\""),
    };
    Ok(FaultRequest {
        target: b
            .target
            .ok_or_else(|| missing("target", "anthropic/key-a"))?,
        kind: b.kind.ok_or_else(|| missing("kind", "503"))?,
        duration: duration("duration", b.duration)?,
        params: FaultParams {
            delay: duration("params.delay", b.params.delay)?,
            retry_after: duration("params.retry_after", b.params.retry_after)?,
            frames: b.params.frames,
        },
    })
}

/// `POST /api/faults`: 200 with the injected fault, 400 for a bad body, 404 for an unknown
/// provider or connection.
pub(super) fn inject(control: &Control, body: &[u8]) -> Response<Full<Bytes>> {
    let b: InjectBody = match parse_json(body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    answer(
        request(b)
            .and_then(|r| control.inject_fault(&r))
            .map(|v| json!({"fault": v})),
    )
}

/// `GET /api/faults`: the faults on now, with `remaining_ms`.
pub(super) fn list(control: &Control) -> Response<Full<Bytes>> {
    answer(Ok(json!({"faults": control.faults()})))
}

/// `DELETE /api/faults[?id=N | ?target=p/c]`: the faults removed.
pub(super) fn clear(control: &Control, query: &str) -> Response<Full<Bytes>> {
    let sel = match (query_param(query, "id"), query_param(query, "target")) {
        (Some(id), None) => match id.parse::<u64>() {
            Ok(id) => FaultSelector::Id(id),
            Err(_) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    &format!("id: '{id}' is not a fault id (see GET /api/faults)"),
                );
            }
        },
        (None, Some(t)) => FaultSelector::Target(t.replace("%2F", "/").replace("%2f", "/")),
        (None, None) => FaultSelector::All,
        (Some(_), Some(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "give either id or target, not both",
            );
        }
    };
    let gone: Vec<Value> = control
        .clear_faults(&sel)
        .into_iter()
        .filter_map(|v| serde_json::to_value(v).ok())
        .collect();
    answer(Ok(json!({"cleared": gone})))
}
