//! An operator keeps the gate key: moved out of the repository (never while another command holds
//! the lock), rotated, recovered by the constitution quorum, and never taken from where a branch
//! or a planted file points.

use atelier::audit::ledger;
use git2::Repository;

use crate::support::ledger::{findings, write_ledger};
use crate::support::{bin, Env};

/// A repository an older version adopted keeps its gate key in `.atelier/gate_key` with
/// `[gate] key` saying so: the first command moves it out, says so, and everything goes on
/// with the same key.
#[test]
fn a_gate_key_left_in_the_repository_is_moved_out_with_a_message() {
    // What an older version left: atelier.toml naming the key under .atelier/ (adopted so), and
    // the key there.
    let env = Env::with(crate::support::Setup {
        config_replace: vec![(
            "[gate]\n".into(),
            "[gate]\nkey = \".atelier/gate_key\"\n".into(),
        )],
        ..Default::default()
    });
    let key = env.gate_key();
    let text = std::fs::read_to_string(&key).expect("key");
    std::fs::create_dir_all(env.repo.join(".atelier")).expect("mkdir");
    std::fs::write(env.repo.join(".atelier/gate_key"), &text).expect("write");
    std::fs::remove_file(&key).expect("remove");
    let id = env.propose_code();
    assert!(!env.repo.join(".atelier/gate_key").exists(), "moved");
    assert_eq!(std::fs::read_to_string(&key).expect("moved"), text);
    let run = env.approve(&id, "alice");
    assert!(
        !run.stderr.contains("moved the gate key"),
        "once: {}",
        run.stderr
    );
    env.atelier(&["merge", &id]).ok();
    env.atelier(&["audit", "verify"]).ok();
}

#[test]
fn the_move_says_where_and_refuses_to_replace_a_different_key() {
    let env = Env::new();
    let key = env.gate_key();
    let text = std::fs::read_to_string(&key).expect("key");
    std::fs::create_dir_all(env.repo.join(".atelier")).expect("mkdir");
    std::fs::write(env.repo.join(".atelier/gate_key"), &text).expect("write");
    std::fs::remove_file(&key).expect("remove");
    let run = env.atelier(&["proposals"]).ok();
    assert!(
        run.stderr
            .contains("moved the gate key out of the repository")
            && run.stderr.contains(&key.display().to_string())
            && run.stderr.contains("Back it up"),
        "{}",
        run.stderr
    );
    // A different key left behind is never moved over the real one, nor used.
    std::fs::write(env.repo.join(".atelier/gate_key"), "not the key\n").expect("write");
    let run = env.atelier(&["proposals"]).ok();
    assert!(
        run.stderr.contains("is not this repository's gate key"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&key).expect("kept"), text);
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

/// `gatekey::migrate` runs before every command and adopts whatever it finds at
/// `.atelier/gate_key` (reading through a symlink) whenever this HOME has no key: it never
/// checks the key against `policies/gate_key.pub`. A branch that tracks `.atelier/gate_key`
/// (git checks out tracked files over ignored ones) plants it in every clone that checks the
/// branch out; on an approver's machine (or the gate's under another HOME, `sudo`) the next
/// command makes it "this machine's gate key", which `gate_public_key` then prefers to the
/// published one (`verified_ledger`, the checkpoint an approval vouches for).
#[test]
fn a_key_planted_at_the_legacy_path_is_never_adopted_as_the_gate_key() {
    let env = Env::new();
    let mallory = env.tmp.path().join("mallory");
    env.atelier(&[
        "keygen",
        mallory.to_str().expect("utf8"),
        "--principal",
        "mallory@example.org",
    ])
    .ok();
    let planted = std::fs::read(&mallory).expect("key");
    // A branch that carries the key (force-added past .gitignore), checked out to look at it.
    env.git(&["checkout", "-q", "-b", "look-at-me"]);
    std::fs::create_dir_all(env.repo.join(".atelier")).expect("mkdir");
    std::fs::copy(&mallory, env.repo.join(".atelier/gate_key")).expect("copy");
    env.git(&["add", "-f", ".atelier/gate_key"]);
    env.git(&["commit", "-q", "-m", "innocent"]);
    // Another machine's home (an approver's), or the gate's own under sudo.
    let other = env.tmp.path().join("home2");
    std::fs::create_dir_all(&other).expect("mkdir");
    let o = env
        .command(bin())
        .env("HOME", &other)
        .arg("-C")
        .arg(&env.repo)
        .arg("proposals")
        .output()
        .expect("run");
    let adopted = atelier::workflow::gatekey::directory_in(&other.join(".local/share"), &env.repo)
        .join("gate_key");
    assert!(
        std::fs::read(&adopted).ok() != Some(planted),
        "a key the protected branch does not publish became this machine's gate key\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Through a symlink at the legacy path, the file it points at (here the
/// operator's own SSH key) is copied into the gate key directory and used as the gate key.
#[test]
fn a_symlink_at_the_legacy_path_is_never_followed() {
    let env = Env::new();
    let mallory = env.tmp.path().join("mallory");
    env.atelier(&[
        "keygen",
        mallory.to_str().expect("utf8"),
        "--principal",
        "mallory@example.org",
    ])
    .ok();
    let ssh = env.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::copy(&mallory, ssh.join("id_ed25519")).expect("copy");
    std::fs::create_dir_all(env.repo.join(".atelier")).expect("mkdir");
    std::os::unix::fs::symlink(ssh.join("id_ed25519"), env.repo.join(".atelier/gate_key"))
        .expect("symlink");
    let other = env.tmp.path().join("home2");
    std::fs::create_dir_all(&other).expect("mkdir");
    let _ = env
        .command(bin())
        .env("HOME", &other)
        .arg("-C")
        .arg(&env.repo)
        .arg("proposals")
        .output()
        .expect("run");
    let adopted = atelier::workflow::gatekey::directory_in(&other.join(".local/share"), &env.repo)
        .join("gate_key");
    assert!(
        !adopted.exists(),
        "the migration followed a symlink at .atelier/gate_key and adopted its target"
    );
}

/// `proposals` (read-only, so it holds no lock of its own) runs the move first: with another
/// command holding `.atelier/lock`, the key stays where it is, the command says why and still
/// works; once the lock is free, the next command moves it.
#[test]
fn the_gate_key_moves_only_while_nobody_holds_the_lock() {
    let env = Env::new();
    let key = env.gate_key();
    let text = std::fs::read_to_string(&key).expect("key");
    let legacy = env.repo.join(".atelier/gate_key");
    std::fs::create_dir_all(env.repo.join(".atelier")).expect("mkdir");
    std::fs::write(&legacy, &text).expect("write");
    std::fs::remove_file(&key).expect("remove");

    let held = atelier::fsutil::Lock::acquire(&env.repo.join(".atelier/lock")).expect("lock");
    let run = env.atelier(&["proposals"]).ok();
    assert!(
        run.stderr.contains("the gate key stays in")
            && run
                .stderr
                .contains(".atelier/lock is held by another command"),
        "{}",
        run.stderr
    );
    assert_eq!(std::fs::read_to_string(&legacy).expect("left"), text);
    assert!(!key.exists(), "nothing written while the lock is held");

    drop(held);
    let run = env.atelier(&["proposals"]).ok();
    assert!(
        run.stderr
            .contains("moved the gate key out of the repository"),
        "{}",
        run.stderr
    );
    assert!(!legacy.exists(), "moved");
    assert_eq!(std::fs::read_to_string(&key).expect("moved"), text);
}

/// `[gate] key` may name the old place by another spelling (`..`, a symlinked folder): the key
/// is then already where the configuration says, and "removing the old copy" would remove the
/// only one. Nothing moves, nothing is removed.
#[test]
fn a_gate_key_named_by_another_spelling_of_its_place_is_left_alone() {
    let env = Env::new();
    let key = env.gate_key();
    let text = std::fs::read_to_string(&key).expect("key");
    let legacy = env.repo.join(".atelier/gate_key");
    std::fs::create_dir_all(env.repo.join(".atelier")).expect("mkdir");
    std::fs::rename(&key, &legacy).expect("move");
    let alias = env.repo.join(".atelier/../.atelier/gate_key");
    let config = std::fs::read_to_string(env.repo.join("atelier.toml")).expect("config");
    let config = config.replace(
        "[gate]\n",
        &format!("[gate]\nkey = \"{}\"\n", alias.display()),
    );
    assert!(config.contains(&alias.display().to_string()), "{config}");
    std::fs::write(env.repo.join("atelier.toml"), config).expect("write");
    let run = env.atelier(&["proposals"]).ok();
    assert!(!run.stderr.contains("moved the gate key"), "{}", run.stderr);
    assert_eq!(
        std::fs::read_to_string(&legacy).expect("the only copy is kept"),
        text
    );
}
