use super::*;

#[test]
fn parses_targets() {
    let t = parse_target("openrouter/z-ai/glm-5").unwrap();
    assert_eq!(
        (t.provider.as_str(), t.connection, t.model.as_str()),
        ("openrouter", None, "z-ai/glm-5")
    );
    let t = parse_target("anthropic:mine/claude-haiku-4-5").unwrap();
    assert_eq!(t.connection.as_deref(), Some("mine"));
    assert!(parse_target("nomodel").is_none());
    assert!(parse_target("p/").is_none());
}

#[test]
fn log_filters() {
    for ok in [
        "info",
        "WARN",
        "off",
        "info,sluice=debug",
        "sluice::proxy=trace",
        "hyper=warn,info",
    ] {
        assert!(valid_log_filter(ok), "{ok}");
    }
    for bad in ["verbose", "", "info,loud", "sluice=loud", "=info"] {
        assert!(!valid_log_filter(bad), "{bad}");
    }
}

#[test]
fn base_urls() {
    assert_eq!(
        parse_base_url("https://openrouter.ai/api/")
            .unwrap()
            .to_string(),
        "https://openrouter.ai/api"
    );
    assert!(parse_base_url("http://127.0.0.1:11434").is_some());
    for bad in [
        "htp://x",
        "api.anthropic.com",
        "https://",
        "https://x/?a=b",
        "",
    ] {
        assert!(parse_base_url(bad).is_none(), "{bad}");
    }
}

#[test]
fn snippet_redaction_masks_only_secret_looking_words() {
    let line = "10 |   api_key = \"sk-ant-api03-abcdefGHIJ0123456789\"";
    let out = redact_snippet_line(line);
    assert!(!out.contains("abcdef"), "{out}");
    assert_eq!(
        out.chars().count(),
        line.chars().count(),
        "keeps the caret aligned"
    );
    let plain = "5 | base_uri = \"https://api.anthropic.com\"";
    assert_eq!(redact_snippet_line(plain), plain);
    let prose = "unknown field `api_key0123456789abcdefgh`";
    assert_eq!(
        redact_snippet_line(prose),
        prose,
        "only snippet lines are touched"
    );
}

#[test]
fn queue_env_vars_supply_defaults_and_file_wins() {
    let base = "[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"https://x\"\n[[providers.connections]]\nid = \"c\"\nauth = \"passthrough\"\n";
    let vars = [
        ("SLUICE_QUEUE_MAX_WAIT", "5s"),
        ("SLUICE_QUEUE_MAX_DEPTH", "7"),
        ("SLUICE_RATE_LIMIT_AUTO_ENABLE", "false"),
        ("SLUICE_STREAM_THROUGHPUT_WATCHDOG", "1"),
    ];
    let env = LoadEnv::fixed(&vars, "/d");
    let cfg = from_str(base, Path::new("q.toml"), &env).unwrap();
    let q = &cfg.resilience.queue;
    assert_eq!((q.max_wait, q.max_queue_depth), (Duration::from_secs(5), 7));
    assert_eq!(q.execution_max_wait, Duration::from_secs(600));
    assert!(!q.auto_enable_api_key_connections);
    assert!(cfg.resilience.stream.throughput_watchdog.enabled);
    let text = format!(
        "{base}[resilience.queue]\nmax_wait = \"9s\"\nauto_enable_api_key_connections = true\n"
    );
    let cfg = from_str(&text, Path::new("q.toml"), &env).unwrap();
    assert_eq!(
        cfg.resilience.queue.max_wait,
        Duration::from_secs(9),
        "the file beats the env default"
    );
    assert!(
        !cfg.resilience.queue.auto_enable_api_key_connections,
        "the env var overrides the file"
    );
    let bad = [("SLUICE_QUEUE_MAX_DEPTH", "lots")];
    let err = from_str(base, Path::new("q.toml"), &LoadEnv::fixed(&bad, "/d"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("q.toml: env SLUICE_QUEUE_MAX_DEPTH: 'lots' is not a whole number"),
        "{err}"
    );
}

#[test]
fn empty_client_keys_off_loopback_is_an_error() {
    let text = "[server]\nlisten = \"0.0.0.0:8787\"\nclient_keys_env = \"K\"\n[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"https://x\"\n[[providers.connections]]\nid = \"c\"\nauth = \"passthrough\"\n";
    let vars = [("K", " , ,")];
    let err = from_str(text, Path::new("k.toml"), &LoadEnv::fixed(&vars, "/d"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("server.client_keys_env: environment variable 'K' holds no keys"),
        "{err}"
    );
}

#[test]
fn max_connections_defaults_to_1024_and_is_range_checked() {
    let load = |text: &str| {
        let env = LoadEnv::fixed(&[], "/tmp/sluice-test");
        let text = format!(
            "{text}\n[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n"
        );
        from_str(&text, std::path::Path::new("/tmp/sluice-test/c.toml"), &env)
    };
    let cfg = load("").unwrap();
    assert_eq!(cfg.server.max_connections, DEFAULT_MAX_CONNECTIONS);
    assert_eq!(DEFAULT_MAX_CONNECTIONS, 1024);
    let cfg = load("[server]\nmax_connections = 8\n").unwrap();
    assert_eq!(cfg.server.max_connections, 8);
    for bad in ["0", "-1", "1000001"] {
        let msg = load(&format!("[server]\nmax_connections = {bad}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            msg.contains("server.max_connections") && msg.contains("1 to 1000000"),
            "{msg}"
        );
    }
}

#[test]
fn durations_are_bounded_at_validation() {
    let base = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n";
    let env = LoadEnv::fixed(&[], "/tmp");
    let text = format!("{base}[resilience.stream]\ncontent_stall_timeout = \"300000000000y\"\n");
    let err = from_str(&text, Path::new("t.toml"), &env)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("t.toml: resilience.stream.content_stall_timeout")
            && err.contains("longer than the maximum of 366d")
            && err.contains("use at most \"366d\""),
        "{err}"
    );
    let at_max = format!("{base}[resilience.stream]\ncontent_stall_timeout = \"366d\"\n");
    assert!(from_str(&at_max, Path::new("t.toml"), &env).is_ok());
    let vars = [("SLUICE_QUEUE_MAX_WAIT", "9999999999d")];
    let env = LoadEnv::fixed(&vars, "/tmp");
    let err = from_str(base, Path::new("t.toml"), &env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("env SLUICE_QUEUE_MAX_WAIT"), "{err}");
}

#[test]
fn continue_after_break_is_off_by_default_and_must_be_a_bool() {
    let base = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n";
    let env = LoadEnv::fixed(&[], "/tmp");
    let cfg = from_str(base, Path::new("t.toml"), &env).unwrap();
    assert!(!cfg.resilience.stream.continue_after_break);
    let on = format!("{base}[resilience.stream]\ncontinue_after_break = true\n");
    let cfg = from_str(&on, Path::new("t.toml"), &env).unwrap();
    assert!(cfg.resilience.stream.continue_after_break);
    let bad = format!("{base}[resilience.stream]\ncontinue_after_break = \"yes\"\n");
    let err = from_str(&bad, Path::new("t.toml"), &env)
        .unwrap_err()
        .to_string();
    assert!(err.contains("continue_after_break"), "{err}");
}

#[test]
fn combo_cooldown_wait_defaults_to_true_and_must_be_a_bool() {
    let base = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n";
    let env = LoadEnv::fixed(&[], "/tmp");
    let load = |combo: &str| {
        from_str(
            &format!("{base}[[combos]]\nname = \"m\"\ntargets = [\"p/x\"]\n{combo}"),
            Path::new("t.toml"),
            &env,
        )
    };
    let wait = |c: &Config| c.combo("m").map(|c| c.cooldown_wait);
    assert_eq!(wait(&load("").unwrap()), Some(true));
    assert_eq!(wait(&load("cooldown_wait = false\n").unwrap()), Some(false));
    let err = load("cooldown_wait = \"no\"\n").unwrap_err().to_string();
    assert!(err.contains("cooldown_wait"), "{err}");
}

#[test]
fn quota_preflight_is_off_by_default_and_its_thresholds_are_checked() {
    let base = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n";
    let env = LoadEnv::fixed(&[], "/tmp");
    let load = |tail: &str| from_str(&format!("{base}{tail}"), Path::new("t.toml"), &env);
    let cfg = load("").unwrap();
    let q = cfg.resilience.quota_preflight;
    assert_eq!((q.enabled, q.cutoff, q.warn), (false, 0.02, 0.20));
    assert_eq!(cfg.resilience.p2c_latency_weight, 0);
    let cfg = load("[resilience.quota_preflight]\nenabled = true\ncutoff = 0\nwarn = 1\n").unwrap();
    let q = cfg.resilience.quota_preflight;
    assert_eq!((q.enabled, q.cutoff, q.warn), (true, 0.0, 1.0));
    for (tail, key, needle) in [
        (
            "cutoff = 1.5",
            "resilience.quota_preflight.cutoff",
            "0.0 to 1.0",
        ),
        (
            "warn = -0.1",
            "resilience.quota_preflight.warn",
            "0.0 to 1.0",
        ),
        (
            "warn = nan",
            "resilience.quota_preflight.warn",
            "0.0 to 1.0",
        ),
        (
            "cutoff = 0.3\nwarn = 0.2",
            "resilience.quota_preflight.warn",
            "warn must be at least cutoff",
        ),
    ] {
        let err = load(&format!("[resilience.quota_preflight]\n{tail}\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!("t.toml: {key}")) && err.contains(needle),
            "{tail}: {err}"
        );
    }
    let err = load("[resilience]\np2c_latency_weight = 21\n")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("resilience.p2c_latency_weight") && err.contains("0 to 20"),
        "{err}"
    );
    assert_eq!(
        load("[resilience]\np2c_latency_weight = 20\n")
            .unwrap()
            .resilience
            .p2c_latency_weight,
        20
    );
}

#[test]
fn a_bare_number_where_a_string_belongs_gets_a_quoted_fix() {
    let env = LoadEnv {
        var: Box::new(|_| Some("k".into())),
        data_dir: std::env::temp_dir(),
    };
    let fix = |line: &str| {
        let text = format!(
            "[server]\n{line}\n[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n"
        );
        match from_str(&text, Path::new("t.toml"), &env) {
            Err(ConfigError::Parse { message, .. }) => message,
            other => panic!("expected a parse error, got {other:?}"),
        }
    };
    assert!(
        fix("drain_timeout = 30").contains("write drain_timeout = \"30s\""),
        "{}",
        fix("drain_timeout = 30")
    );
    assert!(fix("max_body = 16").contains("write max_body = \"16MiB\""));
    assert!(fix("listen = 8080").contains("write listen = \"8080\""));
}

#[test]
fn translation_keys_are_read_and_checked() {
    let provider = |dialect: &str, extra: &str| {
        format!(
            "[[providers]]\nid = \"p\"\ndialect = \"{dialect}\"\nbase_url = \"https://x\"\n{extra}\n[[providers.connections]]\nid = \"c\"\nauth = \"passthrough\"\n"
        )
    };
    let env = LoadEnv::fixed(&[], "/d");
    let ok = provider(
        "openai",
        "responses = false\ndrop_fields = [\"stream_options\", \"user\"]\ndefault_max_tokens = 4096\nreasoning_effort = true",
    );
    let cfg = from_str(&ok, Path::new("t.toml"), &env).unwrap();
    let t = &cfg.providers[0].translation;
    assert!(!t.responses && t.reasoning_effort);
    assert_eq!(t.drop_fields, ["stream_options", "user"]);
    assert_eq!(t.default_max_tokens, Some(4096));
    let cfg = from_str(&provider("openai", ""), Path::new("t.toml"), &env).unwrap();
    assert_eq!(cfg.providers[0].translation, Translation::default());
    let cfg = from_str(&provider("anthropic", ""), Path::new("t.toml"), &env).unwrap();
    assert!(!cfg.providers[0].translation.responses);

    for (dialect, extra, want) in [
        (
            "anthropic",
            "responses = true",
            "providers.p.responses: only applies to dialect = \"openai\"",
        ),
        (
            "anthropic",
            "reasoning_effort = true",
            "providers.p.reasoning_effort: only applies",
        ),
        (
            "openai",
            "drop_fields = [\"messages\"]",
            "providers.p.drop_fields: 'messages' is needed by every request",
        ),
        (
            "openai",
            "drop_fields = [\"a.b\"]",
            "providers.p.drop_fields: 'a.b' is not a top-level field name",
        ),
        (
            "openai",
            "default_max_tokens = 0",
            "providers.p.default_max_tokens: '0' is out of range",
        ),
        (
            "anthropic",
            "system_role = \"developer\"",
            "providers.p.system_role: only applies",
        ),
        (
            "openai",
            "system_role = \"admin\"",
            "providers.p.system_role: 'admin' is not a role",
        ),
        (
            "openai",
            "max_reasoning_effort = \"max\"",
            "providers.p.max_reasoning_effort: 'max' is not an effort level",
        ),
        (
            "openai",
            "max_output_tokens = -5",
            "providers.p.max_output_tokens: '-5' is out of range",
        ),
        (
            "openai",
            "[providers.model_options.\"o3\"]\nmax_output_tokens = 0",
            "providers.p.model_options.\"o3\".max_output_tokens: '0' is out of range",
        ),
        (
            "openai",
            "[providers.model_options.\"o3\"]\nmax_tokens = 5",
            "max_tokens",
        ),
    ] {
        let err = from_str(&provider(dialect, extra), Path::new("t.toml"), &env)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("t.toml") && err.contains(want),
            "{extra}: {err}"
        );
    }
}

#[test]
fn provider_slow_start_is_an_optional_bounded_duration() {
    let base = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\nSLOW\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\n";
    let env = LoadEnv::fixed(&[], "/tmp");
    let load = |line: &str| from_str(&base.replace("SLOW", line), Path::new("t.toml"), &env);
    assert_eq!(
        load("").unwrap().providers[0].slow_start,
        Duration::ZERO,
        "off by default"
    );
    assert_eq!(
        load("slow_start = \"0s\"").unwrap().providers[0].slow_start,
        Duration::ZERO
    );
    assert_eq!(
        load("slow_start = \"30s\"").unwrap().providers[0].slow_start,
        Duration::from_secs(30)
    );
    let err = load("slow_start = \"soon\"").unwrap_err().to_string();
    assert!(err.contains("t.toml: providers.p.slow_start"), "{err}");
    let err = load("slow_start = \"300000000000y\"")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("providers.p.slow_start") && err.contains("366d"),
        "{err}"
    );
}

#[test]
fn a_connection_key_may_be_sent_as_a_bearer_token() {
    let base = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"c\"\n  auth = AUTH\n";
    let env = LoadEnv::fixed(&[("TOK", "sk-ant-oat01-x")], "/tmp");
    let load = |auth: &str| from_str(&base.replace("AUTH", auth), Path::new("t.toml"), &env);
    let scheme = |auth: &str| match load(auth).unwrap().providers[0].connections[0].auth {
        Auth::Key { scheme, .. } => scheme,
        Auth::Passthrough => panic!("a key"),
    };
    assert_eq!(scheme("{ env = \"TOK\" }"), KeyScheme::Dialect);
    assert_eq!(
        scheme("{ env = \"TOK\", scheme = \"bearer\" }"),
        KeyScheme::Bearer
    );
    let cfg = load("{ env = \"TOK\", scheme = \"bearer\" }").unwrap();
    assert_eq!(
        cfg.providers[0].connections[0].auth.describe(),
        "env:TOK (bearer)"
    );
    let err = load("{ env = \"TOK\", scheme = \"Basic\" }")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("t.toml: providers.p.connections.c.auth.scheme"),
        "{err}"
    );
    assert!(!err.contains("sk-ant-oat01-x"), "never the secret: {err}");
    let err = load("{ env = \"TOK\", scheme = 1 }")
        .unwrap_err()
        .to_string();
    assert!(err.contains("auth.scheme"), "{err}");
}

#[test]
fn output_limits_efforts_and_model_options_are_read() {
    let body = "[[providers]]\nid = \"p\"\ndialect = \"openai\"\nbase_url = \"https://x\"\n\
        max_output_tokens = 32768\nmax_reasoning_effort = \"medium\"\nsystem_role = \"developer\"\n\
        [providers.model_options.\"o*\"]\nmax_completion_tokens = true\nreasoning_effort = true\n\
        [providers.model_options.\"o3-pro\"]\nmax_output_tokens = 100000\nmax_reasoning_effort = \"xhigh\"\n\
        [[providers.connections]]\nid = \"c\"\nauth = \"passthrough\"\n";
    let env = LoadEnv::fixed(&[], "/d");
    let cfg = from_str(body, Path::new("t.toml"), &env).unwrap();
    let t = &cfg.providers[0].translation;
    assert_eq!(t.max_output_tokens, Some(32768));
    assert_eq!(t.max_reasoning_effort, ReasoningEffort::Medium);
    assert_eq!(t.system_role, SystemRole::Developer);
    assert!(!t.max_completion_tokens);
    let entry = |name: &str| {
        t.model_options
            .iter()
            .find(|(p, _)| p == name)
            .map(|(_, o)| o.clone())
            .expect("entry read")
    };
    let o = entry("o*");
    assert_eq!(o.max_completion_tokens, Some(true));
    assert_eq!(o.max_output_tokens, None, "left out: the provider's value");
    let pro = entry("o3-pro");
    assert_eq!(pro.max_output_tokens, Some(100000));
    assert_eq!(pro.max_reasoning_effort, Some(ReasoningEffort::XHigh));
    assert_eq!(t.model_options.len(), 2);
}

#[test]
fn org_uuid_is_a_uuid_and_required_only_by_auto_limit_reset() {
    let load = |conn: &str| {
        let body = format!(
            "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"https://x\"\n\
             profile = \"oauth\"\n[[providers.connections]]\nid = \"c\"\nauth = \"passthrough\"\n{conn}"
        );
        from_str(&body, Path::new("t.toml"), &LoadEnv::fixed(&[], "/d")).map(|c| {
            let c = &c.providers[0].connections[0];
            (c.auto_limit_reset, c.org_uuid.clone())
        })
    };
    let org = "0A1b2C3d-4E5f-6789-aBcD-ef0123456789";
    assert_eq!(
        load(&format!("auto_limit_reset = true\norg_uuid = \"{org}\"\n")).unwrap(),
        (true, Some(org.to_ascii_lowercase()))
    );
    assert_eq!(
        load("").unwrap(),
        (false, None),
        "optional without the reset"
    );
    assert_eq!(
        load(&format!("org_uuid = \"{org}\"\n")).unwrap(),
        (false, Some(org.to_ascii_lowercase()))
    );
    let missing = load("auto_limit_reset = true\n").unwrap_err().to_string();
    assert!(
        missing.contains("t.toml: providers.p.connections.c.org_uuid: is missing"),
        "{missing}"
    );
    for bad in [
        "",
        "0a1b2c3d4e5f67890abcdef0123456789abc",
        "{0a1b2c3d-4e5f-6789-abcd-ef0123456789}",
        "0a1b2c3d-4e5f-6789-abcd-ef012345678",
        "0a1b2c3d-4e5f-6789-abcd-ef012345678g",
        "0a1b2c3d_4e5f-6789-abcd-ef0123456789",
        "sk-ant-oat01-TESTSECRET-0123456789ab",
    ] {
        let err = load(&format!("auto_limit_reset = true\norg_uuid = \"{bad}\"\n"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("providers.p.connections.c.org_uuid: is not a UUID"),
            "{bad}: {err}"
        );
        assert!(bad.is_empty() || !err.contains(bad), "never echoed: {err}");
    }
}
