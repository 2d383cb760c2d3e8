//! Witnesses of the ledger: approvers' checkpoints, merge commits' checkpoints and the local
//! memory catch a ledger rewound (alone or with main); what is no witness (another repository's
//! token, an unsigned line, a key swapped in for a moment).

use atelier::audit::ledger;
use git2::Repository;
use serde_json::Value;

use crate::support::ledger::{
    entries, fetch_ledger, findings, force_ref, fresh_clone, write_ledger,
};
use crate::support::{bin, unmet, Env, Setup};

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

/// A clone of the gate's repository, with the ledger fetched, that has verified it once.
fn auditor(env: &Env) -> std::path::PathBuf {
    let clone = fresh_clone(env, "auditor");
    env.atelier_in(&clone, &["audit", "verify"]).ok();
    clone
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
        .and_then(|rest| rest.lines().next())
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
