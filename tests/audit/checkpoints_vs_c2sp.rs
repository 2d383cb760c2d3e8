//! The ledger's signed checkpoints and Merkle proofs checked by implementations Atelier did not
//! write: `signed_note` (C2SP signed-note) and `tlog_tiles` (C2SP tlog-checkpoint, and the
//! RFC 6962 tree and proofs of Go's golang.org/x/mod/sumdb/tlog, whose test vectors it carries).
//! On every version of the demo's ledger they agree with Atelier; on spoiled checkpoints,
//! entries and proofs both refuse.

use atelier::audit::checkpoint::Checkpoint;
use atelier::audit::{ledger, merkle};
use signed_note::{Note, StandardVerifier, VerifierList};
use tlog_tiles::{check_record, check_tree, record_hash, stored_hashes, tree_hash, Hash};

use crate::support::Env;

/// The stored hashes of a tree, as tlog_tiles builds and reads them.
struct Store(Vec<Hash>);

impl tlog_tiles::HashReader for Store {
    fn read_hashes(&self, indexes: &[u64]) -> Result<Vec<Hash>, tlog_tiles::Error> {
        indexes
            .iter()
            .map(|&i| {
                self.0
                    .get(i as usize)
                    .copied()
                    .ok_or(tlog_tiles::Error::IndexesNotInTree)
            })
            .collect()
    }
}

impl Store {
    fn of(lines: &[String]) -> Store {
        let mut store = Store(Vec::new());
        for (n, line) in lines.iter().enumerate() {
            let more = stored_hashes(n as u64, line.as_bytes(), &store).expect("stored hashes");
            store.0.extend(more);
        }
        store
    }
}

/// The gate's public key, from the OpenSSH line in policies/gate_key.pub (read here, not by
/// Atelier's parser): the string "ssh-ed25519", then the 32 key bytes.
fn gate_key(repo: &std::path::Path) -> ed25519_dalek::VerifyingKey {
    use base64::Engine as _;
    let text = std::fs::read_to_string(repo.join("policies/gate_key.pub")).expect("gate key");
    let b64 = text.split_whitespace().nth(1).expect("the key's base64");
    let blob = base64::engine::general_purpose::STANDARD
        .decode(b64)
        .expect("base64");
    let name_len = u32::from_be_bytes(blob[..4].try_into().expect("len")) as usize;
    assert_eq!(&blob[4..4 + name_len], b"ssh-ed25519");
    let key = &blob[4 + name_len + 4..];
    ed25519_dalek::VerifyingKey::from_bytes(key.try_into().expect("32 bytes")).expect("key")
}

/// Whether signed_note accepts `note` as signed by the gate, and tlog_tiles reads it as a
/// checkpoint: its size and root.
fn theirs(note: &str, key: &ed25519_dalek::VerifyingKey) -> Option<(u64, Hash)> {
    let vkey = signed_note::new_ed25519_verifier_key(ledger::KEY_NAME, key);
    let verifier = StandardVerifier::new(&vkey).expect("verifier key");
    let known = VerifierList::new(vec![Box::new(verifier)]);
    let parsed = Note::from_bytes(note.as_bytes()).ok()?;
    parsed.verify(&known).ok()?;
    let cp = tlog_tiles::Checkpoint::from_bytes(parsed.text()).ok()?;
    Some((cp.size(), *cp.hash()))
}

fn ours(note: &str, key: &ed25519_dalek::VerifyingKey) -> Option<(u64, Hash)> {
    Checkpoint::verify(note, ledger::KEY_NAME, &[*key])
        .ok()
        .map(|c| (c.size, Hash(c.root)))
}

#[test]
fn the_demo_s_checkpoints_and_proofs_verify_with_c2sp_implementations_and_spoiled_ones_do_not() {
    let env = Env::bare_repo();
    let dir = env.tmp.path().join("demo");
    env.atelier(&["demo", "--dir", dir.to_str().expect("utf8")])
        .ok();
    let repo_dir = dir.join("repo");
    let repo = git2::Repository::open(&repo_dir).expect("open the demo repository");
    let key = gate_key(&repo_dir);

    // Every version of the ledger, oldest first.
    let mut walk = repo.revwalk().expect("revwalk");
    walk.push_ref(ledger::REF).expect("the ledger ref");
    walk.simplify_first_parent().expect("first parent");
    let mut versions: Vec<ledger::Snapshot> = walk
        .map(|oid| ledger::read_at(&repo, oid.expect("oid")).expect("a ledger version"))
        .collect();
    versions.reverse();
    assert!(versions.len() >= 5, "{} ledger versions", versions.len());

    let mut heads: Vec<(u64, Hash)> = Vec::new();
    for v in &versions {
        let (size, root) = theirs(&v.checkpoint, &key)
            .unwrap_or_else(|| panic!("signed_note or tlog_tiles refused:\n{}", v.checkpoint));
        assert_eq!(ours(&v.checkpoint, &key), Some((size, root)));
        assert_eq!(size, v.lines.len() as u64);
        let store = Store::of(&v.lines);
        assert_eq!(
            tree_hash(size, &store).expect("tree hash"),
            root,
            "the root tlog_tiles computes from the entries"
        );
        for (i, leaf) in v.leaf_hashes().iter().enumerate() {
            assert_eq!(Hash(*leaf), record_hash(v.lines[i].as_bytes()));
        }
        heads.push((size, root));
    }

    // Consistency of each checkpoint with every earlier one, as Atelier proves it.
    let last = versions.last().expect("a version");
    let leaves = last.leaf_hashes();
    let store = Store::of(&last.lines);
    for (j, &(n, th_n)) in heads.iter().enumerate() {
        for &(m, th_m) in &heads[..j] {
            let proof = merkle::consistency_proof(&leaves[..n as usize], m).expect("proof");
            let proof: Vec<Hash> = proof.into_iter().map(Hash).collect();
            let checked = check_tree(&proof, n, th_n, m, th_m);
            assert!(checked.is_ok(), "consistency {m} -> {n}: {checked:?}");
            assert_eq!(tlog_tiles::prove_tree(n, m, &store).expect("prove"), proof);
        }
    }
    // Inclusion of every entry in the last checkpoint.
    let (n, th) = *heads.last().expect("a head");
    for (i, line) in last.lines.iter().enumerate() {
        let proof: Vec<Hash> = merkle::inclusion_proof(&leaves, i as u64)
            .expect("proof")
            .into_iter()
            .map(Hash)
            .collect();
        let checked = check_record(&proof, n, th, i as u64, record_hash(line.as_bytes()));
        assert!(checked.is_ok(), "inclusion of entry {i}: {checked:?}");
        assert_eq!(
            tlog_tiles::prove_record(n, i as u64, &store).expect("prove"),
            proof
        );
    }

    // Spoiled checkpoints: both refuse each.
    let note = &last.checkpoint;
    let body: Vec<&str> = note.lines().collect();
    let other_root = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(heads[0].1 .0)
    };
    let flipped_signature = {
        let sig = body.last().expect("a signature line");
        let mut c: Vec<char> = sig.chars().collect();
        let j = c.len() - 6;
        c[j] = if c[j] == 'A' { 'B' } else { 'A' };
        note.replace(*sig, &c.into_iter().collect::<String>())
    };
    let spoiled = [
        ("another root", note.replace(body[2], &other_root)),
        (
            "a larger size",
            note.replacen(&format!("\n{}\n", body[1]), &format!("\n{}\n", n + 1), 1),
        ),
        (
            "another origin",
            note.replacen(body[0], "example.org/another-log", 1),
        ),
        ("a signature character", flipped_signature),
        (
            "no blank line before the signatures",
            note.replacen("\n\n", "\n", 1),
        ),
        (
            "another key's name",
            note.replace(
                &format!("\u{2014} {} ", ledger::KEY_NAME),
                "\u{2014} someone-else ",
            ),
        ),
    ];
    for (what, text) in spoiled {
        assert_ne!(&text, note, "{what}: the spoiling changed nothing");
        assert_eq!(
            theirs(&text, &key),
            None,
            "{what}: signed_note/tlog_tiles accepted it"
        );
        assert_eq!(ours(&text, &key), None, "{what}: Atelier accepted it");
    }

    // A spoiled entry: the root both compute no longer matches the signed one.
    let mut lines = last.lines.clone();
    lines[1] = lines[1].replacen("\"kind\"", "\"kind\" ", 1);
    assert_ne!(tree_hash(n, &Store::of(&lines)).expect("tree hash"), th);
    let spoiled_leaves: Vec<_> = lines
        .iter()
        .map(|l| merkle::leaf_hash(l.as_bytes()))
        .collect();
    assert_ne!(Hash(merkle::root(&spoiled_leaves)), th);
    // A spoiled proof: both refuse it.
    let mut proof: Vec<Hash> = merkle::inclusion_proof(&leaves, 0)
        .expect("proof")
        .into_iter()
        .map(Hash)
        .collect();
    proof[0].0[0] ^= 1;
    assert!(check_record(&proof, n, th, 0, record_hash(last.lines[0].as_bytes())).is_err());
    let raw: Vec<merkle::Hash> = proof.iter().map(|h| h.0).collect();
    assert!(!merkle::verify_inclusion(&leaves[0], 0, n, &raw, &th.0));
}
