//! Durable file writes, the repository-wide lock, and where this machine keeps Atelier's own
//! state (`machine_dir`).
//!
//! Every file Atelier records is written to a temporary file in the same directory, fsynced and
//! renamed over the target, so a crash leaves the old or the new content, never half of one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A file operation that failed, saying which file and what was being done.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error("{what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is held by another command{waited}: nothing was done; find the command holding it (`fuser {path}`) and let it finish or stop it", waited = waited_for(*.secs))]
    LockHeld { path: String, secs: u64 },
}

/// Where this process keeps its machine state instead of the XDG directories, once set.
static MACHINE_ROOT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Keeps this process's machine state (gate keys, audit memory) under `root` rather than the
/// user's XDG directories: for `atelier demo`, whose repositories live in a directory of their
/// own and must leave nothing behind when it is deleted. Set once, before anything is read.
pub fn keep_machine_state_in(root: PathBuf) {
    let _ = MACHINE_ROOT.set(root);
}

/// A machine directory: `$VAR` when set and absolute, else `~/<under_home>`
/// (`XDG_STATE_HOME`, `.local/state`); under [`keep_machine_state_in`]'s root when set.
pub fn machine_dir(var: &str, under_home: &str) -> Option<PathBuf> {
    if let Some(root) = MACHINE_ROOT.get() {
        return Some(root.join(under_home));
    }
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(under_home))
        })
}

/// How long a lock was waited for, as part of a sentence (nothing when it was only tried).
fn waited_for(secs: u64) -> String {
    if secs == 0 {
        String::new()
    } else {
        format!(" (waited {secs}s)")
    }
}

impl crate::errors::Classify for FsError {
    fn kind(&self) -> crate::errors::Kind {
        crate::errors::Kind::Environment
    }
}

type Result<T> = std::result::Result<T, FsError>;

/// `.with_context()` for io results, as an [`FsError`].
trait Context<T> {
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T>;
}

impl<T> Context<T> for std::io::Result<T> {
    fn with_context(self, what: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|source| FsError::Io {
            what: what(),
            source,
        })
    }
}

/// Writes `bytes` to `path` atomically (temp file, fsync, rename, fsync the directory).
/// The bytes of `path` when it is a regular file of at most `max` bytes: `None` for a missing
/// file, a link (not followed), a FIFO or device (opened without blocking, never read), or a
/// larger file. For files in `.atelier/` that another process leaves for this one (a control
/// request, a live status), where a worker that escaped containment could plant anything.
pub fn read_small_file(path: &Path, max: u64) -> Option<Vec<u8>> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    f.take(max + 1).read_to_end(&mut bytes).ok()?;
    (bytes.len() as u64 <= max).then_some(bytes)
}

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
    fn open(path: &Path) -> Result<File> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)
                .with_context(|| format!("creating directory {}", dir.display()))?;
        }
        OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .with_context(|| format!("opening lock file {}", path.display()))
    }

    /// Blocks until the lock at `path` is held.
    pub fn acquire(path: &Path) -> Result<Lock> {
        let file = Lock::open(path)?;
        file.lock()
            .with_context(|| format!("locking {}", path.display()))?;
        Ok(Lock {
            _file: file,
            path: path.to_path_buf(),
        })
    }

    /// Waits at most `limit` for the lock at `path` (for a server, which must not wait on a
    /// stuck holder for ever); calls `waiting` once if it has to wait at all.
    pub fn acquire_within(
        path: &Path,
        limit: std::time::Duration,
        waiting: impl FnOnce(),
    ) -> Result<Lock> {
        const STEP: std::time::Duration = std::time::Duration::from_millis(100);
        let file = Lock::open(path)?;
        let mut waited = std::time::Duration::ZERO;
        let mut waiting = Some(waiting);
        loop {
            match file.try_lock() {
                Ok(()) => {
                    return Ok(Lock {
                        _file: file,
                        path: path.to_path_buf(),
                    })
                }
                Err(fs::TryLockError::WouldBlock) if waited < limit => {
                    if let Some(w) = waiting.take() {
                        w();
                    }
                    std::thread::sleep(STEP);
                    waited += STEP;
                }
                Err(fs::TryLockError::WouldBlock) => {
                    return Err(FsError::LockHeld {
                        path: path.display().to_string(),
                        secs: limit.as_secs(),
                    })
                }
                Err(fs::TryLockError::Error(e)) => {
                    return Err(e).with_context(|| format!("locking {}", path.display()))
                }
            }
        }
    }
}
