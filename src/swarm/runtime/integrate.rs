//! What becomes of an attempt's result: a passed attempt's tree committed on its attempt branch
//! (a golden path when it passed first time) and merged into the run's branch, once, with a
//! compare-and-swap from the tip the events recorded; a failed attempt's files kept as a commit
//! on its attempt branch, its digest remembered and its task failed once the budget is spent.
//! Also the checks that make a resumed run safe: the run branch is where the events say (or
//! exactly one unrecorded integration ahead), and a recorded commit is one the conductor could
//! have made (`implausible`).
//!
//! Talks to the conductor (`emit`, its state), `git` and `events`.

use git2::Oid;

use super::attempt::{claimed, handed_off, AttemptResult};
use super::{Conductor, Flight};
use crate::git;
use crate::governance::Code;
use crate::swarm::events::RunEvent;
use crate::swarm::plan::Task;
use crate::workflow::error::{Context, Result};
use crate::workflow::Workspace;

/// The committer of every commit the conductor makes; a recorded commit by anyone else is not
/// the conductor's.
const SWARM_NAME: &str = "atelier swarm";

/// The message of the commit that integrates `task` into the run's branch.
fn integration_message(task: &str) -> String {
    format!("Integrate {task}\n\nAtelier-Task: {task}\n")
}

/// Why a recorded passed commit is not one the conductor made for `task` on top of the run, if
/// it is not: made by the swarm's identity, on a commit of the run, changing only claimed paths.
fn implausible(ws: &Workspace, task: &Task, commit: &str, run_tip: Oid) -> Option<String> {
    let repo = &ws.repo;
    let Some(c) = Oid::from_str(commit)
        .ok()
        .and_then(|o| repo.find_commit(o).ok())
    else {
        return Some(format!("{commit} does not exist"));
    };
    if c.committer().name() != Some(SWARM_NAME) || c.parent_count() != 1 {
        return Some(format!("{commit} was not made by the conductor"));
    }
    let Ok(parent) = c.parent(0) else {
        return Some(format!("{commit} has no parent"));
    };
    if parent.id() != run_tip
        && !repo
            .graph_descendant_of(run_tip, parent.id())
            .unwrap_or(false)
    {
        return Some(format!("{commit} does not start from the run's branch"));
    }
    let changed = match (parent.tree(), c.tree()) {
        (Ok(a), Ok(b)) => git::changed_paths(repo, &a, &b).unwrap_or_default(),
        _ => return Some(format!("{commit} cannot be read")),
    };
    if let Some(p) = changed.iter().find(|p| handed_off(p).is_some()) {
        return Some(format!(
            "{commit} writes {p}, which would run outside containment"
        ));
    }
    if let Some(p) = git::links_in(repo, c.tree_id(), &changed)
        .unwrap_or_default()
        .first()
    {
        return Some(format!("{commit} adds the symbolic link {p}"));
    }
    let outside: Vec<String> = changed.into_iter().filter(|p| !claimed(task, p)).collect();
    (!outside.is_empty()).then(|| {
        format!(
            "{commit} changes paths outside the task's claims: {}",
            outside.join(", ")
        )
    })
}

/// The most bytes a worked example adds to a prompt.
const EXAMPLE_BUDGET: usize = 2048;

/// A golden path as a prompt shows it: the task, its checks and its diff, trimmed.
fn golden_example(ws: &Workspace, task: &Task, commit: Oid) -> Result<String> {
    let repo = &ws.repo;
    let c = repo.find_commit(commit)?;
    let patch = String::from_utf8_lossy(&git::diff_text(repo, &c.parent(0)?.tree()?, &c.tree()?)?)
        .into_owned();
    let text = format!(
        "Task {}: {}\nGoal: {}\nChecks that passed: {}\nDiff:\n{patch}",
        task.key,
        task.title,
        task.goal,
        task.contract.checks.join("; ")
    );
    Ok(trimmed(text, EXAMPLE_BUDGET))
}

/// `text` cut to at most `budget` bytes (at a character boundary), saying so when it was.
fn trimmed(mut text: String, budget: usize) -> String {
    if text.len() > budget {
        let mut cut = budget;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str("\n… (trimmed)");
    }
    text
}

impl<'a> Conductor<'a> {
    /// The swarm's identity, at the conductor's clock: every commit the conductor makes.
    fn signature(&self) -> std::result::Result<git2::Signature<'static>, git2::Error> {
        git2::Signature::new(
            SWARM_NAME,
            "swarm@atelier.invalid",
            &git2::Time::new((self.clock)(), 0),
        )
    }

    /// The run branch moves only through the conductor: it must be at the tip the events
    /// recorded (the last integration, or the base). A crash between moving the run branch and
    /// recording it leaves the branch one integration ahead: accept exactly that, nothing else.
    pub(super) fn check_branch(&mut self) -> Result<()> {
        let (repo, branch, run_tip) = (&self.ws.repo, &self.branch, self.tip()?);
        let actual = git::branch_tip(repo, branch)?;
        if actual != run_tip {
            let recorded = self.unrecorded_integration(run_tip, actual);
            if !recorded {
                return Err(crate::workflow::refuse(Code::RunBranchMoved, format!("{branch} is at {actual}, but the run's events end at {run_tip}: something else moved it; inspect the branch"
                )));
            }
            // Taken without an event: the integration it belongs to is recorded next.
            self.state.tip = Some(actual.to_string());
        }
        Ok(())
    }

    /// Whether `actual` is the merge `integrate` would have made from `run_tip` of a passed
    /// attempt awaiting integration, whose commit the conductor could have made (`implausible`):
    /// the swarm's identity and message, parents `[run_tip, commit]`, and their merge tree.
    fn unrecorded_integration(&self, run_tip: Oid, actual: Oid) -> bool {
        let repo = &self.ws.repo;
        let Ok(c) = repo.find_commit(actual) else {
            return false;
        };
        if c.parent_count() != 2
            || c.parent_id(0).ok() != Some(run_tip)
            || c.committer().name() != Some(SWARM_NAME)
        {
            return false;
        }
        let Ok(merged) = c.parent_id(1) else {
            return false;
        };
        self.state
            .awaiting_integration()
            .into_iter()
            .any(|(task, commit)| {
                commit.as_deref().and_then(|p| Oid::from_str(p).ok()) == Some(merged)
                    && implausible(self.ws, &self.tasks[&task], &merged.to_string(), run_tip)
                        .is_none()
                    && c.message() == Some(integration_message(&task).as_str())
                    && matches!(git::merge_tree(repo, run_tip, merged), Ok(Ok(t)) if t == c.tree_id())
            })
    }

    /// A passed attempt whose integration a crash interrupted is integrated now (once).
    pub(super) fn integrate_interrupted(&mut self) -> Result<()> {
        for (task, commit) in self.state.awaiting_integration() {
            // The event log is only as trustworthy as its directory: check that the recorded
            // commit is one the conductor could have made before integrating it.
            let run_tip = self.tip()?;
            if let Some(why) = commit
                .as_deref()
                .and_then(|c| implausible(self.ws, &self.tasks[&task], c, run_tip))
            {
                let attempt = self.state.tasks[&task].attempt;
                self.emit(RunEvent::AttemptFailed {
                    task,
                    attempt,
                    reason: format!("the recorded commit {why}"),
                    digest: Vec::new(),
                    ms: None,
                })?;
                continue;
            }
            self.integrate(&task, commit.as_deref())?;
        }
        Ok(())
    }

    /// An attempt ended: the worker's last events are written first, then what it produced is
    /// kept and integrated, or its failure remembered.
    pub(super) fn on_attempt_finished(
        &mut self,
        joined: std::result::Result<(String, u32, AttemptResult, u64), tokio::task::JoinError>,
    ) -> Result<()> {
        while let Ok(ev) = self.rx.try_recv() {
            self.emit(ev)?;
        }
        let (task, attempt, result, ms) = joined.context("an attempt task panicked")?;
        let flight = self
            .flights
            .remove(&task)
            .expect("every attempt in flight has a worktree");
        match result {
            AttemptResult::Passed { tree } => self.on_passed(&task, attempt, flight, tree, ms),
            AttemptResult::Failed { reason, digest } => {
                // An attempt the run's budget ended failed because of it, whatever it printed.
                let reason = match self
                    .run_spent
                    .as_ref()
                    .or(self.ended.remove(&task).as_ref())
                {
                    Some(r) => format!("ended: {r}"),
                    None => reason,
                };
                self.keep_failed(&task, attempt, &flight, &reason);
                self.on_failed(&task, attempt, reason, digest, ms)
            }
        }
    }

    /// A passed attempt: its commit, a golden path when it passed at the first attempt, its
    /// worktree removed, its claims released, then its integration.
    fn on_passed(
        &mut self,
        task: &str,
        attempt: u32,
        flight: Flight,
        tree: Oid,
        ms: u64,
    ) -> Result<()> {
        let commit = self.commit_attempt(task, attempt, flight.at, tree)?;
        self.emit(RunEvent::AttemptPassed {
            task: task.to_string(),
            attempt,
            commit: commit.map(|c| c.to_string()).unwrap_or_default(),
            ms: Some(ms),
        })?;
        if let (1, Some(c)) = (attempt, commit) {
            let t = &self.tasks[task];
            let (role, example) = (t.role.clone(), golden_example(self.ws, t, c)?);
            self.emit(RunEvent::GoldenPath {
                task: task.to_string(),
                role,
                example,
            })?;
        }
        git::remove_worktree(&self.ws.repo, &flight.name, &flight.path)?;
        self.emit(RunEvent::ClaimsReleased {
            task: task.to_string(),
            attempt,
        })?;
        self.integrate(task, commit.map(|c| c.to_string()).as_deref())
    }

    /// Commits the tree an attempt passed with, on the attempt's branch, with the commit it
    /// started from as parent; `None` when the attempt changed nothing.
    fn commit_attempt(&self, task: &str, attempt: u32, at: Oid, tree: Oid) -> Result<Option<Oid>> {
        let (repo, run_id, t) = (&self.ws.repo, &self.run, &self.tasks[task]);
        let message =
            format!(
            "{}: {}\n\nAtelier-Run: {run_id}\nAtelier-Task: {task}\nAtelier-Attempt: {attempt}\n{}",
            task,
            t.title,
            t.contract.checks.iter().map(|c| format!("Atelier-Check: {c}\n")).collect::<String>()
        );
        let base = repo.find_commit(at)?;
        if base.tree_id() == tree {
            return Ok(None);
        }
        let sig = self.signature()?;
        let c = repo.commit(None, &sig, &sig, &message, &repo.find_tree(tree)?, &[&base])?;
        repo.reference(
            &format!("refs/heads/{}", self.attempt_branch(task, attempt)),
            c,
            true,
            "atelier: attempt passed",
        )?;
        Ok(Some(c))
    }

    /// A failed attempt: its digest joins the task's do-not-retry list (through the fold), its
    /// claims are released, and the task fails once the failure budget is spent. What the
    /// attempt left is a commit on its attempt branch (`keep_failed`) until `atelier clean`.
    fn on_failed(
        &mut self,
        task: &str,
        attempt: u32,
        reason: String,
        digest: Vec<String>,
        ms: u64,
    ) -> Result<()> {
        self.emit(RunEvent::AttemptFailed {
            task: task.to_string(),
            attempt,
            reason: reason.clone(),
            digest,
            ms: Some(ms),
        })?;
        self.emit(RunEvent::ClaimsReleased {
            task: task.to_string(),
            attempt,
        })?;
        let from = self.state.tasks.get(task).map_or(0, |v| v.budget_from);
        if self.limits.budget_spent(attempt, from) {
            let why = format!("failed {attempt} attempt(s); last: {reason}");
            self.emit(RunEvent::TaskFailed {
                task: task.to_string(),
                reason: why,
            })?;
        }
        Ok(())
    }

    /// A failed attempt's files are kept as a commit on its attempt branch, never as a directory:
    /// a worker can make any directory of its worktree a git repository of its own (a `.git`,
    /// an implicit bare repository) whose configuration runs a command, and a person looking
    /// with `git status` there would run it, uncontained. `git show <attempt branch>` is safe.
    /// Best effort: files git cannot take (a nested repository) are not kept, nor files another
    /// program would run on checkout (`handed_off`), nor links.
    fn keep_failed(&self, task: &str, attempt: u32, flight: &Flight, reason: &str) {
        let repo = &self.ws.repo;
        if let Ok((tree, changed)) = git::snapshot(repo.commondir(), &flight.path, flight.at) {
            // Nor does the kept commit carry a file another program would run on checkout, nor
            // a link (whose target a checkout shows under its name).
            let links = git::links_in(repo, tree, &changed).unwrap_or_default();
            let handed: Vec<&str> = changed
                .iter()
                .map(String::as_str)
                .filter(|p| handed_off(p).is_some() || links.iter().any(|l| l == p))
                .collect();
            let Ok(tree) = repo
                .find_commit(flight.at)
                .and_then(|c| c.tree())
                .map_err(git::GitError::from)
                .and_then(|base| git::with_paths_of(repo, tree, &base, &handed))
            else {
                let _ = git::remove_worktree(repo, &flight.name, &flight.path);
                return;
            };
            let message = format!(
                "Failed attempt {attempt} of {task}: {}\n\nAtelier-Run: {}\nAtelier-Task: {task}\nAtelier-Attempt: {attempt}\n",
                reason.lines().next().unwrap_or_default(),
                self.run
            );
            let kept = (|| -> std::result::Result<(), git2::Error> {
                let base = repo.find_commit(flight.at)?;
                let sig = self.signature()?;
                let c =
                    repo.commit(None, &sig, &sig, &message, &repo.find_tree(tree)?, &[&base])?;
                repo.reference(
                    &format!("refs/heads/{}", self.attempt_branch(task, attempt)),
                    c,
                    true,
                    "atelier: attempt failed",
                )?;
                Ok(())
            })();
            let _ = kept;
        }
        let _ = git::remove_worktree(repo, &flight.name, &flight.path);
    }

    /// Merges a passed attempt into the run's branch (once), or fails the task on a conflict.
    fn integrate(&mut self, task: &str, commit: Option<&str>) -> Result<()> {
        let (ws, branch, expected) = (self.ws, self.branch.clone(), self.tip()?);
        let repo = &ws.repo;
        let tip = git::branch_tip(repo, &branch)?;
        if tip != expected {
            return Err(crate::workflow::refuse(Code::RunBranchMoved, format!("{branch} is at {tip}, but the conductor last moved it to {expected}: something else (a worker?) moved it; the run stops here — inspect the branch before resuming"
            )));
        }
        let commit = commit.map(Oid::from_str).transpose()?;
        // Nothing to merge (the task changed nothing), or already integrated before a crash:
        // record it, never merge twice.
        let already = match commit {
            None => true,
            Some(c) => tip == c || repo.graph_descendant_of(tip, c)?,
        };
        let Some(commit) = commit.filter(|_| !already) else {
            return self.emit(RunEvent::Integrated {
                task: task.to_string(),
                commit: tip.to_string(),
            });
        };
        match git::merge_tree(repo, tip, commit)? {
            Err(conflict) => {
                let why = format!("integration into {branch} conflicts: {conflict}");
                self.emit(RunEvent::TaskFailed {
                    task: task.to_string(),
                    reason: why,
                })
            }
            Ok(tree) => {
                let sig = self.signature()?;
                let merged = repo.commit(
                    None,
                    &sig,
                    &sig,
                    &integration_message(task),
                    &repo.find_tree(tree)?,
                    &[&repo.find_commit(tip)?, &repo.find_commit(commit)?],
                )?;
                if !git::compare_and_swap(
                    repo,
                    &format!("refs/heads/{branch}"),
                    tip,
                    merged,
                    "atelier: integrate",
                )? {
                    return Err(crate::workflow::refuse(
                        Code::RunBranchMoved,
                        format!("{branch} moved during integration; inspect it before resuming"),
                    ));
                }
                self.emit(RunEvent::Integrated {
                    task: task.to_string(),
                    commit: merged.to_string(),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_integration_commit_names_its_task() {
        assert_eq!(
            integration_message("p:A"),
            "Integrate p:A\n\nAtelier-Task: p:A\n"
        );
    }

    #[test]
    fn a_worked_example_is_cut_to_its_budget_at_a_character_boundary() {
        assert_eq!(trimmed("short".into(), 10), "short");
        assert_eq!(trimmed("0123456789".into(), 10), "0123456789");
        assert_eq!(
            trimmed("0123456789ab".into(), 10),
            "0123456789\n… (trimmed)"
        );
        // `é` is two bytes: a cut in its middle moves back before it.
        assert_eq!(trimmed("abcé".into(), 4), "abc\n… (trimmed)");
    }
}
