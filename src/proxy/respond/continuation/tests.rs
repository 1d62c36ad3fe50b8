use super::*;

const FIXTURE: &str = include_str!("../../../../tests/fixtures/sse/anthropic-text.sse");

/// The fixture's events, each with its blank line.
fn events(s: &str) -> Vec<String> {
    s.split_inclusive("\n\n").map(str::to_string).collect()
}

fn turn_of(stream: &str) -> TextTurn {
    let mut f = SseFramer::new();
    f.push(stream.as_bytes()).unwrap();
    let mut t = TextTurn::default();
    for ev in f {
        t.observe(&ev);
    }
    t
}

fn delta(text: &str) -> String {
    format!(
        "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":{}}}}}\n\n",
        serde_json::to_string(text).unwrap()
    )
}

fn ctx() -> Context {
    Context {
        enabled: true,
        anthropic_stream: true,
        anthropic_upstream: true,
        ends_with_assistant: false,
        continued: false,
        before_deadline: true,
        at_boundary: true,
    }
}

/// The fixture cut after its `n`th event (message_start, block start, ping, deltas…).
fn head(n: usize) -> String {
    events(FIXTURE)[..n].concat()
}

#[test]
fn an_open_text_block_is_eligible() {
    let t = turn_of(&head(5));
    assert_eq!(t.text(), "Sure — here");
    assert!(t.single_open_text());
    assert!(eligible(&ctx(), &t));
}

#[test]
fn every_condition_is_needed() {
    let t = turn_of(&head(5));
    let off: [fn(&mut Context); 7] = [
        |c| c.enabled = false,
        |c| c.anthropic_stream = false,
        |c| c.anthropic_upstream = false,
        |c| c.ends_with_assistant = true,
        |c| c.continued = true,
        |c| c.before_deadline = false,
        |c| c.at_boundary = false,
    ];
    for f in off {
        let mut c = ctx();
        f(&mut c);
        assert!(!eligible(&c, &t), "{c:?}");
    }
    // No text yet, or only whitespace: nothing to continue from.
    assert!(!eligible(&ctx(), &turn_of(&head(3))));
    let ws = format!("{}{}", head(3), delta("  \n"));
    assert!(!eligible(&ctx(), &turn_of(&ws)));
    // The block closed: the turn was (nearly) over.
    let closed = format!(
        "{}event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\n",
        head(5)
    );
    assert!(!eligible(&ctx(), &turn_of(&closed)));
}

#[test]
fn thinking_and_tool_turns_are_never_continued() {
    for f in [
        "anthropic-thinking-tool.sse",
        "anthropic-thinking-omitted.sse",
    ] {
        let s = std::fs::read_to_string(format!(
            "{}/tests/fixtures/sse/{f}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        // Every prefix of the stream, cut on an event boundary.
        let evs = events(&s);
        for n in 0..=evs.len() {
            assert!(!eligible(&ctx(), &turn_of(&evs[..n].concat())), "{f} {n}");
        }
    }
    let tool = format!(
        "{}event: content_block_stop\ndata: {{\"type\":\"content_block_stop\",\"index\":0}}\n\nevent: content_block_start\ndata: {{\"type\":\"content_block_start\",\"index\":1,\"content_block\":{{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{{}}}}}}\n\n",
        head(5)
    );
    assert!(!eligible(&ctx(), &turn_of(&tool)));
}

#[test]
fn the_last_message_role_is_read() {
    let user = br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let asst = br#"{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hel"}]}"#;
    assert!(!ends_with_assistant(user));
    assert!(ends_with_assistant(asst));
    assert!(ends_with_assistant(b"{\"messages\":[]}"));
    assert!(ends_with_assistant(b"not json"));
}

#[test]
fn prefill_appends_the_text_and_keeps_the_rest() {
    let body = br#"{"model":"m","stream":true,"max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#;
    let p = prefill(body, "Sure — here").unwrap();
    assert_eq!(p.trimmed, "");
    let v: Value = serde_json::from_slice(&p.body).unwrap();
    assert_eq!(v["stream"], true);
    assert_eq!(v["max_tokens"], 64);
    assert_eq!(v["model"], "m");
    let msgs = v["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(
        msgs[0],
        serde_json::json!({"role":"user","content":[{"type":"text","text":"hi"}]})
    );
    assert_eq!(
        msgs[1],
        serde_json::json!({"role":"assistant","content":"Sure — here"})
    );
    // The earlier message is kept byte for byte.
    let s = std::str::from_utf8(&p.body).unwrap();
    assert!(s.contains(r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#));
}

#[test]
fn prefill_trims_trailing_whitespace_and_remembers_it() {
    let body = br#"{"stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let p = prefill(body, "Line one.\n\n ").unwrap();
    assert_eq!(p.trimmed, "\n\n ");
    let v: Value = serde_json::from_slice(&p.body).unwrap();
    assert_eq!(v["messages"][1]["content"], "Line one.");
    assert!(prefill(body, " \n").is_none(), "nothing to prefill");
    assert!(prefill(b"{\"stream\":true}", "x").is_none(), "no messages");
}

/// A continuation stream: its own message_start, block start and ping, then `deltas`, then
/// the fixture's tail (stop, message_delta, message_stop).
fn continuation(deltas: &[String]) -> String {
    let start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_02Cont\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":830,\"output_tokens\":1}}}\n\n";
    let evs = events(FIXTURE);
    format!(
        "{start}{}{}{}{}",
        evs[1],
        evs[2],
        deltas.concat(),
        evs[evs.len() - 3..].concat()
    )
}

/// Feeds `stream` to `s` in chunks of `size` bytes.
fn spliced(s: &mut Splice, stream: &str, size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for c in stream.as_bytes().chunks(size) {
        out.extend_from_slice(&s.feed(c).unwrap());
    }
    out
}

#[test]
fn splice_is_byte_exact_with_the_uninterrupted_stream() {
    let evs = events(FIXTURE);
    let broken = head(5);
    let cont = continuation(&evs[5..evs.len() - 3]);
    for size in [1, 7, 64, 4096] {
        let mut s = Splice::new(String::new());
        let mut client = broken.clone().into_bytes();
        client.extend(spliced(&mut s, &cont, size));
        assert_eq!(
            String::from_utf8(client).unwrap(),
            FIXTURE,
            "chunks of {size}"
        );
        assert!(s.spliced());
    }
}

#[test]
fn splice_takes_the_trimmed_whitespace_off_the_continuation() {
    let evs = events(FIXTURE);
    // The uninterrupted stream: "Sure", " — here ", "is the fix", …
    let full_deltas = [delta("Sure"), delta(" — here "), delta("is the fix")];
    let tail = evs[7..evs.len() - 3].concat();
    let full = format!(
        "{}{}{tail}{}",
        head(3),
        full_deltas.concat(),
        evs[evs.len() - 3..].concat()
    );
    // It broke after " — here ": the prefill is "Sure — here", the model continues with
    // " is the fix".
    let broken = format!("{}{}{}", head(3), full_deltas[0], full_deltas[1]);
    let t = turn_of(&broken);
    let p = prefill(br#"{"messages":[{"role":"user","content":"x"}]}"#, t.text()).unwrap();
    assert_eq!(p.trimmed, " ");
    let cont = continuation(&[delta(" is the fix"), tail.clone()]);
    let mut s = Splice::new(p.trimmed);
    let mut client = broken.into_bytes();
    client.extend(spliced(&mut s, &cont, 5));
    assert_eq!(String::from_utf8(client).unwrap(), full);
}

#[test]
fn splice_strips_across_deltas_and_drops_emptied_ones() {
    let mut s = Splice::new("\n\n".into());
    let cont = continuation(&[delta("\n"), delta("\nNext"), delta(" more")]);
    let out = String::from_utf8(spliced(&mut s, &cont, 3)).unwrap();
    let evs = events(FIXTURE);
    let want = format!(
        "{}{}{}",
        delta("Next"),
        delta(" more"),
        evs[evs.len() - 3..].concat()
    );
    assert_eq!(out, want);
}

#[test]
fn splice_keeps_a_continuation_that_starts_without_whitespace() {
    let mut s = Splice::new(" ".into());
    let cont = continuation(&[delta("is"), delta(" it")]);
    let out = String::from_utf8(spliced(&mut s, &cont, 4096)).unwrap();
    assert!(out.starts_with(&delta("is")), "{out}");
}

#[test]
fn splice_refuses_a_continuation_that_opens_another_block() {
    let mut s = Splice::new(String::new());
    let cont = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"x\",\"input\":{}}}\n\n";
    assert!(matches!(
        s.feed(cont.as_bytes()),
        Err(SpliceError::Unexpected(_))
    ));
}
