//! Each machine's memory of the largest ledger it has verified: its clones as witnesses.
//!
//! A ledger that only checks itself can be rewound: reset `refs/atelier/ledger` to an older
//! signed commit and every signature still verifies. So the largest ledger a clone verified is
//! remembered outside the repository, in the user's state directory
//! (`$XDG_STATE_HOME/atelier/witness/`, else `~/.local/state/atelier/witness/`), and any ledger
//! that does not extend it is refused (`E_LEDGER_ROLLBACK`, with an RFC 6962 consistency proof).
//!
//! The memory is keyed by the repository's adoption commit (the ledger's first entry names it)
//! and the ledger's origin, never by the clone's path (a moved `.git` would start afresh). Every
//! clone of one repository on this machine shares it; a different repository later made at the
//! same path (a new `git init`, a re-run demo), or a fork with its own ledger, has another.
//! Renaming the repository in `atelier.toml` does not escape it: an append refuses a ledger whose
//! last checkpoint names another origin.
//!
//! The memory also pins the gate key that signed what it remembers. Only an `audit verify`
//! without findings sets it freely (no one without the gate key can make a forged ledger audit
//! clean); the gate's own appends raise it only while they are signed with the pinned key (or,
//! before there is a memory, the key the adoption commit publishes), so a key or ledger swapped
//! in for a moment cannot plant a false memory.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::ledger::{Floor, LedgerError};
use super::merkle::Hash;

const HEADER: &str = "atelier witness 3";

/// What this machine remembers of one repository's ledger.
#[derive(Debug, Clone)]
pub struct Memory {
    pub floor: Floor,
    /// The gate key that signed the remembered checkpoint.
    pub key: [u8; 32],
}

/// Where the memory of the repository adopted at `adoption` lives; `None` without a home.
pub fn path(adoption: &str, origin: &str) -> Option<PathBuf> {
    let base = state_dir()?;
    let id = hex::encode(&Sha256::digest(format!("{adoption}\n{origin}").as_bytes())[..16]);
    Some(
        base.join("atelier")
            .join("witness")
            .join(format!("{id}.txt")),
    )
}

/// The largest ledger verified on this machine for the repository adopted at `adoption`.
pub fn load(adoption: &str, origin: &str) -> Result<Option<Memory>, LedgerError> {
    let Some(path) = path(adoption, origin) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LedgerError::Io(format!(
                "reading this machine's ledger memory {}: {e}",
                path.display()
            )))
        }
    };
    let bad = |what: &str| {
        LedgerError::Io(format!(
            "{}: {what}; this machine's memory of the ledger is damaged — delete the file only if you know the ledger was not rewound (`atelier audit verify` on another clone tells)",
            path.display()
        ))
    };
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(bad(&format!("expected the first line `{HEADER}`")));
    }
    let (mut size, mut root, mut adopted, mut key) = (None, None, None, None);
    for line in lines {
        match line.split_once(' ') {
            Some(("size", v)) => size = v.parse::<u64>().ok(),
            Some(("root", v)) => {
                root = hex::decode(v)
                    .ok()
                    .and_then(|b| <Hash>::try_from(b.as_slice()).ok())
            }
            Some(("adoption", v)) => adopted = Some(v.to_string()),
            Some(("key", v)) => {
                key = hex::decode(v)
                    .ok()
                    .and_then(|b| <[u8; 32]>::try_from(b.as_slice()).ok())
            }
            _ => {}
        }
    }
    if adopted.as_deref() != Some(adoption) {
        return Err(bad(&format!("expected `adoption {adoption}`")));
    }
    match (size, root, key) {
        (Some(size), Some(root), Some(key)) => Ok(Some(Memory {
            floor: Floor {
                size,
                root,
                source: format!("this machine's memory ({})", path.display()),
            },
            key,
        })),
        _ => Err(bad("expected `size N`, `root HEX` and `key HEX` lines")),
    }
}

/// Remembers a verified ledger of `size` entries with `root`, signed by `key`, unless as large a
/// one signed by the same key is remembered already. Written atomically. The caller decides
/// whether `key` may be trusted ([`may_raise`]). `note` says where it came from.
pub fn remember(
    adoption: &str,
    origin: &str,
    size: u64,
    root: &Hash,
    key: &[u8; 32],
    note: &str,
) -> Result<(), LedgerError> {
    let Some(path) = path(adoption, origin) else {
        return Ok(());
    };
    if load(adoption, origin)
        .ok()
        .flatten()
        .is_some_and(|m| m.floor.size >= size && m.key == *key)
    {
        return Ok(());
    }
    let text = format!(
        "{HEADER}\n# {}\nadoption {adoption}\norigin {origin}\nsize {size}\nroot {}\nkey {}\n",
        note.replace('\n', " "),
        hex::encode(root),
        hex::encode(key)
    );
    crate::fsutil::atomic_write(&path, text.as_bytes()).map_err(|e| {
        LedgerError::Io(format!(
            "writing this machine's ledger memory {}: {}",
            path.display(),
            crate::errors::chain(&e)
        ))
    })
}

/// Whether a gate append signed with `key` may raise the memory: only with the key it pins, or,
/// before there is a memory, with the key the adoption commit publishes.
pub fn may_raise(memory: Option<&Memory>, key: &[u8; 32], adoption_key: Option<&[u8; 32]>) -> bool {
    match memory {
        Some(m) => m.key == *key,
        None => adoption_key == Some(key),
    }
}

/// Where this machine keeps the identity first seen for the clone whose working tree (or, for a
/// bare repository, git directory) is `root`.
fn identity_path(root: &std::path::Path) -> Option<PathBuf> {
    let base = state_dir()?;
    let canonical = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    let id = hex::encode(&Sha256::digest(canonical.to_string_lossy().as_bytes())[..16]);
    Some(
        base.join("atelier")
            .join("clones")
            .join(format!("{id}.txt")),
    )
}

/// Checks that the clone at `root` is still the repository it was when this machine first
/// recorded or audited it there: the same ledger origin and the same adoption commit. A new
/// adoption commit (a history grafted onto the old one, the ledger deleted) or a renamed
/// repository would otherwise start a new ledger, and a new memory, unseen. Refused with
/// `E_ADOPTION_MISMATCH`; `remember_identity` writes it the first time.
pub fn check_identity(
    root: &std::path::Path,
    origin: &str,
    adoption: &str,
) -> Result<(), LedgerError> {
    let Some(path) = identity_path(root) else {
        return Ok(());
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(LedgerError::Io(format!(
                "reading this machine's record of the clone {}: {e}",
                path.display()
            )))
        }
    };
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or("")
            .to_string()
    };
    let (was_origin, was_adoption) = (field("origin"), field("adoption"));
    if was_origin != origin || was_adoption != adoption {
        return Err(LedgerError::IdentityChanged {
            clone: root.display().to_string(),
            expected: format!("ledger `{was_origin}` adopted at {was_adoption}"),
            found: format!("ledger `{origin}` adopted at {adoption}"),
            file: path.display().to_string(),
        });
    }
    Ok(())
}

/// Records the clone's identity the first time; never changes it (deleting the file is how a
/// deliberate re-adoption is accepted).
pub fn remember_identity(
    root: &std::path::Path,
    origin: &str,
    adoption: &str,
) -> Result<(), LedgerError> {
    let Some(path) = identity_path(root) else {
        return Ok(());
    };
    if path.exists() {
        return Ok(());
    }
    let text = format!(
        "{HEADER}\n# the clone at {}\norigin {origin}\nadoption {adoption}\n",
        root.display()
    );
    crate::fsutil::atomic_write(&path, text.as_bytes()).map_err(|e| {
        LedgerError::Io(format!(
            "writing this machine's record of the clone {}: {}",
            path.display(),
            crate::errors::chain(&e)
        ))
    })
}

fn state_dir() -> Option<PathBuf> {
    crate::fsutil::machine_dir("XDG_STATE_HOME", ".local/state")
}

/// Forgets the identity recorded for the clone at `root`: for a command that has just made a
/// new repository there (`atelier demo`), never for one that found it.
pub fn forget_identity(root: &std::path::Path) -> Result<(), LedgerError> {
    let Some(path) = identity_path(root) else {
        return Ok(());
    };
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(LedgerError::Io(format!("removing {}: {e}", path.display())))
        }
        _ => Ok(()),
    }
}
