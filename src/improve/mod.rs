//! The self-improvement cycle's proposers, validators and benchmark: what proposes a change to
//! the repository from what the swarm measured, and what judges that change before a person
//! sees it.
//!
//! Pure (they decide and render; callers gather): `metrics` (what the replay benchmark measures
//! and how two configurations are compared), `evidence` (the record a cycle's proposal carries),
//! `tune` (the `[conductor]` changes the runs' statistics justify), `lessons` (the reviewed
//! `prompts/lessons.md` every prompt carries, and the `memory` proposer's recurring errors).
//!
//! Runners (they run programs in worktrees, contained like gauntlet steps): `bench` (the replay
//! benchmark), `builds` (the trusted and the untrusted build of a change to Atelier's own code),
//! `lint` (the `lint` proposer), `planner` (the `agent` proposer's `proposer` role writing a
//! plan), `validator` (the `validator` role's read of the contracts before a run), `scrutiny`
//! (the scrutiny validator of a finished run) and `usertest` (the user-testing validator).
//!
//! The cycle: `cycle` (the sequence from a proposer's change to a proposal awaiting approval,
//! reported through a [`cycle::Host`] the cli implements) and `propose` (a proposer's result
//! turned into a proposal).
//!
//! Below: `swarm` (plans, events, stats; the conductor for `bench`; the conductor's sandbox
//! setup for the runners), `agent`, `git`, `config`, `governance`. The conductor itself asks
//! `validator` (before a run), `scrutiny` (before a run's proposal) and `lessons` (for every
//! prompt); `bench`, `builds`, `lint` and `usertest` sit above it. Above all: `cli`.

pub mod bench;
pub mod builds;
pub mod cycle;
pub mod evidence;
pub mod lessons;
pub mod lint;
pub mod metrics;
pub mod planner;
pub mod propose;
pub mod scrutiny;
pub mod tune;
pub mod usertest;
pub mod validator;
