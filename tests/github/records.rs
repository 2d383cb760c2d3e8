//! Forge records on GitHub: an edited record cannot clear the proposer, close or judge another
//! proposal, or submit another branch.

use serde_json::Value;

use crate::support::hub::{Hub, BOT};
use crate::support::records::edit_record;
use crate::support::{token_codes, unmet, Env};

/// GitHub: the same through `close` on the gate machine also closes proposal 1's pull request
/// on GitHub (`withdraw` follows the ledger's `submitted` entries of the proposal the edited
/// record names) and comments on it.
#[test]
fn on_github_close_by_id_never_closes_another_proposals_pull_request() {
    let hub = Hub::new();
    let n1 = hub.submitted();
    let two = hub
        .env
        .propose(&[("README.md", "# demo, more\n")], "Docs only");
    assert_eq!(two, "2");
    edit_record(&hub.env, 2, |v| v["proposal"] = Value::String("1".into()));
    let close = hub.run(BOT, &["close", "2"]);
    let state = hub.emu.pull(n1)["state"].clone();
    assert!(
        close.code == 1 && close.stderr.contains("E_FORGE_STATE"),
        "close 2 with a record naming proposal 1: {close:?}\n#{n1} (proposal 1) is now {state}"
    );
    assert_eq!(state, Value::String("open".into()), "#{n1} was closed");
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
