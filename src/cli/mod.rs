//! Command-line arguments (clap): `sluice` runs the proxy with the console, `--no-console`
//! runs it headless (as does `serve`, the form for service managers), `check` validates the
//! config and prints the routing table, `status` reads a running sluice's state, `env <client>`
//! prints how to point a client at sluice, `console` attaches the console to a running sluice.

pub mod env;
pub mod log;
pub mod status;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// sluice: a local LLM proxy that keeps coding agents working when providers fail.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
pub struct Cli {
    /// Config file (default: $SLUICE_CONFIG, ./config.toml, then ~/.config/sluice/config.toml).
    #[arg(long, short = 'c', global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// Run the proxy without the console; logs also go to stderr.
    #[arg(long)]
    pub no_console: bool,
    /// Move the state database aside (never deleted) and start with a fresh one.
    #[arg(long)]
    pub reset_state: bool,
    /// Console without actions: watch only (no clears, resets or edits). A sluice started
    /// with it also refuses every change through its admin API (attached consoles included).
    #[arg(long, global = true)]
    pub readonly: bool,
    /// Disable mouse capture in the console (keeps the terminal's own text selection).
    #[arg(long, global = true)]
    pub no_mouse: bool,
    /// Console theme, overriding [console] theme.
    #[arg(long, global = true, value_name = "NAME")]
    pub theme: Option<String>,
    /// What to do (default: run).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// `--since`: a duration like the config's (`1h`, `30m`), bounded like them.
fn parse_since(s: &str) -> Result<std::time::Duration, String> {
    crate::config::validate::parse_bounded_duration(s).map_err(|(msg, fix)| format!("{msg}; {fix}"))
}

impl Cli {
    /// True when sluice runs without the console: `--no-console` or `sluice serve`.
    pub fn headless(&self) -> bool {
        self.no_console || matches!(self.command, Some(Command::Serve))
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy headless, the same as `--no-console`: for systemd, launchd or a
    /// terminal multiplexer (logs go to the log dir and stderr).
    Serve,
    /// Validate the config and print the resolved routing table.
    Check,
    /// Print breakers, connection cooldowns and model lockouts of a running sluice (via its
    /// admin API); exits non-zero when it cannot be reached.
    Status,
    /// Print the request log from the state database (works while a server runs), oldest of
    /// the selected rows first.
    Log {
        /// Only requests from this long ago until now, e.g. `1h`, `30m`, `2days`.
        #[arg(long, value_name = "DURATION", value_parser = parse_since)]
        since: Option<std::time::Duration>,
        /// Only requests answered with this HTTP status.
        #[arg(long)]
        status: Option<u16>,
        /// Only requests for this model (the client's model name, or the upstream model).
        #[arg(long)]
        model: Option<String>,
        /// Only requests served (or last tried) by this provider.
        #[arg(long)]
        provider: Option<String>,
        /// Only requests with this outcome (`ok`, `upstream_error`, `cancelled`, ...).
        #[arg(long)]
        outcome: Option<String>,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
        /// At most this many rows (the newest ones).
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Print what to export (or paste) to point a client at this sluice.
    Env {
        /// The client to configure.
        #[arg(value_enum)]
        client: crate::cli::env::ClientKind,
    },
    /// Open the console on a running sluice (through its admin API); `q` leaves the console,
    /// the instance keeps running. Several consoles may attach at once.
    Console {
        /// The admin API address (default: http:// + the config's admin.listen).
        #[arg(long, value_name = "URL")]
        admin: Option<String>,
        /// Read the admin token from this environment variable (default: the config's
        /// admin.token_env).
        #[arg(long, value_name = "VAR")]
        token_env: Option<String>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_flags_and_subcommands() {
        let c = Cli::try_parse_from(["sluice", "--no-console", "--config", "x.toml"]).unwrap();
        assert!(c.no_console && c.command.is_none());
        assert_eq!(c.config.unwrap(), PathBuf::from("x.toml"));
        let c = Cli::try_parse_from(["sluice", "check", "-c", "y.toml"]).unwrap();
        assert!(matches!(c.command, Some(Command::Check)));
        assert!(Cli::try_parse_from(["sluice", "--bogus"]).is_err());
        let c = Cli::try_parse_from(["sluice", "env", "codex"]).unwrap();
        assert!(matches!(
            c.command,
            Some(Command::Env {
                client: crate::cli::env::ClientKind::Codex
            })
        ));
        assert!(Cli::try_parse_from(["sluice", "env", "vim"]).is_err());
        let c = Cli::try_parse_from([
            "sluice",
            "console",
            "--admin",
            "http://127.0.0.1:9",
            "--token-env",
            "TOK",
            "--readonly",
        ])
        .unwrap();
        assert!(c.readonly);
        match c.command {
            Some(Command::Console { admin, token_env }) => {
                assert_eq!(admin.as_deref(), Some("http://127.0.0.1:9"));
                assert_eq!(token_env.as_deref(), Some("TOK"));
            }
            other => panic!("{other:?}"),
        }
        let c = Cli::try_parse_from([
            "sluice", "log", "--since", "1h", "--status", "429", "--json",
        ])
        .unwrap();
        assert!(matches!(
            c.command,
            Some(Command::Log { since: Some(d), status: Some(429), json: true, limit: 50, .. })
                if d.as_secs() == 3600
        ));
        assert!(Cli::try_parse_from(["sluice", "log", "--since", "soon"]).is_err());
        let c = Cli::try_parse_from(["sluice", "serve", "-c", "z.toml"]).unwrap();
        assert!(matches!(c.command, Some(Command::Serve)));
        assert!(c.headless());
        assert!(!Cli::try_parse_from(["sluice"]).unwrap().headless());
    }
}
