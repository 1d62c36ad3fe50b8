//! Tracker: completion, truncation, stall, readiness, throughput.

use std::time::Duration;

use super::{FIXTURES, feed, fixture};
use crate::clock::{Clock, Instant, ManualClock};
use crate::proxy::sse::{
    ANTHROPIC_HEARTBEAT, OPENAI_HEARTBEAT, Readiness, StreamEnd, StreamKind, StreamTracker,
    Terminal,
};
use crate::wire::sse::{Event, SseFramer};

fn t0() -> Instant {
    ManualClock::new().now()
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn track(kind: StreamKind, events: &[Event], start: Instant) -> StreamTracker {
    let mut t = StreamTracker::new(kind, start);
    for e in events {
        t.observe(start, e);
    }
    t
}

fn event(frame: &str) -> Event {
    let mut f = SseFramer::new();
    f.push(frame.as_bytes()).unwrap();
    f.next_event().unwrap()
}

#[test]
fn complete_failed_and_truncated_per_fixture() {
    let start = t0();
    for (name, kind, bytes) in FIXTURES {
        let (ev, _) = feed(bytes);
        let full = track(kind, &ev, start);
        if name == "anthropic-error-before-content" {
            assert_eq!(full.end(), StreamEnd::Failed);
            assert!(!full.is_complete() && !full.seen_content());
            assert_eq!(full.error().unwrap().error_type, "overloaded_error");
        } else {
            assert_eq!(full.end(), StreamEnd::Complete, "{name}");
            assert!(full.seen_content(), "{name}");
            assert!(full.open_blocks().is_empty());
        }
        // Cut before the terminal marker: Anthropic's last two events are message_delta
        // (stop_reason) + message_stop, so cut before message_delta.
        let keep = match (kind, name) {
            (_, "anthropic-error-before-content") => ev.len() - 1,
            (StreamKind::Anthropic, _) => ev.len() - 2,
            _ => ev.len() - 1,
        };
        let cut = track(kind, &ev[..keep], start);
        assert!(!cut.is_complete(), "{name}");
        assert_eq!(cut.end(), StreamEnd::Truncated, "{name}");
        // The same cut seen through the framer: bytes end mid-event → finish flags it.
        let raw_len: usize = ev[..keep].iter().map(|e| e.raw.len()).sum();
        let mut f = SseFramer::new();
        f.push(&bytes[..raw_len + 5]).unwrap();
        let mut tr = StreamTracker::new(kind, start);
        while let Some(e) = f.next_event() {
            tr.observe(start, &e);
        }
        let trailing = f.finish();
        tr.observe_trailing(start, &trailing);
        assert!(trailing.is_truncated() && !tr.is_complete(), "{name}");
    }
}

/// Anthropic stream completion: a body ending after `message_delta` with `stop_reason` and
/// no open block is complete; with a block still open it is a dropped connection.
#[test]
fn anthropic_stop_reason_completes_only_without_open_blocks() {
    let (ev, _) = feed(fixture("anthropic-text"));
    let n = ev.len();
    let t = track(StreamKind::Anthropic, &ev[..n - 1], t0());
    assert!(t.is_complete());
    assert_eq!(t.terminal(), Some(Terminal::StopReason));
    // Drop the content_block_stop (index n - 3): the block stays open.
    let mut open: Vec<Event> = ev[..n - 3].to_vec();
    open.push(ev[n - 2].clone());
    let t = track(StreamKind::Anthropic, &open, t0());
    assert_eq!(t.open_blocks(), &[0]);
    assert!(!t.is_complete());
    assert_eq!(t.end(), StreamEnd::Truncated);
    // Ending before the message_delta after the block started: truncated.
    let t = track(StreamKind::Anthropic, &ev[..3], t0());
    assert_eq!(t.end(), StreamEnd::Truncated);
}

#[test]
fn stall_and_readiness_with_explicit_instants() {
    let start = t0();
    let ping = event("event: ping\ndata: {\"type\":\"ping\"}\n\n");
    let (ev, _) = feed(fixture("anthropic-text"));
    let mut t = StreamTracker::new(StreamKind::Anthropic, start);
    let readiness = secs(30);
    assert_eq!(t.readiness(start + secs(30), readiness), Readiness::Waiting);
    // Pings are not useful: still a zombie after the readiness timeout.
    t.observe(start + secs(10), &ping);
    t.observe(start + secs(20), &ping);
    assert_eq!(t.readiness(start + secs(30), readiness), Readiness::Waiting);
    assert_eq!(
        t.readiness(start + secs(30) + Duration::from_millis(1), readiness),
        Readiness::Zombie
    );
    // message_start is useful: ready.
    t.observe(start + secs(31), &ev[0]);
    assert_eq!(t.readiness(start + secs(60), readiness), Readiness::Ready);

    // Stall: measured from the start until progress; lifecycle and pings do not restart it.
    let stall = secs(180);
    assert!(!t.stalled(start + secs(180), stall));
    assert!(t.stalled(start + secs(181), stall));
    t.observe(start + secs(100), &ev[3]); // text_delta
    assert_eq!(t.last_progress(), start + secs(100));
    assert!(!t.stalled(start + secs(280), stall));
    t.observe(start + secs(200), &ping);
    assert!(
        t.stalled(start + secs(281), stall),
        "pings do not restart the budget"
    );
    // A finished stream never stalls.
    for e in &ev[4..] {
        t.observe(start + secs(150), e);
    }
    assert!(t.is_complete());
    assert!(!t.stalled(start + secs(10_000), stall));
}

#[test]
fn reasoning_progress_restarts_the_stall_budget() {
    let start = t0();
    let (ev, _) = feed(fixture("anthropic-thinking-tool"));
    let mut t = StreamTracker::new(StreamKind::Anthropic, start);
    t.observe(start, &ev[0]);
    t.observe(start, &ev[1]);
    t.observe(start + secs(170), &ev[2]); // thinking_delta
    assert!(!t.stalled(start + secs(300), secs(180)));
    assert!(t.seen_content(), "thinking deltas end the hold");
    assert_eq!(t.first_content_at(), Some(start + secs(170)));
    let (ev, _) = feed(fixture("openai-responses"));
    let mut t = StreamTracker::new(StreamKind::OpenAiResponses, start);
    t.observe(start, &ev[0]);
    t.observe(start + secs(120), &ev[2]); // reasoning item added
    assert!(
        !t.seen_content(),
        "an empty reasoning item does not end the hold"
    );
    assert!(!t.stalled(start + secs(250), secs(180)));
    assert!(t.stalled(start + secs(301), secs(180)));
}

/// Case A20(a): `message_start`, pings every 10 s for 180 s, then content and `message_stop`.
/// §6 (pings do not restart the stall budget) wins over the case text; with the default
/// 180 s budget and strict `>` the stream still completes. With the case's 90 s budget it
/// stalls unless the per-provider opt-in lets keepalives restart the budget.
#[test]
fn a20a_pings_only_then_content() {
    let start = t0();
    let (ev, _) = feed(fixture("anthropic-text"));
    let ping = event("event: ping\ndata: {\"type\":\"ping\"}\n\n");
    let run = |stall: Duration, keepalive: bool| -> (bool, StreamEnd) {
        let mut t =
            StreamTracker::new(StreamKind::Anthropic, start).keepalive_restarts_stall(keepalive);
        let mut stalled = false;
        t.observe(start, &ev[0]);
        t.observe(start, &ev[1]);
        for s in (10..180).step_by(10) {
            t.observe(start + secs(s), &ping);
            stalled |= t.stalled(start + secs(s), stall);
        }
        stalled |= t.stalled(start + secs(180), stall);
        for e in &ev[3..] {
            t.observe(start + secs(180), e);
        }
        (stalled, t.end())
    };
    assert_eq!(run(secs(180), false), (false, StreamEnd::Complete));
    assert!(
        run(secs(90), false).0,
        "§6: keepalives do not restart the budget"
    );
    assert_eq!(run(secs(90), true), (false, StreamEnd::Complete));
}

/// Case A20(b): first text delta then silence; the 90 s watchdog fires just after 90 s.
#[test]
fn a20b_silence_after_first_token() {
    let start = t0();
    let (ev, _) = feed(fixture("anthropic-text"));
    let mut t = StreamTracker::new(StreamKind::Anthropic, start);
    for e in &ev[..4] {
        t.observe(start + secs(1), e);
    }
    assert!(!t.stalled(start + secs(91), secs(90)));
    assert!(t.stalled(start + secs(91) + Duration::from_millis(1), secs(90)));
    assert_eq!(t.end(), StreamEnd::Truncated);
    let err = t.error_event("stalled", false);
    let (ev, _) = feed(&err);
    let c = crate::proxy::sse::classify_event(StreamKind::Anthropic, &ev[0]);
    assert_eq!(c.error.unwrap().error_type, "api_error");
}

#[test]
fn error_event_and_heartbeat_per_kind() {
    let start = t0();
    let a = StreamTracker::new(StreamKind::Anthropic, start);
    assert!(a.error_event("m", true).starts_with(b"event: error\n"));
    assert_eq!(a.heartbeat(), ANTHROPIC_HEARTBEAT);
    let c = StreamTracker::new(StreamKind::OpenAiChat, start);
    assert!(c.error_event("m", false).ends_with(b"data: [DONE]\n\n"));
    assert_eq!(c.heartbeat(), OPENAI_HEARTBEAT);
    let r = StreamTracker::new(StreamKind::OpenAiResponses, start);
    assert!(
        r.error_event("m", false)
            .starts_with(b"event: response.failed\n")
    );
    assert_eq!(r.heartbeat(), b": ping\n\n");
    assert_eq!(r.kind(), StreamKind::OpenAiResponses);
}

fn text_delta(s: &str) -> Event {
    event(&format!(
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{s}\"}}}}\n\n"
    ))
}

#[test]
fn throughput_watchdog() {
    let start = t0();
    let (warmup, window) = (secs(10), secs(10));
    let mut t = StreamTracker::new(StreamKind::Anthropic, start);
    assert!(
        !t.throughput_below(start + secs(100), 10, warmup, window),
        "no text yet"
    );
    // 20 bytes/s for 30 s from t=5.
    for s in 5..35 {
        t.observe(start + secs(s), &text_delta("0123456789"));
        t.observe(
            start + secs(s) + Duration::from_millis(500),
            &text_delta("0123456789"),
        );
    }
    assert!(
        !t.throughput_below(start + secs(20), 10, warmup, window),
        "warm-up + window not over"
    );
    assert!(!t.throughput_below(start + secs(34), 10, warmup, window));
    assert!(t.throughput_below(start + secs(34), 30, warmup, window));
    // Silence: the rate over the last window drops below the floor.
    assert!(!t.throughput_below(start + secs(38), 10, warmup, window));
    assert!(t.throughput_below(start + secs(45), 10, warmup, window));

    // Tool calls pause the watchdog: paused time does not count.
    let (ev, _) = feed(fixture("anthropic-thinking-tool"));
    let mut t = StreamTracker::new(StreamKind::Anthropic, start);
    for s in 0..20 {
        t.observe(start + secs(s), &text_delta("0123456789abcdefghij"));
    }
    t.observe(start + secs(20), &ev[6]); // tool_use block start
    assert!(
        !t.throughput_below(start + secs(200), 10, warmup, window),
        "paused"
    );
    t.observe(start + secs(200), &ev[7]); // input_json_delta: still paused
    assert!(!t.throughput_below(start + secs(201), 10, warmup, window));
    // Text resumes at t=300: only 20 s of active time before the pause + what follows.
    t.observe(start + secs(300), &text_delta("0123456789abcdefghij"));
    assert!(
        !t.throughput_below(start + secs(300), 10, warmup, window),
        "window spans the pause"
    );
    assert!(t.throughput_below(start + secs(312), 10, warmup, window));

    // Usage-only and empty events add nothing.
    let mut t = StreamTracker::new(StreamKind::OpenAiChat, start);
    let (ev, _) = feed(fixture("openai-chat-text"));
    t.observe(start, &ev[0]);
    t.observe(start, &ev[5]);
    assert!(
        !t.throughput_below(start + secs(100), 1, warmup, window),
        "no text, no verdict"
    );
    t.observe(start + secs(1), &ev[1]);
    assert!(t.throughput_below(start + secs(30), 1, warmup, window));
}
