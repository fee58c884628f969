//! The host effects of the runc/crun, LXC and nspawn drivers that are not programs:
//! mounts, signals, creating and removing cgroup directories ([`Host`]), the real
//! implementation ([`SystemHost`]) and its use as the [`Syscalls`] of `isolab_cgroups`
//! (tree removal, and the cgroups a driver creates itself).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use isolab_cgroups::Syscalls;

/// The host effects of the runc/crun, LXC and nspawn drivers that are not programs:
/// mounts, signals, creating and removing cgroup directories. [`SystemHost`] is the
/// real one.
pub trait Host: Send + Sync {
    /// Mounts a fresh tmpfs (mode 0755) on `target`.
    fn mount_tmpfs(&self, target: &Path) -> io::Result<()>;
    /// Mounts an overlay of read-only `lower` and writable `upper` (with `work`, on the
    /// same file system as `upper`) on `target`.
    fn mount_overlay(
        &self,
        lower: &Path,
        upper: &Path,
        work: &Path,
        target: &Path,
    ) -> io::Result<()>;
    /// Unmounts `target`; when it is busy, detaches it lazily. Returns whether the
    /// unmount had to be lazy.
    fn unmount(&self, target: &Path) -> io::Result<bool>;
    /// Sends SIGKILL to `pid`.
    fn kill(&self, pid: u32) -> io::Result<()>;
    /// Creates the cgroup directory `path` (`mkdir`; its parent exists).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// Removes the (cgroup) directory `path` (`rmdir`).
    fn rmdir(&self, path: &Path) -> io::Result<()>;
}

/// The real [`Host`]: mount(2), umount2(2), kill(2), mkdir(2) and rmdir(2).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemHost;

fn c_path(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the path contains a NUL byte"))
}

fn c_str(s: &str) -> io::Result<CString> {
    CString::new(s)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the text contains a NUL byte"))
}

/// mount(2) of `source` (a device, or a name for a file system without one) on
/// `target` as `fstype` with the file system's options `data`, no mount flags.
pub fn sys_mount(source: &str, target: &Path, fstype: &str, data: &str) -> io::Result<()> {
    let (source, target, fstype, data) = (
        c_str(source)?,
        c_path(target)?,
        c_str(fstype)?,
        c_str(data)?,
    );
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call;
    // mount(2) only reads them.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            0,
            data.as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Escapes the characters overlayfs treats specially in a `lowerdir=` list (`,` `:`
/// and `\`).
fn overlay_escape(p: &Path) -> String {
    let mut out = String::new();
    for ch in p.to_string_lossy().chars() {
        if matches!(ch, ',' | ':' | '\\') {
            out.push('\\');
        }
        out.push(ch);
    }
    out
}

impl Host for SystemHost {
    fn mount_tmpfs(&self, target: &Path) -> io::Result<()> {
        sys_mount("tmpfs", target, "tmpfs", "mode=0755")
    }

    fn mount_overlay(
        &self,
        lower: &Path,
        upper: &Path,
        work: &Path,
        target: &Path,
    ) -> io::Result<()> {
        let data = format!(
            "lowerdir={},upperdir={},workdir={}",
            overlay_escape(lower),
            overlay_escape(upper),
            overlay_escape(work)
        );
        sys_mount("overlay", target, "overlay", &data)
    }

    fn unmount(&self, target: &Path) -> io::Result<bool> {
        let target = c_path(target)?;
        // SAFETY: `target` is a valid NUL-terminated path that outlives the call.
        if unsafe { libc::umount2(target.as_ptr(), 0) } == 0 {
            return Ok(false);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EBUSY) {
            return Err(err);
        }
        // SAFETY: as above.
        if unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) } == 0 {
            Ok(true)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn kill(&self, pid: u32) -> io::Result<()> {
        let pid = libc::pid_t::try_from(pid)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "pid out of range"))?;
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }
}

/// A [`Host`]'s `mkdir`, `rmdir` and `kill`, as the [`Syscalls`] of
/// [`isolab_cgroups::remove_tree`] and of a [`isolab_cgroups::Hierarchy`]
/// ([`isolab_cgroups::Hierarchy::with_syscalls`]).
pub(crate) struct HostCalls(pub(crate) Arc<dyn Host>);

impl std::fmt::Debug for HostCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HostCalls")
    }
}

impl Syscalls for HostCalls {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        self.0.mkdir(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        self.0.rmdir(path)
    }

    fn kill(&self, pid: u32) -> io::Result<()> {
        self.0.kill(pid)
    }

    /// Drivers never move the lab's own process ([`isolab_cgroups::Cgroup::enter`]).
    fn own_cgroups(&self) -> io::Result<String> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "an engine's host does not say which cgroups the lab is in",
        ))
    }
}
