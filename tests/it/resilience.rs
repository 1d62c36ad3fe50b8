//! Resilience integration tests (resilience-spec §0–§4, §7, §8; cases A01–A24): real HTTP
//! through an in-process sluice to a scripted mock upstream. Every test asserts what the
//! client received *and* the state the console would show (snapshot or admin API).
//!
//! Policy time moves with [`ManualClock::advance`](sluice::clock::ManualClock::advance); the
//! only real waits are the mock's scripted reply delays (a few hundred ms at most) and the §4
//! wait test, which runs on the real clock with millisecond cooldowns. Tests that exclude
//! every candidate switch the §4 wait off: with a manual clock a wait would sleep real time
//! while the policy deadline stands still.

mod admin;
mod breaker;
mod cooldown;
mod headroom;
mod lane;
mod leases;
mod limit_reset;
mod lockout;
mod none_eligible;
mod rate_rules;
mod restart;
mod routing;
mod rules;
mod slow_start;
mod verify;

use std::time::Duration;

use http::Method;
use serde_json::{Value, json};

use crate::support::client::{self, Resp};
use crate::support::mock_upstream::RuleBuilder;
use crate::support::{MockUpstream, Reply, Sluice};

/// `anthropic-version` for `/v1/messages`.
pub const AV: (&str, &str) = ("anthropic-version", "2023-06-01");

/// The environment the test configs read connection keys from (`auth = { env = "K<n>" }`).
pub const ENV: &[(&str, &str)] = &[("K1", "key-one"), ("K2", "key-two"), ("K3", "key-three")];

/// The secret of connection `k<n>` (1-based), as the upstream sees it.
pub fn key(n: usize) -> &'static str {
    ENV[n - 1].1
}

/// `[resilience.combo_cooldown_wait] enabled = false`: for tests that exclude every
/// candidate on a manual clock.
pub const NO_WAIT: &str = "[resilience.combo_cooldown_wait]\nenabled = false\n";

/// The client-facing dialect of a route (and of the provider behind it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum D {
    /// `/v1/messages`, Anthropic errors, key in `x-api-key`.
    Anthropic,
    /// `/v1/chat/completions`, OpenAI errors, key in `authorization: Bearer`.
    OpenAi,
}

/// Both dialects, for the tests of §7 and §8 that must hold in each.
pub const BOTH: [D; 2] = [D::Anthropic, D::OpenAi];

impl D {
    /// The provider `dialect` value.
    pub fn name(self) -> &'static str {
        match self {
            D::Anthropic => "anthropic",
            D::OpenAi => "openai",
        }
    }

    /// The inference route.
    pub fn path(self) -> &'static str {
        match self {
            D::Anthropic => "/v1/messages",
            D::OpenAi => "/v1/chat/completions",
        }
    }

    /// The header carrying an injected connection key upstream.
    pub fn key_header(self) -> &'static str {
        match self {
            D::Anthropic => "x-api-key",
            D::OpenAi => "authorization",
        }
    }

    /// A model name a plain (non-combo) request uses.
    pub fn model(self) -> &'static str {
        match self {
            D::Anthropic => "claude-x",
            D::OpenAi => "gpt-x",
        }
    }

    /// A request body for `model`.
    pub fn body(self, model: &str, stream: bool) -> Value {
        match self {
            D::Anthropic => json!({"model": model, "max_tokens": 32, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]}),
            D::OpenAi => json!({"model": model, "stream": stream,
                "messages": [{"role": "user", "content": "hi"}]}),
        }
    }

    /// Sends a non-streaming request for `model` with extra headers.
    pub async fn send(self, s: &Sluice, model: &str, headers: &[(&str, &str)]) -> Resp {
        let mut h = headers.to_vec();
        if self == D::Anthropic {
            h.push(AV);
        }
        client::post_json(&s.url(self.path()), &self.body(model, false), &h).await
    }

    /// An upstream error in this dialect's wire format.
    pub fn error(self, status: u16, kind: &str, message: &str) -> Reply {
        match self {
            D::Anthropic => Reply::anthropic_error(status, kind, message),
            D::OpenAi => Reply::openai_error(status, kind, kind, message),
        }
    }

    /// The error `type` the client gets for a §8 / §7 error with `status`.
    pub fn error_type(self, body: &Value) -> String {
        body["error"]["type"].as_str().unwrap_or("").to_string()
    }
}

/// A rule for requests to `d`'s route that carried connection key `k<n>`.
pub fn on_key<'a>(mock: &'a MockUpstream, d: D, n: usize) -> RuleBuilder<'a> {
    mock.on(d.path()).header(d.key_header(), key(n))
}

/// Upstream requests that carried connection key `k<n>` (any route).
pub fn hits(mock: &MockUpstream, n: usize) -> usize {
    mock.requests()
        .iter()
        .filter(|r| {
            ["x-api-key", "authorization"]
                .iter()
                .any(|h| r.header(h).is_some_and(|v| v.contains(key(n))))
        })
        .count()
}

/// Waits (up to 5 s) until connection `k<n>` saw at least `want` requests.
pub async fn wait_hits(mock: &MockUpstream, n: usize, want: usize) {
    let waited = tokio::time::timeout(Duration::from_secs(5), async {
        while hits(mock, n) < want {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "k{n} saw {} upstream requests, expected {want}",
        hits(mock, n)
    );
}

/// A one-provider config: provider `p` of dialect `d` with connections `k1..k<conns>`
/// (keys from [`ENV`]), the default for its route.
#[derive(Debug, Clone)]
pub struct Cfg {
    d: D,
    profile: &'static str,
    conns: usize,
    provider_extra: String,
    conn_extra: String,
    tail: String,
}

impl Cfg {
    /// `conns` connections on an `api_key` provider.
    pub fn new(d: D, conns: usize) -> Self {
        Self {
            d,
            profile: "api_key",
            conns,
            provider_extra: String::new(),
            conn_extra: String::new(),
            tail: String::new(),
        }
    }

    /// The provider's `profile`.
    pub fn profile(mut self, p: &'static str) -> Self {
        self.profile = p;
        self
    }

    /// Extra provider keys (e.g. `timeout = "300ms"`).
    pub fn provider(mut self, extra: &str) -> Self {
        self.provider_extra.push_str(extra);
        self.provider_extra.push('\n');
        self
    }

    /// Extra keys on every connection (e.g. `disable_cooling = true`).
    pub fn each_conn(mut self, extra: &str) -> Self {
        self.conn_extra.push_str(extra);
        self.conn_extra.push('\n');
        self
    }

    /// More TOML after the providers (`[resilience.*]`, `[[combos]]`, …).
    pub fn tail(mut self, extra: &str) -> Self {
        self.tail.push_str(extra);
        self.tail.push('\n');
        self
    }

    /// The config text with `{MOCK}` replaced by `mock`'s URL.
    pub fn build(&self, mock: &MockUpstream) -> String {
        let mut c = format!(
            "[routing]\ndefault_provider = \"p\"\n\n[[providers]]\nid = \"p\"\ndialect = \"{}\"\nbase_url = \"{}\"\nprofile = \"{}\"\n{}",
            self.d.name(),
            mock.base_url(),
            self.profile,
            self.provider_extra
        );
        for n in 1..=self.conns {
            c.push_str(&format!(
                "\n  [[providers.connections]]\n  id = \"k{n}\"\n  auth = {{ env = \"K{n}\" }}\n{}",
                self.conn_extra
            ));
        }
        c.push('\n');
        c.push_str(&self.tail);
        c
    }
}

// === admin API ===

/// An admin call with a JSON body (`Value::Null` = no body).
pub async fn admin(s: &Sluice, method: Method, path: &str, body: Value) -> Resp {
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        serde_json::to_vec(&body).unwrap()
    };
    client::send(client::request(
        method,
        &s.admin(path),
        &[("content-type", "application/json")],
        client::full(bytes),
    ))
    .await
}

/// `GET` an admin path; asserts 200 and returns the JSON.
pub async fn admin_get(s: &Sluice, path: &str) -> Value {
    let r = client::get(&s.admin(path), &[]).await;
    assert_eq!(r.status, 200, "GET {path}: {}", r.text());
    r.json()
}

/// One connection of `GET /api/resilience/cooldowns`.
pub async fn conn_state(s: &Sluice, provider: &str, connection: &str) -> Value {
    let v = admin_get(s, &format!("/api/resilience/cooldowns?provider={provider}")).await;
    v["connections"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["connection"] == connection)
        .unwrap_or_else(|| panic!("no connection {provider}/{connection} in {v:#}"))
        .clone()
}

/// One breaker of `GET /api/monitoring/health`.
pub async fn breaker_state(s: &Sluice, provider: &str) -> Value {
    let v = admin_get(s, "/api/monitoring/health").await;
    v["breakers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["provider"] == provider)
        .unwrap_or_else(|| panic!("no breaker for {provider} in {v:#}"))
        .clone()
}

/// `GET /api/resilience/model-cooldowns` → `lockouts`.
pub async fn lockouts(s: &Sluice) -> Vec<Value> {
    admin_get(s, "/api/resilience/model-cooldowns").await["lockouts"]
        .as_array()
        .unwrap()
        .clone()
}

/// `remainingMs` (or any integer field) of a JSON object.
pub fn ms(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is not an integer in {v:#}"))
}

/// The `retry-after` header as whole seconds.
pub fn retry_after(r: &Resp) -> Option<u64> {
    r.header("retry-after").map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("retry-after '{v}' is not whole seconds"))
    })
}

/// Asserts the client got `status`, printing the body otherwise.
pub fn expect_status(r: &Resp, status: u16, what: &str) {
    assert_eq!(r.status.as_u16(), status, "{what}: body {}", r.text());
}
