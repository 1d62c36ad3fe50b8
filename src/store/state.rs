//! Resilience state rows (§1–§3, §2a of `docs/RESILIENCE.md`) and the SQL that writes, reads
//! and prunes them.
//!
//! Plain data only: the store knows nothing about `crate::policy`; the core converts policy
//! state to rows and back. Every time is wall-clock Unix ms. Writes are full-row UPSERTs keyed
//! by each table's natural key, applied in queue order inside the writer's batch transaction,
//! so the last write per key wins.

use rusqlite::{Connection, Row, Transaction, params};

use super::writer::to_sql_int;

/// One `circuit_breakers` row: a provider's breaker (§1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BreakerRow {
    /// Provider name (the key).
    pub provider: String,
    /// Breaker state word, opaque to the store (e.g. `closed`, `open`).
    pub state: String,
    /// Counted failures.
    pub failure_count: u32,
    /// When an OPEN breaker may half-open, Unix ms.
    pub open_until_unix_ms: Option<u64>,
    /// Reset-timeout multiplier (1 = no backoff).
    pub multiplier: u32,
    /// Consecutive OPEN→HALF_OPEN→OPEN cycles.
    pub cycles: u32,
    /// The last 20 transitions as a JSON array; opaque to the store.
    pub transitions_json: String,
    /// When the core last changed this row, Unix ms.
    pub updated_at_unix_ms: u64,
}

/// One `connections` row: a connection's cooldown / terminal state (§2). Never credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionRow {
    /// Provider name (key, with `connection`).
    pub provider: String,
    /// Connection name (key, with `provider`).
    pub connection: String,
    /// `active` | `cooling` | `quota_wait` | `banned` | `expired` | `credits_exhausted`.
    pub status: String,
    /// End of the current cooldown, Unix ms.
    pub cooldown_until_unix_ms: Option<u64>,
    /// When the current cooldown started, Unix ms (anti-thundering-herd rule).
    pub cooldown_started_at_unix_ms: Option<u64>,
    /// Backoff ladder level.
    pub backoff_level: u32,
    /// Short error text, no secrets.
    pub last_error: String,
    /// Error kind word (e.g. `rate_limited`, `quota_exhausted`).
    pub last_error_kind: String,
    /// Reason word of the current exclusion, e.g. `quota_exhausted` (empty when active).
    pub reason: String,
    /// Last upstream HTTP status, if any.
    pub last_status: Option<u16>,
    /// Last failure time, Unix ms.
    pub last_failure_at_unix_ms: Option<u64>,
    /// Consecutive 401s without a success in between.
    pub consecutive_auth_failures: u32,
    /// Consecutive `request_rejected` 403s.
    pub consecutive_rejections: u32,
    /// When the core last changed this row, Unix ms.
    pub updated_at_unix_ms: u64,
}

/// One `model_lockouts` row: a model (or quota group) locked on one connection (§3).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockoutRow {
    /// Provider name (key, with `connection` and `model`).
    pub provider: String,
    /// Connection name.
    pub connection: String,
    /// Model id for exact locks, quota-group name for group locks.
    pub model: String,
    /// Scope word, opaque to the store (e.g. `model`, `group`).
    pub scope: String,
    /// Why it was locked.
    pub reason: String,
    /// Failure count driving the backoff.
    pub failures: u32,
    /// When the lock ends, Unix ms.
    pub until_unix_ms: u64,
    /// When the core last changed this row, Unix ms.
    pub updated_at_unix_ms: u64,
}

/// One `session_affinity` row: a session pinned to a connection (§2a).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AffinityRow {
    /// Session key (the key).
    pub session_key: String,
    /// Pinned provider.
    pub provider: String,
    /// Pinned connection.
    pub connection: String,
    /// When the pin lapses, Unix ms.
    pub expires_at_unix_ms: u64,
}

/// One `session_leases` row: a connection's lease generation and, while leased, its owner.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseRow {
    /// Provider id.
    pub provider: String,
    /// Connection id.
    pub connection: String,
    /// The connection's last lease generation.
    pub generation: u64,
    /// SHA-256 of the owner token, lowercase hex; empty when not leased.
    pub owner_sha256: String,
    /// When the lease lapses, Unix ms (0 when not leased).
    pub expires_at_unix_ms: u64,
    /// When the core last changed this row, Unix ms.
    pub updated_at_unix_ms: u64,
}

/// One `settings` row: an operator override.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SettingRow {
    /// Setting key (the key), e.g. `resilience.model_lockout.enabled`.
    pub key: String,
    /// The value as JSON; opaque to the store.
    pub value_json: String,
    /// When it was set, Unix ms.
    pub updated_at_unix_ms: u64,
}

/// A state change queued with [`Store::write`](super::Store::write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateWrite {
    /// Insert or replace a breaker (key: provider).
    Breaker(BreakerRow),
    /// Insert or replace a connection's state (key: provider, connection).
    Connection(ConnectionRow),
    /// Insert or replace a lockout (key: provider, connection, model).
    Lockout(LockoutRow),
    /// Remove one lockout.
    DeleteLockout {
        /// Provider name.
        provider: String,
        /// Connection name.
        connection: String,
        /// Model id or quota-group name.
        model: String,
    },
    /// Remove every lockout of one connection.
    DeleteLockoutsOf {
        /// Provider name.
        provider: String,
        /// Connection name.
        connection: String,
    },
    /// Remove a connection that left the config: its state row and its lockouts.
    DeleteConnection {
        /// Provider name.
        provider: String,
        /// Connection name.
        connection: String,
    },
    /// Remove a provider that left the config: its breaker row (its connections are
    /// removed one by one with [`StateWrite::DeleteConnection`]).
    DeleteBreaker {
        /// Provider name.
        provider: String,
    },
    /// Insert or replace a session pin (key: session_key).
    Affinity(AffinityRow),
    /// Remove a session pin.
    DeleteAffinity {
        /// Session key.
        session_key: String,
    },
    /// Insert or replace a connection's lease row (key: provider, connection).
    Lease(LeaseRow),
    /// Insert or replace a setting (key: key).
    Setting(SettingRow),
    /// Remove a setting.
    DeleteSetting {
        /// Setting key.
        key: String,
    },
}

/// Everything [`Store::load_state`](super::Store::load_state) reads back, each list ordered by
/// its natural key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PersistedState {
    /// `circuit_breakers`.
    pub breakers: Vec<BreakerRow>,
    /// `connections`.
    pub connections: Vec<ConnectionRow>,
    /// `model_lockouts`.
    pub lockouts: Vec<LockoutRow>,
    /// `session_affinity`.
    pub affinity: Vec<AffinityRow>,
    /// `settings`.
    pub settings: Vec<SettingRow>,
    /// `session_leases`.
    pub leases: Vec<LeaseRow>,
}

impl PersistedState {
    /// True when no table holds a row.
    pub fn is_empty(&self) -> bool {
        self.breakers.is_empty()
            && self.connections.is_empty()
            && self.lockouts.is_empty()
            && self.affinity.is_empty()
            && self.settings.is_empty()
            && self.leases.is_empty()
    }
}

fn opt_sql(v: Option<u64>) -> Option<i64> {
    v.map(to_sql_int)
}

fn u64_of(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

fn opt_u64_of(v: Option<i64>) -> Option<u64> {
    v.map(u64_of)
}

fn u32_of(v: i64) -> u32 {
    if v < 0 {
        0
    } else {
        u32::try_from(v).unwrap_or(u32::MAX)
    }
}

/// Applies one write inside the writer's batch transaction.
pub(crate) fn apply(tx: &Transaction<'_>, w: &StateWrite) -> rusqlite::Result<()> {
    match w {
        StateWrite::Breaker(r) => upsert_breaker(tx, r)?,
        StateWrite::Connection(r) => upsert_connection(tx, r)?,
        StateWrite::Lockout(r) => upsert_lockout(tx, r)?,
        StateWrite::DeleteLockout {
            provider,
            connection,
            model,
        } => {
            tx.prepare_cached(
                "DELETE FROM model_lockouts WHERE provider = ?1 AND connection = ?2 AND model = ?3",
            )?
            .execute(params![provider, connection, model])?;
        }
        StateWrite::DeleteLockoutsOf {
            provider,
            connection,
        } => {
            tx.prepare_cached(
                "DELETE FROM model_lockouts WHERE provider = ?1 AND connection = ?2",
            )?
            .execute(params![provider, connection])?;
        }
        StateWrite::DeleteConnection {
            provider,
            connection,
        } => {
            tx.prepare_cached("DELETE FROM connections WHERE provider = ?1 AND connection = ?2")?
                .execute(params![provider, connection])?;
            tx.prepare_cached(
                "DELETE FROM model_lockouts WHERE provider = ?1 AND connection = ?2",
            )?
            .execute(params![provider, connection])?;
            // A removed connection's lease goes with it (a stale owner is refused anyway:
            // its token's hash is not the new holder's).
            tx.prepare_cached(
                "DELETE FROM session_leases WHERE provider = ?1 AND connection = ?2",
            )?
            .execute(params![provider, connection])?;
        }
        StateWrite::DeleteBreaker { provider } => {
            tx.prepare_cached("DELETE FROM circuit_breakers WHERE provider = ?1")?
                .execute(params![provider])?;
        }
        StateWrite::Affinity(r) => upsert_affinity(tx, r)?,
        StateWrite::DeleteAffinity { session_key } => {
            tx.prepare_cached("DELETE FROM session_affinity WHERE session_key = ?1")?
                .execute(params![session_key])?;
        }
        StateWrite::Lease(r) => upsert_lease(tx, r)?,
        StateWrite::Setting(r) => upsert_setting(tx, r)?,
        StateWrite::DeleteSetting { key } => {
            tx.prepare_cached("DELETE FROM settings WHERE key = ?1")?
                .execute(params![key])?;
        }
    }
    Ok(())
}

/// Inserts or replaces a breaker row.
fn upsert_breaker(tx: &Transaction<'_>, r: &BreakerRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO circuit_breakers (provider, state, failure_count, open_until_unix_ms, multiplier, cycles, transitions_json, updated_at_unix_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (provider) DO UPDATE SET
            state = excluded.state, failure_count = excluded.failure_count,
            open_until_unix_ms = excluded.open_until_unix_ms, multiplier = excluded.multiplier,
            cycles = excluded.cycles, transitions_json = excluded.transitions_json,
            updated_at_unix_ms = excluded.updated_at_unix_ms",
    )?
    .execute(params![
        r.provider,
        r.state,
        r.failure_count,
        opt_sql(r.open_until_unix_ms),
        r.multiplier,
        r.cycles,
        r.transitions_json,
        to_sql_int(r.updated_at_unix_ms),
    ])?;
    Ok(())
}

/// Inserts or replaces a connection's state row.
fn upsert_connection(tx: &Transaction<'_>, r: &ConnectionRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO connections (provider, connection, status, cooldown_until_unix_ms, cooldown_started_at_unix_ms, backoff_level, last_error, last_error_kind, last_status, last_failure_at_unix_ms, consecutive_auth_failures, consecutive_rejections, updated_at_unix_ms, reason)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
         ON CONFLICT (provider, connection) DO UPDATE SET
            status = excluded.status, cooldown_until_unix_ms = excluded.cooldown_until_unix_ms,
            cooldown_started_at_unix_ms = excluded.cooldown_started_at_unix_ms,
            backoff_level = excluded.backoff_level, last_error = excluded.last_error,
            last_error_kind = excluded.last_error_kind, last_status = excluded.last_status,
            last_failure_at_unix_ms = excluded.last_failure_at_unix_ms,
            consecutive_auth_failures = excluded.consecutive_auth_failures,
            consecutive_rejections = excluded.consecutive_rejections,
            updated_at_unix_ms = excluded.updated_at_unix_ms, reason = excluded.reason",
    )?
    .execute(params![
        r.provider,
        r.connection,
        r.status,
        opt_sql(r.cooldown_until_unix_ms),
        opt_sql(r.cooldown_started_at_unix_ms),
        r.backoff_level,
        r.last_error,
        r.last_error_kind,
        r.last_status,
        opt_sql(r.last_failure_at_unix_ms),
        r.consecutive_auth_failures,
        r.consecutive_rejections,
        to_sql_int(r.updated_at_unix_ms),
        r.reason,
    ])?;
    Ok(())
}

/// Inserts or replaces a lockout row.
fn upsert_lockout(tx: &Transaction<'_>, r: &LockoutRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO model_lockouts (provider, connection, model, scope, reason, failures, until_unix_ms, updated_at_unix_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (provider, connection, model) DO UPDATE SET
            scope = excluded.scope, reason = excluded.reason, failures = excluded.failures,
            until_unix_ms = excluded.until_unix_ms,
            updated_at_unix_ms = excluded.updated_at_unix_ms",
    )?
    .execute(params![
        r.provider,
        r.connection,
        r.model,
        r.scope,
        r.reason,
        r.failures,
        to_sql_int(r.until_unix_ms),
        to_sql_int(r.updated_at_unix_ms),
    ])?;
    Ok(())
}

/// Inserts or replaces a session pin.
fn upsert_affinity(tx: &Transaction<'_>, r: &AffinityRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO session_affinity (session_key, provider, connection, expires_at_unix_ms)
         VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (session_key) DO UPDATE SET
            provider = excluded.provider, connection = excluded.connection,
            expires_at_unix_ms = excluded.expires_at_unix_ms",
    )?
    .execute(params![
        r.session_key,
        r.provider,
        r.connection,
        to_sql_int(r.expires_at_unix_ms),
    ])?;
    Ok(())
}

/// Inserts or replaces a session lease.
fn upsert_lease(tx: &Transaction<'_>, r: &LeaseRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO session_leases (provider, connection, generation, owner_sha256, expires_at_unix_ms, updated_at_unix_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (provider, connection) DO UPDATE SET
            generation = excluded.generation, owner_sha256 = excluded.owner_sha256,
            expires_at_unix_ms = excluded.expires_at_unix_ms,
            updated_at_unix_ms = excluded.updated_at_unix_ms",
    )?
    .execute(params![
        r.provider,
        r.connection,
        to_sql_int(r.generation),
        r.owner_sha256,
        to_sql_int(r.expires_at_unix_ms),
        to_sql_int(r.updated_at_unix_ms),
    ])?;
    Ok(())
}

/// Inserts or replaces a runtime setting.
fn upsert_setting(tx: &Transaction<'_>, r: &SettingRow) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO settings (key, value_json, updated_at_unix_ms) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET
            value_json = excluded.value_json, updated_at_unix_ms = excluded.updated_at_unix_ms",
    )?
    .execute(params![
        r.key,
        r.value_json,
        to_sql_int(r.updated_at_unix_ms)
    ])?;
    Ok(())
}

/// Deletes lockouts whose `until` and pins whose `expires_at` are before `now_unix_ms` (wall
/// clock); returns how many rows were deleted.
pub(crate) fn prune_expired(conn: &Connection, now_unix_ms: u64) -> rusqlite::Result<usize> {
    let now = to_sql_int(now_unix_ms);
    let lockouts = conn.execute(
        "DELETE FROM model_lockouts WHERE until_unix_ms < ?1",
        params![now],
    )?;
    let pins = conn.execute(
        "DELETE FROM session_affinity WHERE expires_at_unix_ms < ?1",
        params![now],
    )?;
    Ok(lockouts + pins)
}

fn query<T>(
    conn: &Connection,
    sql: &str,
    map: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map([], map)?;
    rows.collect()
}

/// Reads every state table in one read transaction (a consistent snapshot).
pub(crate) fn load(conn: &Connection) -> rusqlite::Result<PersistedState> {
    let tx = conn.unchecked_transaction()?;
    let breakers = read_breakers(&tx)?;
    let connections = read_connections(&tx)?;
    let lockouts = read_lockouts(&tx)?;
    let affinity = read_affinity(&tx)?;
    let settings = read_settings(&tx)?;
    let leases = read_leases(&tx)?;
    tx.finish()?;
    Ok(PersistedState {
        leases,
        breakers,
        connections,
        lockouts,
        affinity,
        settings,
    })
}

/// Every row of the circuit breakers table.
fn read_breakers(conn: &Connection) -> rusqlite::Result<Vec<BreakerRow>> {
    query(
        conn,
        "SELECT provider, state, failure_count, open_until_unix_ms, multiplier, cycles, transitions_json, updated_at_unix_ms
         FROM circuit_breakers ORDER BY provider",
        |r| {
            Ok(BreakerRow {
                provider: r.get(0)?,
                state: r.get(1)?,
                failure_count: u32_of(r.get(2)?),
                open_until_unix_ms: opt_u64_of(r.get(3)?),
                multiplier: u32_of(r.get(4)?),
                cycles: u32_of(r.get(5)?),
                transitions_json: r.get(6)?,
                updated_at_unix_ms: u64_of(r.get(7)?),
            })
        },
    )
}

/// Every row of the connection states table.
fn read_connections(conn: &Connection) -> rusqlite::Result<Vec<ConnectionRow>> {
    query(
        conn,
        "SELECT provider, connection, status, cooldown_until_unix_ms, cooldown_started_at_unix_ms, backoff_level, last_error, last_error_kind, last_status, last_failure_at_unix_ms, consecutive_auth_failures, consecutive_rejections, updated_at_unix_ms, reason
         FROM connections ORDER BY provider, connection",
        |r| {
            Ok(ConnectionRow {
                provider: r.get(0)?,
                connection: r.get(1)?,
                status: r.get(2)?,
                cooldown_until_unix_ms: opt_u64_of(r.get(3)?),
                cooldown_started_at_unix_ms: opt_u64_of(r.get(4)?),
                backoff_level: u32_of(r.get(5)?),
                last_error: r.get(6)?,
                last_error_kind: r.get(7)?,
                last_status: r
                    .get::<_, Option<i64>>(8)?
                    .and_then(|s| u16::try_from(s).ok()),
                last_failure_at_unix_ms: opt_u64_of(r.get(9)?),
                consecutive_auth_failures: u32_of(r.get(10)?),
                consecutive_rejections: u32_of(r.get(11)?),
                updated_at_unix_ms: u64_of(r.get(12)?),
                reason: r.get(13)?,
            })
        },
    )
}

/// Every row of the model lockouts table.
fn read_lockouts(conn: &Connection) -> rusqlite::Result<Vec<LockoutRow>> {
    query(
        conn,
        "SELECT provider, connection, model, scope, reason, failures, until_unix_ms, updated_at_unix_ms
         FROM model_lockouts ORDER BY provider, connection, model",
        |r| {
            Ok(LockoutRow {
                provider: r.get(0)?,
                connection: r.get(1)?,
                model: r.get(2)?,
                scope: r.get(3)?,
                reason: r.get(4)?,
                failures: u32_of(r.get(5)?),
                until_unix_ms: u64_of(r.get(6)?),
                updated_at_unix_ms: u64_of(r.get(7)?),
            })
        },
    )
}

/// Every row of the session pins table.
fn read_affinity(conn: &Connection) -> rusqlite::Result<Vec<AffinityRow>> {
    query(
        conn,
        "SELECT session_key, provider, connection, expires_at_unix_ms
         FROM session_affinity ORDER BY session_key",
        |r| {
            Ok(AffinityRow {
                session_key: r.get(0)?,
                provider: r.get(1)?,
                connection: r.get(2)?,
                expires_at_unix_ms: u64_of(r.get(3)?),
            })
        },
    )
}

/// Every row of the runtime settings table.
fn read_settings(conn: &Connection) -> rusqlite::Result<Vec<SettingRow>> {
    query(
        conn,
        "SELECT key, value_json, updated_at_unix_ms FROM settings ORDER BY key",
        |r| {
            Ok(SettingRow {
                key: r.get(0)?,
                value_json: r.get(1)?,
                updated_at_unix_ms: u64_of(r.get(2)?),
            })
        },
    )
}

/// Every row of the session leases table.
fn read_leases(conn: &Connection) -> rusqlite::Result<Vec<LeaseRow>> {
    query(
        conn,
        "SELECT provider, connection, generation, owner_sha256, expires_at_unix_ms, updated_at_unix_ms
         FROM session_leases ORDER BY provider, connection",
        |r| {
            Ok(LeaseRow {
                provider: r.get(0)?,
                connection: r.get(1)?,
                generation: u64_of(r.get(2)?),
                owner_sha256: r.get(3)?,
                expires_at_unix_ms: u64_of(r.get(4)?),
                updated_at_unix_ms: u64_of(r.get(5)?),
            })
        },
    )
}
