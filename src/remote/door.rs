//! `RemoteDoor`: the console's [`Door`] over a running sluice's admin API. Each method is one
//! call to the endpoint that runs the same `Control` method in the server:
//!
//! | door method | admin endpoint |
//! |---|---|
//! | `settings` | `GET /api/resilience` (the overrides; applied to this config file's settings) |
//! | `patch_settings` | `PATCH /api/resilience` |
//! | `replace_settings` | `PUT /api/resilience` |
//! | `revert_settings` | `DELETE /api/resilience` |
//! | `reset_breakers` | `POST /api/resilience/reset` |
//! | `clear_cooldowns` | `POST /api/resilience/cooldowns` |
//! | `verify` | the same two, with `"verify": "<model>"` |
//! | `reenable_model` | `DELETE /api/resilience/model-cooldowns` |
//! | `inject_fault` | `POST /api/faults` |
//! | `clear_faults` | `DELETE /api/faults` |
//! | `snapshot` | `GET /api/snapshot` |
//!
//! The console calls a door synchronously from its own thread; the calls run on the
//! attaching process's runtime and the console waits at most [`CALL_TIMEOUT`] (plus a
//! margin) for each.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::client::{AdminClient, CALL_TIMEOUT};
use crate::config::Resilience;
use crate::console::door::{Door, DoorError, Settings};
use crate::console::settings::RuleLists;
use crate::core::operator::control::{ClearReport, ClearTarget, SettingsPatch, apply_patch};
use crate::core::operator::faults::FaultRequest;
use crate::core::operator::verify::{VerifyReport, VerifyTarget};
use crate::proxy::attempt::probe::PROBE_TIMEOUT;
use crate::snapshot::FaultView;
use crate::snapshot::{RequestView, Snapshot};

/// `POST` here clears cooldowns (with `verify`: after a probe).
const COOLDOWNS: &str = "/api/resilience/cooldowns";
/// `POST` here resets breakers (with `verify`: after a probe).
const RESET: &str = "/api/resilience/reset";

/// The console's door onto a running sluice.
pub struct RemoteDoor {
    client: Arc<AdminClient>,
    runtime: tokio::runtime::Handle,
    /// The resilience settings of the config file `sluice console` read: the base the
    /// server's overrides apply to (the same file the server loaded).
    file: Resilience,
    /// Cancelled when the console leaves (`q`); the instance keeps running.
    leave: CancellationToken,
}

impl RemoteDoor {
    /// A door sending calls through `client` on `runtime`; `file` is the config file's
    /// resilience settings; `leave` is cancelled by [`Door::request_shutdown`].
    pub fn new(
        client: Arc<AdminClient>,
        runtime: tokio::runtime::Handle,
        file: Resilience,
        leave: CancellationToken,
    ) -> Self {
        RemoteDoor {
            client,
            runtime,
            file,
            leave,
        }
    }

    /// Runs one admin call on the runtime and waits for its answer.
    fn call(&self, method: Method, path: &str, body: Option<Value>) -> Result<Value, DoorError> {
        self.call_within(method, path, body, CALL_TIMEOUT)
    }

    /// [`RemoteDoor::call`] waiting at most `limit` for the answer.
    fn call_within(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        limit: Duration,
    ) -> Result<Value, DoorError> {
        let client = Arc::clone(&self.client);
        let path = path.to_owned();
        let work = async move {
            client
                .call_within(method, &path, body.as_ref(), limit)
                .await
        };
        self.block(work, limit)
    }

    fn block<T: Send + 'static>(
        &self,
        work: impl Future<Output = Result<T, DoorError>> + Send + 'static,
        limit: Duration,
    ) -> Result<T, DoorError> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(work.await);
        });
        rx.recv_timeout(limit.saturating_add(Duration::from_secs(1)))
            .unwrap_or_else(|_| Err(DoorError::Unreachable("no answer".into())))
    }
}

/// One row of `GET /api/requests`.
#[derive(serde::Deserialize)]
struct LogRow {
    id: i64,
    request: RequestView,
}

/// `v[key]` as `T`. Errors: missing or another shape ([`DoorError::Unreachable`]: the
/// instance speaks another version of the API).
fn field<T: serde::de::DeserializeOwned>(v: &Value, key: &str) -> Result<T, DoorError> {
    serde_json::from_value(v.get(key).cloned().unwrap_or(Value::Null))
        .map_err(|e| DoorError::Unreachable(format!("unexpected '{key}' in the answer: {e}")))
}

/// `v` as `T` (see [`field`]).
fn whole<T: serde::de::DeserializeOwned>(v: Value) -> Result<T, DoorError> {
    serde_json::from_value(v).map_err(|e| DoorError::Unreachable(format!("unexpected answer: {e}")))
}

fn body_of<T: serde::Serialize>(v: &T) -> Result<Value, DoorError> {
    serde_json::to_value(v).map_err(|e| DoorError::Unreachable(e.to_string()))
}

impl Door for RemoteDoor {
    fn settings(&self) -> Result<Settings, DoorError> {
        let v = self.call(Method::GET, "/api/resilience", None)?;
        let overrides: SettingsPatch = field(&v, "overrides")?;
        let effective = apply_patch(&self.file, &overrides)?;
        let lists = |key: &str| RuleLists::from_listing(v.get(key).unwrap_or(&Value::Null));
        Ok(Settings {
            effective,
            overrides,
            file: self.file.clone(),
            rules: lists("rules"),
            file_rules: lists("file_rules"),
        })
    }

    fn patch_settings(&self, patch: &SettingsPatch) -> Result<(), DoorError> {
        self.call(Method::PATCH, "/api/resilience", Some(body_of(patch)?))
            .map(drop)
    }

    fn replace_settings(&self, overrides: &SettingsPatch) -> Result<(), DoorError> {
        self.call(Method::PUT, "/api/resilience", Some(body_of(overrides)?))
            .map(drop)
    }

    fn revert_settings(&self) -> Result<(), DoorError> {
        self.call(Method::DELETE, "/api/resilience", None).map(drop)
    }

    fn reset_breakers(&self, provider: Option<&str>) -> Result<Vec<String>, DoorError> {
        let body = provider.map_or_else(|| json!({}), |p| json!({"provider": p}));
        let v = self.call(Method::POST, RESET, Some(body))?;
        field(&v, "reset")
    }

    fn clear_cooldowns(&self, target: &ClearTarget) -> Result<ClearReport, DoorError> {
        let body = match target {
            ClearTarget::Connections(ids) => json!({"connectionIds": ids}),
            ClearTarget::All { provider: None } => json!({"all": true}),
            ClearTarget::All { provider: Some(p) } => json!({"all": true, "provider": p}),
        };
        whole(self.call(Method::POST, COOLDOWNS, Some(body))?)
    }

    fn reenable_model(
        &self,
        provider: &str,
        connection: &str,
        model: &str,
    ) -> Result<bool, DoorError> {
        let body = json!({"provider": provider, "connection": connection, "model": model});
        let v = self.call(
            Method::DELETE,
            "/api/resilience/model-cooldowns",
            Some(body),
        )?;
        field(&v, "removed")
    }

    fn inject_fault(&self, req: &FaultRequest) -> Result<FaultView, DoorError> {
        let text = |d: Option<Duration>| d.map(|d| humantime::format_duration(d).to_string());
        let body = json!({
            "target": req.target,
            "kind": req.kind,
            "duration": text(req.duration),
            "params": {
                "delay": text(req.params.delay),
                "retry_after": text(req.params.retry_after),
                "frames": req.params.frames,
            },
        });
        let v = self.call(Method::POST, "/api/faults", Some(body))?;
        field(&v, "fault")
    }

    fn clear_faults(&self) -> Result<usize, DoorError> {
        let v = self.call(Method::DELETE, "/api/faults", None)?;
        let cleared: Vec<Value> = field(&v, "cleared")?;
        Ok(cleared.len())
    }

    fn snapshot(&self) -> Result<Snapshot, DoorError> {
        whole(self.call(Method::GET, "/api/snapshot", None)?)
    }

    fn reload_config(&self) -> Result<String, DoorError> {
        let v = self.call(Method::POST, "/api/config/reload", None)?;
        let diff: crate::config::reload::ReloadDiff = field(&v, "reloaded")?;
        Ok(diff.summary())
    }

    fn request_log_page(
        &self,
        before_id: Option<i64>,
        limit: usize,
    ) -> Result<Vec<(i64, RequestView)>, DoorError> {
        let path = match before_id {
            Some(id) => format!("/api/requests?limit={limit}&before_id={id}"),
            None => format!("/api/requests?limit={limit}"),
        };
        let v = self.call(Method::GET, &path, None)?;
        let rows: Vec<LogRow> = field(&v, "rows")?;
        Ok(rows.into_iter().map(|r| (r.id, r.request)).collect())
    }

    fn verify(&self, target: &VerifyTarget, model: &str) -> Result<VerifyReport, DoorError> {
        let limit = PROBE_TIMEOUT.saturating_add(CALL_TIMEOUT);
        match target {
            VerifyTarget::Connection(id) => {
                let body = json!({"connectionIds": [id], "verify": model});
                let v = self.call_within(Method::POST, COOLDOWNS, Some(body), limit)?;
                let mut reports: Vec<VerifyReport> = field(&v, "verified")?;
                reports
                    .pop()
                    .ok_or_else(|| DoorError::Unreachable("no probe report in the answer".into()))
            }
            VerifyTarget::Breaker(p) => {
                let body = json!({"provider": p, "verify": model});
                whole(self.call_within(Method::POST, RESET, Some(body), limit)?)
            }
        }
    }

    fn request_shutdown(&self) {
        self.leave.cancel();
    }
}
