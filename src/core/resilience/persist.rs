//! Conversions between live policy state (monotonic `Instant`s) and store rows (wall-clock
//! Unix ms), and the startup restore. A deadline is saved as `wall_now + (t - now)` and
//! loaded as `now + (wall - wall_now)`, saturating, so remaining times survive a restart and
//! wall-clock jumps never reach the in-memory logic (`docs/ARCHITECTURE.md#layers`, "Time").

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::{Instant, unix_ms};
use crate::config::Config;
use crate::core::Core;
use crate::core::resilience::ResState;
use crate::policy::Scope;
use crate::policy::affinity::{Affinity, PinRecord};
use crate::policy::breaker::{Breaker, BreakerRecord, BreakerState, Transition, TransitionReason};
use crate::policy::cooldown::{ConnectionStatus, Cooldown, CooldownRecord};
use crate::policy::lockout::{self, LockoutRecord, Lockouts};
use crate::store::{
    AffinityRow, BreakerRow, ConnectionRow, LockoutRow, PersistedState, StateWrite,
};

/// Maps instants to wall ms and back around one (now, wall_now) pair.
#[derive(Debug, Clone, Copy)]
pub struct TimeMap {
    now: Instant,
    wall_ms: u64,
}

impl TimeMap {
    /// Anchors the map at the core clock's current readings.
    pub fn new(now: Instant, wall_ms: u64) -> Self {
        Self { now, wall_ms }
    }

    /// The wall-clock Unix ms the map is anchored at ("now").
    pub fn wall_ms(&self) -> u64 {
        self.wall_ms
    }

    /// Wall-clock Unix ms of `t`.
    pub fn wall(&self, t: Instant) -> u64 {
        if t >= self.now {
            let ahead = u64::try_from(t.duration_since(self.now).as_millis()).unwrap_or(u64::MAX);
            self.wall_ms.saturating_add(ahead)
        } else {
            let behind = u64::try_from(self.now.duration_since(t).as_millis()).unwrap_or(u64::MAX);
            self.wall_ms.saturating_sub(behind)
        }
    }

    /// The instant of wall-clock `ms`, saturating at what `Instant` can represent.
    pub fn instant(&self, ms: u64) -> Instant {
        if ms >= self.wall_ms {
            let d = Duration::from_millis(ms - self.wall_ms);
            crate::policy::cooldown::deadline_after(self.now, d)
        } else {
            let d = Duration::from_millis(self.wall_ms - ms);
            self.now.checked_sub(d).unwrap_or(self.now)
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
struct BreakerExtra {
    opened_at: Option<u64>,
    last_failure_at: Option<u64>,
    transitions: Vec<TransitionRow>,
}

/// One breaker transition as stored and as shown by the admin API.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TransitionRow {
    /// Unix ms.
    pub at: u64,
    /// State before.
    pub from: String,
    /// State after.
    pub to: String,
    /// Reason word.
    pub reason: String,
}

fn parse_reason(s: &str) -> Option<TransitionReason> {
    TransitionReason::parse(s)
}

/// A transition as a stored row.
pub fn transition_row(t: &Transition, tm: &TimeMap) -> TransitionRow {
    TransitionRow {
        at: tm.wall(t.at),
        from: t.from.as_str().into(),
        to: t.to.as_str().into(),
        reason: t.reason.as_str().into(),
    }
}

/// A breaker record as a row.
pub fn breaker_row(
    provider: &str,
    rec: &BreakerRecord,
    multiplier: u32,
    tm: &TimeMap,
) -> BreakerRow {
    let extra = BreakerExtra {
        opened_at: rec.opened_at.map(|t| tm.wall(t)),
        last_failure_at: rec.last_failure_at.map(|t| tm.wall(t)),
        transitions: rec
            .transitions
            .iter()
            .map(|t| transition_row(t, tm))
            .collect(),
    };
    BreakerRow {
        provider: provider.into(),
        state: rec.state.as_str().into(),
        failure_count: rec.failure_count,
        open_until_unix_ms: rec.open_until.map(|t| tm.wall(t)),
        multiplier,
        cycles: rec.open_cycles,
        transitions_json: serde_json::to_string(&extra).unwrap_or_else(|_| "{}".into()),
        updated_at_unix_ms: tm.wall_ms,
    }
}

fn breaker_record(row: &BreakerRow, tm: &TimeMap) -> Option<BreakerRecord> {
    let extra: BreakerExtra = serde_json::from_str(&row.transitions_json).unwrap_or_default();
    Some(BreakerRecord {
        state: BreakerState::parse(&row.state)?,
        failure_count: row.failure_count,
        open_cycles: row.cycles,
        opened_at: extra.opened_at.map(|m| tm.instant(m)),
        open_until: row.open_until_unix_ms.map(|m| tm.instant(m)),
        last_failure_at: extra.last_failure_at.map(|m| tm.instant(m)),
        transitions: extra
            .transitions
            .iter()
            .filter_map(|t| {
                Some(Transition {
                    at: tm.instant(t.at),
                    from: BreakerState::parse(&t.from)?,
                    to: BreakerState::parse(&t.to)?,
                    reason: parse_reason(&t.reason)?,
                })
            })
            .collect(),
    })
}

/// A cooldown record as a row (never credentials).
pub fn connection_row(
    provider: &str,
    connection: &str,
    rec: &CooldownRecord,
    tm: &TimeMap,
) -> ConnectionRow {
    ConnectionRow {
        provider: provider.into(),
        connection: connection.into(),
        status: rec.status.as_str().into(),
        reason: rec.reason.clone(),
        cooldown_until_unix_ms: rec.cooldown_until.map(|t| tm.wall(t)),
        cooldown_started_at_unix_ms: rec.cooldown_started_at.map(|t| tm.wall(t)),
        backoff_level: rec.backoff_level,
        last_error: rec.last_error.clone(),
        last_error_kind: rec.last_error_kind.clone(),
        last_status: rec.last_status,
        last_failure_at_unix_ms: rec.last_failure_at.map(|t| tm.wall(t)),
        consecutive_auth_failures: rec.consecutive_auth_failures,
        consecutive_rejections: rec.consecutive_rejections,
        updated_at_unix_ms: tm.wall_ms,
    }
}

fn cooldown_record(row: &ConnectionRow, tm: &TimeMap) -> CooldownRecord {
    CooldownRecord {
        status: ConnectionStatus::parse(&row.status).unwrap_or_default(),
        reason: row.reason.clone(),
        cooldown_until: row.cooldown_until_unix_ms.map(|m| tm.instant(m)),
        cooldown_started_at: row.cooldown_started_at_unix_ms.map(|m| tm.instant(m)),
        backoff_level: row.backoff_level,
        last_error: row.last_error.clone(),
        last_error_kind: row.last_error_kind.clone(),
        last_status: row.last_status,
        last_failure_at: row.last_failure_at_unix_ms.map(|m| tm.instant(m)),
        consecutive_auth_failures: row.consecutive_auth_failures,
        consecutive_rejections: row.consecutive_rejections,
    }
}

/// A lockout as a row.
pub fn lockout_row(l: &LockoutRecord, tm: &TimeMap) -> LockoutRow {
    LockoutRow {
        provider: l.provider.clone(),
        connection: l.connection.clone(),
        model: l.model.clone(),
        scope: lockout::scope_as_str(l.scope).into(),
        reason: l.reason.clone(),
        failures: l.failures,
        until_unix_ms: tm.wall(l.until),
        updated_at_unix_ms: tm.wall_ms,
    }
}

/// Rebuilds live state from the store's rows; rows naming providers or connections that are
/// no longer configured are ignored (they stay in the database until overwritten).
pub(crate) fn restore(state: &mut ResState, cfg: &Config, rows: &PersistedState, tm: &TimeMap) {
    for row in &rows.breakers {
        let Some(i) = cfg.providers.iter().position(|p| p.id == row.provider) else {
            continue;
        };
        let key = cfg.keys.provider(i);
        if let (Some(rec), Some(res)) = (breaker_record(row, tm), state.providers.get_mut(key)) {
            let settings = *res.breaker.settings();
            res.breaker = Breaker::restore(settings, &rec, tm.now);
        }
    }
    for row in &rows.connections {
        let Some(i) = cfg.providers.iter().position(|p| p.id == row.provider) else {
            continue;
        };
        let Some(j) = cfg.providers[i]
            .connections
            .iter()
            .position(|c| c.id == row.connection)
        else {
            continue;
        };
        let key = cfg.keys.connection(i, j);
        if let Some(slot) = state
            .providers
            .get_mut(key.provider)
            .and_then(|r| r.connections.get_mut(key.slot))
        {
            *slot = Cooldown::restore(cooldown_record(row, tm));
        }
    }
    let locks: Vec<LockoutRecord> = rows
        .lockouts
        .iter()
        .filter(|l| {
            cfg.providers
                .iter()
                .any(|p| p.id == l.provider && p.connections.iter().any(|c| c.id == l.connection))
        })
        .map(|l| LockoutRecord {
            provider: l.provider.clone(),
            connection: l.connection.clone(),
            model: l.model.clone(),
            scope: lockout::parse_scope(&l.scope).unwrap_or(Scope::Model),
            reason: l.reason.clone(),
            failures: l.failures,
            until: tm.instant(l.until_unix_ms),
        })
        .collect();
    state.lockouts = Lockouts::restore(locks);
    let pins: Vec<PinRecord> = rows
        .affinity
        .iter()
        .map(|a| PinRecord {
            key: a.session_key.clone(),
            provider: a.provider.clone(),
            connection: a.connection.clone(),
            expires: tm.instant(a.expires_at_unix_ms),
        })
        .collect();
    state.affinity = Affinity::restore(state.settings.session_affinity_ttl, pins, tm.now);
}

impl Core {
    /// The time map at the clock's current readings.
    pub fn time_map(&self) -> TimeMap {
        TimeMap::new(self.clock().now(), unix_ms(self.clock().wall()))
    }

    /// Writes one provider's changed rows behind to the store (no-op without a store);
    /// `provider` and the connection indices are positions in `cfg`.
    pub(crate) fn persist_provider(
        &self,
        cfg: &crate::config::Config,
        provider: usize,
        breaker: Option<BreakerRecord>,
        connection: Option<(usize, CooldownRecord)>,
        lockouts: Option<(usize, Vec<LockoutRecord>)>,
    ) {
        let Some(store) = self.store() else { return };
        let Some(p) = cfg.providers.get(provider) else {
            return;
        };
        let tm = self.time_map();
        if let Some(rec) = breaker {
            let mult = 1;
            store.write(StateWrite::Breaker(breaker_row(&p.id, &rec, mult, &tm)));
        }
        if let Some((j, rec)) = connection
            && let Some(c) = p.connections.get(j)
        {
            store.write(StateWrite::Connection(connection_row(
                &p.id, &c.id, &rec, &tm,
            )));
        }
        if let Some((j, locks)) = lockouts
            && let Some(c) = p.connections.get(j)
        {
            store.write(StateWrite::DeleteLockoutsOf {
                provider: p.id.clone(),
                connection: c.id.clone(),
            });
            for l in &locks {
                store.write(StateWrite::Lockout(lockout_row(l, &tm)));
            }
        }
    }

    /// The store's dropped-write counters for the snapshot (zeros without a store).
    pub(crate) fn store_view(&self) -> crate::snapshot::StoreView {
        self.store()
            .map(|st| crate::snapshot::StoreView {
                dropped_request_rows: st.dropped(),
                dropped_state_writes: st.dropped_state(),
            })
            .unwrap_or_default()
    }

    /// Writes a session pin behind.
    pub(crate) fn persist_pin(
        &self,
        key: &str,
        provider: &str,
        connection: &str,
        expires: Instant,
    ) {
        if let Some(store) = self.store() {
            let tm = self.time_map();
            store.write(StateWrite::Affinity(AffinityRow {
                session_key: key.into(),
                provider: provider.into(),
                connection: connection.into(),
                expires_at_unix_ms: tm.wall(expires),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, ManualClock};

    #[test]
    fn time_map_round_trips_and_saturates() {
        let c = ManualClock::new();
        let tm = TimeMap::new(c.now(), 1_000_000);
        let later = c.now() + Duration::from_millis(2_500);
        assert_eq!(tm.wall(later), 1_002_500);
        assert_eq!(tm.instant(1_002_500), later);
        let earlier = tm.instant(999_000);
        assert_eq!(tm.wall(earlier), 999_000);
        // The far past and the far future map without panicking and keep their order:
        // the past stays before `earlier`, the future after `later`.
        let past = tm.instant(0);
        assert!(past <= earlier, "the far past is not after 999_000");
        assert!(
            tm.wall(past) <= 999_000,
            "the far past maps back into the past"
        );
        let future = tm.instant(u64::MAX);
        assert!(future > later, "the far future is after 1_002_500");
        assert!(tm.wall(future) > 1_002_500);
    }
}
