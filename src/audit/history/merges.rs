//! The commits on the branch after adoption, examined on all cores: each one recorded in the
//! ledger as a merge, shaped as recorded, and allowed by the gate re-run under the policy of its
//! base.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use ed25519_dalek::VerifyingKey;
use git2::{Oid, Repository};

use super::index::{LedgerIndex, MergedRecord, ProposalFacts};
use super::witnesses::not_a_prefix;
use super::{finding, Finding, Result};
use crate::audit::ledger::{self};
use crate::audit::merkle::{self, Hash};
use crate::git;
use crate::governance::decision::Evidence;
use crate::governance::decision::{self, Change, GateInput};
use crate::governance::policy::{policy_digest, Policy, PolicyError, GATE_KEY_PATH};
use crate::governance::token::RawToken;
use crate::governance::Code;

pub(super) type PolicyResult = Arc<std::result::Result<Policy, PolicyError>>;

/// Policies parsed once per distinct set of policy blobs.
#[derive(Default)]
pub(super) struct PolicyCache {
    /// The last merge examined and its tree id.
    pub(super) last_tree: Option<(Oid, Oid)>,
    pub(super) parsed: HashMap<[Oid; 3], PolicyResult>,
    pub(super) digests: HashMap<[Oid; 3], String>,
    /// Review panels, by the id of the base's `reviewers` tree.
    pub(super) panels: HashMap<Option<Oid>, Arc<crate::panel::Panel>>,
}

pub(super) fn blob_or_zero(repo: &Repository, tree: &git2::Tree<'_>, path: &str) -> Oid {
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
pub(super) struct MergeCheck {
    pub(super) commit: String,
    pub(super) change: Change,
    pub(super) base_policy: PolicyResult,
    pub(super) new_policy: PolicyResult,
    /// The policy of the last commit the ledger vouches for before the base, and the policy
    /// files commits outside the gate changed since (none in the usual case).
    pub(super) vouched: (
        std::result::Result<Policy, crate::governance::policy::PolicyError>,
        Vec<String>,
    ),
    pub(super) tokens: Vec<RawToken>,
    pub(super) panel: crate::governance::review::PanelInput,
    pub(super) evidence: crate::governance::decision::Evidence,
    pub(super) now: i64,
}

/// Commits a worker takes at a time.
pub(super) const SLICE: usize = 32;

/// Examines `commits` on `jobs` threads, in slices of [`SLICE`]: each worker opens its own
/// repository handle (git2 handles are not shared between threads), takes the next slice,
/// gathers each merge's inputs and runs the gate. The outcomes come back in branch order.
#[allow(clippy::too_many_arguments)]
pub(super) fn examine_all(
    repo: &Repository,
    repository: &str,
    branch: &str,
    index: &LedgerIndex,
    roots: &[Hash],
    keys: &[VerifyingKey],
    commits: &[Oid],
    jobs: usize,
) -> Result<Vec<Outcome>> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let path = repo.path().to_path_buf();
    let outcomes: Vec<Result<Vec<Outcome>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..jobs.max(1))
            .map(|_| {
                let (next, path) = (&next, &path);
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
                                &repo, &mut cache, index, roots, keys, repository, branch, *oid,
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
    Ok(all)
}

/// What examining one commit on the branch found.
#[derive(Default)]
pub(super) struct Outcome {
    pub(super) seq: usize,
    /// The commit, when the ledger records it as a merge.
    pub(super) seen: Option<String>,
    pub(super) verified: bool,
    pub(super) signatures: usize,
    pub(super) finding: Option<Finding>,
    /// A checkpoint the commit carries that the ledger does not extend.
    pub(super) anchor: Option<Finding>,
}

/// Checks one commit after adoption: recorded in the ledger, shaped as recorded, and allowed by
/// the gate under the policy of its base.
#[allow(clippy::too_many_arguments)]
pub(super) fn examine(
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
pub(super) fn examine_merge(
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
    let facts = index.proposals.get(&rec.proposal);
    // A recorded merge that fails a check before the gate is re-run.
    if let Some((code, detail)) = unlike_record(rec, facts, commit, branch) {
        return Ok(Outcome {
            seen: Some(sha.clone()),
            finding: Some(finding(code, Some(sha), detail)),
            ..Outcome::default()
        });
    }
    // The previous merge on the branch is usually this one's base: reuse its tree.
    let base_oid = Oid::from_str(&rec.base)?;
    let base_tree = match cache.last_tree.take() {
        Some((c, t)) if c == base_oid => repo.find_tree(t)?,
        _ => repo.find_commit(base_oid)?.tree()?,
    };
    cache.last_tree = Some((oid, commit.tree_id()));
    let tree = commit.tree()?;
    let tokens = gate_tokens(commit, index, rec);
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
    // As the gate judges it: by the policy of the last commit the ledger vouches for, when
    // commits pushed straight to the branch changed the policy before this merge's base.
    let ledgered =
        |sha: &str| index.merged.contains_key(sha) || index.adopted.as_deref() == Some(sha);
    let (judging, bypassed) = git::judging_policy(repo, base_oid, &ledgered)?;
    let defs = cache.panel(repo, &base_tree)?;
    let files = crate::panel::files_of(repo, &entries)?;
    let panel = crate::panel::weigh(
        &defs,
        &crate::panel::surface(repo, &base_tree, &files)?,
        &files,
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
        vouched: (Policy::load(&judging), bypassed),
        new_policy: cache.policy(repo, &tree)?,
        tokens,
        panel,
        evidence: evidence_of(facts, rec),
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

pub(super) fn check_merge(m: &MergeCheck, roots: &[Hash]) -> (Option<Finding>, usize) {
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
    let d = decision::decide_vouched(
        &GateInput {
            change: &m.change,
            base_policy: &m.base_policy,
            new_policy: &m.new_policy,
            tokens: &m.tokens,
            ledger_roots: &ledger_roots,
            panel: &m.panel,
            evidence: &m.evidence,
            now: m.now,
        },
        &m.vouched.0,
        &m.vouched.1,
    );
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

/// Why a recorded merge is not the merge the ledger recorded, if it is not: its merge was
/// aborted, its pull request is not one the ledger opened the proposal as, or its parents and
/// tree differ from the record.
fn unlike_record(
    rec: &MergedRecord,
    facts: Option<&ProposalFacts>,
    commit: &git2::Commit<'_>,
    branch: &str,
) -> Option<(Code, String)> {
    let sha = commit.id();
    if rec.aborted {
        return Some((
            Code::AbortedMergeLanded,
            format!(
                "commit {sha} is on {branch}, but the ledger records its merge of proposal {} as aborted (the gate never let it land): the branch was moved to it by hand",
                rec.proposal
            ),
        ));
    }
    if !facts.is_some_and(|f| f.pulls.contains(&rec.pull)) {
        return Some((
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
        return Some((
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
    None
}

/// The tokens the gate weighs for a merge: those its commit carries, and the rejections
/// recorded for its proposal before the merge began.
fn gate_tokens(
    commit: &git2::Commit<'_>,
    index: &LedgerIndex,
    rec: &MergedRecord,
) -> Vec<RawToken> {
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
    tokens
}

/// What the ledger held of a cycle proposal's evidence when its merge began.
fn evidence_of(facts: Option<&ProposalFacts>, rec: &MergedRecord) -> Evidence {
    match facts.and_then(|f| f.registered.filter(|r| *r < rec.seq).map(|_| f)) {
        None => Evidence::NotACycle,
        Some(f) => Evidence::Registered {
            recorded: f
                .evidence
                .iter()
                .rev()
                .find(|(at, _)| *at < rec.seq)
                .map(|(_, h)| h.clone()),
        },
    }
}
