//! An operator runs the swarm (`atelier run`): plans, the schedule, failures and retries,
//! control, resume, prompts, HTTP roles, the integrity of what is committed, and the telemetry a
//! run leaves.

mod budgets;
mod checks_that_write;
mod control;
mod failures;
mod http;
mod integrity;
mod plans;
mod prompts;
mod resume;
mod schedule;
mod stats;

use crate::support::swarm::{plan, task, Swarm};

#[test]
fn a_successful_run_becomes_a_proposal_and_clean_removes_what_failures_kept() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario("p:A", "echo 'pub fn a() {}' > src/a.rs");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task("A", &["src/a.rs"], &[], "grep -q 'pub fn a' src/a.rs")],
        ),
    );
    let v = s.run(&["run", &p, "--propose", "--json"]).ok().json();
    assert_eq!(v["proposal"]["id"], "1", "{v:#}");
    let shown = s.env.atelier(&["show", "1"]).ok().stdout;
    assert!(
        shown.contains("+pub fn a() {}") && shown.contains("p:A Task A: criteria"),
        "{shown}"
    );
    // The record names the run's events relative to the repository: no local path is committed.
    let tmp = s.env.tmp.path().display().to_string();
    assert!(
        shown.contains("Evidence: .atelier/runs/r1/events.jsonl in the proposer's clone")
            && !shown.contains(&tmp),
        "{shown}"
    );
    // The proposal goes through the governed loop like any other.
    s.env.approve("1", "alice").ok();
    s.env.atelier(&["merge", "1"]).ok();
    assert!(s.env.read("src/a.rs").contains("pub fn a"));
    // A failed run keeps its attempt as a commit on the attempt branch (never as a directory a
    // person might run git in) until `clean`.
    s.scenario("q:B", "echo half > src/b.rs; exit 3");
    let q = s.plan(
        "q.toml",
        &plan("q", &[task("B", &["src/b.rs"], &[], "test -f src/b.rs")]),
    );
    let v = s.run(&["run", &q, "--propose", "--json"]).code(1).json();
    assert_eq!(v["proposal"], serde_json::Value::Null);
    assert_eq!(s.env.git(&["worktree", "list"]).lines().count(), 1);
    assert_eq!(
        s.env.git(&["show", "atelier/attempts/r2/q-B/1:src/b.rs"]),
        "half\n"
    );
    let c = s.run(&["clean", "--json"]).ok().json();
    assert!(
        c["branches"]
            .as_array()
            .expect("list")
            .contains(&serde_json::json!("atelier/attempts/r2/q-B/1")),
        "{c:#}"
    );
}

/// `propose --run RUN`: a finished run whose every task succeeded becomes a proposal without
/// running anything again; a failed, unknown or already proposed run is refused with why.
#[test]
fn a_finished_run_is_proposed_by_its_id() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario("p:A", "echo 'pub fn a() {}' > src/a.rs");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task("A", &["src/a.rs"], &[], "grep -q 'pub fn a' src/a.rs")],
        ),
    );
    let v = s.run(&["run", &p, "--json"]).ok().json();
    let run = v["run"].as_str().expect("run id").to_string();
    let events_before =
        std::fs::read_to_string(s.env.repo.join(format!(".atelier/runs/{run}/events.jsonl")))
            .expect("events");
    let attempts = events_before.matches("attempt-started").count();
    let r = s.run(&["propose", "--run", &run]).ok();
    let id = r.stdout.trim().to_string();
    assert_eq!(id, "1", "{}", r.stderr);
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(shown.contains("+pub fn a() {}"), "{shown}");
    let events_after =
        std::fs::read_to_string(s.env.repo.join(format!(".atelier/runs/{run}/events.jsonl")))
            .expect("events");
    assert_eq!(
        events_after.matches("attempt-started").count(),
        attempts,
        "nothing ran again"
    );
    let again = s.run(&["propose", "--run", &run]).code(2);
    assert!(
        again
            .stderr
            .contains("the run was proposed already, as proposal 1"),
        "{}",
        again.stderr
    );
    let unknown = s.run(&["propose", "--run", "nope"]).code(2);
    assert!(
        unknown.stderr.contains("--run nope: no such run"),
        "{}",
        unknown.stderr
    );
    // A run with a failed task is not proposed.
    s.scenario("q:B", "exit 3");
    let q = s.plan(
        "q.toml",
        &plan("q", &[task("B", &["src/b.rs"], &[], "test -f src/b.rs")]),
    );
    let v = s.run(&["run", &q, "--json"]).code(1).json();
    let failed = v["run"].as_str().expect("run id").to_string();
    let r = s.run(&["propose", "--run", &failed]).code(2);
    assert!(
        r.stderr.contains("1 task(s) failed")
            && r.stderr.contains("only a run whose every task succeeded"),
        "{}",
        r.stderr
    );
    let both = s.run(&["propose", "--run", &run, "--title", "x"]).code(2);
    assert!(
        both.stderr.contains("cannot be used with"),
        "{}",
        both.stderr
    );
}

/// A run that is not there is named with the runs that are, not with a file-system error.
#[test]
fn status_of_an_unknown_run_names_the_runs_there_are() {
    let s = Swarm::new("");
    s.scenario("p:A", "echo 'pub fn a() {}' > src/a.rs");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task("A", &["src/a.rs"], &[], "grep -q 'pub fn a' src/a.rs")],
        ),
    );
    s.run(&["run", &p, "--quiet"]).ok();
    let r = s.run(&["status", "r99"]).code(2);
    assert!(
        r.stderr.contains("no run r99 in") && r.stderr.contains("the only run is r1"),
        "{}",
        r.stderr
    );
    assert!(
        !r.stderr.contains("caused by") && !r.stderr.contains("No such file"),
        "{}",
        r.stderr
    );
}

/// Attempt branches do not pile up: a new run removes those of the finished runs older than
/// the latest three, and says so; those three stay for inspection.
#[test]
fn a_new_run_removes_the_attempt_branches_of_all_but_the_latest_three_runs() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario("q:B", "echo half > src/b.rs; exit 3");
    let q = s.plan(
        "q.toml",
        &plan("q", &[task("B", &["src/b.rs"], &[], "test -f src/b.rs")]),
    );
    for _ in 0..4 {
        s.run(&["run", &q, "--quiet"]).code(1);
    }
    let branches = |s: &Swarm| s.env.git(&["branch", "--list", "atelier/attempts/*"]);
    assert!(
        branches(&s).contains("atelier/attempts/r1/q-B/1"),
        "{}",
        branches(&s)
    );
    let fifth = s.run(&["run", &q]).code(1);
    assert!(
        fifth.stderr.contains(
            "removed 1 attempt branch(es) of finished runs older than the latest 3 (`atelier clean` removes the rest)"
        ),
        "{}",
        fifth.stderr
    );
    let left = branches(&s);
    assert!(!left.contains("atelier/attempts/r1/"), "{left}");
    for r in ["r2", "r3", "r4", "r5"] {
        assert!(
            left.contains(&format!("atelier/attempts/{r}/q-B/1")),
            "{r}: {left}"
        );
    }
}

/// A role whose program is not there would fail every attempt to start: `run` says so before
/// the first, naming the role, the program and what to do, and starts no run.
#[test]
fn a_role_whose_program_is_missing_is_refused_before_any_attempt() {
    let s = Swarm::configured(
        "",
        "\n[roles.writer]\nbackend = \"command\"\ncommand = [\"/nonexistent/agent\"]\n\n[roles.coder]\nbackend = \"codex\"\n",
    );
    let missing = |role: &str| {
        s.plan(
            &format!("{role}.toml"),
            &plan(role, &[task("A", &["src/a.rs"], &[], "grep -q a src/a.rs")])
                .replace("role = \"implementer\"", &format!("role = \"{role}\"")),
        )
    };
    let p = missing("writer");
    let r = s.run(&["run", &p]).code(2);
    assert!(
        r.stderr
            .contains("role writer: its program `/nonexistent/agent` is not a file")
            && r.stderr.contains("name it by its full path")
            && r.stderr.contains("no run was started"),
        "{}",
        r.stderr
    );
    assert!(
        !s.env.repo.join(".atelier/runs/r1").exists(),
        "a run started"
    );
    // A preset's CLI not on the PATH `run` is started with.
    let p = missing("coder");
    let mut c = s.command(&["run", &p]);
    c.env("PATH", "/usr/bin:/bin");
    let r = crate::support::Run::from(c.output().expect("run atelier"));
    assert!(
        r.code == 2
            && r.stderr
                .contains("role coder: its program `codex` is not on the workers' PATH")
            && r.stderr.contains("docs/agents.md"),
        "{}",
        r.stderr
    );
}

/// A run whose change no longer applies (the branch moved under it) is to be run again: the
/// refusal says so, not "rebase the patch", which a run does not have.
#[test]
fn a_run_whose_base_moved_under_it_is_told_to_run_again() {
    let s = Swarm::new("failure_budget = 1");
    s.env.write("src/a.rs", "pub fn old() {}\n");
    s.env.git(&["add", "src/a.rs"]);
    s.env.git(&["commit", "-qm", "An old a"]);
    s.scenario("p:A", "echo 'pub fn a() {}' > src/a.rs");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task("A", &["src/a.rs"], &[], "grep -q 'pub fn a' src/a.rs")],
        ),
    );
    s.run(&["run", &p, "--quiet"]).ok();
    // The same lines change on the branch meanwhile, through the gate.
    let id = s
        .env
        .propose(&[("src/a.rs", "pub fn other() {}\n")], "Another a");
    s.env.approve(&id, "alice").ok();
    s.env.atelier(&["merge", &id]).ok();
    let r = s.run(&["propose", "--run", "r1"]).code(2);
    assert!(
        r.stderr.contains("run r1's change does not apply to main")
            && r.stderr.contains("run its plans again from the new tip")
            && !r.stderr.contains("make the patch again"),
        "{}",
        r.stderr
    );
}
