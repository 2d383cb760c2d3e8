//! Enforcing the panel: a block holds against edits in the proposal or the working tree, a broken
//! definition halts merges, and audit catches a merge past a block.

use git2::Repository;

use crate::panel::{landed_by_the_gate_holder, requirement};
use crate::support::{unmet, Env, Setup};

/// A repository adopted with a test in it.
fn with_test() -> Env {
    Env::with(Setup {
        files: vec![(
            "tests/answer.rs".into(),
            "#[test]\nfn answers() {\n    assert_eq!(demo::answer(), 41);\n}\n".into(),
        )],
        ..Setup::default()
    })
}

/// An agent's proposal that comments the test's assertion out.
fn weakened(env: &Env) -> String {
    let patch = env.patch(&[(
        "tests/answer.rs",
        "#[test]\nfn answers() {\n    // assert_eq!(demo::answer(), 41);\n}\n",
    )]);
    env.atelier(&[
        "propose",
        "--patch",
        patch.to_str().expect("utf8"),
        "--title",
        "Quiet the test",
        "--agent",
        "claude-code",
    ])
    .ok()
    .stdout
    .trim()
    .to_string()
}

#[test]
fn a_blocked_change_merges_only_when_the_constitution_quorum_overrules_the_panel() {
    let env = with_test();
    let id = weakened(&env);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
    let found = requirement(&v, "E_REVIEW_BLOCKED")["found"]
        .as_str()
        .expect("found");
    assert!(
        found.contains("tests-tamper") && found.contains("tests/answer.rs"),
        "{found}"
    );
    assert_eq!(v["review"]["verdict"], "block", "{v:#}");
    // The panel's verdict is recorded, bound to the change.
    let review = env.atelier(&["review", &id, "--json"]).code(1).json();
    assert_eq!(review["verdict"], "block");
    // The quorum for the path is met, but the panel still refuses: approving is not enough.
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(
        (code, unmet(&v)),
        (1, vec!["E_REVIEW_BLOCKED".to_string()]),
        "{v:#}"
    );
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stdout.contains("E_REVIEW_BLOCKED"), "{run:?}");
    // The constitution quorum (alice and bob) overrules the panel.
    env.approve(&id, "bob").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(
        v["review"]["overruled_by"],
        serde_json::json!(["alice@example.org", "bob@example.org"])
    );
    let human = env.atelier(&["gate", &id]).ok().stdout;
    assert!(
        human.contains("review panel: block") && human.contains("overruled by"),
        "{human}"
    );
    env.atelier(&["merge", &id]).ok();
    // The overrule never changes what the panel said; audit re-runs the built-ins at the
    // merge's base and accepts the overrule.
    let log = env.atelier(&["audit", "log", "--json"]).ok().json();
    let verdicts: Vec<&str> = log
        .as_array()
        .expect("entries")
        .iter()
        .filter(|e| e["kind"] == "review-recorded")
        .map(|e| e["verdict"].as_str().expect("verdict"))
        .collect();
    assert_eq!(verdicts, ["block"]);
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn editing_the_panel_in_the_proposal_or_the_working_tree_does_not_unblock_it() {
    let env = with_test();
    // A person's proposal that both weakens the test and makes tests-tamper non-blocking.
    let id = env.propose(
        &[
            (
                "tests/answer.rs",
                "#[test]\n#[ignore]\nfn answers() {\n    assert_eq!(demo::answer(), 41);\n}\n",
            ),
            (
                "reviewers/tests-tamper.toml",
                "name = \"tests-tamper\"\nflavour = \"Relaxed.\"\nkind = \"builtin:tests-tamper\"\nblocking = false\n",
            ),
        ],
        "Skip a slow test",
    );
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
    // The same edit in the working tree, and a panel folder emptied there: still the base's.
    env.write(
        "reviewers/tests-tamper.toml",
        "name = \"tests-tamper\"\nflavour = \"Relaxed.\"\nkind = \"builtin:tests-tamper\"\nblocking = false\n",
    );
    std::fs::remove_file(env.repo.join("reviewers/secrets.toml")).expect("rm");
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert!(unmet(&v).contains(&"E_REVIEW_BLOCKED".to_string()), "{v:#}");
    env.atelier(&["merge", &id]).code(1);
}

#[test]
fn a_broken_reviewer_definition_at_base_halts_merges() {
    let env = Env::new();
    // Committed by hand to main (as a bad merge would leave it): the gate fails closed.
    env.write(
        "reviewers/size.toml",
        "name = \"size\"\nflavour = \"f\"\nkind = \"builtin:size\"\nmax_lines = \"many\"\n",
    );
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "a broken reviewer"]);
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_REVIEW_INVALID"], "{v:#}");
    let found = requirement(&v, "E_REVIEW_INVALID")["found"]
        .as_str()
        .expect("found");
    assert!(
        found.contains("reviewers/size.toml") && found.contains("max_lines"),
        "{found}"
    );
    env.atelier(&["merge", &id]).code(1);
}

#[test]
fn a_gate_operator_merging_a_blocked_change_is_caught_by_audit() {
    // Alice's approval is enough for the path, not for an overrule.
    let env = with_test();
    let id = weakened(&env);
    let v = landed_by_the_gate_holder(&env, &id);
    let findings = v["findings"].as_array().expect("findings");
    assert_eq!(findings.len(), 1, "{v:#}");
    assert_eq!(findings[0]["code"], "E_MERGE_NOT_APPROVED");
    let detail = findings[0]["detail"].as_str().expect("detail");
    assert!(
        detail.contains("E_REVIEW_BLOCKED") && detail.contains("tests-tamper"),
        "{detail}"
    );
}

#[test]
fn a_symlink_where_the_panel_folder_should_be_halts_merges() {
    // Committed by hand to main: `reviewers` is a symlink, not the folder. The gate refuses
    // rather than fall back to the default panel.
    let env = Env::new();
    std::fs::remove_dir_all(env.repo.join("reviewers")).expect("rm");
    std::os::unix::fs::symlink("docs", env.repo.join("reviewers")).expect("symlink");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "panel elsewhere"]);
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!((code, unmet(&v)), (1, vec!["E_REVIEW_INVALID".to_string()]));
    env.atelier(&["review", &id]).code(2);
}

/// Moves the proposal's branch to a commit with no history in common with main that adds
/// `src/lib.rs` differently (a push to the pull request's branch, or a write to the clone's
/// refs): merging it conflicts, and there is no merge base.
fn unrelated_head(env: &Env, id: &str) {
    let repo = Repository::open(&env.repo).expect("open");
    let mut index = git2::Index::new().expect("index");
    let blob = repo
        .blob(b"pub fn answer() -> u32 {\n    7\n}\n")
        .expect("blob");
    index
        .add(&git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0,
            ino: 0,
            mode: 0o100644,
            uid: 0,
            gid: 0,
            file_size: 0,
            id: blob,
            flags: 0,
            flags_extended: 0,
            path: b"src/lib.rs".to_vec(),
        })
        .expect("add");
    let tree = repo
        .find_tree(index.write_tree_to(&repo).expect("tree"))
        .expect("tree");
    let sig = git2::Signature::now("p", "proposer@example.org").expect("sig");
    let orphan = repo
        .commit(None, &sig, &sig, "unrelated", &tree, &[])
        .expect("commit");
    repo.reference(
        &format!("refs/heads/atelier/proposals/{id}"),
        orphan,
        true,
        "push",
    )
    .expect("ref");
}

#[test]
fn a_head_with_no_history_in_common_is_refused_not_an_error_that_stops_every_listing() {
    let env = Env::new();
    let other = env.propose(&[("README.md", "# demo\n\nmore\n")], "Docs");
    let id = env.propose_code();
    unrelated_head(&env, &id);
    // The gate refuses the change with a decision (exit 1), as it does any conflict…
    let run = env.atelier(&["gate", &id, "--json"]);
    assert_eq!(run.code, 1, "{run:?}");
    let v = run.json();
    assert!(unmet(&v).contains(&"E_MERGE_CONFLICT".to_string()), "{v:#}");
    // …and the other proposals can still be listed and judged.
    env.atelier(&["proposals"]).ok();
    env.approve(&other, "alice").ok();
    env.atelier(&["merge", &other]).ok();
}
