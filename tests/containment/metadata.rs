//! File metadata a contained worker cannot change outside what it may write: modes, owners,
//! times and extended attributes of the gate key, SSH keys, git and `.atelier/`, by path, by a
//! descriptor opened read-only or `O_PATH`, through `/proc/self/fd` or a hard link; while its
//! own build may still chmod what it makes.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::containment::{denied, run_attack};
use crate::support::skip::require_landlock;
use crate::support::swarm::{repo, Swarm};

/// Mode, owner and times of every path a hostile worker aims at (each entry beneath the gate
/// key's directory, `~/.ssh`, `.git` and `.atelier/` as they are before the run), to compare
/// after it.
pub(crate) struct Guarded {
    paths: Vec<PathBuf>,
    before: Vec<String>,
}

fn walk(p: &Path, out: &mut Vec<PathBuf>) {
    out.push(p.to_path_buf());
    if let Ok(entries) = std::fs::read_dir(p) {
        for e in entries.flatten() {
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(&e.path(), out);
            } else {
                out.push(e.path());
            }
        }
    }
}

/// What a path's metadata says: mode and owner always; times for files the conductor never
/// writes during a run (a directory's, an index's or a log's times move with the run, and
/// libgit2 refreshes an object it writes again).
fn stat(p: &Path) -> String {
    match std::fs::symlink_metadata(p) {
        Err(_) => format!("{} gone", p.display()),
        Ok(m) => {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            let written = m.is_dir()
                || p.components()
                    .any(|c| matches!(c.as_os_str().to_str(), Some("runs" | "logs" | "objects")))
                || matches!(name, "index" | "ORIG_HEAD" | "FETCH_HEAD" | "packed-refs");
            let times = if written {
                String::new()
            } else {
                format!(" mtime {}.{}", m.mtime(), m.mtime_nsec())
            };
            format!(
                "{} mode {:o} owner {}:{}{times}",
                p.display(),
                m.mode(),
                m.uid(),
                m.gid()
            )
        }
    }
}

impl Guarded {
    pub(crate) fn new(s: &Swarm) -> Guarded {
        let key = s.env.gate_key();
        let ssh = s.env.home.join(".ssh");
        std::fs::create_dir_all(&ssh).expect("mkdir");
        std::fs::write(ssh.join("id_ed25519"), "PRIVATE\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            ssh.join("id_ed25519"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        std::fs::set_permissions(&ssh, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        std::fs::create_dir_all(repo(s).join(".atelier")).expect("mkdir");
        let mut paths = Vec::new();
        walk(key.parent().expect("the key's directory"), &mut paths);
        walk(&ssh, &mut paths);
        walk(&repo(s).join(".git"), &mut paths);
        walk(&repo(s).join(".atelier"), &mut paths);
        paths.push(repo(s).join("README.md"));
        paths.sort();
        paths.dedup();
        let before = paths.iter().map(|p| stat(p)).collect();
        Guarded { paths, before }
    }

    /// Asserts nothing guarded changed mode, owner or times.
    pub(crate) fn unchanged(&self) {
        let after: Vec<String> = self.paths.iter().map(|p| stat(p)).collect();
        let changed: Vec<String> = self
            .before
            .iter()
            .zip(&after)
            .filter(|(b, a)| b != a)
            .map(|(b, a)| format!("{b}\n  -> {a}"))
            .collect();
        assert!(changed.is_empty(), "changed:\n{}", changed.join("\n"));
    }
}

/// `chmod` by path: the gate key and its directory opened to everyone, `~/.ssh` and its key,
/// git's refs and `.atelier/` made world-writable, directly or through the conductor's view
/// of the filesystem (`/proc/$PPID/root`).
#[test]
fn a_worker_cannot_chmod_the_gate_key_ssh_keys_git_or_atelier() {
    require_landlock!();
    let s = Swarm::new("");
    let guarded = Guarded::new(&s);
    let key = s.env.gate_key();
    let dir = key.parent().expect("dir").display().to_string();
    let key = key.display().to_string();
    let r = repo(&s).display().to_string();
    for attempt in [
        format!("chmod 0644 {key}"),
        format!("chmod 0755 {dir}"),
        "chmod 0644 \"$HOME/.ssh/id_ed25519\"".into(),
        "chmod 0755 \"$HOME/.ssh\"".into(),
        format!("chmod 0777 {r}/.git/refs/heads"),
        format!("chmod 0777 {r}/.atelier"),
        "chmod 0777 \"$(git rev-parse --git-common-dir)/refs/heads\"".into(),
        format!("chmod 0644 /proc/$PPID/root{key}"),
        format!("chown $(id -u):$(id -g) {key}"),
        format!("chown $(id -u):$(id -g) {r}/.git/config"),
    ] {
        denied(&s, &attempt);
    }
    guarded.unchanged();
}

/// Times and extended attributes: back-dating files of the main tree and the gate key
/// (`utimes`, `utimensat`), tagging them with an xattr.
#[test]
fn a_worker_cannot_back_date_or_tag_files_outside_its_worktree() {
    require_landlock!();
    let s = Swarm::new("");
    let guarded = Guarded::new(&s);
    let key = s.env.gate_key().display().to_string();
    let r = repo(&s).display().to_string();
    for attempt in [
        format!("touch -d 2001-01-01 {r}/README.md"),
        format!("touch -m -d 2001-01-01 {key}"),
        format!("touch -d 2001-01-01 {r}/.git/config"),
        format!("python3 -c 'import os; os.utime(\"{r}/README.md\", (0, 0))'"),
        format!("python3 -c 'import os; os.setxattr(\"{r}/README.md\", \"user.x\", b\"1\")'"),
        format!("python3 -c 'import os; os.setxattr(\"{key}\", \"user.x\", b\"1\")'"),
        format!("python3 -c 'import os; os.removexattr(\"{r}/README.md\", \"user.x\")'"),
    ] {
        denied(&s, &attempt);
    }
    guarded.unchanged();
}

/// The descriptor forms: `fchmod`/`futimens` on a file the worker may only read (the git
/// directory's config), `chmod` through the `/proc/self/fd` link of an `O_PATH` descriptor
/// of the gate key (Landlock does not check `O_PATH` opens), and a hard link into the
/// worktree.
#[test]
fn a_worker_cannot_change_metadata_through_a_descriptor_or_a_link() {
    require_landlock!();
    let s = Swarm::new("");
    let guarded = Guarded::new(&s);
    let key = s.env.gate_key().display().to_string();
    for attempt in [
        "python3 -c 'import os; fd = os.open(os.popen(\"git rev-parse --git-common-dir\").read().strip() + \"/config\", os.O_RDONLY); os.fchmod(fd, 0o666)'".to_string(),
        "python3 -c 'import os; fd = os.open(os.popen(\"git rev-parse --git-common-dir\").read().strip() + \"/config\", os.O_RDONLY); os.utime(fd, (0, 0))'".into(),
        "python3 -c 'import os; fd = os.open(os.popen(\"git rev-parse --git-common-dir\").read().strip() + \"/HEAD\", os.O_RDONLY); os.fchown(fd, os.getuid(), os.getgid())'".into(),
        format!("python3 -c 'import os; fd = os.open(\"{key}\", os.O_PATH); os.chmod(\"/proc/self/fd/%d\" % fd, 0o644)'"),
        format!("python3 -c 'import os; fd = os.open(\"{key}\", os.O_PATH); os.utime(\"/proc/self/fd/%d\" % fd, (0, 0))'"),
        format!("python3 -c 'import os; fd = os.open(\"{key}\", os.O_PATH); os.chmod(\"/proc/%d/fd/%d\" % (os.getpid(), fd), 0o644)'"),
        format!("ln {key} k; r=$?; rm -f k; [ $r = 0 ] && chmod 0644 {key}"),
    ] {
        denied(&s, &attempt);
    }
    guarded.unchanged();
}

/// What stays possible: a build chmods what it makes in its worktree and its temporary
/// directory (a linker marks what it links executable), and the worker cannot mount, unshare
/// or keep a capability to undo the read-only view.
#[test]
fn a_worker_chmods_its_own_files_but_cannot_remount_or_keep_capabilities() {
    require_landlock!();
    let s = Swarm::new("");
    let guarded = Guarded::new(&s);
    assert_eq!(
        run_attack(
            &s,
            "echo x > built && chmod 0755 built && touch -d 2001-01-01 built && \
             cp built \"$TMPDIR/b\" && chmod 0700 \"$TMPDIR/b\" && [ -x built ] && rm built"
        ),
        "ESCAPED\n",
        "a worker changes its own files' metadata"
    );
    for attempt in [
        "unshare -Urm true",
        "mkdir -p m && mount -t tmpfs none m",
        "mount -o remount,rw /",
        "umount -l /proc",
        "python3 -c 'import ctypes; c = ctypes.CDLL(None); exit(0 if c.syscall(442, -100, b\"/\", 0x8000, b\"\\0\" * 32, 32) == 0 else 1)'",
        "awk '/^Cap(Eff|Prm|Inh|Amb)/ && $2 != \"0000000000000000\" {found=1} END {exit !found}' /proc/self/status",
    ] {
        denied(&s, attempt);
    }
    guarded.unchanged();
}

/// Where no user namespace can be made (here: `atelier` started in a user namespace whose
/// `user.max_user_namespaces` is 0), there are no read-only mounts: every metadata change is
/// refused instead, the worker's own chmod too, and the run says so, as does the failed
/// worker's output, with what to enable.
#[test]
fn without_user_namespaces_a_worker_changes_no_metadata_and_the_run_says_why() {
    require_landlock!();
    let probe = std::process::Command::new("unshare")
        .args(["-Ur", "true"])
        .status();
    if !probe.map(|s| s.success()).unwrap_or(false) {
        crate::support::skip::skip!("no user namespaces to restrict here");
    }
    let s = Swarm::new("failure_budget = 1");
    let guarded = Guarded::new(&s);
    let key = s.env.gate_key().display().to_string();
    let p = crate::support::swarm::one(
        &s,
        &format!(
            "chmod 0644 {key}; a=$?; echo x > built; chmod 0755 built; b=$?; \
             echo \"$a $b\" > \"$FAKE_AGENT_DIR/verdict\"; echo ok > src/t.rs; chmod 0755 src/t.rs"
        ),
    );
    let mut c = s.env.command("unshare");
    c.args([
        "-Ur",
        "sh",
        "-c",
        "echo 0 > /proc/sys/user/max_user_namespaces && exec \"$0\" \"$@\"",
        crate::support::bin(),
        "-C",
    ])
    .arg(&s.env.repo)
    .args(["run", &p])
    .env("FAKE_AGENT_DIR", &s.fake);
    let o = c.output().expect("run atelier in a user namespace");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("contained: landlock (file metadata changes refused"),
        "{stdout}"
    );
    let verdict = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    let codes: Vec<&str> = verdict.split_whitespace().collect();
    assert!(
        codes.len() == 2 && codes.iter().all(|c| *c != "0"),
        "a chmod passed: {verdict:?}"
    );
    let mut logs = Vec::new();
    walk(&repo(&s).join(".atelier/runs/r1"), &mut logs);
    assert!(
        logs.iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .any(|t| t.contains("unprivileged_userns_clone")),
        "no failed output says what to enable"
    );
    guarded.unchanged();
}
