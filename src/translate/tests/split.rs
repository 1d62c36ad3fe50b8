//! Split safety: every stream case fed at every byte split point, and at 1,000 seeded random
//! multi-splits, gives the unsplit output; a truncation (at every line boundary and every 5th
//! byte) ends with exactly one well-formed terminal event of the client's format.

use serde_json::Value;

use super::golden::{run_stream, stream_cases, stream_input, terminal_count};

/// splitmix64: a tiny deterministic generator (seeded, so failures reproduce).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// One case per input fixture (`last`: its last case, else its first). Splitting acts on the
/// framer and decoder (the input side); the encoder sees the same events either way. The
/// single-split test takes the first case of each input (Chat and Anthropic clients), the
/// random test the last (Responses clients), and the cut test below takes every case.
fn one_case_per_input(last: bool) -> Vec<Value> {
    let mut cases = stream_cases();
    if last {
        cases.reverse();
    }
    let mut seen = std::collections::HashSet::new();
    cases
        .into_iter()
        .filter(|c| seen.insert(c["input"].as_str().unwrap_or_default().to_string()))
        .collect()
}

#[test]
fn every_single_split_point_gives_the_unsplit_output() {
    for case in one_case_per_input(false) {
        let input = stream_input(&case);
        let whole = run_stream(&case, &input, &[]);
        for k in 0..=input.len() {
            let got = run_stream(&case, &input, &[&input[..k], &input[k..]]);
            assert!(got == whole, "{} split at byte {k} differs", case["input"]);
        }
    }
}

#[test]
fn a_thousand_random_multi_splits_give_the_unsplit_output() {
    let mut rng = Rng(0x5EED_CAFE);
    for case in one_case_per_input(true) {
        let input = stream_input(&case);
        let whole = run_stream(&case, &input, &[]);
        for round in 0..1000 {
            let mut cuts: Vec<usize> = (0..1 + rng.below(24))
                .map(|_| rng.below(input.len() + 1))
                .collect();
            cuts.push(0);
            cuts.push(input.len());
            cuts.sort_unstable();
            let chunks: Vec<&[u8]> = cuts.windows(2).map(|w| &input[w[0]..w[1]]).collect();
            let got = run_stream(&case, &input, &chunks);
            assert!(
                got == whole,
                "{} round {round} cuts {cuts:?} differs",
                case["input"]
            );
        }
    }
}

#[test]
fn a_stream_cut_anywhere_ends_with_one_well_formed_terminal_event() {
    for case in stream_cases() {
        let input = stream_input(&case);
        let client = case["client"].as_str().unwrap();
        // Every line boundary (where a cut leaves whole events) and every 5th byte between.
        let cuts = (0..=input.len())
            .filter(|&k| k % 5 == 0 || k == input.len() || input[k.saturating_sub(1)] == b'\n');
        for k in cuts {
            let got = run_stream(&case, &input[..k], &[]);
            assert_eq!(
                terminal_count(&got, client),
                1,
                "{} cut at {k}",
                case["input"]
            );
            well_formed(client, &got)
                .unwrap_or_else(|e| panic!("{} cut at {k}: {e}", case["input"]));
        }
    }
}

/// Checks the client SSE: whole events, JSON data, a terminal event last; Anthropic blocks
/// open before their deltas and close once; Responses sequence numbers count up from 0.
pub(super) fn well_formed(client: &str, sse: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(sse).map_err(|e| e.to_string())?;
    if !text.ends_with("\n\n") {
        return Err("output does not end on an event boundary".into());
    }
    let mut open = std::collections::HashSet::new();
    let mut seq = 0;
    let events: Vec<&str> = text.trim_end_matches('\n').split("\n\n").collect();
    for (i, ev) in events.iter().enumerate() {
        let last = i + 1 == events.len();
        let mut name = None;
        let mut data = None;
        for line in ev.lines() {
            if let Some(n) = line.strip_prefix("event: ") {
                name = Some(n);
            } else if let Some(d) = line.strip_prefix("data: ") {
                data = Some(d);
            } else {
                return Err(format!("unexpected line {line:?}"));
            }
        }
        let data = data.ok_or("event without data")?;
        if data == "[DONE]" {
            if client != "chat" || !last {
                return Err("[DONE] out of place".into());
            }
            continue;
        }
        let v: Value = serde_json::from_str(data).map_err(|e| format!("{e}: {data}"))?;
        match client {
            "anthropic" => {
                let n = name.ok_or("anthropic event without a name")?;
                if v["type"] != n {
                    return Err(format!("event {n} carries type {}", v["type"]));
                }
                let idx = v["index"].as_u64();
                match n {
                    "content_block_start" if !open.insert(idx) => {
                        return Err("block opened twice".into());
                    }
                    "content_block_delta" if !open.contains(&idx) => {
                        return Err("delta for a closed block".into());
                    }
                    "content_block_stop" if !open.remove(&idx) => {
                        return Err("stop for a closed block".into());
                    }
                    "message_stop" if !open.is_empty() => {
                        return Err("message_stop with an open block".into());
                    }
                    "message_stop" | "error" if !last => {
                        return Err("terminal event not last".into());
                    }
                    _ => {}
                }
            }
            "responses" => {
                if v["sequence_number"] != seq {
                    return Err(format!(
                        "sequence_number {} where {seq} was due",
                        v["sequence_number"]
                    ));
                }
                seq += 1;
                if Some(v["type"].as_str().unwrap_or_default()) != name {
                    return Err("event name and type differ".into());
                }
            }
            _ => {
                if name.is_some() {
                    return Err("chat chunks carry no event name".into());
                }
            }
        }
    }
    Ok(())
}
