//! [`Focus`]: the console's panels, in focus (tab and digit) order.

/// The panel keys act on. Order (and digits `1`–`7`): the five resilience panels, then
/// Providers, then Quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Focus {
    /// Provider circuit breakers and §1b provider cooldowns (§1).
    #[default]
    Circuits,
    /// Connection cooldowns, quota waits and terminal states (§2).
    Cooldowns,
    /// Model lockouts (§3).
    Lockouts,
    /// Admission gates: in-flight / cap, queued / depth (§4, §5).
    Queues,
    /// Recent requests.
    Requests,
    /// Providers, their connections and the combos.
    Providers,
    /// Quota headroom per connection: one bar per window, reset countdowns, preflight state.
    /// In the grid it takes the Providers slot while focused.
    Quota,
}

impl Focus {
    /// Every panel in focus order (`1`–`7`).
    pub const ALL: [Focus; 7] = [
        Focus::Circuits,
        Focus::Cooldowns,
        Focus::Lockouts,
        Focus::Queues,
        Focus::Requests,
        Focus::Providers,
        Focus::Quota,
    ];

    /// Panel title.
    pub fn title(self) -> &'static str {
        match self {
            Focus::Circuits => "Circuits",
            Focus::Cooldowns => "Cooldowns",
            Focus::Lockouts => "Lockouts",
            Focus::Queues => "Queues",
            Focus::Requests => "Requests",
            Focus::Providers => "Providers",
            Focus::Quota => "Quota",
        }
    }

    /// Short title for narrow tab bars.
    pub fn short_title(self) -> &'static str {
        match self {
            Focus::Circuits => "Circ",
            Focus::Cooldowns => "Cool",
            Focus::Lockouts => "Lock",
            Focus::Queues => "Queue",
            Focus::Requests => "Reqs",
            Focus::Providers => "Prov",
            Focus::Quota => "Quota",
        }
    }

    /// Position in [`Focus::ALL`] (0-based; the focus key is this + 1).
    pub fn index(self) -> usize {
        Focus::ALL.iter().position(|f| *f == self).unwrap_or(0)
    }

    /// The next (`forward`) or previous panel, wrapping around.
    pub fn step(self, forward: bool) -> Focus {
        let n = Focus::ALL.len();
        let i = if forward {
            self.index() + 1
        } else {
            self.index() + n - 1
        };
        Focus::ALL.get(i % n).copied().unwrap_or_default()
    }
}
