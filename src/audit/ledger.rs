//! The ledger: an append-only list of proposal events, hashed into an RFC 6962 Merkle tree whose
//! checkpoints the gate key signs, stored in git under `refs/atelier/ledger` so it travels with
//! clones and pushes.
//!
//! Storage: each append is a commit on the ledger ref (parent = the previous ledger commit)
//! whose tree holds `entries/NNNNNNNN.jsonl` (1024 entries a chunk, one JSON object a line; the
//! line's bytes are the Merkle leaf) and `checkpoint` (the signed note). An append refuses to
//! extend a ledger whose entries no longer match its last checkpoint, proves the new
//! checkpoint consistent with the old one, and moves the ref by compare-and-swap.

use ed25519_dalek::SigningKey;
use git2::{ObjectType, Oid, Repository};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::checkpoint::Checkpoint;
use super::merkle::{self, Hash};
use crate::governance::time::{format_rfc3339, Timestamp};
use crate::governance::{Code, Coded};

pub const REF: &str = "refs/atelier/ledger";
pub const KEY_NAME: &str = "atelier-gate";
const CHUNK: usize = 1024;

/// A gate merge: the commit with parents [base, head] and the approved tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MergeRecord {
    pub proposal: String,
    pub pull: u64,
    pub commit: String,
    pub base: String,
    pub head: String,
    pub tree: String,
}

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Event {
    /// The protected branch came under the gate at `commit` (the first commit carrying the policy
    /// and the gate's public key).
    Adopted { branch: String, commit: String },
    ProposalOpened {
        proposal: String,
        pull: u64,
        title: String,
        branch: String,
        base: String,
        head: String,
        proposer: Option<String>,
        /// Who wrote the change, when an agent did (`propose --agent NAME`, a swarm run):
        /// the review panel holds such changes to more.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        origin: Option<String>,
        /// The files the proposal declared it would change (a swarm run's claims, as globs):
        /// the `scope` reviewer flags anything else.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        declared: Option<Vec<String>>,
    },
    TokenRecorded {
        proposal: String,
        pull: u64,
        comment: u64,
        token: String,
    },
    GateDecision {
        proposal: String,
        base: String,
        head: String,
        merge_tree: Option<String>,
        allowed: bool,
        unmet: Vec<String>,
        approvers: Vec<String>,
    },
    /// The merge commit exists and the branch is about to move to it (written before the
    /// compare-and-swap, so a crash between the two never leaves an unrecorded merge).
    MergeStarted(MergeRecord),
    /// A merged change replaced the gate's public key (`policies/gate_key.pub`): appended with
    /// the merge, under the old key; every later checkpoint is signed by `key` (an OpenSSH
    /// public key line), and `audit verify` follows the chain.
    GateKeyRotated {
        proposal: String,
        /// The merge commit that published the new key.
        commit: String,
        key: String,
        /// The old key was lost: this rotation, and the appends since the new key first
        /// signed, are signed by the new key, on the constitution quorum's approval of the
        /// merge (`atelier gate-key recover`); `audit verify` shows it as such.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        recovered: bool,
    },
    /// The compare-and-swap failed: the started merge never landed.
    MergeAborted {
        proposal: String,
        commit: String,
        reason: String,
    },
    /// The branch moved to the merge commit.
    Merged(MergeRecord),
    Closed {
        proposal: String,
        reason: Option<String>,
    },
    /// A forge (GitHub) was asked to merge exactly this; the merge commit is not known until it
    /// answers. Audit judges the merge at this entry's time and position.
    MergeRequested {
        proposal: String,
        pull: u64,
        base: String,
        head: String,
        tree: String,
    },
    /// The proposal was opened on GitHub as pull request `pull` (tokens for it name that number).
    Submitted {
        proposal: String,
        pull: u64,
        url: String,
        head: String,
        proposer: Option<String>,
    },
    /// The review panel's verdict on the proposal as it would merge then (`atelier review`):
    /// bound to base, head, merge tree and the digest of the panel's definitions at base.
    /// Only a verdict for the change as it is counts at the gate; an overrule by the
    /// constitution quorum never changes it.
    ReviewRecorded {
        proposal: String,
        pull: u64,
        #[serde(flatten)]
        review: crate::governance::review::RecordedReview,
        /// The reviewers that ran.
        reviewers: Vec<String>,
        /// What people read (markdown, size-capped).
        summary: String,
    },
    /// `atelier cycle` named the metric the proposal's evidence is judged by, before the
    /// replay benchmark ran (pre-registration): `metric` is one of the benchmark's metrics, or
    /// none when the benchmark does not measure this change (`reason` says why).
    MetricRegistered {
        proposal: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        metric: Option<String>,
        reason: String,
        /// The head the benchmark measures (the proposer's change).
        head: String,
        seeds: u64,
        missions: Vec<String>,
        /// 128 random bits (hex) drawn at registration: with the rest of this entry's line
        /// they make its leaf hash, from which the benchmark's seeds are drawn
        /// (`improve::evidence::draw_seeds`), so nobody knows them before the entry exists.
        /// Absent on registrations made before seeds were drawn (seeds 0..n).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        draw: Option<String>,
    },
    /// `atelier cycle` committed the proposal's evidence (`evidence.json`, `evidence.md` in its
    /// record) as `head`; `digest` is the SHA-256 of that evidence.json.
    EvidenceRecorded {
        proposal: String,
        head: String,
        /// The protected branch's commit the change was measured against: the evidence holds
        /// for a merge onto exactly that base.
        #[serde(default)]
        base: String,
        digest: String,
        /// For the registered metric: `improved`, `no significant change`, `regressed`,
        /// `not measured`, or `no metric named` (benchmarked for regressions only).
        outcome: String,
        /// The registered metric's delta (candidate - baseline) and its 95 % interval, as
        /// written in the evidence (`-1.20 [-2.00, -0.40]`), when measured.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        delta: Option<String>,
        /// Other metrics that regressed significantly.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        regressions: Vec<String>,
        /// Each validator's result (`user-testing: passed`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        validators: Vec<String>,
    },
    /// Something that must not happen did: a merge landed other than approved. Never cleared.
    Alarm {
        proposal: String,
        pull: u64,
        code: String,
        detail: String,
    },
}

impl Event {
    /// A `token-recorded` event carrying only approvals (no rejection).
    pub fn is_approvals_only(&self) -> bool {
        use crate::governance::token::{Payload, RawToken, Verdict};
        match self {
            Event::TokenRecorded { token, .. } => RawToken::extract_all(token)
                .iter()
                .all(|t| Payload::parse(&t.payload).is_ok_and(|p| p.decision == Verdict::Approve)),
            _ => false,
        }
    }

    pub fn proposal(&self) -> Option<&str> {
        match self {
            // About the repository, not a proposal's state: it never concludes or reopens one.
            Event::Adopted { .. } | Event::GateKeyRotated { .. } => None,
            Event::ProposalOpened { proposal, .. }
            | Event::TokenRecorded { proposal, .. }
            | Event::GateDecision { proposal, .. }
            | Event::MergeAborted { proposal, .. }
            | Event::Closed { proposal, .. }
            | Event::Submitted { proposal, .. }
            | Event::MergeRequested { proposal, .. }
            | Event::ReviewRecorded { proposal, .. }
            | Event::MetricRegistered { proposal, .. }
            | Event::EvidenceRecorded { proposal, .. }
            | Event::Alarm { proposal, .. } => Some(proposal),
            Event::MergeStarted(m) | Event::Merged(m) => Some(&m.proposal),
        }
    }
}

/// An event with its position and time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub seq: u64,
    pub at: String,
    #[serde(flatten)]
    pub event: Event,
}

impl Entry {
    pub fn parse(line: &str) -> Result<Entry, String> {
        serde_json::from_str(line).map_err(|e| e.to_string())
    }
}

#[derive(Debug, Error)]
pub enum LedgerError {
    #[error(
        "{code}: {0}; run `atelier audit verify` for details — nothing was appended",
        code = Code::LedgerCorrupt
    )]
    Corrupt(String),
    #[error("{code}: {REF} moved during the append (expected {expected}, found {found}); retry the command", code = Code::LedgerMoved)]
    Moved { expected: String, found: String },
    #[error("{code}: the clock says {now}, but the ledger's last entry is from {last}; ledger time never goes backwards — fix the clock (or ATELIER_NOW)", code = Code::ClockBehindLedger)]
    ClockBehind { now: String, last: String },
    #[error("{code}: the ledger does not extend what a witness saw: {source_} names a ledger of {size} entries with root {root}, but {found}; nothing was changed — if this clone only lacks the newer ledger, fetch it (`git fetch origin {REF}:{REF}`, without `+`) and retry; otherwise it was rewound: find who reset {REF} and restore it from a clone that has the longer one", code = Code::LedgerRollback)]
    Rollback {
        /// Who saw the longer ledger: this clone, a merge commit, an approval token.
        source_: String,
        size: u64,
        root: String,
        found: String,
    },
    #[error("{code}: the clone {clone} was the {expected} when this machine first recorded or audited it, but it is now the {found}: its history was grafted onto a new adoption commit, or the repository renamed, which would start a new ledger unseen; nothing was changed — restore the branch and the ledger, or, if this really is a new repository at the same path, delete {file}", code = Code::AdoptionMismatch)]
    IdentityChanged {
        clone: String,
        expected: String,
        found: String,
        file: String,
    },
    #[error("{0}")]
    Io(String),
    #[error("git: {0}")]
    Git(#[from] git2::Error),
}

impl Coded for LedgerError {
    /// Every refusal has a code; a failure to read or write the repository has none.
    fn code(&self) -> Option<Code> {
        match self {
            LedgerError::Corrupt(_) => Some(Code::LedgerCorrupt),
            LedgerError::Moved { .. } => Some(Code::LedgerMoved),
            LedgerError::ClockBehind { .. } => Some(Code::ClockBehindLedger),
            LedgerError::Rollback { .. } => Some(Code::LedgerRollback),
            LedgerError::IdentityChanged { .. } => Some(Code::AdoptionMismatch),
            LedgerError::Io(_) | LedgerError::Git(_) => None,
        }
    }
}

impl crate::errors::Classify for LedgerError {
    fn kind(&self) -> crate::errors::Kind {
        match self.code() {
            Some(code) => crate::errors::Kind::Refused(code),
            None => crate::errors::Kind::Environment,
        }
    }
}

/// The merge commit trailer that carries the ledger checkpoint at the time of the merge.
pub const LEDGER_TRAILER: &str = "Atelier-Ledger";

/// A ledger checkpoint as a gate merge commit carries it:
/// `Atelier-Ledger: <size> <hex root> <signature>`. The gate key signs, with ed25519, the
/// checkpoint together with the merge it belongs to ([`Anchor::message`]: origin, size, root,
/// and the merge's base, head and tree), so the signature vouches for this checkpoint on this
/// merge commit only: a checkpoint signature from elsewhere (a ledger commit that never landed)
/// cannot be turned into an anchor, and neither can an anchor be moved to another commit.
/// Unsigned or badly signed anchors vouch for nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub size: u64,
    pub root: Hash,
    /// Base64 of the ed25519 signature over [`Anchor::message`].
    pub signature: String,
}

/// The merge an anchor belongs to: its first parent (the base), second parent (the head) and
/// tree.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MergeIdentity<'a> {
    pub base: &'a str,
    pub head: &'a str,
    pub tree: &'a str,
}

impl Anchor {
    /// The bytes the gate signs.
    pub fn message(origin: &str, size: u64, root: &Hash, merge: MergeIdentity<'_>) -> String {
        format!(
            "atelier-anchor 1\norigin {origin}\nsize {size}\nroot {}\nbase {}\nhead {}\ntree {}\n",
            hex::encode(root),
            merge.base,
            merge.head,
            merge.tree
        )
    }

    /// Signs the checkpoint of `snap` for the merge of `merge`.
    pub fn sign(
        origin: &str,
        snap: &Snapshot,
        merge: MergeIdentity<'_>,
        key: &SigningKey,
    ) -> Anchor {
        use base64::Engine as _;
        use ed25519_dalek::Signer as _;
        let size = snap.lines.len() as u64;
        let root = merkle::root(&snap.leaf_hashes());
        let signature = key.sign(Anchor::message(origin, size, &root, merge).as_bytes());
        Anchor {
            size,
            root,
            signature: base64::engine::general_purpose::STANDARD.encode(signature.to_bytes()),
        }
    }

    /// The trailer line (without a newline).
    pub fn trailer(&self) -> String {
        format!(
            "{LEDGER_TRAILER}: {} {} {}",
            self.size,
            hex::encode(self.root),
            self.signature
        )
    }

    /// Reads the first `Atelier-Ledger:` trailer of a commit message.
    pub fn parse(message: &str) -> Option<Anchor> {
        message.lines().find_map(|l| {
            let rest = l.strip_prefix(LEDGER_TRAILER)?.strip_prefix(": ")?;
            let mut parts = rest.split(' ');
            let size = parts.next()?.parse().ok()?;
            let root = hex::decode(parts.next()?).ok()?;
            let signature = parts.next()?.to_string();
            if parts.next().is_some() {
                return None;
            }
            Some(Anchor {
                size,
                root: root.as_slice().try_into().ok()?,
                signature,
            })
        })
    }

    /// Whether one of `keys` signed this checkpoint of `origin`'s ledger for `merge`.
    pub fn verifies(
        &self,
        origin: &str,
        merge: MergeIdentity<'_>,
        keys: &[ed25519_dalek::VerifyingKey],
    ) -> bool {
        use base64::Engine as _;
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(&self.signature) else {
            return false;
        };
        let Ok(signature) = ed25519_dalek::Signature::from_slice(&bytes) else {
            return false;
        };
        let message = Anchor::message(origin, self.size, &self.root, merge);
        keys.iter()
            .any(|k| !k.is_weak() && k.verify_strict(message.as_bytes(), &signature).is_ok())
    }

    /// Reads and checks the anchor a commit carries: only a two-parent commit whose parents
    /// and tree are the ones the gate signed for. `None` for anything else.
    pub fn of_commit(
        commit: &git2::Commit<'_>,
        origin: &str,
        keys: &[ed25519_dalek::VerifyingKey],
    ) -> Option<Anchor> {
        let anchor = Anchor::parse(commit.message().unwrap_or(""))?;
        if commit.parent_count() != 2 {
            return None;
        }
        let (base, head) = (commit.parent_id(0).ok()?, commit.parent_id(1).ok()?);
        let (base, head, tree) = (
            base.to_string(),
            head.to_string(),
            commit.tree_id().to_string(),
        );
        let merge = MergeIdentity {
            base: &base,
            head: &head,
            tree: &tree,
        };
        anchor.verifies(origin, merge, keys).then_some(anchor)
    }
}

/// A ledger checkpoint someone other than the ledger vouches for (a witness): the ledger must
/// extend it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Floor {
    pub size: u64,
    pub root: Hash,
    /// Who vouches for it, for the refusal message.
    pub source: String,
}

/// Checks that the ledger over `leaves` extends `floor`, by an RFC 6962 consistency proof.
pub fn check_floor(leaves: &[Hash], floor: &Floor) -> Result<(), LedgerError> {
    let size = leaves.len() as u64;
    let rollback = |found: String| LedgerError::Rollback {
        source_: floor.source.clone(),
        size: floor.size,
        root: hex::encode(floor.root),
        found,
    };
    if floor.size > size {
        return Err(rollback(format!("the ledger holds only {size}")));
    }
    let root = merkle::root(leaves);
    let proof = merkle::consistency_proof(leaves, floor.size)
        .expect("the floor is not larger than the ledger");
    if !merkle::verify_consistency(floor.size, size, &floor.root, &root, &proof) {
        return Err(rollback(format!(
            "the ledger of {size} entries (root {}) does not extend it",
            hex::encode(root)
        )));
    }
    Ok(())
}

/// The ledger as stored at one commit of the ledger ref.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub commit: Oid,
    pub lines: Vec<String>,
    pub checkpoint: String,
}

impl Snapshot {
    pub fn leaf_hashes(&self) -> Vec<Hash> {
        self.lines
            .iter()
            .map(|l| merkle::leaf_hash(l.as_bytes()))
            .collect()
    }

    pub fn root_hex(&self) -> String {
        hex::encode(merkle::root(&self.leaf_hashes()))
    }
}

/// The origin line of this repository's checkpoints.
pub fn origin(repository: &str) -> String {
    format!("atelier/{repository}/ledger")
}

/// The current ledger commit, if any.
pub fn tip(repo: &Repository) -> Result<Option<Oid>, LedgerError> {
    match repo.find_reference(REF) {
        Ok(r) => Ok(Some(r.peel_to_commit()?.id())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the ledger stored at a ledger commit.
pub fn read_at(repo: &Repository, commit: Oid) -> Result<Snapshot, LedgerError> {
    let tree = repo.find_commit(commit)?.tree()?;
    let checkpoint = match tree.get_name("checkpoint") {
        Some(e) => String::from_utf8_lossy(repo.find_blob(e.id())?.content()).into_owned(),
        None => {
            return Err(LedgerError::Corrupt(format!(
                "ledger commit {commit} has no `checkpoint` file"
            )))
        }
    };
    let mut lines = Vec::new();
    if let Some(e) = tree.get_name("entries") {
        if e.kind() != Some(ObjectType::Tree) {
            return Err(LedgerError::Corrupt(format!(
                "ledger commit {commit}: `entries` is not a directory"
            )));
        }
        let dir = repo.find_tree(e.id())?;
        let mut names: Vec<(String, Oid)> = dir
            .iter()
            .map(|e| (e.name().unwrap_or("").to_string(), e.id()))
            .collect();
        names.sort();
        for (name, id) in names {
            let blob = repo.find_blob(id).map_err(|_| {
                LedgerError::Corrupt(format!("ledger entries/{name} is not a file"))
            })?;
            let text = std::str::from_utf8(blob.content())
                .map_err(|_| LedgerError::Corrupt(format!("ledger entries/{name} is not UTF-8")))?;
            lines.extend(text.lines().map(str::to_string));
        }
    }
    Ok(Snapshot {
        commit,
        lines,
        checkpoint,
    })
}

/// A recorded gate key rotation, where it is in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    pub seq: u64,
    pub proposal: String,
    pub commit: String,
    /// The new key, an OpenSSH public key line.
    pub key: String,
    pub recovered: bool,
}

/// Every gate key rotation the current ledger records, oldest first.
pub fn rotations(repo: &Repository) -> Result<Vec<Rotation>, LedgerError> {
    let Some(s) = read(repo)? else {
        return Ok(Vec::new());
    };
    Ok(s.lines
        .iter()
        .filter(|l| l.contains("\"gate-key-rotated\""))
        .filter_map(|l| Entry::parse(l).ok())
        .filter_map(|e| match e.event {
            Event::GateKeyRotated {
                proposal,
                commit,
                key,
                recovered,
            } => Some(Rotation {
                seq: e.seq,
                proposal,
                commit,
                key,
                recovered,
            }),
            _ => None,
        })
        .collect())
}

/// The latest gate key rotation the current ledger records.
pub fn latest_rotation(repo: &Repository) -> Result<Option<Rotation>, LedgerError> {
    Ok(rotations(repo)?.pop())
}

/// The adoption commit the current ledger's first entry names, read from its first chunk only.
pub fn adopted_commit(repo: &Repository) -> Result<Option<String>, LedgerError> {
    Ok(adoption(repo)?.map(|(_, commit)| commit))
}

/// The protected branch and adoption commit the current ledger's first entry names.
pub fn adoption(repo: &Repository) -> Result<Option<(String, String)>, LedgerError> {
    let Some(tip) = tip(repo)? else {
        return Ok(None);
    };
    let tree = repo.find_commit(tip)?.tree()?;
    let Ok(first) = tree.get_path(std::path::Path::new("entries/00000000.jsonl")) else {
        return Ok(None);
    };
    let Ok(blob) = repo.find_blob(first.id()) else {
        return Ok(None);
    };
    let text = String::from_utf8_lossy(blob.content());
    Ok(text
        .lines()
        .next()
        .and_then(|l| Entry::parse(l).ok())
        .and_then(|e| match e.event {
            Event::Adopted { branch, commit } => Some((branch, commit)),
            _ => None,
        }))
}

/// Reads the current ledger, if there is one.
pub fn read(repo: &Repository) -> Result<Option<Snapshot>, LedgerError> {
    match tip(repo)? {
        Some(c) => Ok(Some(read_at(repo, c)?)),
        None => Ok(None),
    }
}

/// The current ledger's signed checkpoint note, read from its tip alone.
pub fn checkpoint_note(repo: &Repository) -> Result<Option<String>, LedgerError> {
    let Some(tip) = tip(repo)? else {
        return Ok(None);
    };
    let tree = repo.find_commit(tip)?.tree()?;
    let note = match tree.get_name("checkpoint") {
        Some(e) => Some(String::from_utf8_lossy(repo.find_blob(e.id())?.content()).into_owned()),
        None => None,
    };
    Ok(note)
}

/// Appends events, signing a new checkpoint with the gate key. Returns the new snapshot.
pub fn append(
    repo: &Repository,
    repository: &str,
    events: Vec<Event>,
    now: Timestamp,
    key: &SigningKey,
) -> Result<Snapshot, LedgerError> {
    append_above(
        repo,
        repository,
        events,
        now,
        key,
        &[key.verifying_key()],
        &[],
    )
}

/// Appends events like [`append`], after checking that the stored ledger extends every floor
/// (`E_LEDGER_ROLLBACK` otherwise; nothing is appended). The last checkpoint must verify under
/// one of `trusted` (the gate's keys, old ones included after a rotation).
pub fn append_above(
    repo: &Repository,
    repository: &str,
    events: Vec<Event>,
    now: Timestamp,
    key: &SigningKey,
    trusted: &[ed25519_dalek::VerifyingKey],
    floors: &[Floor],
) -> Result<Snapshot, LedgerError> {
    let old = read(repo)?;
    let old_leaves = old.as_ref().map(Snapshot::leaf_hashes).unwrap_or_default();
    for floor in floors {
        check_floor(&old_leaves, floor)?;
    }
    let origin = origin(repository);
    let (mut lines, old_cp, parent) = match &old {
        None => (Vec::new(), None, None),
        Some(s) => {
            let cp = Checkpoint::verify(&s.checkpoint, KEY_NAME, trusted).map_err(|e| {
                LedgerError::Corrupt(format!(
                    "the last checkpoint does not verify under this gate key (or, after a rotation, the previous one this machine's memory pins; run `atelier audit verify` here to pin it): {e}"
                ))
            })?;
            if cp.origin != origin {
                return Err(LedgerError::Corrupt(format!(
                    "the last checkpoint names the ledger `{}`, but the configured repository makes it `{origin}` (was `repository` in atelier.toml changed?)",
                    cp.origin
                )));
            }
            if cp.size != s.lines.len() as u64 || cp.root != merkle::root(&old_leaves) {
                return Err(LedgerError::Corrupt(format!(
                    "the stored entries ({} lines) do not match the last checkpoint (size {})",
                    s.lines.len(),
                    cp.size
                )));
            }
            (s.lines.clone(), Some(cp), Some(s.commit))
        }
    };
    if let Some(last) = lines.last().and_then(|l| Entry::parse(l).ok()) {
        if let Ok(t) = crate::governance::time::parse_rfc3339(&last.at) {
            if now < t {
                return Err(LedgerError::ClockBehind {
                    now: format_rfc3339(now),
                    last: last.at,
                });
            }
        }
    }
    let first_new = lines.len();
    for event in events {
        let entry = Entry {
            seq: lines.len() as u64,
            at: format_rfc3339(now),
            event,
        };
        lines.push(serde_json::to_string(&entry).expect("an entry always serializes"));
    }
    let leaves: Vec<Hash> = lines
        .iter()
        .map(|l| merkle::leaf_hash(l.as_bytes()))
        .collect();
    let new_cp = Checkpoint {
        origin,
        size: lines.len() as u64,
        root: merkle::root(&leaves),
    };
    if let Some(old_cp) = &old_cp {
        let proof = merkle::consistency_proof(&leaves, old_cp.size)
            .expect("the old size is never larger than the new one");
        if !merkle::verify_consistency(old_cp.size, new_cp.size, &old_cp.root, &new_cp.root, &proof)
        {
            return Err(LedgerError::Corrupt(
                "the new tree is not consistent with the last checkpoint".into(),
            ));
        }
    }
    // Rewrite only the chunks that changed.
    let old_tree = match parent {
        Some(p) => Some(repo.find_commit(p)?.tree()?),
        None => None,
    };
    let old_entries = match old_tree.as_ref().and_then(|t| t.get_name("entries")) {
        Some(e) => Some(repo.find_tree(e.id())?),
        None => None,
    };
    let mut entries = repo.treebuilder(old_entries.as_ref())?;
    for chunk in (first_new / CHUNK)..lines.len().div_ceil(CHUNK) {
        let end = ((chunk + 1) * CHUNK).min(lines.len());
        let mut text = lines[chunk * CHUNK..end].join("\n");
        text.push('\n');
        let blob = repo.blob(text.as_bytes())?;
        entries.insert(format!("{chunk:08}.jsonl"), blob, 0o100644)?;
    }
    let entries_id = entries.write()?;
    let note = new_cp.sign(KEY_NAME, key);
    let mut root = repo.treebuilder(None)?;
    root.insert("entries", entries_id, 0o040000)?;
    root.insert("checkpoint", repo.blob(note.as_bytes())?, 0o100644)?;
    let tree = repo.find_tree(root.write()?)?;
    let sig = git2::Signature::new(
        "atelier gate",
        "gate@atelier.invalid",
        &git2::Time::new(now, 0),
    )?;
    let parents: Vec<git2::Commit<'_>> = match parent {
        Some(p) => vec![repo.find_commit(p)?],
        None => Vec::new(),
    };
    let parent_refs: Vec<&git2::Commit<'_>> = parents.iter().collect();
    let message = format!(
        "ledger: {} entries, checkpoint {}\n",
        new_cp.size,
        hex::encode(new_cp.root)
    );
    let commit = repo.commit(None, &sig, &sig, &message, &tree, &parent_refs)?;
    let moved = match parent {
        Some(p) => repo
            .reference_matching(REF, commit, true, p, "atelier: ledger append")
            .map(|_| ()),
        None => repo
            .reference(REF, commit, false, "atelier: ledger start")
            .map(|_| ()),
    };
    if let Err(e) = moved {
        let found = tip(repo)?.map_or("nothing".to_string(), |o| o.to_string());
        if found != parent.map_or("nothing".to_string(), |o| o.to_string()) {
            return Err(LedgerError::Moved {
                expected: parent.map_or("nothing".to_string(), |o| o.to_string()),
                found,
            });
        }
        return Err(e.into());
    }
    Ok(Snapshot {
        commit,
        lines,
        checkpoint: note,
    })
}
