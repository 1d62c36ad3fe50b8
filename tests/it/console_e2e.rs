//! End-to-end console test: the real `sluice` binary with its console in a tmux pane.
//!
//! A mock upstream answers 503, so one request cools the only connection (`api_key` profile,
//! 60 s base cooldown). The test focuses Cooldowns (`2`), presses `c`, and checks through the
//! admin API that the connection is `active` again and on screen that the status bar says
//! `cleared 1`. Without `tmux` it is skipped (with a message) locally, and fails under
//! `CI=true` (`.ci/run` installs tmux, so there it must run). The tmux server runs on
//! a private socket in the temp dir and is killed by a guard, also when an assertion fails.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::client;
use crate::support::tmux::{Panes, tmux_or_skip, two_free_ports};
use crate::support::{MockUpstream, Reply};

/// The longest any one wait in this test may take.
const WAIT: Duration = Duration::from_secs(5);

/// One provider `up` (openai, at `upstream`) with one passthrough connection `key-a` that a
/// 503 cools for 60 s; `[admin] token_env` set when `token_env` is given. Shared with the
/// attach test.
pub(crate) fn config(
    dir: &Path,
    listen: u16,
    admin: u16,
    upstream: &str,
    token_env: Option<&str>,
) -> String {
    let token = token_env.map_or(String::new(), |v| format!("token_env = \"{v}\"\n"));
    format!(
        r#"
[server]
listen = "127.0.0.1:{listen}"

[admin]
listen = "127.0.0.1:{admin}"
{token}
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

/// The `key-a` row of `GET /api/resilience/cooldowns` (sent with `auth` headers), or `None`
/// while the admin API is down. Shared with the attach test.
pub(crate) async fn key_a(admin: &str, auth: &[(&str, &str)]) -> Option<Value> {
    // The support client panics on a refused connection; probe the port first.
    let addr = admin.trim_start_matches("http://");
    tokio::net::TcpStream::connect(addr).await.ok()?;
    let url = format!("{admin}/api/resilience/cooldowns");
    let r = tokio::time::timeout(Duration::from_secs(1), client::get(&url, auth))
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
async fn eventually<F, Fut>(what: &str, tmux: &Panes, mut check: F)
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
    panic!(
        "timed out waiting for {what}; screen:\n{}",
        tmux.screen("console")
    );
}

/// A mock upstream that answers everything 503 (so one request cools `key-a`). Shared with
/// the attach test.
pub(crate) async fn overloaded_upstream() -> MockUpstream {
    let mock = MockUpstream::start().await;
    mock.on("*").reply(Reply::openai_error(
        503,
        "server_error",
        "overloaded",
        "upstream overloaded",
    ));
    mock
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clear_key_in_the_console_clears_a_cooled_connection() {
    if !tmux_or_skip("console_e2e") {
        return;
    }
    let mock = overloaded_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let (listen, admin_port) = two_free_ports();
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        config(dir.path(), listen, admin_port, &mock.base_url(), None),
    )
    .unwrap();
    let command = format!(
        "'{}' --config '{}' 2>'{}'",
        env!("CARGO_BIN_EXE_sluice"),
        path.display(),
        dir.path().join("stderr.txt").display()
    );
    let tmux = Panes {
        socket: dir.path().join("tmux.sock"),
    };
    tmux.start("console", &command);
    let admin = format!("http://127.0.0.1:{admin_port}");

    eventually("the admin API", &tmux, || async {
        key_a(&admin, &[]).await.is_some()
    })
    .await;
    eventually("the console", &tmux, || {
        let s = tmux.screen("console");
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
    let row = key_a(&admin, &[]).await.expect("cooldowns row");
    assert_eq!(row["status"], "cooling", "{row:#}");
    eventually("the cooling row on screen", &tmux, || {
        let s = tmux.screen("console");
        async move { s.contains("cooling") }
    })
    .await;

    tmux.keys("console", &["2"]);
    eventually("Cooldowns focused", &tmux, || {
        let s = tmux.screen("console");
        async move { s.contains("space mark") }
    })
    .await;
    tmux.keys("console", &["c"]);
    eventually("key-a active through the admin API", &tmux, || async {
        key_a(&admin, &[])
            .await
            .is_some_and(|row| row["status"] == "active")
    })
    .await;
    eventually("\"cleared 1\" in the status bar", &tmux, || {
        let s = tmux.screen("console");
        async move { s.contains("cleared 1") }
    })
    .await;
    let screen = tmux.screen("console");
    let status_bar = screen
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default();
    assert!(
        status_bar.contains("cleared 1"),
        "status bar: {status_bar}\n{screen}"
    );
    tmux.keys("console", &["q"]);
}
