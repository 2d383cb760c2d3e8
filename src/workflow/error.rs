//! The operations' error: what a workflow, forge or swarm operation can fail with (`anyhow`
//! stays at the CLI's edge). A refusal
//! carries its [`Code`] (exit 1); everything else is bad input or something in the way (exit 2),
//! decided once by the CLI (`cli::exit_class`) from [`Coded`].

use crate::audit::ledger::LedgerError;
use crate::config::ConfigError;
use crate::forge::ForgeError;
use crate::fsutil::FsError;
use crate::git::{GitError, PatchError};
use crate::governance::{Code, Coded};

use super::Refusal;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command understood the request and said no, with a stable code.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// A refusal that could not be fully carried out: `source` says what failed.
    #[error("{refusal}")]
    RefusedBecause {
        refusal: Refusal,
        /// A boxed [`Error`]: the chain then yields the `Error` itself (for `cli::coded`).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error(transparent)]
    Git2(#[from] git2::Error),
    #[error(transparent)]
    Patch(#[from] PatchError),
    #[error(transparent)]
    Forge(#[from] ForgeError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Fs(#[from] FsError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Clock(#[from] crate::clock::ClockError),
    #[error(transparent)]
    Key(#[from] ssh_key::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error(transparent)]
    Template(#[from] minijinja::Error),
    #[error(transparent)]
    Plan(#[from] crate::swarm::plan::PlanFileError),
    #[error(transparent)]
    Backend(#[from] crate::agent::BackendError),
    #[error(transparent)]
    Events(#[from] crate::swarm::events::EventsError),
    #[error("a worker task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// A forge's service failed or answered with an error, in its words and with what to do.
    #[error("{0}")]
    Remote(String),
    /// Bad input: an argument, a file, a key; the message says which and what to do.
    #[error("{0}")]
    Input(String),
    /// What was being done when `source` failed.
    #[error("{context}")]
    Context {
        context: String,
        /// A boxed [`Error`]: the chain then yields the `Error` itself, so a refusal inside keeps
        /// its code.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Bad input, with what to do about it.
    pub fn input(message: impl Into<String>) -> Error {
        Error::Input(message.into())
    }

    /// This error, as the cause of a failure to do `context`.
    pub fn context(self, context: impl Into<String>) -> Error {
        Error::Context {
            context: context.into(),
            source: Box::new(self),
        }
    }
}

/// Only the variants that are a coded refusal themselves: a refusal inside a `Context` is
/// found as the next error of the chain, so the CLI prints it first.
impl Coded for Error {
    fn code(&self) -> Option<Code> {
        match self {
            Error::Refused(r) | Error::RefusedBecause { refusal: r, .. } => Some(r.code),
            Error::Ledger(l) => l.code(),
            _ => None,
        }
    }
}

/// `.context()` / `.with_context()` on any result whose error converts into [`Error`].
pub trait Context<T> {
    fn context(self, context: impl Into<String>) -> Result<T>;
    fn with_context(self, context: impl FnOnce() -> String) -> Result<T>;
}

impl<T, E: Into<Error>> Context<T> for std::result::Result<T, E> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.map_err(|e| e.into().context(context))
    }

    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
}

impl<T> Context<T> for Option<T> {
    fn context(self, context: impl Into<String>) -> Result<T> {
        self.ok_or_else(|| Error::input(context))
    }

    fn with_context(self, context: impl FnOnce() -> String) -> Result<T> {
        self.ok_or_else(|| Error::input(context()))
    }
}
