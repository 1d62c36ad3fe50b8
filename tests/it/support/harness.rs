//! `Sluice`: sluice started in-process (lib) on `127.0.0.1:0` with a test config.
//!
//! Tests write only the parts of the config they care about; the harness fills in
//! `[server] listen`, `[admin] listen`, `[store] path` and `[log] dir` (under a temp dir) when
//! absent. Placeholders: `{MOCK}` (via [`fill`]) and `{CLOSED}` (a URL whose port refuses
//! connections) are substituted in the text.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use sluice::app::Running;
use sluice::clock::{Clock, ManualClock, SystemClock};
use sluice::config::LoadEnv;
use sluice::core::Core;
use sluice::snapshot::Snapshot;
use tempfile::TempDir;

use super::mock_upstream::MockUpstream;

/// Replaces `{MOCK}` with the mock's base URL.
pub fn fill(config: &str, mock: &MockUpstream) -> String {
    config.replace("{MOCK}", &mock.base_url())
}

/// `http://127.0.0.1:PORT` where nothing listens: a socket bound to the port and never put to
/// listening, kept for the rest of the process, so a connection is refused at once and no
/// other test's server can be given the port (a released port could be, and then requests
/// meant to fail would reach that test's mock).
pub fn closed_port_url() -> String {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind("127.0.0.1:0".parse().expect("an address"))
        .expect("bind a free port");
    let addr = socket.local_addr().expect("its address");
    Box::leak(Box::new(socket));
    format!("http://{addr}")
}

/// A running in-process sluice. Dropping it without [`Sluice::stop`] leaves its tasks to the
/// test runtime, which ends with the test.
pub struct Sluice {
    running: Running,
    listen: SocketAddr,
    admin_listen: SocketAddr,
    dir: TempDir,
}

impl std::fmt::Debug for Sluice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sluice")
            .field("listen", &self.listen)
            .field("admin_listen", &self.admin_listen)
            .finish()
    }
}

/// Adds the listener, store and log settings a test config leaves out.
fn complete(config: &str, dir: &std::path::Path) -> String {
    let text = if config.contains("{CLOSED}") {
        config.replace("{CLOSED}", &closed_port_url())
    } else {
        config.to_string()
    };
    let mut table: toml::Table = toml::from_str(&text)
        .unwrap_or_else(|e| panic!("test config is not valid TOML: {e}\n{text}"));
    let mut set = |section: &str, key: &str, value: String| {
        let t = table
            .entry(section)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        t.as_table_mut()
            .unwrap()
            .entry(key)
            .or_insert(toml::Value::String(value));
    };
    set("server", "listen", "127.0.0.1:0".into());
    set("admin", "listen", "127.0.0.1:0".into());
    set("store", "path", dir.join("sluice.db").display().to_string());
    set("log", "dir", dir.join("logs").display().to_string());
    toml::to_string(&table).unwrap()
}

impl Sluice {
    /// Starts sluice with the real clock. `env` are the only environment variables the config
    /// can see (`auth = { env = .. }`, `token_env`).
    pub async fn start(config: &str, env: &[(&str, &str)]) -> Sluice {
        Self::start_with_clock(config, env, Arc::new(SystemClock)).await
    }

    /// Starts sluice with a [`ManualClock`] the test moves by hand.
    pub async fn start_manual(config: &str, env: &[(&str, &str)]) -> (Sluice, ManualClock) {
        let clock = ManualClock::new();
        let s = Self::start_with_clock(config, env, Arc::new(clock.clone())).await;
        (s, clock)
    }

    /// Starts sluice with `clock`.
    pub async fn start_with_clock(
        config: &str,
        env: &[(&str, &str)],
        clock: Arc<dyn Clock>,
    ) -> Sluice {
        let dir = tempfile::tempdir().unwrap();
        let text = complete(config, dir.path());
        let path = dir.path().join("config.toml");
        std::fs::write(&path, &text).unwrap();
        let cfg = sluice::config::from_str(&text, &path, &LoadEnv::fixed(env, dir.path()))
            .unwrap_or_else(|e| panic!("test config rejected:\n{e}\n--- config ---\n{text}"));
        let store = sluice::store::Store::open(&cfg.store).unwrap_or_else(|e| panic!("store: {e}"));
        let running = sluice::app::start(cfg, clock, Some(Arc::new(store)))
            .await
            .unwrap_or_else(|e| panic!("sluice failed to start: {e}"));
        let (listen, admin_listen) = (running.listen, running.admin_listen);
        Sluice {
            running,
            listen,
            admin_listen,
            dir,
        }
    }

    /// `http://127.0.0.1:PORT` of the inference listener (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.listen)
    }

    /// `base_url() + path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base_url())
    }

    /// `http://127.0.0.1:PORT` of the admin listener.
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin_listen)
    }

    /// `admin_url() + path`.
    pub fn admin(&self, path: &str) -> String {
        format!("{}{path}", self.admin_url())
    }

    /// The inference listener address.
    pub fn listen(&self) -> SocketAddr {
        self.listen
    }

    /// The temp dir holding the store and logs.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// The core.
    pub fn core(&self) -> &Core {
        &self.running.core
    }

    /// The operator door (e.g. to mark the instance read-only, as `--readonly` does).
    pub fn control(&self) -> &sluice::core::operator::control::Control {
        &self.running.control
    }

    /// A fresh snapshot.
    pub fn snapshot(&self) -> Snapshot {
        self.running.core.snapshot()
    }

    /// Polls (every few ms, up to 5 s) until `totals.requests >= n`; returns that snapshot.
    pub async fn wait_requests(&self, n: u64) -> Snapshot {
        let got = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                let s = self.snapshot();
                if s.totals.requests >= n {
                    return s;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        got.unwrap_or_else(|_| {
            panic!(
                "snapshot never counted {n} requests: {:#?}",
                self.snapshot().totals
            )
        })
    }

    /// Drains and stops (see `Running::stop`); keeps the temp dir until it returns.
    pub async fn stop(self) {
        let Sluice { running, dir, .. } = self;
        running.stop().await;
        drop(dir);
    }
}
