//! `Upstreams`: one pooled hyper-util client per provider (rustls TLS, HTTP/1.1 and HTTP/2 via
//! ALPN, `TCP_NODELAY`, the provider's connect timeout), and upstream URL building.

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

/// Per-provider clients and URL prefixes, indexed like `Config::providers`.
pub struct Upstreams {
    clients: Vec<UpstreamClient>,
    prefixes: Vec<String>,
}

/// Idle pooled connections are closed after this long.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

impl Upstreams {
    /// Builds one client per provider. Fails only if TLS cannot be set up.
    pub fn new(cfg: &Config) -> Result<Self, String> {
        let mut clients = Vec::with_capacity(cfg.providers.len());
        let mut prefixes = Vec::with_capacity(cfg.providers.len());
        for p in &cfg.providers {
            clients.push(build_client(p)?);
            prefixes.push(prefix(p));
        }
        Ok(Self { clients, prefixes })
    }

    /// The client for provider index `i`.
    pub fn client(&self, i: usize) -> Option<&UpstreamClient> {
        self.clients.get(i)
    }

    /// The upstream URI for provider `i` and a client `path_and_query` such as
    /// `/v1/messages?beta=true`.
    pub fn uri(&self, i: usize, path_and_query: &str) -> Result<http::Uri, String> {
        let prefix = self.prefixes.get(i).ok_or("unknown provider")?;
        join(prefix, path_and_query)
            .parse::<http::Uri>()
            .map_err(|e| e.to_string())
    }
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

/// `scheme://authority/base-path` without a trailing slash.
fn prefix(p: &Provider) -> String {
    let u = &p.base_url;
    let scheme = u.scheme_str().unwrap_or("https");
    let auth = u.authority().map(|a| a.as_str()).unwrap_or("");
    let path = u.path().trim_end_matches('/');
    format!("{scheme}://{auth}{path}")
}

/// Joins a base prefix and a route; a base already ending in `/v1` is not doubled.
fn join(prefix: &str, path_and_query: &str) -> String {
    if prefix.ends_with("/v1") && path_and_query.starts_with("/v1/") {
        format!("{}{}", prefix, &path_and_query[3..])
    } else {
        format!("{prefix}{path_and_query}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
