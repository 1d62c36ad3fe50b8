//! The `/` row filter: a case-insensitive substring of provider / connection / model / target
//! text that limits the rows of every table panel (request rows also match their status,
//! written exactly, and outcome word). Rows read back from the request log are filtered
//! like live ones.
//!
//! The app keeps the unfiltered snapshot aside and shows a filtered copy in
//! [`App::snapshot`], so every panel, selection and action works on the visible rows only
//! (the header's totals are copied unchanged). Selections follow their row when it is still
//! visible and are clamped otherwise.

use std::sync::Arc;

use super::{App, Focus, connection_rows};
use crate::snapshot::{ProviderView, RequestView, Snapshot};

/// True when `text` contains `needle_lower` (already lower-cased), ignoring case.
fn has(text: &str, needle_lower: &str) -> bool {
    text.to_lowercase().contains(needle_lower)
}

/// A request row matches by model, target (provider/model), an attempt's target, its status
/// written exactly (`429`), or its outcome word (`upstream_error`).
fn request_matches(r: &RequestView, needle: &str) -> bool {
    r.status.to_string() == needle
        || has(r.outcome.as_str(), needle)
        || has(&r.client_model, needle)
        || has(&r.target, needle)
        || r.attempt_log.iter().any(|a| has(&a.target, needle))
}

/// `p` with only the connections whose provider or connection id matches, or `None` when
/// neither the provider nor any of its connections matches.
fn filter_provider(p: &ProviderView, needle: &str) -> Option<ProviderView> {
    if has(&p.id, needle) {
        return Some(p.clone());
    }
    let connections: Vec<_> = p
        .connections
        .iter()
        .filter(|c| has(&c.id, needle))
        .cloned()
        .collect();
    (!connections.is_empty()).then(|| ProviderView {
        connections,
        ..p.clone()
    })
}

/// A copy of `snap` whose providers (with their connections), lockouts, queues and recent
/// requests are limited to rows whose provider / connection / model / target text contains
/// `filter` (case-insensitive). An empty filter keeps everything.
pub fn filtered(snap: &Snapshot, filter: &str) -> Snapshot {
    let needle = filter.to_lowercase();
    if needle.is_empty() {
        return snap.clone();
    }
    Snapshot {
        providers: snap
            .providers
            .iter()
            .filter_map(|p| filter_provider(p, &needle))
            .collect(),
        lockouts: snap
            .lockouts
            .iter()
            .filter(|l| {
                has(&l.provider, &needle) || has(&l.connection, &needle) || has(&l.model, &needle)
            })
            .cloned()
            .collect(),
        queues: snap
            .queues
            .iter()
            .filter(|g| {
                has(&g.provider, &needle)
                    || has(&g.connection, &needle)
                    || g.model.as_deref().is_some_and(|m| has(m, &needle))
            })
            .cloned()
            .collect(),
        recent: snap
            .recent
            .iter()
            .filter(|r| request_matches(r, &needle))
            .cloned()
            .collect(),
        ..snap.clone()
    }
}

/// How many rows `panel` shows for `s`.
fn panel_rows(s: &Snapshot, panel: Focus) -> usize {
    match panel {
        Focus::Circuits | Focus::Providers => s.providers.len(),
        Focus::Cooldowns | Focus::Quota => connection_rows(s).count(),
        Focus::Lockouts => s.lockouts.len(),
        Focus::Queues => s.queues.len(),
        Focus::Requests => s.recent.len(),
    }
}

impl App {
    /// The snapshot as received, before the filter (the same as [`App::snapshot`] when no
    /// filter is active).
    pub fn unfiltered(&self) -> &Arc<Snapshot> {
        self.unfiltered.as_ref().unwrap_or(&self.snapshot)
    }

    /// Sets the row filter (empty clears it) and re-filters the current snapshot.
    pub fn set_filter(&mut self, filter: &str) {
        let raw = Arc::clone(self.unfiltered());
        self.filter = filter.trim().to_owned();
        self.set_snapshot(raw);
    }

    /// Shown / total rows of `panel` while a filter is active (for `n/m` titles), else `None`.
    pub fn filter_counts(&self, panel: Focus) -> Option<(usize, usize)> {
        if self.filter.is_empty() {
            return None;
        }
        Some((
            panel_rows(&self.snapshot, panel),
            panel_rows(self.unfiltered(), panel),
        ))
    }

    /// The notice a panel shows instead of its table when it has no rows: while a filter is
    /// active, that the filter matches nothing here (`no rows match filter "abc" (/ to change)`,
    /// never the unfiltered `message` such as "no providers configured"); else `message`.
    /// `None` when the panel has rows.
    pub fn empty_notice(&self, panel: Focus, message: &str) -> Option<String> {
        if panel_rows(&self.snapshot, panel) > 0 {
            return None;
        }
        if self.filter.is_empty() || panel_rows(self.unfiltered(), panel) == 0 {
            return Some(message.to_owned());
        }
        Some(format!(
            "no rows match filter \"{}\" (/ to change)",
            self.filter
        ))
    }

    /// `title`, with ` n/m` appended while a filter is active.
    pub fn counted_title(&self, title: &str, panel: Focus) -> String {
        match self.filter_counts(panel) {
            Some((n, m)) => format!("{title} {n}/{m}"),
            None => title.to_owned(),
        }
    }

    /// Turns a raw snapshot into what the panels show: itself, or its filtered copy (the raw
    /// one is kept in `unfiltered`).
    pub(super) fn view_of(&mut self, raw: Arc<Snapshot>) -> Arc<Snapshot> {
        if self.filter.is_empty() {
            self.unfiltered = None;
            raw
        } else {
            let view = Arc::new(filtered(&raw, &self.filter));
            self.unfiltered = Some(raw);
            view
        }
    }

    /// Opens the filter input, pre-filled with the active filter.
    pub(super) fn open_filter(&mut self) {
        self.filter_input = Some(self.filter.clone());
    }

    /// One key while the filter input is open: `accept_input` applies, `cancel_input` clears
    /// the filter, printable keys are typed, backspace deletes.
    pub(super) fn filter_key(&mut self, key: crossterm::event::KeyEvent) {
        use crossterm::event::{KeyCode, KeyModifiers};

        use crate::console::keymap::{Cmd, Scope};
        let Some(input) = self.filter_input.as_mut() else {
            return;
        };
        match self.keymap.lookup(&key, Scope::Input).map(|b| b.spec.cmd) {
            Some(Cmd::AcceptInput) => {
                let text = std::mem::take(input);
                self.filter_input = None;
                self.set_filter(&text);
                if self.filter.is_empty() {
                    self.flash("filter cleared");
                }
            }
            Some(Cmd::CancelInput) => {
                self.filter_input = None;
                if !self.filter.is_empty() {
                    self.set_filter("");
                    self.flash("filter cleared");
                }
            }
            _ => match key.code {
                KeyCode::Char(c) if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                    input.push(c);
                }
                KeyCode::Backspace => {
                    input.pop();
                }
                _ => {}
            },
        }
    }
}
