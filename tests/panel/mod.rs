//! The review panel: built-in and agent reviewers run on every proposal, a blocking verdict
//! refuses the merge unless the constitution quorum overrules it, and the panel is read from the
//! base.

mod agents;
mod builtins;
mod enforcement;
mod hackbench;
mod inventory;
mod supply;
mod surface;

use atelier::audit::ledger;
use git2::Repository;
use serde_json::Value;

use crate::support::Env;

pub(crate) fn requirement<'a>(v: &'a Value, code: &str) -> &'a Value {
    v["requirements"]
        .as_array()
        .expect("requirements")
        .iter()
        .find(|r| r["code"] == code)
        .unwrap_or_else(|| panic!("no {code} requirement: {v:#}"))
}

/// The gate's holder lands proposal `id` by hand and records the merge with the gate key,
/// carrying alice's approval; returns what `audit verify --json` says.
pub(crate) fn landed_by_the_gate_holder(env: &Env, id: &str) -> Value {
    env.approve(id, "alice").ok();
    let log = env.atelier(&["audit", "log", "--json"]).ok().json();
    let token = log
        .as_array()
        .expect("entries")
        .iter()
        .find(|e| e["kind"] == "token-recorded" && e["proposal"] == id)
        .and_then(|e| e["token"].as_str())
        .expect("a recorded token")
        .to_string();
    let repo = Repository::open(&env.repo).expect("open");
    let base = repo.refname_to_id("refs/heads/main").expect("main");
    let head = repo
        .refname_to_id(&format!("refs/heads/atelier/proposals/{id}"))
        .expect("head");
    let tree = atelier::git::merge_tree(&repo, base, head)
        .expect("merge")
        .expect("clean");
    let sig = git2::Signature::now("gate", "gate@example.org").expect("sig");
    let commit = repo
        .commit(
            None,
            &sig,
            &sig,
            &format!("Merge proposal {id}\n\nAtelier-Proposal: {id}\n\n{token}"),
            &repo.find_tree(tree).expect("tree"),
            &[
                &repo.find_commit(base).expect("c"),
                &repo.find_commit(head).expect("c"),
            ],
        )
        .expect("commit");
    repo.reference("refs/heads/main", commit, true, "force")
        .expect("ref");
    let key = atelier::workflow::read_signing_key(&env.gate_key()).expect("key");
    let event = ledger::Event::Merged(ledger::MergeRecord {
        proposal: id.to_string(),
        pull: id.parse().expect("n"),
        commit: commit.to_string(),
        base: base.to_string(),
        head: head.to_string(),
        tree: tree.to_string(),
    });
    ledger::append(&repo, "local/repo", vec![event], 1_795_946_400, &key).expect("append");
    env.atelier(&["audit", "verify", "--json"]).code(1).json()
}
