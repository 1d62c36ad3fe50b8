//! The processes under test: the mock, the floor proxy and sluice, each a child process bound
//! to 127.0.0.1, optionally pinned (Mode A: servers under test on CPU 1 with one runtime
//! worker, the mock and the rig on CPU 0). Children are killed when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
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
}

impl Proc {
    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
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

/// Starts this binary's `mock` subcommand.
pub async fn mock(place: Placement) -> std::io::Result<Proc> {
    let exe = std::env::current_exe()?;
    let addr = free_addr()?;
    let mut cmd = command(&exe, (place == Placement::Pinned).then_some("0"));
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
    let p = Proc { addr, admin, child };
    wait_tcp(admin.unwrap_or(addr), Duration::from_secs(20)).await?;
    wait_tcp(addr, Duration::from_secs(5)).await?;
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

/// The generated config: providers `mock-a` (anthropic) and `mock-o` (openai) on `upstream`,
/// plus `bad` (anthropic, local profile) behind the combo `broken` for the fast-fail scenario.
pub fn sluice_config(
    dir: &Path,
    listen: SocketAddr,
    admin: SocketAddr,
    upstream: SocketAddr,
) -> String {
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
[routing]
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
"#
    )
}

/// Starts sluice headless on a fresh config and state directory under `work`.
pub async fn sluice(place: Placement, upstream: SocketAddr, work: &Path) -> std::io::Result<Proc> {
    let dir = work.join(format!("sluice-{}", free_addr()?.port()));
    std::fs::create_dir_all(&dir)?;
    let (listen, admin) = (free_addr()?, free_addr()?);
    let cfg = dir.join("config.toml");
    std::fs::write(&cfg, sluice_config(&dir, listen, admin, upstream))?;
    let mut cmd = command(&sluice_bin(), (place == Placement::Pinned).then_some("1"));
    cmd.arg("--config").arg(&cfg).arg("--no-console");
    if place == Placement::Pinned {
        cmd.env("TOKIO_WORKER_THREADS", "1");
    }
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
