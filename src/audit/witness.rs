//! Each machine's memory of the largest ledger it has verified: its clones as witnesses.
//!
//! A ledger that only checks itself can be rewound: reset `refs/atelier/ledger` to an older
//! signed commit and every signature still verifies. So the largest ledger a clone verified is
//! remembered outside the repository, in the user's state directory
//! (`$XDG_STATE_HOME/atelier/witness/`, else `~/.local/state/atelier/witness/`), and any ledger
//! that does not extend it is refused (`E_LEDGER_ROLLBACK`, with an RFC 6962 consistency proof).
//!
//! The memory is keyed by the repository's adoption commit (the ledger's first entry names it),
//! never by anything the clone's files can change: not the clone's path (a moved `.git` would
//! start afresh) and not the repository name in `atelier.toml`. Every clone of one repository on
//! this machine shares it, and a different repository later made at the same path (a new `git
//! init`, a re-run demo) has another adoption commit and so another memory.
//!
//! Only ledgers verified under a key the writer can trust raise it: the gate's own appends
//! (checked under the gate's private key) and an `audit verify` without findings.

use std::path::PathBuf;

use sha2::{Digest, Sha256};

use super::ledger::{Floor, LedgerError};
use super::merkle::Hash;

const HEADER: &str = "atelier witness 2";

/// Where the memory of the repository adopted at `adoption` lives; `None` without a home.
pub fn path(adoption: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".local/state"))
        })?;
    let id = hex::encode(&Sha256::digest(adoption.as_bytes())[..16]);
    Some(
        base.join("atelier")
            .join("witness")
            .join(format!("{id}.txt")),
    )
}

/// The largest ledger verified on this machine for the repository adopted at `adoption`.
pub fn load(adoption: &str) -> Result<Option<Floor>, LedgerError> {
    let Some(path) = path(adoption) else {
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
    let (mut size, mut root, mut adopted) = (None, None, None);
    for line in lines {
        match line.split_once(' ') {
            Some(("size", v)) => size = v.parse::<u64>().ok(),
            Some(("root", v)) => {
                root = hex::decode(v)
                    .ok()
                    .and_then(|b| <Hash>::try_from(b.as_slice()).ok())
            }
            Some(("adoption", v)) => adopted = Some(v.to_string()),
            _ => {}
        }
    }
    if adopted.as_deref() != Some(adoption) {
        return Err(bad(&format!("expected `adoption {adoption}`")));
    }
    match (size, root) {
        (Some(size), Some(root)) => Ok(Some(Floor {
            size,
            root,
            source: format!("this machine's memory ({})", path.display()),
        })),
        _ => Err(bad("expected `size N` and `root HEX` lines")),
    }
}

/// Remembers a verified ledger of `size` entries with `root`, unless a larger one is remembered
/// already. Written atomically. `note` is for people reading the file (where it came from).
pub fn remember(adoption: &str, size: u64, root: &Hash, note: &str) -> Result<(), LedgerError> {
    let Some(path) = path(adoption) else {
        return Ok(());
    };
    if load(adoption)
        .ok()
        .flatten()
        .is_some_and(|f| f.size >= size)
    {
        return Ok(());
    }
    let text = format!(
        "{HEADER}\n# {}\nadoption {adoption}\nsize {size}\nroot {}\n",
        note.replace('\n', " "),
        hex::encode(root)
    );
    crate::fsutil::atomic_write(&path, text.as_bytes()).map_err(|e| {
        LedgerError::Io(format!(
            "writing this machine's ledger memory {}: {e:#}",
            path.display()
        ))
    })
}
