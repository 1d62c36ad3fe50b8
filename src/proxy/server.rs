//! Listener loop (placeholder).
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Serves until shutdown.
pub async fn serve(_l: TcpListener, _s: super::Shared, shutdown: CancellationToken, _hard: CancellationToken) {
    shutdown.cancelled().await;
}
