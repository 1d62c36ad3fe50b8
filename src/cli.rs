//! Command-line arguments (clap): `sluice` runs the proxy with the console, `--no-console`
//! runs it headless, `check` validates the config and prints the routing table, `status`
//! reads a running sluice's state, `env <client>` prints how to point a client at sluice,
//! `console` attaches the console to a running sluice.

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

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate the config and print the resolved routing table.
    Check,
    /// Print breakers, connection cooldowns and model lockouts of a running sluice (via its
    /// admin API); exits non-zero when it cannot be reached.
    Status,
    /// Print what to export (or paste) to point a client at this sluice.
    Env {
        /// The client to configure.
        #[arg(value_enum)]
        client: crate::client_env::ClientKind,
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
                client: crate::client_env::ClientKind::Codex
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
    }
}
