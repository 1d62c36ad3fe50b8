//! Fault injection ("rehearse an outage"): what an operator asked to inject, for how long, and
//! which fault applies to an attempt at `now`. Plain data driven by the injected clock; the
//! core holds one [`FaultSet`] (never persisted) and the proxy synthesizes the upstream answer.
//!
//! A fault targets a provider (every connection) or one connection. It lasts
//! [`DEFAULT_DURATION`] unless asked otherwise, between [`MIN_DURATION`] and
//! [`MAX_DURATION`]; it is active while `now < expires_at`.

use crate::config::keys::{ConnKey, ConnSlot, ProviderKey};
use std::time::Duration;

use crate::clock::Instant;

/// Duration of a fault when none is given: 60 s.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(60);
/// Shortest fault: 1 s.
pub const MIN_DURATION: Duration = Duration::from_secs(1);
/// Longest fault: 10 min.
pub const MAX_DURATION: Duration = Duration::from_secs(600);
/// Longest added latency: 10 min (the provider `timeout` usually ends it sooner).
pub const MAX_LATENCY: Duration = Duration::from_secs(600);
/// Retry-after hint of an injected 429 when none is given: 30 s.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(30);
/// Frames a stalling stream sends before it stalls when none is given: 2.
pub const DEFAULT_STALL_FRAMES: u32 = 2;
/// Added latency when none is given: 2 s.
pub const DEFAULT_LATENCY: Duration = Duration::from_secs(2);

/// The statuses an operator may inject.
pub const STATUSES: [u16; 4] = [429, 500, 503, 529];

/// What an injected fault does to an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Waits `delay`, then sends the real upstream call.
    Latency(Duration),
    /// Answers `status` (429, 500, 503 or 529); a 429 carries `retry-after`.
    Status {
        /// The HTTP status.
        status: u16,
        /// The `retry-after` header of a 429 (whole seconds are sent).
        retry_after: Option<Duration>,
    },
    /// The connection resets before any response head (a transport failure).
    Reset,
    /// A 200 event stream that sends `frames` content frames, then stalls (no more bytes).
    Stall {
        /// Content frames sent before the stall.
        frames: u32,
    },
    /// A 200 event stream that never produces content (pings only).
    Zombie,
}

impl FaultKind {
    /// Whether the fault replaces the upstream call (no traffic leaves for the target).
    /// Only [`FaultKind::Latency`] lets the real call go out (after its delay).
    pub fn replaces_upstream(&self) -> bool {
        !matches!(self, FaultKind::Latency(_))
    }

    /// The kind word of the admin API: `latency`, `429`, `500`, `503`, `529`, `reset`,
    /// `stall` or `zombie`.
    pub fn word(&self) -> String {
        match self {
            FaultKind::Latency(_) => "latency".into(),
            FaultKind::Status { status, .. } => status.to_string(),
            FaultKind::Reset => "reset".into(),
            FaultKind::Stall { .. } => "stall".into(),
            FaultKind::Zombie => "zombie".into(),
        }
    }

    /// A short description for the console banner and logs, e.g. `503`, `429 retry-after 30s`,
    /// `latency 2s`, `stall after 2 frames`.
    pub fn describe(&self) -> String {
        match self {
            FaultKind::Latency(d) => format!("latency {}", fmt_secs(*d)),
            FaultKind::Status {
                status,
                retry_after: Some(r),
            } => format!("{status} retry-after {}", fmt_secs(*r)),
            FaultKind::Status { status, .. } => status.to_string(),
            FaultKind::Reset => "reset".into(),
            FaultKind::Stall { frames } => format!("stall after {frames} frames"),
            FaultKind::Zombie => "zombie 200".into(),
        }
    }
}

fn fmt_secs(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The kind word of a fault as the admin API and the snapshot name it: `latency`, `429`,
/// `500`, `503`, `529`, `reset`, `stall` or `zombie`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultWord {
    /// Added latency.
    Latency,
    /// An injected 429 (with `retry-after`).
    #[serde(rename = "429")]
    Status429,
    /// An injected 500.
    #[serde(rename = "500")]
    Status500,
    /// An injected 503.
    #[serde(rename = "503")]
    Status503,
    /// An injected 529.
    #[serde(rename = "529")]
    Status529,
    /// A connection reset before the head.
    Reset,
    /// A stream that stalls.
    Stall,
    /// A stream that never produces content.
    Zombie,
}

impl FaultWord {
    /// The wire word (as serde writes it).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Latency => "latency",
            Self::Status429 => "429",
            Self::Status500 => "500",
            Self::Status503 => "503",
            Self::Status529 => "529",
            Self::Reset => "reset",
            Self::Stall => "stall",
            Self::Zombie => "zombie",
        }
    }
}

impl FaultKind {
    /// The kind as a [`FaultWord`]; `None` only for a status outside [`STATUSES`] (which
    /// [`parse_kind`] never builds).
    pub fn kind_word(&self) -> Option<FaultWord> {
        Some(match self {
            FaultKind::Latency(_) => FaultWord::Latency,
            FaultKind::Status { status: 429, .. } => FaultWord::Status429,
            FaultKind::Status { status: 500, .. } => FaultWord::Status500,
            FaultKind::Status { status: 503, .. } => FaultWord::Status503,
            FaultKind::Status { status: 529, .. } => FaultWord::Status529,
            FaultKind::Status { .. } => return None,
            FaultKind::Reset => FaultWord::Reset,
            FaultKind::Stall { .. } => FaultWord::Stall,
            FaultKind::Zombie => FaultWord::Zombie,
        })
    }
}

/// Optional parameters of a fault (the admin API's `params` object). Unset fields take the
/// defaults above; a parameter that does not fit the kind is an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultParams {
    /// Added latency (`latency` only).
    pub delay: Option<Duration>,
    /// Retry-after hint (`429` only).
    pub retry_after: Option<Duration>,
    /// Frames before the stall (`stall` only).
    pub frames: Option<u32>,
}

/// A validation failure: the field (`kind`, `duration`, `params.delay`, …) and what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultError {
    /// Dotted field name.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn invalid(field: &str, message: impl Into<String>) -> FaultError {
    FaultError {
        field: field.into(),
        message: message.into(),
    }
}

/// Builds a [`FaultKind`] from its word and parameters.
///
/// # Errors
/// An unknown kind, a parameter that does not belong to the kind, or one out of range.
pub fn parse_kind(word: &str, p: &FaultParams) -> Result<FaultKind, FaultError> {
    let word = word.trim().to_ascii_lowercase();
    let kind = match word.as_str() {
        "latency" => FaultKind::Latency(p.delay.unwrap_or(DEFAULT_LATENCY)),
        "reset" => FaultKind::Reset,
        "stall" => FaultKind::Stall {
            frames: p.frames.unwrap_or(DEFAULT_STALL_FRAMES),
        },
        "zombie" => FaultKind::Zombie,
        w => match w.parse::<u16>() {
            Ok(status) if STATUSES.contains(&status) => FaultKind::Status {
                status,
                retry_after: (status == 429).then(|| p.retry_after.unwrap_or(DEFAULT_RETRY_AFTER)),
            },
            _ => {
                return Err(invalid(
                    "kind",
                    format!(
                        "unknown fault kind '{word}'; use one of latency, 429, 500, 503, 529, reset, stall, zombie"
                    ),
                ));
            }
        },
    };
    check_params(&kind, p)?;
    Ok(kind)
}

fn check_params(kind: &FaultKind, p: &FaultParams) -> Result<(), FaultError> {
    let word = kind.word();
    if p.delay.is_some() && !matches!(kind, FaultKind::Latency(_)) {
        return Err(invalid(
            "params.delay",
            format!("delay applies to kind 'latency' only, not '{word}'"),
        ));
    }
    if p.retry_after.is_some() && !matches!(kind, FaultKind::Status { status: 429, .. }) {
        return Err(invalid(
            "params.retry_after",
            format!("retry_after applies to kind '429' only, not '{word}'"),
        ));
    }
    if p.frames.is_some() && !matches!(kind, FaultKind::Stall { .. }) {
        return Err(invalid(
            "params.frames",
            format!("frames applies to kind 'stall' only, not '{word}'"),
        ));
    }
    match kind {
        FaultKind::Latency(d) if d.is_zero() || *d > MAX_LATENCY => Err(invalid(
            "params.delay",
            "the added latency must be between 1ms and 10m",
        )),
        FaultKind::Status {
            retry_after: Some(r),
            ..
        } if r.is_zero() || *r > MAX_DURATION => Err(invalid(
            "params.retry_after",
            "retry_after must be between 1s and 10m",
        )),
        FaultKind::Stall { frames } if *frames > 1000 => {
            Err(invalid("params.frames", "frames must be at most 1000"))
        }
        _ => Ok(()),
    }
}

/// The fault's duration: `None` is [`DEFAULT_DURATION`].
///
/// # Errors
/// A duration under [`MIN_DURATION`] or over [`MAX_DURATION`].
pub fn check_duration(d: Option<Duration>) -> Result<Duration, FaultError> {
    let d = d.unwrap_or(DEFAULT_DURATION);
    if d < MIN_DURATION || d > MAX_DURATION {
        return Err(invalid(
            "duration",
            format!(
                "a fault lasts between 1s and 10m; {} is out of range",
                humantime::format_duration(d)
            ),
        ));
    }
    Ok(d)
}

/// Where a fault applies: a provider and, optionally, one of its connections (by key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FaultTarget {
    /// The provider's key.
    pub provider: ProviderKey,
    /// The connection's slot, or `None` for every connection of the provider.
    pub connection: Option<ConnSlot>,
}

impl FaultTarget {
    /// Whether an attempt on connection `key` is covered.
    pub fn covers(&self, key: ConnKey) -> bool {
        self.provider == key.provider && self.connection.is_none_or(|c| c == key.slot)
    }
}

/// One active (or expired, until pruned) fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fault {
    /// Id since start (1, 2, …), for `DELETE /api/faults?id=`.
    pub id: u64,
    /// Where it applies.
    pub target: FaultTarget,
    /// The target as the operator names it: `provider` or `provider/connection`.
    pub label: String,
    /// What it does.
    pub kind: FaultKind,
    /// When it was injected.
    pub started_at: Instant,
    /// When it ends (exclusive).
    pub expires_at: Instant,
}

impl Fault {
    /// Whether the fault is on at `now`.
    pub fn active(&self, now: Instant) -> bool {
        now < self.expires_at
    }

    /// Time left at `now` (zero once expired).
    pub fn remaining(&self, now: Instant) -> Duration {
        self.expires_at.saturating_duration_since(now)
    }
}

/// Which faults a clear removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FaultSelector {
    /// Every fault.
    All,
    /// The fault with this id.
    Id(u64),
    /// Faults whose label is exactly this target (`provider` or `provider/connection`).
    Target(String),
}

/// The live faults. One per target: injecting again on the same target replaces it.
#[derive(Debug, Clone, Default)]
pub struct FaultSet {
    next_id: u64,
    faults: Vec<Fault>,
}

impl FaultSet {
    /// Injects `kind` on `target` (named `label`) for `duration` from `now`, replacing any
    /// fault on the same target. A duration that would overflow the clock ends at
    /// [`MAX_DURATION`] instead.
    pub fn inject(
        &mut self,
        target: FaultTarget,
        label: &str,
        kind: FaultKind,
        duration: Duration,
        now: Instant,
    ) -> Fault {
        self.prune(now);
        self.faults.retain(|f| f.target != target);
        self.next_id = self.next_id.saturating_add(1);
        let expires_at = now.checked_add(duration.min(MAX_DURATION)).unwrap_or(now);
        let f = Fault {
            id: self.next_id,
            target,
            label: label.to_string(),
            kind,
            started_at: now,
            expires_at,
        };
        self.faults.push(f.clone());
        f
    }

    /// The fault applying to an attempt on connection `key` at `now`: a connection's own
    /// fault before its provider's.
    pub fn active_for(&self, key: ConnKey, now: Instant) -> Option<&Fault> {
        let live = |f: &&Fault| f.active(now) && f.target.covers(key);
        self.faults
            .iter()
            .filter(live)
            .find(|f| f.target.connection.is_some())
            .or_else(|| self.faults.iter().find(live))
    }

    /// The faults on at `now`, oldest first.
    pub fn active(&self, now: Instant) -> Vec<Fault> {
        self.faults
            .iter()
            .filter(|f| f.active(now))
            .cloned()
            .collect()
    }

    /// Removes the faults `sel` names (expired ones go too); returns the removed active ones.
    pub fn clear(&mut self, sel: &FaultSelector, now: Instant) -> Vec<Fault> {
        self.prune(now);
        let (gone, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.faults)
            .into_iter()
            .partition(|f| match sel {
                FaultSelector::All => true,
                FaultSelector::Id(id) => f.id == *id,
                FaultSelector::Target(t) => f.label == *t,
            });
        self.faults = kept;
        gone
    }

    /// Drops expired faults.
    pub fn prune(&mut self, now: Instant) {
        self.faults.retain(|f| f.active(now));
    }

    /// Keeps the faults whose target `keep` accepts (after a config reload removed
    /// providers or connections); the others are removed.
    pub fn retain(&mut self, keep: impl Fn(FaultTarget) -> bool) {
        self.faults.retain(|f| keep(f.target));
    }
}

#[cfg(test)]
mod tests;
