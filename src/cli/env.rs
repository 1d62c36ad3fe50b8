//! `sluice env <client>`: the exact lines that point a client (Claude Code, Codex CLI, aider,
//! the Anthropic or OpenAI SDKs) at this sluice, built from the config's `server.listen`.
//! Shell lines are `export NAME=value` (so `eval "$(sluice env claude)"` works); everything
//! else is a `#` comment. Codex gets a `config.toml` block to paste. No secret is read.

use std::fmt::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::config::{Config, Dialect};

/// A client `sluice env` knows how to configure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ClientKind {
    /// Claude Code (`ANTHROPIC_BASE_URL`, no `/v1`).
    Claude,
    /// Codex CLI (a `[model_providers.sluice]` block in `~/.codex/config.toml`).
    Codex,
    /// aider, through litellm: `OPENAI_API_BASE` (with `/v1`) for `openai/<name>` models,
    /// `ANTHROPIC_API_BASE` (no `/v1`; litellm appends `/v1/messages`) for `anthropic/<name>`.
    Aider,
    /// OpenAI SDKs (`OPENAI_BASE_URL`, with `/v1`).
    Openai,
    /// Anthropic SDKs (`ANTHROPIC_BASE_URL`, no `/v1`).
    Anthropic,
}

/// The base URL a local client uses to reach `listen`: an unspecified address (`0.0.0.0`,
/// `::`) becomes the loopback address of its family. No trailing slash, no `/v1`.
pub fn base_url(listen: SocketAddr) -> String {
    let ip = match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, listen.port()))
}

/// What to export or paste for `client`, one line each, ending in a newline.
pub fn render(client: ClientKind, cfg: &Config) -> String {
    let base = base_url(cfg.server.listen);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "# point {} at sluice on {base} (from {})",
        label(client),
        cfg.file.display()
    );
    match client {
        ClientKind::Claude | ClientKind::Anthropic => {
            let _ = writeln!(o, "export ANTHROPIC_BASE_URL={base}");
        }
        ClientKind::Openai => {
            let _ = writeln!(o, "export OPENAI_BASE_URL={base}/v1");
        }
        ClientKind::Aider => aider_lines(&mut o, &base),
        ClientKind::Codex => codex_block(&mut o, &base),
    }
    credential_note(&mut o, client, cfg);
    dialect_note(&mut o, client, cfg);
    o
}

fn label(client: ClientKind) -> &'static str {
    match client {
        ClientKind::Claude => "Claude Code",
        ClientKind::Codex => "Codex CLI",
        ClientKind::Aider => "aider",
        ClientKind::Openai => "an OpenAI SDK",
        ClientKind::Anthropic => "an Anthropic SDK",
    }
}

/// aider's two modes, as litellm 1.81 (aider 0.86) reads them: `openai/` models take
/// `OPENAI_BASE_URL`, else `OPENAI_API_BASE`; `anthropic/` models take `ANTHROPIC_API_BASE`,
/// else `ANTHROPIC_BASE_URL`, and get `/v1/messages` appended.
fn aider_lines(o: &mut String, base: &str) {
    let _ = writeln!(
        o,
        "# OpenAI mode (Chat Completions): aider --model openai/<model or combo name>"
    );
    let _ = writeln!(o, "export OPENAI_API_BASE={base}/v1");
    let _ = writeln!(
        o,
        "# Anthropic mode (Messages): aider --model anthropic/<model or combo name>"
    );
    let _ = writeln!(o, "export ANTHROPIC_API_BASE={base}");
    let _ = writeln!(
        o,
        "# litellm reads OPENAI_BASE_URL before OPENAI_API_BASE: unset it or set it to {base}/v1 too"
    );
}

fn codex_block(o: &mut String, base: &str) {
    let _ = writeln!(
        o,
        "# paste into ~/.codex/config.toml (or $CODEX_HOME/config.toml); model_provider goes at the top, before any [table]"
    );
    let _ = writeln!(o, "model_provider = \"sluice\"");
    let _ = writeln!(o);
    let _ = writeln!(o, "[model_providers.sluice]");
    let _ = writeln!(o, "name = \"sluice\"");
    let _ = writeln!(o, "base_url = \"{base}/v1\"");
    let _ = writeln!(o, "env_key = \"OPENAI_API_KEY\"");
    let _ = writeln!(o, "wire_api = \"responses\"");
}

/// Which key the client must send, when sluice checks client keys; otherwise how its own
/// credential reaches the upstream.
fn credential_note(o: &mut String, client: ClientKind, cfg: &Config) {
    if client == ClientKind::Aider {
        return aider_credential_note(o, cfg);
    }
    let var = match client {
        ClientKind::Claude | ClientKind::Anthropic => "ANTHROPIC_API_KEY",
        _ => "OPENAI_API_KEY",
    };
    match &cfg.server.client_keys_env {
        Some(keys) => {
            let _ = writeln!(
                o,
                "# sluice checks client keys (server.client_keys_env): export {var}=<one of the keys in ${keys}>"
            );
        }
        None => {
            let _ = writeln!(
                o,
                "# your own {var} (or login) is forwarded to passthrough connections; connections with auth = {{ env }} use sluice's key"
            );
        }
    }
}

/// aider's key variable is per mode, and litellm refuses to send while it is unset (even
/// when sluice's connection brings its own key).
fn aider_credential_note(o: &mut String, cfg: &Config) {
    match &cfg.server.client_keys_env {
        Some(keys) => {
            let _ = writeln!(
                o,
                "# sluice checks client keys (server.client_keys_env): export OPENAI_API_KEY=<one of the keys in ${keys}> (openai/ models) or ANTHROPIC_API_KEY=<one of them> (anthropic/ models)"
            );
        }
        None => {
            let _ = writeln!(
                o,
                "# aider sends only with a key set: your own OPENAI_API_KEY (openai/ models) or ANTHROPIC_API_KEY (anthropic/ models) is forwarded to passthrough connections; connections with auth = {{ env }} use sluice's key (then any value will do)"
            );
        }
    }
}

/// A note when no provider speaks this client's dialect (for aider: one of its modes'):
/// its requests are translated.
fn dialect_note(o: &mut String, client: ClientKind, cfg: &Config) {
    let needed: &[(Dialect, &str)] = match client {
        ClientKind::Claude | ClientKind::Anthropic => &[(Dialect::Anthropic, label(client))],
        ClientKind::Aider => &[
            (Dialect::OpenAi, "aider's openai/ models"),
            (Dialect::Anthropic, "aider's anthropic/ models"),
        ],
        _ => &[(Dialect::OpenAi, label(client))],
    };
    for (dialect, who) in needed {
        if !cfg.providers.iter().any(|p| p.dialect == *dialect) {
            let _ = writeln!(
                o,
                "# note: no provider in {} has dialect = \"{}\"; requests from {who} are translated for the other dialect (docs/TRANSLATION.md)",
                cfg.file.display(),
                dialect.as_str(),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::{LoadEnv, SecretMode, from_str_with};

    fn cfg(extra: &str) -> Config {
        let text = format!(
            "{extra}[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"https://x\"\n[[providers.connections]]\nid = \"k\"\nauth = {{ env = \"UNSET_KEY\" }}\n"
        );
        let env = LoadEnv::fixed(&[], "/d");
        from_str_with(&text, Path::new("c.toml"), &env, SecretMode::Optional)
            .unwrap()
            .config
    }

    fn exports(s: &str) -> Vec<&str> {
        s.lines().filter(|l| !l.starts_with('#')).collect()
    }

    #[test]
    fn each_client_gets_its_variable_from_the_listen_address() {
        let c = cfg("[server]\nlisten = \"127.0.0.1:9100\"\n");
        let claude = render(ClientKind::Claude, &c);
        assert_eq!(
            exports(&claude),
            ["export ANTHROPIC_BASE_URL=http://127.0.0.1:9100"]
        );
        assert_eq!(
            exports(&render(ClientKind::Anthropic, &c)),
            ["export ANTHROPIC_BASE_URL=http://127.0.0.1:9100"]
        );
        assert_eq!(
            exports(&render(ClientKind::Openai, &c)),
            ["export OPENAI_BASE_URL=http://127.0.0.1:9100/v1"]
        );
        let aider = render(ClientKind::Aider, &c);
        assert_eq!(
            exports(&aider),
            [
                "export OPENAI_API_BASE=http://127.0.0.1:9100/v1",
                "export ANTHROPIC_API_BASE=http://127.0.0.1:9100"
            ]
        );
        assert!(aider.contains("aider --model openai/"), "{aider}");
        assert!(aider.contains("aider --model anthropic/"), "{aider}");
    }

    #[test]
    fn aider_gets_both_modes_their_keys_and_a_note_for_the_translated_one() {
        // The test config's only provider speaks Anthropic: openai/ models are translated.
        let out = render(ClientKind::Aider, &cfg(""));
        assert!(
            out.contains("OPENAI_BASE_URL before OPENAI_API_BASE"),
            "{out}"
        );
        assert!(
            out.contains(
                "your own OPENAI_API_KEY (openai/ models) or ANTHROPIC_API_KEY (anthropic/ models) is forwarded"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "has dialect = \"openai\"; requests from aider's openai/ models are translated"
            ),
            "{out}"
        );
        assert!(!out.contains("anthropic/ models are translated"), "{out}");
        let keyed = render(
            ClientKind::Aider,
            &cfg("[server]\nclient_keys_env = \"CK\"\n"),
        );
        assert!(
            keyed.contains("export OPENAI_API_KEY=<one of the keys in $CK> (openai/ models) or ANTHROPIC_API_KEY=<one of them>"),
            "{keyed}"
        );
    }

    #[test]
    fn codex_gets_a_config_block_that_parses() {
        let c = cfg("");
        let out = render(ClientKind::Codex, &c);
        let block: String = exports(&out).join("\n");
        let t: toml::Table = block.parse().unwrap();
        assert_eq!(t["model_provider"].as_str(), Some("sluice"));
        let p = &t["model_providers"]["sluice"];
        assert_eq!(p["base_url"].as_str(), Some("http://127.0.0.1:8787/v1"));
        assert_eq!(p["wire_api"].as_str(), Some("responses"));
        assert_eq!(p["env_key"].as_str(), Some("OPENAI_API_KEY"));
        assert!(
            out.contains("# note: no provider in c.toml has dialect = \"openai\"; requests from"),
            "{out}"
        );
        assert!(!render(ClientKind::Claude, &c).contains("warning"));
    }

    #[test]
    fn unspecified_listen_becomes_loopback_and_client_keys_are_named() {
        assert_eq!(
            base_url("0.0.0.0:8787".parse().unwrap()),
            "http://127.0.0.1:8787"
        );
        assert_eq!(base_url("[::]:1".parse().unwrap()), "http://[::1]:1");
        let c = cfg("[server]\nlisten = \"0.0.0.0:8787\"\nclient_keys_env = \"CK\"\n");
        let out = render(ClientKind::Claude, &c);
        assert!(
            out.contains("export ANTHROPIC_BASE_URL=http://127.0.0.1:8787"),
            "{out}"
        );
        assert!(
            out.contains("export ANTHROPIC_API_KEY=<one of the keys in $CK>"),
            "{out}"
        );
    }
}
