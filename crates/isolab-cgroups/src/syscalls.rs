//! [`Syscalls`]: the few effects on the host that are not plain file reads and writes.

use std::fmt;
use std::fs;
use std::io;
use std::path::Path;

/// The system calls a [`crate::Cgroup`] makes besides reading and writing interface
/// files: creating and removing cgroup directories, killing processes and reading
/// which cgroups the caller is in.
///
/// The real implementation is [`RealSyscalls`]. A test double can emulate the
/// kernel on a plain directory tree: create the interface files on `mkdir`, delete
/// them on `rmdir`, and drop a pid from `cgroup.procs` on `kill` (see this crate's
/// integration tests). Install it with [`crate::Hierarchy::with_syscalls`].
pub trait Syscalls: Send + Sync + fmt::Debug {
    /// `mkdir(2)`: creates one cgroup directory (its parent exists).
    fn mkdir(&self, path: &Path) -> io::Result<()>;
    /// `rmdir(2)`: removes one empty cgroup directory.
    fn rmdir(&self, path: &Path) -> io::Result<()>;
    /// `kill(pid, SIGKILL)`.
    fn kill(&self, pid: u32) -> io::Result<()>;
    /// The calling process's `/proc/self/cgroup`: `id:controllers:path` lines.
    fn own_cgroups(&self) -> io::Result<String>;
}

/// The host's system calls.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealSyscalls;

impl Syscalls for RealSyscalls {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir(path)
    }

    fn kill(&self, pid: u32) -> io::Result<()> {
        // pid 0 and negative pids address process groups: never send those.
        let pid = match libc::pid_t::try_from(pid) {
            Ok(pid) if pid > 0 => pid,
            _ => return Err(io::Error::from_raw_os_error(libc::EINVAL)),
        };
        // SAFETY: kill(2) takes two integers and touches no memory of ours; pid is
        // positive, so it addresses exactly one process.
        let rc = unsafe { libc::kill(pid, libc::SIGKILL) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn own_cgroups(&self) -> io::Result<String> {
        crate::file::read_pseudo_file(Path::new("/proc/self/cgroup"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_group_pids() {
        assert!(RealSyscalls.kill(0).is_err());
        assert!(RealSyscalls.kill(u32::MAX).is_err());
    }
}
