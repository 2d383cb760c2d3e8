//! Editing forge records directly, the way an attacker with write access to `.atelier/` would.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::Env;

pub(crate) fn pull_file(env: &Env, n: u64) -> PathBuf {
    env.repo.join(format!(".atelier/forge/pulls/{n}.json"))
}

pub(crate) fn edit_record(env: &Env, n: u64, f: impl FnOnce(&mut Value)) {
    let path = pull_file(env, n);
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("record")).expect("json");
    f(&mut v);
    std::fs::write(&path, serde_json::to_string_pretty(&v).expect("json")).expect("write");
}
