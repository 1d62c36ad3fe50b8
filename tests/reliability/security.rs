//! Security: admin token on every admin route, no admin route on the inference port, refusal
//! of exposed listeners without credentials, secrets never leaking, and the connection limit.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::outcome::Route;
use crate::proc::{Home, Proc};
use crate::support::tmux::{Panes, tmux_or_skip};
use crate::support::{MockUpstream, Reply, client};

/// Every admin route but `/livez`/`/readyz`/`/healthz`, with a harmless body.
const ADMIN_ROUTES: &[(&str, &str, &str)] = &[
    ("GET", "/api/snapshot", ""),
    ("HEAD", "/api/snapshot", ""),
    ("GET", "/metrics", ""),
    ("GET", "/api/queues", ""),
    ("GET", "/api/monitoring/health", ""),
    ("POST", "/api/resilience/reset", "{}"),
    ("GET", "/api/resilience/cooldowns", ""),
    ("POST", "/api/resilience/cooldowns", "{}"),
    ("POST", "/api/resilience/terminal-reset", "{}"),
    ("GET", "/api/resilience/model-cooldowns", ""),
    ("DELETE", "/api/resilience/model-cooldowns", ""),
    ("GET", "/api/resilience", ""),
    ("PATCH", "/api/resilience", "{}"),
    ("DELETE", "/api/resilience", ""),
    ("GET", "/api/nope", ""),
];

const CONN_KEY: &str = "sk-canary-CONNKEY-5f1e0c9a7b";
const CLIENT_KEY: &str = "sk-canary-CLIENTKEY-93d2aa41";
const ADMIN_TOKEN: &str = "canary-ADMINTOKEN-c07e11ab";

fn config(mock: &MockUpstream, closed: &str) -> String {
    format!(
        r#"
[server]
client_keys_env = "SLUICE_CLIENT_KEYS"
[admin]
token_env = "SLUICE_ADMIN_TOKEN"
[log]
level = "debug"
[resilience.combo_cooldown_wait]
enabled = false
[[providers]]
id = "a"
dialect = "anthropic"
base_url = "{url}"
  [[providers.connections]]
  id = "a1"
  auth = {{ env = "CANARY_CONN_KEY" }}
[[providers]]
id = "o"
dialect = "openai"
base_url = "{url}"
  [[providers.connections]]
  id = "o1"
  auth = {{ env = "CANARY_CONN_KEY" }}
[[providers]]
id = "dead"
dialect = "anthropic"
base_url = "{closed}"
  [[providers.connections]]
  id = "d1"
  auth = {{ env = "CANARY_CONN_KEY" }}
[[combos]]
name = "via-dead"
targets = ["dead/m", "a/m"]
"#,
        url = mock.base_url()
    )
}

const ENV: &[(&str, &str)] = &[
    ("CANARY_CONN_KEY", CONN_KEY),
    ("SLUICE_CLIENT_KEYS", CLIENT_KEY),
    ("SLUICE_ADMIN_TOKEN", ADMIN_TOKEN),
];

async fn call(url: &str, method: &str, body: &str, headers: &[(&str, &str)]) -> client::Resp {
    let method = http::Method::from_bytes(method.as_bytes()).unwrap();
    client::send(client::request(
        method,
        url,
        headers,
        client::full(body.to_string()),
    ))
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_need_the_token_and_the_inference_port_serves_none() {
    let mock = MockUpstream::start().await;
    let home = Home::new(&config(&mock, &crate::support::harness::closed_port_url()));
    let mut p = Proc::start(&home, ENV);
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    let wrong = [
        vec![],
        vec![("authorization", "Bearer nope")],
        vec![("authorization", "Bearer ")],
        vec![("authorization", ADMIN_TOKEN)],
        vec![("authorization", "Basic Y2FuYXJ5")],
    ];
    let prefix = format!("Bearer {}", &ADMIN_TOKEN[..ADMIN_TOKEN.len() - 1]);
    let suffix = format!("Bearer {ADMIN_TOKEN}x");
    let lower = format!("bearer {}", ADMIN_TOKEN.to_uppercase());
    let mut checks = 0;
    for (method, path, body) in ADMIN_ROUTES {
        let url = p.admin_url(path);
        for h in wrong.iter().cloned().chain([
            vec![("authorization", prefix.as_str())],
            vec![("authorization", suffix.as_str())],
            vec![("authorization", lower.as_str())],
            vec![("x-api-key", ADMIN_TOKEN)],
        ]) {
            let r = call(&url, method, body, &h).await;
            assert_eq!(r.status, 401, "{method} {path} with {h:?}: {}", r.text());
            checks += 1;
        }
        let r = call(&url, method, body, &[("authorization", &bearer)]).await;
        assert_ne!(r.status, 401, "{method} {path} with the right token");
        checks += 1;
        // The inference port serves no admin route, with or without the token.
        for h in [
            vec![],
            vec![("authorization", bearer.as_str())],
            vec![("x-api-key", CLIENT_KEY)],
        ] {
            let r = call(&p.url(path), method, body, &h).await;
            assert!(
                r.status.is_client_error()
                    && !r.text().contains("\"totals\"")
                    && !r.text().contains("sluice_requests"),
                "inference port answered admin route {method} {path}: {} {}",
                r.status,
                r.text()
            );
            checks += 1;
        }
    }
    for path in ["/livez", "/readyz"] {
        assert_eq!(
            client::get(&p.admin_url(path), &[]).await.status,
            200,
            "{path} needs no token"
        );
    }
    p.assert_healthy();
    println!("security: {checks} admin-token and inference-port checks");
}

#[test]
fn exposed_listeners_without_credentials_are_refused() {
    let base = "[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"a1\"\n  auth = \"passthrough\"\n";
    let cases = [
        (
            "[admin]\nlisten = \"0.0.0.0:0\"\n",
            &[][..],
            Some("admin.token_env"),
        ),
        (
            "[server]\nlisten = \"0.0.0.0:0\"\n",
            &[][..],
            Some("server.client_keys_env"),
        ),
        (
            "[server]\nlisten = \"[::]:0\"\n",
            &[][..],
            Some("server.client_keys_env"),
        ),
        (
            "[server]\nlisten = \"0.0.0.0:0\"\nclient_keys_env = \"K\"\n[admin]\nlisten = \"0.0.0.0:0\"\ntoken_env = \"T\"\n",
            &[("K", "k1"), ("T", "t")][..],
            None,
        ),
    ];
    for (text, env, refused) in cases {
        let home = Home::new(&format!("{text}{base}"));
        let (status, err) = home.run_once(&["check"], env);
        match refused {
            Some(key) => {
                assert!(!status.success(), "{text} was accepted");
                assert!(
                    err.contains(key) && err.contains("loopback"),
                    "{text}: {err}"
                );
                assert!(!err.contains("panicked"), "{err}");
            }
            None => assert!(status.success(), "{text} was refused: {err}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_appear_in_logs_database_snapshot_metrics_or_errors() {
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("e401")
        .reply(Reply::anthropic_error(
            401,
            "authentication_error",
            "invalid x-api-key",
        ));
    mock.on("/v1/messages")
        .model("e500")
        .reply(Reply::anthropic_error(500, "api_error", "boom"));
    mock.on("/v1/messages")
        .model("e429")
        .reply(Reply::anthropic_error(429, "rate_limit_error", "slow").header("retry-after", "30"));
    mock.on("/v1/chat/completions")
        .model("e403")
        .reply(Reply::openai_error(
            403,
            "permission_error",
            "forbidden",
            "no",
        ));
    mock.on("/v1/messages")
        .model("drop")
        .reply(Reply::drop_connection());
    let home = Home::new(&config(&mock, &crate::support::harness::closed_port_url()));
    let p = Proc::start(&home, ENV);
    let mut seen = String::new();
    let auth = [("x-api-key", CLIENT_KEY)];
    for (route, model, stream) in [
        (Route::Messages, "m", false),
        (Route::Messages, "m", true),
        (Route::Chat, "m", false),
        (Route::Chat, "m", true),
        (Route::Responses, "m", false),
        (Route::Messages, "e401", false),
        (Route::Messages, "e500", false),
        (Route::Messages, "e429", false),
        (Route::Chat, "e403", false),
        (Route::Messages, "drop", false),
        (Route::Messages, "via-dead", false),
    ] {
        let mut h = route.headers();
        h.extend(auth);
        let r = client::post_json(&p.url(route.path()), &route.body(model, stream), &h).await;
        seen.push_str(&format!("{:?}{}", r.headers, r.text()));
    }
    // A wrong client key and a wrong admin token: their errors must not echo the real ones.
    let r = client::post_json(
        &p.url("/v1/messages"),
        &Route::Messages.body("m", false),
        &[("x-api-key", "sk-wrong")],
    )
    .await;
    assert_eq!(r.status, 401);
    seen.push_str(&r.text());
    let bearer = format!("Bearer {ADMIN_TOKEN}");
    for path in [
        "/api/snapshot",
        "/metrics",
        "/api/queues",
        "/api/resilience",
        "/api/resilience/cooldowns",
        "/api/resilience/model-cooldowns",
        "/api/monitoring/health",
    ] {
        let r = client::get(&p.admin_url(path), &[("authorization", &bearer)]).await;
        assert_eq!(r.status, 200, "{path}");
        seen.push_str(&r.text());
    }
    let console = console_screens(&home, &p).await;
    // The mock did get the connection key (so the scan below could have found it).
    assert!(
        mock.requests()
            .iter()
            .any(|r| format!("{:?}", r.headers).contains(CONN_KEY)),
        "the connection key never reached the upstream"
    );
    let stderr = p.stop();
    let db = dump_database(&home.db());
    let mut raw_files = Vec::new();
    for sfx in ["", "-wal", "-shm"] {
        let mut path = home.db().into_os_string();
        path.push(sfx);
        if let Ok(b) = std::fs::read(&path) {
            raw_files.extend(b);
        }
    }
    let places = [
        ("client responses and admin API bodies", seen),
        (
            "console screens (attached, every panel, request details)",
            console,
        ),
        ("stderr", stderr),
        ("log files", home.log_text()),
        ("database tables", db),
        (
            "database files (raw bytes)",
            String::from_utf8_lossy(&raw_files).into_owned(),
        ),
    ];
    for (what, text) in &places {
        assert!(!text.is_empty(), "{what} is empty: the scan proves nothing");
        for secret in [
            CONN_KEY,
            CLIENT_KEY,
            ADMIN_TOKEN,
            "CONNKEY",
            "CLIENTKEY",
            "ADMINTOKEN",
        ] {
            assert!(!text.contains(secret), "{secret} appears in {what}");
        }
    }
    println!(
        "security: 3 secrets x {} places scanned ({} bytes), 0 found",
        places.len(),
        places.iter().map(|(_, t)| t.len()).sum::<usize>()
    );
}

/// What an operator sees: `sluice console` attached to `p` in tmux (token from the env var
/// the config names), every panel focused in turn, the newest request's details and the help
/// overlay, all screens concatenated. Empty when tmux is missing and the run is not CI (the
/// scan then fails on the empty place, so CI never passes it silently).
async fn console_screens(home: &Home, p: &Proc) -> String {
    if !tmux_or_skip("security console captures") {
        return "tmux missing: skipped locally".into();
    }
    let dir = tempfile::tempdir().unwrap();
    let panes = Panes {
        socket: dir.path().join("tmux.sock"),
    };
    panes.start(
        "c",
        &format!(
            "env SLUICE_ADMIN_TOKEN='{ADMIN_TOKEN}' '{}' console --config '{}' --admin '{}'",
            env!("CARGO_BIN_EXE_sluice"),
            home.config().display(),
            p.admin_url("")
        ),
    );
    let mut screens = String::new();
    let drawn = tokio::time::timeout(Duration::from_secs(20), async {
        while !panes.screen("c").contains("Providers") {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        drawn.is_ok(),
        "the attached console never drew:\n{}",
        panes.screen("c")
    );
    for keys in [
        &["1"][..],
        &["2"],
        &["3"],
        &["4"],
        &["5"],
        &["6"],
        &["5", "Enter"],
        &["Escape", "?"],
    ] {
        panes.keys("c", keys);
        tokio::time::sleep(Duration::from_millis(300)).await;
        screens.push_str(&panes.screen("c"));
    }
    panes.keys("c", &["Escape", "q"]);
    for shown in ["a1", "o1", "Request details", "Help"] {
        assert!(
            screens.contains(shown),
            "the captures miss {shown:?}, so they prove little:\n{screens}"
        );
    }
    screens
}

/// Every row of every table, as text.
pub fn dump_database(path: &std::path::Path) -> String {
    let conn = rusqlite::Connection::open(path).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut out = String::new();
    for t in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{t}\"")).unwrap();
        let n = stmt.column_count();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            out.push_str(&t);
            for i in 0..n {
                let v: rusqlite::types::Value = row.get(i).unwrap();
                out.push_str(&format!(" {v:?}"));
            }
            out.push('\n');
        }
    }
    out
}

/// `[server] max_connections = 4`: a fifth connection is not served until one of four closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_connections_holds_extra_clients_until_one_closes() {
    let mock = MockUpstream::start().await;
    let text =
        crate::hostile::config(&mock).replace("[server]\n", "[server]\nmax_connections = 4\n");
    let home = Home::new(&text);
    let mut p = Proc::start(&home, &[]);
    let body = Route::Messages.body("m", false).to_string();
    let request = format!(
        "POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    // Four keep-alive connections, each served once and left open.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut s = tokio::net::TcpStream::connect(p.listen).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(
            buf[..n].starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        );
        held.push(s);
    }
    let mut fifth = tokio::net::TcpStream::connect(p.listen).await.unwrap();
    fifth.write_all(request.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 4096];
    let early = tokio::time::timeout(Duration::from_millis(500), fifth.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "the fifth connection was served while four were open"
    );
    drop(held.pop());
    let n = tokio::time::timeout(Duration::from_secs(10), fifth.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&buf[..n])
    );
    p.assert_healthy();
}
