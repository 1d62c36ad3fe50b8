//! Model check of the breaker wiring. Random sequences of attempts — the chaos suite's fault
//! kinds, several in flight at once, reported in any order, some dropped unreported, with the
//! clock moving and the operator resetting — go through the real doors: `admit_candidate`,
//! `classify`, the `report` choke point, a dropped `Ticket`, `Control::reset_breakers`. The
//! same sequence is replayed through the pure policy alone (`policy::report::plan` picks the
//! breaker step, a bare `Breaker` applies it). After every step the live breaker must equal
//! the replay — state, counts, probe, backoff and transition history.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderMap;
use proptest::prelude::*;
use tokio_util::sync::CancellationToken;

use super::Core;
use super::operator::control::Control;
use super::resilience::{AttemptEnd, EndKind, Ticket, success};
use crate::clock::{Clock, ManualClock};
use crate::config::{LoadEnv, from_str};
use crate::policy::breaker::{Admit, Breaker, BreakerView, ProbeTicket};
use crate::policy::report::{self, BreakerStep, ConnectionFacts, ReportInput};
use crate::policy::select::{Candidate, ExclusionReason};

/// One provider, three connections that never cool (so every attempt reaches the breaker),
/// small thresholds so short sequences open, probe and close it.
const CONFIG: &str = r#"
[resilience.breaker.api_key]
degrade_at = 2
open_at = 3
reset_timeout = "5s"
probe_timeout = "10s"

[[providers]]
id = "p"
dialect = "anthropic"
base_url = "https://api.example.com"
profile = "api_key"
  [[providers.connections]]
  id = "a"
  auth = "passthrough"
  disable_cooling = true
  [[providers.connections]]
  id = "b"
  auth = "passthrough"
  disable_cooling = true
  [[providers.connections]]
  id = "c"
  auth = "passthrough"
  disable_cooling = true
"#;

/// What the upstream did to one attempt (the chaos mock's fault kinds).
#[derive(Debug, Clone, Copy)]
enum Fault {
    Ok,
    Status(u16),
    RateLimitedWithHint,
    Reset,
    Truncated,
    Zombie,
    Stall,
    EmptyTurn,
}

/// One step of a sequence.
#[derive(Debug, Clone)]
enum Step {
    /// The clock moves on by this many milliseconds.
    Advance(u64),
    /// An attempt on connection `n % 3` is admitted (or refused) and kept in flight.
    Admit(usize),
    /// The in-flight attempt `n % len` ends with the fault and is reported.
    Report(usize, Fault),
    /// The in-flight attempt `n % len` is dropped without a report (client gone mid-way).
    Drop(usize),
    /// The operator resets the breaker.
    Reset,
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        4 => Just(Fault::Ok),
        1 => prop::sample::select(vec![400u16, 401, 404, 429, 500, 502, 503, 529]).prop_map(Fault::Status),
        1 => Just(Fault::RateLimitedWithHint),
        1 => Just(Fault::Reset),
        1 => Just(Fault::Truncated),
        1 => Just(Fault::Zombie),
        1 => Just(Fault::Stall),
        1 => Just(Fault::EmptyTurn),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (0u64..7_000).prop_map(Step::Advance),
        4 => (0usize..3).prop_map(Step::Admit),
        4 => (any::<usize>(), fault()).prop_map(|(i, f)| Step::Report(i, f)),
        1 => any::<usize>().prop_map(Step::Drop),
        1 => Just(Step::Reset),
    ]
}

/// An attempt in flight on both sides: the core's ticket and the replay's probe permit.
struct InFlight {
    ticket: Ticket,
    probe: Option<ProbeTicket>,
}

/// The live core and the pure replay, stepped together.
struct Pair {
    core: Core,
    control: Control,
    clock: ManualClock,
    model: Breaker,
    in_flight: Vec<InFlight>,
}

impl Pair {
    fn new() -> Self {
        let env = LoadEnv::fixed(&[], "/tmp");
        let cfg = from_str(CONFIG, Path::new("model.toml"), &env).expect("model config is valid");
        let clock = ManualClock::new();
        let core = Core::new(Arc::new(cfg), Arc::new(clock.clone()), None);
        let settings = *core.res().providers[0].breaker.settings();
        let control = Control::new(core.clone(), CancellationToken::new());
        Self {
            core,
            control,
            clock,
            model: Breaker::new(settings),
            in_flight: Vec::new(),
        }
    }

    fn apply(&mut self, step: &Step) {
        let now = self.clock.now();
        match *step {
            Step::Advance(ms) => self.clock.advance(Duration::from_millis(ms)),
            Step::Admit(n) => self.admit(n % 3, now),
            Step::Report(i, f) if !self.in_flight.is_empty() => {
                let a = self.in_flight.remove(i % self.in_flight.len());
                self.report(a, f, now);
            }
            Step::Drop(i) if !self.in_flight.is_empty() => {
                let a = self.in_flight.remove(i % self.in_flight.len());
                drop(a.ticket);
                if let Some(p) = a.probe {
                    self.model.release_probe(p, now);
                }
            }
            Step::Reset => {
                let _ = self.control.reset_breakers(Some("p"));
                self.model.reset(now);
            }
            Step::Report(..) | Step::Drop(_) => {}
        }
    }

    fn admit(&mut self, connection: usize, now: crate::clock::Instant) {
        let cand = Candidate {
            provider: 0,
            connection,
            model: "m".into(),
            rewrite: false,
            target: 0,
            key: crate::config::keys::ConnKey::new(0, connection as u32),
        };
        let live = self.core.admit_candidate(&cand, now);
        let replay = self.model.admit(now);
        match (live, replay) {
            (Ok(ticket), Admit::Allowed) => self.in_flight.push(InFlight {
                ticket,
                probe: None,
            }),
            (Ok(ticket), Admit::Probe(p)) => self.in_flight.push(InFlight {
                ticket,
                probe: Some(p),
            }),
            (Err(e), Admit::Rejected { .. }) => {
                assert_eq!(e.reason, ExclusionReason::CircuitOpen, "{e:?}");
            }
            (live, replay) => panic!(
                "admission differs: live {}, replay {replay:?}",
                live.map_or_else(|e| format!("{e:?}"), |_| "admitted".into())
            ),
        }
    }

    fn report(&mut self, a: InFlight, f: Fault, now: crate::clock::Instant) {
        let mut headers = HeaderMap::new();
        let classified = match f {
            Fault::Ok => success(200),
            Fault::Status(s) => self
                .core
                .classify(0, &AttemptEnd::response(s, &headers, br#"{"error":{}}"#)),
            Fault::RateLimitedWithHint => {
                headers.insert("retry-after", http::HeaderValue::from_static("3"));
                self.core
                    .classify(0, &AttemptEnd::response(429, &headers, b""))
            }
            Fault::Reset => self.core.classify(0, &AttemptEnd::transport()),
            Fault::Truncated => self
                .core
                .classify(0, &AttemptEnd::truncated(Some(200), "body ended early")),
            Fault::Zombie => self
                .core
                .classify(0, &AttemptEnd::guard(EndKind::Zombie, "no event")),
            Fault::Stall => self
                .core
                .classify(0, &AttemptEnd::guard(EndKind::Stall, "no output")),
            Fault::EmptyTurn => self
                .core
                .classify(0, &AttemptEnd::guard(EndKind::EmptyTurn, "no answer")),
        };
        let facts = [ConnectionFacts {
            egress: "direct",
            disable_cooling: true,
        }; 3];
        let lockout = self.core.res().settings.model_lockout.clone();
        let trip_statuses = self.model.settings().trip_statuses;
        let plan = report::plan(&ReportInput {
            outcome: &classified,
            lockout: &lockout,
            passthrough: true,
            per_model_quota: false,
            egress_bucketed: false,
            connection: a.ticket.positions.1,
            connections: &facts,
            rule_base_cooldown: None,
            trip_statuses: &trip_statuses,
        });
        self.core.report(a.ticket, &classified);
        match plan.breaker {
            BreakerStep::Success => {
                self.model.on_success(a.probe, now);
            }
            BreakerStep::Failure => {
                self.model.on_failure(a.probe, now);
            }
            BreakerStep::Release => {
                if let Some(p) = a.probe {
                    self.model.release_probe(p, now);
                }
            }
        }
    }

    /// The live breaker and the replay, read at the same instant.
    fn views(&mut self) -> (BreakerView, BreakerView) {
        let now = self.clock.now();
        let live = self.core.res().providers[0].breaker.view(now);
        (live, self.model.view(now))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn live_breaker_equals_a_replay_through_the_pure_policy(steps in prop::collection::vec(step(), 1..120)) {
        let mut pair = Pair::new();
        for (i, s) in steps.iter().enumerate() {
            pair.apply(s);
            let (live, replay) = pair.views();
            prop_assert_eq!(live, replay, "after step {} ({:?})", i, s);
        }
    }
}

/// The generator reaches every state, so the check above is not vacuous: a scripted run
/// opens the breaker, probes it and closes it, and both sides agree on the way.
#[test]
fn a_scripted_outage_opens_probes_and_closes_on_both_sides() {
    use crate::policy::breaker::BreakerState;
    let mut pair = Pair::new();
    let mut states = Vec::new();
    let script = [
        Step::Admit(0),
        Step::Report(0, Fault::Status(503)),
        Step::Admit(1),
        Step::Report(0, Fault::Status(503)),
        Step::Admit(2),
        Step::Report(0, Fault::Reset),
        Step::Admit(0),
        Step::Advance(5_001),
        Step::Admit(0),
        Step::Report(0, Fault::Ok),
    ];
    for s in &script {
        pair.apply(s);
        let (live, replay) = pair.views();
        assert_eq!(live, replay, "after {s:?}");
        states.push(live.state);
    }
    for want in [
        BreakerState::Open,
        BreakerState::HalfOpen,
        BreakerState::Closed,
    ] {
        assert!(states.contains(&want), "{want:?} never reached: {states:?}");
    }
}
