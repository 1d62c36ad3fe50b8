//! `Lockouts`: per-(connection, model) lockouts (`docs/RESILIENCE.md#3-model-lockout`).
//!
//! A model lockout disables one model, or one quota group of models, on one connection without
//! disabling the connection. The core records a failure here instead of a connection cooldown
//! only in lockout mode (`[resilience.model_lockout] enabled` and the status in `error_codes`,
//! §0); this registry does not check that switch itself. Expiry is lazy: an expired lock
//! simply stops counting, while its failure count is kept (so repeated failures keep doubling)
//! until success decay brings it to zero or an operator removes it.
//!
//! Keys are `(provider, connection, key)` where `key` is the quota-group name for
//! [`Scope::QuotaGroup`] and the model id otherwise (the `model` column of table
//! `model_lockouts`). Saturation (§4) never reaches this type: there is no path that locks a
//! model for a full concurrency gate.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Scope;
use super::cooldown::{deadline_after, doubled};
use crate::clock::Instant;
use crate::config::resilience::ModelLockoutSettings;

#[cfg(test)]
mod rejection_tests;
#[cfg(test)]
mod tests;

/// Most lockout entries kept (live or remembered); beyond it the entry expiring first is
/// dropped. Models can come from clients (non-combo routes), so the map must be bounded.
pub const MAX_LOCKOUTS: usize = 10_000;

/// Longest lock a run of `request_rejected` 403s puts on one model of one connection: 1 h.
pub const REQUEST_REJECTED_MAX_LOCK: Duration = Duration::from_secs(3600);

/// The lock settings of a `request_rejected` 403 (a "request not allowed" for one model,
/// §2): `live`'s `base_cooldown` (an error rule's `base_cooldown` when the caller
/// put it there), doubled per repeat whatever `exponential` and `max_backoff_steps` say, at
/// least the retry hint, at most [`REQUEST_REJECTED_MAX_LOCK`] (also when the base is
/// longer).
pub fn rejection_settings(live: &ModelLockoutSettings) -> ModelLockoutSettings {
    ModelLockoutSettings {
        exponential: true,
        max_backoff_steps: u32::MAX,
        max_cooldown: REQUEST_REJECTED_MAX_LOCK,
        base_cooldown: live.base_cooldown.min(REQUEST_REJECTED_MAX_LOCK),
        ..live.clone()
    }
}

/// The quota group of `model` (§3 "Scope by status"): the first group, in map order, with a
/// glob pattern (`*` = any run of characters, everything else literal, case-sensitive) that
/// matches the whole model id; the model id itself when none does.
pub fn quota_group(model: &str, groups: &BTreeMap<String, Vec<String>>) -> String {
    groups
        .iter()
        .find(|(_, patterns)| patterns.iter().any(|p| glob_match(p, model)))
        .map_or_else(|| model.to_owned(), |(name, _)| name.clone())
}

/// Whether `text` matches `pattern` in full, where `*` matches any (possibly empty) run of
/// bytes. Linear backtracking on the last star; no allocation, no recursion.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let (p, s) = (pattern.as_bytes(), text.as_bytes());
    let (mut pi, mut si) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        match (p.get(pi), s.get(si)) {
            (Some(b'*'), _) => {
                star = Some((pi, si));
                pi += 1;
            }
            (Some(a), Some(b)) if a == b => {
                pi += 1;
                si += 1;
            }
            _ => match star {
                Some((sp, ss)) => {
                    pi = sp + 1;
                    si = ss + 1;
                    star = Some((sp, ss + 1));
                }
                None => return false,
            },
        }
    }
    p.get(pi..)
        .is_some_and(|rest| rest.iter().all(|b| *b == b'*'))
}

/// The stored spelling of a lockout scope (`quota_group`, `model`, `triple`, `connection`,
/// `provider`), as in table `model_lockouts`.
pub fn scope_as_str(scope: Scope) -> &'static str {
    match scope {
        Scope::Provider => "provider",
        Scope::Connection => "connection",
        Scope::QuotaGroup => "quota_group",
        Scope::Model => "model",
        Scope::Triple => "triple",
    }
}

/// Parses [`scope_as_str`]'s spelling; `None` for anything else.
pub fn parse_scope(s: &str) -> Option<Scope> {
    Some(match s {
        "provider" => Scope::Provider,
        "connection" => Scope::Connection,
        "quota_group" => Scope::QuotaGroup,
        "model" => Scope::Model,
        "triple" => Scope::Triple,
        _ => return None,
    })
}

/// Lock duration for the `failures`-th failure (§3 "Duration"): `base_cooldown *
/// 2^(failures-1)` when `exponential` (else `base_cooldown`), at most `max_backoff_steps`
/// doublings, then `max(that, hint)`, capped at `max_cooldown`. Saturating.
pub fn lock_duration(
    failures: u32,
    hint: Option<Duration>,
    settings: &ModelLockoutSettings,
) -> Duration {
    let steps = if settings.exponential {
        failures.saturating_sub(1).min(settings.max_backoff_steps)
    } else {
        0
    };
    doubled(settings.base_cooldown, steps)
        .max(hint.unwrap_or_default())
        .min(settings.max_cooldown)
}

/// The model a lockout call is about: provider id, connection id, upstream model id, and the
/// provider's `quota_groups` (group name → glob patterns).
#[derive(Debug, Clone, Copy)]
pub struct LockTarget<'a> {
    /// Provider id.
    pub provider: &'a str,
    /// Connection id.
    pub connection: &'a str,
    /// Upstream model id.
    pub model: &'a str,
    /// The provider's quota groups.
    pub quota_groups: &'a BTreeMap<String, Vec<String>>,
}

/// One lockout as plain data: for listings (`GET /api/resilience/model-cooldowns`), the
/// snapshot, and persistence (table `model_lockouts`; the core converts `until` to wall ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockoutView {
    /// Provider id.
    pub provider: String,
    /// Connection id.
    pub connection: String,
    /// Quota-group name for group locks, model id for exact locks (the DELETE key).
    pub model: String,
    /// Widest scope recorded under this key.
    pub scope: Scope,
    /// Reason word of the failure that set the current deadline.
    pub reason: String,
    /// Failure count (halved by each success; the lock goes at 0).
    pub failures: u32,
    /// Locked while `now < until`.
    pub until: Instant,
}

/// Persisted form of a lockout (same fields as the view; expired entries included).
pub type LockoutRecord = LockoutView;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    scope: Scope,
    reason: String,
    failures: u32,
    until: Instant,
}

type Key = (String, String, String);

/// Registry of model lockouts (§3), keyed by `(provider, connection, key)`.
///
/// Two scopes recorded under the same key (the default quota group of a model is the model
/// itself) share one entry: failures add up, the deadline is the max, and the wider scope is
/// kept (`quota_group` over `model` over `triple`), so a lock never narrows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockouts {
    locks: BTreeMap<Key, Entry>,
    limit: usize,
}

impl Default for Lockouts {
    fn default() -> Self {
        Self::with_limit(MAX_LOCKOUTS)
    }
}

/// Width of a scope for merging: wider scopes cover more models.
fn width(scope: Scope) -> u8 {
    match scope {
        Scope::QuotaGroup => 2,
        Scope::Model => 1,
        Scope::Triple | Scope::Connection | Scope::Provider => 0,
    }
}

fn view(key: &Key, e: &Entry) -> LockoutView {
    LockoutView {
        provider: key.0.clone(),
        connection: key.1.clone(),
        model: key.2.clone(),
        scope: e.scope,
        reason: e.reason.clone(),
        failures: e.failures,
        until: e.until,
    }
}

impl Lockouts {
    /// An empty registry holding at most `limit` entries (at least 1).
    pub fn with_limit(limit: usize) -> Self {
        Self {
            locks: BTreeMap::new(),
            limit: limit.max(1),
        }
    }

    /// Records one model-scoped failure and returns the lock's deadline.
    ///
    /// `scope` picks the key: [`Scope::QuotaGroup`] → the model's quota group; anything else
    /// → the model id ([`Scope::Connection`] / [`Scope::Provider`] are not lockout scopes; the
    /// core should not send them, and they lock the exact model). `failures += 1`, the
    /// duration follows [`lock_duration`], and the deadline is `max(existing, now +
    /// duration)`: a later failure never shortens a lock. `reason` is kept when it
    /// set the deadline.
    pub fn on_failure(
        &mut self,
        at: LockTarget<'_>,
        scope: Scope,
        reason: &str,
        hint: Option<Duration>,
        settings: &ModelLockoutSettings,
        now: Instant,
    ) -> Instant {
        let key_name = match scope {
            Scope::QuotaGroup => quota_group(at.model, at.quota_groups),
            _ => at.model.to_owned(),
        };
        let key = (at.provider.to_owned(), at.connection.to_owned(), key_name);
        if !self.locks.contains_key(&key) {
            self.make_room(now);
        }
        let entry = self.locks.entry(key).or_insert_with(|| Entry {
            scope,
            reason: reason.to_owned(),
            failures: 0,
            until: now,
        });
        entry.failures = entry.failures.saturating_add(1);
        let until = deadline_after(now, lock_duration(entry.failures, hint, settings));
        if until > entry.until {
            entry.until = until;
            reason.clone_into(&mut entry.reason);
        }
        if width(scope) > width(entry.scope) {
            entry.scope = scope;
        }
        entry.until
    }

    /// Success decay (§3): halves (`floor(n / 2)`) the failure count of every lock covering
    /// `at.model` on that connection (its quota-group lock and its exact lock), live or
    /// expired; a count reaching 0 removes the lock even if its timer has not run out. Returns
    /// whether anything changed.
    pub fn on_success(&mut self, at: LockTarget<'_>) -> bool {
        let mut changed = false;
        for key in self.covering_keys(at) {
            let Some(e) = self.locks.get_mut(&key) else {
                continue;
            };
            e.failures /= 2;
            if e.failures == 0 {
                self.locks.remove(&key);
            }
            changed = true;
        }
        changed
    }

    /// The live lock covering `at.model` at `now` (the one lasting longest when both its group
    /// lock and its exact lock are live); `None` when it may be used. Lazy: an expired lock
    /// does not count.
    pub fn locked(&self, at: LockTarget<'_>, now: Instant) -> Option<LockoutView> {
        self.covering_keys(at)
            .into_iter()
            .filter_map(|k| self.locks.get_key_value(&k))
            .filter(|(_, e)| now < e.until)
            .max_by_key(|(_, e)| e.until)
            .map(|(k, e)| view(k, e))
    }

    /// Operator re-enable (`DELETE /api/resilience/model-cooldowns`): drops the entry
    /// under `key` (quota-group name or model id), live or remembered. Returns whether a live
    /// lock was removed.
    pub fn remove(&mut self, provider: &str, connection: &str, key: &str, now: Instant) -> bool {
        let k = (provider.to_owned(), connection.to_owned(), key.to_owned());
        self.locks.remove(&k).is_some_and(|e| now < e.until)
    }

    /// Drops every entry of one connection (a cooldown clear's `lockoutsCleared`). Returns how
    /// many were live at `now`.
    pub fn clear_connection(&mut self, provider: &str, connection: &str, now: Instant) -> usize {
        let mut live = 0;
        self.locks.retain(|(p, c, _), e| {
            let keep = p != provider || c != connection;
            if !keep && now < e.until {
                live += 1;
            }
            keep
        });
        live
    }

    /// Live locks at `now`, ordered by provider, connection, key.
    pub fn list(&self, now: Instant) -> Vec<LockoutView> {
        self.locks
            .iter()
            .filter(|(_, e)| now < e.until)
            .map(|(k, e)| view(k, e))
            .collect()
    }

    /// One page of [`Lockouts::list`]: the live locks at `now` among the next `max` entries
    /// (live or remembered) after `after` — a (provider, connection, model) key, exclusive;
    /// from the first entry when `None` — and the key to pass for the next page (`None`
    /// when no entries remain). A caller that releases its lock between pages holds it for
    /// `max` entries at a time however many are held (a snapshot of 10,000 lockouts does);
    /// entries that change between pages are seen as they are when their page is read.
    pub fn list_page(
        &self,
        now: Instant,
        after: Option<&(String, String, String)>,
        max: usize,
    ) -> (Vec<LockoutView>, Option<(String, String, String)>) {
        use std::ops::Bound;
        let start = after.map_or(Bound::Unbounded, Bound::Excluded);
        let mut entries = self.locks.range::<Key, _>((start, Bound::Unbounded));
        let mut page = Vec::new();
        let mut last = None;
        for (k, e) in entries.by_ref().take(max.max(1)) {
            if now < e.until {
                page.push(view(k, e));
            }
            last = Some(k);
        }
        let next = entries.next().and(last).cloned();
        (page, next)
    }

    /// Live locks of one connection at `now` (for the cooldown panel).
    pub fn for_connection(
        &self,
        provider: &str,
        connection: &str,
        now: Instant,
    ) -> Vec<LockoutView> {
        self.locks
            .iter()
            .filter(|((p, c, _), e)| p == provider && c == connection && now < e.until)
            .map(|(k, e)| view(k, e))
            .collect()
    }

    /// Number of entries held (live or remembered).
    pub fn len(&self) -> usize {
        self.locks.len()
    }

    /// No entries at all.
    pub fn is_empty(&self) -> bool {
        self.locks.is_empty()
    }

    /// Every entry, expired ones included (their failure counts still matter), for
    /// persistence.
    pub fn persist(&self) -> Vec<LockoutRecord> {
        self.locks.iter().map(|(k, e)| view(k, e)).collect()
    }

    /// Rebuilds a registry from records. Records with 0 failures are skipped; duplicates of
    /// one key merge (max failures, latest deadline, wider scope); at most [`MAX_LOCKOUTS`]
    /// are kept (the latest deadlines).
    pub fn restore(records: Vec<LockoutRecord>) -> Self {
        let mut records = records;
        records.retain(|r| r.failures > 0);
        records.sort_by_key(|r| std::cmp::Reverse(r.until));
        let mut out = Self::default();
        for r in records {
            let key = (r.provider, r.connection, r.model);
            let room = out.locks.len() < out.limit;
            match out.locks.get_mut(&key) {
                Some(e) => {
                    e.failures = e.failures.max(r.failures);
                    if width(r.scope) > width(e.scope) {
                        e.scope = r.scope;
                    }
                }
                None if room => {
                    out.locks.insert(
                        key,
                        Entry {
                            scope: r.scope,
                            reason: r.reason,
                            failures: r.failures,
                            until: r.until,
                        },
                    );
                }
                None => {}
            }
        }
        out
    }

    /// Keys whose entry covers `at.model` on that connection: the group key when its entry is
    /// a group lock, the model key when its entry is an exact lock (a `model` lock named like
    /// a group never covers the group's other models). When the model is its own group, the
    /// one key covers it whatever the scope.
    fn covering_keys(&self, at: LockTarget<'_>) -> Vec<Key> {
        // The common case (nothing locked) builds no keys.
        if self.locks.is_empty() {
            return Vec::new();
        }
        let group = quota_group(at.model, at.quota_groups);
        let key = |name: &str| {
            (
                at.provider.to_owned(),
                at.connection.to_owned(),
                name.to_owned(),
            )
        };
        let scope_of = |k: &Key| self.locks.get(k).map(|e| e.scope);
        if group == at.model {
            let k = key(at.model);
            return if scope_of(&k).is_some() {
                vec![k]
            } else {
                vec![]
            };
        }
        let mut keys = Vec::with_capacity(2);
        let group_key = key(&group);
        if scope_of(&group_key) == Some(Scope::QuotaGroup) {
            keys.push(group_key);
        }
        let model_key = key(at.model);
        if scope_of(&model_key).is_some_and(|s| s != Scope::QuotaGroup) {
            keys.push(model_key);
        }
        keys
    }

    /// Frees one slot when full: drops expired entries first, then the entry expiring first.
    fn make_room(&mut self, now: Instant) {
        if self.locks.len() < self.limit {
            return;
        }
        self.locks.retain(|_, e| now < e.until);
        while self.locks.len() >= self.limit {
            let Some(k) = self
                .locks
                .iter()
                .min_by_key(|(_, e)| e.until)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            self.locks.remove(&k);
        }
    }
}
