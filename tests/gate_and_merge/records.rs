//! Forge records are not authority: an edited or copied record cannot retarget, reopen or close
//! another proposal; what the ledger holds wins.

use serde_json::Value;

use crate::support::records::{edit_record, pull_file};
use crate::support::{unmet, Env};

#[test]
fn an_edited_forge_record_cannot_retarget_a_proposal() {
    let env = Env::new();
    let id = env.propose_code();
    let path = env.repo.join(".atelier/forge/pulls/1.json");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replace("\"atelier/proposals/1\"", "\"main\"")).expect("write");
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stderr.contains("E_FORGE_STATE"), "{}", run.stderr);
}

#[test]
fn an_edited_forge_record_cannot_reopen_a_merged_proposal() {
    let env = Env::new();
    let id = env.propose_code();
    let id2 = env.propose(&[("README.md", "# demo\n\nother\n")], "Readme");
    env.approve(&id2, "alice").ok();
    env.atelier(&["merge", &id2]).ok();
    let path = env.repo.join(".atelier/forge/pulls/2.json");
    let text = std::fs::read_to_string(&path).expect("read");
    std::fs::write(&path, text.replace("\"merged\"", "\"open\"")).expect("write");
    // Reopen proposal 2 in the forge's record and try to record one more token on it.
    let token = env.file("late.txt", &env.approve(&id, "alice").ok().stdout);
    let run = env
        .atelier(&["approve", &id2, "--token", token.to_str().expect("utf8")])
        .code(1);
    assert!(run.stderr.contains("E_NOT_OPEN"), "{}", run.stderr);
    let (code, v) = env.gate(&id2);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_NOT_OPEN".to_string()), "{v:#}");
    env.atelier(&["audit", "verify"]).ok();
}

// Break 7: the forge record renumbered and its proposer cleared.
#[test]
fn facts_the_ledger_holds_win_over_the_forge_record() {
    let env = Env::new();
    // The proposer is also an approver here: their approval must never count.
    env.git(&["config", "user.email", "alice@example.org"]);
    let id = env.propose_code();
    let forge = env.repo.join(format!(".atelier/forge/pulls/{id}.json"));
    let mut pull: Value =
        serde_json::from_str(&std::fs::read_to_string(&forge).expect("forge")).expect("json");
    pull["number"] = Value::from(7);
    pull["head_branch"] = Value::from("atelier/proposals/7");
    pull["proposer"] = Value::Null;
    std::fs::write(&forge, serde_json::to_vec(&pull).expect("json")).expect("write");
    env.git(&[
        "branch",
        "atelier/proposals/7",
        &format!("atelier/proposals/{id}"),
    ]);
    let run = env.approve(&id, "alice").code(1);
    assert!(run.stderr.contains("E_FORGE_STATE"), "{}", run.stderr);
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stderr.contains("E_FORGE_STATE"), "{}", run.stderr);
    assert!(run.stderr.contains("pull request 1"), "{}", run.stderr);
    // With only the proposer cleared, the ledger still names the proposer.
    pull["number"] = Value::from(1);
    pull["head_branch"] = Value::from("atelier/proposals/1");
    std::fs::write(&forge, serde_json::to_vec(&pull).expect("json")).expect("write");
    env.approve(&id, "alice").code(1);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(crate::support::token_codes(&v), ["E_PROPOSER_SIGNER"]);
}

/// Proposals the ledger records as closed (from `audit log --json`, whatever its shape: any
/// entry whose event is `closed`).
fn closed_in_ledger(env: &Env) -> Vec<String> {
    let log = env.atelier(&["audit", "log"]);
    log.stdout
        .lines()
        .filter(|l| l.contains("closed"))
        .map(str::to_string)
        .collect()
}

/// Local forge: `close 2` must close proposal 2 and nothing else. `close` reads this clone's
/// record `2.json` without checking it against the ledger (no `checked_record`, no check that
/// the record names proposal 2), so a record whose `proposal` field was edited to "1" makes
/// `atelier close 2` append `closed` for proposal 1: a permanent close (no forge record can
/// reopen it) of someone else's proposal, by whoever can write `.atelier/forge/`, through the
/// operator's own command. `gate`, `merge`, `approve` and `submit` refuse such a record.
#[test]
fn close_by_id_never_closes_the_proposal_an_edited_record_names() {
    let env = Env::new();
    env.propose_code();
    env.propose(&[("README.md", "# demo, more\n")], "Docs");
    edit_record(&env, 2, |v| v["proposal"] = Value::String("1".into()));
    let close = env.atelier(&["close", "2"]);
    let approve = env.approve("1", "alice");
    assert!(
        close.code == 1 && close.stderr.contains("E_FORGE_STATE"),
        "close 2 with a record naming proposal 1: {close:?}\nledger closed entries: {:?}\napprove 1 afterwards: {approve:?}",
        closed_in_ledger(&env)
    );
    assert_eq!(
        approve.code, 0,
        "proposal 1 was closed by `close 2`: {approve:?}"
    );
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
