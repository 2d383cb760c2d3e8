//! `atelier merge` and `atelier close`. A merge happens only when the gate, recomputed at that
//! instant, allows it; the protected branch then moves from the verified base to a merge commit
//! with exactly the approved tree, by compare-and-swap, and the landed tree is checked again.

use anyhow::Result;
use git2::Oid;

use super::{decision_event, evaluate, refuse, Evaluation, Workspace};
use crate::audit::ledger::{Event, MergeRecord};
use crate::forge::PullState;
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::token::{self, Verdict};
use crate::governance::Code;

#[derive(Debug, serde::Serialize)]
pub struct Merged {
    pub id: String,
    pub commit: String,
    pub base: String,
    pub head: String,
    pub tree: String,
    pub approvers: Vec<String>,
    /// Whether the checked-out protected branch's files were updated.
    pub worktree_updated: bool,
    pub note: Option<String>,
}

/// The outcome of a merge attempt: merged, or refused with the gate's evaluation.
pub enum MergeOutcome {
    Merged(Merged),
    Refused(Box<Evaluation>),
}

/// The commit message of a gate merge: trailers, then every counted approval token.
pub fn merge_message(eval: &Evaluation) -> String {
    merge_message_at(eval, None)
}

/// [`merge_message`] with the `Atelier-Ledger: <size> <root>` trailer: the ledger checkpoint at
/// the time of the merge, so the branch itself anchors the ledger against a rollback.
pub fn merge_message_at(
    eval: &Evaluation,
    anchor: Option<&crate::audit::ledger::Anchor>,
) -> String {
    let mut msg = format!(
        "Merge proposal {}: {}\n\nAtelier-Proposal: {}\nAtelier-Pull: {}\nAtelier-Base: {}\nAtelier-Head: {}\nAtelier-Approvers: {}\n",
        eval.pull.proposal,
        // One line, whatever the forge record says: a title can never start a token line.
        eval.pull.title.replace(['\n', '\r'], " "),
        eval.pull.proposal,
        eval.pull.number,
        eval.change.base,
        eval.change.head,
        eval.decision.approvers.join(", ")
    );
    if let Some(anchor) = anchor {
        msg.push_str(&anchor.trailer());
        msg.push('\n');
    }
    for report in eval
        .decision
        .tokens
        .iter()
        .filter(|r| r.counted && r.decision == Some(Verdict::Approve))
    {
        msg.push('\n');
        msg.push_str(&eval.tokens[report.index].to_text());
    }
    msg
}

pub fn merge(ws: &Workspace, id: &str, now: Timestamp) -> Result<MergeOutcome> {
    let _lock = ws.lock()?;
    let eval = evaluate(ws, ws.pull(id)?, now)?;
    let snap = ws.record(vec![decision_event(&eval)], now)?;
    if !eval.decision.allowed {
        return Ok(MergeOutcome::Refused(Box::new(eval)));
    }
    let repo = &ws.repo;
    let base = Oid::from_str(&eval.change.base)?;
    let head = Oid::from_str(&eval.change.head)?;
    let tree_id = eval
        .merge_tree
        .expect("an allowed decision always has a merge tree");
    let clean_checkout = checkout_is_clean(ws, tree_id)?;
    let sig = git::signature(repo, now)?;
    let anchor = crate::audit::ledger::Anchor::sign(
        &ws.origin(),
        &snap,
        crate::audit::ledger::MergeIdentity {
            base: &eval.change.base,
            head: &eval.change.head,
            tree: &tree_id.to_string(),
        },
        &ws.gate_key()?,
    );
    let message = merge_message_at(&eval, Some(&anchor));
    debug_assert!(token::RawToken::extract_all(&message).len() == eval.decision.approvers.len());
    let commit = repo.commit(
        None,
        &sig,
        &sig,
        &message,
        &repo.find_tree(tree_id)?,
        &[&repo.find_commit(base)?, &repo.find_commit(head)?],
    )?;
    // Record the intent first: a crash after the swap below still leaves the merge in the ledger.
    let record = MergeRecord {
        proposal: eval.pull.proposal.clone(),
        pull: eval.pull.number,
        commit: commit.to_string(),
        base: base.to_string(),
        head: head.to_string(),
        tree: tree_id.to_string(),
    };
    ws.record(vec![Event::MergeStarted(record.clone())], now)?;
    let refname = format!("refs/heads/{}", eval.pull.base_branch);
    if !git::compare_and_swap(
        repo,
        &refname,
        base,
        commit,
        &format!("atelier: merge proposal {id}"),
    )? {
        let found = git::branch_tip(repo, &eval.pull.base_branch)
            .map(|o| o.to_string())
            .unwrap_or_else(|_| "nothing".into());
        ws.record(
            vec![Event::MergeAborted {
                proposal: eval.pull.proposal.clone(),
                commit: commit.to_string(),
                reason: format!(
                    "{} moved: expected {base}, found {found}",
                    eval.pull.base_branch
                ),
            }],
            now,
        )?;
        return Err(refuse(
            Code::BaseMoved,
            format!("{} moved while merging: expected {base}, found {found}; nothing was merged — run the gate again", eval.pull.base_branch),
        ));
    }
    let landed = repo
        .find_commit(git::branch_tip(repo, &eval.pull.base_branch)?)?
        .tree_id();
    if landed != tree_id {
        return Err(refuse(
            Code::LandedTreeMismatch,
            format!("{} landed tree {landed}, but the approved merge tree is {tree_id}; investigate before anything else merges", eval.pull.base_branch),
        ));
    }
    ws.forge.set_state(
        eval.pull.number,
        PullState::Merged,
        Some(commit.to_string()),
        None,
    )?;
    ws.record(vec![Event::Merged(record)], now)?;
    let (worktree_updated, note) = match clean_checkout {
        None => (false, None),
        // Looked at again just before writing: the files may have changed since.
        Some(true) if paths_are_safe(ws, repo.find_commit(base)?.tree_id(), tree_id)? => {
            checkout_merged(repo)?;
            (true, None)
        }
        Some(_) => (
            false,
            Some(format!(
                "your checkout of {branch} has local changes (or untracked or ignored files where the merge writes files), so its files were left as they were; bring them up to date, keeping your changes, with `git read-tree -m -u {base} {branch}`",
                branch = eval.pull.base_branch
            )),
        ),
    };
    Ok(MergeOutcome::Merged(Merged {
        id: id.to_string(),
        commit: commit.to_string(),
        base: base.to_string(),
        head: head.to_string(),
        tree: tree_id.to_string(),
        approvers: eval.decision.approvers.clone(),
        worktree_updated,
        note,
    }))
}

/// `None` when the protected branch is not checked out; otherwise whether its files can be
/// brought up to `merged_tree` without losing anything: no tracked file is modified, and no file
/// git does not track (untracked or ignored, such as the gate's own `.atelier/` state) sits where
/// the merge writes one, or on the way to it.
pub(super) fn checkout_is_clean(ws: &Workspace, merged_tree: Oid) -> Result<Option<bool>> {
    let repo = &ws.repo;
    let head = match repo.head() {
        Ok(h) => h,
        Err(_) => return Ok(None),
    };
    if head.name() != Some(&format!("refs/heads/{}", ws.branch())) {
        return Ok(None);
    }
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(false).include_ignored(false);
    if !repo.statuses(Some(&mut opts))?.is_empty() {
        return Ok(Some(false));
    }
    let current = head.peel_to_tree()?.id();
    Ok(Some(paths_are_safe(ws, current, merged_tree)?))
}

/// Whether a checkout from tree `from` to tree `to` writes only where git tracks a file or
/// nothing is: every component of every changed path is looked at without following links, so
/// a link in the checkout (even a tracked one) can never make the checkout write through it,
/// into `.atelier/` or anywhere else.
pub(super) fn paths_are_safe(ws: &Workspace, from: Oid, to: Oid) -> Result<bool> {
    let repo = &ws.repo;
    let (from, to) = (repo.find_tree(from)?, repo.find_tree(to)?);
    let index = repo.index()?;
    for path in git::changed_paths(repo, &from, &to)? {
        let mut prefix = std::path::PathBuf::new();
        let parts: Vec<&str> = path.split('/').collect();
        for (i, part) in parts.iter().enumerate() {
            prefix.push(part);
            let last = i + 1 == parts.len();
            let meta = match std::fs::symlink_metadata(ws.root.join(&prefix)) {
                Ok(m) => m,
                Err(_) => break,
            };
            if meta.file_type().is_symlink() {
                return Ok(false);
            }
            let tracked = index.get_path(&prefix, 0).is_some();
            if meta.is_dir() {
                if last {
                    // A directory where the merge writes a file.
                    return Ok(false);
                }
            } else if !tracked || !last {
                // A file git does not track where the merge writes, or a file where the merge
                // needs a directory.
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Brings the checked-out protected branch's files to its new tip. Only called after
/// [`checkout_is_clean`] said yes; even so, files git does not track are never overwritten.
pub(super) fn checkout_merged(repo: &git2::Repository) -> Result<()> {
    repo.checkout_head(Some(
        git2::build::CheckoutBuilder::new()
            .force()
            .overwrite_ignored(false)
            .remove_untracked(false)
            .remove_ignored(false),
    ))?;
    Ok(())
}

pub fn close(ws: &Workspace, id: &str, reason: Option<String>, now: Timestamp) -> Result<()> {
    let _lock = ws.lock()?;
    let pull = ws.pull(id)?;
    if pull.state != PullState::Open {
        return Err(refuse(
            Code::NotOpen,
            format!("proposal {id} is already {}", pull.state.as_str()),
        ));
    }
    ws.forge
        .set_state(pull.number, PullState::Closed, None, reason.clone())?;
    ws.record(
        vec![Event::Closed {
            proposal: pull.proposal.clone(),
            reason,
        }],
        now,
    )?;
    Ok(())
}
