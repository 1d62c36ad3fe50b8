//! Framing: the SSE framing vectors 1–10 (one test each, below) over every fixture.

use super::{FIXTURES, XorShift, feed, feed_cuts, fixture, with_endings, with_mixed_endings};
use crate::proxy::sse::{
    ANTHROPIC_HEARTBEAT, EventKind, OPENAI_HEARTBEAT, classify_event, heartbeat,
};
use crate::wire::sse::{DEFAULT_MAX_EVENT_SIZE, Event, FEED_SLICE, FrameError, SseFramer};

/// The parsed view of an event, independent of line endings.
fn parsed(events: &[Event]) -> Vec<(Option<String>, String, bool, bool, bool)> {
    events
        .iter()
        .map(|e| {
            (
                e.event.clone(),
                e.data.clone(),
                e.has_data,
                e.is_comment_only,
                e.is_blank,
            )
        })
        .collect()
}

fn concat(events: &[Event]) -> Vec<u8> {
    events.iter().flat_map(|e| e.raw.iter().copied()).collect()
}

/// Every variant of every fixture: LF, CRLF, lone CR, mixed.
fn variants() -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    for (name, _, bytes) in FIXTURES {
        v.push((format!("{name}/lf"), bytes.to_vec()));
        v.push((format!("{name}/crlf"), with_endings(bytes, b"\r\n")));
        v.push((format!("{name}/cr"), with_endings(bytes, b"\r")));
        v.push((format!("{name}/mixed"), with_mixed_endings(bytes)));
    }
    v
}

#[test]
fn whole_stream_is_framed_byte_exact() {
    for (name, input) in variants() {
        let (events, t) = feed(&input);
        assert!(!t.is_truncated(), "{name}");
        assert_eq!(t.error, None, "{name}");
        assert_eq!(concat(&events), input, "{name}: byte-exact");
        assert!(
            events.iter().all(|e| !e.is_blank),
            "{name}: no blank events"
        );
        assert!(
            events.iter().all(|e| e.has_data),
            "{name}: every event has data"
        );
        let blank_lines = input.windows(2).filter(|w| w == b"\n\n").count();
        if name.ends_with("/lf") {
            assert_eq!(
                events.len(),
                blank_lines,
                "{name}: one event per blank line"
            );
        }
    }
}

/// Vector 1 (and 2 for the `\r` | `\n` split): whole, byte-by-byte, every single split point,
/// 1,000 pseudo-random multi-splits → identical events, byte-exact.
#[test]
fn chunking_never_changes_events() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for (name, input) in variants() {
        let (whole, _) = feed(&input);
        let n = input.len();
        let bytewise: Vec<usize> = (1..n).collect();
        let (ev, t) = feed_cuts(&input, &bytewise, DEFAULT_MAX_EVENT_SIZE);
        assert_eq!(ev, whole, "{name}: byte by byte");
        assert!(!t.is_truncated());
        for s in 0..=n {
            let (ev, t) = feed_cuts(&input, &[s], DEFAULT_MAX_EVENT_SIZE);
            assert_eq!(ev, whole, "{name}: split at {s}");
            assert!(!t.is_truncated());
        }
        for round in 0..1000 {
            let k = 1 + rng.below(24);
            let mut cuts: Vec<usize> = (0..k).map(|_| rng.below(n + 1)).collect();
            cuts.sort_unstable();
            let (ev, _) = feed_cuts(&input, &cuts, DEFAULT_MAX_EVENT_SIZE);
            assert_eq!(ev, whole, "{name}: random round {round} cuts {cuts:?}");
        }
    }
}

/// Byte-exact at every moment: yielded raw bytes + `pending()` equal the input so far.
#[test]
fn yielded_plus_pending_equals_input_prefix() {
    for (name, input) in variants() {
        let mut f = SseFramer::new();
        let mut out = Vec::new();
        for (i, b) in input.iter().enumerate() {
            f.push(std::slice::from_ref(b)).unwrap();
            for e in f.by_ref() {
                out.extend_from_slice(&e.raw);
            }
            let mut seen = out.clone();
            seen.extend_from_slice(f.pending());
            assert_eq!(seen, &input[..=i], "{name} at {i}");
        }
    }
}

/// Vector 2: `\n`, `\r\n`, lone `\r` and mixed endings give identical events.
#[test]
fn line_endings_give_identical_events() {
    for (name, _, bytes) in FIXTURES {
        let (lf, _) = feed(bytes);
        for variant in [
            with_endings(bytes, b"\r\n"),
            with_endings(bytes, b"\r"),
            with_mixed_endings(bytes),
        ] {
            let (ev, _) = feed(&variant);
            assert_eq!(parsed(&ev), parsed(&lf), "{name}");
        }
    }
}

/// A `\r` at the end of one read and `\n` at the start of the next is one line ending.
#[test]
fn split_crlf_is_one_line_ending() {
    let input = b"event: ping\r\ndata: {\"type\":\"ping\"}\r\n\r\ndata: x\r\n\r\n";
    for s in 0..input.len() {
        let (ev, t) = feed_cuts(input, &[s], DEFAULT_MAX_EVENT_SIZE);
        assert_eq!(ev.len(), 2, "split at {s}: no false boundary");
        assert!(ev.iter().all(|e| !e.is_blank));
        assert_eq!(ev[0].event.as_deref(), Some("ping"));
        assert_eq!(ev[1].data, "x");
        assert!(!t.is_truncated());
    }
    // The event whose blank line ends in `\r` waits for the next byte.
    let mut f = SseFramer::new();
    f.push(b"data: a\r\n\r").unwrap();
    assert_eq!(f.next_event(), None);
    f.push(b"\n").unwrap();
    let e = f.next_event().unwrap();
    assert_eq!(&e.raw[..], b"data: a\r\n\r\n");
    assert!(f.at_boundary());
}

/// A lone-`\r` stream that goes quiet: `finish` or `resolve_trailing_cr` release the event.
#[test]
fn trailing_cr_is_resolved_at_eof_or_on_request() {
    let mut f = SseFramer::new();
    f.push(b"data: a\r\r").unwrap();
    assert_eq!(f.next_event(), None);
    let t = f.finish();
    assert_eq!(t.events.len(), 1);
    assert_eq!(t.events[0].data, "a");
    assert!(!t.is_truncated());

    let mut f = SseFramer::new();
    f.push(b"data: a\r").unwrap();
    assert!(
        !f.resolve_trailing_cr(),
        "a `\\r` ending a field line is not a boundary"
    );
    f.push(b"\r").unwrap();
    assert!(f.resolve_trailing_cr());
    assert_eq!(f.next_event().unwrap().data, "a");
    // A `\n` that turns out to follow becomes a blank passthrough event, nothing else.
    f.push(b"\ndata: b\r\n\r\n").unwrap();
    let ev: Vec<Event> = f.by_ref().collect();
    assert_eq!(ev.len(), 2);
    assert!(ev[0].is_blank && &ev[0].raw[..] == b"\n");
    assert_eq!(ev[1].data, "b");
}

/// Vectors 3 and 4: `data:value` without a space; multi-line data joins with `\n`.
#[test]
fn field_parsing() {
    let (ev, _) = feed(b"data:value\n\nevent:x\ndata:  two spaces\ndata:\ndata: c\n\n");
    assert_eq!(ev[0].data, "value");
    assert_eq!(ev[0].event, None);
    assert_eq!(ev[1].event.as_deref(), Some("x"));
    assert_eq!(
        ev[1].data, " two spaces\n\nc",
        "only one leading space is stripped"
    );
    // Fields without a colon, `id`, `retry`, unknown fields: kept in raw, otherwise ignored.
    let (ev, _) = feed(b"id: 7\nretry: 10\nfoo\ndata\ndata: y\n\nid: 8\n\n");
    assert_eq!(ev[0].data, "\ny");
    assert!(ev[0].has_data && !ev[0].is_comment_only && !ev[0].is_blank);
    assert!(!ev[1].has_data && !ev[1].is_blank && !ev[1].is_comment_only);
    assert_eq!(
        classify_event(crate::proxy::sse::StreamKind::OpenAiChat, &ev[1]).kind,
        EventKind::Metadata
    );
    // An empty `event:` value counts as absent.
    let (ev, _) = feed(b"event:\ndata: z\n\n");
    assert_eq!(ev[0].event, None);
}

/// Vector 5: comments never create data events; extra blank lines are harmless.
#[test]
fn comments_and_extra_blank_lines() {
    for (name, kind, bytes) in FIXTURES {
        let (orig, _) = feed(bytes);
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        // `: ping` events between events, a comment line inside each event (before `data:`),
        // and runs of extra blank lines.
        let mut noisy = String::from(": hello\n\n\n");
        for block in text.split_terminator("\n\n") {
            let block = block.replacen("\ndata:", "\n: keep-alive\ndata:", 1);
            noisy.push_str(&block);
            noisy.push_str("\n\n: ping\n\n\n\n");
        }
        let (ev, t) = feed(noisy.as_bytes());
        assert!(!t.is_truncated());
        assert_eq!(concat(&ev), noisy.as_bytes(), "{name}: byte-exact");
        let data: Vec<&Event> = ev.iter().filter(|e| e.has_data).collect();
        assert_eq!(
            data.len(),
            orig.len(),
            "{name}: comments create no data events"
        );
        for (a, b) in data.iter().zip(&orig) {
            assert_eq!((&a.event, &a.data), (&b.event, &b.data), "{name}");
            assert!(!a.is_comment_only);
        }
        let comments = ev.iter().filter(|e| e.is_comment_only).count();
        assert_eq!(comments, orig.len() + 1, "{name}");
        for e in &ev {
            let c = classify_event(kind, e);
            if e.is_comment_only {
                assert_eq!(c.kind, EventKind::Keepalive);
            }
            if e.is_blank {
                assert_eq!(c.kind, EventKind::Blank);
                assert!(!c.is_useful() && !c.progress && !c.content_bearing);
                assert!(e.raw.iter().all(|&b| b == b'\n'));
            }
        }
    }
}

/// Vector 6: a multi-byte character split across reads is reassembled; invalid UTF-8 is
/// replaced, never a panic.
#[test]
fn utf8_split_and_invalid() {
    let input = fixture("anthropic-text");
    let (whole, _) = feed(input);
    let joined: String = whole.iter().map(|e| e.data.as_str()).collect();
    assert!(joined.contains("Naïve café ✓ 日本語."));
    assert!(joined.contains(" — here"));
    let inner: Vec<usize> = (1..input.len())
        .filter(|&i| input[i] & 0xC0 == 0x80)
        .collect();
    assert!(inner.len() > 10, "the fixture has multi-byte characters");
    for &s in &inner {
        let (ev, _) = feed_cuts(input, &[s], DEFAULT_MAX_EVENT_SIZE);
        assert_eq!(ev, whole, "split inside a character at {s}");
    }
    let bad = b"event: \xff\ndata: a\xc3\ndata: \xe2\x80\n\n";
    let (ev, t) = feed(bad);
    assert!(!t.is_truncated());
    assert_eq!(ev[0].event.as_deref(), Some("\u{fffd}"));
    assert_eq!(ev[0].data, "a\u{fffd}\n\u{fffd}");
    assert_eq!(&ev[0].raw[..], bad);
}

/// Vector 7: an event over the limit is a terminal error with bounded memory; events up to
/// the limit pass at any chunking.
#[test]
fn oversized_event_is_an_error_with_bounded_buffer() {
    let small = b"data: ok\n\n";
    let big = format!("data: {}\n\n", "x".repeat(300));
    let mut input = small.to_vec();
    input.extend_from_slice(big.as_bytes());
    input.extend_from_slice(small);
    let limit = 100;
    // Byte by byte: the buffer never exceeds the limit; the first event still comes out.
    let mut f = SseFramer::with_max_event_size(limit);
    let mut got = Vec::new();
    let mut err = None;
    for b in &input {
        match f.push(std::slice::from_ref(b)) {
            Ok(()) => assert!(f.pending().len() <= limit),
            Err(e) => {
                err = Some(e);
                break;
            }
        }
        got.extend(f.by_ref());
    }
    assert_eq!(
        err,
        Some(FrameError::EventTooLarge {
            limit,
            size: limit + 1
        })
    );
    got.extend(f.by_ref());
    assert_eq!(got.len(), 1);
    assert!(f.pending().is_empty() && f.buffer_capacity() <= limit + 1);
    assert!(f.push(small).is_err(), "the error is sticky");
    assert_eq!(f.finish().error.map(|_| ()), Some(()));

    // Whole: same verdict, the event before it is delivered.
    let mut f = SseFramer::with_max_event_size(limit);
    assert!(matches!(
        f.push(&input),
        Err(FrameError::EventTooLarge { .. })
    ));
    assert_eq!(f.next_event().unwrap().data, "ok");
    assert_eq!(f.next_event(), None);

    // Exactly at the limit passes; one byte more fails, at every split point.
    let exact = format!("data: {}\n\n", "y".repeat(limit - 8));
    assert_eq!(exact.len(), limit);
    let over = format!("data: {}\n\n", "y".repeat(limit - 7));
    for s in 0..=exact.len() {
        let mut f = SseFramer::with_max_event_size(limit);
        assert!(f.push(&exact.as_bytes()[..s]).is_ok());
        assert!(f.push(&exact.as_bytes()[s..]).is_ok());
        assert_eq!(f.next_event().unwrap().raw.len(), limit);
        let mut f = SseFramer::with_max_event_size(limit);
        let r = f
            .push(&over.as_bytes()[..s])
            .and_then(|()| f.push(&over.as_bytes()[s..]));
        assert!(r.is_err(), "split at {s}");
    }

    // A huge chunk without a boundary: rejected while buffering at most one slice past the
    // limit, never the whole chunk.
    let mut f = SseFramer::new();
    let huge = vec![b'a'; 8 * DEFAULT_MAX_EVENT_SIZE];
    assert!(f.push(&huge).is_err());
    assert!(f.pending().is_empty());
    assert!(f.buffer_capacity() <= DEFAULT_MAX_EVENT_SIZE + FEED_SLICE);
}

/// Vector 8 (framing half): a stream cut mid-event leaves a truncated trailing event.
#[test]
fn truncated_trailing_event_is_flagged() {
    for (name, _, bytes) in FIXTURES {
        let (all, _) = feed(bytes);
        let last = all.last().unwrap().raw.len();
        for cut in [
            bytes.len() - 1,
            bytes.len() - last / 2,
            bytes.len() - last + 1,
        ] {
            let (ev, t) = feed(&bytes[..cut]);
            assert!(t.is_truncated(), "{name} cut at {cut}");
            assert_eq!(ev.len(), all.len() - 1, "{name}");
            assert_eq!(&t.partial[..], &bytes[bytes.len() - last..cut]);
        }
        let (_, t) = feed(&bytes[..bytes.len() - last]);
        assert!(
            !t.is_truncated(),
            "{name}: cut on a boundary is not mid-event"
        );
    }
}

/// Vectors 9 and 10 (and case A17): a relay that injects heartbeats only at event boundaries
/// outputs the input plus whole heartbeat events, never splitting an upstream event.
#[test]
fn heartbeats_only_between_events() {
    let mut rng = XorShift(42);
    for (name, kind, bytes) in FIXTURES {
        let (orig, _) = feed(bytes);
        for _ in 0..200 {
            let mut f = SseFramer::new();
            let mut out = Vec::new();
            let mut injected = 0;
            let mut from = 0;
            while from < bytes.len() {
                let to = (from + 1 + rng.below(80)).min(bytes.len());
                f.push(&bytes[from..to]).unwrap();
                for e in f.by_ref() {
                    out.extend_from_slice(&e.raw);
                }
                // The upstream is "silent" here: inject only when nothing is pending.
                if f.at_boundary() && rng.below(2) == 0 {
                    out.extend_from_slice(heartbeat(kind));
                    injected += 1;
                }
                from = to;
            }
            let (ev, t) = feed(&out);
            assert!(!t.is_truncated());
            let (beats, upstream): (Vec<&Event>, Vec<&Event>) = ev.iter().partition(|e| {
                classify_event(kind, e).kind == EventKind::Keepalive
                    && &e.raw[..] == heartbeat(kind)
            });
            let expected_beats = injected
                + orig
                    .iter()
                    .filter(|e| &e.raw[..] == heartbeat(kind))
                    .count();
            assert_eq!(beats.len(), expected_beats, "{name}");
            let upstream: Vec<Event> = upstream.into_iter().cloned().collect();
            let orig_rest: Vec<Event> = orig
                .iter()
                .filter(|e| &e.raw[..] != heartbeat(kind))
                .cloned()
                .collect();
            assert_eq!(upstream, orig_rest, "{name}: upstream events intact");
        }
    }
    // A17: `event:` line, a long pause, then the `data:` line — no boundary in between.
    let mut f = SseFramer::new();
    f.push(b"event: content_block_delta\n").unwrap();
    assert!(!f.at_boundary(), "no heartbeat may be injected mid-event");
    f.push(b"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n").unwrap();
    assert!(f.next_event().is_some() && f.at_boundary());
    assert_eq!(
        ANTHROPIC_HEARTBEAT,
        heartbeat(crate::proxy::sse::StreamKind::Anthropic)
    );
    assert_eq!(
        OPENAI_HEARTBEAT,
        heartbeat(crate::proxy::sse::StreamKind::OpenAiResponses)
    );
}
