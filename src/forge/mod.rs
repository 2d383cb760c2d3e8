//! Forges carry proposals as pull requests: where a change is published, where approval tokens
//! are posted, where a verdict is shown, and the operation that lands an approved change. The
//! governed loop (`workflow`) is written once against the [`Forge`] trait; [`local::LocalForge`]
//! (git only, no network: the embedded default) and [`github::GitHubForge`] implement it, and
//! `Workspace::open` picks one from `[forge] kind`. Nothing here decides whether a change may
//! merge: the gate does. Callers hold the repository lock around every mutation.

pub mod github;
pub mod local;

use std::path::Path;

use git2::{Oid, Repository};
use serde::{Deserialize, Serialize};

use crate::audit::view::LedgerView;
use crate::config::Config;
use crate::errors::{Classify, Kind, Refusal};
use crate::governance::time::Timestamp;
use crate::governance::token::RawToken;
use crate::governance::Code;

pub use local::Records;

pub type Result<T, E = ForgeError> = std::result::Result<T, E>;

/// What a forge works on: this clone (its directory, repository and configuration) and the
/// records of the proposals it opened. The governed loop's `Workspace` lends it out
/// (`Workspace::site`); a forge needs nothing else of it.
#[derive(Clone, Copy)]
pub struct Site<'a> {
    pub root: &'a Path,
    pub repo: &'a Repository,
    pub config: &'a Config,
    pub records: &'a Records,
}

impl Site<'_> {
    /// The protected branch.
    pub fn branch(&self) -> &str {
        &self.config.forge.branch
    }
}

/// What a verdict looks like on a forge: a commit status's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum GateStatus {
    /// Only approvals are missing.
    Pending,
    Success,
    Failure,
}

/// What an evaluation writes to the forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Publish {
    /// Nothing: evaluate only.
    Nothing,
    /// The verdict (GitHub: the status and the summary comment).
    Verdict,
    /// `pending` first (a new head arrived), then the verdict.
    PendingThenVerdict,
}

/// The longest status description a forge shows (GitHub's limit, which every forge keeps to).
pub const DESCRIPTION_MAX: usize = 140;

/// A verdict as a forge shows it: the status on the head, and the summary (GitHub: one comment
/// the gate keeps up to date), both written by the governed loop.
pub struct Shown<'a> {
    pub pull: u64,
    pub head: &'a str,
    pub status: GateStatus,
    /// At most [`DESCRIPTION_MAX`] characters.
    pub description: &'a str,
    pub summary: &'a str,
}

/// The ledger as a forge holds it, fetched into this clone but not taken in: the governed loop
/// decides whether it may be (`workflow::sync`).
pub enum RemoteLedger {
    /// The forge keeps no ledger of its own: this clone's is the forge's (local).
    Local,
    /// The forge has no ledger yet.
    Absent,
    /// Fetched: the tip of the forge's ledger, in this clone's objects.
    Fetched(Oid),
}

/// A proposal id as a command line gives it: digits, written canonically (`01` is refused), so
/// every spelling of a proposal is one id.
pub fn parse_id(id: &str) -> Result<u64> {
    let canonical = !id.is_empty()
        && id.bytes().all(|b| b.is_ascii_digit())
        && !(id.len() > 1 && id.starts_with('0'));
    id.parse().ok().filter(|_| canonical).ok_or_else(|| {
        ForgeError::Input(format!(
            "`{id}` is not a proposal id: ids are numbers written without leading zeros (`atelier proposals` lists them)"
        ))
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PullState {
    Open,
    Merged,
    Closed,
}

impl PullState {
    pub fn as_str(self) -> &'static str {
        match self {
            PullState::Open => "open",
            PullState::Merged => "merged",
            PullState::Closed => "closed",
        }
    }
}

/// A comment on a pull request, as the forge stores it (tokens arrive this way).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Comment {
    pub id: u64,
    pub author: String,
    pub body: String,
    pub at: Timestamp,
}

/// A pull request for one proposal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullRequest {
    pub number: u64,
    pub proposal: String,
    pub title: String,
    /// The proposal branch (`atelier/proposals/<id>`).
    pub head_branch: String,
    /// The protected branch it targets.
    pub base_branch: String,
    pub state: PullState,
    pub proposer: Option<String>,
    pub created: Timestamp,
    /// Where the proposal record lives in the tree (`proposals/<id>-<slug>`).
    pub record: String,
    #[serde(default)]
    pub comments: Vec<Comment>,
    #[serde(default)]
    pub merge_commit: Option<String>,
    #[serde(default)]
    pub closed_reason: Option<String>,
}

/// What a forge operation fails with.
#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("proposal {0} does not exist: `atelier proposals` lists them")]
    NoSuchPull(String),
    /// A record in this clone that does not read back.
    #[error("{path}: {reason}")]
    Corrupt { path: String, reason: String },
    /// The forge refused, or found the change not what the ledger says, with a stable code.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Bad input: a setting, an id, a command this forge does not have; the message says what
    /// to do.
    #[error("{0}")]
    Input(String),
    /// The forge's service failed or answered with an error, in its words and with what to do.
    #[error("{0}")]
    Remote(String),
    #[error(transparent)]
    Io(#[from] crate::fsutil::FsError),
    #[error(transparent)]
    Git(#[from] crate::git::GitError),
    #[error("git: {0}")]
    Git2(#[from] git2::Error),
    #[error(transparent)]
    Ledger(#[from] crate::audit::ledger::LedgerError),
    /// What was being done when `source` failed.
    #[error("{context}")]
    Context {
        context: String,
        #[source]
        source: Box<ForgeError>,
    },
}

impl ForgeError {
    /// This error, as the cause of a failure to do `context`.
    pub fn context(self, context: impl Into<String>) -> ForgeError {
        ForgeError::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }
}

impl Classify for ForgeError {
    fn kind(&self) -> Kind {
        match self {
            ForgeError::NoSuchPull(_) | ForgeError::Corrupt { .. } | ForgeError::Input(_) => {
                Kind::Input
            }
            ForgeError::Refused(r) => r.kind(),
            ForgeError::Remote(_) | ForgeError::Git2(_) => Kind::Environment,
            ForgeError::Io(e) => e.kind(),
            ForgeError::Git(e) => e.kind(),
            ForgeError::Ledger(e) => e.kind(),
            ForgeError::Context { source, .. } => source.kind(),
        }
    }

    fn refusal_at(&self) -> usize {
        match self {
            ForgeError::Context { source, .. } => 1 + source.refusal_at(),
            _ => 0,
        }
    }
}

/// `.context()` / `.with_context()` on a result whose error converts into [`ForgeError`].
pub trait Context<T> {
    fn context(self, context: impl Into<String>) -> Result<T>;
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<ForgeError>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.into().context(context))
    }

    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
}

/// A refusal with `code`, as a forge error.
pub fn refuse(code: Code, message: impl Into<String>) -> ForgeError {
    Refusal::new(code, message).into()
}

/// Which forge a workspace uses (`[forge] kind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForgeKind {
    Local,
    GitHub,
}

/// How a command names a proposal: by its id, or by the number of the pull request carrying it
/// (on the local forge the two are the same number).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Addr {
    Proposal(String),
    Pull(u64),
}

/// A change as the forge carries it now: its record (with every comment that may carry a
/// token, and the proposer the ledger recorded), and the base and head commits, present in
/// this clone.
pub struct Carried {
    pub pull: PullRequest,
    pub base: Oid,
    pub head: Oid,
    /// Comments the forge lets the gate edit (the summary comment lives among them).
    pub editable: Vec<Comment>,
}

/// What the gate asks a forge to land: the merge of `head` into `base` with exactly `tree`.
pub struct MergeRequest {
    pub proposal: String,
    pub pull: u64,
    pub base: Oid,
    pub head: Oid,
    pub tree: Oid,
    pub message: String,
}

/// What a forge did with a [`MergeRequest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Landing {
    /// Merged: the forge names the merge commit (checked by the caller, never trusted).
    Landed(String),
    /// The protected branch was not at the approved base (nothing merged).
    BaseMoved { found: String },
    /// The head was not the approved head (nothing merged).
    HeadMoved { found: String, reason: String },
    /// The forge refused, in its own words (nothing merged).
    NotMergeable(String),
    /// The forge says the pull request is merged already, as `commit`, by `by`.
    MergedBy { commit: String, by: Option<String> },
}

/// A pull request the forge reports as merged.
pub struct ForgeMerge {
    /// The proposal the pull request carries.
    pub proposal: String,
    pub commit: String,
    pub by: Option<String>,
}

/// A proposal published on a forge (`submit`).
#[derive(Debug, Clone, Serialize)]
pub struct Published {
    pub pull: u64,
    pub url: String,
    pub created: bool,
    pub head: String,
}

/// A token comment posted on a pull request.
pub struct Posted {
    /// The comment's id on the forge.
    pub comment: u64,
    /// Its web address, where the forge has one.
    pub url: Option<String>,
}

/// What a forge does for the governed loop, in the order a command uses it: where the forges
/// differ. A forge is given the [`Site`] it works on and plain data; it never judges (the gate
/// does) and never writes the ledger (the governed loop does). The records of the proposals
/// this clone opened are the same on every forge ([`Records`]).
pub trait Forge {
    fn kind(&self) -> ForgeKind;

    /// The pull request a command's address names.
    fn pull_for(&self, view: &LedgerView, addr: &Addr) -> Result<u64>;
    /// Fetches the forge's ledger, without taking it in (the governed loop checks it first).
    fn fetch_ledger(&self, site: &Site) -> Result<RemoteLedger>;
    /// The protected branch's tip as last fetched from the forge, where the forge keeps it
    /// apart from this clone's branch (GitHub); `None` where this clone's branch is the forge's.
    fn fetched_base(&self, site: &Site) -> Option<Oid>;
    /// The change as it is on the forge now, checked to be a proposal this forge carries. With
    /// `publish`, a refused pull request may be marked so on the forge; with
    /// `Publish::PendingThenVerdict` its head is marked pending first. `delivered` are comment
    /// bodies the forge delivered (signed webhooks) that are read as carriers too.
    fn carried(
        &self,
        site: &Site,
        view: &LedgerView,
        pull: u64,
        publish: Publish,
        delivered: Vec<Comment>,
    ) -> Result<Carried>;
    /// Whether every published verdict is recorded (an operator's explicit `gate`), or only a
    /// changed one (evaluations a forge triggers on every comment).
    fn records_each_verdict(&self) -> bool;
    /// Publishes the ledger after it was appended to (GitHub: pushes `refs/atelier/ledger`).
    fn publish_ledger(&self, site: &Site) -> Result<()>;
    /// Shows a verdict on the forge (GitHub: the commit status and the summary comment, kept in
    /// one of `editable`); returns what was shown, for the operator.
    fn publish_verdict(&self, shown: &Shown, editable: &[Comment]) -> Result<Option<String>>;
    /// The comment text that carries a token on this forge.
    fn token_comment(&self, token: &RawToken) -> String;
    /// Posts a comment on pull request `pull`.
    fn post(&self, site: &Site, pull: u64, body: &str, now: Timestamp) -> Result<Posted>;
    /// Whether the forge records tokens when they are posted (the local forge is the gate's own
    /// record; on GitHub the gate records them when it evaluates).
    fn records_on_post(&self) -> bool;
    /// Whether the forge itself reports pull request `pull` as merged (by anyone).
    fn merged_on_forge(&self, pull: u64) -> Result<Option<ForgeMerge>>;
    /// Whether the forge builds the merge commit itself (GitHub), so the gate records its
    /// request before asking; otherwise the gate builds the commit here and records it.
    fn lands_remotely(&self) -> bool;
    /// Builds the merge commit here, when the forge does not build it itself.
    fn prepare(&self, site: &Site, req: &MergeRequest, now: Timestamp) -> Result<Option<Oid>>;
    /// Lands the merge, guarded by the approved base (local) or head (GitHub).
    fn merge(&self, site: &Site, req: &MergeRequest, prepared: Option<Oid>) -> Result<Landing>;
    /// The protected branch's tip as the forge holds it now, present in this clone.
    fn fetch_base(&self, site: &Site) -> Result<Oid>;
    /// The account this forge's merges are made by, if the forge says.
    fn own_account(&self) -> Result<Option<String>>;
    /// Says on the pull request that an alarm was raised (best effort is the caller's choice).
    fn announce_alarm(&self, pull: u64, code: Code, detail: &str) -> Result<()>;
    /// Closes the pull request that carries a proposal given up with `close`.
    fn withdraw(&self, view: &LedgerView, proposal: &str, reason: Option<&str>) -> Result<()>;
    /// Whether the forge shows a proposal with a body the governed loop renders (GitHub: the
    /// pull request's description); only then are `publish_review` and `publish_proposal`
    /// given one.
    fn shows_body(&self) -> bool;
    /// Shows a newly recorded review verdict where the forge shows the proposal (GitHub: the
    /// pull request body, re-rendered with its "Review panel" section).
    fn publish_review(&self, view: &LedgerView, pull: &PullRequest, body: &str) -> Result<()>;
    /// Publishes a proposal (`submit`): pushes its branch and opens or updates its pull request
    /// with `body`.
    fn publish_proposal(
        &self,
        site: &Site,
        view: &LedgerView,
        pull: &PullRequest,
        body: &str,
    ) -> Result<Published>;
}
