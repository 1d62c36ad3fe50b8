//! `Headroom`: how much quota each connection has left, read from upstream response headers.
//!
//! Every upstream response (success or error) says how close the account is to its limits:
//! Anthropic API buckets (`anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-*`),
//! Anthropic subscription windows (`anthropic-ratelimit-unified-*`: the 5-hour and 7-day
//! windows, the representative claim, overage) and OpenAI-style buckets (`x-ratelimit-*`).
//! [`parse::parse`] turns one response's headers into an [`Observation`]; [`Headroom::merge`]
//! folds it into the per-connection state; [`Headroom::binding`] names the window that limits
//! the connection now; [`preflight::decide`] turns that into ok / warn / cut off.
//!
//! Pure: no clock reads, no I/O. Every time-dependent call takes `now_unix_ms` (milliseconds
//! since the Unix epoch, wall clock, because upstream resets are wall-clock instants).
//!
//! # Wiring (one place in the core)
//! 1. Keep one [`Headroom`] per connection. After every upstream response head (any status),
//!    feed its headers: `headroom.observe(pairs, Some(upstream_model), now_unix_ms)`, where
//!    `pairs` is an iterator of `(name, value)` string pairs ([`parse::header_pairs`] adapts an
//!    `http::HeaderMap`). Subscription windows are stored per connection; bucket windows
//!    (requests / tokens) per model, because upstreams limit those per model.
//! 2. Read [`Headroom::binding`] (for the console and snapshot) and [`Headroom::rows`] (one
//!    row per live window, for `/metrics` gauges and the Quota panel).
//! 3. Before dispatch, ask [`preflight::decide`]; skip a [`preflight::Verdict::CutOff`]
//!    connection (reason `quota_preflight`); when every candidate is cut off, answer with
//!    [`preflight::earliest_cut_off`]. Strategies `reset_aware` and `headroom` order candidates
//!    with [`preflight::order_reset_aware`] and [`preflight::order_headroom`].
//! 4. Persist the whole [`Headroom`] (serde, snake_case) and call [`Headroom::prune`] after
//!    loading it and from time to time to drop stale windows.

pub mod parse;
pub mod preflight;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use parse::Observation;

/// A window without a known reset instant counts as stale this long after it was observed
/// (1 h): old numbers must not cut a connection off forever.
pub const STALE_WITHOUT_RESET_MS: u64 = 3_600_000;

/// At most this many models keep bucket windows per connection (64); the one observed
/// longest ago is dropped first, so a client cycling model names cannot grow the state.
pub const MAX_MODELS: usize = 64;

/// One quota window an upstream reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Window {
    /// Anthropic subscription 5-hour window (`anthropic-ratelimit-unified-5h-*`).
    FiveHour,
    /// Anthropic subscription 7-day window (`anthropic-ratelimit-unified-7d-*`).
    SevenDay,
    /// Requests bucket (`anthropic-ratelimit-requests-*`, `x-ratelimit-*-requests`).
    Requests,
    /// Tokens bucket (`anthropic-ratelimit-tokens-*`, `x-ratelimit-*-tokens`).
    Tokens,
    /// Anthropic input-tokens bucket (`anthropic-ratelimit-input-tokens-*`).
    InputTokens,
    /// Anthropic output-tokens bucket (`anthropic-ratelimit-output-tokens-*`).
    OutputTokens,
}

impl Window {
    /// Every window, in display order.
    pub const ALL: [Window; 6] = [
        Self::FiveHour,
        Self::SevenDay,
        Self::Requests,
        Self::Tokens,
        Self::InputTokens,
        Self::OutputTokens,
    ];

    /// snake_case name, as in JSON, the snapshot and the `window` label of `/metrics`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::FiveHour => "five_hour",
            Self::SevenDay => "seven_day",
            Self::Requests => "requests",
            Self::Tokens => "tokens",
            Self::InputTokens => "input_tokens",
            Self::OutputTokens => "output_tokens",
        }
    }

    /// Short label for the console's Quota panel (`5h`, `7d`, `requests`, …).
    pub fn label(self) -> &'static str {
        match self {
            Self::FiveHour => "5h",
            Self::SevenDay => "7d",
            Self::Requests => "requests",
            Self::Tokens => "tokens",
            Self::InputTokens => "input tokens",
            Self::OutputTokens => "output tokens",
        }
    }

    /// True for the subscription windows (one per account, not per model).
    pub fn is_subscription(self) -> bool {
        matches!(self, Self::FiveHour | Self::SevenDay)
    }

    /// The window a `representative-claim` value names (`five_hour`, `seven_day`); `None`
    /// for any other claim (e.g. `seven_day_opus`, which has no window of its own here).
    pub fn from_claim(claim: &str) -> Option<Self> {
        match claim.trim().to_ascii_lowercase().as_str() {
            "five_hour" => Some(Self::FiveHour),
            "seven_day" => Some(Self::SevenDay),
            _ => None,
        }
    }
}

/// An upstream's status word for a window (`anthropic-ratelimit-unified-*-status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WindowStatus {
    /// `allowed`.
    Allowed,
    /// `allowed_warning`: close to the limit.
    AllowedWarning,
    /// `rejected`: the window is exhausted (its remaining counts as 0).
    Rejected,
}

impl WindowStatus {
    /// Parses `allowed` / `allowed_warning` / `rejected` (ASCII case-insensitive, trimmed);
    /// anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "allowed" => Some(Self::Allowed),
            "allowed_warning" => Some(Self::AllowedWarning),
            "rejected" => Some(Self::Rejected),
            _ => None,
        }
    }

    /// snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::AllowedWarning => "allowed_warning",
            Self::Rejected => "rejected",
        }
    }
}

/// What one window looked like at one response.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct WindowState {
    /// Remaining fraction, 0.0–1.0 (1 − utilization, or remaining / limit); `None` when the
    /// upstream sent no number for it.
    pub remaining: Option<f64>,
    /// The bucket's limit (requests or tokens), when sent.
    pub limit: Option<u64>,
    /// The bucket's remaining count, when sent.
    pub remaining_count: Option<u64>,
    /// When the window resets, Unix milliseconds; `None` when not sent.
    pub reset_at_ms: Option<u64>,
    /// The upstream's status word, when sent.
    pub status: Option<WindowStatus>,
    /// When this was observed, Unix milliseconds.
    pub observed_at_ms: u64,
}

impl WindowState {
    /// The remaining fraction that routing uses: 0.0 when the status is `rejected`,
    /// else [`WindowState::remaining`].
    pub fn effective_remaining(&self) -> Option<f64> {
        if self.status == Some(WindowStatus::Rejected) {
            return Some(0.0);
        }
        self.remaining
    }

    /// True once the reset instant has passed (`now >= reset_at`), or, with no reset known,
    /// [`STALE_WITHOUT_RESET_MS`] after it was observed.
    pub fn is_stale(&self, now_unix_ms: u64) -> bool {
        is_stale(self.reset_at_ms, self.observed_at_ms, now_unix_ms)
    }
}

fn is_stale(reset_at_ms: Option<u64>, observed_at_ms: u64, now_unix_ms: u64) -> bool {
    match reset_at_ms {
        Some(reset) => now_unix_ms >= reset,
        None => now_unix_ms >= observed_at_ms.saturating_add(STALE_WITHOUT_RESET_MS),
    }
}

/// The account-wide subscription summary (`anthropic-ratelimit-unified-{status,reset,
/// representative-claim}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct UnifiedState {
    /// Overall status, when sent.
    pub status: Option<WindowStatus>,
    /// Overall reset, Unix milliseconds, when sent.
    pub reset_at_ms: Option<u64>,
    /// The window the upstream says represents the account's limit, when sent and known.
    pub representative_claim: Option<Window>,
    /// When this was observed, Unix milliseconds.
    pub observed_at_ms: u64,
}

/// Subscription overage ("extra usage") state (`anthropic-ratelimit-unified-overage-*`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OverageState {
    /// `overage-status`, when sent.
    pub status: Option<WindowStatus>,
    /// `overage-reset`, Unix milliseconds, when sent.
    pub reset_at_ms: Option<u64>,
    /// `overage-utilization` as a remaining fraction (1 − utilization), when sent.
    pub remaining: Option<f64>,
    /// `overage-disabled-reason` (a short token such as `out_of_credits`), when sent.
    pub disabled_reason: Option<String>,
    /// When this was observed, Unix milliseconds.
    pub observed_at_ms: u64,
}

/// The window that limits a connection now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Binding {
    /// Which window.
    pub window: Window,
    /// The model whose bucket it is; `None` for connection-wide windows.
    pub model: Option<String>,
    /// Its effective remaining fraction, 0.0–1.0.
    pub remaining: f64,
    /// When it resets, Unix milliseconds, when known.
    pub reset_at_ms: Option<u64>,
    /// Its status word, when sent.
    pub status: Option<WindowStatus>,
    /// True when the upstream's representative claim chose it.
    pub by_claim: bool,
}

/// One live window, for `/metrics` gauges and the console's Quota panel.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowRow {
    /// Which window.
    pub window: Window,
    /// The model whose bucket it is; `None` for connection-wide windows.
    pub model: Option<String>,
    /// The window's state.
    pub state: WindowState,
    /// True when it is the connection's [`Headroom::binding`] (for `model = None`).
    pub binding: bool,
}

/// Per-connection headroom: every window seen in recent responses.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Headroom {
    /// Connection-wide windows: the subscription windows, and bucket windows observed
    /// without a model.
    pub connection: BTreeMap<Window, WindowState>,
    /// Bucket windows per model id (as sent upstream), at most [`MAX_MODELS`] models.
    pub models: BTreeMap<String, BTreeMap<Window, WindowState>>,
    /// The subscription summary, when sent.
    pub unified: Option<UnifiedState>,
    /// The subscription overage state, when sent.
    pub overage: Option<OverageState>,
}

/// A window candidate while choosing the binding one.
struct Candidate<'a> {
    window: Window,
    model: Option<&'a str>,
    state: &'a WindowState,
    remaining: f64,
}

impl Headroom {
    /// Parses one response's `headers` ((name, value) pairs, names case-insensitive) and
    /// merges them in; `model` is the upstream model id the request used. Returns true when
    /// the headers carried anything this module reads.
    pub fn observe<'a, I>(&mut self, headers: I, model: Option<&str>, now_unix_ms: u64) -> bool
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let observation = parse::parse(headers, now_unix_ms);
        let any = !observation.is_empty();
        self.merge(observation, model);
        any
    }

    /// Folds one observation in: per window the newer observation wins (an older one,
    /// arriving late, is dropped); windows absent from it are kept until stale. Subscription
    /// windows go to [`Headroom::connection`]; bucket windows to `models[model]`, or to
    /// `connection` when `model` is `None`.
    pub fn merge(&mut self, observation: Observation, model: Option<&str>) {
        for (window, state) in observation.windows {
            let map = match model {
                Some(m) if !window.is_subscription() => self.model_map(m),
                _ => &mut self.connection,
            };
            merge_window(map, window, state);
        }
        if let Some(u) = observation.unified {
            if self
                .unified
                .is_none_or(|old| u.observed_at_ms >= old.observed_at_ms)
            {
                self.unified = Some(u);
            }
        }
        if let Some(o) = observation.overage {
            let newer = self
                .overage
                .as_ref()
                .is_none_or(|old| o.observed_at_ms >= old.observed_at_ms);
            if newer {
                self.overage = Some(o);
            }
        }
    }

    /// The bucket map for `model`, making room under [`MAX_MODELS`] first.
    fn model_map(&mut self, model: &str) -> &mut BTreeMap<Window, WindowState> {
        if !self.models.contains_key(model) && self.models.len() >= MAX_MODELS {
            let oldest = self
                .models
                .iter()
                .min_by_key(|(_, w)| w.values().map(|s| s.observed_at_ms).max().unwrap_or(0))
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                self.models.remove(&k);
            }
        }
        self.models.entry(model.to_owned()).or_default()
    }

    /// Every non-stale window that applies to `model`: the connection-wide ones plus that
    /// model's buckets (`model = None`: plus every model's buckets). Order: connection
    /// windows in [`Window`] order, then models by name.
    pub fn live_windows<'a>(
        &'a self,
        model: Option<&'a str>,
        now_unix_ms: u64,
    ) -> impl Iterator<Item = (Window, Option<&'a str>, &'a WindowState)> + 'a {
        let connection = self.connection.iter().map(|(w, s)| (*w, None, s));
        let models = self
            .models
            .iter()
            .filter(move |(m, _)| model.is_none_or(|want| want == m.as_str()))
            .flat_map(|(m, ws)| ws.iter().map(move |(w, s)| (*w, Some(m.as_str()), s)));
        connection
            .chain(models)
            .filter(move |(_, _, s)| !s.is_stale(now_unix_ms))
    }

    /// The window that limits requests for `model` now (see [`Headroom::live_windows`] for
    /// which windows apply): among non-stale windows with a known remaining fraction, the
    /// upstream's representative claim, when it names a live window, stands for the
    /// subscription windows; otherwise the subscription window with the least remaining
    /// does. A bucket window binds instead when its remaining is strictly lower. Ties keep
    /// the earlier window ([`Window`] order, connection before models). `None` when no live
    /// window has a number.
    pub fn binding(&self, model: Option<&str>, now_unix_ms: u64) -> Option<Binding> {
        let candidates: Vec<Candidate<'_>> = self
            .live_windows(model, now_unix_ms)
            .filter_map(|(window, model, state)| {
                let remaining = state.effective_remaining()?;
                Some(Candidate {
                    window,
                    model,
                    state,
                    remaining,
                })
            })
            .collect();
        let claimed = self.live_claim(now_unix_ms).and_then(|w| {
            candidates
                .iter()
                .find(|c| c.window == w && c.model.is_none())
        });
        let by_claim = claimed.is_some();
        let subscription =
            claimed.or_else(|| least(candidates.iter().filter(|c| c.window.is_subscription())));
        let bucket = least(candidates.iter().filter(|c| !c.window.is_subscription()));
        let pick = match (subscription, bucket) {
            (Some(s), Some(b)) if b.remaining < s.remaining => (b, false),
            (Some(s), _) => (s, by_claim),
            (None, Some(b)) => (b, false),
            (None, None) => return None,
        };
        Some(Binding {
            window: pick.0.window,
            model: pick.0.model.map(str::to_owned),
            remaining: pick.0.remaining,
            reset_at_ms: pick.0.state.reset_at_ms,
            status: pick.0.state.status,
            by_claim: pick.1,
        })
    }

    /// The representative claim, while the summary carrying it is not stale.
    fn live_claim(&self, now_unix_ms: u64) -> Option<Window> {
        let u = self.unified?;
        if is_stale(u.reset_at_ms, u.observed_at_ms, now_unix_ms) {
            return None;
        }
        u.representative_claim
    }

    /// One row per live window (all models), binding flagged, in
    /// [`Headroom::live_windows`] order: the shape of `/metrics` gauges and the Quota panel.
    pub fn rows(&self, now_unix_ms: u64) -> Vec<WindowRow> {
        let binding = self.binding(None, now_unix_ms);
        self.live_windows(None, now_unix_ms)
            .map(|(window, model, state)| WindowRow {
                window,
                model: model.map(str::to_owned),
                state: *state,
                binding: binding
                    .as_ref()
                    .is_some_and(|b| b.window == window && b.model.as_deref() == model),
            })
            .collect()
    }

    /// Drops stale windows, empty model maps and a stale summary or overage state.
    pub fn prune(&mut self, now_unix_ms: u64) {
        self.connection.retain(|_, s| !s.is_stale(now_unix_ms));
        for windows in self.models.values_mut() {
            windows.retain(|_, s| !s.is_stale(now_unix_ms));
        }
        self.models.retain(|_, w| !w.is_empty());
        if self
            .unified
            .is_some_and(|u| is_stale(u.reset_at_ms, u.observed_at_ms, now_unix_ms))
        {
            self.unified = None;
        }
        if self
            .overage
            .as_ref()
            .is_some_and(|o| is_stale(o.reset_at_ms, o.observed_at_ms, now_unix_ms))
        {
            self.overage = None;
        }
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.connection.is_empty()
            && self.models.is_empty()
            && self.unified.is_none()
            && self.overage.is_none()
    }
}

/// The candidate with the least remaining; ties keep the first.
fn least<'a, 'b>(it: impl Iterator<Item = &'b Candidate<'a>>) -> Option<&'b Candidate<'a>>
where
    'a: 'b,
{
    it.fold(None, |best: Option<&Candidate<'_>>, c| match best {
        Some(b) if b.remaining <= c.remaining => Some(b),
        _ => Some(c),
    })
}

/// Newer-wins insert of one window.
fn merge_window(map: &mut BTreeMap<Window, WindowState>, window: Window, state: WindowState) {
    match map.get(&window) {
        Some(old) if old.observed_at_ms > state.observed_at_ms => {}
        _ => {
            map.insert(window, state);
        }
    }
}
