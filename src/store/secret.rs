//! The per-install secret credential fingerprints are keyed with: 32 random bytes in a file
//! beside the database, created with mode 0600 on first use. The store owns the files next to
//! its database; the core only asks for the secret (`core::resilience::credentials`).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use ring::rand::{SecureRandom, SystemRandom};

/// The per-install secret's file name, in the database's directory.
pub const SECRET_FILE: &str = "credential-fingerprint.key";

/// Where the per-install secret lives for the database at `db`.
pub fn secret_path(db: &Path) -> PathBuf {
    db.parent()
        .map_or_else(|| PathBuf::from(SECRET_FILE), |d| d.join(SECRET_FILE))
}

/// Reads the per-install secret at `path`, creating it (32 random bytes, mode 0600) when
/// missing. A file shorter than 32 bytes is an error (never silently replaced: that would
/// clear every terminal state).
pub fn install_secret(path: &Path) -> std::io::Result<Vec<u8>> {
    match std::fs::File::open(path) {
        Ok(mut f) => {
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)?;
            if buf.len() < 32 {
                return Err(std::io::Error::other(format!(
                    "{} holds {} bytes, expected 32; delete it to make a new one (terminal connection states will be kept only if credentials are unchanged after that)",
                    path.display(),
                    buf.len()
                )));
            }
            Ok(buf)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => create_secret(path),
        Err(e) => Err(e),
    }
}

fn create_secret(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut secret = vec![0u8; 32];
    SystemRandom::new()
        .fill(&mut secret)
        .map_err(|_| std::io::Error::other("the system random source failed"))?;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(&secret)?;
    f.sync_all()?;
    Ok(secret)
}
