//! Candidate selection: a client model name → the ordered targets one request may try.
//!
//! A combo name expands to its targets in strategy order, each into its provider's
//! connections (or the pinned one); any other model goes, unchanged, to the connections of the
//! default providers whose dialect matches the route (DESIGN §4, spec §0 "Candidates").
//! Targets of the other dialect are skipped with reason `dialect_mismatch`.

use crate::config::{Config, Dialect};

/// One (provider, connection, model) an attempt may be sent to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Index into `Config::providers`.
    pub provider: usize,
    /// Index into that provider's `connections`.
    pub connection: usize,
    /// Upstream model id to send.
    pub model: String,
    /// True when `model` differs from what the client sent (the body must be rewritten).
    pub rewrite: bool,
}

/// A target left out before any attempt, with why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// `provider/model` as configured.
    pub target: String,
    /// Diagnostic reason, e.g. `dialect_mismatch`.
    pub reason: &'static str,
}

/// The plan for one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Candidates in the order they are tried.
    pub candidates: Vec<Candidate>,
    /// Targets skipped before trying.
    pub skipped: Vec<Skipped>,
    /// The combo the model named, if any.
    pub combo: Option<String>,
}

/// Builds the candidate list for `model` on a route of `dialect`.
pub fn plan(cfg: &Config, dialect: Dialect, model: &str) -> Plan {
    let mut out = Plan::default();
    if let Some(combo) = cfg.combo(model) {
        out.combo = Some(combo.name.clone());
        for t in &combo.targets {
            let Some((pi, p)) = cfg
                .providers
                .iter()
                .enumerate()
                .find(|(_, p)| p.id == t.provider)
            else {
                continue;
            };
            if p.dialect != dialect {
                out.skipped.push(Skipped {
                    target: t.to_string(),
                    reason: "dialect_mismatch",
                });
                continue;
            }
            for (ci, c) in p.connections.iter().enumerate() {
                if t.connection.as_ref().is_some_and(|pin| pin != &c.id) {
                    continue;
                }
                out.candidates.push(Candidate {
                    provider: pi,
                    connection: ci,
                    model: t.model.clone(),
                    rewrite: t.model != model,
                });
            }
        }
        return out;
    }
    for id in &cfg.default_providers {
        let Some((pi, p)) = cfg.providers.iter().enumerate().find(|(_, p)| &p.id == id) else {
            continue;
        };
        if p.dialect != dialect {
            continue;
        }
        for ci in 0..p.connections.len() {
            out.candidates.push(Candidate {
                provider: pi,
                connection: ci,
                model: model.to_string(),
                rewrite: false,
            });
        }
        // A model no combo names goes to the first provider whose dialect matches (DESIGN §4).
        break;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};
    use std::path::Path;

    fn cfg(text: &str) -> Config {
        let env = LoadEnv::fixed(&[("K", "secret-key-123")], "/tmp");
        from_str(text, Path::new("t.toml"), &env).unwrap()
    }

    const TWO: &str = r#"
        [routing]
        default_provider = ["oa", "an"]
        [[providers]]
        id = "an"
        dialect = "anthropic"
        base_url = "https://api.anthropic.com"
          [[providers.connections]]
          id = "mine"
          auth = "passthrough"
          [[providers.connections]]
          id = "team"
          auth = { env = "K" }
        [[providers]]
        id = "oa"
        dialect = "openai"
        base_url = "https://openrouter.ai/api"
          [[providers.connections]]
          id = "key-a"
          auth = { env = "K" }
        [[combos]]
        name = "fast"
        targets = ["oa/z-ai/glm-5", "an:team/claude-haiku-4-5", "an/claude-sonnet-4-5"]
    "#;

    #[test]
    fn plain_model_goes_to_first_default_provider_of_the_route_dialect() {
        let c = cfg(TWO);
        let p = plan(&c, Dialect::Anthropic, "claude-opus-4-1");
        assert_eq!(
            p.candidates.len(),
            2,
            "both anthropic connections, in config order"
        );
        assert!(
            p.candidates
                .iter()
                .all(|x| x.provider == 0 && x.model == "claude-opus-4-1" && !x.rewrite)
        );
        let p = plan(&c, Dialect::OpenAi, "gpt-x");
        assert_eq!(
            p.candidates,
            vec![Candidate {
                provider: 1,
                connection: 0,
                model: "gpt-x".into(),
                rewrite: false
            }]
        );
    }

    #[test]
    fn combo_expands_targets_pins_connections_and_skips_other_dialects() {
        let c = cfg(TWO);
        let p = plan(&c, Dialect::Anthropic, "fast");
        assert_eq!(p.combo.as_deref(), Some("fast"));
        assert_eq!(
            p.skipped,
            vec![Skipped {
                target: "oa/z-ai/glm-5".into(),
                reason: "dialect_mismatch"
            }]
        );
        let got: Vec<(usize, &str)> = p
            .candidates
            .iter()
            .map(|x| (x.connection, x.model.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1, "claude-haiku-4-5"),
                (0, "claude-sonnet-4-5"),
                (1, "claude-sonnet-4-5")
            ]
        );
        assert!(p.candidates.iter().all(|x| x.rewrite));
    }
}
