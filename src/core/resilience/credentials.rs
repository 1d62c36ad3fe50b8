//! Credential fingerprints: a terminal connection state (`banned`, `expired`,
//! `credits_exhausted`) ends when the connection's credential changes (§2 "Terminal
//! states").
//!
//! sluice never stores a key or a plain hash of one. It keeps a random per-install secret in
//! a file beside the database (`store::secret`) (32 bytes, created with mode 0600) and stores, per
//! injected connection, `HMAC-SHA-256(secret, provider \0 connection \0 key)` as hex in the
//! `settings` row [`FINGERPRINTS_KEY`]. At startup a connection whose fingerprint differs from
//! the saved one has its terminal state reset; with no saved fingerprint (first start) nothing
//! is reset. Passthrough connections carry no credential of their own and are skipped.

use crate::config::keys::{ConnKey, KeyDiff};
use std::collections::BTreeMap;

use ring::hmac;

use crate::config::{Auth, Config};
use crate::store::StateWrite;
use crate::store::secret::{install_secret, secret_path};

/// The `settings` row holding the fingerprints (`{"provider/connection": "hex"}`).
pub const FINGERPRINTS_KEY: &str = "credential_fingerprints";
/// Fingerprints by `provider/connection`.
pub type Fingerprints = BTreeMap<String, String>;

/// `HMAC-SHA-256(secret, provider \0 connection \0 key)` as lowercase hex.
pub fn fingerprint(secret: &[u8], provider: &str, connection: &str, key: &str) -> String {
    let k = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut ctx = hmac::Context::with_key(&k);
    for part in [
        provider.as_bytes(),
        b"\0",
        connection.as_bytes(),
        b"\0",
        key.as_bytes(),
    ] {
        ctx.update(part);
    }
    ctx.sign()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The current fingerprint of every injected connection, by `(provider, connection)` index
/// and by `provider/connection` name.
pub fn current(cfg: &Config, secret: &[u8]) -> (Vec<(usize, usize, String)>, Fingerprints) {
    let mut indexed = Vec::new();
    let mut named = Fingerprints::new();
    for (i, p) in cfg.providers.iter().enumerate() {
        for (j, c) in p.connections.iter().enumerate() {
            if let Auth::Key { secret: key, .. } = &c.auth {
                let fp = fingerprint(secret, &p.id, &c.id, key.expose());
                named.insert(format!("{}/{}", p.id, c.id), fp.clone());
                indexed.push((i, j, fp));
            }
        }
    }
    (indexed, named)
}

/// The connections whose saved fingerprint exists and differs from the current one.
pub fn changed(
    current: &[(usize, usize, String)],
    cfg: &Config,
    saved: &Fingerprints,
) -> Vec<(usize, usize)> {
    current
        .iter()
        .filter(|(i, j, fp)| {
            let name = format!(
                "{}/{}",
                cfg.providers[*i].id, cfg.providers[*i].connections[*j].id
            );
            saved.get(&name).is_some_and(|old| old != fp)
        })
        .map(|(i, j, _)| (*i, *j))
        .collect()
}

/// At startup: resets the terminal state of every connection whose credential changed since
/// the fingerprints in `settings` were saved, and returns the store writes (the reset
/// connection rows and the new fingerprints row). Problems with the secret file are logged;
/// nothing is reset then.
pub(crate) fn reconcile(
    res: &mut crate::core::resilience::ResState,
    cfg: &Config,
    settings: &[crate::store::SettingRow],
    tm: &crate::core::resilience::persist::TimeMap,
) -> Vec<crate::store::StateWrite> {
    use crate::store::SettingRow;
    let secret = match install_secret(&secret_path(&cfg.store.path)) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "credential fingerprints unavailable; terminal connection states are kept");
            return Vec::new();
        }
    };
    let saved: Fingerprints = settings
        .iter()
        .find(|r| r.key == FINGERPRINTS_KEY)
        .and_then(|r| serde_json::from_str(&r.value_json).ok())
        .unwrap_or_default();
    let (now_fps, named) = current(cfg, &secret);
    let mut writes = Vec::new();
    for (i, j) in changed(&now_fps, cfg, &saved) {
        let (p, c) = (&cfg.providers[i], &cfg.providers[i].connections[j]);
        writes.extend(forget_account(
            res,
            cfg.keys.connection(i, j),
            &p.id,
            &c.id,
            tm,
        ));
    }
    if named != saved {
        writes.push(StateWrite::Setting(SettingRow {
            key: FINGERPRINTS_KEY.into(),
            value_json: serde_json::to_string(&named).unwrap_or_else(|_| "{}".into()),
            updated_at_unix_ms: tm.wall_ms(),
        }));
    }
    writes
}

/// A connection's credential changed (at a start or by a reload): a new key is a new
/// account, so its saved headroom, low-priority lane and session-limit reset record are forgotten and a terminal state
/// (`banned`, `expired`, `credits_exhausted`) is cleared. Returns the store writes.
fn forget_account(
    res: &mut crate::core::resilience::ResState,
    key: ConnKey,
    provider: &str,
    connection: &str,
    tm: &crate::core::resilience::persist::TimeMap,
) -> Vec<StateWrite> {
    let mut writes: Vec<StateWrite> = drop_headroom(res, key, provider, connection)
        .into_iter()
        .chain(drop_lane(res, key, provider, connection))
        .chain(crate::core::quota::limit_reset::drop_record(
            res, key, provider, connection,
        ))
        .collect();
    if let Some(cd) = res
        .providers
        .get_mut(key.provider)
        .and_then(|x| x.connections.get_mut(key.slot))
        && cd.reset_terminal()
    {
        tracing::info!(
            provider,
            connection,
            "credential changed: terminal state cleared"
        );
        writes.push(StateWrite::Connection(
            crate::core::resilience::persist::connection_row(
                provider,
                connection,
                &cd.persist(),
                tm,
            ),
        ));
    }
    writes
}

/// After a live reload (the state already following `new`'s keys, `diff` from `old`): a kept
/// connection whose injected key changed is treated as startup treats a changed key — its
/// terminal state is reset and its saved headroom dropped. Returns the store writes,
/// including the new fingerprints row when `secret` (the per-install secret, read by the caller
/// before it took any lock; `None` without a store) is given (so the next start compares
/// against the key in use, not the one replaced). New connections are not reset.
pub(crate) fn reconcile_reload(
    res: &mut crate::core::resilience::ResState,
    old: &Config,
    new: &Config,
    diff: &KeyDiff,
    tm: &crate::core::resilience::persist::TimeMap,
    secret: Option<&std::io::Result<Vec<u8>>>,
) -> Vec<crate::store::StateWrite> {
    let key = |a: &Auth| match a {
        Auth::Key { secret, .. } => Some(secret.expose().to_owned()),
        Auth::Passthrough => None,
    };
    let mut writes = Vec::new();
    let mut any = false;
    for (i, p) in new.providers.iter().enumerate() {
        for (c, k) in p.connections.iter().zip(new.keys.connections_of(i)) {
            let Some((oi, oj)) = old.keys.position(*k) else {
                continue;
            };
            let Some(was) = old.providers.get(oi).and_then(|p| p.connections.get(oj)) else {
                continue;
            };
            let before = key(&was.auth);
            let now = key(&c.auth);
            if before == now || now.is_none() {
                any |= before != now;
                continue;
            }
            any = true;
            writes.extend(forget_account(res, *k, &p.id, &c.id, tm));
        }
    }
    let layout_changed = !diff.is_empty();
    if let Some(secret) = secret
        && (any || layout_changed)
    {
        match secret {
            Ok(secret) => writes.push(crate::store::StateWrite::Setting(
                crate::store::SettingRow {
                    key: FINGERPRINTS_KEY.into(),
                    value_json: serde_json::to_string(&current(new, secret).1)
                        .unwrap_or_else(|_| "{}".into()),
                    updated_at_unix_ms: tm.wall_ms(),
                },
            )),
            Err(e) => {
                tracing::warn!(error = %e, "credential fingerprints unavailable; not updated on reload");
            }
        }
    }
    writes
}

/// A new credential has a new quota: forgets the saved headroom of connection `key` and
/// returns the write that deletes its `settings` row (`None` when nothing was known).
fn drop_headroom(
    res: &mut crate::core::resilience::ResState,
    key: ConnKey,
    provider: &str,
    connection: &str,
) -> Option<crate::store::StateWrite> {
    let h = res
        .providers
        .get_mut(key.provider)?
        .headroom
        .get_mut(key.slot)?;
    if h.state.is_empty() {
        return None;
    }
    h.clear();
    tracing::info!(provider = %provider, connection = %connection, "credential changed: saved quota headroom dropped");
    Some(crate::store::StateWrite::DeleteSetting {
        key: crate::core::quota::headroom::settings_key(provider, connection),
    })
}

/// A new credential is a new account: forgets the saved low-priority lane of connection
/// `key` and returns the write that deletes its `settings` row (`None` when none).
fn drop_lane(
    res: &mut crate::core::resilience::ResState,
    key: ConnKey,
    provider: &str,
    connection: &str,
) -> Option<crate::store::StateWrite> {
    let slot = res
        .providers
        .get_mut(key.provider)?
        .lanes
        .get_mut(key.slot)?;
    slot.lane.take()?;
    tracing::info!(provider = %provider, connection = %connection, "credential changed: saved low-priority lane dropped");
    Some(crate::store::StateWrite::DeleteSetting {
        key: crate::core::quota::lane::settings_key(provider, connection),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn fingerprints_are_keyed_and_never_contain_the_key() {
        let a = fingerprint(&[7u8; 32], "p", "k1", "sk-secret-value");
        assert_eq!(a.len(), 64);
        assert!(!a.contains("sk-secret"));
        assert_eq!(a, fingerprint(&[7u8; 32], "p", "k1", "sk-secret-value"));
        assert_ne!(
            a,
            fingerprint(&[8u8; 32], "p", "k1", "sk-secret-value"),
            "secret matters"
        );
        assert_ne!(
            a,
            fingerprint(&[7u8; 32], "p", "k2", "sk-secret-value"),
            "id matters"
        );
        assert_ne!(
            a,
            fingerprint(&[7u8; 32], "p", "k1", "sk-other"),
            "key matters"
        );
    }

    #[test]
    fn a_changed_credential_drops_saved_headroom_and_lane_and_their_rows() {
        use crate::clock::{Clock, ManualClock};
        use crate::store::{SettingRow, StateWrite};
        let dir = tempfile::tempdir().unwrap();
        let env = crate::config::LoadEnv::fixed(&[("KA", "sk-new-a"), ("KB", "sk-b")], dir.path());
        let text = r#"
            [[providers]]
            id = "p"
            dialect = "anthropic"
            base_url = "https://api.anthropic.com"
              [[providers.connections]]
              id = "a"
              auth = { env = "KA" }
              [[providers.connections]]
              id = "b"
              auth = { env = "KB" }
        "#;
        let cfg = crate::config::from_str(text, Path::new("t.toml"), &env).unwrap();
        let mut res = super::super::ResState::new(&cfg);
        let now_ms = 1_700_000_000_000;
        for h in &mut res.providers[0].headroom {
            assert!(h.state.observe(
                [("anthropic-ratelimit-unified-5h-utilization", "0.99")],
                None,
                now_ms
            ));
        }
        for slot in &mut res.providers[0].lanes {
            slot.give_up(now_ms);
        }
        for slot in &mut res.providers[0].limit_resets {
            slot.failed("HTTP 500", now_ms);
        }
        let secret = install_secret(&secret_path(&cfg.store.path)).unwrap();
        let mut saved = current(&cfg, &secret).1;
        saved.insert("p/a".into(), "0".repeat(64));
        let row = SettingRow {
            key: FINGERPRINTS_KEY.into(),
            value_json: serde_json::to_string(&saved).unwrap(),
            updated_at_unix_ms: now_ms,
        };
        let clock = ManualClock::new();
        let tm = super::super::persist::TimeMap::new(clock.now(), now_ms);
        let writes = reconcile(&mut res, &cfg, &[row], &tm);
        assert!(
            res.providers[0].headroom[0].state.is_empty(),
            "a's key changed: its quota readings are gone"
        );
        assert!(
            !res.providers[0].headroom[1].state.is_empty(),
            "b's key is unchanged: kept"
        );
        let deleted: Vec<&str> = writes
            .iter()
            .filter_map(|w| match w {
                StateWrite::DeleteSetting { key } => Some(key.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(deleted, vec!["headroom/p/a", "lane/p/a", "limit_reset/p/a"]);
        assert_eq!(
            res.providers[0].limit_resets[0],
            Default::default(),
            "a's limit-reset record is gone"
        );
        assert_ne!(
            res.providers[0].limit_resets[1],
            Default::default(),
            "b's is kept"
        );
        assert!(res.providers[0].lanes[0].lane.is_none(), "a's lane is gone");
        assert!(res.providers[0].lanes[1].lane.is_some(), "b's lane is kept");
    }

    #[test]
    fn a_key_changed_by_a_reload_drops_headroom_like_a_start_and_saves_the_new_fingerprints() {
        use crate::clock::{Clock, ManualClock};
        use crate::store::StateWrite;
        use crate::store::secret::{install_secret, secret_path};
        let dir = tempfile::tempdir().unwrap();
        let load = |text: &str, ka: &str| {
            let vars = [("KA", ka), ("KB", "sk-b")];
            let env = crate::config::LoadEnv::fixed(&vars, dir.path());
            crate::config::from_str(text, Path::new("t.toml"), &env).unwrap()
        };
        let conn = |id: &str, var: &str| {
            format!(
                "  [[providers.connections]]\n  id = \"{id}\"\n  auth = {{ env = \"{var}\" }}\n"
            )
        };
        let head = "[[providers]]\nid = \"p\"\ndialect = \"anthropic\"\nbase_url = \"https://api.anthropic.com\"\n";
        let mut reg = crate::config::keys::Registry::default();
        let mut old = load(
            &format!("{head}{}{}", conn("a", "KA"), conn("b", "KB")),
            "sk-old-a",
        );
        reg.stamp(&mut old);
        // A new connection in front (a and b move to positions 1 and 2, their keys stay);
        // a's key changed.
        let mut new = load(
            &format!(
                "{head}{}{}{}",
                conn("n", "KB"),
                conn("a", "KA"),
                conn("b", "KB")
            ),
            "sk-new-a",
        );
        let diff = reg.stamp(&mut new);
        let mut res = super::super::ResState::new(&old);
        let now_ms = 1_700_000_000_000;
        for h in &mut res.providers[0].headroom {
            assert!(h.state.observe(
                [("anthropic-ratelimit-unified-5h-utilization", "0.99")],
                None,
                now_ms
            ));
        }
        for slot in &mut res.providers[0].limit_resets {
            slot.failed("HTTP 500", now_ms);
        }
        res.rekey(&diff, &new);
        let clock = ManualClock::new();
        let tm = super::super::persist::TimeMap::new(clock.now(), now_ms);
        let secret = install_secret(&secret_path(&new.store.path));
        let writes = reconcile_reload(&mut res, &old, &new, &diff, &tm, Some(&secret));
        // Slots: a 0, b 1, n 2 (new).
        let lr = &res.providers[0].limit_resets;
        assert_eq!(lr[0], Default::default(), "a's limit-reset record is gone");
        assert_ne!(lr[1], Default::default(), "b's is kept");
        let h = &res.providers[0].headroom;
        assert!(h[2].state.is_empty(), "n is new");
        assert!(
            h[0].state.is_empty(),
            "a's key changed: its quota readings are gone"
        );
        assert!(!h[1].state.is_empty(), "b's key is unchanged: kept");
        let secret = install_secret(&secret_path(&new.store.path)).unwrap();
        let want = serde_json::to_string(&current(&new, &secret).1).unwrap();
        let (mut deleted, mut saved) = (Vec::new(), None);
        for w in &writes {
            match w {
                StateWrite::DeleteSetting { key } => deleted.push(key.as_str()),
                StateWrite::Setting(r) if r.key == FINGERPRINTS_KEY => saved = Some(&r.value_json),
                _ => {}
            }
        }
        assert_eq!(deleted, ["headroom/p/a", "limit_reset/p/a"]);
        assert_eq!(
            saved,
            Some(&want),
            "the next start compares against the key in use"
        );
    }

    #[test]
    fn the_install_secret_is_created_once_with_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let path = secret_path(&dir.path().join("sluice.db"));
        let first = install_secret(&path).unwrap();
        assert_eq!(first.len(), 32);
        assert_eq!(
            install_secret(&path).unwrap(),
            first,
            "read back, not replaced"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, b"short").unwrap();
        assert!(
            install_secret(&path).is_err(),
            "a damaged secret is an error"
        );
    }
}
