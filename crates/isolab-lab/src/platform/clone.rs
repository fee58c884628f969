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
//! Where it can (x86_64, Linux 5.7 or later), the child shares this process's memory
//! until it execs, as `posix_spawn`'s does (`CLONE_VM | CLONE_VFORK`, on a stack of its
//! own, the parent's thread waiting until the exec): no copy of the address space, and
//! no copy-on-write faults left for the runner's next writes (with the counters opened
//! by the child, 0.33 ms a run less here; docs/benchmarks.md). A counted child opens
//! its perf counters on itself first, in the descriptor table it shares with the parent
//! until then ([`start_counting`]).
//!
//! The child of this multi-threaded process runs only async-signal-safe system calls on
//! memory prepared before the clone ([`Exec`]), and reports a failure (the step and its
//! errno) on a close-on-exec pipe, which the parent reads until the exec closes it.

use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};

use isolab_cgroups::{clone3, clone3_vfork, CloneArgs, CLONE_INTO_CGROUP};

/// `PERF_FLAG_FD_CLOEXEC` of perf_event_open(2).
pub(crate) const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

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
// SAFETY: as for Send: nothing is written through the pointers after `new`, so a
// shared `Exec` (the thread that starts a counted command borrows one) is only read.
unsafe impl Sync for Exec {}

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

/// A perf counter the child opens on itself before it execs ([`start_counting`]): the
/// event is the child's own, as if the parent had opened it on the child's pid, and its
/// descriptor lands in the parent's table, which the child shares until then.
pub(crate) struct OwnCounter {
    /// A `struct perf_event_attr`, valid until the child has started.
    pub attr: *const libc::c_void,
    /// Written by the child: the descriptor, or `-errno` of `perf_event_open`.
    pub fd: AtomicI32,
}

// SAFETY: `attr` is only read (by the child's system call), and `fd` is atomic.
unsafe impl Sync for OwnCounter {}

/// Where the child goes and what it opens there.
pub(crate) struct Target<'a> {
    /// The cgroup2 directory (`O_PATH`), joined by `clone3` (or, where it cannot, by a
    /// forked child's write to its `cgroup.procs`).
    pub v2_dir: Option<RawFd>,
    /// The v1 hierarchies' `tasks` files.
    pub v1: &'a [RawFd],
    /// Standard input, output and error.
    pub stdio: [RawFd; 3],
    /// The counters the child opens on itself ([`start_counting`] only; empty for
    /// [`start`]).
    pub counters: &'a [OwnCounter],
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
const STEPS: [&str; 8] = [
    "execve",
    "setpgid",
    "dup2",
    "chdir",
    "joining a v1 cgroup (tasks)",
    "joining the cgroup2 directory (cgroup.procs)",
    "fcntl",
    "unshare (a descriptor table of its own)",
];

/// How [`start`] makes the child, fastest first: each way falls back to the next where
/// the kernel (or a seccomp filter) refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    /// `clone3` with `CLONE_VM | CLONE_VFORK` on a stack of its own, as `posix_spawn`
    /// does: no copy of the address space (the copy took 0.24 ms a run under `perf
    /// record` here, and left copy-on-write faults), the parent's thread waiting until
    /// the child has execed.
    SharedMemory,
    /// `clone3` like fork, into the cgroup2 directory.
    #[cfg_attr(not(test), allow(dead_code))] // where the tests start; `start` falls to it
    Clone3,
    /// fork, the child writing `cgroup.procs` itself.
    Fork,
}

/// Starts the child of `exec` in `target`: sharing this address space until it execs,
/// by `clone3` into the cgroup2 directory when there is one; else (or when that cannot)
/// by a `clone3` that copies it; else by fork.
pub(crate) fn start(exec: &Exec, target: &Target<'_>) -> io::Result<Cloned> {
    debug_assert!(target.counters.is_empty(), "counters need start_counting");
    start_as(exec, target, Way::SharedMemory)
}

/// [`start`] for a child that opens `target.counters` on itself before it execs: only
/// [`Way::SharedMemory`] can give their descriptors to this process (the child shares
/// its descriptor table until it has opened them); `None` where that way is refused,
/// and nothing was started.
pub(crate) fn start_counting(exec: &Exec, target: &Target<'_>) -> io::Result<Option<Cloned>> {
    match start_as(exec, target, Way::SharedMemory) {
        Err(e) if refused(&e) => Ok(None),
        started => started.map(Some),
    }
}

/// Whether `e`, from a clone, means "not this way here" rather than a failure.
fn refused(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOSYS | libc::EINVAL | libc::E2BIG | libc::EPERM | libc::EOPNOTSUPP)
    )
}

/// [`start`] from `way` on (the tests take each way).
fn start_as(exec: &Exec, target: &Target<'_>, way: Way) -> io::Result<Cloned> {
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
    let mut tried = Err(io::Error::from_raw_os_error(libc::ENOSYS));
    if way == Way::SharedMemory {
        tried = clone_sharing_memory(exec, target, &args, report_w.as_raw_fd());
    }
    let fall_back = target.counters.is_empty();
    if tried.as_ref().is_err_and(refused) && fall_back && way != Way::Fork {
        // SAFETY: the child runs `child` only, which never allocates nor returns.
        tried = match unsafe { clone3(&args) } {
            0 => child(exec, target, &[], None, report_w.as_raw_fd()),
            p if p > 0 => Ok(p as libc::pid_t),
            _ => Err(io::Error::last_os_error()),
        };
    }
    let (pid, joined) = match tried {
        Ok(pid) => (pid, true),
        Err(e) if !refused(&e) || !fall_back => return Err(e),
        Err(_) => {
            let procs = target.v2_dir.map(open_procs).transpose()?;
            let v2_procs = procs.as_ref().map(AsRawFd::as_raw_fd);
            // SAFETY: fork in a multi-threaded process: the child runs `child` only.
            match unsafe { libc::fork() } {
                0 => child(exec, target, &[], v2_procs, report_w.as_raw_fd()),
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

/// The child's stack for [`Way::SharedMemory`] beyond its arguments: `execvp`'s search
/// builds each candidate path on it (up to `PATH_MAX`), as glibc's `posix_spawn` allows for.
const CHILD_STACK: usize = 128 << 10;

/// What the child of [`clone_sharing_memory`] is given, in the parent's frame.
struct SharedChild<'a> {
    exec: &'a Exec,
    target: &'a Target<'a>,
    report: RawFd,
}

/// [`Way::SharedMemory`]: the child's pid, or the clone's error. Every signal is
/// blocked in this thread across the clone, so that no handler of this process runs in
/// the child (which shares its memory) before the child has set them to their defaults.
fn clone_sharing_memory(
    exec: &Exec,
    target: &Target<'_>,
    args: &CloneArgs,
    report: RawFd,
) -> io::Result<libc::pid_t> {
    let size = CHILD_STACK + (exec.argv.len() + 2) * std::mem::size_of::<usize>();
    let size = size.next_multiple_of(4096);
    // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let shared = SharedChild {
        exec,
        target,
        report,
    };
    let files = if target.counters.is_empty() {
        0
    } else {
        libc::CLONE_FILES as u64
    };
    let args = CloneArgs {
        flags: args.flags | files,
        stack: stack as u64,
        stack_size: size as u64,
        ..*args
    };
    // SAFETY: an all-zero sigset_t is a valid (empty) set.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: a full set on the stack; pthread_sigmask changes this thread's mask only,
    // restored below.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: `stack` is `size` page-aligned bytes of our own mapping, unmapped only
    // after the child has execed or exited (CLONE_VFORK: this returns after that);
    // `shared_child` runs `child` only, with the signals blocked here until it has reset
    // their handlers, on memory that lives in this frame until then.
    let pid = unsafe {
        clone3_vfork(
            &args,
            shared_child,
            std::ptr::from_ref(&shared).cast_mut().cast(),
        )
    };
    // SAFETY: restoring this thread's mask; unmapping the stack no one uses any more.
    unsafe {
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        libc::munmap(stack, size);
    }
    if pid < 0 {
        return Err(io::Error::from_raw_os_error(-pid as i32));
    }
    Ok(pid as libc::pid_t)
}

/// The child of [`clone_sharing_memory`]: every handler this process set back to the
/// default (ignored signals stay ignored, as across an exec), then [`child`].
extern "C" fn shared_child(arg: *mut libc::c_void) -> ! {
    // SAFETY: `arg` is the `SharedChild` in the frame of `clone_sharing_memory`, whose
    // thread waits until this child execs or exits.
    let shared = unsafe { &*arg.cast::<SharedChild<'_>>() };
    for signal in 1..=libc::SIGRTMAX() {
        // SAFETY: a query, then a reset, of this child's own copy of the handlers (no
        // CLONE_SIGHAND): the parent's are unchanged. glibc's own signals are refused
        // (EINVAL) and left alone.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut action) == 0
                && action.sa_sigaction != libc::SIG_DFL
                && action.sa_sigaction != libc::SIG_IGN
            {
                action.sa_sigaction = libc::SIG_DFL;
                action.sa_flags = 0;
                libc::sigaction(signal, &action, std::ptr::null_mut());
            }
        }
    }
    let target = shared.target;
    child(shared.exec, target, target.counters, None, shared.report)
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

/// The child: its `counters` opened on itself (in the descriptor table it shares with
/// the parent, which it then leaves for a copy of its own), its own process group, the
/// standard streams, the working directory, the v1 cgroups (and the cgroup2 one through
/// `v2_procs` when forked), then the exec. Async-signal-safe system calls only, on
/// memory prepared before the clone (it must run only in the child of [`start`]'s clone
/// or fork); a failure writes its step and errno to `report` and exits 127.
fn child(
    exec: &Exec,
    target: &Target<'_>,
    counters: &[OwnCounter],
    v2_procs: Option<RawFd>,
    report: RawFd,
) -> ! {
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
    if !counters.is_empty() {
        for counter in counters {
            // SAFETY: a perf_event_attr the parent keeps alive until this child has
            // execed; pid 0 is this child, on any cpu, in no group.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_perf_event_open,
                    counter.attr,
                    0 as libc::pid_t,
                    -1 as libc::c_int,
                    -1 as libc::c_int,
                    PERF_FLAG_FD_CLOEXEC,
                )
            };
            let fd = if fd < 0 {
                // SAFETY: reading this thread's errno.
                -unsafe { *libc::__errno_location() }
            } else {
                fd as i32
            };
            counter.fd.store(fd, Ordering::Release);
        }
        // SAFETY: a plain system call: from here on the descriptor changes below are
        // this child's own.
        if unsafe { libc::unshare(libc::CLONE_FILES) } != 0 {
            fail(7);
        }
    }
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
    /// the `way` given (or a later one where the kernel refuses it), and waits for its
    /// exit code.
    fn run(argv: &[&str], workdir: Option<&Path>, way: Way) -> io::Result<i32> {
        let dir = tempfile::tempdir().unwrap();
        let out = std::fs::File::create(dir.path().join("out")).unwrap();
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let exec = Exec::new(&argv, workdir.unwrap_or(dir.path()))?;
        let target = Target {
            v2_dir: None,
            v1: &[],
            stdio: [out.as_raw_fd(), out.as_raw_fd(), out.as_raw_fd()],
            counters: &[],
        };
        let cloned = start_as(&exec, &target, way)?;
        cloned.exec()?;
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(cloned.pid, &mut status, 0) };
        Ok(libc::WEXITSTATUS(status))
    }

    #[test]
    fn every_way_starts_execs_and_reports_what_failed() {
        for way in [Way::SharedMemory, Way::Clone3, Way::Fork] {
            assert_eq!(run(&["sh", "-c", "exit 3"], None, way).unwrap(), 3);
            let missing = run(&["no-such-program-here"], None, way).unwrap_err();
            assert_eq!(missing.kind(), io::ErrorKind::NotFound, "{missing}");
            let gone = Path::new("/nonexistent/isolab-workdir");
            let chdir = run(&["true"], Some(gone), way).unwrap_err();
            assert!(
                chdir.to_string().starts_with("chdir in the child: "),
                "{chdir}"
            );
        }
    }

    /// On x86_64 the first way is taken for real, not refused and left to the next: a
    /// child sharing this address space runs, execs and writes its output.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_shared_memory_way_is_taken_here() {
        let dir = tempfile::tempdir().unwrap();
        let out = std::fs::File::create(dir.path().join("out")).unwrap();
        let exec = Exec::new(
            &["sh".into(), "-c".into(), "echo shared".into()],
            dir.path(),
        )
        .unwrap();
        let target = Target {
            v2_dir: None,
            v1: &[],
            stdio: [out.as_raw_fd(), out.as_raw_fd(), out.as_raw_fd()],
            counters: &[],
        };
        let (report_r, report_w) = blocking_pipe().unwrap();
        let mut pidfd: libc::c_int = -1;
        let args = CloneArgs {
            flags: libc::CLONE_PIDFD as u64,
            pidfd: std::ptr::from_mut(&mut pidfd) as u64,
            exit_signal: libc::SIGCHLD as u64,
            ..CloneArgs::default()
        };
        let pid = clone_sharing_memory(&exec, &target, &args, report_w.as_raw_fd()).unwrap();
        drop(report_w);
        let cloned = Cloned {
            pid,
            // SAFETY: CLONE_PIDFD stored a new descriptor that nothing else owns.
            pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
            report: report_r,
        };
        cloned.exec().unwrap();
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), 0);
        let said = std::fs::read_to_string(dir.path().join("out")).unwrap();
        assert_eq!(said, "shared\n");
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
