//! What carries authority on GitHub: only tokens signed by approvers' keys, bound to the head;
//! not the bot, a review, a label, an edited comment or a hand-pushed commit.

use serde_json::Value;

use crate::support::hub::{Hub, BOT};

fn codes(v: &Value) -> Vec<String> {
    crate::support::token_codes(v)
}

#[test]
fn the_bots_own_key_a_github_review_and_a_label_carry_no_authority() {
    let hub = Hub::new();
    let n = hub.submitted();
    // The bot account posts a token signed with the gate's own key.
    let gate_key = hub.env.gate_key();
    let posted = hub.run(
        BOT,
        &[
            "approve",
            "--pr",
            &n.to_string(),
            "--key",
            gate_key.to_str().expect("utf8"),
            "--post",
        ],
    );
    let posted = posted.code(1);
    assert!(
        posted.stderr.contains("will not count"),
        "{}",
        posted.stderr
    );
    // A GitHub "APPROVE" review without a token, and an `approved` label.
    hub.emu.add_review(n, "alice", "APPROVED", "LGTM, ship it");
    hub.emu.add_label(n, "approved");
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(codes(&v), ["E_GATE_KEY_SIGNER"]);
    assert_eq!(v["approvers"].as_array().map(Vec::len), Some(0));
    assert!(crate::support::unmet(&v).contains(&"E_QUORUM_NOT_MET".to_string()));
    let (state, desc) = hub.status(&hub.head(n)).expect("status");
    assert_eq!(state, "pending");
    assert!(desc.starts_with("E_QUORUM_NOT_MET"), "{desc}");
    assert!(desc.chars().count() <= 140);
}

#[test]
fn the_bot_account_signing_with_a_key_listed_under_bots_never_counts() {
    let policy = atelier::governance::policy::DEFAULT_GOVERNANCE_TOML
        .replace("bots = []", "bots = [\"bot@example.org\"]");
    assert!(policy.contains("bot@example.org"));
    let hub = Hub::build(
        crate::support::Setup {
            governance: policy,
            principals: vec!["alice", "bob", "bot"],
            ..Default::default()
        },
        "manual",
    );
    let n = hub.submitted();
    let key = hub.env.key("bot");
    hub.run(
        BOT,
        &[
            "approve",
            "--pr",
            &n.to_string(),
            "--key",
            key.to_str().expect("utf8"),
            "--post",
        ],
    )
    .code(1);
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(codes(&v), ["E_BOT_SIGNER"]);
    assert_eq!(v["approvers"], serde_json::json!([]));
    // A person's approval still counts next to it.
    hub.approve(n, "alice", &[]).ok();
    let (code, v) = hub.gate(n);
    assert_eq!(code, 0);
    assert_eq!(codes(&v), ["E_BOT_SIGNER", "OK"]);
    assert_eq!(v["approvers"], serde_json::json!(["alice@example.org"]));
}

#[test]
fn a_token_edited_inside_its_comment_stops_counting() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "bob", &[]).ok();
    // Before any evaluation, someone with edit rights extends the token's expiry by a day.
    let bob = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| c["user"]["login"] == "bob")
        .expect("bob's comment");
    let body = bob["body"].as_str().expect("body");
    let expires = body
        .lines()
        .find(|l| l.starts_with("expires "))
        .expect("an expires line");
    let edited = body.replace(expires, &expires.replace("-12-06T", "-12-07T"));
    assert_ne!(edited, body, "{expires}");
    hub.emu
        .edit_comment(bob["id"].as_u64().expect("id"), &edited);
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["approvers"], serde_json::json!([]));
    let token_codes = codes(&v);
    assert_eq!(token_codes.len(), 1);
    assert!(token_codes[0].contains("SIGNATURE"), "{token_codes:?}");
    // A token the gate already recorded stays what it was signed as: editing the comment
    // afterwards changes nothing (a withdrawal is a signed rejection).
    hub.approve(n, "alice", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    let alice = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| c["user"]["login"] == "alice")
        .expect("alice's comment");
    hub.emu
        .edit_comment(alice["id"].as_u64().expect("id"), "changed my mind");
    let (code, v) = hub.gate(n);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["approvers"], serde_json::json!(["alice@example.org"]));
}

#[test]
fn a_push_after_approval_makes_every_token_stale() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    assert_eq!(hub.gate(n).0, 0);
    let approved_head = hub.head(n);
    // The proposal's owner adds a commit and submits again.
    hub.env.git(&["checkout", "-q", "atelier/proposals/1"]);
    hub.env.write("src/extra.rs", "// after approval\n");
    hub.env.git(&["add", "-A"]);
    hub.env.git(&["commit", "-q", "-m", "One more thing"]);
    hub.env.git(&["checkout", "-q", "main"]);
    let again = hub.run(BOT, &["submit", "1", "--json"]).ok().json();
    assert_eq!(again["pull"].as_u64(), Some(n));
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(codes(&v), ["E_STALE_HEAD", "E_STALE_HEAD"]);
    assert_ne!(hub.head(n), approved_head);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "pending");
    // And merge refuses too: it always re-runs the gate.
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stderr.contains("not merged"), "{}", merge.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
}

#[test]
fn a_commit_pushed_onto_a_proposal_by_hand_cannot_pass_even_with_approvals() {
    let hub = Hub::new();
    let n = hub.submitted();
    // Bob can push to the repository: he adds his own commit to the proposal, then approves it
    // alone (the rule needs one approval, and the recorded proposer is someone else).
    hub.push_onto("atelier/proposals/1");
    let bob = hub.approve(n, "bob", &[]).code(1);
    assert!(bob.stderr.contains("E_NOT_SUBMITTED"), "{}", bob.stderr);
    let gate = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    assert!(gate.stderr.contains("E_NOT_SUBMITTED"), "{}", gate.stderr);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "failure");
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stderr.contains("E_NOT_SUBMITTED"), "{}", merge.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
}

#[test]
fn the_gate_machine_never_takes_in_ledger_entries_it_did_not_write() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &["--reject"]).ok();
    assert_eq!(hub.gate(n).0, 1);
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1); // pushes the ledger with the veto
                                                              // Someone with push access fast-forwards the remote ledger to a commit whose tree is an
                                                              // older ledger (from before the veto was recorded).
    let dir = hub.clone_remote("forger");
    hub.git_in(
        &dir,
        &[
            "fetch",
            "-q",
            "origin",
            "refs/atelier/ledger:refs/atelier/ledger",
        ],
    );
    let out = hub
        .env
        .command("git")
        .current_dir(&dir)
        .args([
            "-c",
            "user.email=f@example.org",
            "-c",
            "user.name=F",
            "commit-tree",
            "refs/atelier/ledger~2^{tree}",
            "-p",
            "refs/atelier/ledger",
            "-m",
            "x",
        ])
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let forged = String::from_utf8_lossy(&out.stdout).trim().to_string();
    hub.git_in(
        &dir,
        &[
            "push",
            "-q",
            "origin",
            &format!("{forged}:refs/atelier/ledger"),
        ],
    );
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        merge.stderr.contains("E_LEDGER_DIVERGED"),
        "{}",
        merge.stderr
    );
    assert_eq!(hub.emu.pull(n)["merged"], false);
    // A fresh clone (an approver, an Actions runner) refuses the forged ledger too: its
    // checkpoint does not cover its entries.
    let runner = hub.clone_remote("runner");
    let gate = hub.run_in(&runner, BOT, &["gate", "--pr", &n.to_string()]);
    assert_eq!(gate.code, 1, "{gate:?}");
    assert!(
        gate.stderr.contains("E_LEDGER_UNVERIFIED") && gate.stderr.contains("rewound"),
        "{}",
        gate.stderr
    );
}

#[test]
fn junk_in_comments_neither_wedges_the_gate_nor_reaches_the_ledger() {
    let hub = Hub::new();
    let n = hub.submitted();
    let junk = "atelier-approval k\n-----BEGIN SSH SIGNATURE-----\n-----END SSH SIGNATURE-----\n"
        .repeat(700);
    for _ in 0..4 {
        hub.emu.add_comment(n, "mallory", &junk);
    }
    hub.approve(n, "alice", &[]).ok();
    let (code, v) = hub.gate(n);
    assert_eq!(code, 0, "junk must not stop a valid approval");
    assert_eq!(v["approvers"], serde_json::json!(["alice@example.org"]));
    let summary = hub
        .emu
        .comments(n)
        .into_iter()
        .find(|c| {
            c["body"]
                .as_str()
                .unwrap_or("")
                .starts_with("<!-- atelier:gate-summary -->")
        })
        .expect("summary");
    assert!(summary["body"]
        .as_str()
        .expect("body")
        .contains("2800 token(s) not from a key"));
    let log = hub.env.atelier(&["audit", "log", "--json"]).ok();
    assert_eq!(
        log.stdout.matches("token-recorded").count(),
        1,
        "only alice's token is recorded"
    );
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).ok();
}

#[test]
fn the_gate_runs_read_only_where_there_is_no_gate_key() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // An Actions runner: a fresh clone, no .atelier/gate_key.
    let runner = hub.clone_remote("runner");
    let run = hub.run_in(&runner, BOT, &["gate", "--pr", &n.to_string()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stderr.contains("no gate key here"), "{}", run.stderr);
    assert_eq!(hub.status(&hub.head(n)).expect("status").0, "success");
}

#[test]
fn approvals_can_be_signed_with_ssh_keygen_and_pasted() {
    let hub = Hub::new();
    let n = hub.submitted();
    let payload = hub
        .run(
            "alice-token",
            &["approve", "--pr", &n.to_string(), "--payload"],
        )
        .ok()
        .stdout;
    let file = hub.env.file("pr-payload", &payload);
    let out = hub
        .env
        .command("ssh-keygen")
        .args(["-Y", "sign", "-f"])
        .arg(hub.env.key("alice"))
        .args(["-n", "atelier-approval"])
        .arg(&file)
        .output()
        .expect("ssh-keygen");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sig = format!("{}.sig", file.display());
    // Without --post the comment is printed for pasting; paste it as alice would.
    let comment = hub
        .run(
            "alice-token",
            &["approve", "--pr", &n.to_string(), "--signature", &sig],
        )
        .ok()
        .stdout;
    assert!(comment.starts_with("/atelier approve"), "{comment}");
    hub.emu
        .add_comment(n, "alice", &comment.replace('\n', "\r\n"));
    let (_, v) = hub.gate(n);
    assert_eq!(
        v["approvers"],
        serde_json::json!(["alice@example.org"]),
        "{v}"
    );
}

#[test]
fn a_branch_forced_back_to_an_earlier_submitted_head_cannot_pass() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    let first = hub.head(n);
    // The owner submits a new head; someone with push access forces the branch back.
    hub.env.git(&["checkout", "-q", "atelier/proposals/1"]);
    hub.env.write("src/extra.rs", "// second head\n");
    hub.env.git(&["add", "-A"]);
    hub.env.git(&["commit", "-q", "-m", "Second head"]);
    hub.env.git(&["checkout", "-q", "main"]);
    hub.run(BOT, &["submit", "1"]).ok();
    let dir = hub.clone_remote("forcer");
    hub.git_in(
        &dir,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("{first}:refs/heads/atelier/proposals/1"),
        ],
    );
    assert_eq!(hub.head(n), first);
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stderr.contains("E_NOT_SUBMITTED"), "{}", merge.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
}
