//! `atelier audit verify` and friends: checks, with nothing but a clone, that every commit on
//! the protected branch since adoption is a merge the gate allowed under the policy of its
//! base, and that the ledger is intact (no edit, truncation, reordering or insertion).
//!
//! The walk streams: ledger entries are hashed and indexed chunk by chunk, merges are gathered
//! in batches and their tokens verified on all cores, so memory stays small as history grows.
//!
//! Here: the audit's errors, findings and report, [`verify`] in its steps, and what `audit log`
//! and `audit show` read. The ledger's entries are indexed in `index`; the ledger's own
//! integrity (sequence, time, every checkpoint under the gate key in force) is checked in
//! `ledger_checks`; the witnesses other than the ledger in `witnesses`; each commit after
//! adoption is examined, and the gate re-run, in `merges`.

use ed25519_dalek::VerifyingKey;
use git2::{Oid, Repository};
use serde::Serialize;
use thiserror::Error;

mod index;
mod ledger_checks;
mod merges;
mod witnesses;

use index::{LedgerIndex, MergedRecord};
use ledger_checks::{check_ledger, gate_keys, latest_signer};
use witnesses::witnesses;

use super::ledger::{self, Entry};
use super::merkle::Hash;
use super::witness;
use crate::git;
use crate::governance::policy::{Policy, GATE_KEY_PATH};
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

fn finding(code: Code, commit: Option<String>, detail: String) -> Finding {
    Finding {
        code,
        commit,
        detail,
    }
}

/// Limits libgit2's object cache the way a history walk wants it, for the whole process. A
/// walk reads each commit, large tree and ledger blob about once: libgit2's object cache would
/// only grow with the history (about 13 KiB per merge), so commits and blobs are not cached,
/// and trees only when small (the policy directories every merge reads again). Only memory
/// and speed depend on it, never a result. Later calls do nothing.
///
/// # Safety
///
/// libgit2 keeps these limits in C globals that every thread reads, without synchronisation,
/// whenever it caches an object, from any repository handle. So the first call must come
/// before the process starts any thread that could use libgit2: the binary calls it first
/// thing in `cli::main`, the `audit_verify` bench first thing in its `main`. ([`verify`] used
/// to set them itself, but `atelier ui` runs it from concurrent request handlers.)
pub unsafe fn limit_object_cache() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: the caller guarantees no other thread uses libgit2 yet (see above), and
        // `Once` makes this the only write: a later call, from any thread, returns without
        // touching the globals.
        unsafe {
            let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Tree, 1024);
            let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Commit, 0);
            let _ = git2::opts::set_cache_object_limit(git2::ObjectType::Blob, 0);
        }
    });
}

/// Whether a clean verification becomes this machine's witness memory of the ledger (under
/// `$XDG_STATE_HOME/atelier/`). Only a verification someone asked for as an audit records it
/// (`audit verify`, a recovery's audit); one made for display (the dashboard, which any web page
/// can make a browser ask) reads the memory and writes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Memory {
    Record,
    ReadOnly,
}

/// Verifies the history of `branch`. Findings are values; only IO problems are errors. Safe to
/// run on several threads at once (it changes no process-wide setting; see
/// [`limit_object_cache`]).
///
/// The steps: the first-parent line from the adoption point ([`adoption_line`]); the ledger's
/// own integrity ([`check_ledger`]); the adoption it records and the gate key rotations
/// ([`check_rotations`]); the witnesses other than the ledger ([`witnesses`]); every commit
/// after adoption, on `jobs` threads ([`merges::examine_all`]); what the ledger records that
/// the branch does not bear out ([`recorded_findings`]); and, when all is clean, this machine's
/// memory of the ledger ([`remember_clean`]), where `memory` says so.
pub fn verify(
    repo: &Repository,
    repository: &str,
    branch: &str,
    jobs: usize,
    memory: Memory,
) -> Result<VerifyReport> {
    let mut report = VerifyReport {
        branch: branch.to_string(),
        ..VerifyReport::default()
    };
    let (line, adopted_at) = adoption_line(repo, branch)?;
    let Some(adoption) = adopted_at else {
        not_adopted(repo, branch, &mut report);
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
    check_rotations(repo, &index, &mut report);
    witnesses(repo, repository, branch, &mut index, &mut report)?;
    report.ledger_root = index.roots.last().map(hex::encode);
    let roots = std::mem::take(&mut index.roots);
    let commits: Vec<Oid> = line.iter().skip(1).copied().collect();
    report.commits_checked = commits.len();
    let outcomes = merges::examine_all(
        repo, repository, branch, &index, &roots, &keys, &commits, jobs,
    )?;
    for o in outcomes {
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
    recorded_findings(&mut index, branch, &mut report);
    // A ledger that verified cleanly becomes this machine's floor, pinned to the gate key that
    // signed its latest checkpoint: a later, shorter one is a rollback.
    if report.findings.is_empty() && memory == Memory::Record {
        remember_clean(repo, repository, &roots, &index, &keys)?;
    }
    Ok(report)
}

/// The branch's first-parent line from its first commit that adopts Atelier (carries the
/// policy and the gate's public key) on, oldest first, and that commit.
fn adoption_line(repo: &Repository, branch: &str) -> Result<(Vec<Oid>, Option<Oid>)> {
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
    Ok((line, adopted_at))
}

/// The findings for a branch no commit of which adopts Atelier.
fn not_adopted(repo: &Repository, branch: &str, report: &mut VerifyReport) {
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
}

/// A rotation stands only for a recorded merge whose tree publishes that key: anything else is
/// the gate key's holder naming a successor nobody approved.
fn check_rotations(repo: &Repository, index: &LedgerIndex, report: &mut VerifyReport) {
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
}

/// What the ledger records that the branch does not bear out: completed merges not on the
/// branch, contradictions between entries, and the alarms the gate recorded.
fn recorded_findings(index: &mut LedgerIndex, branch: &str, report: &mut VerifyReport) {
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
}

/// After a clean verify: this clone's identity, and the ledger as this machine's floor, pinned
/// to the gate key that signed its latest checkpoint.
fn remember_clean(
    repo: &Repository,
    repository: &str,
    roots: &[Hash],
    index: &LedgerIndex,
    keys: &[VerifyingKey],
) -> Result<()> {
    let (Some(root), Some(adopted)) = (roots.last(), &index.adopted) else {
        return Ok(());
    };
    witness::remember_identity(
        repo.workdir().unwrap_or(repo.path()),
        &ledger::origin(repository),
        adopted,
    )?;
    if let Some(key) = latest_signer(repo, repository, keys)? {
        witness::remember(
            adopted,
            &ledger::origin(repository),
            roots.len() as u64,
            root,
            &key,
            &format!("a clean audit verify of {}", repo.path().display()),
        )?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Commits `files` on `main` on top of its tip.
    fn commit(repo: &Repository, files: &[(&str, &str)], message: &str) -> Oid {
        let parent = repo
            .find_reference("refs/heads/main")
            .ok()
            .map(|r| r.peel_to_commit().expect("main is a commit"));
        let mut index = git2::Index::new().expect("an index");
        if let Some(p) = &parent {
            index
                .read_tree(&p.tree().expect("a tree"))
                .expect("read the tree");
        }
        for (path, text) in files {
            let blob = repo.blob(text.as_bytes()).expect("a blob");
            let mut entry = git2::IndexEntry {
                ctime: git2::IndexTime::new(0, 0),
                mtime: git2::IndexTime::new(0, 0),
                dev: 0,
                ino: 0,
                mode: 0o100644,
                uid: 0,
                gid: 0,
                file_size: text.len() as u32,
                id: blob,
                flags: 0,
                flags_extended: 0,
                path: path.as_bytes().to_vec(),
            };
            entry.flags = (path.len() as u16) & 0xfff;
            index.add(&entry).expect("add to the index");
        }
        let tree = repo
            .find_tree(index.write_tree_to(repo).expect("write the tree"))
            .expect("the tree");
        let sig = git2::Signature::new("A", "a@example.com", &git2::Time::new(1_700_000_000, 0))
            .expect("a signature");
        let parents: Vec<&git2::Commit<'_>> = parent.iter().collect();
        repo.commit(
            Some("refs/heads/main"),
            &sig,
            &sig,
            message,
            &tree,
            &parents,
        )
        .expect("a commit")
    }

    /// A branch adopted, then 40 commits the ledger does not record, and a ledger whose one
    /// checkpoint does not verify: every part of `verify` runs, on both of its worker threads.
    fn history() -> (tempfile::TempDir, Repository) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let repo = Repository::init(dir.path()).expect("a repository");
        commit(&repo, &[("README", "before adoption\n")], "start");
        commit(
            &repo,
            &[
                (crate::governance::policy::GOVERNANCE_PATH, "# policy\n"),
                (GATE_KEY_PATH, "not a key\n"),
            ],
            "adopt",
        );
        for i in 0..40 {
            commit(
                &repo,
                &[("src/f", &format!("{i}\n"))],
                &format!("change {i}"),
            );
        }
        write_ledger(&repo);
        (dir, repo)
    }

    /// A ledger of no entries whose checkpoint is not a checkpoint.
    fn write_ledger(repo: &Repository) {
        let empty = repo.blob(b"").expect("a blob");
        let mut entries = repo.treebuilder(None).expect("a tree builder");
        entries
            .insert("0000", empty, 0o100644)
            .expect("an entries chunk");
        let entries = entries.write().expect("the entries tree");
        let note = repo.blob(b"not a checkpoint\n").expect("a blob");
        let mut top = repo.treebuilder(None).expect("a tree builder");
        top.insert("entries", entries, 0o040000).expect("entries");
        top.insert("checkpoint", note, 0o100644)
            .expect("checkpoint");
        let tree = repo
            .find_tree(top.write().expect("the ledger tree"))
            .expect("the ledger tree");
        let sig = git2::Signature::new("A", "a@example.com", &git2::Time::new(1_700_000_000, 0))
            .expect("a signature");
        repo.commit(Some(ledger::REF), &sig, &sig, "ledger", &tree, &[])
            .expect("the ledger commit");
    }

    fn summary(r: &VerifyReport) -> (usize, Vec<(Code, Option<String>)>) {
        (
            r.commits_checked,
            r.findings
                .iter()
                .map(|f| (f.code, f.commit.clone()))
                .collect(),
        )
    }

    /// `atelier ui` runs `verify` from concurrent request handlers: two at once, each with two
    /// workers, give the same report as one alone (and `verify` sets no process-wide option
    /// for them to race on).
    #[test]
    fn verifies_run_concurrently_give_the_same_report_as_one_alone() {
        let (dir, repo) = history();
        let alone = verify(&repo, "o/r", "main", 2, Memory::Record).expect("a report");
        let (checked, findings) = summary(&alone);
        assert_eq!(checked, 40);
        assert_eq!(findings.len(), 41, "{findings:?}");
        assert_eq!(findings[0], (Code::LedgerSignature, None));
        assert!(findings[1..]
            .iter()
            .all(|(c, sha)| *c == Code::UnledgeredCommit && sha.is_some()));
        let together: Vec<VerifyReport> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let repo = Repository::open(dir.path()).expect("the repository");
                        verify(&repo, "o/r", "main", 2, Memory::Record).expect("a report")
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a verify does not panic"))
                .collect()
        });
        for r in &together {
            assert_eq!(summary(r), summary(&alone));
        }
    }
}
