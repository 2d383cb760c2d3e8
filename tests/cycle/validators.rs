//! The cycle's validators: the user-testing scenario, what it may be granted, and a change that
//! steers it.

use serde_json::Value;

use crate::cycle::{flaky_cycle, on_branch, tuned};
use crate::support::swarm::{add_role, runs_with_a_hopeless_task, Swarm};

#[test]
fn a_failing_user_scenario_or_nothing_to_propose_stops_the_cycle_clearly() {
    // Nothing recorded yet: tune proposes nothing and the cycle says so, recording nothing.
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\n",
    );
    let r = s.run(&["cycle", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let c = r.json();
    assert_eq!(c["stage"], "propose");
    assert!(c["proposal"].is_null());
    assert!(
        r.stderr.contains("tune proposes nothing from fewer than 5"),
        "{}",
        r.stderr
    );
    assert_eq!(
        s.run(&["proposals", "--json"])
            .ok()
            .json()
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    for (args, want) in [
        (&["cycle", "--seeds", "1"][..], "--seeds 1: at least 2"),
        (
            &["cycle", "--metric", "speed"][..],
            "--metric speed: not a replay metric",
        ),
        (
            &["cycle", "--mission", "nope"][..],
            "--mission nope: no such mission",
        ),
    ] {
        let bad = s.run(args);
        assert_eq!(bad.code, 2, "{args:?}: {}", bad.stderr);
        assert!(bad.stderr.contains(want), "{args:?}: {}", bad.stderr);
    }

    // The scenario fails on the patched tree: recorded with its evidence, not submitted.
    let s = tuned("echo 'the demo broke' >&2\nexit 3\n");
    let r = flaky_cycle(&s, &["--metric", "failed_tasks", "--json"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let c = r.json();
    assert_eq!(c["registered"]["metric"], "failed_tasks");
    assert_eq!(c["evidence"]["outcome"], "regressed");
    let stopped = c["stopped"].as_str().expect("stopped");
    assert!(
        stopped.contains("the registered metric failed_tasks regressed")
            && stopped.contains(
                "the user-testing validator failed: scenario `sh scenario.sh` exited with 3"
            ),
        "{stopped}"
    );
    let md = on_branch(&s, c["proposal"].as_str().expect("id"), "evidence.md");
    assert!(md.contains("the demo broke"), "{md}");
    assert!(md.contains("failed_tasks REGRESSED significantly"), "{md}");
}

/// The scenario's *command* comes from the protected branch, but the command runs
/// in the proposal's tree, so the files it runs (`sh scenario.sh`, the pattern tests/cycle.rs
/// and the docs use) are the proposal's. An agent whose change breaks what the scenario checks
/// also rewrites scenario.sh to `exit 0`: the user-testing validator reports "passed", the
/// panel sees nothing to block, and the cycle submits it.
#[test]
fn the_agent_rewrites_the_scenario_the_user_testing_validator_runs() {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\n",
    );
    // What users rely on: answer() exists.
    s.env.write(
        "scenario.sh",
        "set -e\ngrep -q 'pub fn answer' src/lib.rs\n",
    );
    s.env.git(&["add", "scenario.sh"]);
    s.env.git(&["commit", "-qm", "The user-testing scenario"]);
    let plan = crate::support::swarm::plan(
        "simplify",
        &[crate::support::swarm::task(
            "A",
            &["src/lib.rs", "scenario.sh"],
            &[],
            "grep -q simplified src/lib.rs",
        )],
    );
    add_role(
        &s,
        "proposer",
        "#!/bin/sh\ncat > /dev/null\ncat \"$FAKE_AGENT_DIR/proposer-reply.txt\"\n",
    );
    std::fs::write(s.fake.join("proposer-reply.txt"), &plan).expect("reply");
    s.scenario(
        "simplify:A",
        "echo '// simplified: answer() removed' > src/lib.rs\nprintf 'exit 0\\n' > scenario.sh",
    );
    let r = s.run(&[
        "cycle",
        "--from",
        "agent",
        "--goal",
        "Simplify the library",
        "--json",
    ]);
    // The scenario's files are judge paths of the panel (issue 25): the scrutiny of the run
    // blocks the change before anything is proposed.
    if stopped_by_the_panel(&r, "scenario.sh") {
        return;
    }
    let c: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr));
    assert!(
        c["proposal"].is_string(),
        "setup: the agent proposed\n{}",
        r.stderr
    );
    let user = c["evidence"]["validators"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "user-testing"))
        .cloned()
        .unwrap_or(Value::Null);
    assert!(
        c["submitted"] == false,
        "the change removed what the merged scenario checks and rewrote the scenario; user-testing: {user}; submitted: {}\n{}",
        c["submitted"],
        r.stderr
    );
}

/// Whether the cycle stopped before proposing because the panel's scrutiny of the run found
/// that it changed `file`, a judge (nothing is proposed then).
fn stopped_by_the_panel(r: &crate::support::Run, file: &str) -> bool {
    let stopped = r.code == 1
        && r.stderr.contains("E_SCRUTINY_FAILED")
        && r.stderr.contains(file)
        && r.stderr.contains("judges the change");
    if r.code == 1 {
        assert!(stopped, "stopped for another reason:\n{}", r.stderr);
    }
    stopped
}

fn cycle_json(r: &crate::support::Run) -> Value {
    serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\n{}", r.stdout, r.stderr))
}

fn user_testing(c: &Value) -> Value {
    c["evidence"]["validators"]
        .as_array()
        .and_then(|v| v.iter().find(|v| v["name"] == "user-testing"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// `[validators.user_testing] readable`/`writable` are expanded with
/// `contain::listed` alone, never through `contain::grants`, so the check that refuses a
/// role's or the gauntlet's listed path holding the gate key, `.atelier/` or `~/.ssh`
/// (`E_CONTAINMENT_PATH`) does not apply. A merged `readable = ["~/.local/share"]` (where pipx,
/// uv and friends keep tools) lets the scenario — which runs the change's code — read the
/// gate's private key; a failing scenario's last output then lands in evidence.json, committed
/// on the proposal branch (and in the pull request body on GitHub).
#[test]
fn the_user_testing_lists_grant_the_gate_key_that_role_lists_may_not() {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\nreadable = [\"~/.local/share\"]\n",
    );
    let key_path = s.env.gate_key();
    let key = std::fs::read_to_string(&key_path).expect("the gate key");
    let secret_line = key
        .lines()
        .nth(2)
        .expect("a private key has several lines")
        .to_string();
    s.env.write(
        "scenario.sh",
        &format!(
            "grep -q '^failure_budget' atelier.toml || exit 2\ncat '{}' && exit 1\necho scenario ok\n",
            key_path.display()
        ),
    );
    s.env.git(&["add", "scenario.sh"]);
    s.env.git(&["commit", "-qm", "The user-testing scenario"]);
    runs_with_a_hopeless_task(&s, 5);
    let r = flaky_cycle(&s, &["--json"]);
    let everything = format!("{}\n{}", r.stdout, r.stderr);
    assert!(
        !everything.contains(&secret_line),
        "the gate's private key {} leaked",
        key_path.display()
    );
    // Fixed: the list is checked like a role's, and the cycle stops, closing the proposal.
    assert_eq!(r.code, 1, "{everything}");
    assert!(
        r.stderr.contains("E_CONTAINMENT_PATH")
            && r.stderr.contains("validators.user_testing.readable"),
        "{}",
        r.stderr
    );
    let all = s.env.git(&["log", "-p", "--all"]);
    assert!(!all.contains(&secret_line), "the key is in the repository");
    let listed = s.run(&["proposals", "--json"]).ok().json();
    assert_eq!(listed[0]["state"], "closed", "{listed}");
}

/// "A change that edits a file the scenario runs fails the validator" holds past the
/// scenario's command line: a file the named script sources (`. ./checks.sh`), a module it
/// imports, a makefile it includes steer it too. An agent whose change breaks what users rely
/// on and also rewrites the helper the scenario sources gets no "passed".
#[test]
fn a_change_to_a_file_the_scenario_sources_steers_the_user_testing_validator() {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\n",
    );
    s.env
        .write("scenario.sh", "set -e\n. ./checks.sh\necho scenario ok\n");
    s.env
        .write("checks.sh", "grep -q 'pub fn answer' src/lib.rs\n");
    s.env.git(&["add", "scenario.sh", "checks.sh"]);
    s.env.git(&["commit", "-qm", "The user-testing scenario"]);
    let plan = crate::support::swarm::plan(
        "simplify",
        &[crate::support::swarm::task(
            "A",
            &["src/lib.rs", "checks.sh"],
            &[],
            "grep -q simplified src/lib.rs",
        )],
    );
    add_role(
        &s,
        "proposer",
        "#!/bin/sh\ncat > /dev/null\ncat \"$FAKE_AGENT_DIR/proposer-reply.txt\"\n",
    );
    std::fs::write(s.fake.join("proposer-reply.txt"), &plan).expect("reply");
    s.scenario(
        "simplify:A",
        "echo '// simplified: answer() removed' > src/lib.rs\nprintf 'true\\n' > checks.sh",
    );
    let r = s.run(&[
        "cycle",
        "--from",
        "agent",
        "--goal",
        "Simplify the library",
        "--json",
    ]);
    // What the scenario sources judges too (issue 25): the run's scrutiny blocks it.
    if stopped_by_the_panel(&r, "checks.sh") {
        return;
    }
    let c = cycle_json(&r);
    assert!(
        c["proposal"].is_string(),
        "setup: the agent proposed\n{}",
        r.stderr
    );
    let user = user_testing(&c);
    assert_ne!(
        user["result"], "passed",
        "the change removed what the scenario checks and rewrote checks.sh, which scenario.sh sources: user-testing passed on the change's own check: {user}\n{}",
        r.stderr
    );
}
