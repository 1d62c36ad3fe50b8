//! `sluice console` attached to a running sluice, and the snapshot stream it reads.
//!
//! In-process: `GET /api/snapshot/stream` needs the admin token, serves several subscribers
//! at once, and each event is the snapshot JSON.
//!
//! End to end (tmux, like `console_e2e`): a headless `sluice --no-console` with an admin
//! token; a mock upstream answering 503 cools its only connection; two `sluice console`s
//! attach (one reading the token through the config, one through `--admin`/`--token-env`),
//! both show the cooldown, `c` in one clears it (the admin API confirms, the other console
//! follows); then the server is killed (both show "reconnecting"), restarted `--readonly`
//! (both resume and show a new cooldown), and `c` is refused with the reason in the status
//! bar while the admin API still says cooling.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::client;
use crate::support::tmux::{Panes, tmux_or_skip, two_free_ports};
use crate::support::{MockUpstream, Reply, Sluice};

/// The longest any one wait may take (a reconnect waits at most 5 s between attempts).
const WAIT: Duration = Duration::from_secs(20);
const TOKEN: &str = "attach-test-token";
const BEARER: &str = "Bearer attach-test-token";

/// Polls `check` every 50 ms until it holds or [`WAIT`] passed; panics with `why()` then.
async fn eventually<F, Fut>(what: &str, why: impl Fn() -> String, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::sleep(WAIT);
    tokio::pin!(deadline);
    loop {
        if check().await {
            return;
        }
        tokio::select! {
            () = &mut deadline => panic!("timed out waiting for {what}\n{}", why()),
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
    }
}

/// The snapshot events in `text` (an SSE stream read so far), parsed.
fn snapshots_in(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter(|e| e.starts_with("event: snapshot\n"))
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect()
}

#[tokio::test]
async fn the_snapshot_stream_needs_the_token_and_serves_several_subscribers() {
    let mock = MockUpstream::start().await;
    mock.on("*").reply(Reply::openai_error(
        503,
        "server_error",
        "overloaded",
        "busy",
    ));
    let config = format!(
        "[admin]\ntoken_env = \"ADMIN_TOK\"\n[[providers]]\nid = \"up\"\ndialect = \"openai\"\nbase_url = \"{}\"\n  [[providers.connections]]\n  id = \"key-a\"\n  auth = \"passthrough\"\n",
        mock.base_url()
    );
    let s = Sluice::start(&config, &[("ADMIN_TOK", TOKEN)]).await;
    let url = s.admin("/api/snapshot/stream");

    let r = client::get(&url, &[]).await;
    assert_eq!(r.status, 401, "{}", r.text());
    let r = client::post_raw(&url, "", &[("authorization", BEARER)]).await;
    assert_eq!(r.status, 405, "{}", r.text());

    let open = || {
        client::open(client::request(
            http::Method::GET,
            &url,
            &[("authorization", BEARER)],
            client::full(bytes::Bytes::new()),
        ))
    };
    let mut a = open().await;
    let mut b = open().await;
    for stream in [&a, &b] {
        assert_eq!(stream.status, 200);
        assert_eq!(stream.headers["content-type"], "text/event-stream");
    }
    for stream in [&mut a, &mut b] {
        stream
            .read_until(WAIT, |got| {
                !snapshots_in(&String::from_utf8_lossy(got)).is_empty()
            })
            .await;
        let first = &snapshots_in(&stream.text())[0];
        assert_eq!(first["providers"][0]["id"], "up");
        assert_eq!(
            first["admin_listen"],
            s.admin_url().trim_start_matches("http://")
        );
    }

    let r = client::post_json(
        &s.url("/v1/chat/completions"),
        &json!({"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}),
        &[("authorization", "Bearer sk-test")],
    )
    .await;
    assert_eq!(r.status, 503, "{}", r.text());
    // Both subscribers get the change: the connection cooling and the request in `recent`.
    for stream in [&mut a, &mut b] {
        stream
            .read_until(WAIT, |got| {
                snapshots_in(&String::from_utf8_lossy(got))
                    .iter()
                    .any(|snap| {
                        snap["providers"][0]["connections"][0]["status"] == "cooling"
                            && snap["recent"][0]["status"] == 503
                    })
            })
            .await;
        let snaps = snapshots_in(&stream.text());
        let last = snaps.last().unwrap();
        assert_eq!(last["providers"][0]["connections"][0]["status"], "cooling");
        // The typed snapshot parses every event (what `sluice console` does).
        let typed: sluice::snapshot::Snapshot = serde_json::from_value(last.clone()).unwrap();
        assert_eq!(typed.recent[0].status, 503);
    }
    s.stop().await;
}

#[tokio::test]
async fn the_endpoints_an_attached_console_uses_and_readonly() {
    let s = Sluice::start(
        "[[providers]]\nid = \"up\"\ndialect = \"openai\"\nbase_url = \"{CLOSED}\"\n  [[providers.connections]]\n  id = \"key-a\"\n  auth = \"passthrough\"\n",
        &[],
    )
    .await;
    let url = s.admin("/api/resilience");
    let put = |body: Value| {
        let url = url.clone();
        async move {
            client::send(client::request(
                http::Method::PUT,
                &url,
                &[("content-type", "application/json")],
                client::full(serde_json::to_vec(&body).unwrap()),
            ))
            .await
        }
    };
    // PUT replaces the overrides with exactly its body (what reverting one field sends).
    let r = client::send(client::request(
        http::Method::PATCH,
        &url,
        &[],
        client::full(r#"{"stream_stall_cooldown":true,"queue":{"max_wait":"7s"}}"#),
    ))
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = put(json!({"queue": {"max_wait": "7s"}})).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["overrides"], json!({"queue": {"max_wait": "7s"}}));
    let r = put(json!({"queue": {"max_wait": "soon"}})).await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["field"], "queue.max_wait");
    let got = client::get(&url, &[]).await.json();
    assert_eq!(
        got["overrides"],
        json!({"queue": {"max_wait": "7s"}}),
        "unchanged"
    );
    assert!(
        got["file"]["queue"].is_object(),
        "GET names the file's settings too: {got}"
    );

    // Read-only: every change is refused, reads still work.
    s.control().set_readonly(true);
    let r = client::post_json(
        &s.admin("/api/resilience/cooldowns"),
        &json!({"all": true}),
        &[],
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("read-only"), "{}", r.text());
    assert_eq!(put(json!({})).await.status, 403);
    assert_eq!(client::get(&url, &[]).await.status, 200);
    assert_eq!(
        client::get(&s.admin("/api/snapshot"), &[]).await.status,
        200
    );
    s.stop().await;
}

/// Both consoles' screens, for failure messages.
fn screens(panes: &Panes) -> String {
    format!(
        "--- console a ---\n{}\n--- console b ---\n{}",
        panes.screen("a"),
        panes.screen("b")
    )
}

/// A headless `sluice --no-console` child process; killed on drop.
struct Server {
    child: Child,
}

impl Server {
    fn start(config: &Path, stderr: &Path, readonly: bool) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.arg("--no-console").arg("--config").arg(config);
        if readonly {
            cmd.arg("--readonly");
        }
        let child = cmd
            .env("SLUICE_ATTACH_TOKEN", TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(stderr).unwrap())
            .spawn()
            .expect("spawn sluice");
        Server { child }
    }

    fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &Path, listen: u16, admin: u16, upstream: &str) -> String {
    crate::console_e2e::config(dir, listen, admin, upstream, Some("SLUICE_ATTACH_TOKEN"))
}

/// The `key-a` row of the cooldowns listing (with the token).
async fn key_a(admin: &str) -> Option<Value> {
    crate::console_e2e::key_a(admin, &[("authorization", BEARER)]).await
}

/// One request through sluice; the mock answers 503, so `key-a` cools.
async fn cool(listen: u16) {
    let r = client::post_json(
        &format!("http://127.0.0.1:{listen}/v1/chat/completions"),
        &json!({"model": "gpt-x", "messages": [{"role": "user", "content": "hi"}]}),
        &[("authorization", "Bearer sk-test")],
    )
    .await;
    assert_eq!(r.status, 503, "{}", r.text());
}

/// The last non-empty line of a screen (the status bar).
fn status_bar(screen: &str) -> String {
    screen
        .lines()
        .rfind(|l| !l.trim().is_empty())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attached_consoles_clear_a_cooldown_and_ride_out_a_restart() {
    if !tmux_or_skip("console_attach") {
        return;
    }
    let mock = crate::console_e2e::overloaded_upstream().await;
    let dir = tempfile::tempdir().unwrap();
    let (listen, admin_port) = two_free_ports();
    let path = dir.path().join("config.toml");
    std::fs::write(
        &path,
        config(dir.path(), listen, admin_port, &mock.base_url()),
    )
    .unwrap();
    let admin = format!("http://127.0.0.1:{admin_port}");
    let server = Server::start(&path, &dir.path().join("server1.txt"), false);
    let no_screens = || String::new();
    eventually("the admin API", no_screens, || async {
        key_a(&admin).await.is_some()
    })
    .await;

    let bin = env!("CARGO_BIN_EXE_sluice");
    let panes = Panes {
        socket: dir.path().join("tmux.sock"),
    };
    // Console a: address and token variable from the config.
    panes.start(
        "a",
        &format!(
            "SLUICE_ATTACH_TOKEN={TOKEN} '{bin}' console --config '{}' 2>'{}'",
            path.display(),
            dir.path().join("a.txt").display()
        ),
    );
    // Console b: both given on the command line.
    panes.start(
        "b",
        &format!(
            "OTHER_TOKEN_VAR={TOKEN} '{bin}' console --config '{}' --admin {admin} --token-env OTHER_TOKEN_VAR 2>'{}'",
            path.display(),
            dir.path().join("b.txt").display()
        ),
    );
    let screens = || screens(&panes);
    let on_both = |needle: &'static str| {
        let (a, b) = (panes.screen("a"), panes.screen("b"));
        async move { a.contains(needle) && b.contains(needle) }
    };
    eventually("both consoles", screens, || on_both("key-a")).await;

    cool(listen).await;
    eventually("the cooling row on both screens", screens, || {
        on_both("cooling")
    })
    .await;

    panes.keys("a", &["2"]);
    eventually("Cooldowns focused in a", screens, || {
        let s = panes.screen("a");
        async move { s.contains("space mark") }
    })
    .await;
    panes.keys("a", &["c"]);
    eventually("key-a active through the admin API", screens, || async {
        key_a(&admin)
            .await
            .is_some_and(|row| row["status"] == "active")
    })
    .await;
    eventually("\"cleared 1\" in a's status bar", screens, || {
        let s = status_bar(&panes.screen("a"));
        async move { s.contains("cleared 1") }
    })
    .await;
    eventually("console b follows the clear", screens, || {
        let s = panes.screen("b");
        async move { !s.contains("cooling") }
    })
    .await;

    server.kill();
    eventually("\"reconnecting\" on both screens", screens, || {
        on_both("reconnecting")
    })
    .await;

    let server = Server::start(&path, &dir.path().join("server2.txt"), true);
    eventually("the restarted admin API", screens, || async {
        key_a(&admin).await.is_some()
    })
    .await;
    eventually("both consoles resumed", screens, || {
        let (a, b) = (panes.screen("a"), panes.screen("b"));
        async move { !a.contains("reconnecting") && !b.contains("reconnecting") }
    })
    .await;
    cool(listen).await;
    eventually("the new cooldown on both screens", screens, || {
        on_both("cooling")
    })
    .await;

    // Started --readonly: the admin API refuses the clear, and the console says why.
    let r = client::post_json(
        &format!("{admin}/api/resilience/cooldowns"),
        &json!({"all": true}),
        &[("authorization", BEARER)],
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    panes.keys("a", &["c"]);
    eventually("the refusal in a's status bar", screens, || {
        let s = status_bar(&panes.screen("a"));
        async move { s.contains("read-only") }
    })
    .await;
    let row = key_a(&admin).await.expect("cooldowns row");
    assert_eq!(row["status"], "cooling", "{row:#}");

    panes.keys("a", &["q"]);
    panes.keys("b", &["q"]);
    drop(server);
}

#[test]
fn sluice_console_names_a_missing_token_variable_and_needs_a_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let (listen, admin_port) = two_free_ports();
    std::fs::write(
        &path,
        config(dir.path(), listen, admin_port, "http://127.0.0.1:9"),
    )
    .unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("console")
            .arg("--config")
            .arg(&path)
            .args(args)
            .env_remove("SLUICE_ATTACH_TOKEN")
            .env_remove("NOT_SET_ANYWHERE")
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("admin.token_env") && err.contains("SLUICE_ATTACH_TOKEN"),
        "{err}"
    );
    let out = run(&["--token-env", "NOT_SET_ANYWHERE"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("--token-env") && err.contains("NOT_SET_ANYWHERE"),
        "{err}"
    );
    assert!(!err.contains(TOKEN));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .arg("console")
        .arg("--config")
        .arg(&path)
        .env("SLUICE_ATTACH_TOKEN", TOKEN)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("needs a terminal") && err.contains("sluice status"),
        "{err}"
    );
    assert!(!err.contains(TOKEN), "the token is never printed: {err}");
}
