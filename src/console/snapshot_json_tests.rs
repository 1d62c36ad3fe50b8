//! The admin API's snapshot JSON is a contract: serialising the console fixture must give the
//! exact bytes captured in `tests/golden/snapshot.json` (captured before the snapshot's word
//! fields became enums), and parsing those bytes back must give the same typed values.

use super::test_support::snapshot;
use crate::snapshot::{Snapshot, WaitView};

fn fixture() -> Snapshot {
    let mut snap = snapshot();
    snap.recent[0].waits = vec![WaitView {
        target: "openrouter:main/anthropic/claude-sonnet-4".into(),
        reason: crate::snapshot::WaitReason::ModelLockout.into(),
        waited_ms: 9_950,
    }];
    snap
}

const GOLDEN: &str = include_str!("../../tests/golden/snapshot.json");

#[test]
fn snapshot_json_is_byte_for_byte_the_golden_file() {
    let json = serde_json::to_string_pretty(&fixture()).unwrap();
    assert_eq!(json, GOLDEN.trim_end_matches('\n'));
}

#[test]
fn golden_snapshot_json_parses_back_to_the_fixture() {
    let parsed: Snapshot = serde_json::from_str(GOLDEN).unwrap();
    let want = fixture();
    assert_eq!(parsed.providers, want.providers);
    assert_eq!(parsed.lockouts, want.lockouts);
    assert_eq!(parsed.totals, want.totals);
    // The requests come back too: an attached console (`sluice console`) shows them.
    assert!(!want.recent.is_empty());
    assert_eq!(parsed.recent, want.recent);
}

#[test]
fn the_parsed_snapshot_serialises_back_to_the_same_bytes() {
    // What an attached console rebuilds from the stream is the whole view model: every field
    // survives the round trip, not only the ones compared above.
    let parsed: Snapshot = serde_json::from_str(GOLDEN).unwrap();
    let again = serde_json::to_string_pretty(&parsed).unwrap();
    assert_eq!(again, GOLDEN.trim_end_matches('\n'));
}

#[test]
fn the_console_draws_the_same_screen_from_the_parsed_snapshot() {
    use std::sync::Arc;
    let want = fixture();
    let parsed: Snapshot = serde_json::from_str(&serde_json::to_string(&want).unwrap()).unwrap();
    let theme = crate::console::theme::Theme::default();
    let draw = |snap: Snapshot| {
        let app = crate::console::app::App::new(Arc::new(snap));
        let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(160, 48)).unwrap();
        term.draw(|f| crate::console::render(f, &app, &theme, 1_700_000_100_000))
            .unwrap();
        term.backend().buffer().clone()
    };
    assert_eq!(draw(parsed), draw(want));
}

#[test]
fn words_this_build_does_not_know_parse_and_serialise_back_unchanged() {
    // An attached console of another sluice version may receive words this one does not
    // know: they are kept as sent, neither an error nor a panic.
    let newer = GOLDEN
        .replacen("\"dialect\": \"openai\"", "\"dialect\": \"gemini\"", 1)
        .replacen("\"profile\": \"api_key\"", "\"profile\": \"workload\"", 1)
        .replacen(
            "\"strategy\": \"priority\"",
            "\"strategy\": \"cheapest\"",
            1,
        )
        .replacen("\"reason\": \"terminal\"", "\"reason\": \"over_budget\"", 1)
        .replacen(
            "\"upstream_dialect\": \"openai\"",
            "\"upstream_dialect\": \"x\"",
            1,
        )
        .replacen(
            "\"last_error_kind\": \"banned\"",
            "\"last_error_kind\": \"teapot\"",
            1,
        );
    assert_ne!(newer, GOLDEN);
    let parsed: Snapshot = serde_json::from_str(&newer).unwrap();
    let p = &parsed.providers[0];
    assert_eq!(
        (p.dialect.as_str(), p.profile.as_str()),
        ("gemini", "workload")
    );
    assert_eq!(p.dialect.known(), None);
    assert_eq!(parsed.combos[0].strategy.as_str(), "cheapest");
    assert_eq!(parsed.recent[0].skipped[0].reason.as_str(), "over_budget");
    assert_eq!(
        serde_json::to_string_pretty(&parsed).unwrap(),
        newer.trim_end_matches('\n')
    );
}
