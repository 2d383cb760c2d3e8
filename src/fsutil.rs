//! Durable file writes and the repository-wide lock.
//!
//! Every file Atelier records is written to a temporary file in the same directory, fsynced and
//! renamed over the target, so a crash leaves the old or the new content, never half of one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Writes `bytes` to `path` atomically (temp file, fsync, rename, fsync the directory).
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).with_context(|| format!("creating directory {}", dir.display()))?;
    let mut tmp = tempfile::Builder::new()
        .prefix(".atelier-tmp-")
        .tempfile_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    tmp.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    // Temporary files are private (0600); the result keeps the target's mode, or gets 0644.
    let mode = match std::fs::metadata(path) {
        Ok(m) => m.permissions(),
        Err(_) => {
            use std::os::unix::fs::PermissionsExt;
            std::fs::Permissions::from_mode(0o644)
        }
    };
    tmp.as_file()
        .set_permissions(mode)
        .with_context(|| format!("setting the mode of {}", path.display()))?;
    tmp.as_file()
        .sync_all()
        .with_context(|| format!("syncing {}", path.display()))?;
    tmp.persist(path)
        .map_err(|e| e.error)
        .with_context(|| format!("renaming into {}", path.display()))?;
    if let Ok(d) = File::open(dir) {
        // Directory fsync makes the rename durable; some filesystems refuse it, which is harmless.
        let _ = d.sync_all();
    }
    Ok(())
}

/// An exclusive advisory lock on a file, released when dropped or when the process dies.
pub struct Lock {
    _file: File,
    pub path: PathBuf,
}

impl Lock {
    /// Blocks until the lock at `path` is held.
    pub fn acquire(path: &Path) -> Result<Lock> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)
                .with_context(|| format!("creating directory {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening lock file {}", path.display()))?;
        file.lock()
            .with_context(|| format!("locking {}", path.display()))?;
        Ok(Lock {
            _file: file,
            path: path.to_path_buf(),
        })
    }
}
