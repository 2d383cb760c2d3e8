//! The improvement cycle (`atelier cycle`): tune, validators, the benchmark, evidence, the metric
//! and judges, on Atelier's own code as on another repository's.

mod bench;
mod evidence;
mod judges;
mod metric;
mod own_code;
mod seeds;
mod validators;

use serde_json::Value;

use crate::support::swarm::{runs_with_a_hopeless_task, Swarm};

/// The user-testing scenario: runs in the patched tree, with an empty HOME and no forge token.
pub(crate) const SCENARIO: &str = "set -e\ngrep -q '^failure_budget' atelier.toml\ntest -z \"$GITHUB_TOKEN\"\ntest -z \"$(ls -A \"$HOME\")\"\ntest \"$GREETING\" = hello\ncase \"$TOOLS\" in /*/tools) ;; *) exit 9 ;; esac\necho scenario ok\n";

/// A swarm with five recorded runs where one task never passes (so `tune` proposes cutting
/// failure_budget 3 -> 1) and a user-testing scenario.
pub(crate) fn tuned(scenario: &str) -> Swarm {
    let s = Swarm::configured(
        "failure_budget = 3",
        "\n[validators.user_testing]\nscenario = [\"sh scenario.sh\"]\ntimeout = \"60s\"\nenv = [\"GREETING=hello\", \"TOOLS=~/tools\"]\n",
    );
    s.env.write("scenario.sh", scenario);
    s.env.git(&["add", "scenario.sh"]);
    s.env.git(&["commit", "-qm", "The user-testing scenario"]);
    runs_with_a_hopeless_task(&s, 5);
    s
}

/// `atelier cycle --seeds 2 --mission flaky ARGS`: the quick cycle the tests run.
pub(crate) fn flaky_cycle(s: &Swarm, args: &[&str]) -> crate::support::Run {
    let mut all = vec!["cycle", "--seeds", "2", "--mission", "flaky"];
    all.extend_from_slice(args);
    s.run(&all)
}

pub(crate) fn ledger(s: &Swarm) -> Vec<Value> {
    let v = s.run(&["audit", "log", "--json"]).ok().json();
    v.as_array().cloned().unwrap_or_default()
}

pub(crate) fn on_branch(s: &Swarm, id: &str, file: &str) -> String {
    let listing = s.env.git(&[
        "ls-tree",
        "-r",
        "--name-only",
        &format!("atelier/proposals/{id}"),
        "proposals/",
    ]);
    let path = listing
        .lines()
        .find(|l| l.starts_with(&format!("proposals/{id}-")) && l.ends_with(file))
        .unwrap_or_else(|| panic!("no {file} in the record of {id}: {listing}"))
        .to_string();
    s.env
        .git(&["show", &format!("atelier/proposals/{id}:{path}")])
}

pub(crate) fn improvements(s: &Swarm) -> Value {
    s.run(&["proposals", "--improvements", "--json"])
        .ok()
        .json()
}
