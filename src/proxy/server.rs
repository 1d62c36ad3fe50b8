//! Accept loop shared by the inference and admin listeners: `TCP_NODELAY` on every accepted
//! socket, HTTP/1.1 and HTTP/2 (prior knowledge) via hyper-util's auto builder, and graceful
//! connection shutdown when `shutdown` is cancelled.

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::routes::{self, ProxyBody};
use crate::config::validate::DEFAULT_HEADER_READ_TIMEOUT;

/// Serves the inference routes on `listener` until `shutdown`; in-flight requests go on
/// (their streams end at `hard_stop`). Connections that send no complete request head within
/// `[server] header_read_timeout` are closed.
pub async fn serve(
    listener: TcpListener,
    state: Shared,
    shutdown: CancellationToken,
    _hard_stop: CancellationToken,
) {
    let header_timeout = state.core.config().server.header_read_timeout;
    serve_http_with(
        listener,
        shutdown,
        "inference",
        header_timeout,
        move |req| routes::handle(state.clone(), req),
    )
    .await;
}

/// Generic accept loop: spawns one task per connection running `handler` per request, with
/// the default header read timeout ([`DEFAULT_HEADER_READ_TIMEOUT`]).
pub async fn serve_http<F, Fut>(
    listener: TcpListener,
    shutdown: CancellationToken,
    what: &'static str,
    handler: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    serve_http_with(
        listener,
        shutdown,
        what,
        DEFAULT_HEADER_READ_TIMEOUT,
        handler,
    )
    .await;
}

/// [`serve_http`] closing connections that send no complete request head within
/// `header_timeout` (HTTP/1).
pub async fn serve_http_with<F, Fut>(
    listener: TcpListener,
    shutdown: CancellationToken,
    what: &'static str,
    header_timeout: Duration,
    handler: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off briefly instead of spinning.
                    tracing::warn!(listener = what, error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
            () = shutdown.cancelled() => break,
        };
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(%peer, error = %e, "set_nodelay failed");
        }
        let handler = handler.clone();
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| {
                let h = handler.clone();
                async move { Ok::<_, Infallible>(h(req).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout);
            let conn = builder.serve_connection(TokioIo::new(stream), svc);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        tracing::debug!(listener = what, %peer, error = %e, "connection ended with an error");
                    }
                }
                () = shutdown.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    tracing::info!(listener = what, "stopped accepting connections");
}
