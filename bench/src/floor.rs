//! `bench-floor`: the simplest pass-through hyper proxy (about 40 lines), the floor every
//! proxy cost is compared to in the same run. `TCP_NODELAY` on both sides, bodies streamed
//! both ways without buffering, errors map to 502.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use crate::mock::{Body, full};

type Upstream = Client<HttpConnector, Incoming>;

async fn forward(
    mut req: Request<Incoming>,
    client: Upstream,
    up: SocketAddr,
    delay: Duration,
) -> Result<Response<Body>, std::io::Error> {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let path = req
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    let uri = format!("http://{up}{path}")
        .parse()
        .map_err(std::io::Error::other)?;
    *req.uri_mut() = uri;
    if let Ok(h) = hyper::header::HeaderValue::from_str(&up.to_string()) {
        req.headers_mut().insert(hyper::header::HOST, h);
    }
    Ok(match client.request(req).await {
        Ok(resp) => resp.map(|b| b.map_err(std::io::Error::other).boxed()),
        Err(_) => {
            let mut r = Response::new(full(Bytes::from_static(b"bad gateway")));
            *r.status_mut() = StatusCode::BAD_GATEWAY;
            r
        }
    })
}

/// Serves the floor proxy on `addr`, forwarding to `upstream`, until the process ends;
/// `delay` (zero for the real floor) is added before each request is forwarded.
pub async fn run(addr: SocketAddr, upstream: SocketAddr, delay: Duration) -> std::io::Result<()> {
    let mut http = HttpConnector::new();
    http.set_nodelay(true);
    let client: Upstream = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(1024)
        .build(http);
    let listener = TcpListener::bind(addr).await?;
    loop {
        let (sock, _) = listener.accept().await?;
        let _ = sock.set_nodelay(true);
        let client = client.clone();
        tokio::spawn(async move {
            let svc = service_fn(move |req| forward(req, client.clone(), upstream, delay));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(sock), svc)
                .await;
        });
    }
}
