//! `Proc`: the built `sluice` binary run as a child process (`--no-console`) on a config in a
//! temp dir, with its stderr captured, so tests can kill -9 it, measure its RSS and scan its
//! output for panics.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

/// A directory holding one sluice's config, database and logs; survives restarts.
#[derive(Debug)]
pub struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    /// Writes `config` (TOML) completed with loopback listeners on port 0, `[store] path` and
    /// `[log] dir` under a fresh temp dir (unless the text sets them).
    pub fn new(config: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        let home = Home { dir };
        home.write_config(config);
        home
    }

    /// Rewrites the config file (same completion as [`Home::new`]).
    pub fn write_config(&self, config: &str) {
        let mut table: toml::Table = toml::from_str(config)
            .unwrap_or_else(|e| panic!("test config is not TOML: {e}\n{config}"));
        let dir = self.dir.path();
        let mut set = |section: &str, key: &str, value: String| {
            let t = table
                .entry(section)
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            t.as_table_mut()
                .unwrap()
                .entry(key)
                .or_insert(toml::Value::String(value));
        };
        set("server", "listen", "127.0.0.1:0".into());
        set("admin", "listen", "127.0.0.1:0".into());
        set("store", "path", dir.join("sluice.db").display().to_string());
        set("log", "dir", dir.join("logs").display().to_string());
        std::fs::write(self.config(), toml::to_string(&table).unwrap()).unwrap();
    }

    /// Makes the database file read-only for the user sluice will run as: mode 0444, and when
    /// the tests run as root (who may write anyway) the directory opened up for
    /// [`Home::unprivileged_uid`].
    pub fn make_read_only(&self) {
        use std::os::unix::fs::PermissionsExt;
        let set = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(&self.db(), 0o444);
        if self.unprivileged_uid().is_some() {
            set(self.dir.path(), 0o777);
            set(&self.config(), 0o644);
            std::fs::create_dir_all(self.logs()).unwrap();
            set(&self.logs(), 0o777);
            for e in std::fs::read_dir(self.logs()).unwrap().flatten() {
                set(&e.path(), 0o666);
            }
        }
    }

    /// `nobody` (65534) when the tests run as root, so file modes apply; else `None`.
    pub fn unprivileged_uid(&self) -> Option<u32> {
        use std::os::unix::fs::MetadataExt;
        let me = std::fs::metadata("/proc/self")
            .map(|m| m.uid())
            .unwrap_or(1);
        (me == 0).then_some(65534)
    }

    /// The config file.
    pub fn config(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    /// The state database.
    pub fn db(&self) -> PathBuf {
        self.dir.path().join("sluice.db")
    }

    /// The log directory.
    pub fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    /// Everything written to the log directory so far.
    pub fn log_text(&self) -> String {
        let mut out = String::new();
        if let Ok(rd) = std::fs::read_dir(self.logs()) {
            for e in rd.flatten() {
                if let Ok(b) = std::fs::read(e.path()) {
                    out.push_str(&String::from_utf8_lossy(&b));
                }
            }
        }
        out
    }

    /// Runs `sluice <args> -c <config>` to completion (at most 30 s); returns its exit status
    /// and stderr.
    pub fn run_once(&self, args: &[&str], env: &[(&str, &str)]) -> (ExitStatus, String) {
        self.run_once_as(args, env, None)
    }

    /// [`Home::run_once`] as user `uid` (when set; needs root).
    pub fn run_once_as(
        &self,
        args: &[&str],
        env: &[(&str, &str)],
        uid: Option<u32>,
    ) -> (ExitStatus, String) {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let mut cmd = command(&self.config(), env);
        if let Some(uid) = uid {
            // The build directory may not be reachable for `uid` (e.g. under /root): run a
            // copy from this home instead.
            let copy = self.dir.path().join("sluice-bin");
            std::fs::copy(env!("CARGO_BIN_EXE_sluice"), &copy).unwrap();
            std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
            cmd = command_with(&copy, &self.config(), env);
            cmd.uid(uid).gid(uid);
        }
        cmd.args(args);
        let mut child = cmd.spawn().unwrap();
        let start = crate::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                return (status, String::from_utf8_lossy(&out.stderr).into_owned());
            }
            if start.elapsed() > Duration::from_secs(30) {
                let _ = child.kill();
                let out = child.wait_with_output().unwrap();
                panic!(
                    "sluice {args:?} did not exit within 30 s; stderr: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn command(config: &Path, env: &[(&str, &str)]) -> Command {
    command_with(Path::new(env!("CARGO_BIN_EXE_sluice")), config, env)
}

fn command_with(binary: &Path, config: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(binary);
    cmd.arg("--no-console")
        .arg("-c")
        .arg(config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .env_remove("SLUICE_CONFIG")
        .env_remove("RUST_LOG")
        .env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A running sluice child process.
#[derive(Debug)]
pub struct Proc {
    child: Child,
    /// Inference listener.
    pub listen: SocketAddr,
    /// Admin listener.
    pub admin: SocketAddr,
    stderr: Arc<Mutex<String>>,
}

impl Proc {
    /// Starts sluice on `home`'s config and waits (up to 30 s) for its "listening" line.
    pub fn start(home: &Home, env: &[(&str, &str)]) -> Proc {
        let mut child = command(&home.config(), env).spawn().unwrap();
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().unwrap();
        let buf = stderr.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some(addrs) = listening(&line) {
                    let _ = tx.send(addrs);
                }
                let mut b = buf.lock().unwrap();
                b.push_str(&line);
                b.push('\n');
            }
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok((listen, admin)) => Proc {
                child,
                listen,
                admin,
                stderr,
            },
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(50));
                panic!("sluice did not start; stderr:\n{}", stderr.lock().unwrap());
            }
        }
    }

    /// `http://<inference listener><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.listen)
    }

    /// `http://<admin listener><path>`.
    pub fn admin_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.admin)
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size now, in KiB (from `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
    }

    /// Everything the child wrote to stderr so far (logs included: `--no-console` logs there).
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Panics if the process exited or its output mentions a panic.
    pub fn assert_healthy(&mut self) {
        assert!(self.alive(), "sluice exited; stderr:\n{}", self.stderr());
        let err = self.stderr();
        assert!(!err.contains("panicked"), "sluice panicked:\n{err}");
    }

    /// kill -9, and reaps the process.
    pub fn kill9(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(50));
        self.stderr()
    }

    /// SIGTERM (graceful drain), then waits up to 15 s; returns stderr.
    pub fn stop(mut self) -> String {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.pid().to_string())
            .status();
        let start = crate::now();
        while self.child.try_wait().unwrap().is_none() {
            if start.elapsed() > Duration::from_secs(15) {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(50));
        self.stderr()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Parses "sluice: listening on http://A (admin http://B); ..." into (A, B).
fn listening(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let rest = line.split("listening on http://").nth(1)?;
    let (a, rest) = rest.split_once(' ')?;
    let b = rest.split("admin http://").nth(1)?;
    let b = b.split(')').next()?;
    Some((a.parse().ok()?, b.parse().ok()?))
}
