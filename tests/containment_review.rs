//! Containment, attacked further (an adversarial review of the first version): escapes the
//! hostile-agent tests in containment.rs do not try.
//! Each failed before its fix; each asserts what the containment promise says should hold.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::containment::{attack, denied, repo, require_landlock, stealing_hook, verdict_of};
use crate::swarm::{one, Swarm};

/// (Review finding 1) Named Unix sockets are outside Landlock's reach (ABI <= 7): a contained worker finds the
/// operator's ssh-agent in /proc/net/unix and uses its keys (the keys approvals are signed
/// with); the same holds for docker.sock, systemd's and D-Bus's sockets (root-owned, mode 0600,
/// and the worker is uid 0 without capabilities: the owner check passes).
#[test]
fn a_worker_cannot_use_the_operators_ssh_agent_or_any_unix_socket() {
    require_landlock!();
    let s = Swarm::new("");
    let dir = s.env.tmp.path().join("ssh-XXXXagent");
    std::fs::create_dir(&dir).expect("mkdir");
    let sock = dir.join("agent.4242");
    let key = s.env.tmp.path().join("id_ed25519");
    let ok = Command::new("ssh-keygen")
        .args([
            "-q",
            "-t",
            "ed25519",
            "-N",
            "",
            "-C",
            "alice@example.org",
            "-f",
        ])
        .arg(&key)
        .status()
        .expect("ssh-keygen");
    assert!(ok.success());
    let mut agent = Command::new("ssh-agent")
        .arg("-D")
        .arg("-a")
        .arg(&sock)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("ssh-agent");
    for _ in 0..100 {
        if sock.exists() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let added = Command::new("ssh-add")
        .arg(&key)
        .env("SSH_AUTH_SOCK", &sock)
        .output()
        .expect("ssh-add");
    assert!(added.status.success(), "{added:?}");
    // The worker is given no path: SSH_AUTH_SOCK is scrubbed, /tmp cannot be listed; the kernel
    // lists every bound socket in /proc/net/unix, which is readable.
    let (_, v) = verdict_of(
        &s,
        "sock=$(awk '$8 ~ /agent\\.4242$/ {print $8}' /proc/net/unix | head -n1); \
         SSH_AUTH_SOCK=$sock ssh-add -L | grep -q alice@example.org",
    );
    let _ = agent.kill();
    let _ = agent.wait();
    assert_eq!(v, "denied\n", "the worker listed the operator's agent keys");

    // Any listening socket a path names (a stand-in for /run/docker.sock).
    let s = Swarm::new("");
    let path = s.env.tmp.path().join("docker.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let (_, v) = verdict_of(
        &s,
        &format!(
            "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{}\")'",
            path.display()
        ),
    );
    assert!(listener.accept().is_err(), "the worker connected");
    assert_eq!(v, "denied\n");
}

/// (Review finding 2) The git common directory is readable whole, `config` included: where a CI checkout (or a
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

/// (Review finding 3) Capabilities are dropped but the uid stays 0, and root owns the system's secrets: a
/// contained worker run by root reads /etc/shadow (and /etc/ssh's host keys, where they exist).
#[test]
fn a_contained_root_worker_cannot_read_root_only_system_files() {
    require_landlock!();
    // SAFETY: geteuid(2) cannot fail.
    if unsafe { libc::geteuid() } != 0 || !Path::new("/etc/shadow").exists() {
        eprintln!("skipped: not root, or no /etc/shadow");
        return;
    }
    let s = Swarm::new("");
    denied(&s, "head -c 1 /etc/shadow");
}

/// (Review finding 3b) Keyrings are per uid and Landlock does not cover them: a secret the operator keeps in
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

/// (Review finding 4) A cache setting in the main working tree (`shared_target_dir = "target"`, as README once
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

/// (Review finding 5a) Only `[swarm] containment` is read from the protected branch; every grant is read from
/// the working tree. An uncommitted `writable = ["/"]` (or `network = "any"`, or
/// `shared_target_dir = "."`) undoes containment as surely as the refused `containment = "none"`,
/// and the run still says `contained: landlock`.
#[test]
fn an_uncommitted_grant_cannot_undo_containment() {
    require_landlock!();
    let s = Swarm::new("");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", "writable = [\"/\", ");
    s.env.write("atelier.toml", &config);
    let (run, v) = verdict_of(&s, &format!("echo evil > {}/README.md", repo(&s).display()));
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED") || v == "denied\n",
        "{}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
    assert_ne!(
        std::fs::read_to_string(repo(&s).join("README.md")).unwrap(),
        "evil\n"
    );
}

/// (Review finding 5b) Which branch is "protected" is itself read from the working tree's `[forge] branch`:
/// point it at any local branch that says `containment = "none"` and the refusal is gone.
#[test]
fn another_branch_cannot_stand_in_for_the_protected_one() {
    let s = Swarm::new("");
    let base = s.env.read("atelier.toml");
    s.env.git(&["checkout", "-q", "-b", "lax"]);
    s.env.write(
        "atelier.toml",
        &format!("{base}\n[swarm]\ncontainment = \"none\"\n"),
    );
    s.env.git(&["commit", "-q", "-am", "lax"]);
    s.env.git(&["checkout", "-q", "main"]);
    let uncommitted = base.replace("branch = \"main\"", "branch = \"lax\"");
    assert_ne!(uncommitted, base);
    s.env.write(
        "atelier.toml",
        &format!("{uncommitted}\n[swarm]\ncontainment = \"none\"\n"),
    );
    let (run, v) = verdict_of(&s, &format!("cat {}", s.env.gate_key().display()));
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED"),
        "ran: {}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
}

/// (Review finding 5c) `~` is refused as "the whole home directory, which holds ~/.ssh", but `~/` is the same
/// directory and is accepted.
#[test]
fn a_listed_home_with_a_trailing_slash_is_refused_too() {
    require_landlock!();
    let s = Swarm::new("");
    let ssh = s.env.home.join(".ssh");
    std::fs::create_dir_all(&ssh).expect("mkdir");
    std::fs::write(ssh.join("id_ed25519"), "PRIVATE\n").expect("write");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", "readable = [\"~/\"]\nwritable = [");
    s.env.write("atelier.toml", &config);
    s.env
        .git(&["commit", "-q", "-am", "The agent reads its configuration"]);
    let (run, v) = verdict_of(&s, "grep -q PRIVATE \"$HOME/.ssh/id_ed25519\"");
    assert!(
        run.stderr.contains("E_CONTAINMENT_PATH") || v == "denied\n",
        "{}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
}

/// (Review finding 6) A failed attempt's worktree was kept "for inspection". The worker controls its `.git`:
/// it replaces the pointer with a repository of its own whose `core.fsmonitor` runs a command,
/// and the operator's first `git status` there (or a shell prompt showing the branch) runs it,
/// uncontained.
#[test]
fn inspecting_a_failed_attempt_does_not_run_the_workers_code() {
    require_landlock!();
    let s = Swarm::new("failure_budget = 1");
    let (stolen, hook) = stealing_hook(&s);
    let p = one(
        &s,
        &format!(
            "rm -f .git && git init -q && git config core.fsmonitor '{hook}' && echo x > src/t.rs && exit 1"
        ),
    );
    let _ = s.run(&["run", &p]);
    // Nothing is kept as a directory a person might run git in: the attempt's files are a
    // commit on its attempt branch, which `git show` reads without running anything.
    let kept: Vec<PathBuf> = std::fs::read_dir(repo(&s).join(".atelier/runs/r1/wt"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(kept.is_empty(), "a worktree was kept: {kept:?}");
    assert_eq!(
        s.env.git(&["show", "atelier/attempts/r1/p-T/1:src/t.rs"]),
        "x\n"
    );
    let _ = s
        .env
        .command("git")
        .arg("status")
        .current_dir(repo(&s))
        .output();
    assert!(!stolen.exists(), "the operator's git ran the worker's hook");
}

/// (Review finding 7) network = "none" is TCP only: UDP reaches any address (DNS exfiltration, local UDP
/// services such as a metadata or syslog endpoint).
#[test]
fn a_worker_with_network_none_cannot_send_udp() {
    require_landlock!();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind");
    udp.set_nonblocking(true).expect("nonblocking");
    let port = udp.local_addr().expect("addr").port();
    let s = Swarm::new("");
    let (_, v) = verdict_of(
        &s,
        &format!(
            "python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b\"gate key\", (\"127.0.0.1\", {port}))'"
        ),
    );
    let mut buf = [0u8; 16];
    assert!(udp.recv(&mut buf).is_err(), "a datagram arrived");
    assert_eq!(v, "denied\n");
}

/// (Review finding 8) Landlock checks opens, not descriptors: whatever the conductor inherited without
/// close-on-exec (from a CI runner, an IDE, `make -j`'s jobserver; here a pipe on fd 251 from
/// the harness already reaches every worker) passes into the contained worker.
#[test]
fn a_descriptor_the_conductor_inherited_does_not_reach_the_worker() {
    require_landlock!();
    use std::os::unix::process::CommandExt;
    let s = Swarm::new("");
    let p = one(&s, &attack("head -c 1 <&7"));
    let key = std::ffi::CString::new(s.env.gate_key().to_str().expect("utf8")).expect("path");
    let mut c = s.command(&["run", &p]);
    // SAFETY: open(2) and dup2(2) are async-signal-safe; `key` outlives the spawn.
    unsafe {
        c.pre_exec(move || {
            let fd = libc::open(key.as_ptr(), libc::O_RDONLY);
            if fd >= 0 && fd != 7 {
                libc::dup2(fd, 7);
            }
            Ok(())
        });
    }
    let o = c.output().expect("run");
    assert!(o.status.success(), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(s.fake.join("verdict")).expect("ran"),
        "denied\n"
    );
}
