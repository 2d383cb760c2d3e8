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
use crate::improve::evidence::{self, Evidence};

/// The proposal's record folder and tip, checked against the ledger; refused unless it is open
/// and its branch is at `expected`.
fn open_at(ws: &Workspace, id: &str, expected: Oid) -> Result<String> {
    let view = ws.view()?;
    let (pull, _, head) = ws.checked_record(&view, ws.pull(id)?)?;
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
) -> Result<Registration> {
    let _lock = ws.lock()?;
    open_at(ws, id, head)?;
    if ws.view()?.registered(id).is_some() {
        return Err(refuse(
            Code::ForgeState,
            format!("proposal {id} already has a registered metric (expected: none; found: a metric-registered entry): a registration is made once, before its benchmark; run `atelier cycle` again for a new proposal"),
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
            draw: Some(fresh_draw()),
        }],
        now,
    )?;
    let leaf = snapshot
        .lines
        .last()
        .map(|l| hex::encode(crate::audit::merkle::leaf_hash(l.as_bytes())))
        .unwrap_or_default();
    Ok(Registration {
        entry: last_seq(&snapshot),
        leaf,
    })
}

/// The ledger entry that registered a proposal's metric: its sequence number and its Merkle
/// leaf hash (hex), from which the benchmark's seeds are drawn.
#[derive(Debug, Clone)]
pub struct Registration {
    pub entry: u64,
    pub leaf: String,
}

/// 128 bits from the operating system's random source, hex.
fn fresh_draw() -> String {
    use rand_core::RngCore;
    let mut b = [0u8; 16];
    rand_core::OsRng.fill_bytes(&mut b);
    hex::encode(b)
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
            base: e.base.clone(),
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
    pub delta: Option<crate::improve::metrics::Delta>,
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
        let mut warnings: Vec<String> = warning.into_iter().collect();
        if let Some(Event::EvidenceRecorded { head, base, .. }) = recorded {
            if *base != m.base {
                warnings.push(format!(
                    "merged onto {} but measured on {base}: no delta is credited to it",
                    m.base
                ));
                delta = None;
                outcome = "measured on another base".into();
            }
            if *head != m.head {
                warnings.push(format!(
                    "the merged head {} is not the change the evidence was measured on ({head}): no delta is credited to it",
                    m.head
                ));
                delta = None;
                outcome = "changed after it was measured".into();
            }
        }
        warnings.extend(same_change(ws, &view, &m.proposal)?);
        let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
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

/// What a proposal's cycle evidence is worth now, for the people asked to approve it: the
/// evidence the ledger bound (read from the commit it was recorded for, never from the
/// proposal's tree as it is now), why it would not have been submitted, and every reason to
/// distrust it — a registration with no evidence, a change modified after it was measured,
/// evidence files edited or written by someone other than the cycle, the same change
/// registered before under another proposal.
#[derive(Debug, Default, serde::Serialize)]
pub struct Status {
    pub evidence: Option<Evidence>,
    pub recorded_head: Option<String>,
    pub objections: Vec<String>,
    pub warnings: Vec<String>,
}

/// The status of proposal `id`'s evidence with its branch at `head`; `None` for a proposal the
/// cycle never touched whose record holds no evidence files.
pub fn status(
    ws: &Workspace,
    view: &crate::audit::view::LedgerView,
    id: &str,
    record: &str,
    head: Oid,
) -> Result<Option<Status>> {
    let repo = &ws.repo;
    let head_tree = repo.find_commit(head)?.tree()?;
    let files_here = [evidence::JSON, evidence::MARKDOWN].iter().any(|f| {
        head_tree
            .get_path(std::path::Path::new(&format!("{record}/{f}")))
            .is_ok()
    });
    let registered = view.registered(id);
    let recorded = view.evidence(id);
    if registered.is_none() && recorded.is_none() {
        return Ok(files_here.then(|| Status {
            warnings: vec![format!(
                "{record} holds evidence files, but the ledger has no evidence recorded for proposal {id}: they are not the cycle's evidence (anyone can write a file)"
            )],
            ..Status::default()
        }));
    }
    let mut s = Status::default();
    let Some(Event::EvidenceRecorded {
        head: rh,
        base: rb,
        digest,
        outcome,
        regressions,
        validators,
        delta,
        ..
    }) = recorded
    else {
        s.warnings.push(format!(
            "a metric was registered for proposal {id} but no evidence was recorded (the cycle did not finish): it cannot merge ({}); run the cycle again",
            Code::EvidenceMissing
        ));
        return Ok(Some(s));
    };
    s.recorded_head = Some(rh.clone());
    // A merged proposal is held to the base it merged onto (the gate checked that), an open
    // one to the branch as it is now.
    match view.merges().find(|m| m.proposal == id) {
        Some(m) => {
            if m.base != *rb {
                s.warnings.push(format!(
                    "merged onto {}, but measured on {rb}: the evidence was not for this merge",
                    m.base
                ));
            }
        }
        None => {
            let tip = git::branch_tip(repo, ws.branch())?.to_string();
            if *rb != tip {
                s.warnings.push(format!(
                    "{} moved since the change was measured (measured on {rb}, now {tip}): the evidence does not hold for a merge now, and it cannot merge until the cycle runs again ({})",
                    ws.branch(),
                    Code::EvidenceMissing
                ));
            }
        }
    }
    if outcome == "regressed" {
        s.objections.push(format!(
            "its registered metric regressed ({})",
            delta.as_deref().unwrap_or_default()
        ));
    }
    s.objections.extend(
        regressions
            .iter()
            .filter(|r| *r == evidence::GUARDED)
            .map(|r| format!("{r} regressed")),
    );
    s.objections.extend(
        validators
            .iter()
            .filter(|v| v.ends_with(": failed"))
            .map(|v| format!("validator {v}")),
    );
    match Oid::from_str(rh)
        .ok()
        .and_then(|o| repo.find_commit(o).ok())
    {
        None => s.warnings.push(format!(
            "the commit the evidence was recorded for ({rh}) is not in this clone: fetch the proposal's branch history"
        )),
        Some(c) => {
            let tree = c.tree()?;
            let path = format!("{record}/{}", evidence::JSON);
            match git::read_file(repo, &tree, &path)? {
                Some(bytes) if hex::encode(sha2::Sha256::digest(&bytes)) == *digest => {
                    match serde_json::from_slice::<Evidence>(&bytes) {
                        Ok(e) => s.evidence = Some(e),
                        Err(e) => s.warnings.push(format!("{path}: not evidence ({e})")),
                    }
                }
                _ => s.warnings.push(format!(
                    "{path} at {rh} is not the one the ledger recorded (digest differs): the evidence cannot be read"
                )),
            }
            if c.id() != head {
                let changed = git::changed_paths(repo, &tree, &head_tree)?;
                let (files, change): (Vec<String>, Vec<String>) = changed
                    .into_iter()
                    .partition(|p| p.starts_with(&format!("{record}/evidence.")));
                if !files.is_empty() {
                    s.warnings.push(format!(
                        "{} edited after the cycle wrote them (not what the cycle wrote; the evidence shown is the ledger's)",
                        files.join(", ")
                    ));
                }
                if !change.is_empty() {
                    s.warnings.push(format!(
                        "the change was modified after it was measured ({}): the evidence is about {rh}, not head {head}; it cannot merge until the cycle runs again ({})",
                        change.join(", "),
                        Code::EvidenceMissing
                    ));
                } else if files.is_empty() {
                    s.warnings.push(format!(
                        "the head {head} is not the commit the evidence was recorded for ({rh}), though the trees are the same: it cannot merge as it is ({})",
                        Code::EvidenceMissing
                    ));
                }
            }
        }
    }
    s.warnings.extend(same_change(ws, view, id)?);
    Ok(Some(s))
}

/// A change's identity for comparing registrations: what it does outside `proposals/` to its
/// base, as (path, new blob) pairs.
fn identity(repo: &git2::Repository, base: &str, head: &str) -> Option<Vec<(String, Option<Oid>)>> {
    let tree = |s: &str| {
        Oid::from_str(s)
            .ok()
            .and_then(|o| repo.find_commit(o).ok())
            .and_then(|c| c.tree().ok())
    };
    let entries = git::changed_entries(repo, &tree(base)?, &tree(head)?).ok()?;
    Some(
        entries
            .into_iter()
            .filter(|e| !e.path.starts_with("proposals/"))
            .map(|e| (e.path, e.new))
            .collect(),
    )
}

/// Other proposals that registered a metric for the same change (on the same base): a metric
/// can be chosen only once per change, and the improvement curve says when it was not.
fn same_change(
    ws: &Workspace,
    view: &crate::audit::view::LedgerView,
    id: &str,
) -> Result<Vec<String>> {
    let repo = &ws.repo;
    let base_of = |p: &str| {
        view.events.iter().find_map(|e| match e {
            Event::ProposalOpened { proposal, base, .. } if proposal == p => Some(base.clone()),
            _ => None,
        })
    };
    let Some(Event::MetricRegistered { head, .. }) = view.registered(id) else {
        return Ok(Vec::new());
    };
    let Some(mine) = base_of(id).and_then(|b| identity(repo, &b, head)) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for e in &view.events {
        let Event::MetricRegistered {
            proposal,
            metric,
            head,
            ..
        } = e
        else {
            continue;
        };
        if proposal == id {
            continue;
        }
        if base_of(proposal).and_then(|b| identity(repo, &b, head)) == Some(mine.clone()) {
            let outcome = match view.evidence(proposal) {
                Some(Event::EvidenceRecorded { outcome, .. }) => outcome.clone(),
                _ => "no evidence".into(),
            };
            out.push(format!(
                "the same change was also registered as proposal {proposal}, with metric {} ({outcome}): the metric was not named once",
                metric.as_deref().unwrap_or("(none)")
            ));
        }
    }
    Ok(out)
}
