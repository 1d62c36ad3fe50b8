//! Advice on a valid config: combinations that load and serve but rarely do what the operator
//! meant. Printed as warnings by `sluice check` and logged once at startup; never an error.

use super::{Auth, Config, Problem};

/// Warnings for `cfg`, each naming the key and what to do. Today: `passthrough` connections
/// while `[server] client_keys_env` requires client keys (the client's key header then holds
/// sluice's client key, which is never forwarded, so the upstream sees no credential unless
/// the client sends its own in the other header).
pub fn advice(cfg: &Config) -> Vec<Problem> {
    let Some(keys_env) = cfg.server.client_keys_env.as_deref() else {
        return Vec::new();
    };
    cfg.providers
        .iter()
        .flat_map(|p| p.connections.iter().map(move |c| (p, c)))
        .filter(|(_, c)| matches!(c.auth, Auth::Passthrough))
        .map(|(p, c)| Problem {
            key: format!("providers.{}.connections.{}.auth", p.id, c.id),
            message: format!(
                "'passthrough' while server.client_keys_env = '{keys_env}' requires client keys: the header carrying the sluice client key is not forwarded, so this provider gets no credential unless clients send their own in the other header"
            ),
            fix: "give the connection its own key with auth = { env = \"VAR\" }, or have clients send the sluice key in x-api-key and their provider key in Authorization: Bearer (or the other way round)".into(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{LoadEnv, from_str};

    const BASE: &str = "[[providers]]\nid = \"a\"\ndialect = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n  [[providers.connections]]\n  id = \"mine\"\n  auth = \"passthrough\"\n  [[providers.connections]]\n  id = \"k\"\n  auth = { env = \"K\" }\n";

    #[test]
    fn passthrough_with_client_keys_is_advised_against() {
        let env = LoadEnv::fixed(&[("CK", "c1"), ("K", "k")], "/tmp");
        let text = format!("[server]\nclient_keys_env = \"CK\"\n{BASE}");
        let cfg = from_str(&text, Path::new("t.toml"), &env).unwrap();
        let a = super::advice(&cfg);
        assert_eq!(a.len(), 1, "{a:?}");
        assert_eq!(a[0].key, "providers.a.connections.mine.auth");
        assert!(
            a[0].message.contains("client_keys_env = 'CK'"),
            "{}",
            a[0].message
        );
        let cfg = from_str(BASE, Path::new("t.toml"), &env).unwrap();
        assert!(super::advice(&cfg).is_empty());
    }
}
