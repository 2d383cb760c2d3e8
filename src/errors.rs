//! The error vocabulary every layer shares: what [`Kind`] of failure an error is, decided where
//! the error is made ([`Classify`]); [`Refusal`], the one error that carries a stable [`Code`];
//! and [`chain`], an error and its causes on one line. Each layer has its own error type
//! (thiserror) that implements [`Classify`]; a higher layer wraps a lower one's with `From` and
//! keeps its kind. Only `cli` turns a kind into an exit code, in one match (`cli::exit_code`).
//!
//! This module sits just above `governance` and imports nothing else of the crate: every layer
//! may use it. The governance errors (which may not depend on anything) are classified here.

use crate::governance::allowed_signers::AllowedSignersError;
use crate::governance::policy::PolicyError;
use crate::governance::time::TimeError;
use crate::governance::token::{SignatureError, TokenError};
use crate::governance::{Code, Coded};

/// What kind of failure an error is. Decided where the error is made, carried unchanged by
/// every wrapper, read once at the edge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The request was understood and refused, with a stable code (exit 1).
    Refused(Code),
    /// Bad input: an argument, a file, a key, a configuration; the message names it and says
    /// what to do (exit 2).
    Input,
    /// Something Atelier relies on failed: a remote service (a forge's API, a model endpoint),
    /// the file system, a program it runs, the repository's objects (exit 2).
    Environment,
    /// A bug: a panic, in any thread, or a broken invariant (exit 101).
    Internal,
}

/// An error that knows its [`Kind`].
pub trait Classify {
    /// What kind of failure this is.
    fn kind(&self) -> Kind;

    /// For a refusal wrapped in context: how many errors of this one's chain (itself, then its
    /// `source()`s) come before the refusal, which is what people read first. 0 when this error
    /// is the refusal itself, or is no refusal.
    fn refusal_at(&self) -> usize {
        0
    }
}

/// A refusal: the command understood the request and said no, with a stable code and, in its
/// message, the expected and received values and what to do next.
#[derive(Debug, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Refusal {
    pub code: Code,
    pub message: String,
}

impl Refusal {
    pub fn new(code: Code, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

impl Coded for Refusal {
    fn code(&self) -> Option<Code> {
        Some(self.code)
    }
}

impl Classify for Refusal {
    fn kind(&self) -> Kind {
        Kind::Refused(self.code)
    }
}

/// An error and every cause under it, on one line (`what: why: deeper why`), for notes and logs
/// that carry a failure as text.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let text = cause.to_string();
        // A wrapper that displays its source (transparent) would repeat it.
        if !out.ends_with(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        next = cause.source();
    }
    out
}

// The governance errors: pure, so they cannot know the vocabulary; their kinds are decided here.

impl Classify for SignatureError {
    fn kind(&self) -> Kind {
        Kind::Refused(self.code())
    }
}

impl Classify for TokenError {
    fn kind(&self) -> Kind {
        Kind::Input
    }
}

impl Classify for TimeError {
    fn kind(&self) -> Kind {
        Kind::Input
    }
}

impl Classify for PolicyError {
    fn kind(&self) -> Kind {
        Kind::Input
    }
}

impl Classify for AllowedSignersError {
    fn kind(&self) -> Kind {
        Kind::Input
    }
}

// Failures of what Atelier relies on, as the libraries report them.

impl Classify for std::io::Error {
    fn kind(&self) -> Kind {
        Kind::Environment
    }
}

impl Classify for git2::Error {
    fn kind(&self) -> Kind {
        Kind::Environment
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_is_refused_with_its_code() {
        let r = Refusal::new(Code::StaleHead, "moved");
        assert_eq!(r.kind(), Kind::Refused(Code::StaleHead));
        assert_eq!(r.to_string(), "E_STALE_HEAD: moved");
    }

    #[test]
    fn joins_every_cause_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("recording")]
        struct Outer(#[source] std::io::Error);
        let e = Outer(std::io::Error::other("disk full"));
        assert_eq!(chain(&e), "recording: disk full");
    }
}
