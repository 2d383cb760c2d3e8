//! Containment: the Landlock ruleset an untrusted program (an agent worker, a gauntlet step, a
//! contract check, an agent reviewer) runs under. What it may touch is an allow-list: read and
//! execute the system (`SYSTEM_READ`), use a few devices (`DEVICES`), read what the caller adds
//! with `read` (the repository's git objects, a role's `readable`), and write what it adds with
//! `write` (the worktree, a private temporary directory, a shared build cache, a role's
//! `writable`). Nothing else is reachable: not the main working tree, not `.atelier/` (the
//! events, the forge, the gate key), not the git refs, not `$HOME`. TCP follows `Network`.
//! Signals and abstract Unix sockets are scoped to the program's own processes where the kernel
//! can (Landlock ABI 6), and a program run as root loses every capability.
//!
//! The ruleset is built in the conductor (`Sandbox::prepare`, which opens the paths) and only
//! enforced in the child between `fork` and `exec` (`enforce`: async-signal-safe system calls on
//! a descriptor that already exists). Where the kernel cannot enforce a rule, `prepare` fails:
//! containment never silently weakens.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, PathFd,
    Ruleset, RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};
use thiserror::Error;

use crate::config::{GauntletConfig, Network, RoleConfig};
use crate::governance::Code;

/// Directories every contained program may read and execute from, where they exist: the
/// system's programs, libraries and configuration, and the kernel's views of processes.
pub const SYSTEM_READ: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt",
    "/proc",
    "/sys",
    "/run/systemd/resolve",
];

/// `/etc` is readable entry by entry, except what holds the system's secrets (readable by a
/// program run as root whatever its capabilities, since root owns them): password hashes, sudo
/// rules, SSH host keys, TLS private keys, stored credentials.
pub const ETC_EXCLUDED: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "ssh",
    "ssl/private",
    "security/opasswd",
    "credstore",
    "credstore.encrypted",
];

/// The entries of `dir` except the `excluded` paths (relative, `/`-separated), descending only
/// into the directories that hold an excluded path.
fn entries_except(dir: &Path, excluded: &[&str]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if excluded.contains(&name.as_str()) {
            continue;
        }
        let prefix = format!("{name}/");
        let inner: Vec<&str> = excluded
            .iter()
            .filter_map(|x| x.strip_prefix(prefix.as_str()))
            .collect();
        let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if inner.is_empty() || !is_dir {
            out.push(e.path());
        } else {
            out.extend(entries_except(&e.path(), &inner));
        }
    }
    out
}

/// Devices every contained program may read and write (no disk, no other device).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The oldest Landlock ABI containment runs on: 3 (Linux 6.2) handles truncation, so a program
/// cannot empty a file it may only read.
pub const MIN_ABI: i32 = 3;
/// The ABI network rules need (Linux 6.7).
pub const NET_ABI: i32 = 4;

#[derive(Debug, Error)]
pub enum ContainError {
    #[error("this kernel's Landlock ABI is {found}, and {what} needs {needed} or later: run on Linux 6.7 or later with Landlock enabled (`lsm=...,landlock` on the kernel command line), or accept running uncontained with `[swarm] containment = \"none\"` in atelier.toml, merged through the gate (a constitution change)")]
    Unavailable {
        found: i32,
        needed: i32,
        what: &'static str,
    },
    #[error("{field}: `{path}` {reason}")]
    Path {
        field: String,
        path: String,
        reason: String,
    },
    #[error("building the Landlock ruleset: {0}")]
    Ruleset(String),
}

impl ContainError {
    pub fn code(&self) -> Code {
        match self {
            ContainError::Path { .. } => Code::ContainmentPath,
            _ => Code::ContainmentUnavailable,
        }
    }
}

/// A run or review that cannot be contained is refused with the error's code.
impl crate::errors::Classify for ContainError {
    fn kind(&self) -> crate::errors::Kind {
        crate::errors::Kind::Refused(self.code())
    }
}

/// The Landlock ABI this kernel offers (0 or less: none).
pub fn abi() -> i32 {
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) reads no memory
    // and only reports the ABI version.
    unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        ) as i32
    }
}

/// What one program may touch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sandbox {
    /// Read and execute, beneath each path.
    pub read: Vec<PathBuf>,
    /// Everything (read, write, create, remove, execute), beneath each path.
    pub write: Vec<PathBuf>,
    pub network: Network,
    /// Paths `programs` never grants, whatever a command line names (`protected`).
    pub protected: Vec<PathBuf>,
}

impl Sandbox {
    pub fn new(network: Network) -> Sandbox {
        Sandbox {
            read: Vec::new(),
            write: Vec::new(),
            network,
            protected: Vec::new(),
        }
    }

    pub fn read(mut self, p: impl Into<PathBuf>) -> Sandbox {
        self.read.push(p.into());
        self
    }

    pub fn write(mut self, p: impl Into<PathBuf>) -> Sandbox {
        self.write.push(p.into());
        self
    }

    /// The program a command line starts, and every argument naming an existing file by an
    /// absolute path (a script an interpreter runs), readable: the operator named them. `path`
    /// is the child's PATH, searched for a bare program name.
    pub fn programs(mut self, argv: &[String], path: Option<&str>) -> Sandbox {
        let Some(first) = argv.first() else {
            return self;
        };
        let program = if first.contains('/') {
            Some(PathBuf::from(first))
        } else {
            path.unwrap_or_default()
                .split(':')
                .filter(|d| !d.is_empty())
                .map(|d| Path::new(d).join(first))
                .find(|p| p.is_file())
        };
        let args = argv[1..]
            .iter()
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_file());
        for p in program.into_iter().chain(args) {
            if let Ok(real) = p.canonicalize() {
                let guarded = self
                    .protected
                    .iter()
                    .any(|g| real.starts_with(g) || g.starts_with(&real));
                if !guarded {
                    self.read.push(real);
                }
            }
        }
        self
    }

    /// Builds the ruleset: a descriptor `enforce` applies in the child. Fails when the kernel
    /// cannot enforce what is asked or a path cannot be opened.
    pub fn prepare(&self) -> Result<OwnedFd, ContainError> {
        let found = abi();
        if found < MIN_ABI {
            return Err(ContainError::Unavailable {
                found,
                needed: MIN_ABI,
                what: "filesystem containment",
            });
        }
        let restrict_net = self.network != Network::Any;
        if restrict_net && found < NET_ABI {
            return Err(ContainError::Unavailable {
                found,
                needed: NET_ABI,
                what: "a network rule other than `network = \"any\"`",
            });
        }
        let rs = |e: landlock::RulesetError| ContainError::Ruleset(e.to_string());
        let all = AccessFs::from_all(ABI::V5);
        let read = AccessFs::from_read(ABI::V5);
        let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(ABI::V3))
            .map_err(rs)?
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)
            .map_err(rs)?;
        if restrict_net {
            ruleset = ruleset
                .set_compatibility(CompatLevel::HardRequirement)
                .handle_access(AccessNet::from_all(ABI::V4))
                .map_err(rs)?;
        }
        let mut created = ruleset
            .set_compatibility(CompatLevel::BestEffort)
            .scope(Scope::from_all(ABI::V6))
            .map_err(rs)?
            .create()
            .map_err(rs)?;
        let mut rules: Vec<(PathBuf, BitFlags<AccessFs>, bool)> = Vec::new();
        for p in SYSTEM_READ {
            rules.push((PathBuf::from(p), read, false));
        }
        for p in entries_except(Path::new("/etc"), ETC_EXCLUDED) {
            rules.push((p, read, false));
        }
        for p in DEVICES {
            rules.push((PathBuf::from(p), device, false));
        }
        rules.extend(self.read.iter().map(|p| (p.clone(), read, true)));
        rules.extend(self.write.iter().map(|p| (p.clone(), all, true)));
        for (path, access, required) in rules {
            let fd = match PathFd::new(&path) {
                Ok(fd) => fd,
                Err(_) if !required => continue,
                Err(e) => {
                    return Err(ContainError::Path {
                        field: "containment".into(),
                        path: path.display().to_string(),
                        reason: format!(
                            "cannot be opened ({e}): create it, or remove it from the list"
                        ),
                    })
                }
            };
            let access = if path.is_dir() {
                access
            } else {
                access & AccessFs::from_file(ABI::V5)
            };
            created = created.add_rule(PathBeneath::new(fd, access)).map_err(rs)?;
        }
        if let Network::Ports(ports) = &self.network {
            for port in ports {
                created = created
                    .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                    .map_err(rs)?;
            }
        }
        let fd: Option<OwnedFd> = created.into();
        fd.ok_or(ContainError::Unavailable {
            found,
            needed: MIN_ABI,
            what: "filesystem containment",
        })
    }
}

/// Applies a prepared ruleset to the calling process, for `pre_exec`: no new privileges, every
/// capability dropped (so root's read-anything and raw sockets go too, and what a user
/// namespace gave), then the ruleset. Only async-signal-safe system calls; nothing is allocated.
///
/// # Safety
/// Call only in a child between `fork` and `exec`, with `ruleset` from `Sandbox::prepare`.
pub unsafe fn enforce(ruleset: RawFd, filter: &[libc::sock_filter]) -> std::io::Result<()> {
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Root's capabilities, and those a new user namespace (`mounts::enter`) gave.
    drop_capabilities()?;
    if !filter.is_empty() {
        let prog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        if libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER,
            &prog as *const libc::sock_fprog,
        ) != 0
        {
            return Err(std::io::Error::last_os_error());
        }
    }
    if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // Landlock checks opens, not descriptors: nothing the conductor inherited open (from a CI
    // runner, an IDE, a jobserver) passes into the program.
    if libc::syscall(
        libc::SYS_close_range,
        3u32,
        u32::MAX,
        4u32, /* CLOSE_RANGE_CLOEXEC */
    ) != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The architecture `seccomp` filters are written for (they refuse any other calling
/// convention, such as x32 or 32-bit compat calls).
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// A seccomp filter for what Landlock leaves open (kernel ABI 7), as an allow-list where it
/// matters:
/// - sockets: netlink always (name resolution asks it), IPv4 and IPv6 unless `network = "none"`
///   and then, with a port list, only TCP and UDP (an MPTCP or SCTP socket would pass Landlock's
///   TCP-only port rules); every other family (Unix, vsock, packet…) is refused, so a named
///   socket such as an SSH agent's, Docker's or journald's cannot be reached whatever its path;
/// - `socketpair` only of Unix sockets, as a stream or a seqpacket pair (a datagram pair could `sendto` a named
///   socket);
/// - no new namespaces (`unshare`, `setns`, `clone` with a namespace flag; `clone3`, whose flags
///   a filter cannot read, answers ENOSYS so callers fall back to `clone`);
/// - no kernel keyrings (per user, not per sandbox) and no io_uring (which makes sockets past
///   the filter);
/// - no mounts, no new root (`mount`, `umount2`, `mount_setattr`, `open_tree`, `move_mount`,
///   `fsopen`, `fsmount`, `fsconfig`, `fspick`, `pivot_root`, `chroot`): the read-only view
///   `mounts::enter` made stays as it is;
/// - unless `network = "any"`, no TCP Fast Open send (`MSG_FASTOPEN` in `sendto`, `sendmsg`,
///   `sendmmsg`), which connects without `connect()`, where Landlock's port rule applies;
/// - with `Metadata::Refused` (no user namespaces), no metadata change at all: the chmod,
///   chown, utimes and setxattr/removexattr families.
///
/// Refused calls fail with EACCES. Empty on architectures it is not written for.
pub fn seccomp(network: &Network, metadata: Metadata) -> Vec<libc::sock_filter> {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        Bpf::program(network, metadata)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = (network, metadata);
        Vec::new()
    }
}

/// How a contained program is kept from changing file metadata (mode, owner, times, extended
/// attributes) outside what it may write, which Landlock does not cover.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metadata {
    /// Every mount read-only but the writable paths, in a namespace of its own
    /// (`mounts::enter`): a change fails with EROFS outside them, and works inside.
    ReadOnlyMounts,
    /// No user namespace can be made here: the seccomp filter refuses every metadata call,
    /// inside the writable paths too (a build that chmods fails, saying so: `REFUSED_NOTE`).
    Refused,
}

/// What a failed program's output ends with when it ran with `Metadata::Refused`.
pub const REFUSED_NOTE: &str = "note: this program ran with file metadata changes refused (chmod, chown, utimes and extended attributes fail with EACCES, even in its worktree), because this kernel lets no unprivileged user namespace be made; a build that sets modes needs them: allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, `sysctl kernel.apparmor_restrict_unprivileged_userns=0`, `user.max_user_namespaces` above 0) so contained programs get read-only mounts instead";

/// How this machine contains metadata (`mounts::available`, asked once).
pub fn metadata() -> Metadata {
    if super::mounts::available() {
        Metadata::ReadOnlyMounts
    } else {
        Metadata::Refused
    }
}

/// The system calls that change a file's metadata (by path, by descriptor, or at a directory
/// descriptor), refused under `Metadata::Refused`.
fn metadata_calls() -> Vec<u32> {
    let mut out = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        libc::SYS_fchmodat2,
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
    ];
    #[cfg(target_arch = "x86_64")]
    out.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    let mut out: Vec<u32> = out.into_iter().map(|n| n as u32).collect();
    // setxattrat and removexattrat (Linux 6.13), numbered alike on every architecture.
    out.extend([463, 466]);
    out
}

/// The system calls that change mounts or the root, always refused.
fn mount_calls() -> Vec<u32> {
    let mut out: Vec<u32> = [
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_mount_setattr,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
    ]
    .into_iter()
    .map(|n| n as u32)
    .collect();
    // open_tree_attr (Linux 6.15).
    out.push(467);
    out
}

/// A jump target in `Bpf`: the next instruction, or a label.
#[derive(Clone, Copy)]
enum To {
    Next,
    L(&'static str),
}

/// A small classic-BPF assembler: instructions with labelled jump targets, resolved at the end.
struct Bpf {
    ins: Vec<(u16, u32, To, To)>,
    labels: Vec<(&'static str, usize)>,
}

impl Bpf {
    const LD: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const AND: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
    const JEQ: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGE: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const JSET: u16 = 0x45; // BPF_JMP | BPF_JSET | BPF_K
    const RET: u16 = 0x06; // BPF_RET | BPF_K
    /// Offsets in `struct seccomp_data`: the call, the architecture, the low halves of args.
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const fn arg(n: u32) -> u32 {
        16 + 8 * n
    }

    fn op(&mut self, code: u16, k: u32) -> &mut Self {
        self.ins.push((code, k, To::Next, To::Next));
        self
    }
    fn jump(&mut self, code: u16, k: u32, yes: To, no: To) -> &mut Self {
        self.ins.push((code, k, yes, no));
        self
    }
    fn label(&mut self, name: &'static str) -> &mut Self {
        self.labels.push((name, self.ins.len()));
        self
    }

    /// The calls refused whatever their arguments, and the sends whose flags are read.
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn refusals(&mut self, network: &Network, metadata: Metadata) {
        for nr in [
            libc::SYS_keyctl,
            libc::SYS_add_key,
            libc::SYS_request_key,
            libc::SYS_io_uring_setup,
            libc::SYS_io_uring_enter,
            libc::SYS_io_uring_register,
            libc::SYS_unshare,
            libc::SYS_setns,
        ] {
            self.jump(Self::JEQ, nr as u32, To::L("deny"), To::Next);
        }
        // Calls that act on another process of the same user, which Landlock's scopes do not
        // cover: only the caller itself (pid 0) may be named. Another's resource limits would let
        // a worker have the kernel kill the conductor (an `RLIMIT_FSIZE` of 0 is a SIGXFSZ at its
        // next write) or starve it of files; priorities and CPUs would slow it.
        for nr in [
            libc::SYS_prlimit64,
            libc::SYS_sched_setaffinity,
            libc::SYS_sched_setscheduler,
            libc::SYS_sched_setparam,
            libc::SYS_sched_setattr,
        ] {
            self.jump(Self::JEQ, nr as u32, To::L("self only"), To::Next);
        }
        // `which`, `who`: the calling process only (PRIO_PROCESS is 0; IOPRIO_WHO_PROCESS is 1).
        self.jump(
            Self::JEQ,
            libc::SYS_setpriority as u32,
            To::L("prio"),
            To::Next,
        )
        .jump(
            Self::JEQ,
            libc::SYS_ioprio_set as u32,
            To::L("ioprio"),
            To::Next,
        );
        let mut refused = mount_calls();
        if metadata == Metadata::Refused {
            refused.extend(metadata_calls());
        }
        for nr in refused {
            self.jump(Self::JEQ, nr, To::L("deny"), To::Next);
        }
        if *network != Network::Any {
            self.jump(
                Self::JEQ,
                libc::SYS_sendto as u32,
                To::L("flags3"),
                To::Next,
            )
            .jump(
                Self::JEQ,
                libc::SYS_sendmmsg as u32,
                To::L("flags3"),
                To::Next,
            )
            .jump(
                Self::JEQ,
                libc::SYS_sendmsg as u32,
                To::L("flags2"),
                To::Next,
            );
        }
    }

    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn program(network: &Network, metadata: Metadata) -> Vec<libc::sock_filter> {
        let deny = libc::SECCOMP_RET_ERRNO | libc::EACCES as u32;
        let nosys = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;
        let namespaces = (libc::CLONE_NEWNS
            | libc::CLONE_NEWUTS
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUSER
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWNET
            | libc::CLONE_NEWCGROUP) as u32;
        let mut b = Bpf {
            ins: Vec::new(),
            labels: Vec::new(),
        };
        b.op(Self::LD, Self::ARCH)
            .jump(Self::JEQ, AUDIT_ARCH, To::L("arch ok"), To::Next)
            .op(Self::RET, libc::SECCOMP_RET_KILL_PROCESS)
            .label("arch ok")
            .op(Self::LD, Self::NR);
        if cfg!(target_arch = "x86_64") {
            // x32 calls (the same numbers with bit 30 set) would pass the checks below unread.
            b.jump(Self::JGE, 0x4000_0000, To::L("deny"), To::Next);
        }
        b.refusals(network, metadata);
        b.jump(Self::JEQ, libc::SYS_clone3 as u32, To::L("nosys"), To::Next)
            .jump(Self::JEQ, libc::SYS_clone as u32, To::L("clone"), To::Next)
            .jump(
                Self::JEQ,
                libc::SYS_socketpair as u32,
                To::L("pair"),
                To::Next,
            )
            .jump(
                Self::JEQ,
                libc::SYS_socket as u32,
                To::L("socket"),
                To::Next,
            )
            .op(Self::RET, libc::SECCOMP_RET_ALLOW);
        if *network != Network::Any {
            b.label("flags3")
                .op(Self::LD, Self::arg(3))
                .jump(
                    Self::JSET,
                    libc::MSG_FASTOPEN as u32,
                    To::L("deny"),
                    To::L("allow"),
                )
                .label("flags2")
                .op(Self::LD, Self::arg(2))
                .jump(
                    Self::JSET,
                    libc::MSG_FASTOPEN as u32,
                    To::L("deny"),
                    To::L("allow"),
                );
        }
        b.label("self only")
            .op(Self::LD, Self::arg(0))
            .jump(Self::JEQ, 0, To::L("allow"), To::L("deny"))
            .label("prio")
            .op(Self::LD, Self::arg(0))
            .jump(Self::JEQ, 0, To::L("who"), To::L("deny"))
            .label("ioprio")
            .op(Self::LD, Self::arg(0))
            .jump(Self::JEQ, 1, To::L("who"), To::L("deny"))
            .label("who")
            .op(Self::LD, Self::arg(1))
            .jump(Self::JEQ, 0, To::L("allow"), To::L("deny"));
        b.label("clone").op(Self::LD, Self::arg(0)).jump(
            Self::JSET,
            namespaces,
            To::L("deny"),
            To::L("allow"),
        );
        // Only Unix pairs: any other family would have the kernel load and run its module's
        // socket code before refusing.
        b.label("pair")
            .op(Self::LD, Self::arg(0))
            .jump(Self::JEQ, libc::AF_UNIX as u32, To::Next, To::L("deny"))
            .op(Self::LD, Self::arg(1))
            .op(Self::AND, 0xf)
            .jump(
                Self::JEQ,
                libc::SOCK_STREAM as u32,
                To::L("allow"),
                To::Next,
            )
            // Rust's standard library passes a spawned child's pidfd over a SEQPACKET pair
            // (cargo starting rustc): connected like a stream, it cannot reach a named socket.
            .jump(
                Self::JEQ,
                libc::SOCK_SEQPACKET as u32,
                To::L("allow"),
                To::L("deny"),
            );
        b.label("socket").op(Self::LD, Self::arg(0)).jump(
            Self::JEQ,
            libc::AF_NETLINK as u32,
            To::L("allow"),
            To::Next,
        );
        match network {
            Network::None => {
                b.op(Self::RET, deny);
            }
            Network::Any => {
                b.jump(Self::JEQ, libc::AF_INET as u32, To::L("allow"), To::Next)
                    .jump(
                        Self::JEQ,
                        libc::AF_INET6 as u32,
                        To::L("allow"),
                        To::L("deny"),
                    );
            }
            Network::Ports(_) => {
                b.jump(Self::JEQ, libc::AF_INET as u32, To::L("ip"), To::Next)
                    .jump(Self::JEQ, libc::AF_INET6 as u32, To::L("ip"), To::L("deny"))
                    .label("ip")
                    .op(Self::LD, Self::arg(2))
                    .jump(Self::JEQ, 0, To::L("allow"), To::Next)
                    .jump(
                        Self::JEQ,
                        libc::IPPROTO_TCP as u32,
                        To::L("allow"),
                        To::Next,
                    )
                    .jump(
                        Self::JEQ,
                        libc::IPPROTO_UDP as u32,
                        To::L("allow"),
                        To::L("deny"),
                    );
            }
        }
        b.label("allow")
            .op(Self::RET, libc::SECCOMP_RET_ALLOW)
            .label("deny")
            .op(Self::RET, deny)
            .label("nosys")
            .op(Self::RET, nosys);
        b.assemble()
    }

    fn assemble(&self) -> Vec<libc::sock_filter> {
        let at = |to: To, from: usize| -> u8 {
            match to {
                To::Next => 0,
                To::L(name) => {
                    let target = self
                        .labels
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, i)| *i)
                        .expect("every label the program jumps to is defined");
                    u8::try_from(target - from - 1).expect("the program's jumps are short")
                }
            }
        };
        self.ins
            .iter()
            .enumerate()
            .map(|(i, (code, k, yes, no))| libc::sock_filter {
                code: *code,
                jt: at(*yes, i),
                jf: at(*no, i),
                k: *k,
            })
            .collect()
    }
}

/// Empties the bounding, ambient, inheritable, permitted and effective capability sets: a
/// program exec'd as root afterwards gets none back.
unsafe fn drop_capabilities() -> std::io::Result<()> {
    for cap in 0..64 {
        // EINVAL past the last capability this kernel knows.
        libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0);
    }
    libc::prctl(
        libc::PR_CAP_AMBIENT,
        libc::PR_CAP_AMBIENT_CLEAR_ALL,
        0,
        0,
        0,
    );
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522, // _LINUX_CAPABILITY_VERSION_3
        pid: 0,
    };
    let data = [
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    if libc::syscall(libc::SYS_capset, &mut header as *mut Header, data.as_ptr()) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A prepared ruleset's raw descriptor (kept open by its owner until the child has exec'd).
pub fn raw(fd: &OwnedFd) -> RawFd {
    fd.as_raw_fd()
}

/// Expands a role's or the gauntlet's listed path: `~/…` under `home`, a relative path under
/// the repository `root`. `field` names the list in errors; the path must exist.
pub fn listed(
    field: &str,
    text: &str,
    root: &Path,
    home: Option<&Path>,
) -> Result<PathBuf, ContainError> {
    let path = if let Some(rest) = text.strip_prefix("~/") {
        match home {
            Some(h) => h.join(rest),
            None => {
                return Err(ContainError::Path {
                    field: field.into(),
                    path: text.into(),
                    reason: "starts with `~/` but HOME is not set".into(),
                })
            }
        }
    } else if text == "~" {
        return Err(ContainError::Path {
            field: field.into(),
            path: text.into(),
            reason:
                "is the whole home directory, which holds ~/.ssh: list the folders a tool needs"
                    .into(),
        });
    } else if Path::new(text).is_absolute() {
        PathBuf::from(text)
    } else {
        root.join(text)
    };
    if !path.exists() {
        return Err(ContainError::Path {
            field: field.into(),
            path: path.display().to_string(),
            reason: "does not exist: create it, or remove it from the list".into(),
        });
    }
    Ok(path)
}

/// What in a git config would hand a credential to whoever reads it, if anything: an
/// `http.extraheader` (a CI checkout's token), a `[credential]` section, or a password in a URL.
pub fn git_config_secret(text: &str) -> Option<&'static str> {
    for line in text.lines() {
        let l = line.trim().to_ascii_lowercase();
        if l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if l.contains("extraheader") {
            return Some("an http.extraheader (a token)");
        }
        if l.starts_with("[credential") {
            return Some("a [credential] section");
        }
        if let Some((_, value)) = l.split_once('=') {
            if let Some((_, rest)) = value.split_once("://") {
                let authority = rest.split('/').next().unwrap_or_default();
                if authority
                    .split_once('@')
                    .is_some_and(|(userinfo, _)| userinfo.contains(':'))
                {
                    return Some("a password or token in a URL");
                }
            }
        }
    }
    None
}

/// The home directory, for `~/` in listed paths.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// What a role's programs may touch besides their worktree: its `network` (unset: nothing for
/// `command`, port 443 for the presets), `readable` and `writable`, expanded (`listed`).
/// `protected` are paths no grant may reach (the gate key, `.atelier/`, `~/.ssh`): a listed
/// path inside one, or holding one, is refused.
pub fn role(
    name: &str,
    role: &RoleConfig,
    root: &Path,
    protected: &[PathBuf],
) -> Result<Sandbox, ContainError> {
    let network = role.network.clone().unwrap_or(match role.backend.as_str() {
        "command" | "http" => Network::None,
        _ => Network::Ports(vec![443]),
    });
    grants(
        Sandbox::new(network),
        &format!("roles.{name}"),
        &role.readable,
        &role.writable,
        root,
        protected,
    )
}

/// What gauntlet steps and contract checks may touch besides their worktree.
pub fn gauntlet(
    g: &GauntletConfig,
    root: &Path,
    protected: &[PathBuf],
) -> Result<Sandbox, ContainError> {
    grants(
        Sandbox::new(g.network.clone()),
        "gauntlet",
        &g.readable,
        &g.writable,
        root,
        protected,
    )
}

/// The paths no grant may reach for the clone at `root`: its main working tree's private state
/// (`.atelier/`), the gate key (and the clone's gate key directory), and `~/.ssh`.
pub fn protected(root: &Path, gate_key: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.join(".atelier"), gate_key.to_path_buf()];
    // The clone's gate key directory (with its `repository` note) is atelier's own; a key kept
    // elsewhere (`[gate] key`) protects only itself.
    if let Some(dir) = gate_key.parent().filter(|d| d.join("repository").exists()) {
        out.push(dir.to_path_buf());
    }
    if let Some(h) = home() {
        out.push(h.join(".ssh"));
    }
    out
}

/// `s` with more `readable` and `writable` paths listed under `table` (the user-testing
/// validator's), checked like a role's: none may reach a `protected` path.
pub fn extra(
    s: Sandbox,
    table: &str,
    readable: &[String],
    writable: &[String],
    root: &Path,
    protected: &[PathBuf],
) -> Result<Sandbox, ContainError> {
    grants(s, table, readable, writable, root, protected)
}

fn grants(
    mut s: Sandbox,
    table: &str,
    readable: &[String],
    writable: &[String],
    root: &Path,
    protected: &[PathBuf],
) -> Result<Sandbox, ContainError> {
    let home = home();
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let guarded: Vec<PathBuf> = protected.iter().map(|p| real(p)).collect();
    let check = |field: String, text: &str| -> Result<PathBuf, ContainError> {
        let path = listed(&field, text, root, home.as_deref())?;
        let r = real(&path);
        if let Some(p) = guarded
            .iter()
            .find(|p| p.starts_with(&r) || r.starts_with(p))
        {
            return Err(ContainError::Path {
                field,
                path: path.display().to_string(),
                reason: format!(
                    "would let workers reach {} (the gate key, the clone's private state or SSH keys): list a narrower folder",
                    p.display()
                ),
            });
        }
        Ok(path)
    };
    s.protected = guarded.clone();
    for r in readable {
        s = s.read(check(format!("{table}.readable"), r)?);
    }
    for w in writable {
        s = s.write(check(format!("{table}.writable"), w)?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_git_config_are_found() {
        for (text, found) in [
            ("[core]\n\tbare = false\n", None),
            (
                "[remote \"origin\"]\n\turl = https://github.com/o/r.git\n",
                None,
            ),
            (
                "[remote \"origin\"]\n\turl = git@github.com:o/r.git\n",
                None,
            ),
            (
                "[remote \"origin\"]\n\turl = https://x-access-token:ghs_1@github.com/o/r\n",
                Some("a password or token in a URL"),
            ),
            (
                "[http \"https://github.com/\"]\n\textraheader = AUTHORIZATION: basic x\n",
                Some("an http.extraheader (a token)"),
            ),
            (
                "[credential]\n\thelper = store\n",
                Some("a [credential] section"),
            ),
            ("# url = https://u:p@h/\n", None),
        ] {
            assert_eq!(git_config_secret(text), found, "{text}");
        }
    }

    #[test]
    fn etc_is_granted_without_its_secrets() {
        let dir = tempfile::tempdir().expect("tempdir");
        for p in [
            "passwd",
            "shadow",
            "ssl/certs/ca.pem",
            "ssl/private/key.pem",
            "ssh/ssh_host_ed25519_key",
        ] {
            let f = dir.path().join(p);
            std::fs::create_dir_all(f.parent().expect("dir")).expect("mkdir");
            std::fs::write(&f, "x").expect("write");
        }
        let mut got: Vec<String> = entries_except(dir.path(), ETC_EXCLUDED)
            .iter()
            .map(|p| {
                p.strip_prefix(dir.path())
                    .expect("inside")
                    .display()
                    .to_string()
            })
            .collect();
        got.sort();
        assert_eq!(got, ["passwd", "ssl/certs"]);
    }

    #[test]
    fn listed_paths_expand_and_must_exist() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("cache")).expect("mkdir");
        let home = dir.path();
        assert_eq!(
            listed(
                "roles.a.writable",
                "~/cache",
                Path::new("/nowhere"),
                Some(home)
            )
            .expect("ok"),
            home.join("cache")
        );
        assert_eq!(
            listed("roles.a.writable", "cache", home, None).expect("ok"),
            home.join("cache")
        );
        let e = listed("roles.a.readable", "~/missing", home, Some(home)).unwrap_err();
        assert!(e.to_string().contains("roles.a.readable"), "{e}");
        assert!(e.to_string().contains("does not exist"), "{e}");
        let e = listed("roles.a.readable", "~", home, Some(home)).unwrap_err();
        assert!(e.to_string().contains("~/.ssh"), "{e}");
    }

    #[test]
    fn programs_named_on_the_command_line_are_readable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("agent.py");
        std::fs::write(&script, "print(1)").expect("write");
        let s = Sandbox::new(Network::None).programs(
            &["sh".into(), script.display().to_string(), "-x".into()],
            Some("/usr/bin:/bin"),
        );
        assert!(
            s.read
                .iter()
                .any(|p| p.ends_with("sh") || p.ends_with("dash")),
            "{s:?}"
        );
        assert!(
            s.read.contains(&script.canonicalize().expect("real")),
            "{s:?}"
        );
        assert_eq!(s.read.len(), 2, "{s:?}");
    }
}
