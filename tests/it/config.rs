//! config integration tests: one broken fixture per validation rule, the valid fixtures, the
//! shipped `config.toml`, the TOML blocks in README.md, secret hygiene and discovery order.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sluice::config::{Auth, ConfigError, LoadEnv, Profile, discover, from_str};

/// Secret values the tests put in the environment; no error message may contain them.
const OPENROUTER_KEY: &str = "sk-or-v1-TESTSECRET-4f3c2b1a";
const ADMIN_TOKEN: &str = "admin-TESTSECRET-9e8d7c";
const CLIENT_KEYS: &str = "client-TESTSECRET-a,client-TESTSECRET-b";

/// Secret-looking values that fixtures paste into the file by mistake.
const PASTED_SECRETS: [&str; 2] = [
    "sk-or-v1-0123456789abcdef0123456789abcdef",
    "sk-ant-api03-0123456789abcdefABCDEF0123",
];

const VARS: [(&str, &str); 6] = [
    ("OPENROUTER_API_KEY", OPENROUTER_KEY),
    ("CLAUDE_SUB_ALICE", "sk-ant-oat01-readme-alice"),
    ("CLAUDE_SUB_BOB", "sk-ant-oat01-readme-bob"),
    ("ANTHROPIC_API_KEY", "sk-ant-readme-example-key"),
    ("SLUICE_ADMIN_TOKEN", ADMIN_TOKEN),
    ("SLUICE_CLIENT_KEYS", CLIENT_KEYS),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn fixtures(kind: &str) -> Vec<PathBuf> {
    let dir = root().join("tests/fixtures/config").join(kind);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    files
}

fn env() -> LoadEnv<'static> {
    LoadEnv::fixed(&VARS, "/data/sluice")
}

fn load(path: &Path) -> Result<sluice::config::Config, ConfigError> {
    let text = std::fs::read_to_string(path).unwrap();
    from_str(&text, path, &env())
}

fn assert_no_secrets(path: &Path, msg: &str) {
    for secret in [
        OPENROUTER_KEY,
        ADMIN_TOKEN,
        "client-TESTSECRET",
        PASTED_SECRETS[0],
        PASTED_SECRETS[1],
    ] {
        assert!(
            !msg.contains(secret),
            "{}: error text leaks a secret:\n{msg}",
            path.display()
        );
    }
    assert!(
        !msg.contains("TESTSECRET"),
        "{}: error text leaks a secret:\n{msg}",
        path.display()
    );
}

#[test]
fn every_invalid_fixture_fails_with_its_expected_message() {
    let files = fixtures("invalid");
    assert!(
        files.len() >= 30,
        "expected one fixture per rule, found {}",
        files.len()
    );
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| {
                panic!(
                    "{}: first line must be `# expect: <fragment>`",
                    path.display()
                )
            })
            .trim();
        let err = match from_str(&text, &path, &env()) {
            Ok(_) => panic!("{}: loaded, but should fail with: {expect}", path.display()),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(expect),
            "{}: error does not contain\n  {expect}\ngot:\n{err}",
            path.display()
        );
        let name = path.file_name().unwrap().to_string_lossy();
        assert!(
            err.contains(name.as_ref()),
            "{}: error does not name the file:\n{err}",
            path.display()
        );
        for line in err.lines().filter(|l| !l.starts_with(' ')) {
            assert!(
                line.starts_with(&path.display().to_string()),
                "{}: line without file prefix: {line}",
                path.display()
            );
        }
        let problems = err.lines().filter(|l| !l.starts_with(' ')).count();
        assert_eq!(
            problems,
            1,
            "{}: a fixture breaks exactly one rule, got:\n{err}",
            path.display()
        );
        assert_no_secrets(&path, &err);
    }
}

#[test]
fn every_valid_fixture_loads() {
    let files = fixtures("valid");
    assert!(files.len() >= 2);
    for path in files {
        if let Err(e) = load(&path) {
            panic!("{}: should load:\n{e}", path.display());
        }
    }
}

#[test]
fn minimal_config_gets_the_documented_defaults() {
    let cfg = load(&root().join("tests/fixtures/config/valid/minimal.toml")).unwrap();
    assert_eq!(cfg.server.listen.to_string(), "127.0.0.1:8787");
    assert_eq!(cfg.admin.listen.to_string(), "127.0.0.1:8788");
    assert_eq!(cfg.server.max_body, 32 * 1024 * 1024);
    assert!(cfg.admin.token.is_none() && cfg.server.client_keys.is_empty());
    assert_eq!(cfg.store.path, PathBuf::from("/data/sluice/sluice.db"));
    assert_eq!(cfg.log.dir, PathBuf::from("/data/sluice/logs"));
    assert_eq!(cfg.log.level, "info");
    assert_eq!(cfg.console.tick, Duration::from_millis(250));
    assert_eq!(cfg.default_providers, ["anthropic"]);
    let p = cfg.provider("anthropic").unwrap();
    assert_eq!(p.profile, Profile::ApiKey);
    assert_eq!(p.timeout, Duration::from_secs(600));
    assert_eq!(p.connect_timeout, Duration::from_secs(10));
    assert_eq!(p.connections[0].auth, Auth::Passthrough);
    assert!(p.connections[0].concurrency_fail_open);
    assert_eq!(p.connections[0].egress, "direct");

    let r = &cfg.resilience;
    // §1 profiles.
    for (profile, degrade, open, reset) in [
        (Profile::Oauth, 5, 8, 60),
        (Profile::ApiKey, 7, 12, 30),
        (Profile::Local, 1, 2, 15),
    ] {
        let b = r.breaker[&profile];
        assert_eq!(
            (b.degrade_at, b.open_at, b.reset_timeout),
            (degrade, open, Duration::from_secs(reset))
        );
        assert_eq!(
            (b.degraded_quiet_window, b.probe_timeout),
            (Duration::from_secs(60), Duration::from_secs(60))
        );
        assert_eq!(b.max_backoff_multiplier, 16);
        assert_eq!(
            b.trip_statuses.iter().collect::<Vec<_>>(),
            [408, 500, 502, 503, 504],
            "only service-level failures trip a breaker by default"
        );
    }
    // §1b.
    assert!(!r.provider_cooldown.enabled);
    let pc = r.provider_cooldown.profiles[&Profile::ApiKey];
    assert_eq!(
        (pc.failure_threshold, pc.failure_window, pc.cooldown),
        (15, Duration::from_secs(1800), Duration::from_secs(600))
    );
    // §2 ladder and knobs.
    for (profile, base, level) in [
        (Profile::Oauth, 5, 8),
        (Profile::ApiKey, 3, 5),
        (Profile::Local, 1, 3),
    ] {
        let c = r.cooldown[&profile];
        assert_eq!(
            (c.base, c.max_backoff_level),
            (Duration::from_secs(base), level)
        );
    }
    let cc = &r.connection_cooldown;
    assert_eq!(cc.max_cooldown, Duration::from_secs(1800));
    assert_eq!(cc.quota_wait_threshold, Duration::from_secs(600));
    assert_eq!(cc.max_quota_wait, Duration::from_secs(7 * 86400));
    assert_eq!(cc.expired_retry_max, 3);
    assert!(cc.quota_markers.iter().any(|m| m == "额度") && !cc.stream_stall_cooldown);
    assert_eq!(r.session_affinity_ttl, Duration::from_secs(3600));
    // §3.
    let l = &r.model_lockout;
    assert!(!l.enabled && l.exponential);
    assert_eq!(l.error_codes, [403, 404, 429, 502, 503, 504]);
    assert_eq!(
        (l.base_cooldown, l.max_cooldown, l.max_backoff_steps),
        (Duration::from_secs(120), Duration::from_secs(1800), 10)
    );
    // §4.
    let w = r.combo_cooldown_wait;
    assert!(w.enabled);
    assert_eq!(
        (w.max_wait, w.max_attempts, w.budget),
        (Duration::from_secs(60), 3, Duration::from_secs(120))
    );
    // §5.
    assert_eq!(
        (
            r.queue.max_wait,
            r.queue.execution_max_wait,
            r.queue.max_queue_depth
        ),
        (Duration::from_secs(30), Duration::from_secs(600), 0)
    );
    assert!(r.queue.auto_enable_api_key_connections);
    // §6.
    let s = &r.stream;
    assert_eq!(
        (
            s.readiness_timeout,
            s.heartbeat_interval,
            s.content_stall_timeout
        ),
        (
            Duration::from_secs(30),
            Duration::from_secs(15),
            Duration::from_secs(180)
        )
    );
    assert!(!s.throughput_watchdog.enabled);
}

#[test]
fn full_fixture_values_reach_the_typed_config() {
    let cfg = load(&root().join("tests/fixtures/config/valid/full.toml")).unwrap();
    assert_eq!(cfg.server.client_keys.len(), 2);
    assert_eq!(
        cfg.admin.token.as_ref().map(|t| t.expose()),
        Some(ADMIN_TOKEN)
    );
    assert_eq!(cfg.server.max_body, 64 * 1024 * 1024);
    let or = cfg.provider("openrouter").unwrap();
    assert_eq!(or.base_url.to_string(), "https://openrouter.ai/api/v1");
    let key = &or.connections[0];
    match &key.auth {
        Auth::Key { env, secret, .. } => assert_eq!(
            (env.as_str(), secret.expose()),
            ("OPENROUTER_API_KEY", OPENROUTER_KEY)
        ),
        Auth::Passthrough => panic!("expected an env key"),
    }
    assert!(
        !format!("{key:?}").contains(OPENROUTER_KEY),
        "Debug must not print the key"
    );
    assert_eq!(
        (key.max_concurrent, key.model_concurrency["z-ai/glm-5"]),
        (Some(4), 1)
    );
    assert!(!cfg.provider("anthropic").unwrap().connections[0].low_priority_mode);
    assert_eq!(cfg.provider("ollama").unwrap().profile, Profile::Local);
    let fast = cfg.combo("fast").unwrap();
    assert_eq!(fast.targets[0].connection.as_deref(), Some("key-a"));
    assert_eq!(fast.targets[0].model, "z-ai/glm-5");
    assert_eq!(fast.targets[2].model, "qwen3:8b");
    assert_eq!(
        cfg.resilience.breaker[&Profile::Oauth].max_backoff_multiplier,
        8
    );
    assert_eq!(
        cfg.resilience.breaker[&Profile::Oauth]
            .trip_statuses
            .iter()
            .collect::<Vec<_>>(),
        [408, 500, 502, 503, 504, 524]
    );
    let ollama = cfg.provider("ollama").unwrap();
    let local = ollama.breaker.over(cfg.resilience.breaker[&Profile::Local]);
    assert_eq!(
        local.trip_statuses.iter().collect::<Vec<_>>(),
        [500, 502, 503, 504, 522],
        "the provider's own list replaces the profile's"
    );
    assert_eq!(
        local.reset_timeout,
        Duration::from_secs(5),
        "the rest is the profile's"
    );
    assert_eq!(cfg.resilience.queue.max_queue_depth, 200);
    assert_eq!(
        cfg.resilience.stream.throughput_watchdog.min_bytes_per_sec,
        16
    );
    assert_eq!(
        cfg.error_rules[0].header_markers["x-gateway-reason"],
        "overload"
    );
    assert_eq!(
        cfg.restatement[0].default_retry_after,
        Duration::from_secs(120)
    );
}

#[test]
fn unset_default_provider_means_every_provider_in_file_order() {
    let text =
        std::fs::read_to_string(root().join("tests/fixtures/config/valid/design-example.toml"))
            .unwrap()
            .replace("default_provider = [\"anthropic\", \"openrouter\"]", "");
    let cfg = from_str(&text, Path::new("x.toml"), &env()).unwrap();
    assert_eq!(cfg.default_providers, ["anthropic", "openrouter"]);
}

#[test]
fn shipped_config_loads_with_no_env_vars() {
    let path = root().join("config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let cfg = match from_str(&text, &path, &LoadEnv::fixed(&[], "/data/sluice")) {
        Ok(c) => c,
        Err(e) => panic!("shipped config.toml must load on a fresh machine:\n{e}"),
    };
    assert_eq!(cfg.server.listen.to_string(), "127.0.0.1:8787");
    assert_eq!(cfg.admin.listen.to_string(), "127.0.0.1:8788");
    assert_eq!(cfg.default_providers, ["anthropic"]);
    let a = cfg.provider("anthropic").unwrap();
    assert_eq!(a.connections[0].auth, Auth::Passthrough);
    let rule = cfg.restatement.iter().find(|r| r.id == "cn-quota").unwrap();
    assert_eq!(*rule, sluice::config::builtin_restatements()[0]);
}

#[test]
fn shipped_config_commented_examples_load_when_uncommented() {
    // Uncommenting every `# key = value` / `# [table]` line must still give a valid file
    // (the commented openrouter provider needs OPENROUTER_API_KEY; admin needs its token).
    let text = std::fs::read_to_string(root().join("config.toml")).unwrap();
    let uncommented: String = text
        .lines()
        .map(|l| {
            let t = l.trim_start();
            match t.strip_prefix("# ") {
                Some(rest) if looks_like_toml(rest.trim_start()) => rest.to_string(),
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    let cfg = match from_str(&uncommented, Path::new("config.toml (uncommented)"), &env()) {
        Ok(c) => c,
        Err(e) => {
            panic!("config.toml with its examples uncommented must load:\n{e}\n---\n{uncommented}")
        }
    };
    // The examples really were switched on.
    assert!(cfg.admin.token.is_some() && !cfg.server.client_keys.is_empty());
    assert_eq!(
        cfg.provider("openrouter").unwrap().connections[0].max_concurrent,
        Some(4)
    );
    assert!(cfg.combo("fast").is_some());
    assert_eq!(cfg.console.keys["clear_cooldown"], ["c"]);
}

fn looks_like_toml(s: &str) -> bool {
    let s = s.split(" #").next().unwrap_or(s).trim_end();
    (s.starts_with('[') && s.ends_with(']') && !s.contains(' '))
        || s.split_once(" = ").is_some_and(|(k, _)| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        })
}

/// Every ```toml block in a markdown file must be a whole valid config, unless its first line
/// is a `# fragment` comment. Returns how many blocks were checked in full.
fn check_markdown_toml_blocks(file: &str) -> usize {
    let Ok(md) = std::fs::read_to_string(root().join(file)) else {
        return 0;
    };
    let (mut block, mut count, mut checked) = (None::<String>, 0, 0);
    for line in md.lines() {
        let t = line.trim_start();
        match block.as_mut() {
            None if t.starts_with("```toml") => block = Some(String::new()),
            None => {}
            Some(b) if t.starts_with("```") => {
                count += 1;
                let name = format!("{file} toml block {count}");
                if !b.trim_start().starts_with("# fragment") {
                    checked += 1;
                    if let Err(e) = from_str(b, Path::new(&name), &env()) {
                        panic!(
                            "{name} is not a valid config (start it with `# fragment` if it is one):\n{e}\n---\n{b}"
                        );
                    }
                }
                block = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
        }
    }
    assert!(block.is_none(), "{file}: unclosed ```toml block");
    checked
}

#[test]
fn readme_toml_blocks_parse() {
    assert!(
        check_markdown_toml_blocks("README.md") >= 1,
        "README.md has a complete config example, so this test checks something"
    );
}

#[test]
fn config_md_toml_blocks_parse() {
    assert!(
        check_markdown_toml_blocks("CONFIG.md") >= 1,
        "CONFIG.md has a complete example"
    );
}

#[test]
fn missing_env_var_names_the_var_and_never_a_value() {
    let text = r#"
[admin]
token_env = "SLUICE_ADMIN_TOKEN"

[[providers]]
id = "openrouter"
dialect = "openai"
base_url = "https://openrouter.ai/api"

  [[providers.connections]]
  id = "key-a"
  auth = { env = "OPENROUTER_API_KEY" }

  [[providers.connections]]
  id = "key-b"
  auth = { env = "OPENROUTER_API_KEY_2" }
"#;
    let err = from_str(text, Path::new("secrets.toml"), &env())
        .unwrap_err()
        .to_string();
    assert!(err.contains("OPENROUTER_API_KEY_2"), "{err}");
    assert!(
        err.contains("secrets.toml: providers.openrouter.connections.key-b.auth.env"),
        "{err}"
    );
    assert_eq!(
        err.lines().count(),
        1,
        "only the missing var is a problem: {err}"
    );
    assert_no_secrets(Path::new("secrets.toml"), &err);
    // A var that is set but empty counts as missing.
    let vars = [
        ("OPENROUTER_API_KEY", "  "),
        ("OPENROUTER_API_KEY_2", "x"),
        ("SLUICE_ADMIN_TOKEN", ADMIN_TOKEN),
    ];
    let err = from_str(
        text,
        Path::new("secrets.toml"),
        &LoadEnv::fixed(&vars, "/d"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("environment variable 'OPENROUTER_API_KEY' is not set"),
        "{err}"
    );
    assert_no_secrets(Path::new("secrets.toml"), &err);
}

#[test]
fn every_problem_is_reported_at_once() {
    let text = r#"
[server]
listen = "nope"

[log]
level = "loud"

[[providers]]
id = "anthropic"
dialect = "anthropic"
base_url = "htp://x"

  [[providers.connections]]
  id = "mine"
  auth = "passthrough"
"#;
    let err = from_str(text, Path::new("many.toml"), &env()).unwrap_err();
    let ConfigError::Invalid { problems, .. } = &err else {
        panic!("{err}")
    };
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        ["server.listen", "log.level", "providers.anthropic.base_url"]
    );
    assert_eq!(err.to_string().lines().count(), 3);
}

#[test]
fn discover_prefers_flag_then_env_then_local_file() {
    let flag = Path::new("/tmp/from-flag.toml");
    assert_eq!(
        discover(Some(flag), Some("/tmp/from-env.toml")).unwrap(),
        flag
    );
    assert_eq!(
        discover(None, Some("/tmp/from-env.toml")).unwrap(),
        PathBuf::from("/tmp/from-env.toml")
    );
    // An empty $SLUICE_CONFIG counts as unset; cargo runs tests in the crate root, which holds
    // the shipped ./config.toml.
    assert_eq!(
        discover(None, Some("")).unwrap(),
        PathBuf::from("config.toml")
    );
    assert_eq!(discover(None, None).unwrap(), PathBuf::from("config.toml"));
}
