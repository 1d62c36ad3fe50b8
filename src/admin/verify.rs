//! Verified operator actions: `POST /api/resilience/cooldowns` and `POST
//! /api/resilience/reset` with `"verify": "<model>"`. sluice first sends one 1-token probe
//! for that model to the connection (see `crate::core::operator::verify`) and clears or resets only
//! when it answers 2xx. The answer is 200 either way (the probe ran); `passed` says whether
//! anything changed and `probe.error` why not.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};

use super::{answer, error};
use crate::core::operator::control::{Control, ControlError};
use crate::core::operator::verify::VerifyReport;

fn to_json(r: &VerifyReport) -> Result<Value, ControlError> {
    serde_json::to_value(r).map_err(|e| ControlError::Invalid {
        field: "report".into(),
        message: e.to_string(),
    })
}

/// Probes each of `ids` in turn with `model` and clears those that pass:
/// `{"verified": [report…], "cleared": [id…], "failed": [id…]}`. Errors: an empty list is
/// 400; an unknown id 404 and a passthrough one 400, before anything is probed.
pub(super) async fn clear(control: &Control, ids: &[String], model: &str) -> Response<Full<Bytes>> {
    if ids.is_empty() {
        return error(
            StatusCode::BAD_REQUEST,
            "verify: name the connections to probe in connectionIds",
        );
    }
    // Every id is checked before the first probe, so a bad one changes nothing.
    if let Err(e) = ids.iter().try_for_each(|id| control.check_verifiable(id)) {
        return answer(Err(e));
    }
    let mut reports = Vec::with_capacity(ids.len());
    for id in ids {
        match control.clear_and_verify(id, model).await {
            Ok(r) => reports.push(r),
            Err(e) => return answer(Err(e)),
        }
    }
    let ids_where = |passed: bool| -> Vec<&str> {
        reports
            .iter()
            .filter(|r| r.passed == passed)
            .map(|r| r.connection.as_str())
            .collect()
    };
    let (cleared, failed) = (ids_where(true), ids_where(false));
    answer(
        reports
            .iter()
            .map(to_json)
            .collect::<Result<Vec<_>, _>>()
            .map(|v| json!({"verified": v, "cleared": cleared, "failed": failed})),
    )
}

/// Probes `connection` of `provider` (by default its first with a key of its own) and
/// resets the breaker when it passes: the [`VerifyReport`] as JSON.
pub(super) async fn reset(
    control: &Control,
    provider: Option<&str>,
    connection: Option<&str>,
    model: &str,
) -> Response<Full<Bytes>> {
    let Some(provider) = provider else {
        return error(
            StatusCode::BAD_REQUEST,
            "verify: name the provider whose breaker to reset, e.g. {\"provider\": \"anthropic\", \"verify\": \"claude-haiku-4-5\"}",
        );
    };
    let r = control.reset_and_verify(provider, connection, model).await;
    answer(r.and_then(|r| to_json(&r)))
}
