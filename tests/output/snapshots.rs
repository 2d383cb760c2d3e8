//! Whole outputs, as people read them: each test runs one command in a hermetic repository
//! (fixed clock, temporary HOME) and snapshots its transcript — exit code, stdout and stderr —
//! with the temporary directory, keys, signatures and commit ids redacted (support/snapshot.rs).
//! A change to what a command prints shows in the diff of `snapshots/`.

use crate::support::snapshot::snapshot;
use crate::support::swarm::{plan, task, Swarm};
use crate::support::Env;

/// A proposal approved by alice, the default policy's quorum for code.
fn approved() -> (Env, String) {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    (env, id)
}

#[test]
fn gate_without_approvals_refuses_and_names_each_requirement() {
    let env = Env::new();
    let id = env.propose_code();
    let args = ["gate", id.as_str()];
    let run = env.atelier(&args).code(1);
    snapshot!(env.tmp.path(), &args, run);
}

#[test]
fn gate_with_the_quorum_allows_and_names_the_approver() {
    let (env, id) = approved();
    let args = ["gate", id.as_str()];
    let run = env.atelier(&args).ok();
    snapshot!(env.tmp.path(), &args, run);
}

#[test]
fn merge_of_an_approved_proposal_says_what_landed() {
    let (env, id) = approved();
    let args = ["merge", id.as_str()];
    let run = env.atelier(&args).ok();
    snapshot!(env.tmp.path(), &args, run);
}

#[test]
fn audit_verify_of_a_governed_history_is_clean() {
    let (env, id) = approved();
    env.atelier(&["merge", &id]).ok();
    let args = ["audit", "verify"];
    let run = env.atelier(&args).ok();
    snapshot!(env.tmp.path(), &args, run);
}

#[test]
fn audit_verify_alarms_on_a_commit_pushed_past_the_gate() {
    let (env, id) = approved();
    env.atelier(&["merge", &id]).ok();
    env.write("README.md", "# bypass\n");
    env.git(&["commit", "-q", "-am", "Bypass the gate"]);
    let args = ["audit", "verify"];
    let run = env.atelier(&args).code(1);
    snapshot!(env.tmp.path(), &args, run);
}

#[test]
fn show_renders_the_record_and_the_diff() {
    let env = Env::new();
    let id = env.propose_code();
    let args = ["show", id.as_str()];
    let run = env.atelier(&args).ok();
    snapshot!(env.tmp.path(), &args, run);
}

#[test]
fn proposals_lists_each_state_and_its_approvals() {
    let (env, merged) = approved();
    env.atelier(&["merge", &merged]).ok();
    let open = env.propose(
        &[("README.md", "# demo, documented\n")],
        "Document the demo",
    );
    env.approve(&open, "bob").ok();
    let closed = env.propose(&[("src/extra.rs", "pub fn extra() {}\n")], "Add an extra");
    env.atelier(&["close", &closed]).ok();
    let args = ["proposals"];
    let run = env.atelier(&args).ok();
    snapshot!(env.tmp.path(), &args, run);
}

#[test]
fn status_shows_a_finished_runs_tasks() {
    // Uncontained, so that the snapshot does not depend on the kernel (containment has its own
    // tests): `status` reads the same either way.
    let s = Swarm::uncontained("failure_budget = 2");
    s.scenario("p:A", "echo ok > src/a.rs");
    s.scenario(
        "p:B",
        "if [ \"$ATELIER_ATTEMPT\" = 1 ]; then exit 3; fi; echo ok > src/b.rs",
    );
    let p = s.plan(
        "p.toml",
        &plan(
            "p",
            &[
                task("A", &["src/a.rs"], &[], "grep -q ok src/a.rs"),
                task("B", &["src/b.rs"], &["A"], "grep -q ok src/b.rs"),
            ],
        ),
    );
    s.run(&["run", &p, "--quiet"]).ok();
    let args = ["status"];
    let run = s.run(&args).ok();
    // How long an attempt took depends on the machine: the ELAPSED column is redacted.
    snapshot!(
        s.env.tmp.path(),
        &args,
        run,
        [(r"(?m)^(p:\S+ +\S+ +\d+) +\S+", "$1 [ELAPSED]")]
    );
}

/// Refused (exit 1): the gate is not satisfied, so `merge` changes nothing and says why, with
/// the refusal's code.
#[test]
fn a_merge_the_gate_refuses_exits_1_with_its_code() {
    let env = Env::new();
    let id = env.propose_code();
    let args = ["merge", id.as_str()];
    let run = env.atelier(&args).code(1);
    snapshot!(env.tmp.path(), &args, run);
}

/// Bad input (exit 2): a proposal that does not exist.
#[test]
fn an_unknown_proposal_is_bad_input_exit_2() {
    let env = Env::new();
    let args = ["gate", "9"];
    let run = env.atelier(&args).code(2);
    snapshot!(env.tmp.path(), &args, run);
}

/// Bad input (exit 2): a usage error, as the argument parser reports it.
#[test]
fn a_usage_error_is_bad_input_exit_2() {
    let env = Env::new();
    let args = ["approve", "1"];
    let run = env.atelier(&args).code(2);
    snapshot!(env.tmp.path(), &args, run);
}

/// Bad input (exit 2): a patch that does not apply names the file, and nothing is created.
#[test]
fn a_patch_that_does_not_apply_is_bad_input_exit_2() {
    let env = Env::new();
    let bad = env.file(
        "bad.patch",
        "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n pub fn nothing() -> u32 {\n-    7\n+    8\n }\n",
    );
    let path = bad.display().to_string();
    let args = ["propose", "--patch", path.as_str(), "--title", "Nope"];
    let run = env.atelier(&args).code(2);
    snapshot!(env.tmp.path(), &args, run);
}
