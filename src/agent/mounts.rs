//! The filesystem a contained program sees: every mount read-only except the paths it may
//! write, in a mount namespace of its own. Landlock covers opening, creating and removing, not
//! a file's metadata (mode, owner, times, extended attributes), and a seccomp filter cannot see
//! which file a call names; on a read-only mount every metadata change fails with EROFS,
//! whatever the path, the descriptor or the `/proc/self/fd` link that names the file.
//!
//! In the child, before `contain::enforce`: a user namespace (the uid and gid mapped to
//! themselves) owning a mount namespace, mounts private, every mount made read-only
//! (`mount_setattr`, recursive), then each writable path bound onto itself and made writable
//! again, and the working directory entered again (it was on the mount now covered). Where the
//! kernel lets no user namespace be made, `available` says so and the seccomp filter refuses
//! every metadata call instead (`contain::seccomp`): builds that chmod then fail, never quietly
//! run with less containment.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `mount_setattr(2)`'s argument.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: u32 = 0x8000;

/// Whether this machine lets this process enter a read-only view: asked once, of a forked
/// child that enters one (`enter`, with nothing writable) and exits. Making the namespaces is
/// not enough: a kernel may allow them but not mounting in them (Ubuntu's AppArmor
/// `apparmor_restrict_unprivileged_userns`).
pub fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let Ok(plan) = Plan::new(std::iter::empty(), Path::new("/")) else {
            return false;
        };
        // SAFETY: the child only enters the view (`enter`: async-signal-safe calls on memory
        // made before) and calls _exit(2).
        unsafe {
            let pid = libc::fork();
            if pid == 0 {
                let ok = enter(&plan).is_ok();
                libc::_exit(if ok { 0 } else { 1 });
            }
            if pid < 0 {
                return false;
            }
            let mut status = 0;
            while libc::waitpid(pid, &mut status, 0) < 0 {
                if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
                    return false;
                }
            }
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
        }
    })
}

/// What the child needs to enter its read-only view, every string made before `fork`.
#[derive(Debug)]
pub struct Plan {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    writable: Vec<CString>,
    cwd: CString,
}

/// `p` made absolute here, in the conductor (as Landlock opened it): the child has already
/// entered its own working directory.
fn c_path(p: &Path) -> std::io::Result<CString> {
    let p = std::path::absolute(p)?;
    CString::new(p.as_os_str().as_bytes()).map_err(std::io::Error::other)
}

impl Plan {
    /// The view for a program started in `cwd` that may write `writable` (each must exist).
    pub fn new<'a>(
        writable: impl IntoIterator<Item = &'a Path>,
        cwd: &Path,
    ) -> std::io::Result<Plan> {
        // SAFETY: getuid(2) and getgid(2) cannot fail.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Ok(Plan {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            writable: writable
                .into_iter()
                .map(c_path)
                .collect::<std::io::Result<_>>()?,
            cwd: c_path(cwd)?,
        })
    }
}

/// Writes `data` to the file `path` (NUL-terminated), for the namespace's maps.
unsafe fn write_file(path: &[u8], data: &[u8]) -> std::io::Result<()> {
    let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    let err = std::io::Error::last_os_error();
    libc::close(fd);
    if n != data.len() as isize {
        return Err(err);
    }
    Ok(())
}

fn check(r: libc::c_long) -> std::io::Result<()> {
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Enters the read-only view `plan` describes. Only async-signal-safe system calls on memory
/// made before `fork`; nothing is allocated.
///
/// # Safety
/// Call only in a child between `fork` and `exec`, before `contain::enforce`.
pub unsafe fn enter(plan: &Plan) -> std::io::Result<()> {
    check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as libc::c_long)?;
    write_file(b"/proc/self/setgroups\0", b"deny")?;
    write_file(b"/proc/self/uid_map\0", &plan.uid_map)?;
    write_file(b"/proc/self/gid_map\0", &plan.gid_map)?;
    // Nothing mounted here reaches the conductor's namespace, nor the other way.
    check(libc::mount(
        std::ptr::null(),
        c"/".as_ptr(),
        std::ptr::null(),
        libc::MS_REC | libc::MS_PRIVATE,
        std::ptr::null(),
    ) as libc::c_long)?;
    let readonly = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    check(libc::syscall(
        libc::SYS_mount_setattr,
        libc::AT_FDCWD,
        c"/".as_ptr(),
        AT_RECURSIVE,
        &readonly as *const MountAttr,
        std::mem::size_of::<MountAttr>(),
    ))?;
    let writable = MountAttr {
        attr_set: 0,
        attr_clr: MOUNT_ATTR_RDONLY,
        propagation: 0,
        userns_fd: 0,
    };
    for p in &plan.writable {
        check(libc::mount(
            p.as_ptr(),
            p.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND,
            std::ptr::null(),
        ) as libc::c_long)?;
        let r = libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            p.as_ptr(),
            0u32,
            &writable as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        );
        // EPERM: the mount was read-only before (locked so by the kernel), and stays so.
        if r < 0 && *libc::__errno_location() != libc::EPERM {
            return Err(std::io::Error::last_os_error());
        }
    }
    // The working directory was on the mount a writable path now covers.
    check(libc::chdir(plan.cwd.as_ptr()) as libc::c_long)?;
    Ok(())
}
