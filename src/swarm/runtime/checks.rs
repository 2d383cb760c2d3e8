//! The gauntlet's steps and a task's contract checks, run on a clean checkout of the tree the
//! worker left, never in its worktree: what a worktree holds besides its tree (ignored files, a
//! `.pyc` or a `node_modules/.bin` of other code, a build in `target/` of a test the worker then
//! restored and back-dated so the build tool takes it for fresh) is not the checks' to read.
//! The checkout is an export of the tree, fresh files with fresh times, next to the worktree
//! and out of the worker's reach, made a repository of its own whose `HEAD` and index are that
//! tree (its objects borrowed from the repository's), so that `git diff --exit-code` or `git
//! ls-files` in a check see the worker's tree, never the operator's clone above it. Cargo builds
//! there in a cache of the attempt's own (or `[swarm] shared_target_dir`, which workers write
//! too: the operator's trade of trust for speed). All of it is removed when the attempt ends.

use std::path::{Path, PathBuf};
use std::time::Duration;

use git2::Oid;
use tokio::sync::mpsc;

use super::limits::{millis, Limits};
use crate::agent::process;
use crate::swarm::events::RunEvent;
use crate::swarm::memory;
use crate::swarm::plan::Task;

/// What the checks of one attempt are given.
pub(super) struct Job<'a> {
    pub(super) task: &'a Task,
    pub(super) attempt: u32,
    /// The repository's common directory, and the commit the attempt started from.
    pub(super) common: &'a Path,
    pub(super) at: Oid,
    /// The attempt's worktree (the checkout is made beside it).
    pub(super) worktree: &'a Path,
    /// What every program of the attempt is told.
    pub(super) env: Vec<(String, String)>,
}

/// Why a step or check did not pass: the reason, and the digest the next attempt is given.
#[derive(Debug)]
pub(super) struct Failed {
    pub(super) reason: String,
    pub(super) digest: Vec<String>,
}

/// How long one contract check may run.
const CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// The checks' checkout of an attempt's tree; removed on drop.
pub(super) struct Checkout {
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

impl Checkout {
    /// Exports `tree` into a new directory beside the attempt's worktree.
    pub(super) fn new(job: &Job, tree: Oid) -> Result<Checkout, String> {
        let parent = job
            .worktree
            .parent()
            .ok_or_else(|| format!("{} has no parent", job.worktree.display()))?;
        let name = job
            .worktree
            .file_name()
            .map(|n| format!("{}.checks-", n.to_string_lossy()))
            .unwrap_or_else(|| "checks-".into());
        let dir = tempfile::Builder::new()
            .prefix(&name)
            .tempdir_in(parent)
            .map_err(|e| format!("creating a directory in {}: {e}", parent.display()))?;
        let path = dir.path().join("tree");
        crate::agent::reviewer::export_tree_id(job.common, tree, &path)?;
        repository_of(job, tree, &path)
            .map_err(|e| format!("making the checkout {} a repository: {e}", path.display()))?;
        Ok(Checkout {
            dir: Some(dir),
            path,
        })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The attempt's own build cache, beside the checkout (removed with it).
    fn cache(&self) -> PathBuf {
        self.path.with_file_name("target")
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take() {
            crate::agent::reviewer::discard(dir);
        }
    }
}

/// Runs the gauntlet's steps, then the task's contract checks, in the checkout `root`, each
/// contained by the gauntlet's grants; the first that does not pass fails the attempt.
/// Makes the checkout at `path` a repository whose `HEAD` is a commit of `tree` (its parent the
/// attempt's start) and whose index is that tree; its objects are the repository's, through
/// `objects/info/alternates`.
fn repository_of(job: &Job, tree: Oid, path: &Path) -> Result<(), git2::Error> {
    let main = git2::Repository::open(job.common)?;
    let sig = git2::Signature::new("atelier", "atelier@localhost", &git2::Time::new(0, 0))?;
    let parent = main.find_commit(job.at)?;
    let commit = main.commit(
        None,
        &sig,
        &sig,
        "the tree the checks judge",
        &main.find_tree(tree)?,
        &[&parent],
    )?;
    git2::Repository::init(path)?;
    let objects = main.commondir().join("objects");
    std::fs::write(
        path.join(".git/objects/info/alternates"),
        format!("{}\n", objects.display()),
    )
    .map_err(|e| git2::Error::from_str(&e.to_string()))?;
    let repo = git2::Repository::open(path)?;
    repo.set_head_detached(commit)?;
    let mut index = repo.index()?;
    index.read_tree(&repo.find_tree(tree)?)?;
    index.write()?;
    Ok(())
}

pub(super) async fn gauntlet(
    job: &Job<'_>,
    checkout: &Checkout,
    limits: &Limits,
    tx: &mpsc::UnboundedSender<RunEvent>,
) -> Option<Failed> {
    let root = checkout.path();
    let mut env = job.env.clone();
    // The checks read no Python bytecode: a `.pyc` a worker left in an ignored `__pycache__/`,
    // compiled from other code with the source's size and time, would run in place of the
    // source. Python looks for bytecode under this prefix only, and nothing can exist there.
    // (The worker itself keeps reading its tools' bytecode: an agent CLI starts at its speed.)
    env.push((
        "PYTHONPYCACHEPREFIX".into(),
        "/dev/null/atelier-reads-no-bytecode".into(),
    ));
    // Cargo builds where only this attempt's checks write: the shared cache if the operator
    // chose one, else the checkout's own (the worktree's `target/` is the worker's, and a build
    // there, or one an earlier attempt's code left, may be of other code).
    let cache = limits
        .target_dir
        .clone()
        .unwrap_or_else(|| checkout.cache());
    if let Err(e) = std::fs::create_dir_all(&cache) {
        return Some(Failed {
            reason: format!("creating the checks' build cache {}: {e}", cache.display()),
            digest: Vec::new(),
        });
    }
    env.push(("CARGO_TARGET_DIR".into(), cache.display().to_string()));
    let checks = job
        .task
        .contract
        .checks
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("check {}", i + 1), c.clone(), CHECK_TIMEOUT));
    for (name, run, timeout) in limits.steps.iter().cloned().chain(checks) {
        let step = process::Spawn {
            lines: None,
            program: "sh".into(),
            args: vec!["-c".into(), run.clone()],
            cwd: root.to_path_buf(),
            env: process::scrubbed_env(&[], &env),
            stdin: Vec::new(),
            timeout,
            silence: None,
            max_output: limits.max_output,
            sandbox: limits
                .step_sandbox(root, job.common)
                .map(|s| s.write(&cache)),
        };
        let o = match process::run(&step, |_| {}).await {
            Ok(o) => o,
            Err(e) => {
                return Some(Failed {
                    reason: format!("step {name} could not start: {e}"),
                    digest: Vec::new(),
                })
            }
        };
        let _ = tx.send(RunEvent::StepFinished {
            task: job.task.key.clone(),
            attempt: job.attempt,
            step: name.clone(),
            passed: o.success(),
            secs: o.elapsed.as_secs(),
            ms: Some(millis(o.elapsed)),
        });
        if !o.success() {
            return Some(step_failure(&name, &run, timeout, &o));
        }
    }
    None
}

/// The failure of a gauntlet step or check that did not pass: how it ended, then its output's
/// digest.
fn step_failure(name: &str, run: &str, timeout: Duration, o: &process::Outcome) -> Failed {
    let why = if o.timed_out {
        format!("timed out after {}s", timeout.as_secs())
    } else {
        format!(
            "exited with {}",
            o.code.map_or("a signal".into(), |c| c.to_string())
        )
    };
    let mut digest = memory::digest(name, &o.output);
    digest.insert(0, format!("[{name}] `{run}` {why}"));
    digest.truncate(memory::MAX_BLOCKS);
    Failed {
        reason: format!("step {name} (`{run}`) {why}"),
        digest,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_step_says_how_it_ended_first() {
        let o = process::Outcome {
            code: Some(101),
            output: "error[E0308]: mismatched types\n --> src/a.rs:1:1\n".into(),
            ..Default::default()
        };
        let Failed { reason, digest } =
            step_failure("build", "cargo build", Duration::from_secs(300), &o);
        assert_eq!(reason, "step build (`cargo build`) exited with 101");
        assert_eq!(digest[0], "[build] `cargo build` exited with 101");
        assert!(digest.len() <= memory::MAX_BLOCKS);
        let late = process::Outcome {
            timed_out: true,
            ..Default::default()
        };
        let Failed { reason, .. } =
            step_failure("check 1", "sleep 9", Duration::from_secs(2), &late);
        assert_eq!(reason, "step check 1 (`sleep 9`) timed out after 2s");
    }
}
