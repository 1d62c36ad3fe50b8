//! S5, state scaling: the same request path with 1 provider × 1 model and with up to 50
//! providers × 200 models (one combo each, the requested one chosen at random per request)
//! and up to 10,000 active model lockouts on other models. Every size runs as its own sluice
//! process; all are measured interleaved, and CPU per request is reported as a ratio to the
//! 1 × 1 case (goal: at most 10 % more). The 10,000-lockout process also answers requests
//! for locked models: the lockout fast-fail, with no upstream request.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::load::{self, Req};
use crate::scenarios::{self, Arm, Opts, Rig, Target};
use crate::targets::{self, Proc, Spec};

/// One state size under test.
struct Scale {
    name: &'static str,
    providers: usize,
    models: usize,
    locked: usize,
}

const SCALES: [Scale; 6] = [
    Scale {
        name: "1×1",
        providers: 1,
        models: 1,
        locked: 0,
    },
    Scale {
        name: "5×20, 100 locked",
        providers: 5,
        models: 20,
        locked: 100,
    },
    Scale {
        name: "20×50",
        providers: 20,
        models: 50,
        locked: 0,
    },
    Scale {
        name: "50×200",
        providers: 50,
        models: 200,
        locked: 0,
    },
    Scale {
        name: "50×200, 100 locked",
        providers: 50,
        models: 200,
        locked: 100,
    },
    Scale {
        name: "50×200, 10k locked",
        providers: 50,
        models: 200,
        locked: 10_000,
    },
];

/// The combo names requests choose from: `m<provider>-<model>`.
fn served(s: &Scale) -> Vec<String> {
    (0..s.providers)
        .flat_map(|p| (0..s.models).map(move |m| format!("m{p}-{m}")))
        .collect()
}

/// The combo names whose models get locked: `x<k>`.
fn to_lock(s: &Scale) -> Vec<String> {
    (0..s.locked).map(|k| format!("x{k}")).collect()
}

/// The config body: lockout mode on (403 locks a model for an hour), one anthropic provider
/// per `p<i>` with one connection, a combo per served model and per model to lock.
fn body(s: &Scale) -> String {
    let mut b = String::from(
        r#"[routing]
default_provider = ["p0"]

[resilience.model_lockout]
enabled = true
error_codes = [403]
base_cooldown = "1h"
max_cooldown = "1h"
"#,
    );
    for p in 0..s.providers {
        b += &format!(
            "\n[[providers]]\nid = \"p{p}\"\ndialect = \"anthropic\"\nbase_url = \"http://{{upstream}}\"\n  [[providers.connections]]\n  id = \"p{p}c1\"\n  auth = \"passthrough\"\n"
        );
    }
    for p in 0..s.providers {
        for m in 0..s.models {
            b += &format!("\n[[combos]]\nname = \"m{p}-{m}\"\ntargets = [\"p{p}/claude-{m}\"]\n");
        }
    }
    for k in 0..s.locked {
        let p = k % s.providers.max(1);
        b += &format!("\n[[combos]]\nname = \"x{k}\"\ntargets = [\"p{p}/claude-locked-{k}\"]\n");
    }
    b
}

/// A started size: its process, how long it took to start, and the lockouts it holds.
struct Started {
    proc: Proc,
    start_ms: f64,
    lock_ms: f64,
}

async fn start(rig: &Rig, o: &Opts, s: &Scale) -> std::io::Result<Started> {
    let spec = Spec {
        body: body(s),
        ..Spec::default()
    };
    let t0 = Instant::now();
    let proc = targets::sluice_with(o.place, rig.mock.addr, &o.work, &spec).await?;
    let start_ms = t0.elapsed().as_secs_f64() * 1e3;
    let t1 = Instant::now();
    if s.locked > 0 {
        let mut req = Req::anthropic_any(&to_lock(s), "x=403");
        req.in_order = true;
        req.expect_ok = false;
        let _ = load::closed_loop(
            proc.addr,
            &req,
            8,
            Duration::from_secs(120),
            s.locked as u64,
        )
        .await;
    }
    Ok(Started {
        proc,
        start_ms,
        lock_ms: t1.elapsed().as_secs_f64() * 1e3,
    })
}

/// What `/api/snapshot` costs at this size (the console and admin clients read it; it is off
/// the request path) and how many lockouts it lists.
async fn snapshot_cost(p: &Proc) -> Value {
    let Some(admin) = p.admin else {
        return Value::Null;
    };
    let t0 = Instant::now();
    let snap = scenarios::get_json(admin, "/api/snapshot").await;
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    let bytes = serde_json::to_string(&snap).map_or(0, |t| t.len());
    let lockouts = snap["lockouts"].as_array().map_or(0, Vec::len);
    json!({ "snapshot_ms": scenarios::r1(ms), "snapshot_kib": scenarios::r1(bytes as f64 / 1024.0), "lockouts": lockouts })
}

/// S5: every size of `SCALES`, measured interleaved; plus the lockout fast-fail at 10,000.
pub async fn s5(rig: &Rig, o: &Opts) -> std::io::Result<Value> {
    let mut started = Vec::new();
    for s in &SCALES {
        started.push(start(rig, o, s).await?);
    }
    let arms: Vec<Arm> = SCALES
        .iter()
        .zip(&started)
        .map(|(s, st)| Arm {
            target: Target {
                name: s.name,
                addr: st.proc.addr,
                pid: st.proc.pid(),
            },
            req: Req::anthropic_any(&served(s), "s=500"),
        })
        .collect();
    let mut rows = scenarios::compare(rig, o, &arms, o.rounds.min(3)).await;
    for ((row, s), st) in rows.iter_mut().zip(&SCALES).zip(&started) {
        row["providers"] = json!(s.providers);
        row["models"] = json!(s.providers * s.models);
        row["locked"] = json!(s.locked);
        row["start_ms"] = json!(scenarios::r1(st.start_ms));
        row["lock_setup_ms"] = json!(scenarios::r1(st.lock_ms));
        if let (Some(row), Value::Object(snap)) =
            (row.as_object_mut(), snapshot_cost(&st.proc).await)
        {
            row.extend(snap);
        }
    }
    let fast_fail = match (SCALES.last(), started.last()) {
        (Some(s), Some(st)) if s.locked > 0 => locked_fast_fail(rig, o, s, &st.proc).await,
        _ => Value::Null,
    };
    Ok(json!({ "rows": rows, "lockout_fast_fail": fast_fail }))
}

/// Requests for locked models at c=1 on the 10,000-lockout process, against direct c=1 p50;
/// the mock's request counter shows none reached the upstream.
async fn locked_fast_fail(rig: &Rig, o: &Opts, s: &Scale, p: &Proc) -> Value {
    let [d, _, _] = rig.targets();
    let ok = Req::anthropic("claude-bench", "s=500", false);
    let direct = scenarios::window(rig, d, &ok, 1, o.dur()).await;
    let mut req = Req::anthropic_any(&to_lock(s), "x=403");
    req.expect_ok = false;
    let t = Target {
        name: "locked",
        addr: p.addr,
        pid: p.pid(),
    };
    let up = |v: Value| v["requests"].as_u64().unwrap_or(0);
    let up0 = up(scenarios::get_json(rig.mock.addr, "/stats").await);
    let w = scenarios::window(rig, t, &req, 1, o.dur()).await;
    let up1 = up(scenarios::get_json(rig.mock.addr, "/stats").await);
    let same_cpu = scenarios::direct_on_proxy_cpu(rig, o).await;
    let mut v = scenarios::fast_fail_baselines(scenarios::f(&direct, "p50_us"), same_cpu);
    scenarios::merge(
        &mut v,
        json!({
            "fast_fail_p50_us": scenarios::f(&w, "p50_us"),
            "fast_fail_p99_us": scenarios::f(&w, "p99_us"), "requests": scenarios::f(&w, "requests"),
            "upstream_requests_during": up1.saturating_sub(up0),
        }),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_names_every_provider_served_and_locked_model() {
        let s = Scale {
            name: "t",
            providers: 3,
            models: 2,
            locked: 4,
        };
        let b = body(&s);
        assert_eq!(b.matches("[[providers]]").count(), 3);
        assert_eq!(b.matches("[[combos]]").count(), 3 * 2 + 4);
        assert!(b.contains("name = \"m2-1\"\ntargets = [\"p2/claude-1\"]"));
        assert!(b.contains("name = \"x3\"\ntargets = [\"p0/claude-locked-3\"]"));
        assert_eq!(served(&s).len(), 6);
        assert_eq!(to_lock(&s), ["x0", "x1", "x2", "x3"]);
    }
}
