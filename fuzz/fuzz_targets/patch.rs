//! The patches `atelier propose --patch` reads (`git::apply_patch` onto a fixed base commit):
//! reading and applying any bytes never panics; a patch that applies gives a tree the
//! repository holds, different from the base unless the patch only renames nothing, and
//! reading it again gives the same tree (applying is deterministic).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;

struct Base {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    commit: git2::Oid,
}

fn base() -> &'static Base {
    static BASE: OnceLock<Base> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = git2::Repository::init(dir.path()).expect("init");
        let mut tb = repo.treebuilder(None).expect("tb");
        for (name, text) in [
            ("README.md", "# demo\n"),
            ("lib.rs", "pub fn answer() -> u32 {\n    41\n}\n"),
        ] {
            let blob = repo.blob(text.as_bytes()).expect("blob");
            tb.insert(name, blob, 0o100644).expect("insert");
        }
        let tree = repo.find_tree(tb.write().expect("tree")).expect("tree");
        let sig = git2::Signature::new("fuzz", "fuzz@example.org", &git2::Time::new(0, 0))
            .expect("sig");
        let commit = repo
            .commit(Some("refs/heads/main"), &sig, &sig, "base", &tree, &[])
            .expect("commit");
        Base {
            path: dir.path().to_path_buf(),
            _dir: dir,
            commit,
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let b = base();
    let repo = git2::Repository::open(&b.path).expect("open");
    let commit = repo.find_commit(b.commit).expect("base");
    let first = atelier::git::apply_patch(&repo, &commit, data, "fuzz.patch", "main");
    let again = atelier::git::apply_patch(&repo, &commit, data, "fuzz.patch", "main");
    match (first, again) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "applying the same patch twice gave two trees");
            repo.find_tree(a.tree).expect("the tree is in the repository");
        }
        (Err(_), Err(_)) => {}
        (a, b) => panic!("applying the same patch twice disagreed: {a:?} / {b:?}"),
    }
});
