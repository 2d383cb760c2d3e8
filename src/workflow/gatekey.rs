//! Where the gate key lives: outside the repository and every worktree, in this clone's gate
//! key directory, `$XDG_DATA_HOME/atelier/gate/<clone>/` (default
//! `~/.local/share/atelier/gate/<clone>/`), where `<clone>` is derived from the clone's
//! canonical path (as the witness memory is). The directory is 0700, the key 0600, and a
//! `repository` file beside the key names the clone, so a person can tell the directories
//! apart (and move one when they move a clone). `[gate] key = "/absolute/path"` keeps the key
//! elsewhere.
//!
//! Older versions kept the key in `.atelier/gate_key` (or where a relative `[gate] key` said,
//! under `.atelier/`); `migrate` moves it out — written to the new place and fsynced before the
//! old file is removed, never overwriting a different key.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::error::{Error, Result};
use crate::config::Config;

/// The data directory atelier keeps gate keys under, from the environment.
fn data_home() -> Option<PathBuf> {
    std::env::var_os("XDG_DATA_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/share"))
        })
}

/// This clone's gate key directory under `data_home`.
pub fn directory_in(data_home: &Path, root: &Path) -> PathBuf {
    let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let id = hex::encode(&Sha256::digest(canonical.to_string_lossy().as_bytes())[..16]);
    data_home.join("atelier").join("gate").join(id)
}

/// Where the gate key of the clone at `root` is kept: `[gate] key` when it is absolute, else
/// the clone's gate key directory.
pub fn location(root: &Path, config: &Config) -> Result<PathBuf> {
    if let Some(k) = config.gate.key.as_ref().filter(|k| k.is_absolute()) {
        return Ok(k.clone());
    }
    let data = data_home().ok_or_else(|| {
        Error::input(
            "neither XDG_DATA_HOME nor HOME is set, so the gate key has no home: set HOME, or `[gate] key = \"/an/absolute/path\"` in atelier.toml",
        )
    })?;
    Ok(directory_in(&data, root).join("gate_key"))
}

/// Where older versions kept the key: `.atelier/gate_key`, or a relative `[gate] key`.
pub fn legacy(root: &Path, config: &Config) -> PathBuf {
    match config.gate.key.as_ref().filter(|k| k.is_relative()) {
        Some(k) => root.join(k),
        None => root.join(".atelier/gate_key"),
    }
}

/// A key moved out of the repository.
#[derive(Debug, Clone)]
pub struct Migrated {
    pub from: PathBuf,
    pub to: PathBuf,
}

/// Moves a key found where older versions kept it to `location`, if there is one there. A
/// different key already at the new place is an error (nothing is moved or removed); the same
/// key there means only the old copy is removed.
pub fn migrate(root: &Path, config: &Config) -> Result<Option<Migrated>> {
    let from = legacy(root, config);
    let Ok(bytes) = std::fs::read(&from) else {
        return Ok(None);
    };
    let to = location(root, config)?;
    if to == from {
        return Ok(None);
    }
    match std::fs::read(&to) {
        Ok(existing) if existing == bytes => {}
        Ok(_) => {
            return Err(Error::input(format!(
                "two gate keys: {} (where older versions kept it) and {} differ; keep the one whose public key is policies/gate_key.pub (`ssh-keygen -y -f FILE`), delete the other, and retry",
                from.display(),
                to.display()
            )))
        }
        Err(_) => write_key(&to, &bytes, root)?,
    }
    std::fs::remove_file(&from)
        .map_err(|e| Error::input(format!("removing {}: {e}", from.display())))?;
    let _ = std::fs::remove_file(from.with_extension("pub"));
    Ok(Some(Migrated { from, to }))
}

/// Writes key bytes to `to` (mode 0600, in a 0700 directory, fsynced, never over an existing
/// file), with the `repository` note beside it.
pub fn write_key(to: &Path, bytes: &[u8], root: &Path) -> Result<()> {
    let dir = to
        .parent()
        .ok_or_else(|| Error::input(format!("{} has no directory", to.display())))?;
    create_private_dir(dir)?;
    let note = format!(
        "The gate key of the atelier clone at {}\n(back up gate_key; `atelier init` there prints its fingerprint)\n",
        std::fs::canonicalize(root)
            .unwrap_or_else(|_| root.to_path_buf())
            .display()
    );
    crate::fsutil::atomic_write(&dir.join("repository"), note.as_bytes())?;
    use std::io::Write;
    let failed = |e: &dyn std::fmt::Display| Error::input(format!("writing {}: {e}", to.display()));
    // A temporary file of our own (mode 0600), fsynced, then linked into place: linking fails
    // rather than replace a key that appeared meanwhile.
    let mut tmp = tempfile::Builder::new()
        .prefix(".gate_key.")
        .tempfile_in(dir)
        .map_err(|e| failed(&e))?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| failed(&e))?;
    tmp.persist_noclobber(to).map_err(|e| failed(&e.error))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Creates `dir` (and its parents) with mode 0700 for the last part.
pub fn create_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::input(format!("creating {}: {e}", parent.display())))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::input(format!("restricting {}: {e}", dir.display())))
        }
        Err(e) => Err(Error::input(format!("creating {}: {e}", dir.display()))),
    }
}
