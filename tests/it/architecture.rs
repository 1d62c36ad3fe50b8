//! The layering rules, checked on the source tree: `src/policy/` is pure (no tokio, hyper,
//! rusqlite, ratatui or crossterm, never reads time), `src/console/` reaches live state only
//! through snapshots and `Control` (never the proxy or the store), and nothing outside
//! `src/clock.rs` reads the time (`Instant::now`, `SystemTime::now`, or calling
//! `SystemClock`'s `now` / `wall` directly instead of the injected clock).
//!
//! Test code (`tests.rs`, `*_tests.rs`, files under a `tests/` folder, and everything after a
//! `#[cfg(test)]` line) is exempt: tests anchor manual clocks at real time.

use std::path::{Path, PathBuf};

/// Files allowed to read time directly besides `src/clock.rs`. Empty: every other file takes
/// the injected clock. A new entry is a known debt and must name why.
const TIME_ALLOW_LIST: &[&str] = &[];

const TIME_READS: &[&str] = &[
    "Instant::now(",
    "SystemTime::now(",
    "SystemClock.now(",
    "SystemClock.wall(",
    "SystemClock::now(",
    "SystemClock::wall(",
];

const POLICY_FORBIDDEN: &[&str] = &[
    "tokio::",
    "use tokio",
    "hyper",
    "rusqlite",
    "ratatui",
    "crossterm",
    "SystemClock",
];

const CONSOLE_FORBIDDEN: &[&str] = &[
    "crate::proxy",
    "crate::store",
    "rusqlite",
    "hyper::",
    "use hyper",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_test_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    name == "tests.rs" || name.ends_with("_tests.rs") || rel.contains("/tests/")
}

/// `(line number, code)` of the non-test, non-comment lines of a source file.
fn code_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let code = line.split("//").next().unwrap_or("").to_string();
        out.push((i + 1, code));
    }
    out
}

/// Every `(file, line, needle)` in `src/` (relative paths) whose code contains a needle,
/// restricted to files for which `applies` holds.
fn violations(applies: impl Fn(&str) -> bool, needles: &[&str]) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut found = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if is_test_file(&rel) || !applies(&rel) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (n, code) in code_lines(&text) {
            for needle in needles {
                if code.contains(needle) {
                    found.push(format!("{rel}:{n}: `{needle}` in `{}`", code.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn policy_is_pure() {
    let v = violations(|f| f.starts_with("src/policy/"), POLICY_FORBIDDEN);
    assert!(
        v.is_empty(),
        "src/policy/ must stay pure:\n{}",
        v.join("\n")
    );
    let v = violations(|f| f.starts_with("src/policy/"), TIME_READS);
    assert!(
        v.is_empty(),
        "src/policy/ never reads time:\n{}",
        v.join("\n")
    );
}

#[test]
fn console_reaches_state_only_through_snapshots_and_control() {
    let v = violations(|f| f.starts_with("src/console/"), CONSOLE_FORBIDDEN);
    assert!(
        v.is_empty(),
        "src/console/ must not reach into the proxy or the store:\n{}",
        v.join("\n")
    );
}

#[test]
fn only_the_clock_reads_time() {
    let v = violations(
        |f| f != "src/clock.rs" && !TIME_ALLOW_LIST.contains(&f),
        TIME_READS,
    );
    assert!(
        v.is_empty(),
        "read time through the injected `Clock` instead:\n{}",
        v.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_look_for() {
    // The scanner itself: a needle in code is found, in a comment or a test module it is not.
    let text = "use tokio::sync;\n// tokio:: in a comment\nfn f() {}\n#[cfg(test)]\nmod t { use tokio::x; }\n";
    let lines = code_lines(text);
    let hits: Vec<usize> = lines
        .iter()
        .filter(|(_, c)| c.contains("tokio::"))
        .map(|(n, _)| *n)
        .collect();
    assert_eq!(hits, vec![1]);
    assert!(is_test_file("src/policy/breaker/tests.rs"));
    assert!(is_test_file("src/console/app_tests.rs"));
    assert!(!is_test_file("src/policy/breaker.rs"));
    // The allow-listed files really still read time (so the list cannot go stale silently).
    let stale: Vec<&&str> = TIME_ALLOW_LIST
        .iter()
        .filter(|f| violations(|x| x == **f, TIME_READS).is_empty())
        .collect();
    assert!(
        stale.is_empty(),
        "no longer reads time, remove from TIME_ALLOW_LIST: {stale:?}"
    );
}

#[test]
fn operator_doors_reach_the_core_only_through_control_methods() {
    // The console and the admin API act through named `Control` methods; only the core itself,
    // the request path (src/proxy/) and the wiring (src/app.rs) hold a `Core`.
    let v = violations(
        |f| !f.starts_with("src/core/") && !f.starts_with("src/proxy/") && f != "src/app.rs",
        &[".core()"],
    );
    assert!(
        v.is_empty(),
        "use a named `Control` method instead of `.core()`:\n{}",
        v.join("\n")
    );
    // And `Control` offers no way around its methods.
    let v = violations(|f| f == "src/core/control.rs", &["fn core("]);
    assert!(
        v.is_empty(),
        "`Control` must not hand out its `Core`:\n{}",
        v.join("\n")
    );
}
