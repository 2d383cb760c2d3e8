//! What `atelier cycle` records: the metric named before the replay benchmark runs, and the
//! evidence committed into the proposal's record. Both go to the ledger under the lock; the
//! evidence commit is a child of the head that was measured, and is refused if the proposal's
//! branch moved meanwhile.

use git2::Oid;
use sha2::Digest;

use super::{refuse, Result, Workspace};
use crate::audit::ledger::{Entry, Event};
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::Code;
use crate::swarm::evidence::{self, Evidence};

/// The proposal's record folder and tip, checked against the ledger; refused unless it is open
/// and its branch is at `expected`.
fn open_at(ws: &Workspace, id: &str, expected: Oid) -> Result<String> {
    let view = ws.view()?;
    let (pull, _, head) = super::checked_record(ws, &view, ws.pull(id)?)?;
    if pull.state != crate::forge::PullState::Open || view.finished(id) {
        return Err(refuse(
            Code::NotOpen,
            format!("proposal {id} is merged or closed; the cycle records nothing for it"),
        ));
    }
    if head != expected {
        return Err(refuse(
            Code::StaleHead,
            format!(
                "proposal {id}'s branch moved while the cycle measured it (expected: {expected}; found: {head}); nothing recorded: run the cycle again"
            ),
        ));
    }
    Ok(pull.record)
}

/// Records the metric the evidence will be judged by, before the benchmark runs. Returns the
/// ledger entry.
#[allow(clippy::too_many_arguments)]
pub fn register(
    ws: &Workspace,
    id: &str,
    head: Oid,
    metric: Option<String>,
    reason: String,
    seeds: u64,
    missions: Vec<String>,
    now: Timestamp,
) -> Result<u64> {
    let _lock = ws.lock()?;
    open_at(ws, id, head)?;
    if ws.view()?.registered(id).is_some() {
        return Err(refuse(
            Code::ForgeState,
            format!("proposal {id} already has a registered metric: a registration is made once, before its benchmark"),
        ));
    }
    let snapshot = ws.record(
        vec![Event::MetricRegistered {
            proposal: id.to_string(),
            metric,
            reason,
            head: head.to_string(),
            seeds,
            missions,
        }],
        now,
    )?;
    Ok(last_seq(&snapshot))
}

fn last_seq(snapshot: &crate::audit::ledger::Snapshot) -> u64 {
    snapshot
        .lines
        .last()
        .and_then(|l| Entry::parse(l).ok())
        .map_or(0, |e| e.seq)
}

/// Commits `evidence.json` and `evidence.md` into the record of proposal `id` as a child of
/// `measured` (its branch must still be there), records it in the ledger, then moves the branch.
/// Returns the new head.
pub fn attach(ws: &Workspace, e: &Evidence, measured: Oid, now: Timestamp) -> Result<Oid> {
    let _lock = ws.lock()?;
    let record = open_at(ws, &e.proposal, measured)?;
    let repo = &ws.repo;
    let json = serde_json::to_vec_pretty(e).map_err(|x| super::Error::Input(x.to_string()))?;
    let digest = hex::encode(sha2::Sha256::digest(&json));
    let parent = repo.find_commit(measured)?;
    let with_json = git::tree_with_file(
        repo,
        &parent.tree()?,
        &format!("{record}/{}", evidence::JSON),
        &json,
    )?;
    let tree = git::tree_with_file(
        repo,
        &repo.find_tree(with_json)?,
        &format!("{record}/{}", evidence::MARKDOWN),
        e.markdown().as_bytes(),
    )?;
    let sig = git::signature(repo, now)?;
    let message = format!(
        "Evidence for proposal {}: {}\n\nWritten by `atelier cycle`.\n\nAtelier-Proposal: {}\n",
        e.proposal,
        e.headline(),
        e.proposal
    );
    let head = repo.commit(
        None,
        &sig,
        &sig,
        &message,
        &repo.find_tree(tree)?,
        &[&parent],
    )?;
    // The ledger first: a crash before the branch moves leaves an evidence commit no branch
    // holds, which the ledger names; nothing half-written on the branch.
    ws.record(
        vec![Event::EvidenceRecorded {
            proposal: e.proposal.clone(),
            head: head.to_string(),
            digest,
            outcome: e.outcome.clone(),
            delta: e.delta_text(),
            regressions: e.regressions.clone(),
            validators: e.validators.iter().map(|v| v.line()).collect(),
        }],
        now,
    )?;
    repo.reference_matching(
        &format!("refs/heads/atelier/proposals/{}", e.proposal),
        head,
        true,
        measured,
        &format!("atelier cycle: evidence for proposal {}", e.proposal),
    )?;
    Ok(head)
}

/// The record folder of proposal `id` (`proposals/<id>-<slug>`).
pub fn record_of(ws: &Workspace, id: &str) -> Result<String> {
    Ok(ws.pull(id)?.record)
}

/// A merged proposal of the cycle: what it registered and what its evidence, as merged,
/// measured.
#[derive(Debug, serde::Serialize)]
pub struct Improvement {
    pub proposal: String,
    pub title: String,
    pub commit: String,
    pub merged_at: Option<String>,
    pub metric: Option<String>,
    pub outcome: String,
    pub delta: Option<crate::swarm::bench::Delta>,
    /// Set when the merged evidence is not what the ledger recorded (edited after the cycle
    /// wrote it): the figures above are then the ledger's, not the file's.
    pub warning: Option<String>,
}

/// Every merged proposal that has a registered metric, oldest first: the improvement curve.
pub fn improvements(ws: &Workspace) -> Result<Vec<Improvement>> {
    let repo = &ws.repo;
    let view = ws.view()?;
    let entries = crate::audit::history::entries(repo).unwrap_or_default();
    let merged_at = |proposal: &str| {
        entries
            .iter()
            .find(|en| matches!(&en.event, Event::Merged(m) if m.proposal == proposal))
            .map(|en| en.at.clone())
    };
    let mut out = Vec::new();
    for m in view.merges() {
        let Some(Event::MetricRegistered { metric, .. }) = view.registered(&m.proposal) else {
            continue;
        };
        let title = view
            .events
            .iter()
            .find_map(|e| match e {
                Event::ProposalOpened {
                    proposal, title, ..
                } if *proposal == m.proposal => Some(title.clone()),
                _ => None,
            })
            .unwrap_or_default();
        let recorded = view.evidence(&m.proposal);
        let (mut outcome, mut warning, mut delta) = match recorded {
            Some(Event::EvidenceRecorded { outcome, .. }) => (outcome.clone(), None, None),
            _ => (
                "no evidence recorded".to_string(),
                Some("the cycle recorded no evidence for it".to_string()),
                None,
            ),
        };
        if let Some(Event::EvidenceRecorded { digest, .. }) = recorded {
            match merged_evidence(repo, &m.commit, &m.proposal) {
                Some((bytes, e)) if hex::encode(sha2::Sha256::digest(&bytes)) == *digest => {
                    delta = e.delta().cloned();
                    outcome = e.outcome.clone();
                }
                Some(_) => {
                    warning = Some(
                        "the merged evidence.json is not the one the cycle recorded (edited after it was written): the outcome shown is the ledger's".into(),
                    )
                }
                None => {
                    warning = Some(
                        "the merge holds no readable evidence.json for it: the outcome shown is the ledger's".into(),
                    )
                }
            }
        }
        out.push(Improvement {
            proposal: m.proposal.clone(),
            title,
            commit: m.commit.clone(),
            merged_at: merged_at(&m.proposal),
            metric: metric.clone(),
            outcome,
            delta,
            warning,
        });
    }
    Ok(out)
}

/// The evidence.json in the record folder of `proposal` at `commit` (`proposals/<id>-*/`).
fn merged_evidence(
    repo: &git2::Repository,
    commit: &str,
    proposal: &str,
) -> Option<(Vec<u8>, Evidence)> {
    let tree = repo
        .find_commit(Oid::from_str(commit).ok()?)
        .ok()?
        .tree()
        .ok()?;
    let proposals = tree.get_path(std::path::Path::new("proposals")).ok()?;
    let proposals = repo.find_tree(proposals.id()).ok()?;
    let prefix = format!("{proposal}-");
    for entry in proposals.iter() {
        let name = entry.name()?;
        if name.starts_with(&prefix) {
            let path = format!("proposals/{name}/{}", evidence::JSON);
            let bytes = git::read_file(repo, &tree, &path).ok()??;
            let e: Evidence = serde_json::from_slice(&bytes).ok()?;
            if e.proposal == proposal {
                return Some((bytes, e));
            }
        }
    }
    None
}
