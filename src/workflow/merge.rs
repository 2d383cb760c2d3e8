//! `atelier merge` and `atelier close`, on every forge. A merge happens only when the gate,
//! recomputed at that instant, allows it; the forge then lands exactly the approved merge,
//! guarded by the approved base (local) or head (GitHub), and what landed is checked again
//! against the approval: the protected branch's tip, its tree and its parents. Anything else
//! raises an alarm the ledger keeps for good.

use crate::workflow::error::Result;
use git2::Oid;

use super::gate::{judge, GateRun};
use super::{decision_event, refuse, Evaluation, Workspace};
use crate::audit::ledger::{self, Event, MergeRecord};
use crate::audit::view::Intent;
use crate::forge::Publish;
use crate::forge::{Addr, Landing, MergeRequest, PullState};
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::token::{self, Verdict};
use crate::governance::Code;

#[derive(Debug, serde::Serialize)]
pub struct Merged {
    pub id: String,
    pub pull: u64,
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
    Refused(Box<GateRun>),
}

/// The commit message of a gate merge: trailers, then every counted approval token.
pub fn merge_message(eval: &Evaluation) -> String {
    merge_message_at(eval, None)
}

/// [`merge_message`] with the `Atelier-Ledger: <size> <root>` trailer: the ledger checkpoint at
/// the time of the merge, so the branch itself anchors the ledger against a rollback.
pub fn merge_message_at(eval: &Evaluation, anchor: Option<&ledger::Anchor>) -> String {
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

/// A merge on the forge the gate did not make.
const OUTSIDE: Code = Code::MergedOutsideGate;
/// The forge names a merge commit that is not the protected branch's new tip.
const NOT_TIP: Code = Code::LandedNotTip;

/// Re-runs the gate on the proposal `addr` names and, if it allows the merge, lands it through
/// the forge, checks what landed, records it and publishes the ledger.
pub fn merge(ws: &Workspace, addr: &Addr, now: Timestamp) -> Result<MergeOutcome> {
    let _lock = ws.lock()?;
    merge_locked(ws, addr, now)
}

/// A merge this gate asked for may have landed without being recorded (a crash, a lost
/// answer): it is concluded from the recorded request instead of judging a merged pull request.
/// Any other merge on the forge is a bypass, and raises an alarm.
fn merged_on_forge(
    ws: &Workspace,
    view: &crate::audit::view::LedgerView,
    n: u64,
    now: Timestamp,
) -> Result<Option<MergeOutcome>> {
    let Some(m) = ws.forge.merged_on_forge(n)? else {
        return Ok(None);
    };
    if let Some(intent) = view.unconcluded_request(&m.proposal, n) {
        // Only a merge this gate's own account made concludes its request; anyone else's
        // merge of the same head is a bypass, whatever the request says.
        let me = own_account(ws)?;
        if m.by.as_deref() == Some(me.as_str()) {
            let clean = checkout_is_clean(ws, Oid::from_str(&intent.tree)?)?;
            return conclude(ws, &intent, m.commit, Vec::new(), false, clean, now).map(Some);
        }
        let detail = format!(
            "pull request #{n} was merged on the forge as {} by {}, not by the gate's account ({me}), while the gate's own merge request was unanswered",
            m.commit,
            m.by.as_deref().unwrap_or("an unknown account")
        );
        return Err(alarm(ws, &m.proposal, n, OUTSIDE, detail, now));
    }
    if !view.merged(&m.proposal, n) {
        // Merged on the forge, and not by this gate: branch protection was bypassed.
        let detail = format!(
            "pull request #{n} was merged on the forge as {}, but not by the gate (no unconcluded merge request of its own is recorded)",
            m.commit
        );
        return Err(alarm(ws, &m.proposal, n, OUTSIDE, detail, now));
    }
    Ok(None)
}

/// [`merge`] under the repository lock the caller holds.
pub fn merge_locked(ws: &Workspace, addr: &Addr, now: Timestamp) -> Result<MergeOutcome> {
    ws.gate_key()?;
    let notes = super::sync::sync(ws, true)?;
    let view = ws.view()?;
    let n = ws.pull_for(&view, addr)?;
    if let Some(concluded) = merged_on_forge(ws, &view, n, now)? {
        return Ok(concluded);
    }
    let run = judge(ws, &view, addr, now, Publish::Verdict, Vec::new(), notes)?;
    // `merge` records its decision every time (unless the evaluation just did).
    if !run.decided {
        ws.record(vec![decision_event(&run.eval)], now)?;
    }
    if !run.eval.decision.allowed {
        ws.forge.publish_ledger(&ws.site())?;
        return Ok(MergeOutcome::Refused(Box::new(run)));
    }
    let eval = &run.eval;
    let n = eval.pull.number;
    let tree = eval
        .merge_tree
        .expect("an allowed decision always has a merge tree");
    let intent = Intent {
        proposal: eval.pull.proposal.clone(),
        pull: n,
        base: eval.change.base.clone(),
        head: eval.change.head.clone(),
        tree: tree.to_string(),
    };
    let clean = checkout_is_clean(ws, tree)?;
    // A forge that builds the merge itself is asked only after the request is recorded:
    // whatever happens next, the ledger knows what was meant.
    let snap = if ws.forge.lands_remotely() {
        ws.record(vec![intent.event()], now)?
    } else {
        ledger::read(&ws.repo)?.expect("the decision was just recorded")
    };
    // The merge commit carries the ledger's checkpoint: the branch anchors the ledger.
    let anchor = ledger::Anchor::sign(
        &ws.origin(),
        &snap,
        ledger::MergeIdentity {
            base: &intent.base,
            head: &intent.head,
            tree: &intent.tree,
        },
        &ws.gate_key()?,
    );
    let message = merge_message_at(eval, Some(&anchor));
    debug_assert!(token::RawToken::extract_all(&message).len() == eval.decision.approvers.len());
    let req = MergeRequest {
        proposal: intent.proposal.clone(),
        pull: n,
        base: Oid::from_str(&intent.base)?,
        head: Oid::from_str(&intent.head)?,
        tree,
        message,
    };
    let prepared = ws.forge.prepare(&ws.site(), &req, now)?;
    if let Some(commit) = prepared {
        // Recorded before the branch moves: a crash after the swap still leaves the merge in
        // the ledger.
        ws.record(
            vec![Event::MergeStarted(record(&intent, commit.to_string()))],
            now,
        )?;
    }
    // Published before the merge exists: a clone that sees the merge commit can always fetch a
    // ledger that extends the checkpoint it names (otherwise it would look like a rollback).
    ws.forge.publish_ledger(&ws.site())?;
    let commit_of = |c: Option<Oid>| c.map(|c| c.to_string()).unwrap_or_default();
    let landed = match ws.forge.merge(&ws.site(), &req, prepared)? {
        Landing::Landed(sha) => sha,
        Landing::BaseMoved { found } => {
            let branch = ws.branch();
            ws.record(
                vec![Event::MergeAborted {
                    proposal: intent.proposal.clone(),
                    commit: commit_of(prepared),
                    reason: format!("{branch} moved: expected {}, found {found}", intent.base),
                }],
                now,
            )?;
            ws.forge.publish_ledger(&ws.site())?;
            return Err(refuse(
                Code::BaseMoved,
                format!(
                    "{branch} moved while merging: expected {}, found {found}; nothing was merged — run the gate again",
                    intent.base
                ),
            ));
        }
        Landing::HeadMoved { found, reason } => {
            ws.record(vec![aborted(&intent, prepared, reason.clone())], now)?;
            ws.forge.publish_ledger(&ws.site())?;
            return Err(refuse(
                Code::HeadMoved,
                format!(
                    "the forge refused the merge of #{n} ({reason}): expected head {}, found {found}. Nothing was merged; atelier never retries with a new head — the new head needs new approvals",
                    intent.head
                ),
            ));
        }
        Landing::NotMergeable(reason) => {
            ws.record(vec![aborted(&intent, prepared, reason.clone())], now)?;
            ws.forge.publish_ledger(&ws.site())?;
            return Err(refuse(
                Code::NotMergeable,
                format!(
                    "the forge refused the merge of #{n}: {reason}; nothing was merged — if the branch is not up to date, merge {} into atelier/proposals/{} on this machine and `atelier submit {}` (never the forge's own branch update); if another required check fails, fix that first",
                    ws.branch(),
                    intent.proposal,
                    intent.proposal
                ),
            ));
        }
        // A retried merge may already have landed: the forge then says "merged". Only a merge
        // by the gate's own account is that one.
        Landing::MergedBy { commit, by } => {
            if by.as_deref() == Some(own_account(ws)?.as_str()) {
                commit
            } else {
                let detail = format!(
                    "pull request #{n} was merged on the forge as {commit} by {}, not by the gate's account, while the gate was merging it",
                    by.as_deref().unwrap_or("an unknown account")
                );
                return Err(alarm(ws, &intent.proposal, n, OUTSIDE, detail, now));
            }
        }
    };
    conclude(
        ws,
        &intent,
        landed,
        eval.decision.approvers.clone(),
        true,
        clean,
        now,
    )
}

fn record(intent: &Intent, commit: String) -> MergeRecord {
    MergeRecord {
        proposal: intent.proposal.clone(),
        pull: intent.pull,
        commit,
        base: intent.base.clone(),
        head: intent.head.clone(),
        tree: intent.tree.clone(),
    }
}

/// Closes a merge request the forge refused.
fn aborted(intent: &Intent, prepared: Option<Oid>, reason: String) -> Event {
    Event::MergeAborted {
        proposal: intent.proposal.clone(),
        commit: prepared.map(|c| c.to_string()).unwrap_or_default(),
        reason,
    }
}

/// The forge account the gate merges as; an error (not a guess) when the forge does not say,
/// so that a merge the gate made is never mistaken for someone else's.
fn own_account(ws: &Workspace) -> Result<String> {
    ws.forge.own_account()?.ok_or_else(|| {
        crate::workflow::Error::Input("the forge did not say which account the gate's token belongs to (GET /user refused): merge needs a token that may read it, to tell the gate's merges from others'; nothing was recorded — run it again".to_string())
    })
}

/// Records an alarm, publishes the ledger, says so on the pull request, and returns the
/// refusal.
fn alarm(
    ws: &Workspace,
    proposal: &str,
    n: u64,
    code: Code,
    detail: String,
    now: Timestamp,
) -> crate::workflow::Error {
    let recorded = ws.record(
        vec![Event::Alarm {
            proposal: proposal.to_string(),
            pull: n,
            code: code.to_string(),
            detail: detail.clone(),
        }],
        now,
    );
    if let Err(e) = recorded {
        return super::Error::RefusedBecause {
            refusal: super::Refusal::new(
                code,
                format!("{detail} — and the alarm could not be recorded"),
            ),
            source: Box::new(e),
        };
    }
    let pushed = ws.forge.publish_ledger(&ws.site());
    let commented = ws.forge.announce_alarm(n, code, &detail);
    let mut message = format!(
        "{detail}; the alarm is recorded in the ledger — investigate before anything else merges"
    );
    if let Err(e) = pushed.and(commented) {
        message.push_str(&format!(
            " (publishing it failed: {})",
            crate::errors::chain(&e)
        ));
    }
    refuse(code, message)
}

/// Whether `commit` is on `tip`'s first-parent line, looking no further back than `stop` (the
/// merged base: the merge, if there, is after it).
fn on_first_parent_line(ws: &Workspace, tip: Oid, commit: Oid, stop: Oid) -> Result<bool> {
    let mut walk = ws.repo.revwalk()?;
    walk.push(tip)?;
    walk.simplify_first_parent()?;
    for oid in walk {
        let oid = oid?;
        if oid == commit {
            return Ok(true);
        }
        if oid == stop {
            return Ok(false);
        }
    }
    Ok(false)
}

/// Checks what landed against the request (the commit the forge named is the protected
/// branch's new tip, or with `fresh` false (a request from an earlier run) on its first-parent
/// line; parents [base, head]; exactly the approved tree), records `merged` or an `alarm`,
/// publishes the ledger and brings the local branch and its checkout along.
fn conclude(
    ws: &Workspace,
    intent: &Intent,
    landed: String,
    approvers: Vec<String>,
    fresh: bool,
    clean: Option<bool>,
    now: Timestamp,
) -> Result<MergeOutcome> {
    let n = intent.pull;
    let base = Oid::from_str(&intent.base)?;
    let head = Oid::from_str(&intent.head)?;
    let tree = Oid::from_str(&intent.tree)?;
    let fetched_base = ws.forge.fetch_base(&ws.site())?;
    // The forge's answer is not trusted: the commit it names must be what the protected branch
    // now holds (its new tip; for a request concluded later, on its first-parent line).
    let named = Oid::from_str(&landed).ok();
    let on_branch = match named {
        Some(o) if fresh => o == fetched_base,
        Some(o) => on_first_parent_line(ws, fetched_base, o, base)?,
        None => false,
    };
    let commit = match named.and_then(|o| ws.repo.find_commit(o).ok()) {
        Some(c) if on_branch => c,
        _ => {
            let detail = format!(
                "the forge reports merge commit `{landed}` for pull request #{n}, but after fetching, {}'s tip is {fetched_base}{}: what the branch holds is not what the forge said it merged",
                ws.branch(),
                if fresh { "" } else { " and the commit is not on its first-parent line" }
            );
            return Err(alarm(ws, &intent.proposal, n, NOT_TIP, detail, now));
        }
    };
    let parents: Vec<Oid> = commit.parent_ids().collect();
    let problem = if commit.tree_id() != tree {
        Some((
            Code::LandedTreeMismatch,
            format!(
                "{} landed merge commit {landed} with tree {}, but the approved merge tree is {tree}",
                ws.branch(),
                commit.tree_id()
            ),
        ))
    } else if parents != [base, head] {
        Some((
            Code::LandedParentsMismatch,
            format!(
                "the forge landed merge commit {landed} with parents [{}], but the approved merge is of {head} into {base}",
                parents.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ))
    } else {
        None
    };
    if let Some((code, detail)) = problem {
        return Err(alarm(ws, &intent.proposal, n, code, detail, now));
    }
    // A merge that publishes a new gate key records the rotation with it, under the old key.
    let key_path = ws.gate_key_path()?;
    let recovering = super::gatekey::recovering(&key_path);
    let mut events = vec![Event::Merged(record(intent, landed.clone()))];
    let rotation = super::rotation(
        &ws.repo,
        &intent.proposal,
        &intent.base,
        &landed,
        recovering,
    )?;
    let recovered = matches!(
        rotation,
        Some(Event::GateKeyRotated {
            recovered: true,
            ..
        })
    );
    events.extend(rotation);
    ws.record(events, now)?;
    if recovered {
        // The ledger now says which key is in force; the recovery is over.
        let _ = std::fs::remove_file(super::gatekey::recovery_marker(&key_path));
    }
    ws.forge.publish_ledger(&ws.site())?;
    // This clone's record of the proposal, where it has one, says so too.
    if let Ok(id) = super::parse_id(&intent.proposal) {
        if ws.records.get(id).is_ok() {
            ws.records
                .set_state(id, PullState::Merged, Some(landed.clone()), None)?;
        }
    }
    // Concluding a request from an earlier run: the approvers are the ones the message names.
    let approvers = if approvers.is_empty() {
        commit
            .message()
            .unwrap_or("")
            .lines()
            .find_map(|l| l.strip_prefix("Atelier-Approvers: "))
            .map(|a| a.split(", ").map(str::to_string).collect())
            .unwrap_or_default()
    } else {
        approvers
    };
    let (worktree_updated, note) = follow(ws, base, commit.id(), fetched_base, clean)?;
    Ok(MergeOutcome::Merged(Merged {
        id: intent.proposal.clone(),
        pull: n,
        commit: landed,
        base: intent.base.clone(),
        head: intent.head.clone(),
        tree: intent.tree.clone(),
        approvers,
        worktree_updated,
        note,
    }))
}

/// Brings the local protected branch to the landed merge when it was at the merged base (the
/// local forge moved it itself), and its checkout when that loses nothing (`clean`, computed
/// before the merge, and looked at again just before writing). Returns whether the checkout's
/// files were updated, and a note when something was left alone.
fn follow(
    ws: &Workspace,
    base: Oid,
    merged: Oid,
    remote: Oid,
    clean: Option<bool>,
) -> Result<(bool, Option<String>)> {
    let branch = ws.branch();
    let refname = format!("refs/heads/{branch}");
    let local = ws.repo.refname_to_id(&refname).ok();
    let moved_here = local == Some(merged);
    if !moved_here && local != Some(base) {
        return Ok((
            false,
            Some(format!(
                "your local {branch} is not at the merged base, so it was left alone; `git pull` brings it to {remote}"
            )),
        ));
    }
    let left_alone = || {
        if moved_here {
            format!(
                "your checkout of {branch} has local changes (or untracked or ignored files where the merge writes files), so its files were left as they were; bring them up to date, keeping your changes, with `git read-tree -m -u {base} {branch}`"
            )
        } else {
            format!(
                "your checkout of {branch} has local changes (or untracked or ignored files where the merge writes files), so it was left alone; `git pull` brings it to {merged}"
            )
        }
    };
    // Where the forge merged elsewhere, the checkout is looked at now, after the forge
    // answered (files may have been edited meanwhile); where the merge moved the branch here,
    // only the look taken before the move can tell.
    let clean = if moved_here {
        clean
    } else {
        checkout_is_clean(ws, ws.repo.find_commit(merged)?.tree_id())?
    };
    if clean == Some(false) {
        return Ok((false, Some(left_alone())));
    }
    if !moved_here {
        git::compare_and_swap(
            &ws.repo,
            &refname,
            base,
            merged,
            "atelier: follow the merge",
        )?;
    }
    if clean != Some(true) {
        return Ok((false, None));
    }
    // Looked at again just before writing: the files may have changed since.
    let (from, to) = (
        ws.repo.find_commit(base)?.tree_id(),
        ws.repo.find_commit(merged)?.tree_id(),
    );
    if paths_are_safe(ws, from, to)? && checkout_matches(&ws.repo, from)? {
        checkout_merged(&ws.repo)?;
        return Ok((true, None));
    }
    Ok((false, moved_here.then(left_alone)))
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

/// Whether the checkout's index and tracked files are exactly `tree` (nothing modified since
/// the last look: the checkout that follows may overwrite them).
fn checkout_matches(repo: &git2::Repository, tree: Oid) -> Result<bool> {
    let tree = repo.find_tree(tree)?;
    let mut opts = git2::DiffOptions::new();
    opts.include_untracked(false).include_ignored(false);
    let diff = repo.diff_tree_to_workdir_with_index(Some(&tree), Some(&mut opts))?;
    Ok(diff.deltas().len() == 0)
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

/// What `close` did.
pub struct Closed {
    /// Notes for the operator (e.g. a pull request the forge would not close).
    pub notes: Vec<String>,
}

/// Gives a proposal up: records `closed` in the ledger (which no forge record can reopen),
/// marks this clone's record, publishes the ledger, and closes the pull request on the forge.
pub fn close(ws: &Workspace, id: &str, reason: Option<String>, now: Timestamp) -> Result<Closed> {
    let _lock = ws.lock()?;
    super::sync::sync(ws, true)?;
    let view = ws.view()?;
    // The record must be the one the ledger opened under this id: an edited record never
    // closes another proposal.
    let (pull, _, _) = ws.checked_record(&view, ws.pull(id)?)?;
    if pull.proposal != id {
        return Err(refuse(
            Code::ForgeState,
            format!(
                "the forge record of proposal {id} names proposal {}; the forge record was edited",
                pull.proposal
            ),
        ));
    }
    let mut notes = Vec::new();
    if view.closed(&pull.proposal) && pull.state != PullState::Open {
        return Err(refuse(
            Code::NotOpen,
            format!("proposal {id} is already closed (by its record and the ledger)"),
        ));
    }
    if view.closed(&pull.proposal) {
        // Recorded before, but a step after it failed: finish them.
        notes.push(format!(
            "the ledger already records proposal {id} as closed; finishing what the first `close` left undone"
        ));
    } else {
        if view.finished(&pull.proposal) {
            return Err(refuse(
                Code::NotOpen,
                format!("proposal {id} is already merged (by the ledger)"),
            ));
        }
        // A merge the gate asked for may have landed unrecorded (a lost answer): closing now
        // would make it look like a merge outside the gate for good.
        let n = ws.pull_for(&view, &Addr::Proposal(id.to_string())).ok();
        let pending = n.is_some_and(|n| view.unconcluded_request(&pull.proposal, n).is_some());
        let merged = match n {
            Some(n) => ws.forge.merged_on_forge(n)?.is_some(),
            None => false,
        };
        if pending || merged {
            return Err(refuse(
                Code::NotOpen,
                format!(
                    "proposal {id} {}: run `atelier merge {id}` to conclude the merge; nothing was closed",
                    if merged {
                        "is merged on the forge"
                    } else {
                        "has a merge request of the gate's that the forge never answered"
                    }
                ),
            ));
        }
        ws.record(
            vec![Event::Closed {
                proposal: pull.proposal.clone(),
                reason: reason.clone(),
            }],
            now,
        )?;
    }
    if let Err(e) = ws.forge.publish_ledger(&ws.site()) {
        notes.push(format!(
            "the ledger records the close but was not pushed ({}); the next command that pushes it catches up",
            crate::errors::chain(&e)
        ));
    }
    // This clone's record is marked last: until the forge's pull request is closed too, running
    // `close` again finishes the job.
    match ws.forge.withdraw(&view, &pull.proposal, reason.as_deref()) {
        Ok(()) => ws
            .records
            .set_state(pull.number, PullState::Closed, None, reason)?,
        Err(e) => notes.push(format!(
            "the forge's pull request stays open ({}); run `atelier close {id}` again to finish (the gate refuses it meanwhile: {})",
            crate::errors::chain(&e),
            Code::NotOpen
        )),
    }
    Ok(Closed { notes })
}
