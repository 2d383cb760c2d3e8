//! `atelier serve`'s side of the governed loop: what the webhook receiver
//! (`forge::github::serve`) asks for when a verified delivery names a pull request — record
//! the tokens it carries, then the same gate as `gate --pr`, and the merge where `[forge]
//! merge = "auto"`. Each evaluation opens the workspace afresh and holds the repository lock,
//! waited for at most [`LOCK_WAIT`]. The operator's lines go to the reporter the CLI gives.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{bound_pull, Error, MergeOutcome, Result, Workspace};
use crate::audit::ledger::Event;
use crate::forge::github::serve::{self as receiver, Failure, Handler, Served, Timeouts};
use crate::forge::{Addr, Comment, Publish};
use crate::git;
use crate::governance::time::Timestamp;
use crate::governance::token::{self, RawToken};

/// How long an evaluation waits for the repository lock before giving up (its delivered
/// bodies stay queued for the next evaluation).
pub const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Where `serve` tells the operator what happened: a line for people (stderr) and the address
/// it listens on (stdout). The CLI implements it; nothing below the CLI prints.
pub trait Reporter: Send + Sync {
    fn note(&self, line: &str);
    fn listening(&self, at: SocketAddr);
}

/// A repository ready to serve GitHub's webhook deliveries: its configuration can work.
pub struct Ready {
    served: Served,
    auto_merge: bool,
}

/// Checks that the repository at `dir` can serve (it is on GitHub, a token is set), before
/// anything listens: fail now, not at the first delivery.
pub fn prepare(dir: &Path) -> Result<Ready> {
    let ws = Workspace::open(dir)?;
    crate::forge::github::client::GitHub::connect(&ws.config.forge, true)?;
    Ok(Ready {
        served: Served {
            root: ws.root.clone(),
            repository: ws.config.forge.repository.clone(),
            branch: ws.config.forge.branch.clone(),
        },
        auto_merge: ws.config.forge.merge == "auto",
    })
}

impl Ready {
    /// Serves until interrupted (Ctrl-C or SIGTERM).
    pub fn serve(
        self,
        addr: SocketAddr,
        secret: Vec<u8>,
        timeouts: Timeouts,
        reporter: Arc<dyn Reporter>,
    ) -> Result<()> {
        let gatekeeper = Gatekeeper {
            root: self.served.root.clone(),
            auto_merge: self.auto_merge,
            reporter,
        };
        Ok(receiver::run(
            self.served,
            addr,
            secret,
            timeouts,
            Arc::new(gatekeeper),
        )?)
    }
}

/// The gate, as the receiver's handler.
struct Gatekeeper {
    root: PathBuf,
    auto_merge: bool,
    reporter: Arc<dyn Reporter>,
}

impl Gatekeeper {
    /// The repository lock, waited for at most [`LOCK_WAIT`], saying so if it is held.
    fn lock(&self, ws: &Workspace, n: u64) -> Result<crate::fsutil::Lock> {
        ws.lock_within(LOCK_WAIT, || {
            self.reporter.note(&format!(
                "pull request #{n}: waiting for the repository lock {} (another command holds it)",
                ws.atelier_dir().join("lock").display()
            ))
        })
    }

    fn record(&self, n: u64, delivered: &[Comment]) -> Result<usize> {
        let ws = Workspace::open(&self.root)?;
        let _lock = self.lock(&ws, n)?;
        record_delivered(&ws, n, delivered, crate::clock::now()?.0)
    }

    fn evaluate_now(&self, n: u64, pending: bool, delivered: Vec<Comment>) -> Result<()> {
        let ws = Workspace::open(&self.root)?;
        // `pending` is set by the gate itself, under the repository lock, once the pull request
        // is known to be a proposal (a fork may share a proposal's head commit).
        let publish = if pending {
            Publish::PendingThenVerdict
        } else {
            Publish::Verdict
        };
        let now = crate::clock::now()?.0;
        let run = {
            let _lock = self.lock(&ws, n)?;
            super::gate_locked(&ws, &Addr::Pull(n), now, publish, delivered)?
        };
        self.reporter.note(&format!(
            "pull request #{n}: {:?} — {}",
            run.status, run.description
        ));
        if self.auto_merge && run.eval.decision.allowed {
            let merged = {
                let _lock = self.lock(&ws, n)?;
                super::merge_locked(&ws, &Addr::Pull(n), crate::clock::now()?.0)?
            };
            match merged {
                MergeOutcome::Merged(m) => self
                    .reporter
                    .note(&format!("pull request #{n}: merged as {}", m.commit)),
                MergeOutcome::Refused(_) => self.reporter.note(&format!(
                    "pull request #{n}: not merged, the gate refused at merge time"
                )),
            }
        }
        Ok(())
    }
}

impl Handler for Gatekeeper {
    fn record_delivered(
        &self,
        n: u64,
        delivered: &[Comment],
    ) -> std::result::Result<usize, Failure> {
        Ok(self.record(n, delivered)?)
    }

    fn evaluate(
        &self,
        n: u64,
        pending: bool,
        delivered: Vec<Comment>,
    ) -> std::result::Result<(), Failure> {
        Ok(self.evaluate_now(n, pending, delivered)?)
    }

    fn note(&self, line: &str) {
        self.reporter.note(line)
    }

    fn listening(&self, at: SocketAddr) {
        self.reporter.listening(at)
    }
}

/// Records the tokens of comment bodies the forge delivered for pull request `n` (signed webhook
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
    let tip = super::sync::fetched_base(ws)?;
    let tree = ws.repo.find_commit(tip)?.tree()?;
    let policy = crate::governance::policy::Policy::load(&git::policy_files(&ws.repo, &tree)?)
        .map_err(|e| {
            Error::Input(format!(
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
        let _ = ws.forge.publish_ledger(&ws.site());
    }
    Ok(recorded)
}
