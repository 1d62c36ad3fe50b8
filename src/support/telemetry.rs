//! Tracing setup: daily-rolled log files through a non-blocking writer, never the terminal
//! the console draws on. `--no-console` also logs to stderr.

use std::path::Path;

use tracing_appender::non_blocking::WorkerGuard;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// Lines the non-blocking log writer queues before it drops new ones (lossy, so a log flood
/// never blocks a request). The crate's default of 128,000 preallocates and touches about
/// 4 MiB at startup, a fifth of sluice's idle RSS; 8,192 lines (256 KiB) still absorb a burst
/// of warnings between two writes of the log thread.
const BUFFERED_LINES: usize = 8_192;

/// Keeps the log writer alive; drop it last (flushes buffered lines).
pub struct TelemetryGuard {
    _file: WorkerGuard,
}

/// Why logging could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log directory could not be created or a file could not be opened.
    #[error("{dir}: cannot write logs: {message}; set [log] dir to a writable directory")]
    Dir {
        /// The log directory.
        dir: String,
        /// The underlying error.
        message: String,
    },
}

/// Installs the global subscriber: `dir/sluice.YYYY-MM-DD.log` (daily, 14 files kept) and,
/// when `stderr` is true, human-readable lines on stderr. `level` is an `EnvFilter` directive;
/// `RUST_LOG` overrides it.
pub fn init(dir: &Path, level: &str, stderr: bool) -> Result<TelemetryGuard, TelemetryError> {
    let err = |e: &dyn std::fmt::Display| TelemetryError::Dir {
        dir: dir.display().to_string(),
        message: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| err(&e))?;
    let appender = tracing_appender::rolling::RollingFileAppender::builder()
        .rotation(tracing_appender::rolling::Rotation::DAILY)
        .filename_prefix("sluice")
        .filename_suffix("log")
        .max_log_files(14)
        .build(dir)
        .map_err(|e| err(&e))?;
    let (file_writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(BUFFERED_LINES)
        .lossy(true)
        .finish(appender);
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(level));
    let file_layer = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(file_writer);
    let stderr_layer = stderr.then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_writer(std::io::stderr)
    });
    // A second init (tests) keeps the first subscriber; that is fine.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(file_layer)
        .with(stderr_layer)
        .try_init();
    Ok(TelemetryGuard { _file: guard })
}
