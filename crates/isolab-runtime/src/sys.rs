//! Thin, allocation-free wrappers over the system calls the container's init runs.
//!
//! Everything here may run in a child created by a raw `clone3` of a possibly
//! multi-threaded parent, where `malloc` may be locked forever: the wrappers only
//! take pre-built C strings and return the `errno` of a failure ([`Errno`]).

use std::ffi::CStr;
use std::io;
use std::os::fd::RawFd;
use std::ptr;

/// The `errno` of a failed system call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    /// The calling thread's current `errno`.
    pub fn last() -> Errno {
        // SAFETY: __errno_location returns a valid pointer to the thread's errno.
        Errno(unsafe { *libc::__errno_location() })
    }

    /// As an `io::Error` (allocates: parent side only).
    pub fn to_io(self) -> io::Error {
        io::Error::from_raw_os_error(self.0)
    }
}

/// `Ok(())` when a libc call returned `0` or more, the `errno` otherwise.
fn check(ret: libc::c_int) -> Result<(), Errno> {
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

fn opt_ptr(s: Option<&CStr>) -> *const libc::c_char {
    s.map_or(ptr::null(), CStr::as_ptr)
}

/// `mount(2)`.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> Result<(), Errno> {
    // SAFETY: every pointer is null or a NUL-terminated string that outlives the call.
    check(unsafe {
        libc::mount(
            opt_ptr(source),
            target.as_ptr(),
            opt_ptr(fstype),
            flags,
            opt_ptr(data).cast(),
        )
    })
}

/// `umount2(2)`.
pub fn umount2(target: &CStr, flags: libc::c_int) -> Result<(), Errno> {
    // SAFETY: target is a NUL-terminated string.
    check(unsafe { libc::umount2(target.as_ptr(), flags) })
}

/// `chroot(2)`.
pub fn chroot(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is a NUL-terminated string.
    check(unsafe { libc::chroot(path.as_ptr()) })
}

/// `pivot_root(2)` (no libc wrapper).
pub fn pivot_root(new_root: &CStr, put_old: &CStr) -> Result<(), Errno> {
    // SAFETY: both arguments are NUL-terminated strings.
    let ret = unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) };
    if ret < 0 {
        Err(Errno::last())
    } else {
        Ok(())
    }
}

/// `chdir(2)`.
pub fn chdir(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is a NUL-terminated string.
    check(unsafe { libc::chdir(path.as_ptr()) })
}

/// `mkdir(2)`; an existing entry is not an error.
pub fn mkdir_exist_ok(path: &CStr, mode: libc::mode_t) -> Result<(), Errno> {
    // SAFETY: path is a NUL-terminated string.
    match check(unsafe { libc::mkdir(path.as_ptr(), mode) }) {
        Err(Errno(libc::EEXIST)) => Ok(()),
        other => other,
    }
}

/// `mknod(2)`.
pub fn mknod(path: &CStr, mode: libc::mode_t, dev: libc::dev_t) -> Result<(), Errno> {
    // SAFETY: path is a NUL-terminated string.
    check(unsafe { libc::mknod(path.as_ptr(), mode, dev) })
}

/// Creates an empty regular file (a bind-mount target); an existing one is fine.
pub fn touch(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is a NUL-terminated string; the returned fd is closed below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
            0o644 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(Errno::last());
    }
    close(fd);
    Ok(())
}

/// Creates an empty regular file with `O_EXCL | O_NOFOLLOW` (a bind-mount target that
/// was missing); an existing entry is not an error.
pub fn create_file(path: &CStr) -> Result<(), Errno> {
    // SAFETY: path is a NUL-terminated string; the returned fd is closed below.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_CREAT | libc::O_EXCL | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            0o644 as libc::c_uint,
        )
    };
    if fd < 0 {
        return match Errno::last() {
            Errno(libc::EEXIST) => Ok(()),
            e => Err(e),
        };
    }
    close(fd);
    Ok(())
}

/// `symlink(2)`; an existing entry is not an error.
pub fn symlink_exist_ok(target: &CStr, link: &CStr) -> Result<(), Errno> {
    // SAFETY: both are NUL-terminated strings.
    match check(unsafe { libc::symlink(target.as_ptr(), link.as_ptr()) }) {
        Err(Errno(libc::EEXIST)) => Ok(()),
        other => other,
    }
}

/// `sethostname(2)`.
pub fn sethostname(name: &CStr) -> Result<(), Errno> {
    let bytes = name.to_bytes();
    // SAFETY: the pointer and length describe the string's bytes.
    check(unsafe { libc::sethostname(bytes.as_ptr().cast(), bytes.len()) })
}

/// What kind of file `path` is, without following a final symlink: `None` when missing.
pub fn file_kind(path: &CStr) -> Result<Option<libc::mode_t>, Errno> {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated and st is a valid, writable stat buffer.
    match check(unsafe { libc::lstat(path.as_ptr(), &mut st) }) {
        Ok(()) => Ok(Some(st.st_mode & libc::S_IFMT)),
        Err(Errno(libc::ENOENT)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The mount flags (`MS_*`) of the mount holding `path`, from `statvfs(3)`, limited
/// to those that must be kept on a bind remount (nosuid, nodev, noexec, ro, atime flags).
pub fn mount_flags(path: &CStr) -> Result<libc::c_ulong, Errno> {
    // SAFETY: an all-zero statvfs is a valid value of this plain C struct.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: path is NUL-terminated and st a valid, writable buffer.
    check(unsafe { libc::statvfs(path.as_ptr(), &mut st) })?;
    let pairs = [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_RDONLY, libc::MS_RDONLY),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ];
    let mut flags = 0;
    for (st_flag, ms_flag) in pairs {
        if st.f_flag & st_flag != 0 {
            flags |= ms_flag;
        }
    }
    Ok(flags)
}

/// Sets the `IFF_UP` flag of the loopback interface `lo` of the current network
/// namespace with `SIOCGIFFLAGS` / `SIOCSIFFLAGS`.
pub fn loopback_up() -> Result<(), Errno> {
    // SAFETY: socket(2) with constant arguments; the fd is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(Errno::last());
    }
    // SAFETY: an all-zero ifreq is a valid value of this plain C struct.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *dst = *src as libc::c_char;
    }
    // SAFETY: fd is an open socket and req a valid ifreq naming "lo".
    let result = check(unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut req) }).and_then(|()| {
        // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
        unsafe { req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short };
        // SAFETY: as above; SIOCSIFFLAGS reads the name and flags.
        check(unsafe { libc::ioctl(fd, libc::SIOCSIFFLAGS, &req) })
    });
    close(fd);
    result
}

/// `close(2)`, ignoring errors (there is nothing to do about them).
pub fn close(fd: RawFd) {
    // SAFETY: closing a descriptor number has no memory-safety effect; callers only
    // pass descriptors they own.
    unsafe { libc::close(fd) };
}

/// Opens `path` for writing (no create), writes `data`, closes it.
pub fn write_file(path: &CStr, data: &[u8]) -> Result<(), Errno> {
    // SAFETY: a NUL-terminated path.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(Errno::last());
    }
    let written = write_all(fd, data);
    close(fd);
    written
}

/// `write(2)` of the whole buffer (retrying on `EINTR`).
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> Result<(), Errno> {
    while !buf.is_empty() {
        // SAFETY: the pointer and length describe `buf`.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = Errno::last();
            if e.0 == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// `read(2)` into `buf` (retrying on `EINTR`); returns the byte count, 0 at EOF.
pub fn read(fd: RawFd, buf: &mut [u8]) -> Result<usize, Errno> {
    loop {
        // SAFETY: the pointer and length describe `buf`, which is writable.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = Errno::last();
        if e.0 != libc::EINTR {
            return Err(e);
        }
    }
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` at a clean EOF before the first byte.
pub fn read_exact(fd: RawFd, buf: &mut [u8]) -> Result<bool, Errno> {
    let mut done = 0;
    while done < buf.len() {
        let n = read(fd, &mut buf[done..])?;
        if n == 0 {
            return if done == 0 {
                Ok(false)
            } else {
                Err(Errno(libc::EIO))
            };
        }
        done += n;
    }
    Ok(true)
}

/// `CLOCK_MONOTONIC` in nanoseconds (the clock `std::time::Instant` uses on Linux).
pub fn monotonic_ns() -> u64 {
    // SAFETY: an all-zero timespec is valid.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: ts is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000_000 + ts.tv_nsec as u64
}

/// A pipe with both ends close-on-exec: `(read, write)`.
pub fn pipe() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: fds is a writable array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 returned two fresh descriptors that nothing else owns.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// `pidfd_send_signal(2)` (parent side); a process that has exited meanwhile is not
/// an error (`ESRCH` is ignored).
pub fn pidfd_send_signal(pidfd: RawFd, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: pidfd_send_signal with integer arguments and a null siginfo.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd,
            signal,
            ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e);
        }
    }
    Ok(())
}

/// Waits until one of `fds` is readable (negative entries are ignored), at most
/// `timeout_ms` (-1: no limit), retrying after signals; one flag per descriptor, all
/// false on a timeout (parent side).
pub fn poll_readable<const N: usize>(fds: [RawFd; N], timeout_ms: i32) -> io::Result<[bool; N]> {
    let mut polled = fds.map(|fd| libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    });
    loop {
        // SAFETY: `polled` is a valid array of N pollfd.
        let n = unsafe { libc::poll(polled.as_mut_ptr(), N as libc::nfds_t, timeout_ms) };
        if n >= 0 {
            // POLLHUP and POLLERR count as readable: a read then tells what happened.
            let ready = libc::POLLIN | libc::POLLHUP | libc::POLLERR;
            return Ok(polled.map(|p| p.revents & ready != 0));
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINTR) {
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_flags() {
        assert_eq!(file_kind(c"/").unwrap(), Some(libc::S_IFDIR));
        assert_eq!(file_kind(c"/nonexistent-isolab").unwrap(), None);
        let flags = mount_flags(c"/").unwrap();
        assert_eq!(flags & libc::MS_RDONLY, 0, "/ is writable");
        assert!(mount_flags(c"/nonexistent-isolab").is_err());
    }

    #[test]
    fn pipe_round_trip() {
        use std::os::fd::AsRawFd;
        let (r, w) = pipe().unwrap();
        write_all(w.as_raw_fd(), b"abcd").unwrap();
        drop(w);
        let mut buf = [0u8; 4];
        assert!(read_exact(r.as_raw_fd(), &mut buf).unwrap());
        assert_eq!(&buf, b"abcd");
        assert!(!read_exact(r.as_raw_fd(), &mut buf).unwrap());
        assert!(monotonic_ns() > 0);
    }
}
