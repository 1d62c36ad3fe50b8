//! `Upstreams`: one pooled hyper-util client per provider (rustls TLS, HTTP/1.1 and HTTP/2 via
//! ALPN, `TCP_NODELAY`, the provider's connect timeout), and upstream URL building.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::config::keys::{Keyed, ProviderKey};
use crate::config::{Config, Provider};

/// The client type used for every upstream request.
pub type UpstreamClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Per-provider clients, by provider key. A config reload gets a new table on the first
/// attempt under it: a kept provider keeps its client (and its pooled connections) unless
/// its `base_url`, `dialect` or `connect_timeout` changed; a new one gets a new client; a
/// removed one's client goes once no request holds it.
pub struct Upstreams {
    table: RwLock<Arc<Table>>,
    /// Clients built since start (each one a new connection pool).
    built: AtomicU64,
}

/// The clients of one config generation.
struct Table {
    generation: u64,
    clients: Keyed<ProviderKey, (Key, UpstreamClient)>,
    /// Clients of providers some request still named as its config had them (a request of
    /// an older config on a provider the reload changed).
    extra: Vec<(Key, UpstreamClient)>,
}

/// What a client is built from: a provider keeps its client while these stay the same.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    id: String,
    base_url: http::Uri,
    dialect: crate::config::Dialect,
    connect_timeout: Duration,
}

impl Key {
    fn of(p: &Provider) -> Self {
        Self {
            id: p.id.clone(),
            base_url: p.base_url.clone(),
            dialect: p.dialect,
            connect_timeout: p.connect_timeout,
        }
    }

    /// Whether `p` would build this client (compared without allocating).
    fn matches(&self, p: &Provider) -> bool {
        self.id == p.id
            && self.dialect == p.dialect
            && self.connect_timeout == p.connect_timeout
            && self.base_url == p.base_url
    }
}

/// Idle pooled connections are closed after this long.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

impl Upstreams {
    /// Builds one client per provider. Fails only if TLS cannot be set up.
    pub fn new(cfg: &Config) -> Result<Self, String> {
        let built = AtomicU64::new(0);
        let table = build_table(cfg, &Keyed::default(), &built)?;
        Ok(Self {
            table: RwLock::new(Arc::new(table)),
            built,
        })
    }

    /// The client for `provider` (keyed `key`, as the request's config has it): the
    /// table's when it was built from the same settings, else one built once for those
    /// settings and kept (a request of an older config on a provider the reload changed).
    /// Fails only if TLS cannot be set up for a new client.
    pub fn client(&self, key: ProviderKey, provider: &Provider) -> Result<UpstreamClient, String> {
        let t = self.current();
        if let Some((k, c)) = t.clients.get(key)
            && k.matches(provider)
        {
            return Ok(c.clone());
        }
        if let Some((_, c)) = t.extra.iter().find(|(k, _)| k.matches(provider)) {
            return Ok(c.clone());
        }
        let client = counted(provider, &self.built)?;
        let mut w = self.table.write().unwrap_or_else(|e| e.into_inner());
        let mut extra = w.extra.clone();
        extra.push((Key::of(provider), client.clone()));
        *w = Arc::new(Table {
            generation: w.generation,
            clients: w.clients.clone(),
            extra,
        });
        Ok(client)
    }

    fn current(&self) -> Arc<Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Follows `cfg` when it is newer than the table's: a table of its providers, reusing
    /// every kept client and dropping those of removed or changed providers. The request
    /// path calls it with the config each request starts with (a read-lock check when
    /// nothing changed).
    pub fn follow(&self, cfg: &Config) -> Result<(), String> {
        if self.current().generation >= cfg.generation {
            return Ok(());
        }
        let mut w = self.table.write().unwrap_or_else(|e| e.into_inner());
        if w.generation >= cfg.generation {
            return Ok(());
        }
        let next = build_table(cfg, &w.clients, &self.built)?;
        *w = Arc::new(next);
        Ok(())
    }

    /// How many clients (connection pools) were built since start.
    pub fn built(&self) -> u64 {
        self.built.load(Ordering::Relaxed)
    }
}

/// The clients of `cfg`'s providers by key, reusing those of `kept` built from the same
/// settings.
fn build_table(
    cfg: &Config,
    kept: &Keyed<ProviderKey, (Key, UpstreamClient)>,
    built: &AtomicU64,
) -> Result<Table, String> {
    let mut clients = Keyed::default();
    for (i, p) in cfg.providers.iter().enumerate() {
        let client = match kept.values().find(|(k, _)| k.matches(p)) {
            Some((_, c)) => c.clone(),
            None => counted(p, built)?,
        };
        clients.insert(cfg.keys.provider(i), (Key::of(p), client));
    }
    Ok(Table {
        generation: cfg.generation,
        clients,
        extra: Vec::new(),
    })
}

/// The upstream URI for provider `p` and a client `path_and_query` such as
/// `/v1/messages?beta=true`.
pub fn uri(p: &Provider, path_and_query: &str) -> Result<http::Uri, String> {
    let u = &p.base_url;
    let scheme = u.scheme_str().unwrap_or("https");
    let auth = u.authority().map(|a| a.as_str()).unwrap_or("");
    let base = u.path().trim_end_matches('/');
    // One buffer, handed to the parser without another copy (this runs once per attempt).
    let mut s =
        String::with_capacity(scheme.len() + 3 + auth.len() + base.len() + path_and_query.len());
    s.push_str(scheme);
    s.push_str("://");
    s.push_str(auth);
    s.push_str(base);
    s.push_str(route_after(&s, path_and_query));
    http::Uri::try_from(s).map_err(|e| e.to_string())
}

/// [`build_client`], counted in `built`.
fn counted(p: &Provider, built: &AtomicU64) -> Result<UpstreamClient, String> {
    let c = build_client(p)?;
    built.fetch_add(1, Ordering::Relaxed);
    Ok(c)
}

fn build_client(p: &Provider) -> Result<UpstreamClient, String> {
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_nodelay(true);
    http.set_connect_timeout(Some(p.connect_timeout));
    http.set_keepalive(Some(Duration::from_secs(60)));
    let https = HttpsConnectorBuilder::new()
        .with_provider_and_webpki_roots(rustls::crypto::ring::default_provider())
        .map_err(|e| e.to_string())?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .wrap_connector(http);
    Ok(Client::builder(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .pool_idle_timeout(POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(256)
        .build(https))
}

/// What of the route `path_and_query` follows the base `prefix`
/// (`scheme://authority/base-path`): all of it, or without its `/v1` when the base already
/// ends in `/v1`, so it is not doubled.
fn route_after<'a>(prefix: &str, path_and_query: &'a str) -> &'a str {
    match path_and_query.strip_prefix("/v1") {
        Some(rest) if prefix.ends_with("/v1") && rest.starts_with('/') => rest,
        _ => path_and_query,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{LoadEnv, from_str};

    /// Providers `(id, base_url)`, stamped with `reg`'s keys and generation `generation`.
    fn cfg(
        reg: &mut crate::config::keys::Registry,
        providers: &[(&str, &str)],
        generation: u64,
    ) -> Config {
        let text: String = providers
            .iter()
            .map(|(id, url)| format!("[[providers]]\nid = \"{id}\"\ndialect = \"anthropic\"\nbase_url = \"{url}\"\n  [[providers.connections]]\n  id = \"{id}-c\"\n  auth = \"passthrough\"\n"))
            .collect();
        let mut c = from_str(
            &text,
            std::path::Path::new("t.toml"),
            &LoadEnv::fixed(&[], "/tmp"),
        )
        .unwrap();
        reg.stamp(&mut c);
        c.generation = generation;
        c
    }

    #[test]
    fn a_new_config_keeps_the_clients_of_unchanged_providers() {
        let mut reg = crate::config::keys::Registry::default();
        let old = cfg(
            &mut reg,
            &[("a", "http://127.0.0.1:1"), ("b", "http://127.0.0.1:2")],
            0,
        );
        let up = Upstreams::new(&old).unwrap();
        assert_eq!(up.built(), 2);
        // "n" is new and goes first, "b" moved and changed its URL, "a" is kept as it was.
        let new = cfg(
            &mut reg,
            &[
                ("n", "http://127.0.0.1:3"),
                ("a", "http://127.0.0.1:1"),
                ("b", "http://127.0.0.1:4"),
            ],
            1,
        );
        up.follow(&new).unwrap();
        assert_eq!(
            up.built(),
            4,
            "one client for n and one for the changed b; a kept its own"
        );
        up.follow(&new).unwrap();
        assert_eq!(
            up.built(),
            4,
            "following the same config again builds nothing"
        );
        // A request of the old config still reaches "a" by key (its kept client), and the
        // old "b" (its URL replaced) gets a client of its own once.
        up.client(old.keys.provider(0), &old.providers[0]).unwrap();
        assert_eq!(up.built(), 4);
        up.client(old.keys.provider(1), &old.providers[1]).unwrap();
        up.client(old.keys.provider(1), &old.providers[1]).unwrap();
        assert_eq!(up.built(), 5);
        assert_eq!(
            uri(&new.providers[0], "/v1/messages").unwrap().to_string(),
            "http://127.0.0.1:3/v1/messages"
        );
    }

    fn join(prefix: &str, path_and_query: &str) -> String {
        format!("{prefix}{}", route_after(prefix, path_and_query))
    }

    #[test]
    fn joins_base_paths_without_doubling_v1() {
        assert_eq!(
            join("https://api.anthropic.com", "/v1/messages?beta=true"),
            "https://api.anthropic.com/v1/messages?beta=true"
        );
        assert_eq!(
            join("https://openrouter.ai/api", "/v1/chat/completions"),
            "https://openrouter.ai/api/v1/chat/completions"
        );
        assert_eq!(
            join("http://127.0.0.1:11434/v1", "/v1/chat/completions"),
            "http://127.0.0.1:11434/v1/chat/completions"
        );
        assert_eq!(join("http://h/v1", "/v1?x=1"), "http://h/v1/v1?x=1");
        let c = cfg(
            &mut crate::config::keys::Registry::default(),
            &[("v", "http://127.0.0.1:11434/v1/")],
            0,
        );
        assert_eq!(
            uri(&c.providers[0], "/v1/chat/completions?x=1")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:11434/v1/chat/completions?x=1"
        );
    }
}
