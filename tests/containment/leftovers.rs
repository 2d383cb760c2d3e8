//! What a failed or interrupted attempt leaves behind is defanged: inspecting it runs none of the
//! worker's code.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::skip::require_landlock;
use crate::support::swarm::{one, repo, Swarm};

/// A command a worker could plant for someone else to run (a git hook, an fsmonitor command):
/// it copies the gate key to the returned path. The path must stay absent.
pub(crate) fn stealing_hook(s: &Swarm) -> (std::path::PathBuf, String) {
    let stolen = s.env.tmp.path().join("stolen");
    let hook = format!(
        "cp {} {}; false",
        s.env.gate_key().display(),
        stolen.display()
    );
    (stolen, hook)
}

/// A failed attempt's worktree was kept "for inspection". The worker controls its `.git`:
/// it replaces the pointer with a repository of its own whose `core.fsmonitor` runs a command,
/// and the operator's first `git status` there (or a shell prompt showing the branch) runs it,
/// uncontained.
#[test]
fn inspecting_a_failed_attempt_does_not_run_the_workers_code() {
    require_landlock!();
    let s = Swarm::new("failure_budget = 1");
    let (stolen, hook) = stealing_hook(&s);
    let p = one(
        &s,
        &format!(
            "rm -f .git && git init -q && git config core.fsmonitor '{hook}' && echo x > src/t.rs && exit 1"
        ),
    );
    let _ = s.run(&["run", &p]);
    // Nothing is kept as a directory a person might run git in: the attempt's files are a
    // commit on its attempt branch, which `git show` reads without running anything.
    let kept: Vec<PathBuf> = std::fs::read_dir(repo(&s).join(".atelier/runs/r1/wt"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(kept.is_empty(), "a worktree was kept: {kept:?}");
    assert_eq!(
        s.env.git(&["show", "atelier/attempts/r1/p-T/1:src/t.rs"]),
        "x\n"
    );
    let _ = s
        .env
        .command("git")
        .arg("status")
        .current_dir(repo(&s))
        .output();
    assert!(!stolen.exists(), "the operator's git ran the worker's hook");
}

/// The worktrees a run kept (failed or abandoned attempts).
fn kept(s: &Swarm, run: &str) -> Vec<PathBuf> {
    std::fs::read_dir(repo(s).join(".atelier/runs").join(run).join("wt"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// `defang_worktree` removes every entry *named* `.git`, but git also discovers
/// a repository in any directory that looks like one (`HEAD`, `objects/`, `refs/`: an implicit
/// bare repository; `safe.bareRepository` defaults to `all`). A worker turns `src/` of its
/// failed worktree into one, with `core.bare = false`, `core.worktree = ..` and an fsmonitor
/// command: the operator's `git status` (or `git diff`, or a git-aware prompt) in `src/` runs
/// the worker's command uncontained, with the operator's rights: here it copies the gate key.
#[test]
fn inspecting_a_subdirectory_of_a_failed_attempt_does_not_run_the_workers_code() {
    require_landlock!();
    let s = Swarm::new("failure_budget = 1");
    let (stolen, hook) = stealing_hook(&s);
    let p = one(
        &s,
        &format!(
            "git init -q --bare src && git config -f src/config core.bare false && \
             git config -f src/config core.worktree .. && \
             git config -f src/config core.fsmonitor '{hook}' && echo x > src/t.rs && exit 1"
        ),
    );
    let _ = s.run(&["run", &p]);
    let kept = kept(&s, "r1");
    assert!(kept.is_empty(), "a worktree was kept: {kept:?}");
    // What the operator does to look at what the worker did: the attempt branch.
    let _ = s.env.git(&["show", "--stat", "atelier/attempts/r1/p-T/1"]);
    assert!(
        !stolen.exists(),
        "the operator's git ran the worker's fsmonitor command"
    );
}

/// `defang_worktree` walks with full paths and gives up at the first
/// error: a worker that leaves a tree deeper than PATH_MAX (twenty 250-byte directory names)
/// makes it fail with ENAMETOOLONG before it reaches the `.git` the worker wrote. The whole run
/// then ends in an error (every other task with it), and the worktree keeps the worker's `.git`.
#[test]
fn a_deep_tree_does_not_stop_a_failed_attempt_being_defanged() {
    require_landlock!();
    let s = Swarm::new("failure_budget = 1");
    let (stolen, hook) = stealing_hook(&s);
    let n = "d".repeat(250);
    let p = one(
        &s,
        &format!(
            "rm -f .git && git init -q && git config core.fsmonitor '{hook}' && echo x > src/t.rs && \
             (cd src && for i in $(seq 1 20); do mkdir {n} && cd {n} || exit 1; done); exit 1"
        ),
    );
    let run = s.run(&["run", &p]);
    let kept = kept(&s, "r1");
    assert!(kept.is_empty(), "a worktree was kept: {kept:?}");
    // Whichever order the directory lists in, one of these fails.
    assert_ne!(run.code, 2, "the run died: {}", run.stderr);
    assert!(
        !stolen.exists(),
        "the operator's git ran the worker's hook\n{}",
        run.stderr
    );
}

/// Only a *failed* attempt's worktree is defanged. Interrupt the conductor
/// (Ctrl-C, SIGTERM, a CI timeout) while a worker runs, and its worktree stays under
/// `.atelier/runs/<run>/wt/` with whatever `.git` the worker made (and `atelier clean` skips
/// unfinished runs): the operator's `git status` there runs the worker's command.
#[test]
fn inspecting_an_interrupted_attempt_does_not_run_the_workers_code() {
    require_landlock!();
    let s = Swarm::new("");
    let (stolen, hook) = stealing_hook(&s);
    let p = one(
        &s,
        &format!(
            "rm -f .git && git init -q && git config core.fsmonitor '{hook}' && \
             echo x > src/t.rs && touch \"$FAKE_AGENT_DIR/ready\" && sleep 60"
        ),
    );
    let mut child = s
        .command(&["run", &p])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run");
    let until = Instant::now() + Duration::from_secs(60);
    while !s.fake.join("ready").exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(s.fake.join("ready").exists(), "the worker ran");
    // SAFETY: kill(2) on the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    let kept = kept(&s, "r1");
    assert!(
        kept.is_empty(),
        "an interrupted attempt's worktree was kept: {kept:?}"
    );
    assert!(
        !stolen.exists(),
        "the operator's git ran the interrupted worker's hook"
    );
}
