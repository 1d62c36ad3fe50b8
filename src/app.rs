//! Wiring: binds the listeners, starts the core publisher, the proxy and the admin API, and
//! runs the drain on shutdown. `tests/` start sluice in-process through [`start`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::clock::Clock;
use crate::config::Config;
use crate::core::Core;
use crate::core::operator::control::Control;
use crate::store::Store;

/// Why sluice could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener could not be bound.
    #[error(
        "cannot listen on {addr} ({what}): {source}; is another sluice running? change {key} in the config"
    )]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// `inference` or `admin`.
        what: &'static str,
        /// The config key to change.
        key: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The upstream HTTP client could not be built (TLS setup).
    #[error("cannot set up the upstream HTTPS client: {0}")]
    Client(String),
}

/// A running sluice.
pub struct Running {
    /// Bound inference address (the real port when the config said `:0`).
    pub listen: SocketAddr,
    /// Bound admin address.
    pub admin_listen: SocketAddr,
    /// The core (snapshots, counters).
    pub core: Core,
    /// The operator door.
    pub control: Control,
    shutdown: CancellationToken,
    hard_stop: CancellationToken,
    tasks: Vec<JoinHandle<()>>,
}

/// Binds both listeners and starts serving. Returns once both are bound.
pub async fn start(
    config: Config,
    clock: Arc<dyn Clock>,
    store: Option<Arc<Store>>,
) -> Result<Running, StartError> {
    let config = Arc::new(config);
    let listener = bind(config.server.listen, "inference", "server.listen").await?;
    let admin_listener = bind(config.admin.listen, "admin", "admin.listen").await?;
    let listen = bound_addr(
        &listener,
        config.server.listen,
        "inference",
        "server.listen",
    )?;
    let admin_listen = bound_addr(
        &admin_listener,
        config.admin.listen,
        "admin",
        "admin.listen",
    )?;

    let core = Core::new(config.clone(), clock, store);
    core.set_addrs(listen.to_string(), admin_listen.to_string());
    let shutdown = CancellationToken::new();
    let hard_stop = CancellationToken::new();
    let control = Control::new(core.clone(), shutdown.clone());
    let upstream =
        crate::proxy::attempt::upstream::Upstreams::new(&config).map_err(StartError::Client)?;
    let state = Arc::new(crate::proxy::ProxyState::new(
        core.clone(),
        upstream,
        hard_stop.clone(),
    ));
    control.set_probe(Arc::new(crate::proxy::attempt::probe::UpstreamProbe::new(
        state.clone(),
        tokio::runtime::Handle::current(),
    )));

    let tasks = vec![
        tokio::spawn(retention(core.clone(), hard_stop.clone())),
        tokio::spawn(watch_config(control.clone(), hard_stop.clone())),
        tokio::spawn(core.clone().run_publisher(hard_stop.clone())),
        tokio::spawn(crate::proxy::serve::server::serve(
            listener,
            state,
            shutdown.clone(),
            hard_stop.clone(),
        )),
        tokio::spawn(crate::admin::serve(
            admin_listener,
            control.clone(),
            hard_stop.clone(),
        )),
    ];
    tracing::info!(%listen, %admin_listen, config = %config.file.display(), "sluice listening");
    for p in crate::config::advice::advice(&config) {
        tracing::warn!(key = %p.key, fix = %p.fix, "{}", p.message);
    }
    Ok(Running {
        listen,
        admin_listen,
        core,
        control,
        shutdown,
        hard_stop,
        tasks,
    })
}

/// Binds `addr`; a failure names the listener (`what`) and the config `key` to change.
async fn bind(
    addr: SocketAddr,
    what: &'static str,
    key: &'static str,
) -> Result<TcpListener, StartError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| StartError::Bind {
            addr,
            what,
            key,
            source,
        })
}

/// The address `listener` is bound to (the real port when `addr` said `:0`); a failure names
/// the configured `addr`, the listener (`what`) and the config `key` to change.
fn bound_addr(
    listener: &TcpListener,
    addr: SocketAddr,
    what: &'static str,
    key: &'static str,
) -> Result<SocketAddr, StartError> {
    listener.local_addr().map_err(|source| StartError::Bind {
        addr,
        what,
        key,
        source,
    })
}

/// Every 5 minutes until `stop`: ages out old request rows and expired lockouts/pins during
/// long runs.
async fn retention(core: Core, stop: CancellationToken) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(300)) => {}
            () = stop.cancelled() => return,
        }
        if let Some(store) = core.store() {
            store.enforce_retention(crate::clock::unix_ms(core.clock().wall()));
        }
    }
}

/// How often `[server] watch_config` looks at the config file's modification time.
pub const WATCH_CONFIG_EVERY: Duration = Duration::from_secs(2);

/// `[server] watch_config`: reloads through [`Control::reload_config`] when the file's
/// modification time changes (the key is read on every poll, so a reload can turn it on or
/// off). A refused reload is logged and not retried until the file changes again.
fn watch_config(control: Control, stop: CancellationToken) -> impl Future<Output = ()> {
    let mtime = |c: &Control| {
        std::fs::metadata(&c.config().file)
            .and_then(|m| m.modified())
            .ok()
    };
    // Read now, not when the task first runs: an edit right after start must count.
    let mut last = mtime(&control);
    async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(WATCH_CONFIG_EVERY) => {}
                () = stop.cancelled() => return,
            }
            let now = mtime(&control);
            if !control.config().server.watch_config || now == last {
                last = now;
                continue;
            }
            last = now;
            let c = control.clone();
            // The reload reads the file: keep that off the async workers.
            let _ = tokio::task::spawn_blocking(move || c.reload_config()).await;
        }
    }
}

impl Running {
    /// The token that starts shutdown when cancelled (Ctrl-C, console `q`).
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Waits until shutdown is requested, then drains (see [`Running::stop`]).
    pub async fn wait(self) {
        self.shutdown.cancelled().await;
        self.stop().await;
    }

    /// Stops accepting, flips `/readyz` to 503, lets in-flight requests finish for up to
    /// `server.drain_timeout`, then ends the rest (streams get a well-formed error event).
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.core.set_draining();
        let deadline = self.core.config().server.drain_timeout;
        let waited = tokio::time::timeout(deadline, async {
            while self.core.in_flight() > 0 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        if waited.is_err() {
            tracing::warn!(
                in_flight = self.core.in_flight(),
                "drain deadline passed; ending remaining streams"
            );
        }
        self.hard_stop.cancel();
        // Give ended streams a moment to flush their final event.
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while self.core.in_flight() > 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        for t in self.tasks {
            t.abort();
        }
        if let Some(store) = self.core.store() {
            store.flush();
        }
        tracing::info!("sluice stopped");
    }
}

/// The resolved routing table printed by `sluice check`: listeners, providers with their
/// connections (auth mode only, never keys), combos, and where a plain model goes per route.
pub fn routing_table(cfg: &Config) -> String {
    use std::fmt::Write as _;
    let mut o = String::new();
    let _ = writeln!(o, "config:  {} (valid)", cfg.file.display());
    let token = match &cfg.admin.token_env {
        Some(v) => format!("bearer token from ${v}"),
        None => "no token".into(),
    };
    let _ = writeln!(
        o,
        "listen:  {}   admin: {} ({token})",
        cfg.server.listen, cfg.admin.listen
    );
    let _ = writeln!(o, "store:   {}", cfg.store.path.display());
    let _ = writeln!(o, "logs:    {}", cfg.log.dir.display());
    let _ = writeln!(o, "\nproviders:");
    for p in &cfg.providers {
        let conns: Vec<String> = p
            .connections
            .iter()
            .map(|c| format!("{} ({})", c.id, c.auth.describe()))
            .collect();
        let _ = writeln!(
            o,
            "  {:<14} {:<9} {:<40} profile={:<7} connections: {}",
            p.id,
            p.dialect.as_str(),
            p.base_url.to_string().trim_end_matches('/'),
            p.profile.as_str(),
            conns.join(", ")
        );
    }
    if !cfg.combos.is_empty() {
        let _ = writeln!(o, "\ncombos:");
        for c in &cfg.combos {
            let t: Vec<String> = c.targets.iter().map(ToString::to_string).collect();
            let _ = writeln!(
                o,
                "  {:<14} ({}) -> {}",
                c.name,
                c.strategy.as_str(),
                t.join(", ")
            );
        }
    }
    let _ = writeln!(o, "\nrouting of a model no combo names:");
    for (routes, d) in [
        (
            "/v1/messages, /v1/messages/count_tokens",
            crate::config::Dialect::Anthropic,
        ),
        (
            "/v1/chat/completions, /v1/responses",
            crate::config::Dialect::OpenAi,
        ),
    ] {
        let dest = cfg
            .default_providers
            .iter()
            .filter_map(|id| cfg.provider(id))
            .find(|p| p.dialect == d)
            .map(|p| format!("{} (model unchanged)", p.id))
            .unwrap_or_else(|| "nothing: answered 404 no_executable_targets".into());
        let _ = writeln!(o, "  {routes:<42} [{}] -> {dest}", d.as_str());
    }
    o
}

/// The newest `limit` rows of the state database's `request_log`, newest first, as the
/// console's Requests panel shows them (the rows from before this start). They carry no
/// attempt details; a read error logs a warning and gives none.
pub fn request_history(store: &Store, limit: usize) -> Vec<crate::snapshot::RequestView> {
    let rows = match store.recent_requests(limit) {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the request log for the console");
            return Vec::new();
        }
    };
    rows.into_iter()
        .map(crate::snapshot::RequestView::from_log)
        .collect()
}

#[cfg(test)]
mod history_tests {
    use crate::store::{RequestLogRow, Store};

    #[test]
    fn request_history_reads_the_newest_rows_first_and_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = crate::config::StoreConfig {
            path: dir.path().join("s.db"),
            request_log_max_rows: 100,
            request_log_max_age: std::time::Duration::from_secs(3600),
        };
        let store = Store::open(&cfg).unwrap();
        for n in 0..5u64 {
            store.record_request(RequestLogRow {
                tokens_in: None,
                tokens_out: None,
                at_unix_ms: 1_700_000_000_000 + n,
                route: "/v1/messages".into(),
                client_model: format!("m{n}"),
                target: "anthropic".into(),
                status: 200,
                latency_ms: 10,
                attempts: 1,
                bytes: 5,
                outcome: "ok".into(),
                translated: String::new(),
                injected: false,
                continued: false,
            });
        }
        store.flush();
        let rows = super::request_history(&store, 3);
        let models: Vec<&str> = rows.iter().map(|r| r.client_model.as_str()).collect();
        assert_eq!(models, ["m4", "m3", "m2"]);
        assert_eq!((rows[0].status, rows[0].outcome.as_str()), (200, "ok"));
    }
}
