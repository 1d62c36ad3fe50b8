use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::snapshot::{ConnectionStatus, ConnectionView, ProviderView, RequestView};

fn snap(version: u64) -> Snapshot {
    Snapshot {
        version,
        listen: "127.0.0.1:8787".into(),
        providers: vec![ProviderView {
            id: "anthropic".into(),
            connections: vec![ConnectionView {
                id: "key-a".into(),
                status: ConnectionStatus::Cooling,
                cooldown_until_unix_ms: Some(9_000),
                ..Default::default()
            }],
            ..Default::default()
        }],
        recent: vec![RequestView {
            id: 7,
            route: "/v1/messages".into(),
            status: 503,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn an_encoded_snapshot_decodes_back_whatever_the_chunking() {
    let mut wire = Vec::new();
    wire.extend_from_slice(KEEP_ALIVE_COMMENT);
    wire.extend_from_slice(&encode(&snap(1)).unwrap());
    wire.extend_from_slice(&encode(&snap(2)).unwrap());
    for split in [1, 2, 7, 64, wire.len()] {
        let mut d = Decoder::new();
        let mut events = Vec::new();
        for chunk in wire.chunks(split) {
            events.extend(d.feed(chunk).unwrap());
        }
        assert_eq!(events.len(), 2, "split {split}");
        let back: Vec<Snapshot> = events
            .iter()
            .map(|e| e.snapshot().unwrap().unwrap())
            .collect();
        assert_eq!(back[0].version, 1);
        assert_eq!(back[1].version, 2);
        assert_eq!(back[1].providers, snap(2).providers);
        assert_eq!(back[1].recent, snap(2).recent, "requests come back too");
    }
}

#[test]
fn decoder_reads_crlf_multi_line_data_and_skips_other_events() {
    let mut d = Decoder::new();
    let ev = d
        .feed(b": hi\r\nevent: other\r\ndata: a\r\ndata: b\r\nid: 3\r\n\r\ndata: x\n\n")
        .unwrap();
    assert_eq!(
        ev,
        vec![
            Event {
                name: "other".into(),
                data: "a\nb".into()
            },
            Event {
                name: "message".into(),
                data: "x".into()
            }
        ]
    );
    assert!(ev[0].snapshot().unwrap().is_none());
    let bad = Event {
        name: EVENT_NAME.into(),
        data: "{not json".into(),
    };
    assert!(bad.snapshot().is_err());
    assert_eq!(
        Decoder::new().feed(b"data: \xff\n"),
        Err(DecodeError::NotText)
    );
}

#[test]
fn decoder_refuses_an_endless_event() {
    let mut d = Decoder::new();
    let chunk = vec![b'a'; 1024 * 1024];
    let mut r = Ok(Vec::new());
    for _ in 0..17 {
        r = d.feed(&chunk);
        if r.is_err() {
            break;
        }
    }
    assert_eq!(r, Err(DecodeError::TooLong));
}

fn versions(chunks: &[Bytes]) -> Vec<u64> {
    let mut d = Decoder::new();
    chunks
        .iter()
        .flat_map(|c| d.feed(c).unwrap())
        .filter_map(|e| e.snapshot().unwrap())
        .map(|s| s.version)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_changes_is_coalesced_latest_wins() {
    let (tx, rx) = watch::channel(Arc::new(snap(0)));
    let stop = CancellationToken::new();
    let stream = events(rx, Pacing::default(), stop.clone());
    let collected = tokio::spawn(stream.collect::<Vec<Bytes>>());
    // 100 changes, one every 10 ms: 1 s of changes.
    for v in 1..=100 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        tx.send_replace(Arc::new(snap(v)));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    let chunks = collected.await.unwrap();
    let seen = versions(&chunks);
    assert_eq!(
        seen.first(),
        Some(&0),
        "the current snapshot goes out at once"
    );
    assert_eq!(seen.last(), Some(&100), "the latest change is never lost");
    // 1.5 s at one event per 200 ms at most: the first plus at most 8.
    assert!(seen.len() <= 9, "{} events: {seen:?}", seen.len());
    assert!(seen.len() >= 5, "{} events: {seen:?}", seen.len());
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
}

#[tokio::test(start_paused = true)]
async fn a_quiet_stream_sends_keep_alives_and_subscribers_are_independent() {
    let (tx, rx) = watch::channel(Arc::new(snap(0)));
    let stop = CancellationToken::new();
    let a = tokio::spawn(events(rx.clone(), Pacing::default(), stop.clone()).collect::<Vec<_>>());
    let b = tokio::spawn(events(rx, Pacing::default(), stop.clone()).collect::<Vec<_>>());
    tokio::time::sleep(Duration::from_secs(16)).await;
    tx.send_replace(Arc::new(snap(1)));
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.cancel();
    for chunks in [a.await.unwrap(), b.await.unwrap()] {
        let keep_alives = chunks
            .iter()
            .filter(|c| c.as_ref() == KEEP_ALIVE_COMMENT)
            .count();
        assert_eq!(keep_alives, 1, "one keep-alive in 16 quiet seconds");
        assert_eq!(versions(&chunks), vec![0, 1]);
    }
}

#[tokio::test(start_paused = true)]
async fn the_stream_ends_when_the_channel_closes() {
    let (tx, rx) = watch::channel(Arc::new(snap(0)));
    let all =
        tokio::spawn(events(rx, Pacing::default(), CancellationToken::new()).collect::<Vec<_>>());
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(tx);
    let chunks = tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("ends")
        .unwrap();
    assert_eq!(versions(&chunks), vec![0]);
}

#[test]
fn a_large_snapshot_lengthens_the_pause_after_it() {
    let p = Pacing::default();
    assert_eq!(p.pause_after(90 * 1024), MIN_EVENT_SPACING);
    assert_eq!(
        p.pause_after(3 * 1024 * 1024),
        Duration::from_millis(1500),
        "3 MiB at 2 MiB/s"
    );
    let zero = Pacing {
        max_bytes_per_sec: 0,
        ..Pacing::default()
    };
    assert!(
        zero.pause_after(10) >= MIN_EVENT_SPACING,
        "no division by zero"
    );
}

#[tokio::test(start_paused = true)]
async fn a_stream_of_large_snapshots_slows_to_its_byte_rate_and_keeps_the_latest() {
    let (tx, rx) = watch::channel(Arc::new(snap(0)));
    let stop = CancellationToken::new();
    // Each event "weighs" one second at this rate.
    let pacing = Pacing {
        max_bytes_per_sec: encode(&snap(0)).unwrap().len() as u64,
        ..Pacing::default()
    };
    let collected = tokio::spawn(events(rx, pacing, stop.clone()).collect::<Vec<Bytes>>());
    // 300 changes, one every 10 ms: 3 s of changes, then 1.5 s of quiet.
    for v in 1..=300 {
        tokio::time::sleep(Duration::from_millis(10)).await;
        tx.send_replace(Arc::new(snap(v)));
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.cancel();
    let seen = versions(&collected.await.unwrap());
    assert_eq!(seen.last(), Some(&300), "the latest change is never lost");
    // 4.5 s at about one event per second (200 ms spacing would allow 22).
    assert!(
        (3..=6).contains(&seen.len()),
        "{} events: {seen:?}",
        seen.len()
    );
}
