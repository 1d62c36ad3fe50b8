//! The §4 cooldown-aware wait: when every candidate is excluded and some only by short
//! connection cooldowns or model lockouts, wait for the earliest of those to end and dispatch
//! again — within the `[resilience.combo_cooldown_wait]` limits. It never waits for an open
//! breaker, a quota wait, a terminal state, or a cooldown or lockout caused by an auth or
//! not-found failure (those do not heal by waiting); such candidates are left out of the wait
//! rather than calling it off, so one open breaker cannot turn a burst of short cooldowns into
//! a burst of immediate errors. A combo with `cooldown_wait = false` opts out of it ([`settings_for`]).
//! [`hold`] is the opt-in longer wait of a combo with `hold_until_reset`: until the earliest
//! quota reset.

use std::time::Duration;

use crate::clock::{Clock, Instant};
use crate::config::{Combo, ComboCooldownWait};
use crate::policy::select::Exclusion;
use crate::snapshot::WaitReason;

/// A wait decided on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wait {
    /// How long.
    pub delay: Duration,
    /// The target whose exclusion ends first (`provider:connection/model`).
    pub target: String,
    /// Its exclusion reason (`connection_cooldown` or `model_lockout`), or `quota_hold`.
    pub reason: WaitReason,
}

/// The cooldown-wait settings of a request for `combo` (`None`: not a combo): the global
/// `[resilience.combo_cooldown_wait]`, switched off for a combo with `cooldown_wait = false`,
/// which then gets the immediate answer as if the wait were off everywhere.
pub fn settings_for(global: ComboCooldownWait, combo: Option<&Combo>) -> ComboCooldownWait {
    ComboCooldownWait {
        enabled: global.enabled && combo.is_none_or(|c| c.cooldown_wait),
        ..global
    }
}

/// The wait budget of one request.
pub struct CooldownWait {
    settings: ComboCooldownWait,
    waits: u32,
    waited: Duration,
}

impl CooldownWait {
    /// A fresh budget under `settings`.
    pub fn new(settings: ComboCooldownWait) -> Self {
        Self {
            settings,
            waits: 0,
            waited: Duration::ZERO,
        }
    }

    /// The wait to make now, given every candidate's exclusion: until the earliest exclusion
    /// that heals by waiting ends (a connection cooldown or model lock not caused by an auth
    /// or not-found failure). The others (an open breaker, a quota wait, a terminal state, an
    /// auth or not-found cooldown) are never waited on, and they do not stop a wait for a
    /// candidate that comes back soon. `None` when waiting is off, no exclusion heals by
    /// waiting, or the wait is over `max_wait` or the budget. One that ends now is a wait of
    /// 1 ms (dispatch again at once). Counts the wait against the budget.
    pub fn next(&mut self, excluded: &[Exclusion]) -> Option<Wait> {
        let s = &self.settings;
        if !s.enabled || self.waits >= s.max_attempts {
            return None;
        }
        let first = excluded
            .iter()
            .filter(|e| e.reason.is_waitable() && e.cause.heals_by_waiting())
            .filter_map(|e| e.retry_after.map(|d| (d, e)))
            .min_by_key(|(d, _)| *d)?;
        let d = first.0.max(Duration::from_millis(1));
        if d > s.max_wait || self.waited.saturating_add(d) > s.budget {
            return None;
        }
        self.waits += 1;
        self.waited += d;
        Some(Wait {
            delay: d,
            target: first.1.target.clone(),
            reason: WaitReason::of_exclusion(first.1.reason)?,
        })
    }
}

/// The hold-until-reset decision (combo `hold_until_reset`): when every candidate is
/// excluded by a quota wait or a quota preflight cut-off with a known reset, and the earliest
/// reset is at most `max_hold` away, hold until it (reason `quota_hold`). `None` otherwise.
pub fn hold(excluded: &[Exclusion], max_hold: Duration) -> Option<Wait> {
    let all_quota = !excluded.is_empty()
        && excluded
            .iter()
            .all(|e| e.reason.is_quota() && e.retry_after.is_some());
    if !all_quota {
        return None;
    }
    let (d, first) = excluded
        .iter()
        .filter_map(|e| e.retry_after.map(|d| (d, e)))
        .min_by_key(|(d, _)| *d)?;
    if d > max_hold {
        return None;
    }
    Some(Wait {
        // A reset that is due now still needs a moment to pass.
        delay: d.max(Duration::from_millis(1)),
        target: first.target.clone(),
        reason: WaitReason::QuotaHold,
    })
}

/// What a hold leaves of the client's own timeout for the answer itself.
pub const CLIENT_MARGIN: Duration = Duration::from_secs(5);

/// The client's own request timeout, when it says it: `x-stainless-timeout` (seconds, as the
/// Anthropic and OpenAI SDKs and the tools built on them send). Malformed, negative or absurd
/// values (over a day) are ignored.
pub fn client_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    static NAME: http::HeaderName = http::HeaderName::from_static("x-stainless-timeout");
    let secs: f64 = headers.get(&NAME)?.to_str().ok()?.trim().parse().ok()?;
    (secs.is_finite() && secs > 0.0 && secs <= 86_400.0).then(|| Duration::from_secs_f64(secs))
}

/// `max_hold` bounded by what is left of the client's timeout after `elapsed`, less
/// [`CLIENT_MARGIN`]: a hold never outlasts a client that would give up first.
pub fn within_client(max_hold: Duration, client: Option<Duration>, elapsed: Duration) -> Duration {
    match client {
        Some(t) => max_hold.min(t.saturating_sub(elapsed).saturating_sub(CLIENT_MARGIN)),
        None => max_hold,
    }
}

/// How often a wait re-reads the injected clock.
const CLOCK_POLL: Duration = Duration::from_millis(50);

/// Waits until `clock` reaches `until`, or `delay` of real time passed, whichever is first.
/// On the system clock the two agree; under a test's manual clock, advancing it ends the wait
/// within [`CLOCK_POLL`], and a test that never advances it still waits no longer than `delay`.
pub async fn sleep_on(clock: &dyn Clock, until: Instant, delay: Duration) {
    let real = tokio::time::sleep(delay);
    tokio::pin!(real);
    loop {
        let left = until.saturating_duration_since(clock.now());
        if left.is_zero() {
            return;
        }
        tokio::select! {
            () = &mut real => return,
            () = tokio::time::sleep(left.min(CLOCK_POLL)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::select::{ExclusionCause, ExclusionReason};

    /// An exclusion whose failure had reason word `cause` (e.g. `auth`, `rate_limited`).
    fn ex(reason: ExclusionReason, secs: u64, cause: &str) -> Exclusion {
        Exclusion {
            target: format!("p:k/{cause}"),
            reason,
            retry_after: Some(Duration::from_secs(secs)),
            cause: ExclusionCause::of_reason(cause),
        }
    }

    fn settings() -> ComboCooldownWait {
        ComboCooldownWait {
            enabled: true,
            max_wait: Duration::from_secs(60),
            max_attempts: 3,
            budget: Duration::from_secs(120),
        }
    }

    #[test]
    fn waits_for_the_earliest_transient_exclusion() {
        let mut w = CooldownWait::new(settings());
        let got = w.next(&[
            ex(ExclusionReason::ConnectionCooldown, 20, "rate_limited"),
            ex(ExclusionReason::ModelLockout, 10, "rate_limit_exceeded"),
        ]);
        assert_eq!(
            got.map(|w| (w.delay.as_secs(), w.reason)),
            Some((10, WaitReason::ModelLockout))
        );
    }

    #[test]
    fn a_combo_with_cooldown_wait_false_never_waits() {
        let combo = |cooldown_wait| Combo {
            name: "c".into(),
            strategy: crate::config::Strategy::Priority,
            targets: Vec::new(),
            hold_until_reset: false,
            max_hold: crate::config::DEFAULT_MAX_HOLD,
            cooldown_wait,
        };
        let cooling = || [ex(ExclusionReason::ConnectionCooldown, 10, "rate_limited")];
        let (opted_out, default) = (combo(false), combo(true));
        let mut w = CooldownWait::new(settings_for(settings(), Some(&opted_out)));
        assert_eq!(w.next(&cooling()), None, "opted out: answered at once");
        for c in [Some(&default), None] {
            let mut w = CooldownWait::new(settings_for(settings(), c));
            assert!(w.next(&cooling()).is_some(), "waits by default");
        }
        let off = ComboCooldownWait {
            enabled: false,
            ..settings()
        };
        assert!(
            !settings_for(off, Some(&default)).enabled,
            "a combo cannot turn on a wait that is off"
        );
    }

    #[test]
    fn never_waits_on_auth_or_not_found_or_breakers() {
        let cases = [
            ex(ExclusionReason::ConnectionCooldown, 1, "auth"),
            ex(ExclusionReason::ModelLockout, 1, "not_found"),
            ex(ExclusionReason::CircuitOpen, 1, ""),
            ex(ExclusionReason::QuotaWait, 1, "quota_exhausted"),
        ];
        for c in cases {
            let what = c.target.clone();
            let mut w = CooldownWait::new(settings());
            assert_eq!(w.next(std::slice::from_ref(&c)), None, "waited on {what}");
            // Beside a connection that is back in 5 s, the wait is for that one: the one that
            // does not heal by waiting is left out, not a reason to answer at once.
            let mut w = CooldownWait::new(settings());
            let ok = ex(ExclusionReason::ConnectionCooldown, 5, "rate_limited");
            let got = w.next(&[c, ok]).map(|w| (w.delay.as_secs(), w.target));
            assert_eq!(got, Some((5, "p:k/rate_limited".into())), "beside {what}");
        }
    }

    #[test]
    fn a_cooldown_ending_now_is_a_wait_of_a_millisecond() {
        let mut w = CooldownWait::new(settings());
        let mut now = ex(ExclusionReason::ConnectionCooldown, 0, "rate_limited");
        now.retry_after = Some(Duration::ZERO);
        let got = w.next(&[now]).map(|w| w.delay);
        assert_eq!(got, Some(Duration::from_millis(1)));
    }

    #[test]
    fn holds_only_when_every_exclusion_is_a_quota_reset_within_max_hold() {
        let max = Duration::from_secs(900);
        let got = hold(
            &[
                ex(ExclusionReason::QuotaPreflight, 600, ""),
                ex(ExclusionReason::QuotaWait, 300, "quota_exhausted"),
            ],
            max,
        );
        assert_eq!(
            got.map(|w| (w.delay.as_secs(), w.reason)),
            Some((300, WaitReason::QuotaHold))
        );
        assert!(hold(&[ex(ExclusionReason::QuotaWait, 901, "")], max).is_none());
        assert!(
            hold(
                &[
                    ex(ExclusionReason::QuotaWait, 5, ""),
                    ex(ExclusionReason::Terminal, 0, "")
                ],
                max
            )
            .is_none(),
            "a terminal connection does not heal at a reset"
        );
        assert!(hold(&[], max).is_none());
        let mut unknown = ex(ExclusionReason::QuotaPreflight, 1, "");
        unknown.retry_after = None;
        assert!(hold(&[unknown], max).is_none(), "reset unknown");
    }

    #[test]
    fn a_hold_never_outlasts_the_clients_own_timeout() {
        let mut h = http::HeaderMap::new();
        assert_eq!(client_timeout(&h), None);
        for (v, want) in [
            ("600", Some(600_000)),
            (" 90.5 ", Some(90_500)),
            ("0", None),
            ("-3", None),
            ("soon", None),
            ("1e9", None),
            ("NaN", None),
        ] {
            h.insert("x-stainless-timeout", http::HeaderValue::from_static(v));
            let got = client_timeout(&h).map(|d| u64::try_from(d.as_millis()).unwrap());
            assert_eq!(got, want, "{v}");
        }
        let m = |s| Duration::from_secs(s);
        assert_eq!(within_client(m(900), None, m(10)), m(900));
        assert_eq!(within_client(m(900), Some(m(600)), m(10)), m(585));
        assert_eq!(within_client(m(60), Some(m(600)), m(10)), m(60));
        assert_eq!(
            within_client(m(900), Some(m(600)), m(700)),
            m(0),
            "already late"
        );
    }

    #[test]
    fn a_wait_reads_as_the_log_line_says() {
        use crate::snapshot::WaitView;
        let w = |reason: WaitReason, waited_ms| WaitView {
            target: "a:key-a/glm-5".into(),
            reason: reason.into(),
            waited_ms,
        };
        assert_eq!(
            w(WaitReason::ConnectionCooldown, 9_950).describe(),
            "waited 9.9 s for key-a's cooldown"
        );
        assert_eq!(
            w(WaitReason::ModelLockout, 300).describe(),
            "waited 0.3 s for glm-5's lockout on key-a"
        );
    }

    #[test]
    fn stops_at_max_attempts_and_budget() {
        let mut w = CooldownWait::new(ComboCooldownWait {
            max_attempts: 2,
            budget: Duration::from_secs(25),
            ..settings()
        });
        let one = || [ex(ExclusionReason::ConnectionCooldown, 10, "rate_limited")];
        assert!(w.next(&one()).is_some());
        assert!(w.next(&one()).is_some());
        assert!(w.next(&one()).is_none(), "third wait past max_attempts");
        let mut w = CooldownWait::new(ComboCooldownWait {
            budget: Duration::from_secs(15),
            ..settings()
        });
        assert!(w.next(&one()).is_some());
        assert!(w.next(&one()).is_none(), "second wait past the budget");
    }
}
