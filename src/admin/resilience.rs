//! The `/api/resilience…` routes: breaker and cooldown resets, terminal resets, per-model
//! re-enabling, and the runtime resilience settings.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use serde_json::json;

use super::{answer, cooldowns as cooldowns_json, error, parse_json, query_param, verify};
use crate::core::operator::control::{ClearTarget, Control, ControlError, SettingsPatch};
use crate::proxy::respond::response::json_response;

/// `POST /api/resilience/reset`: closes the breakers of one provider or all; with `verify`,
/// probes the named model first.
pub(super) async fn reset(control: &Control, body: &[u8]) -> Response<Full<Bytes>> {
    #[derive(Deserialize, Default)]
    #[serde(deny_unknown_fields)]
    struct ResetBody {
        provider: Option<String>,
        connection: Option<String>,
        verify: Option<String>,
    }
    let b: ResetBody = match parse_json(body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    if let Some(model) = &b.verify {
        let (p, c) = (b.provider.as_deref(), b.connection.as_deref());
        return verify::reset(control, p, c, model).await;
    }
    if b.connection.is_some() {
        return error(
            StatusCode::BAD_REQUEST,
            "connection: only used with verify (the breaker is the provider's)",
        );
    }
    answer(
        control
            .reset_breakers(b.provider.as_deref())
            .map(|ids| json!({"reset": ids})),
    )
}

/// `GET /api/resilience/cooldowns?provider=P`: the cooldown view, of one provider if named
/// (404 for an unknown one).
pub(super) fn cooldowns(control: &Control, query: &str) -> Response<Full<Bytes>> {
    let provider = query_param(query, "provider");
    if let Some(p) = &provider
        && control.config().provider(p).is_none()
    {
        return error(StatusCode::NOT_FOUND, &format!("unknown provider '{p}'"));
    }
    json_response(
        StatusCode::OK,
        cooldowns_json(&control.snapshot(), provider.as_deref()),
    )
}

/// `POST /api/resilience/cooldowns`: clears the cooldowns of named connections or of all
/// (of one provider); with `verify`, probes the named connections first.
pub(super) async fn clear_cooldowns(control: &Control, body: &[u8]) -> Response<Full<Bytes>> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct ClearBody {
        connection_ids: Option<Vec<String>>,
        all: Option<bool>,
        provider: Option<String>,
        verify: Option<String>,
    }
    let b: ClearBody = match parse_json(body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    if let Some(model) = &b.verify {
        return match (&b.connection_ids, b.all, &b.provider) {
            (Some(ids), None | Some(false), None) => verify::clear(control, ids, model).await,
            _ => error(
                StatusCode::BAD_REQUEST,
                "verify probes named connections: send {\"connectionIds\": [..], \"verify\": \"<model>\"}",
            ),
        };
    }
    let target = match (b.connection_ids, b.all) {
        (Some(ids), None | Some(false)) if b.provider.is_none() => ClearTarget::Connections(ids),
        (None, Some(true)) => ClearTarget::All {
            provider: b.provider,
        },
        _ => {
            return error(
                StatusCode::BAD_REQUEST,
                "send {\"connectionIds\": [..]} or {\"all\": true, \"provider\"?: \"..\"}",
            );
        }
    };
    answer(control.clear_cooldowns(&target).and_then(|r| {
        serde_json::to_value(r).map_err(|e| ControlError::Invalid {
            field: "report".into(),
            message: e.to_string(),
        })
    }))
}

/// `POST /api/resilience/terminal-reset`: clears the terminal state of the named
/// connections, answering which were reset and which were unchanged.
pub(super) fn terminal_reset(control: &Control, body: &[u8]) -> Response<Full<Bytes>> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct ResetTerminal {
        connection_ids: Vec<String>,
    }
    let b: ResetTerminal = match parse_json(body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    let mut reset = Vec::new();
    let mut unchanged = Vec::new();
    for id in b.connection_ids {
        match control.reset_terminal(&id) {
            Ok(true) => reset.push(id),
            Ok(false) => unchanged.push(id),
            Err(e) => return answer(Err(e)),
        }
    }
    json_response(
        StatusCode::OK,
        json!({"reset": reset, "unchanged": unchanged}),
    )
}

/// `DELETE /api/resilience/model-cooldowns`: re-enables one model on one connection.
pub(super) fn reenable_model(control: &Control, body: &[u8]) -> Response<Full<Bytes>> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Reenable {
        provider: String,
        connection: String,
        model: String,
    }
    let b: Reenable = match parse_json(body) {
        Ok(b) => b,
        Err(r) => return *r,
    };
    answer(
        control
            .reenable_model(&b.provider, &b.connection, &b.model)
            .map(|removed| json!({"removed": removed})),
    )
}

/// `GET /api/resilience`: the effective settings, the runtime overrides, the file's settings
/// and the rules.
pub(super) fn settings(control: &Control) -> Response<Full<Bytes>> {
    let (settings, overrides) = control.settings();
    json_response(
        StatusCode::OK,
        json!({"settings": settings, "overrides": overrides, "file": control.file_settings(), "rules": control.rules(), "file_rules": control.file_rules()}),
    )
}

/// `PUT /api/resilience`: replaces the runtime overrides.
pub(super) fn replace_settings(control: &Control, body: &[u8]) -> Response<Full<Bytes>> {
    let overrides: SettingsPatch = match parse_json(body) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    answer(
        control
            .replace_settings(&overrides)
            .map(|s| json!({"settings": s, "overrides": control.settings().1})),
    )
}

/// `PATCH /api/resilience`: merges into the runtime overrides.
pub(super) fn patch_settings(control: &Control, body: &[u8]) -> Response<Full<Bytes>> {
    let patch: SettingsPatch = match parse_json(body) {
        Ok(p) => p,
        Err(r) => return *r,
    };
    answer(
        control
            .patch_settings(&patch)
            .map(|s| json!({"settings": s, "overrides": control.settings().1})),
    )
}

/// `DELETE /api/resilience`: drops the runtime overrides, back to the file's settings.
pub(super) fn revert_settings(control: &Control) -> Response<Full<Bytes>> {
    control.revert_settings();
    let (settings, _) = control.settings();
    json_response(
        StatusCode::OK,
        json!({"settings": settings, "overrides": {}}),
    )
}
