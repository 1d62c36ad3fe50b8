//! The keys of the §2 concurrency-limit and hint-less rate-limit rules: `concurrency_markers`
//! and `rate_limit_cooldown` (global, per provider, per connection).

use super::*;

const BASE: &str = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\nPROVIDER\n  [[providers.connections]]\n  id = \"c\"\n  auth = \"passthrough\"\nCONNECTION\n[resilience.connection_cooldown]\nGLOBAL\n";

fn load(provider: &str, connection: &str, global: &str) -> Result<Config, String> {
    let env = LoadEnv::fixed(&[], "/tmp");
    let text = BASE
        .replace("PROVIDER", provider)
        .replace("CONNECTION", connection)
        .replace("GLOBAL", global);
    from_str(&text, Path::new("t.toml"), &env).map_err(|e| e.to_string())
}

#[test]
fn rate_limit_cooldown_is_unset_by_default_and_read_at_every_level() {
    let cfg = load("", "", "").unwrap();
    assert_eq!(cfg.resilience.connection_cooldown.rate_limit_cooldown, None);
    assert_eq!(cfg.providers[0].rate_limit_cooldown, None);
    assert_eq!(cfg.providers[0].connections[0].rate_limit_cooldown, None);
    let cfg = load(
        "rate_limit_cooldown = \"45s\"",
        "  rate_limit_cooldown = \"20s\"",
        "rate_limit_cooldown = \"2m\"",
    )
    .unwrap();
    let secs = Duration::from_secs;
    assert_eq!(
        cfg.resilience.connection_cooldown.rate_limit_cooldown,
        Some(secs(120))
    );
    assert_eq!(cfg.providers[0].rate_limit_cooldown, Some(secs(45)));
    assert_eq!(
        cfg.providers[0].connections[0].rate_limit_cooldown,
        Some(secs(20))
    );
    for edge in ["1s", "6h"] {
        let line = format!("  rate_limit_cooldown = \"{edge}\"");
        assert!(load("", &line, "").is_ok(), "{edge} is in range");
    }
}

#[test]
fn rate_limit_cooldown_out_of_range_names_file_key_and_fix() {
    #[rustfmt::skip]
    let rows = [
        ("", "  rate_limit_cooldown = \"500ms\"", "", "providers.p.connections.c.rate_limit_cooldown: '500ms' is outside 1s–6h"),
        ("", "  rate_limit_cooldown = \"0s\"", "", "providers.p.connections.c.rate_limit_cooldown: '0s' is outside 1s–6h"),
        ("rate_limit_cooldown = \"7h\"", "", "", "providers.p.rate_limit_cooldown: '7h' is outside 1s–6h"),
        ("", "", "rate_limit_cooldown = \"soon\"", "resilience.connection_cooldown.rate_limit_cooldown: 'soon' is not a duration"),
        // Far past u64 seconds: a clear message, no overflow.
        ("", "  rate_limit_cooldown = \"300000000000y\"", "", "providers.p.connections.c.rate_limit_cooldown: '300000000000y'"),
    ];
    for (provider, connection, global, want) in rows {
        let err = load(provider, connection, global).unwrap_err();
        assert!(
            err.contains("t.toml") && err.contains(want),
            "{want}\n{err}"
        );
        assert!(err.contains("\"1s\" to \"6h\""), "names the fix: {err}");
    }
}

#[test]
fn concurrency_markers_default_and_are_validated_like_the_other_lists() {
    let cfg = load("", "", "").unwrap();
    assert_eq!(
        cfg.resilience.connection_cooldown.concurrency_markers,
        strings(&DEFAULT_CONCURRENCY_MARKERS)
    );
    assert!(
        DEFAULT_CONCURRENCY_MARKERS.contains(&"并发数过高")
            && DEFAULT_CONCURRENCY_MARKERS.contains(&"too many concurrent requests")
    );
    let cfg = load("", "", "concurrency_markers = [\"max parallel\"]").unwrap();
    assert_eq!(
        cfg.resilience.connection_cooldown.concurrency_markers,
        vec!["max parallel".to_string()]
    );
    let err = load("", "", "concurrency_markers = [\"busy\", \" \"]").unwrap_err();
    assert!(
        err.contains("resilience.connection_cooldown.concurrency_markers")
            && err.contains("empty marker"),
        "{err}"
    );
}
