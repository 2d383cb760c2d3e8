//! Containment, attacked a third time (a second adversarial review, after containment_review.rs):
//! escapes and breakages neither earlier file tries. Each test asserts what the containment
//! promise (README, "What a worker can and cannot do"; ARCHITECTURE decisions 25 and 26) says
//! should hold, and failed on the code as it was reviewed.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::containment::{attack, repo, require_landlock, stealing_hook, verdict_of};
use crate::support::{bin, Env};
use crate::swarm::{one, Swarm};

/// The worktrees a run kept (failed or abandoned attempts).
fn kept(s: &Swarm, run: &str) -> Vec<PathBuf> {
    std::fs::read_dir(repo(s).join(".atelier/runs").join(run).join("wt"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default()
}

/// A role's `network = [port]`, committed (a constitution change, as it should be).
fn swarm_with_port(port: u16) -> Swarm {
    let s = Swarm::configured("", "");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", &format!("network = [{port}]\nwritable = ["));
    s.env.write("atelier.toml", &config);
    s.env
        .git(&["commit", "-q", "-am", "The implementer may reach one port"]);
    s
}

/// (Finding 1) `defang_worktree` removes every entry *named* `.git`, but git also discovers
/// a repository in any directory that looks like one (`HEAD`, `objects/`, `refs/`: an implicit
/// bare repository; `safe.bareRepository` defaults to `all`). A worker turns `src/` of its
/// failed worktree into one, with `core.bare = false`, `core.worktree = ..` and an fsmonitor
/// command: the operator's `git status` (or `git diff`, or a git-aware prompt) in `src/` runs
/// the worker's command uncontained, with the operator's rights: here it copies the gate key.
#[test]
fn inspecting_a_subdirectory_of_a_failed_attempt_does_not_run_the_workers_code() {
    require_landlock!();
    let s = Swarm::new("failure_budget = 1");
    let (stolen, hook) = stealing_hook(&s);
    let p = one(
        &s,
        &format!(
            "git init -q --bare src && git config -f src/config core.bare false && \
             git config -f src/config core.worktree .. && \
             git config -f src/config core.fsmonitor '{hook}' && echo x > src/t.rs && exit 1"
        ),
    );
    let _ = s.run(&["run", &p]);
    let kept = kept(&s, "r1");
    assert!(kept.is_empty(), "a worktree was kept: {kept:?}");
    // What the operator does to look at what the worker did: the attempt branch.
    let _ = s.env.git(&["show", "--stat", "atelier/attempts/r1/p-T/1"]);
    assert!(
        !stolen.exists(),
        "the operator's git ran the worker's fsmonitor command"
    );
}

/// (Finding 1, continued) `defang_worktree` walks with full paths and gives up at the first
/// error: a worker that leaves a tree deeper than PATH_MAX (twenty 250-byte directory names)
/// makes it fail with ENAMETOOLONG before it reaches the `.git` the worker wrote. The whole run
/// then ends in an error (every other task with it), and the worktree keeps the worker's `.git`.
#[test]
fn a_deep_tree_does_not_stop_a_failed_attempt_being_defanged() {
    require_landlock!();
    let s = Swarm::new("failure_budget = 1");
    let (stolen, hook) = stealing_hook(&s);
    let n = "d".repeat(250);
    let p = one(
        &s,
        &format!(
            "rm -f .git && git init -q && git config core.fsmonitor '{hook}' && echo x > src/t.rs && \
             (cd src && for i in $(seq 1 20); do mkdir {n} && cd {n} || exit 1; done); exit 1"
        ),
    );
    let run = s.run(&["run", &p]);
    let kept = kept(&s, "r1");
    assert!(kept.is_empty(), "a worktree was kept: {kept:?}");
    // Whichever order the directory lists in, one of these fails.
    assert_ne!(run.code, 2, "the run died: {}", run.stderr);
    assert!(
        !stolen.exists(),
        "the operator's git ran the worker's hook\n{}",
        run.stderr
    );
}

/// (Finding 2) Landlock's TCP rules apply to TCP sockets only (`sk_is_tcp`; seen on 6.18 here):
/// an MPTCP socket (`IPPROTO_MPTCP`, enabled by default) connects to any port, and the peer
/// sees a plain TCP connection. A role limited to `network = [port]` (the presets' default is
/// `[443]`) reaches every port on every address: cloud metadata on 80, local databases, a
/// Docker API on 2375.
#[test]
fn a_role_given_one_port_cannot_reach_another_over_mptcp() {
    require_landlock!();
    let mptcp = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").unwrap_or_default();
    if mptcp.trim() != "1" {
        eprintln!("skipped: MPTCP is not enabled on this kernel");
        return;
    }
    let open = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    other.set_nonblocking(true).expect("nonblocking");
    let (po, pc) = (
        open.local_addr().expect("addr").port(),
        other.local_addr().expect("addr").port(),
    );
    let s = swarm_with_port(po);
    let (run, v) = verdict_of(
        &s,
        &format!(
            "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); s.settimeout(5); s.connect((\"127.0.0.1\", {pc})); s.sendall(b\"x\")'"
        ),
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert!(
        other.accept().is_err(),
        "the worker connected to a port its role does not list"
    );
    assert_eq!(v, "denied\n");
}

/// (Finding 3) What `Workspace::containment` compares with the protected branch is each role's
/// `network`, `readable` and `writable`; what the run uses of the working tree's role is all of
/// it. An uncommitted `command` that names a file by absolute path makes it readable
/// (`Sandbox::programs`); an uncommitted `env` hands the worker a secret of the conductor's
/// environment; an uncommitted `backend` preset turns an unset `network` from "none" into
/// `[443]`. Each is a widening the E_CONTAINMENT_UNCOMMITTED rule promises to refuse.
#[test]
fn an_uncommitted_role_command_cannot_make_a_file_readable() {
    require_landlock!();
    // A secret of the operator's, reachable by no grant.
    let s = Swarm::new("");
    let aws = s.env.home.join(".aws");
    std::fs::create_dir_all(&aws).expect("mkdir");
    let secret = aws.join("credentials");
    std::fs::write(&secret, "aws_secret_access_key = AKIAsecret\n").expect("write");
    let agent = s.fake.join("agent.sh");
    let config = s.env.read("atelier.toml").replace(
        &format!("command = [\"{}\"]", agent.display()),
        &format!(
            "command = [\"{}\", \"{}\"]",
            agent.display(),
            secret.display()
        ),
    );
    assert_ne!(config, s.env.read("atelier.toml"));
    s.env.write("atelier.toml", &config);
    // The scenario is sourced by the agent script: "$1" is the argument the edit added.
    let (run, v) = verdict_of(&s, "grep -q AKIAsecret \"$1\"");
    assert!(
        run.stderr.contains("E_CONTAINMENT_UNCOMMITTED") || v == "denied\n",
        "an uncommitted `command` made {} readable\n{}\n{}\nverdict: {v}",
        secret.display(),
        run.stdout,
        run.stderr
    );
}

/// (Finding 3, continued) An uncommitted `env` entry: the conductor's secret reaches the worker.
#[test]
fn an_uncommitted_role_env_cannot_pass_a_secret() {
    require_landlock!();
    let s = Swarm::new("");
    let config = s
        .env
        .read("atelier.toml")
        .replace("env = [", "env = [\"AWS_SECRET_ACCESS_KEY\", ");
    s.env.write("atelier.toml", &config);
    let p = one(&s, &attack("test \"$AWS_SECRET_ACCESS_KEY\" = AKIAsecret"));
    let o = s
        .command(&["run", &p])
        .env("AWS_SECRET_ACCESS_KEY", "AKIAsecret")
        .output()
        .expect("run");
    let v = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("E_CONTAINMENT_UNCOMMITTED") || v == "denied\n",
        "an uncommitted `env` passed a secret\n{}\nverdict: {v}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// (Finding 3, continued) An uncommitted `backend`: the same role, no `network` field on either
/// side, but the preset's default port opens. (A `claude` stand-in runs the role's command.)
#[test]
fn an_uncommitted_role_backend_cannot_open_a_port() {
    require_landlock!();
    let s = Swarm::new("");
    let bin_dir = s.env.tmp.path().join("bin");
    std::fs::create_dir_all(&bin_dir).expect("mkdir");
    let claude = bin_dir.join("claude");
    std::fs::write(&claude, "#!/bin/sh\nshift 3\nexec \"$@\"\n").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let config = s
        .env
        .read("atelier.toml")
        .replace("backend = \"command\"", "backend = \"claude\"");
    s.env.write("atelier.toml", &config);
    let Ok(listener) = std::net::TcpListener::bind("127.0.0.1:443") else {
        eprintln!("skipped the backend case: 127.0.0.1:443 is taken or not ours to bind");
        return;
    };
    listener.set_nonblocking(true).expect("nonblocking");
    let p = one(&s, &attack("bash -c 'exec 3<>/dev/tcp/127.0.0.1/443'"));
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = s
        .command(&["run", &p])
        .env("PATH", path)
        .output()
        .expect("run");
    let v = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("E_CONTAINMENT_UNCOMMITTED")
            || (v == "denied\n" && listener.accept().is_err()),
        "an uncommitted `backend` opened port 443\n{stderr}\nverdict: {v}"
    );
}

/// (Finding 4) Only a *failed* attempt's worktree is defanged. Interrupt the conductor
/// (Ctrl-C, SIGTERM, a CI timeout) while a worker runs, and its worktree stays under
/// `.atelier/runs/<run>/wt/` with whatever `.git` the worker made (and `atelier clean` skips
/// unfinished runs): the operator's `git status` there runs the worker's command.
#[test]
fn inspecting_an_interrupted_attempt_does_not_run_the_workers_code() {
    require_landlock!();
    let s = Swarm::new("");
    let (stolen, hook) = stealing_hook(&s);
    let p = one(
        &s,
        &format!(
            "rm -f .git && git init -q && git config core.fsmonitor '{hook}' && \
             echo x > src/t.rs && touch \"$FAKE_AGENT_DIR/ready\" && sleep 60"
        ),
    );
    let mut child = s
        .command(&["run", &p])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("run");
    let until = Instant::now() + Duration::from_secs(60);
    while !s.fake.join("ready").exists() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(s.fake.join("ready").exists(), "the worker ran");
    // SAFETY: kill(2) on the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let _ = child.wait();
    let kept = kept(&s, "r1");
    assert!(
        kept.is_empty(),
        "an interrupted attempt's worktree was kept: {kept:?}"
    );
    assert!(
        !stolen.exists(),
        "the operator's git ran the interrupted worker's hook"
    );
}

/// (Finding 5a) The seccomp filter denies `socket(AF_UNIX, …)` but allows `socketpair`: a
/// datagram pair's socket can `sendto` (or `connect`) any named datagram socket, which Landlock
/// (ABI <= 7) does not check either: journald's `/dev/log`, `/run/systemd/notify`, chrony's
/// command socket, wpa_supplicant's control sockets (and pass descriptors with SCM_RIGHTS).
#[test]
fn a_worker_cannot_reach_a_named_datagram_socket_through_a_socketpair() {
    require_landlock!();
    let s = Swarm::new("");
    let path = s.env.tmp.path().join("log.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&path).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let (_, v) = verdict_of(
        &s,
        &format!(
            "python3 -c 'import socket; a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM); a.sendto(b\"<0>forged\", \"{}\")'",
            path.display()
        ),
    );
    let mut buf = [0u8; 64];
    assert!(
        listener.recv(&mut buf).is_err(),
        "a datagram from the worker arrived"
    );
    assert_eq!(v, "denied\n");
}

/// (Finding 5b) With `network = "none"` the filter denies AF_INET and AF_INET6 only (a
/// deny-list of families): AF_VSOCK, which reaches the hypervisor's host (Firecracker, Kata,
/// WSL2, cloud VMs) without any IP, is created freely. No connection is attempted here.
#[test]
fn a_worker_with_network_none_cannot_open_a_vsock() {
    require_landlock!();
    // SAFETY: socket(2) and close(2) with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        eprintln!("skipped: this kernel has no AF_VSOCK");
        return;
    }
    unsafe { libc::close(fd) };
    let s = Swarm::new("");
    let (run, v) = verdict_of(
        &s,
        "python3 -c 'import socket; socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)'",
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(v, "denied\n", "a vsock was created with network = \"none\"");
}

/// (Finding 6) `gatekey::migrate` runs before every command and adopts whatever it finds at
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

/// (Finding 6, continued) Through a symlink at the legacy path, the file it points at (here the
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

/// (Finding 7) `writable` and `readable` are refused when they hold the gate key's directory
/// (`contain::grants`), but `[swarm] shared_target_dir`, which every worker and step may write,
/// is only checked against the repository: `"~/.local/share"` hands every worker the gate key
/// (to read, or to replace).
#[test]
fn the_shared_build_cache_cannot_hold_the_gate_key() {
    require_landlock!();
    let s = Swarm::configured("", "\n[swarm]\nshared_target_dir = \"~/.local/share\"\n");
    let (run, v) = verdict_of(&s, &format!("cat {}", s.env.gate_key().display()));
    assert!(
        (run.code == 1 && run.stderr.contains("E_CONTAINMENT_PATH")) || v == "denied\n",
        "{}\n{}\nverdict: {v}",
        run.stdout,
        run.stderr
    );
}

/// (Finding 8) Containment breaks ordinary tools on an ordinary machine. The operator's
/// `~/.gitconfig` exists (it holds `user.name`), Landlock denies opening it, and git treats
/// EACCES on its global configuration as fatal: every `git status`, `git diff`, `git log` in a
/// worker, a step or a reviewer exits 128, though README promises they work (the test HOME
/// has no .gitconfig, so the suite never saw it). Likewise `/dev/shm` is not writable, so
/// POSIX semaphores fail and Python's `multiprocessing` (Pool, Queue, Lock) cannot start.
#[test]
fn git_works_in_a_contained_worker_when_the_operator_has_a_gitconfig() {
    require_landlock!();
    let s = Swarm::new("");
    std::fs::write(
        s.env.home.join(".gitconfig"),
        "[user]\n\tname = Operator\n\temail = op@example.org\n",
    )
    .expect("write");
    // "ESCAPED" here means: it worked.
    let (run, v) = verdict_of(&s, "git status && git log -1 && git diff --stat");
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(v, "ESCAPED\n", "git failed in the worker");
}

/// (Finding 8, continued) `/dev/shm` is not writable: POSIX semaphores fail, and with them
/// Python's `multiprocessing` (Pool, Queue, Lock), in workers and in gauntlet steps alike,
/// unless the role lists `/dev/shm` (which then works).
#[test]
fn multiprocessing_works_in_a_contained_worker() {
    require_landlock!();
    // POSIX semaphores live in /dev/shm, which is shared by every process of the machine: a
    // role that needs them lists it (README), and nothing else opens it.
    let s = Swarm::new("");
    let (_, v) = verdict_of(
        &s,
        "python3 -c 'import multiprocessing as m; q = m.Queue(); q.put(1); assert q.get() == 1'",
    );
    assert_eq!(v, "denied\n", "/dev/shm is not granted by default");
    let s = Swarm::new("");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", "writable = [\"/dev/shm\", ");
    s.env.write("atelier.toml", &config);
    s.env.git(&[
        "commit",
        "-q",
        "-am",
        "The implementer uses multiprocessing",
    ]);
    let (run, v) = verdict_of(
        &s,
        "python3 -c 'import multiprocessing as m; q = m.Queue(); q.put(1); assert q.get() == 1'",
    );
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    assert_eq!(v, "ESCAPED\n", "multiprocessing failed in the worker");
}

/// A seqpacket pair is what Rust's standard library uses to hand a spawned child's pidfd back
/// (cargo starting rustc): refused, no contained worker or step could build a Rust crate. It is
/// connected like a stream pair: an address given to `sendto` is ignored (the data goes to the
/// peer), so it reaches no named socket.
#[test]
fn a_worker_may_make_a_seqpacket_pair_but_it_reaches_no_named_socket() {
    require_landlock!();
    let s = Swarm::new("");
    let path = s.env.tmp.path().join("seq.sock");
    let listener = std::os::unix::net::UnixDatagram::bind(&path).expect("bind");
    listener.set_nonblocking(true).expect("nonblocking");
    let script = format!(
        "python3 - <<'PY'\nimport os, socket\nout = open(os.environ['FAKE_AGENT_DIR'] + '/verdict', 'w')\na, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)\na.send(b'x')\nout.write('pair ' + b.recv(1).decode())\ntry:\n    socket.socketpair(socket.AF_INET, socket.SOCK_STREAM)\nexcept OSError as e:\n    out.write('; inet pair errno %d' % e.errno)\ntry:\n    a.sendto(b'<0>forged', '{}')\nexcept OSError:\n    pass\nPY\necho ok > src/t.rs",
        path.display()
    );
    let p = crate::swarm::one(&s, &script);
    let run = s.run(&["run", &p]);
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let v = std::fs::read_to_string(s.fake.join("verdict")).unwrap_or_default();
    // A pair of any other family is refused by the filter (EACCES), before the kernel loads
    // that family's code.
    assert_eq!(
        v,
        format!("pair x; inet pair errno {}", libc::EACCES),
        "the pair could not be made or used"
    );
    let mut buf = [0u8; 64];
    assert!(
        listener.recv(&mut buf).is_err(),
        "a message from the worker arrived"
    );
}
