//! The one place that reads the wall clock. `ATELIER_NOW` (RFC 3339, e.g.
//! `2026-11-29T09:51:13Z`) replaces it, so tests and reproductions get a fixed time; the CLI
//! says so on stderr whenever it is set.

use thiserror::Error;

use crate::governance::time::{parse_rfc3339, TimeError, Timestamp};

pub const OVERRIDE_VAR: &str = "ATELIER_NOW";

/// Why the current time cannot be read.
#[derive(Debug, Error)]
pub enum ClockError {
    #[error("environment variable {OVERRIDE_VAR}: {0}")]
    Override(TimeError),
    #[error("the system clock is before 1970")]
    BeforeEpoch,
}

impl crate::errors::Classify for ClockError {
    fn kind(&self) -> crate::errors::Kind {
        match self {
            ClockError::Override(_) => crate::errors::Kind::Input,
            ClockError::BeforeEpoch => crate::errors::Kind::Environment,
        }
    }
}

/// Where the current time came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    System,
    Override,
}

/// The current time, in unix seconds (UTC).
pub fn now() -> Result<(Timestamp, Source), ClockError> {
    match std::env::var(OVERRIDE_VAR) {
        Ok(text) => {
            let t = parse_rfc3339(&text).map_err(ClockError::Override)?;
            Ok((t, Source::Override))
        }
        Err(_) => {
            #[allow(clippy::disallowed_methods)]
            let since = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|_| ClockError::BeforeEpoch)?;
            Ok((since.as_secs() as Timestamp, Source::System))
        }
    }
}

/// The real wall clock in unix seconds, never overridden: only for waits a server asks for
/// (GitHub's `x-ratelimit-reset`), never for decisions.
pub fn wall_seconds() -> u64 {
    #[allow(clippy::disallowed_methods)]
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// The real wall clock in milliseconds since the Unix epoch, never overridden: only for what
/// is shown live and recorded nowhere (a running worker's silence, `swarm::live`), never for
/// decisions.
pub fn wall_millis() -> u64 {
    #[allow(clippy::disallowed_methods)]
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
