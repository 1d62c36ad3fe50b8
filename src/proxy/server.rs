//! Accept loop shared by the inference and admin listeners: `TCP_NODELAY` on every accepted
//! socket, HTTP/1.1 and HTTP/2 (prior knowledge) via hyper-util's auto builder, and graceful
//! connection shutdown when `shutdown` is cancelled. At most `[server] max_connections`
//! connections are served at once per listener: the loop stops accepting while all are busy,
//! so further clients wait in the OS backlog instead of exhausting file descriptors.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::Shared;
use super::routes::{self, ProxyBody};

/// Serves the inference routes on `listener` until `shutdown`; in-flight requests go on
/// (their streams end at `hard_stop`).
pub async fn serve(
    listener: TcpListener,
    state: Shared,
    shutdown: CancellationToken,
    _hard_stop: CancellationToken,
) {
    let max_connections = state.core.config().server.max_connections;
    serve_http(
        listener,
        shutdown,
        "inference",
        max_connections,
        move |req| routes::handle(state.clone(), req),
    )
    .await;
}

/// Generic accept loop: spawns one task per connection running `handler` per request, at
/// most `max_connections` (at least 1) at once.
pub async fn serve_http<F, Fut>(
    listener: TcpListener,
    shutdown: CancellationToken,
    what: &'static str,
    max_connections: u32,
    handler: F,
) where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<ProxyBody>> + Send + 'static,
{
    let slots = Arc::new(Semaphore::new(
        usize::try_from(max_connections.max(1)).unwrap_or(usize::MAX),
    ));
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => match s {
                Ok(s) => s,
                Err(_) => break,
            },
            () = shutdown.cancelled() => break,
        };
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
            let _slot = slot;
            let svc = service_fn(move |req| {
                let h = handler.clone();
                async move { Ok::<_, Infallible>(h(req).await) }
            });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30));
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
