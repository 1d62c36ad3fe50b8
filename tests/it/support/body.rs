//! `ChannelBody`: an `http_body::Body` fed from a channel, for streamed replies and chunked
//! request bodies (no `content-length`, size unknown up front).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame};
use tokio::sync::mpsc;

/// A body whose data frames arrive on a channel; an `Err` item aborts it mid-stream.
#[derive(Debug)]
pub struct ChannelBody {
    rx: mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

impl ChannelBody {
    /// A body and the sender that feeds it. Dropping the sender ends the body cleanly.
    pub fn channel() -> (mpsc::Sender<Result<Bytes, std::io::Error>>, Self) {
        let (tx, rx) = mpsc::channel(64);
        (tx, Self { rx })
    }

    /// A body that yields `chunks` (already queued) and then ends; its length is unknown to
    /// hyper, so it is sent with `transfer-encoding: chunked`.
    pub fn from_chunks(chunks: Vec<Bytes>) -> Self {
        let (tx, rx) = mpsc::channel(chunks.len().max(1));
        for c in chunks {
            tx.try_send(Ok(c)).unwrap();
        }
        Self { rx }
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        self.rx
            .poll_recv(cx)
            .map(|item| item.map(|r| r.map(Frame::data)))
    }
}
