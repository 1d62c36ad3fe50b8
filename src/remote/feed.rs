//! Follows a running sluice's snapshot stream into a `watch` channel — the same kind the
//! in-process console reads — and publishes the link state: [`Link::Live`] while events
//! arrive, [`Link::Reconnecting`] from the moment the stream fails until the next snapshot.
//! Reconnects wait [`Backoff`]: 0.5 s, doubling to at most 5 s, back to 0.5 s once a snapshot
//! arrived.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::client::AdminClient;
use crate::console::door::Link;
use crate::snapshot::Snapshot;
use crate::snapshot::stream::{Decoder, KEEP_ALIVE};

/// First reconnect delay.
pub const BACKOFF_START: Duration = Duration::from_millis(500);
/// Longest reconnect delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(5);
/// A stream silent this long (two keep-alives missed) counts as dropped.
pub const SILENCE_LIMIT: Duration = KEEP_ALIVE
    .saturating_mul(2)
    .saturating_add(Duration::from_secs(5));

/// Reconnect delays: [`BACKOFF_START`], doubling up to [`BACKOFF_MAX`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            next: BACKOFF_START,
        }
    }
}

impl Backoff {
    /// The delay before the next attempt; the one after is twice as long (capped).
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = self.next.saturating_mul(2).min(BACKOFF_MAX);
        d
    }

    /// Back to [`BACKOFF_START`] (the link works again).
    pub fn reset(&mut self) {
        self.next = BACKOFF_START;
    }
}

/// Follows the stream until `stop`: each snapshot replaces the value of `snapshots`; `link`
/// says whether the stream is up.
pub async fn follow(
    client: Arc<AdminClient>,
    snapshots: watch::Sender<Arc<Snapshot>>,
    link: watch::Sender<Link>,
    stop: CancellationToken,
) {
    let mut backoff = Backoff::default();
    loop {
        let why = tokio::select! {
            why = follow_once(&client, &snapshots, &link, &mut backoff) => why,
            () = stop.cancelled() => return,
        };
        tracing::debug!(admin = client.base(), reason = %why, "snapshot stream dropped");
        link.send_replace(Link::Reconnecting(why));
        tokio::select! {
            () = tokio::time::sleep(backoff.next_delay()) => {}
            () = stop.cancelled() => return,
        }
    }
}

/// One connection: opens the stream and forwards its snapshots until it ends. Returns why it
/// ended (always an end: the caller reconnects).
async fn follow_once(
    client: &AdminClient,
    snapshots: &watch::Sender<Arc<Snapshot>>,
    link: &watch::Sender<Link>,
    backoff: &mut Backoff,
) -> String {
    let resp = match client.open_stream().await {
        Ok(r) => r,
        Err(e) => return e.to_string(),
    };
    let mut body = resp.into_body();
    let mut decoder = Decoder::new();
    loop {
        let frame = match tokio::time::timeout(SILENCE_LIMIT, body.frame()).await {
            Err(_) => return format!("nothing received for {SILENCE_LIMIT:?}"),
            Ok(None) => return "the stream ended".to_owned(),
            Ok(Some(Err(e))) => return format!("the stream broke: {e}"),
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let events = match decoder.feed(&data) {
            Ok(ev) => ev,
            Err(e) => return e.to_string(),
        };
        for event in events {
            match event.snapshot() {
                Ok(Some(snap)) => {
                    snapshots.send_replace(Arc::new(snap));
                    if *link.borrow() != Link::Live {
                        link.send_replace(Link::Live);
                    }
                    backoff.reset();
                }
                Ok(None) => {}
                Err(e) => return format!("unreadable snapshot: {e}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_from_half_a_second_to_five_and_resets() {
        let mut b = Backoff::default();
        let delays: Vec<u64> = (0..7)
            .map(|_| u64::try_from(b.next_delay().as_millis()).unwrap())
            .collect();
        assert_eq!(delays, [500, 1000, 2000, 4000, 5000, 5000, 5000]);
        b.reset();
        assert_eq!(b.next_delay(), BACKOFF_START);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreachable_sluice_reads_reconnecting_with_the_reason() {
        // Nothing listens on port 9 of the loopback (discard is not run in test sandboxes);
        // the connect fails at once and the link says so.
        let client = Arc::new(AdminClient::new("http://127.0.0.1:9".into(), None));
        let (tx, _rx) = watch::channel(Arc::new(Snapshot::default()));
        let (link_tx, mut link_rx) = watch::channel(Link::Live);
        let stop = CancellationToken::new();
        let task = tokio::spawn(follow(client, tx, link_tx, stop.clone()));
        let changed = tokio::time::timeout(Duration::from_secs(30), link_rx.changed()).await;
        assert!(changed.is_ok(), "the link changed");
        match &*link_rx.borrow() {
            Link::Reconnecting(why) => assert!(why.contains("cannot reach"), "{why}"),
            Link::Live => panic!("still live"),
        }
        stop.cancel();
        task.await.unwrap();
    }
}
