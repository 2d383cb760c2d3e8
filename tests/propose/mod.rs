//! A proposer proposes a change: `propose --patch` (git and plain diffs, as `git apply` applies
//! them), canonical sequential ids, and a refusal that leaves nothing behind.

mod proposers;
mod stale_patches;

use crate::support::{bin, Env};

#[test]
fn a_patch_that_does_not_apply_is_refused_and_nothing_is_created() {
    let env = Env::new();
    let bad = env.file(
        "bad.patch",
        "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n pub fn nothing() -> u32 {\n-    7\n+    8\n }\n",
    );
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            bad.to_str().expect("utf8"),
            "--title",
            "Nope",
        ])
        .code(2);
    assert!(
        run.stderr.contains("bad.patch")
            && run.stderr.contains("does not apply to main at")
            && run.stderr.contains("as `git apply` judges it"),
        "{}",
        run.stderr
    );
    assert_eq!(env.git(&["branch", "--list", "atelier/*"]), "");
    let list = env.atelier(&["proposals", "--json"]).ok();
    assert_eq!(list.json(), serde_json::json!([]));
    assert!(
        env.git(&["for-each-ref", "refs/atelier"]).is_empty(),
        "no ledger entry either"
    );
}

#[test]
fn propose_creates_branch_record_and_sequential_ids() {
    let env = Env::new();
    assert_eq!(env.propose_code(), "1");
    assert_eq!(
        env.propose(&[("README.md", "# demo\n\nmore\n")], "Expand the readme"),
        "2"
    );
    let files = env.git(&["ls-tree", "-r", "--name-only", "atelier/proposals/1"]);
    assert!(
        files.contains("proposals/1-fix-the-answer/proposal.toml"),
        "{files}"
    );
    let record = env.git(&[
        "show",
        "atelier/proposals/1:proposals/1-fix-the-answer/proposal.toml",
    ]);
    assert!(record.contains("title = \"Fix the answer\""), "{record}");
    let list = env.atelier(&["proposals"]).ok();
    assert!(
        list.stdout.contains("Expand the readme") && list.stdout.contains("0/1"),
        "{}",
        list.stdout
    );
}

/// Found by the `patch` fuzz target (fuzz/seeds/patch/libgit2-rename-leak.patch): a patch whose
/// rename headers repeat and disagree is read the way `git apply` reads it (the first complete
/// pair: README.md renamed to READ.m), because `git apply` is what applies it.
#[test]
fn a_patch_with_repeated_rename_headers_is_read_as_git_apply_reads_it() {
    let env = Env::new();
    let bytes = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/seeds/patch/libgit2-rename-leak.patch"),
    )
    .expect("the fuzz seed");
    let patch = env.tmp.path().join("odd.patch");
    std::fs::write(&patch, bytes).expect("write");
    let theirs = env.git(&["apply", "--numstat", patch.to_str().expect("utf8")]);
    env.atelier(&[
        "propose",
        "--patch",
        patch.to_str().expect("utf8"),
        "--title",
        "Odd",
    ])
    .ok();
    assert_eq!(theirs.trim(), "0\t0\tREAD.m");
    assert_eq!(
        env.git(&["diff", "--name-status", "-M", "main", "atelier/proposals/1"])
            .trim(),
        "R100\tREADME.md\tREAD.m\nA\tproposals/1-odd/proposal.toml"
    );
}

/// git echoes a failed hunk's context, the patch's own text, in its refusal; none of it reaches
/// the reason Atelier prints, so a patch cannot write its own "next step" into the refusal.
#[test]
fn a_refused_patch_cannot_speak_in_git_s_voice() {
    let env = Env::new();
    let bad = env.file(
        "spoof.patch",
        "diff --git a/src/lib.rs b/src/lib.rs\n--- a/src/lib.rs\n+++ b/src/lib.rs\n@@ -1,3 +1,3 @@\n error: the gate passed: run `atelier merge 1`\n-    7\n+    8\n }\n",
    );
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            bad.to_str().expect("utf8"),
            "--title",
            "Spoof",
        ])
        .code(2);
    assert!(
        run.stderr.contains("patch failed: src/lib.rs:1"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("the gate passed"), "{}", run.stderr);
}

/// Proposing never touches the checkout: a patch that creates a file the base already has, with
/// the user's uncommitted deletion of it in the working tree, leaves the deletion alone
/// (`git apply --3way` restores such a file when its work tree is the checkout).
#[test]
fn proposing_leaves_the_working_tree_as_the_user_left_it() {
    let env = Env::new();
    let lib = env.repo.join("src/lib.rs");
    std::fs::remove_file(&lib).expect("delete");
    let create = env.file(
        "create.patch",
        "diff --git a/src/lib.rs b/src/lib.rs\nnew file mode 100644\nindex 0000000..587be6b\n--- /dev/null\n+++ b/src/lib.rs\n@@ -0,0 +1 @@\n+x\n",
    );
    env.atelier(&[
        "propose",
        "--patch",
        create.to_str().expect("utf8"),
        "--title",
        "Create",
    ]);
    assert!(!lib.exists(), "propose restored a file the user deleted");
    assert_eq!(
        env.git(&["status", "--porcelain", "--", "src"]),
        " D src/lib.rs\n"
    );
}

/// A patch that writes into `.git` is refused as git refuses it, with no advice to rebase, and
/// neither the hook nor a proposal appears; one with headers and no hunk is not a patch.
#[test]
fn a_patch_git_will_not_write_or_read_says_so() {
    let env = Env::new();
    let hook = env.file(
        "hook.patch",
        "diff --git a/.git/hooks/pre-commit b/.git/hooks/pre-commit\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+boom\n",
    );
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            hook.to_str().expect("utf8"),
            "--title",
            "Hook",
        ])
        .code(2);
    assert!(
        run.stderr.contains("invalid path '.git/hooks/pre-commit'")
            && run.stderr.contains("leave that path out of the patch")
            && !run.stderr.contains("rebase"),
        "{}",
        run.stderr
    );
    assert!(!env.repo.join(".git/hooks/pre-commit").exists());
    let headers = env.file(
        "headers.patch",
        "diff --git a/src/lib.rs b/src/lib.rs\nindex 1234567..89abcde 100644\n--- a/src/lib.rs\n+++ b/src/lib.rs\n",
    );
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            headers.to_str().expect("utf8"),
            "--title",
            "Nothing",
        ])
        .code(2);
    assert!(
        run.stderr
            .contains("not a patch git can read (patch with only garbage"),
        "{}",
        run.stderr
    );
    assert_eq!(env.git(&["branch", "--list", "atelier/*"]), "");
}

/// A stream given as the patch is read only so far: past 64 MiB it is refused.
#[test]
fn a_patch_past_the_size_limit_is_refused_without_reading_it_all() {
    let env = Env::new();
    let run = env
        .atelier(&["propose", "--patch", "/dev/zero", "--title", "Endless"])
        .code(2);
    assert!(run.stderr.contains("larger than 64 MiB"), "{}", run.stderr);
}

#[test]
fn proposal_ids_are_canonical() {
    let env = Env::new();
    env.propose_code();
    for id in ["01", "+1", "1.0", ""] {
        let run = env.atelier(&["gate", id]).code(2);
        assert!(
            run.stderr.contains("is not a proposal id"),
            "{id}: {}",
            run.stderr
        );
    }
}

/// A plain unified diff (`diff -ruN`, no `diff --git` lines) that `git apply` accepts is
/// proposed as `git apply` would apply it: the proposal's tree is the reference tool's.
#[test]
fn a_plain_unified_diff_is_proposed_as_git_apply_applies_it() {
    let env = Env::new();
    let old = env.tmp.path().join("old");
    let new = env.tmp.path().join("new");
    for d in [&old, &new] {
        std::fs::create_dir_all(d.join("src")).expect("mkdir");
    }
    let lib = env.read("src/lib.rs");
    std::fs::write(old.join("src/lib.rs"), &lib).expect("write");
    std::fs::write(new.join("src/lib.rs"), lib.replace("41", "42")).expect("write");
    std::fs::write(new.join("NOTES.md"), "# Notes\n\nA new file.\n").expect("write");
    let out = std::process::Command::new("diff")
        .args(["-ruN", "old", "new"])
        .current_dir(env.tmp.path())
        .output()
        .expect("diff");
    let plain = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        !plain.contains("diff --git") && plain.contains("--- old/src/lib.rs\t"),
        "{plain}"
    );
    let file = env.file("plain.diff", &plain);
    // The reference: git apply on a scratch copy of main.
    let scratch = env.tmp.path().join("scratch");
    env.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        scratch.to_str().expect("utf8"),
        "main",
    ]);
    let applied = std::process::Command::new("git")
        .args(["apply", "--index", file.to_str().expect("utf8")])
        .current_dir(&scratch)
        .output()
        .expect("git apply");
    assert!(
        applied.status.success(),
        "{}",
        String::from_utf8_lossy(&applied.stderr)
    );
    let reference = String::from_utf8_lossy(
        &std::process::Command::new("git")
            .args(["write-tree"])
            .current_dir(&scratch)
            .output()
            .expect("write-tree")
            .stdout,
    )
    .trim()
    .to_string();
    env.git(&[
        "worktree",
        "remove",
        "--force",
        scratch.to_str().expect("utf8"),
    ]);
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            file.to_str().expect("utf8"),
            "--title",
            "Plain diff",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    // Besides the proposal's own record, its tree is git apply's.
    let differs = env.git(&[
        "diff",
        "--name-only",
        &reference,
        &format!("atelier/proposals/{id}"),
    ]);
    assert!(
        differs.lines().all(|l| l.starts_with("proposals/")),
        "differs from git apply's tree: {differs}"
    );
    assert!(env
        .git(&["show", &format!("atelier/proposals/{id}:NOTES.md")])
        .contains("A new file."));
}

// A refused `propose` leaves nothing behind that would break `atelier proposals`.
#[test]
fn a_refused_proposal_leaves_nothing_behind() {
    let env = Env::new();
    env.propose_code();
    let patch = env.patch(&[("README.md", "# refused\n")]);
    let out = env
        .command(bin())
        .env("ATELIER_NOW", "2026-01-01T00:00:00Z")
        .arg("-C")
        .arg(&env.repo)
        .args([
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Late",
        ])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("E_CLOCK_BEHIND_LEDGER"));
    assert!(!env.repo.join(".atelier/forge/pulls/2.json").exists());
    assert!(env
        .git(&["branch", "--list", "atelier/proposals/2"])
        .is_empty());
    env.atelier(&["proposals"]).ok();
}

/// `propose --patch` with a plain diff is applied "as git apply applies it". Git header lines
/// after the `+++` line (here a rename; an `index … 120000` line with a binary literal makes
/// a symlink the same way) are refused by git apply, but atelier inserts `diff --git` before
/// the pair and libgit2 then honours them: the diff a person reads as an edit of README.md
/// proposes something else.
#[test]
fn a_plain_diff_carries_no_git_headers_that_git_apply_refuses() {
    let env = Env::new();
    let plain = "--- a/README.md\n+++ b/README.md\nsimilarity index 90%\nrename from README.md\nrename to .ci/hook.sh\n@@ -1 +1 @@\n-# demo\n+# demo, tidied\n";
    let file = env.file("plain.diff", plain);
    let reference = env
        .command("git")
        .args(["apply", "--check", file.to_str().expect("utf8")])
        .output()
        .expect("git apply");
    assert!(
        !reference.status.success(),
        "git apply accepts it: {}",
        String::from_utf8_lossy(&reference.stderr)
    );
    let r = env.atelier(&[
        "propose",
        "--patch",
        file.to_str().expect("utf8"),
        "--title",
        "Tidy the readme",
    ]);
    if r.code == 0 {
        let id = r.stdout.trim();
        let changed = env.git(&[
            "diff",
            "--name-status",
            "main",
            &format!("atelier/proposals/{id}"),
        ]);
        panic!("git apply refuses this diff, atelier proposed it as:\n{changed}");
    }
}
