//! A command's view of the ledger: read and parsed once, then asked questions (who opened a
//! proposal, which heads `submit` published, which tokens are recorded, whether a merge request
//! stands unconcluded). A line that does not parse is skipped here; `audit verify` reports it.

use std::collections::BTreeMap;

use git2::Repository;

use super::ledger::{self, Entry, Event, LedgerError, Snapshot};
use crate::governance::token::{Payload, RawToken};

/// The ledger as it was when the view was read.
pub struct LedgerView {
    pub snapshot: Option<Snapshot>,
    pub events: Vec<Event>,
}

/// What the ledger recorded when a proposal was opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub pull: u64,
    pub branch: String,
    pub proposer: Option<String>,
}

/// What the gate asked a forge to merge (`merge-requested`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    pub proposal: String,
    pub pull: u64,
    pub base: String,
    pub head: String,
    pub tree: String,
}

impl Intent {
    pub fn event(&self) -> Event {
        Event::MergeRequested {
            proposal: self.proposal.clone(),
            pull: self.pull,
            base: self.base.clone(),
            head: self.head.clone(),
            tree: self.tree.clone(),
        }
    }
}

impl LedgerView {
    pub fn read(repo: &Repository) -> Result<LedgerView, LedgerError> {
        let snapshot = ledger::read(repo)?;
        let events = snapshot
            .iter()
            .flat_map(|s| s.lines.iter())
            .filter_map(|l| Entry::parse(l).ok())
            .map(|e| e.event)
            .collect();
        Ok(LedgerView { snapshot, events })
    }

    /// The `proposal-opened` entry of `proposal`.
    pub fn opened(&self, proposal: &str) -> Option<Opened> {
        self.events.iter().find_map(|e| match e {
            Event::ProposalOpened {
                proposal: p,
                pull,
                branch,
                proposer,
                ..
            } if p == proposal => Some(Opened {
                pull: *pull,
                branch: branch.clone(),
                proposer: proposer.clone(),
            }),
            _ => None,
        })
    }

    /// Who wrote the proposal's change, when an agent did (its `proposal-opened` entry).
    pub fn origin(&self, proposal: &str) -> Option<String> {
        self.events.iter().find_map(|e| match e {
            Event::ProposalOpened {
                proposal: p,
                origin,
                ..
            } if p == proposal => Some(origin.clone()),
            _ => None,
        })?
    }

    /// What the built-in reviewers weigh about who wrote the proposal and what it declared (its
    /// `proposal-opened` entry).
    pub fn provenance(&self, proposal: &str) -> crate::panel::Provenance {
        self.events
            .iter()
            .find_map(|e| match e {
                Event::ProposalOpened {
                    proposal: p,
                    origin,
                    declared,
                    ..
                } if p == proposal => Some(crate::panel::Provenance {
                    origin: origin.clone(),
                    declared: declared.clone(),
                }),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The review panel's verdict last recorded for the proposal.
    pub fn recorded_review(
        &self,
        proposal: &str,
    ) -> Option<crate::governance::review::RecordedReview> {
        self.events.iter().rev().find_map(|e| match e {
            Event::ReviewRecorded {
                proposal: p,
                review,
                ..
            } if p == proposal => Some(review.clone()),
            _ => None,
        })
    }

    /// The review panel's verdict last recorded for the proposal, with its summary.
    pub fn recorded_summary(
        &self,
        proposal: &str,
    ) -> Option<(&crate::governance::review::RecordedReview, &str)> {
        self.events.iter().rev().find_map(|e| match e {
            Event::ReviewRecorded {
                proposal: p,
                review,
                summary,
                ..
            } if p == proposal => Some((review, summary.as_str())),
            _ => None,
        })
    }

    /// The metric `atelier cycle` registered for the proposal (the first registration counts:
    /// a later one cannot replace what was named before the benchmark ran).
    pub fn registered(&self, proposal: &str) -> Option<&Event> {
        self.events
            .iter()
            .find(|e| matches!(e, Event::MetricRegistered { proposal: p, .. } if p == proposal))
    }

    /// The evidence `atelier cycle` last recorded for the proposal.
    pub fn evidence(&self, proposal: &str) -> Option<&Event> {
        self.events
            .iter()
            .rev()
            .find(|e| matches!(e, Event::EvidenceRecorded { proposal: p, .. } if p == proposal))
    }

    /// Every merged proposal with its merge, in ledger order.
    pub fn merges(&self) -> impl Iterator<Item = &crate::audit::ledger::MergeRecord> {
        self.events.iter().filter_map(|e| match e {
            Event::Merged(m) => Some(m),
            _ => None,
        })
    }

    /// The commits the gate vouches for on the protected branch: where it was adopted, and
    /// each merge it recorded.
    pub fn ledgered(&self, sha: &str) -> bool {
        self.events.iter().any(|e| match e {
            Event::Merged(m) => m.commit == sha,
            Event::Adopted { commit, .. } => commit == sha,
            _ => false,
        })
    }

    /// The next pull request number no `proposal-opened` entry has used.
    pub fn next_opened_number(&self) -> u64 {
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::ProposalOpened { pull, .. } => Some(*pull),
                _ => None,
            })
            .max()
            .map_or(0, |n| n + 1)
    }

    /// The heads `submit` recorded for each (proposal, pull request), in order.
    pub fn submitted_heads(&self) -> impl Iterator<Item = (&str, u64, &str)> {
        self.events.iter().filter_map(|e| match e {
            Event::Submitted {
                proposal,
                pull,
                head,
                ..
            } => Some((proposal.as_str(), *pull, head.as_str())),
            _ => None,
        })
    }

    /// The head `submit` last recorded for `proposal` on pull request `n`.
    pub fn latest_submitted(&self, proposal: &str, n: u64) -> Option<&str> {
        self.submitted_heads()
            .filter(|(p, pull, _)| *p == proposal && *pull == n)
            .last()
            .map(|(_, _, h)| h)
    }

    /// Whether `sha` is the head `submit` last recorded for some proposal's pull request.
    pub fn is_current_submitted_head(&self, sha: &str) -> bool {
        let mut latest: BTreeMap<(&str, u64), &str> = BTreeMap::new();
        for (proposal, pull, head) in self.submitted_heads() {
            latest.insert((proposal, pull), head);
        }
        latest.values().any(|h| *h == sha)
    }

    /// The pull request numbers `submit` recorded for a proposal, in order.
    pub fn submitted_pulls(&self, proposal: &str) -> Vec<u64> {
        self.submitted_heads()
            .filter(|(p, _, _)| *p == proposal)
            .map(|(_, pull, _)| pull)
            .collect()
    }

    /// The proposals `submit` recorded on pull request `n`, without repeats.
    pub fn proposals_on(&self, n: u64) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (p, pull, _) in self.submitted_heads() {
            if pull == n && out.last().map(String::as_str) != Some(p) {
                out.push(p.to_string());
            }
        }
        out
    }

    /// Who proposed `proposal`: what `propose` recorded when it opened it (as audit reads it),
    /// never a later entry a forge record could have shaped.
    pub fn recorded_proposer(&self, proposal: &str) -> Option<String> {
        self.opened(proposal).and_then(|o| o.proposer)
    }

    /// Every token the ledger recorded for `proposal`, on any of its pull requests.
    pub fn recorded_tokens(&self, proposal: &str) -> Vec<RawToken> {
        let mut out = Vec::new();
        for e in &self.events {
            if let Event::TokenRecorded {
                proposal: p, token, ..
            } = e
            {
                if p == proposal {
                    for t in RawToken::extract_all(token) {
                        if !out.contains(&t) {
                            out.push(t);
                        }
                    }
                }
            }
        }
        out
    }

    /// Whether the ledger records the proposal as merged or closed.
    pub fn finished(&self, proposal: &str) -> bool {
        self.events.iter().any(|e| match e {
            Event::Merged(m) => m.proposal == proposal,
            Event::Closed { proposal: p, .. } => p == proposal,
            _ => false,
        })
    }

    /// Whether the ledger records the proposal as closed.
    pub fn closed(&self, proposal: &str) -> bool {
        self.events
            .iter()
            .any(|e| matches!(e, Event::Closed { proposal: p, .. } if p == proposal))
    }

    /// Whether the ledger records pull request `n` of `proposal` as merged.
    pub fn merged(&self, proposal: &str, n: u64) -> bool {
        self.events
            .iter()
            .any(|e| matches!(e, Event::Merged(m) if m.proposal == proposal && m.pull == n))
    }

    /// The merge commit the ledger records for `proposal`, if it was merged.
    pub fn merge_commit(&self, proposal: &str) -> Option<&str> {
        self.events.iter().find_map(|e| match e {
            Event::Merged(m) if m.proposal == proposal => Some(m.commit.as_str()),
            _ => None,
        })
    }

    /// The last `gate-decision` recorded for `proposal`.
    pub fn last_decision(&self, proposal: &str) -> Option<&Event> {
        self.events
            .iter()
            .rev()
            .find(|e| matches!(e, Event::GateDecision { proposal: p, .. } if p == proposal))
    }

    /// The last merge request recorded for pull request `n`, if it is the proposal's last event
    /// (approvals aside): anything recorded after it (a refusal, a new head, an alarm, a
    /// rejection) means it is not what a merge now concludes. Approvals recorded after it (a
    /// late one, a pasted one) change nothing: the decision was made when the request was.
    pub fn unconcluded_request(&self, proposal: &str, n: u64) -> Option<Intent> {
        let mut open = None;
        for event in &self.events {
            // A verdict of the review panel recorded after the request changes nothing either.
            if event.proposal() != Some(proposal)
                || event.is_approvals_only()
                || matches!(
                    event,
                    Event::ReviewRecorded { .. }
                        | Event::MetricRegistered { .. }
                        | Event::EvidenceRecorded { .. }
                )
            {
                continue;
            }
            open = match event {
                Event::MergeRequested {
                    proposal: p,
                    pull,
                    base,
                    head,
                    tree,
                } if *pull == n => Some(Intent {
                    proposal: p.clone(),
                    pull: *pull,
                    base: base.clone(),
                    head: head.clone(),
                    tree: tree.clone(),
                }),
                _ => None,
            };
        }
        open
    }

    /// The ledger's Merkle root at each size a token names.
    pub fn roots_for(&self, tokens: &[RawToken]) -> BTreeMap<u64, String> {
        let mut out = BTreeMap::new();
        let Some(snap) = &self.snapshot else {
            return out;
        };
        let sizes: Vec<u64> = tokens
            .iter()
            .filter_map(|t| Payload::parse(&t.payload).ok())
            .filter_map(|p| p.checkpoint.map(|c| c.size))
            .collect();
        if sizes.is_empty() {
            return out;
        }
        let leaves = snap.leaf_hashes();
        for s in sizes {
            if let Some(prefix) = leaves.get(..s as usize) {
                out.insert(s, hex::encode(super::merkle::root(prefix)));
            }
        }
        out
    }
}
