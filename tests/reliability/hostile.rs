//! Hostile input on the inference and admin listeners. Every input gets a clear 4xx (in the
//! route's dialect when sluice itself answers) or a clean close, never a crash; a normal
//! request succeeds after each group.

use std::net::SocketAddr;
use std::time::Duration;

use crate::outcome::{Route, Verdict, is_dialect_error, judge_json};
use crate::proc::{Home, Proc};
use crate::raw::{RawReply, exchange};
use crate::support::{MockUpstream, Reply, client};

/// The config: one Anthropic and one OpenAI provider on the mock, 2 MiB body limit.
pub fn config(mock: &MockUpstream) -> String {
    format!(
        r#"
[server]
max_body = "2MiB"
[log]
level = "info"
[[providers]]
id = "a"
dialect = "anthropic"
base_url = "{url}"
  [[providers.connections]]
  id = "a1"
  auth = "passthrough"
[[providers]]
id = "o"
dialect = "openai"
base_url = "{url}"
  [[providers.connections]]
  id = "o1"
  auth = "passthrough"
"#,
        url = mock.base_url()
    )
}

/// An HTTP/1.1 request with `Connection: close` and a `content-length`.
pub fn req(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {path} HTTP/1.1\r\nhost: sluice\r\nconnection: close\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

fn json_req(route: Route, body: &[u8]) -> Vec<u8> {
    let mut h = vec![("content-type", "application/json")];
    h.extend(route.headers());
    req("POST", route.path(), &h, body)
}

/// What an input must get.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// A 4xx whose body is an error in this route's dialect.
    Dialect4xx(Route),
    /// This exact status in this route's dialect.
    DialectStatus(Route, u16),
    /// Any 4xx (hyper's own framing errors are plain), or the connection closed without a reply.
    Clean4xxOrClose,
    /// Only 4xx responses (any number), and the connection closed: for smuggling attempts.
    Only4xx,
    /// A normal complete 2xx in this route's dialect (legal input sluice must serve).
    Served(Route),
}

fn check(name: &str, expect: Expect, r: &RawReply) -> Result<(), String> {
    let status = r.status();
    let body = r.body();
    let ok = match expect {
        Expect::Dialect4xx(route) => {
            status.is_some_and(|s| (400..500).contains(&s))
                && is_dialect_error(route, body.as_bytes())
        }
        Expect::DialectStatus(route, want) => {
            status == Some(want) && is_dialect_error(route, body.as_bytes())
        }
        Expect::Clean4xxOrClose => match status {
            Some(s) => (400..500).contains(&s),
            None => r.closed,
        },
        Expect::Only4xx => {
            let all = r.statuses();
            r.closed && all.iter().all(|s| (400..500).contains(s))
        }
        Expect::Served(route) => status
            .is_some_and(|s| judge_json(route, s, dechunk(&r.bytes).as_slice()) == Verdict::Ok),
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name}: expected {expect:?}, got status {status:?} closed={} head+body: {}",
            r.closed,
            String::from_utf8_lossy(&r.bytes[..r.bytes.len().min(400)])
        ))
    }
}

/// The body of the first response, de-chunked when it was sent chunked.
fn dechunk(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Vec::new();
    };
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.as_bytes().to_vec();
    }
    let mut out = Vec::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || tail.len() < n {
            break;
        }
        out.extend_from_slice(&tail.as_bytes()[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// A normal non-streaming request on every route succeeds.
async fn still_serving(p: &Proc) {
    for route in Route::ALL {
        let r = client::post_json(
            &p.url(route.path()),
            &route.body("m", false),
            &route.headers(),
        )
        .await;
        assert_eq!(
            judge_json(route, r.status.as_u16(), &r.body),
            Verdict::Ok,
            "a normal {route:?} request failed after hostile input: {} {}",
            r.status,
            r.text()
        );
    }
}

/// Runs every case against `addr`, returns how many were tried.
async fn run_cases(p: &mut Proc, addr: SocketAddr, cases: Vec<(String, Expect, Vec<u8>)>) -> usize {
    let n = cases.len();
    let mut failures = Vec::new();
    let mut answers: std::collections::BTreeMap<String, usize> = Default::default();
    for (name, expect, bytes) in cases {
        let r = exchange(addr, &bytes, Duration::from_secs(10)).await;
        let answer = r
            .status()
            .map_or_else(|| "close".to_string(), |s| s.to_string());
        *answers.entry(answer).or_default() += 1;
        if let Err(e) = check(&name, expect, &r) {
            failures.push(e);
        }
        p.assert_healthy();
    }
    still_serving(p).await;
    println!("hostile on {addr}: answers {answers:?}");
    assert!(
        failures.is_empty(),
        "{} of {n} hostile inputs mishandled:\n{}",
        failures.len(),
        failures.join("\n")
    );
    n
}

fn inference_cases() -> Vec<(String, Expect, Vec<u8>)> {
    use Expect::*;
    let mut c: Vec<(String, Expect, Vec<u8>)> = Vec::new();
    for route in Route::ALL {
        let bodies: [(&str, Vec<u8>); 12] = [
            ("malformed JSON", br#"{"model":"#.to_vec()),
            ("trailing garbage", br#"{"model":"m"} x"#.to_vec()),
            ("JSON array", b"[1,2]".to_vec()),
            ("JSON string", br#""model""#.to_vec()),
            ("JSON null", b"null".to_vec()),
            ("JSON number", b"42".to_vec()),
            ("empty body", Vec::new()),
            ("missing model", br#"{"messages":[]}"#.to_vec()),
            ("model is a number", br#"{"model":5}"#.to_vec()),
            ("model is null", br#"{"model":null}"#.to_vec()),
            ("model is an object", br#"{"model":{"a":1}}"#.to_vec()),
            ("model is empty", br#"{"model":""}"#.to_vec()),
        ];
        for (name, body) in bodies {
            c.push((
                format!("{route:?}: {name}"),
                DialectStatus(route, 400),
                json_req(route, &body),
            ));
        }
        // 100k-deep nesting is valid JSON sluice does not build a tree for: it is refused by
        // sluice or forwarded, and the upstream's 400 comes back in the route's dialect.
        let mut deep = br#"{"model":"m","messages":"#.to_vec();
        deep.extend(std::iter::repeat_n(b'[', 100_000));
        deep.extend(std::iter::repeat_n(b']', 100_000));
        deep.push(b'}');
        let mut h = vec![
            ("content-type", "application/json"),
            ("x-test-case", "deep"),
        ];
        h.extend(route.headers());
        c.push((
            format!("{route:?}: 100k-deep nesting"),
            DialectStatus(route, 400),
            req("POST", route.path(), &h, &deep),
        ));
        // Over the 2 MiB limit, by content-length and chunked.
        let big = vec![b' '; 3 * 1024 * 1024];
        c.push((
            format!("{route:?}: 3 MB body (content-length)"),
            DialectStatus(route, 413),
            json_req(route, &big),
        ));
        let mut chunked = format!(
            "POST {} HTTP/1.1\r\nhost: sluice\r\nconnection: close\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
            route.path()
        )
        .into_bytes();
        for _ in 0..48 {
            chunked.extend_from_slice(format!("{:x}\r\n", 65536).as_bytes());
            chunked.extend(std::iter::repeat_n(b' ', 65536));
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        c.push((
            format!("{route:?}: 3 MB body (chunked)"),
            DialectStatus(route, 413),
            chunked,
        ));
        // Wrong method on a known path.
        for m in ["GET", "PUT", "DELETE", "PATCH"] {
            c.push((
                format!("{route:?}: {m}"),
                Dialect4xx(route),
                req(m, route.path(), &route.headers(), b""),
            ));
        }
    }
    // A 1 MB model name: refused by sluice, or forwarded and refused by the upstream (its 400
    // relayed), never a crash.
    let model = "m".repeat(1024 * 1024);
    let body = format!(r#"{{"model":"{model}","max_tokens":1,"messages":[]}}"#);
    c.push((
        "1 MB model name".into(),
        Dialect4xx(Route::Messages),
        json_req(Route::Messages, body.as_bytes()),
    ));
    // Many headers (a 100 KB header is its own test below).
    let mut many =
        String::from("POST /v1/messages HTTP/1.1\r\nhost: sluice\r\nconnection: close\r\n");
    for i in 0..10_000 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    let valid = Route::Messages.body("m", false).to_string();
    many.push_str(&format!("content-length: {}\r\n\r\n{valid}", valid.len()));
    c.push(("10,000 headers".into(), Clean4xxOrClose, many.into_bytes()));
    // Bad framing.
    for (name, cl) in [
        ("content-length abc", "abc"),
        ("content-length -5", "-5"),
        ("content-length 1, 2", "1, 2"),
        ("content-length overflow", "99999999999999999999999"),
    ] {
        let bytes = format!("POST /v1/messages HTTP/1.1\r\nhost: sluice\r\nconnection: close\r\ncontent-length: {cl}\r\n\r\n{{}}").into_bytes();
        c.push((name.into(), Clean4xxOrClose, bytes));
    }
    c.push((
        "two different content-lengths".into(),
        Clean4xxOrClose,
        b"POST /v1/messages HTTP/1.1\r\nhost: sluice\r\ncontent-length: 2\r\ncontent-length: 40\r\n\r\n{}".to_vec(),
    ));
    // CL + TE smuggling: the chunked body ends at `0`, the rest must not be served as a request
    // that reaches anything but the inference routes (it is a 4xx at most).
    for te in [
        "chunked",
        "chunked, identity",
        " chunked",
        "xchunked",
        "chunked\r\ntransfer-encoding: identity",
    ] {
        let bytes = format!(
            "POST /v1/messages HTTP/1.1\r\nhost: sluice\r\ncontent-length: 6\r\ntransfer-encoding: {te}\r\n\r\n0\r\n\r\nGET /api/snapshot HTTP/1.1\r\nhost: sluice\r\nconnection: close\r\n\r\n"
        );
        c.push((
            format!("CL + TE smuggling ({})", te.replace("\r\n", " | ")),
            Only4xx,
            bytes.into_bytes(),
        ));
    }
    c.push((
        "TE + CL with smuggled admin request in the body".into(),
        Only4xx,
        b"POST /v1/messages HTTP/1.1\r\nhost: sluice\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n1\r\n{\r\n0\r\n\r\nPOST /api/resilience/reset HTTP/1.1\r\nhost: sluice\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}".to_vec(),
    ));
    // HTTP/1.0 is legal and served.
    let body = Route::Messages.body("m", false).to_string();
    c.push((
        "HTTP/1.0 request".into(),
        Served(Route::Messages),
        format!("POST /v1/messages HTTP/1.0\r\ncontent-type: application/json\r\nanthropic-version: 2023-06-01\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes(),
    ));
    c.push((
        "not HTTP at all".into(),
        Clean4xxOrClose,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage-tls-hello\r\n\r\n".to_vec(),
    ));
    c.push((
        "HTTP/9.9".into(),
        Clean4xxOrClose,
        b"GET / HTTP/9.9\r\nhost: x\r\n\r\n".to_vec(),
    ));
    c.push((
        "extension method".into(),
        Clean4xxOrClose,
        req("FROBNICATE", "/v1/messages", &[], b""),
    ));
    c.push((
        "bad method token".into(),
        Clean4xxOrClose,
        b"G(T / HTTP/1.1\r\nhost: x\r\n\r\n".to_vec(),
    ));
    // Unknown routes and path tricks: never an admin payload on the inference port.
    for path in [
        "/",
        "/nope",
        "/v1",
        "/v1/nope",
        "/v2/messages",
        "/api/snapshot",
        "/metrics",
        "/api/resilience",
        "/v1/../api/snapshot",
        "/v1/%2e%2e/api/snapshot",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/v1/messages/../../api/snapshot",
        "/v1//../admin",
        "/..%2f..%2fapi/snapshot",
        "/v1/messages%00",
        "/V1/MESSAGES",
        "/v1/messages/",
        "/v1/messages?x=../../api/snapshot#frag",
    ] {
        for m in ["GET", "POST"] {
            c.push((
                format!("{m} {path}"),
                Clean4xxOrClose,
                req(m, path, &[("content-type", "application/json")], b"{}"),
            ));
        }
    }
    c.push((
        "absolute-form URI to another host".into(),
        Clean4xxOrClose,
        req("GET", "http://evil.example/api/snapshot", &[], b""),
    ));
    c.push((
        "asterisk-form URI".into(),
        Clean4xxOrClose,
        req("OPTIONS", "*", &[], b""),
    ));
    c.push((
        "double slash".into(),
        Clean4xxOrClose,
        req(
            "POST",
            "//v1/messages",
            &[("content-type", "application/json")],
            b"{}",
        ),
    ));
    c
}

fn admin_cases() -> Vec<(String, Expect, Vec<u8>)> {
    use Expect::*;
    let mut c: Vec<(String, Expect, Vec<u8>)> = Vec::new();
    for (name, body) in [
        ("malformed JSON", br#"{"queue":"#.to_vec()),
        ("JSON array", b"[]".to_vec()),
        ("unknown field", br#"{"bogus":1}"#.to_vec()),
        ("wrong type", br#"{"stream_stall_cooldown":"yes"}"#.to_vec()),
        ("100k-deep nesting", {
            let mut b = br#"{"queue":"#.to_vec();
            b.extend(std::iter::repeat_n(b'[', 100_000));
            b.extend(std::iter::repeat_n(b']', 100_000));
            b.push(b'}');
            b
        }),
        (
            "invalid UTF-8",
            b"{\"queue\":{\"max_wait\":\"\xff\xfe\"}}".to_vec(),
        ),
    ] {
        c.push((
            format!("admin PATCH /api/resilience: {name}"),
            Clean4xxOrClose,
            req(
                "PATCH",
                "/api/resilience",
                &[("content-type", "application/json")],
                &body,
            ),
        ));
        c.push((
            format!("admin POST /api/resilience/cooldowns: {name}"),
            Clean4xxOrClose,
            req(
                "POST",
                "/api/resilience/cooldowns",
                &[("content-type", "application/json")],
                &body,
            ),
        ));
    }
    c.push((
        "admin: 1 MB body".into(),
        Clean4xxOrClose,
        req("PATCH", "/api/resilience", &[], &vec![b' '; 1 << 20]),
    ));
    let mut many =
        String::from("GET /api/snapshot HTTP/1.1\r\nhost: sluice\r\nconnection: close\r\n");
    for i in 0..10_000 {
        many.push_str(&format!("x-h{i}: v\r\n"));
    }
    many.push_str("\r\n");
    c.push((
        "admin: 10,000 headers".into(),
        Clean4xxOrClose,
        many.into_bytes(),
    ));
    for path in [
        "/nope",
        "/api",
        "/api/../v1/messages",
        "/api/%2e%2e/v1/messages",
        "/v1/messages",
        "//api//snapshot/..",
    ] {
        c.push((
            format!("admin GET {path}"),
            Clean4xxOrClose,
            req("GET", path, &[], b""),
        ));
    }
    for m in ["PUT", "FROBNICATE"] {
        c.push((
            format!("admin {m} /api/snapshot"),
            Clean4xxOrClose,
            req(m, "/api/snapshot", &[], b""),
        ));
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_input_gets_a_clear_4xx_or_a_clean_close() {
    let mock = MockUpstream::start().await;
    let home = Home::new(&config(&mock));
    // The upstream's answers to the inputs sluice may forward (see inference_cases).
    for route in Route::ALL {
        let reply = match route {
            Route::Messages => Reply::anthropic_error(400, "invalid_request_error", "too deep"),
            _ => Reply::openai_error(400, "invalid_request_error", "invalid_json", "too deep"),
        };
        mock.on(route.path())
            .header("x-test-case", "deep")
            .reply(reply);
    }
    mock.on("/v1/messages")
        .model(&"m".repeat(1024 * 1024))
        .reply(Reply::anthropic_error(
            400,
            "invalid_request_error",
            "model: too long",
        ));
    let mut p = Proc::start(&home, &[]);
    still_serving(&p).await;
    let listen = p.listen;
    let admin = p.admin;
    let n = run_cases(&mut p, listen, inference_cases()).await;
    let m = run_cases(&mut p, admin, admin_cases()).await;
    let h2 = h2_prior_knowledge(&p).await;
    p.assert_healthy();
    let err = p.stop();
    assert!(!err.contains("panicked"), "{err}");
    println!(
        "hostile: {} inputs tried ({n} inference, {m} admin, {h2} h2c), 0 mishandled, 0 panics",
        n + m + h2
    );
}

/// HTTP/2 with prior knowledge (h2c) is served like HTTP/1.1; returns the requests sent.
async fn h2_prior_knowledge(p: &Proc) -> usize {
    use http_body_util::{BodyExt, Full};
    use hyper_util::client::legacy::Client;
    use hyper_util::rt::TokioExecutor;
    let client: Client<_, Full<bytes::Bytes>> = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http();
    let mut sent = 0;
    for route in Route::ALL {
        let mut b =
            http::Request::post(p.url(route.path())).header("content-type", "application/json");
        for (k, v) in route.headers() {
            b = b.header(k, v);
        }
        let req = b
            .body(Full::new(bytes::Bytes::from(
                route.body("m", false).to_string(),
            )))
            .unwrap();
        let resp = tokio::time::timeout(Duration::from_secs(10), client.request(req))
            .await
            .unwrap()
            .unwrap();
        let status = resp.status().as_u16();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(
            judge_json(route, status, &body),
            Verdict::Ok,
            "h2c {route:?}"
        );
        sent += 1;
    }
    let req = http::Request::get(p.url("/api/snapshot"))
        .body(Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    assert!(
        resp.status().is_client_error(),
        "h2c GET /api/snapshot on the inference port: {}",
        resp.status()
    );
    sent + 1
}

/// Invalid UTF-8 in a request body is a 400 in the route's dialect, not forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_utf8_body_is_a_dialect_400() {
    let mock = MockUpstream::start().await;
    let home = Home::new(&config(&mock));
    let mut p = Proc::start(&home, &[]);
    let mut cases = Vec::new();
    for route in Route::ALL {
        for body in [
            &b"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}"[..],
            b"{\"model\":\"m\",\"input\":\"\xc3\x28\"}",
            b"{\"model\":\"m\xe2\x82\"}",
        ] {
            cases.push((
                format!("{route:?}: invalid UTF-8"),
                Expect::DialectStatus(route, 400),
                json_req(route, body),
            ));
        }
    }
    let listen = p.listen;
    run_cases(&mut p, listen, cases).await;
    assert_eq!(
        mock.count(),
        3,
        "only the normal requests may reach the upstream: {:#?}",
        mock.requests()
    );
}

/// 200 connections trickling headers do not hold up normal requests, and an idle header read
/// is cut by `[server] header_read_timeout`: the connection is closed (hyper closes it without
/// writing a 408; a 408 would be accepted too).
///
/// "Not held up" is judged against the header read timeout, not a latency window: slowloris
/// connections that blocked the accept loop or took every connection slot would hold the
/// normal requests until the timeout cut them (6 s), while a debug build sharing two cores with
/// the rest of the suite can take a second for them (CI saw 1.04 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_does_not_delay_others_and_is_cut_at_the_header_read_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(6);
    let mock = MockUpstream::start().await;
    let home = Home::new(&format!("{}\n", config(&mock)).replace(
        "max_body = \"2MiB\"",
        "max_body = \"2MiB\"\nheader_read_timeout = \"6s\"",
    ));
    let mut p = Proc::start(&home, &[]);
    let t = crate::now();
    still_serving(&p).await;
    let alone = t.elapsed();
    let mut conns = Vec::new();
    for _ in 0..200 {
        let mut s = tokio::net::TcpStream::connect(p.listen).await.unwrap();
        s.write_all(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\n")
            .await
            .unwrap();
        conns.push(s);
    }
    let t = crate::now();
    still_serving(&p).await;
    let took = t.elapsed();
    println!(
        "slowloris: 3 normal requests took {alone:?} alone, {took:?} beside 200 slowloris connections"
    );
    assert!(
        took < HEADER_READ_TIMEOUT / 2,
        "3 normal requests took {took:?} beside 200 slowloris connections ({alone:?} alone)"
    );
    let mut cut = 0;
    for mut s in conns {
        let mut buf = Vec::new();
        let r = tokio::time::timeout(HEADER_READ_TIMEOUT * 2, s.read_to_end(&mut buf)).await;
        if r.is_ok()
            && (buf.is_empty() || String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 408"))
        {
            cut += 1;
        }
    }
    assert_eq!(
        cut, 200,
        "slowloris connections closed by the header read timeout"
    );
    p.assert_healthy();
}

/// A huge `model` is refused or bounded before sluice keeps it: four requests with a 1 MB
/// model name must not put megabytes into `/api/snapshot` or `request_log`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_model_name_is_not_kept_verbatim() {
    let mock = MockUpstream::start().await;
    let model = "m".repeat(1024 * 1024);
    mock.on("/v1/messages")
        .model(&model)
        .reply(Reply::anthropic_error(
            400,
            "invalid_request_error",
            "model: too long",
        ));
    let home = Home::new(&config(&mock));
    let mut p = Proc::start(&home, &[]);
    for _ in 0..4 {
        let r = client::post_json(
            &p.url("/v1/messages"),
            &Route::Messages.body(&model, false),
            &Route::Messages.headers(),
        )
        .await;
        assert!(r.status.is_client_error(), "{}", r.status);
    }
    let snap = client::get(&p.admin_url("/api/snapshot"), &[]).await;
    p.assert_healthy();
    p.stop();
    let conn = rusqlite::Connection::open(home.db()).unwrap();
    let longest: i64 = conn
        .query_row(
            "SELECT COALESCE(MAX(LENGTH(client_model)), 0) FROM request_log",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert!(
        snap.body.len() < 256 * 1024,
        "/api/snapshot is {} bytes after 4 requests",
        snap.body.len()
    );
    assert!(
        longest < 64 * 1024,
        "request_log keeps a {longest}-byte client_model"
    );
}

/// A 100 KB request header is refused (431 or a close) rather than buffered and forwarded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_kb_header_is_refused() {
    let mock = MockUpstream::start().await;
    let home = Home::new(&config(&mock));
    let mut p = Proc::start(&home, &[]);
    let mut c: Vec<(String, Expect, Vec<u8>)> = Vec::new();
    use Expect::Clean4xxOrClose;
    let big = "h".repeat(100 * 1024);
    c.push((
        "100 KB header".into(),
        Clean4xxOrClose,
        req(
            "POST",
            "/v1/messages",
            &[("x-big", &big), ("anthropic-version", "2023-06-01")],
            Route::Messages.body("m", false).to_string().as_bytes(),
        ),
    ));
    let listen = p.listen;
    run_cases(&mut p, listen, c).await;
    assert_eq!(
        mock.count(),
        3,
        "only the normal requests may reach the upstream"
    );
}
