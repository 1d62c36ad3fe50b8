//! Accept loop shared by the inference and admin listeners: `TCP_NODELAY` on every accepted
//! socket, HTTP/1.1 and HTTP/2 (prior knowledge, told apart by [`sniff`]), and graceful
//! connection shutdown when `shutdown` is cancelled. At most `[server] max_connections`
//! connections are served at once per listener: the loop stops accepting while all are busy,
//! so further clients wait in the OS backlog instead of exhausting file descriptors.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::validate::DEFAULT_HEADER_READ_TIMEOUT;
use crate::proxy::Shared;
use crate::proxy::serve::routes;
use crate::proxy::serve::sniff::{self, Protocol};

/// Largest request head (request line plus headers) a client may send, in bytes; a larger
/// one is refused with 431 (HTTP/1) or a stream reset (HTTP/2). Far above what any LLM
/// client sends, far below hyper's ~400 KB default.
pub const MAX_REQUEST_HEAD: usize = 64 * 1024;

/// Per-listener connection limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Client connections served at once (at least 1); further ones wait in the OS backlog.
    pub max_connections: u32,
    /// A connection that sends no complete request head this long after connecting (or after
    /// its previous response) is closed (HTTP/1).
    pub header_read_timeout: Duration,
}

impl Limits {
    /// The limits of `[server]` for the inference listener.
    pub fn of_server(server: &crate::config::ServerConfig) -> Self {
        Limits {
            max_connections: server.max_connections,
            header_read_timeout: server.header_read_timeout,
        }
    }

    /// The admin listener's: `[server] max_connections`, the default header read timeout.
    pub fn admin(server: &crate::config::ServerConfig) -> Self {
        Limits {
            max_connections: server.max_connections,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
        }
    }
}

/// Serves the inference routes on `listener` until `shutdown`; in-flight requests go on
/// (their streams end at `hard_stop`). Connections that send no complete request head within
/// `[server] header_read_timeout` are closed.
pub async fn serve(
    listener: TcpListener,
    state: Shared,
    shutdown: CancellationToken,
    _hard_stop: CancellationToken,
) {
    let limits = Limits::of_server(&state.core.config().server);
    serve_http(listener, shutdown, "inference", limits, move |req| {
        routes::handle(state.clone(), req)
    })
    .await;
}

/// What a listener serves: called once per request, shared by every connection. Any
/// `Fn(Request) -> impl Future<Output = Response<B>>` is one.
pub trait Handler: Clone + Send + Sync + 'static {
    /// The response body: bytes, sent as it is produced.
    type Body: hyper::body::Body<Data = bytes::Bytes, Error: Into<BoxError>> + Send + 'static;

    /// The answer to one request, owning what it needs.
    type Answer: Future<Output = Response<Self::Body>> + Send + 'static;

    /// Answers one request.
    fn call(&self, req: Request<Incoming>) -> Self::Answer;
}

/// An error of any kind, as hyper takes a body's errors.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<F, Fut, B> Handler for F
where
    F: Fn(Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Response<B>> + Send + 'static,
    B: hyper::body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    type Body = B;
    type Answer = Fut;

    fn call(&self, req: Request<Incoming>) -> Fut {
        self(req)
    }
}

/// Generic accept loop: spawns one task per connection running `handler` per request, at
/// most `limits.max_connections` (at least 1) at once. The handler's body type is the
/// inference listener's [`routes::ProxyBody`] or the admin listener's own.
pub async fn serve_http<H: Handler>(
    listener: TcpListener,
    shutdown: CancellationToken,
    what: &'static str,
    limits: Limits,
    handler: H,
) {
    let slots = Arc::new(Semaphore::new(
        usize::try_from(limits.max_connections.max(1)).unwrap_or(usize::MAX),
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
        let conn = Connection {
            stream,
            peer,
            what,
            limits,
        };
        tokio::spawn(conn.serve(handler.clone(), shutdown.clone(), slot));
    }
    tracing::info!(listener = what, "stopped accepting connections");
}

/// One accepted client connection.
struct Connection {
    stream: TcpStream,
    peer: SocketAddr,
    what: &'static str,
    limits: Limits,
}

impl Connection {
    /// Serves every request of the connection with `handler`, holding its `slot` of
    /// `max_connections` until the client leaves; on `shutdown` in-flight requests finish
    /// and the connection closes.
    async fn serve<H: Handler>(
        self,
        handler: H,
        shutdown: CancellationToken,
        slot: OwnedSemaphorePermit,
    ) {
        let _slot = slot;
        let sniffed = tokio::select! {
            p = sniff::protocol(&self.stream, self.limits.header_read_timeout) => p,
            () = shutdown.cancelled() => None,
        };
        let Some(protocol) = sniffed else {
            return;
        };
        let svc = service_fn(move |req| {
            let answer = handler.call(req);
            async move { Ok::<_, Infallible>(answer.await) }
        });
        let io = TokioIo::new(self.stream);
        let ended = match protocol {
            Protocol::Http1 => drive(http1(self.limits).serve_connection(io, svc), &shutdown).await,
            Protocol::Http2 => drive(http2().serve_connection(io, svc), &shutdown).await,
        };
        if let Err(e) = ended {
            tracing::debug!(listener = self.what, peer = %self.peer, error = %e, "connection ended with an error");
        }
    }
}

/// Runs `conn` to its end; once `shutdown` is cancelled, lets its in-flight requests finish
/// and closes it.
async fn drive<C>(conn: C, shutdown: &CancellationToken) -> Result<(), hyper::Error>
where
    C: GracefulConnection<Error = hyper::Error>,
{
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => r,
        () = shutdown.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    }
}

/// The HTTP/1 connection settings: a request head (request line and headers) of at most
/// [`MAX_REQUEST_HEAD`] bytes (else 431), complete within `limits.header_read_timeout`.
fn http1(limits: Limits) -> http1::Builder {
    let mut b = http1::Builder::new();
    b.timer(TokioTimer::new())
        .max_buf_size(MAX_REQUEST_HEAD)
        .max_header_size(MAX_REQUEST_HEAD)
        .header_read_timeout(limits.header_read_timeout);
    b
}

/// The HTTP/2 connection settings: a header list of at most [`MAX_REQUEST_HEAD`] bytes.
fn http2() -> http2::Builder<TokioExecutor> {
    let mut b = http2::Builder::new(TokioExecutor::new());
    b.max_header_list_size(u32::try_from(MAX_REQUEST_HEAD).unwrap_or(u32::MAX));
    b
}
