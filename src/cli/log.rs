//! `sluice log`: the request log printed from the state database (read-only, so it works
//! while a server runs), as aligned text or as JSON lines.

use std::fmt::Write as _;
use std::time::Duration;

use serde_json::json;

use crate::clock::utc_text;
use crate::store::history::LoggedRequest;

/// The Unix-ms time `since` before `now_unix_ms` (saturating at the epoch).
pub fn since(now_unix_ms: u64, since: Duration) -> u64 {
    now_unix_ms.saturating_sub(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// Rows (as read: newest first) as text, oldest first like a log, with a header line; or a
/// note when nothing matched.
pub fn render_text(rows: &[LoggedRequest]) -> String {
    if rows.is_empty() {
        return "no requests match\n".into();
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{:<19}  {:>3}  {:<15} {:>8} {:>3}  {:<24} {:<40} {:>9} {:>15}",
        "time (UTC)",
        "st",
        "outcome",
        "latency",
        "att",
        "route",
        "model → target",
        "bytes",
        "tokens in/out"
    );
    for r in rows.iter().rev() {
        let r = &r.row;
        let _ = writeln!(
            o,
            "{:<19}  {:>3}  {:<15} {:>6}ms {:>3}  {:<24} {:<40} {:>9} {:>15}",
            utc_text(r.at_unix_ms),
            r.status,
            r.outcome,
            r.latency_ms,
            r.attempts,
            r.route,
            format!("{} → {}", r.client_model, r.target),
            r.bytes,
            tokens_text(r.tokens_in, r.tokens_out)
        );
    }
    o
}

/// `12/345`, with `—` for a count the upstream did not report.
fn tokens_text(input: Option<u64>, output: Option<u64>) -> String {
    let n = |v: Option<u64>| v.map_or_else(|| "—".to_owned(), |n| n.to_string());
    format!("{}/{}", n(input), n(output))
}

/// Rows as JSON lines, oldest first: `{"id","at","atUnixMs","route","model","target",
/// "status","latencyMs","attempts","bytes","outcome","tokensIn","tokensOut"}` (the token
/// counts `null` when unknown).
pub fn render_json(rows: &[LoggedRequest]) -> String {
    let mut o = String::new();
    for r in rows.iter().rev() {
        let (id, r) = (r.id, &r.row);
        let v = json!({
            "id": id,
            "at": utc_text(r.at_unix_ms),
            "atUnixMs": r.at_unix_ms,
            "route": r.route,
            "model": r.client_model,
            "target": r.target,
            "status": r.status,
            "latencyMs": r.latency_ms,
            "attempts": r.attempts,
            "bytes": r.bytes,
            "outcome": r.outcome,
            "tokensIn": r.tokens_in,
            "tokensOut": r.tokens_out,
        });
        let _ = writeln!(o, "{v}");
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::RequestLogRow;

    #[test]
    fn renders_oldest_first_in_both_forms() {
        let rows: Vec<LoggedRequest> = [2u64, 1]
            .iter()
            .map(|&n| LoggedRequest {
                id: i64::try_from(n).unwrap(),
                row: RequestLogRow {
                    at_unix_ms: 1_764_633_600_000 + n * 1000,
                    route: "/v1/messages".into(),
                    client_model: format!("m{n}"),
                    target: "p/x".into(),
                    status: 200,
                    outcome: "ok".into(),
                    ..Default::default()
                },
            })
            .collect();
        let t = render_text(&rows);
        assert!(t.contains("2025-12-02 00:00:01"), "{t}");
        assert!(
            t.find("m1 → p/x").unwrap() < t.find("m2 → p/x").unwrap(),
            "{t}"
        );
        let j = render_json(&rows);
        let first: serde_json::Value = serde_json::from_str(j.lines().next().unwrap()).unwrap();
        assert_eq!(
            (first["id"].as_i64(), first["model"].as_str()),
            (Some(1), Some("m1"))
        );
        assert_eq!(render_text(&[]), "no requests match\n");
        assert_eq!(since(10_000, Duration::from_secs(3)), 7_000);
        assert_eq!(since(10, Duration::from_secs(3)), 0);
    }
}
