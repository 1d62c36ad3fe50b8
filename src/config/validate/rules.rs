//! `[[restatement]]` and `[[error_rules]]`
//! (`docs/RESILIENCE.md#7-restatement-error-rules-and-egress-buckets`).

use std::collections::HashSet;
use std::time::Duration;

use super::super::raw;
use super::*;

impl Validator<'_, '_> {
    pub(super) fn status(&mut self, key: &str, n: i64) -> Option<u16> {
        match u16::try_from(n) {
            Ok(s) if (100..=599).contains(&s) => Some(s),
            _ => {
                self.bad(
                    key,
                    format!("'{n}' is not an HTTP status"),
                    "use a status from 100 to 599",
                );
                None
            }
        }
    }

    pub(super) fn known_provider(&mut self, key: &str, p: &Option<String>, providers: &[Provider]) {
        if let Some(p) = p
            && !providers.iter().any(|x| &x.id == p)
        {
            self.bad(
                key,
                format!("'{p}' is not a configured provider"),
                "name the id of a [[providers]] table or omit provider",
            );
        }
    }

    /// Reports a rule id used twice in one table.
    fn unique_rule_id(&mut self, seen: &mut HashSet<String>, k: &str, id: &str) {
        if !seen.insert(id.to_string()) {
            self.bad(
                format!("{k}.id"),
                format!("'{id}' is used by two rules"),
                "give every rule a unique id",
            );
        }
    }

    /// Reports an empty marker, which would match every body.
    fn no_empty_markers(&mut self, key: String, markers: &[String]) {
        if markers.iter().any(|m| m.trim().is_empty()) {
            self.bad(
                key,
                "contains an empty marker, which would match every body",
                "remove the \"\" entry",
            );
        }
    }

    pub(super) fn restatements(
        &mut self,
        raws: Vec<raw::RawRestatement>,
        providers: &[Provider],
    ) -> Vec<Restatement> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (i, r) in raws.into_iter().enumerate() {
            let id = r.id.clone().unwrap_or_else(|| format!("restatement[{i}]"));
            let k = format!("restatement.{id}");
            self.unique_rule_id(&mut seen, &k, &id);
            self.no_empty_markers(format!("{k}.text_markers"), &r.text_markers);
            self.no_empty_markers(format!("{k}.exclude_markers"), &r.exclude_markers);
            self.known_provider(&format!("{k}.provider"), &r.provider, providers);
            let from_statuses = r
                .from_statuses
                .iter()
                .filter_map(|s| self.status(&format!("{k}.from_statuses"), *s))
                .collect::<Vec<_>>();
            if from_statuses.is_empty() {
                self.bad(
                    format!("{k}.from_statuses"),
                    "is empty",
                    "list the statuses to restate, e.g. [400, 403]",
                );
            }
            let Some(to) = r.to_status else {
                self.bad(
                    format!("{k}.to_status"),
                    "is missing",
                    "set to_status, e.g. 429",
                );
                continue;
            };
            let Some(to_status) = self.status(&format!("{k}.to_status"), to) else {
                continue;
            };
            if to_status < 400 {
                self.bad(
                    format!("{k}.to_status"),
                    format!("'{to_status}' is not an error status"),
                    "restate to an error status from 400 to 599, usually 429",
                );
            }
            if r.text_markers.is_empty() {
                self.bad(
                    format!("{k}.text_markers"),
                    "is empty",
                    "list at least one body text that triggers the rule",
                );
            }
            let default_retry_after = self.duration(
                &format!("{k}.default_retry_after"),
                r.default_retry_after.as_ref(),
                Duration::from_secs(60),
            );
            out.push(Restatement {
                id,
                provider: r.provider,
                from_statuses,
                to_status,
                text_markers: r.text_markers,
                exclude_markers: r.exclude_markers,
                default_retry_after,
            });
        }
        out
    }

    pub(super) fn error_rules(
        &mut self,
        raws: Vec<raw::RawErrorRule>,
        providers: &[Provider],
    ) -> Vec<ErrorRule> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for (i, r) in raws.into_iter().enumerate() {
            let id = r.id.clone().unwrap_or_else(|| format!("error_rules[{i}]"));
            let k = format!("error_rules.{id}");
            self.unique_rule_id(&mut seen, &k, &id);
            self.no_empty_markers(format!("{k}.text_markers"), &r.text_markers);
            self.no_empty_markers(format!("{k}.exclude_markers"), &r.exclude_markers);
            self.matches_something(&k, &r);
            self.known_provider(&format!("{k}.provider"), &r.provider, providers);
            let statuses = r
                .statuses
                .iter()
                .filter_map(|s| self.status(&format!("{k}.statuses"), *s))
                .collect();
            let reason = self.error_rule_reason(&k, r.reason.as_ref());
            let scope = self.error_rule_scope(&k, r.scope.as_ref());
            let base_cooldown = r.base_cooldown.as_ref().map(|s| {
                self.duration(
                    &format!("{k}.base_cooldown"),
                    Some(s),
                    Duration::from_secs(3),
                )
            });
            out.push(ErrorRule {
                id,
                provider: r.provider,
                statuses,
                error_types: r.error_types,
                header_markers: r.header_markers,
                text_markers: r.text_markers,
                exclude_markers: r.exclude_markers,
                reason,
                scope,
                base_cooldown,
            });
        }
        out
    }

    /// Reports an error rule (at `k`) with nothing to match on, which would match every error.
    fn matches_something(&mut self, k: &str, r: &raw::RawErrorRule) {
        if r.statuses.is_empty()
            && r.error_types.is_empty()
            && r.header_markers.is_empty()
            && r.text_markers.is_empty()
        {
            self.bad(
                k.to_owned(),
                "has nothing to match on, so it would match every error",
                "set at least one of statuses, error_types, header_markers or text_markers",
            );
        }
    }

    /// The reason of the error rule at `k`; a missing or unknown one is reported (and a
    /// missing one is empty).
    fn error_rule_reason(&mut self, k: &str, reason: Option<&String>) -> String {
        const REASONS: [&str; 7] = [
            "rate_limit_exceeded",
            "quota_exhausted",
            "auth_error",
            "not_found",
            "credits_exhausted",
            "banned",
            "server_error",
        ];
        let Some(reason) = reason else {
            self.bad(
                format!("{k}.reason"),
                "is missing",
                format!("set reason to one of {}", REASONS.join(", ")),
            );
            return String::new();
        };
        if !REASONS.contains(&reason.as_str()) {
            self.bad(
                format!("{k}.reason"),
                format!("'{reason}' is not a reason"),
                format!("use one of {}", REASONS.join(", ")),
            );
        }
        reason.clone()
    }

    /// The scope of the error rule at `k` (`connection` when unset); an unknown one is
    /// reported.
    fn error_rule_scope(&mut self, k: &str, scope: Option<&String>) -> String {
        let scope = scope.cloned().unwrap_or_else(|| "connection".into());
        if !["model", "connection", "provider"].contains(&scope.as_str()) {
            self.bad(
                format!("{k}.scope"),
                format!("'{scope}' is not a scope"),
                "use model, connection or provider",
            );
        }
        scope
    }
}
