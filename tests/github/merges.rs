//! Merging on GitHub: a moved head, a lost answer, a different tree or a hand merge is refused,
//! concluded from the recorded request, or raises an alarm.

use crate::support::github::Fault;
use crate::support::hub::{Hub, BOT, REPO};

#[test]
fn a_head_that_moves_at_merge_time_is_refused_not_retried() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.emu.inject(Fault::MoveHeadBeforeMerge);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_HEAD_MOVED"), "{}", run.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], false);
    let merges = hub
        .emu
        .log()
        .iter()
        .filter(|l| l.method == "PUT" && l.path.contains("/merge"))
        .count();
    assert_eq!(merges, 1, "never retried with a new head");
}

#[test]
fn a_merge_that_lands_a_different_tree_raises_an_alarm() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.emu.inject(Fault::LandDifferentTree);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        run.stderr.contains("E_LANDED_TREE_MISMATCH"),
        "{}",
        run.stderr
    );
    assert!(hub
        .emu
        .comments(n)
        .iter()
        .any(|c| c["body"].as_str().unwrap_or("").contains("Atelier alarm")));
    let log = hub.env.atelier(&["audit", "log"]).ok();
    assert!(
        log.stdout.contains("ALARM E_LANDED_TREE_MISMATCH"),
        "{}",
        log.stdout
    );
    // The unapproved merge on main is what audit verify exists to catch.
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]).code(1);
    assert!(
        verify.stdout.contains("E_ALARM_RECORDED"),
        "{}",
        verify.stdout
    );
    assert!(
        verify.stdout.contains("E_UNLEDGERED_COMMIT"),
        "{}",
        verify.stdout
    );
}

#[test]
fn a_merge_whose_answer_was_lost_is_concluded_from_the_recorded_request() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // GitHub merges but the answer is lost, and then GitHub stops answering: atelier stops
    // with the merge requested in the ledger but not concluded.
    hub.emu.inject(Fault::MergeThenFail { then: 4 });
    let first = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert!(first.stderr.contains("attempts"), "{}", first.stderr);
    assert_eq!(hub.emu.pull(n)["merged"], true);
    let log = hub.env.atelier(&["audit", "log"]).ok().stdout;
    assert!(log.contains("merge of pull request #1 requested"), "{log}");
    assert!(!log.contains("merged as"), "{log}");
    // Later, the same command concludes it: it checks what landed against the request.
    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    assert_eq!(
        merged["commit"].as_str(),
        hub.emu.pull(n)["merge_commit_sha"].as_str()
    );
    assert_eq!(
        merged["approvers"],
        serde_json::json!(["alice@example.org", "bob@example.org"])
    );
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{verify:?}");
}

/// `merge --pr` refuses with an alarm naming who merged, and audit reports the alarm.
#[track_caller]
fn assert_merged_outside_gate(hub: &Hub, n: u64, by: Option<&str>) {
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        run.stderr.contains("E_MERGED_OUTSIDE_GATE"),
        "{}",
        run.stderr
    );
    if let Some(by) = by {
        assert!(run.stderr.contains(by), "{}", run.stderr);
    }
    let verify = hub
        .env
        .atelier_in(&hub.auditor_clone(), &["audit", "verify"])
        .code(1);
    assert!(
        verify.stdout.contains("E_ALARM_RECORDED"),
        "{}",
        verify.stdout
    );
}

/// Merges pull request `n` through the API as mallory would by hand (bypassing the gate),
/// pasting the approval comments into the message.
fn merge_by_hand(hub: &Hub, n: u64) {
    let tokens: Vec<String> = hub
        .emu
        .comments(n)
        .iter()
        .filter_map(|c| c["body"].as_str().map(str::to_string))
        .filter(|b| b.starts_with("/atelier approve"))
        .collect();
    ureq::put(&format!("{}/repos/{REPO}/pulls/{n}/merge", hub.emu.url))
        .header("Authorization", "Bearer mallory-token")
        .send_json(serde_json::json!({
            "commit_title": "Merge", "commit_message": tokens.join("\n"), "merge_method": "merge"
        }))
        .expect("hand merge");
    assert_eq!(hub.emu.pull(n)["merged"], true);
}

#[test]
fn a_merge_github_refused_is_never_concluded_later_from_its_request() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    let first = hub.head(n);
    // The gate's merge is refused (the head moved), then the branch is forced back and bob
    // vetoes; the gate records the veto.
    hub.emu.inject(Fault::MoveHeadBeforeMerge);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_HEAD_MOVED"), "{}", run.stderr);
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
    hub.approve(n, "bob", &["--reject"]).ok();
    assert_eq!(hub.gate(n).0, 1);
    // Someone merges by hand: the gate raises an alarm instead of recording a merge.
    merge_by_hand(&hub, n);
    assert_merged_outside_gate(&hub, n, None);
}

#[test]
fn a_superseded_head_turns_red_and_a_hand_merge_of_it_raises_an_alarm() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    let first = hub.head(n);
    hub.emu.inject(Fault::Respond {
        method: "PUT".into(),
        path: format!("/repos/{REPO}/pulls/{n}/merge"),
        times: 1,
        status: 405,
        headers: Vec::new(),
        body: r#"{"message":"Required status check \"ci\" is failing."}"#.into(),
    });
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_MERGEABLE"), "{}", run.stderr);
    assert_eq!(hub.status(&first).expect("status").0, "success");
    // A second head is submitted, then the branch is forced back to the first.
    hub.env.git(&["checkout", "-q", "atelier/proposals/1"]);
    hub.env.write("src/extra.rs", "// second head\n");
    hub.env.git(&["add", "-A"]);
    hub.env.git(&["commit", "-q", "-m", "Second head"]);
    hub.env.git(&["checkout", "-q", "main"]);
    hub.run(BOT, &["submit", "1"]).ok();
    hub.git_in(
        &hub.clone_remote("forcer"),
        &[
            "push",
            "-q",
            "-f",
            "origin",
            &format!("{first}:refs/heads/atelier/proposals/1"),
        ],
    );
    let run = hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_NOT_SUBMITTED"), "{}", run.stderr);
    assert_eq!(hub.status(&first).expect("status").0, "failure");
    merge_by_hand(&hub, n);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(
        run.stderr.contains("E_MERGED_OUTSIDE_GATE"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_token_pasted_after_a_lost_answer_does_not_stop_the_merge_being_concluded() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // A further token by a listed key, not posted at first.
    let key = hub.env.key("bob");
    let extra = hub
        .run(
            "bob-token",
            &[
                "approve",
                "--pr",
                &n.to_string(),
                "--key",
                key.to_str().expect("utf8"),
            ],
        )
        .code(1)
        .stdout;
    hub.emu.inject(Fault::MergeThenFail { then: 4 });
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert_eq!(hub.emu.pull(n)["merged"], true);
    // mallory pastes it on the merged pull request, and an evaluation reads it.
    hub.emu.add_comment(n, "mallory", &extra);
    hub.run(BOT, &["gate", "--pr", &n.to_string()]).code(1);
    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    assert_eq!(
        merged["commit"].as_str(),
        hub.emu.pull(n)["merge_commit_sha"].as_str()
    );
    let verify = hub
        .env
        .atelier_in(&hub.auditor_clone(), &["audit", "verify"]);
    assert_eq!(verify.code, 0, "{verify:?}");
}

#[test]
fn a_hand_merge_while_the_gates_request_was_unanswered_raises_an_alarm() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    // The gate's merge never gets through; nothing merged.
    hub.emu
        .inject(Fault::server_error("PUT", &format!("/pulls/{n}/merge"), 5));
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert_eq!(hub.emu.pull(n)["merged"], false);
    // bob rejects (nothing records it), and someone merges by hand.
    hub.approve(n, "bob", &["--reject"]).ok();
    merge_by_hand(&hub, n);
    assert_merged_outside_gate(&hub, n, Some("mallory"));
}

#[test]
fn a_merge_answer_that_is_not_the_branchs_new_tip_raises_an_alarm() {
    // Issue 8: merge --pr trusted the sha GitHub reported. Here the reported merge commit has
    // the approved parents and tree, but the branch holds one more commit on top of it.
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.emu.inject(Fault::LandExtraCommitAfterMerge);
    let run = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(run.stderr.contains("E_LANDED_NOT_TIP"), "{}", run.stderr);
    assert!(run.stderr.contains("tip is"), "{}", run.stderr);
    let log = hub.env.atelier(&["audit", "log"]).ok();
    assert!(
        log.stdout.contains("ALARM E_LANDED_NOT_TIP"),
        "{}",
        log.stdout
    );
    assert!(!log.stdout.contains("merged as"), "{}", log.stdout);
    let verify = hub
        .env
        .atelier_in(&hub.auditor_clone(), &["audit", "verify"])
        .code(1);
    assert!(
        verify.stdout.contains("E_ALARM_RECORDED"),
        "{}",
        verify.stdout
    );
}

// Issue 8, break 13: the GitHub twin of break 6. A proposal whose branch was given a file under
// `.atelier/` before `submit` is refused by the gate, and the gate key on the gate machine stays.
#[test]
fn a_change_under_dot_atelier_never_merges_on_github() {
    let hub = Hub::new();
    let id = hub.env.propose_code();
    let key_before = std::fs::read_to_string(hub.env.gate_key()).expect("the gate key");
    hub.env
        .git(&["checkout", "-q", &format!("atelier/proposals/{id}")]);
    hub.env.write(".atelier/gate_key", "attacker's key\n");
    hub.env.git(&["add", "-f", ".atelier/gate_key"]);
    hub.env.git(&["commit", "-q", "-m", "tweak"]);
    hub.env.git(&["rm", "-q", "--cached", ".atelier/gate_key"]);
    hub.env.git(&["checkout", "-q", "-f", "main"]);
    std::fs::remove_file(hub.env.repo.join(".atelier/gate_key")).expect("remove");
    let n = hub.run(BOT, &["submit", &id, "--json"]).ok().json()["pull"]
        .as_u64()
        .expect("pull");
    hub.approve(n, "alice", &[]).ok();
    let (code, v) = hub.gate(n);
    assert_eq!(code, 1);
    assert_eq!(crate::support::unmet(&v), ["E_RESERVED_PATH"], "{v:#}");
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(1);
    assert!(merge.stdout.contains("E_RESERVED_PATH"), "{merge:?}");
    assert_eq!(hub.emu.pull(n)["merged"], false);
    assert_eq!(
        std::fs::read_to_string(hub.env.gate_key()).expect("the gate key"),
        key_before
    );
    assert!(!hub.env.repo.join(".atelier/gate_key").exists());
}

// Issue 8, the anchors on GitHub: the merge commit GitHub lands carries the ledger checkpoint,
// so a remote ledger rewound behind it is reported by any auditor, even from a fresh clone, and
// a clone that verified the longer ledger refuses to take in the shorter one.
#[test]
fn a_remote_ledger_rewound_behind_a_merge_is_a_rollback() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    let merged = hub
        .run(BOT, &["merge", "--pr", &n.to_string(), "--json"])
        .ok()
        .json();
    let commit = merged["commit"].as_str().expect("commit").to_string();
    let message = hub.env.git(&["log", "-1", "--format=%B", &commit]);
    assert!(message.contains("Atelier-Ledger: "), "{message}");
    // An approver's clone takes in (and remembers) the ledger as it is after the merge.
    let approver = hub.clone_remote("approver");
    hub.run_in(&approver, "bob-token", &["gate", "--pr", &n.to_string()]);
    assert!(hub
        .env
        .atelier_in(&approver, &["audit", "log"])
        .ok()
        .stdout
        .contains("merged as"));
    // Someone with push access rewinds the remote ledger to before the merge.
    let dir = hub.auditor_clone();
    hub.git_in(
        &dir,
        &[
            "push",
            "-q",
            "-f",
            "origin",
            "refs/atelier/ledger~3:refs/atelier/ledger",
        ],
    );
    let fresh = hub.auditor_clone();
    let run = hub.env.atelier_in(&fresh, &["audit", "verify"]).code(1);
    assert!(run.stdout.contains("E_LEDGER_ROLLBACK"), "{}", run.stdout);
    // The approver's clone, handed the rewound ledger, refuses it.
    hub.git_in(&approver, &["update-ref", "-d", "refs/atelier/ledger"]);
    let again = hub.run_in(
        &approver,
        "bob-token",
        &["approve", "--pr", &n.to_string(), "--payload"],
    );
    assert_eq!(again.code, 1, "{again:?}");
    assert!(
        again.stderr.contains("E_LEDGER_ROLLBACK"),
        "{}",
        again.stderr
    );
}

/// GitHub: a merge whose answer was lost (the merge landed, `merge-requested` is recorded but
/// not concluded) looks like a failed merge to the operator. `close` must not then record
/// `closed`: that ends the standing request (`unconcluded_request`), so the next `merge`
/// raises a false `E_MERGED_OUTSIDE_GATE` alarm, and `audit verify` reports the approved merge
/// as `E_UNLEDGERED_COMMIT`, for good. `close` already asks GitHub (`withdraw`) but only skips
/// the closing when the pull request is not open; it should refuse (E_NOT_OPEN, "merged on the
/// forge: run `atelier merge` to conclude it") before recording anything.
#[test]
fn on_github_close_after_a_lost_merge_answer_does_not_turn_the_merge_into_an_alarm() {
    let hub = Hub::new();
    let n = hub.submitted();
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.emu.inject(Fault::MergeThenFail { then: 4 });
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).code(2);
    assert_eq!(hub.emu.pull(n)["merged"], true);
    let close = hub.run(BOT, &["close", "1", "--reason", "merge failed, giving up"]);
    let merge = hub.run(BOT, &["merge", "--pr", &n.to_string()]);
    let audit = hub.auditor_clone();
    let verify = hub.env.atelier_in(&audit, &["audit", "verify"]);
    assert!(
        close.code == 1 && merge.code == 0 && verify.code == 0,
        "close: {close:?}\nmerge: {merge:?}\naudit: {verify:?}"
    );
}

/// Whoever can write the gate clone's `.git/` plants hooks and a file monitor, to run as the
/// operator the next time the gate fetches or pushes: the gate's own git runs none of them
/// while approving and merging.
#[test]
fn the_gate_s_fetches_and_pushes_run_no_hook_or_monitor_of_the_clone() {
    let hub = Hub::new();
    // (Planted once the proposal is made: the test's own `git diff` and `git reset` would run
    // them. Approving and merging fetch the pull request and push the ledger.)
    let n = hub.submitted();
    let ran = hub.env.tmp.path().join("planted-ran");
    let hooks = hub.env.repo.join(".git/hooks");
    std::fs::create_dir_all(&hooks).expect("hooks");
    for hook in [
        "pre-push",
        "reference-transaction",
        "post-checkout",
        "post-merge",
        "pre-auto-gc",
        "fsmonitor-watchman",
    ] {
        let path = hooks.join(hook);
        std::fs::write(
            &path,
            format!("#!/bin/sh\necho {hook} >> '{}'\n", ran.display()),
        )
        .expect("hook");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    hub.env.git(&[
        "config",
        "core.fsmonitor",
        &format!("echo fsmonitor >> '{}'; false", ran.display()),
    ]);
    hub.approve(n, "alice", &[]).ok();
    hub.approve(n, "bob", &[]).ok();
    hub.run(BOT, &["merge", "--pr", &n.to_string()]).ok();
    assert_eq!(hub.emu.pull(n)["merged"], true);
    assert!(
        !ran.exists(),
        "ran: {}",
        std::fs::read_to_string(&ran).unwrap_or_default()
    );
}
