//! The local forge: pull requests as JSON files under `.atelier/forge/pulls/`, one per pull,
//! written atomically. It needs no network; it is per clone, like a server's database, while the
//! ledger (refs/atelier/ledger) and the merge commits carry the record that travels. The gate
//! is the forge here: a pull request's number is its proposal's id, a posted token is recorded
//! in the ledger at once, and a merge is a merge commit built here and a compare-and-swap of
//! the protected branch from the approved base.

use std::path::PathBuf;

use git2::Oid;

use super::{
    refuse, Addr, Carried, Comment, Context, Forge, ForgeError, ForgeKind, ForgeMerge, Landing,
    MergeRequest, Posted, Publish, Published, PullRequest, PullState, RemoteLedger, Result, Shown,
    Site,
};
use crate::audit::view::LedgerView;
use crate::fsutil::atomic_write;
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::token::RawToken;
use crate::governance::Code;

/// This clone's records of the proposals it opened, one JSON file per pull request, on every
/// forge (on GitHub they are what `propose` made and `submit` publishes).
#[derive(Clone)]
pub struct Records {
    dir: PathBuf,
}

/// The local forge: the records are the pull requests.
pub struct LocalForge {
    records: Records,
}

impl LocalForge {
    pub fn new(records: Records) -> LocalForge {
        LocalForge { records }
    }
}

impl Records {
    pub fn new(atelier_dir: PathBuf) -> Records {
        Records {
            dir: atelier_dir.join("forge").join("pulls"),
        }
    }

    fn path(&self, number: u64) -> PathBuf {
        self.dir.join(format!("{number}.json"))
    }

    fn save(&self, pull: &PullRequest) -> Result<(), ForgeError> {
        let json = serde_json::to_vec_pretty(pull).expect("a pull request always serializes");
        atomic_write(&self.path(pull.number), &json)?;
        Ok(())
    }
}

impl Records {
    /// The number the next pull request will get.
    pub fn next_number(&self) -> Result<u64, ForgeError> {
        Ok(self.list()?.iter().map(|p| p.number).max().unwrap_or(0) + 1)
    }

    pub fn create(&self, pull: &PullRequest) -> Result<(), ForgeError> {
        if self.path(pull.number).exists() {
            return Err(ForgeError::Corrupt {
                path: self.path(pull.number).display().to_string(),
                reason: "already exists; pull request numbers are never reused".into(),
            });
        }
        self.save(pull)
    }

    pub fn get(&self, number: u64) -> Result<PullRequest, ForgeError> {
        let path = self.path(number);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ForgeError::NoSuchPull(number.to_string()))
            }
            Err(e) => {
                return Err(ForgeError::Corrupt {
                    path: path.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        serde_json::from_slice(&bytes).map_err(|e| ForgeError::Corrupt {
            path: path.display().to_string(),
            reason: e.to_string(),
        })
    }

    pub fn list(&self) -> Result<Vec<PullRequest>, ForgeError> {
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => {
                return Err(ForgeError::Corrupt {
                    path: self.dir.display().to_string(),
                    reason: e.to_string(),
                })
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(n) = name
                .strip_suffix(".json")
                .and_then(|n| n.parse::<u64>().ok())
            {
                out.push(self.get(n)?);
            }
        }
        out.sort_by_key(|p| p.number);
        Ok(out)
    }

    pub fn comment(
        &self,
        number: u64,
        author: &str,
        body: &str,
        at: Timestamp,
    ) -> Result<Comment, ForgeError> {
        let mut pull = self.get(number)?;
        let comment = Comment {
            id: pull.comments.iter().map(|c| c.id).max().unwrap_or(0) + 1,
            author: author.to_string(),
            body: body.to_string(),
            at,
        };
        pull.comments.push(comment.clone());
        self.save(&pull)?;
        Ok(comment)
    }

    pub fn set_state(
        &self,
        number: u64,
        state: PullState,
        merge_commit: Option<String>,
        reason: Option<String>,
    ) -> Result<(), ForgeError> {
        let mut pull = self.get(number)?;
        pull.state = state;
        pull.merge_commit = merge_commit;
        pull.closed_reason = reason;
        self.save(&pull)
    }
}

/// This clone's record of a proposal, checked against the configuration and the ledger, with
/// its branches' tips: the record must target the protected branch from the proposal's own
/// branch, and the facts the ledger recorded when the proposal was opened (its pull request
/// number, branch and proposer) win over the record, which anyone with the clone can edit.
pub fn checked_record(
    site: &Site,
    view: &LedgerView,
    pull: PullRequest,
) -> Result<(PullRequest, Oid, Oid)> {
    let repo = site.repo;
    let expected_head = format!("atelier/proposals/{}", pull.number);
    if pull.base_branch != site.branch() || pull.head_branch != expected_head {
        return Err(refuse(
            Code::ForgeState,
            format!(
                "pull request {} targets `{}` from `{}`; expected `{}` from `{expected_head}` — the forge record was edited",
                pull.number,
                pull.base_branch,
                pull.head_branch,
                site.branch()
            ),
        ));
    }
    let opened = view.opened(&pull.proposal);
    let Some(opened) = opened
        .clone()
        .filter(|o| o.pull == pull.number && o.branch == pull.head_branch)
    else {
        return Err(refuse(
            Code::ForgeState,
            format!(
                "the forge record of proposal {} names pull request {} from `{}`, but the ledger recorded {} — the forge record was edited",
                pull.proposal,
                pull.number,
                pull.head_branch,
                match opened {
                    Some(o) => format!("pull request {} from `{}`", o.pull, o.branch),
                    None => "no such proposal".to_string(),
                }
            ),
        ));
    };
    let pull = PullRequest {
        proposer: opened.proposer,
        ..pull
    };
    let base = git::branch_tip(repo, &pull.base_branch)?;
    let head = git::branch_tip(repo, &pull.head_branch)
        .with_context(|| format!("the proposal branch {} is gone", pull.head_branch))?;
    Ok((pull, base, head))
}

impl Forge for LocalForge {
    fn kind(&self) -> ForgeKind {
        ForgeKind::Local
    }

    fn pull_for(&self, _: &LedgerView, addr: &Addr) -> Result<u64> {
        match addr {
            Addr::Proposal(id) => super::parse_id(id),
            Addr::Pull(n) => Ok(*n),
        }
    }

    fn fetch_ledger(&self, _: &Site) -> Result<RemoteLedger> {
        Ok(RemoteLedger::Local)
    }

    fn fetched_base(&self, _: &Site) -> Option<Oid> {
        None
    }

    fn carried(
        &self,
        site: &Site,
        view: &LedgerView,
        n: u64,
        _: Publish,
        delivered: Vec<Comment>,
    ) -> Result<Carried> {
        let (mut pull, base, head) = checked_record(site, view, self.records.get(n)?)?;
        // The record must also be the one its number names (a record copied over another's
        // file is consistent with the ledger, but for another proposal).
        if pull.number != n || pull.proposal != n.to_string() {
            return Err(refuse(
                Code::ForgeState,
                format!(
                    "{} holds the record of pull request {} (proposal {}), not of {n}: the forge record was edited",
                    self.records.path(n).display(),
                    pull.number,
                    pull.proposal
                ),
            ));
        }
        pull.comments.extend(delivered);
        Ok(Carried {
            pull,
            base,
            head,
            editable: Vec::new(),
        })
    }

    fn records_each_verdict(&self) -> bool {
        true
    }

    fn publish_ledger(&self, _: &Site) -> Result<()> {
        Ok(())
    }

    fn publish_verdict(&self, _: &Shown, _: &[Comment]) -> Result<Option<String>> {
        Ok(None)
    }

    fn token_comment(&self, token: &RawToken) -> String {
        token.to_text()
    }

    fn post(&self, site: &Site, n: u64, body: &str, now: Timestamp) -> Result<Posted> {
        let author = site
            .repo
            .config()
            .ok()
            .and_then(|c| c.get_string("user.email").ok())
            .unwrap_or_else(|| "unknown".into());
        let c = self.records.comment(n, &author, body, now)?;
        Ok(Posted {
            comment: c.id,
            url: None,
        })
    }

    fn records_on_post(&self) -> bool {
        true
    }

    /// Merges happen here only through the gate: this clone's record is not the authority.
    fn merged_on_forge(&self, _: u64) -> Result<Option<ForgeMerge>> {
        Ok(None)
    }

    fn lands_remotely(&self) -> bool {
        false
    }

    fn prepare(&self, site: &Site, req: &MergeRequest, now: Timestamp) -> Result<Option<Oid>> {
        let repo = site.repo;
        let sig = git::signature(repo, now)?;
        let commit = repo.commit(
            None,
            &sig,
            &sig,
            &req.message,
            &repo.find_tree(req.tree)?,
            &[&repo.find_commit(req.base)?, &repo.find_commit(req.head)?],
        )?;
        Ok(Some(commit))
    }

    fn merge(&self, site: &Site, req: &MergeRequest, prepared: Option<Oid>) -> Result<Landing> {
        // `prepare` always builds one here: a broken invariant, not bad input.
        let commit = prepared.expect("the local forge prepares every merge commit it lands");
        let refname = format!("refs/heads/{}", site.branch());
        if git::compare_and_swap(
            site.repo,
            &refname,
            req.base,
            commit,
            &format!("atelier: merge proposal {}", req.proposal),
        )? {
            return Ok(Landing::Landed(commit.to_string()));
        }
        Ok(Landing::BaseMoved {
            found: git::branch_tip(site.repo, site.branch())
                .map(|o| o.to_string())
                .unwrap_or_else(|_| "nothing".into()),
        })
    }

    fn fetch_base(&self, site: &Site) -> Result<Oid> {
        Ok(git::branch_tip(site.repo, site.branch())?)
    }

    fn own_account(&self) -> Result<Option<String>> {
        Ok(None)
    }

    fn announce_alarm(&self, _: u64, _: Code, _: &str) -> Result<()> {
        Ok(())
    }

    /// This clone's record is the pull request: `close` already marked it.
    fn withdraw(&self, _: &LedgerView, _: &str, _: Option<&str>) -> Result<()> {
        Ok(())
    }

    /// The local forge shows proposals through `atelier show` and `gate`, which read the ledger.
    fn shows_body(&self) -> bool {
        false
    }

    fn publish_review(&self, _: &LedgerView, _: &PullRequest, _: &str) -> Result<()> {
        Ok(())
    }

    fn publish_proposal(
        &self,
        site: &Site,
        _: &LedgerView,
        _: &PullRequest,
        _: &str,
    ) -> Result<Published> {
        Err(ForgeError::Input(format!(
            "this command needs [forge] kind = \"github\" in atelier.toml (it is \"{}\"); see docs/github.md",
            site.config.forge.kind
        )))
    }
}
