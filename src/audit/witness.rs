//! Each clone's memory of the largest ledger it has verified: the clone as a witness.
//!
//! A ledger that only checks itself can be rewound: reset `refs/atelier/ledger` to an older
//! signed commit and every signature still verifies. So every clone remembers, outside its
//! working tree and outside `.git`, the size and root of the largest ledger it verified, and
//! refuses (`E_LEDGER_ROLLBACK`, with an RFC 6962 consistency proof) any ledger that does not
//! extend it. The memory lives in the user's state directory (`$XDG_STATE_HOME/atelier/witness/`,
//! else `~/.local/state/atelier/witness/`), one file per clone (keyed by the canonical path of
//! its git directory and the ledger's origin), so nothing that writes only the repository — a
//! worker in a worktree, a pushed ref, an edited `.atelier/` — can lower it.

use std::path::PathBuf;

use git2::Repository;
use sha2::{Digest, Sha256};

use super::ledger::{Floor, LedgerError};
use super::merkle::Hash;

const HEADER: &str = "atelier witness 1";

/// Where this clone's memory of `origin`'s ledger lives; `None` without a home directory.
pub fn path(repo: &Repository, origin: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    let gitdir = repo.commondir();
    let canonical = std::fs::canonicalize(gitdir).unwrap_or_else(|_| gitdir.to_path_buf());
    let mut h = Sha256::new();
    h.update(canonical.to_string_lossy().as_bytes());
    h.update([0]);
    h.update(origin.as_bytes());
    let id = hex::encode(&h.finalize()[..16]);
    Some(
        base.join("atelier")
            .join("witness")
            .join(format!("{id}.txt")),
    )
}

/// The largest ledger this clone verified, if it remembers one.
pub fn load(repo: &Repository, origin: &str) -> Result<Option<Floor>, LedgerError> {
    let Some(path) = path(repo, origin) else {
        return Ok(None);
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(LedgerError::Io(format!(
                "reading this clone's ledger memory {}: {e}",
                path.display()
            )))
        }
    };
    let bad = |what: &str| {
        LedgerError::Io(format!(
            "{}: {what}; this clone's memory of the ledger is damaged — delete the file only if you know the ledger was not rewound (`atelier audit verify` on another clone tells)",
            path.display()
        ))
    };
    let mut size = None;
    let mut root = None;
    let mut lines = text.lines();
    if lines.next() != Some(HEADER) {
        return Err(bad(&format!("expected the first line `{HEADER}`")));
    }
    for line in lines {
        match line.split_once(' ') {
            Some(("size", v)) => size = v.parse::<u64>().ok(),
            Some(("root", v)) => {
                root = hex::decode(v)
                    .ok()
                    .and_then(|b| <Hash>::try_from(b.as_slice()).ok())
            }
            _ => {}
        }
    }
    match (size, root) {
        (Some(size), Some(root)) => Ok(Some(Floor {
            size,
            root,
            source: format!("this clone verified it before ({})", path.display()),
        })),
        _ => Err(bad("expected `size N` and `root HEX` lines")),
    }
}

/// Remembers a verified ledger of `size` entries with `root`, unless a larger one is remembered
/// already. Written atomically.
pub fn remember(
    repo: &Repository,
    origin: &str,
    size: u64,
    root: &Hash,
) -> Result<(), LedgerError> {
    let Some(path) = path(repo, origin) else {
        return Ok(());
    };
    if load(repo, origin)
        .ok()
        .flatten()
        .is_some_and(|f| f.size >= size)
    {
        return Ok(());
    }
    let text = format!(
        "{HEADER}\nrepository {}\norigin {origin}\nsize {size}\nroot {}\n",
        repo.commondir().display(),
        hex::encode(root)
    );
    crate::fsutil::atomic_write(&path, text.as_bytes()).map_err(|e| {
        LedgerError::Io(format!(
            "writing this clone's ledger memory {}: {e:#}",
            path.display()
        ))
    })
}
