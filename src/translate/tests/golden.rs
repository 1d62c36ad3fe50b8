//! Golden tests: one case per mapping row, in `requests/*.json`, `responses/*.json` and
//! `streams/cases.json`.

use serde_json::{Value, json};

use super::{bless, client, context, dialect, fixture_dir, options};
use crate::translate::{StreamTranslator, translate_request, translate_response};

/// Runs every case of a JSON array file with `run`, comparing (or blessing) `expected`.
fn run_cases(path: &std::path::Path, run: impl Fn(&Value) -> Value) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut cases: Vec<Value> = serde_json::from_str(&text).unwrap();
    let mut changed = false;
    let mut failures = Vec::new();
    for case in &mut cases {
        let got = run(case);
        match case.get("expected") {
            Some(want) if *want == got => {}
            None if bless() => {
                case["expected"] = got;
                changed = true;
            }
            want => failures.push(format!(
                "{} / {}:\n  want {}\n  got  {}",
                path.display(),
                case["row"],
                want.map(Value::to_string)
                    .unwrap_or_else(|| "<missing>".into()),
                got
            )),
        }
    }
    if changed {
        std::fs::write(path, serde_json::to_string_pretty(&cases).unwrap() + "\n").unwrap();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn json_files(sub: &str) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(fixture_dir(sub))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no fixtures in {sub}");
    v
}

#[test]
fn request_rows_translate_as_golden() {
    for path in json_files("requests") {
        // File name: `<client>_to_<dialect>.json`.
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let (from, to) = stem.split_once("_to_").unwrap();
        run_cases(&path, |case| {
            let body = serde_json::to_vec(&case["input"]).unwrap();
            let model = case
                .get("model")
                .and_then(Value::as_str)
                .unwrap_or("upstream-model");
            match translate_request(
                client(from),
                dialect(to),
                &body,
                model,
                &options(case.get("options")),
            ) {
                Ok(t) => {
                    let mut out =
                        json!({"body": serde_json::from_slice::<Value>(&t.body).unwrap()});
                    let c = &t.context;
                    out["context"] = json!({"thinking": c.thinking, "include_usage": c.include_usage,
                        "stop_sequences": c.stop_sequences, "client_model": c.client_model});
                    if !t.warnings.is_empty() {
                        out["warnings"] = json!(t.warnings);
                    }
                    if !t.downgrades.is_empty() {
                        out["downgrades"] = json!(t.downgrades);
                    }
                    out
                }
                Err(e) => {
                    json!({"error": {"field": e.field(), "status": e.status(), "message": e.to_string()}})
                }
            }
        });
    }
}

#[test]
fn response_rows_translate_as_golden() {
    for path in json_files("responses") {
        // File name: `<dialect>_to_<client>.json`.
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let (from, to) = stem.split_once("_to_").unwrap();
        run_cases(&path, |case| {
            let body = serde_json::to_vec(&case["input"]).unwrap();
            let ctx = context(client(to), case.get("context"));
            match translate_response(dialect(from), &body, &ctx) {
                Ok(b) => serde_json::from_slice(&b).unwrap(),
                Err(e) => json!({"error": {"status": e.status(), "message": e.to_string()}}),
            }
        });
    }
}

/// Runs a stream case unsplit: the whole input in one `feed`, then `finish`.
pub(super) fn run_stream(case: &Value, input: &[u8], chunks: &[&[u8]]) -> Vec<u8> {
    let ctx = context(
        client(case["client"].as_str().unwrap()),
        case.get("context"),
    );
    let mut t = StreamTranslator::new(dialect(case["upstream"].as_str().unwrap()), &ctx).unwrap();
    let mut out = Vec::new();
    if chunks.is_empty() {
        out.extend_from_slice(&t.feed(input));
    }
    for c in chunks {
        out.extend_from_slice(&t.feed(c));
    }
    out.extend_from_slice(&t.finish());
    assert!(t.is_done());
    assert!(t.finish().is_empty(), "a second finish writes nothing");
    out
}

/// Stream cases: `streams/cases.json` lists (input, upstream, client, context, expected
/// file); the expected client SSE is in `streams/<expected>`.
pub(super) fn stream_cases() -> Vec<Value> {
    let text = std::fs::read_to_string(fixture_dir("streams").join("cases.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub(super) fn stream_input(case: &Value) -> Vec<u8> {
    std::fs::read(fixture_dir("streams").join(case["input"].as_str().unwrap())).unwrap()
}

#[test]
fn stream_rows_translate_as_golden() {
    let mut failures = Vec::new();
    for case in stream_cases() {
        let got = run_stream(&case, &stream_input(&case), &[]);
        let path = fixture_dir("streams").join(case["expected"].as_str().unwrap());
        match std::fs::read(&path) {
            Ok(want) if want == got => {}
            Err(_) if bless() => std::fs::write(&path, &got).unwrap(),
            _ => failures.push(format!(
                "{}:\n{}",
                path.display(),
                String::from_utf8_lossy(&got)
            )),
        }
        assert_eq!(
            terminal_count(&got, case["client"].as_str().unwrap()),
            1,
            "{case}"
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// How many terminal events of the client's format `sse` holds.
pub(super) fn terminal_count(sse: &[u8], client: &str) -> usize {
    let s = String::from_utf8_lossy(sse);
    match client {
        "anthropic" => {
            s.matches("event: message_stop\n").count() + s.matches("event: error\n").count()
        }
        "chat" => s.matches("data: [DONE]\n").count(),
        _ => {
            s.matches("event: response.completed\n").count()
                + s.matches("event: response.incomplete\n").count()
                + s.matches("event: response.failed\n").count()
        }
    }
}
