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
    crate::fsutil::machine_dir("XDG_DATA_HOME", ".local/share")
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

/// The bytes of the key older versions left at `legacy`, when it is this repository's gate
/// key: a regular file (a link there is never followed), not tracked by git (a branch could
/// carry one), whose public key is the one the protected branch publishes (or, before
/// adoption, the working tree's `policies/gate_key.pub`). `None` when there is no file there;
/// an error naming what is wrong when there is one that is not.
pub fn legacy_key(
    repo: &git2::Repository,
    root: &Path,
    config: &Config,
) -> Result<Option<Vec<u8>>> {
    let from = legacy(root, config);
    let Ok(meta) = std::fs::symlink_metadata(&from) else {
        return Ok(None);
    };
    let refuse = |why: &str| {
        Err(Error::input(format!(
            "{} is not this repository's gate key ({why}): it was left alone and is not used; delete it once you know where it came from",
            from.display()
        )))
    };
    if !meta.file_type().is_file() {
        return refuse("not a regular file");
    }
    let rel = from
        .strip_prefix(root)
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .unwrap_or_default();
    if repo
        .index()
        .ok()
        .is_some_and(|i| i.get_path(Path::new(&rel), 0).is_some())
    {
        return refuse("git tracks it: a branch put it there");
    }
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let mut bytes = Vec::new();
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&from)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| Error::input(format!("reading {}: {e}", from.display())))?;
    let Ok(key) = crate::keys::read_signing_key_bytes(&bytes) else {
        return refuse("not an OpenSSH ed25519 private key");
    };
    let published = match crate::git::branch_tip(repo, &config.forge.branch) {
        Ok(tip) => crate::keys::published_gate_key(repo, &tip.to_string())?,
        Err(_) => None,
    }
    .or_else(|| {
        std::fs::read_to_string(root.join(crate::governance::policy::GATE_KEY_PATH))
            .ok()
            .and_then(|t| crate::keys::parse_public_key(&t))
    });
    if published != Some(key.verifying_key()) {
        return refuse(&format!(
            "its public key is not the one {} publishes",
            crate::governance::policy::GATE_KEY_PATH
        ));
    }
    Ok(Some(bytes))
}

/// A key moved out of the repository.
#[derive(Debug, Clone)]
pub struct Migrated {
    pub from: PathBuf,
    pub to: PathBuf,
}

/// Whether two paths name one file (by device and inode): `[gate] key` may spell the old place
/// another way (`..`, a symlinked folder), and removing "the old copy" would then remove the key.
fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// Moves a key found where older versions kept it to `location`, if there is one there. A
/// different key already at the new place is an error (nothing is moved or removed); the same
/// key there means only the old copy is removed.
pub fn migrate(repo: &git2::Repository, root: &Path, config: &Config) -> Result<Option<Migrated>> {
    let from = legacy(root, config);
    if legacy_key(repo, root, config)?.is_none() {
        return Ok(None);
    }
    let to = location(root, config)?;
    if to == from || same_file(&to, &from) {
        return Ok(None);
    }
    // The move deletes a file under .atelier/: only under the repository lock, as every
    // mutation. It is never waited for (read-only commands run this first, and the old place
    // keeps working): a held lock leaves the key where it is, saying so, until the next command.
    let _lock = crate::fsutil::Lock::acquire_within(
        &root.join(".atelier").join("lock"),
        std::time::Duration::ZERO,
        || {},
    )?;
    // Another command may have moved it between the look and the lock.
    let Some(bytes) = legacy_key(repo, root, config)? else {
        return Ok(None);
    };
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

/// The file that marks a recovery in progress beside the key at `key_path`: it holds the public
/// key line of the key `recover` made.
pub fn recovery_marker(key_path: &Path) -> PathBuf {
    let mut name = key_path
        .file_name()
        .map(|n| n.to_os_string())
        .unwrap_or_default();
    name.push(".recovering");
    key_path.with_file_name(name)
}

/// The public key a recovery in progress installs, if one is.
pub fn recovering(key_path: &Path) -> Option<ed25519_dalek::VerifyingKey> {
    std::fs::read_to_string(recovery_marker(key_path))
        .ok()
        .and_then(|t| crate::keys::parse_public_key(&t))
}

/// A new gate key made to replace a lost one.
#[derive(Debug, Clone)]
pub struct Recovered {
    pub path: PathBuf,
    /// Its OpenSSH public key line.
    pub public: String,
}

/// A recovery whose key was made but whose proposal was not (it goes on with that key); an
/// error when a key is there otherwise (a key you hold is rotated, never recovered).
fn interrupted(root: &Path, config: &Config) -> Result<Option<Recovered>> {
    let path = location(root, config)?;
    if let (Some(marked), Ok(key)) = (recovering(&path), crate::keys::read_signing_key(&path)) {
        if key.verifying_key() == marked {
            let public = std::fs::read_to_string(recovery_marker(&path))
                .unwrap_or_default()
                .trim()
                .to_string();
            return Ok(Some(Recovered { path, public }));
        }
    }
    if let Some(found) = [path.clone(), legacy(root, config)]
        .into_iter()
        .find(|p| p.exists())
    {
        return Err(Error::input(format!(
            "a gate key is at {}: recovery is for a lost key; to replace a key you hold, rotate it (GOVERNANCE.md, \"Rotate the gate key\")",
            found.display()
        )));
    }
    Ok(None)
}

/// Makes a new gate key where the lost one was kept, and marks the recovery in progress (so the
/// gate may sign with a key the ledger has not rotated to yet). Refuses while a key is there:
/// a key you still hold is rotated, never recovered.
pub fn recover(root: &Path, config: &Config) -> Result<Recovered> {
    if let Some(resumed) = interrupted(root, config)? {
        return Ok(resumed);
    }
    let path = location(root, config)?;
    use ssh_key::private::{Ed25519Keypair, KeypairData};
    let key = ed25519_dalek::SigningKey::generate(&mut rand_core::OsRng);
    let pair = Ed25519Keypair::from_seed(&key.to_bytes());
    let private = ssh_key::PrivateKey::new(KeypairData::Ed25519(pair), "atelier-gate")?;
    let text = private.to_openssh(ssh_key::LineEnding::LF)?;
    let public = private.public_key().to_openssh()?;
    write_key(&path, text.as_bytes(), root)?;
    crate::fsutil::atomic_write(&recovery_marker(&path), format!("{public}\n").as_bytes())?;
    Ok(Recovered { path, public })
}

/// What `recover_and_propose` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Recovery {
    pub key: PathBuf,
    pub fingerprint: String,
    pub proposal: String,
    pub branch: String,
}

/// `atelier gate-key recover`: a new gate key where the lost one was kept, and the proposal that
/// publishes it in `policies/gate_key.pub` (a constitution change: it takes the constitution
/// quorum). Until it merges, the gate signs with the new key; its merge records the recovery.
pub fn recover_and_propose(
    ws: &super::Workspace,
    now: crate::governance::time::Timestamp,
) -> Result<Recovery> {
    if let Some(resumed) = interrupted(&ws.root, &ws.config)? {
        let signs = crate::keys::parse_public_key(&resumed.public).is_some_and(|k| {
            crate::audit::ledger::read(&ws.repo)
                .ok()
                .flatten()
                .is_some_and(|s| {
                    crate::audit::checkpoint::Checkpoint::verify(
                        &s.checkpoint,
                        crate::audit::ledger::KEY_NAME,
                        &[k],
                    )
                    .is_ok()
                })
        });
        if signs {
            return Err(Error::input(format!(
                "a recovery is in progress: the new gate key {} at {} already signs the ledger; have its proposal (`atelier proposals`) approved by the constitution quorum and merged",
                crate::keys::key_fingerprint(&resumed.public),
                resumed.path.display()
            )));
        }
    }
    // A recovery starts from a ledger this machine has verified: a clean audit also pins the
    // lost key's last checkpoint in this machine's memory, which the first append under the new
    // key must extend.
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let audit = crate::audit::history::verify(
        &ws.repo,
        &ws.config.forge.repository,
        ws.branch(),
        jobs,
        crate::audit::history::Memory::Record,
    )
    .map_err(|e| Error::input(format!("auditing before the recovery: {e}")))?;
    if let Some(first) = audit.findings.first() {
        return Err(Error::input(format!(
            "`atelier audit verify` reports {} finding(s) (first: {}: {}): a recovery starts from a ledger this machine verified; settle them first",
            audit.findings.len(),
            first.code,
            first.detail
        )));
    }
    let r = recover(&ws.root, &ws.config)?;
    let fingerprint = crate::keys::key_fingerprint(&r.public);
    let repo = &ws.repo;
    let tip = crate::git::branch_tip(repo, ws.branch())?;
    let base = repo.find_commit(tip)?.tree()?;
    let patch = crate::git::patch_for(
        repo,
        &base,
        &[(
            crate::governance::policy::GATE_KEY_PATH,
            &format!("{}\n", r.public),
        )],
    )?;
    let file = tempfile::NamedTempFile::new()?;
    std::fs::write(file.path(), &patch)?;
    let proposed = super::propose(
        ws,
        super::ProposeOptions {
            patch: file.path().to_path_buf(),
            title: "Recover the gate key (the old one was lost)".into(),
            rationale: Some(format!(
                "The gate's key was lost, so the ledger cannot be extended under it. This publishes a new gate key, {fingerprint}, made by `atelier gate-key recover` (kept at {} on the gate machine). Until this merges, the gate signs with the new key; its merge records the recovery in the ledger, and `audit verify` shows it as one. It needs the constitution quorum.",
                r.path.display()
            )),
            proposer: None,
            origin: None,
            declared: None,
            expect_base: None,
        },
        now,
    )?;
    Ok(Recovery {
        key: r.path,
        fingerprint,
        proposal: proposed.id,
        branch: proposed.branch,
    })
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
            use std::os::unix::fs::MetadataExt;
            let meta = std::fs::symlink_metadata(dir)
                .map_err(|e| Error::input(format!("reading {}: {e}", dir.display())))?;
            // SAFETY: geteuid(2) cannot fail.
            let me = unsafe { libc::geteuid() };
            if !meta.file_type().is_dir() || meta.uid() != me {
                return Err(Error::input(format!(
                    "{} is not a directory of yours (a link, or another user's): the gate key is never written there; remove it, or set `[gate] key`",
                    dir.display()
                )));
            }
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
                .map_err(|e| Error::input(format!("restricting {}: {e}", dir.display())))
        }
        Err(e) => Err(Error::input(format!("creating {}: {e}", dir.display()))),
    }
}
