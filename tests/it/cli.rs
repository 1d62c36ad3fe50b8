//! The `sluice` binary's subcommands that never send a request upstream: `check`, `status`
//! and `env` work without the `auth = { env }` secrets exported.

use std::path::PathBuf;
use std::process::{Command, Output};

fn full_fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/config/valid/full.toml")
}

/// Runs the binary with none of the fixture's secret variables set.
fn sluice(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(args)
        .env_remove("SLUICE_CLIENT_KEYS")
        .env_remove("SLUICE_ADMIN_TOKEN")
        .env_remove("OPENROUTER_API_KEY")
        .env_remove("SLUICE_CONFIG")
        .output()
        .expect("run sluice")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn check_warns_about_missing_secrets_and_succeeds() {
    let cfg = full_fixture();
    let out = sluice(&["check", "-c", cfg.to_str().unwrap()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("(valid)"), "{stdout}");
    assert!(
        stderr.contains("warning: providers.openrouter.connections.key-a.auth.env: environment variable 'OPENROUTER_API_KEY' is not set"),
        "{stderr}"
    );
}

#[test]
fn check_names_the_file_and_key_of_a_bad_breaker_trip_status() {
    for (file, want) in [
        (
            "breaker-bad-trip-status.toml",
            "resilience.breaker.api_key.trip_statuses: '600' is not an HTTP status",
        ),
        (
            "provider-breaker-bad-trip-status.toml",
            "providers.anthropic.breaker.trip_statuses: '99' is not an HTTP status",
        ),
    ] {
        let cfg = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/config/invalid")
            .join(file);
        let out = sluice(&["check", "-c", cfg.to_str().unwrap()]);
        let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
        assert!(!out.status.success(), "{file}: stdout:\n{stdout}");
        assert!(stderr.contains(file), "{file}: names the file:\n{stderr}");
        assert!(stderr.contains(want), "{file}: names the key:\n{stderr}");
        assert!(
            stderr.contains("list statuses from 100 to 599"),
            "{file}: says the fix:\n{stderr}"
        );
    }
}

#[test]
fn status_without_the_admin_token_names_it() {
    let cfg = full_fixture();
    let out = sluice(&["status", "-c", cfg.to_str().unwrap()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("admin.token_env: environment variable 'SLUICE_ADMIN_TOKEN' is not set"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("OPENROUTER_API_KEY"),
        "only the admin token matters: {stderr}"
    );
}

#[test]
fn env_prints_exports_without_secrets() {
    let cfg = full_fixture();
    let out = sluice(&["env", "claude", "-c", cfg.to_str().unwrap()]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        stdout.contains("export ANTHROPIC_BASE_URL=http://127.0.0.1:8787\n"),
        "{stdout}"
    );
}

#[test]
fn readme_shows_how_to_get_the_binary_and_uses_it_with_default_ports() {
    let readme =
        std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md"))
            .unwrap();
    for want in [
        "cargo install --path .",
        "target/release/sluice",
        "cargo run --release -- --config config.toml",
        "sluice check",
        "sluice status",
        "sluice env claude",
        "listen 127.0.0.1:8787  admin 127.0.0.1:8788",
    ] {
        assert!(readme.contains(want), "README.md lacks {want:?}");
    }
    // The sample `sluice env` output is what the binary prints for the shipped config.
    let cfg = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["env", "claude", "-c", cfg.to_str().unwrap()])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let printed = text(&out.stdout);
    let export = printed
        .lines()
        .find(|l| l.starts_with("export "))
        .expect("an export line");
    assert!(readme.contains(export), "README.md lacks {export:?}");
}

#[test]
fn an_unknown_theme_flag_is_an_error_even_headless() {
    // `--theme` used to be ignored with `--no-console`: the proxy started with a typo unseen.
    let cfg = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("config.toml");
    let out = sluice(&[
        "--config",
        cfg.to_str().unwrap(),
        "--theme",
        "no-such-theme",
        "--no-console",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--theme") && stderr.contains("no-such-theme"),
        "{stderr}"
    );
}

/// Lines of a child's stderr, read on a thread (so a test can wait with a deadline).
fn stderr_lines(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead as _;
    let (tx, rx) = std::sync::mpsc::channel();
    let err = child.stderr.take().expect("piped stderr");
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits up to 20 s for a stderr line containing `needle`; returns every line read.
fn wait_line(rx: &std::sync::mpsc::Receiver<String>, needle: &str, seen: &mut Vec<String>) {
    let deadline = std::time::Duration::from_secs(20);
    loop {
        match rx.recv_timeout(deadline) {
            Ok(l) => {
                let hit = l.contains(needle);
                seen.push(l);
                if hit {
                    return;
                }
            }
            Err(_) => panic!("no stderr line with {needle:?}; got:\n{}", seen.join("\n")),
        }
    }
}

#[cfg(unix)]
#[test]
fn serve_runs_headless_and_sighup_reloads_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let base = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"127.0.0.1:0\"\n[store]\npath = \"{}\"\n[log]\ndir = \"{}\"\n\n[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n",
        dir.path().join("s.db").display(),
        dir.path().join("logs").display()
    );
    std::fs::write(&path, &base).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "-c", path.to_str().unwrap()])
        .env_remove("SLUICE_CONFIG")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stderr_lines(&mut child);
    let mut seen = Vec::new();
    wait_line(&rx, "listening on http://", &mut seen);
    std::fs::write(
        &path,
        format!("{base}\n[[combos]]\nname = \"m\"\ntargets = [\"p/claude-x\"]\n"),
    )
    .unwrap();
    let pid = child.id().to_string();
    let hup = Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    assert!(hup.success());
    wait_line(&rx, "config reloaded", &mut seen);
    assert!(
        seen.last().is_some_and(|l| l.contains("combos")),
        "the log line says what changed: {seen:?}"
    );
    // A bad file: logged, and sluice keeps running.
    std::fs::write(&path, format!("{base}\n[server]\nbogus = 1\n")).unwrap();
    Command::new("kill").args(["-HUP", &pid]).status().unwrap();
    wait_line(&rx, "config reload refused", &mut seen);
    assert!(
        child.try_wait().unwrap().is_none(),
        "still running: {seen:?}"
    );
    Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}; {seen:?}");
}

#[test]
fn log_prints_the_request_log_filtered_as_text_or_json() {
    use sluice::clock::Clock as _;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.db");
    let store_cfg = sluice::config::StoreConfig {
        path: db.clone(),
        request_log_max_rows: 100,
        request_log_max_age: std::time::Duration::from_secs(30 * 86_400),
    };
    let store = sluice::store::Store::open(&store_cfg).unwrap();
    let now = sluice::clock::unix_ms(sluice::clock::SystemClock.wall());
    // Two hours ago (outside --since 1h), then two recent rows: one 429, one 200.
    for (ago_ms, status, model) in [
        (7_200_000, 429, "old"),
        (60_000, 429, "slow"),
        (1_000, 200, "fast"),
    ] {
        store.record_request(sluice::store::RequestLogRow {
            tokens_in: None,
            tokens_out: None,
            translated: String::new(),
            injected: false,
            continued: false,
            at_unix_ms: now - ago_ms,
            route: "/v1/messages".into(),
            client_model: model.into(),
            target: format!("p/up-{model}"),
            status,
            latency_ms: 7,
            attempts: 1,
            bytes: 3,
            outcome: if status == 200 {
                "ok"
            } else {
                "upstream_error"
            }
            .into(),
        });
    }
    store.flush();
    let cfg = dir.path().join("config.toml");
    std::fs::write(
        &cfg,
        format!(
            "[store]\npath = \"{}\"\n\n[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n",
            db.display()
        ),
    )
    .unwrap();
    let c = cfg.to_str().unwrap();
    // The store stays open (as a running server's would) while `sluice log` reads.
    let out = sluice(&["log", "-c", c, "--status", "429"]);
    let text = text(&out.stdout);
    assert!(out.status.success(), "{}", self::text(&out.stderr));
    assert!(
        text.contains("slow → p/up-slow") && text.contains("old → p/up-old"),
        "{text}"
    );
    assert!(!text.contains("fast"), "{text}");
    assert!(
        text.find("old →").unwrap() < text.find("slow →").unwrap(),
        "oldest first: {text}"
    );

    let out = sluice(&["log", "-c", c, "--since", "1h", "--json"]);
    let lines: Vec<serde_json::Value> = self::text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let models: Vec<&str> = lines.iter().map(|v| v["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["slow", "fast"]);
    assert_eq!(lines[1]["status"], 200);

    let out = sluice(&["log", "-c", c, "--model", "up-fast", "--limit", "1"]);
    assert!(self::text(&out.stdout).contains("fast → p/up-fast"));
    store.close();
}
