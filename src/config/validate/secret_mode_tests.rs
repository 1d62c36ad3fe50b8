//! `SecretMode::Optional` (check / status / env without exported secrets), typo hints for
//! unknown keys, and `localhost:port` listen addresses.

use super::*;

const TEXT: &str = "[admin]\ntoken_env = \"T\"\n[[providers]]\nid = \"o\"\ndialect = \"openai\"\nbase_url = \"https://x\"\n[[providers.connections]]\nid = \"k\"\nauth = { env = \"K\" }\n";

#[test]
fn optional_secrets_are_warnings_not_problems() {
    let none = LoadEnv::fixed(&[], "/d");
    let err = from_str(TEXT, Path::new("s.toml"), &none)
        .unwrap_err()
        .to_string();
    assert!(err.contains("environment variable 'K' is not set"), "{err}");
    let l = from_str_with(TEXT, Path::new("s.toml"), &none, SecretMode::Optional).unwrap();
    let keys: Vec<&str> = l.missing_secrets.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(
        keys,
        ["admin.token_env", "providers.o.connections.k.auth.env"]
    );
    assert!(
        matches!(&l.config.providers[0].connections[0].auth, Auth::Key { env, .. } if env == "K"),
        "the connection keeps its env-var auth"
    );
    let vars = [("K", "sk-1"), ("T", "tok")];
    let all = LoadEnv::fixed(&vars, "/d");
    let l = from_str_with(TEXT, Path::new("s.toml"), &all, SecretMode::Optional).unwrap();
    assert!(l.missing_secrets.is_empty());
    assert_eq!(
        l.config.admin.token.as_ref().map(Secret::expose),
        Some("tok")
    );
}

#[test]
fn optional_mode_still_reports_real_problems() {
    let bad = TEXT.replace("https://x", "htp://x");
    let none = LoadEnv::fixed(&[], "/d");
    let err = from_str_with(&bad, Path::new("s.toml"), &none, SecretMode::Optional)
        .unwrap_err()
        .to_string();
    assert!(err.contains("base_url"), "{err}");
    assert!(!err.contains("'K' is not set"), "{err}");
}

#[test]
fn unknown_key_gets_the_nearest_expected_key() {
    let reason = "unknown field `base_uri`, expected one of `id`, `dialect`, `base_url`, `profile`";
    assert_eq!(nearest_key("base_uri", reason), Some("base_url"));
    assert_eq!(
        nearest_key("zzzzzz", reason),
        None,
        "nothing close: no hint"
    );
    assert_eq!(nearest_key("x", "unknown field `x`"), None);
    let text = TEXT.replace("base_url", "base_uri");
    let err = from_str(&text, Path::new("s.toml"), &LoadEnv::fixed(&[], "/d"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("hint: did you mean base_url?"), "{err}");
}

#[test]
fn localhost_listen_is_loopback() {
    assert_eq!(
        parse_listen("localhost:8787"),
        Some(SocketAddr::from(([127, 0, 0, 1], 8787)))
    );
    assert_eq!(
        parse_listen("LOCALHOST:1"),
        Some(SocketAddr::from(([127, 0, 0, 1], 1)))
    );
    assert_eq!(parse_listen("[::1]:9").map(|a| a.port()), Some(9));
    for bad in ["localhost", "localhost:x", "example.com:80", "8787", ""] {
        assert_eq!(parse_listen(bad), None, "{bad}");
    }
    let text = format!("[server]\nlisten = \"localhost:9000\"\n{TEXT}");
    let vars = [("K", "sk-1"), ("T", "tok")];
    let cfg = from_str(&text, Path::new("s.toml"), &LoadEnv::fixed(&vars, "/d")).unwrap();
    assert_eq!(cfg.server.listen.to_string(), "127.0.0.1:9000");
}
