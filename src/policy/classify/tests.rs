//! Table-driven classification tests: every §0 row, §7 restatement and error rules, cases
//! A03, A05, A07, A13, A14. Explicit wall time; no clock.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderName, HeaderValue};

use super::{Input, Rules, classify, in_stream_status};
use crate::config::validate::{
    DEFAULT_BAN_MARKERS, DEFAULT_CONCURRENCY_MARKERS, DEFAULT_MAX_COOLDOWN, DEFAULT_MAX_QUOTA_WAIT,
    DEFAULT_QUOTA_MARKERS, DEFAULT_QUOTA_WAIT_THRESHOLD, DEFAULT_REQUEST_REJECTED_MARKERS,
};
use crate::config::{
    ConnectionCooldownSettings, Dialect, ErrorRule, Restatement, builtin_restatements,
};
use crate::policy::retry_hint::whole_seconds_up;
use crate::policy::{Classified, OutcomeClass, Restated, Scope};

/// 2030-01-01T00:00:00Z.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_893_456_000)
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_string()).collect()
}

fn cooldown() -> ConnectionCooldownSettings {
    ConnectionCooldownSettings {
        max_cooldown: DEFAULT_MAX_COOLDOWN,
        quota_wait_threshold: DEFAULT_QUOTA_WAIT_THRESHOLD,
        max_quota_wait: DEFAULT_MAX_QUOTA_WAIT,
        expired_retry_max: 3,
        ban_markers: strings(&DEFAULT_BAN_MARKERS),
        request_rejected_markers: strings(&DEFAULT_REQUEST_REJECTED_MARKERS),
        quota_markers: strings(&DEFAULT_QUOTA_MARKERS),
        concurrency_markers: strings(&DEFAULT_CONCURRENCY_MARKERS),
        rate_limit_cooldown: None,
        stream_stall_cooldown: false,
    }
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in pairs {
        map.append(
            HeaderName::from_bytes(k.as_bytes()).expect("name"),
            HeaderValue::from_str(v).expect("value"),
        );
    }
    map
}

/// One attempt description for the table.
#[derive(Clone, Copy)]
struct Case {
    provider: &'static str,
    status: Option<u16>,
    headers: &'static [(&'static str, &'static str)],
    body: &'static str,
    stream_error: Option<&'static str>,
    client_gone: bool,
    truncated: bool,
}

const fn status(s: u16, body: &'static str) -> Case {
    Case {
        provider: "p",
        status: Some(s),
        headers: &[],
        body,
        stream_error: None,
        client_gone: false,
        truncated: false,
    }
}

impl Case {
    const fn with_headers(self, headers: &'static [(&'static str, &'static str)]) -> Self {
        Case { headers, ..self }
    }
    const fn stream_error(self, kind: &'static str) -> Self {
        Case {
            stream_error: Some(kind),
            ..self
        }
    }
    const fn truncated(self) -> Self {
        Case {
            truncated: true,
            ..self
        }
    }
    const fn client_gone(self) -> Self {
        Case {
            client_gone: true,
            ..self
        }
    }
    const fn transport() -> Self {
        Case {
            status: None,
            ..status(0, "")
        }
    }
    const fn provider(self, provider: &'static str) -> Self {
        Case { provider, ..self }
    }

    fn run(self, rules: &Rules<'_>) -> Classified {
        let map = headers(self.headers);
        let input = Input {
            provider: self.provider,
            dialect: Dialect::Anthropic,
            status: self.status,
            headers: self.status.map(|_| &map),
            body: self.body.as_bytes(),
            in_stream_error_type: self.stream_error,
            client_gone: self.client_gone,
            truncated: self.truncated,
        };
        classify(&input, rules, now())
    }
}

/// Expected class, status, restatement and hint (seconds) of a §7 row.
type RestatedWant = (OutcomeClass, u16, Option<Restated>, Option<u64>);

/// Expected class, status, reason, scope and hint (seconds) of a §0 row.
type Want = (OutcomeClass, Option<u16>, &'static str, Scope, Option<u64>);

const A05: &str = r#"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"Quota hit. Please retry in 26.66s.","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26s"}]}}"#;
const A07: &str = r#"{"error":{"code":"rate_limit_exceeded","message":"TPM limit. Please try again in 1m9.696s."}}"#;
const A07_HEADERS: &[(&str, &str)] = &[
    ("x-ratelimit-remaining-requests", "12"),
    ("x-ratelimit-remaining-tokens", "0"),
    ("x-ratelimit-reset-requests", "1m30s"),
    ("x-ratelimit-reset-tokens", "6m0s"),
];
const A13: &str = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
const A14B: &str = r#"{"type":"error","error":{"type":"service_unavailable_error","code":"server_is_overloaded"}}"#;

#[test]
fn section_0_table() {
    use OutcomeClass::*;
    let cd = cooldown();
    let builtins = builtin_restatements();
    let rules = Rules {
        restatements: &[],
        builtins: &builtins,
        error_rules: &[],
        cooldown: &cd,
    };
    let week = 7 * 24 * 3600;
    #[rustfmt::skip]
    let rows: Vec<(&str, Case, Want)> = vec![
        ("2xx", status(200, "{}"), (Success, Some(200), "success", Scope::Triple, None)),
        ("stream without terminal marker", status(200, "").truncated(), (Transient, Some(200), "truncated", Scope::Triple, None)),
        ("transport before head", Case::transport(), (Transient, None, "transport_error", Scope::Triple, None)),
        ("client gone beats everything", status(500, "boom").client_gone(), (ClientGone, None, "client_gone", Scope::Triple, None)),
        ("408", status(408, ""), (Transient, Some(408), "server_error", Scope::Triple, None)),
        ("500", status(500, ""), (Transient, Some(500), "server_error", Scope::Triple, None)),
        ("502", status(502, ""), (Transient, Some(502), "server_error", Scope::Triple, None)),
        ("503 with retry-after", status(503, "").with_headers(&[("retry-after", "5")]), (Transient, Some(503), "server_error", Scope::Triple, Some(5))),
        ("504", status(504, ""), (Transient, Some(504), "server_error", Scope::Triple, None)),
        ("other 5xx", status(501, ""), (Transient, Some(501), "server_error", Scope::Triple, None)),
        ("A13 529", status(529, A13), (Overloaded, Some(529), "overloaded", Scope::Triple, None)),
        ("A14a in-stream overloaded", status(200, A13).stream_error("overloaded_error"), (Overloaded, Some(529), "overloaded", Scope::Triple, None)),
        ("A14b in-stream server_is_overloaded", status(200, A14B).stream_error("service_unavailable_error"), (Overloaded, Some(529), "overloaded", Scope::Triple, None)),
        ("in-stream api_error", status(200, "").stream_error("api_error"), (Transient, Some(500), "server_error", Scope::Triple, None)),
        ("in-stream unknown type", status(200, "").stream_error("weird_error"), (Transient, Some(500), "server_error", Scope::Triple, None)),
        ("in-stream rate_limit_error", status(200, "").stream_error("rate_limit_error"), (RateLimited, Some(429), "rate_limit_exceeded", Scope::QuotaGroup, None)),
        ("429 no hint", status(429, r#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#), (RateLimited, Some(429), "rate_limit_exceeded", Scope::QuotaGroup, None)),
        ("429 short hint", status(429, "").with_headers(&[("retry-after", "30")]), (RateLimited, Some(429), "rate_limit_exceeded", Scope::QuotaGroup, Some(30))),
        ("429 long hint = quota_wait", status(429, "").with_headers(&[("retry-after", "3600")]), (QuotaExhausted, Some(429), "quota_exhausted", Scope::QuotaGroup, Some(3600))),
        ("429 hint capped at max_quota_wait", status(429, "").with_headers(&[("retry-after", "99999999")]), (QuotaExhausted, Some(429), "quota_exhausted", Scope::QuotaGroup, Some(week))),
        ("A03 429 quota text, no hint = ladder", status(429, r#"{"error":{"message":"subscription quota exceeded"}}"#), (QuotaExhausted, Some(429), "quota_exhausted", Scope::QuotaGroup, None)),
        ("A05 quota text + short structured hint", status(429, A05), (RateLimited, Some(429), "rate_limit_exceeded", Scope::QuotaGroup, Some(26))),
        ("A07 exhausted tokens bucket", status(429, A07).with_headers(A07_HEADERS), (RateLimited, Some(429), "rate_limit_exceeded", Scope::QuotaGroup, Some(360))),
        ("v15 quota reset phrase, long", status(429, "usage exceeded (reset after 24h)"), (QuotaExhausted, Some(429), "quota_exhausted", Scope::QuotaGroup, Some(86_400))),
        ("429 concurrency limit", status(429, r#"{"error":{"type":"rate_limit_error","message":"Too many concurrent requests for this key"}}"#), (ConcurrencyLimited, Some(429), "concurrency_limited", Scope::QuotaGroup, None)),
        ("429 concurrency limit, escaped CJK", status(429, r#"{"error":{"message":"\u5e76\u53d1\u6570\u8fc7\u9ad8"}}"#), (ConcurrencyLimited, Some(429), "concurrency_limited", Scope::QuotaGroup, None)),
        ("429 concurrency limit keeps its short hint", status(429, "parallel request limit exceeded").with_headers(&[("retry-after", "2")]), (ConcurrencyLimited, Some(429), "concurrency_limited", Scope::QuotaGroup, Some(2))),
        ("in-stream rate_limit_error saying concurrency limit", status(200, r#"{"type":"error","error":{"type":"rate_limit_error","message":"Concurrency limit exceeded"}}"#).stream_error("rate_limit_error"), (ConcurrencyLimited, Some(429), "concurrency_limited", Scope::QuotaGroup, None)),
        ("429 Concurrency limit reached is not quota text", status(429, r#"{"error":{"type":"rate_limit_error","message":"Concurrency limit reached for this organization"}}"#), (ConcurrencyLimited, Some(429), "concurrency_limited", Scope::QuotaGroup, None)),
        ("429 concurrency + quota text stays quota", status(429, r#"{"error":{"message":"too many concurrent requests; monthly quota exceeded"}}"#), (QuotaExhausted, Some(429), "quota_exhausted", Scope::QuotaGroup, None)),
        ("429 concurrency text + long hint stays quota_wait", status(429, "too many concurrent requests").with_headers(&[("retry-after", "3600")]), (QuotaExhausted, Some(429), "quota_exhausted", Scope::QuotaGroup, Some(3600))),
        ("403 Concurrency limit reached is neither quota nor concurrency", status(403, r#"{"error":{"message":"Concurrency limit reached"}}"#), (Forbidden, Some(403), "forbidden", Scope::QuotaGroup, None)),
        ("403 concurrency text is not a concurrency limit", status(403, r#"{"error":{"type":"permission_error","message":"too many concurrent requests"}}"#), (Forbidden, Some(403), "forbidden", Scope::QuotaGroup, None)),
        ("401", status(401, r#"{"error":{"type":"authentication_error","message":"invalid x-api-key"}}"#), (Auth, Some(401), "auth_error", Scope::Triple, None)),
        ("402", status(402, ""), (CreditsExhausted, Some(402), "credits_exhausted", Scope::QuotaGroup, None)),
        ("400 credit marker", status(400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the API."}}"#), (CreditsExhausted, Some(400), "credits_exhausted", Scope::Triple, None)),
        ("403 ban marker", status(403, "Your account has been suspended."), (Banned, Some(403), "banned", Scope::QuotaGroup, None)),
        ("400 ban marker", status(400, r#"{"error":{"message":"This organization has been disabled."}}"#), (Banned, Some(400), "banned", Scope::Triple, None)),
        ("403 request rejected", status(403, r#"{"error":{"message":"Request not allowed"}}"#), (RequestRejected, Some(403), "request_rejected", Scope::QuotaGroup, None)),
        ("403 quota text", status(403, r#"{"error":{"message":"monthly usage limit reached"}}"#), (QuotaExhausted, Some(403), "quota_exhausted", Scope::QuotaGroup, None)),
        ("403 generic", status(403, r#"{"error":{"type":"permission_error","message":"nope"}}"#), (Forbidden, Some(403), "forbidden", Scope::QuotaGroup, None)),
        ("403 long hint", status(403, "").with_headers(&[("retry-after", "7200")]), (QuotaExhausted, Some(403), "quota_exhausted", Scope::QuotaGroup, Some(7200))),
        ("404", status(404, r#"{"error":{"type":"not_found_error","message":"model: x"}}"#), (NotFound, Some(404), "not_found", Scope::Model, None)),
        ("400", status(400, r#"{"error":{"type":"invalid_request_error","message":"bad"}}"#), (ClientFault, Some(400), "client_error", Scope::Triple, None)),
        ("413", status(413, ""), (ClientFault, Some(413), "client_error", Scope::Triple, None)),
        ("422", status(422, ""), (ClientFault, Some(422), "client_error", Scope::Triple, None)),
        ("other 4xx", status(418, ""), (ClientFault, Some(418), "client_error", Scope::Triple, None)),
        ("400 quota word is still the client's fault", status(400, "quota field invalid"), (ClientFault, Some(400), "client_error", Scope::Triple, None)),
    ];
    for (name, case, (class, st, reason, scope, hint)) in rows {
        let got = case.run(&rules);
        assert_eq!(got.class, class, "{name}: class");
        assert_eq!(got.status, st, "{name}: status");
        assert_eq!(got.reason, reason, "{name}: reason");
        assert_eq!(got.scope, scope, "{name}: scope");
        assert_eq!(
            got.retry_hint,
            hint.map(Duration::from_secs),
            "{name}: hint"
        );
        assert_eq!(got.restated, None, "{name}: restated");
        assert_eq!(got.message.is_empty(), class == Success, "{name}: message");
    }
}

#[test]
fn breaker_counting_and_messages() {
    let cd = cooldown();
    let rules = Rules {
        restatements: &[],
        builtins: &[],
        error_rules: &[],
        cooldown: &cd,
    };
    let a13 = status(529, A13).run(&rules);
    assert!(!a13.class.counts_for_breaker(), "529 never counts (A13)");
    assert_eq!(a13.message, "Overloaded");
    assert!(status(503, "").run(&rules).class.counts_for_breaker());
    assert!(!status(429, "").run(&rules).class.counts_for_breaker());
    // No header text in messages, body excerpt otherwise, a description when empty.
    let secret = status(500, "upstream exploded")
        .with_headers(&[("x-api-key", "sk-ant-secret-value-123")])
        .run(&rules);
    assert_eq!(secret.message, "upstream exploded");
    assert_eq!(status(502, "").run(&rules).message, "HTTP 502");
    // A05: the client-facing retry-after from the structured 26 s hint.
    let a05 = status(429, A05).run(&rules);
    assert_eq!(a05.retry_hint.map(whole_seconds_up), Some(26));
    assert_eq!(in_stream_status("overloaded_error", b""), 529);
    assert_eq!(in_stream_status("rate_limit_error", b""), 429);
}

fn rule(id: &str, provider: Option<&str>, to: u16, markers: &[&str], retry: u64) -> Restatement {
    Restatement {
        id: id.into(),
        provider: provider.map(Into::into),
        from_statuses: vec![400, 403],
        to_status: to,
        text_markers: strings(markers),
        exclude_markers: strings(&["无权访问模型"]),
        default_retry_after: Duration::from_secs(retry),
    }
}

fn restated(rule: &str, from: u16, to: u16, secs: u64) -> Option<Restated> {
    Some(Restated {
        rule: rule.into(),
        from,
        to,
        retry_after: Duration::from_secs(secs),
    })
}

#[test]
fn section_7_restatement() {
    use OutcomeClass::*;
    let cd = cooldown();
    let builtins = builtin_restatements();
    let config = [
        rule("other-provider", Some("q"), 503, &["额度不足"], 5),
        rule("my-quota", None, 429, &["额度不足"], 30),
    ];
    let builtin_only = Rules {
        restatements: &[],
        builtins: &builtins,
        error_rules: &[],
        cooldown: &cd,
    };
    let with_config = Rules {
        restatements: &config,
        ..builtin_only
    };
    let quota_403 = r#"{"error":{"message":"用户额度不足"}}"#;
    let escaped_400 = r#"{"error":{"message":"\u7528\u6237\u989d\u5ea6\u4e0d\u8db3"}}"#;
    #[rustfmt::skip]
    let rows: Vec<(&str, Case, &Rules<'_>, RestatedWant)> = vec![
        ("403 额度不足 → 429 quota", status(403, quota_403), &builtin_only, (QuotaExhausted, 429, restated("cn-quota", 403, 429, 60), None)),
        ("exclude marker vetoes", status(403, r#"{"error":{"message":"额度不足 无权访问模型"}}"#), &builtin_only, (QuotaExhausted, 403, None, None)),
        ("exclude marker alone", status(403, "无权访问模型"), &builtin_only, (Forbidden, 403, None, None)),
        ("escaped JSON marker", status(400, escaped_400), &builtin_only, (QuotaExhausted, 429, restated("cn-quota", 400, 429, 60), None)),
        ("upstream hint wins over default", status(403, quota_403).with_headers(&[("retry-after", "5")]), &builtin_only, (RateLimited, 429, restated("cn-quota", 403, 429, 5), Some(5))),
        ("status not in from_statuses", status(500, quota_403), &builtin_only, (Transient, 500, None, None)),
        ("config beats built-in; provider filter skips", status(403, quota_403), &with_config, (QuotaExhausted, 429, restated("my-quota", 403, 429, 30), None)),
        ("provider-filtered config rule", status(403, quota_403).provider("q"), &with_config, (Transient, 503, restated("other-provider", 403, 503, 5), None)),
    ];
    for (name, case, rules, (class, st, want_restated, hint)) in rows {
        let got = case.run(rules);
        assert_eq!(got.class, class, "{name}: class");
        assert_eq!(got.status, Some(st), "{name}: status");
        assert_eq!(got.restated, want_restated, "{name}: restated");
        assert_eq!(
            got.retry_hint,
            hint.map(Duration::from_secs),
            "{name}: hint"
        );
    }
    // The message keeps the upstream text, decoded.
    assert_eq!(
        status(400, escaped_400).run(&builtin_only).message,
        "用户额度不足"
    );
}

fn error_rule(id: &str, reason: &str, scope: &str) -> ErrorRule {
    ErrorRule {
        id: id.into(),
        provider: None,
        statuses: Vec::new(),
        error_types: Vec::new(),
        header_markers: BTreeMap::new(),
        text_markers: Vec::new(),
        exclude_markers: Vec::new(),
        reason: reason.into(),
        scope: scope.into(),
        base_cooldown: None,
    }
}

#[test]
fn section_7_error_rules() {
    use OutcomeClass::*;
    let cd = cooldown();
    let header_rule = ErrorRule {
        statuses: vec![400],
        header_markers: BTreeMap::from([("X-Gateway-Error".to_string(), "QUOTA".to_string())]),
        ..error_rule("gw-quota", "quota_exhausted", "model")
    };
    let type_rule = ErrorRule {
        provider: Some("gw".into()),
        error_types: strings(&["insufficient_user_quota"]),
        exclude_markers: strings(&["permanent"]),
        ..error_rule("gw-type", "rate_limit_exceeded", "provider")
    };
    let ban_conn = ErrorRule {
        text_markers: strings(&["key revoked"]),
        ..error_rule("ban-conn", "banned", "connection")
    };
    let ban_prov = ErrorRule {
        text_markers: strings(&["tenant revoked"]),
        ..error_rule("ban-prov", "banned", "provider")
    };
    let server = ErrorRule {
        statuses: vec![200],
        text_markers: strings(&["upstream hiccup"]),
        ..error_rule("srv", "server_error", "model")
    };
    let error_rules = [header_rule, type_rule, ban_conn, ban_prov, server];
    let rules = Rules {
        restatements: &[],
        builtins: &[],
        error_rules: &error_rules,
        cooldown: &cd,
    };
    let typed = r#"{"error":{"code":"insufficient_user_quota","message":"try later"}}"#;
    #[rustfmt::skip]
    let rows: Vec<(&str, Case, OutcomeClass, &str, Scope)> = vec![
        ("400 header marker (case-insensitive)", status(400, "{}").with_headers(&[("x-gateway-error", "daily-quota")]), QuotaExhausted, "quota_exhausted", Scope::Model),
        ("400 without the header", status(400, "{}"), ClientFault, "client_error", Scope::Triple),
        ("error type match, provider filter", status(400, typed).provider("gw"), RateLimited, "rate_limit_exceeded", Scope::Provider),
        ("error type, other provider", status(400, typed), ClientFault, "client_error", Scope::Triple),
        ("exclude marker vetoes", status(400, r#"{"error":{"code":"insufficient_user_quota","message":"permanent"}}"#) .provider("gw"), ClientFault, "client_error", Scope::Triple),
        ("connection scope is never terminal", status(403, "key revoked"), Forbidden, "banned", Scope::Connection),
        ("provider scope may be terminal", status(403, "tenant revoked"), Banned, "banned", Scope::Provider),
        ("rules see in-stream status", status(200, "upstream hiccup").stream_error("invalid_request_error"), ClientFault, "client_error", Scope::Triple),
    ];
    for (name, case, class, reason, scope) in rows {
        let got = case.run(&rules);
        assert_eq!(
            (got.class, got.reason.as_str(), got.scope),
            (class, reason, scope),
            "{name}"
        );
    }
}

#[test]
fn never_panics_on_odd_input() {
    let cd = cooldown();
    let builtins = builtin_restatements();
    let odd_rule = ErrorRule {
        header_markers: BTreeMap::from([("bad header\n".to_string(), "x".to_string())]),
        ..error_rule("odd", "no_such_reason", "nowhere")
    };
    let error_rules = [odd_rule];
    let rules = Rules {
        restatements: &[],
        builtins: &builtins,
        error_rules: &error_rules,
        cooldown: &cd,
    };
    let bodies: [&[u8]; 8] = [
        b"",
        b"\\",
        b"\\u",
        b"\\ud800\\u",
        b"[]",
        b"{\"error\":null}",
        b"\xff\xfe\x00 quota",
        "{\"error\":{\"message\":\"\\u989d\"}} 额度".as_bytes(),
    ];
    for status in (100..=600).step_by(7).chain([402, 403, 429, 529]) {
        for body in bodies {
            let input = Input {
                provider: "p",
                dialect: Dialect::OpenAi,
                status: Some(status),
                headers: None,
                body,
                in_stream_error_type: None,
                client_gone: false,
                truncated: false,
            };
            let got = classify(&input, &rules, now());
            assert!(got.message.chars().count() <= 200);
            assert_ne!(got.retry_hint, Some(Duration::ZERO));
        }
    }
}

#[test]
fn the_built_in_no_access_rule_refuses_the_model_only() {
    let cd = cooldown();
    let error_rules = crate::config::builtin_error_rules();
    let rules = Rules {
        restatements: &[],
        builtins: &builtin_restatements(),
        error_rules: &error_rules,
        cooldown: &cd,
    };
    for (st, body) in [
        (403, r#"{"error":{"message":"无权访问模型 glm-5"}}"#),
        (
            400,
            r#"{"error":{"message":"\u65e0\u6743\u8bbf\u95ee\u6a21\u578b"}}"#,
        ),
    ] {
        let got = status(st, body).run(&rules);
        assert_eq!(
            (got.class, got.reason.as_str(), got.scope),
            (OutcomeClass::Forbidden, "auth_error", Scope::Model),
            "{st} {body}"
        );
        assert!(got.error_rule.is_some());
        assert!(got.restated.is_none(), "the quota restatement excludes it");
    }
    let other = status(403, r#"{"error":{"message":"forbidden"}}"#).run(&rules);
    assert!(other.error_rule.is_none());
}
