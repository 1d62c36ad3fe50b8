//! The processes under test: the mock, the floor proxy and sluice, each a child process bound
//! to 127.0.0.1, optionally pinned (Mode A: servers under test on CPU 1 with one runtime
//! worker, the mock and the rig on CPU 0). Children are killed when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

/// How processes are placed on CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Mode A: rig and mock on CPU 0; floor and sluice on CPU 1 with one worker.
    Pinned,
    /// Mode B: nothing pinned, default runtimes.
    Free,
}

/// A running child process.
pub struct Proc {
    /// Where it listens for inference traffic.
    pub addr: SocketAddr,
    /// Admin address (sluice only).
    pub admin: Option<SocketAddr>,
    child: Child,
    /// The measured process when `child` is only a wrapper (`script` holding the console's
    /// pty): sluice itself, whose CPU and RSS the scenarios sample.
    inner: Option<u32>,
    /// The wrapper's stdin, held open so `script` never sees end of input.
    _stdin: Option<ChildStdin>,
}

impl Proc {
    /// The measured process's id.
    pub fn pid(&self) -> u32 {
        self.inner.unwrap_or_else(|| self.child.id())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(pid) = self.inner {
            let _ = Command::new("kill")
                .arg(pid.to_string())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port (bound then released).
pub fn free_addr() -> std::io::Result<SocketAddr> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    l.local_addr()
}

fn command(exe: &Path, cpu: Option<&str>) -> Command {
    match cpu {
        Some(c) if Path::new("/usr/bin/taskset").exists() => {
            let mut cmd = Command::new("taskset");
            cmd.arg("-c").arg(c).arg(exe);
            cmd
        }
        _ => Command::new(exe),
    }
}

async fn wait_tcp(addr: SocketAddr, limit: Duration) -> std::io::Result<()> {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(std::io::Error::other(format!(
        "{addr} did not start listening within {limit:?}"
    )))
}

/// Starts this binary's `mock` subcommand (in Mode A on CPU 0, with the rig).
pub async fn mock(place: Placement) -> std::io::Result<Proc> {
    mock_on(place, "0").await
}

/// Starts a `mock` on `cpu` in Mode A (unpinned in Mode B): on CPU 1 it answers from where
/// the servers under test run, so its c=1 latency is the direct baseline with their placement
/// (each request and each answer crosses between the CPUs, as they do for sluice).
pub async fn mock_on(place: Placement, cpu: &str) -> std::io::Result<Proc> {
    let exe = std::env::current_exe()?;
    let addr = free_addr()?;
    let mut cmd = command(&exe, (place == Placement::Pinned).then_some(cpu));
    cmd.arg("mock")
        .arg("--listen")
        .arg(addr.to_string())
        .env("TOKIO_WORKER_THREADS", "1");
    spawn(cmd, addr, None).await
}

/// Starts this binary's `floor` subcommand in front of `upstream`; `delay_us` > 0 makes it a
/// shim that adds that much to every request (the guard's self-test).
pub async fn floor(place: Placement, upstream: SocketAddr, delay_us: u64) -> std::io::Result<Proc> {
    let exe = std::env::current_exe()?;
    let addr = free_addr()?;
    let mut cmd = command(&exe, (place == Placement::Pinned).then_some("1"));
    cmd.arg("floor")
        .arg("--listen")
        .arg(addr.to_string())
        .arg("--upstream")
        .arg(upstream.to_string());
    if delay_us > 0 {
        cmd.arg("--delay-us").arg(delay_us.to_string());
    }
    if place == Placement::Pinned {
        cmd.env("TOKIO_WORKER_THREADS", "1");
    }
    spawn(cmd, addr, None).await
}

async fn spawn(
    mut cmd: Command,
    addr: SocketAddr,
    admin: Option<SocketAddr>,
) -> std::io::Result<Proc> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let child = cmd.spawn()?;
    let p = Proc {
        addr,
        admin,
        child,
        inner: None,
        _stdin: None,
    };
    wait_tcp(admin.unwrap_or(addr), Duration::from_secs(60)).await?;
    wait_tcp(addr, Duration::from_secs(5)).await?;
    Ok(p)
}

/// Spawns sluice under `script`, so its console draws into a 200×60 pseudo-terminal whose
/// output goes nowhere; the returned process samples sluice itself, not the wrapper.
async fn spawn_in_pty(
    sluice: &Path,
    args: &str,
    cpu: Option<&str>,
    env: &[(String, String)],
    addr: SocketAddr,
    admin: SocketAddr,
) -> std::io::Result<Proc> {
    let script = Path::new("/usr/bin/script");
    let mut cmd = command(script, cpu);
    let inner = format!(
        "stty cols 200 rows 60 && exec '{}' {args}",
        sluice.display()
    );
    cmd.args(["-q", "-f", "-e", "-c", &inner, "/dev/null"])
        .env("TERM", "xterm-256color")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn()?;
    let stdin = child.stdin.take();
    let wrapper = child.id();
    let mut p = Proc {
        addr,
        admin: Some(admin),
        child,
        inner: None,
        _stdin: stdin,
    };
    wait_tcp(admin, Duration::from_secs(60)).await?;
    wait_tcp(addr, Duration::from_secs(5)).await?;
    let children = std::fs::read_to_string(format!("/proc/{wrapper}/task/{wrapper}/children"))?;
    p.inner = children
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok());
    if p.inner.is_none() {
        return Err(std::io::Error::other("script started no child"));
    }
    Ok(p)
}

/// The sluice binary: `$SLUICE_BIN`, else `sluice` beside this executable.
pub fn sluice_bin() -> PathBuf {
    if let Ok(p) = std::env::var("SLUICE_BIN") {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join("sluice")))
        .unwrap_or_else(|| PathBuf::from("target/release/sluice"))
}

/// Builds `target/release/sluice` when run under cargo (so one command does everything).
pub fn build_sluice() -> std::io::Result<()> {
    if std::env::var("SLUICE_BIN").is_ok() {
        return Ok(());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let st = Command::new(cargo)
        .args(["build", "--release", "-p", "sluice", "--bin", "sluice"])
        .status()?;
    if st.success() {
        Ok(())
    } else {
        Err(std::io::Error::other("cargo build of sluice failed"))
    }
}

/// The `[server]`, `[admin]`, `[store]` and `[log]` sections every sluice under test shares.
fn common_sections(dir: &Path, listen: SocketAddr, admin: SocketAddr) -> String {
    let d = dir.display();
    format!(
        r#"[server]
listen = "{listen}"
[admin]
listen = "{admin}"
[store]
path = "{d}/state.db"
[log]
dir = "{d}/logs"
level = "warn"
"#
    )
}

/// The default routing, providers and combos: `mock-a` (anthropic) and `mock-o` (openai) on
/// the mock, plus `bad` (anthropic, local profile) behind the combo `broken` for the fast-fail
/// scenario. `{upstream}` stands for the mock's address.
pub const DEFAULT_BODY: &str = r#"[routing]
default_provider = ["mock-a", "mock-o"]

[[providers]]
id = "mock-a"
dialect = "anthropic"
base_url = "http://{upstream}"
  [[providers.connections]]
  id = "a1"
  auth = "passthrough"

[[providers]]
id = "mock-o"
dialect = "openai"
base_url = "http://{upstream}"
  [[providers.connections]]
  id = "o1"
  auth = "passthrough"

[[providers]]
id = "bad"
dialect = "anthropic"
base_url = "http://{upstream}"
profile = "local"
  [[providers.connections]]
  id = "b1"
  auth = "passthrough"

[[combos]]
name = "broken"
targets = ["bad/claude-broken"]
"#;

/// What a sluice under test runs with.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Everything after the common sections (routing, providers, combos, resilience,
    /// console), with `{upstream}` standing for the mock's address.
    pub body: String,
    /// Extra environment of the process.
    pub env: Vec<(String, String)>,
    /// Run with the console drawing into a 200×60 pseudo-terminal instead of `--no-console`.
    pub console: bool,
}

impl Default for Spec {
    fn default() -> Self {
        Self {
            body: DEFAULT_BODY.to_string(),
            env: Vec::new(),
            console: false,
        }
    }
}

/// Starts sluice headless on the default config and a fresh state directory under `work`.
pub async fn sluice(place: Placement, upstream: SocketAddr, work: &Path) -> std::io::Result<Proc> {
    sluice_with(place, upstream, work, &Spec::default()).await
}

/// Starts sluice on `spec` with a fresh state directory under `work`.
pub async fn sluice_with(
    place: Placement,
    upstream: SocketAddr,
    work: &Path,
    spec: &Spec,
) -> std::io::Result<Proc> {
    let dir = work.join(format!("sluice-{}", free_addr()?.port()));
    std::fs::create_dir_all(&dir)?;
    let (listen, admin) = (free_addr()?, free_addr()?);
    let cfg = dir.join("config.toml");
    let body = spec.body.replace("{upstream}", &upstream.to_string());
    std::fs::write(&cfg, common_sections(&dir, listen, admin) + &body)?;
    let cpu = (place == Placement::Pinned).then_some("1");
    let mut env = spec.env.clone();
    if place == Placement::Pinned {
        env.push(("TOKIO_WORKER_THREADS".into(), "1".into()));
    }
    if spec.console {
        let args = format!("--config '{}'", cfg.display());
        return spawn_in_pty(&sluice_bin(), &args, cpu, &env, listen, admin).await;
    }
    let mut cmd = command(&sluice_bin(), cpu);
    cmd.arg("--config").arg(&cfg).arg("--no-console");
    cmd.envs(env);
    spawn(cmd, listen, Some(admin)).await
}

/// Pins this process (the rig) to CPU 0 in Mode A.
pub fn pin_self(place: Placement) {
    if place == Placement::Pinned {
        let _ = Command::new("taskset")
            .args(["-p", "-c", "0", &std::process::id().to_string()])
            .stdout(Stdio::null())
            .status();
    }
}
