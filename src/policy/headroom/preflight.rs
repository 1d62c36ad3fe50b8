//! `preflight`: skip a connection before dispatch when its binding window is nearly spent,
//! and order candidates by headroom.
//!
//! [`decide`] compares the binding window's remaining fraction with two thresholds
//! ([`PreflightSettings`], off by default; cut off at ≤ 2 %, warn at ≤ 20 %). When every
//! candidate is cut off, [`earliest_cut_off`] picks the one whose window resets first, for
//! the quota-wait answer. [`order_reset_aware`] and [`order_headroom`] give the try order of
//! the `reset_aware` and `headroom` strategies.

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use super::{Binding, Headroom, Window};

/// Default cut-off threshold: 2 % remaining.
pub const DEFAULT_CUT_OFF_AT: f64 = 0.02;

/// Default warning threshold: 20 % remaining.
pub const DEFAULT_WARN_AT: f64 = 0.20;

/// Quota preflight settings (`[resilience.quota_preflight]`); fractions 0.0–1.0.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PreflightSettings {
    /// Master switch; default off.
    pub enabled: bool,
    /// Cut a connection off when its binding window has this fraction or less remaining;
    /// default [`DEFAULT_CUT_OFF_AT`] (0.02).
    pub cut_off_at: f64,
    /// Warn when its binding window has this fraction or less remaining; default
    /// [`DEFAULT_WARN_AT`] (0.20).
    pub warn_at: f64,
}

impl Default for PreflightSettings {
    fn default() -> Self {
        Self {
            enabled: false,
            cut_off_at: DEFAULT_CUT_OFF_AT,
            warn_at: DEFAULT_WARN_AT,
        }
    }
}

impl PreflightSettings {
    /// Checks both thresholds are within 0.0–1.0 and `cut_off_at <= warn_at`; the error
    /// names the offending key.
    pub fn validate(&self) -> Result<(), String> {
        for (key, v) in [("cut_off_at", self.cut_off_at), ("warn_at", self.warn_at)] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{key} must be a fraction from 0.0 to 1.0, got {v}"));
            }
        }
        if self.cut_off_at > self.warn_at {
            return Err(format!(
                "cut_off_at ({}) must not exceed warn_at ({})",
                self.cut_off_at, self.warn_at
            ));
        }
        Ok(())
    }
}

/// A preflight verdict's state word (`ok`, `warn`, `cut_off`), as the snapshot's
/// `preflight.state` carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mark {
    /// Dispatch normally.
    Ok,
    /// Dispatched, but the binding window is at or under `warn_at`.
    Warn,
    /// Skipped (reason `quota_preflight`): the binding window is at or under `cut_off_at`.
    CutOff,
}

impl Mark {
    /// snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn => "warn",
            Self::CutOff => "cut_off",
        }
    }
}

/// The preflight answer for one connection.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Verdict {
    /// Dispatch normally (also: preflight off, or nothing known).
    Ok,
    /// Dispatch, but the binding window is at or under `warn_at`.
    Warn {
        /// The binding window.
        window: Window,
        /// Its remaining fraction, 0.0–1.0.
        remaining: f64,
        /// When it resets, Unix milliseconds, when known.
        reset_at_ms: Option<u64>,
    },
    /// Skip this connection (diagnostic reason `quota_preflight`): the binding window is at
    /// or under `cut_off_at`.
    CutOff {
        /// The binding window.
        window: Window,
        /// Its remaining fraction, 0.0–1.0.
        remaining: f64,
        /// When it resets, Unix milliseconds, when known.
        reset_at_ms: Option<u64>,
    },
}

impl Verdict {
    /// True for [`Verdict::CutOff`].
    pub fn is_cut_off(&self) -> bool {
        matches!(self, Self::CutOff { .. })
    }

    /// The verdict without its window numbers.
    pub fn mark(&self) -> Mark {
        match self {
            Self::Ok => Mark::Ok,
            Self::Warn { .. } => Mark::Warn,
            Self::CutOff { .. } => Mark::CutOff,
        }
    }

    /// snake_case state name: `ok`, `warn`, `cut_off`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Warn { .. } => "warn",
            Self::CutOff { .. } => "cut_off",
        }
    }
}

/// The preflight verdict for a request to `model` (the upstream model id; `None`: every
/// window of the connection) on a connection with `headroom`, at `now_unix_ms`: from its
/// [`Headroom::binding`] window, `remaining <= cut_off_at` → cut off, `<= warn_at` → warn.
/// Always [`Verdict::Ok`] when disabled or when no live window has a number.
pub fn decide(
    headroom: &Headroom,
    model: Option<&str>,
    settings: &PreflightSettings,
    now_unix_ms: u64,
) -> Verdict {
    if !settings.enabled {
        return Verdict::Ok;
    }
    let Some(b) = headroom.binding(model, now_unix_ms) else {
        return Verdict::Ok;
    };
    let (window, remaining, reset_at_ms) = (b.window, b.remaining, b.reset_at_ms);
    if remaining <= settings.cut_off_at {
        Verdict::CutOff {
            window,
            remaining,
            reset_at_ms,
        }
    } else if remaining <= settings.warn_at {
        Verdict::Warn {
            window,
            remaining,
            reset_at_ms,
        }
    } else {
        Verdict::Ok
    }
}

/// The cut-off candidate chosen for the "every candidate is cut off" answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CutOffPick {
    /// The candidate's index, as given.
    pub index: usize,
    /// Its binding window.
    pub window: Window,
    /// Its remaining fraction.
    pub remaining: f64,
    /// When it resets, Unix milliseconds; `None` only when no cut-off candidate knows one.
    pub reset_at_ms: Option<u64>,
}

/// Among `(index, verdict)` pairs, the [`Verdict::CutOff`] with the earliest known reset;
/// ties and unknown resets keep the earlier pair. `None` when none is cut off.
pub fn earliest_cut_off<'a, I>(verdicts: I) -> Option<CutOffPick>
where
    I: IntoIterator<Item = (usize, &'a Verdict)>,
{
    let picks = verdicts.into_iter().filter_map(|(index, v)| match *v {
        Verdict::CutOff {
            window,
            remaining,
            reset_at_ms,
        } => Some(CutOffPick {
            index,
            window,
            remaining,
            reset_at_ms,
        }),
        _ => None,
    });
    picks.fold(None, |best: Option<CutOffPick>, p| match best {
        Some(b) if reset_key(b.reset_at_ms) <= reset_key(p.reset_at_ms) => Some(b),
        _ => Some(p),
    })
}

/// Known resets first, earliest first.
fn reset_key(reset_at_ms: Option<u64>) -> (bool, u64) {
    (reset_at_ms.is_none(), reset_at_ms.unwrap_or(0))
}

fn binding_of(h: Option<&Headroom>, model: Option<&str>, now_unix_ms: u64) -> Option<Binding> {
    h.and_then(|h| h.binding(model, now_unix_ms))
}

/// `reset_aware` order of `candidates` (`(index, headroom)` in priority order): the one
/// whose binding window resets soonest first, so quota that would expire unused is spent
/// first; candidates with no known reset follow. Ties keep priority order. Returns the
/// indices.
pub fn order_reset_aware(
    candidates: &[(usize, Option<&Headroom>)],
    model: Option<&str>,
    now_unix_ms: u64,
) -> Vec<usize> {
    let bindings: Vec<Option<Binding>> = candidates
        .iter()
        .map(|(_, h)| binding_of(*h, model, now_unix_ms))
        .collect();
    order_bindings_reset_aware(&bindings)
        .into_iter()
        .filter_map(|k| candidates.get(k).map(|(i, _)| *i))
        .collect()
}

/// `headroom` order of `candidates` (`(index, headroom)` in priority order): the most
/// remaining (binding window) first; a candidate with nothing known counts as full (1.0).
/// Ties keep priority order. Returns the indices.
pub fn order_headroom(
    candidates: &[(usize, Option<&Headroom>)],
    model: Option<&str>,
    now_unix_ms: u64,
) -> Vec<usize> {
    let bindings: Vec<Option<Binding>> = candidates
        .iter()
        .map(|(_, h)| binding_of(*h, model, now_unix_ms))
        .collect();
    order_bindings_headroom(&bindings)
        .into_iter()
        .filter_map(|k| candidates.get(k).map(|(i, _)| *i))
        .collect()
}

/// The `reset_aware` sort key of one binding: known resets first, earliest first.
pub fn reset_aware_key(b: Option<&Binding>) -> (bool, u64) {
    reset_key(b.and_then(|b| b.reset_at_ms))
}

/// The `headroom` sort key of one binding: its remaining fraction, 1.0 when unknown (larger
/// goes first).
pub fn headroom_key(b: Option<&Binding>) -> f64 {
    b.map_or(1.0, |b| b.remaining)
}

/// `reset_aware` order of bindings already resolved per candidate (positions in priority
/// order; each candidate's binding for its own model): soonest known reset first, unknown
/// after, ties in priority order. Returns positions.
pub fn order_bindings_reset_aware(bindings: &[Option<Binding>]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..bindings.len()).collect();
    idx.sort_by_key(|&i| reset_aware_key(bindings[i].as_ref()));
    idx
}

/// `headroom` order of bindings already resolved per candidate (positions in priority
/// order): most remaining first, unknown counts as full, ties in priority order. Returns
/// positions.
pub fn order_bindings_headroom(bindings: &[Option<Binding>]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..bindings.len()).collect();
    idx.sort_by(|&a, &b| {
        headroom_key(bindings[b].as_ref()).total_cmp(&headroom_key(bindings[a].as_ref()))
    });
    idx
}
