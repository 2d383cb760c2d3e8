//! Ordinary tools still work in a contained worker (git with an operator's gitconfig,
//! multiprocessing).

use crate::containment::verdict_of;
use crate::support::skip::require_landlock;
use crate::support::swarm::Swarm;

/// Containment breaks ordinary tools on an ordinary machine. The operator's
/// `~/.gitconfig` exists (it holds `user.name`), Landlock denies opening it, and git treats
/// EACCES on its global configuration as fatal: every `git status`, `git diff`, `git log` in a
/// worker, a step or a reviewer exits 128, though README promises they work (the test HOME
/// has no .gitconfig, so the suite never saw it). Likewise `/dev/shm` is not writable, so
/// POSIX semaphores fail and Python's `multiprocessing` (Pool, Queue, Lock) cannot start.
#[test]
fn git_works_in_a_contained_worker_when_the_operator_has_a_gitconfig() {
    require_landlock!();
    let s = Swarm::new("");
    std::fs::write(
        s.env.home.join(".gitconfig"),
        "[user]\n\tname = Operator\n\temail = op@example.org\n",
    )
    .expect("write");
    // "ESCAPED" here means: it worked.
    let (run, v) = verdict_of(&s, "git status && git log -1 && git diff --stat");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(v, "ESCAPED\n", "git failed in the worker");
}

/// `/dev/shm` is not writable: POSIX semaphores fail, and with them
/// Python's `multiprocessing` (Pool, Queue, Lock), in workers and in gauntlet steps alike,
/// unless the role lists `/dev/shm` (which then works).
#[test]
fn multiprocessing_works_in_a_contained_worker() {
    require_landlock!();
    // POSIX semaphores live in /dev/shm, which is shared by every process of the machine: a
    // role that needs them lists it (README), and nothing else opens it.
    let s = Swarm::new("");
    let (_, v) = verdict_of(
        &s,
        "python3 -c 'import multiprocessing as m; q = m.Queue(); q.put(1); assert q.get() == 1'",
    );
    assert_eq!(v, "denied\n", "/dev/shm is not granted by default");
    let s = Swarm::new("");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", "writable = [\"/dev/shm\", ");
    s.env.write("atelier.toml", &config);
    s.env.git(&[
        "commit",
        "-q",
        "-am",
        "The implementer uses multiprocessing",
    ]);
    let (run, v) = verdict_of(
        &s,
        "python3 -c 'import multiprocessing as m; q = m.Queue(); q.put(1); assert q.get() == 1'",
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(v, "ESCAPED\n", "multiprocessing failed in the worker");
}
