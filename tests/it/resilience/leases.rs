//! Exclusive session leases: `POST /api/v1/session-leases` on the inference listener, the
//! fence on `x-sluice-lease-owner` / `x-sluice-lease-generation`, unleased requests kept off
//! leased connections, and `lease_capacity_unavailable` when everything is leased. Lease time
//! moves on the manual clock only.

use http::HeaderMap;

use super::*;

/// `[session_leases]` on, default ttl (10 min).
pub const LEASES: &str = "[session_leases]\nenabled = true\n";

/// A lease call with extra headers; returns the response.
pub async fn lease_call(s: &Sluice, body: Value, headers: &[(&str, &str)]) -> Resp {
    client::post_json(&s.url("/api/v1/session-leases"), &body, headers).await
}

/// Acquires a lease on `model`; asserts 200 and returns the JSON.
pub async fn acquire(s: &Sluice, model: &str) -> Value {
    let r = lease_call(s, json!({"action": "acquire", "model": model}), &[]).await;
    expect_status(&r, 200, "acquire");
    r.json()
}

/// The connection number (`k<n>` → n) a lease answer names.
pub fn leased_n(lease: &Value) -> usize {
    lease["connection"].as_str().unwrap()[1..].parse().unwrap()
}

/// The two lease headers for `lease`, generation as given.
fn lease_headers(lease: &Value, generation: u64) -> (String, String) {
    (
        lease["owner"].as_str().unwrap().to_string(),
        generation.to_string(),
    )
}

/// Sends `d`'s request for its model with the lease headers.
pub async fn send_leased(s: &Sluice, d: D, owner: &str, generation: &str) -> Resp {
    d.send(
        s,
        d.model(),
        &[
            ("x-sluice-lease-owner", owner),
            ("x-sluice-lease-generation", generation),
        ],
    )
    .await
}

fn no_lease_headers(h: &HeaderMap) -> bool {
    h.keys().all(|k| !k.as_str().starts_with("x-sluice-lease"))
}

#[tokio::test]
async fn a_leased_request_goes_to_its_connection_and_the_lease_headers_stay_home() {
    let d = D::OpenAi;
    let mock = MockUpstream::start().await;
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).tail(LEASES).build(&mock), ENV).await;
    // Two leases: the second holds the connection dispatch would not pick first, so a
    // request only lands there through its lease.
    let first = acquire(&s, d.model()).await;
    let lease = acquire(&s, d.model()).await;
    assert_ne!(
        leased_n(&first),
        leased_n(&lease),
        "one owner per connection"
    );
    let owner = lease["owner"].as_str().unwrap();
    assert!(
        owner.starts_with("vlo_") && owner.len() == 47,
        "owner token format: {owner}"
    );
    assert_ne!(first["owner"], lease["owner"]);
    assert_eq!(lease["generation"], 1);
    assert_eq!(lease["provider"], "p");
    assert!(lease["expiresAt"].is_string(), "{lease:#}");
    let n = leased_n(&lease);
    let (o, g) = lease_headers(&lease, 1);
    for _ in 0..3 {
        expect_status(&send_leased(&s, d, &o, &g).await, 200, "leased request");
    }
    assert_eq!(hits(&mock, n), 3, "every leased request went to k{n}");
    assert_eq!(hits(&mock, 3 - n), 0);
    for r in mock.requests() {
        assert!(no_lease_headers(&r.headers), "forwarded: {:?}", r.headers);
    }
    // The admin API and the snapshot show the lease, never the token.
    let c = conn_state(&s, "p", &format!("k{n}")).await;
    assert_eq!(c["lease"]["generation"], 1, "{c:#}");
    assert_eq!(ms(&c["lease"], "remainingMs"), 600_000);
    let fp = c["lease"]["ownerFingerprint"].as_str().unwrap();
    assert_eq!(fp.len(), 8);
    assert!(
        !c.to_string().contains(owner),
        "the token never leaves the lease call"
    );
    let other = conn_state(&s, "p", &format!("k{}", 3 - n)).await;
    assert_ne!(
        other["lease"]["ownerFingerprint"],
        c["lease"]["ownerFingerprint"]
    );
    let snap = s.snapshot();
    assert!(snap.providers[0].connections[n - 1].lease.is_some());
    // Released, the connection is free again.
    let r = lease_call(
        &s,
        json!({"action": "release", "owner": owner, "generation": 1}),
        &[],
    )
    .await;
    expect_status(&r, 200, "release");
    assert!(
        conn_state(&s, "p", &format!("k{n}"))
            .await
            .get("lease")
            .is_none()
    );
    s.stop().await;
}

#[tokio::test]
async fn an_unleased_request_skips_the_leased_connection() {
    let d = D::Anthropic;
    let mock = MockUpstream::start().await;
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 2).tail(LEASES).build(&mock), ENV).await;
    let lease = acquire(&s, d.model()).await;
    let n = leased_n(&lease);
    for _ in 0..4 {
        expect_status(&d.send(&s, d.model(), &[]).await, 200, "unleased request");
    }
    assert_eq!(
        hits(&mock, n),
        0,
        "nothing unleased went to the leased k{n}"
    );
    assert_eq!(hits(&mock, 3 - n), 4);
    let skipped: Vec<String> = s.snapshot().recent[0]
        .skipped
        .iter()
        .map(|k| format!("{} {}", k.target, k.reason))
        .collect();
    assert_eq!(skipped, vec![format!("p:k{n}/{} leased", d.model())]);
    // A second acquire takes the other connection.
    let second = acquire(&s, d.model()).await;
    assert_eq!(leased_n(&second), 3 - n);
    s.stop().await;
}

#[tokio::test]
async fn a_stale_generation_is_refused_before_dispatch() {
    for d in BOTH {
        let mock = MockUpstream::start().await;
        let (s, clock) = Sluice::start_manual(&Cfg::new(d, 2).tail(LEASES).build(&mock), ENV).await;
        let lease = acquire(&s, d.model()).await;
        let (o, _) = lease_headers(&lease, 1);
        // A generation that is not the current one.
        let r = send_leased(&s, d, &o, "2").await;
        expect_status(&r, 409, "wrong generation");
        let body = r.json();
        match d {
            D::OpenAi => assert_eq!(body["error"]["code"], "lease_generation_stale", "{body:#}"),
            D::Anthropic => {
                assert_eq!(body["type"], "error", "{body:#}");
                assert_eq!(body["error"]["type"], "conflict_error", "{body:#}");
            }
        }
        assert_eq!(body["sluice"]["code"], "lease_generation_stale", "{body:#}");
        // Released: the old owner is refused.
        let r = lease_call(
            &s,
            json!({"action": "release", "owner": o, "generation": 1}),
            &[],
        )
        .await;
        expect_status(&r, 200, "release");
        expect_status(&send_leased(&s, d, &o, "1").await, 409, "after release");
        // Expired on the clock: refused too, and renew cannot revive it.
        let again = acquire(&s, d.model()).await;
        assert!(again["generation"].as_u64().unwrap() >= 1, "{again:#}");
        let (o2, _) = lease_headers(&again, 0);
        let g2 = again["generation"].to_string();
        expect_status(&send_leased(&s, d, &o2, &g2).await, 200, "live lease");
        let sent = mock.count();
        clock.advance(Duration::from_secs(600));
        expect_status(&send_leased(&s, d, &o2, &g2).await, 409, "expired lease");
        let r = lease_call(
            &s,
            json!({"action": "renew", "owner": o2, "generation": again["generation"]}),
            &[],
        )
        .await;
        expect_status(&r, 409, "renew after expiry");
        assert_eq!(mock.count(), sent, "nothing stale was sent upstream");
        s.stop().await;
    }
}

#[tokio::test]
async fn renew_extends_a_lease_on_the_clock() {
    let d = D::OpenAi;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&Cfg::new(d, 1).tail(LEASES).build(&mock), ENV).await;
    let lease = acquire(&s, d.model()).await;
    let (o, g) = lease_headers(&lease, 1);
    clock.advance(Duration::from_secs(500));
    let r = lease_call(
        &s,
        json!({"action": "renew", "owner": o, "generation": 1, "ttl": "5m"}),
        &[],
    )
    .await;
    expect_status(&r, 200, "renew");
    assert_eq!(r.json()["generation"], 1);
    assert_eq!(
        ms(&conn_state(&s, "p", "k1").await["lease"], "remainingMs"),
        300_000
    );
    clock.advance(Duration::from_secs(200));
    expect_status(
        &send_leased(&s, d, &o, &g).await,
        200,
        "renewed lease still live",
    );
    let r = lease_call(
        &s,
        json!({"action": "renew", "owner": o, "generation": 1, "ttl": "48h"}),
        &[],
    )
    .await;
    expect_status(&r, 400, "ttl above 24h");
    s.stop().await;
}

#[tokio::test]
async fn all_leased_is_429_lease_capacity_unavailable_with_retry_after() {
    let d = D::OpenAi;
    let mock = MockUpstream::start().await;
    let (s, clock) = Sluice::start_manual(&Cfg::new(d, 1).tail(LEASES).build(&mock), ENV).await;
    let r = lease_call(
        &s,
        json!({"action": "acquire", "model": d.model(), "ttl": "2m"}),
        &[],
    )
    .await;
    expect_status(&r, 200, "acquire");
    let r = lease_call(&s, json!({"action": "acquire", "model": d.model()}), &[]).await;
    expect_status(&r, 429, "second acquire");
    assert_eq!(r.json()["error"]["code"], "lease_capacity_unavailable");
    assert_eq!(retry_after(&r), Some(120));
    clock.advance(Duration::from_secs(30));
    let r = d.send(&s, d.model(), &[]).await;
    expect_status(&r, 429, "unleased request, every connection leased");
    let body = r.json();
    assert_eq!(
        body["error"]["code"], "lease_capacity_unavailable",
        "{body:#}"
    );
    assert_eq!(retry_after(&r), Some(90), "from the earliest expiry");
    assert_eq!(mock.count(), 0, "nothing was sent upstream");
    clock.advance(Duration::from_secs(90));
    expect_status(&d.send(&s, d.model(), &[]).await, 200, "the lease lapsed");
    s.stop().await;
}

#[tokio::test]
async fn leases_need_the_scope_and_are_off_by_default() {
    let d = D::OpenAi;
    let mock = MockUpstream::start().await;
    let (s, _clock) = Sluice::start_manual(&Cfg::new(d, 1).build(&mock), ENV).await;
    let r = lease_call(&s, json!({"action": "acquire", "model": d.model()}), &[]).await;
    expect_status(&r, 404, "leases off");
    assert_eq!(r.json()["error"]["code"], "session_leases_disabled");
    s.stop().await;

    let cfg = format!(
        "[server]\nclient_keys_env = \"CK\"\n{}",
        Cfg::new(d, 1)
            .tail(&format!("{LEASES}client_keys_env = \"LK\"\n"))
            .build(&mock)
    );
    let mut env = ENV.to_vec();
    env.extend([("CK", "plain-key,lease-key"), ("LK", "lease-key")]);
    let (s, _clock) = Sluice::start_manual(&cfg, &env).await;
    let call = json!({"action": "acquire", "model": d.model()});
    let r = lease_call(&s, call.clone(), &[]).await;
    expect_status(&r, 401, "no client key");
    let r = lease_call(&s, call.clone(), &[("authorization", "Bearer plain-key")]).await;
    expect_status(&r, 403, "key without lease:exclusive");
    assert_eq!(r.json()["error"]["code"], "lease_scope_missing");
    let r = lease_call(&s, call, &[("authorization", "Bearer lease-key")]).await;
    expect_status(&r, 200, "key with lease:exclusive");
    s.stop().await;
}
