//! A second adversarial review of `atelier cycle` and the adoption point (5d216c0..aa28fe0).
//! Each test shows, through the CLI, a way around one of the promises; each fails now and
//! passes once that hole is closed.

use serde_json::Value;

use crate::cycle::flaky_cycle;

use crate::proposers::add_role;
use crate::review_cycle::{improvements, tuned, SCENARIO};
use crate::stats::runs_with_a_hopeless_task;
use crate::support::Env;
use crate::swarm::Swarm;

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

/// Finding 1. `[validators.user_testing] readable`/`writable` are expanded with
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

/// Finding 2. "A change that edits a file the scenario runs fails the validator" is decided by
/// `may_execute` on the scenario's command line only: a file the named script sources
/// (`. ./checks.sh`), a module it imports, a makefile it includes is not seen. An agent whose
/// change breaks what users rely on also rewrites the helper the scenario sources, and the
/// user-testing validator reports "passed" on a change that breaks the scenario at base.
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
    let plan = crate::swarm::plan(
        "simplify",
        &[crate::swarm::task(
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

/// Finding 3. E_EVIDENCE_MISSING binds the evidence to the head, never to the base it was
/// measured on. Here the cycle measures failure_budget 3 -> 1 against base X; a person then
/// merges the very same [conductor] edit; the cycle proposal, still at its evidence head,
/// merges on the moved base changing nothing but its record. The improvement curve credits
/// that merge with the measured delta, and nothing warns that what merged is not what was
/// measured (the gate, `show` and `--improvements` never compare the base).
#[test]
fn evidence_measured_on_one_base_is_credited_to_a_merge_on_another() {
    let s = tuned(SCENARIO);
    let r = flaky_cycle(
        &s,
        &["--metric", "failed_tasks", "--submit-anyway", "--json"],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let c = r.json();
    let id = c["proposal"].as_str().expect("id").to_string();
    let measured = c["evidence"]["measured_head"].as_str().expect("head");
    // The same [conductor] edit, proposed and merged by a person first.
    let toml = s.env.git(&["show", &format!("{measured}:atelier.toml")]);
    let human = s
        .env
        .propose(&[("atelier.toml", &toml)], "Budget 1, by hand");
    s.env.approve(&human, "alice").ok();
    s.env.approve(&human, "bob").ok();
    s.run(&["merge", &human]).ok();
    // The cycle's proposal, at its evidence head, now changes nothing but its record. Fixed:
    // the evidence holds only on the base it was measured against.
    s.env.approve(&id, "alice").ok();
    s.env.approve(&id, "bob").ok();
    let refused = s.run(&["merge", &id]);
    assert_eq!(refused.code, 1, "{}", refused.stdout);
    assert!(
        refused.stdout.contains("E_EVIDENCE_MISSING")
            && refused.stdout.contains("the protected branch moved since"),
        "{}",
        refused.stdout
    );
    let shown = s.run(&["show", &id]).ok().stdout;
    assert!(
        shown.contains("main moved since the change was measured"),
        "{shown}"
    );
    assert_eq!(
        improvements(&s)
            .as_array()
            .map(|a| a.iter().filter(|r| r["proposal"] == id.as_str()).count()),
        Some(0)
    );
}

/// Finding 4 (low). The adoption point now needs policies/gate_key.pub too, but the first
/// append's refusal still says the branch has "no commit carrying policies/governance.toml"
/// when it has one and lacks only the key (Atelier's own repository before a maintainer adopts
/// it), sending the operator after the wrong file.
#[test]
fn a_branch_with_a_policy_but_no_gate_key_is_refused_naming_the_key() {
    let env = Env::bare_repo();
    env.atelier(&["init"]).ok();
    env.git(&[
        "add",
        "policies/governance.toml",
        "policies/allowed_signers",
        "atelier.toml",
    ]);
    env.git(&["commit", "-qm", "The policy, before the gate key"]);
    let r = env.atelier(&[
        "propose",
        "--patch",
        env.patch(&[("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n")])
            .to_str()
            .expect("utf8"),
        "--title",
        "Fix",
    ]);
    assert_ne!(r.code, 0, "setup: not adopted yet: {}", r.stdout);
    assert!(
        r.stderr.contains("gate_key.pub"),
        "the refusal should name the missing gate key, not the policy the branch has: {}",
        r.stderr
    );
}
