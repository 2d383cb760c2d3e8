//! `audit verify` and `audit show`: commits pushed past the gate, ledger entries edited, removed,
//! reordered, inserted or rolled back, and merges whose tokens do not satisfy the base policy.

use atelier::audit::ledger;
use git2::Repository;

use crate::support::ledger::{findings, force_ref};
use crate::support::Env;

#[test]
fn the_ledger_refuses_a_clock_turned_back() {
    let mut env = Env::new();
    let id = env.propose_code();
    env.now = "2026-05-15T00:00:00Z".into();
    let run = env.approve(&id, "alice").code(1);
    assert!(
        run.stderr.contains("E_CLOCK_BEHIND_LEDGER"),
        "{}",
        run.stderr
    );
}

// Break 7 in the audit: a gate-key holder lands a merge whose tokens include the proposer's own
// approval, recording it under another pull request number (where the forge's edited record
// named no proposer). Audit takes the pull request and the proposer from `proposal-opened`.
#[test]
fn audit_takes_the_proposer_and_pull_request_from_the_ledger() {
    use atelier::governance::token::{self, Payload};
    for pull in [7, 1] {
        let env = Env::new();
        env.git(&["config", "user.email", "alice@example.org"]);
        let id = env.propose_code();
        let key = atelier::workflow::read_signing_key(&env.key("alice")).expect("key");
        let text = env.atelier(&["approve", &id, "--payload"]).ok().stdout;
        let mut p = Payload::parse(&text).expect("payload");
        p.pull = pull;
        let approval = token::sign(&p, &key).to_text();
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
                &format!("Merge proposal {id}\n\nAtelier-Proposal: {id}\n\n{approval}"),
                &repo.find_tree(tree).expect("tree"),
                &[
                    &repo.find_commit(base).expect("c"),
                    &repo.find_commit(head).expect("c"),
                ],
            )
            .expect("commit");
        repo.reference("refs/heads/main", commit, true, "force")
            .expect("ref");
        let gate = atelier::workflow::read_signing_key(&env.gate_key()).expect("key");
        let event = ledger::Event::Merged(ledger::MergeRecord {
            proposal: id.clone(),
            pull,
            commit: commit.to_string(),
            base: base.to_string(),
            head: head.to_string(),
            tree: tree.to_string(),
        });
        ledger::append(&repo, "local/repo", vec![event], 1_795_946_400, &gate).expect("append");
        let f = findings(&env, &env.repo);
        let expected = if pull == 7 {
            "E_MERGE_MISMATCH"
        } else {
            "E_MERGE_NOT_APPROVED"
        };
        assert_eq!(f, [expected], "pull {pull}");
    }
}

// A history grafted onto a new adoption commit (the old branch as a second parent, the vetoed
// change in its tree) with the ledger deleted: the clone is not the repository it was, and this
// machine says so, live and in audit.
#[test]
fn a_history_grafted_onto_a_new_adoption_commit_is_refused() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    let vetoed = env.propose(
        &[("src/lib.rs", "pub fn answer() -> u32 {\n    666\n}\n")],
        "Evil",
    );
    env.reject(&vetoed, "bob").ok();
    env.atelier(&["audit", "verify"]).ok();
    // The attacker grafts: first parent the commit before adoption, second parent main, with the
    // vetoed change's tree; then deletes the ledger.
    let initial = env
        .git(&["rev-list", "--max-parents=0", "main"])
        .trim()
        .to_string();
    let tree = env.git(&["rev-parse", &format!("atelier/proposals/{vetoed}^{{tree}}")]);
    let graft = env.git(&[
        "commit-tree",
        tree.trim(),
        "-p",
        &initial,
        "-p",
        "main",
        "-m",
        "graft",
    ]);
    force_ref(&env, "refs/heads/main", graft.trim());
    env.git(&["update-ref", "-d", ledger::REF]);
    let f = findings(&env, &env.repo);
    assert!(f.contains(&"E_ADOPTION_MISMATCH".to_string()), "{f:?}");
    let patch = env.patch(&[("README.md", "# routine\n")]);
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Routine",
        ])
        .code(1);
    assert!(run.stderr.contains("E_ADOPTION_MISMATCH"), "{}", run.stderr);
}

/// A repository with two merged proposals and one closed.
fn history() -> Env {
    let env = Env::new();
    let a = env.propose_code();
    env.approve(&a, "alice").ok();
    env.atelier(&["merge", &a]).ok();
    let b = env.propose(&[("README.md", "# demo\n\nsecond\n")], "Readme");
    env.approve(&b, "bob").ok();
    env.atelier(&["merge", &b]).ok();
    let c = env.propose(&[("README.md", "# nope\n")], "Rejected idea");
    env.atelier(&["close", &c, "--reason", "not wanted"]).ok();
    env.atelier(&["audit", "verify"]).ok();
    env
}

fn codes(env: &Env) -> Vec<String> {
    let run = env.atelier(&["audit", "verify", "--json"]).code(1);
    let v = run.json();
    v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code").to_string())
        .collect()
}

/// Rewrites the ledger's entries with `edit`, keeping the signed checkpoint, as an attacker
/// without the gate key would.
fn tamper(env: &Env, edit: impl Fn(&mut Vec<String>)) {
    let repo = Repository::open(&env.repo).expect("open");
    let snap = ledger::read(&repo).expect("read").expect("a ledger");
    let mut lines = snap.lines.clone();
    edit(&mut lines);
    let mut text = lines.join("\n");
    text.push('\n');
    let old = repo.find_commit(snap.commit).expect("commit");
    let mut entries = repo.treebuilder(None).expect("tb");
    entries
        .insert(
            "00000000.jsonl",
            repo.blob(text.as_bytes()).expect("blob"),
            0o100644,
        )
        .expect("insert");
    let entries = entries.write().expect("write");
    let mut root = repo
        .treebuilder(Some(&old.tree().expect("tree")))
        .expect("tb");
    root.insert("entries", entries, 0o040000).expect("insert");
    let tree = repo.find_tree(root.write().expect("write")).expect("tree");
    let sig = git2::Signature::now("mallory", "mallory@example.org").expect("sig");
    let c = repo
        .commit(None, &sig, &sig, "tidy up", &tree, &[&old])
        .expect("commit");
    repo.reference(ledger::REF, c, true, "tamper").expect("ref");
}

#[test]
fn a_commit_pushed_straight_to_main_is_flagged_with_sha_and_author() {
    let env = history();
    env.write("src/lib.rs", "pub fn answer() -> u32 {\n    7\n}\n");
    env.git(&[
        "-c",
        "user.name=Eve",
        "-c",
        "user.email=eve@example.org",
        "commit",
        "-q",
        "-am",
        "hotfix",
    ]);
    let sha = env.git(&["rev-parse", "HEAD"]);
    let run = env.atelier(&["audit", "verify"]).code(1);
    assert!(run.stdout.contains("E_UNLEDGERED_COMMIT"), "{}", run.stdout);
    assert!(
        run.stdout.contains(sha.trim()) && run.stdout.contains("Eve <eve@example.org>"),
        "{}",
        run.stdout
    );
}

#[test]
fn an_edited_ledger_entry_is_flagged() {
    let env = history();
    tamper(&env, |l| {
        l[1] = l[1].replace("Fix the answer", "Fix the answer (harmless)")
    });
    let c = codes(&env);
    assert!(c.contains(&"E_LEDGER_ROOT_MISMATCH".to_string()), "{c:?}");
    assert!(
        c.contains(&"E_LEDGER_INCONSISTENT".to_string()),
        "earlier checkpoints disagree too: {c:?}"
    );
}

#[test]
fn a_removed_ledger_entry_is_flagged() {
    let env = history();
    tamper(&env, |l| {
        l.remove(3);
    });
    let c = codes(&env);
    assert!(
        c.contains(&"E_LEDGER_SEQUENCE".to_string())
            && c.contains(&"E_LEDGER_SIZE_MISMATCH".to_string()),
        "{c:?}"
    );
}

#[test]
fn reordered_ledger_entries_are_flagged() {
    let env = history();
    tamper(&env, |l| l.swap(2, 3));
    let c = codes(&env);
    assert!(
        c.contains(&"E_LEDGER_SEQUENCE".to_string())
            && c.contains(&"E_LEDGER_ROOT_MISMATCH".to_string()),
        "{c:?}"
    );
}

#[test]
fn an_inserted_or_truncated_ledger_is_flagged() {
    let env = history();
    tamper(&env, |l| {
        let forged = l[2].clone();
        l.insert(2, forged);
    });
    assert!(codes(&env).contains(&"E_LEDGER_SIZE_MISMATCH".to_string()));
    let env = history();
    tamper(&env, |l| {
        l.pop();
    });
    let c = codes(&env);
    assert!(c.contains(&"E_LEDGER_SIZE_MISMATCH".to_string()), "{c:?}");
}

#[test]
fn a_ledger_rolled_back_to_an_older_checkpoint_leaves_merges_unledgered() {
    let env = history();
    let repo = Repository::open(&env.repo).expect("open");
    let tip = repo.refname_to_id(ledger::REF).expect("ledger");
    let mut c = repo.find_commit(tip).expect("commit");
    for _ in 0..6 {
        c = c.parent(0).expect("parent");
    }
    repo.reference(ledger::REF, c.id(), true, "rollback")
        .expect("ref");
    assert!(codes(&env).contains(&"E_UNLEDGERED_COMMIT".to_string()));
}

#[test]
fn a_recorded_merge_whose_tokens_do_not_satisfy_the_base_policy_is_flagged() {
    // A gate operator (holding the gate key) lands and records a merge nobody approved.
    let env = Env::new();
    let id = env.propose_code();
    let repo = Repository::open(&env.repo).expect("open");
    let base = repo.refname_to_id("refs/heads/main").expect("main");
    let head = repo
        .refname_to_id("refs/heads/atelier/proposals/1")
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
            "Merge proposal 1\n\nAtelier-Proposal: 1\n",
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
        proposal: id,
        pull: 1,
        commit: commit.to_string(),
        base: base.to_string(),
        head: head.to_string(),
        tree: tree.to_string(),
    });
    ledger::append(&repo, "local/repo", vec![event], 1_795_946_400, &key).expect("append");
    let c = codes(&env);
    assert_eq!(c, ["E_MERGE_NOT_APPROVED"]);
}

#[test]
fn a_fresh_clone_verifies_once_the_ledger_ref_is_fetched() {
    let env = history();
    let clone = env.tmp.path().join("clone");
    env.git(&[
        "clone",
        "-q",
        env.repo.to_str().expect("utf8"),
        clone.to_str().expect("utf8"),
    ]);
    let run = env.atelier_in(&clone, &["audit", "verify"]).code(1);
    // Without the ledger nothing is accounted for: the audit fails on the missing ledger,
    // and accuses no merge of bypassing the gate on the strength of an absent record.
    assert!(run.stdout.contains("E_LEDGER_MISSING"), "{}", run.stdout);
    assert!(
        !run.stdout.contains("E_UNLEDGERED_COMMIT"),
        "{}",
        run.stdout
    );
    env.command("git")
        .current_dir(&clone)
        .args([
            "fetch",
            "-q",
            "origin",
            "refs/atelier/ledger:refs/atelier/ledger",
        ])
        .status()
        .expect("fetch");
    let run = env.atelier_in(&clone, &["audit", "verify"]).ok();
    assert!(
        run.stdout.contains("merges verified:      2"),
        "{}",
        run.stdout
    );
}

#[test]
fn audit_show_tells_one_proposals_story() {
    let env = history();
    let run = env.atelier(&["audit", "show", "1"]).ok();
    assert!(
        run.stdout.contains("approve by alice@example.org"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("merge commit: ") && !run.stdout.contains("not merged"),
        "{}",
        run.stdout
    );
    let v = env.atelier(&["audit", "show", "3", "--json"]).ok().json();
    assert_eq!(v["merge_commit"], serde_json::Value::Null);
    let log = env.atelier(&["audit", "log", "--json"]).ok().json();
    assert_eq!(log[0]["kind"], "adopted");
    env.atelier(&["audit", "show", "99"]).code(2);
}

#[test]
fn a_pinned_adoption_point_catches_a_rewritten_root() {
    let env = history();
    let adoption = env.atelier(&["audit", "verify", "--json"]).ok().json()["adoption"]
        .as_str()
        .expect("sha")
        .to_string();
    env.atelier(&["audit", "verify", "--adoption", &adoption[..12]])
        .ok();
    let run = env
        .atelier(&["audit", "verify", "--adoption", "0123456789abcdef"])
        .code(1);
    assert!(run.stdout.contains("E_ADOPTION_MISMATCH"), "{}", run.stdout);
}

#[test]
fn changed_paths_agree_with_git_diff() {
    let env = Env::new();
    env.write("src/deep/a/b.rs", "1\n");
    env.write("docs/x.md", "x\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "more files"]);
    let before = env.git(&["rev-parse", "HEAD"]);
    env.git(&["rm", "-q", "-r", "docs"]);
    env.write("docs", "now a file\n");
    env.write("src/deep/a/c.rs", "2\n");
    env.write("src/lib.rs", "changed\n");
    env.git(&["mv", "README.md", "READ.md"]);
    env.git(&["add", "-A"]);
    env.git(&["update-index", "--chmod=+x", "src/deep/a/b.rs"]);
    env.git(&["commit", "-q", "-m", "reshape"]);
    let after = env.git(&["rev-parse", "HEAD"]);
    let reference = env.git(&[
        "diff",
        "--no-renames",
        "--name-only",
        before.trim(),
        after.trim(),
    ]);
    let repo = Repository::open(&env.repo).expect("open");
    let old = repo
        .find_commit(git2::Oid::from_str(before.trim()).expect("oid"))
        .expect("c")
        .tree()
        .expect("t");
    let new = repo
        .find_commit(git2::Oid::from_str(after.trim()).expect("oid"))
        .expect("c")
        .tree()
        .expect("t");
    let ours = atelier::git::changed_paths(&repo, &old, &new).expect("paths");
    let mut theirs: Vec<String> = reference.lines().map(str::to_string).collect();
    theirs.sort();
    assert_eq!(ours, theirs);
}

/// An auditor's fresh clone: without the ledger it says the ledger is missing (and how to
/// fetch it) rather than accusing every merge; with nothing checked out it says so rather than
/// "run atelier init"; with the ledger, `proposals` and `show` read what the ledger records.
#[test]
fn an_auditor_s_clone_gets_the_right_advice_and_the_ledger_s_proposals() {
    let env = history();
    // Merged proposals say who approved them (from their merge commits).
    let here = env.atelier(&["proposals"]).ok().stdout;
    let row = |list: &str, title: &str| {
        list.lines()
            .find(|l| l.contains(title))
            .unwrap_or_else(|| panic!("no {title}: {list}"))
            .to_string()
    };
    let readme = row(&here, "Readme");
    assert!(
        readme.contains("merged") && readme.contains("Readme (approved by bob@example.org)"),
        "{here}"
    );
    assert!(
        !row(&here, "Rejected idea").contains("approved by"),
        "{here}"
    );
    let clone = env.tmp.path().join("auditor");
    env.git(&[
        "clone",
        "-q",
        env.repo.to_str().expect("utf8"),
        clone.to_str().expect("utf8"),
    ]);
    let git_in = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&clone)
            .args(args)
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let run = env
        .atelier_in(&clone, &["audit", "verify", "--json"])
        .code(1);
    let v = run.json();
    let found: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    assert_eq!(
        found,
        ["E_LEDGER_MISSING"],
        "no accusation without a ledger: {v}"
    );
    assert!(
        v["findings"][0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("git fetch origin refs/atelier/ledger:refs/atelier/ledger")),
        "{v}"
    );
    git_in(&[
        "fetch",
        "-q",
        "origin",
        "refs/atelier/ledger:refs/atelier/ledger",
    ]);
    env.atelier_in(&clone, &["audit", "verify"]).ok();
    let list = env.atelier_in(&clone, &["proposals"]).ok().stdout;
    assert!(
        row(&list, "Readme").contains("(approved by bob@example.org)"),
        "{list}"
    );
    assert!(
        list.contains("the ledger records these")
            && list.contains("merged")
            && list.contains("Rejected idea")
            && list.contains("closed"),
        "{list}"
    );
    let show = env.atelier_in(&clone, &["show", "1"]).ok();
    assert!(
        show.stderr.contains("not in this clone's local forge")
            && show.stdout.contains("proposal-opened"),
        "{}\n{}",
        show.stdout,
        show.stderr
    );
    // The merge commit is in the clone: what it changed is shown, as the approvers saw it.
    let show = env.atelier_in(&clone, &["show", "2"]).ok();
    assert!(
        show.stdout.contains("what merge commit ")
            && show.stdout.contains("modified  README.md")
            && show.stdout.contains("+second"),
        "{}",
        show.stdout
    );
    // HEAD naming a branch that does not exist: what to check out, not `atelier init`.
    git_in(&["symbolic-ref", "HEAD", "refs/heads/master"]);
    std::fs::remove_file(clone.join("atelier.toml")).expect("rm");
    let lost = env.atelier_in(&clone, &["audit", "verify"]).code(2);
    assert!(
        lost.stderr
            .contains("HEAD names the branch `master`, which does not exist")
            && lost.stderr.contains("git checkout main")
            && !lost.stderr.contains("run `atelier init`"),
        "{}",
        lost.stderr
    );
}
