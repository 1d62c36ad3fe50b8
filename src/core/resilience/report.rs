//! [`Core::report`]: the single choke point every attempt's outcome goes through (§0;
//! `docs/ARCHITECTURE.md#the-one-choke-point`).
//!
//! The decision — which layer records what — is the pure `policy::report::plan`; this file
//! only applies that plan to the live breaker, cooldowns and lockouts under one short lock,
//! and writes the changed rows behind to the store.

use std::borrow::Cow;

use crate::clock::Instant;
use crate::config::keys::{ConnKey, ProviderKey};
use crate::config::{ModelLockoutSettings, Profile, Provider, StatusSet};
use crate::core::Core;
use crate::core::resilience::{ReportEffect, ResState, Ticket};
use crate::policy::admission::requests_headroom_low;
use crate::policy::breaker::BreakerState;
use crate::policy::cooldown::{
    Cooldown, CooldownEffect, CooldownRecord, CooldownRules, rate_limit_override,
};
use crate::policy::lockout::{self, LockTarget, LockoutRecord};
use crate::policy::report::{
    self as plan, BreakerStep, ConnectionFacts, ConnectionStep, LockoutStep, ReportInput,
    ReportPlan,
};
use crate::policy::{Classified, OutcomeClass, Scope};

/// The reported attempt with the keys of its provider's connections (config order), so
/// the plan's connection positions find their state.
struct At<'a> {
    ticket: &'a Ticket,
    slots: &'a [ConnKey],
}

/// Rows to write behind after the lock is released.
#[derive(Default)]
struct Writes {
    breaker: Option<crate::policy::breaker::BreakerRecord>,
    connections: Vec<(usize, CooldownRecord)>,
    lockouts: Vec<(usize, Vec<LockoutRecord>)>,
}

impl Core {
    /// The single choke point every attempt's outcome goes through (§0): asks
    /// `policy::report::plan` what changes, applies it to the breaker (counted failures and
    /// successes, the probe verdict), the §1b window, the connection cooldown — or, in
    /// lockout mode, a model lockout instead — and the egress fan-out, and writes the changed
    /// rows behind to the store.
    pub fn report(&self, mut ticket: Ticket, c: &Classified) -> ReportEffect {
        let probe = ticket.settle();
        let now = self.clock().now();
        // The config is read under the lock, and the ticket's connection found in it by
        // key: an attempt started before a reload lands on the same provider and connection,
        // or nowhere when the reload removed it.
        let mut guard = self.res();
        let cfg = self.config();
        let Some((pi, ci)) = cfg.keys.find(ticket.key, ticket.positions) else {
            // The connection left; a probe permit goes back to its provider if that stayed.
            if let Some(probe) = probe
                && let Some(res) = guard.providers.get_mut(ticket.key.provider)
            {
                res.breaker.release_probe(probe, now);
            }
            return ReportEffect::default();
        };
        ticket.positions = (pi, ci);
        let Some(p) = cfg
            .providers
            .get(pi)
            .filter(|p| p.connections.get(ci).is_some())
        else {
            return ReportEffect::default();
        };
        let at = At {
            ticket: &ticket,
            slots: cfg.keys.connections_of(pi),
        };
        let (effect, writes) = apply_plan(&mut guard, p, &at, c, probe, now);
        let headroom_low = c.class == OutcomeClass::Success
            && requests_low(&guard, ticket.key, self.clock().wall());
        drop(guard);
        // The protection cap of a protected connection without `max_concurrent` learns from
        // concurrency-limit 429s (the attempt's permit is still held, so it is counted).
        self.gates()
            .observe_outcome(ticket.key, c.class, headroom_low);
        self.write_behind(&cfg, (pi, ci), writes);
        self.mark_dirty();
        effect
    }

    /// Writes the rows a report changed behind to the store: the breaker and the attempt's
    /// connection in one call, then the fanned-out connections and the lockout lists.
    fn write_behind(&self, cfg: &crate::config::Config, (pi, ci): (usize, usize), writes: Writes) {
        let own = writes.connections.iter().find(|(j, _)| *j == ci).cloned();
        self.persist_provider(cfg, pi, writes.breaker, own, None);
        for (j, rec) in writes.connections {
            if j != ci {
                self.persist_provider(cfg, pi, None, Some((j, rec)), None);
            }
        }
        for (j, locks) in writes.lockouts {
            self.persist_provider(cfg, pi, None, None, Some((j, locks)));
        }
    }
}

/// Asks `policy::report::plan` what the outcome `c` of the attempt `at` on provider `p`
/// changes and applies it (lockouts, breaker and window, connection cooldowns) under the
/// held lock; returns what changed and the rows to write behind.
fn apply_plan(
    r: &mut ResState,
    p: &Provider,
    at: &At<'_>,
    c: &Classified,
    probe: Option<crate::policy::breaker::ProbeTicket>,
    now: Instant,
) -> (ReportEffect, Writes) {
    let (ticket, ci) = (at.ticket, at.ticket.positions.1);
    let facts: Vec<ConnectionFacts<'_>> = p
        .connections
        .iter()
        .map(|x| ConnectionFacts {
            egress: &x.egress,
            disable_cooling: x.disable_cooling,
        })
        .collect();
    let trip_statuses = r
        .providers
        .get(ticket.key.provider)
        .map_or_else(StatusSet::default, |res| {
            res.breaker.settings().trip_statuses
        });
    let step = plan::plan(&ReportInput {
        outcome: c,
        lockout: &r.settings.model_lockout,
        passthrough: p
            .connections
            .get(ci)
            .is_some_and(|x| matches!(x.auth, crate::config::Auth::Passthrough)),
        per_model_quota: p.per_model_quota,
        egress_bucketed: p.egress_bucketed,
        connection: ci,
        connections: &facts,
        rule_base_cooldown: c.error_rule.and_then(|rule| rule.base_cooldown()),
        trip_statuses: &trip_statuses,
    });
    let mut effect = ReportEffect::default();
    let mut writes = Writes::default();
    apply_lockouts(r, p, ticket, c, &step, now, &mut effect, &mut writes);
    apply_breaker(
        r,
        p,
        ticket.key.provider,
        probe,
        step.breaker,
        now,
        &mut effect,
        &mut writes,
    );
    apply_connections(r, p, at, c, &step, now, &mut effect, &mut writes);
    (effect, writes)
}

/// Whether connection `key`'s requests window is nearly empty at `wall` (a success then does
/// not raise a learned protection cap).
fn requests_low(r: &ResState, key: ConnKey, wall: std::time::SystemTime) -> bool {
    r.providers
        .get(key.provider)
        .and_then(|res| res.headroom.get(key.slot))
        .is_some_and(|h| requests_headroom_low(&h.state, crate::clock::unix_ms(wall)))
}

/// Decay or lock (§3), per the plan.
#[expect(clippy::too_many_arguments, reason = "one apply step of one report")]
fn apply_lockouts(
    r: &mut ResState,
    p: &Provider,
    ticket: &Ticket,
    c: &Classified,
    step: &ReportPlan,
    now: Instant,
    effect: &mut ReportEffect,
    writes: &mut Writes,
) {
    let target = |j: usize| LockTarget {
        provider: &p.id,
        connection: p.connections.get(j).map_or("", |x| x.id.as_str()),
        model: &ticket.model,
        quota_groups: &p.quota_groups,
    };
    let conn_id = |j: usize| p.connections.get(j).map_or("", |x| x.id.as_str());
    match &step.lockout {
        LockoutStep::None => {}
        LockoutStep::Decay => {
            let ci = ticket.positions.1;
            if r.lockouts.on_success(target(ci)) {
                let list = r.lockouts.for_connection(&p.id, conn_id(ci), now);
                writes.lockouts.push((ci, list));
            }
        }
        LockoutStep::Lock {
            scope,
            connections,
            rejection,
        } => {
            let mut settings = lockout_settings(&r.settings.model_lockout, step);
            if *rejection {
                settings = Cow::Owned(lockout::rejection_settings(&settings));
            }
            let key = match scope {
                Scope::QuotaGroup => lockout::quota_group(&ticket.model, &p.quota_groups),
                _ => ticket.model.clone(),
            };
            for &j in connections {
                let until = r.lockouts.on_failure(
                    target(j),
                    *scope,
                    &c.reason,
                    c.retry_hint,
                    &settings,
                    now,
                );
                tracing::warn!(provider = %p.id, connection = %conn_id(j), model = %key, reason = %c.reason, lock_s = until.saturating_duration_since(now).as_secs(), "model locked out");
                writes
                    .lockouts
                    .push((j, r.lockouts.for_connection(&p.id, conn_id(j), now)));
            }
            effect.lockout = Some(key);
        }
    }
}

/// The lockout settings with an error rule's `base_cooldown` in place of the base.
fn lockout_settings<'s>(
    live: &'s ModelLockoutSettings,
    step: &ReportPlan,
) -> Cow<'s, ModelLockoutSettings> {
    match step.base_cooldown {
        None => Cow::Borrowed(live),
        // A rule's explicit duration stands even above the lockout cap (e.g. 6 h).
        Some(base) => Cow::Owned(ModelLockoutSettings {
            base_cooldown: base,
            max_cooldown: live.max_cooldown.max(base),
            ..live.clone()
        }),
    }
}

/// The breaker and the §1b window, per the plan; records a state change in `effect`.
#[expect(clippy::too_many_arguments, reason = "one apply step of one report")]
fn apply_breaker(
    r: &mut ResState,
    p: &Provider,
    provider: ProviderKey,
    probe: Option<crate::policy::breaker::ProbeTicket>,
    step: BreakerStep,
    now: Instant,
    effect: &mut ReportEffect,
    writes: &mut Writes,
) {
    let Some(res) = r.providers.get_mut(provider) else {
        return;
    };
    let before = res.breaker.state(now);
    match step {
        BreakerStep::Success => {
            res.breaker.on_success(probe, now);
            res.window.on_success(now);
        }
        BreakerStep::Failure => {
            res.breaker.on_failure(probe, now);
            res.window.on_failure(now);
        }
        BreakerStep::Release => {
            if let Some(t) = probe {
                res.breaker.release_probe(t, now);
            }
        }
    }
    let after = res.breaker.state(now);
    if before != after {
        if before == BreakerState::HalfOpen && after == BreakerState::Closed {
            // The probe succeeded: the provider ramps up from here (when `slow_start` is set).
            res.ramp_from = Some(now);
        }
        effect.breaker = Some((before, after));
        tracing::warn!(provider = %p.id, from = before.as_str(), to = after.as_str(), "circuit breaker changed state");
    }
    let persist = effect.breaker.is_some()
        || step == BreakerStep::Failure
        || step == BreakerStep::Success && before != BreakerState::Closed;
    if persist {
        writes.breaker = Some(res.breaker.persist());
    }
}

/// The attempt's connection and the egress fan-out (§2, §7), per the plan.
#[expect(clippy::too_many_arguments, reason = "one apply step of one report")]
fn apply_connections(
    r: &mut ResState,
    p: &Provider,
    at: &At<'_>,
    c: &Classified,
    step: &ReportPlan,
    now: Instant,
    effect: &mut ReportEffect,
    writes: &mut Writes,
) {
    let mut profile = r
        .settings
        .cooldown
        .get(&p.profile)
        .copied()
        .unwrap_or_else(|| crate::config::validate::default_cooldown(p.profile));
    if let Some(base) = step.base_cooldown {
        profile.base = base;
    }
    let (ticket, ci) = (at.ticket, at.ticket.positions.1);
    let disable_cooling = p.connections.get(ci).is_some_and(|x| x.disable_cooling);
    let global_rate_limit = r.settings.connection_cooldown.rate_limit_cooldown;
    let rate_limit_cooldown = |j: usize| {
        rate_limit_override(
            p.connections.get(j).and_then(|x| x.rate_limit_cooldown),
            p.rate_limit_cooldown,
            global_rate_limit,
        )
    };
    let rules = CooldownRules {
        profile,
        settings: &r.settings.connection_cooldown,
        oauth: p.profile == Profile::Oauth,
        disable_cooling,
        rate_limit_cooldown: rate_limit_cooldown(ci),
    };
    let Some(res) = r.providers.get_mut(ticket.key.provider) else {
        return;
    };
    if let Some(cd) = res.connections.get_mut(ticket.key.slot) {
        let changed = match step.connection {
            ConnectionStep::Success => cd.on_success(),
            ConnectionStep::Failure => !matches!(
                cd.on_failure(c, ticket.dispatched_at, &rules, now),
                CooldownEffect::Ignored
            ),
            ConnectionStep::Untouched => false,
        };
        effect.connection_changed = changed;
        if changed {
            writes.connections.push((ci, cd.persist()));
        }
    }
    let fanout = CooldownRules {
        disable_cooling: false,
        ..rules
    };
    for &j in &step.egress {
        let own = CooldownRules {
            rate_limit_cooldown: rate_limit_cooldown(j),
            ..fanout
        };
        if let Some(cd) = at
            .slots
            .get(j)
            .and_then(|k| res.connections.get_mut(k.slot))
            && !matches!(cd.on_failure(c, now, &own, now), CooldownEffect::Ignored)
        {
            writes.connections.push((j, Cooldown::persist(cd)));
        }
    }
}
