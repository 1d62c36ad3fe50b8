//! Slow start through the core's doors: a connection whose cooldown lapsed ramps from the
//! deadline (not from the first look), `admit_candidate` skips it with reason `slow_start`
//! for about 1 − share of the offers, `admit_past_ramp` never does, and the snapshot shows
//! the ramp. Counts over many offers at one instant, with bounds many standard deviations
//! wide, so the process's random seed cannot make them flaky.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::Core;
use super::test_support::{cand, cool};
use crate::clock::{Clock, ManualClock};
use crate::config::{LoadEnv, from_str};
use crate::policy::select::ExclusionReason;

const CONFIG: &str = r#"
[[providers]]
id = "p"
dialect = "anthropic"
base_url = "https://api.example.com"
profile = "api_key"
slow_start = "40s"
  [[providers.connections]]
  id = "a"
  auth = "passthrough"
"#;

fn core(text: &str) -> (Core, ManualClock) {
    let env = LoadEnv::fixed(&[], "/tmp");
    let cfg = from_str(text, Path::new("t.toml"), &env).expect("test config is valid");
    let clock = ManualClock::new();
    let core = Core::new(Arc::new(cfg), Arc::new(clock.clone()), None);
    (core, clock)
}

/// Of `n` offers at the current instant, how many `admit_candidate` admitted; every refusal
/// must be `slow_start`.
fn admitted(core: &Core, clock: &ManualClock, n: usize) -> usize {
    (0..n)
        .filter(|_| match core.admit_candidate(&cand(), clock.now()) {
            Ok(t) => {
                core.release(t);
                true
            }
            Err(e) => {
                assert_eq!(e.reason, ExclusionReason::SlowStart, "{e:?}");
                assert_eq!(e.retry_after, None, "a ramp is never waited on");
                false
            }
        })
        .count()
}

#[test]
fn a_lapsed_cooldown_ramps_from_its_deadline() {
    let (core, clock) = core(CONFIG);
    cool(&core, &clock);
    // The cooldown ended at 3 s; nobody looked until 23 s: half the window has passed.
    clock.advance(Duration::from_secs(23));
    let snap = core.snapshot();
    assert_eq!(snap.providers[0].connections[0].ramp_percent, Some(55));
    assert_eq!(
        snap.providers[0].ramp_percent, None,
        "the breaker never opened"
    );
    let n = admitted(&core, &clock, 1000);
    assert!((400..=700).contains(&n), "{n} of 1000 at a 55 % share");
    let past = (0..100)
        .filter(|_| core.admit_past_ramp(&cand(), clock.now()).is_ok())
        .count();
    assert_eq!(past, 100, "past the ramp every offer is admitted");
    // The ramp survives the successes that follow it, and ends with its window.
    let t = core.admit_past_ramp(&cand(), clock.now()).unwrap();
    core.report(t, &super::resilience::success(200));
    assert_eq!(
        core.snapshot().providers[0].connections[0].ramp_percent,
        Some(55)
    );
    clock.advance(Duration::from_secs(20));
    assert_eq!(
        core.snapshot().providers[0].connections[0].ramp_percent,
        None
    );
    assert_eq!(admitted(&core, &clock, 200), 200);
}

#[test]
fn without_slow_start_a_lapsed_cooldown_takes_everything_at_once() {
    let (core, clock) = core(&CONFIG.replace("slow_start = \"40s\"\n", ""));
    cool(&core, &clock);
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        core.snapshot().providers[0].connections[0].ramp_percent,
        None
    );
    assert_eq!(admitted(&core, &clock, 200), 200);
}

#[test]
fn at_the_start_of_a_ramp_about_a_tenth_is_admitted() {
    let (core, clock) = core(CONFIG);
    cool(&core, &clock);
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        core.snapshot().providers[0].connections[0].ramp_percent,
        Some(10)
    );
    let n = admitted(&core, &clock, 1000);
    assert!((40..=200).contains(&n), "{n} of 1000 at a 10 % share");
}
