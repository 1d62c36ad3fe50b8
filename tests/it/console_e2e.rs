//! End-to-end console test: the real `sluice` binary with its console in a tmux pane.
//!
//! A mock upstream answers 503, so one request cools the only connection (`api_key` profile,
//! 60 s base cooldown). The test focuses Cooldowns (`2`), presses `c`, and checks through the
//! admin API that the connection is `active` again and on screen that the status bar says
//! `cleared 1`. Without `tmux` it is skipped (with a message) locally, and fails under
//! `CI=true` (`.ci/run` installs tmux, so there it must run). The tmux server runs on
//! a private socket in the temp dir and is killed by a guard, also when an assertion fails.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::client;
use crate::support::{MockUpstream, Reply};

/// The longest any one wait in this test may take.
const WAIT: Duration = Duration::from_secs(5);

/// A tmux server on a private socket (a path in the test's temp dir) with one session;
/// killed on drop.
struct Tmux {
    socket: std::path::PathBuf,
}

impl Tmux {
    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("run tmux")
    }

    /// Starts `command` in a detached 120×40 session named `console`.
    fn start(socket: std::path::PathBuf, command: &str) -> Tmux {
        let t = Tmux { socket };
        let out = t.run(&[
            "new-session",
            "-d",
            "-s",
            "console",
            "-x",
            "120",
            "-y",
            "40",
            command,
        ]);
        assert!(out.status.success(), "tmux new-session: {out:?}");
        // Keep the pane (and its last screen) if sluice exits, for the failure message.
        t.run(&["set-option", "-t", "console", "remain-on-exit", "on"]);
        t
    }

    fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "console"];
        args.extend_from_slice(keys);
        let out = self.run(&args);
        assert!(out.status.success(), "tmux send-keys {keys:?}: {out:?}");
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(&self.run(&["capture-pane", "-p", "-t", "console"]).stdout)
            .into_owned()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-session", "-t", "console"]);
        let _ = self.run(&["kill-server"]);
    }
}

pub(crate) fn tmux_available() -> bool {
    Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether the test runs: with tmux always; without it, `Err` (a failure) when `ci` (the
/// `CI` variable) is `true` or `1`, else `Ok(false)` (skipped locally).
pub(crate) fn must_run(tmux: bool, ci: Option<&str>) -> Result<bool, String> {
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

#[test]
fn missing_tmux_fails_under_ci_and_skips_locally() {
    assert_eq!(must_run(true, Some("true")), Ok(true));
    assert_eq!(must_run(true, None), Ok(true));
    assert!(must_run(false, Some("true")).is_err());
    assert!(must_run(false, Some("1")).is_err());
    assert_eq!(must_run(false, None), Ok(false));
    assert_eq!(must_run(false, Some("false")), Ok(false));
}

/// A port that was free a moment ago (bound to `127.0.0.1:0`, read, released).
pub(crate) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn config(dir: &Path, listen: u16, admin: u16, upstream: &str) -> String {
    format!(
        r#"
[server]
listen = "127.0.0.1:{listen}"

[admin]
listen = "127.0.0.1:{admin}"

[store]
path = "{db}"

[log]
dir = "{logs}"

[resilience.connection_cooldown.api_key]
base = "60s"

[resilience.combo_cooldown_wait]
enabled = false

[[providers]]
id = "up"
dialect = "openai"
base_url = "{upstream}"
profile = "api_key"

  [[providers.connections]]
  id = "key-a"
  auth = "passthrough"
"#,
        db = dir.join("sluice.db").display(),
        logs = dir.join("logs").display(),
    )
}

/// The `key-a` row of `GET /api/resilience/cooldowns`, or `None` while the admin API is down.
async fn key_a(admin: &str) -> Option<Value> {
    // The support client panics on a refused connection; probe the port first.
    let addr = admin.trim_start_matches("http://");
    tokio::net::TcpStream::connect(addr).await.ok()?;
    let url = format!("{admin}/api/resilience/cooldowns");
    let r = tokio::time::timeout(Duration::from_secs(1), client::get(&url, &[]))
        .await
        .ok()?;
    if r.status != 200 {
        return None;
    }
    r.json()["connections"]
        .as_array()?
        .iter()
        .find(|c| c["connection"] == "key-a")
        .cloned()
}

/// Polls `check` every 50 ms until it holds, at most about [`WAIT`].
async fn eventually<F, Fut>(what: &str, tmux: &Tmux, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    const STEP: Duration = Duration::from_millis(50);
    for _ in 0..WAIT.as_millis() / STEP.as_millis() {
        if check().await {
            return;
        }
        tokio::time::sleep(STEP).await;
    }
    panic!("timed out waiting for {what}; screen:\n{}", tmux.screen());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_key_in_the_console_clears_a_cooled_connection() {
    match must_run(tmux_available(), std::env::var("CI").ok().as_deref()) {
        Ok(true) => {}
        Ok(false) => {
            eprintln!("SKIPPED console_e2e: tmux is not installed (CI=true makes this a failure)");
            return;
        }
        Err(e) => panic!("{e}"),
    }
    let mock = MockUpstream::start().await;
    mock.on("*").reply(Reply::openai_error(
        503,
        "server_error",
        "overloaded",
        "upstream overloaded",
    ));
    let dir = tempfile::tempdir().unwrap();
    let (listen, admin_port) = (free_port(), free_port());
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        config(dir.path(), listen, admin_port, &mock.base_url()),
    )
    .unwrap();
    let command = format!(
        "'{}' --config '{}' 2>'{}'",
        env!("CARGO_BIN_EXE_sluice"),
        path.display(),
        dir.path().join("stderr.txt").display()
    );
    let tmux = Tmux::start(dir.path().join("tmux.sock"), &command);
    let admin = format!("http://127.0.0.1:{admin_port}");

    eventually("the admin API", &tmux, || async {
        key_a(&admin).await.is_some()
    })
    .await;
    eventually("the console", &tmux, || {
        let s = tmux.screen();
        async move { s.contains("Cooldowns") && s.contains("key-a") }
    })
    .await;

    let r = client::post_json(
        &format!("http://127.0.0.1:{listen}/v1/chat/completions"),
        &json!({"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}),
        &[("authorization", "Bearer sk-test")],
    )
    .await;
    assert_eq!(r.status, 503, "{}", r.text());
    let row = key_a(&admin).await.expect("cooldowns row");
    assert_eq!(row["status"], "cooling", "{row:#}");
    eventually("the cooling row on screen", &tmux, || {
        let s = tmux.screen();
        async move { s.contains("cooling") }
    })
    .await;

    tmux.keys(&["2"]);
    eventually("Cooldowns focused", &tmux, || {
        let s = tmux.screen();
        async move { s.contains("space mark") }
    })
    .await;
    tmux.keys(&["c"]);
    eventually("key-a active through the admin API", &tmux, || async {
        key_a(&admin)
            .await
            .is_some_and(|row| row["status"] == "active")
    })
    .await;
    eventually("\"cleared 1\" in the status bar", &tmux, || {
        let s = tmux.screen();
        async move { s.contains("cleared 1") }
    })
    .await;
    let screen = tmux.screen();
    let status_bar = screen
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        status_bar.contains("cleared 1"),
        "status bar: {status_bar}\n{screen}"
    );
    tmux.keys(&["q"]);
}
