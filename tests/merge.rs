//! Merges happen only for the approved head and tree, atomically, once.

use std::process::Stdio;

use crate::support::{bin, Env};

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
