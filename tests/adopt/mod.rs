//! A maintainer adopts Atelier: `init`, `keygen`, the demo, shell completions, and what counts
//! as an adopted branch (a policy and a gate key, committed in that order).

mod own_repository;

use crate::support::{unmet, Env};

#[test]
fn init_is_idempotent_and_commits_nothing() {
    let env = Env::bare_repo();
    let first = env.atelier(&["init"]).ok();
    assert!(
        first.stdout.contains("created  policies/governance.toml"),
        "{}",
        first.stdout
    );
    assert!(
        first.stdout.contains("git add"),
        "init prints what to commit"
    );
    let status_after_first = env.git(&["status", "--porcelain"]);
    let gate_key = env.read("policies/gate_key.pub");
    let second = env.atelier(&["init"]).ok();
    assert!(
        !second.stdout.contains("created  policies"),
        "{}",
        second.stdout
    );
    assert_eq!(
        env.read("policies/gate_key.pub"),
        gate_key,
        "the gate key is kept"
    );
    assert_eq!(env.git(&["status", "--porcelain"]), status_after_first);
    assert_eq!(
        env.git(&["rev-list", "--count", "HEAD"]).trim(),
        "1",
        "init commits nothing"
    );
    assert!(env.read(".gitignore").contains(".atelier/"));
    assert!(
        !status_after_first.contains(".atelier"),
        "the private gate key stays ignored"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |rel: &str| {
        std::fs::metadata(env.repo.join(rel))
            .expect("stat")
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("policies/governance.toml"), 0o644);
    assert_eq!(mode("atelier.toml"), 0o644);
    // The gate key is outside the repository (contained workers cannot reach it), private.
    assert!(!env.repo.join(".atelier/gate_key").exists());
    let key = env.gate_key();
    let private =
        |p: &std::path::Path| std::fs::metadata(p).expect("stat").permissions().mode() & 0o777;
    assert_eq!(private(&key), 0o600);
    assert_eq!(private(key.parent().expect("dir")), 0o700);
    assert!(
        first.stdout.contains(&key.display().to_string()) && first.stdout.contains("back it up"),
        "{}",
        first.stdout
    );
    let note = std::fs::read_to_string(key.with_file_name("repository")).expect("note");
    assert!(note.contains("repo"), "{note}");
}

#[test]
fn keygen_writes_a_0600_key_and_refuses_to_overwrite() {
    let env = Env::bare_repo();
    let line = env.keygen("dana");
    assert!(
        line.starts_with("dana@example.org namespaces=\"atelier-approval\" ssh-ed25519 "),
        "{line}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(env.key("dana"))
        .expect("key")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    assert!(env.keys.join("dana.pub").exists());
    let again = env
        .atelier(&["keygen", env.key("dana").to_str().expect("utf8")])
        .code(2);
    assert!(again.stderr.contains("already exists"), "{}", again.stderr);
}

#[test]
fn the_demo_runs_the_whole_loop_and_says_where_it_is() {
    let env = Env::bare_repo();
    let dir = env.tmp.path().join("demo");
    let run = env
        .atelier(&["demo", "--dir", dir.to_str().expect("utf8")])
        .ok();
    for phrase in [
        "gate: REFUSED (1 unmet: E_QUORUM_NOT_MET)",
        "gate: ALLOWED (approved by alice@demo.invalid)",
        "E_CONSTITUTION_QUORUM",
        "E_WRONG_PROPOSAL",
        "E_BAD_SIGNATURE",
        "The review panel blocks an agent's patch",
        "[BLOCKING] tests-tamper tests/add.rs:3",
        "gate: REFUSED (1 unmet: E_REVIEW_BLOCKED)",
        "findings: none",
        "E_UNLEDGERED_COMMIT",
        "A rewound ledger is caught",
        "E_LEDGER_ROLLBACK: merge commit",
        "became proposal 6",
        "audit verify: 4 merges verified, findings: none",
        "The self-improvement cycle",
        "opened proposal 7 (tune: failure_budget 1 -> 2); the metric failed_tasks was registered in the ledger before the replay benchmark ran; failed_tasks improved significantly",
        "the review panel: approve",
        "`atelier proposals --improvements`: proposal 7 failed_tasks: improved",
        "audit verify: 5 merges verified, no findings",
        "The demo repository is",
    ] {
        assert!(
            run.stdout.contains(phrase),
            "missing {phrase:?} in:\n{}",
            run.stdout
        );
    }
    // The demo keeps its gate keys and audit memory in its own directory: nothing of it is
    // left in the home directory when that directory is deleted.
    assert!(
        !env.home.join(".local").exists(),
        "the demo wrote under {}",
        env.home.join(".local").display()
    );
    assert!(dir.join("machine").is_dir());
    let repo = dir.join("repo");
    env.atelier_in(&repo, &["audit", "verify"]).ok();
    let list = env.atelier_in(&repo, &["proposals", "--json"]).ok().json();
    let states: Vec<&str> = list
        .as_array()
        .expect("list")
        .iter()
        .map(|p| p["state"].as_str().expect("state"))
        .collect();
    assert_eq!(
        states,
        ["merged", "merged", "closed", "closed", "merged", "merged", "merged"]
    );
    // The cycle's record, as merged: the evidence people read.
    let evidence =
        std::fs::read_to_string(repo.join("proposals/7-tune-failure-budget-1-2/evidence.md"))
            .expect("evidence.md merged");
    assert!(
        evidence.contains("| **failed_tasks** (registered)"),
        "{evidence}"
    );
    assert!(
        std::fs::read_to_string(repo.join("src/lib.rs"))
            .expect("lib")
            .contains("pub fn sub"),
        "the swarm's change landed"
    );
    env.atelier(&["demo", "--dir", dir.to_str().expect("utf8")])
        .code(2);
}

/// Found by the `policy_load` fuzz target: a duration ending in a multi-byte character panicked
/// the parser; in atelier.toml (and in the policy) it is a clear error naming the field.
#[test]
fn a_duration_with_a_multibyte_character_is_a_clear_error() {
    let env = Env::new();
    let config = env.read("atelier.toml");
    env.write(
        "atelier.toml",
        &format!("{config}\n[conductor]\nnudge_after = \"1\u{319}\"\n"),
    );
    let run = env.atelier(&["proposals"]).code(2);
    assert!(
        run.stderr.contains("conductor.nudge_after"),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
}

#[test]
fn a_policy_committed_before_the_gate_key_is_not_yet_adoption() {
    // As Atelier's own repository: the policy first, with no key anyone can run the gate with.
    let env = Env::bare_repo();
    env.atelier(&["init"]).ok();
    env.git(&[
        "add",
        "policies/governance.toml",
        "policies/allowed_signers",
    ]);
    env.git(&["commit", "-qm", "The policy, before any maintainer's key"]);
    let early = env.atelier(&["audit", "verify", "--json"]);
    assert_eq!(early.code, 1, "{}", early.stdout);
    assert!(early.stdout.contains("E_NOT_ADOPTED"), "{}", early.stdout);
    env.write("README.md", "# demo, edited by hand before adoption\n");
    env.git(&["commit", "-qam", "A hand-made commit before adoption"]);
    // The maintainers adopt: the gate key's public half is committed.
    env.git(&["add", "-A"]);
    env.git(&["commit", "-qm", "Adopt atelier"]);
    let tip = env.git(&["rev-parse", "HEAD"]).trim().to_string();
    let v = env.atelier(&["audit", "verify", "--json"]).ok().json();
    assert_eq!(v["adoption"], tip.as_str(), "{v:#}");
    assert_eq!(v["findings"].as_array().map(Vec::len), Some(0), "{v:#}");
    // From then on a hand-made commit is caught.
    env.write("README.md", "# demo, edited by hand after adoption\n");
    env.git(&["commit", "-qam", "A hand-made commit after adoption"]);
    let late = env.atelier(&["audit", "verify", "--json"]);
    assert_eq!(late.code, 1);
    // No ledger at all yet: the audit fails on that, and accuses no commit on the strength
    // of an absent record.
    assert!(
        late.stdout.contains("E_LEDGER_MISSING") && !late.stdout.contains("E_UNLEDGERED_COMMIT"),
        "{}",
        late.stdout
    );
}

#[test]
fn a_branch_rewound_to_before_its_adoption_is_a_mismatch_not_just_unadopted() {
    let env = Env::new();
    env.propose_code();
    // The branch moved back by someone with push access; the clone keeps its files.
    env.git(&["update-ref", "refs/heads/main", "HEAD~1"]);
    let v = env.atelier(&["audit", "verify", "--json"]).code(1).json();
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["code"].as_str())
        .collect();
    assert_eq!(codes, ["E_NOT_ADOPTED", "E_ADOPTION_MISMATCH"], "{v:#}");
}

/// `atelier completions bash` is a script bash loads and completes with, from this binary's own
/// commands and options (outside any repository); zsh and fish get theirs; an unknown shell is
/// a usage error naming the ones there are.
#[test]
fn shell_completions_complete_commands_and_options() {
    let env = Env::new();
    let script = env.tmp.path().join("atelier.bash");
    let out = env
        .command(crate::support::bin())
        .args(["completions", "bash"])
        .current_dir(env.tmp.path())
        .output()
        .expect("completions");
    assert!(out.status.success());
    std::fs::write(&script, &out.stdout).expect("write");
    let complete = |words: &str| {
        let o = env
            .command("bash")
            .arg("-c")
            .arg(format!(
                "source '{}'; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _atelier atelier \"${{COMP_WORDS[-1]}}\" \"${{COMP_WORDS[-2]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .expect("bash");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let commands = complete("atelier pro");
    assert!(
        commands.lines().any(|l| l == "propose") && commands.lines().any(|l| l == "proposals"),
        "{commands}"
    );
    let options = complete("atelier run --q");
    assert!(options.lines().any(|l| l == "--quiet"), "{options}");
    for (shell, first) in [("zsh", "#compdef atelier"), ("fish", "complete -c atelier")] {
        let o = env
            .command(crate::support::bin())
            .args(["completions", shell])
            .output()
            .expect("completions");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success() && text.contains(first),
            "{shell}: {text}"
        );
    }
    let bad = env
        .command(crate::support::bin())
        .args(["completions", "tcsh"])
        .output()
        .expect("completions");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("possible values: bash"));
}

/// The adoption point now needs policies/gate_key.pub too, but the first
/// append's refusal still says the branch has "no commit carrying policies/governance.toml"
/// when it has one and lacks only the key (Atelier's own repository before a maintainer adopts
/// it), sending the operator after the wrong file.
#[test]
fn a_branch_with_a_policy_but_no_gate_key_is_refused_naming_the_key() {
    let env = Env::bare_repo();
    env.atelier(&["init"]).ok();
    env.git(&[
        "add",
        "policies/governance.toml",
        "policies/allowed_signers",
        "atelier.toml",
    ]);
    env.git(&["commit", "-qm", "The policy, before the gate key"]);
    let r = env.atelier(&[
        "propose",
        "--patch",
        env.patch(&[("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n")])
            .to_str()
            .expect("utf8"),
        "--title",
        "Fix",
    ]);
    assert_ne!(r.code, 0, "setup: not adopted yet: {}", r.stdout);
    assert!(
        r.stderr.contains("gate_key.pub"),
        "the refusal should name the missing gate key, not the policy the branch has: {}",
        r.stderr
    );
}

/// An adopter's constitution is what Atelier itself reads; none of the adopter's code is in it
/// unless they say so, so a change to their build files or a module named like one of
/// Atelier's needs the one approval of the rule for any change.
#[test]
fn an_adopter_s_code_needs_one_approval_unless_init_was_told_otherwise() {
    let env = Env::new();
    let id = env.propose(
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"calc\"\nversion = \"0.2.0\"\n",
            ),
            ("src/git.rs", "pub fn head() -> u32 {\n    1\n}\n"),
            ("src/forge/mod.rs", "pub fn push() -> u32 {\n    2\n}\n"),
        ],
        "Bump the version, add two modules",
    );
    env.approve(&id, "alice").ok();
    let (code, v) = env.gate(&id);
    assert_eq!((code, unmet(&v)), (0, Vec::<String>::new()), "{v:#}");

    let env = Env::bare_repo();
    env.atelier(&[
        "init",
        "--constitution",
        "src/rules/**",
        "--constitution",
        "Makefile",
    ])
    .ok();
    let policy =
        atelier::governance::policy::Policy::load(&atelier::governance::policy::PolicyFiles {
            governance: Some(env.read("policies/governance.toml").into_bytes()),
            allowed_signers: Some(env.read("policies/allowed_signers").into_bytes()),
            gate_key: None,
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let constitutional = |path: &str| policy.constitution.matches_exactly(path);
    for path in [
        "src/rules/limits.py",
        "Makefile",
        "atelier.toml",
        "policies/allowed_signers",
    ] {
        assert!(constitutional(path), "{path}");
    }
    for path in ["src/git.rs", "Cargo.toml", "build.rs", "src/calc.py"] {
        assert!(!constitutional(path), "{path}");
    }
    // Told once the policy is there, init says where to add them and writes nothing.
    let before = env.read("policies/governance.toml");
    let again = env.atelier(&["init", "--constitution", "docs/**"]).code(2);
    assert!(
        again
            .stderr
            .contains("policies/governance.toml is already there")
            && again.stderr.contains("[constitution] paths"),
        "{}",
        again.stderr
    );
    assert_eq!(env.read("policies/governance.toml"), before);
}

#[test]
fn a_constitution_glob_that_does_not_parse_is_refused_before_anything_is_written() {
    let env = Env::bare_repo();
    let run = env
        .atelier(&["init", "--constitution", "src/[rules"])
        .code(2);
    assert!(
        run.stderr.contains("--constitution")
            && run.stderr.contains("glob `src/[rules` does not parse"),
        "{}",
        run.stderr
    );
    for rel in [
        "atelier.toml",
        "policies/governance.toml",
        "policies/gate_key.pub",
    ] {
        assert!(!env.repo.join(rel).exists(), "{rel} was written");
    }
}
