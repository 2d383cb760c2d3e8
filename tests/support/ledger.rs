//! Reading and writing the ledger directly, the way an attacker with write access to the files
//! would, and reading the audit's findings.

use atelier::audit::ledger;
use git2::Repository;
use serde_json::Value;

use crate::support::Env;

/// The codes `audit verify` reports (it must exit 1).
pub(crate) fn findings(env: &Env, dir: &std::path::Path) -> Vec<String> {
    let run = env.atelier_in(dir, &["audit", "verify", "--json"]).code(1);
    run.json()["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code").to_string())
        .collect()
}

pub(crate) fn entries(env: &Env) -> Vec<Value> {
    let run = env.atelier(&["audit", "log", "--json"]).ok();
    run.json().as_array().expect("entries").clone()
}

pub(crate) fn force_ref(env: &Env, name: &str, to: &str) {
    env.git(&["update-ref", name, to]);
}

/// A clone of the gate's repository with the ledger fetched.
pub(crate) fn fresh_clone(env: &Env, name: &str) -> std::path::PathBuf {
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

pub(crate) fn fetch_ledger(env: &Env, clone: &std::path::Path, force: bool) {
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

/// Points `refs/atelier/ledger` at a new commit holding `lines` and a checkpoint signed with
/// `key` (as someone holding that key would write it).
pub(crate) fn write_ledger(
    env: &Env,
    lines: &[String],
    key: &ed25519_dalek::SigningKey,
) -> git2::Oid {
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
