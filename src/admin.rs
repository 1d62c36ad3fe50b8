//! Admin API (placeholder).
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
/// Serves until stop.
pub async fn serve(_l: TcpListener, _c: crate::core::Core, stop: CancellationToken) {
    stop.cancelled().await;
}
