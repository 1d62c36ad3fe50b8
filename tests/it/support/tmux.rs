//! A tmux server on a private socket, for end-to-end tests of the real console: sessions are
//! started detached at 120×40 and kept when their command exits (so the last screen is still
//! there for a failure message); the server is killed on drop, also when an assertion fails.
//!
//! Without `tmux` such tests are skipped locally (with a message) and fail under `CI=true`
//! (`.ci/run` installs tmux, so there they must run): see [`must_run`].

use std::path::PathBuf;
use std::process::{Command, Output};

/// A tmux server on the socket `socket` (a path in the test's temp dir); killed on drop.
pub struct Panes {
    /// The server's socket path.
    pub socket: PathBuf,
}

impl Panes {
    /// Runs one tmux command against this server.
    pub fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    /// Starts `command` in a detached 120×40 session `name`, kept when the command exits.
    pub fn start(&self, name: &str, command: &str) {
        let out = self.run(&[
            "new-session",
            "-d",
            "-s",
            name,
            "-x",
            "120",
            "-y",
            "40",
            command,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        self.run(&["set-option", "-t", name, "remain-on-exit", "on"]);
    }

    /// Types `keys` (tmux key names) into session `name`.
    pub fn keys(&self, name: &str, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", name];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "tmux send-keys {keys:?}: {out:?}");
    }

    /// The visible screen of session `name`, as text.
    pub fn screen(&self, name: &str) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", name]).stdout).into_owned()
    }
}

impl Drop for Panes {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// Whether `tmux -V` runs.
pub fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether a tmux test runs: with tmux always; without it, `Err` (a failure) when `ci` (the
/// `CI` variable) is `true` or `1`, else `Ok(false)` (skipped locally).
pub fn must_run(tmux: bool, ci: Option<&str>) -> Result<bool, String> {
    let in_ci = ci.is_some_and(|v| v.eq_ignore_ascii_case("true") || v == "1");
    match (tmux, in_ci) {
        (true, _) => Ok(true),
        (false, true) => Err(
            "tmux is not installed but CI=true: .ci/run installs it; this test must run in CI"
                .into(),
        ),
        (false, false) => Ok(false),
    }
}

/// Skips (locally, without tmux) or fails (under `CI=true`, without tmux) the calling test;
/// `true` when it should go on. `test` names it in the skip message.
pub fn tmux_or_skip(test: &str) -> bool {
    match must_run(tmux_available(), std::env::var("CI").ok().as_deref()) {
        Ok(run) => {
            if !run {
                eprintln!("SKIPPED {test}: tmux is not installed (CI=true makes this a failure)");
            }
            run
        }
        Err(e) => panic!("{e}"),
    }
}

/// A port that was free a moment ago (bound to `127.0.0.1:0`, read, released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    l.local_addr().expect("local addr").port()
}

/// Two different ports that were free a moment ago (both bound at once, then released), for a
/// listen and an admin address: two calls of [`free_port`] may return the same port.
pub fn two_free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let b = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let port = |l: &std::net::TcpListener| l.local_addr().expect("local addr").port();
    (port(&a), port(&b))
}

#[test]
fn missing_tmux_fails_under_ci_and_skips_locally() {
    assert_eq!(must_run(true, Some("true")), Ok(true));
    assert_eq!(must_run(true, None), Ok(true));
    assert!(must_run(false, Some("true")).is_err());
    assert!(must_run(false, Some("1")).is_err());
    assert_eq!(must_run(false, None), Ok(false));
    assert_eq!(must_run(false, Some("false")), Ok(false));
}
