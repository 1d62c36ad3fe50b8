//! sluice — a local LLM proxy with provider resilience and a live terminal operator console.
//!
//! This binary is thin: it parses the command line, loads the config, sets up logging and
//! the state database, then runs [`sluice::app`] with or without the console. Module map:
//!
//! - policy: `sluice::policy` — pure decisions (candidate selection; resilience layers).
//! - core: `sluice::core` — live state, `Snapshot` publishing, `Control` (operator door).
//! - proxy: `sluice::proxy` — hyper server/client, routes, relay, dialect errors.
//! - admin: `sluice::admin` — `/livez`, `/readyz`, `/metrics`, `/api/snapshot`.
//! - store: `sluice::store` — SQLite (WAL) on one writer thread.
//! - console: `sluice::console` — ratatui panels, keymap, themes.
//! - remote: `sluice::remote` — `sluice console` attached to a running sluice.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the CLI entry point talks to the user"
)]

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use sluice::app;
use sluice::cli::{Cli, Command};
use sluice::clock::{Clock, SystemClock, unix_ms};
use sluice::config;
use sluice::console;
use sluice::store::{self, Store};

/// jemalloc instead of the system allocator: glibc keeps freed memory in per-thread arenas, so
/// RSS stayed near its peak after a burst of streams; jemalloc's background thread (enabled in
/// [`return_freed_memory`]) hands dirty pages back to the OS about 10 s after they are freed,
/// even while sluice is idle.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Turns on one jemalloc background purge thread, in the background scheduling class so its
/// wake-ups never preempt a request (a no-op where jemalloc is not used). One thread serves
/// every arena; jemalloc's default of one per CPU only adds wake-ups and stacks.
fn return_freed_memory() {
    #[cfg(not(target_env = "msvc"))]
    sluice::support::sched::spawning_background(|| {
        if let Err(e) = tikv_jemalloc_ctl::max_background_threads::write(1) {
            tracing::debug!(error = %e, "jemalloc background thread count not settable");
        }
        if let Err(e) = tikv_jemalloc_ctl::background_thread::write(true) {
            tracing::debug!(error = %e, "jemalloc background purge not available");
        }
    });
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let env_config = std::env::var("SLUICE_CONFIG").ok();
    let path = match config::discover(cli.config.as_deref(), env_config.as_deref()) {
        Ok(p) => p,
        Err(e) => return fail(&e.to_string(), 2),
    };
    if let Some(Command::Console { admin, token_env }) = &cli.command {
        return attach(&cli, &path, admin.clone(), token_env.as_deref());
    }
    if let Some(command) = cli
        .command
        .as_ref()
        .filter(|c| !matches!(c, Command::Serve))
    {
        return run_command(command, &path);
    }
    serve(&cli, &path)
}

/// `sluice` (or `sluice serve`): loads the config, sets up logging, the state database and
/// the async runtime, then runs the proxy (with the console on a terminal) until it stops.
fn serve(cli: &Cli, path: &std::path::Path) -> ExitCode {
    let cfg = match config::load(path) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string(), 2),
    };
    let keymap = match console::keymap::keymap_from_config(&cfg.console.keys) {
        Ok(k) => k,
        Err(e) => return fail(&format!("{}: {e}", path.display()), 2),
    };
    let use_console =
        !cli.headless() && std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    // The log writer thread starts here; it is background work.
    let log = sluice::support::sched::spawning_background(|| {
        sluice::support::telemetry::init(&cfg.log.dir, &cfg.log.level, !use_console)
    });
    let _log = match log {
        Ok(g) => g,
        Err(e) => return fail(&e.to_string(), 2),
    };
    return_freed_memory();
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    if cli.reset_state
        && let Err(code) = reset_state(&cfg, clock.as_ref())
    {
        return code;
    }
    let theme = match console_theme(cli, &cfg, path, use_console) {
        Ok(t) => t,
        Err(code) => return code,
    };
    let store = match Store::open(&cfg.store) {
        Ok(s) => Arc::new(s),
        Err(e) => return fail(&e.to_string(), 1),
    };
    store.enforce_retention(unix_ms(clock.wall()));
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("sluice")
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}"), 1),
    };
    let console = theme.map(|theme| console::ConsoleOptions {
        theme,
        tick: cfg.console.tick,
        readonly: cli.readonly,
        keymap,
        mouse: !cli.no_mouse,
        // The Requests panel starts with the newest rows of the request log (bounded).
        history: app::request_history(&store, sluice::snapshot::RECENT_CAP),
    });
    let code = runtime.block_on(run(cfg, clock, store, console, cli.readonly));
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    code
}

/// `--reset-state`: moves the state database aside, unless a sluice with this config is
/// running (its listeners are busy); the exit code to end with when that fails.
fn reset_state(cfg: &config::Config, clock: &dyn Clock) -> Result<(), ExitCode> {
    // Never move a database another sluice is using: its listeners would be busy.
    for (addr, key) in [
        (cfg.server.listen, "server.listen"),
        (cfg.admin.listen, "admin.listen"),
    ] {
        if addr.port() != 0 && std::net::TcpListener::bind(addr).is_err() {
            return Err(fail(
                &format!(
                    "--reset-state: {addr} ({key}) is in use; stop the sluice that is running with this config first (its database stays where it is)"
                ),
                1,
            ));
        }
    }
    match store::reset_state(&cfg.store.path, unix_ms(clock.wall())) {
        Ok(Some(moved)) => eprintln!(
            "sluice: moved the state database aside to {}",
            moved.display()
        ),
        Ok(None) => eprintln!(
            "sluice: no state database at {}; starting fresh",
            cfg.store.path.display()
        ),
        Err(e) => return Err(fail(&e.to_string(), 1)),
    }
    Ok(())
}

/// The console's theme (`--theme`, else `console.theme`) when the console runs, else `None`;
/// the exit code to end with when it cannot be loaded. An explicit `--theme` is checked even
/// headless: a typo is an error, never ignored.
fn console_theme(
    cli: &Cli,
    cfg: &config::Config,
    path: &std::path::Path,
    use_console: bool,
) -> Result<Option<console::theme::Theme>, ExitCode> {
    if !use_console && cli.theme.is_none() {
        return Ok(None);
    }
    let name = cli
        .theme
        .clone()
        .unwrap_or_else(|| cfg.console.theme.clone());
    match console::theme::load(&name, &theme_dirs(path)) {
        Ok(t) => Ok(Some(t).filter(|_| use_console)),
        Err(e) if cli.theme.is_some() => Err(fail(&e.for_flag("--theme").to_string(), 2)),
        Err(e) => Err(fail(&e.to_string(), 2)),
    }
}

/// Runs sluice on the async runtime until it stops, with the console on its own thread when
/// `console` is set; returns the exit code.
async fn run(
    cfg: config::Config,
    clock: Arc<dyn Clock>,
    store: Arc<Store>,
    console: Option<console::ConsoleOptions>,
    readonly: bool,
) -> ExitCode {
    let running = match app::start(cfg, clock.clone(), Some(store.clone())).await {
        Ok(r) => r,
        Err(e) => return fail(&e.to_string(), 1),
    };
    // Read-only covers the admin API too, so an attached console cannot change state.
    running.control.set_readonly(readonly);
    let shutdown = running.shutdown_token();
    // Signal handlers are registered here, before "listening" is printed: a signal that
    // arrives before its handler exists takes the default action and ends the process.
    tokio::spawn(signals(StopSignals::register(), shutdown.clone()));
    #[cfg(unix)]
    tokio::spawn(reload_on_hangup(hangup_signal(), running.control.clone()));
    let console_thread = console.map(|opts| spawn_console(&running, clock.clone(), opts));
    if console_thread.is_none() {
        eprintln!(
            "sluice: listening on http://{} (admin http://{}); Ctrl-C to stop",
            running.listen, running.admin_listen
        );
    }
    running.wait().await;
    store.close();
    match console_thread {
        Some(Ok(handle)) => match handle.join() {
            Ok(Ok(())) => ExitCode::SUCCESS,
            Ok(Err(e)) => fail(&format!("console error: {e}"), 1),
            Err(_) => fail("the console thread panicked; the terminal was restored", 1),
        },
        Some(Err(e)) => fail(&format!("cannot start the console thread: {e}"), 1),
        None => ExitCode::SUCCESS,
    }
}

/// Starts the console on its own thread, in the background scheduling class; sluice stops
/// when the console ends, however it ends.
fn spawn_console(
    running: &app::Running,
    clock: Arc<dyn Clock>,
    opts: console::ConsoleOptions,
) -> std::io::Result<std::thread::JoinHandle<std::io::Result<()>>> {
    let snapshots = running.core.subscribe();
    let control = running.control.clone();
    let shutdown = running.shutdown_token();
    std::thread::Builder::new()
        .name("sluice-console".into())
        .spawn(move || {
            // Rendering must never delay a request; a frame a millisecond late is not seen.
            sluice::support::sched::background_thread();
            let r = console::run(snapshots, control.clone(), clock, opts, shutdown);
            // However the console ended, sluice stops with it.
            control.request_shutdown();
            r
        })
}

/// `check`, `status` and `env`: none of them sends a request upstream, so the config is
/// loaded with secrets optional (a missing one is a warning for `check`, ignored by `env`,
/// and only the admin token matters to `status`).
fn run_command(command: &Command, path: &std::path::Path) -> ExitCode {
    let loaded = match config::load_with(path, config::SecretMode::Optional) {
        Ok(l) => l,
        Err(e) => return fail(&e.to_string(), 2),
    };
    let cfg = &loaded.config;
    match command {
        Command::Check => {
            if let Err(e) = console::keymap::keymap_from_config(&cfg.console.keys) {
                return fail(&format!("{}: {e}", path.display()), 2);
            }
            for p in &loaded.missing_secrets {
                eprintln!(
                    "{}: warning: {}: {}; {} (needed to serve, not to check)",
                    path.display(),
                    p.key,
                    p.message,
                    p.fix
                );
            }
            for p in config::advice::advice(cfg) {
                eprintln!(
                    "{}: warning: {}: {}; {}",
                    path.display(),
                    p.key,
                    p.message,
                    p.fix
                );
            }
            print!("{}", app::routing_table(cfg));
            ExitCode::SUCCESS
        }
        Command::Status => match sluice::cli::status::admin_token_ready(&loaded) {
            Ok(()) => status(cfg),
            Err(msg) => fail(&format!("{}: {msg}", path.display()), 2),
        },
        Command::Env { client } => {
            print!("{}", sluice::cli::env::render(*client, cfg));
            ExitCode::SUCCESS
        }
        Command::Log {
            since,
            status,
            model,
            provider,
            outcome,
            json,
            limit,
        } => {
            // The one place `sluice log` needs the time: where `--since` starts.
            let clock: &dyn Clock = &SystemClock;
            let now_ms = unix_ms(clock.wall());
            let query = sluice::store::history::LogQuery {
                since_unix_ms: since.map(|d| sluice::cli::log::since(now_ms, d)),
                status: *status,
                model: model.clone(),
                provider: provider.clone(),
                outcome: outcome.clone(),
                before_id: None,
                limit: *limit,
            };
            match sluice::store::history::read_request_log(&cfg.store.path, &query) {
                Ok(rows) if *json => {
                    print!("{}", sluice::cli::log::render_json(&rows));
                    ExitCode::SUCCESS
                }
                Ok(rows) => {
                    print!("{}", sluice::cli::log::render_text(&rows));
                    ExitCode::SUCCESS
                }
                Err(e) => fail(&e.to_string(), 1),
            }
        }
        // `main` runs the server itself; never dispatched here.
        Command::Serve => ExitCode::SUCCESS,
        Command::Console { .. } => fail("internal: console is handled before", 1),
    }
}

/// `sluice console`: the console attached to a running sluice. The config gives the admin
/// address, the token's variable, the theme, keys and tick (provider secrets are not needed).
fn attach(
    cli: &Cli,
    path: &std::path::Path,
    admin: Option<String>,
    token_env: Option<&str>,
) -> ExitCode {
    let loaded = match config::load_with(path, config::SecretMode::Optional) {
        Ok(l) => l,
        Err(e) => return fail(&e.to_string(), 2),
    };
    let token = match token_env {
        Some(var) => match std::env::var(var) {
            Ok(v) if !v.is_empty() => Some(config::Secret::new(v)),
            _ => {
                return fail(
                    &format!(
                        "--token-env: environment variable '{var}' is not set; export the admin token in it"
                    ),
                    2,
                );
            }
        },
        None => match sluice::cli::status::admin_token_ready(&loaded) {
            Ok(()) => loaded.config.admin.token.clone(),
            Err(msg) => return fail(&format!("{}: {msg}", path.display()), 2),
        },
    };
    let cfg = &loaded.config;
    let keymap = match console::keymap::keymap_from_config(&cfg.console.keys) {
        Ok(k) => k,
        Err(e) => return fail(&format!("{}: {e}", path.display()), 2),
    };
    let name = cli
        .theme
        .clone()
        .unwrap_or_else(|| cfg.console.theme.clone());
    let theme = match console::theme::load(&name, &theme_dirs(path)) {
        Ok(t) => t,
        Err(e) if cli.theme.is_some() => return fail(&e.for_flag("--theme").to_string(), 2),
        Err(e) => return fail(&e.to_string(), 2),
    };
    if !(std::io::stdout().is_terminal() && std::io::stdin().is_terminal()) {
        return fail(
            "console needs a terminal; use `sluice status` for a one-shot table",
            2,
        );
    }
    let opts = console::ConsoleOptions {
        theme,
        tick: cfg.console.tick,
        readonly: cli.readonly,
        keymap,
        mouse: !cli.no_mouse,
        history: Vec::new(),
    };
    let attach = sluice::remote::attach::Attach {
        admin,
        token,
        console: opts,
    };
    match sluice::remote::attach::run(cfg, attach) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e, 1),
    }
}

/// `sluice status`: one-shot tables from the running instance's admin API.
fn status(cfg: &config::Config) -> ExitCode {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(&format!("cannot start the async runtime: {e}"), 1),
    };
    match rt.block_on(sluice::cli::status::fetch(cfg)) {
        Ok(snap) => {
            print!("{}", sluice::cli::status::render(&snap));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e.to_string(), 1),
    }
}

/// Ctrl-C or SIGTERM starts the drain; a second signal exits at once.
async fn signals(mut stop: StopSignals, shutdown: tokio_util::sync::CancellationToken) {
    stop.recv().await;
    tracing::info!("signal received; draining (send again to exit now)");
    shutdown.cancel();
    stop.recv().await;
    eprintln!("sluice: second signal; exiting now");
    std::process::exit(130);
}

/// Installs the SIGHUP handler now (inside the runtime); `None` when the OS refuses.
#[cfg(unix)]
fn hangup_signal() -> Option<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    signal(SignalKind::hangup()).ok()
}

/// SIGHUP reloads the config through `Control::reload_config` (the outcome is logged).
#[cfg(unix)]
async fn reload_on_hangup(
    hup: Option<tokio::signal::unix::Signal>,
    control: sluice::core::operator::control::Control,
) {
    let Some(mut hup) = hup else {
        tracing::warn!(
            "cannot listen for SIGHUP; reload the config from the console or the admin API"
        );
        return;
    };
    while hup.recv().await.is_some() {
        let c = control.clone();
        let _ = tokio::task::spawn_blocking(move || c.reload_config()).await;
    }
}

/// The stop signals (SIGINT, and SIGTERM on Unix), registered when built so that one sent
/// right after "listening" is printed is handled, never the default action.
struct StopSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    /// Registers the handlers; must run inside the runtime.
    fn register() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            StopSignals {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
            }
        }
        #[cfg(not(unix))]
        StopSignals {}
    }

    /// Resolves at the next stop signal (never, when no handler could be registered).
    async fn recv(&mut self) {
        #[cfg(unix)]
        {
            tokio::select! {
                () = next(self.interrupt.as_mut()) => {}
                () = next(self.terminate.as_mut()) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// The next delivery of `signal`; never, when it could not be registered.
#[cfg(unix)]
async fn next(signal: Option<&mut tokio::signal::unix::Signal>) {
    match signal {
        Some(s) => {
            let _ = s.recv().await;
        }
        None => std::future::pending().await,
    }
}

/// Where themes are looked up: `themes/` beside the config file, then the XDG config dir.
fn theme_dirs(config_path: &std::path::Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(parent) = config_path.parent() {
        let base = if parent.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            parent.to_path_buf()
        };
        dirs.push(base.join("themes"));
    }
    if let Some(d) = config::project_dirs() {
        dirs.push(d.config_dir().join("themes"));
    }
    dirs
}

fn fail(msg: &str, code: u8) -> ExitCode {
    eprintln!("sluice: {msg}");
    ExitCode::from(code)
}
