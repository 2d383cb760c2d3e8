//! Failures: retries with a do-not-retry list, a budget, nudges and restarts of a silent worker,
//! and what a failed task shows.

use atelier::swarm::events::RunEvent;

use crate::support::swarm::{plan, task, Swarm};

#[test]
fn a_task_that_fails_twice_then_passes_gets_the_do_not_retry_list() {
    let s = Swarm::new("");
    s.scenario("p:A", "if [ \"$ATELIER_ATTEMPT\" -lt 3 ]; then echo 'error: expected `;` at src/a.rs:3' > src/a.rs; else echo 'ok' > src/a.rs; fi");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[task(
                "A",
                &["src/a.rs"],
                &[],
                "grep -q '^ok' src/a.rs || { cat src/a.rs; exit 1; }",
            )],
        ),
    );
    s.run(&["run", &p]).ok();
    let third = s.prompt("p:A", 3);
    assert!(
        third.contains("Do not retry") && third.contains("src/a.rs:3"),
        "{third}"
    );
    assert!(!s.prompt("p:A", 1).contains("Do not retry"));
    let status = s.run(&["status", "--json"]).ok().json();
    assert_eq!(status["tasks"]["p:A"]["state"], "succeeded");
    assert_eq!(status["tasks"]["p:A"]["attempt"], 3);
}

#[test]
fn the_same_error_every_time_exhausts_the_budget_and_blocks_dependents_only() {
    let s = Swarm::new("failure_budget = 3");
    let errors: String = (0..30)
        .map(|i| format!("echo 'error[E0{i:03}]: bad thing at src/a.rs:{i}'; echo; "))
        .collect();
    s.scenario("p:A", "echo broken > src/a.rs");
    s.scenario("p:C", "echo fine > src/c.rs");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["src/a.rs"], &[], &format!("{errors} exit 1")),
                task("B", &["src/b.rs"], &["A"], "true && test -d src"),
                task("C", &["src/c.rs"], &[], "grep -q fine src/c.rs"),
            ],
        ),
    );
    let run = s.run(&["run", &p, "--json"]).code(1);
    let v = run.json();
    assert!(
        v["failed"]["p:A"]
            .as_str()
            .expect("reason")
            .contains("failed 3 attempt(s)"),
        "{v:#}"
    );
    assert_eq!(v["blocked"]["p:B"], "blocked by p:A");
    assert_eq!(v["succeeded"], serde_json::json!(["p:C"]));
    let digests: Vec<Vec<String>> = s
        .events("r1")
        .into_iter()
        .filter_map(|e| match e {
            RunEvent::AttemptFailed { digest, .. } => Some(digest),
            _ => None,
        })
        .collect();
    assert_eq!(digests.len(), 3);
    assert!(digests.iter().all(|d| d.len() <= 10), "{digests:?}");
    assert!(
        s.prompt("p:A", 3).contains("src/a.rs:1"),
        "the do-not-retry list reaches the prompt"
    );
}

#[test]
fn a_silent_worker_is_nudged_then_restarted() {
    let s = Swarm::new("nudge_after = \"1s\"\nrestart_after = \"2s\"\nfailure_budget = 2");
    s.scenario(
        "p:A",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then sleep 30; fi; echo ok > src/a.rs",
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs")]),
    );
    s.run(&["run", &p]).ok();
    let events = s.events("r1");
    let nudged = events
        .iter()
        .position(|e| matches!(e, RunEvent::Nudged { attempt: 1, .. }))
        .expect("nudged");
    let restarted = events
        .iter()
        .position(|e| matches!(e, RunEvent::Restarted { attempt: 1, .. }))
        .expect("restarted");
    assert!(nudged < restarted);
    let status = s.run(&["status", "--json"]).ok().json();
    assert_eq!(status["tasks"]["p:A"]["restarts"], 1);
    assert_eq!(status["tasks"]["p:A"]["state"], "succeeded");
}

#[test]
fn a_crashing_or_noisy_worker_and_writes_outside_claims_are_contained() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario("p:Crash", "kill -9 $$");
    s.scenario(
        "p:Noisy",
        "head -c 3000000 /dev/zero | tr '\\0' x; echo ok > src/n.rs",
    );
    s.scenario("p:Outside", "echo ok > src/o.rs; echo sneaky > README.md");
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("Crash", &["src/c.rs"], &[], "test -f src/c.rs"),
                task("Noisy", &["src/n.rs"], &[], "grep -q ok src/n.rs"),
                task("Outside", &["src/o.rs"], &[], "grep -q ok src/o.rs"),
            ],
        ),
    );
    let v = s.run(&["run", &p, "--json"]).code(1).json();
    assert!(
        v["failed"]["p:Crash"]
            .as_str()
            .expect("reason")
            .contains("exited with a signal"),
        "{v:#}"
    );
    assert!(
        v["failed"]["p:Outside"]
            .as_str()
            .expect("reason")
            .contains("wrote outside its claims: README.md"),
        "{v:#}"
    );
    assert_eq!(v["succeeded"], serde_json::json!(["p:Noisy"]));
    let exited = s.events("r1").into_iter().find_map(|e| match e {
        RunEvent::WorkerExited {
            task,
            output_bytes,
            truncated,
            ..
        } if task == "p:Noisy" => Some((output_bytes, truncated)),
        _ => None,
    });
    assert_eq!(exited, Some((3_000_000, true)));
}

/// A failed task shows what its last attempt printed, in the run's summary and in `status`,
/// not only "the worker exited with 3".
#[test]
fn a_failed_task_shows_its_last_output() {
    let s = Swarm::new("failure_budget = 1");
    s.scenario(
        "p:A",
        "echo 'compiling the thing'; echo 'the widget is missing its frobnicator'; exit 3",
    );
    let p = s.plan(
        "p.toml",
        &plan("p", &[task("A", &["src/a.rs"], &[], "test -f src/a.rs")]),
    );
    let run = s.run(&["run", &p]).code(1);
    assert!(
        run.stdout
            .contains("failed:    p:A: failed 1 attempt(s); last: the worker exited with 3")
            && run
                .stdout
                .contains("| the widget is missing its frobnicator"),
        "{}",
        run.stdout
    );
    let status = s.run(&["status"]).ok().stdout;
    assert!(
        status.contains("what the last failed attempt printed:")
            && status.contains("p:A (attempt 1):")
            && status.contains("| the widget is missing its frobnicator"),
        "{status}"
    );
}
