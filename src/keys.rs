//! Keys as files and as the protected branch publishes them: reading an approver's or the
//! gate's OpenSSH private key, parsing public key lines, their fingerprints, and the gate keys
//! `policies/gate_key.pub` publishes along a branch. Used by the governed loop (signing,
//! rotation), by `audit` (which key signed each checkpoint) and by the forges. Talks to git
//! through `git.rs`; never prints.

use std::path::{Path, PathBuf};

use ed25519_dalek::SigningKey;
use git2::{Oid, Repository};

use crate::errors::{Classify, Kind};
use crate::git::{self, GitError};
use crate::governance::policy::GATE_KEY_PATH;

/// Why a key could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The file is not a key Atelier can use; the message says which and what to do.
    #[error("{0}")]
    Input(String),
    #[error("reading key {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("git: {0}")]
    Git2(#[from] git2::Error),
}

impl Classify for KeyError {
    fn kind(&self) -> Kind {
        match self {
            KeyError::Input(_) => Kind::Input,
            KeyError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Kind::Input
            }
            KeyError::Read { .. } | KeyError::Git2(_) => Kind::Environment,
            KeyError::Git(g) => g.kind(),
        }
    }
}

type Result<T, E = KeyError> = std::result::Result<T, E>;

/// An OpenSSH public key line's ed25519 key, if it is one.
pub fn parse_public_key(line: &str) -> Option<ed25519_dalek::VerifyingKey> {
    ssh_key::PublicKey::from_openssh(line.trim())
        .ok()
        .and_then(|k| k.key_data().ed25519().map(|e| e.0))
        .and_then(|b| ed25519_dalek::VerifyingKey::from_bytes(&b).ok())
}

/// The `SHA256:…` fingerprint of a verifying key.
pub fn fingerprint(key: &ed25519_dalek::VerifyingKey) -> String {
    crate::governance::token::fingerprint(&ssh_key::public::KeyData::Ed25519(
        ssh_key::public::Ed25519PublicKey(key.to_bytes()),
    ))
}

/// The fingerprint of an OpenSSH public key line, or why there is none.
pub fn key_fingerprint(line: &str) -> String {
    parse_public_key(line)
        .map(|k| fingerprint(&k))
        .unwrap_or_else(|| "a key that does not parse".into())
}

/// The gate key `policies/gate_key.pub` publishes at commit `at`.
pub fn published_gate_key(
    repo: &Repository,
    at: &str,
) -> Result<Option<ed25519_dalek::VerifyingKey>> {
    let tree = repo.find_commit(Oid::from_str(at)?)?.tree()?;
    Ok(git::read_file(repo, &tree, GATE_KEY_PATH)?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| ssh_key::PublicKey::from_openssh(t.trim()).ok())
        .and_then(|k| k.key_data().ed25519().map(|e| e.0))
        .and_then(|b| ed25519_dalek::VerifyingKey::from_bytes(&b).ok()))
}

/// Every distinct gate key `branch` published on its first-parent line since `adoption`, newest
/// first.
pub fn branch_gate_keys(
    repo: &Repository,
    branch: &str,
    adoption: Option<&str>,
) -> Result<Vec<ed25519_dalek::VerifyingKey>> {
    let Ok(tip) = git::branch_tip(repo, branch) else {
        return Ok(Vec::new());
    };
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.simplify_first_parent()?;
    let (mut blobs, mut keys) = (Vec::new(), Vec::new());
    for oid in walk {
        let oid = oid?;
        let tree = repo.find_commit(oid)?.tree()?;
        if let Ok(entry) = tree.get_path(Path::new(GATE_KEY_PATH)) {
            if !blobs.contains(&entry.id()) {
                blobs.push(entry.id());
                if let Some(k) = published_gate_key(repo, &oid.to_string())? {
                    keys.push(k);
                }
            }
        }
        if adoption == Some(oid.to_string().as_str()) {
            break;
        }
    }
    Ok(keys)
}

/// Reads an unencrypted OpenSSH ed25519 private key.
pub fn read_signing_key(path: &Path) -> Result<SigningKey> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let key = match ssh_key::PrivateKey::from_openssh(&text) {
        Ok(k) => k,
        Err(_) if ssh_key::PublicKey::from_openssh(text.trim()).is_ok() => {
            let private = path.to_string_lossy().strip_suffix(".pub").map(PathBuf::from);
            return Err(KeyError::Input(format!(
                "{}: this is a public key; --key takes the private key{}",
                path.display(),
                match private.filter(|p| p.is_file()) {
                    Some(p) => format!(" (probably {})", p.display()),
                    None => " (the file without `.pub`)".into(),
                }
            )));
        }
        Err(e) => {
            return Err(KeyError::Input(format!(
                "{}: not an OpenSSH private key ({e}); --key takes the file `atelier keygen` or `ssh-keygen -t ed25519` wrote (the one without `.pub`)",
                path.display()
            )))
        }
    };
    if key.is_encrypted() {
        return Err(KeyError::Input(format!(
            "{}: the key is passphrase-protected; atelier does not read encrypted keys. Sign with ssh-keygen instead: `atelier approve <id> --payload > p && ssh-keygen -Y sign -f {} -n atelier-approval p && atelier approve <id> --signature p.sig`",
            path.display(),
            path.display()
        )));
    }
    let Some(pair) = key.key_data().ed25519() else {
        return Err(KeyError::Input(format!(
            "{}: a {} key; approvals must use ed25519 (`atelier keygen` makes one)",
            path.display(),
            key.algorithm()
        )));
    };
    Ok(SigningKey::from_bytes(&pair.private.to_bytes()))
}

/// An unencrypted OpenSSH ed25519 private key from its bytes (never shown in errors).
pub fn read_signing_key_bytes(bytes: &[u8]) -> Result<SigningKey> {
    let key = std::str::from_utf8(bytes)
        .ok()
        .and_then(|t| ssh_key::PrivateKey::from_openssh(t).ok())
        .filter(|k| !k.is_encrypted())
        .ok_or_else(|| KeyError::Input("not an unencrypted OpenSSH private key".into()))?;
    let pair = key
        .key_data()
        .ed25519()
        .ok_or_else(|| KeyError::Input("not an ed25519 key".into()))?;
    Ok(SigningKey::from_bytes(&pair.private.to_bytes()))
}
