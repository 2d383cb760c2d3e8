//! `atelier gate`, on every forge: take in what others recorded, read the change as the forge
//! carries it now, run the gate, record the tokens the ledger lacks and the verdict, and show
//! the verdict on the forge.

use crate::workflow::error::Result;

use super::{evaluate_at, Evaluation, Workspace};
use crate::audit::ledger::Event;
use crate::audit::view::LedgerView;
use crate::forge::{Addr, Comment, GateStatus, Publish, Shown, DESCRIPTION_MAX};
use crate::governance::time::Timestamp;
use crate::governance::token::{self, RawToken, Verdict};
use crate::governance::Code;

/// What `gate` did.
pub struct GateRun {
    pub eval: Evaluation,
    pub status: GateStatus,
    pub description: String,
    /// Tokens newly recorded in the ledger.
    pub recorded: usize,
    /// Whether the verdict was recorded as a `gate-decision`.
    pub decided: bool,
    /// What the forge shows of the verdict (GitHub: the status set), if anything.
    pub published: Option<String>,
    pub notes: Vec<String>,
}

/// The status a decision shows, and its description (at most 140 characters).
pub fn status_for(eval: &Evaluation) -> (GateStatus, String) {
    let d = &eval.decision;
    let (state, text) = if d.allowed {
        (
            GateStatus::Success,
            format!("approved by {}", d.approvers.join(", ")),
        )
    } else {
        let waiting = d.unmet().all(|r| {
            matches!(
                r.code,
                Code::QuorumNotMet | Code::ConstitutionQuorum | Code::NewPolicyQuorum
            )
        });
        let first = d.unmet().next();
        let text = first
            .map(|r| format!("{}: {}", r.code, r.summary))
            .unwrap_or_else(|| "refused".into());
        let more = d.unmet().count().saturating_sub(1);
        let text = if more > 0 {
            format!("{text} (+{more} more)")
        } else {
            text
        };
        (
            if waiting {
                GateStatus::Pending
            } else {
                GateStatus::Failure
            },
            text,
        )
    };
    (state, crate::text::clip(&text, DESCRIPTION_MAX))
}

/// Runs the gate on the proposal `addr` names and records its decision (the `gate` command).
pub fn gate(ws: &Workspace, addr: &Addr, now: Timestamp, publish: Publish) -> Result<GateRun> {
    let _lock = ws.lock()?;
    gate_locked(ws, addr, now, publish, Vec::new())
}

/// [`gate`] under a lock the caller holds, with comment bodies the forge delivered (signed
/// webhook payloads) read as carriers too: a comment deleted between its delivery and the
/// evaluation keeps its tokens.
pub fn gate_locked(
    ws: &Workspace,
    addr: &Addr,
    now: Timestamp,
    publish: Publish,
    delivered: Vec<Comment>,
) -> Result<GateRun> {
    let notes = super::sync::sync(ws, false)?;
    let view = ws.view()?;
    judge(ws, &view, addr, now, publish, delivered, notes)
}

pub(super) fn judge(
    ws: &Workspace,
    view: &LedgerView,
    addr: &Addr,
    now: Timestamp,
    publish: Publish,
    delivered: Vec<Comment>,
    mut notes: Vec<String>,
) -> Result<GateRun> {
    let n = ws.pull_for(view, addr)?;
    let carried = ws.forge.carried(&ws.site(), view, n, publish, delivered)?;
    check_addressed(addr, &carried)?;
    let eval = evaluate_at(ws, view, carried.pull, carried.base, carried.head, now)?;
    let (status, description) = status_for(&eval);
    let mut recorded = 0;
    let mut decided = false;
    let mut published = None;
    if publish != Publish::Nothing {
        // Record first: a failure to publish must not lose a rejection, and the ledger's clock
        // floor must not lag behind a verdict published.
        match ws.gate_key() {
            Ok(_) => {
                // A forge that records tokens as they are posted has them all already.
                let mut events = if ws.forge.records_on_post() {
                    Vec::new()
                } else {
                    new_token_events(ws, view, &eval)
                };
                recorded = events.len();
                let decision = decision_event(&eval);
                if ws.forge.records_each_verdict()
                    || (eval.change.open && verdict_changed(view, &eval, &decision))
                {
                    events.push(decision);
                    decided = true;
                }
                if !events.is_empty() {
                    ws.record(events, now)?;
                    // Published at once: every clone's view of the ledger (and this machine's
                    // memory of it) stays one the forge can give them.
                    if let Err(e) = ws.forge.publish_ledger(&ws.site()) {
                        notes.push(format!(
                            "the ledger was recorded but not pushed ({}); the next command that pushes it catches up",
                            crate::errors::chain(&e)
                        ));
                    }
                }
            }
            // Anyone who can read the clone may ask what the gate needs; only the key's holder
            // records it (`merge` runs the gate again, with the key).
            Err(_) => notes.push(
                "no gate key here (it is kept by whoever adopted the repository): the change was judged, and nothing was recorded in the ledger".into(),
            ),
        }
        let shown = Shown {
            pull: eval.pull.number,
            head: &eval.change.head,
            status,
            description: &description,
            summary: &super::body::summary(&eval),
        };
        published = ws.forge.publish_verdict(&shown, &carried.editable)?;
    }
    Ok(GateRun {
        eval,
        status,
        description,
        recorded,
        decided,
        published,
        notes,
    })
}

/// A proposal named by its id must be the one the forge's pull request carries (its branch
/// names the proposal): an edited record or a hand-made mapping never makes `gate 2` judge, or
/// `merge 2` merge, proposal 1.
pub(super) fn check_addressed(addr: &Addr, carried: &crate::forge::Carried) -> Result<()> {
    match addr {
        Addr::Proposal(id) if *id != carried.pull.proposal => Err(super::refuse(
            Code::ForgeState,
            format!(
                "proposal {id} resolves to pull request #{}, which carries proposal {}: the forge record or the pull request was edited",
                carried.pull.number, carried.pull.proposal
            ),
        )),
        _ => Ok(()),
    }
}

/// The `gate-decision` entry for an evaluation.
pub fn decision_event(eval: &Evaluation) -> Event {
    Event::GateDecision {
        proposal: eval.pull.proposal.clone(),
        base: eval.change.base.clone(),
        head: eval.change.head.clone(),
        merge_tree: eval.merge_tree.map(|t| t.to_string()),
        allowed: eval.decision.allowed,
        // Each code once: two rules of a new policy unmet are one `E_NEW_POLICY_QUORUM`.
        unmet: eval.decision.unmet().map(|r| r.code.to_string()).fold(
            Vec::new(),
            |mut codes, c| {
                if !codes.contains(&c) {
                    codes.push(c);
                }
                codes
            },
        ),
        approvers: eval.decision.approvers.clone(),
    }
}

/// Whether a verdict about to be published differs from the last `gate-decision` the ledger
/// holds for the proposal (base, head, merge tree, outcome, unmet codes, approvers): only then
/// is it recorded, so evaluations that change nothing append nothing. Nothing is recorded while
/// a merge request of the gate's stands unconcluded (a decision in between would make the
/// request look superseded).
fn verdict_changed(view: &LedgerView, eval: &Evaluation, decision: &Event) -> bool {
    if view
        .unconcluded_request(&eval.pull.proposal, eval.pull.number)
        .is_some()
    {
        return false;
    }
    view.last_decision(&eval.pull.proposal) != Some(decision)
}

/// The pull request a token may be recorded under for `proposal`, seen on pull request `n`:
/// its own, if the token names this repository and proposal and either names `n` or is a
/// rejection naming another pull request `submit` recorded for the proposal (a veto binds the
/// proposal across its pull requests; an approval only the pull request it was given on).
pub fn bound_pull(
    ws: &Workspace,
    view: &LedgerView,
    t: &RawToken,
    proposal: &str,
    n: u64,
) -> Option<u64> {
    let p = token::Payload::parse(&t.payload).ok()?;
    if p.repository != ws.config.forge.repository || p.proposal != proposal {
        return None;
    }
    if p.pull == n
        || (p.decision == Verdict::Reject && view.submitted_pulls(proposal).contains(&p.pull))
    {
        return Some(p.pull);
    }
    None
}

/// `TokenRecorded` events for tokens in the pull request's comments the ledger lacks: only
/// tokens bound to this proposal (see [`bound_pull`]), signed by a key `allowed_signers` lists
/// at base. Junk, or tokens pasted from elsewhere, never reach the permanent record.
fn new_token_events(ws: &Workspace, view: &LedgerView, eval: &Evaluation) -> Vec<Event> {
    let mut known = view.recorded_tokens(&eval.pull.proposal);
    let listed = |t: &RawToken| {
        eval.tokens.iter().position(|x| x == t).is_some_and(|i| {
            eval.decision
                .tokens
                .iter()
                .any(|r| r.index == i && r.principal.is_some())
        })
    };
    let mut events = Vec::new();
    for c in &eval.pull.comments {
        for t in RawToken::extract_all(&c.body) {
            if known.contains(&t) || !listed(&t) {
                continue;
            }
            if let Some(pull) = bound_pull(ws, view, &t, &eval.pull.proposal, eval.pull.number) {
                known.push(t.clone());
                events.push(Event::TokenRecorded {
                    proposal: eval.pull.proposal.clone(),
                    pull,
                    comment: c.id,
                    token: t.to_text(),
                });
            }
        }
    }
    events
}
