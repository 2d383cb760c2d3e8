//! The core swarm: plans of tasks (a DAG with exclusive file claims and validation contracts),
//! their scheduling, and running them: `plan` (parsing, the contract validator), `schedule`
//! (waves, critical path, claims), `runtime` (the conductor), `events` (a run's log and its
//! fold, the run's state), `memory` (error digests carried between attempts), `lessons` (the reviewed
//! `prompts/lessons.md` every prompt carries, and the `memory` proposer's recurring errors) and `stats` (what
//! the runs measured, across runs) `tune` (the proposer of `[conductor]` changes those
//! measurements justify) `lint` (the `lint` proposer's fix command and gauntlet, in a
//! worktree) `planner` (the `agent` proposer's `proposer` role writing a plan)
//! `validator` (the `validator` role's adversarial read of the contracts before a run) and
//! `scrutiny` (the scrutiny validator of a finished run, before it becomes a proposal).

pub mod bench;
pub mod builds;
pub mod events;
pub mod evidence;
pub mod lessons;
pub mod lint;
pub mod live;
pub mod memory;
pub mod plan;
pub mod planner;
pub mod runtime;
pub mod schedule;
pub mod scrutiny;
pub mod stats;
pub mod tune;
pub mod usertest;
pub mod validator;

use std::collections::BTreeSet;

use serde::Serialize;

/// What `atelier plan check` found.
#[derive(Debug, Serialize)]
pub struct CheckReport {
    pub plans: Vec<String>,
    pub tasks: usize,
    pub refusals: Vec<plan::Refusal>,
    /// Kahn waves across all plans (empty when refused).
    pub waves: Vec<Vec<String>>,
    pub max_width: usize,
    pub critical_path: Vec<String>,
    /// Groups of tasks in one wave whose claims overlap, so they run one after another.
    pub serialised: Vec<Vec<String>>,
}

/// Parses and validates plan files together (`(file name, text)` pairs).
pub fn check(
    files: &[(String, String)],
    roles: &BTreeSet<String>,
) -> Result<CheckReport, plan::PlanFileError> {
    let plans = files
        .iter()
        .map(|(f, t)| plan::parse(f, t))
        .collect::<Result<Vec<_>, _>>()?;
    let refusals = plan::validate(&plans, roles);
    let (waves, critical_path, serialised) = if refusals.is_empty() {
        let w = schedule::waves(&plans);
        let cp = schedule::critical_path(&plans, &w);
        let s = schedule::serialised(&plans, &w);
        (w, cp, s)
    } else {
        (Vec::new(), Vec::new(), Vec::new())
    };
    Ok(CheckReport {
        plans: plans.iter().map(|p| p.id.clone()).collect(),
        tasks: plans.iter().map(|p| p.tasks.len()).sum(),
        max_width: waves.iter().map(Vec::len).max().unwrap_or(0),
        refusals,
        waves,
        critical_path,
        serialised,
    })
}
