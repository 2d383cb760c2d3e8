//! The index of the ledger's entries: what the ledger says about merges, proposals, tokens,
//! alarms and gate key rotations, built while its entries stream past ([`index_entry`]).

use std::collections::HashMap;

use crate::audit::ledger::{Entry, Event, MergeRecord};
use crate::audit::merkle::{self, Hash};
use crate::governance::time::parse_rfc3339;
use crate::governance::token::RawToken;

/// What the ledger says about merges and proposals, indexed while streaming its entries.
#[derive(Default)]
pub(super) struct LedgerIndex {
    pub(super) adopted: Option<String>,
    pub(super) merged: HashMap<String, MergedRecord>,
    /// Per proposal: the pull request numbers the ledger opened or submitted it as, and its
    /// proposer. These facts come from the ledger alone, never from a forge's editable record.
    pub(super) proposals: HashMap<String, ProposalFacts>,
    /// Rejections recorded per proposal, whichever pull request carried them: a merge must hold
    /// against them too, even if the merge commit does not carry them.
    pub(super) rejections: HashMap<String, Vec<(u64, RawToken)>>,
    /// Events that contradict what the ledger recorded before them (an abort after a merge
    /// completed): each is a finding.
    pub(super) contradictions: Vec<String>,
    /// Tokens recorded with the ledger checkpoint their signer saw, and where they were recorded.
    pub(super) claims: Vec<(u64, i64, String, RawToken)>,
    /// The time of the latest entry, to check that ledger time never goes backwards.
    pub(super) last_at: Option<i64>,
    /// Merkle root after each entry (index i = root of size i + 1).
    pub(super) roots: Vec<Hash>,
    /// When and where a forge was last asked to merge (proposal, pull, base, head, tree): a
    /// merge recorded later is judged from there.
    pub(super) requested: HashMap<RequestKey, (i64, u64)>,
    /// Alarms the gate recorded (proposal, pull, code, detail): each is a finding.
    pub(super) alarms: Vec<(String, u64, String, String)>,
    /// Gate key rotations (seq, merge commit, new key as an OpenSSH line, recovered), oldest
    /// first.
    pub(super) rotations: Vec<(u64, String, String, bool)>,
}

/// What the ledger recorded when a proposal was opened (locally, or on GitHub).
#[derive(Default)]
pub(super) struct ProposalFacts {
    pub(super) pulls: Vec<u64>,
    pub(super) proposer: Option<String>,
    /// Who wrote it and what it declared, from its `proposal-opened` entry.
    pub(super) provenance: crate::panel::Provenance,
    /// The review panel's verdicts recorded for it, with their ledger positions.
    pub(super) reviews: Vec<(u64, crate::governance::review::RecordedReview)>,
    /// Where `atelier cycle` first registered a metric for it.
    pub(super) registered: Option<u64>,
    /// The (head, base) its evidence was recorded for, with their positions.
    pub(super) evidence: Vec<(u64, (String, String))>,
}

/// A merge request's identity: proposal, pull, base, head, tree.
pub(super) type RequestKey = (String, u64, String, String, String);

pub(super) struct MergedRecord {
    pub(super) proposal: String,
    pub(super) pull: u64,
    pub(super) at: i64,
    /// The ledger position of the first record of this merge (merge-started).
    pub(super) seq: u64,
    pub(super) base: String,
    pub(super) head: String,
    pub(super) tree: String,
    pub(super) seen_on_branch: bool,
    /// Whether a `merged` entry (not only `merge-started`) records it.
    pub(super) completed: bool,
    pub(super) aborted: bool,
}

/// Adds one entry to the index: what it says of its proposal, its tokens, a merge, an abort, an
/// alarm, a gate key rotation or a merge request.
pub(super) fn index_entry(index: &mut LedgerIndex, entry: Entry) {
    let at = parse_rfc3339(&entry.at).unwrap_or(i64::MIN);
    end_requests(index, &entry.event);
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
        } => record_tokens(index, seq, at, &proposal, &token),
        Event::MergeStarted(m) | Event::Merged(m) => record_merge(index, m, at, seq, completed),
        Event::MergeAborted { commit, .. } => record_abort(index, seq, &commit),
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

/// A merge request stands only until the next event of its proposal (the `merged` that
/// concludes it): anything else recorded in between means a later merge is not that request.
fn end_requests(index: &mut LedgerIndex, event: &Event) {
    if !matches!(
        event,
        Event::MergeRequested { .. }
            | Event::Merged(_)
            | Event::MergeStarted(_)
            | Event::ReviewRecorded { .. }
            | Event::MetricRegistered { .. }
            | Event::EvidenceRecorded { .. }
    ) && !event.is_approvals_only()
    {
        if let Some(p) = event.proposal() {
            index.requested.retain(|k, _| k.0 != p);
        }
    }
}

/// The tokens a `token-recorded` entry holds: a rejection is kept for the proposal's merges to
/// hold against, and a checkpoint the ledger so far does not extend is a claim to judge.
fn record_tokens(index: &mut LedgerIndex, seq: u64, at: i64, proposal: &str, token: &str) {
    for t in RawToken::extract_all(token) {
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
            index
                .claims
                .push((seq, at, proposal.to_string(), t.clone()));
        }
        let reject = payload.is_ok_and(|p| p.decision == crate::governance::token::Verdict::Reject);
        if reject {
            index
                .rejections
                .entry(proposal.to_string())
                .or_default()
                .push((seq, t));
        }
    }
}

/// A `merge-started` or `merged` entry: the merge it records, judged as of the request it
/// concludes if one stands.
fn record_merge(index: &mut LedgerIndex, m: MergeRecord, at: i64, seq: u64, completed: bool) {
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

/// A `merge-aborted` entry: the merge it names did not land, unless one was recorded completed
/// (a contradiction).
fn record_abort(index: &mut LedgerIndex, seq: u64, commit: &str) {
    if let Some(rec) = index.merged.get_mut(commit) {
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
