//! S6, the feature ladder, and S9's console A/B: the floor, then sluice with one more feature
//! on at each step, every step its own process, all measured interleaved (c=1 and c=32 per
//! round). Each row gives its CPU per request and tail, and the change from the step before.
//! The last step draws the console into a 200×60 pseudo-terminal; it differs from the step
//! before only by that, so its change is the console's effect on the request path.
//!
//! The breaker, cooldown and lockout checks, the metrics and the SQLite request log are always
//! on in sluice (no config turns them off), so the first sluice step includes them; the
//! instruction profile (`bench/scripts/instructions.sh`) splits that step further.

use serde_json::{Value, json};

use crate::load::Req;
use crate::scenarios::{self, Arm, Opts, Rig, Target};
use crate::targets::{self, Proc, Spec};

/// One provider with one connection, default routing; the connection's `auth` follows.
const ONE_PROVIDER: &str = r#"[routing]
default_provider = ["p"]

[[providers]]
id = "p"
dialect = "anthropic"
base_url = "http://{upstream}"
  [[providers.connections]]
  id = "c1"
"#;

/// The client's own key is forwarded.
const PASSTHROUGH: &str = "  auth = \"passthrough\"\n";

/// The connection's key comes from the environment and replaces the client's.
const KEY_FROM_ENV: &str = "  auth = { env = \"SLUICE_BENCH_KEY\" }\n";

/// Every concurrency cap set (high enough never to be hit) and the admission queue in front
/// of the connection.
const CAPPED: &str = r#"[routing]
default_provider = ["p"]

[resilience.concurrency]
global_max = 100000

[[providers]]
id = "p"
dialect = "anthropic"
base_url = "http://{upstream}"
max_concurrent = 100000
  [[providers.connections]]
  id = "c1"
  auth = { env = "SLUICE_BENCH_KEY" }
  max_concurrent = 100000
  model_concurrency = { "claude-bench" = 100000 }
  rate_limit_protection = true
"#;

/// Added to [`CAPPED`]: lockout mode on, a second provider, and a two-target combo the
/// request names.
const COMBO: &str = r#"
[resilience.model_lockout]
enabled = true

[[providers]]
id = "q"
dialect = "anthropic"
base_url = "http://{upstream}"
  [[providers.connections]]
  id = "d1"
  auth = { env = "SLUICE_BENCH_KEY" }

[[combos]]
name = "bench"
targets = ["p/claude-bench", "q/claude-bench"]
"#;

/// One rung: its label, config body (these parts joined), the model requested, and whether
/// the console is drawn.
struct Step {
    name: &'static str,
    body: &'static [&'static str],
    model: &'static str,
    console: bool,
}

const STEPS: [Step; 5] = [
    Step {
        name: "sluice: routing, breaker/cooldown/lockout checks, metrics, request log",
        body: &[ONE_PROVIDER, PASSTHROUGH],
        model: "claude-bench",
        console: false,
    },
    Step {
        name: "+ key from the environment",
        body: &[ONE_PROVIDER, KEY_FROM_ENV],
        model: "claude-bench",
        console: false,
    },
    Step {
        name: "+ concurrency caps and admission queue (never full)",
        body: &[CAPPED],
        model: "claude-bench",
        console: false,
    },
    Step {
        name: "+ two-target combo, lockout mode",
        body: &[CAPPED, COMBO],
        model: "bench",
        console: false,
    },
    Step {
        name: "+ console drawn in a 200×60 pty",
        body: &[CAPPED, COMBO],
        model: "bench",
        console: true,
    },
];

async fn start(rig: &Rig, o: &Opts, s: &Step) -> std::io::Result<Proc> {
    let spec = Spec {
        body: s.body.concat(),
        env: vec![("SLUICE_BENCH_KEY".into(), "sk-bench-env".into())],
        console: s.console,
    };
    targets::sluice_with(o.place, rig.mock.addr, &o.work, &spec).await
}

/// S6 (and S9's console on/off A/B, its last two rows).
pub async fn s6(rig: &Rig, o: &Opts) -> std::io::Result<Value> {
    let pty = std::path::Path::new("/usr/bin/script").exists();
    if !pty {
        eprintln!("S6: /usr/bin/script (util-linux) is missing; the console step is left out");
    }
    let steps: Vec<&Step> = STEPS.iter().filter(|s| pty || !s.console).collect();
    let mut procs = Vec::new();
    for s in &steps {
        procs.push(start(rig, o, s).await?);
    }
    let floor = rig.targets()[1];
    let mut arms = vec![Arm {
        target: floor,
        req: Req::anthropic("claude-bench", "s=500", false),
    }];
    for (s, p) in steps.iter().zip(&procs) {
        arms.push(Arm {
            target: Target {
                name: s.name,
                addr: p.addr,
                pid: p.pid(),
            },
            req: Req::anthropic(s.model, "s=500", false),
        });
    }
    let mut rows = scenarios::compare(rig, o, &arms, o.rounds.min(3)).await;
    add_steps(&mut rows);
    let console = match (rows.get(rows.len().wrapping_sub(2)), rows.last()) {
        (Some(off), Some(on)) if pty => console_ab(off, on),
        _ => Value::Null,
    };
    Ok(json!({ "rows": rows, "console_ab": console }))
}

/// Each row's change from the row before it.
fn add_steps(rows: &mut [Value]) {
    let keys = [
        "c1_cpu_us_per_req",
        "c32_cpu_us_per_req",
        "c1_p99_us",
        "c1_p999_us",
    ];
    let prev: Vec<Vec<f64>> = rows
        .iter()
        .map(|r| keys.iter().map(|k| scenarios::f(r, k)).collect())
        .collect();
    for (i, row) in rows.iter_mut().enumerate().skip(1) {
        for (j, k) in keys.iter().enumerate() {
            let d = prev[i][j] - prev[i - 1][j];
            row[format!("delta_{k}")] = json!(scenarios::r1(d));
        }
    }
}

/// S9's A/B: the same config with the console off and on.
fn console_ab(off: &Value, on: &Value) -> Value {
    let g = |v: &Value, k: &str| scenarios::f(v, k);
    json!({
        "off_c1_p999_us": g(off, "c1_p999_us"), "on_c1_p999_us": g(on, "c1_p999_us"),
        "delta_c1_p999_us": scenarios::r1(g(on, "c1_p999_us") - g(off, "c1_p999_us")),
        "off_c1_p99_us": g(off, "c1_p99_us"), "on_c1_p99_us": g(on, "c1_p99_us"),
        "off_c32_rps": g(off, "c32_rps"), "on_c32_rps": g(on, "c32_rps"),
        "off_c32_cpu_us_per_req": g(off, "c32_cpu_us_per_req"), "on_c32_cpu_us_per_req": g(on, "c32_cpu_us_per_req"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_add_the_change_from_the_row_before() {
        let mut rows = vec![
            json!({"c1_cpu_us_per_req": 10.0, "c32_cpu_us_per_req": 5.0, "c1_p99_us": 100.0, "c1_p999_us": 200.0}),
            json!({"c1_cpu_us_per_req": 14.5, "c32_cpu_us_per_req": 9.0, "c1_p99_us": 90.0, "c1_p999_us": 260.0}),
        ];
        add_steps(&mut rows);
        assert!(rows[0].get("delta_c1_cpu_us_per_req").is_none());
        assert_eq!(rows[1]["delta_c1_cpu_us_per_req"], 4.5);
        assert_eq!(rows[1]["delta_c32_cpu_us_per_req"], 4.0);
        assert_eq!(rows[1]["delta_c1_p99_us"], -10.0);
        assert_eq!(rows[1]["delta_c1_p999_us"], 60.0);
    }

    #[test]
    fn consecutive_steps_differ_and_the_console_step_only_by_the_console() {
        for w in STEPS.windows(2) {
            assert!(w[0].body != w[1].body || w[0].console != w[1].console);
        }
        let n = STEPS.len();
        assert_eq!(STEPS[n - 1].body, STEPS[n - 2].body);
        assert!(STEPS[n - 1].console && !STEPS[n - 2].console);
    }
}
