//! The governed loop's error: what a workflow operation fails with. It wraps the errors of the
//! layers below with `From`, keeping each one's [`Kind`] (`errors::Classify`); a refusal
//! carries its [`Code`] however much context is wrapped around it. Higher layers (the swarm
//! runtime, the cycle) wrap this one in turn; only `cli` turns a kind into an exit code.

use crate::audit::history::AuditError;
use crate::audit::ledger::LedgerError;
use crate::config::ConfigError;
use crate::errors::{Classify, Kind, Refusal};
use crate::forge::ForgeError;
use crate::fsutil::FsError;
use crate::git::{GitError, PatchError};
use crate::keys::KeyError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The command understood the request and said no, with a stable code.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// A refusal that could not be fully carried out: `source` says what failed.
    #[error("{refusal}")]
    RefusedBecause {
        refusal: Refusal,
        #[source]
        source: Box<Error>,
    },
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Audit(#[from] AuditError),
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
    Key(#[from] KeyError),
    #[error(transparent)]
    Clock(#[from] crate::clock::ClockError),
    #[error(transparent)]
    Backend(#[from] crate::agent::BackendError),
    #[error(transparent)]
    Plan(#[from] crate::swarm::plan::PlanFileError),
    #[error(transparent)]
    Events(#[from] crate::swarm::events::EventsError),
    /// Containment that cannot be had, as a refusal (its text starts with its code).
    /// (Its message is the whole refusal: it is not also its source, which would repeat it.)
    #[error("{code}: {0}", code = .0.code())]
    Contain(crate::agent::contain::ContainError),
    /// A file system operation that failed; the message says which file.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A key's bytes that ssh-key could not handle.
    #[error(transparent)]
    SshKey(#[from] ssh_key::Error),
    /// A JSON value that would not (de)serialize.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// A template that does not render; the message names it.
    #[error(transparent)]
    Template(#[from] minijinja::Error),
    /// A thread doing part of the work panicked or was cancelled: a bug.
    #[error("a worker task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
    /// A forge's or a model endpoint's service failed, in its words and with what to do.
    #[error("{0}")]
    Remote(String),
    /// Bad input: an argument, a file, a key; the message says which and what to do.
    #[error("{0}")]
    Input(String),
    /// What was being done when `source` failed.
    #[error("{context}")]
    Context {
        context: String,
        #[source]
        source: Box<Error>,
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

impl From<crate::agent::contain::ContainError> for Error {
    fn from(e: crate::agent::contain::ContainError) -> Error {
        Error::Contain(e)
    }
}

impl Classify for Error {
    fn kind(&self) -> Kind {
        match self {
            Error::Refused(r) | Error::RefusedBecause { refusal: r, .. } => r.kind(),
            Error::Ledger(e) => e.kind(),
            Error::Audit(e) => e.kind(),
            Error::Git(e) => e.kind(),
            Error::Patch(e) => e.kind(),
            Error::Forge(e) => e.kind(),
            Error::Config(e) => e.kind(),
            Error::Fs(e) => e.kind(),
            Error::Key(e) => e.kind(),
            Error::Clock(e) => e.kind(),
            Error::Backend(e) => e.kind(),
            Error::Contain(e) => e.kind(),
            Error::Plan(_)
            | Error::Input(_)
            | Error::SshKey(_)
            | Error::Json(_)
            | Error::Template(_) => Kind::Input,
            Error::Events(_) | Error::Git2(_) | Error::Io(_) | Error::Remote(_) => {
                Kind::Environment
            }
            Error::Join(_) => Kind::Internal,
            Error::Context { source, .. } => source.kind(),
        }
    }

    fn refusal_at(&self) -> usize {
        match self {
            Error::Forge(e) => e.refusal_at(),
            Error::Context { source, .. } => 1 + source.refusal_at(),
            _ => 0,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::governance::Code;

    #[test]
    fn a_refusal_keeps_its_kind_under_context_and_says_where_it_is() {
        let e = Error::from(Refusal::new(Code::StaleHead, "moved"))
            .context("merging 3")
            .context("the merge command");
        assert_eq!(e.kind(), Kind::Refused(Code::StaleHead));
        assert_eq!(e.refusal_at(), 2);
        let chain: Vec<String> =
            std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |e| {
                e.source()
            })
            .map(|e| e.to_string())
            .collect();
        assert_eq!(chain[2], "E_STALE_HEAD: moved");
    }

    #[test]
    fn a_forge_refusal_under_forge_context_is_found_through_the_wrapper() {
        let f = ForgeError::from(Refusal::new(Code::ForgeState, "edited")).context("reading 2");
        let e = Error::from(f).context("gate");
        assert_eq!(e.kind(), Kind::Refused(Code::ForgeState));
        assert_eq!(e.refusal_at(), 2);
    }

    #[test]
    fn an_io_failure_is_the_environments_not_bad_input() {
        let e = Error::from(std::io::Error::other("disk full")).context("writing x");
        assert_eq!(e.kind(), Kind::Environment);
    }

    #[test]
    fn a_panicked_worker_is_internal() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        let join = rt.block_on(async { tokio::spawn(async { panic!("boom") }).await });
        let e = Error::from(join.expect_err("the task panicked"));
        assert_eq!(e.kind(), Kind::Internal);
    }
}
