//! Clear-and-verify: before a cooled connection (or a provider whose breaker the operator
//! resets) takes traffic again, one cheap probe is sent to that exact connection; only a 2xx
//! answer lets [`Control::clear_cooldowns`] / [`Control::reset_breakers`] run. The probe is
//! injected ([`Probe`], installed with [`Control::set_probe`]) so the decision is tested
//! without sockets; the real one is `crate::proxy::attempt::probe`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::config::{Auth, Config, Connection, Provider};
use crate::core::operator::control::{ClearReport, ClearTarget, Control, ControlError};

/// What one probe saw. `status` is `None` when no response head arrived.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// The outcome of a verified clear or breaker reset: the probe, and what was done when it
/// passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VerifyReport {
    /// The connection probed.
    pub connection: String,
    /// The model named in the probe.
    pub model: String,
    /// True when the probe answered 2xx (and the clear or reset ran).
    pub passed: bool,
    /// What the probe saw.
    pub probe: ProbeResult,
    /// A clear's report; `None` when the probe failed or this was a breaker reset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cleared: Option<ClearReport>,
    /// The providers whose breaker was reset; `None` when the probe failed or this was a
    /// clear.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reset: Option<Vec<String>>,
}

/// What a verified operator action applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifyTarget {
    /// Clear this connection's cooldown ([`Control::clear_and_verify`]).
    Connection(String),
    /// Reset this provider's breaker, probing its first connection with a key of its own
    /// ([`Control::reset_and_verify`]).
    Breaker(String),
}

impl VerifyTarget {
    /// The id named, for messages.
    pub fn id(&self) -> &str {
        match self {
            Self::Connection(id) | Self::Breaker(id) => id,
        }
    }
}

/// The connection a probe goes to, resolved against the running config.
struct ProbeTarget {
    cfg: Arc<Config>,
    provider: usize,
    connection: usize,
}

impl ProbeTarget {
    fn provider(&self) -> &Provider {
        &self.cfg.providers[self.provider]
    }

    fn connection(&self) -> &Connection {
        &self.provider().connections[self.connection]
    }
}

/// `verify`: what was wrong with it.
fn invalid(message: String) -> ControlError {
    ControlError::Invalid {
        field: "verify".into(),
        message,
    }
}

/// The trimmed model, or an error naming the key.
fn probe_model(model: &str) -> Result<&str, ControlError> {
    let model = model.trim();
    if model.is_empty() {
        return Err(invalid(
            "name the model to probe, e.g. \"verify\": \"claude-haiku-4-5\"".into(),
        ));
    }
    Ok(model)
}

/// A passthrough connection has no credential of its own: sluice cannot probe it.
fn probeable(p: &Provider, c: &Connection) -> Result<(), ControlError> {
    match c.auth {
        Auth::Key { .. } => Ok(()),
        Auth::Passthrough => Err(invalid(format!(
            "connection '{}' of provider '{}' forwards each client's own key (auth = \
             \"passthrough\"), so sluice has no key to probe it with; clear it without verify",
            c.id, p.id
        ))),
    }
}

impl Control {
    /// Installs the probe [`Control::clear_and_verify`] and [`Control::reset_and_verify`]
    /// send (the proxy's upstream probe; tests install a fake). The first call wins.
    pub fn set_probe(&self, probe: Arc<dyn Probe>) {
        let _ = self.probe.set(probe);
    }

    fn installed_probe(&self) -> Result<Arc<dyn Probe>, ControlError> {
        self.probe
            .get()
            .cloned()
            .ok_or_else(|| invalid("this sluice has no upstream probe".into()))
    }

    /// Whether `connection` can be verified (it exists and has a key of its own), without
    /// probing: a caller verifying several checks them all first. Errors as
    /// [`Control::clear_and_verify`].
    pub fn check_verifiable(&self, connection: &str) -> Result<(), ControlError> {
        self.probe_connection(connection).map(drop)
    }

    /// `connection` (any provider), if it can be probed.
    fn probe_connection(&self, connection: &str) -> Result<ProbeTarget, ControlError> {
        let cfg = self.config();
        let (provider, conn) = cfg
            .providers
            .iter()
            .enumerate()
            .find_map(|(i, p)| {
                p.connections
                    .iter()
                    .position(|c| c.id == connection)
                    .map(|j| (i, j))
            })
            .ok_or_else(|| ControlError::UnknownConnection(connection.to_string()))?;
        let t = ProbeTarget {
            cfg,
            provider,
            connection: conn,
        };
        probeable(t.provider(), t.connection())?;
        Ok(t)
    }

    /// `connection` of `provider`, or its first connection with a key of its own.
    fn probe_provider(
        &self,
        provider: &str,
        connection: Option<&str>,
    ) -> Result<ProbeTarget, ControlError> {
        let cfg = self.config();
        let i = cfg
            .providers
            .iter()
            .position(|p| p.id == provider)
            .ok_or_else(|| ControlError::UnknownProvider(provider.to_string()))?;
        let p = &cfg.providers[i];
        let j = match connection {
            Some(id) => {
                let j = p
                    .connections
                    .iter()
                    .position(|c| c.id == id)
                    .ok_or_else(|| ControlError::UnknownConnection(id.to_string()))?;
                probeable(p, &p.connections[j])?;
                j
            }
            None => p
                .connections
                .iter()
                .position(|c| matches!(c.auth, Auth::Key { .. }))
                .ok_or_else(|| {
                    invalid(format!(
                        "every connection of provider '{provider}' forwards the client's own \
                         key (auth = \"passthrough\"); reset its breaker without verify"
                    ))
                })?,
        };
        Ok(ProbeTarget {
            cfg,
            provider: i,
            connection: j,
        })
    }

    async fn run_probe(&self, t: &ProbeTarget, model: &str) -> Result<ProbeResult, ControlError> {
        let probe = self.installed_probe()?;
        let result = probe.probe(t.provider(), t.connection(), model).await;
        if !result.passed() {
            tracing::info!(
                provider = %t.provider().id,
                connection = %t.connection().id,
                model,
                status = ?result.status,
                "verify probe failed; nothing cleared"
            );
        }
        Ok(result)
    }

    /// [`Control::clear_and_verify`] or [`Control::reset_and_verify`] for `target`.
    pub async fn verify(
        &self,
        target: &VerifyTarget,
        model: &str,
    ) -> Result<VerifyReport, ControlError> {
        match target {
            VerifyTarget::Connection(c) => self.clear_and_verify(c, model).await,
            VerifyTarget::Breaker(p) => self.reset_and_verify(p, None, model).await,
        }
    }

    /// Probes `connection` with `model` and clears its cooldown only if the probe answers
    /// 2xx; a failed probe leaves it excluded. Errors: [`ControlError::UnknownConnection`];
    /// [`ControlError::Invalid`] (`verify`) for an empty model, a passthrough connection, or
    /// no installed probe.
    pub async fn clear_and_verify(
        &self,
        connection: &str,
        model: &str,
    ) -> Result<VerifyReport, ControlError> {
        let model = probe_model(model)?;
        let t = self.probe_connection(connection)?;
        let probe = self.run_probe(&t, model).await?;
        let id = t.connection().id.clone();
        let cleared = if probe.passed() {
            Some(self.clear_cooldowns(&ClearTarget::Connections(vec![id.clone()]))?)
        } else {
            None
        };
        Ok(VerifyReport {
            connection: id,
            model: model.to_string(),
            passed: probe.passed(),
            probe,
            cleared,
            reset: None,
        })
    }

    /// Probes `connection` of `provider` (by default its first connection with a key of
    /// its own) with `model` and resets the provider's breaker only if the probe answers 2xx.
    /// Errors: unknown provider or connection; [`ControlError::Invalid`] (`verify`) as for
    /// [`Control::clear_and_verify`].
    pub async fn reset_and_verify(
        &self,
        provider: &str,
        connection: Option<&str>,
        model: &str,
    ) -> Result<VerifyReport, ControlError> {
        let model = probe_model(model)?;
        let t = self.probe_provider(provider, connection)?;
        let probe = self.run_probe(&t, model).await?;
        let reset = if probe.passed() {
            Some(self.reset_breakers(Some(provider))?)
        } else {
            None
        };
        Ok(VerifyReport {
            connection: t.connection().id.clone(),
            model: model.to_string(),
            passed: probe.passed(),
            probe,
            cleared: None,
            reset,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Mutex;

    use http::HeaderMap;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::clock::{Clock, ManualClock};
    use crate::config::{LoadEnv, from_str};
    use crate::core::Core;
    use crate::core::resilience::AttemptEnd;
    use crate::core::test_support::{cand, cool, cooling};
    use crate::policy::breaker::BreakerState;

    /// Answers `status` and records each (connection, model) it was sent to.
    struct Fake {
        status: Option<u16>,
        sent: Mutex<Vec<(String, String)>>,
    }

    impl Probe for Fake {
        fn probe<'a>(
            &'a self,
            _: &'a Provider,
            conn: &'a Connection,
            model: &'a str,
        ) -> Pin<Box<dyn Future<Output = ProbeResult> + Send + 'a>> {
            if let Ok(mut s) = self.sent.lock() {
                s.push((conn.id.clone(), model.to_string()));
            }
            let status = self.status;
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

    const CONFIG: &str = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\nprofile = \"api_key\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = { env = \"K\" }\n  [[providers.connections]]\n  id = \"pt\"\n  auth = \"passthrough\"\n";

    /// Connection `c` (a key of its own) and `pt` (passthrough) on provider `p`, with a
    /// probe answering `status`.
    fn setup(status: Option<u16>) -> (Control, Core, ManualClock, Arc<Fake>) {
        let env = LoadEnv::fixed(&[("K", "sk-test")], "/tmp");
        let cfg = from_str(CONFIG, Path::new("t.toml"), &env).unwrap();
        let clock = ManualClock::new();
        let core = Core::new(Arc::new(cfg), Arc::new(clock.clone()), None);
        let control = Control::new(core.clone(), CancellationToken::new());
        let fake = Arc::new(Fake {
            status,
            sent: Mutex::default(),
        });
        control.set_probe(fake.clone());
        (control, core, clock, fake)
    }

    fn breaker(core: &Core) -> BreakerState {
        core.snapshot().providers[0].breaker.state
    }

    /// Reports 503s on connection 0 (admitted together, before the first cools it) until
    /// provider 0's breaker is open.
    fn trip(core: &Core, clock: &ManualClock) {
        let tickets: Vec<_> = (0..20)
            .filter_map(|_| core.admit_candidate(&cand(), clock.now()).ok())
            .collect();
        for t in tickets {
            let c = core.classify(0, &AttemptEnd::response(503, &HeaderMap::new(), b""));
            core.report(t, &c);
        }
        assert_eq!(
            breaker(core),
            BreakerState::Open,
            "20 503s open the breaker"
        );
    }

    #[tokio::test]
    async fn a_passing_probe_clears_a_cooled_connection() {
        let (control, core, clock, fake) = setup(Some(200));
        cool(&core, &clock);
        let r = control.clear_and_verify("c", " haiku ").await.unwrap();
        assert!(r.passed);
        assert_eq!(r.cleared.map(|c| c.cleared), Some(vec!["c".to_string()]));
        assert!(
            !cooling(&core, &clock),
            "the connection takes traffic again"
        );
        assert_eq!(
            *fake.sent.lock().unwrap(),
            vec![("c".to_string(), "haiku".to_string())],
            "one probe, to that connection, with the trimmed model"
        );
    }

    #[tokio::test]
    async fn a_failing_probe_clears_nothing_and_keeps_the_error() {
        for status in [Some(503), None] {
            let (control, core, clock, _) = setup(status);
            cool(&core, &clock);
            let r = control.clear_and_verify("c", "m").await.unwrap();
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
    async fn a_breaker_is_reset_only_after_a_passing_probe() {
        let (control, core, clock, fake) = setup(Some(529));
        trip(&core, &clock);
        let r = control.reset_and_verify("p", None, "m").await.unwrap();
        assert!(!r.passed && r.reset.is_none());
        assert_eq!(
            breaker(&core),
            BreakerState::Open,
            "a failed probe resets nothing"
        );
        assert_eq!(
            fake.sent.lock().unwrap()[0].0,
            "c",
            "the first keyed connection"
        );

        let (control, core, clock, _) = setup(Some(200));
        trip(&core, &clock);
        let r = control.reset_and_verify("p", Some("c"), "m").await.unwrap();
        assert_eq!(r.reset, Some(vec!["p".to_string()]));
        assert_eq!(breaker(&core), BreakerState::Closed);
    }

    #[tokio::test]
    async fn unknown_ids_empty_models_and_passthrough_are_refused() {
        let (c, _, _, fake) = setup(Some(200));
        assert_eq!(
            c.clear_and_verify("nope", "m").await,
            Err(ControlError::UnknownConnection("nope".into()))
        );
        assert_eq!(
            c.reset_and_verify("nope", None, "m").await,
            Err(ControlError::UnknownProvider("nope".into()))
        );
        let refused = |r: Result<VerifyReport, ControlError>| matches!(r, Err(ControlError::Invalid { field, .. }) if field == "verify");
        assert!(refused(c.clear_and_verify("c", " ").await));
        assert!(refused(c.clear_and_verify("pt", "m").await));
        assert!(refused(c.reset_and_verify("p", Some("pt"), "m").await));
        assert!(fake.sent.lock().unwrap().is_empty(), "nothing was probed");
    }

    #[tokio::test]
    async fn without_a_probe_verify_is_refused() {
        let env = LoadEnv::fixed(&[("K", "sk-test")], "/tmp");
        let cfg = from_str(CONFIG, Path::new("t.toml"), &env).unwrap();
        let core = Core::new(Arc::new(cfg), Arc::new(ManualClock::new()), None);
        let c = Control::new(core, CancellationToken::new());
        assert!(matches!(
            c.clear_and_verify("c", "m").await,
            Err(ControlError::Invalid { .. })
        ));
    }
}
