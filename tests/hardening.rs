//! Issue 8's breaks of the gate's promise on the local forge, each performed through the CLI the
//! way an attacker with write access to the gate clone's files and refs (but no approver's key)
//! would, and each refused or reported with a stable code.

use std::process::Stdio;

use atelier::audit::ledger;
use git2::Repository;
use serde_json::Value;

use crate::support::{bin, unmet, Env, Setup};

/// The codes `audit verify` reports (it must exit 1).
fn findings(env: &Env, dir: &std::path::Path) -> Vec<String> {
    let run = env.atelier_in(dir, &["audit", "verify", "--json"]).code(1);
    run.json()["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code").to_string())
        .collect()
}

fn entries(env: &Env) -> Vec<Value> {
    let run = env.atelier(&["audit", "log", "--json"]).ok();
    run.json().as_array().expect("entries").clone()
}

/// The ledger commit before the one that appended entry `seq`.
fn ledger_before(env: &Env, seq: u64) -> git2::Oid {
    let repo = Repository::open(&env.repo).expect("open");
    let mut c = repo
        .find_commit(repo.refname_to_id(ledger::REF).expect("ledger"))
        .expect("commit");
    loop {
        let snap = ledger::read_at(&repo, c.id()).expect("read");
        if (snap.lines.len() as u64) <= seq {
            return c.id();
        }
        c = c.parent(0).expect("an older ledger commit");
    }
}

fn force_ref(env: &Env, name: &str, to: &str) {
    env.git(&["update-ref", name, to]);
}

/// A clone of the gate's repository with the ledger fetched.
fn fresh_clone(env: &Env, name: &str) -> std::path::PathBuf {
    let clone = env.tmp.path().join(name);
    env.git(&[
        "clone",
        "-q",
        env.repo.to_str().expect("utf8"),
        clone.to_str().expect("utf8"),
    ]);
    fetch_ledger(env, &clone, false);
    clone
}

/// A clone of the gate's repository, with the ledger fetched, that has verified it once.
fn auditor(env: &Env) -> std::path::PathBuf {
    let clone = fresh_clone(env, "auditor");
    env.atelier_in(&clone, &["audit", "verify"]).ok();
    clone
}

fn fetch_ledger(env: &Env, clone: &std::path::Path, force: bool) {
    let spec = format!(
        "{}refs/atelier/ledger:refs/atelier/ledger",
        if force { "+" } else { "" }
    );
    let out = env
        .command("git")
        .current_dir(clone)
        .args([
            "fetch",
            "-q",
            "origin",
            &spec,
            "+main:refs/remotes/origin/main",
        ])
        .output()
        .expect("fetch");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

// Break 2: the ledger reset to before a rejection, the rejection's comment deleted.
#[test]
fn a_rewound_ledger_cannot_erase_a_veto() {
    let env = Env::new();
    let id = env.propose_code();
    env.reject(&id, "bob").ok();
    let auditor = auditor(&env);
    let rejection = entries(&env)
        .into_iter()
        .find(|e| e["kind"] == "token-recorded")
        .expect("the rejection");
    let before = ledger_before(&env, rejection["seq"].as_u64().expect("seq"));
    force_ref(&env, ledger::REF, &before.to_string());
    let forge = env.repo.join(format!(".atelier/forge/pulls/{id}.json"));
    let mut pull: Value =
        serde_json::from_str(&std::fs::read_to_string(&forge).expect("forge")).expect("json");
    pull["comments"] = Value::Array(Vec::new());
    std::fs::write(&forge, serde_json::to_vec(&pull).expect("json")).expect("write");
    let main = env.git(&["rev-parse", "main"]);
    // Every later step on the gate's clone refuses the shorter ledger: it verified the longer one.
    let run = env.approve(&id, "alice").code(1);
    assert!(run.stderr.contains("E_LEDGER_ROLLBACK"), "{}", run.stderr);
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stderr.contains("E_LEDGER_ROLLBACK"), "{}", run.stderr);
    assert_eq!(env.git(&["rev-parse", "main"]), main, "nothing merged");
    let f = findings(&env, &env.repo);
    assert!(f.contains(&"E_LEDGER_ROLLBACK".to_string()), "{f:?}");
    // An auditor whose clone verified the longer ledger refuses the rewound one it is handed.
    fetch_ledger(&env, &auditor, true);
    let f = findings(&env, &auditor);
    assert!(f.contains(&"E_LEDGER_ROLLBACK".to_string()), "{f:?}");
}

// Break 3: main and the ledger rewound together undo an approved constitutional change.
#[test]
fn rewinding_main_and_the_ledger_together_is_refused() {
    let env = Env::with(Setup {
        principals: vec!["alice", "bob", "carol"],
        ..Setup::default()
    });
    let signers = env.read("policies/allowed_signers");
    let without_carol: String = signers
        .lines()
        .filter(|l| !l.starts_with("carol@"))
        .map(|l| format!("{l}\n"))
        .collect();
    let main_before = env.git(&["rev-parse", "main"]).trim().to_string();
    let id = env.propose(
        &[("policies/allowed_signers", &without_carol)],
        "Remove carol",
    );
    let ledger_before = env.git(&["rev-parse", ledger::REF]);
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    env.atelier(&["merge", &id]).ok();
    // Rewind both to before the removal: the signed checkpoints all still verify.
    force_ref(&env, "refs/heads/main", &main_before);
    env.git(&["reset", "-q", "--hard", "main"]);
    force_ref(&env, ledger::REF, ledger_before.trim());
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            env.patch(&[("README.md", "# carol was here\n")])
                .to_str()
                .expect("utf8"),
            "--title",
            "Carol's change",
        ])
        .code(1);
    assert!(run.stderr.contains("E_LEDGER_ROLLBACK"), "{}", run.stderr);
    let f = findings(&env, &env.repo);
    assert!(f.contains(&"E_LEDGER_ROLLBACK".to_string()), "{f:?}");
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

// Break 7: the forge record renumbered and its proposer cleared.
#[test]
fn facts_the_ledger_holds_win_over_the_forge_record() {
    let env = Env::new();
    // The proposer is also an approver here: their approval must never count.
    env.git(&["config", "user.email", "alice@example.org"]);
    let id = env.propose_code();
    let forge = env.repo.join(format!(".atelier/forge/pulls/{id}.json"));
    let mut pull: Value =
        serde_json::from_str(&std::fs::read_to_string(&forge).expect("forge")).expect("json");
    pull["number"] = Value::from(7);
    pull["head_branch"] = Value::from("atelier/proposals/7");
    pull["proposer"] = Value::Null;
    std::fs::write(&forge, serde_json::to_vec(&pull).expect("json")).expect("write");
    env.git(&[
        "branch",
        "atelier/proposals/7",
        &format!("atelier/proposals/{id}"),
    ]);
    let run = env.approve(&id, "alice").code(1);
    assert!(run.stderr.contains("E_FORGE_STATE"), "{}", run.stderr);
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stderr.contains("E_FORGE_STATE"), "{}", run.stderr);
    assert!(run.stderr.contains("pull request 1"), "{}", run.stderr);
    // With only the proposer cleared, the ledger still names the proposer.
    pull["number"] = Value::from(1);
    pull["head_branch"] = Value::from("atelier/proposals/1");
    std::fs::write(&forge, serde_json::to_vec(&pull).expect("json")).expect("write");
    env.approve(&id, "alice").code(1);
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1, "{v:#}");
    assert_eq!(crate::support::token_codes(&v), ["E_PROPOSER_SIGNER"]);
}

/// Runs atelier with stdout a pipe whose reader is already gone.
fn with_closed_stdout(env: &Env, args: &[&str]) -> i32 {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    env.command(bin())
        .arg("-C")
        .arg(&env.repo)
        .args(args)
        .stdout(writer)
        .stderr(Stdio::null())
        .status()
        .expect("run")
        .code()
        .unwrap_or(-1)
}

// Break 8: a broken pipe turned a refusal into success.
#[test]
fn a_closed_stdout_never_turns_a_refusal_into_success() {
    let env = Env::new();
    let id = env.propose_code();
    assert_eq!(with_closed_stdout(&env, &["gate", &id]), 1);
    assert_eq!(with_closed_stdout(&env, &["gate", &id, "--json"]), 1);
    assert_eq!(with_closed_stdout(&env, &["merge", &id]), 1);
    // As the issue put it: `set -o pipefail; atelier gate 1 | true`.
    let out = env
        .command("bash")
        .args([
            "-c",
            "set -o pipefail; \"$0\" -C \"$1\" gate \"$2\" | true",
            bin(),
            env.repo.to_str().expect("utf8"),
            &id,
        ])
        .output()
        .expect("bash");
    assert_eq!(out.status.code(), Some(1));
    env.write("README.md", "# bypass\n");
    env.git(&["commit", "-q", "-am", "bypass"]);
    assert_eq!(with_closed_stdout(&env, &["audit", "verify"]), 1);
    // A command that is not a verdict still ends quietly on a closed pipe.
    assert_eq!(with_closed_stdout(&env, &["audit", "log"]), 0);
    env.git(&["reset", "-q", "--hard", "HEAD^"]);
    env.approve(&id, "alice").ok();
    assert_eq!(with_closed_stdout(&env, &["merge", &id]), 0);
    assert_eq!(with_closed_stdout(&env, &["audit", "verify"]), 0);
}

/// Runs atelier with a state directory of its own: a clone that remembers nothing (its memory
/// lost, or never made), so only the other witnesses can tell.
fn forgetful(env: &Env, args: &[&str]) -> crate::support::Run {
    let state = env.tmp.path().join(format!("state-{}", std::process::id()));
    let o = env
        .command(bin())
        .env("XDG_STATE_HOME", &state)
        .arg("-C")
        .arg(&env.repo)
        .args(args)
        .output()
        .expect("run");
    let _ = std::fs::remove_dir_all(&state);
    crate::support::Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

// The approvers as witnesses, alone: the ledger is rewound to before an approval was recorded,
// and the gate's clone has lost its memory; the approval's own checkpoint still tells.
#[test]
fn an_approvers_checkpoint_alone_catches_a_rewound_ledger() {
    let env = Env::new();
    let id = env.propose_code();
    let after_first = env.git(&["rev-parse", ledger::REF]);
    env.propose(&[("README.md", "# second\n")], "Second");
    // Alice's token saw the ledger with both proposals opened.
    env.approve(&id, "alice").ok();
    // Rewind to before the second proposal: alice's checkpoint is now beyond the ledger.
    force_ref(&env, ledger::REF, after_first.trim());
    let run = forgetful(&env, &["merge", &id, "--json"]).code(1);
    let v = run.json();
    assert_eq!(
        unmet(&v),
        ["E_LEDGER_ROLLBACK", "E_QUORUM_NOT_MET"],
        "{v:#}"
    );
    assert_eq!(
        crate::support::token_codes(&v),
        ["E_CHECKPOINT_MISMATCH"],
        "{v:#}"
    );
    assert_eq!(
        env.git(&["rev-list", "--count", "main"]).trim(),
        "2",
        "nothing merged"
    );
}

// The branch as a witness, alone: after a completed merge the ledger is rewound behind it and the
// gate's clone has lost its memory; the merge commit's checkpoint still tells, live and in a
// fresh clone's audit.
#[test]
fn a_merge_commits_checkpoint_alone_catches_a_ledger_rewound_behind_it() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    let message = env.git(&["log", "-1", "--format=%B", "main"]);
    assert!(message.contains("Atelier-Ledger: "), "{message}");
    let merged = entries(&env)
        .into_iter()
        .find(|e| e["kind"] == "merge-started")
        .expect("merge-started");
    let rewound = ledger_before(&env, merged["seq"].as_u64().expect("seq") - 1);
    force_ref(&env, ledger::REF, &rewound.to_string());
    // The clone that remembers refuses (break 2); one that lost its memory refuses too.
    let run = forgetful(
        &env,
        &[
            "propose",
            "--patch",
            env.patch(&[("README.md", "# next\n")])
                .to_str()
                .expect("utf8"),
            "--title",
            "Next",
        ],
    );
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("E_LEDGER_ROLLBACK"), "{}", run.stderr);
    assert!(run.stderr.contains("merge commit"), "{}", run.stderr);
    let clone = fresh_clone(&env, "fresh");
    let f = findings(&env, &clone);
    assert!(f.contains(&"E_LEDGER_ROLLBACK".to_string()), "{f:?}");
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

// The machine's memory is keyed by the repository's adoption, not by anything in the clone:
// moving `.git` or renaming the repository in atelier.toml does not make it forget.
#[test]
fn moving_the_git_directory_or_renaming_the_repository_does_not_escape_the_memory() {
    let env = Env::new();
    let id = env.propose_code();
    let before = env.git(&["rev-parse", ledger::REF]);
    env.reject(&id, "bob").ok();
    force_ref(&env, ledger::REF, before.trim());
    let forge = env.repo.join(format!(".atelier/forge/pulls/{id}.json"));
    let mut pull: Value =
        serde_json::from_str(&std::fs::read_to_string(&forge).expect("forge")).expect("json");
    pull["comments"] = Value::Array(Vec::new());
    std::fs::write(&forge, serde_json::to_vec(&pull).expect("json")).expect("write");
    std::fs::rename(env.repo.join(".git"), env.repo.join(".git-moved")).expect("mv");
    std::fs::write(env.repo.join(".git"), "gitdir: .git-moved\n").expect("gitfile");
    env.approve(&id, "alice").code(1);
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(run.stderr.contains("E_LEDGER_ROLLBACK"), "{}", run.stderr);
    let config = env.read("atelier.toml");
    env.write(
        "atelier.toml",
        &config.replace(
            "repository = \"local/repo\"",
            "repository = \"local/other\"",
        ),
    );
    let run = env.atelier(&["merge", &id]).code(1);
    assert!(
        run.stderr.contains("E_LEDGER_ROLLBACK")
            || run.stderr.contains("E_LEDGER_CORRUPT")
            || run.stderr.contains("E_ADOPTION_MISMATCH"),
        "{}",
        run.stderr
    );
}

// A new repository made where another one was (a fresh `git init`) is not taken for a rewind of
// the old one: this machine says the clone changed identity, and deleting the file it names
// accepts the new one.
#[test]
fn a_new_repository_at_the_same_path_starts_a_memory_of_its_own() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    std::fs::remove_dir_all(&env.repo).expect("rm");
    std::fs::create_dir_all(&env.repo).expect("mkdir");
    env.git(&["init", "-q", "-b", "main", "."]);
    env.git(&["config", "user.email", crate::support::PROPOSER]);
    env.git(&["config", "user.name", "Proposer"]);
    env.write("README.md", "# another project\n");
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "initial"]);
    env.atelier(&["init"]).ok();
    let signers = env.read("policies/allowed_signers");
    env.write(
        "policies/allowed_signers",
        &format!("{signers}{}\n", env.keygen("carol")),
    );
    env.git(&["add", "-A"]);
    env.git(&["commit", "-q", "-m", "Adopt atelier"]);
    // This machine knew another repository at this path: it says so, and how to accept it.
    let patch = env.patch(&[("README.md", "# another project, improved\n")]);
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Improve",
        ])
        .code(1);
    assert!(run.stderr.contains("E_ADOPTION_MISMATCH"), "{}", run.stderr);
    let file = run
        .stderr
        .split("delete ")
        .nth(1)
        .expect("the file to delete")
        .trim()
        .to_string();
    std::fs::remove_file(&file).expect("accept the new repository");
    let id = env.propose(&[("README.md", "# another project, improved\n")], "Improve");
    env.approve(&id, "carol").ok();
    env.atelier(&["merge", &id]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

// Only the gate's signature makes a merge commit's checkpoint a witness: a commit pushed to the
// branch with a made-up `Atelier-Ledger:` line is a bypass, never a reason to halt the gate.
#[test]
fn an_unsigned_ledger_line_on_the_branch_halts_nothing() {
    let env = Env::new();
    env.write("README.md", "# bypass\n");
    env.git(&["add", "-A"]);
    env.git(&[
        "commit",
        "-q",
        "-m",
        &format!(
            "quick fix\n\nAtelier-Ledger: 1000000 {} AAAA",
            "0".repeat(64)
        ),
    ]);
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    let f = findings(&env, &env.repo);
    assert_eq!(f, ["E_UNLEDGERED_COMMIT"], "{f:?}");
}

// A listed signer's token copied from another repository (their history is public) carries a
// checkpoint of that repository's ledger: it witnesses nothing here, live or in audit.
#[test]
fn a_token_from_another_repository_is_no_witness() {
    use atelier::governance::token;
    let env = Env::new();
    let id = env.propose_code();
    record_crafted(&env, &id, "alice", |p| {
        p.repository = "someone/else".into();
        p.checkpoint = Some(token::SeenCheckpoint {
            size: 9_999,
            root: "ab".repeat(32),
        });
    });
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_QUORUM_NOT_MET"], "{v:#}");
    env.atelier(&["audit", "verify"]).ok();
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

/// Points `refs/atelier/ledger` at a new commit holding `lines` and a checkpoint signed with
/// `key` (as someone holding that key would write it).
fn write_ledger(env: &Env, lines: &[String], key: &ed25519_dalek::SigningKey) -> git2::Oid {
    let repo = Repository::open(&env.repo).expect("open");
    let leaves: Vec<_> = lines
        .iter()
        .map(|l| atelier::audit::merkle::leaf_hash(l.as_bytes()))
        .collect();
    let note = atelier::audit::checkpoint::Checkpoint {
        origin: ledger::origin("local/repo"),
        size: lines.len() as u64,
        root: atelier::audit::merkle::root(&leaves),
    }
    .sign(ledger::KEY_NAME, key);
    let mut text = lines.join("\n");
    text.push('\n');
    let mut entries = repo.treebuilder(None).expect("tb");
    entries
        .insert(
            "00000000.jsonl",
            repo.blob(text.as_bytes()).expect("blob"),
            0o100644,
        )
        .expect("insert");
    let entries = entries.write().expect("entries");
    let mut root = repo.treebuilder(None).expect("tb");
    root.insert("entries", entries, 0o040000).expect("insert");
    root.insert(
        "checkpoint",
        repo.blob(note.as_bytes()).expect("blob"),
        0o100644,
    )
    .expect("insert");
    let tree = repo.find_tree(root.write().expect("tree")).expect("tree");
    let sig = git2::Signature::now("mallory", "mallory@example.org").expect("sig");
    let parent = repo
        .find_commit(repo.refname_to_id(ledger::REF).expect("ledger"))
        .expect("commit");
    let c = repo
        .commit(None, &sig, &sig, "ledger", &tree, &[&parent])
        .expect("commit");
    repo.reference(ledger::REF, c, true, "forge").expect("ref");
    c
}

// A gate key swapped in for a moment (atelier.toml pointed at the attacker's key, a longer
// ledger signed with it) while the operator runs one routine command must not plant a false
// memory that later halts every merge.
#[test]
fn a_gate_key_swapped_in_for_a_moment_plants_no_false_memory() {
    let env = Env::new();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    let second = env.propose(&[("README.md", "# second\n")], "Second");
    let real = env.git(&["rev-parse", ledger::REF]).trim().to_string();
    let config = env.read("atelier.toml");
    // The attacker's key and a ledger of the real entries plus junk, signed with it.
    let evil = env.tmp.path().join("evil");
    env.atelier(&["keygen", evil.to_str().expect("utf8")]).ok();
    let evil_path = evil.clone();
    let evil = atelier::workflow::read_signing_key(&evil).expect("key");
    let repo = Repository::open(&env.repo).expect("open");
    let mut lines = ledger::read(&repo).expect("read").expect("ledger").lines;
    for _ in 0..50 {
        let entry = ledger::Entry {
            seq: lines.len() as u64,
            at: crate::support::T0.into(),
            event: ledger::Event::Closed {
                proposal: "999".into(),
                reason: None,
            },
        };
        lines.push(serde_json::to_string(&entry).expect("json"));
    }
    write_ledger(&env, &lines, &evil);
    let swapped = config.replace(
        "[gate]\n",
        &format!("[gate]\nkey = \"{}\"\n", evil_path.display()),
    );
    assert_ne!(swapped, config);
    env.write("atelier.toml", &swapped);
    // The operator's routine command appends (with whatever key is configured)...
    env.atelier(&["gate", &second]).code(1);
    // ...then the attacker puts everything back.
    env.write("atelier.toml", &config);
    force_ref(&env, ledger::REF, &real);
    let (code, v) = env.gate(&second);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_QUORUM_NOT_MET"], "{v:#}");
    env.approve(&second, "bob").ok();
    env.atelier(&["merge", &second]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

// Someone whose key is listed but who may not approve (a line for git commit signing only)
// cannot use a token's checkpoint to halt a proposal or fail the audit.
#[test]
fn only_someone_who_may_approve_is_a_witness() {
    use atelier::governance::token;
    let env = Env::with(Setup {
        principals: vec!["alice", "bob", "dave"],
        ..Setup::default()
    });
    // dave's line allows only git's namespace.
    let signers = env.read("policies/allowed_signers");
    assert!(signers.contains("dave@example.org namespaces=\"atelier-approval\""));
    let id = env.propose(
        &[(
            "policies/allowed_signers",
            &signers.replace(
                "dave@example.org namespaces=\"atelier-approval\"",
                "dave@example.org namespaces=\"git\"",
            ),
        )],
        "dave signs commits only",
    );
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    env.atelier(&["merge", &id]).ok();
    let id = env.propose_code();
    record_crafted(&env, &id, "dave", |p| {
        p.checkpoint = Some(token::SeenCheckpoint {
            size: 999,
            root: "ab".repeat(32),
        });
    });
    let (code, v) = env.gate(&id);
    assert_eq!(code, 1);
    assert_eq!(unmet(&v), ["E_QUORUM_NOT_MET"], "{v:#}");
    env.atelier(&["audit", "verify"]).ok();
}

// A gate signature over a checkpoint that never landed (or any checkpoint note) cannot be made
// into a branch anchor: anchors are signed for one merge commit (its parents and tree).
#[test]
fn a_checkpoint_signature_is_no_anchor_on_another_commit() {
    let env = Env::new();
    let id = env.propose_code();
    let gate = atelier::workflow::read_signing_key(&env.gate_key()).expect("key");
    // A gate-signed checkpoint of a ledger fork (as a failed append leaves behind).
    let note = atelier::audit::checkpoint::Checkpoint {
        origin: ledger::origin("local/repo"),
        size: 3,
        root: [7u8; 32],
    }
    .sign(ledger::KEY_NAME, &gate);
    let signature = note
        .lines()
        .find_map(|l| l.strip_prefix("\u{2014} atelier-gate "))
        .expect("signature line");
    env.write("README.md", "# chore\n");
    env.git(&["add", "-A"]);
    env.git(&[
        "commit",
        "-q",
        "-m",
        &format!("chore\n\nAtelier-Ledger: 3 {} {signature}", "07".repeat(32)),
    ]);
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    let f = findings(&env, &env.repo);
    assert_eq!(f, ["E_UNLEDGERED_COMMIT"], "{f:?}");
}

// Rotating the gate key: a constitutional change publishes the new public key; its merge records
// the rotation in the ledger, signed by the old key; the operator installs the new private key,
// and the ledger goes on under it. The audit follows the chain and stays clean.
#[test]
fn the_gate_key_can_be_rotated() {
    let env = Env::new();
    let new = env.tmp.path().join("new-gate");
    env.atelier(&[
        "keygen",
        new.to_str().expect("utf8"),
        "--principal",
        "atelier-gate",
    ])
    .ok();
    let public = std::fs::read_to_string(new.with_extension("pub")).expect("pub");
    let waiting = env.propose(&[("README.md", "# waiting\n")], "Proposed before");
    let id = env.propose(&[("policies/gate_key.pub", &public)], "Rotate the gate key");
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    env.atelier(&["merge", &id]).ok();
    let log = env.atelier(&["audit", "log"]).ok();
    assert!(
        log.stdout.contains("gate key rotated by proposal"),
        "{}",
        log.stdout
    );
    // Until the new key is installed, nothing more is signed with the old one.
    let refused = env.approve(&waiting, "bob").code(1);
    assert!(
        refused.stderr.contains("E_GATE_KEY_NOT_IN_FORCE"),
        "{}",
        refused.stderr
    );
    assert!(
        refused
            .stderr
            .contains(&env.gate_key().display().to_string()),
        "{}",
        refused.stderr
    );
    std::fs::copy(&new, env.gate_key()).expect("install");
    // An approval right after the rotation, before the new key signed anything. It counts:
    // the refused one above left no comment behind (it was refused before anything was posted).
    env.approve(&waiting, "bob").ok();
    env.atelier(&["merge", &waiting]).ok();
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

/// After a recorded rotation, a checkpoint signed by the old key (stolen, or kept by a former
/// operator) is refused by the audit, though that key was once the gate's and the branch still
/// publishes it in its history.
#[test]
fn after_a_rotation_the_old_key_signs_nothing_the_audit_accepts() {
    let env = Env::new();
    let old = atelier::workflow::read_signing_key(&env.gate_key()).expect("key");
    rotate(&env, "new-gate");
    env.propose_code();
    env.atelier(&["audit", "verify"]).ok();
    // The holder of the old key appends an entry and signs the checkpoint.
    let repo = Repository::open(&env.repo).expect("open");
    let mut lines = ledger::read(&repo).expect("read").expect("ledger").lines;
    let entry = ledger::Entry {
        seq: lines.len() as u64,
        at: crate::support::T0.into(),
        event: ledger::Event::Closed {
            proposal: "2".into(),
            reason: Some("withdrawn".into()),
        },
    };
    lines.push(serde_json::to_string(&entry).expect("json"));
    write_ledger(&env, &lines, &old);
    let run = env.atelier(&["audit", "verify", "--json"]).code(1);
    let v = run.json();
    assert!(
        v["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["code"] == "E_LEDGER_SIGNATURE"
                && f["detail"].as_str().expect("detail").contains("in force")),
        "{v:#}"
    );
}

/// The gate key's holder cannot name a successor on their own: a rotation entry that no merged
/// change publishes is reported.
#[test]
fn a_rotation_no_merge_published_is_reported() {
    let env = Env::new();
    let gate = atelier::workflow::read_signing_key(&env.gate_key()).expect("key");
    env.propose_code();
    let evil = env.tmp.path().join("evil");
    env.atelier(&[
        "keygen",
        evil.to_str().expect("utf8"),
        "--principal",
        "atelier-gate",
    ])
    .ok();
    let evil_key = atelier::workflow::read_signing_key(&evil).expect("key");
    let public = std::fs::read_to_string(evil.with_extension("pub")).expect("pub");
    let repo = Repository::open(&env.repo).expect("open");
    let mut lines = ledger::read(&repo).expect("read").expect("ledger").lines;
    let head = env.git(&["rev-parse", "main"]).trim().to_string();
    let entry = ledger::Entry {
        seq: lines.len() as u64,
        at: crate::support::T0.into(),
        event: ledger::Event::GateKeyRotated {
            proposal: "1".into(),
            commit: head,
            key: public.trim().to_string(),
            recovered: false,
        },
    };
    lines.push(serde_json::to_string(&entry).expect("json"));
    write_ledger(&env, &lines, &gate);
    // The attacker then signs with the key they named.
    let entry = ledger::Entry {
        seq: lines.len() as u64,
        at: crate::support::T0.into(),
        event: ledger::Event::Closed {
            proposal: "1".into(),
            reason: None,
        },
    };
    lines.push(serde_json::to_string(&entry).expect("json"));
    write_ledger(&env, &lines, &evil_key);
    let f = findings(&env, &env.repo);
    assert!(f.contains(&"E_LEDGER_CONTRADICTION".to_string()), "{f:?}");
}

/// Rotates the gate key through a constitution proposal and installs the new private key.
fn rotate(env: &Env, name: &str) {
    let new = env.tmp.path().join(name);
    env.atelier(&[
        "keygen",
        new.to_str().expect("utf8"),
        "--principal",
        "atelier-gate",
    ])
    .ok();
    let public = std::fs::read_to_string(new.with_extension("pub")).expect("pub");
    let id = env.propose(&[("policies/gate_key.pub", &public)], "Rotate the gate key");
    env.approve(&id, "alice").ok();
    env.approve(&id, "bob").ok();
    env.atelier(&["merge", &id]).ok();
    std::fs::copy(&new, env.gate_key()).expect("install");
}

/// A lost gate key: `gate-key recover` makes a new one and proposes publishing it; nothing
/// merges it but the constitution quorum; its merge records the recovery, which `audit verify`
/// shows as one; the ledger goes on under the new key. Done after an ordinary rotation too, so
/// the chain of keys is followed across both.
#[test]
fn a_lost_gate_key_is_recovered_by_the_constitution_quorum_and_the_audit_shows_it() {
    let env = Env::new();
    rotate(&env, "second-gate");
    let id = env.propose_code();
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    std::fs::remove_file(env.gate_key()).expect("lose it");
    let patch = env.patch(&[("README.md", "# lost\n")]);
    let lost = env
        .atelier(&[
            "propose",
            "--patch",
            patch.to_str().expect("utf8"),
            "--title",
            "Lost",
        ])
        .code(2);
    assert!(
        lost.stderr.contains("atelier gate-key recover"),
        "{}",
        lost.stderr
    );
    let r = env.atelier(&["gate-key", "recover", "--json"]).ok().json();
    let rid = r["proposal"].as_str().expect("proposal").to_string();
    assert!(env.gate_key().exists());
    assert_eq!(r["key"], env.gate_key().display().to_string());
    // A second `recover` does not make another key.
    let again = env.atelier(&["gate-key", "recover"]).code(2);
    assert!(
        again.stderr.contains("a recovery is in progress"),
        "{}",
        again.stderr
    );
    // The path quorum is not enough: it is a constitution change.
    env.approve(&rid, "alice").ok();
    env.atelier(&["merge", &rid]).code(1);
    env.approve(&rid, "bob").ok();
    env.atelier(&["merge", &rid]).ok();
    let v = env.atelier(&["audit", "verify", "--json"]).ok().json();
    let history: Vec<String> = v["gate_keys"]
        .as_array()
        .expect("gate key history")
        .iter()
        .map(|l| l.as_str().expect("line").to_string())
        .collect();
    assert_eq!(history.len(), 2, "{history:?}");
    assert!(history[0].contains("rotated"), "{history:?}");
    assert!(
        history[1].contains("RECOVERED") && history[1].contains("signed by the new key before"),
        "{history:?}"
    );
    let text = env.atelier(&["audit", "verify"]).ok();
    assert!(text.stdout.contains("gate key history:"), "{}", text.stdout);
    // Life goes on under the new key.
    let id = env.propose(&[("README.md", "# after\n")], "After the recovery");
    env.approve(&id, "alice").ok();
    env.atelier(&["merge", &id]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

/// A recovery nobody approved: the entries the new key signed stay unaccepted.
#[test]
fn a_recovery_the_quorum_never_merged_leaves_the_new_keys_entries_refused() {
    let env = Env::new();
    std::fs::remove_file(env.gate_key()).expect("lose it");
    env.atelier(&["gate-key", "recover"]).ok();
    let f = findings(&env, &env.repo);
    assert!(f.contains(&"E_LEDGER_SIGNATURE".to_string()), "{f:?}");
}

/// A key the branch never published, swapped in without a recovery, signs nothing.
#[test]
fn a_gate_key_no_branch_published_signs_nothing() {
    let env = Env::new();
    let other = env.tmp.path().join("other");
    env.atelier(&[
        "keygen",
        other.to_str().expect("utf8"),
        "--principal",
        "atelier-gate",
    ])
    .ok();
    std::fs::copy(&other, env.gate_key()).expect("swap");
    let run = env
        .atelier(&[
            "propose",
            "--patch",
            env.patch(&[("README.md", "# x\n")]).to_str().expect("utf8"),
            "--title",
            "x",
        ])
        .code(1);
    assert!(
        run.stderr.contains("E_GATE_KEY_NOT_IN_FORCE"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("gate-key recover"), "{}", run.stderr);
}

// The gate appends only onto a ledger signed by its own key (or the one its memory pins): a
// ledger signed by a key that a commit swapped onto the branch publishes is refused, so a
// rejection recorded meanwhile cannot go into a ledger the attacker then throws away.
#[test]
fn the_gate_never_appends_to_a_ledger_signed_by_a_key_the_branch_names() {
    let env = Env::new();
    let id = env.propose_code();
    let evil_path = env.tmp.path().join("evil");
    env.atelier(&[
        "keygen",
        evil_path.to_str().expect("utf8"),
        "--principal",
        "atelier-gate",
    ])
    .ok();
    let evil = atelier::workflow::read_signing_key(&evil_path).expect("key");
    let public = std::fs::read_to_string(evil_path.with_extension("pub")).expect("pub");
    // main moves to a commit publishing the attacker's gate key...
    env.write("policies/gate_key.pub", &public);
    env.git(&["commit", "-q", "-am", "new gate key"]);
    // ...and the ledger to the real entries plus one, signed with it.
    let repo = Repository::open(&env.repo).expect("open");
    let mut lines = ledger::read(&repo).expect("read").expect("ledger").lines;
    let entry = ledger::Entry {
        seq: lines.len() as u64,
        at: crate::support::T0.into(),
        event: ledger::Event::Closed {
            proposal: "999".into(),
            reason: None,
        },
    };
    lines.push(serde_json::to_string(&entry).expect("json"));
    write_ledger(&env, &lines, &evil);
    let run = env.reject(&id, "bob").code(1);
    assert!(run.stderr.contains("E_LEDGER_CORRUPT"), "{}", run.stderr);
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

/// Signs proposal `id`'s current payload, edited by `edit`, with `who`'s key and records it.
fn record_crafted(
    env: &Env,
    id: &str,
    who: &str,
    edit: impl Fn(&mut atelier::governance::token::Payload),
) {
    use atelier::governance::token::{self, Payload};
    let key = atelier::workflow::read_signing_key(&env.key(who)).expect("key");
    let text = env.atelier(&["approve", id, "--payload"]).ok().stdout;
    let mut p = Payload::parse(&text).expect("payload");
    edit(&mut p);
    let n = std::fs::read_dir(env.tmp.path()).expect("ls").count();
    let file = env.file(&format!("crafted-{n}"), &token::sign(&p, &key).to_text());
    // Recorded as asked; exit 1 when approve already sees it will not count.
    let r = env.atelier(&["approve", id, "--token", file.to_str().expect("utf8")]);
    assert!(r.code == 0 || r.code == 1, "{}", r.stderr);
}
