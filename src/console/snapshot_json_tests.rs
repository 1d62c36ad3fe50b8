//! The admin API's snapshot JSON is a contract: serialising the console fixture must give the
//! exact bytes captured in `tests/golden/snapshot.json` (captured before the snapshot's word
//! fields became enums), and parsing those bytes back must give the same typed values.

use super::test_support::snapshot;
use crate::core::snapshot::{Snapshot, WaitView};

fn fixture() -> Snapshot {
    let mut snap = snapshot();
    snap.recent[0].waits = vec![WaitView {
        target: "openrouter:main/anthropic/claude-sonnet-4".into(),
        reason: "model_lockout".into(),
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
    // `recent` is not read back (see `Snapshot::recent`).
    assert!(parsed.recent.is_empty());
}
