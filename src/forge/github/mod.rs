//! The GitHub forge: the governed loop on pull requests. The same gate, tokens and ledger as the
//! local forge; GitHub only carries the change (a pull request), the tokens (comments and review
//! bodies) and the outcome (a commit status, a summary comment, a merge through the API).
//! `client.rs` speaks GitHub's REST API through octocrab; `serve.rs` receives its webhooks.
//!
//! Trust: only signed tokens are authority. Labels, GitHub reviews' states, comment authors and
//! other statuses are never read as approval. Git objects are fetched with the user's own `git`
//! (their credentials) and every tree the gate judges is computed here, locally. Only a head
//! `atelier submit` published for a proposal can pass (`E_NOT_SUBMITTED`).

pub mod budget;
pub mod client;
pub mod serve;
pub mod slots;

use std::path::Path;
use std::sync::OnceLock;

use git2::Oid;

use self::client::{CommitStatus, Created, GitHub, MergeAnswer, RemotePull};
use super::{
    refuse, Addr, Carried, Comment, Context, Forge, ForgeError, ForgeKind, ForgeMerge, GateStatus,
    Landing, MergeRequest, Posted, Publish, Published, PullRequest, PullState, RemoteLedger,
    Result, Shown, Site, DESCRIPTION_MAX,
};
use crate::audit::ledger;
use crate::audit::view::LedgerView;
use crate::config::ForgeConfig;
use crate::errors::Refusal;
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::token::{self, RawToken, Verdict};
use crate::governance::Code;
use crate::text::clip;

/// The commit status the gate sets; branch protection requires it.
pub const STATUS_CONTEXT: &str = "atelier/governance";
/// The label every submitted proposal carries (informational: it grants nothing).
pub const LABEL: &str = "atelier-proposal";
/// Marks the one summary comment the gate keeps up to date.
pub const SUMMARY_MARKER: &str = "<!-- atelier:gate-summary -->";

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
            return Err(ForgeError::Input(format!(
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
        site: &Site,
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
            let (base, head) = fetch_pull(site, n)?;
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
                super::parse_id(id)?;
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

    /// Fetches `refs/atelier/ledger` from the remote into a private ref, if the remote
    /// advertises one.
    fn fetch_ledger(&self, site: &Site) -> Result<RemoteLedger> {
        let advertised = git::git_cli(
            site.root,
            &["ls-remote", &site.config.forge.remote, ledger::REF],
        )?;
        if advertised.is_empty() {
            return Ok(RemoteLedger::Absent);
        }
        fetch(site, &[format!("+{}:{FETCHED_LEDGER}", ledger::REF)])?;
        Ok(RemoteLedger::Fetched(
            site.repo.refname_to_id(FETCHED_LEDGER)?,
        ))
    }

    fn fetched_base(&self, site: &Site) -> Option<Oid> {
        site.repo.refname_to_id(&remote_base_ref(site)).ok()
    }

    fn carried(
        &self,
        site: &Site,
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
        let fail = |sha: &str, r: Refusal| -> ForgeError {
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
        let (p, base, head) = match self.pull_and_tips(site, view, n)? {
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

    fn publish_ledger(&self, site: &Site) -> Result<()> {
        push_ledger(site)
    }

    fn publish_verdict(&self, shown: &Shown, editable: &[Comment]) -> Result<Option<String>> {
        let state = match shown.status {
            GateStatus::Pending => CommitStatus::Pending,
            GateStatus::Success => CommitStatus::Success,
            GateStatus::Failure => CommitStatus::Failure,
        };
        self.client_with_token()?.set_status(
            shown.head,
            state,
            shown.description,
            STATUS_CONTEXT,
        )?;
        let summary = clip_body(format!("{SUMMARY_MARKER}\n{}", shown.summary));
        self.upsert_summary(shown.pull, editable, &summary)?;
        Ok(Some(format!(
            "status {STATUS_CONTEXT} on {}: {:?} — {}",
            shown.head, shown.status, shown.description
        )))
    }

    fn token_comment(&self, tok: &RawToken) -> String {
        let verb = match token::Payload::parse(&tok.payload).map(|p| p.decision) {
            Ok(Verdict::Reject) => "reject",
            _ => "approve",
        };
        format!("/atelier {verb}\n\n```\n{}```\n", tok.to_text())
    }

    fn post(&self, _: &Site, n: u64, body: &str, _now: Timestamp) -> Result<Posted> {
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

    fn prepare(&self, _: &Site, _: &MergeRequest, _: Timestamp) -> Result<Option<Oid>> {
        Ok(None)
    }

    fn merge(&self, _: &Site, req: &MergeRequest, _: Option<Oid>) -> Result<Landing> {
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

    fn fetch_base(&self, site: &Site) -> Result<Oid> {
        fetch_base(site)
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

    fn shows_body(&self) -> bool {
        true
    }

    /// Rewrites the body of the pull request `submit` last recorded for the proposal.
    fn publish_review(&self, view: &LedgerView, pull: &PullRequest, body: &str) -> Result<()> {
        let Some(&n) = view.submitted_pulls(&pull.proposal).last() else {
            return Ok(());
        };
        self.client_with_token()?
            .update_pull(n, &pull.title, &clip_body(body.to_string()))?;
        Ok(())
    }

    /// Closes the pull request `submit` last recorded for the proposal, saying why.
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
        site: &Site,
        view: &LedgerView,
        pull: &PullRequest,
        body: &str,
    ) -> Result<Published> {
        let gh = self.client_with_token()?;
        let id = pull.proposal.as_str();
        let branch = pull.head_branch.clone();
        let head = git::branch_tip(site.repo, &branch)?;
        let body = clip_body(body.to_string());
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
            site.root,
            &[
                "push",
                "--quiet",
                &site.config.forge.remote,
                &format!("refs/heads/{branch}:refs/heads/{branch}"),
            ],
        )
        .with_context(|| format!("pushing {branch} to remote `{}`", site.config.forge.remote))?;
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
            None => match gh.create_pull(&pull.title, &branch, site.branch(), &body)? {
                Created::Opened(p) => (p, true),
                // A retried create whose first attempt did succeed: find the one GitHub has.
                Created::Exists(why) => match ours()? {
                    Some(p) => (p, true),
                    None => return Err(ForgeError::Remote(why)),
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

/// Where the remote's ledger is fetched before the governed loop decides to take it in.
const FETCHED_LEDGER: &str = "refs/atelier/github/ledger";

fn git_cli(root: &Path, args: &[&str]) -> Result<()> {
    Ok(git::git_cli(root, args).map(drop)?)
}

/// Fetches `refspecs` from the forge's remote with the user's `git`.
fn fetch(site: &Site, refspecs: &[String]) -> Result<()> {
    let mut args = vec![
        "fetch",
        "--quiet",
        "--no-tags",
        "--no-write-fetch-head",
        site.config.forge.remote.as_str(),
    ];
    args.extend(refspecs.iter().map(String::as_str));
    git_cli(site.root, &args)
}

fn remote_base_ref(site: &Site) -> String {
    format!("refs/atelier/github/heads/{}", site.branch())
}

/// Fetches the protected branch into its private ref; returns its tip.
fn fetch_base(site: &Site) -> Result<Oid> {
    let base_ref = remote_base_ref(site);
    fetch(site, &[format!("+refs/heads/{}:{base_ref}", site.branch())]).with_context(|| {
        format!(
            "fetching {} from remote `{}`",
            site.branch(),
            site.config.forge.remote
        )
    })?;
    Ok(site.repo.refname_to_id(&base_ref)?)
}

/// Fetches the protected branch and `refs/pull/<n>/head` into private refs; returns their tips.
fn fetch_pull(site: &Site, n: u64) -> Result<(Oid, Oid)> {
    let base_ref = remote_base_ref(site);
    let head_ref = format!("refs/atelier/github/pull/{n}/head");
    fetch(
        site,
        &[
            format!("+refs/heads/{}:{base_ref}", site.branch()),
            format!("+refs/pull/{n}/head:{head_ref}"),
        ],
    )
    .with_context(|| {
        format!(
            "fetching {} and pull request #{n} from remote `{}`",
            site.branch(),
            site.config.forge.remote
        )
    })?;
    let base = site.repo.refname_to_id(&base_ref)?;
    let head = site.repo.refname_to_id(&head_ref)?;
    Ok((base, head))
}

/// Pushes the ledger to the remote (fast-forward only).
pub fn push_ledger(site: &Site) -> Result<()> {
    git_cli(
        site.root,
        &[
            "push",
            "--quiet",
            &site.config.forge.remote,
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

/// Open pull requests that come from proposal branches (for `serve` after a push).
pub fn open_proposal_pulls(gh: &GitHub) -> Result<Vec<u64>> {
    Ok(gh
        .open_pulls()?
        .into_iter()
        .filter(|p| proposal_of(&p.head_ref).is_some())
        .map(|p| p.number)
        .collect())
}
