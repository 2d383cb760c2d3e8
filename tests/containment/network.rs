//! The network of a contained worker: none means none (TCP, UDP, Unix sockets, MPTCP, vsock,
//! socket pairs), and a granted port is the only one reachable.

use std::process::Command;

use crate::containment::{denied, run_attack, verdict_of};
use crate::support::skip::{require_landlock, skip};
use crate::support::swarm::Swarm;

#[test]
fn a_worker_with_network_none_cannot_connect_to_a_loopback_listener() {
    require_landlock!();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let s = Swarm::new("");
    denied(&s, &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'"));
    listener.set_nonblocking(true).expect("nonblocking");
    assert!(
        listener.accept().is_err(),
        "nothing connected to the listener"
    );
    // Nor listen itself (bind is denied too).
    let s = Swarm::new("");
    denied(
        &s,
        "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 0))'",
    );
}

#[test]
fn a_role_given_a_port_reaches_it_and_nothing_else() {
    require_landlock!();
    let open = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let (po, pc) = (
        open.local_addr().expect("addr").port(),
        closed.local_addr().expect("addr").port(),
    );
    let s = Swarm::configured("", "");
    let config = s
        .env
        .read("atelier.toml")
        .replace("writable = [", &format!("network = [{po}]\nwritable = ["));
    s.env.write("atelier.toml", &config);
    s.env
        .git(&["commit", "-q", "-am", "The implementer may reach one port"]);
    assert_eq!(
        run_attack(&s, &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{po}'")),
        "ESCAPED\n",
        "the allowed port is reachable"
    );
    denied(&s, &format!("bash -c 'exec 3<>/dev/tcp/127.0.0.1/{pc}'"));
}

/// Named Unix sockets are outside Landlock's reach (ABI <= 7): a contained worker finds the
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

/// network = "none" is TCP only: UDP reaches any address (DNS exfiltration, local UDP
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

/// Landlock's TCP rules apply to TCP sockets only (`sk_is_tcp`; seen on 6.18 here):
/// an MPTCP socket (`IPPROTO_MPTCP`, enabled by default) connects to any port, and the peer
/// sees a plain TCP connection. A role limited to `network = [port]` (the presets' default is
/// `[443]`) reaches every port on every address: cloud metadata on 80, local databases, a
/// Docker API on 2375.
#[test]
fn a_role_given_one_port_cannot_reach_another_over_mptcp() {
    require_landlock!();
    let mptcp = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").unwrap_or_default();
    if mptcp.trim() != "1" {
        skip!("MPTCP is not enabled on this kernel");
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

/// The seccomp filter denies `socket(AF_UNIX, …)` but allows `socketpair`: a
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

/// With `network = "none"` the filter denies AF_INET and AF_INET6 only (a
/// deny-list of families): AF_VSOCK, which reaches the hypervisor's host (Firecracker, Kata,
/// WSL2, cloud VMs) without any IP, is created freely. No connection is attempted here.
#[test]
fn a_worker_with_network_none_cannot_open_a_vsock() {
    require_landlock!();
    // SAFETY: socket(2) and close(2) with constant arguments.
    let fd = unsafe { libc::socket(libc::AF_VSOCK, libc::SOCK_STREAM, 0) };
    if fd < 0 {
        skip!("this kernel has no AF_VSOCK");
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
    let p = crate::support::swarm::one(&s, &script);
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

/// TCP Fast Open connects without `connect()`, where Landlock's port rule is checked:
/// `sendto` (or `sendmsg`) with `MSG_FASTOPEN` sends the SYN to any port. A role limited to
/// one port reaches another, here a loopback listener. `TCP_FASTOPEN_CONNECT` goes through
/// `connect()`, and is checked there.
#[test]
fn a_role_given_one_port_cannot_reach_another_with_tcp_fast_open() {
    require_landlock!();
    let open = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let other = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    other.set_nonblocking(true).expect("nonblocking");
    let (po, pc) = (
        open.local_addr().expect("addr").port(),
        other.local_addr().expect("addr").port(),
    );
    let s = swarm_with_port(po);
    let guarded = crate::containment::metadata::Guarded::new(&s);
    for attempt in [
        format!("python3 -c 'import socket; s = socket.socket(); s.settimeout(5); s.sendto(b\"x\", socket.MSG_FASTOPEN, (\"127.0.0.1\", {pc}))'"),
        format!("python3 -c 'import socket; s = socket.socket(); s.settimeout(5); s.sendmsg([b\"x\"], [], socket.MSG_FASTOPEN, (\"127.0.0.1\", {pc}))'"),
        format!("python3 -c 'import socket; s = socket.socket(); s.settimeout(5); s.setsockopt(socket.IPPROTO_TCP, 30, 1); s.connect((\"127.0.0.1\", {pc})); s.sendall(b\"x\")'"),
    ] {
        denied(&s, &attempt);
    }
    assert!(
        other.accept().is_err(),
        "the worker connected to a port its role does not list"
    );
    // The listed port is still reached, by `connect()` or by Fast Open to it.
    assert_eq!(
        run_attack(
            &s,
            &format!("python3 -c 'import socket; s = socket.socket(); s.settimeout(5); s.connect((\"127.0.0.1\", {po})); s.sendall(b\"x\")'")
        ),
        "ESCAPED\n"
    );
    guarded.unchanged();
}

/// A preset CLI pointed at an endpoint on a port its role does not list would only retry until
/// killed (Claude Code silent, codex "Reconnecting…", aider for 85 s): the run refuses before
/// any worker starts, naming the role, the variable, the port and `network`.
#[test]
fn a_preset_whose_endpoint_port_is_closed_is_refused_before_it_starts() {
    require_landlock!();
    let s = Swarm::new("");
    let config = s.env.read("atelier.toml").replace(
        "backend = \"command\"",
        "backend = \"claude\"\nnetwork = [443]",
    );
    let config = config.replace(
        "env = [\"FAKE_AGENT_DIR\"",
        "env = [\"ANTHROPIC_BASE_URL\", \"FAKE_AGENT_DIR\"",
    );
    s.env.write("atelier.toml", &config);
    s.env.git(&["commit", "-q", "-am", "A claude role"]);
    let p = crate::support::swarm::one(&s, "echo ok > src/t.rs");
    let o = s
        .command(&["run", &p])
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:18080")
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    for want in [
        "E_ENDPOINT_BLOCKED",
        "[roles.implementer]",
        "from `ANTHROPIC_BASE_URL`",
        "port 18080",
        "`network = [443]`",
        "add 18080 to `network`",
    ] {
        assert!(stderr.contains(want), "missing {want:?}:\n{stderr}");
    }
    let worktrees = s.env.git(&["worktree", "list"]);
    assert_eq!(
        worktrees.lines().count(),
        1,
        "no attempt began:\n{worktrees}"
    );
}
