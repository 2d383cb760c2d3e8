//! An approver signs a proposal: which tokens and keys count towards the quorum, which never do
//! (the gate key, the proposer, a revoked, expired or unknown key, a stale token), and vetoes.

mod constitution;
mod signers_vs_sshkeygen;
mod tokens;
mod tokens_vs_sshsig;

use crate::support::{token_codes, unmet, Env, Setup};

#[test]
fn a_plain_lgtm_comment_counts_for_nothing() {
    let env = Env::new();
    let id = env.propose_code();
    let lgtm = env.file("lgtm.txt", "LGTM! Ship it.\n");
    let run = env
        .atelier(&["approve", &id, "--token", lgtm.to_str().expect("utf8")])
        .ok();
    assert!(
        run.stderr.contains("no approval token found"),
        "{}",
        run.stderr
    );
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_QUORUM_NOT_MET"]);
}

#[test]
fn the_same_principal_counts_once_across_tokens_and_keys() {
    let second_alice = "alice@example.org namespaces=\"atelier-approval\" ";
    let env = Env::with(Setup {
        principals: vec!["alice", "bob"],
        ..Default::default()
    });
    // A second key for alice, added by a (governed) change is the realistic path; here the
    // adoption commit carries it directly.
    let line = env.keygen("alice2").replace(
        "alice2@example.org namespaces=\"atelier-approval\" ",
        second_alice,
    );
    let mut signers = env.read("policies/allowed_signers");
    signers.push_str(&format!("{line}\n"));
    env.write("policies/allowed_signers", &signers);
    env.git(&["commit", "-q", "-am", "Add alice's second key"]);
    let id = env.propose(
        &[(
            "policies/governance.toml",
            &env.read("policies/governance.toml").replace("30d", "20d"),
        )],
        "Shorter tokens",
    );
    env.approve(&id, "alice").ok();
    env.approve(&id, "alice").code(1);
    env.approve(&id, "alice2").code(1);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(
        token_codes(&v),
        ["OK", "E_DUPLICATE_PRINCIPAL", "E_DUPLICATE_PRINCIPAL"]
    );
    assert!(
        unmet(&v).contains(&"E_CONSTITUTION_QUORUM".to_string()),
        "{v:#}"
    );
    env.approve(&id, "bob").ok();
    assert_eq!(env.gate(&id).0, 0);
}

#[test]
fn the_gate_key_and_the_proposer_never_count() {
    let env = Env::with(Setup {
        principals: vec!["alice", "proposer"],
        ..Default::default()
    });
    let id = env.propose_code();
    let gate_key = env.gate_key();
    env.atelier(&["approve", &id, "--key", gate_key.to_str().expect("utf8")])
        .code(1);
    env.approve(&id, "proposer").code(1);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_GATE_KEY_SIGNER", "E_PROPOSER_SIGNER"]);
}

#[test]
fn the_gate_key_in_allowed_signers_is_a_config_error() {
    let env = Env::new();
    let gate_pub = env.read("policies/gate_key.pub");
    let mut signers = env.read("policies/allowed_signers");
    signers.push_str(&format!("gate@example.org {}", gate_pub));
    env.write("policies/allowed_signers", &signers);
    env.git(&["commit", "-q", "-am", "List the gate key (wrong)"]);
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_POLICY_INVALID"]);
    assert!(v.to_string().contains("the gate's own key"), "{v:#}");
}

#[test]
fn a_reject_token_vetoes() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.reject(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_VETOED"]);
    assert_eq!(v["vetoes"], serde_json::json!(["bob@example.org"]));
    // What people read says what to do next, from GOVERNANCE.md's table.
    let text = env.atelier(&["gate", &id]).code(1);
    assert!(
        text.stdout.contains("[FAIL] E_VETOED")
            && text
                .stdout
                .contains("next:     talk to whoever rejected (the gate names them)"),
        "{}",
        text.stdout
    );
}

#[test]
fn an_unknown_principal_does_not_count() {
    let env = Env::new();
    env.keygen("mallory");
    let id = env.propose_code();
    let run = env.approve(&id, "mallory").code(1);
    assert!(
        run.stderr
            .lines()
            .find(|l| !l.starts_with("note: the clock"))
            .is_some_and(
                |l| l.starts_with("error: the gate will not count this token: E_UNKNOWN_SIGNER")
            ),
        "approve says first why it will not count: {}",
        run.stderr
    );
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_UNKNOWN_SIGNER"]);
}

#[test]
fn a_revoked_key_does_not_count() {
    let pre = Env::new();
    let fp = {
        let out = pre
            .command("ssh-keygen")
            .args(["-lf"])
            .arg(pre.keys.join("alice.pub"))
            .output()
            .expect("ssh-keygen");
        String::from_utf8_lossy(&out.stdout)
            .split(' ')
            .nth(1)
            .expect("fingerprint")
            .to_string()
    };
    let governance = format!(
        "{}\n[[revoked]]\nkey = \"{fp}\"\nreason = \"laptop lost\"\n",
        atelier::governance::policy::DEFAULT_GOVERNANCE_TOML
    );
    // Same keys, now with alice revoked at the base.
    pre.write("policies/governance.toml", &governance);
    pre.git(&["commit", "-q", "-am", "Revoke alice"]);
    let id = pre.propose_code();
    pre.approve(&id, "alice").code(1);
    let (code, v) = pre.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_KEY_REVOKED"]);
    assert!(v.to_string().contains("laptop lost"));
}

#[test]
fn a_key_outside_its_validity_window_does_not_count() {
    for (options, at) in [
        ("valid-before=\"20261101Z\"", "2026-11-29T10:00:00Z"),
        ("valid-after=\"20261201Z\"", "2026-11-29T10:00:00Z"),
    ] {
        let env = Env::with(Setup {
            alice_options: options.into(),
            ..Default::default()
        });
        assert_eq!(env.now, at);
        let id = env.propose_code();
        env.approve(&id, "alice").code(1);
        let (code, v) = env.gate(&id);
        assert_eq!(code, 1, "{options}");
        assert_eq!(token_codes(&v), ["E_KEY_OUTSIDE_VALIDITY"], "{options}");
    }
}

#[test]
fn an_expired_token_does_not_count() {
    let mut env = Env::new();
    let id = env.propose_code();
    env.atelier(&[
        "approve",
        &id,
        "--key",
        env.key("alice").to_str().expect("utf8"),
        "--expires",
        "1h",
    ])
    .ok();
    assert_eq!(env.gate(&id).0, 0);
    env.now = "2026-11-29T11:00:00Z".into();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_TOKEN_EXPIRED"]);
    // A lifetime beyond the policy's maximum (30d) never counts.
    env.atelier(&[
        "approve",
        &id,
        "--key",
        env.key("bob").to_str().expect("utf8"),
        "--expires",
        "31d",
    ])
    .code(1);
    assert_eq!(
        token_codes(&env.gate(&id).1),
        ["E_TOKEN_EXPIRED", "E_TOKEN_LIFETIME"]
    );
}

#[test]
fn a_push_after_approval_makes_the_token_stale() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.git(&["checkout", "-q", "atelier/proposals/1"]);
    env.write("src/lib.rs", "pub fn answer() -> u32 {\n    666\n}\n");
    env.git(&["commit", "-q", "-am", "sneaky"]);
    env.git(&["checkout", "-q", "main"]);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_STALE_HEAD"]);
    env.atelier(&["merge", &id]).code(1);
    assert!(env.read("src/lib.rs").contains("41"));
}

#[test]
fn a_moved_base_makes_the_token_stale() {
    let env = Env::new();
    let first = env.propose_code();
    let second = env.propose(&[("README.md", "# demo\n\nchanged\n")], "Readme");
    env.approve(&first, "alice").ok();
    env.approve(&second, "alice").ok();
    env.atelier(&["merge", &second]).ok();
    let (code, v) = env.gate(&first);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_STALE_BASE"]);
    // The refusal says what to do, not only what differs.
    let detail = v["tokens"][0]["detail"].as_str().unwrap_or_default();
    assert!(
        detail.contains(&format!(
            "its signer signs again (`atelier approve {first} --key <their key>`) and sends the new token"
        )),
        "{detail}"
    );
}

#[test]
fn a_public_key_given_as_key_says_so_and_names_the_private_one() {
    let env = Env::new();
    let id = env.propose_code();
    let public = format!("{}.pub", env.key("alice").display());
    let r = env.atelier(&["approve", &id, "--key", &public]).code(2);
    assert!(
        r.stderr.contains(&format!(
            "{public}: this is a public key; --key takes the private key (probably {})",
            env.key("alice").display()
        )),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("public key").count(),
        1,
        "said once: {}",
        r.stderr
    );
    let other = env.file("notes.txt", "hello\n");
    let r = env
        .atelier(&["approve", &id, "--key", other.to_str().expect("utf8")])
        .code(2);
    assert!(
        r.stderr.contains("not an OpenSSH private key")
            && r.stderr.contains("the one without `.pub`"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_token_for_another_proposal_does_not_count() {
    let env = Env::new();
    let first = env.propose_code();
    let second = env.propose(&[("README.md", "# demo\n\nchanged\n")], "Readme");
    let token = env.approve(&first, "alice").ok().stdout;
    let file = env.file("replayed.txt", &token);
    env.atelier(&["approve", &second, "--token", file.to_str().expect("utf8")])
        .code(1);
    let (code, v) = env.gate(&second);
    assert_eq!(code, 1);
    assert_eq!(token_codes(&v), ["E_WRONG_PROPOSAL"]);
}

#[test]
fn closing_records_and_refuses_further_tokens() {
    let env = Env::new();
    let id = env.propose_code();
    env.atelier(&["close", &id, "--reason", "superseded"]).ok();
    let run = env.approve(&id, "alice").code(1);
    assert!(run.stderr.contains("E_NOT_OPEN"), "{}", run.stderr);
    let run = env.atelier(&["merge", &id, "--json"]).code(1);
    assert!(crate::support::unmet(&run.json()).contains(&"E_NOT_OPEN".to_string()));
    let log = env.atelier(&["audit", "log"]).ok().stdout;
    assert!(log.contains("closed (superseded)"), "{log}");
}

#[test]
fn a_deleted_reject_comment_still_vetoes() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.reject(&id, "bob").ok();
    // Someone with access to the forge's storage deletes bob's comment.
    let path = env.repo.join(".atelier/forge/pulls/1.json");
    let mut pull: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    pull["comments"]
        .as_array_mut()
        .expect("comments")
        .truncate(1);
    std::fs::write(&path, pull.to_string()).expect("write");
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_VETOED"], "the ledger still holds the veto");
}

#[test]
fn an_approver_and_the_list_see_where_the_proposal_stands() {
    let env = Env::new();
    let id = env.propose_code();
    let approved = env.approve(&id, "alice").ok();
    assert!(
        approved.stderr.contains(&format!(
            "proposal {id} now: 1/1 approvals (alice@example.org); the gate passes: `atelier merge {id}` merges it"
        )),
        "{}",
        approved.stderr
    );
    let list = env.atelier(&["proposals"]).ok().stdout;
    assert!(list.contains("1/1 ok"), "{list}");
    let vetoed = env.reject(&id, "bob").ok();
    assert!(
        vetoed.stderr.contains(&format!(
            "proposal {id} now: 1/1 approvals (alice@example.org), vetoed by bob@example.org: the gate refuses it while a veto stands"
        )),
        "{}",
        vetoed.stderr
    );
    let list = env.atelier(&["proposals"]).ok().stdout;
    let row = list.lines().find(|l| l.starts_with(&id)).expect("its row");
    assert!(
        row.contains(" vetoed ") && row.ends_with("Fix the answer (vetoed by bob@example.org)"),
        "{list}"
    );
    let shown = env.atelier(&["show", &id]).ok().stdout;
    assert!(shown.contains("proposed by "), "{shown}");
}
