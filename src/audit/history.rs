//! `atelier audit verify` and friends: checks, with nothing but a clone, that every commit on
//! the protected branch since adoption is a merge the gate allowed under the policy of its
//! base, and that the ledger is intact (no edit, truncation, reordering or insertion).
//!
//! The walk streams: ledger entries are hashed and indexed chunk by chunk, merges are gathered
//! in batches and their tokens verified on all cores, so memory stays small as history grows.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ed25519_dalek::VerifyingKey;
use git2::{ObjectType, Oid, Repository};
use serde::Serialize;
use thiserror::Error;

use super::checkpoint::Checkpoint;
use super::ledger::{self, Entry, Event, MergeRecord};
use super::merkle::{self, Hash, RootBuilder};
use super::witness;
use crate::git;
use crate::governance::decision::{self, Change, GateInput};
use crate::governance::policy::{policy_digest, Policy, PolicyError, GATE_KEY_PATH};
use crate::governance::time::parse_rfc3339;
use crate::governance::token::RawToken;
use crate::governance::{Code, Coded};

/// Why an audit could not run at all (what it found is a [`Finding`], never an error).
#[derive(Debug, Error)]
pub enum AuditError {
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error("git: {0}")]
    Git2(#[from] git2::Error),
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    #[error("ledger entry {index} is malformed ({reason}): run `atelier audit verify`")]
    MalformedEntry { index: usize, reason: String },
}

impl Coded for AuditError {
    fn code(&self) -> Option<Code> {
        match self {
            AuditError::Ledger(l) => l.code(),
            AuditError::Git(_) | AuditError::Git2(_) | AuditError::MalformedEntry { .. } => None,
        }
    }
}

impl crate::errors::Classify for AuditError {
    fn kind(&self) -> crate::errors::Kind {
        use crate::errors::Kind;
        match self {
            AuditError::Ledger(l) => l.kind(),
            AuditError::Git(g) => g.kind(),
            AuditError::Git2(_) => Kind::Environment,
            AuditError::MalformedEntry { .. } => Kind::Input,
        }
    }
}

type Result<T> = std::result::Result<T, AuditError>;

/// One problem `audit verify` found.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Finding {
    pub code: Code,
    pub commit: Option<String>,
    pub detail: String,
}

#[derive(Debug, Default, Serialize)]
pub struct VerifyReport {
    pub branch: String,
    pub adoption: Option<String>,
    pub commits_checked: usize,
    pub merges_verified: usize,
    pub signatures_verified: usize,
    pub ledger_entries: u64,
    /// The Merkle root of the ledger's entries (hex): with `ledger_entries`, the checkpoint to
    /// publish or compare out of band.
    pub ledger_root: Option<String>,
    pub checkpoints_verified: usize,
    /// The gate key's history the ledger records: each rotation, each recovery from a lost key
    /// (shown as such, with the entries the new key signed before its merge recorded it).
    pub gate_keys: Vec<String>,
    pub findings: Vec<Finding>,
}

/// What the ledger says about merges and proposals, indexed while streaming its entries.
#[derive(Default)]
struct LedgerIndex {
    adopted: Option<String>,
    merged: HashMap<String, MergedRecord>,
    /// Per proposal: the pull request numbers the ledger opened or submitted it as, and its
    /// proposer. These facts come from the ledger alone, never from a forge's editable record.
    proposals: HashMap<String, ProposalFacts>,
    /// Rejections recorded per proposal, whichever pull request carried them: a merge must hold
    /// against them too, even if the merge commit does not carry them.
    rejections: HashMap<String, Vec<(u64, RawToken)>>,
    /// Events that contradict what the ledger recorded before them (an abort after a merge
    /// completed): each is a finding.
    contradictions: Vec<String>,
    /// Tokens recorded with the ledger checkpoint their signer saw, and where they were recorded.
    claims: Vec<(u64, i64, String, RawToken)>,
    /// The time of the latest entry, to check that ledger time never goes backwards.
    last_at: Option<i64>,
    /// Merkle root after each entry (index i = root of size i + 1).
    roots: Vec<Hash>,
    /// When and where a forge was last asked to merge (proposal, pull, base, head, tree): a
    /// merge recorded later is judged from there.
    requested: HashMap<RequestKey, (i64, u64)>,
    /// Alarms the gate recorded (proposal, pull, code, detail): each is a finding.
    alarms: Vec<(String, u64, String, String)>,
    /// Gate key rotations (seq, merge commit, new key as an OpenSSH line, recovered), oldest
    /// first.
    rotations: Vec<(u64, String, String, bool)>,
}

/// What the ledger recorded when a proposal was opened (locally, or on GitHub).
#[derive(Default)]
struct ProposalFacts {
    pulls: Vec<u64>,
    proposer: Option<String>,
    /// Who wrote it and what it declared, from its `proposal-opened` entry.
    provenance: crate::panel::Provenance,
    /// The review panel's verdicts recorded for it, with their ledger positions.
    reviews: Vec<(u64, crate::governance::review::RecordedReview)>,
    /// Where `atelier cycle` first registered a metric for it.
    registered: Option<u64>,
    /// The (head, base) its evidence was recorded for, with their positions.
    evidence: Vec<(u64, (String, String))>,
}

/// A merge request's identity: proposal, pull, base, head, tree.
type RequestKey = (String, u64, String, String, String);

struct MergedRecord {
    proposal: String,
    pull: u64,
    at: i64,
    /// The ledger position of the first record of this merge (merge-started).
    seq: u64,
    base: String,
    head: String,
    tree: String,
    seen_on_branch: bool,
    /// Whether a `merged` entry (not only `merge-started`) records it.
    completed: bool,
    aborted: bool,
}

fn finding(code: Code, commit: Option<String>, detail: String) -> Finding {
    Finding {
        code,
        commit,
        detail,
    }
}

/// Every distinct gate public key committed on the branch from the adoption point on.
fn gate_keys(repo: &Repository, commits: &[Oid]) -> Result<Vec<VerifyingKey>> {
    let mut seen = Vec::new();
    let mut keys = Vec::new();
    for c in commits {
        let tree = repo.find_commit(*c)?.tree()?;
        let Ok(entry) = tree.get_path(std::path::Path::new(GATE_KEY_PATH)) else {
            continue;
        };
        if seen.contains(&entry.id()) {
            continue;
        }
        seen.push(entry.id());
        let text = String::from_utf8_lossy(repo.find_blob(entry.id())?.content()).into_owned();
        if let Ok(k) = ssh_key::PublicKey::from_openssh(text.trim()) {
            if let Some(ed) = k.key_data().ed25519() {
                if let Ok(vk) = VerifyingKey::from_bytes(&ed.0) {
                    keys.push(vk);
                }
            }
        }
    }
    Ok(keys)
}

/// Streams the ledger's entries once: checks sequence and checkpoints, builds the index.
fn check_ledger(
    repo: &Repository,
    repository: &str,
    keys: &[VerifyingKey],
    report: &mut VerifyReport,
) -> Result<Option<LedgerIndex>> {
    let Some(tip) = ledger::tip(repo)? else {
        return Ok(None);
    };
    let mut index = LedgerIndex::default();
    let tree = repo.find_commit(tip)?.tree()?;
    let mut builder = RootBuilder::new();
    let mut count: u64 = 0;
    if let Some(e) = tree
        .get_name("entries")
        .filter(|e| e.kind() == Some(ObjectType::Tree))
    {
        let dir = repo.find_tree(e.id())?;
        let mut chunks: Vec<(String, Oid)> = dir
            .iter()
            .map(|e| (e.name().unwrap_or("").to_string(), e.id()))
            .collect();
        chunks.sort();
        for (name, id) in chunks {
            let Ok(blob) = repo.find_blob(id) else {
                report.findings.push(finding(
                    Code::LedgerMalformed,
                    None,
                    format!("ledger entries/{name} is not a file"),
                ));
                continue;
            };
            let text = String::from_utf8_lossy(blob.content());
            for line in text.lines() {
                builder.push(merkle::leaf_hash(line.as_bytes()));
                index.roots.push(builder.root());
                let position = count;
                count += 1;
                match Entry::parse(line) {
                    Err(e) => report.findings.push(finding(
                        Code::LedgerMalformed,
                        None,
                        format!(
                            "ledger entries/{name}, entry {position}: not a ledger entry ({e})"
                        ),
                    )),
                    Ok(entry) => {
                        if entry.seq != position {
                            report.findings.push(finding(
                                Code::LedgerSequence,
                                None,
                                format!(
                                    "entry at position {position} carries seq {}: entries were removed, reordered or inserted",
                                    entry.seq
                                ),
                            ));
                        }
                        let at = parse_rfc3339(&entry.at).ok();
                        match (index.last_at, at) {
                            (_, None) => report.findings.push(finding(
                                Code::LedgerMalformed,
                                None,
                                format!("entry {position}: `at` is not a time: {}", entry.at),
                            )),
                            (Some(last), Some(t)) if t < last => report.findings.push(finding(
                                Code::LedgerTimeReversed,
                                None,
                                format!(
                                    "entry {position} is dated {}, before the entry preceding it: ledger time never goes backwards (was the clock turned back to revive expired approvals?)",
                                    entry.at
                                ),
                            )),
                            (_, Some(t)) => index.last_at = Some(t),
                        }
                        index_entry(&mut index, entry);
                    }
                }
            }
        }
    }
    report.ledger_entries = count;
    // The current checkpoint and every earlier one in the ledger ref's history.
    let origin = ledger::origin(repository);
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.simplify_first_parent()?;
    let mut notes = Vec::new();
    for oid in walk {
        let oid = oid?;
        let tree = repo.find_commit(oid)?.tree()?;
        let Some(entry) = tree.get_name("checkpoint") else {
            report.findings.push(finding(
                Code::LedgerMalformed,
                None,
                format!("ledger commit {oid} has no checkpoint"),
            ));
            continue;
        };
        let note = String::from_utf8_lossy(repo.find_blob(entry.id())?.content()).into_owned();
        notes.push((oid, note));
    }
    // Which key signs each checkpoint. Appends that begin before the first recorded rotation
    // may be signed by any gate key the branch published (older versions rotated without
    // recording it); from then on the chain decides, append by append: the key of the last
    // rotation recorded before the append's first new entry (the append that records a
    // rotation is signed by the old key). A recovery (the old key lost) is the exception the
    // constitution quorum approved: the appends from the new key's first signature up to the
    // recovery's entry are signed by the new key.
    let first_rotation = index.rotations.first().map(|r| r.0);
    let in_force = |first_new: u64| -> Option<VerifyingKey> {
        let mut key = None;
        for (seq, _, line, _) in &index.rotations {
            if *seq < first_new {
                key = crate::keys::parse_public_key(line);
            }
        }
        key
    };
    let recovery_for = |first_new: u64| -> Option<(u64, VerifyingKey)> {
        index
            .rotations
            .iter()
            .find(|(seq, _, _, recovered)| *recovered && *seq >= first_new)
            .and_then(|(seq, _, line, _)| Some((*seq, crate::keys::parse_public_key(line)?)))
    };
    let mut recovered_from: std::collections::BTreeMap<u64, u64> = Default::default();
    let mut latest = true;
    for (i, (oid, note)) in notes.iter().enumerate() {
        let oid = *oid;
        let first_new = notes
            .get(i + 1)
            .and_then(|(_, older)| Checkpoint::parse_unverified(older).ok())
            .map_or(0, |c| c.size);
        let chained = first_rotation.is_some_and(|r| first_new > r);
        let key = in_force(first_new);
        let chain_keys: Vec<VerifyingKey> = key.into_iter().collect();
        let trusted = if chained { &chain_keys[..] } else { keys };
        let mut verified = Checkpoint::verify(note, ledger::KEY_NAME, trusted);
        if verified.is_err() {
            if let Some((seq, new)) = recovery_for(first_new) {
                if let Ok(cp) = Checkpoint::verify(note, ledger::KEY_NAME, &[new]) {
                    let start = recovered_from.entry(seq).or_insert(first_new);
                    *start = (*start).min(first_new);
                    verified = Ok(cp);
                }
            }
        }
        match verified {
            Err(e) => report.findings.push(finding(
                Code::LedgerSignature,
                None,
                if chained {
                    format!(
                        "checkpoint in ledger commit {oid} (appending from entry {first_new}) is not signed by the gate key in force there ({}), following the rotations the ledger records: {e}",
                        key.map_or("none".into(), |k| crate::keys::fingerprint(&k))
                    )
                } else {
                    format!("checkpoint in ledger commit {oid} does not verify under the gate key in {GATE_KEY_PATH}: {e}")
                },
            )),
            Ok(cp) => {
                report.checkpoints_verified += 1;
                report.signatures_verified += 1;
                if cp.origin != origin {
                    report.findings.push(finding(
                        Code::LedgerOrigin,
                        None,
                        format!("checkpoint in ledger commit {oid}: origin expected `{origin}`, found `{}`", cp.origin),
                    ));
                }
                if latest && cp.size != count {
                    report.findings.push(finding(
                        Code::LedgerSizeMismatch,
                        None,
                        format!(
                            "the latest checkpoint covers {} entries but the ledger holds {count}: entries were {}",
                            cp.size,
                            if count < cp.size { "removed (truncation)" } else { "added without a checkpoint" }
                        ),
                    ));
                }
                let ours = if cp.size == 0 { Some(merkle::empty_root()) } else { index.roots.get(cp.size as usize - 1).copied() };
                match ours {
                    None => {
                        if !latest {
                            report.findings.push(finding(
                                Code::LedgerTruncated,
                                None,
                                format!("an earlier checkpoint (ledger commit {oid}) covers {} entries; only {count} remain", cp.size),
                            ));
                        }
                    }
                    Some(root) if root != cp.root => report.findings.push(finding(
                        if latest { Code::LedgerRootMismatch } else { Code::LedgerInconsistent },
                        None,
                        format!(
                            "checkpoint of size {} (ledger commit {oid}) has root {}, but the entries hash to {}: an entry was edited, reordered or inserted",
                            cp.size,
                            hex::encode(cp.root),
                            hex::encode(root)
                        ),
                    )),
                    Some(_) => {}
                }
            }
        }
        latest = false;
    }
    for (seq, commit, line, recovered) in &index.rotations {
        let fp = crate::keys::key_fingerprint(line);
        let merge = commit.get(..12).unwrap_or(commit);
        report.gate_keys.push(if *recovered {
            match recovered_from.get(seq) {
                Some(from) if from < seq => format!(
                    "entry {seq}: gate key RECOVERED (the old key was lost) to {fp} by merge {merge}, approved by the constitution quorum; entries {from}..{seq} were signed by the new key before the recovery merged"
                ),
                _ => format!(
                    "entry {seq}: gate key RECOVERED (the old key was lost) to {fp} by merge {merge}, approved by the constitution quorum"
                ),
            }
        } else {
            format!("entry {seq}: gate key rotated to {fp} by merge {merge}")
        });
    }
    Ok(Some(index))
}

fn index_entry(index: &mut LedgerIndex, entry: Entry) {
    let at = parse_rfc3339(&entry.at).unwrap_or(i64::MIN);
    // A merge request stands only until the next event of its proposal (the `merged` that
    // concludes it): anything else recorded in between means a later merge is not that request.
    if !matches!(
        entry.event,
        Event::MergeRequested { .. }
            | Event::Merged(_)
            | Event::MergeStarted(_)
            | Event::ReviewRecorded { .. }
            | Event::MetricRegistered { .. }
            | Event::EvidenceRecorded { .. }
    ) && !entry.event.is_approvals_only()
    {
        if let Some(p) = entry.event.proposal() {
            index.requested.retain(|k, _| k.0 != p);
        }
    }
    let completed = matches!(entry.event, Event::Merged { .. });
    let seq = entry.seq;
    if let Event::GateKeyRotated {
        commit,
        key,
        recovered,
        ..
    } = &entry.event
    {
        index
            .rotations
            .push((seq, commit.clone(), key.clone(), *recovered));
    }
    match entry.event {
        Event::Adopted { commit, .. } if index.adopted.is_none() => index.adopted = Some(commit),
        Event::ProposalOpened {
            proposal,
            pull,
            proposer,
            origin,
            declared,
            ..
        } => {
            let facts = index.proposals.entry(proposal).or_default();
            if !facts.pulls.contains(&pull) {
                facts.pulls.push(pull);
            }
            if facts.proposer.is_none() {
                facts.proposer = proposer;
                facts.provenance = crate::panel::Provenance { origin, declared };
            }
        }
        Event::ReviewRecorded {
            proposal, review, ..
        } => {
            index
                .proposals
                .entry(proposal)
                .or_default()
                .reviews
                .push((seq, review));
        }
        Event::MetricRegistered { proposal, .. } => {
            let facts = index.proposals.entry(proposal).or_default();
            facts.registered = facts.registered.or(Some(seq));
        }
        Event::EvidenceRecorded {
            proposal,
            head,
            base,
            ..
        } => {
            index
                .proposals
                .entry(proposal)
                .or_default()
                .evidence
                .push((seq, (head, base)));
        }
        Event::Submitted {
            proposal,
            pull,
            proposer,
            ..
        } => {
            let facts = index.proposals.entry(proposal).or_default();
            if !facts.pulls.contains(&pull) {
                facts.pulls.push(pull);
            }
            // The first record names the proposer; a later `submitted` repeats it.
            if facts.proposer.is_none() {
                facts.proposer = proposer;
            }
        }
        Event::TokenRecorded {
            proposal,
            pull: _,
            token,
            ..
        } => {
            for t in RawToken::extract_all(&token) {
                let payload = crate::governance::token::Payload::parse(&t.payload);
                // A checkpoint the ledger before this entry extends is no claim against it;
                // only the others are kept, to be judged once the whole ledger is read (a
                // signature check each, so an honest ledger costs nothing here).
                let disputed = payload
                    .as_ref()
                    .ok()
                    .and_then(|p| p.checkpoint.as_ref())
                    .is_some_and(|cp| {
                        let ours = match cp.size {
                            0 => Some(merkle::empty_root()),
                            n if n <= seq => index.roots.get(n as usize - 1).copied(),
                            _ => None,
                        };
                        ours.map(hex::encode).as_deref() != Some(cp.root.as_str())
                    });
                if disputed {
                    index.claims.push((seq, at, proposal.clone(), t.clone()));
                }
                let reject =
                    payload.is_ok_and(|p| p.decision == crate::governance::token::Verdict::Reject);
                if reject {
                    index
                        .rejections
                        .entry(proposal.clone())
                        .or_default()
                        .push((seq, t));
                }
            }
        }
        Event::MergeStarted(m) | Event::Merged(m) => {
            let MergeRecord {
                proposal,
                pull,
                commit,
                base,
                head,
                tree,
            } = m;
            // A GitHub merge that concludes a standing request is judged as of the request: its
            // time, and the rejections recorded before it (the gate concludes only merges its
            // own account made, so the decision was the request's).
            let (at, seq) = index
                .requested
                .get(&(
                    proposal.clone(),
                    pull,
                    base.clone(),
                    head.clone(),
                    tree.clone(),
                ))
                .copied()
                .unwrap_or((at, seq));
            let rec = index.merged.entry(commit).or_insert(MergedRecord {
                proposal,
                pull,
                at,
                seq,
                base,
                head,
                tree,
                seen_on_branch: false,
                completed: false,
                aborted: false,
            });
            rec.completed |= completed;
        }
        Event::MergeAborted { commit, .. } => {
            if let Some(rec) = index.merged.get_mut(&commit) {
                if rec.completed {
                    index.contradictions.push(format!(
                        "entry {seq} records the merge of proposal {} as {commit} aborted, but an earlier entry records it completed: a completed merge cannot be undone by an entry (was the branch rewound?)",
                        rec.proposal
                    ));
                } else {
                    rec.aborted = true;
                }
            }
        }
        Event::Alarm {
            proposal,
            pull,
            code,
            detail,
        } => index.alarms.push((proposal, pull, code, detail)),
        Event::MergeRequested {
            proposal,
            pull,
            base,
            head,
            tree,
        } => {
            // The latest request is the one a later `merged` concludes.
            index
                .requested
                .insert((proposal, pull, base, head, tree), (at, seq));
        }
        _ => {}
    }
}

type PolicyResult = Arc<std::result::Result<Policy, PolicyError>>;

/// Policies parsed once per distinct set of policy blobs.
#[derive(Default)]
struct PolicyCache {
    /// The last merge examined and its tree id.
    last_tree: Option<(Oid, Oid)>,
    parsed: HashMap<[Oid; 3], PolicyResult>,
    digests: HashMap<[Oid; 3], String>,
    /// Review panels, by the id of the base's `reviewers` tree.
    panels: HashMap<Option<Oid>, Arc<crate::panel::Panel>>,
}

fn blob_or_zero(repo: &Repository, tree: &git2::Tree<'_>, path: &str) -> Oid {
    let _ = repo;
    tree.get_path(std::path::Path::new(path))
        .map(|e| e.id())
        .unwrap_or_else(|_| Oid::zero())
}

impl PolicyCache {
    fn policy(&mut self, repo: &Repository, tree: &git2::Tree<'_>) -> Result<PolicyResult> {
        let key = [
            blob_or_zero(repo, tree, crate::governance::policy::GOVERNANCE_PATH),
            blob_or_zero(repo, tree, crate::governance::policy::ALLOWED_SIGNERS_PATH),
            blob_or_zero(repo, tree, GATE_KEY_PATH),
        ];
        if let Some(p) = self.parsed.get(&key) {
            return Ok(p.clone());
        }
        let p = Arc::new(Policy::load(&git::policy_files(repo, tree)?));
        self.parsed.insert(key, p.clone());
        Ok(p)
    }

    fn panel(
        &mut self,
        repo: &Repository,
        tree: &git2::Tree<'_>,
    ) -> Result<Arc<crate::panel::Panel>> {
        let key = crate::panel::key(tree);
        if let Some(p) = self.panels.get(&key) {
            return Ok(p.clone());
        }
        let p = Arc::new(crate::panel::at(repo, tree)?);
        self.panels.insert(key, p.clone());
        Ok(p)
    }

    fn digest(&mut self, repo: &Repository, tree: &git2::Tree<'_>) -> Result<String> {
        let key = [
            blob_or_zero(repo, tree, "policies"),
            blob_or_zero(repo, tree, "reviewers"),
            blob_or_zero(repo, tree, "GOVERNANCE.md"),
        ];
        if let Some(d) = self.digests.get(&key) {
            return Ok(d.clone());
        }
        let d = policy_digest(&git::digest_files(repo, tree)?);
        self.digests.insert(key, d.clone());
        Ok(d)
    }
}

/// One merge's gate inputs, gathered from git so the gate can run on any thread.
struct MergeCheck {
    commit: String,
    change: Change,
    base_policy: PolicyResult,
    new_policy: PolicyResult,
    tokens: Vec<RawToken>,
    panel: crate::governance::review::PanelInput,
    evidence: crate::governance::decision::Evidence,
    now: i64,
}

/// Commits a worker takes at a time.
const SLICE: usize = 32;

/// Verifies the history of `branch`. Findings are values; only IO problems are errors.
pub fn verify(
    repo: &Repository,
    repository: &str,
    branch: &str,
    jobs: usize,
) -> Result<VerifyReport> {
    let mut report = VerifyReport {
        branch: branch.to_string(),
        ..VerifyReport::default()
    };
    let tip = git::branch_tip(repo, branch)?;
    let mut walk = repo.revwalk()?;
    walk.push(tip)?;
    walk.simplify_first_parent()?;
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)?;
    let mut line = Vec::new();
    let mut adopted_at = None;
    for oid in walk {
        let oid = oid?;
        if adopted_at.is_none() {
            let tree = repo.find_commit(oid)?.tree()?;
            if crate::governance::policy::adopts::<crate::git::GitError>(&|p| {
                Ok(git::read_file(repo, &tree, p)?.is_some())
            })? {
                adopted_at = Some(oid);
                line.push(oid);
            }
        } else {
            line.push(oid);
        }
    }
    let Some(adoption) = adopted_at else {
        report.findings.push(finding(
            Code::NotAdopted,
            None,
            format!(
                "no commit on {branch} carries both {} and {}: atelier was never adopted here",
                crate::governance::policy::GOVERNANCE_PATH,
                crate::governance::policy::GATE_KEY_PATH
            ),
        ));
        // A ledger that records an adoption says otherwise: the branch was rewritten.
        if let Ok(Some(adopted)) = crate::audit::ledger::adopted_commit(repo) {
            report.findings.push(finding(
                Code::AdoptionMismatch,
                Some(adopted.clone()),
                format!(
                    "the ledger records adoption at {adopted}, but no commit on {branch} carries the policy and the gate's public key: the branch was rewritten from before adoption"
                ),
            ));
        }
        return Ok(report);
    };
    report.adoption = Some(adoption.to_string());
    let keys = gate_keys(repo, &line)?;
    let ledger = check_ledger(repo, repository, &keys, &mut report)?;
    if ledger.is_none() && line.len() > 1 {
        report.findings.push(finding(
            Code::LedgerMissing,
            None,
            format!(
                "there is no {} in this repository, yet {branch} has {} commit(s) after adoption; fetch it (`git fetch origin {}:{}`) or the history cannot be accounted for",
                ledger::REF,
                line.len() - 1,
                ledger::REF,
                ledger::REF
            ),
        ));
        // Without the ledger no commit can be judged: nothing is accused of bypassing the gate
        // on the strength of a record that is merely absent here.
        return Ok(report);
    }
    let mut index = ledger.unwrap_or_default();
    if let Some(adopted) = &index.adopted {
        if *adopted != adoption.to_string() {
            report.findings.push(finding(
                Code::AdoptionMismatch,
                Some(adoption.to_string()),
                format!("the ledger records adoption at {adopted}, but the first commit on {branch} carrying the policy and the gate's public key is {adoption}"),
            ));
        }
    }
    // A rotation stands only for a recorded merge whose tree publishes that key: anything else
    // is the gate key's holder naming a successor nobody approved.
    for (seq, commit, key, _) in &index.rotations {
        let published = crate::keys::published_gate_key(repo, commit).ok().flatten();
        let named = crate::keys::parse_public_key(key);
        if !index.merged.contains_key(commit) || published.is_none() || published != named {
            report.findings.push(finding(
                Code::LedgerContradiction,
                Some(commit.clone()),
                format!(
                    "entry {seq} rotates the gate key to {}, but {commit} is not a recorded merge publishing that key in {GATE_KEY_PATH}",
                    crate::keys::key_fingerprint(key)
                ),
            ));
        }
    }
    // A history walk reads each commit, large tree and ledger blob about once: libgit2's object
    // cache would only grow with the history (about 13 KiB per merge), so those are not cached.
    // SAFETY: this only sets libgit2's global cache limits; it is called before any handle
    // below is opened and never concurrently with another libgit2 option call.
    unsafe {
        // Small trees (the policy directories every merge reads again) stay cached.
        let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Tree, 1024);
        let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Commit, 0);
        let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Blob, 0);
    }
    // Each worker opens its own repository handle (git2 handles are not shared between
    // threads), takes the next slice of commits, gathers each merge's inputs and runs the gate.
    witnesses(repo, repository, branch, &mut index, &mut report)?;
    report.ledger_root = index.roots.last().map(hex::encode);
    let roots = std::mem::take(&mut index.roots);
    let commits: Vec<Oid> = line.iter().skip(1).copied().collect();
    report.commits_checked = commits.len();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let path = repo.path().to_path_buf();
    let index_ref = &index;
    let roots_ref = &roots;
    let keys_ref = &keys[..];
    let outcomes: Vec<Result<Vec<Outcome>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                let (next, path, commits) = (&next, &path, &commits);
                s.spawn(move || -> Result<Vec<Outcome>> {
                    let repo = Repository::open(path)?;
                    let mut cache = PolicyCache::default();
                    let mut out = Vec::new();
                    loop {
                        let start = next.fetch_add(SLICE, std::sync::atomic::Ordering::Relaxed);
                        if start >= commits.len() {
                            return Ok(out);
                        }
                        for (i, oid) in commits.iter().enumerate().skip(start).take(SLICE) {
                            let o = examine(
                                &repo, &mut cache, index_ref, roots_ref, keys_ref, repository,
                                branch, *oid,
                            )?;
                            out.push(Outcome { seq: i, ..o });
                        }
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a verification thread does not panic"))
            .collect()
    });
    let mut all = Vec::new();
    for o in outcomes {
        all.extend(o?);
    }
    all.sort_by_key(|o| o.seq);
    for o in all {
        if let Some(sha) = o.seen {
            if let Some(rec) = index.merged.get_mut(&sha) {
                rec.seen_on_branch = true;
            }
        }
        if o.verified {
            report.merges_verified += 1;
        }
        report.signatures_verified += o.signatures;
        report.findings.extend(o.anchor);
        report.findings.extend(o.finding);
    }
    let mut stray: Vec<(&String, &MergedRecord)> = index
        .merged
        .iter()
        .filter(|(_, r)| !r.seen_on_branch && r.completed)
        .collect();
    stray.sort_by_key(|(c, _)| c.as_str());
    for (c, r) in stray {
        report.findings.push(finding(
            Code::MergeNotOnBranch,
            Some(c.clone()),
            format!("the ledger records proposal {} merged as {c}, which is not on {branch}'s first-parent history (was the branch rewritten?)", r.proposal),
        ));
    }
    for detail in std::mem::take(&mut index.contradictions) {
        report
            .findings
            .push(finding(Code::LedgerContradiction, None, detail));
    }
    for (proposal, pull, code, detail) in std::mem::take(&mut index.alarms) {
        report.findings.push(finding(
            Code::AlarmRecorded,
            None,
            format!("the gate recorded an alarm for proposal {proposal} (pull request #{pull}): {code}: {detail}"),
        ));
    }
    // A ledger that verified cleanly becomes this machine's floor, pinned to the gate key that
    // signed its latest checkpoint: a later, shorter one is a rollback.
    if report.findings.is_empty() {
        if let (Some(root), Some(adopted)) = (roots.last(), &index.adopted) {
            witness::remember_identity(
                repo.workdir().unwrap_or(repo.path()),
                &ledger::origin(repository),
                adopted,
            )?;
            if let Some(key) = latest_signer(repo, repository, &keys)? {
                witness::remember(
                    adopted,
                    &ledger::origin(repository),
                    roots.len() as u64,
                    root,
                    &key,
                    &format!("a clean audit verify of {}", repo.path().display()),
                )?;
            }
        }
    }
    Ok(report)
}

/// Which of `keys` signed the ledger's current checkpoint.
fn latest_signer(
    repo: &Repository,
    repository: &str,
    keys: &[VerifyingKey],
) -> Result<Option<[u8; 32]>> {
    let Some(tip) = ledger::tip(repo)? else {
        return Ok(None);
    };
    let tree = repo.find_commit(tip)?.tree()?;
    let Some(entry) = tree.get_name("checkpoint") else {
        return Ok(None);
    };
    let note = String::from_utf8_lossy(repo.find_blob(entry.id())?.content()).into_owned();
    Ok(keys
        .iter()
        .find(|k| {
            Checkpoint::verify(&note, ledger::KEY_NAME, std::slice::from_ref(*k))
                .is_ok_and(|cp| cp.origin == ledger::origin(repository))
        })
        .map(|k| k.to_bytes()))
}

/// The witnesses other than the ledger: this clone's memory of the largest ledger it verified,
/// and the checkpoints that listed signers' recorded tokens saw. A ledger that does not extend
/// one of them was rewound (`E_LEDGER_ROLLBACK`).
fn witnesses(
    repo: &Repository,
    repository: &str,
    branch: &str,
    index: &mut LedgerIndex,
    report: &mut VerifyReport,
) -> Result<()> {
    let adoption = index
        .adopted
        .clone()
        .or_else(|| report.adoption.clone())
        .unwrap_or_default();
    let root = repo.workdir().unwrap_or(repo.path()).to_path_buf();
    if let Err(e) = witness::check_identity(&root, &ledger::origin(repository), &adoption) {
        report
            .findings
            .push(finding(Code::AdoptionMismatch, None, e.to_string()));
    }
    match witness::load(&adoption, &ledger::origin(repository)) {
        // Without any ledger, `E_LEDGER_MISSING` already says to fetch it.
        Ok(Some(_)) if index.roots.is_empty() => {}
        Ok(Some(memory)) => {
            let floor = memory.floor;
            if let Some(why) = not_a_prefix(&index.roots, floor.size, &floor.root) {
                report.findings.push(finding(
                    Code::LedgerRollback,
                    None,
                    format!(
                        "{} names a ledger of {} entries with root {} that this machine verified, but {why}: the ledger was rewound or replaced since (or this clone has not fetched the newest ledger: `git fetch origin {r}:{r}`)",
                        floor.source,
                        floor.size,
                        hex::encode(floor.root),
                        r = ledger::REF
                    ),
                ));
            }
        }
        Ok(None) => {}
        Err(e) => report
            .findings
            .push(finding(Code::LedgerRollback, None, e.to_string())),
    }
    let claims = std::mem::take(&mut index.claims);
    if claims.is_empty() {
        return Ok(());
    }
    let tree = repo.find_commit(git::branch_tip(repo, branch)?)?.tree()?;
    let Ok(policy) = Policy::load(&git::policy_files(repo, &tree)?) else {
        return Ok(());
    };
    for (seq, at, proposal, raw) in claims {
        let Ok(v) = crate::governance::token::verify(&raw) else {
            continue;
        };
        // Only a token bound to this repository and the proposal it was recorded for is a
        // witness of this ledger (a listed signer's tokens from other repositories are public).
        if v.payload.repository != repository || v.payload.proposal != proposal {
            continue;
        }
        // Only someone who could approve when the token was recorded is a witness.
        let Some(principal) = policy
            .signers
            .find(&v.key)
            .into_iter()
            .find(|e| {
                e.allows_namespace(crate::governance::token::NAMESPACE)
                    && e.validity_at(at).is_none()
                    && policy.is_revoked(&v.fingerprint).is_none()
                    && !policy
                        .bots
                        .iter()
                        .any(|b| b.eq_ignore_ascii_case(&e.principal))
            })
            .map(|e| e.principal.clone())
        else {
            continue;
        };
        let Some(cp) = v.payload.checkpoint.as_ref() else {
            continue;
        };
        let Some(root) = hex::decode(&cp.root)
            .ok()
            .and_then(|b| <Hash>::try_from(b.as_slice()).ok())
        else {
            continue;
        };
        // The token was recorded at `seq`, after its signer saw `cp.size` entries.
        let why = if cp.size > seq {
            Some(format!(
                "it was recorded at position {seq}, before that many entries existed"
            ))
        } else {
            not_a_prefix(&index.roots, cp.size, &root)
        };
        if let Some(why) = why {
            report.findings.push(finding(
                Code::LedgerRollback,
                None,
                format!(
                    "the token {principal} signed for proposal {} saw a ledger of {} entries with root {}, but {why}: the ledger was rewound or replaced",
                    v.payload.proposal, cp.size, cp.root
                ),
            ));
        }
    }
    Ok(())
}

/// Why the ledger (its roots by size) is not an extension of a checkpoint of `size` with `root`.
fn not_a_prefix(roots: &[Hash], size: u64, root: &Hash) -> Option<String> {
    let ours = if size == 0 {
        merkle::empty_root()
    } else {
        match roots.get(size as usize - 1) {
            Some(r) => *r,
            None => return Some(format!("the ledger holds only {} entries", roots.len())),
        }
    };
    (ours != *root).then(|| {
        format!(
            "the ledger's first {size} entries hash to {}",
            hex::encode(ours)
        )
    })
}

/// What examining one commit on the branch found.
#[derive(Default)]
struct Outcome {
    seq: usize,
    /// The commit, when the ledger records it as a merge.
    seen: Option<String>,
    verified: bool,
    signatures: usize,
    finding: Option<Finding>,
    /// A checkpoint the commit carries that the ledger does not extend.
    anchor: Option<Finding>,
}

/// Checks one commit after adoption: recorded in the ledger, shaped as recorded, and allowed by
/// the gate under the policy of its base.
#[allow(clippy::too_many_arguments)]
fn examine(
    repo: &Repository,
    cache: &mut PolicyCache,
    index: &LedgerIndex,
    roots: &[Hash],
    keys: &[VerifyingKey],
    repository: &str,
    branch: &str,
    oid: Oid,
) -> Result<Outcome> {
    let commit = repo.find_commit(oid)?;
    let sha = oid.to_string();
    // The branch anchors the ledger: every checkpoint a merge commit carries must be a prefix
    // of the ledger.
    // (Without a ledger at all, `E_LEDGER_MISSING` says it once.)
    let anchor = ledger::Anchor::of_commit(&commit, &ledger::origin(repository), keys)
        .filter(|_| !roots.is_empty())
        .and_then(|a| {
            let why = not_a_prefix(roots, a.size, &a.root)?;
            Some(finding(
                Code::LedgerRollback,
                Some(sha.clone()),
                format!(
                    "merge commit {sha} on {branch} carries the gate-signed ledger checkpoint of size {} (root {}), but {why}: the ledger was rewound or replaced (or the ledger that goes with this branch was not fetched: `git fetch origin {r}:{r}`)",
                    a.size,
                    hex::encode(a.root),
                    r = ledger::REF
                ),
            ))
        });
    let mut outcome = examine_merge(repo, cache, index, roots, repository, branch, &commit)?;
    outcome.anchor = anchor;
    Ok(outcome)
}

/// [`examine`] for what the ledger says of the commit.
fn examine_merge(
    repo: &Repository,
    cache: &mut PolicyCache,
    index: &LedgerIndex,
    roots: &[Hash],
    repository: &str,
    branch: &str,
    commit: &git2::Commit<'_>,
) -> Result<Outcome> {
    let oid = commit.id();
    let sha = oid.to_string();
    let Some(rec) = index.merged.get(&sha) else {
        let author = commit.author();
        return Ok(Outcome {
            finding: Some(finding(
                Code::UnledgeredCommit,
                Some(sha.clone()),
                format!(
                    "commit {sha} by {} <{}> (\"{}\") is on {branch} after adoption but is not a merge recorded in the ledger: it bypassed the gate",
                    author.name().unwrap_or("?"),
                    author.email().unwrap_or("?"),
                    commit.summary().unwrap_or("")
                ),
            )),
            ..Outcome::default()
        });
    };
    // A recorded merge that fails a check before the gate is re-run.
    let refused = |code: Code, detail: String| Outcome {
        seen: Some(sha.clone()),
        finding: Some(finding(code, Some(sha.clone()), detail)),
        ..Outcome::default()
    };
    if rec.aborted {
        return Ok(refused(
            Code::AbortedMergeLanded,
            format!(
                "commit {sha} is on {branch}, but the ledger records its merge of proposal {} as aborted (the gate never let it land): the branch was moved to it by hand",
                rec.proposal
            ),
        ));
    }
    let facts = index.proposals.get(&rec.proposal);
    if !facts.is_some_and(|f| f.pulls.contains(&rec.pull)) {
        return Ok(refused(
                Code::MergeMismatch,
                format!(
                    "the ledger records merge {sha} as proposal {} through pull request {}, but it opened that proposal as pull request(s) [{}]: the forge record was renumbered",
                    rec.proposal,
                    rec.pull,
                    facts
                        .map(|f| f.pulls.iter().map(u64::to_string).collect::<Vec<_>>().join(", "))
                        .unwrap_or_default()
                ),
            ));
    }
    let parents: Vec<String> = commit.parent_ids().map(|p| p.to_string()).collect();
    if parents != [rec.base.clone(), rec.head.clone()] || commit.tree_id().to_string() != rec.tree {
        return Ok(refused(
            Code::MergeMismatch,
            format!(
                "the ledger records proposal {} as base {} + head {} = tree {}, but commit {sha} has parents [{}] and tree {}",
                rec.proposal,
                rec.base,
                rec.head,
                rec.tree,
                parents.join(", "),
                commit.tree_id()
            ),
        ));
    }
    // The previous merge on the branch is usually this one's base: reuse its tree.
    let base_oid = Oid::from_str(&rec.base)?;
    let base_tree = match cache.last_tree.take() {
        Some((c, t)) if c == base_oid => repo.find_tree(t)?,
        _ => repo.find_commit(base_oid)?.tree()?,
    };
    cache.last_tree = Some((oid, commit.tree_id()));
    let tree = commit.tree()?;
    let mut tokens = RawToken::extract_all(commit.message().unwrap_or(""));
    // Rejections recorded before the merge began, whichever pull request carried them: one
    // recorded later cannot condemn a completed merge. A merge the ledger never records as
    // completed (a crash, or a branch moved by hand) is weighed against every rejection.
    let until = if rec.completed { rec.seq } else { u64::MAX };
    for (_, r) in index
        .rejections
        .get(&rec.proposal)
        .into_iter()
        .flatten()
        .filter(|(at_seq, _)| *at_seq < until)
    {
        if !tokens.contains(r) {
            tokens.push(r.clone());
        }
    }
    // The panel as the gate saw it: the built-ins re-run at the merge's base, and the verdict
    // recorded last before the merge began.
    let recorded = facts.and_then(|f| {
        f.reviews
            .iter()
            .rev()
            .find(|(at_seq, _)| *at_seq < rec.seq)
            .map(|(_, r)| r.clone())
    });
    let entries = git::changed_entries(repo, &base_tree, &tree)?;
    let defs = cache.panel(repo, &base_tree)?;
    let panel = crate::panel::weigh(
        &defs,
        &crate::panel::files_of(repo, &entries)?,
        &facts.map(|f| f.provenance.clone()).unwrap_or_default(),
        recorded,
    );
    let check = MergeCheck {
        commit: sha.clone(),
        change: Change {
            repository: repository.to_string(),
            proposal: rec.proposal.clone(),
            pull: rec.pull,
            open: true,
            base: rec.base.clone(),
            head: rec.head.clone(),
            merge_tree: Ok(rec.tree.clone()),
            changed_paths: entries.into_iter().map(|e| e.path).collect(),
            policy_digest: cache.digest(repo, &base_tree)?,
            proposer: facts.and_then(|f| f.proposer.clone()),
        },
        base_policy: cache.policy(repo, &base_tree)?,
        new_policy: cache.policy(repo, &tree)?,
        tokens,
        panel,
        evidence: match facts.and_then(|f| f.registered.filter(|r| *r < rec.seq).map(|_| f)) {
            None => crate::governance::decision::Evidence::NotACycle,
            Some(f) => crate::governance::decision::Evidence::Registered {
                recorded: f
                    .evidence
                    .iter()
                    .rev()
                    .find(|(at, _)| *at < rec.seq)
                    .map(|(_, h)| h.clone()),
            },
        },
        now: rec.at,
    };
    let (finding, signatures) = check_merge(&check, roots);
    Ok(Outcome {
        seq: 0,
        seen: Some(sha),
        verified: true,
        signatures,
        finding,
        anchor: None,
    })
}

fn check_merge(m: &MergeCheck, roots: &[Hash]) -> (Option<Finding>, usize) {
    let mut ledger_roots = BTreeMap::new();
    for t in &m.tokens {
        if let Ok(p) = crate::governance::token::Payload::parse(&t.payload) {
            if let Some(cp) = p.checkpoint {
                let root = if cp.size == 0 {
                    Some(merkle::empty_root())
                } else {
                    roots.get(cp.size as usize - 1).copied()
                };
                if let Some(r) = root {
                    ledger_roots.insert(cp.size, hex::encode(r));
                }
            }
        }
    }
    let d = decision::decide(&GateInput {
        change: &m.change,
        base_policy: &m.base_policy,
        new_policy: &m.new_policy,
        tokens: &m.tokens,
        ledger_roots: &ledger_roots,
        panel: &m.panel,
        evidence: &m.evidence,
        now: m.now,
    });
    let sigs = d.tokens.iter().filter(|t| t.fingerprint.is_some()).count();
    // A listed signer's token that saw a longer or different ledger is a witness of a rollback.
    if let Some(r) = d.unmet().find(|r| r.code == Code::LedgerRollback) {
        return (
            Some(finding(
                Code::LedgerRollback,
                Some(m.commit.clone()),
                format!(
                    "merge {} of proposal {}: a token it carries saw a ledger this one does not extend ({}): the ledger was rewound or replaced",
                    m.commit, m.change.proposal, r.found
                ),
            )),
            sigs,
        );
    }
    if d.allowed {
        return (None, sigs);
    }
    let unmet: Vec<String> = d
        .unmet()
        .map(|r| {
            format!(
                "{} ({}: expected {}, found {})",
                r.code, r.summary, r.expected, r.found
            )
        })
        .collect();
    let tokens: Vec<String> = d
        .tokens
        .iter()
        .filter(|t| !t.counted)
        .map(|t| format!("token {}: {} {}", t.index + 1, t.code_text(), t.detail))
        .collect();
    (
        Some(finding(
            Code::MergeNotApproved,
            Some(m.commit.clone()),
            format!(
                "merge {} of proposal {} does not satisfy the policy of its base: {}{}",
                m.commit,
                m.change.proposal,
                unmet.join("; "),
                if tokens.is_empty() {
                    String::new()
                } else {
                    format!("; {}", tokens.join("; "))
                }
            ),
        )),
        sigs,
    )
}

/// The ledger's entries, oldest first (for `audit log` and `audit show`).
pub fn entries(repo: &Repository) -> Result<Vec<Entry>> {
    let Some(snap) = ledger::read(repo)? else {
        return Ok(Vec::new());
    };
    snap.lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            Entry::parse(l).map_err(|reason| AuditError::MalformedEntry { index: i, reason })
        })
        .collect()
}

/// A token as `audit show` explains it: who signed it, under the policy of the base it names.
#[derive(Debug, Serialize)]
pub struct TokenStory {
    pub seq: u64,
    pub at: String,
    pub principal: Option<String>,
    pub fingerprint: Option<String>,
    pub decision: Option<String>,
    pub signature: String,
    pub token: String,
}

/// Reads who signed a recorded token (by the allowed_signers of the base the token names).
pub fn explain_token(repo: &Repository, seq: u64, at: &str, text: &str) -> TokenStory {
    let mut story = TokenStory {
        seq,
        at: at.to_string(),
        principal: None,
        fingerprint: None,
        decision: None,
        signature: "not a token".into(),
        token: text.to_string(),
    };
    let Some(raw) = RawToken::extract_all(text).into_iter().next() else {
        return story;
    };
    match crate::governance::token::verify(&raw) {
        Err(e) => story.signature = e.to_string(),
        Ok(v) => {
            story.signature = "valid".into();
            story.fingerprint = Some(v.fingerprint.clone());
            story.decision = Some(v.payload.decision.as_str().to_string());
            let principal = Oid::from_str(&v.payload.base)
                .ok()
                .and_then(|b| repo.find_commit(b).ok())
                .and_then(|c| c.tree().ok())
                .and_then(|t| git::policy_files(repo, &t).ok())
                .and_then(|f| Policy::load(&f).ok())
                .and_then(|p| p.signers.find(&v.key).first().map(|e| e.principal.clone()));
            story.principal = principal;
        }
    }
    story
}

/// Compares the adoption point found with one the auditor pinned (recorded earlier, out of
/// band): a history rewritten from its root would otherwise look self-consistent.
pub fn check_adoption_pin(report: &mut VerifyReport, pinned: &str) {
    let found = report.adoption.clone().unwrap_or_else(|| "none".into());
    let matches =
        found.len() == 40 && pinned.len() >= 7 && found.starts_with(&pinned.to_ascii_lowercase());
    if !matches {
        report.findings.push(finding(
            Code::AdoptionMismatch,
            report.adoption.clone(),
            format!("the adoption point is {found}, but --adoption pins {pinned}: the branch was rewritten from before adoption"),
        ));
    }
}
