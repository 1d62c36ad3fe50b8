//! Memory: idle RSS, many concurrent slow streams with no frame lost, and RSS after they end.
//! Short mode: 256 streams and generous bounds (a gross leak fails, noise does not). Long
//! mode: 1,024 streams and RSS measured again a minute after.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::json;

use crate::outcome::Route;
use crate::proc::{Home, Proc};
use crate::support::{MockUpstream, Reply};

/// Text deltas per stream.
const FRAMES: usize = 20;

fn event(name: &str, data: &serde_json::Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// A Messages stream with [`FRAMES`] numbered text deltas.
fn slow_stream() -> Vec<String> {
    let mut v = vec![
        event(
            "message_start",
            &json!({"type": "message_start", "message": {"id": "msg_mem", "type": "message", "role": "assistant", "content": [], "model": "m", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ),
        event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
    ];
    for i in 0..FRAMES {
        v.push(event("content_block_delta", &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": format!("<f{i}>")}})));
    }
    v.push(event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": 0}),
    ));
    v.push(event("message_delta", &json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": FRAMES}})));
    v.push(event("message_stop", &json!({"type": "message_stop"})));
    v
}

/// Reads one stream; returns how many of the numbered frames arrived, in order, and whether
/// it ended with `message_stop`.
async fn one_stream(
    client: Client<HttpConnector, Full<Bytes>>,
    url: String,
    model: &str,
) -> (usize, bool) {
    let req = http::Request::post(url)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(Full::new(Bytes::from(
            Route::Messages.body(model, true).to_string(),
        )))
        .unwrap();
    let Ok(resp) = client.request(req).await else {
        return (0, false);
    };
    let Ok(body) = resp.into_body().collect().await else {
        return (0, false);
    };
    let text = String::from_utf8_lossy(&body.to_bytes()).into_owned();
    let mut at = 0;
    let mut got = 0;
    for i in 0..FRAMES {
        match text[at..].find(&format!("<f{i}>")) {
            Some(j) => {
                at += j;
                got += 1;
            }
            None => break,
        }
    }
    (
        got,
        text.trim_end()
            .ends_with(r#"data: {"type":"message_stop"}"#),
    )
}

fn kib(p: &Proc, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", p.pid())).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rss_stays_bounded_under_many_slow_streams_and_no_frame_is_lost() {
    let streams = crate::pick(256, 1024);
    let mock = MockUpstream::start().await;
    mock.on("/v1/messages")
        .model("slow")
        .reply(Reply::sse_events(&slow_stream()).pace(Duration::from_millis(100)));
    let home = Home::new(&crate::hostile::config(&mock));
    let mut p = Proc::start(&home, &[]);
    // Warm up (first connections, lazy statics), then measure idle.
    for _ in 0..8 {
        one_stream(
            Client::builder(TokioExecutor::new()).build_http(),
            p.url("/v1/messages"),
            "m",
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle = p.rss_kib();
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    let client: Client<HttpConnector, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(c);
    let t = crate::now();
    let tasks: Vec<_> = (0..streams)
        .map(|_| tokio::spawn(one_stream(client.clone(), p.url("/v1/messages"), "slow")))
        .collect();
    let mut lost = 0;
    let mut unfinished = 0;
    for task in tasks {
        let (got, done) = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .unwrap()
            .unwrap();
        lost += FRAMES - got;
        unfinished += usize::from(!done);
    }
    let took = t.elapsed();
    let peak = kib(&p, "VmHWM:");
    drop(client);
    tokio::time::sleep(Duration::from_secs(crate::pick(2, 60))).await;
    let after = p.rss_kib();
    p.assert_healthy();
    println!(
        "memory: {streams} concurrent slow streams in {took:.1?}, {lost} frames lost, {unfinished} unfinished; RSS idle {} MiB, peak {} MiB, after {} s {} MiB",
        idle / 1024,
        peak / 1024,
        crate::pick(2, 60),
        after / 1024
    );
    assert_eq!(
        (lost, unfinished),
        (0, 0),
        "frames lost / streams without message_stop"
    );
    // Generous bounds for a debug build on a shared machine: they catch a per-stream leak of
    // about 1 MiB, not allocator noise.
    assert!(idle < 128 * 1024, "idle RSS {} MiB", idle / 1024);
    let bound = idle + streams as u64 * 1024;
    assert!(
        peak < bound,
        "peak RSS {} MiB over {} MiB",
        peak / 1024,
        bound / 1024
    );
    assert!(
        after < bound,
        "RSS after the streams {} MiB over {} MiB",
        after / 1024,
        bound / 1024
    );
}
