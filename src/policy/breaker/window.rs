//! `ProviderCooldown`: the optional windowed provider cooldown
//! (`docs/RESILIENCE.md#1b-windowed-provider-cooldown-off-by-default`).
//!
//! Independent of the [`Breaker`](super::Breaker): it counts the same counted failures, but in a
//! sliding time window, and cools the whole provider for a fixed time once the window holds
//! `failure_threshold` of them. Off by default. Its thresholds are not breaker thresholds.

use std::collections::VecDeque;
use std::time::Duration;

use crate::clock::Instant;
use crate::config::ProviderCooldownProfile;

use super::later;

/// Windowed provider cooldown for one provider (§1b).
///
/// - **Disabled** (`[resilience.provider_cooldown] enabled = false`, the default): records
///   nothing and never cools.
/// - **Counting**: each failure the breaker counts ([`super::counts`]) is kept with its
///   instant; failures older than `failure_window` fall out. Any success clears the window.
/// - **Cooling**: when the window holds `failure_threshold` failures the provider is skipped
///   for `cooldown`, and the window starts empty again. Outcomes of requests admitted before
///   the cooldown (stragglers) neither extend nor end it. Expiry is lazy: it is just a
///   deadline compared with `now`.
///
/// ```
/// use std::time::Duration;
/// use sluice::clock::{Clock, ManualClock};
/// use sluice::config::validate::default_provider_cooldown;
/// use sluice::config::Profile;
/// use sluice::policy::breaker::ProviderCooldown;
///
/// let t0 = ManualClock::new().now();
/// // local: 2 failures within 5m cool the provider for 1m.
/// let mut c = ProviderCooldown::new(true, default_provider_cooldown(Profile::Local));
/// assert_eq!(c.on_failure(t0), None);
/// let until = c.on_failure(t0 + Duration::from_secs(10));
/// assert_eq!(until, Some(t0 + Duration::from_secs(70)));
/// assert_eq!(c.is_cooling(t0 + Duration::from_secs(69)), until);
/// assert_eq!(c.is_cooling(t0 + Duration::from_secs(70)), None);
/// ```
#[derive(Debug, Clone)]
pub struct ProviderCooldown {
    enabled: bool,
    profile: ProviderCooldownProfile,
    /// Instants of counted failures still inside the window, oldest first (at most
    /// `failure_threshold`).
    failures: VecDeque<Instant>,
    cooling_until: Option<Instant>,
}

/// Plain-data view of a [`ProviderCooldown`] at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderCooldownView {
    /// Master switch in use.
    pub enabled: bool,
    /// Counted failures inside `failure_window` at `now`.
    pub failures_in_window: u32,
    /// Failures that cool the provider.
    pub failure_threshold: u32,
    /// Sliding window length.
    pub failure_window: Duration,
    /// When the current cooldown ends, if cooling at `now`.
    pub cooling_until: Option<Instant>,
}

// === impl ProviderCooldown ===

impl ProviderCooldown {
    /// A cooldown with an empty window. `enabled` is `[resilience.provider_cooldown] enabled`.
    pub fn new(enabled: bool, profile: ProviderCooldownProfile) -> Self {
        Self {
            enabled,
            profile,
            failures: VecDeque::new(),
            cooling_until: None,
        }
    }

    /// Replaces the settings (live config edit). Disabling drops the window and any cooldown.
    pub fn set_settings(&mut self, enabled: bool, profile: ProviderCooldownProfile) {
        self.enabled = enabled;
        self.profile = profile;
        if !enabled {
            self.clear();
        }
    }

    /// Records a counted failure at `now`. Returns the end of the cooldown when this failure
    /// started one; `None` otherwise (below threshold, disabled, or already cooling).
    pub fn on_failure(&mut self, now: Instant) -> Option<Instant> {
        if !self.enabled || self.is_cooling(now).is_some() {
            return None;
        }
        self.prune(now);
        self.failures.push_back(now);
        if self.failures.len() < self.threshold() {
            return None;
        }
        self.failures.clear();
        let until = later(now, self.profile.cooldown);
        self.cooling_until = Some(until);
        Some(until)
    }

    /// Records a success: the failure window is cleared. An active cooldown is kept.
    pub fn on_success(&mut self, _now: Instant) {
        self.failures.clear();
    }

    /// Operator reset: empty window, no cooldown.
    pub fn clear(&mut self) {
        self.failures.clear();
        self.cooling_until = None;
    }

    /// When the cooldown ends, if the provider is cooling at `now` (always `None` when
    /// disabled).
    pub fn is_cooling(&self, now: Instant) -> Option<Instant> {
        self.cooling_until.filter(|u| self.enabled && now < *u)
    }

    /// Time left in the cooldown at `now`, if cooling.
    pub fn retry_after(&self, now: Instant) -> Option<Duration> {
        self.is_cooling(now)
            .map(|u| u.saturating_duration_since(now))
    }

    /// Plain-data view at `now`.
    pub fn view(&self, now: Instant) -> ProviderCooldownView {
        let in_window = self
            .failures
            .iter()
            .filter(|t| self.in_window(**t, now))
            .count();
        ProviderCooldownView {
            enabled: self.enabled,
            failures_in_window: u32::try_from(in_window).unwrap_or(u32::MAX),
            failure_threshold: self.profile.failure_threshold,
            failure_window: self.profile.failure_window,
            cooling_until: self.is_cooling(now),
        }
    }

    fn threshold(&self) -> usize {
        usize::try_from(self.profile.failure_threshold.max(1)).unwrap_or(usize::MAX)
    }

    /// A failure at `t` still counts at `now` while `now < t + failure_window`.
    fn in_window(&self, t: Instant, now: Instant) -> bool {
        now < later(t, self.profile.failure_window)
    }

    fn prune(&mut self, now: Instant) {
        while let Some(&t) = self.failures.front() {
            if self.in_window(t, now) {
                break;
            }
            self.failures.pop_front();
        }
    }
}
