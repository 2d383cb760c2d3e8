//! The governed loop on GitHub: `submit`, `approve --pr`, `gate --pr`, `merge --pr`. The same
//! gate (`evaluate_at` → `decide`), tokens and ledger as the local forge; GitHub only carries
//! the change (a pull request), the tokens (comments) and the outcome (a commit status, a
//! summary comment, a merge through the API).
//!
//! Trust: only signed tokens are authority. Labels, GitHub reviews' states, comment authors and
//! other statuses are never read as approval. Git objects are fetched with the user's own `git`
//! (their credentials) and every tree the gate judges is computed here, locally.

use std::path::Path;

use anyhow::{Context, Result};
use ed25519_dalek::SigningKey;
use git2::Oid;
use octocrab::models::pulls::PullRequest as GhPull;
use octocrab::models::StatusState;

use super::{
    decision_event, evaluate_at, merge_message_at, refuse, ApproveOptions, Evaluation, Workspace,
};
use crate::audit::ledger::{self, Event, MergeRecord};
use crate::forge::github::GitHub;
use crate::forge::{Comment, PullRequest, PullState};
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::token::{self, RawToken, Verdict};
use crate::governance::Code;

/// The commit status the gate sets; branch protection requires it.
pub const STATUS_CONTEXT: &str = "atelier/governance";
/// The label every submitted proposal carries (informational: it grants nothing).
pub const LABEL: &str = "atelier-proposal";
/// Marks the one summary comment the gate keeps up to date.
pub const SUMMARY_MARKER: &str = "<!-- atelier:gate-summary -->";
/// GitHub's limit on a status description.
pub const DESCRIPTION_MAX: usize = 140;
/// The pull-request body template; a repository may replace it with `prompts/pull_request.j2`.
pub const DEFAULT_BODY_TEMPLATE: &str = r#"<!-- atelier:proposal {{ proposal.id }} -->
**Atelier proposal {{ proposal.id }}**{% if proposal.proposer %}, proposed by {{ proposal.proposer }}{% endif %}.
Base `{{ base }}`, head `{{ head }}`. Record: `{{ record_path }}`.

{% if proposal.rationale %}### Rationale, contract and evidence

{{ proposal.rationale }}
{% endif %}
### Files changed ({{ files | length }})
{% for f in files %}
- `{{ f }}`{% endfor %}

### Review panel
{% if verdict %}{{ verdict }}{% else %}No panel verdict: the adversarial review panel is not built yet.{% endif %}

### Approving
Only signed tokens count — not GitHub reviews, labels or who comments. To approve this exact change:

    atelier approve --pr <this pull request's number> --key <your ed25519 key> --post

A push to this branch makes every earlier token stale. The `atelier/governance` status and the
gate's summary comment say what is still missing.
"#;

fn git_cli(root: &Path, args: &[&str]) -> Result<()> {
    git::git_cli(root, args).map(drop)
}

/// Fetches `refspecs` from the forge's remote with the user's `git`.
fn fetch(ws: &Workspace, refspecs: &[String]) -> Result<()> {
    let mut args = vec![
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        ws.config.forge.remote.as_str(),
    ];
    args.extend(refspecs.iter().map(String::as_str));
    git_cli(&ws.root, &args)
}

fn remote_base_ref(ws: &Workspace) -> String {
    format!("refs/atelier/github/heads/{}", ws.branch())
}

/// Fetches the protected branch into its private ref; returns its tip.
fn fetch_base(ws: &Workspace) -> Result<Oid> {
    let base_ref = remote_base_ref(ws);
    fetch(ws, &[format!("+refs/heads/{}:{base_ref}", ws.branch())]).with_context(|| {
        format!(
            "fetching {} from remote `{}`",
            ws.branch(),
            ws.config.forge.remote
        )
    })?;
    Ok(ws.repo.refname_to_id(&base_ref)?)
}

/// Fetches the protected branch and `refs/pull/<n>/head` into private refs; returns their tips.
fn fetch_pull(ws: &Workspace, n: u64) -> Result<(Oid, Oid)> {
    let base_ref = remote_base_ref(ws);
    let head_ref = format!("refs/atelier/github/pull/{n}/head");
    fetch(
        ws,
        &[
            format!("+refs/heads/{}:{base_ref}", ws.branch()),
            format!("+refs/pull/{n}/head:{head_ref}"),
        ],
    )
    .with_context(|| {
        format!(
            "fetching {} and pull request #{n} from remote `{}`",
            ws.branch(),
            ws.config.forge.remote
        )
    })?;
    let base = ws.repo.refname_to_id(&base_ref)?;
    let head = ws.repo.refname_to_id(&head_ref)?;
    Ok((base, head))
}

/// Brings the local ledger up to the remote's when the remote's extends it; keeps the local one
/// when it is ahead (not pushed yet); refuses when they diverged.
pub fn sync_ledger(ws: &Workspace) -> Result<()> {
    let fetched = "refs/atelier/github/ledger";
    // The remote may have no ledger yet: fetch it only if it is advertised.
    let advertised = git::git_cli(
        &ws.root,
        &["ls-remote", &ws.config.forge.remote, ledger::REF],
    )?;
    if advertised.is_empty() {
        return ws.check_floors();
    }
    fetch(ws, &[format!("+{}:{fetched}", ledger::REF)])?;
    let theirs = ws.repo.refname_to_id(fetched)?;
    let ours = ws.repo.refname_to_id(ledger::REF).ok();
    let gate_machine = ws.gate_key().is_ok();
    let diverged = |o: Oid, why: &str| {
        refuse(
            Code::LedgerDiverged,
            format!(
                "the local ledger ({o}) and remote `{}`'s ({theirs}) disagree: {why}; nothing was recorded — compare them with `git log {o} {theirs}` and `atelier audit verify`",
                ws.config.forge.remote
            ),
        )
    };
    match ours {
        Some(o) if o == theirs || ws.repo.graph_descendant_of(o, theirs)? => {}
        // The gate machine is the ledger's only writer: entries it did not write are never
        // taken in, whatever they say (a fast-forward can still rewrite history: a new commit
        // may carry any tree).
        Some(o) if gate_machine => {
            return Err(diverged(
                o,
                "the remote has ledger commits this gate machine did not write",
            ))
        }
        Some(o) if ws.repo.graph_descendant_of(theirs, o)? => {
            let mine = ledger::read_at(&ws.repo, o)?;
            let remote = checked_remote_ledger(ws, theirs)?;
            if remote.lines.get(..mine.lines.len()) != Some(&mine.lines[..]) {
                return Err(diverged(o, "the remote's entries do not extend this one's"));
            }
            git::compare_and_swap(
                &ws.repo,
                ledger::REF,
                o,
                theirs,
                "atelier: ledger from remote",
            )?;
        }
        Some(o) => return Err(diverged(o, "neither extends the other")),
        None => {
            checked_remote_ledger(ws, theirs)?;
            ws.repo
                .reference(ledger::REF, theirs, false, "atelier: ledger from remote")?;
        }
    }
    // Whatever was (or was not) taken in, the ledger this clone now holds must extend what it
    // and the branch saw before.
    ws.check_floors()?;
    Ok(())
}

/// The remote's ledger at `tip`, refused unless its checkpoint is signed by the gate key the
/// protected branch publishes (`policies/gate_key.pub`) and covers exactly its entries.
fn checked_remote_ledger(ws: &Workspace, tip: Oid) -> Result<ledger::Snapshot> {
    let snap = ledger::read_at(&ws.repo, tip)?;
    let bad = |why: String| {
        refuse(
            Code::LedgerUnverified,
            format!(
                "remote `{}`'s ledger ({tip}) was not taken in: {why}; run `atelier audit verify` on a clone to see what is wrong",
                ws.config.forge.remote
            ),
        )
    };
    let branch = match ws.repo.refname_to_id(&remote_base_ref(ws)) {
        Ok(b) => b,
        Err(_) => git::branch_tip(&ws.repo, ws.branch())?,
    };
    let key = super::published_gate_key(&ws.repo, &branch.to_string())?
        .ok_or_else(|| bad(format!("{} has no usable gate key", ws.branch())))?;
    let cp =
        crate::audit::checkpoint::Checkpoint::verify(&snap.checkpoint, ledger::KEY_NAME, &[key])
            .map_err(|e| {
                bad(format!(
                    "its checkpoint does not verify under the gate key: {e}"
                ))
            })?;
    if cp.size != snap.lines.len() as u64
        || cp.root != crate::audit::merkle::root(&snap.leaf_hashes())
    {
        return Err(bad(format!(
            "its {} entries do not match its checkpoint (size {})",
            snap.lines.len(),
            cp.size
        )));
    }
    // Each ledger commit extends its parent's entries: an older snapshot committed on top of a
    // newer one (a rewind dressed as a fast-forward) is refused.
    if let Ok(parent) = ws.repo.find_commit(tip).and_then(|c| c.parent_id(0)) {
        let before = ledger::read_at(&ws.repo, parent)?;
        if snap.lines.get(..before.lines.len()) != Some(&before.lines[..]) {
            return Err(bad(format!(
                "its last commit does not extend the previous one ({parent}): the ledger was rewound"
            )));
        }
    }
    // A ledger that does not extend what this clone (or the branch) already saw is a rollback,
    // whatever its signatures say.
    let leaves = snap.leaf_hashes();
    for floor in ws.floors()? {
        ledger::check_floor(&leaves, &floor)?;
    }
    Ok(snap)
}

/// Pushes the ledger to the remote (fast-forward only).
pub fn push_ledger(ws: &Workspace) -> Result<()> {
    git_cli(
        &ws.root,
        &[
            "push",
            "--quiet",
            &ws.config.forge.remote,
            &format!("{0}:{0}", ledger::REF),
        ],
    )
    .context("pushing refs/atelier/ledger (the remote's ledger must be an ancestor of this one)")
}

/// The proposal id of an `atelier/proposals/<id>` branch.
fn proposal_of(head_ref: &str) -> Option<String> {
    let id = head_ref.strip_prefix("atelier/proposals/")?;
    let canonical = !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && !(id.len() > 1 && id.starts_with('0'));
    canonical.then(|| id.to_string())
}

/// Every event the ledger holds, in order (an unreadable line is skipped here; audit reports it).
fn events(ws: &Workspace) -> Result<Vec<Event>> {
    Ok(match ledger::read(&ws.repo)? {
        Some(snap) => snap
            .lines
            .iter()
            .filter_map(|l| ledger::Entry::parse(l).ok())
            .map(|e| e.event)
            .collect(),
        None => Vec::new(),
    })
}

/// The heads `submit` recorded for each (proposal, pull request), in order.
fn submitted_heads(ws: &Workspace) -> Result<Vec<(String, u64, String)>> {
    Ok(events(ws)?
        .into_iter()
        .filter_map(|e| match e {
            Event::Submitted {
                proposal,
                pull,
                head,
                ..
            } => Some((proposal, pull, head)),
            _ => None,
        })
        .collect())
}

/// Whether `sha` is the head `submit` last recorded for some proposal's pull request (a
/// superseded head gets no protection: it must turn red).
fn is_current_submitted_head(ws: &Workspace, sha: &str) -> Result<bool> {
    let mut latest: std::collections::HashMap<(String, u64), String> = Default::default();
    for (proposal, pull, head) in submitted_heads(ws)? {
        latest.insert((proposal, pull), head);
    }
    Ok(latest.values().any(|h| h == sha))
}

/// The pull request numbers `submit` recorded for a proposal.
fn submitted_pulls(ws: &Workspace, proposal: &str) -> Result<Vec<u64>> {
    Ok(submitted_heads(ws)?
        .into_iter()
        .filter(|(p, _, _)| p == proposal)
        .map(|(_, pull, _)| pull)
        .collect())
}

/// Who proposed `proposal` as pull `n`, as the ledger recorded it.
fn recorded_proposer(ws: &Workspace, proposal: &str, n: u64) -> Result<Option<String>> {
    let mut submitted = None;
    let mut opened = None;
    for event in events(ws)? {
        match event {
            Event::Submitted {
                proposal: p,
                pull,
                proposer,
                ..
            } if p == proposal && pull == n => submitted = Some(proposer),
            Event::ProposalOpened {
                proposal: p,
                proposer,
                ..
            } if p == proposal => opened = Some(proposer),
            _ => {}
        }
    }
    Ok(submitted.or(opened).flatten())
}

/// The forge record of a GitHub pull request, checked against the configuration: it must target
/// the protected branch from this repository's own `atelier/proposals/<id>` branch.
pub fn pull_record(
    ws: &Workspace,
    p: &GhPull,
    head: Oid,
    comments: Vec<Comment>,
) -> Result<PullRequest> {
    let proposal = proposal_shape(ws, p)?;
    let n = p.number;
    check_submitted(ws, &proposal, n, head)?;
    let state = if p.merged_at.is_some() {
        PullState::Merged
    } else if matches!(p.state, Some(octocrab::models::IssueState::Open)) {
        PullState::Open
    } else {
        PullState::Closed
    };
    Ok(PullRequest {
        number: n,
        proposal: proposal.clone(),
        title: p.title.clone().unwrap_or_default(),
        head_branch: p.head.ref_field.clone(),
        base_branch: p.base.ref_field.clone(),
        state,
        proposer: recorded_proposer(ws, &proposal, n)?,
        created: p.created_at.map(|t| t.timestamp()).unwrap_or(0),
        record: String::new(),
        comments,
        merge_commit: p.merge_commit_sha.clone(),
        closed_reason: None,
    })
}

/// Only a head `atelier submit` published for this proposal and pull request can pass: a push
/// by anyone else onto the proposal branch (an approver approving their own commit, say) is
/// refused, and so is a pull request opened by hand from an `atelier/proposals/` branch.
fn check_submitted(ws: &Workspace, proposal: &str, n: u64, head: Oid) -> Result<()> {
    let head = head.to_string();
    // Only the latest: a branch forced back to an earlier submitted head must not revive it.
    let latest = submitted_heads(ws)?
        .into_iter()
        .rev()
        .find(|(p, pull, _)| p == proposal && *pull == n)
        .map(|(_, _, h)| h);
    if latest.as_deref() == Some(head.as_str()) {
        return Ok(());
    }
    Err(refuse(
        Code::NotSubmitted,
        format!(
            "pull request #{n}'s head {head} is not the head `atelier submit` last recorded for proposal {proposal} ({}): a commit pushed onto the proposal branch by hand, or the branch forced back, cannot pass — publish changes with `atelier submit {proposal}` from the proposal's clone",
            latest.unwrap_or_else(|| "none".into())
        ),
    ))
}

/// Checks a pull request's shape from GitHub's record alone, before anything is fetched: it
/// must target the protected branch from this repository's own `atelier/proposals/<id>` branch.
/// Returns the proposal id.
fn proposal_shape(ws: &Workspace, p: &GhPull) -> Result<String> {
    let n = p.number;
    let head_ref = p.head.ref_field.clone();
    let head_repo = p
        .head
        .repo
        .as_ref()
        .and_then(|r| r.full_name.clone())
        .unwrap_or_default();
    let base_ref = p.base.ref_field.clone();
    // Forks and other bases first: their refusals write nothing (see `gate_pr_locked`).
    if base_ref != ws.branch() || !head_repo.eq_ignore_ascii_case(&ws.config.forge.repository) {
        return Err(refuse(
            Code::ForgeState,
            format!(
                "pull request #{n} targets `{base_ref}` from `{head_repo}:{head_ref}`; expected `{}` from a branch of `{}`",
                ws.branch(),
                ws.config.forge.repository
            ),
        ));
    }
    let Some(proposal) = proposal_of(&head_ref) else {
        return Err(refuse(
            Code::NotAProposal,
            format!(
                "pull request #{n} comes from branch `{head_ref}`, not from an `atelier/proposals/<id>` branch: only proposals (`atelier propose`, then `atelier submit`) can pass the gate"
            ),
        ));
    };
    Ok(proposal)
}

/// Marks a carrier that is a review body (its id is a review id, not a comment id).
const REVIEW_TAG: &str = "review by ";

/// Comments and review bodies: everything on the pull request that may carry a token. Line
/// endings are normalised (GitHub's web editor stores CRLF); nothing else is trusted.
fn carriers(gh: &GitHub, n: u64) -> Result<Vec<Comment>> {
    let mut out = Vec::new();
    for c in gh.comments(n)? {
        out.push(Comment {
            id: c.id.into_inner(),
            author: c.user.login.clone(),
            body: c.body.unwrap_or_default().replace("\r\n", "\n"),
            at: c.created_at.timestamp(),
        });
    }
    for r in gh.reviews(n)? {
        if let Some(body) = r.body.filter(|b| !b.is_empty()) {
            out.push(Comment {
                id: r.id.into_inner(),
                author: format!(
                    "{REVIEW_TAG}{}",
                    r.user.map(|u| u.login).unwrap_or_default()
                ),
                body: body.replace("\r\n", "\n"),
                at: r.submitted_at.map(|t| t.timestamp()).unwrap_or(0),
            });
        }
    }
    Ok(out)
}

/// The status a decision sets, and its description (at most 140 characters).
pub fn status_for(eval: &Evaluation) -> (StatusState, String) {
    let d = &eval.decision;
    let (state, text) = if d.allowed {
        (
            StatusState::Success,
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
                StatusState::Pending
            } else {
                StatusState::Failure
            },
            text,
        )
    };
    (state, clip(&text, DESCRIPTION_MAX))
}

fn clip(s: &str, max: usize) -> String {
    let s = s.replace(['\n', '\r'], " ");
    if s.chars().count() <= max {
        return s;
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// The summary comment: every requirement met or unmet, and what the gate made of each token.
pub fn summary_body(eval: &Evaluation, now: Timestamp) -> String {
    let d = &eval.decision;
    let (state, _) = status_for(eval);
    let verdict = match state {
        StatusState::Success => "✅ may merge",
        StatusState::Pending => "⏳ waiting for approvals",
        _ => "❌ refused",
    };
    let mut t = format!(
        "{SUMMARY_MARKER}\n### Atelier gate: {verdict}\n\nProposal `{}` · head `{}` onto `{}` at `{}` · merge tree `{}`\n\n**Requirements**\n\n",
        eval.pull.proposal,
        eval.change.head,
        eval.pull.base_branch,
        eval.change.base,
        eval.merge_tree.map(|t| t.to_string()).unwrap_or_else(|| "none (conflict)".into()),
    );
    for r in &d.requirements {
        t.push_str(&format!(
            "- {} `{}` {}",
            if r.met { "✅" } else { "❌" },
            r.code,
            r.summary.replace('\n', " ")
        ));
        if !r.met {
            t.push_str(&format!(
                " — expected: {}; found: {}",
                clip(&r.expected, 300),
                clip(&r.found, 300)
            ));
        }
        t.push('\n');
    }
    t.push_str("\n**Tokens**\n\n");
    if d.tokens.is_empty() {
        t.push_str("- none yet\n");
    }
    // Tokens from listed keys one by one (a bounded number); the rest only counted, so no
    // amount of junk in comments can push the summary past GitHub's size limit.
    const LISTED_MAX: usize = 50;
    let (known, unknown): (Vec<_>, Vec<_>) = d.tokens.iter().partition(|r| r.principal.is_some());
    if known.len() > LISTED_MAX {
        t.push_str(&format!(
            "- ({} tokens from listed keys; the first {LISTED_MAX} follow)\n",
            known.len()
        ));
    }
    if !unknown.is_empty() {
        let mut codes: Vec<&str> = unknown.iter().map(|r| r.code_text()).collect();
        codes.sort();
        codes.dedup();
        t.push_str(&format!(
            "- {} token(s) not from a key allowed_signers lists: {}\n",
            unknown.len(),
            codes.join(", ")
        ));
    }
    for r in known.into_iter().take(LISTED_MAX) {
        t.push_str(&format!(
            "- {} {}: {}{}\n",
            r.principal.as_deref().unwrap_or("unknown signer"),
            r.decision.map(|v| v.as_str()).unwrap_or("?"),
            if r.counted { "counted" } else { r.code_text() },
            if r.counted || r.detail.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.detail.replace('\n', " "))
            }
        ));
    }
    // No timestamp: an unchanged evaluation leaves the comment as it is (an edit would be
    // delivered as another `issue_comment` event).
    let _ = now;
    t.push_str(
        "\nOnly signed tokens count: GitHub reviews, labels, comment authors and other statuses carry no authority. This comment is rewritten when the evaluation changes.\n",
    );
    clip_body(t)
}

/// GitHub refuses comment and pull-request bodies longer than this many characters.
pub const BODY_MAX: usize = 65_536;

/// Cuts a body to fit GitHub's limit, saying so.
fn clip_body(t: String) -> String {
    const ROOM: usize = BODY_MAX - 200;
    if t.chars().count() <= ROOM {
        return t;
    }
    let mut cut: String = t.chars().take(ROOM).collect();
    cut.push_str("\n\n… (cut to fit GitHub's size limit)\n");
    cut
}

/// What `gate --pr` did.
pub struct GateRun {
    pub eval: Evaluation,
    pub state: StatusState,
    pub description: String,
    /// Tokens newly recorded in the ledger (0 when there is no gate key here).
    pub recorded: usize,
    /// Whether the published verdict was recorded as a `gate-decision` (it changed).
    pub decided: bool,
    pub notes: Vec<String>,
}

/// Evaluates pull request `n` as it is on GitHub now; with `publish`, sets the status and the
/// summary comment, and records tokens the ledger does not have yet (when this machine holds
/// the gate key). Stateless otherwise: running it again is always safe.
pub fn gate_pr(
    ws: &Workspace,
    gh: &GitHub,
    n: u64,
    now: Timestamp,
    publish: Publish,
) -> Result<GateRun> {
    let _lock = ws.lock()?;
    gate_pr_locked(ws, gh, n, now, publish, Vec::new())
}

/// `gate_pr` with comment bodies GitHub delivered (signed webhook payloads) read as carriers
/// too: a comment deleted between its delivery and the evaluation keeps its tokens.
pub fn gate_pr_with(
    ws: &Workspace,
    gh: &GitHub,
    n: u64,
    now: Timestamp,
    publish: Publish,
    delivered: Vec<Comment>,
) -> Result<GateRun> {
    let _lock = ws.lock()?;
    gate_pr_locked(ws, gh, n, now, publish, delivered)
}

/// What an evaluation writes to GitHub.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// Nothing: evaluate only.
    Nothing,
    /// The status and the summary comment.
    Verdict,
    /// `pending` first (a new head arrived), then the verdict.
    PendingThenVerdict,
}

fn gate_pr_locked(
    ws: &Workspace,
    gh: &GitHub,
    n: u64,
    now: Timestamp,
    publish: Publish,
    delivered: Vec<Comment>,
) -> Result<GateRun> {
    let mut notes = Vec::new();
    if let Err(e) = sync_ledger(ws) {
        let rollback = e
            .downcast_ref::<ledger::LedgerError>()
            .is_some_and(|l| matches!(l, ledger::LedgerError::Rollback { .. }));
        if rollback || e.downcast_ref::<super::Refusal>().is_some() {
            return Err(e);
        }
        notes.push(format!("the remote ledger could not be read: {e:#}"));
    }
    // A refused pull request gets `failure` on its head, unless that commit is the head `submit`
    // last recorded for some proposal: statuses belong to commits, and a stray pull request that
    // points at a proposal's current head must not turn that proposal's status red.
    let fail = |sha: &str, e: &anyhow::Error| -> Result<()> {
        if let (Some(r), true) = (
            e.downcast_ref::<super::Refusal>(),
            publish != Publish::Nothing && !is_current_submitted_head(ws, sha)?,
        ) {
            gh.set_status(
                sha,
                StatusState::Failure,
                &clip(&format!("{}: {}", r.code, r.message), DESCRIPTION_MAX),
                STATUS_CONTEXT,
            )?;
        }
        Ok(())
    };
    // The shape first, from GitHub's record: nothing of a fork's or a stray branch's is fetched.
    // A fork's head commit may be a proposal's too, so nothing is written for a fork.
    let first = gh.pull(n)?;
    if let Err(e) = proposal_shape(ws, &first) {
        if e.downcast_ref::<super::Refusal>().map(|r| r.code) == Some(Code::NotAProposal) {
            fail(&first.head.sha, &e)?;
        }
        return Err(e);
    }
    let (p, base, head) = pull_and_tips(ws, gh, n)?;
    let sha = head.to_string();
    let mut carried = carriers(gh, n)?;
    // Issue comments come first; the rest are review bodies (whose ids are not comment ids).
    let issue_comments: Vec<Comment> = carried
        .iter()
        .filter(|c| !c.author.starts_with(REVIEW_TAG))
        .cloned()
        .collect();
    for d in delivered {
        if !carried.iter().any(|c| c.body == d.body) {
            carried.push(d);
        }
    }
    let record = match pull_record(ws, &p, head, carried) {
        Ok(r) => r,
        Err(e) => {
            fail(&sha, &e)?;
            return Err(e);
        }
    };
    if publish == Publish::PendingThenVerdict {
        gh.set_status(&sha, StatusState::Pending, "evaluating…", STATUS_CONTEXT)?;
    }
    let eval = evaluate_at(ws, record, base, head, now)?;
    let (state, description) = status_for(&eval);
    let mut recorded = 0;
    let mut decided = false;
    if publish != Publish::Nothing {
        // Record first: a failure to publish must not lose a rejection, and the ledger's clock
        // floor must not lag behind a verdict published.
        match ws.gate_key() {
            Ok(_) => {
                let mut events = new_token_events(ws, &eval)?;
                recorded = events.len();
                let decision = decision_event(&eval);
                if eval.change.open && verdict_changed(ws, &eval.pull.proposal, n, &decision)? {
                    events.push(decision);
                    decided = true;
                }
                if !events.is_empty() {
                    ws.record(events, now)?;
                    // Published at once: every clone's view of the ledger (and this machine's
                    // memory of it) stays one the remote can give them.
                    if let Err(e) = push_ledger(ws) {
                        notes.push(format!(
                            "the ledger was recorded but not pushed ({e:#}); the next command that pushes it catches up"
                        ));
                    }
                }
            }
            Err(_) => notes
                .push("no gate key here: tokens were judged but not recorded in the ledger".into()),
        }
        gh.set_status(&sha, state, &description, STATUS_CONTEXT)?;
        upsert_summary(gh, n, &issue_comments, &summary_body(&eval, now))?;
    }
    Ok(GateRun {
        eval,
        state,
        description,
        recorded,
        decided,
        notes,
    })
}

/// Whether a verdict about to be published differs from the last `gate-decision` the ledger
/// holds for the proposal (base, head, merge tree, outcome, unmet codes, approvers): only then
/// is it recorded, so webhook-driven evaluations that change nothing append nothing. Nothing is
/// recorded while a merge request of the gate's stands unconcluded (a decision in between would
/// make the request look superseded); the caller records nothing for a proposal that is not
/// open either.
fn verdict_changed(ws: &Workspace, proposal: &str, n: u64, decision: &Event) -> Result<bool> {
    if unconcluded_request(ws, proposal, n)?.is_some() {
        return Ok(false);
    }
    let last = events(ws)?
        .into_iter()
        .rev()
        .find(|e| matches!(e, Event::GateDecision { proposal: p, .. } if p == proposal));
    Ok(last.as_ref() != Some(decision))
}

/// The pull request, with the protected branch and its head fetched; the head GitHub reports
/// and the one fetched must agree (GitHub updates `refs/pull/<n>/head` shortly after a push).
fn pull_and_tips(ws: &Workspace, gh: &GitHub, n: u64) -> Result<(GhPull, Oid, Oid)> {
    let mut tries = 0;
    loop {
        let p = gh.pull(n)?;
        proposal_shape(ws, &p)?;
        let (base, head) = fetch_pull(ws, n)?;
        if p.head.sha == head.to_string() {
            return Ok((p, base, head));
        }
        tries += 1;
        if tries >= 3 {
            return Err(refuse(
                Code::HeadMoved,
                format!(
                    "GitHub reports head {} for pull request #{n}, but refs/pull/{n}/head is {head}: the head is moving; evaluate again when pushes stop",
                    p.head.sha
                ),
            ));
        }
        std::thread::sleep(std::time::Duration::from_millis(500 * tries));
    }
}

/// Every token text the ledger recorded for `proposal`, on any of its pull requests.
fn recorded_tokens(ws: &Workspace, proposal: &str) -> Result<Vec<RawToken>> {
    let mut known = Vec::new();
    for event in events(ws)? {
        if let Event::TokenRecorded {
            proposal: p, token, ..
        } = event
        {
            if p == proposal {
                known.extend(RawToken::extract_all(&token));
            }
        }
    }
    Ok(known)
}

/// The pull request a token may be recorded under for `proposal`, seen on pull request `n`:
/// its own, if the token names this repository and proposal and either names `n` or is a
/// rejection naming another pull request `submit` recorded for the proposal (a veto binds the
/// proposal across its pull requests; an approval only the pull request it was given on).
fn bound_pull(ws: &Workspace, t: &RawToken, proposal: &str, n: u64) -> Result<Option<u64>> {
    let Ok(p) = token::Payload::parse(&t.payload) else {
        return Ok(None);
    };
    if p.repository != ws.config.forge.repository || p.proposal != proposal {
        return Ok(None);
    }
    if p.pull == n
        || (p.decision == Verdict::Reject && submitted_pulls(ws, proposal)?.contains(&p.pull))
    {
        return Ok(Some(p.pull));
    }
    Ok(None)
}

/// `TokenRecorded` events for tokens in the pull request's comments the ledger lacks.
fn new_token_events(ws: &Workspace, eval: &Evaluation) -> Result<Vec<Event>> {
    let mut known = recorded_tokens(ws, &eval.pull.proposal)?;
    // Only tokens bound to this proposal (see `bound_pull`), signed by a key `allowed_signers`
    // lists at base: junk, or tokens pasted from elsewhere, never reach the permanent record.
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
            if let Some(pull) = bound_pull(ws, &t, &eval.pull.proposal, eval.pull.number)? {
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
    Ok(events)
}

/// Records the tokens of comment bodies GitHub delivered for pull request `n` (signed webhook
/// payloads), whatever an evaluation of the pull request would say now: a pull request
/// retargeted for a moment, a GitHub outage or an unsubmitted head must not make the gate drop
/// a rejection whose comment may be gone by the next evaluation. Needs no GitHub call: the
/// proposal comes from the ledger (`submitted` for pull request `n`), the signers from
/// `allowed_signers` on the protected branch as last fetched. Only tokens bound to the proposal
/// (`bound_pull`), whose signature verifies, from a key listed there (and not the gate's), are
/// recorded. Returns how many were; an error (no gate key, an unreadable policy, the ledger)
/// means nothing was recorded and the caller should keep the bodies.
pub fn record_delivered(
    ws: &Workspace,
    n: u64,
    delivered: &[Comment],
    now: Timestamp,
) -> Result<usize> {
    let _lock = ws.lock()?;
    ws.gate_key()?;
    let mut proposals: Vec<String> = submitted_heads(ws)?
        .into_iter()
        .filter(|(_, pull, _)| *pull == n)
        .map(|(p, _, _)| p)
        .collect();
    proposals.dedup();
    if proposals.is_empty() {
        // Not a pull request `submit` opened: nothing it carries can bind a proposal.
        return Ok(0);
    }
    let tip = match ws.repo.refname_to_id(&remote_base_ref(ws)) {
        Ok(b) => b,
        Err(_) => git::branch_tip(&ws.repo, ws.branch())?,
    };
    let tree = ws.repo.find_commit(tip)?.tree()?;
    let policy = crate::governance::policy::Policy::load(&git::policy_files(&ws.repo, &tree)?)
        .map_err(|e| {
            anyhow::anyhow!(
                "the policy on {} ({tip}) does not parse, so delivered tokens cannot be checked against allowed_signers: {e}",
                ws.branch()
            )
        })?;
    let mut events = Vec::new();
    for proposal in &proposals {
        let mut known = recorded_tokens(ws, proposal)?;
        for c in delivered {
            for t in RawToken::extract_all(&c.body) {
                if known.contains(&t) {
                    continue;
                }
                let Some(pull) = bound_pull(ws, &t, proposal, n)? else {
                    continue;
                };
                let Ok(v) = token::verify(&t) else { continue };
                if policy.gate_key.as_ref() == Some(&v.key)
                    || policy.signers.find(&v.key).is_empty()
                {
                    continue;
                }
                known.push(t.clone());
                events.push(Event::TokenRecorded {
                    proposal: proposal.clone(),
                    pull,
                    comment: c.id,
                    token: t.to_text(),
                });
            }
        }
    }
    let recorded = events.len();
    if !events.is_empty() {
        ws.record(events, now)?;
        // Best effort: the evaluation that follows pushes again, and a later command catches up.
        let _ = push_ledger(ws);
    }
    Ok(recorded)
}

/// Keeps one summary comment: edits the first comment carrying the marker (if this token may),
/// otherwise posts a new one.
fn upsert_summary(gh: &GitHub, n: u64, read: &[Comment], body: &str) -> Result<()> {
    // Only the gate's own earlier summary counts: a token that may edit anyone's comments must
    // not write the summary into a comment its author can rewrite, and a copy of the summary by
    // someone else must not stand in for it. Installation tokens cannot ask who they are; in
    // GitHub Actions the account is `github-actions[bot]`; elsewhere a new comment is posted.
    let verified = gh.login()?;
    if verified.is_none() && read.iter().any(|c| c.body == body) {
        // Not knowing our own account, at least do not post the same summary again.
        return Ok(());
    }
    let me = verified.or_else(|| {
        (std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true"))
            .then(|| "github-actions[bot]".to_string())
    });
    let ours = |c: &&Comment| {
        me.as_deref()
            .is_some_and(|login| c.author.eq_ignore_ascii_case(login))
    };
    for c in read
        .iter()
        .filter(|c| c.body.starts_with(SUMMARY_MARKER))
        .filter(ours)
    {
        if c.body == body {
            return Ok(());
        }
        if gh.edit_comment(c.id, body)?.is_some() {
            return Ok(());
        }
    }
    gh.post_comment(n, body)?;
    Ok(())
}

/// What `submit` did.
#[derive(Debug, serde::Serialize)]
pub struct Submitted {
    pub id: String,
    pub pull: u64,
    pub url: String,
    pub created: bool,
    pub head: String,
}

/// Pushes proposal `id`'s branch with the user's `git push`, opens (or updates) its pull request
/// with the rendered body and the label, and records the pull request's number in the ledger.
pub fn submit(ws: &Workspace, gh: &GitHub, id: &str, now: Timestamp) -> Result<Submitted> {
    let _lock = ws.lock()?;
    let pull = ws.pull(id)?;
    if pull.state != PullState::Open || super::ledger_view(&ws.repo, &pull)?.1 {
        return Err(refuse(
            Code::NotOpen,
            format!("proposal {id} is merged or closed; there is nothing to submit"),
        ));
    }
    sync_ledger(ws)?;
    let branch = pull.head_branch.clone();
    let head = git::branch_tip(&ws.repo, &branch)?;
    let base = git::branch_tip(&ws.repo, ws.branch())?;
    // Once `submit` has recorded a pull request for the proposal, that pull request carries it:
    // one retargeted away or closed is never silently replaced by a new one (a veto recorded on
    // it would otherwise be left behind with it). Checked before anything is pushed.
    let recorded = match submitted_pulls(ws, &pull.proposal)?.last() {
        Some(&r) => Some(recorded_pull(ws, gh, id, &branch, r)?),
        None => None,
    };
    git_cli(
        &ws.root,
        &[
            "push",
            "--quiet",
            &ws.config.forge.remote,
            &format!("refs/heads/{branch}:refs/heads/{branch}"),
        ],
    )
    .with_context(|| format!("pushing {branch} to remote `{}`", ws.config.forge.remote))?;
    let body = render_body(ws, &pull, base, head)?;
    // Only pull requests of this repository's proposal branch into the protected branch (anyone
    // may open another from the same branch into another base), the one the ledger knows first.
    let ours = |gh: &GitHub| -> Result<Option<GhPull>> {
        let mut found: Vec<GhPull> = gh
            .pulls_from(&branch)?
            .into_iter()
            .filter(|p| proposal_shape(ws, p).is_ok() && p.head.ref_field == branch)
            .collect();
        let recorded = submitted_pulls(ws, &pull.proposal)?;
        found.sort_by_key(|p| !recorded.contains(&p.number));
        Ok(found.into_iter().next())
    };
    let existing = match recorded {
        Some(p) => Some(p),
        None => ours(gh)?,
    };
    let (p, created) = match existing {
        Some(p) if p.merged_at.is_some() => {
            return Err(refuse(
                Code::NotOpen,
                format!("pull request #{} for proposal {id} is already merged", p.number),
            ))
        }
        Some(p) if !matches!(p.state, Some(octocrab::models::IssueState::Open)) => {
            return Err(refuse(
                Code::NotOpen,
                format!(
                    "pull request #{} for proposal {id} was closed on GitHub; reopen it there, or close the proposal with `atelier close {id}`",
                    p.number
                ),
            ))
        }
        Some(p) => (gh.update_pull(p.number, &pull.title, &body)?, false),
        None => match gh.create_pull(&pull.title, &branch, ws.branch(), &body) {
            Ok(p) => (p, true),
            // A retried create whose first attempt did succeed: find the one GitHub has.
            Err(e) => match ours(gh)? {
                Some(p) if e.to_string().contains("already exists") => (p, true),
                _ => return Err(e),
            },
        },
    };
    gh.add_label(p.number, LABEL)?;
    let url = p
        .html_url
        .as_ref()
        .map(|u| u.to_string())
        .unwrap_or_default();
    let already = submitted_heads(ws)?.into_iter().any(|(proposal, n, h)| {
        proposal == pull.proposal && n == p.number && h == head.to_string()
    });
    if !already {
        ws.record(
            vec![Event::Submitted {
                proposal: pull.proposal.clone(),
                pull: p.number,
                url: url.clone(),
                head: head.to_string(),
                proposer: pull.proposer.clone(),
            }],
            now,
        )?;
        push_ledger(ws)?;
    }
    Ok(Submitted {
        id: id.to_string(),
        pull: p.number,
        url,
        created,
        head: head.to_string(),
    })
}

/// The pull request `submit` last recorded for proposal `id`, refused unless it still carries
/// the proposal: open (or merged, which the caller refuses), from `branch` into the protected
/// branch of this repository.
fn recorded_pull(ws: &Workspace, gh: &GitHub, id: &str, branch: &str, r: u64) -> Result<GhPull> {
    let p = gh.pull(r)?;
    if p.merged_at.is_some() {
        return Ok(p);
    }
    let open = matches!(p.state, Some(octocrab::models::IssueState::Open));
    if proposal_shape(ws, &p).is_err() || p.head.ref_field != branch {
        let head_repo = p
            .head
            .repo
            .as_ref()
            .and_then(|r| r.full_name.clone())
            .unwrap_or_default();
        return Err(refuse(
            Code::PullRetargeted,
            format!(
                "pull request #{r}, which carries proposal {id} (recorded by `atelier submit`), now targets `{}` from `{head_repo}:{}`; expected `{}` from `{}:{branch}`. Its approvals and rejections stay bound to it, so no new pull request is opened: retarget #{r} back to `{}` on GitHub (Edit, next to its title){}, then run `atelier submit {id}` again — or give the proposal up with `atelier close {id}`",
                p.base.ref_field,
                p.head.ref_field,
                ws.branch(),
                ws.config.forge.repository,
                ws.branch(),
                if open { "" } else { " and reopen it" },
            ),
        ));
    }
    if !open {
        return Err(refuse(
            Code::PullClosed,
            format!(
                "pull request #{r}, which carries proposal {id} (recorded by `atelier submit`), was closed on GitHub; expected it open. No new pull request is opened, so that its approvals and rejections stay with the proposal: reopen #{r} on GitHub, then run `atelier submit {id}` again — or give the proposal up with `atelier close {id}`"
            ),
        ));
    }
    Ok(p)
}

/// The pull request's body: the proposal record, its contract and evidence (carried in the
/// record's rationale), the files it changes and the panel's verdict when there is one.
fn render_body(ws: &Workspace, pull: &PullRequest, base: Oid, head: Oid) -> Result<String> {
    let repo = &ws.repo;
    let head_tree = repo.find_commit(head)?.tree()?;
    let base_tree = repo.find_commit(repo.merge_base(base, head)?)?.tree()?;
    let files = git::changed_paths(repo, &base_tree, &head_tree)?;
    let record_path = format!("{}/proposal.toml", pull.record);
    let record: toml::Table = git::read_file(repo, &head_tree, &record_path)?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let custom = ws.root.join("prompts/pull_request.j2");
    let template = match std::fs::read_to_string(&custom) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => DEFAULT_BODY_TEMPLATE.to_string(),
        Err(e) => return Err(e).with_context(|| format!("reading {}", custom.display())),
    };
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_template("body", &template)
        .with_context(|| format!("{}: not a valid template", custom.display()))?;
    let body = env
        .get_template("body")?
        .render(minijinja::value::Serde(serde_json::json!({
            "proposal": record,
            "record_path": record_path,
            "base": base.to_string(),
            "head": head.to_string(),
            "files": files,
            "verdict": null,
        })))
        .context("rendering the pull request body")?;
    Ok(clip_body(body))
}

/// How `approve --pr` signs.
pub enum PrSign {
    /// With this key, here.
    Key(SigningKey),
    /// Not at all: return the payload's canonical bytes, for `ssh-keygen -Y sign`.
    Payload,
    /// A payload signed elsewhere (`ssh-keygen -Y sign`), as text.
    Signed { payload: String, signature: String },
}

/// What `approve --pr` produced.
pub struct PrApproval {
    pub comment: String,
    pub posted: Option<String>,
    pub warnings: Vec<String>,
}

/// Signs a token for pull request `n` as it is now (base and head fetched, merge tree computed
/// here) and, with `post`, posts it as a comment.
pub fn approve_pr(
    ws: &Workspace,
    gh: &GitHub,
    n: u64,
    how: PrSign,
    opts: &ApproveOptions,
    post: bool,
    now: Timestamp,
) -> Result<PrApproval> {
    // Taking in the remote ledger moves a ref: like every mutation, under the lock.
    let _lock = ws.lock()?;
    sync_ledger(ws)?;
    let (p, base, head) = pull_and_tips(ws, gh, n)?;
    let record = pull_record(ws, &p, head, carriers(gh, n)?)?;
    if record.state != PullState::Open {
        return Err(refuse(
            Code::NotOpen,
            format!(
                "pull request #{n} is {}; there is nothing to approve",
                record.state.as_str()
            ),
        ));
    }
    let eval = evaluate_at(ws, record.clone(), base, head, now)?;
    let payload = super::payload_from(ws, &eval, opts, now)?;
    let tok = match how {
        PrSign::Key(key) => token::sign(&payload, &key),
        PrSign::Payload => {
            return Ok(PrApproval {
                comment: payload.to_canonical(),
                posted: None,
                warnings: Vec::new(),
            })
        }
        PrSign::Signed { payload, signature } => RawToken { payload, signature },
    };
    let verb = match token::Payload::parse(&tok.payload).map(|p| p.decision) {
        Ok(Verdict::Reject) => "reject",
        _ => "approve",
    };
    let comment = format!("/atelier {verb}\n\n```\n{}```\n", tok.to_text());
    // Tell the approver now what the gate will make of it.
    let mut with = record;
    with.comments.push(Comment {
        id: 0,
        author: String::new(),
        body: comment.clone(),
        at: now,
    });
    let after = evaluate_at(ws, with, base, head, now)?;
    let mut warnings = Vec::new();
    if let Some(r) = after
        .tokens
        .iter()
        .position(|t| *t == tok)
        .and_then(|i| after.decision.tokens.get(i))
        .filter(|r| !r.counted)
    {
        warnings.push(format!(
            "the gate will not count this token: {}: {}",
            r.code_text(),
            r.detail
        ));
    }
    let posted = if post {
        let c = gh.post_comment(n, &comment)?;
        Some(c.html_url.to_string())
    } else {
        None
    };
    Ok(PrApproval {
        comment,
        posted,
        warnings,
    })
}

/// What `merge --pr` did.
pub enum PrMerge {
    Merged {
        commit: String,
        tree: String,
        approvers: Vec<String>,
        note: Option<String>,
    },
    Refused(Box<GateRun>),
}

/// Re-runs the gate, then merges through the API with `sha` = the approved head, checks the
/// landed commit against the approved merge, records the merge and pushes the ledger.
pub fn merge_pr(ws: &Workspace, gh: &GitHub, n: u64, now: Timestamp) -> Result<PrMerge> {
    let _lock = ws.lock()?;
    ws.gate_key()?;
    sync_ledger(ws)?;
    // A merge this gate asked for may have landed without being recorded (a crash, a lost
    // answer): conclude it from the recorded request instead of judging a merged pull request.
    let p = gh.pull(n)?;
    if let (Some(landed), Ok(proposal)) = (
        p.merge_commit_sha.clone().filter(|_| p.merged_at.is_some()),
        proposal_shape(ws, &p),
    ) {
        if let Some(intent) = unconcluded_request(ws, &proposal, n)? {
            // Only a merge this gate's own account made concludes its request; anyone else's
            // merge of the same head is a bypass, whatever the request says.
            let by = p.merged_by.as_ref().map(|a| a.login.clone());
            let me = own_account(gh)?;
            if by.as_deref() == Some(me.as_str()) {
                return conclude(ws, gh, &intent, landed, Vec::new(), false, now);
            }
            let detail = format!(
                "pull request #{n} was merged on GitHub as {landed} by {}, not by the gate's account ({me}), while the gate's own merge request was unanswered",
                by.as_deref().unwrap_or("an unknown account")
            );
            return Err(alarm(ws, gh, &proposal, n, OUTSIDE, detail, now));
        }
        if !recorded_merged(ws, &proposal, n)? {
            // Merged on GitHub, and not by this gate: branch protection was bypassed.
            let detail = format!(
                "pull request #{n} was merged on GitHub as {landed}, but not by the gate (no unconcluded merge request of its own is recorded)"
            );
            return Err(alarm(ws, gh, &proposal, n, OUTSIDE, detail, now));
        }
    }
    let run = gate_pr_locked(ws, gh, n, now, Publish::Verdict, Vec::new())?;
    // `merge --pr` records its decision every time (unless the evaluation just did).
    if !run.decided {
        ws.record(vec![decision_event(&run.eval)], now)?;
    }
    if !run.eval.decision.allowed {
        push_ledger(ws)?;
        return Ok(PrMerge::Refused(Box::new(run)));
    }
    let eval = &run.eval;
    let intent = Intent {
        proposal: eval.pull.proposal.clone(),
        pull: n,
        base: eval.change.base.clone(),
        head: eval.change.head.clone(),
        tree: eval
            .merge_tree
            .expect("an allowed decision always has a merge tree")
            .to_string(),
    };
    // Recorded before GitHub is asked: whatever happens next, the ledger knows what was meant.
    let snap = ws.record(vec![intent.event()], now)?;
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
    // Published before the merge exists: a clone that sees the merge commit can always fetch a
    // ledger that extends the checkpoint it names (otherwise it would look like a rollback).
    push_ledger(ws)?;
    let (title, rest) = message.split_once("\n\n").unwrap_or((&message, ""));
    let reply = gh.merge(n, &intent.head, title, rest)?;
    let landed = match reply.status.as_u16() {
        200 => {
            let v: serde_json::Value = crate::forge::github::read(&reply, "merge")?;
            v["sha"].as_str().unwrap_or_default().to_string()
        }
        409 => {
            let now_head = gh
                .pull(n)
                .map(|p| p.head.sha)
                .unwrap_or_else(|_| "unknown".into());
            ws.record(
                vec![aborted(
                    &intent,
                    format!("GitHub answered 409: {}", reply.message()),
                )],
                now,
            )?;
            push_ledger(ws)?;
            return Err(refuse(
                Code::HeadMoved,
                format!(
                    "GitHub refused the merge of #{n} (409 {}): expected head {}, found {now_head}. Nothing was merged; atelier never retries with a new head — the new head needs new approvals",
                    reply.message(),
                    intent.head
                ),
            ));
        }
        _ => {
            // A retried merge may already have landed: GitHub then says "not mergeable". Only
            // a merge by the gate's own account is that one.
            let p = gh.pull(n)?;
            let by = p.merged_by.as_ref().map(|a| a.login.clone());
            match p.merge_commit_sha.filter(|_| p.merged_at.is_some()) {
                Some(sha) if by.as_deref() == Some(own_account(gh)?.as_str()) => sha,
                Some(sha) => {
                    let detail = format!(
                        "pull request #{n} was merged on GitHub as {sha} by {}, not by the gate's account, while the gate was merging it",
                        by.as_deref().unwrap_or("an unknown account")
                    );
                    return Err(alarm(ws, gh, &intent.proposal, n, OUTSIDE, detail, now));
                }
                None => {
                    ws.record(
                        vec![aborted(
                            &intent,
                            format!(
                                "GitHub answered {}: {}",
                                reply.status.as_u16(),
                                reply.message()
                            ),
                        )],
                        now,
                    )?;
                    push_ledger(ws)?;
                    return Err(refuse(
                        Code::NotMergeable,
                        format!(
                            "GitHub refused the merge of #{n}: {} {}; nothing was merged — if the branch is not up to date, merge {} into atelier/proposals/{} on this machine and `atelier submit {}` (never GitHub's Update branch); if another required check fails, fix that first",
                            reply.status.as_u16(),
                            reply.message(),
                            ws.branch(),
                            intent.proposal,
                            intent.proposal
                        ),
                    ));
                }
            }
        }
    };
    conclude(
        ws,
        gh,
        &intent,
        landed,
        eval.decision.approvers.clone(),
        true,
        now,
    )
}

/// A merge on GitHub the gate did not make.
const OUTSIDE: Code = Code::MergedOutsideGate;
/// GitHub's answer names a merge commit that is not the protected branch's new tip.
const NOT_TIP: Code = Code::LandedNotTip;

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

/// What the gate asked GitHub to merge.
#[derive(Debug, Clone)]
struct Intent {
    proposal: String,
    pull: u64,
    base: String,
    head: String,
    tree: String,
}

impl Intent {
    fn event(&self) -> Event {
        Event::MergeRequested {
            proposal: self.proposal.clone(),
            pull: self.pull,
            base: self.base.clone(),
            head: self.head.clone(),
            tree: self.tree.clone(),
        }
    }
}

/// The last merge request recorded for the pull request, unless a `merged` or `alarm` followed.
fn unconcluded_request(ws: &Workspace, proposal: &str, n: u64) -> Result<Option<Intent>> {
    // Only a request that is the proposal's last event (tokens aside): anything recorded after
    // it (a refusal, a new head, an alarm) means the request is not what a merge now concludes.
    let mut open = None;
    for event in events(ws)? {
        // Approvals recorded after a request (a late one, a pasted one) change nothing: the
        // decision was made when the request was. A recorded rejection closes it.
        if event.proposal() != Some(proposal) || event.is_approvals_only() {
            continue;
        }
        open = match event {
            Event::MergeRequested {
                proposal: p,
                pull,
                base,
                head,
                tree,
            } if pull == n => Some(Intent {
                proposal: p,
                pull,
                base,
                head,
                tree,
            }),
            _ => None,
        };
    }
    Ok(open)
}

/// Records an alarm, pushes the ledger, says so on the pull request, and returns the refusal.
fn alarm(
    ws: &Workspace,
    gh: &GitHub,
    proposal: &str,
    n: u64,
    code: Code,
    detail: String,
    now: Timestamp,
) -> anyhow::Error {
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
        return e.context(super::Refusal {
            code,
            message: format!("{detail} — and the alarm could not be recorded"),
        });
    }
    let pushed = push_ledger(ws);
    let commented = gh.post_comment(
        n,
        &format!("⚠️ **Atelier alarm `{code}`**: {detail}. What landed is not what the gate approved; the alarm is recorded in the ledger. Investigate before anything else merges."),
    );
    let mut message = format!(
        "{detail}; the alarm is recorded in the ledger — investigate before anything else merges"
    );
    if let Err(e) = pushed.and(commented.map(drop)) {
        message.push_str(&format!(" (publishing it failed: {e:#})"));
    }
    refuse(code, message)
}

/// Closes a merge request GitHub refused.
fn aborted(intent: &Intent, reason: String) -> Event {
    Event::MergeAborted {
        proposal: intent.proposal.clone(),
        commit: String::new(),
        reason,
    }
}

/// The gate token's account; an error (not a guess) when GitHub does not say, so that a merge
/// the gate made is never mistaken for someone else's.
fn own_account(gh: &GitHub) -> Result<String> {
    gh.login()?.ok_or_else(|| {
        anyhow::anyhow!(
            "GitHub did not say which account the gate's token belongs to (GET /user refused): merge --pr needs a token that may read it, to tell the gate's merges from others'; nothing was recorded — run it again"
        )
    })
}

/// Whether the ledger records pull request `n` of `proposal` as merged.
fn recorded_merged(ws: &Workspace, proposal: &str, n: u64) -> Result<bool> {
    Ok(events(ws)?
        .iter()
        .any(|e| matches!(e, Event::Merged(m) if m.proposal == proposal && m.pull == n)))
}

/// Checks what landed against the request (the commit GitHub named is the branch's new tip, or
/// with `fresh` false (a request from an earlier run) on its first-parent line; parents
/// [base, head]; exactly the approved tree), records `merged` or an `alarm`, pushes the ledger
/// and follows the local branch.
fn conclude(
    ws: &Workspace,
    gh: &GitHub,
    intent: &Intent,
    landed: String,
    approvers: Vec<String>,
    fresh: bool,
    now: Timestamp,
) -> Result<PrMerge> {
    let n = intent.pull;
    let base = Oid::from_str(&intent.base)?;
    let head = Oid::from_str(&intent.head)?;
    let tree = Oid::from_str(&intent.tree)?;
    let fetched_base = fetch_base(ws)?;
    // GitHub's answer is not trusted: the commit it names must be what the protected branch
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
                "GitHub reports merge commit `{landed}` for pull request #{n}, but after fetching, {}'s tip is {fetched_base}{}: what the branch holds is not what GitHub said it merged",
                ws.branch(),
                if fresh { "" } else { " and the commit is not on its first-parent line" }
            );
            return Err(alarm(ws, gh, &intent.proposal, n, NOT_TIP, detail, now));
        }
    };
    let parents: Vec<Oid> = commit.parent_ids().collect();
    let problem = if commit.tree_id() != tree {
        Some((
            Code::LandedTreeMismatch,
            format!(
                "GitHub landed merge commit {landed} with tree {}, but the approved merge tree is {tree}",
                commit.tree_id()
            ),
        ))
    } else if parents != [base, head] {
        Some((
            Code::LandedParentsMismatch,
            format!(
                "GitHub landed merge commit {landed} with parents [{}], but the approved merge is of {head} into {base}",
                parents.iter().map(|p| p.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ))
    } else {
        None
    };
    if let Some((code, detail)) = problem {
        return Err(alarm(ws, gh, &intent.proposal, n, code, detail, now));
    }
    ws.record(
        vec![Event::Merged(MergeRecord {
            proposal: intent.proposal.clone(),
            pull: n,
            commit: landed.clone(),
            base: intent.base.clone(),
            head: intent.head.clone(),
            tree: intent.tree.clone(),
        })],
        now,
    )?;
    push_ledger(ws)?;
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
    let note = follow_local_branch(ws, base, commit.id(), fetched_base)?;
    Ok(PrMerge::Merged {
        commit: landed,
        tree: intent.tree.clone(),
        approvers,
        note,
    })
}

/// Moves the local protected branch to the landed merge when it was at the merged base.
fn follow_local_branch(
    ws: &Workspace,
    base: Oid,
    merged: Oid,
    remote: Oid,
) -> Result<Option<String>> {
    let refname = format!("refs/heads/{}", ws.branch());
    let local = ws.repo.refname_to_id(&refname).ok();
    if local != Some(base) {
        return Ok(Some(format!(
            "your local {} is not at the merged base, so it was left alone; `git pull` brings it to {remote}",
            ws.branch()
        )));
    }
    let checked_out = ws
        .repo
        .head()
        .ok()
        .and_then(|h| h.name().map(str::to_string))
        == Some(refname.clone());
    if checked_out
        && !super::merge::checkout_is_clean(ws, ws.repo.find_commit(merged)?.tree_id())?
            .unwrap_or(true)
    {
        return Ok(Some(format!(
            "your checkout of {} has local changes (or untracked or ignored files where the merge writes files), so it was left alone; `git pull` brings it to {merged}",
            ws.branch()
        )));
    }
    git::compare_and_swap(
        &ws.repo,
        &refname,
        base,
        merged,
        "atelier: follow the GitHub merge",
    )?;
    // Looked at again just before writing: the files may have changed since.
    if checked_out
        && super::merge::paths_are_safe(
            ws,
            ws.repo.find_commit(base)?.tree_id(),
            ws.repo.find_commit(merged)?.tree_id(),
        )?
    {
        super::merge::checkout_merged(&ws.repo)?;
    }
    Ok(None)
}

/// Open pull requests that come from proposal branches (for `serve` after a push).
pub fn open_proposal_pulls(gh: &GitHub) -> Result<Vec<u64>> {
    Ok(gh
        .open_pulls()?
        .into_iter()
        .filter(|p| proposal_of(&p.head.ref_field).is_some())
        .map(|p| p.number)
        .collect())
}
