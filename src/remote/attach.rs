//! `sluice console`: attaches the full console to a running sluice. The first snapshot is
//! read with `GET /api/snapshot` (so a wrong address or token fails at once, before the
//! terminal is taken); then [`feed::follow`](super::feed::follow) keeps the console's
//! snapshots current and every action goes through the [`RemoteDoor`].

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http::Method;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::client::{AdminClient, admin_base};
use super::door::RemoteDoor;
use crate::clock::SystemClock;
use crate::config::{Config, Secret};
use crate::console::door::Link;
use crate::console::{self, ConsoleOptions};
use crate::snapshot::Snapshot;

/// Where to attach and how to look.
pub struct Attach {
    /// `--admin`: the admin API's address; `None`: the config's `admin.listen`.
    pub admin: Option<String>,
    /// The bearer token (from `--token-env`, or the config's `admin.token_env`).
    pub token: Option<Secret>,
    /// Theme, keys, tick, mouse, local read-only.
    pub console: ConsoleOptions,
}

/// The admin API address of `cfg`: `http://` + `admin.listen`, with a wildcard host
/// (`0.0.0.0`, `::`) replaced by the loopback address of its family.
pub fn default_admin(listen: SocketAddr) -> String {
    let ip = match listen.ip() {
        IpAddr::V4(v) if v.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v) if v.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    format!("http://{}", SocketAddr::new(ip, listen.port()))
}

/// Runs the attached console until the operator leaves (`q`); the instance keeps running.
/// Blocking (builds its own runtime). Errors, as one line for the CLI: a bad `--admin`, the
/// instance not reachable or refusing the token at attach time, or a terminal error.
pub fn run(cfg: &Config, attach: Attach) -> Result<(), String> {
    let base = match &attach.admin {
        Some(a) => admin_base(a)?,
        None => default_admin(cfg.admin.listen),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("sluice-attach")
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let client = Arc::new(AdminClient::new(base.clone(), attach.token));
    let first = runtime
        .block_on(client.call(Method::GET, "/api/snapshot", None))
        .and_then(|v| {
            serde_json::from_value::<Snapshot>(v).map_err(|e| {
                crate::console::door::DoorError::Unreachable(format!("unexpected snapshot: {e}"))
            })
        })
        .map_err(|e| format!("cannot attach to {base}: {e}; is sluice running there?"))?;
    let (snap_tx, snap_rx) = watch::channel(Arc::new(first));
    let (link_tx, link_rx) = watch::channel(Link::Live);
    let leave = CancellationToken::new();
    runtime.spawn(super::feed::follow(
        Arc::clone(&client),
        snap_tx,
        link_tx,
        leave.clone(),
    ));
    let door = Arc::new(RemoteDoor::new(
        client,
        runtime.handle().clone(),
        cfg.resilience.clone(),
        leave.clone(),
    ));
    let result = console::run_attached(
        snap_rx,
        door,
        link_rx,
        Arc::new(SystemClock),
        attach.console,
        leave.clone(),
    );
    leave.cancel();
    runtime.shutdown_timeout(Duration::from_secs(1));
    result.map_err(|e| format!("console error: {e}"))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_admin_address_is_the_configs_with_wildcards_on_loopback() {
        assert_eq!(
            super::default_admin("127.0.0.1:8788".parse().unwrap()),
            "http://127.0.0.1:8788"
        );
        assert_eq!(
            super::default_admin("0.0.0.0:9000".parse().unwrap()),
            "http://127.0.0.1:9000"
        );
        assert_eq!(
            super::default_admin("[::]:9000".parse().unwrap()),
            "http://[::1]:9000"
        );
    }
}
