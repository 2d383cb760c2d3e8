//! `merge`: lands a satisfied proposal once (concurrent merges, compare-and-swap), the tree
//! `git merge-tree` would, never over local work, and never what the gate refuses.

use std::process::Stdio;

use atelier::audit::ledger;
use git2::Repository;

use crate::support::ledger::{entries, findings, force_ref, fresh_clone};
use crate::support::{bin, unmet, Env};

#[test]
fn a_valid_quorum_merges_and_the_audit_passes() {
    let env = Env::new();
    let id = env.propose_code();
    let token = env.approve(&id, "alice").ok().stdout;
    assert!(
        token.starts_with("atelier-approval 1\nrepository local/repo\nproposal 1\npull 1\n"),
        "{token}"
    );
    let (code, v) = env.gate(&id);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["approvers"], serde_json::json!(["alice@example.org"]));
    let merged = env.atelier(&["merge", &id, "--json"]).ok().json();
    let commit = merged["commit"].as_str().expect("commit");
    assert_eq!(env.git(&["rev-parse", "main"]).trim(), commit);
    assert_eq!(
        env.git(&["rev-parse", &format!("{commit}^1")]).trim(),
        v["base"].as_str().expect("base")
    );
    assert_eq!(
        env.git(&["rev-parse", &format!("{commit}^2")]).trim(),
        v["head"].as_str().expect("head")
    );
    assert_eq!(
        env.git(&["rev-parse", &format!("{commit}^{{tree}}")])
            .trim(),
        v["merge_tree"].as_str().expect("tree")
    );
    let message = env.git(&["log", "-1", "--format=%B", commit]);
    assert!(
        message.contains("Atelier-Proposal: 1")
            && message.contains("-----BEGIN SSH SIGNATURE-----"),
        "{message}"
    );
    assert!(
        env.read("src/lib.rs").contains("42"),
        "the checked-out main was updated"
    );
    assert_eq!(env.git(&["status", "--porcelain"]), "");
    env.atelier(&["audit", "verify"]).ok();
    let list = env.atelier(&["proposals", "--json"]).ok().json();
    assert_eq!(list[0]["state"], "merged");
}

#[test]
fn the_merge_tree_matches_git_merge_tree() {
    let env = Env::new();
    let id = env.propose_code();
    // Move main with an unrelated approved change so the merge is a real three-way merge.
    let other = env.propose(&[("README.md", "# demo\n\nsecond\n")], "Readme");
    env.approve(&other, "alice").ok();
    env.atelier(&["merge", &other]).ok();
    let (_, v) = env.gate(&id);
    let reference = env.git(&["merge-tree", "--write-tree", "main", "atelier/proposals/1"]);
    assert_eq!(v["merge_tree"].as_str().expect("tree"), reference.trim());
}

#[test]
fn merge_refuses_when_the_gate_does_and_changes_nothing() {
    let env = Env::new();
    let id = env.propose_code();
    let before = env.git(&["rev-parse", "main"]);
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stdout.contains("E_QUORUM_NOT_MET"), "{}", run.stdout);
    assert_eq!(env.git(&["rev-parse", "main"]), before);
}

fn concurrent_merges(env: &Env, ids: &[&str]) -> Vec<i32> {
    let children: Vec<_> = ids
        .iter()
        .map(|id| {
            env.command(bin())
                .args(["-C", env.repo.to_str().expect("utf8"), "merge", id])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn")
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            c.wait_with_output()
                .expect("wait")
                .status
                .code()
                .unwrap_or(-1)
        })
        .collect()
}

#[test]
fn concurrent_merges_of_one_proposal_land_exactly_once() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let base = env.git(&["rev-parse", "main"]);
    let codes = concurrent_merges(&env, &[&id, &id, &id, &id]);
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    assert!(codes.iter().all(|c| *c == 0 || *c == 1), "{codes:?}");
    assert_eq!(
        env.git(&["rev-parse", "main^1"]),
        base,
        "one merge on top of the base"
    );
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn concurrent_merges_of_two_proposals_on_one_base_let_one_win() {
    let env = Env::new();
    let a = env.propose_code();
    let b = env.propose(&[("README.md", "# demo\n\nother\n")], "Readme");
    env.approve(&a, "alice").ok();
    env.approve(&b, "alice").ok();
    let codes = concurrent_merges(&env, &[&a, &b]);
    assert_eq!(codes.iter().filter(|c| **c == 0).count(), 1, "{codes:?}");
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn the_branch_moves_only_by_compare_and_swap() {
    // The primitive itself: a swap from a stale expected value fails and moves nothing.
    let env = Env::new();
    let repo = git2::Repository::open(&env.repo).expect("open");
    let tip = repo.refname_to_id("refs/heads/main").expect("tip");
    let parent = repo
        .find_commit(tip)
        .expect("commit")
        .parent_id(0)
        .expect("parent");
    let moved = atelier::git::compare_and_swap(&repo, "refs/heads/main", parent, parent, "test")
        .expect("cas");
    assert!(!moved);
    assert_eq!(repo.refname_to_id("refs/heads/main").expect("tip"), tip);
    assert!(
        atelier::git::compare_and_swap(&repo, "refs/heads/main", tip, parent, "test").expect("cas")
    );
}

#[test]
fn a_merge_never_overwrites_local_work_in_the_checkout() {
    let env = Env::new();
    let id = env.propose(&[("notes.txt", "from the proposal\n")], "Add notes");
    env.approve(&id, "alice").ok();
    env.write("notes.txt", "my own untracked notes\n");
    let run = env.atelier(&["merge", &id]).ok();
    assert!(run.stderr.contains("left as they were"), "{}", run.stderr);
    assert_eq!(env.read("notes.txt"), "my own untracked notes\n");
    assert_eq!(env.git(&["show", "main:notes.txt"]), "from the proposal\n");
}

#[test]
fn merging_a_merged_proposal_again_says_it_is_already_merged_with_its_commit() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    let merged = env.git(&["rev-parse", "main"]).trim().to_string();
    let again = env.atelier(&["merge", &id]).code(1);
    assert!(
        again
            .stderr
            .contains(&format!("proposal {id} is already merged, as {merged}")),
        "{}",
        again.stderr
    );
    assert!(again.stdout.is_empty(), "no gate dump: {}", again.stdout);
}

// Break 1: an aborted merge fast-forwarded by hand after a veto.
#[test]
fn a_vetoed_change_cannot_land_through_an_aborted_merge() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    // A stale lock makes the merge's compare-and-swap fail after `merge-started`.
    let lock = env.repo.join(".git/refs/heads/main.lock");
    std::fs::write(&lock, "").expect("lock");
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stderr.contains("E_BASE_MOVED"), "{}", run.stderr);
    std::fs::remove_file(&lock).expect("unlock");
    env.reject(&id, "bob").ok();
    let aborted = entries(&env)
        .into_iter()
        .find(|e| e["kind"] == "merge-aborted")
        .expect("a merge-aborted entry");
    let commit = aborted["commit"].as_str().expect("commit").to_string();
    // The attacker fast-forwards main to the commit the gate built but never landed.
    force_ref(&env, "refs/heads/main", &commit);
    let f = findings(&env, &env.repo);
    assert!(f.contains(&"E_ABORTED_MERGE_LANDED".to_string()), "{f:?}");
    // A fresh clone sees the same.
    let clone = fresh_clone(&env, "fresh");
    let f = findings(&env, &clone);
    assert!(f.contains(&"E_ABORTED_MERGE_LANDED".to_string()), "{f:?}");
}

// Break 4: a gate-key holder rewinds main past a completed merge and appends `merge-aborted`.
#[test]
fn a_completed_merge_cannot_be_hidden_by_a_later_abort() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    let merged = entries(&env)
        .into_iter()
        .find(|e| e["kind"] == "merged")
        .expect("merged");
    let commit = merged["commit"].as_str().expect("commit").to_string();
    force_ref(&env, "refs/heads/main", &format!("{commit}^1"));
    let repo = Repository::open(&env.repo).expect("open");
    let key = atelier::workflow::read_signing_key(&env.gate_key()).expect("key");
    let event = ledger::Event::MergeAborted {
        proposal: id,
        commit,
        reason: "never happened".into(),
    };
    ledger::append(&repo, "local/repo", vec![event], 1_795_946_400, &key).expect("append");
    let f = findings(&env, &env.repo);
    assert!(f.contains(&"E_LEDGER_CONTRADICTION".to_string()), "{f:?}");
    assert!(f.contains(&"E_MERGE_NOT_ON_BRANCH".to_string()), "{f:?}");
}

/// A patch (against main) that adds files git ignores, made with `git add -f`.
fn forced_patch(env: &Env, files: &[(&str, &str)]) -> std::path::PathBuf {
    for (rel, text) in files {
        env.write(rel, text);
        env.git(&["add", "-f", rel]);
    }
    let diff = env.git(&["diff", "--cached", "--binary"]);
    for (rel, _) in files {
        env.git(&["rm", "-q", "--cached", rel]);
    }
    env.file("reserved.patch", &diff)
}

// Break 6: one approval overwrites the gate's private state.
#[test]
fn a_change_under_dot_atelier_is_refused_and_never_checked_out() {
    let env = Env::new();
    let key_before = std::fs::read_to_string(env.gate_key()).expect("the gate key");
    let patch = forced_patch(&env, &[(".atelier/gate_key", "attacker's key\n")]);
    std::fs::remove_file(env.repo.join(".atelier/gate_key")).expect("remove");
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Sneaky",
        ])
        .code(1);
    assert!(run.stderr.contains("E_RESERVED_PATH"), "{}", run.stderr);
    // The attacker adds the file to an honest proposal's branch by hand instead; an approver
    // signs the branch as it is.
    let id = env.propose_code();
    let repo = Repository::open(&env.repo).expect("open");
    let branch = format!("refs/heads/atelier/proposals/{id}");
    let head = repo
        .find_commit(repo.refname_to_id(&branch).expect("head"))
        .expect("commit");
    let mut tb = repo
        .treebuilder(Some(&head.tree().expect("tree")))
        .expect("tb");
    let mut dir = repo.treebuilder(None).expect("tb");
    dir.insert(
        "gate_key",
        repo.blob(b"attacker's key\n").expect("blob"),
        0o100644,
    )
    .expect("insert");
    tb.insert(".Atelier", dir.write().expect("dir"), 0o040000)
        .expect("insert");
    let mut dir = repo.treebuilder(None).expect("tb");
    dir.insert(
        "gate_key",
        repo.blob(b"attacker's key\n").expect("blob"),
        0o100644,
    )
    .expect("insert");
    tb.insert(".atelier", dir.write().expect("dir"), 0o040000)
        .expect("insert");
    let tree = repo.find_tree(tb.write().expect("tree")).expect("tree");
    let sig = git2::Signature::now("mallory", "mallory@example.org").expect("sig");
    let evil = repo
        .commit(Some(&branch), &sig, &sig, "tweak", &tree, &[&head])
        .expect("commit");
    assert_eq!(repo.refname_to_id(&branch).expect("moved"), evil);
    env.approve(&id, "alice").ok();
    let run = env.atelier(&["merge", &id, "--json"]).code(1);
    let v = run.json();
    assert_eq!(unmet(&v), ["E_RESERVED_PATH"], "{v:#}");
    assert!(
        v.to_string().contains(".atelier/gate_key") && v.to_string().contains(".Atelier/gate_key"),
        "{v:#}"
    );
    assert_eq!(
        std::fs::read_to_string(env.gate_key()).expect("the gate key"),
        key_before
    );
    assert!(!env.repo.join(".atelier/gate_key").exists());
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn a_merge_never_overwrites_an_ignored_file_in_the_checkout() {
    let env = Env::new();
    env.write(".git/info/exclude", "local.cfg\n");
    env.write("local.cfg", "mine\n");
    let patch = forced_patch(&env, &[("local.cfg", "theirs\n")]);
    env.write("local.cfg", "mine\n");
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Add local.cfg",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    env.approve(&id, "alice").ok();
    let run = env.atelier(&["merge", &id]).ok();
    assert!(run.stderr.contains("left as they were"), "{}", run.stderr);
    assert_eq!(env.read("local.cfg"), "mine\n");
}

/// Proposes `patch` and returns the id.
fn propose_patch(env: &Env, patch: &std::path::Path, title: &str) -> String {
    env.atelier(&[
        "propose",
        "--patch",
        patch.to_str().expect("utf8"),
        "--title",
        title,
    ])
    .ok()
    .stdout
    .trim()
    .to_string()
}

// A merge must never write through a link in the checkout: first a link is merged, then a change
// that turns it into a file. Both the gate key and a file outside the repository stay.
#[test]
fn a_merge_never_writes_through_a_link_in_the_checkout() {
    let env = Env::new();
    let outside = env.tmp.path().join("victim.txt");
    std::fs::write(&outside, "ORIGINAL\n").expect("write");
    let key_before = std::fs::read_to_string(env.gate_key()).expect("the gate key");
    for (link, target) in [
        ("o", outside.to_str().expect("utf8").to_string()),
        ("k", env.gate_key().to_str().expect("utf8").to_string()),
    ] {
        std::os::unix::fs::symlink(&target, env.repo.join(link)).expect("symlink");
        env.git(&["add", link]);
        let diff = env.git(&["diff", "--cached", "--binary"]);
        env.git(&["reset", "-q", "--hard"]);
        let patch = env.file(&format!("link-{link}.patch"), &diff);
        let id = propose_patch(&env, &patch, "A link");
        env.approve(&id, "alice").ok();
        env.atelier(&["merge", &id]).ok();
        // The link is now tracked and checked out; the next change makes it a file.
        let blob = {
            let p = env.file("pwned", "PWNED\n");
            env.git(&["hash-object", "-w", p.to_str().expect("utf8")])
        };
        let index = env.tmp.path().join("other-index");
        let with_index = |args: &[&str]| {
            let out = env
                .command("git")
                .env("GIT_INDEX_FILE", &index)
                .args(args)
                .output()
                .expect("git");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        };
        with_index(&["read-tree", "main"]);
        with_index(&[
            "update-index",
            "--cacheinfo",
            &format!("100644,{},{link}", blob.trim()),
        ]);
        let tree = with_index(&["write-tree"]);
        let diff = env.git(&["diff", "--binary", "main", &tree]);
        let patch = env.file(&format!("file-{link}.patch"), &diff);
        let id = propose_patch(&env, &patch, "A file");
        env.approve(&id, "alice").ok();
        let run = env.atelier(&["merge", &id]).ok();
        assert!(run.stderr.contains("left as they were"), "{}", run.stderr);
    }
    assert_eq!(
        std::fs::read_to_string(&outside).expect("read"),
        "ORIGINAL\n"
    );
    assert_eq!(
        std::fs::read_to_string(env.gate_key()).expect("the gate key"),
        key_before
    );
    assert!(!env.repo.join(".atelier/gate_key").exists());
    env.atelier(&["audit", "verify"]).ok();
}

// `core.worktree` in `.git/config`, or a `.git` file pointing at a git directory elsewhere (both
// writable by anyone who can write the clone), would move atelier's view of the clone, and the
// path this machine remembers it by: refused.
#[test]
fn a_working_tree_moved_by_core_worktree_is_refused() {
    let env = Env::new();
    let id = env.propose_code();
    let elsewhere = env.tmp.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("mkdir");
    env.git(&["config", "core.worktree", elsewhere.to_str().expect("utf8")]);
    let run = env.atelier(&["gate", &id]).code(1);
    assert!(run.stderr.contains("E_WORKTREE_MOVED"), "{}", run.stderr);
    let run = env.atelier(&["audit", "verify"]).code(1);
    assert!(run.stderr.contains("E_WORKTREE_MOVED"), "{}", run.stderr);
    env.git(&["config", "--unset", "core.worktree"]);
    env.atelier(&["audit", "verify"]).ok();
    // The same through a .git file pointing at a git directory in a subdirectory.
    let w = env.repo.join("w");
    std::fs::create_dir_all(&w).expect("mkdir");
    std::fs::rename(env.repo.join(".git"), w.join(".git")).expect("mv");
    std::fs::write(
        env.repo.join(".git"),
        format!("gitdir: {}\n", w.join(".git").display()),
    )
    .expect("gitfile");
    let run = env.atelier(&["audit", "verify"]).code(1);
    assert!(run.stderr.contains("E_WORKTREE_MOVED"), "{}", run.stderr);
}

/// A head can be made to have two merge bases with the protected branch (a criss-cross: its
/// parents are two merged proposals' heads). The change it lands is then judged against the
/// merge of both, while a diff from one of them can hide a revert. `show` prints what would
/// land — the protected branch against the tree `git merge-tree` computes — so the revert of
/// an earlier fix is in what the approver reads.
#[test]
fn show_prints_what_lands_even_for_a_head_with_two_merge_bases() {
    let env = Env::new();
    let first = env.propose(&[("f1.txt", "one\n")], "Add f1");
    let fix = env.propose(&[("README.md", "# demo\nSECURITY FIX\n")], "Security fix");
    for id in [&first, &fix] {
        env.approve(id, "alice").ok();
        env.atelier(&["merge", id]).ok();
    }
    let note = env.propose(&[("notes.txt", "a note\n")], "Add a note");
    // Whoever can push the proposal's branch replaces its head: parents, the two merged heads;
    // tree, the note's with README.md as the first proposal had it.
    let repo = Repository::open(&env.repo).expect("open");
    let tip = |b: &str| repo.refname_to_id(&format!("refs/heads/{b}")).expect(b);
    let (h1, h2, h3) = (
        tip("atelier/proposals/1"),
        tip("atelier/proposals/2"),
        tip("atelier/proposals/3"),
    );
    let readme = repo
        .find_commit(h1)
        .expect("h1")
        .tree()
        .expect("tree")
        .get_name("README.md")
        .expect("README.md")
        .id();
    let mut tree = repo
        .treebuilder(Some(
            &repo.find_commit(h3).expect("h3").tree().expect("tree"),
        ))
        .expect("builder");
    tree.insert("README.md", readme, 0o100644).expect("insert");
    let tree = repo.find_tree(tree.write().expect("write")).expect("tree");
    let sig = git2::Signature::now("Mallory", "mallory@example.org").expect("sig");
    let parents = [
        &repo.find_commit(h1).expect("h1"),
        &repo.find_commit(h2).expect("h2"),
    ];
    let crossed = repo
        .commit(None, &sig, &sig, "Add a note", &tree, &parents)
        .expect("commit");
    force_ref(&env, "refs/heads/atelier/proposals/3", &crossed.to_string());
    let bases = env.git(&["merge-base", "--all", "main", "atelier/proposals/3"]);
    assert_eq!(bases.lines().count(), 2, "a criss-cross: {bases}");
    // What git lands: the fix reverted.
    let lands = env.git(&["merge-tree", "--write-tree", "main", "atelier/proposals/3"]);
    let reverted = env.git(&["diff", "--name-only", "main", lands.trim()]);
    assert!(reverted.lines().any(|l| l == "README.md"), "{reverted}");
    // What the approver reads says so.
    let shown = env.atelier(&["show", &note]).ok().stdout;
    assert!(
        shown.contains("README.md") && shown.contains("-SECURITY FIX"),
        "{shown}"
    );
    // And what GitHub would show (a diff from one merge base) is not, so the gate refuses the
    // head until it has one merge base, whoever approves it.
    let refused = env.approve(&note, "alice");
    assert!(
        refused.code != 0
            && refused.stderr.contains("E_MERGE_CONFLICT")
            && refused.stderr.contains("2 merge bases"),
        "{refused:?}"
    );
    let (code, v) = env.gate(&note);
    assert_eq!(code, 1, "{v:#}");
    assert!(
        unmet(&v).contains(&"E_MERGE_CONFLICT".to_string())
            && v.to_string().contains("2 merge bases"),
        "{v:#}"
    );
    env.atelier(&["merge", &note]).code(1);
    assert!(env.read("README.md").contains("SECURITY FIX"));
}

/// A merge attribute kept only in the gate clone (`.git/info/attributes`, an uncommitted
/// `.gitattributes` in the checkout) would make the gate union-merge two edits of one line that
/// conflict for everyone else: the gate merges the commits as a clean clone does.
#[test]
fn merge_attributes_kept_only_in_the_clone_do_not_change_the_gate_s_merge() {
    let env = Env::new();
    let first = env.propose(&[("README.md", "# demo\nlimit = 10\n")], "Limit 10");
    let second = env.propose(&[("README.md", "# demo\nlimit = 99\n")], "Limit 99");
    env.approve(&first, "alice").ok();
    env.atelier(&["merge", &first]).ok();
    std::fs::create_dir_all(env.repo.join(".git/info")).expect("info");
    std::fs::write(env.repo.join(".git/info/attributes"), "* merge=union\n").expect("attributes");
    std::fs::write(env.repo.join(".gitattributes"), "* merge=union\n").expect("attributes");
    let (code, v) = env.gate(&second);
    assert_eq!(code, 1, "{v:#}");
    assert!(unmet(&v).contains(&"E_MERGE_CONFLICT".to_string()), "{v:#}");
    // A clean clone's git says the same.
    let clean = env.tmp.path().join("clean");
    env.git(&[
        "clone",
        "-q",
        "--no-local",
        env.repo.to_str().expect("utf8"),
        clean.to_str().expect("utf8"),
    ]);
    let out = std::process::Command::new("git")
        .current_dir(&clean)
        .args([
            "merge-tree",
            "--write-tree",
            "origin/main",
            "origin/atelier/proposals/2",
        ])
        .output()
        .expect("git merge-tree");
    assert_eq!(out.status.code(), Some(1), "git sees a conflict too");
    env.atelier(&["merge", &second]).code(1);
    assert!(env.read("README.md").contains("limit = 10\n"));
    assert!(!env.read("README.md").contains("limit = 99"));
}

/// Someone who can push to the protected branch but holds no listed key adds a signer of their
/// own with a commit straight to the branch, then approves their own proposal with it: the gate
/// judges by the policy of the last commit it vouches for, and counts the planted signer as a
/// constitutional change of the proposal's, so neither that token nor a single approval merges
/// it. The constitution quorum, told what the proposal carries, still can.
#[test]
fn a_signer_pushed_straight_to_the_branch_cannot_approve() {
    let env = Env::new();
    let first = env.propose_code();
    env.approve(&first, "alice").ok();
    env.atelier(&["merge", &first]).ok();
    let line = env.keygen("mallory");
    let signers = env.read("policies/allowed_signers") + &line + "\n";
    env.write("policies/allowed_signers", &signers);
    env.git(&[
        "-c",
        "user.name=Mallory",
        "-c",
        "user.email=mallory@example.org",
        "commit",
        "-q",
        "-am",
        "Add a reviewer",
    ]);
    let id = env.propose(&[("README.md", "# demo\n\nmallory was here\n")], "Readme");
    let refused = env.approve(&id, "mallory").code(1);
    assert!(
        refused.stderr.contains("E_UNKNOWN_SIGNER"),
        "{}",
        refused.stderr
    );
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1, "{v:#}");
    let unmet = unmet(&v);
    assert!(
        unmet.contains(&"E_CONSTITUTION_QUORUM".to_string()),
        "{v:#}"
    );
    assert!(
        v.to_string()
            .contains("base policy rule `constitution` (touches policies/allowed_signers)"),
        "{v:#}"
    );
    env.atelier(&["merge", &id]).code(1);
    assert!(!env.read("README.md").contains("mallory"));
    // A single listed approver is not the constitution's quorum either; both are.
    env.approve(&id, "alice").ok();
    assert_eq!(env.gate(&id).0, 1);
    env.approve(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 0, "{v:#}");
    env.atelier(&["merge", &id]).ok();
    // The audit replays the merge as the gate judged it.
    let audit = env.atelier(&["audit", "verify", "--json"]).json();
    let codes: Vec<&str> = audit["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert_eq!(codes, ["E_UNLEDGERED_COMMIT"], "{audit:#}");
}
