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

use crate::config::{Config, Provider};

/// The client type used for every upstream request.
pub type UpstreamClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Per-provider clients, indexed like `Config::providers` of the layout they were built for.
/// A config reload that changes the provider layout gets a new table on the first attempt
/// under it: a kept provider keeps its client (and its pooled connections) unless its
/// `base_url`, `dialect` or `connect_timeout` changed; a new one gets a new client; a
/// removed one's client goes once no request holds it.
pub struct Upstreams {
    table: RwLock<Arc<Table>>,
    /// Clients built since start (each one a new connection pool).
    built: AtomicU64,
}

/// The clients of one layout generation.
struct Table {
    layout: u64,
    clients: Vec<(Key, UpstreamClient)>,
}

/// What a client is built from: a provider keeps its client while these stay the same.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Key {
    id: String,
    base_url: String,
    dialect: crate::config::Dialect,
    connect_timeout: Duration,
}

impl Key {
    fn of(p: &Provider) -> Self {
        Self {
            id: p.id.clone(),
            base_url: p.base_url.to_string(),
            dialect: p.dialect,
            connect_timeout: p.connect_timeout,
        }
    }
}

/// Idle pooled connections are closed after this long.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

impl Upstreams {
    /// Builds one client per provider. Fails only if TLS cannot be set up.
    pub fn new(cfg: &Config) -> Result<Self, String> {
        let built = AtomicU64::new(0);
        let table = build_table(cfg, &[], &built)?;
        Ok(Self {
            table: RwLock::new(Arc::new(table)),
            built,
        })
    }

    /// The client for `provider`, index `i` of layout generation `layout` (the request's
    /// config): the table's by index when the layout is current, else the client of the same
    /// provider by key (built once and kept when there is none yet: a request of an older
    /// layout on a provider the reload changed). Fails only if TLS cannot be set up for a new
    /// client.
    pub fn client(
        &self,
        layout: u64,
        i: usize,
        provider: &Provider,
    ) -> Result<UpstreamClient, String> {
        let t = self.current();
        if t.layout == layout
            && let Some((_, c)) = t.clients.get(i)
        {
            return Ok(c.clone());
        }
        let key = Key::of(provider);
        if let Some((_, c)) = t.clients.iter().find(|(k, _)| *k == key) {
            return Ok(c.clone());
        }
        let client = counted(provider, &self.built)?;
        let mut w = self.table.write().unwrap_or_else(|e| e.into_inner());
        let mut clients = w.clients.clone();
        clients.push((key, client.clone()));
        *w = Arc::new(Table {
            layout: w.layout,
            clients,
        });
        Ok(client)
    }

    fn current(&self) -> Arc<Table> {
        self.table.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Follows `cfg`'s layout when it is newer than the table's: a table in its order,
    /// reusing every kept client and dropping those of removed or changed providers. The
    /// request path calls it with the config each request starts with (a read-lock check
    /// when nothing changed).
    pub fn follow(&self, cfg: &Config) -> Result<(), String> {
        if self.current().layout >= cfg.layout {
            return Ok(());
        }
        let mut w = self.table.write().unwrap_or_else(|e| e.into_inner());
        if w.layout >= cfg.layout {
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

/// The clients of `cfg`'s providers in order, reusing those of `kept` with the same key.
fn build_table(
    cfg: &Config,
    kept: &[(Key, UpstreamClient)],
    built: &AtomicU64,
) -> Result<Table, String> {
    let mut clients = Vec::with_capacity(cfg.providers.len());
    for p in &cfg.providers {
        let key = Key::of(p);
        let client = match kept.iter().find(|(k, _)| *k == key) {
            Some((_, c)) => c.clone(),
            None => counted(p, built)?,
        };
        clients.push((key, client));
    }
    Ok(Table {
        layout: cfg.layout,
        clients,
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

    fn cfg(providers: &[(&str, &str)], layout: u64) -> Config {
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
        c.layout = layout;
        c
    }

    #[test]
    fn a_new_layout_keeps_the_clients_of_unchanged_providers() {
        let old = cfg(
            &[("a", "http://127.0.0.1:1"), ("b", "http://127.0.0.1:2")],
            0,
        );
        let up = Upstreams::new(&old).unwrap();
        assert_eq!(up.built(), 2);
        // "n" is new and goes first, "b" moved and changed its URL, "a" is kept as it was.
        let new = cfg(
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
            "following the same layout again builds nothing"
        );
        // A request of the old layout still reaches "a" by key (its kept client), and the
        // old "b" (its URL replaced) gets a client of its own once.
        up.client(0, 0, &old.providers[0]).unwrap();
        assert_eq!(up.built(), 4);
        up.client(0, 1, &old.providers[1]).unwrap();
        up.client(0, 1, &old.providers[1]).unwrap();
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
        let c = cfg(&[("v", "http://127.0.0.1:11434/v1/")], 0);
        assert_eq!(
            uri(&c.providers[0], "/v1/chat/completions?x=1")
                .unwrap()
                .to_string(),
            "http://127.0.0.1:11434/v1/chat/completions?x=1"
        );
    }
}
