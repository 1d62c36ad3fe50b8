//! The live resilience state: one breaker and windowed cooldown per provider, one cooldown
//! per connection, the model lockouts and the session pins — the policy types of
//! `crate::policy`, held behind one short-lived lock and fed through one choke point,
//! [`Core::report`].
//!
//! Selection asks [`Core::admit_candidate`] (connection → quota preflight → lockout →
//! provider cooldown → breaker, so a probe permit is only taken for a candidate that will be
//! dispatched). Every attempt ends in exactly one [`Core::report`] or [`Core::release`]; the
//! [`Ticket`] carries the probe permit and the dispatch instant (for the §2 anti-herd rule).
//! Changes are written behind to the store as wall-clock rows.

pub mod credentials;
pub mod latency;
pub mod persist;
mod report;
pub mod routing;
use std::sync::Arc;
use std::time::Duration;

use crate::clock::Instant;
use crate::config::keys::{ConnKey, ConnSlot, Keyed, ProviderKey};
use crate::config::{Config, Profile, Resilience, Restatement, builtin_restatements};
use crate::core::resilience::routing::Routing;
use crate::policy::affinity::Affinity;
use crate::policy::breaker::{Admit, Breaker, BreakerState, ProbeTicket, ProviderCooldown};
use crate::policy::classify::{self, Input, Rules};
use crate::policy::cooldown::{Cooldown, Eligibility};
use crate::policy::lockout::{LockTarget, Lockouts};
use crate::policy::select::{Candidate, Exclusion, ExclusionCause, ExclusionReason};
use crate::policy::slow_start::{self, SlowStart};
use crate::policy::{Classified, OutcomeClass, Scope};
use crate::snapshot::{BreakerView, ConnectionView, LockoutView, TransitionView};

/// Per-provider live state, kept under the provider's key; per-connection tables are keyed
/// by the connection's slot.
pub(crate) struct ProviderRes {
    pub(crate) breaker: Breaker,
    pub(crate) window: ProviderCooldown,
    pub(crate) connections: Keyed<ConnSlot, Cooldown>,
    /// Quota headroom per connection.
    pub(crate) headroom: Keyed<ConnSlot, crate::core::quota::headroom::ConnHeadroom>,
    /// The low-priority lane per connection.
    pub(crate) lanes: Keyed<ConnSlot, crate::policy::lane::LaneSlot>,
    /// The session-limit reset record per connection.
    pub(crate) limit_resets: Keyed<ConnSlot, crate::policy::limit_reset::LimitResetSlot>,
    /// When the breaker last closed after a successful probe (the start of the provider's
    /// slow-start ramp); not persisted.
    pub(crate) ramp_from: Option<Instant>,
    /// Per connection: when its last cooldown ended (the start of its slow-start ramp),
    /// recorded lazily from the lapsed deadline.
    pub(crate) connection_ramps: Keyed<ConnSlot, Option<Instant>>,
}

impl ProviderRes {
    /// The state of provider `p` when nothing happened yet: a closed breaker, no window,
    /// every connection of `slots` active.
    pub(crate) fn fresh(
        settings: &Resilience,
        p: &crate::config::Provider,
        slots: impl IntoIterator<Item = ConnSlot>,
    ) -> Self {
        let mut out = Self {
            breaker: Breaker::new(breaker_settings(settings, p)),
            window: ProviderCooldown::new(
                settings.provider_cooldown.enabled,
                provider_window(settings, p.profile),
            ),
            connections: Keyed::default(),
            headroom: Keyed::default(),
            lanes: Keyed::default(),
            limit_resets: Keyed::default(),
            ramp_from: None,
            connection_ramps: Keyed::default(),
        };
        for slot in slots {
            out.add_connection(slot);
        }
        out
    }

    /// Fresh state for connection `slot`: active, no headroom seen, no lane, no reset.
    pub(crate) fn add_connection(&mut self, slot: ConnSlot) {
        self.connections.insert(slot, Cooldown::default());
        self.headroom.insert(slot, Default::default());
        self.lanes.insert(slot, Default::default());
        self.limit_resets.insert(slot, Default::default());
        self.connection_ramps.insert(slot, None);
    }

    /// Drops the state of connection `slot`.
    pub(crate) fn remove_connection(&mut self, slot: ConnSlot) {
        self.connections.remove(slot);
        self.headroom.remove(slot);
        self.lanes.remove(slot);
        self.limit_resets.remove(slot);
        self.connection_ramps.remove(slot);
    }

    /// The slow-start share of connection `j` at `now` under a ramp `window` (the provider's
    /// `slow_start`): the lower of the provider's and the connection's ramp, `None` when
    /// neither is ramping. First records the end of a lapsed connection cooldown as the
    /// connection's ramp start (cooldowns end lazily, so this is where it is seen).
    pub(crate) fn ramp_share(
        &mut self,
        j: ConnSlot,
        window: Duration,
        now: Instant,
    ) -> Option<f64> {
        if window.is_zero() {
            return None;
        }
        let lapsed = self
            .connections
            .get(j)
            .and_then(|cd| cd.lapsed_deadline(now));
        if let (Some(until), Some(slot)) = (lapsed, self.connection_ramps.get_mut(j))
            && slot.is_none_or(|from| from < until)
        {
            *slot = Some(until);
        }
        slow_start::combined(
            self.provider_share(window, now),
            running_share(self.connection_ramps.get(j).copied().flatten(), window, now),
        )
    }

    /// The share of the provider's own ramp (after its breaker closed) at `now`, `None` when
    /// it is not ramping.
    pub(crate) fn provider_share(&self, window: Duration, now: Instant) -> Option<f64> {
        running_share(self.ramp_from, window, now)
    }
}

/// The share at `now` of a ramp that began at `from` and lasts `window`, `None` when there is
/// none or it is over.
fn running_share(from: Option<Instant>, window: Duration, now: Instant) -> Option<f64> {
    from.map(|started_at| SlowStart { started_at, window }.share(now))
        .filter(|s| *s < 1.0)
}

/// A running share as a whole percentage for the snapshot (`ramping 40 %`).
fn ramp_percent(share: Option<f64>) -> Option<u8> {
    share.map(slow_start::as_percent)
}

/// All live resilience state (guarded by one mutex in the core).
pub(crate) struct ResState {
    /// Effective settings: the config file's, with operator overrides applied. Shared, so a
    /// request's [`settings_snapshot`](crate::core::Core::settings_snapshot) is a reference count,
    /// not a deep copy of every profile's maps (several per request).
    pub(crate) settings: Arc<Resilience>,
    pub(crate) builtins: Vec<Restatement>,
    pub(crate) providers: Keyed<ProviderKey, ProviderRes>,
    pub(crate) lockouts: Lockouts,
    pub(crate) affinity: Affinity,
    /// Operator overrides in force (saved in the store).
    pub(crate) overrides: crate::core::operator::control::SettingsPatch,
    /// The error and restatement rules in force (the file's, or the operator's saved lists).
    pub(crate) rules: crate::core::operator::settings::LiveRules,
    /// Combo strategy state.
    pub(crate) routing: Routing,
}

impl ResState {
    pub(crate) fn new(cfg: &Config) -> Self {
        let settings = Arc::new(cfg.resilience.clone());
        let providers = cfg
            .providers
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let slots = cfg.keys.connections_of(i).iter().map(|k| k.slot);
                (
                    cfg.keys.provider(i),
                    ProviderRes::fresh(&settings, p, slots),
                )
            })
            .collect();
        Self {
            affinity: Affinity::new(settings.session_affinity_ttl),
            settings,
            builtins: builtin_restatements(),
            providers,
            lockouts: Lockouts::default(),
            overrides: Default::default(),
            rules: crate::core::operator::settings::live_rules(cfg, &Default::default())
                .unwrap_or_default(),
            routing: Routing::new(seed(cfg)),
        }
    }

    /// Re-applies `settings` to every breaker and window (after a live edit).
    /// Puts `overrides` in force over `cfg`'s file settings: the effective settings, the
    /// live rules, and every breaker and window. Errors (nothing changed): an override that
    /// does not validate against the file.
    pub(crate) fn adopt(
        &mut self,
        cfg: &Config,
        overrides: crate::core::operator::control::SettingsPatch,
    ) -> Result<Resilience, crate::core::operator::control::ControlError> {
        let settings = crate::core::operator::control::apply_patch(&cfg.resilience, &overrides)?;
        self.rules = crate::core::operator::settings::live_rules(cfg, &overrides)?;
        self.settings = Arc::new(settings.clone());
        self.overrides = overrides;
        self.apply_settings(cfg);
        Ok(settings)
    }

    /// Calls `f` with every connection of `cfg` — its provider, itself, its provider's state
    /// and its slot there — in config order (a connection without state is skipped).
    pub(crate) fn each_connection(
        &mut self,
        cfg: &Config,
        mut f: impl FnMut(
            &crate::config::Provider,
            &crate::config::Connection,
            &mut ProviderRes,
            ConnSlot,
        ),
    ) {
        for (i, p) in cfg.providers.iter().enumerate() {
            let Some(pres) = self.providers.get_mut(cfg.keys.provider(i)) else {
                continue;
            };
            for (c, key) in p.connections.iter().zip(cfg.keys.connections_of(i)) {
                f(p, c, pres, key.slot);
            }
        }
    }

    /// Reads each connection's saved `settings` row of one kind (the row named
    /// `key_of(provider id, connection id)`) as a `T` and hands it to `put` with the
    /// connection's provider state and slot. Connections without a row are left alone; a row
    /// that does not parse is skipped with a warning naming `what`.
    pub(crate) fn restore_setting_rows<T: serde::de::DeserializeOwned>(
        &mut self,
        cfg: &Config,
        rows: &[crate::store::SettingRow],
        key_of: fn(&str, &str) -> String,
        what: &str,
        mut put: impl FnMut(&mut ProviderRes, ConnSlot, T),
    ) {
        self.each_connection(cfg, |p, c, pres, j| {
            let key = key_of(&p.id, &c.id);
            let Some(row) = rows.iter().find(|r| r.key == key) else {
                return;
            };
            match serde_json::from_str::<T>(&row.value_json) {
                Ok(saved) => put(pres, j, saved),
                Err(e) => {
                    tracing::warn!(key = %key, error = %e, "ignoring unreadable saved {what}")
                }
            }
        });
    }

    pub(crate) fn apply_settings(&mut self, cfg: &Config) {
        for (i, p) in cfg.providers.iter().enumerate() {
            let Some(res) = self.providers.get_mut(cfg.keys.provider(i)) else {
                continue;
            };
            res.breaker
                .set_settings(breaker_settings(&self.settings, p));
            res.window.set_settings(
                self.settings.provider_cooldown.enabled,
                provider_window(&self.settings, p.profile),
            );
        }
    }
}

/// A per-process seed for the strategies' randomness (tests of the orderings use fixed seeds
/// in `policy::strategy`).
fn seed(cfg: &Config) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_usize(cfg.providers.len());
    h.finish()
}

/// The breaker settings of provider `p`: its profile's, with its `[providers.breaker]` keys
/// on top (§1 "per profile and per provider").
fn breaker_settings(s: &Resilience, p: &crate::config::Provider) -> crate::config::BreakerSettings {
    let profile = s
        .breaker
        .get(&p.profile)
        .copied()
        .unwrap_or_else(|| crate::config::validate::default_breaker(p.profile));
    p.breaker.over(profile)
}

fn provider_window(s: &Resilience, p: Profile) -> crate::config::ProviderCooldownProfile {
    s.provider_cooldown.profiles.get(&p).copied().unwrap_or(
        crate::config::ProviderCooldownProfile {
            failure_threshold: 15,
            failure_window: Duration::from_secs(1800),
            cooldown: Duration::from_secs(600),
        },
    )
}

/// One admitted candidate: hand it back to exactly one of [`Core::report`] or
/// [`Core::release`] (its `Drop` releases the probe permit if neither ran).
pub struct Ticket {
    /// The connection's stable key (the candidate's): its state is found by it whatever
    /// reloads did since.
    pub key: ConnKey,
    /// Provider and connection positions in the candidate's config (a hint for finding them
    /// in the config served now).
    pub positions: (usize, usize),
    /// Upstream model.
    pub model: String,
    /// The breaker's HALF_OPEN probe permit, when this attempt is the probe.
    pub(crate) probe: Option<ProbeTicket>,
    /// When the attempt was dispatched (§2 anti-herd reference).
    pub dispatched_at: Instant,
    core: Option<crate::core::Core>,
}

impl Ticket {
    /// Hands the probe permit to a verdict ([`Core::report`]); the ticket's drop then
    /// releases nothing.
    pub(crate) fn settle(&mut self) -> Option<ProbeTicket> {
        self.core = None;
        self.probe.take()
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let (Some(core), Some(probe)) = (self.core.take(), self.probe.take()) {
            let now = core.clock().now();
            let mut r = core.res();
            if let Some(p) = r.providers.get_mut(self.key.provider) {
                p.breaker.release_probe(probe, now);
            }
        }
    }
}

/// What a report changed, for the request log line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportEffect {
    /// The breaker moved.
    pub breaker: Option<(BreakerState, BreakerState)>,
    /// The connection's cooldown or status changed.
    pub connection_changed: bool,
    /// A model lockout was written (key, until).
    pub lockout: Option<String>,
}

/// How an attempt ended, beyond what the upstream said: a plain response or transport end,
/// or one of the §6 stream guards that abandoned it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EndKind {
    /// The upstream's own answer (status, headers, body) or a transport failure: the rules
    /// decide.
    #[default]
    Upstream,
    /// A 200 stream with no useful event within the readiness timeout (`zombie_stream`,
    /// transient).
    Zombie,
    /// No model output within the content-stall timeout (`stream_stall`).
    Stall,
    /// Text arrived below the throughput watchdog's minimum (`throughput_too_low`).
    SlowThroughput,
    /// A 2xx answer that ended with no text and no tool call (`empty_turn`, see
    /// `proxy::turn`).
    EmptyTurn,
}

impl EndKind {
    /// The class and reason a guard end forces, `None` for [`EndKind::Upstream`].
    pub fn guard(self) -> Option<(OutcomeClass, &'static str)> {
        match self {
            Self::Upstream => None,
            Self::Zombie => Some((OutcomeClass::Transient, "zombie_stream")),
            Self::Stall => Some((OutcomeClass::StreamStall, "stream_stall")),
            Self::SlowThroughput => Some((OutcomeClass::StreamStall, "throughput_too_low")),
            Self::EmptyTurn => Some((OutcomeClass::EmptyTurn, "empty_turn")),
        }
    }
}

/// One attempt's end, as [`Core::classify`](crate::core::Core::classify) takes it.
#[derive(Debug, Clone, Copy, Default)]
pub struct AttemptEnd<'a> {
    /// HTTP status of the response head; `None` when none arrived (transport error, or a
    /// stream that broke).
    pub status: Option<u16>,
    /// Response headers, when the head carried hints (`retry-after`, rate-limit headers).
    pub headers: Option<&'a http::HeaderMap>,
    /// Error body or in-stream error JSON (empty for a transport error).
    pub body: &'a [u8],
    /// The `type` of an error event inside a 200 stream.
    pub in_stream_error: Option<&'a str>,
    /// The body ended or broke before it was complete.
    pub truncated: bool,
    /// Which rule ended it.
    pub kind: EndKind,
}

impl<'a> AttemptEnd<'a> {
    /// A transport failure before the response head.
    pub fn transport() -> Self {
        Self::default()
    }

    /// An upstream answer: `status`, its `headers` and (error) `body`.
    pub fn response(status: u16, headers: &'a http::HeaderMap, body: &'a [u8]) -> Self {
        Self {
            status: Some(status),
            headers: Some(headers),
            body,
            ..Self::default()
        }
    }

    /// A body that broke or ended short after a `status` head (`None` when the break is
    /// all that is known); `message` says how.
    pub fn truncated(status: Option<u16>, message: &'a str) -> Self {
        Self {
            status,
            body: message.as_bytes(),
            truncated: true,
            ..Self::default()
        }
    }

    /// An error event of type `error_type` with JSON `body` inside a 200 stream.
    pub fn in_stream(error_type: &'a str, body: &'a [u8]) -> Self {
        Self {
            in_stream_error: Some(error_type),
            body,
            ..Self::default()
        }
    }

    /// A stream guard abandoned a 200 stream; `message` says why.
    pub fn guard(kind: EndKind, message: &'a str) -> Self {
        Self {
            kind,
            ..Self::truncated(Some(200), message)
        }
    }
}

impl crate::core::Core {
    /// Checks one candidate at `now` and, if eligible, admits it (taking the breaker's probe
    /// permit when HALF_OPEN). Order: connection (terminal, quota wait, cooling) → quota
    /// preflight (`[resilience.quota_preflight]`, reason `quota_preflight`) → model lockout →
    /// §1b provider cooldown → breaker → slow start (a provider or connection ramping up
    /// after recovery is skipped, reason `slow_start`, with probability 1 − its share; see
    /// [`Core::admit_past_ramp`] for the candidate nothing else can serve).
    pub fn admit_candidate(&self, cand: &Candidate, now: Instant) -> Result<Ticket, Exclusion> {
        self.admit_with(cand, now, true)
    }

    /// [`Core::admit_candidate`] without the slow-start draw: dispatch uses it for a
    /// candidate skipped only by `slow_start` when no other candidate served, so a ramp
    /// never fails a request that has nowhere else to go.
    pub fn admit_past_ramp(&self, cand: &Candidate, now: Instant) -> Result<Ticket, Exclusion> {
        self.admit_with(cand, now, false)
    }

    fn admit_with(&self, cand: &Candidate, now: Instant, ramp: bool) -> Result<Ticket, Exclusion> {
        // The config is read under the lock so it is the one whose keys the state follows.
        let mut r = self.res();
        let cfg = self.config();
        let at = cand.positions_in(&cfg);
        let (Some((pi, ci)), Some(p), Some(c)) = (
            at,
            at.and_then(|(pi, _)| cfg.providers.get(pi)),
            at.and_then(|(pi, ci)| cfg.providers.get(pi)?.connections.get(ci)),
        ) else {
            return Err(Exclusion {
                target: String::new(),
                reason: ExclusionReason::Unavailable,
                retry_after: None,
                cause: ExclusionCause::Transient,
            });
        };
        // Named only when an exclusion or a log line needs it: most admissions need neither.
        let target = || crate::policy::select::target_label(&p.id, &c.id, &cand.model);
        let excl = Excluder {
            target: &target,
            now,
        };
        let key = cand.key;
        connection_gate(&r, key, &excl)?;
        // An active low-priority lane serves past the usage wall: preflight does not skip it.
        let on_lane = c.low_priority_mode
            && crate::core::quota::lane::active_in(&r, key, self.clock().as_ref());
        if !on_lane && let Some(e) = self.preflight_cut_off(&mut r, key, &cand.model, &target) {
            return Err(e);
        }
        let at = LockTarget {
            provider: &p.id,
            connection: &c.id,
            model: &cand.model,
            quota_groups: &p.quota_groups,
        };
        if let Some(l) = r.lockouts.locked(at, now) {
            return Err(Exclusion {
                cause: ExclusionCause::of_reason(&l.reason),
                ..excl.out(ExclusionReason::ModelLockout, Some(l.until))
            });
        }
        let probe = provider_gate(&mut r, key, p.slow_start, ramp, &excl)?;
        Ok(Ticket {
            key,
            positions: (pi, ci),
            model: cand.model.clone(),
            probe,
            dispatched_at: now,
            core: Some(self.clone()),
        })
    }

    /// The quota preflight exclusion of `cand` (reason `quota_preflight`, retry after the
    /// binding window's reset), or `None` when preflight is off or the connection may be
    /// dispatched. Reads the wall clock: upstream resets are wall-clock instants.
    fn preflight_cut_off(
        &self,
        r: &mut ResState,
        key: ConnKey,
        model: &str,
        target: &dyn Fn() -> String,
    ) -> Option<Exclusion> {
        let settings = r.settings.quota_preflight;
        if !settings.enabled {
            return None;
        }
        let now_ms = crate::clock::unix_ms(self.clock().wall());
        let h = r
            .providers
            .get_mut(key.provider)?
            .headroom
            .get_mut(key.slot)?;
        match h.preflight(target, model, &settings, now_ms) {
            crate::policy::headroom::preflight::Verdict::CutOff { reset_at_ms, .. } => {
                Some(Exclusion {
                    target: target(),
                    reason: ExclusionReason::QuotaPreflight,
                    retry_after: reset_at_ms
                        .map(|t| Duration::from_millis(t.saturating_sub(now_ms))),
                    cause: ExclusionCause::Transient,
                })
            }
            _ => None,
        }
    }

    /// Classifies one attempt's end with the live rules (§7 restatement first, then the
    /// provider error rules, then the §0 table); a stream-guard end ([`EndKind`]) keeps the
    /// rules' retry hint and status but takes the guard's class and reason.
    pub fn classify(&self, provider: usize, end: &AttemptEnd<'_>) -> Classified {
        let key = self.config().keys.provider(provider);
        self.classify_in(key, provider, end)
    }

    /// [`Self::classify`] for the provider keyed `key` (a candidate's or a ticket's), `hint`
    /// being its position in the config it came from.
    pub fn classify_in(&self, key: ProviderKey, hint: usize, end: &AttemptEnd<'_>) -> Classified {
        let r = self.res();
        let cfg = self.config();
        let provider = cfg.keys.find_provider(key, hint).unwrap_or(usize::MAX);
        let pid = cfg
            .providers
            .get(provider)
            .map(|p| p.id.as_str())
            .unwrap_or("");
        let dialect = cfg
            .providers
            .get(provider)
            .map(|p| p.dialect)
            .unwrap_or(crate::config::Dialect::Anthropic);
        let rules = Rules {
            restatements: &r.rules.restatement,
            builtins: &r.builtins,
            error_rules: &r.rules.error_rules,
            cooldown: &r.settings.connection_cooldown,
        };
        let input = Input {
            provider: pid,
            dialect,
            status: end.status,
            headers: end.headers,
            body: end.body,
            in_stream_error_type: end.in_stream_error,
            client_gone: false,
            truncated: end.truncated,
        };
        let mut c = classify::classify(&input, &rules, self.clock().wall());
        if let Some((class, reason)) = end.kind.guard() {
            c.class = class;
            c.reason = reason.to_string();
            c.scope = Scope::Triple;
        }
        c
    }

    /// Ends an attempt without a verdict (the client went away, sluice is shutting down):
    /// releases the probe permit, penalises nothing.
    pub fn release(&self, ticket: Ticket) {
        drop(ticket);
    }
}

/// Builds the exclusions of one admission: its target named lazily, `retry_after` counted
/// from `now`.
struct Excluder<'a> {
    target: &'a dyn Fn() -> String,
    now: Instant,
}

impl Excluder<'_> {
    /// A transient exclusion for `reason`, retrying at `until` when known.
    fn out(&self, reason: ExclusionReason, until: Option<Instant>) -> Exclusion {
        Exclusion {
            target: (self.target)(),
            reason,
            retry_after: until.map(|u| u.saturating_duration_since(self.now)),
            cause: ExclusionCause::Transient,
        }
    }
}

/// The connection's own state: terminal, waiting for quota, or cooling (an auth cooldown
/// says so in its cause) keeps it out.
fn connection_gate(r: &ResState, key: ConnKey, excl: &Excluder<'_>) -> Result<(), Exclusion> {
    let Some(res) = r.providers.get(key.provider) else {
        return Err(excl.out(ExclusionReason::Unavailable, None));
    };
    let cd = res.connections.get(key.slot);
    match cd.map(|cd| cd.eligibility(excl.now)) {
        Some(Eligibility::Terminal(_)) => Err(excl.out(ExclusionReason::Terminal, None)),
        Some(Eligibility::QuotaWait { until }) => {
            Err(excl.out(ExclusionReason::QuotaWait, Some(until)))
        }
        Some(Eligibility::Cooling { until }) => {
            // A connection cooled after a 401 or 403 is out for auth, not rate limiting.
            let cause = cd
                .and_then(|cd| cd.cooling_cause(excl.now))
                .map_or(ExclusionCause::Transient, ExclusionCause::of_class);
            Err(Exclusion {
                cause,
                ..excl.out(ExclusionReason::ConnectionCooldown, Some(until))
            })
        }
        _ => Ok(()),
    }
}

/// The provider's side, last: its cooldown window, its breaker (taking the probe permit when
/// half-open) and, when `ramp` is set, the slow-start draw of a provider or connection
/// ramping up after recovery (`window` = the provider's `slow_start`). Returns the probe
/// permit, if this attempt is the probe.
fn provider_gate(
    r: &mut ResState,
    key: ConnKey,
    window: Duration,
    ramp: bool,
    excl: &Excluder<'_>,
) -> Result<Option<ProbeTicket>, Exclusion> {
    let now = excl.now;
    let Some(res) = r.providers.get_mut(key.provider) else {
        return Err(excl.out(ExclusionReason::Unavailable, None));
    };
    if let Some(until) = res.window.is_cooling(now) {
        return Err(excl.out(ExclusionReason::ProviderCooldown, Some(until)));
    }
    let admit = res.breaker.admit(now);
    if ramp
        && matches!(admit, Admit::Allowed)
        && let Some(share) = res.ramp_share(key.slot, window, now)
    {
        let draw = slow_start::unit_draw(crate::policy::strategy::RngLike::next_u64(
            &mut r.routing.rng,
        ));
        if !slow_start::admit(share, draw) {
            return Err(excl.out(ExclusionReason::SlowStart, None));
        }
    }
    match admit {
        Admit::Rejected { retry_after } => Err(Exclusion {
            target: (excl.target)(),
            reason: ExclusionReason::CircuitOpen,
            retry_after: Some(retry_after),
            cause: ExclusionCause::Transient,
        }),
        admit => Ok(admit.probe()),
    }
}

/// One provider's resilience state rendered for one snapshot.
pub(crate) struct ProviderLive {
    pub(crate) breaker: BreakerView,
    /// The §1b window deadline (wall ms) while cooling.
    pub(crate) window_until: Option<u64>,
    /// Connection views (resilience fields only).
    pub(crate) connections: Vec<ConnectionView>,
    /// The provider's own slow-start ramp, in whole percent, while it runs.
    pub(crate) ramp_percent: Option<u8>,
}

impl ProviderLive {
    /// The views of a provider with no state (`connections` fresh ones).
    fn empty(connections: usize) -> Self {
        Self {
            breaker: BreakerView::default(),
            window_until: None,
            connections: vec![ConnectionView::default(); connections],
            ramp_percent: None,
        }
    }
}

/// Resilience state rendered for one snapshot.
pub(crate) struct LiveViews {
    /// Per provider, in config order.
    pub(crate) providers: Vec<ProviderLive>,
    pub(crate) lockouts: Vec<LockoutView>,
}

impl crate::core::Core {
    /// Evaluates every layer at `now` with the same lazy refresh as routing, so views show
    /// what the next request would see (§8). `None` when a reload replaced the config
    /// since `cfg` was read (the caller reads again).
    pub(crate) fn resilience_views(&self, cfg: &Arc<Config>, now: Instant) -> Option<LiveViews> {
        let tm = self.time_map();
        let mut r = self.res();
        if !Arc::ptr_eq(&self.config(), cfg) {
            return None;
        }
        let preflight = crate::core::quota::headroom::policy_settings(&r.settings.quota_preflight);
        let mut providers: Vec<ProviderLive> = cfg
            .providers
            .iter()
            .enumerate()
            .map(|(i, p)| match r.providers.get_mut(cfg.keys.provider(i)) {
                Some(res) => {
                    let at = ViewAt {
                        now,
                        tm: &tm,
                        preflight: &preflight,
                    };
                    provider_live(res, p, cfg.keys.connections_of(i), &at)
                }
                None => ProviderLive::empty(p.connections.len()),
            })
            .collect();
        drop(r);
        let locks = self.live_lockouts_paged(now);
        count_lockouts(cfg, &locks, &mut providers);
        let mut lockouts: Vec<LockoutView> = locks
            .into_iter()
            .map(|l| LockoutView {
                provider: l.provider,
                connection: l.connection,
                model: l.model,
                scope: l.scope,
                reason: l.reason,
                failures: l.failures,
                until_unix_ms: tm.wall(l.until),
            })
            .collect();
        lockouts.sort_by_key(|l| l.until_unix_ms);
        Some(LiveViews {
            providers,
            lockouts,
        })
    }
}

/// What one snapshot's views are rendered at: the instant, its wall-clock map and the
/// preflight settings.
struct ViewAt<'a> {
    now: Instant,
    tm: &'a crate::core::resilience::persist::TimeMap,
    preflight: &'a crate::policy::headroom::preflight::PreflightSettings,
}

/// Provider `p`'s resilience views from its state `res` (its connections keyed `keys`, in
/// config order); evaluates the slow-start ramps as routing would.
fn provider_live(
    res: &mut ProviderRes,
    p: &crate::config::Provider,
    keys: &[ConnKey],
    at: &ViewAt<'_>,
) -> ProviderLive {
    let now = at.now;
    let breaker = breaker_view(&mut res.breaker, at);
    let window_until = res.window.is_cooling(now).map(|t| at.tm.wall(t));
    let ramps: Vec<Option<u8>> = keys
        .iter()
        .map(|k| ramp_percent(res.ramp_share(k.slot, p.slow_start, now)))
        .collect();
    let provider_ramp = ramp_percent(res.provider_share(p.slow_start, now));
    let res = &*res;
    ProviderLive {
        breaker,
        window_until,
        connections: keys
            .iter()
            .zip(ramps)
            .map(|(k, ramp)| connection_view(res, k.slot, ramp, at))
            .collect(),
        ramp_percent: provider_ramp,
    }
}

/// The breaker's view at `at` (instants as wall-clock ms).
fn breaker_view(breaker: &mut Breaker, at: &ViewAt<'_>) -> BreakerView {
    let b = breaker.view(at.now);
    BreakerView {
        state: b.state,
        failure_count: b.failure_count,
        degrade_at: b.degrade_at,
        open_at: b.open_at,
        next_probe_at_unix_ms: b.next_probe_at.map(|t| at.tm.wall(t)),
        multiplier: b.multiplier,
        transitions: b
            .transitions
            .iter()
            .map(|t| TransitionView {
                at_unix_ms: at.tm.wall(t.at),
                from: t.from,
                to: t.to,
                reason: t.reason.as_str().into(),
            })
            .collect(),
    }
}

/// Connection `j`'s resilience fields (cooldown, lane, reset record, headroom, preflight,
/// `ramp_percent`); a fresh view when it has no state.
fn connection_view(
    res: &ProviderRes,
    j: ConnSlot,
    ramp_percent: Option<u8>,
    at: &ViewAt<'_>,
) -> ConnectionView {
    let (Some(cd), Some(h), Some(lane), Some(reset)) = (
        res.connections.get(j),
        res.headroom.get(j),
        res.lanes.get(j),
        res.limit_resets.get(j),
    ) else {
        return ConnectionView::default();
    };
    let v = cd.view(at.now);
    let wall_ms = at.tm.wall_ms();
    ConnectionView {
        lane: crate::core::quota::lane::view(lane, wall_ms),
        limit_reset: crate::core::quota::limit_reset::view(reset, wall_ms),
        ramp_percent,
        status: v.status,
        cooldown_until_unix_ms: v.until.map(|t| at.tm.wall(t)),
        backoff_level: v.backoff_level,
        last_error_kind: crate::snapshot::Word::parse_non_empty(&v.last_error_kind),
        last_error: v.last_error,
        last_status: v.last_status,
        headroom: crate::core::quota::headroom::rows_view(&h.state, wall_ms),
        preflight: crate::core::quota::headroom::preflight_view(
            &crate::policy::headroom::preflight::decide(&h.state, None, at.preflight, wall_ms),
        ),
        ..Default::default()
    }
}

/// Lockout entries read per hold of the state lock while a snapshot lists them (512: about
/// 0.1 ms of copying, so requests never wait behind a listing of thousands).
const LOCKOUT_PAGE: usize = 512;

impl crate::core::Core {
    /// Every live lockout at `now`, in key order, read [`LOCKOUT_PAGE`] entries per hold of
    /// the state lock.
    fn live_lockouts_paged(&self, now: Instant) -> Vec<crate::policy::lockout::LockoutView> {
        let mut out = Vec::new();
        let mut after = None;
        loop {
            let (page, next) = self
                .res()
                .lockouts
                .list_page(now, after.as_ref(), LOCKOUT_PAGE);
            out.extend(page);
            match next {
                Some(key) => after = Some(key),
                None => return out,
            }
        }
    }
}

/// Sets each connection view's `lockouts` to the number of `locks` on it: one pass over the
/// locks (outside the state lock), not one per connection.
fn count_lockouts(
    cfg: &Config,
    locks: &[crate::policy::lockout::LockoutView],
    providers: &mut [ProviderLive],
) {
    let mut counts: std::collections::HashMap<(&str, &str), u32> = std::collections::HashMap::new();
    for l in locks {
        let n = counts
            .entry((l.provider.as_str(), l.connection.as_str()))
            .or_default();
        *n = n.saturating_add(1);
    }
    for (p, live) in cfg.providers.iter().zip(providers.iter_mut()) {
        for (c, view) in p.connections.iter().zip(live.connections.iter_mut()) {
            view.lockouts = counts
                .get(&(p.id.as_str(), c.id.as_str()))
                .copied()
                .unwrap_or(0);
        }
    }
}

/// The classification of a completed successful attempt.
pub fn success(status: u16) -> Classified {
    Classified {
        class: OutcomeClass::Success,
        status: Some(status),
        retry_hint: None,
        reason: "ok".into(),
        scope: Scope::Triple,
        restated: None,
        message: String::new(),
        error_rule: None,
    }
}

impl crate::core::Core {
    /// The effective resilience settings (file + operator overrides), shared: a later edit
    /// installs new settings and leaves this snapshot as it was.
    pub fn settings_snapshot(&self) -> Arc<Resilience> {
        Arc::clone(&self.res().settings)
    }
}

#[cfg(test)]
mod count_tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};
    use crate::policy::lockout::LockoutView as Lock;

    #[test]
    fn each_connection_counts_only_its_own_lockouts() {
        let text = "[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"a1\"\n  auth = \"passthrough\"\n  [[providers.connections]]\n  id = \"a2\"\n  auth = \"passthrough\"\n[[providers]]\nid = \"b\"\ndialect = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"b1\"\n  auth = \"passthrough\"\n";
        let cfg = from_str(
            text,
            std::path::Path::new("t.toml"),
            &LoadEnv::fixed(&[], "/tmp"),
        )
        .expect("valid config");
        let now = crate::clock::Clock::now(&crate::clock::ManualClock::new());
        let lock = |p: &str, c: &str, i: usize| Lock {
            provider: p.into(),
            connection: c.into(),
            model: format!("m{i}"),
            scope: Scope::Model,
            reason: "not_found".into(),
            failures: 1,
            until: now,
        };
        let mut locks: Vec<Lock> = (0..700).map(|i| lock("a", "a1", i)).collect();
        locks.extend((0..3).map(|i| lock("a", "a2", i)));
        // A lock naming a connection of another provider counts for neither.
        locks.push(lock("b", "a1", 0));
        let live = |n: usize| ProviderLive {
            breaker: BreakerView::default(),
            window_until: None,
            connections: vec![ConnectionView::default(); n],
            ramp_percent: None,
        };
        let mut providers = vec![live(2), live(1)];
        count_lockouts(&cfg, &locks, &mut providers);
        let counts: Vec<Vec<u32>> = providers
            .iter()
            .map(|p| p.connections.iter().map(|c| c.lockouts).collect())
            .collect();
        assert_eq!(counts, vec![vec![700, 3], vec![0]]);
    }
}
