//! Exclusive session leases in the core
//! (`docs/RESILIENCE.md#2d-exclusive-session-leases-off-by-default`): the lease table behind a
//! short lock, acquire / renew / release, the pre-dispatch gate, write-behind rows and the
//! snapshot's `lease` field. The policy itself is [`crate::policy::lease`].

use std::sync::MutexGuard;
use std::time::Duration;

use crate::clock::Instant;
use crate::config::Config;
use crate::core::Core;
use crate::core::resilience::persist::TimeMap;
use crate::policy::cooldown::Eligibility;
use crate::policy::lease::{ConnKey, Lease, LeaseRecord, Leases, OwnerHash, Refusal, mint_owner};
use crate::policy::lockout::LockTarget;
use crate::policy::select::{Candidate, Exclusion, ExclusionReason};
use crate::snapshot::{LeaseView, ProviderView};
use crate::store::{LeaseRow, StateWrite};

/// A lease just acquired. `token` is the owner token, shown to the client once.
#[derive(Debug, Clone)]
pub struct Acquired {
    /// `vlo_…`: the only copy sluice ever hands out (masked in `Debug`).
    pub token: crate::config::Secret,
    /// The lease (owner hash, generation, expiry).
    pub lease: Lease,
    /// The leased connection.
    pub conn: ConnKey,
}

/// Why no lease was acquired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AcquireRefused {
    /// Every candidate connection is leased by another owner; the earliest lapses in
    /// `retry_after` (bounded by the configured `ttl`).
    Busy {
        /// How long until the earliest lease lapses.
        retry_after: Duration,
    },
    /// The system random source failed (no token could be minted).
    Random,
}

/// What the pre-dispatch lease gate decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseGate {
    /// Dispatch over `candidates`; `leased` are the ones left out as leased by others.
    Dispatch {
        /// The candidates this request may use, in order.
        candidates: Vec<Candidate>,
        /// Candidates skipped with reason `leased`.
        leased: Vec<Exclusion>,
    },
    /// The presented owner and generation name no live lease: `409 lease_generation_stale`.
    Stale,
    /// The lease is live but its connection serves none of this model's targets.
    NotOnLease,
    /// Every candidate is leased by another owner.
    AllLeased {
        /// The candidates skipped with reason `leased`.
        leased: Vec<Exclusion>,
        /// Until the earliest of those leases lapses (bounded by the configured `ttl`).
        retry_after: Duration,
    },
}

impl Core {
    fn leases(&self) -> MutexGuard<'_, Leases> {
        self.inner.leases.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Leases the first eligible candidate connection (in dispatch order) for `ttl`: a
    /// connection leased by another owner is never taken; among the free ones, one that is
    /// not cooling, waiting for quota, terminal or locked for the model is preferred, else
    /// the first free one.
    pub fn lease_acquire(
        &self,
        candidates: &[Candidate],
        ttl: Duration,
    ) -> Result<Acquired, AcquireRefused> {
        // The lease table and the config change together under this lock (a reload takes it
        // first), so candidates a reload removed are left out here.
        let mut t = self.leases();
        let cfg = self.config();
        let now = self.clock().now();
        let keyed = self.keyed(candidates);
        let free: Vec<&(ConnKey, &Candidate)> = keyed
            .iter()
            .filter(|(k, _)| t.holder(*k, now).is_none())
            .collect();
        let Some(&&(conn, _)) = free
            .iter()
            .find(|(k, c)| self.healthy(&cfg, *k, &c.model, now))
            .or_else(|| free.first())
        else {
            let earliest = keyed
                .iter()
                .filter_map(|(k, _)| t.holder(*k, now))
                .map(|l| l.expires)
                .min();
            return Err(AcquireRefused::Busy {
                retry_after: bounded_retry(earliest, now, cfg.session_leases.ttl),
            });
        };
        let rng = ring::rand::SystemRandom::new();
        let (token, owner) = mint_owner(&rng).ok_or(AcquireRefused::Random)?;
        let lease = t
            .acquire(conn, owner, ttl, now)
            .map_err(|_| AcquireRefused::Busy {
                retry_after: cfg.session_leases.ttl,
            })?;
        let record = t.record(conn, now);
        self.persist_lease(&cfg, record);
        drop(t);
        self.log_lease("acquired", &cfg, conn, &lease);
        self.mark_dirty();
        Ok(Acquired {
            token: crate::config::Secret::new(token),
            lease,
            conn,
        })
    }

    /// Extends `owner`'s live lease of `generation` to `ttl` from now.
    pub fn lease_renew(
        &self,
        owner: &OwnerHash,
        generation: u64,
        ttl: Duration,
    ) -> Result<(ConnKey, Lease), Refusal> {
        let mut t = self.leases();
        let cfg = self.config();
        let now = self.clock().now();
        let (conn, lease) = t.renew(owner, generation, ttl, now)?;
        let record = t.record(conn, now);
        self.persist_lease(&cfg, record);
        drop(t);
        self.log_lease("renewed", &cfg, conn, &lease);
        self.mark_dirty();
        Ok((conn, lease))
    }

    /// Ends `owner`'s live lease of `generation`; the connection is free at once.
    pub fn lease_release(&self, owner: &OwnerHash, generation: u64) -> Result<ConnKey, Refusal> {
        let mut t = self.leases();
        let cfg = self.config();
        let now = self.clock().now();
        let conn = t.release(owner, generation, now)?;
        let record = t.record(conn, now);
        self.persist_lease(&cfg, record);
        drop(t);
        tracing::info!(target: "sluice::lease", owner = %owner.fingerprint(), generation, connection = %conn_name(&cfg, conn), "session lease released");
        self.mark_dirty();
        Ok(conn)
    }

    /// The pre-dispatch gate. With `presented` (owner hash, generation) the request may use
    /// only its leased connection, and is refused when the lease is not live at that
    /// generation; without it, connections leased by others are left out (reason `leased`).
    pub fn lease_gate(
        &self,
        candidates: Vec<Candidate>,
        presented: Option<(OwnerHash, u64)>,
    ) -> LeaseGate {
        let t = self.leases();
        let cfg = self.config();
        let now = self.clock().now();
        if let Some((owner, generation)) = presented {
            let Ok(conn) = t.check(&owner, generation, now) else {
                return LeaseGate::Stale;
            };
            let mine: Vec<Candidate> = candidates
                .into_iter()
                .filter(|c| self.here(c) == Some(conn))
                .collect();
            if mine.is_empty() {
                return LeaseGate::NotOnLease;
            }
            return LeaseGate::Dispatch {
                candidates: mine,
                leased: Vec::new(),
            };
        }
        let (mut kept, mut leased, mut earliest) = (Vec::new(), Vec::new(), None::<Instant>);
        for c in candidates {
            // A connection a reload removed meanwhile is left for dispatch to skip.
            let Some(key) = self.here(&c) else {
                kept.push(c);
                continue;
            };
            match t.leased_by_other(key, None, now) {
                Some(until) => {
                    earliest = Some(earliest.map_or(until, |e| e.min(until)));
                    leased.push(Exclusion {
                        target: target_name(&cfg, key, &c.model),
                        reason: ExclusionReason::Leased,
                        retry_after: Some(until.saturating_duration_since(now)),
                        cause: crate::policy::select::ExclusionCause::Transient,
                    });
                }
                None => kept.push(c),
            }
        }
        if kept.is_empty() && !leased.is_empty() {
            return LeaseGate::AllLeased {
                leased,
                retry_after: bounded_retry(earliest, now, cfg.session_leases.ttl),
            };
        }
        LeaseGate::Dispatch {
            candidates: kept,
            leased,
        }
    }

    /// Candidate `c`'s connection key, `None` when a reload removed it. Called under the
    /// leases lock, which a reload holds while the config changes.
    fn here(&self, c: &Candidate) -> Option<ConnKey> {
        self.position(c.key, (c.provider, c.connection))
            .map(|_| c.key)
    }

    /// Each candidate with its connection key (those a reload removed left out).
    fn keyed<'c>(&self, candidates: &'c [Candidate]) -> Vec<(ConnKey, &'c Candidate)> {
        candidates
            .iter()
            .filter_map(|c| Some((self.here(c)?, c)))
            .collect()
    }

    /// Whether connection `key` would be admitted now for `model` as far as its connection
    /// state and model lockouts go (read-only: no probe permit, no slow-start draw).
    fn healthy(&self, cfg: &Config, key: ConnKey, model: &str, now: Instant) -> bool {
        let Some((pi, ci)) = cfg.keys.position(key) else {
            return false;
        };
        let (Some(p), Some(conn)) = (
            cfg.providers.get(pi),
            cfg.providers.get(pi).and_then(|p| p.connections.get(ci)),
        ) else {
            return false;
        };
        let r = self.res();
        let usable = r
            .providers
            .get(key.provider)
            .and_then(|res| res.connections.get(key.slot))
            .is_some_and(|cd| {
                !matches!(
                    cd.eligibility(now),
                    Eligibility::Terminal(_)
                        | Eligibility::QuotaWait { .. }
                        | Eligibility::Cooling { .. }
                )
            });
        let at = LockTarget {
            provider: &p.id,
            connection: &conn.id,
            model,
            quota_groups: &p.quota_groups,
        };
        usable && r.lockouts.locked(at, now).is_none()
    }

    /// Writes one connection's lease row behind (no-op without a store).
    fn persist_lease(&self, cfg: &Config, record: LeaseRecord) {
        let Some(store) = self.store() else { return };
        if let Some(row) = lease_row(cfg, &record, &self.time_map()) {
            store.write(StateWrite::Lease(row));
        }
    }

    fn log_lease(&self, what: &str, cfg: &Config, conn: ConnKey, lease: &Lease) {
        let ttl_s = lease
            .expires
            .saturating_duration_since(self.clock().now())
            .as_secs();
        tracing::info!(target: "sluice::lease", owner = %lease.owner.fingerprint(), generation = lease.generation, connection = %conn_name(cfg, conn), ttl_s, "session lease {what}");
    }

    /// Sets each connection view's `lease` from the live table; `providers` are the views of
    /// `cfg`, in its order.
    pub(crate) fn fill_lease_views(
        &self,
        cfg: &Config,
        providers: &mut [ProviderView],
        now: Instant,
        tm: &TimeMap,
    ) {
        let t = self.leases();
        for (i, p) in providers.iter_mut().enumerate() {
            for (j, c) in p.connections.iter_mut().enumerate() {
                c.lease = t.holder(cfg.keys.connection(i, j), now).map(|l| LeaseView {
                    generation: l.generation,
                    expires_at_unix_ms: tm.wall(l.expires),
                    owner_fingerprint: l.owner.fingerprint(),
                });
            }
        }
    }
}

/// Until `earliest` from `now`, at most `ttl` (and `ttl` when nothing is known).
fn bounded_retry(earliest: Option<Instant>, now: Instant, ttl: Duration) -> Duration {
    earliest.map_or(ttl, |e| e.saturating_duration_since(now).min(ttl))
}

fn conn_name(cfg: &Config, key: ConnKey) -> String {
    let Some((p, c)) = cfg.keys.position(key) else {
        return String::new();
    };
    let p = cfg.providers.get(p);
    match (p, p.and_then(|p| p.connections.get(c))) {
        (Some(p), Some(c)) => format!("{}:{}", p.id, c.id),
        _ => String::new(),
    }
}

fn target_name(cfg: &Config, key: ConnKey, model: &str) -> String {
    format!("{}/{model}", conn_name(cfg, key))
}

/// A lease record as a store row; `None` when the connection left the config.
pub(crate) fn lease_row(cfg: &Config, r: &LeaseRecord, tm: &TimeMap) -> Option<LeaseRow> {
    let (pi, ci) = cfg.keys.position(r.conn)?;
    let p = cfg.providers.get(pi)?;
    let c = p.connections.get(ci)?;
    Some(LeaseRow {
        provider: p.id.clone(),
        connection: c.id.clone(),
        generation: r.generation,
        owner_sha256: r.lease.map(|l| l.owner.hex()).unwrap_or_default(),
        expires_at_unix_ms: r.lease.map_or(0, |l| tm.wall(l.expires)),
        updated_at_unix_ms: tm.wall_ms(),
    })
}

/// Rebuilds the lease table from the store's rows at startup: rows for connections no longer
/// configured are ignored, expired leases are dropped (their generations kept), and an
/// expiry past `max_ttl` from now (a corrupt row, a clock set back) is cut to it.
pub(crate) fn restore(rows: &[LeaseRow], cfg: &Config, tm: &TimeMap, now: Instant) -> Leases {
    let records = rows.iter().filter_map(|row| {
        let i = cfg.providers.iter().position(|p| p.id == row.provider)?;
        let j = cfg.providers[i]
            .connections
            .iter()
            .position(|c| c.id == row.connection)?;
        // A saved expiry is outside input: never later than the longest lease from now.
        let latest = now.checked_add(cfg.session_leases.max_ttl).unwrap_or(now);
        let lease = OwnerHash::from_hex(&row.owner_sha256).map(|owner| Lease {
            owner,
            generation: row.generation,
            expires: tm.instant(row.expires_at_unix_ms).min(latest),
        });
        Some(LeaseRecord {
            conn: cfg.keys.connection(i, j),
            generation: row.generation,
            lease,
        })
    });
    Leases::restore(records, now)
}
