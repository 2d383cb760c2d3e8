//! The core swarm: plans of tasks (a DAG with exclusive file claims and validation contracts),
//! their scheduling, and running them: `plan` (parsing, the contract validator), `schedule`
//! (waves, critical path, claims), `runtime` (the conductor), `events` (a run's log and its
//! fold, the run's state), `memory` (error digests carried between attempts), `live` (the
//! running workers' silences, `live.json`), `paths` (where a run keeps its files) and `stats`
//! (what the runs measured, across runs).
//! The self-improvement cycle's proposers and validators that use them live in `improve`.

pub mod events;
pub mod executes;
pub mod live;
pub mod memory;
pub mod paths;
pub mod plan;
pub mod runtime;
pub mod schedule;
pub mod stats;

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

/// Parses and validates plan files together (`(file name, text)` pairs), with the files and
/// gauntlet of the base a run of them would start from (`reach`).
pub fn check(
    files: &[(String, String)],
    roles: &BTreeSet<String>,
    reach: &executes::Reach<'_>,
) -> Result<CheckReport, plan::PlanFileError> {
    let plans = files
        .iter()
        .map(|(f, t)| plan::parse(f, t))
        .collect::<Result<Vec<_>, _>>()?;
    let mut refusals = plan::validate(&plans, roles);
    refusals.extend(executes::in_reach(&plans, reach));
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

/// The files at `repo`'s `HEAD` (none on an unborn branch), their text, and `config`'s
/// gauntlet: what [`check`] needs to see which checks a worker could reach.
pub fn reach<'a>(
    repo: &'a git2::Repository,
    config: &crate::config::Config,
) -> Result<executes::Reach<'a>, crate::git::GitError> {
    let mut files = Vec::new();
    let mut links = Vec::new();
    let tree = repo.head().and_then(|h| h.peel_to_tree()).ok();
    if let Some(head) = &tree {
        head.walk(git2::TreeWalkMode::PreOrder, |prefix, e| {
            if e.kind() != Some(git2::ObjectType::Tree) {
                if let Some(name) = e.name() {
                    let path = format!("{prefix}{name}");
                    if e.filemode() == 0o120000 {
                        if let Some(target) = repo
                            .find_blob(e.id())
                            .ok()
                            .and_then(|b| String::from_utf8(b.content().to_vec()).ok())
                            .and_then(|t| link_target(&path, &t))
                        {
                            links.push((path.clone(), target));
                        }
                    }
                    files.push(path);
                }
            }
            git2::TreeWalkResult::Ok
        })?;
    }
    let gauntlet = config
        .gauntlet
        .steps
        .iter()
        .map(|s| (s.name.clone(), s.run.clone()))
        .collect();
    let lookup = move |path: &str| {
        let bytes = crate::git::read_file(repo, tree.as_ref()?, path)
            .ok()
            .flatten()?;
        String::from_utf8(bytes).ok()
    };
    Ok(executes::Reach {
        files,
        links,
        gauntlet,
        lookup: Box::new(lookup),
    })
}

/// Where the link at `path` with `target` points, as a path in the repository (`None` when it
/// points outside it or is absolute).
fn link_target(path: &str, target: &str) -> Option<String> {
    if target.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = path.split('/').collect();
    parts.pop();
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            c => parts.push(c),
        }
    }
    Some(parts.join("/"))
}
