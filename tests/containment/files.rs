//! Files a contained worker cannot read or write: the gate key, git, the events file, the main
//! working tree, home, SSH keys, credentials, root-only files, the kernel keyring.

use std::path::Path;

use crate::containment::{denied, verdict_of};
use crate::support::skip::{require_landlock, skip};
use crate::support::swarm::{repo, Swarm};

#[test]
fn a_worker_cannot_read_the_gate_key() {
    require_landlock!();
    let s = Swarm::new("");
    let key = s.env.gate_key();
    assert!(key.exists());
    denied(&s, &format!("cat {}", key.display()));
    // Nor find it, nor reach it through the conductor's view of the filesystem.
    denied(&s, "ls \"$HOME/.local/share/atelier/gate\"");
    denied(&s, &format!("cat /proc/$PPID/root{}", key.display()));
    // Nor anything under the repository's .atelier/, by any path.
    denied(&s, "ls \"$(git rev-parse --git-common-dir)/../.atelier\"");
    denied(&s, "cat /proc/$PPID/cwd/atelier.toml");
}

#[test]
fn a_worker_cannot_move_a_branch_or_write_git() {
    require_landlock!();
    let s = Swarm::new("");
    let main = s.env.git(&["rev-parse", "main"]);
    denied(
        &s,
        &format!(
            "echo 0000000000000000000000000000000000000000 > {}/.git/refs/heads/main",
            repo(&s).display()
        ),
    );
    denied(&s, "git update-ref refs/heads/main HEAD~1");
    denied(
        &s,
        "git -c user.name=w -c user.email=w@x commit -qam evil --allow-empty",
    );
    denied(
        &s,
        "echo junk > \"$(git rev-parse --git-common-dir)/objects/evil\"",
    );
    assert_eq!(s.env.git(&["rev-parse", "main"]), main);
    assert!(!repo(&s).join(".git/objects/evil").exists());
}

#[test]
fn a_worker_cannot_write_the_events_file_or_the_forge() {
    require_landlock!();
    let s = Swarm::new("");
    let events = repo(&s).join(".atelier/runs/r1/events.jsonl");
    denied(
        &s,
        &format!(
            "echo '{{\"kind\":\"task-failed\"}}' >> {}",
            events.display()
        ),
    );
    let text = std::fs::read_to_string(&events).expect("events");
    assert!(!text.contains("{\"kind\":\"task-failed\"}"), "{text}");
    assert!(atelier::swarm::events::read(&events).is_ok());
    let s = Swarm::new("");
    denied(
        &s,
        &format!("mkdir -p {}/.atelier/forge/evil", repo(&s).display()),
    );
    assert!(!repo(&s).join(".atelier/forge/evil").exists());
}

#[test]
fn a_worker_cannot_write_the_main_working_tree_or_home() {
    require_landlock!();
    let s = Swarm::new("");
    denied(&s, &format!("echo evil > {}/README.md", repo(&s).display()));
    assert_eq!(s.env.read("README.md"), "# demo\n");
    let s = Swarm::new("");
    denied(&s, &format!("touch {}/EVIL", repo(&s).display()));
    assert!(!repo(&s).join("EVIL").exists());
    let s = Swarm::new("");
    denied(&s, "echo evil > \"$HOME/.bashrc\"");
    assert!(!s.env.home.join(".bashrc").exists());
}

#[test]
fn a_worker_cannot_read_ssh_keys() {
    require_landlock!();
    let s = Swarm::new("");
    let ssh = s.env.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE\n").expect("write");
    denied(&s, "cat \"$HOME/.ssh/id_ed25519\"");
    denied(&s, "ls \"$HOME\"");
}

#[test]
fn a_worker_cannot_follow_a_symlink_out_of_its_worktree() {
    require_landlock!();
    let s = Swarm::new("");
    denied(
        &s,
        &format!(
            "ln -s {} k; cat k; r=$?; rm -f k; exit $r",
            s.env.gate_key().display()
        ),
    );
    let s = Swarm::new("");
    denied(
        &s,
        &format!(
            "ln -s {}/README.md r; echo evil > r; r=$?; rm -f r; exit $r",
            repo(&s).display()
        ),
    );
    assert_eq!(s.env.read("README.md"), "# demo\n");
}

/// The git common directory is readable whole, `config` included: where a CI checkout (or a
/// user) keeps a credential there, every worker could read it, so a contained run refuses.
#[test]
fn a_worker_cannot_read_credentials_in_the_git_config() {
    require_landlock!();
    for (key, value) in [
        (
            "http.https://github.com/.extraheader",
            "AUTHORIZATION: basic eC1hY2Nlc3MtdG9rZW46Z2hzX3NlY3JldA==",
        ),
        (
            "remote.origin.url",
            "https://x-access-token:ghs_secret@github.com/o/r.git",
        ),
    ] {
        let s = Swarm::new("");
        s.env.git(&["config", key, value]);
        let (run, v) = verdict_of(
            &s,
            "git remote -v; cat \"$(git rev-parse --git-common-dir)/config\"",
        );
        assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
        assert!(
            run.stderr.contains("E_CONTAINMENT_SECRET"),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("persist-credentials"), "{}", run.stderr);
        assert_eq!(v, "", "no worker ran");
    }
}

/// Capabilities are dropped but the uid stays 0, and root owns the system's secrets: a
/// contained worker run by root reads /etc/shadow (and /etc/ssh's host keys, where they exist).
#[test]
fn a_contained_root_worker_cannot_read_root_only_system_files() {
    require_landlock!();
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/etc/shadow").exists() {
        skip!("not root, or no /etc/shadow");
    }
    let s = Swarm::new("");
    denied(&s, "head -c 1 /etc/shadow");
}

/// Keyrings are per uid and Landlock does not cover them: a secret the operator keeps in
/// the kernel's user keyring (Kerberos, a credential helper) is read by the contained worker.
#[test]
fn a_worker_cannot_read_the_operators_kernel_keyring() {
    require_landlock!();
    let desc = format!("atelier-review-{}", std::process::id());
    let cdesc = std::ffi::CString::new(desc.clone()).expect("desc");
    // SAFETY: add_key(2) with valid NUL-terminated strings and a 6-byte payload.
    let key = unsafe {
        libc::syscall(
            libc::SYS_add_key,
            c"user".as_ptr(),
            cdesc.as_ptr(),
            b"s3cret".as_ptr(),
            6usize,
            -4i32, // KEY_SPEC_USER_KEYRING
        )
    };
    assert!(key > 0, "add_key");
    let s = Swarm::new("");
    let (_, v) = verdict_of(
        &s,
        &format!(
            "python3 -c 'import ctypes; c=ctypes.CDLL(None); b=ctypes.create_string_buffer(16); \
             k=c.syscall(250, 10, -4, b\"user\", b\"{desc}\", 0); \
             exit(0 if c.syscall(250, 11, k, b, 16) == 6 and b.value == b\"s3cret\" else 1)'"
        ),
    );
    // SAFETY: keyctl(KEYCTL_REVOKE) on the key made above.
    unsafe { libc::syscall(libc::SYS_keyctl, 3, key) };
    assert_eq!(v, "denied\n", "the worker read the user keyring");
}

/// A cache setting in the main working tree (`shared_target_dir = "target"`, as README once
/// suggested) would let every worker write where the operator's own, uncontained cargo builds,
/// links and runs: refused, naming the field; a cache outside the repository works.
#[test]
fn a_worker_cannot_write_the_main_working_trees_target_dir() {
    require_landlock!();
    let s = Swarm::configured("", "\n[swarm]\nshared_target_dir = \"target\"\n");
    let (run, v) = verdict_of(&s, "true");
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("E_CONTAINMENT_PATH") && run.stderr.contains("swarm.shared_target_dir"),
        "{}",
        run.stderr
    );
    assert_eq!(v, "");
    let s = Swarm::configured(
        "",
        "\n[swarm]\nshared_target_dir = \"~/.cache/atelier-target\"\n",
    );
    let (run, v) = verdict_of(&s, "echo cached > \"$HOME/.cache/atelier-target/x\"");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(v, "ESCAPED\n", "the shared cache is writable");
    assert!(s.env.home.join(".cache/atelier-target/x").exists());
}
