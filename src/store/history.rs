//! Reading the request log back: [`LogQuery`] (filters and a page), run by
//! [`Store::query_requests`] inside a running sluice and by [`read_request_log`] from another
//! process (`sluice log`), which opens the file read-only — SQLite's WAL lets it read while
//! a server writes.

use std::path::Path;

use rusqlite::{Connection, params_from_iter, types::Value};

use super::{RequestLogRow, Store, StoreError, from_sql_int, schema};

/// Which `request_log` rows to read, newest first. Every filter is optional; all that are
/// set must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogQuery {
    /// Only rows that started at or after this time, Unix ms.
    pub since_unix_ms: Option<u64>,
    /// Only rows with this HTTP status.
    pub status: Option<u16>,
    /// Only rows whose client model is this, or whose target is this or ends in `/this`.
    pub model: Option<String>,
    /// Only rows whose target (`provider/model`) starts with `provider/`.
    pub provider: Option<String>,
    /// Only rows with this outcome word (`ok`, `upstream_error`, …).
    pub outcome: Option<String>,
    /// Paging: only rows older than this row id (the `id` of the last row of the page before).
    pub before_id: Option<i64>,
    /// At most this many rows (0 reads none).
    pub limit: usize,
}

/// One row read back, with its id (for paging with [`LogQuery::before_id`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    /// The row id (grows with every insert).
    pub id: i64,
    /// The row.
    pub row: RequestLogRow,
}

impl Store {
    /// The committed rows matching `q`, newest first (call [`Store::flush`] first to include
    /// queued rows).
    pub fn query_requests(&self, q: &LogQuery) -> Result<Vec<LoggedRequest>, StoreError> {
        self.with_reader(|conn| run(conn, q))
    }
}

/// Reads the request log of the database at `path` without opening it for writing (no
/// migration, no retention). Errors name the file; a missing file says no sluice has written
/// there yet.
pub fn read_request_log(path: &Path, q: &LogQuery) -> Result<Vec<LoggedRequest>, StoreError> {
    if !path.exists() {
        return Err(StoreError::Read {
            path: path.to_path_buf(),
            message: "no state database here yet (has sluice run with this config?)".into(),
        });
    }
    let read_err = |e: rusqlite::Error| StoreError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let conn = schema::open_reader(path).map_err(read_err)?;
    run(&conn, q).map_err(read_err)
}

/// The SQL of `q`: a fixed statement per filter set, values bound (never spliced in).
fn run(conn: &Connection, q: &LogQuery) -> rusqlite::Result<Vec<LoggedRequest>> {
    let mut sql = String::from(
        "SELECT id, at_unix_ms, route, client_model, target, status, latency_ms, attempts, bytes, outcome, tokens_in, tokens_out, translated, injected, continued
         FROM request_log WHERE 1 = 1",
    );
    let mut args: Vec<Value> = Vec::new();
    let int = |v: u64| Value::Integer(i64::try_from(v).unwrap_or(i64::MAX));
    if let Some(t) = q.since_unix_ms {
        sql.push_str(" AND at_unix_ms >= ?");
        args.push(int(t));
    }
    if let Some(s) = q.status {
        sql.push_str(" AND status = ?");
        args.push(int(u64::from(s)));
    }
    if let Some(m) = &q.model {
        sql.push_str(" AND (client_model = ? OR target = ? OR substr(target, -?) = ?)");
        let suffix = format!("/{m}");
        args.push(Value::Text(m.clone()));
        args.push(Value::Text(m.clone()));
        args.push(int(suffix.len() as u64));
        args.push(Value::Text(suffix));
    }
    if let Some(p) = &q.provider {
        sql.push_str(" AND substr(target, 1, ?) = ?");
        let prefix = format!("{p}/");
        args.push(int(prefix.len() as u64));
        args.push(Value::Text(prefix));
    }
    if let Some(o) = &q.outcome {
        sql.push_str(" AND outcome = ?");
        args.push(Value::Text(o.clone()));
    }
    if let Some(id) = q.before_id {
        sql.push_str(" AND id < ?");
        args.push(Value::Integer(id));
    }
    sql.push_str(" ORDER BY id DESC LIMIT ?");
    args.push(int(q.limit as u64));
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params_from_iter(args), |r| {
        Ok(LoggedRequest {
            id: r.get(0)?,
            row: RequestLogRow {
                at_unix_ms: from_sql_int(r.get(1)?),
                route: r.get(2)?,
                client_model: r.get(3)?,
                target: r.get(4)?,
                status: u16::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
                latency_ms: from_sql_int(r.get(6)?),
                attempts: u32::try_from(r.get::<_, i64>(7)?).unwrap_or(0),
                bytes: from_sql_int(r.get(8)?),
                outcome: r.get(9)?,
                tokens_in: r.get::<_, Option<i64>>(10)?.map(from_sql_int),
                tokens_out: r.get::<_, Option<i64>>(11)?.map(from_sql_int),
                translated: r.get(12)?,
                injected: r.get::<_, i64>(13)? != 0,
                continued: r.get::<_, i64>(14)? != 0,
            },
        })
    })?;
    rows.collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StoreConfig;

    fn store(dir: &Path) -> Store {
        Store::open(&StoreConfig {
            path: dir.join("s.db"),
            request_log_max_rows: 1000,
            request_log_max_age: std::time::Duration::from_secs(3600),
        })
        .unwrap()
    }

    fn row(n: u64, status: u16, model: &str, target: &str) -> RequestLogRow {
        RequestLogRow {
            tokens_in: None,
            tokens_out: None,
            translated: String::new(),
            injected: false,
            continued: false,
            at_unix_ms: 1_700_000_000_000 + n * 1000,
            route: "/v1/messages".into(),
            client_model: model.into(),
            target: target.into(),
            status,
            latency_ms: 5,
            attempts: 1,
            bytes: 10,
            outcome: if status == 200 {
                "ok"
            } else {
                "upstream_error"
            }
            .into(),
        }
    }

    #[test]
    fn filters_and_pages_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let s = store(dir.path());
        for n in 0..6 {
            let (status, model) = if n % 2 == 0 {
                (200, "fast")
            } else {
                (429, "slow")
            };
            s.record_request(row(n, status, model, &format!("prov{}/up-{model}", n % 3)));
        }
        s.flush();
        let all = |q: LogQuery| -> Vec<u64> {
            s.query_requests(&q)
                .unwrap()
                .iter()
                .map(|r| (r.row.at_unix_ms - 1_700_000_000_000) / 1000)
                .collect()
        };
        let base = LogQuery {
            limit: 100,
            ..Default::default()
        };
        assert_eq!(all(base.clone()), [5, 4, 3, 2, 1, 0]);
        let status = LogQuery {
            status: Some(429),
            ..base.clone()
        };
        assert_eq!(all(status), [5, 3, 1]);
        let model = LogQuery {
            model: Some("up-fast".into()),
            ..base.clone()
        };
        assert_eq!(all(model), [4, 2, 0], "matches the target's model");
        let provider = LogQuery {
            provider: Some("prov1".into()),
            ..base.clone()
        };
        assert_eq!(all(provider), [4, 1]);
        let since = LogQuery {
            since_unix_ms: Some(1_700_000_004_000),
            ..base.clone()
        };
        assert_eq!(all(since), [5, 4]);
        // Paging: two rows a page, each page starts below the last id of the one before.
        let page1 = s
            .query_requests(&LogQuery {
                limit: 2,
                ..Default::default()
            })
            .unwrap();
        let page2 = s
            .query_requests(&LogQuery {
                limit: 2,
                before_id: page1.last().map(|r| r.id),
                ..Default::default()
            })
            .unwrap();
        assert_eq!(page2.len(), 2);
        assert!(page2[0].id < page1[1].id);
        // The read-only path (another process) sees the same rows.
        let other = read_request_log(&dir.path().join("s.db"), &base).unwrap();
        assert_eq!(other.len(), 6);
        let missing = read_request_log(&dir.path().join("none.db"), &base).unwrap_err();
        assert!(missing.to_string().contains("none.db"), "{missing}");
    }
}
