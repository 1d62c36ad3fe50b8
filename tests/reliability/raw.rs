//! Raw TCP exchanges for inputs a well-behaved HTTP client cannot send (smuggling, bad
//! framing, huge or many headers, HTTP/1.0).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// What came back on one connection.
#[derive(Debug, Clone)]
pub struct RawReply {
    /// Every byte received until the server closed or `within` passed.
    pub bytes: Vec<u8>,
    /// The server closed the connection (EOF or reset) within the time.
    pub closed: bool,
}

impl RawReply {
    /// Status codes of every HTTP/1.x response head in the bytes, in order.
    pub fn statuses(&self) -> Vec<u16> {
        let text = String::from_utf8_lossy(&self.bytes);
        text.match_indices("HTTP/1.")
            .filter_map(|(i, _)| {
                let line = &text[i..];
                let code = line.get(9..12)?;
                (line.as_bytes().get(8) == Some(&b' ')).then(|| code.parse().ok())?
            })
            .collect()
    }

    /// The first response's status, if any.
    pub fn status(&self) -> Option<u16> {
        self.statuses().first().copied()
    }

    /// The first response's body (after the blank line), as text.
    pub fn body(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        text.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default()
    }
}

/// Writes `request` (errors ignored: the server may close early) and reads until the server
/// closes or `within` passes. The write half stays open while reading.
pub async fn exchange(addr: SocketAddr, request: &[u8], within: Duration) -> RawReply {
    let s = TcpStream::connect(addr).await.unwrap();
    let _ = s.set_nodelay(true);
    let (mut rd, mut wr) = s.into_split();
    let request = request.to_vec();
    let writer = tokio::spawn(async move {
        let _ = wr.write_all(&request).await;
        let _ = wr.flush().await;
        // Hold the write half open until the reader is done.
        tokio::time::sleep(Duration::from_secs(3600)).await;
        drop(wr);
    });
    let deadline = crate::now() + within;
    let mut bytes = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let closed = loop {
        match tokio::time::timeout_at(deadline, rd.read(&mut buf)).await {
            Err(_) => break false,
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(n)) => bytes.extend_from_slice(&buf[..n]),
        }
    };
    writer.abort();
    RawReply { bytes, closed }
}
