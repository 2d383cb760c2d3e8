//! A contained worker: each test is an attack a hostile worker (or a check, a reviewer, a build)
//! tries under Landlock, and must be denied; a kernel without Landlock skips, and fails under
//! `ATELIER_TEST_STRICT=1` (see support/skip.rs).

mod configuration;
mod files;
mod handoff;
mod leftovers;
mod metadata;
mod network;
mod processes;
mod tools;

use crate::support::swarm::{one, Swarm};

/// The worker's script for an attack: `attempt` in a subshell, `ESCAPED` or `denied` written
/// to the verdict file, then the task's own file.
pub(crate) fn attack(attempt: &str) -> String {
    format!(
        "if ( {attempt} ) >/dev/null 2>&1; then echo ESCAPED; else echo denied; fi > \"$FAKE_AGENT_DIR/verdict\"; echo ok > src/t.rs"
    )
}

/// Runs one hostile worker; the run and the verdict it wrote (empty if it never ran).
pub(crate) fn verdict_of(s: &Swarm, attempt: &str) -> (crate::support::Run, String) {
    let p = one(s, &attack(attempt));
    let run = s.run(&["run", &p]);
    let v = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    (run, v)
}

/// Runs one hostile worker to the end and returns what it saw; the run itself succeeds.
pub(crate) fn run_attack(s: &Swarm, attempt: &str) -> String {
    let (run, v) = verdict_of(s, attempt);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("contained: landlock"), "{}", run.stdout);
    assert!(!v.is_empty(), "the worker ran");
    v
}

/// Asserts that `attempt` was denied, in a run that went on contained.
pub(crate) fn denied(s: &Swarm, attempt: &str) {
    assert_eq!(run_attack(s, attempt), "denied\n", "{attempt}");
}
