//! Installs a pinned client (an npm CLI or pip packages) once under `target/<dir>/` for an
//! end-to-end test (an in-process mutex plus a lock file keep parallel test runs from
//! installing it twice), and runs a client process with a time bound.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::Duration;

const POLL: Duration = Duration::from_millis(100);

/// `npm install`s `pkg` (e.g. `@openai/codex@0.169.0`) under `target/<dir>/` unless
/// `target/<dir>/<bin>` (a path under the install prefix) exists; returns that path.
pub fn ensure(dir: &str, pkg: &str, bin: &str) -> PathBuf {
    ensure_with(dir, bin, pkg, |prefix| {
        let mut c = Command::new("npm");
        c.args(["install", "--prefix"])
            .arg(prefix)
            .args(["--no-audit", "--no-fund", pkg]);
        c
    })
}

/// `pip install --target`s `pkgs` (pinned, e.g. `anthropic==2.15.0`) under `target/<dir>/`
/// unless `target/<dir>/<marker>` exists; returns the install dir (for `PYTHONPATH`).
pub fn ensure_pip(dir: &str, pkgs: &[&str], marker: &str) -> PathBuf {
    let what = pkgs.join(" ");
    ensure_with(dir, marker, &what, |prefix| {
        let mut c = Command::new("python3");
        c.args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--target",
        ])
        .arg(prefix)
        .args(pkgs);
        c
    });
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(dir)
}

/// Creates a virtualenv `target/<dir>/venv/` with the machine's `python3 -m venv` and
/// pip-installs `pkgs` (pinned, e.g. `aider-chat==0.86.2`) into it, unless
/// `target/<dir>/venv/<marker>` (e.g. `bin/aider`) exists; returns that path.
pub fn ensure_venv(dir: &str, pkgs: &[&str], marker: &str) -> PathBuf {
    let what = pkgs.join(" ");
    // One command for the lock holder: create the venv (a clear hint when the `venv`
    // module or its `ensurepip` is missing, as on Debian without python3-venv), then pip.
    let script = r#"venv="$1"; shift
python3 -m venv "$venv" || {
  echo "python3 -m venv failed: python3 needs its venv module and ensurepip (on Debian/Ubuntu: apt-get install python3-venv)" >&2
  exit 1
}
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@""#;
    ensure_with(dir, &format!("venv/{marker}"), &what, |prefix| {
        let mut c = Command::new("sh");
        c.args(["-c", script, "sh"])
            .arg(prefix.join("venv"))
            .args(pkgs);
        c
    })
}

/// Installs with `install(prefix)` into `target/<dir>/` unless `target/<dir>/<bin>` exists
/// (`what` names it in messages); returns that path. One installer at a time, across threads
/// and processes.
fn ensure_with(
    dir: &str,
    bin: &str,
    what: &str,
    install: impl FnOnce(&Path) -> Command,
) -> PathBuf {
    static IN_PROCESS: Mutex<()> = Mutex::new(());
    let _guard = IN_PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join(dir);
    let want = prefix.join(bin);
    if want.exists() {
        return want;
    }
    std::fs::create_dir_all(&prefix).unwrap();
    let lock = prefix.join(".install.lock");
    let mut owned = false;
    for _ in 0..(300_000 / POLL.as_millis() as u64) {
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&lock)
        {
            Ok(_) => {
                owned = true;
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                if want.exists() {
                    return want;
                }
                std::thread::sleep(POLL);
            }
            Err(e) => panic!("cannot create {}: {e}", lock.display()),
        }
    }
    if !owned {
        eprintln!("{} looks stale (5 min); installing anyway", lock.display());
    }
    let status = install(&prefix).stdin(Stdio::null()).status();
    let _ = std::fs::remove_file(&lock);
    match status {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            panic!(
                "installing {what}: the installer is not on PATH (npm needs Node.js >= 18; pip needs python3)"
            )
        }
        Err(e) => panic!("cannot run the installer for {what}: {e}"),
        Ok(s) if !s.success() => panic!("installing {what} failed ({s}); see its output above"),
        Ok(_) => {}
    }
    assert!(
        want.exists(),
        "npm install finished but {} is missing",
        want.display()
    );
    want
}

/// How a bounded client run ended.
#[derive(Debug)]
pub struct Finished {
    /// Its exit status (`None` if it could not be waited for).
    pub status: Option<ExitStatus>,
    /// It was still running at the bound and was killed.
    pub timed_out: bool,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

impl Finished {
    /// Exited 0 within the bound.
    pub fn success(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }
}

/// Waits for `child` (spawned with piped stdout and stderr) at most `timeout`, killing it
/// then; drains both pipes meanwhile so a chatty client never blocks.
pub fn wait_bounded(mut child: Child, timeout: Duration) -> Finished {
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = child.stdout.take().map(|p| drain(Box::new(p)));
    let err = child.stderr.take().map(|p| drain(Box::new(p)));
    let mut status = None;
    for _ in 0..(timeout.as_millis() / POLL.as_millis()) {
        if let Ok(Some(s)) = child.try_wait() {
            status = Some(s);
            break;
        }
        std::thread::sleep(POLL);
    }
    let timed_out = status.is_none();
    if timed_out {
        let _ = child.kill();
        status = child.wait().ok();
    }
    let text = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    Finished {
        status,
        timed_out,
        stdout: text(out),
        stderr: text(err),
    }
}

/// The version the npm registry serves today as `pkg`'s `latest` (`npm view PKG version`),
/// for `SLUICE_CLIENTS=latest` runs. Panics with a clear message when npm cannot answer.
pub fn npm_latest(pkg: &str) -> String {
    let out = Command::new("npm")
        .args(["view", pkg, "version"])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("SLUICE_CLIENTS=latest: cannot run `npm view {pkg}`: {e}"));
    let v = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success() && !v.is_empty(),
        "SLUICE_CLIENTS=latest: `npm view {pkg} version` failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    v
}

/// The newest version PyPI serves of `pkg` (`python3 -m pip index versions PKG`), for
/// `SLUICE_CLIENTS=latest` runs. Panics with a clear message when pip cannot answer.
pub fn pypi_latest(pkg: &str) -> String {
    let out = Command::new("python3")
        .args([
            "-m",
            "pip",
            "index",
            "versions",
            "--disable-pip-version-check",
            pkg,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("SLUICE_CLIENTS=latest: cannot run `pip index versions {pkg}`: {e}")
        });
    let text = String::from_utf8_lossy(&out.stdout);
    // First line: "aider-chat (0.86.2)".
    let v = text
        .lines()
        .next()
        .and_then(|l| l.split_once('(')?.1.split_once(')'))
        .map(|(v, _)| v.trim().to_string())
        .unwrap_or_default();
    assert!(
        out.status.success() && !v.is_empty(),
        "SLUICE_CLIENTS=latest: `pip index versions {pkg}` gave no version: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    v
}
