//! A proposer's patch was made before the branch moved, or was already merged: `propose --patch`
//! applies it as `git apply --3way` does (a hunk a few lines away applies there, none with less
//! context than it has, a three-way merge from the blobs its `index` lines name), refuses what
//! that refuses with git's reason, and says when the patch is already applied. Each case is
//! compared with `git apply --3way --index` in a checkout of the same commit.

use crate::support::Env;

/// Ten small functions, 30 lines: f8's body is on line 23.
fn calc() -> String {
    (1..=10)
        .map(|i| format!("pub fn f{i}() -> u32 {{\n    {i}\n}}\n"))
        .collect()
}

/// Proposes `edits`, has alice approve, and merges it: the branch moves as a merge does.
fn land(env: &Env, edits: &[(&str, &str)], title: &str) {
    let id = env.propose(edits, title);
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    env.git(&["reset", "-q", "--hard", "main"]);
}

/// The change as `git diff` shows it in the working tree, which is then put back.
fn patch_of(env: &Env, rel: &str, text: &str) -> String {
    env.write(rel, text);
    let patch = env.git(&["diff"]);
    env.git(&["checkout", "--", rel]);
    patch
}

/// What `git apply --3way --index` makes of `patch` on main: the tree, or git's refusal.
fn reference(env: &Env, patch: &std::path::Path) -> Result<String, String> {
    static SCRATCH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SCRATCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let scratch = env.tmp.path().join(format!("scratch-{n}"));
    env.git(&[
        "worktree",
        "add",
        "-q",
        "--detach",
        scratch.to_str().expect("utf8"),
        "main",
    ]);
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(&scratch)
            .output()
            .expect("git")
    };
    let applied = git(&["apply", "--3way", "--index", patch.to_str().expect("utf8")]);
    let result = if applied.status.success() {
        Ok(String::from_utf8_lossy(&git(&["write-tree"]).stdout)
            .trim()
            .to_string())
    } else {
        Err(String::from_utf8_lossy(&applied.stderr).into_owned())
    };
    env.git(&[
        "worktree",
        "remove",
        "--force",
        scratch.to_str().expect("utf8"),
    ]);
    result
}

/// Proposes `patch` on main and checks the outcome against `git apply --3way`'s: the same tree
/// (besides the proposal's record), or a refusal where git refuses or changes nothing. Returns
/// propose's exit code and stderr.
fn propose_as_git_applies(env: &Env, patch: &str, name: &str) -> (i32, String) {
    let file = env.file(name, patch);
    let main_tree = env.git(&["rev-parse", "main^{tree}"]).trim().to_string();
    let reference = reference(env, &file);
    let proposals = || env.git(&["branch", "--list", "atelier/proposals/*"]);
    let before = proposals();
    let run = env.atelier(&[
        "propose",
        "--patch",
        file.to_str().expect("utf8"),
        "--title",
        "A change",
    ]);
    match &reference {
        Ok(tree) if *tree != main_tree => {
            assert_eq!(run.code, 0, "git apply applies it:\n{}", run.stderr);
            let id = run.stdout.trim();
            let differs = env.git(&[
                "diff",
                "--name-only",
                tree,
                &format!("atelier/proposals/{id}"),
            ]);
            assert!(
                differs.lines().all(|l| l.starts_with("proposals/")),
                "{name}: the proposal's tree is not git apply's: {differs}"
            );
        }
        _ => {
            assert_eq!(
                run.code, 2,
                "{name}: git apply refuses it or changes nothing ({reference:?}), so propose must refuse:\n{}",
                run.stderr
            );
            assert_eq!(
                proposals(),
                before,
                "{name}: a refused patch opened a proposal"
            );
        }
    }
    (run.code, run.stderr)
}

/// Main with calc.rs landed, and the patch that makes f8 return 80, made on it.
fn calc_and_patch() -> (Env, String) {
    let env = Env::new();
    land(&env, &[("src/calc.rs", &calc())], "Add calc");
    let patch = patch_of(&env, "src/calc.rs", &calc().replace("    8\n", "    80\n"));
    assert!(patch.contains("\nindex "), "{patch}");
    (env, patch)
}

#[test]
fn a_patch_made_before_an_unrelated_merge_applies_a_few_lines_away() {
    let (env, patch) = calc_and_patch();
    let above = format!(
        "// Small functions.\n// Each returns its number.\n\n{}",
        calc()
    );
    land(&env, &[("src/calc.rs", &above)], "Comment calc");
    let (code, stderr) = propose_as_git_applies(&env, &patch, "offset.patch");
    assert_eq!(code, 0);
    assert!(
        stderr.contains("note: Hunk #1 succeeded at 23 (offset 3 lines)."),
        "{stderr}"
    );
}

#[test]
fn a_patch_whose_context_moved_applies_by_a_three_way_merge_from_its_index_lines() {
    let (env, patch) = calc_and_patch();
    land(
        &env,
        &[("src/calc.rs", &calc().replace("    7\n", "    70\n"))],
        "f7 returns 70",
    );
    let (code, stderr) = propose_as_git_applies(&env, &patch, "moved.patch");
    assert_eq!(code, 0);
    assert!(
        stderr.contains("note: main moved since the patch was made: applied by a three-way merge"),
        "{stderr}"
    );
    let merged = env.git(&["show", "atelier/proposals/3:src/calc.rs"]);
    assert!(
        merged.contains("    70\n") && merged.contains("    80\n"),
        "{merged}"
    );

    // Without its index lines there is nothing to merge from, and no hunk applies with less
    // context than it has: refused with git's reason.
    let plain: String = patch
        .lines()
        .filter(|l| !l.starts_with("index "))
        .map(|l| format!("{l}\n"))
        .collect();
    let (code, stderr) = propose_as_git_applies(&env, &plain, "plain.patch");
    assert_eq!(code, 2);
    assert!(
        stderr.contains(" does not apply to main at ")
            && stderr.contains("plain.patch does not apply to main at ")
            && stderr.contains("patch failed: src/calc.rs:20")
            && stderr.contains("rebase the change onto main"),
        "{stderr}"
    );
}

#[test]
fn a_patch_that_conflicts_with_what_merged_is_refused_naming_the_file() {
    let (env, patch) = calc_and_patch();
    land(
        &env,
        &[("src/calc.rs", &calc().replace("    8\n", "    800\n"))],
        "f8 returns 800",
    );
    let (code, stderr) = propose_as_git_applies(&env, &patch, "conflict.patch");
    assert_eq!(code, 2);
    assert!(
        stderr.contains(" does not apply to main at ")
            && stderr.contains(
                "a three-way merge from the blobs its `index` lines name conflicts in src/calc.rs"
            ),
        "{stderr}"
    );
}

#[test]
fn a_patch_already_merged_is_refused_as_already_applied() {
    let (env, patch) = calc_and_patch();
    let file = env.file("f8.patch", &patch);
    let id = env
        .atelier(&[
            "propose",
            "--patch",
            file.to_str().expect("utf8"),
            "--title",
            "f8 returns 80",
        ])
        .ok()
        .stdout
        .trim()
        .to_string();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    env.git(&["reset", "-q", "--hard", "main"]);
    let (code, stderr) = propose_as_git_applies(&env, &patch, "again.patch");
    assert_eq!(code, 2);
    assert!(
        stderr.contains(" is already applied on main at ")
            && stderr.contains("again.patch is already applied on main at "),
        "{stderr}"
    );
    // The patch that adds a function at the end of the file, merged, is not added twice.
    let added = patch_of(
        &env,
        "src/calc.rs",
        &format!(
            "{}pub fn f11() -> u32 {{\n    11\n}}\n",
            env.read("src/calc.rs")
        ),
    );
    land(
        &env,
        &[(
            "src/calc.rs",
            &format!(
                "{}pub fn f11() -> u32 {{\n    11\n}}\n",
                env.read("src/calc.rs")
            ),
        )],
        "f11",
    );
    let (code, stderr) = propose_as_git_applies(&env, &added, "f11-again.patch");
    assert_eq!(code, 2);
    assert!(
        stderr.contains(" is already applied on main at "),
        "{stderr}"
    );

    // The same change reversed takes it back.
    let reversed = env.git(&["diff", "-R", "main~1", "main", "--", "src/calc.rs"]);
    let (code, stderr) = propose_as_git_applies(&env, &reversed, "reversed.patch");
    assert_eq!(code, 0, "{stderr}");
}

/// Main after a merge that added 26 lines above calc, with a copy of f8's hunk context on the
/// lines where f8 was: a patch of f8 made before it.
fn copied_context() -> (Env, String) {
    let (env, patch) = calc_and_patch();
    let lines: Vec<String> = calc().lines().map(|l| format!("{l}\n")).collect();
    let mut moved: Vec<String> = (0..19).map(|i| format!("// filler {i}\n")).collect();
    moved.extend_from_slice(&lines[19..26]);
    moved.extend_from_slice(&lines);
    land(
        &env,
        &[("src/calc.rs", &moved.concat())],
        "Copy some of calc",
    );
    (env, patch)
}

#[test]
fn a_hunk_whose_context_was_copied_lands_where_the_three_way_merge_puts_it() {
    let (env, patch) = copied_context();
    let (code, stderr) = propose_as_git_applies(&env, &patch, "copied.patch");
    assert_eq!(code, 0);
    assert!(stderr.contains("applied by a three-way merge"), "{stderr}");
    let calc = env.git(&["show", "atelier/proposals/3:src/calc.rs"]);
    assert_eq!(
        calc.lines().position(|l| l == "    80"),
        Some(48),
        "the real f8 changed, not its copy:\n{calc}"
    );
}

/// A `.gitattributes` the clone has not committed cannot pick the merge: attributes are read from
/// the base, so a merge driver it names does not run and the proposal is what git makes of base
/// and patch.
#[test]
fn an_uncommitted_gitattributes_does_not_steer_the_merge() {
    let (env, patch) = copied_context();
    let ran = env.tmp.path().join("merge-driver-ran");
    env.git(&[
        "config",
        "merge.keepmine.driver",
        &format!("touch {}; exit 0", ran.display()),
    ]);
    env.write(".gitattributes", "* merge=keepmine\n");
    let (code, _) = propose_as_git_applies(&env, &patch, "steered.patch");
    assert_eq!(code, 0);
    assert!(
        !ran.exists(),
        "the working tree's .gitattributes ran a merge driver"
    );
    let calc = env.git(&["show", "atelier/proposals/3:src/calc.rs"]);
    assert!(
        calc.contains("    80\n"),
        "the change was merged away:\n{calc}"
    );
}
