//! The GitHub forge: the governed loop on pull requests. The same gate, tokens and ledger as the
//! local forge; GitHub only carries the change (a pull request), the tokens (comments and review
//! bodies) and the outcome (a commit status, a summary comment, a merge through the API).
//! `client.rs` speaks GitHub's REST API through octocrab; `serve.rs` receives its webhooks.
//!
//! Trust: only signed tokens are authority. Labels, GitHub reviews' states, comment authors and
//! other statuses are never read as approval. Git objects are fetched with the user's own `git`
//! (their credentials) and every tree the gate judges is computed here, locally. Only a head
//! `atelier submit` published for a proposal can pass (`E_NOT_SUBMITTED`).

pub mod client;
pub mod serve;

use std::path::Path;
use std::sync::OnceLock;

use crate::workflow::error::{Context, Result};
use git2::Oid;

use self::client::{CommitStatus, GitHub, MergeAnswer, RemotePull};
use super::{
    Addr, Carried, Comment, Forge, ForgeKind, ForgeMerge, Landing, MergeRequest, Posted, Published,
    PullRequest, PullState,
};
use crate::audit::ledger::{self, Event};
use crate::audit::view::LedgerView;
use crate::config::ForgeConfig;
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::token::{self, RawToken, Verdict};
use crate::governance::Code;
use crate::workflow::{
    bound_pull, clip, refuse, Evaluation, GateStatus, Publish, Refusal, Workspace,
};

/// The commit status the gate sets; branch protection requires it.
pub const STATUS_CONTEXT: &str = "atelier/governance";
/// The label every submitted proposal carries (informational: it grants nothing).
pub const LABEL: &str = "atelier-proposal";
/// Marks the one summary comment the gate keeps up to date.
pub const SUMMARY_MARKER: &str = "<!-- atelier:gate-summary -->";
/// The pull-request body template, Atelier's own `prompts/pull_request.j2`; a repository may
/// replace it with its own.
pub const DEFAULT_BODY_TEMPLATE: &str = include_str!("../../../prompts/pull_request.j2");

/// Where a repository keeps its own pull-request body template (read from the protected branch).
pub const BODY_TEMPLATE: &str = "prompts/pull_request.j2";

/// A GitHub repository as the governed loop's forge. The records of the proposals this clone
/// opened stay in the clone (`Workspace::records`, as on the local forge); pull requests,
/// comments, statuses and merges are GitHub's. The API client is made at the first call that needs it, so commands
/// that never reach GitHub (`propose`, `proposals`, `show`) need no token.
pub struct GitHubForge {
    config: ForgeConfig,
    client: OnceLock<GitHub>,
}

impl GitHubForge {
    pub fn new(config: ForgeConfig) -> GitHubForge {
        GitHubForge {
            config,
            client: OnceLock::new(),
        }
    }

    /// The API client, with or without a token.
    pub fn client(&self) -> Result<&GitHub> {
        if let Some(c) = self.client.get() {
            return Ok(c);
        }
        let c = GitHub::connect(&self.config, false)?;
        Ok(self.client.get_or_init(|| c))
    }

    /// The API client, refusing to go on without a token.
    pub fn client_with_token(&self) -> Result<&GitHub> {
        let c = self.client()?;
        if !c.has_token() {
            return Err(crate::workflow::Error::Input(format!(
                "no GitHub token: set GITHUB_TOKEN (or ATELIER_GITHUB_TOKEN) to a token that may act on {} (docs/github.md lists the permissions)",
                self.config.repository
            )));
        }
        Ok(c)
    }

    fn branch(&self) -> &str {
        &self.config.branch
    }

    /// Checks a pull request's shape from GitHub's record alone, before anything is fetched:
    /// it must target the protected branch from this repository's own `atelier/proposals/<id>`
    /// branch. Returns the proposal id.
    fn proposal_shape(&self, p: &RemotePull) -> Result<String, Refusal> {
        let n = p.number;
        // Forks and other bases first: their refusals write nothing (see `carried`).
        if p.base_ref != self.branch() || !p.head_repo.eq_ignore_ascii_case(&self.config.repository)
        {
            return Err(Refusal::new(
                Code::ForgeState,
                format!(
                    "pull request #{n} targets `{}` from `{}:{}`; expected `{}` from a branch of `{}`",
                    p.base_ref,
                    p.head_repo,
                    p.head_ref,
                    self.branch(),
                    self.config.repository
                ),
            ));
        }
        proposal_of(&p.head_ref).ok_or_else(|| {
            Refusal::new(
                Code::NotAProposal,
                format!(
                    "pull request #{n} comes from branch `{}`, not from an `atelier/proposals/<id>` branch: only proposals (`atelier propose`, then `atelier submit`) can pass the gate",
                    p.head_ref
                ),
            )
        })
    }

    /// The pull request, with the protected branch and its head fetched; the head GitHub
    /// reports and the one fetched must agree (GitHub updates `refs/pull/<n>/head` shortly
    /// after a push), and before each fetch the head GitHub reports must be the one `submit`
    /// last published (otherwise the inner error, with the head it names: nothing of an
    /// unpublished head is fetched).
    #[allow(clippy::type_complexity)]
    fn pull_and_tips(
        &self,
        ws: &Workspace,
        view: &LedgerView,
        n: u64,
    ) -> Result<Result<(RemotePull, Oid, Oid), (String, Refusal)>> {
        let gh = self.client()?;
        let mut tries = 0;
        loop {
            let p = gh.pull(n)?;
            let proposal = self.proposal_shape(&p)?;
            let latest = view.latest_submitted(&proposal, n);
            if latest != Some(p.head_sha.as_str()) {
                let r = not_submitted(n, &p.head_sha, &proposal, latest);
                return Ok(Err((p.head_sha, r)));
            }
            let (base, head) = fetch_pull(ws, n)?;
            if p.head_sha == head.to_string() {
                return Ok(Ok((p, base, head)));
            }
            tries += 1;
            if tries >= 3 {
                return Err(refuse(
                    Code::HeadMoved,
                    format!(
                        "GitHub reports head {} for pull request #{n}, but refs/pull/{n}/head is {head}: the head is moving; evaluate again when pushes stop",
                        p.head_sha
                    ),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(500 * tries));
        }
    }

    /// Keeps one summary comment: edits the first comment carrying the marker (if this token
    /// may), otherwise posts a new one.
    fn upsert_summary(&self, n: u64, read: &[Comment], body: &str) -> Result<()> {
        let gh = self.client_with_token()?;
        // Only the gate's own earlier summary counts: a token that may edit anyone's comments
        // must not write the summary into a comment its author can rewrite, and a copy of the
        // summary by someone else must not stand in for it. Installation tokens cannot ask who
        // they are; in GitHub Actions the account is `github-actions[bot]`; elsewhere a new
        // comment is posted.
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
            if gh.edit_comment(c.id, body)? {
                return Ok(());
            }
        }
        gh.post_comment(n, body)?;
        Ok(())
    }

    /// The pull request `submit` last recorded for proposal `id`, refused unless it still
    /// carries the proposal: open (or merged, which the caller refuses), from `branch` into the
    /// protected branch of this repository.
    fn recorded_pull(&self, id: &str, branch: &str, r: u64) -> Result<RemotePull> {
        let p = self.client_with_token()?.pull(r)?;
        if p.merged {
            return Ok(p);
        }
        if self.proposal_shape(&p).is_err() || p.head_ref != branch {
            return Err(refuse(
                Code::PullRetargeted,
                format!(
                    "pull request #{r}, which carries proposal {id} (recorded by `atelier submit`), now targets `{}` from `{}:{}`; expected `{}` from `{}:{branch}`. Its approvals and rejections stay bound to it, so no new pull request is opened: retarget #{r} back to `{}` on GitHub (Edit, next to its title){}, then run `atelier submit {id}` again — or give the proposal up with `atelier close {id}`",
                    p.base_ref,
                    p.head_repo,
                    p.head_ref,
                    self.branch(),
                    self.config.repository,
                    self.branch(),
                    if p.open { "" } else { " and reopen it" },
                ),
            ));
        }
        if !p.open {
            return Err(refuse(
                Code::PullClosed,
                format!(
                    "pull request #{r}, which carries proposal {id} (recorded by `atelier submit`), was closed on GitHub; expected it open. No new pull request is opened, so that its approvals and rejections stay with the proposal: reopen #{r} on GitHub, then run `atelier submit {id}` again — or give the proposal up with `atelier close {id}`"
                ),
            ));
        }
        Ok(p)
    }
}

impl Forge for GitHubForge {
    fn kind(&self) -> ForgeKind {
        ForgeKind::GitHub
    }

    /// A pull request number as given; a proposal id names the pull request `submit` last
    /// recorded for it.
    fn pull_for(&self, view: &LedgerView, addr: &Addr) -> Result<u64> {
        match addr {
            Addr::Pull(n) => Ok(*n),
            Addr::Proposal(id) => {
                crate::workflow::parse_id(id)?;
                view.submitted_pulls(id).last().copied().ok_or_else(|| {
                    refuse(
                        Code::NotPublished,
                        format!(
                            "proposal {id} has no pull request on GitHub yet: `atelier submit {id}` opens one (or name a pull request with --pr N)"
                        ),
                    )
                })
            }
        }
    }

    fn sync(&self, ws: &Workspace, strict: bool) -> Result<Vec<String>> {
        match sync_ledger(ws)? {
            Ok(()) => Ok(Vec::new()),
            Err(e) if strict => Err(e),
            Err(e) => Ok(vec![format!(
                "the remote ledger could not be read: {}",
                crate::errors::chain(&e)
            )]),
        }
    }

    fn carried(
        &self,
        ws: &Workspace,
        view: &LedgerView,
        n: u64,
        publish: Publish,
        delivered: Vec<Comment>,
    ) -> Result<Carried> {
        let gh = if publish == Publish::Nothing {
            self.client()?
        } else {
            self.client_with_token()?
        };
        // A refused pull request gets `failure` on its head, unless that commit is the head
        // `submit` last recorded for some proposal: statuses belong to commits, and a stray
        // pull request that points at a proposal's current head must not turn that proposal's
        // status red.
        let fail = |sha: &str, r: Refusal| -> crate::workflow::Error {
            if publish != Publish::Nothing && !view.is_current_submitted_head(sha) {
                if let Err(e) = gh.set_status(
                    sha,
                    CommitStatus::Failure,
                    &clip(&format!("{}: {}", r.code, r.message), DESCRIPTION_MAX),
                    STATUS_CONTEXT,
                ) {
                    return e;
                }
            }
            r.into()
        };
        // The shape first, from GitHub's record: nothing of a fork's or a stray branch's is
        // fetched. A fork's head commit may be a proposal's too, so nothing is written for a
        // fork.
        let first = gh.pull(n)?;
        if let Err(r) = self.proposal_shape(&first) {
            return Err(if r.code == Code::NotAProposal {
                fail(&first.head_sha, r)
            } else {
                r.into()
            });
        }
        // Only a head `submit` published is worth fetching: anything else is refused from
        // GitHub's record alone (and again below, on what was fetched).
        let (p, base, head) = match self.pull_and_tips(ws, view, n)? {
            Ok(tips) => tips,
            Err((sha, r)) => return Err(fail(&sha, r)),
        };
        let sha = head.to_string();
        let editable = gh.comments(n)?;
        let mut carried = editable.clone();
        carried.extend(gh.review_bodies(n)?);
        for d in delivered {
            if !carried.iter().any(|c| c.body == d.body) {
                carried.push(d);
            }
        }
        let proposal = self.proposal_shape(&p)?;
        // The head fetched, too, must be the one `submit` last published (`not_submitted`).
        let latest = view.latest_submitted(&proposal, n);
        if latest != Some(sha.as_str()) {
            return Err(fail(&sha, not_submitted(n, &sha, &proposal, latest)));
        }
        let state = if p.merged {
            PullState::Merged
        } else if p.open {
            PullState::Open
        } else {
            PullState::Closed
        };
        let pull = PullRequest {
            number: n,
            proposal: proposal.clone(),
            title: p.title.clone(),
            head_branch: p.head_ref.clone(),
            base_branch: p.base_ref.clone(),
            state,
            proposer: view.recorded_proposer(&proposal),
            created: p.created,
            record: String::new(),
            comments: carried,
            merge_commit: p.merge_commit.clone(),
            closed_reason: None,
        };
        if publish == Publish::PendingThenVerdict {
            gh.set_status(&sha, CommitStatus::Pending, "evaluating…", STATUS_CONTEXT)?;
        }
        Ok(Carried {
            pull,
            base,
            head,
            editable,
        })
    }

    fn records_each_verdict(&self) -> bool {
        false
    }

    fn publish_ledger(&self, ws: &Workspace) -> Result<()> {
        push_ledger(ws)
    }

    fn publish_verdict(
        &self,
        eval: &Evaluation,
        editable: &[Comment],
        status: GateStatus,
        description: &str,
    ) -> Result<Option<String>> {
        let state = match status {
            GateStatus::Pending => CommitStatus::Pending,
            GateStatus::Success => CommitStatus::Success,
            GateStatus::Failure => CommitStatus::Failure,
        };
        self.client_with_token()?.set_status(
            &eval.change.head,
            state,
            description,
            STATUS_CONTEXT,
        )?;
        self.upsert_summary(eval.pull.number, editable, &summary_body(eval))?;
        Ok(Some(format!(
            "status {STATUS_CONTEXT} on {}: {status:?} — {description}",
            eval.change.head
        )))
    }

    fn token_comment(&self, tok: &RawToken) -> String {
        let verb = match token::Payload::parse(&tok.payload).map(|p| p.decision) {
            Ok(Verdict::Reject) => "reject",
            _ => "approve",
        };
        format!("/atelier {verb}\n\n```\n{}```\n", tok.to_text())
    }

    fn post(&self, _ws: &Workspace, n: u64, body: &str, _now: Timestamp) -> Result<Posted> {
        let (comment, url) = self.client_with_token()?.post_comment(n, body)?;
        Ok(Posted {
            comment,
            url: Some(url),
        })
    }

    fn records_on_post(&self) -> bool {
        false
    }

    fn merged_on_forge(&self, n: u64) -> Result<Option<ForgeMerge>> {
        let p = self.client_with_token()?.pull(n)?;
        let (Some(commit), true) = (p.merge_commit.clone(), p.merged) else {
            return Ok(None);
        };
        Ok(self.proposal_shape(&p).ok().map(|proposal| ForgeMerge {
            proposal,
            commit,
            by: p.merged_by.clone(),
        }))
    }

    fn lands_remotely(&self) -> bool {
        true
    }

    fn prepare(&self, _: &Workspace, _: &MergeRequest, _: Timestamp) -> Result<Option<Oid>> {
        Ok(None)
    }

    fn merge(&self, _ws: &Workspace, req: &MergeRequest, _: Option<Oid>) -> Result<Landing> {
        let gh = self.client_with_token()?;
        let n = req.pull;
        let (title, rest) = req.message.split_once("\n\n").unwrap_or((&req.message, ""));
        Ok(match gh.merge(n, &req.head.to_string(), title, rest)? {
            MergeAnswer::Merged(sha) => Landing::Landed(sha),
            MergeAnswer::HeadMoved(reason) => Landing::HeadMoved {
                found: gh
                    .pull(n)
                    .map(|p| p.head_sha)
                    .unwrap_or_else(|_| "unknown".into()),
                reason,
            },
            MergeAnswer::Refused(reason) => {
                let p = gh.pull(n)?;
                match p.merge_commit.filter(|_| p.merged) {
                    Some(commit) => Landing::MergedBy {
                        commit,
                        by: p.merged_by,
                    },
                    None => Landing::NotMergeable(reason),
                }
            }
        })
    }

    fn fetch_base(&self, ws: &Workspace) -> Result<Oid> {
        fetch_base(ws)
    }

    fn own_account(&self) -> Result<Option<String>> {
        self.client_with_token()?.login()
    }

    fn announce_alarm(&self, n: u64, code: Code, detail: &str) -> Result<()> {
        self.client_with_token()?.post_comment(
            n,
            &format!("⚠️ **Atelier alarm `{code}`**: {detail}. What landed is not what the gate approved; the alarm is recorded in the ledger. Investigate before anything else merges."),
        )?;
        Ok(())
    }

    /// Closes the pull request `submit` last recorded for the proposal, saying why.
    fn publish_review(&self, ws: &Workspace, view: &LedgerView, pull: &PullRequest) -> Result<()> {
        let Some(&n) = view.submitted_pulls(&pull.proposal).last() else {
            return Ok(());
        };
        // The clone's record is anyone's to edit: its branches are checked against the
        // configuration and the ledger, as every other reader of it does.
        let (pull, base, head) = crate::workflow::checked_record(ws, view, pull.clone())?;
        let body = render_body(ws, view, &pull, base, head)?;
        self.client_with_token()?
            .update_pull(n, &pull.title, &body)?;
        Ok(())
    }

    fn withdraw(&self, view: &LedgerView, proposal: &str, reason: Option<&str>) -> Result<()> {
        let Some(&n) = view.submitted_pulls(proposal).last() else {
            return Ok(());
        };
        let gh = self.client_with_token()?;
        if !gh.pull(n)?.open {
            return Ok(());
        }
        gh.post_comment(
            n,
            &format!(
                "Proposal {proposal} was closed with `atelier close`{}. The ledger records it: no approval can merge it now.",
                reason.map(|r| format!(": {}", clip(r, 500))).unwrap_or_default()
            ),
        )?;
        gh.close_pull(n)
    }

    /// Pushes the proposal's branch with the user's `git push`, opens (or updates) its pull
    /// request with the rendered body and the label.
    fn publish_proposal(
        &self,
        ws: &Workspace,
        view: &LedgerView,
        pull: &PullRequest,
    ) -> Result<Published> {
        let gh = self.client_with_token()?;
        let id = pull.proposal.as_str();
        let branch = pull.head_branch.clone();
        let head = git::branch_tip(&ws.repo, &branch)?;
        let base = git::branch_tip(&ws.repo, ws.branch())?;
        // Once `submit` has recorded a pull request for the proposal, that pull request
        // carries it: one retargeted away or closed is never silently replaced by a new one (a
        // veto recorded on it would otherwise be left behind with it). Checked before anything
        // is pushed.
        let submitted = view.submitted_pulls(id);
        let recorded = match submitted.last() {
            Some(&r) => Some(self.recorded_pull(id, &branch, r)?),
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
        let body = render_body(ws, view, pull, base, head)?;
        // Only pull requests of this repository's proposal branch into the protected branch
        // (anyone may open another from the same branch into another base), the one the
        // ledger knows first.
        let ours = || -> Result<Option<RemotePull>> {
            let mut found: Vec<RemotePull> = gh
                .pulls_from(&branch)?
                .into_iter()
                .filter(|p| self.proposal_shape(p).is_ok() && p.head_ref == branch)
                .collect();
            found.sort_by_key(|p| !submitted.contains(&p.number));
            Ok(found.into_iter().next())
        };
        let existing = match recorded {
            Some(p) => Some(p),
            None => ours()?,
        };
        let (p, created) = match existing {
            Some(p) if p.merged => {
                return Err(refuse(
                    Code::NotOpen,
                    format!("pull request #{} for proposal {id} is already merged", p.number),
                ))
            }
            Some(p) if !p.open => {
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
                Err(e) => match ours()? {
                    Some(p) if e.to_string().contains("already exists") => (p, true),
                    _ => return Err(e),
                },
            },
        };
        gh.add_label(p.number, LABEL)?;
        Ok(Published {
            pull: p.number,
            url: p.url.clone(),
            created,
            head: head.to_string(),
        })
    }
}

/// GitHub's limit on a status description.
pub use crate::workflow::gate::DESCRIPTION_MAX;

fn git_cli(root: &Path, args: &[&str]) -> Result<()> {
    Ok(git::git_cli(root, args).map(drop)?)
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
/// when it is ahead (not pushed yet); refuses when they diverged. `Ok(Err(e))`: the remote's
/// ledger could not be read (nothing was taken in); `Err(e)`: a refusal.
pub fn sync_ledger(ws: &Workspace) -> Result<Result<()>> {
    let fetched = "refs/atelier/github/ledger";
    // The remote may have no ledger yet: fetch it only if it is advertised.
    let advertised = match git::git_cli(
        &ws.root,
        &["ls-remote", &ws.config.forge.remote, ledger::REF],
    ) {
        Ok(a) => a,
        Err(e) => return Ok(Err(e.into())),
    };
    if advertised.is_empty() {
        ws.check_floors()?;
        return Ok(Ok(()));
    }
    if let Err(e) = fetch(ws, &[format!("+{}:{fetched}", ledger::REF)]) {
        return Ok(Err(e));
    }
    let theirs = match ws.repo.refname_to_id(fetched) {
        Ok(t) => t,
        Err(e) => return Ok(Err(e.into())),
    };
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
            let mine = match ledger::read_at(&ws.repo, o) {
                Ok(m) => m,
                Err(e) => return Ok(Err(e.into())),
            };
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
    Ok(Ok(()))
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
    let key = crate::workflow::published_gate_key(&ws.repo, &branch.to_string())?
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

/// Only a head `atelier submit` published for this proposal and pull request can pass: a push
/// by anyone else onto the proposal branch (an approver approving their own commit, say) is
/// refused, and so is a pull request opened by hand from an `atelier/proposals/` branch. Only
/// the latest: a branch forced back to an earlier submitted head must not revive it.
fn not_submitted(n: u64, sha: &str, proposal: &str, latest: Option<&str>) -> Refusal {
    Refusal::new(
        Code::NotSubmitted,
        format!(
            "pull request #{n}'s head {sha} is not the head `atelier submit` last recorded for proposal {proposal} ({}): a commit pushed onto the proposal branch by hand, or the branch forced back, cannot pass — publish changes with `atelier submit {proposal}` from the proposal's clone",
            latest.unwrap_or("none")
        ),
    )
}

/// The proposal id of an `atelier/proposals/<id>` branch.
fn proposal_of(head_ref: &str) -> Option<String> {
    let id = head_ref.strip_prefix("atelier/proposals/")?;
    let canonical = !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && !(id.len() > 1 && id.starts_with('0'));
    canonical.then(|| id.to_string())
}

/// The summary comment: every requirement met or unmet, and what the gate made of each token.
pub fn summary_body(eval: &Evaluation) -> String {
    let d = &eval.decision;
    let (state, _) = crate::workflow::status_for(eval);
    let verdict = match state {
        GateStatus::Success => "✅ may merge",
        GateStatus::Pending => "⏳ waiting for approvals",
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
    let rv = &d.review;
    t.push_str(&format!(
        "\n**Review panel: {}** (recorded verdict: {}){}\n\n",
        rv.verdict.map_or("unreadable", |v| v.as_str()),
        rv.recorded,
        if rv.overruled_by.is_empty() {
            String::new()
        } else {
            format!(
                "; overruled by the constitution quorum ({})",
                rv.overruled_by.join(", ")
            )
        }
    ));
    if rv.findings.is_empty() {
        t.push_str("- no findings\n");
    }
    const FINDINGS_MAX: usize = 30;
    for f in rv.findings.iter().take(FINDINGS_MAX) {
        t.push_str(&format!(
            "- {}\n",
            clip(&crate::workflow::review::finding_line(f), 500)
        ));
    }
    if rv.findings.len() > FINDINGS_MAX {
        t.push_str(&format!(
            "- … and {} more (`atelier gate --pr N` lists them all)\n",
            rv.findings.len() - FINDINGS_MAX
        ));
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

/// The pull request's body: the proposal record, its contract and evidence (carried in the
/// record's rationale), the files it changes and the panel's verdict when there is one.
fn render_body(
    ws: &Workspace,
    view: &LedgerView,
    pull: &PullRequest,
    base: Oid,
    head: Oid,
) -> Result<String> {
    let repo = &ws.repo;
    let head_tree = repo.find_commit(head)?.tree()?;
    let base_tree = repo.find_commit(repo.merge_base(base, head)?)?.tree()?;
    let files = git::changed_paths(repo, &base_tree, &head_tree)?;
    let record_path = format!("{}/proposal.toml", pull.record);
    let record: toml::Table = git::read_file(repo, &head_tree, &record_path)?
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|t| t.parse().ok())
        .unwrap_or_default();
    let status = crate::workflow::cycle::status(ws, view, &pull.proposal, &pull.record, head)?;
    // The template as the protected branch holds it, like every prompt: reviewed text, never
    // the operator's uncommitted edit nor the proposal's own version of it (whatever `base`
    // a caller passes).
    let base_tip = repo
        .find_commit(git::branch_tip(repo, ws.branch())?)?
        .tree()?;
    let context = serde_json::json!({
        "proposal": record,
        "record_path": record_path,
        "base": base.to_string(),
        "head": head.to_string(),
        "files": files,
        "verdict": review_section(view, &pull.proposal, head),
        "evidence": evidence_section(status.as_ref()),
        "caveat": caveat(view, &pull.proposal, head, status.as_ref()),
    });
    let render = |template: &str| -> std::result::Result<String, String> {
        let mut env = minijinja::Environment::new();
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.add_template("body", template)
            .and_then(|_| {
                env.get_template("body")?
                    .render(minijinja::value::Serde(&context))
            })
            .map_err(|e| {
                format!(
                    "{BODY_TEMPLATE} on {}: not a valid template: {e}",
                    ws.branch()
                )
            })
    };
    let ours =
        match crate::agent::prompt::text_on_branch(repo, &base_tip, BODY_TEMPLATE, ws.branch()) {
            Ok(t) => Ok(t),
            Err(crate::workflow::Error::Input(why)) => Err(why),
            Err(e) => return Err(e),
        };
    let body = match ours.and_then(|t| t.map(|t| render(&t)).transpose()) {
        Ok(Some(body)) => body,
        Ok(None) => render(DEFAULT_BODY_TEMPLATE).map_err(crate::workflow::Error::input)?,
        // A broken template shows only once merged: it must not stop every later pull request,
        // the one that fixes it included. Atelier's own template stands in, saying why.
        Err(why) => format!(
            "> **Warning:** {why}. Atelier's built-in template is shown instead until a proposal fixes it.\n\n{}",
            render(DEFAULT_BODY_TEMPLATE).map_err(crate::workflow::Error::input)?,
            why = why.replace('\n', " ")
        ),
    };
    Ok(clip_body(body))
}

/// The evidence section: the evidence the ledger bound, rendered from its evidence.json (never
/// the record's evidence.md as the branch has it now), with every reason to distrust it.
fn evidence_section(status: Option<&crate::workflow::cycle::Status>) -> Option<String> {
    let s = status?;
    let mut t = String::new();
    for w in &s.warnings {
        t.push_str(&format!("> **Warning:** {w}\n\n"));
    }
    match &s.evidence {
        Some(e) => t.push_str(&e.markdown()),
        None => t.push_str("No evidence the ledger recorded can be shown.\n"),
    }
    Some(t)
}

/// What the body must say first about a proposal submitted although the panel blocks it (its
/// verdict recorded for this head), or although its evidence, as the ledger recorded it, shows
/// a regression or a failed validator (`atelier cycle --submit-anyway`) — whatever was pushed
/// since.
fn caveat(
    view: &LedgerView,
    proposal: &str,
    head: Oid,
    status: Option<&crate::workflow::cycle::Status>,
) -> Option<String> {
    let head = head.to_string();
    let mut why = Vec::new();
    if let Some((r, _)) = view.recorded_summary(proposal) {
        if r.head == head && r.verdict == crate::governance::review::Verdict::Block {
            why.push("the review panel BLOCKS it".to_string());
        }
    }
    if let Some(s) = status {
        why.extend(s.objections.iter().cloned());
    }
    (!why.is_empty()).then(|| {
        format!(
            "submitted although {} (see below). The gate still needs every approval it needs; a blocking panel verdict needs the constitution quorum.",
            why.join(", ")
        )
    })
}

/// The body's "Review panel" text: the verdict the ledger recorded for this head, or what to do.
fn review_section(view: &LedgerView, proposal: &str, head: Oid) -> String {
    match view.recorded_summary(proposal) {
        Some((r, summary)) if r.head == head.to_string() => format!(
            "{summary}\n\nRecorded for base `{}` and this head. The gate re-runs the built-in reviewers at every evaluation; its summary comment has the verdict in force.",
            r.base
        ),
        _ => "No panel verdict recorded for this head yet (`atelier review --pr N` records one). The gate re-runs the built-in reviewers at every evaluation; its summary comment shows their findings.".to_string(),
    }
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
/// The caller holds the repository lock.
pub fn record_delivered(
    ws: &Workspace,
    n: u64,
    delivered: &[Comment],
    now: Timestamp,
) -> Result<usize> {
    ws.gate_key()?;
    let view = ws.view()?;
    let proposals = view.proposals_on(n);
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
            crate::workflow::Error::Input(format!(
                "the policy on {} ({tip}) does not parse, so delivered tokens cannot be checked against allowed_signers: {e}",
                ws.branch()
            ))
        })?;
    let mut events = Vec::new();
    for proposal in &proposals {
        let mut known = view.recorded_tokens(proposal);
        for c in delivered {
            for t in RawToken::extract_all(&c.body) {
                if known.contains(&t) {
                    continue;
                }
                let Some(pull) = bound_pull(ws, &view, &t, proposal, n) else {
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

/// Open pull requests that come from proposal branches (for `serve` after a push).
pub fn open_proposal_pulls(gh: &GitHub) -> Result<Vec<u64>> {
    Ok(gh
        .open_pulls()?
        .into_iter()
        .filter(|p| proposal_of(&p.head_ref).is_some())
        .map(|p| p.number)
        .collect())
}
