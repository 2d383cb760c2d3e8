//! An operator upgrades: the gate key an older version left under `.atelier/` moves out of the
//! repository, and never while another command holds the repository lock.

use crate::support::Env;

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
