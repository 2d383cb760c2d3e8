//! Forges carry proposals as pull requests: where a change is published, where approval tokens
//! are posted, where a verdict is shown, and the operation that lands an approved change. The
//! governed loop (`workflow`) is written once against the [`Forge`] trait; [`local::LocalForge`]
//! (git only, no network: the embedded default) and [`github::GitHubForge`] implement it, and
//! `Workspace::open` picks one from `[forge] kind`. Nothing here decides whether a change may
//! merge: the gate does. Callers hold the repository lock around every mutation.

pub mod github;
pub mod local;

use crate::workflow::error::Result;
use git2::Oid;
use serde::{Deserialize, Serialize};

use crate::audit::view::LedgerView;
use crate::governance::time::Timestamp;
use crate::governance::token::RawToken;
use crate::governance::Code;
use crate::workflow::{Evaluation, GateStatus, Publish, Workspace};

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

#[derive(Debug, thiserror::Error)]
pub enum ForgeError {
    #[error("proposal {0} does not exist: `atelier proposals` lists them")]
    NoSuchPull(String),
    #[error("{path}: {reason}")]
    Corrupt { path: String, reason: String },
    #[error(transparent)]
    Io(#[from] crate::fsutil::FsError),
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
/// differ. The records of the proposals this clone opened are the same on every forge
/// ([`local::Records`], `Workspace::records`).
pub trait Forge {
    fn kind(&self) -> ForgeKind;

    /// The pull request a command's address names.
    fn pull_for(&self, view: &LedgerView, addr: &Addr) -> Result<u64>;
    /// Brings in what others recorded before anything is judged (GitHub: the remote ledger).
    /// Not `strict`: a remote that cannot be read is a note, not an error; a refusal (a
    /// diverged or rewound ledger) always is one.
    fn sync(&self, ws: &Workspace, strict: bool) -> Result<Vec<String>>;
    /// The change as it is on the forge now, checked to be a proposal this forge carries. With
    /// `publish`, a refused pull request may be marked so on the forge; with
    /// `Publish::PendingThenVerdict` its head is marked pending first. `delivered` are comment
    /// bodies the forge delivered (signed webhooks) that are read as carriers too.
    fn carried(
        &self,
        ws: &Workspace,
        view: &LedgerView,
        pull: u64,
        publish: Publish,
        delivered: Vec<Comment>,
    ) -> Result<Carried>;
    /// Whether every published verdict is recorded (an operator's explicit `gate`), or only a
    /// changed one (evaluations a forge triggers on every comment).
    fn records_each_verdict(&self) -> bool;
    /// Publishes the ledger after it was appended to (GitHub: pushes `refs/atelier/ledger`).
    fn publish_ledger(&self, ws: &Workspace) -> Result<()>;
    /// Shows a verdict on the forge (GitHub: the commit status and the summary comment);
    /// returns what was shown, for the operator.
    fn publish_verdict(
        &self,
        eval: &Evaluation,
        editable: &[Comment],
        status: GateStatus,
        description: &str,
    ) -> Result<Option<String>>;
    /// The comment text that carries a token on this forge.
    fn token_comment(&self, token: &RawToken) -> String;
    /// Posts a comment on pull request `pull`.
    fn post(&self, ws: &Workspace, pull: u64, body: &str, now: Timestamp) -> Result<Posted>;
    /// Whether the forge records tokens when they are posted (the local forge is the gate's own
    /// record; on GitHub the gate records them when it evaluates).
    fn records_on_post(&self) -> bool;
    /// Whether the forge itself reports pull request `pull` as merged (by anyone).
    fn merged_on_forge(&self, pull: u64) -> Result<Option<ForgeMerge>>;
    /// Whether the forge builds the merge commit itself (GitHub), so the gate records its
    /// request before asking; otherwise the gate builds the commit here and records it.
    fn lands_remotely(&self) -> bool;
    /// Builds the merge commit here, when the forge does not build it itself.
    fn prepare(&self, ws: &Workspace, req: &MergeRequest, now: Timestamp) -> Result<Option<Oid>>;
    /// Lands the merge, guarded by the approved base (local) or head (GitHub).
    fn merge(&self, ws: &Workspace, req: &MergeRequest, prepared: Option<Oid>) -> Result<Landing>;
    /// The protected branch's tip as the forge holds it now, present in this clone.
    fn fetch_base(&self, ws: &Workspace) -> Result<Oid>;
    /// The account this forge's merges are made by, if the forge says.
    fn own_account(&self) -> Result<Option<String>>;
    /// Says on the pull request that an alarm was raised (best effort is the caller's choice).
    fn announce_alarm(&self, pull: u64, code: Code, detail: &str) -> Result<()>;
    /// Closes the pull request that carries a proposal given up with `close`.
    fn withdraw(&self, view: &LedgerView, proposal: &str, reason: Option<&str>) -> Result<()>;
    /// Shows a newly recorded review verdict where the forge shows the proposal (GitHub: the
    /// pull request body's "Review panel" section, re-rendered from the ledger).
    fn publish_review(&self, ws: &Workspace, view: &LedgerView, pull: &PullRequest) -> Result<()>;
    /// Publishes a proposal (`submit`): pushes its branch and opens or updates its pull request.
    fn publish_proposal(
        &self,
        ws: &Workspace,
        view: &LedgerView,
        pull: &PullRequest,
    ) -> Result<Published>;
}
