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
    "/etc",
    "/opt",
    "/proc",
    "/sys",
    "/run/systemd/resolve",
];

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
    #[error("{field}: `{path}` {reason}: create it, or remove it from the list")]
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
impl From<ContainError> for crate::workflow::Error {
    fn from(e: ContainError) -> Self {
        crate::workflow::refuse(e.code(), e.to_string())
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
}

impl Sandbox {
    pub fn new(network: Network) -> Sandbox {
        Sandbox {
            read: Vec::new(),
            write: Vec::new(),
            network,
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
                self.read.push(real);
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
                        reason: format!("cannot be opened ({e})"),
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
/// capability dropped when running as root (so root's read-anything and raw sockets go too),
/// then the ruleset. Only async-signal-safe system calls; nothing is allocated.
///
/// # Safety
/// Call only in a child between `fork` and `exec`, with `ruleset` from `Sandbox::prepare`.
pub unsafe fn enforce(ruleset: RawFd) -> std::io::Result<()> {
    if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if libc::geteuid() == 0 {
        drop_capabilities()?;
    }
    if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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
            reason: "does not exist".into(),
        });
    }
    Ok(path)
}

/// The home directory, for `~/` in listed paths.
fn home() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// What a role's programs may touch besides their worktree: its `network` (unset: nothing for
/// `command`, port 443 for the presets), `readable` and `writable`, expanded (`listed`).
pub fn role(name: &str, role: &RoleConfig, root: &Path) -> Result<Sandbox, ContainError> {
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
    )
}

/// What gauntlet steps and contract checks may touch besides their worktree.
pub fn gauntlet(g: &GauntletConfig, root: &Path) -> Result<Sandbox, ContainError> {
    grants(
        Sandbox::new(g.network.clone()),
        "gauntlet",
        &g.readable,
        &g.writable,
        root,
    )
}

fn grants(
    mut s: Sandbox,
    table: &str,
    readable: &[String],
    writable: &[String],
    root: &Path,
) -> Result<Sandbox, ContainError> {
    let home = home();
    for r in readable {
        s = s.read(listed(
            &format!("{table}.readable"),
            r,
            root,
            home.as_deref(),
        )?);
    }
    for w in writable {
        s = s.write(listed(
            &format!("{table}.writable"),
            w,
            root,
            home.as_deref(),
        )?);
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

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
