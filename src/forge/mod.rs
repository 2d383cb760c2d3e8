//! Forges keep pull requests and their comments: the place approvals are posted and the
//! operation that lands an approved change. The local forge (git only, no network) is the
//! embedded default; a GitHub forge will implement the same trait.

pub mod github;
pub mod local;

use serde::{Deserialize, Serialize};

use crate::governance::time::Timestamp;

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
    Io(#[from] anyhow::Error),
}

/// What a forge does for the governed loop. Implementations never decide whether a change may
/// merge: the gate does, and callers hold the repository lock around mutations.
pub trait Forge {
    /// The number the next pull request will get.
    fn next_number(&self) -> Result<u64, ForgeError>;
    fn create(&self, pull: &PullRequest) -> Result<(), ForgeError>;
    fn get(&self, number: u64) -> Result<PullRequest, ForgeError>;
    fn list(&self) -> Result<Vec<PullRequest>, ForgeError>;
    fn comment(
        &self,
        number: u64,
        author: &str,
        body: &str,
        at: Timestamp,
    ) -> Result<Comment, ForgeError>;
    fn set_state(
        &self,
        number: u64,
        state: PullState,
        merge_commit: Option<String>,
        reason: Option<String>,
    ) -> Result<(), ForgeError>;
}
