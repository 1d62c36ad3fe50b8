//! Test support for the core's unit tests: the one candidate of a single-provider,
//! single-connection config, and cooling that connection with a 503 through the real doors.

use http::HeaderMap;

use super::Core;
use super::resilience::AttemptEnd;
use crate::clock::{Clock, ManualClock};
use crate::policy::select::{Candidate, ExclusionReason};

/// Provider 0, connection 0, model `m`.
pub(super) fn cand() -> Candidate {
    Candidate {
        provider: 0,
        connection: 0,
        model: "m".into(),
        rewrite: false,
        target: 0,
        key: crate::config::keys::ConnKey::new(0, 0),
    }
}

/// One 503 on connection 0 through `admit_candidate` → `classify` → `report`; asserts the
/// connection is then excluded for its cooldown.
pub(super) fn cool(core: &Core, clock: &ManualClock) {
    let t = core
        .admit_candidate(&cand(), clock.now())
        .expect("fresh connection");
    let headers = HeaderMap::new();
    let c = core.classify(0, &AttemptEnd::response(503, &headers, b""));
    core.report(t, &c);
    assert!(cooling(core, clock), "a 503 cools the connection");
}

/// Whether connection 0 is refused now for its cooldown.
pub(super) fn cooling(core: &Core, clock: &ManualClock) -> bool {
    core.admit_candidate(&cand(), clock.now())
        .err()
        .is_some_and(|e| e.reason == ExclusionReason::ConnectionCooldown)
}
