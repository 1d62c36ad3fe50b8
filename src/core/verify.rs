//! Clear-and-verify: before a cooled connection takes traffic again, one cheap probe is sent
//! to that exact connection; only a 2xx answer lets [`Control::clear_cooldowns`] run. The
//! probe itself is injected ([`Probe`]) so the decision is tested without sockets.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;

use super::control::{ClearReport, ClearTarget, Control, ControlError};
use crate::config::{Connection, Provider};

/// What one probe saw. `status` is `None` when no response head arrived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbeResult {
    /// The upstream HTTP status, if a head arrived.
    pub status: Option<u16>,
    /// Time to the answer, in milliseconds.
    pub latency_ms: u64,
    /// Error text (masked, never a secret) when the probe did not pass.
    pub error: Option<String>,
}

impl ProbeResult {
    /// True for a 2xx answer.
    pub fn passed(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }
}

/// Sends one 1-token request (`max_tokens = 1`, non-streaming) for `model` to exactly this
/// connection: no routing, no fallback, no admission, no breaker or cooldown reporting.
pub trait Probe: Send + Sync {
    /// Runs the probe; never fails (failures are in the result).
    fn probe<'a>(
        &'a self,
        provider: &'a Provider,
        conn: &'a Connection,
        model: &'a str,
    ) -> Pin<Box<dyn Future<Output = ProbeResult> + Send + 'a>>;
}

/// The outcome of a clear-and-verify: the probe, and the clear when it passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// The connection probed.
    pub connection: String,
    /// The model named in the probe.
    pub model: String,
    /// True when the probe answered 2xx (and the clear ran).
    pub passed: bool,
    /// What the probe saw.
    pub probe: ProbeResult,
    /// The clear's report; `None` when the probe failed (nothing was cleared).
    pub cleared: Option<ClearReport>,
}

impl Control {
    /// Probes `connection` with `model` and clears its cooldown only if the probe answers
    /// 2xx. Errors: [`ControlError::UnknownConnection`]; an empty model is
    /// [`ControlError::Invalid`] (`verify`).
    pub async fn clear_and_verify(
        &self,
        probe: &dyn Probe,
        connection: &str,
        model: &str,
    ) -> Result<VerifyReport, ControlError> {
        let model = model.trim();
        if model.is_empty() {
            return Err(ControlError::Invalid {
                field: "verify".into(),
                message: "name the model to probe, e.g. \"verify\": \"claude-haiku\"".into(),
            });
        }
        let cfg = self.config();
        let (p, c) = cfg
            .providers
            .iter()
            .find_map(|p| {
                p.connections
                    .iter()
                    .find(|c| c.id == connection)
                    .map(|c| (p, c))
            })
            .ok_or_else(|| ControlError::UnknownConnection(connection.to_string()))?;
        let result = probe.probe(p, c, model).await;
        let passed = result.passed();
        let cleared = if passed {
            Some(self.clear_cooldowns(&ClearTarget::Connections(vec![c.id.clone()]))?)
        } else {
            tracing::info!(connection, model, status = ?result.status, "verify probe failed; cooldown kept");
            None
        };
        Ok(VerifyReport {
            connection: c.id.clone(),
            model: model.to_string(),
            passed,
            probe: result,
            cleared,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::clock::ManualClock;
    use crate::config::{LoadEnv, from_str};
    use crate::core::Core;
    use crate::core::test_support::{cool, cooling};

    struct Fake(Option<u16>);

    impl Probe for Fake {
        fn probe<'a>(
            &'a self,
            _: &'a Provider,
            _: &'a Connection,
            _: &'a str,
        ) -> Pin<Box<dyn Future<Output = ProbeResult> + Send + 'a>> {
            let status = self.0;
            Box::pin(async move {
                ProbeResult {
                    status,
                    latency_ms: 5,
                    error: status
                        .is_none_or(|s| s >= 300)
                        .then(|| "overloaded".to_string()),
                }
            })
        }
    }

    fn control() -> (Control, Core, ManualClock) {
        let env = LoadEnv::fixed(&[], "/tmp");
        let cfg = from_str(
            "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\nprofile = \"api_key\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n",
            Path::new("t.toml"),
            &env,
        )
        .unwrap();
        let clock = ManualClock::new();
        let core = Core::new(
            std::sync::Arc::new(cfg),
            std::sync::Arc::new(clock.clone()),
            None,
        );
        let control = Control::new(core.clone(), CancellationToken::new());
        (control, core, clock)
    }

    #[tokio::test]
    async fn a_passing_probe_clears_a_cooled_connection() {
        let (control, core, clock) = control();
        cool(&core, &clock);
        let r = control
            .clear_and_verify(&Fake(Some(200)), "c", "m")
            .await
            .unwrap();
        assert!(r.passed);
        assert_eq!(r.cleared.map(|c| c.cleared), Some(vec!["c".to_string()]));
        assert!(
            !cooling(&core, &clock),
            "the connection takes traffic again"
        );
    }

    #[tokio::test]
    async fn a_failing_probe_clears_nothing_and_keeps_the_error() {
        for status in [Some(503), None] {
            let (control, core, clock) = control();
            cool(&core, &clock);
            let r = control
                .clear_and_verify(&Fake(status), "c", "m")
                .await
                .unwrap();
            assert!(!r.passed);
            assert_eq!(r.cleared, None);
            assert_eq!(r.probe.error.as_deref(), Some("overloaded"));
            assert!(
                cooling(&core, &clock),
                "still excluded after a failed probe"
            );
        }
    }

    #[tokio::test]
    async fn unknown_connection_and_empty_model_are_refused() {
        let (c, _, _) = control();
        assert_eq!(
            c.clear_and_verify(&Fake(Some(200)), "nope", "m").await,
            Err(ControlError::UnknownConnection("nope".into()))
        );
        assert!(
            c.clear_and_verify(&Fake(Some(200)), "c", " ")
                .await
                .is_err()
        );
    }
}
