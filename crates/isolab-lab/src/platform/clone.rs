//! How [`super::process::Spawn`] starts a command: `clone3` straight into the cgroup2
//! directory of its cgroup (`CLONE_INTO_CGROUP`, pure v2 or a hybrid host's unified one),
//! the v1 hierarchies joined by the child writing `0` to their `tasks`, then `execve`.
//!
//! Why not a fork that writes its pid to `cgroup.procs`: that write moves a thread group,
//! for which the kernel takes its thread-group lock for writing, and that waits for an RCU
//! grace period now and then — a median of 20–40 µs, a mean of 140–400 µs and outliers of
//! milliseconds here, on every run. A child born in the cgroup is not moved; a v1 `tasks`
//! write moves one thread, without that lock. Where `clone3` cannot join a cgroup (Linux
//! before 5.7, or a seccomp filter that refuses `clone3`), the child is forked and writes
//! `cgroup.procs` itself, as before.
//!
//! The child of this multi-threaded process runs only async-signal-safe system calls on
//! memory prepared before the clone ([`Exec`]), and reports a failure (the step and its
//! errno) on a close-on-exec pipe, which the parent reads until the exec closes it.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use isolab_cgroups::{clone3, CloneArgs, CLONE_INTO_CGROUP};

/// What the child does between the clone and the exec, all prepared by the parent.
pub(crate) struct Exec {
    program: CString,
    /// Not found here as a path: the child searches `PATH` as `execvp` does (and fails).
    search: bool,
    /// Owns the strings `argv` points into.
    _args: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    workdir: CString,
}

// SAFETY: the raw pointers point into `_args`, which `Exec` owns and never changes.
unsafe impl Send for Exec {}

impl Exec {
    /// `argv` with its program found as isolab finds every program
    /// ([`isolab_tools::find_program`]: `PATH`, then the sbin and bin directories;
    /// argv[0] unchanged), and `workdir`. The child keeps this process's environment.
    pub(crate) fn new(argv: &[String], workdir: &Path) -> io::Result<Exec> {
        let Some(first) = argv.first() else {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
        };
        let c = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("a NUL byte in {s:?}"))
            })
        };
        // A relative `PATH` entry is found from here, not from `workdir`: leave that
        // name to the child's search.
        let found =
            isolab_tools::find_program(first).filter(|p| p.is_absolute() || first.contains('/'));
        let program = c(found.as_ref().map_or(OsStr::new(first), |p| p.as_os_str()))?;
        let args = argv
            .iter()
            .map(|a| c(OsStr::new(a)))
            .collect::<io::Result<Vec<_>>>()?;
        let argv = args
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        Ok(Exec {
            program,
            search: found.is_none(),
            _args: args,
            argv,
            workdir: c(workdir.as_os_str())?,
        })
    }
}

/// Where the child goes and what it waits for.
pub(crate) struct Target<'a> {
    /// The cgroup2 directory (`O_PATH`), joined by `clone3` (or, where it cannot, by a
    /// forked child's write to its `cgroup.procs`).
    pub v2_dir: Option<RawFd>,
    /// The v1 hierarchies' `tasks` files.
    pub v1: &'a [RawFd],
    /// Standard input, output and error.
    pub stdio: [RawFd; 3],
    /// When set, the child waits (up to 5 s) for a byte here before it execs.
    pub go: Option<RawFd>,
}

/// A started child: its pid and pidfd; `exec` tells whether it execed.
pub(crate) struct Cloned {
    pub pid: libc::pid_t,
    pub pidfd: OwnedFd,
    report: OwnedFd,
}

impl Cloned {
    /// Waits until the child has execed (`Ok`) or failed before (its error; it has
    /// exited and is reaped).
    pub(crate) fn exec(&self) -> io::Result<()> {
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < buf.len() {
            // SAFETY: reading into the rest of a stack buffer from a pipe we own.
            let n = unsafe {
                libc::read(
                    self.report.as_raw_fd(),
                    buf[got..].as_mut_ptr().cast(),
                    buf.len() - got,
                )
            };
            match n {
                0 => break,
                n if n > 0 => got += n as usize,
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                _ => return Err(io::Error::last_os_error()),
            }
        }
        if got == 0 {
            return Ok(());
        }
        let step = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
        let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
        // SAFETY: reaping our own child, which has exited or is about to.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
        let e = io::Error::from_raw_os_error(errno);
        Err(match STEPS.get(step as usize) {
            Some(&"execve") | None => e,
            Some(what) => io::Error::new(e.kind(), format!("{what} in the child: {e}")),
        })
    }
}

/// What the child reports as failed, by index.
const STEPS: [&str; 7] = [
    "execve",
    "setpgid",
    "dup2",
    "chdir",
    "joining a v1 cgroup (tasks)",
    "joining the cgroup2 directory (cgroup.procs)",
    "fcntl",
];

/// Starts the child of `exec` in `target`: by `clone3` into the cgroup2 directory when
/// there is one, else (or when `clone3` cannot) by fork.
pub(crate) fn start(exec: &Exec, target: &Target<'_>) -> io::Result<Cloned> {
    start_as(exec, target, true)
}

/// [`start`], by fork alone unless `use_clone3` (the tests take both ways).
fn start_as(exec: &Exec, target: &Target<'_>, use_clone3: bool) -> io::Result<Cloned> {
    let (report_r, report_w) = blocking_pipe()?;
    let into = target.v2_dir.is_some();
    let mut pidfd: libc::c_int = -1;
    let args = CloneArgs {
        flags: libc::CLONE_PIDFD as u64 | if into { CLONE_INTO_CGROUP } else { 0 },
        pidfd: std::ptr::from_mut(&mut pidfd) as u64,
        exit_signal: libc::SIGCHLD as u64,
        cgroup: target.v2_dir.map_or(0, |fd| fd as u64),
        ..CloneArgs::default()
    };
    let pid = if use_clone3 {
        // SAFETY: the child runs `child` only, which never allocates nor returns.
        unsafe { clone3(&args) }
    } else {
        -1
    };
    let (pid, joined) = match pid {
        0 => child(exec, target, None, report_w.as_raw_fd()),
        p if p > 0 => (p as libc::pid_t, true),
        _ => {
            let e = if use_clone3 {
                io::Error::last_os_error()
            } else {
                io::Error::from_raw_os_error(libc::ENOSYS)
            };
            if !matches!(
                e.raw_os_error(),
                Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM | libc::EOPNOTSUPP)
            ) {
                return Err(e);
            }
            let procs = target.v2_dir.map(open_procs).transpose()?;
            let v2_procs = procs.as_ref().map(AsRawFd::as_raw_fd);
            // SAFETY: fork in a multi-threaded process: the child runs `child` only.
            match unsafe { libc::fork() } {
                0 => child(exec, target, v2_procs, report_w.as_raw_fd()),
                p if p > 0 => (p, false),
                _ => return Err(io::Error::last_os_error()),
            }
        }
    };
    drop(report_w);
    let pidfd = if joined {
        // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
        unsafe { OwnedFd::from_raw_fd(pidfd) }
    } else {
        // SAFETY: pidfd_open on the pid of our own unreaped child.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            let e = io::Error::last_os_error();
            // SAFETY: killing and reaping our own child, which we cannot track otherwise.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, std::ptr::null_mut(), 0);
            }
            return Err(e);
        }
        // SAFETY: the syscall returned a new fd owned by nobody else.
        unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
    };
    Ok(Cloned {
        pid,
        pidfd,
        report: report_r,
    })
}

/// `cgroup.procs` of the cgroup2 directory `dir` (an `O_PATH` descriptor), for writing.
fn open_procs(dir: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: a NUL-terminated literal name relative to a directory descriptor we hold.
    let fd = unsafe {
        libc::openat(
            dir,
            c"cgroup.procs".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: openat returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn blocking_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// The child: its own process group, the standard streams, the working directory, the
/// v1 cgroups (and the cgroup2 one through `v2_procs` when forked), the wait for `go`, then the
/// exec. Async-signal-safe system calls only, on memory prepared before the clone (it
/// must run only in the child of [`start`]'s clone or fork); a failure writes its step
/// and errno to `report` and exits 127.
fn child(exec: &Exec, target: &Target<'_>, v2_procs: Option<RawFd>, report: RawFd) -> ! {
    let fail = |step: u32| -> ! {
        // SAFETY: reading this thread's errno.
        let errno = unsafe { *libc::__errno_location() };
        let mut buf = [0u8; 8];
        buf[..4].copy_from_slice(&step.to_ne_bytes());
        buf[4..].copy_from_slice(&errno.to_ne_bytes());
        // SAFETY: writing a stack buffer to the report pipe, then leaving without
        // running any of the parent's exit handlers.
        unsafe {
            libc::write(report, buf.as_ptr().cast(), buf.len());
            libc::_exit(127)
        }
    };
    // The workload starts with no signal blocked and SIGPIPE at its default, as from a
    // shell (Rust ignores SIGPIPE in this process).
    // SAFETY: an empty signal set on the stack, then two plain system calls.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // SAFETY: setpgid on the calling process.
    if unsafe { libc::setpgid(0, 0) } != 0 {
        fail(1);
    }
    for (target_fd, &fd) in target.stdio.iter().enumerate() {
        let target_fd = target_fd as RawFd;
        if fd == target_fd {
            // Already in place: only keep it across the exec.
            // SAFETY: clearing FD_CLOEXEC on an open descriptor.
            if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
                fail(6);
            }
        // SAFETY: duplicating an open descriptor onto a standard one.
        } else if unsafe { libc::dup2(fd, target_fd) } < 0 {
            fail(2);
        }
    }
    // SAFETY: a NUL-terminated path owned by `exec`.
    if unsafe { libc::chdir(exec.workdir.as_ptr()) } != 0 {
        fail(3);
    }
    for &fd in target.v1 {
        // SAFETY: a one-byte static buffer to a pre-opened `tasks` file.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            fail(4);
        }
    }
    if let Some(fd) = v2_procs {
        // SAFETY: a one-byte static buffer to a pre-opened `cgroup.procs`.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            fail(5);
        }
    }
    if let Some(go) = target.go {
        let mut pfd = libc::pollfd {
            fd: go,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polling one valid pollfd on the stack.
        unsafe { libc::poll(&mut pfd, 1, 5000) };
    }
    // SAFETY: a NUL-terminated string and a NULL-terminated array owned by `exec`; both
    // calls pass on this process's environment (`environ`), as `execve` would be given.
    unsafe {
        if exec.search {
            libc::execvp(exec.program.as_ptr(), exec.argv.as_ptr());
        } else {
            libc::execv(exec.program.as_ptr(), exec.argv.as_ptr());
        }
    }
    fail(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Starts `argv` in a temporary directory (or `workdir`), its output to a file there,
    /// by clone3 or by fork, and waits for its exit code.
    fn run(argv: &[&str], workdir: Option<&Path>, use_clone3: bool) -> io::Result<i32> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::fs::File::create(dir.path().join("out")).unwrap();
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let exec = Exec::new(&argv, workdir.unwrap_or(dir.path()))?;
        let target = Target {
            v2_dir: None,
            v1: &[],
            stdio: [out.as_raw_fd(), out.as_raw_fd(), out.as_raw_fd()],
            go: None,
        };
        let cloned = start_as(&exec, &target, use_clone3)?;
        cloned.exec()?;
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(cloned.pid, &mut status, 0) };
        Ok(libc::WEXITSTATUS(status))
    }

    #[test]
    fn both_ways_start_exec_and_report_what_failed() {
        for use_clone3 in [true, false] {
            assert_eq!(run(&["sh", "-c", "exit 3"], None, use_clone3).unwrap(), 3);
            let missing = run(&["no-such-program-here"], None, use_clone3).unwrap_err();
            assert_eq!(missing.kind(), io::ErrorKind::NotFound, "{missing}");
            let gone = Path::new("/nonexistent/isolab-workdir");
            let chdir = run(&["true"], Some(gone), use_clone3).unwrap_err();
            assert!(
                chdir.to_string().starts_with("chdir in the child: "),
                "{chdir}"
            );
        }
    }

    #[test]
    fn a_program_is_found_as_isolab_finds_programs_and_a_relative_one_left_to_the_child() {
        let dir = Path::new("/");
        let sh = Exec::new(&["sh".into()], dir).unwrap();
        assert!(!sh.search);
        let path = sh.program.as_bytes();
        assert!(path.starts_with(b"/") && path.ends_with(b"/sh"), "{path:?}");
        let missing = Exec::new(&["no-such-program-here".into()], dir).unwrap();
        assert!(missing.search);
        assert_eq!(missing.program.as_bytes(), b"no-such-program-here");
        let relative = Exec::new(&["./x".into()], dir).unwrap();
        assert!(relative.search);
        let absolute = Exec::new(&["/bin/sh".into()], dir).unwrap();
        assert!(!absolute.search);
        assert_eq!(absolute.program.as_bytes(), b"/bin/sh");
    }
}
