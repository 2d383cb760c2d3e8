//! `atelier clean`: removes what finished runs kept for inspection (their attempts' worktrees
//! and attempt branches) and what proposers killed outright left (their worktrees under
//! `.atelier/proposers/` and branches). A run that has not finished — in progress, or
//! interrupted and waiting for `--resume` — is left alone; a finished one is cleaned under its
//! own lock, so no conductor resumes it meanwhile.
//!
//! Talks to `git` (worktrees, branches), `events` (whether a run finished) and `paths`.

use std::path::Path;

use serde::Serialize;

use crate::git;
use crate::swarm::events::{self, RunEvent};
use crate::workflow::error::Result;
use crate::workflow::Workspace;

/// What `clean` removed.
#[derive(Debug, Serialize)]
pub struct Cleaned {
    pub worktrees: Vec<String>,
    pub branches: Vec<String>,
    pub skipped_runs: Vec<String>,
}

/// The process id in a proposer's worktree name, `<kind>-<pid>-<time>`.
fn proposer_pid(name: &str) -> Option<u32> {
    let mut parts = name.rsplit('-');
    let (Some(_time), Some(pid)) = (parts.next(), parts.next()) else {
        return None;
    };
    pid.parse().ok()
}

/// Removes the worktrees (and their branches) a proposer left when it was killed outright:
/// `.atelier/proposers/<kind>-<pid>-<time>` whose process is gone. The kept plans stay.
fn clean_proposers(ws: &Workspace, out: &mut Cleaned) -> Result<()> {
    let dir = ws.atelier_dir().join("proposers");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.path().is_dir() {
            continue;
        }
        let Some(pid) = proposer_pid(&name) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        git::remove_worktree(&ws.repo, &name, &e.path())?;
        out.worktrees.push(name.clone());
        let branch = format!("atelier/proposers/{name}");
        if let Ok(mut b) = ws.repo.find_branch(&branch, git2::BranchType::Local) {
            b.delete()?;
            out.branches.push(branch);
        }
    }
    Ok(())
}

/// Whether the run in `dir` finished: its log ends with `run-finished`.
fn finished(dir: &Path) -> bool {
    events::read(&dir.join("events.jsonl"))
        .map(|r| {
            r.last()
                .is_some_and(|r| matches!(r.event, RunEvent::RunFinished { .. }))
        })
        .unwrap_or(false)
}

/// Removes a finished run's attempts' worktrees and attempt branches, under the run's lock.
fn clean_run(ws: &Workspace, id: &str, dir: &Path, out: &mut Cleaned) -> Result<()> {
    let _lock = crate::fsutil::Lock::acquire(&dir.join("lock"))?;
    if let Ok(wts) = std::fs::read_dir(dir.join("wt")) {
        for wt in wts.flatten() {
            let name = wt.file_name().to_string_lossy().into_owned();
            git::remove_worktree(&ws.repo, &name, &wt.path())?;
            out.worktrees.push(name);
        }
    }
    let prefix = format!("atelier/attempts/{id}/");
    for b in ws.repo.branches(Some(git2::BranchType::Local))? {
        let (mut b, _) = b?;
        let name = b.name()?.unwrap_or("").to_string();
        if name.starts_with(&prefix) {
            b.delete()?;
            out.branches.push(name);
        }
    }
    Ok(())
}

/// Removes the worktrees and attempt branches that finished runs kept for inspection. Runs that
/// have not finished (in progress, or interrupted and waiting for `--resume`) are left alone.
pub fn clean(ws: &Workspace) -> Result<Cleaned> {
    let mut out = Cleaned {
        worktrees: Vec::new(),
        branches: Vec::new(),
        skipped_runs: Vec::new(),
    };
    clean_proposers(ws, &mut out)?;
    let runs = crate::swarm::paths::runs_dir(&ws.atelier_dir());
    let Ok(entries) = std::fs::read_dir(&runs) else {
        return Ok(out);
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    ids.sort();
    for id in ids {
        let dir = runs.join(&id);
        if finished(&dir) {
            clean_run(ws, &id, &dir, &mut out)?;
        } else {
            out.skipped_runs.push(id);
        }
    }
    Ok(out)
}

/// How many finished runs keep their attempt branches when a new run starts.
pub const KEPT_RUNS: usize = 3;

/// What a new run does first: removes the worktrees and attempt branches of the finished runs
/// older than the latest [`KEPT_RUNS`] of them, so they do not pile up until `atelier clean`.
/// Runs that have not finished are left alone, as by `clean`.
pub fn prune(ws: &Workspace) -> Result<Cleaned> {
    let mut out = Cleaned {
        worktrees: Vec::new(),
        branches: Vec::new(),
        skipped_runs: Vec::new(),
    };
    let runs = crate::swarm::paths::runs_dir(&ws.atelier_dir());
    let finished_runs: Vec<String> = crate::swarm::stats::run_ids(&runs)
        .into_iter()
        .filter(|id| finished(&runs.join(id)))
        .collect();
    let older = finished_runs.len().saturating_sub(KEPT_RUNS);
    for id in &finished_runs[..older] {
        clean_run(ws, id, &runs.join(id), &mut out)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proposer_worktree_names_its_process() {
        assert_eq!(proposer_pid("lint-4242-1700000000"), Some(4242));
        assert_eq!(proposer_pid("usertest-build-77-1700000000"), Some(77));
        assert_eq!(proposer_pid("lint-x-1700000000"), None);
        assert_eq!(proposer_pid("lint"), None);
    }

    #[test]
    fn only_a_log_that_ends_with_run_finished_is_a_finished_run() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        assert!(!finished(dir.path()), "no log");
        let mut sink = events::Sink::open(&dir.path().join("events.jsonl")).expect("a sink");
        sink.emit(RunEvent::RunResumed { abandoned: vec![] }, 0)
            .expect("an event");
        assert!(!finished(dir.path()));
        let done = RunEvent::RunFinished {
            succeeded: 1,
            failed: 0,
            blocked: 0,
            skipped: 0,
        };
        sink.emit(done, 1).expect("an event");
        assert!(finished(dir.path()));
    }
}
