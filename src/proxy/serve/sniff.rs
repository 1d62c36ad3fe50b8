//! Which HTTP version a new connection speaks, told from its first bytes without consuming
//! them (`MSG_PEEK`), so hyper reads the request straight from the socket.
//!
//! hyper-util's auto builder would read those bytes itself and replay them through a small
//! buffer; hyper's first read then returns only the replayed bytes, its read buffer is
//! reallocated and copied, and each connection ends up holding about 12 KiB more touched
//! memory (a sixth of sluice's RSS at 1,024 concurrent streams). Peeking costs one system call
//! per connection, not per request.

use std::time::Duration;

use tokio::net::TcpStream;

/// The HTTP/2 client connection preface (RFC 9113, section 3.4): what a client speaking HTTP/2
/// with prior knowledge sends first.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// How long to wait before peeking again when the bytes so far are a strict prefix of the
/// HTTP/2 preface (a client that splits its first bytes; practically never).
const REPEEK: Duration = Duration::from_millis(1);

/// The protocol a connection opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.x: anything that does not start with the HTTP/2 preface.
    Http1,
    /// HTTP/2 with prior knowledge (h2c).
    Http2,
}

/// Decides from the bytes received so far: `None` while they are a strict prefix of the
/// HTTP/2 preface (more are needed), else the protocol.
pub fn classify(first: &[u8]) -> Option<Protocol> {
    let n = first.len().min(H2_PREFACE.len());
    if first[..n] != H2_PREFACE[..n] {
        Some(Protocol::Http1)
    } else if n == H2_PREFACE.len() {
        Some(Protocol::Http2)
    } else {
        None
    }
}

/// Peeks at `stream` until its protocol is known. `None` when the client closed or the socket
/// failed before sending enough bytes (nothing to serve), or nothing decisive arrived within
/// `timeout` (the header read timeout: such a connection is closed).
pub async fn protocol(stream: &TcpStream, timeout: Duration) -> Option<Protocol> {
    tokio::time::timeout(timeout, peek_until_known(stream))
        .await
        .ok()
        .flatten()
}

async fn peek_until_known(stream: &TcpStream) -> Option<Protocol> {
    let mut buf = [0u8; H2_PREFACE.len()];
    loop {
        let n = stream.peek(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        if let Some(p) = classify(&buf[..n]) {
            return Some(p);
        }
        tokio::time::sleep(REPEEK).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    #[test]
    fn a_request_line_is_http1_as_soon_as_it_leaves_the_preface() {
        assert_eq!(
            classify(b"POST /v1/messages HTTP/1.1\r\n"),
            Some(Protocol::Http1)
        );
        assert_eq!(classify(b"PO"), Some(Protocol::Http1));
        assert_eq!(classify(b"GET"), Some(Protocol::Http1));
        assert_eq!(
            classify(b"\x16\x03\x01"),
            Some(Protocol::Http1),
            "TLS is not h2c"
        );
    }

    #[test]
    fn the_whole_preface_is_http2_and_a_part_of_it_is_undecided() {
        assert_eq!(classify(H2_PREFACE), Some(Protocol::Http2));
        assert_eq!(
            classify(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\x12"),
            Some(Protocol::Http2)
        );
        assert_eq!(classify(b"P"), None);
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(classify(b"PRI * HTTP/1.1\r\n"), Some(Protocol::Http1));
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    #[tokio::test]
    async fn a_preface_split_in_two_writes_is_read_whole_and_not_consumed() {
        let (mut client, server) = pair().await;
        client.write_all(&H2_PREFACE[..10]).await.unwrap();
        let sniffing = tokio::spawn(async move {
            let p = protocol(&server, Duration::from_secs(10)).await;
            (p, server)
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        client.write_all(&H2_PREFACE[10..]).await.unwrap();
        let (p, server) = sniffing.await.unwrap();
        assert_eq!(p, Some(Protocol::Http2));
        let mut buf = [0u8; 64];
        let n = server.peek(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], H2_PREFACE, "peeking leaves the bytes for hyper");
    }

    #[tokio::test]
    async fn a_closed_or_silent_connection_has_no_protocol() {
        let (client, server) = pair().await;
        drop(client);
        assert_eq!(protocol(&server, Duration::from_secs(10)).await, None);

        let (_client, server) = pair().await;
        assert_eq!(protocol(&server, Duration::from_millis(50)).await, None);
    }
}
