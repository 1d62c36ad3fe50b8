use super::*;

const NOW: u64 = 1_700_000_000_000;
const H: u64 = 3_600_000;

fn offer(reset_ms: u64) -> Signals {
    Signals {
        rejected: true,
        offered: true,
        reset_at_ms: Some(reset_ms),
        five_hour_reset_ms: Some(reset_ms),
        ..Signals::default()
    }
}

fn with(status: SlowStatus) -> Signals {
    Signals {
        status: Some(status),
        ..Signals::default()
    }
}

fn accepted() -> LaneSlot {
    let mut slot = LaneSlot::default();
    assert_eq!(
        slot.observe(429, &offer(NOW + 2 * H), false, NOW),
        Verdict::Accepted
    );
    slot
}

#[test]
fn parses_the_lane_headers() {
    let reset = ((NOW + H) / 1000).to_string();
    let s = Signals::parse([
        ("Anthropic-Ratelimit-Unified-Status", "rejected"),
        ("anthropic-ratelimit-unified-slow-offer", " treatment "),
        ("anthropic-ratelimit-unified-reset", reset.as_str()),
        ("anthropic-ratelimit-unified-slow-status", "overage-in-use"),
        ("anthropic-ratelimit-unified-slow-retry-after", "7"),
        ("anthropic-ratelimit-unified-slow-max-wait", "bogus"),
    ]);
    assert!(s.rejected && s.offered && s.is_offer(429) && !s.is_offer(529));
    assert_eq!(s.reset_at_ms, Some((NOW + H) / 1000 * 1000));
    assert_eq!(s.status, Some(SlowStatus::OverageInUse));
    assert_eq!(s.retry_after, Some(Duration::from_secs(7)));
    assert_eq!(s.max_wait, None, "malformed values are ignored");
    let plain = Signals::parse([("anthropic-ratelimit-unified-status", "allowed")]);
    assert!(!plain.is_offer(429));
}

#[test]
fn a_treatment_offer_is_accepted_until_the_reset_plus_a_minute() {
    let slot = accepted();
    let l = slot.lane.clone().expect("lane");
    assert_eq!((l.state, l.reason.as_str()), (State::Active, "treatment"));
    assert_eq!(l.until_unix_ms, NOW + 2 * H + 60_000);
    assert!(slot.is_active(NOW + 2 * H + 59_999));
    assert!(!slot.is_active(NOW + 2 * H + 60_000));
    let after = slot.current(NOW + 2 * H + 60_000).expect("listed");
    assert_eq!(
        (after.state, after.reason.as_str()),
        (State::Ended, "reset_passed")
    );
}

#[test]
fn a_429_without_the_offer_or_a_second_offer_is_reported() {
    let mut slot = LaneSlot::default();
    let mut no_offer = offer(NOW + H);
    no_offer.offered = false;
    assert_eq!(slot.observe(429, &no_offer, false, NOW), Verdict::Report);
    let mut allowed = offer(NOW + H);
    allowed.rejected = false;
    assert_eq!(slot.observe(429, &allowed, false, NOW), Verdict::Report);
    assert_eq!(slot.lane, None);
    assert_eq!(
        slot.observe(429, &offer(NOW + H), true, NOW),
        Verdict::Report,
        "an offer after the request already accepted once"
    );
}

#[test]
fn active_and_not_needed_keep_the_lane() {
    let mut slot = accepted();
    for s in [SlowStatus::Active, SlowStatus::NotNeeded] {
        assert_eq!(slot.observe(200, &with(s), false, NOW + 1), Verdict::Report);
        assert!(slot.is_active(NOW + 1), "{s:?} ended the lane");
    }
}

#[test]
fn each_end_condition_ends_the_lane_with_its_reason() {
    let cases = [
        (SlowStatus::WeeklyLimit, "weekly_limit", State::Ended),
        (
            SlowStatus::BudgetExhausted,
            "budget_exhausted",
            State::Paused,
        ),
        (SlowStatus::Off, "off", State::Ended),
        (SlowStatus::Ineligible, "ineligible", State::Ended),
        (SlowStatus::OverageInUse, "extra_usage", State::Ended),
    ];
    for (status, reason, state) in cases {
        let mut slot = accepted();
        assert_eq!(
            slot.observe(200, &with(status), false, NOW + 5),
            Verdict::Report
        );
        assert!(!slot.is_active(NOW + 5), "{status:?} kept the lane");
        let l = slot.lane.clone().expect("listed");
        assert_eq!((l.state, l.reason.as_str()), (state, reason));
    }
}

#[test]
fn an_ended_lane_accepts_a_new_offer() {
    let mut slot = accepted();
    slot.observe(429, &with(SlowStatus::Off), false, NOW + 5);
    assert_eq!(
        slot.observe(429, &offer(NOW + 3 * H), false, NOW + 10),
        Verdict::Accepted
    );
}

#[test]
fn a_new_five_hour_window_ends_the_lane() {
    let mut slot = accepted();
    let same = Signals {
        five_hour_reset_ms: Some(NOW + 2 * H + 30_000),
        ..Signals::default()
    };
    slot.observe(200, &same, false, NOW + 1);
    assert!(slot.is_active(NOW + 1), "the same window (within a minute)");
    let next = Signals {
        five_hour_reset_ms: Some(NOW + 7 * H),
        ..Signals::default()
    };
    assert_eq!(slot.observe(200, &next, false, NOW + 2), Verdict::Report);
    assert_eq!(
        slot.lane.as_ref().map(|l| (l.state, l.reason.as_str())),
        Some((State::Ended, "new_window"))
    );
}

#[test]
fn slot_busy_and_529_on_the_lane_are_busy_but_not_off_it() {
    let busy = Signals {
        status: Some(SlowStatus::SlotBusy),
        retry_after: Some(Duration::from_secs(9)),
        max_wait: Some(Duration::from_secs(120)),
        ..Signals::default()
    };
    let mut idle = LaneSlot::default();
    assert_eq!(idle.observe(429, &busy, false, NOW), Verdict::Report);
    assert_eq!(
        idle.observe(529, &Signals::default(), false, NOW),
        Verdict::Report
    );
    let mut slot = accepted();
    assert_eq!(
        slot.observe(429, &busy, false, NOW + 1),
        Verdict::Busy {
            retry_after: Some(Duration::from_secs(9)),
            max_wait: Some(Duration::from_secs(120)),
        }
    );
    assert_eq!(
        slot.observe(529, &Signals::default(), false, NOW + 1),
        Verdict::Busy {
            retry_after: None,
            max_wait: None
        }
    );
    assert!(slot.is_active(NOW + 1));
}

#[test]
fn busy_wait_clamps_and_jitters_within_thirty_percent() {
    let s = Duration::from_secs;
    let long = s(3600);
    let w = |ra: Option<u64>, draw| busy_wait(ra.map(s), None, Duration::ZERO, long, draw);
    assert_eq!(
        w(None, 0.5),
        Some(s(20)),
        "default 20 s, no jitter at the middle"
    );
    assert_eq!(w(Some(1), 0.5), Some(s(5)), "clamped up to 5 s");
    assert_eq!(w(Some(5000), 0.5), Some(s(600)), "clamped down to 600 s");
    assert_eq!(w(None, 0.0), Some(s(14)), "-30 %");
    let top = w(None, 1.0).expect("wait");
    assert_eq!(top, s(26), "+30 %");
    for i in 0..100 {
        let d = w(Some(10), f64::from(i) / 100.0).expect("wait");
        assert!(d >= s(7) && d <= s(13), "{d:?} outside ±30 % of 10 s");
    }
}

#[test]
fn busy_wait_is_bounded_by_max_wait_and_the_requests_remaining_time() {
    let s = Duration::from_secs;
    // max-wait: default 20 min, clamped 1 min–6 h; counts the waits already made.
    assert_eq!(
        busy_wait(Some(s(20)), None, s(1180), s(86_400), 0.5),
        Some(s(20))
    );
    assert_eq!(busy_wait(Some(s(20)), None, s(1181), s(86_400), 0.5), None);
    assert_eq!(
        busy_wait(Some(s(20)), Some(s(10)), s(41), s(86_400), 0.5),
        None,
        "clamped up to 1 min"
    );
    assert_eq!(
        busy_wait(Some(s(20)), Some(s(10)), s(40), s(86_400), 0.5),
        Some(s(20))
    );
    // The request's own remaining time less 5 s.
    assert_eq!(
        busy_wait(Some(s(20)), None, Duration::ZERO, s(25), 0.5),
        Some(s(20))
    );
    assert_eq!(
        busy_wait(Some(s(20)), None, Duration::ZERO, s(24), 0.5),
        None
    );
    assert_eq!(
        busy_wait(None, None, Duration::ZERO, s(3), 0.0),
        None,
        "already late"
    );
}

#[test]
fn giving_up_pauses_re_accept_for_ten_minutes() {
    let mut slot = accepted();
    slot.give_up(NOW + 1_000);
    assert!(!slot.is_active(NOW + 1_000));
    let l = slot.lane.clone().expect("listed");
    assert_eq!(
        (l.state, l.reason.as_str()),
        (State::Paused, "slot_busy_timeout")
    );
    let t = NOW + 1_000 + 600_000;
    assert_eq!(
        slot.observe(429, &offer(NOW + 3 * H), false, t - 1),
        Verdict::Report
    );
    assert!(!slot.is_active(t - 1));
    assert_eq!(
        slot.observe(429, &offer(NOW + 3 * H), false, t),
        Verdict::Accepted
    );
}

#[test]
fn budget_exhausted_is_remembered_eight_days() {
    let mut slot = accepted();
    slot.observe(200, &with(SlowStatus::BudgetExhausted), false, NOW);
    let day = 24 * H;
    assert!(!slot.may_accept(NOW + 8 * day - 1));
    // A shorter pause on top (a busy give-up) does not shorten the memory.
    slot.give_up(NOW + day);
    slot.refresh(NOW + day + 700_000);
    assert_eq!(
        slot.observe(429, &offer(NOW + 9 * day), false, NOW + 2 * day),
        Verdict::Report
    );
    assert_eq!(
        slot.observe(429, &offer(NOW + 9 * day), false, NOW + 8 * day - 1),
        Verdict::Report
    );
    assert_eq!(
        slot.observe(429, &offer(NOW + 9 * day), false, NOW + 8 * day),
        Verdict::Accepted
    );
}

#[test]
fn the_record_round_trips_as_json() {
    let slot = accepted();
    let json = serde_json::to_string(&slot).expect("json");
    let back: LaneSlot = serde_json::from_str(&json).expect("parse");
    assert_eq!(back, slot);
    assert!(json.contains("\"state\":\"active\""), "{json}");
}
