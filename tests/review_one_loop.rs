//! Regression tests from the adversarial review of the one-loop unification (GitHub and local
//! forges behind one `Forge` trait). Each test states the property it checks; the report lists
//! which of them fail on the reviewed commit.

use std::path::PathBuf;

use serde_json::Value;

use crate::github::Hub;
use crate::support::{token_codes, unmet, Env};

const BOT: &str = "bot-token";

fn pull_file(env: &Env, n: u64) -> PathBuf {
    env.repo.join(format!(".atelier/forge/pulls/{n}.json"))
}

fn edit_record(env: &Env, n: u64, f: impl FnOnce(&mut Value)) {
    let path = pull_file(env, n);
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("record")).expect("json");
    f(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).expect("json")).expect("write");
}

/// Local forge: a record copied over another number (`2.json` := `1.json`) must not make
/// `merge 2` merge proposal 1 and record it in the ledger as "proposal 1 through pull request
/// 2", a merge `audit verify` then reports for good (E_MERGE_MISMATCH). The old code recorded
/// the record's own number; the new loop records the number the command was given.
#[test]
fn a_record_copied_over_another_number_never_makes_the_gate_write_a_mismatched_merge() {
    let env = Env::new();
    let one = env.propose_code();
    let two = env.propose(&[("README.md", "# demo, more\n")], "Docs");
    assert_eq!((one.as_str(), two.as_str()), ("1", "2"));
    std::fs::copy(pull_file(&env, 1), pull_file(&env, 2)).expect("copy");
    // Whatever `approve 2` and `merge 2` do, the ledger the gate writes must audit clean.
    let _ = env.approve("2", "alice");
    let merge = env.atelier(&["merge", "2"]);
    let audit = env.atelier(&["audit", "verify"]);
    assert!(
        !audit.stdout.contains("E_MERGE_MISMATCH") && !audit.stderr.contains("E_MERGE_MISMATCH"),
        "merge 2 said: {}{}\naudit: {}{}",
        merge.stdout,
        merge.stderr,
        audit.stdout,
        audit.stderr
    );
}

/// Local forge: `gate N` / `merge N` must judge proposal N, not whatever proposal the file
/// `N.json` names: the number the operator gives is the proposal they mean.
#[test]
fn merge_by_id_refuses_a_record_that_names_another_proposal() {
    let env = Env::new();
    env.propose_code();
    env.propose(&[("README.md", "# demo, more\n")], "Docs");
    env.approve("1", "alice").ok();
    std::fs::copy(pull_file(&env, 1), pull_file(&env, 2)).expect("copy");
    let merge = env.atelier(&["merge", "2"]);
    assert_eq!(merge.code, 1, "{merge:?}");
    assert!(merge.stderr.contains("E_FORGE_STATE"), "{merge:?}");
}

/// GitHub: the proposer never counts. `submit` copies the proposer from this clone's forge
/// record (which anyone with write access to the gate clone can edit) into the `submitted`
/// entry, and the gate prefers that entry to the ledger's `proposal-opened` one. Clearing the
/// proposer in `.atelier/forge/pulls/1.json` before `submit` lets the proposer approve their
/// own proposal alone. (Pre-existing: the old `submit` did the same.)
#[test]
fn on_github_an_edited_forge_record_cannot_clear_the_proposer() {
    let hub = Hub::new();
    // Alice proposes (her address is the proposer), on the gate machine.
    hub.env.git(&["config", "user.email", "alice@example.org"]);
    let id = hub.env.propose_code();
    edit_record(&hub.env, 1, |v| v["proposer"] = Value::Null);
    let n = hub.run(BOT, &["submit", &id, "--json"]).ok().json()["pull"]
        .as_u64()
        .expect("pull");
    hub.approve(n, "alice", &[]);
    let (code, v) = hub.gate(n);
    assert_eq!(
        code,
        1,
        "the proposer's own approval was counted: unmet {:?}, tokens {:?}",
        unmet(&v),
        token_codes(&v)
    );
    assert!(
        token_codes(&v).contains(&"E_PROPOSER_SIGNER".to_string()),
        "{v}"
    );
}

/// GitHub: `submit` trusts this clone's forge record for the branch it publishes. A record of
/// proposal 2 edited to name `atelier/proposals/1` makes `submit 2` retitle proposal 1's pull
/// request with proposal 2's title and record it in the ledger as proposal 2's pull request, so
/// that from then on `gate 2` / `merge 2` (the new proposal-id addressing) judge and merge
/// proposal 1. `submit` should check the record against the ledger (`E_FORGE_STATE`), as the
/// local forge's `checked_record` does.
#[test]
fn on_github_submit_refuses_a_record_that_names_another_proposals_branch() {
    let hub = Hub::new();
    let n1 = hub.submitted();
    let two = hub
        .env
        .propose(&[("README.md", "# demo, more\n")], "Docs only");
    assert_eq!(two, "2");
    edit_record(&hub.env, 2, |v| {
        v["head_branch"] = Value::String("atelier/proposals/1".into())
    });
    let submit = hub.run(BOT, &["submit", "2", "--json"]);
    let gate = hub.run(BOT, &["gate", "2", "--json"]);
    assert!(
        submit.code == 1 && submit.stderr.contains("E_FORGE_STATE"),
        "submit 2 with a record naming proposal 1's branch: {submit:?}\n#{n1} title now {:?}\n`gate 2` judged proposal {:?}",
        hub.emu.pull(n1)["title"],
        gate.json()["proposal"]
    );
}

/// GitHub: a head `submit` never published is refused from GitHub's record, before its commits
/// are fetched (a huge pushed head would otherwise hold the lock and the one `serve` worker).
#[test]
fn on_github_a_head_pushed_by_hand_is_refused_before_it_is_fetched() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.gate(n);
    let private = format!("refs/atelier/github/pull/{n}/head");
    let fetched = hub.env.git(&["rev-parse", &private]);
    hub.push_onto("atelier/proposals/1");
    let gate = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    assert!(gate.stderr.contains("E_NOT_SUBMITTED"), "{}", gate.stderr);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "failure");
    assert_eq!(
        hub.env.git(&["rev-parse", &private]),
        fetched,
        "the hand-pushed head was fetched"
    );
}

/// A proposal id names that proposal on every forge: on GitHub, a pull request whose branch
/// carries another proposal is refused, whatever mapping led to it.
#[test]
fn a_proposal_id_never_judges_another_proposal() {
    let env = Env::new();
    env.propose_code();
    env.propose(&[("README.md", "# demo, more\n")], "Docs");
    env.approve("1", "alice").ok();
    edit_record(&env, 2, |v| {
        v["head_branch"] = Value::String("atelier/proposals/1".into());
        v["proposal"] = Value::String("1".into());
    });
    let before = env.git(&["rev-parse", "main"]);
    for cmd in ["gate", "merge"] {
        let run = env.atelier(&[cmd, "2"]);
        assert_eq!(run.code, 1, "{cmd}: {run:?}");
        assert!(run.stderr.contains("E_FORGE_STATE"), "{cmd}: {run:?}");
    }
    assert_eq!(env.git(&["rev-parse", "main"]), before, "nothing merged");
    env.atelier(&["audit", "verify"]).ok();
}
