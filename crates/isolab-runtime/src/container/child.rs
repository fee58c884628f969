//! The container side: its init (PID 1 of the new pid namespace) and the command
//! (PID 2). Everything here runs in a raw `clone3` copy of the caller, possibly
//! multi-threaded, so it allocates nothing: it only walks the pre-built [`Plan`]
//! and reports progress and failures as fixed-size [`Record`]s on a pipe.

use std::os::fd::RawFd;

use super::plan::{ContainerHooks, ExecPlan, HookExec, Op, Plan};
use crate::sys::{self, Errno};
use crate::trace::Phase;

/// Record kind: a phase timestamp (`code` = [`Phase`] code).
pub(crate) const KIND_PHASE: u32 = 1;
/// Record kind: setup step `code` of the plan failed with `errno`.
pub(crate) const KIND_SETUP: u32 = 2;
/// Record kind: a step of the command's process failed (`code` = [`ExecStep`]).
pub(crate) const KIND_EXEC: u32 = 3;
/// Record kind: the child joined its v1 cgroups (`errno` 0), or writing itself to
/// the `code`-th `tasks` file of [`ChildFds::cgroup`] failed with `errno`. The
/// first record, always sent, before the go.
pub(crate) const KIND_JOINED: u32 = 4;

/// Record kind: hook `code` did not succeed (the `createContainer` hooks numbered
/// from 0, the `startContainer` hooks after them); `errno` holds its wait status, or
/// a negative errno when it could not be run (`-ETIMEDOUT`: killed at its timeout).
pub(crate) const KIND_HOOK: u32 = 5;
/// Record kind: the child made its mounts and waits (on the go pipe) for the
/// runtime's `prestart` and `createRuntime` hooks.
pub(crate) const KIND_HOOKS: u32 = 6;

/// What the container's process writes on the exec FIFO when a `startContainer` hook
/// failed, followed by the hook's number (one byte) and its [`KIND_HOOK`] status (4
/// bytes, native order), instead of the `0` that means "started".
pub(crate) const FIFO_HOOK_FAILED: u8 = b'H';

/// The byte the parent sends when the child may start its setup.
pub(crate) const GO: u8 = b'G';

/// Steps of the command's process before `execve`, for [`KIND_EXEC`] records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum ExecStep {
    Fork = 0,
    Stdio = 1,
    Chdir = 2,
    Security = 3,
    Execve = 4,
    Rlimit = 5,
    User = 6,
}

impl ExecStep {
    pub(crate) fn from_code(code: u32) -> Option<ExecStep> {
        [
            ExecStep::Fork,
            ExecStep::Stdio,
            ExecStep::Chdir,
            ExecStep::Security,
            ExecStep::Execve,
            ExecStep::Rlimit,
            ExecStep::User,
        ]
        .into_iter()
        .find(|s| *s as u32 == code)
    }
}

/// One message from the child: 24 bytes, written atomically (less than `PIPE_BUF`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Record {
    pub kind: u32,
    pub code: u32,
    pub errno: i32,
    /// `CLOCK_MONOTONIC` nanoseconds.
    pub ts: u64,
}

impl Record {
    pub(crate) const SIZE: usize = 24;

    pub(crate) fn encode(&self) -> [u8; Record::SIZE] {
        let mut b = [0u8; Record::SIZE];
        b[0..4].copy_from_slice(&self.kind.to_ne_bytes());
        b[4..8].copy_from_slice(&self.code.to_ne_bytes());
        b[8..12].copy_from_slice(&self.errno.to_ne_bytes());
        b[16..24].copy_from_slice(&self.ts.to_ne_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8; Record::SIZE]) -> Record {
        let u32_at = |i: usize| u32::from_ne_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[16..24]);
        Record {
            kind: u32_at(0),
            code: u32_at(4),
            errno: u32_at(8) as i32,
            ts: u64::from_ne_bytes(ts),
        }
    }
}

pub(crate) fn report(fd: RawFd, kind: u32, code: u32, errno: i32) {
    let record = Record {
        kind,
        code,
        errno,
        ts: sys::monotonic_ns(),
    };
    // Nothing to do if the parent is gone: the death signal ends us anyway.
    let _ = sys::write_all(fd, &record.encode());
}

fn exit(code: i32) -> ! {
    // SAFETY: _exit ends the process without running the parent's atexit handlers
    // or destructors, which belong to the parent's copy of the address space.
    unsafe { libc::_exit(code) }
}

/// Descriptors the child keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ChildFds {
    /// Read end of the go pipe.
    pub go: RawFd,
    /// Write end of the report pipe (close-on-exec).
    pub report: RawFd,
    /// `tasks` of the container's devices cgroup, opened for writing
    /// (close-on-exec), for [`Op::JoinDevicesCgroup`]; `-1` when there is none.
    pub devices: RawFd,
    /// `create` only: an `O_PATH` descriptor of the exec FIFO (close-on-exec), `-1`
    /// otherwise; reopened for writing through `fifo_path`.
    pub fifo: RawFd,
    /// `/proc/self/fd/<fifo>`, NUL-terminated (built by the parent: the child
    /// formats nothing).
    pub fifo_path: [u8; 32],
    /// Namespaces to join ([`Op::JoinNs`]), close-on-exec; `-1` for unused slots.
    pub ns: [RawFd; MAX_JOINED],
    /// The container cgroup's `tasks` file in each v1 hierarchy, opened for writing
    /// (close-on-exec), in order; `-1` for unused slots. (The cgroup2 part is joined
    /// by `clone3` itself, `CLONE_INTO_CGROUP`.)
    pub cgroup: [RawFd; MAX_CGROUP_FILES],
}

/// How many v1 hierarchies the container's cgroup may span (the kernel has 14 v1
/// controllers).
pub(crate) const MAX_CGROUP_FILES: usize = 16;

/// How many namespaces a container can join by path (mount, uts, ipc, network,
/// cgroup).
pub(crate) const MAX_JOINED: usize = 5;

/// Closes every descriptor from 3 up except those in `keep` (negative entries are
/// ignored), so the container holds no pipe or file of the caller (another
/// container's report pipe would otherwise never see EOF).
fn close_all_except(keep: [RawFd; 4 + MAX_JOINED]) {
    let mut keep = keep;
    keep.sort_unstable();
    let mut from: libc::c_uint = 3;
    for fd in keep {
        if fd < 0 {
            continue;
        }
        let fd = fd as libc::c_uint;
        if fd > from {
            // SAFETY: close_range only closes descriptors; none of them is used by
            // this process afterwards.
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0) };
        }
        if fd + 1 > from {
            from = fd + 1;
        }
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, from, libc::c_uint::MAX, 0) };
}

/// Entry point of the cloned child: waits for the parent's go, runs the setup
/// steps, then becomes the container's init. Never returns.
pub(crate) fn main(plan: &Plan, fds: ChildFds) -> ! {
    // Into the container's cgroups first: each write of "0" to a v1 `tasks` file
    // moves this single-threaded process without the kernel's threadgroup lock (a
    // write of a pid to `cgroup.procs` takes it, and may wait for an RCU grace
    // period). The parent waits for this record before it lets the setup go on.
    for (i, fd) in fds.cgroup.iter().enumerate() {
        if *fd < 0 {
            continue;
        }
        if let Err(Errno(errno)) = sys::write_all(*fd, b"0") {
            report(fds.report, KIND_JOINED, i as u32, errno);
            exit(1);
        }
    }
    report(fds.report, KIND_JOINED, 0, 0);
    let [n0, n1, n2, n3, n4] = fds.ns;
    close_all_except([
        fds.go,
        fds.report,
        fds.devices,
        fds.fifo,
        n0,
        n1,
        n2,
        n3,
        n4,
    ]);
    // Die with the runtime: a SIGKILLed runtime must not leave a container behind
    // (`create` lifts this once the container is set up).
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    let mut go = [0u8; 1];
    // EOF (the parent died or gave up before its go) ends the child quietly.
    match sys::read_exact(fds.go, &mut go) {
        Ok(true) if go[0] == GO => {}
        _ => exit(1),
    }
    // SAFETY: PR_SET_NAME reads a NUL-terminated name of at most 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"isolab-init".as_ptr()) };
    reset_signals();
    for (i, op) in plan.ops.iter().enumerate() {
        if let Err(Errno(errno)) = run_op(op, plan, &fds) {
            report(fds.report, KIND_SETUP, i as u32, errno);
            exit(1);
        }
    }
    // Kept open until here for the runtime's hooks (Op::RuntimeHooks).
    sys::close(fds.go);
    if fds.devices >= 0 {
        sys::close(fds.devices);
    }
    if fds.fifo >= 0 {
        exec_after_start(&plan.exec, &fds)
    }
    if plan.direct {
        // The command is PID 1: the report pipe closes at its execve.
        run_command(&plan.exec, fds.report)
    }
    init(&plan.exec, fds.report)
}

/// Writes a fixed message to standard error (after `create` returned there is no
/// report pipe left: the caller sees the container's own output).
fn say(message: &[u8]) {
    let _ = sys::write_all(2, message);
}

/// `create`: this process is the container's PID 1 and becomes the command. Applies
/// stdio, working directory and security, reports [`Phase::Created`] (the runtime
/// returns), waits until `start` opens the exec FIFO, then executes the command.
fn exec_after_start(exec: &ExecPlan, fds: &ChildFds) -> ! {
    let report_fd = fds.report;
    prepare_command(exec, report_fd);
    // From here on the container outlives the runtime. Were the runtime to die before
    // recording the container as created, gc removes its cgroup and so this process.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, 0 as libc::c_ulong) };
    report(report_fd, KIND_PHASE, Phase::Created.code(), 0);
    sys::close(report_fd);
    // Blocks until `start` opens the FIFO for reading. Through /proc/self/fd: the
    // FIFO's path lies outside the new root; the O_PATH descriptor reaches it.
    // SAFETY: fifo_path is NUL-terminated (built by the parent).
    let fifo = unsafe {
        libc::open(
            fds.fifo_path.as_ptr().cast(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        )
    };
    if fifo < 0 {
        say(b"isolab-runtime: the exec FIFO could not be opened; not started\n");
        exit(1);
    }
    // `start` was called: the startContainer hooks, then the go for `start` (it
    // returns once it read it, and reports a failed hook from what follows `H`).
    if let Err((n, status)) = run_hooks(&exec.start_container) {
        let mut failed = [0u8; 6];
        failed[0] = FIFO_HOOK_FAILED;
        failed[1] = n.min(255) as u8;
        failed[2..].copy_from_slice(&status.to_ne_bytes());
        let _ = sys::write_all(fifo, &failed);
        say(b"isolab-runtime: a startContainer hook failed; not started\n");
        exit(1);
    }
    if sys::write_all(fifo, b"0").is_err() {
        say(b"isolab-runtime: the exec FIFO could not be written; not started\n");
        exit(1);
    }
    // `fifo` stays open until execve closes it (close-on-exec): `start` waits for that
    // before it returns and runs the poststart hooks, which the spec puts after the
    // command is executed.
    sys::close(fds.fifo);
    let (errno, code) = execute(exec);
    say(match errno {
        libc::ENOENT => b"isolab-runtime: the command was not found in the container\n",
        libc::EACCES => b"isolab-runtime: the command is not executable (permission denied)\n",
        _ => b"isolab-runtime: execve of the command failed\n",
    });
    exit(code)
}

/// Default dispositions for every signal (the caller may ignore SIGPIPE, as Rust
/// programs do), so the command starts with the state a shell would give it.
fn reset_signals() {
    for sig in 1..libc::SIGRTMAX() {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: installing SIG_DFL is always valid; failures (for signals glibc
        // reserves) are harmless.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

fn run_op(op: &Op, plan: &Plan, fds: &ChildFds) -> Result<(), Errno> {
    let report_fd = fds.report;
    match op {
        Op::RuntimeHooks => {
            report(report_fd, KIND_HOOKS, 0, 0);
            let mut go = [0u8; 1];
            match sys::read_exact(fds.go, &mut go) {
                Ok(true) if go[0] == GO => Ok(()),
                // The parent reported the failed hook; nothing more to say.
                _ => exit(1),
            }
        }
        Op::ContainerHook { index } => {
            let hooks = &plan.create_container;
            let Some(hook) = hooks.hooks.get(*index) else {
                return Err(Errno(libc::EINVAL));
            };
            if let Err(status) = run_hook(hook, hooks) {
                report(report_fd, KIND_HOOK, hooks.first + *index as u32, status);
                exit(1);
            }
            Ok(())
        }
        Op::BecomeRoot => {
            // SAFETY: plain system calls with integer arguments.
            unsafe {
                if libc::setgroups(0, std::ptr::null()) < 0 && Errno::last().0 != libc::EPERM {
                    return Err(Errno::last());
                }
                if libc::setresgid(0, 0, 0) < 0 || libc::setresuid(0, 0, 0) < 0 {
                    return Err(Errno::last());
                }
            }
            Ok(())
        }
        Op::JoinDevicesCgroup => {
            if fds.devices < 0 {
                return Err(Errno(libc::EBADF));
            }
            sys::write_all(fds.devices, b"0")
        }
        Op::UnshareCgroupNs => {
            // SAFETY: unshare with a constant flag.
            if unsafe { libc::unshare(libc::CLONE_NEWCGROUP) } < 0 {
                return Err(Errno::last());
            }
            Ok(())
        }
        Op::Mount {
            source,
            target,
            fstype,
            flags,
            data,
        } => sys::mount(
            source.as_deref(),
            target,
            fstype.as_deref(),
            *flags,
            data.as_deref(),
        ),
        Op::Mkdir { path, mode } => sys::mkdir_exist_ok(path, *mode),
        Op::Device {
            path,
            host,
            mode,
            dev,
        } => match sys::mknod(path, *mode, *dev) {
            Err(Errno(libc::EPERM)) => {
                sys::touch(path)?;
                sys::mount(Some(host), path, None, libc::MS_BIND, None)
            }
            // mknod applied the umask (0644 for 0666): chmod sets the mode asked for,
            // so that a program running as another user (PostgreSQL's `postgres`) can
            // write /dev/null.
            // SAFETY: a NUL-terminated path.
            Ok(()) if unsafe { libc::chmod(path.as_ptr(), *mode & 0o7777) } < 0 => {
                Err(Errno::last())
            }
            other => other,
        },
        Op::Symlink { target, link } => sys::symlink_exist_ok(target, link),
        Op::Chdir { path } => sys::chdir(path),
        Op::PivotHere => {
            sys::pivot_root(c".", c".")?;
            sys::umount2(c".", libc::MNT_DETACH)
        }
        Op::ChrootHere => sys::chroot(c"."),
        Op::RemountReadOnly { path } => {
            let flags = sys::mount_flags(path)?;
            sys::mount(
                None,
                path,
                None,
                libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                None,
            )
        }
        Op::Mask { path } => match sys::file_kind(path)? {
            None => Ok(()),
            Some(libc::S_IFDIR) => sys::mount(
                Some(c"tmpfs"),
                path,
                Some(c"tmpfs"),
                libc::MS_RDONLY,
                Some(c"size=0"),
            ),
            Some(_) => sys::mount(Some(c"/dev/null"), path, None, libc::MS_BIND, None),
        },
        Op::ReadOnly { path } => match sys::file_kind(path)? {
            None => Ok(()),
            Some(_) => {
                sys::mount(Some(path), path, None, libc::MS_BIND | libc::MS_REC, None)?;
                let flags = sys::mount_flags(path)?;
                sys::mount(
                    None,
                    path,
                    None,
                    libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | flags,
                    None,
                )
            }
        },
        Op::BindTarget {
            components,
            dir,
            create,
            ..
        } => {
            for (i, path) in components.iter().enumerate() {
                let last = i + 1 == components.len();
                match sys::file_kind(path)? {
                    Some(libc::S_IFLNK) => return Err(Errno(libc::ELOOP)),
                    Some(_) => {}
                    None if !*create => return Err(Errno(libc::ENOENT)),
                    None if last && !*dir => sys::create_file(path)?,
                    None => sys::mkdir_exist_ok(path, 0o755)?,
                }
            }
            Ok(())
        }
        Op::Hostname { name } => sys::sethostname(name),
        Op::LoopbackUp => sys::loopback_up(),
        Op::Phase(phase) => {
            report(report_fd, KIND_PHASE, phase.code(), 0);
            Ok(())
        }
        Op::JoinNs { slot, nstype } => {
            let fd = fds.ns.get(*slot).copied().unwrap_or(-1);
            // SAFETY: setns on a descriptor the parent opened.
            if unsafe { libc::setns(fd, *nstype) } < 0 {
                return Err(Errno::last());
            }
            sys::close(fd);
            Ok(())
        }
        Op::WriteFile { path, value } => sys::write_file(path, value.as_bytes()),
        Op::Node {
            path,
            mode,
            dev,
            uid,
            gid,
        } => {
            // SAFETY: a NUL-terminated path; unlink of what is there (even a link).
            unsafe { libc::unlink(path.as_ptr()) };
            sys::mknod(path, *mode, *dev)?;
            // SAFETY: as above; mknod applied the umask, chmod sets the mode asked for.
            if unsafe {
                libc::chmod(path.as_ptr(), *mode & 0o7777) < 0
                    || libc::chown(path.as_ptr(), *uid, *gid) < 0
            } {
                return Err(Errno::last());
            }
            Ok(())
        }
    }
}

/// Signals init forwards to the command.
const FORWARDED: [libc::c_int; 8] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGWINCH,
    libc::SIGCONT,
];

/// The container's init: forks the command, forwards signals to it, reaps every
/// zombie, and exits with the command's status (code, or 128 + signal).
fn init(exec: &ExecPlan, report_fd: RawFd) -> ! {
    // SAFETY: an all-zero sigset_t is valid storage for sigfillset/sigemptyset.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `all` is valid storage; blocking signals is how init receives them
    // synchronously (a blocked signal is never dropped, even for a pid-namespace init).
    unsafe {
        libc::sigfillset(&mut all);
        libc::sigprocmask(libc::SIG_SETMASK, &all, std::ptr::null_mut());
    }
    // SAFETY: fork in a single-threaded process (this child); the child only makes
    // system calls on pre-built data until execve.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        report(report_fd, KIND_EXEC, ExecStep::Fork as u32, Errno::last().0);
        exit(1);
    }
    if pid == 0 {
        run_command(exec, report_fd);
    }
    // The command's copy of the report pipe closes at its execve: that EOF is how the
    // parent learns the exec happened.
    sys::close(report_fd);
    loop {
        // SAFETY: `all` is a valid set; a null siginfo pointer is allowed.
        let sig = unsafe { libc::sigwaitinfo(&all, std::ptr::null_mut()) };
        if sig < 0 {
            continue;
        }
        if sig == libc::SIGCHLD {
            loop {
                let mut status = 0;
                // SAFETY: status is valid storage; WNOHANG never blocks.
                let reaped = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
                if reaped <= 0 {
                    break;
                }
                if reaped == pid {
                    exit(status_code(status));
                }
            }
        } else if FORWARDED.contains(&sig) {
            // SAFETY: kill with integer arguments.
            unsafe { libc::kill(pid, sig) };
        }
    }
}

/// Exit code for a `waitpid` status: the code, or 128 + the signal.
pub(crate) fn status_code(status: libc::c_int) -> i32 {
    if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else if libc::WIFSIGNALED(status) {
        128 + libc::WTERMSIG(status)
    } else {
        255
    }
}

fn fail(report_fd: RawFd, step: ExecStep, errno: i32, code: i32) -> ! {
    report(report_fd, KIND_EXEC, step as u32, errno);
    exit(code)
}

/// The command's process (PID 2, or an `exec`'d process): stdio, working directory,
/// security, the `startContainer` hooks, execve.
pub(crate) fn run_command(exec: &ExecPlan, report_fd: RawFd) -> ! {
    prepare_command(exec, report_fd);
    if let Err((n, status)) = run_hooks(&exec.start_container) {
        report(report_fd, KIND_HOOK, exec.start_container.first + n, status);
        exit(1);
    }
    let (errno, code) = execute(exec);
    fail(report_fd, ExecStep::Execve, errno, code)
}

/// Runs `hooks` in order; the first that does not succeed: its number among them and
/// its [`KIND_HOOK`] status.
fn run_hooks(hooks: &ContainerHooks) -> Result<(), (u32, i32)> {
    for (n, hook) in hooks.hooks.iter().enumerate() {
        run_hook(hook, hooks).map_err(|status| (n as u32, status))?;
    }
    Ok(())
}

/// Runs one hook in this process's namespaces: forks, gives the child the state JSON
/// (with this process's pid, as its pid namespace shows it) on a pipe as standard
/// input, executes the hook there and waits for it, at most its timeout (then it is
/// killed). Allocates nothing. `Err`: the [`KIND_HOOK`] status.
fn run_hook(hook: &HookExec, hooks: &ContainerHooks) -> Result<(), i32> {
    let mut pipe = [-1; 2];
    // SAFETY: pipe2 writes two descriptors into the array.
    if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } < 0 {
        return Err(-Errno::last().0);
    }
    let [read_end, write_end] = pipe;
    // SAFETY: fork in a single-threaded process; the child only makes system calls
    // on pre-built data until execve.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let e = Errno::last().0;
        sys::close(read_end);
        sys::close(write_end);
        return Err(-e);
    }
    if pid == 0 {
        // SAFETY: dup2 and fcntl on descriptors of this process; SIG_DFL is valid
        // (an ignored SIGPIPE would be inherited through execve); execve with
        // NUL-terminated strings and null-terminated arrays built by the parent.
        unsafe {
            if read_end == 0 {
                libc::fcntl(0, libc::F_SETFD, 0);
            } else {
                libc::dup2(read_end, 0);
            }
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::execve(hook.path.as_ptr(), hook.argv.as_ptr(), hook.envp.as_ptr());
        }
        exit(127);
    }
    sys::close(read_end);
    // A hook that does not read its input is fine: EPIPE instead of SIGPIPE.
    // SAFETY: installing SIG_IGN, then the previous disposition again.
    let previous = unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    let mut digits = [0u8; 20];
    // SAFETY: getpid cannot fail.
    let own = decimal(unsafe { libc::getpid() } as u64, &mut digits);
    let _ = sys::write_all(write_end, &hooks.state_head)
        .and_then(|()| sys::write_all(write_end, own))
        .and_then(|()| sys::write_all(write_end, &hooks.state_tail));
    sys::close(write_end);
    // SAFETY: as above.
    unsafe { libc::signal(libc::SIGPIPE, previous) };
    wait_hook(pid, hook.timeout_ns)
}

/// Waits for hook process `pid`, killing it after `timeout_ns`.
fn wait_hook(pid: libc::pid_t, timeout_ns: Option<u64>) -> Result<(), i32> {
    let deadline = timeout_ns.map(|t| sys::monotonic_ns().saturating_add(t));
    loop {
        let mut status = 0;
        let flags = if deadline.is_some() { libc::WNOHANG } else { 0 };
        // SAFETY: waiting for our own child; status is valid storage.
        let r = unsafe { libc::waitpid(pid, &mut status, flags) };
        if r == pid {
            return if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else {
                Err(status)
            };
        }
        if r < 0 && Errno::last().0 != libc::EINTR {
            return Err(-Errno::last().0);
        }
        if deadline.is_some_and(|d| sys::monotonic_ns() >= d) {
            // SAFETY: kill and reap our own child.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(-libc::ETIMEDOUT);
        }
        let pause = libc::timespec {
            tv_sec: 0,
            tv_nsec: 2_000_000,
        };
        // SAFETY: nanosleep reads a valid timespec; a null remainder is allowed.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

/// `n` in decimal, in `buf` (allocation-free formatting): the digits' slice.
fn decimal(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[i..];
        }
    }
}

/// Stdio, working directory and security of the command's process; a failure is
/// reported and ends the process.
fn prepare_command(exec: &ExecPlan, report_fd: RawFd) {
    // SAFETY: an all-zero sigset_t is valid; unblocking everything restores the
    // usual state for the command.
    unsafe {
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    }
    if exec.stdio_null {
        // SAFETY: a constant NUL-terminated path; dup2 on valid descriptors.
        let ok = unsafe {
            let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            fd >= 0
                && libc::dup2(fd, 0) >= 0
                && libc::dup2(fd, 1) >= 0
                && libc::dup2(fd, 2) >= 0
                && (fd <= 2 || libc::close(fd) == 0)
        };
        if !ok {
            fail(report_fd, ExecStep::Stdio, Errno::last().0, 1);
        }
    }
    for &(resource, soft, hard) in &exec.rlimits {
        let limit = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: setrlimit with a valid struct; the resource number came from a table.
        if unsafe { libc::setrlimit(resource as _, &limit) } < 0 {
            fail(report_fd, ExecStep::Rlimit, Errno::last().0, 1);
        }
    }
    if let Some(user) = &exec.user {
        if let Err(Errno(e)) = switch_user(user) {
            fail(report_fd, ExecStep::User, e, 1);
        }
    }
    if let Some(mask) = exec.umask {
        // SAFETY: umask cannot fail.
        unsafe { libc::umask(mask as libc::mode_t) };
    }
    if let Err(Errno(e)) = sys::chdir(&exec.cwd) {
        fail(report_fd, ExecStep::Chdir, e, 1);
    }
    report(report_fd, KIND_PHASE, Phase::Seccomp.code(), 0);
    // Capabilities, no_new_privs and the seccomp filter, last before execve; the
    // prepared settings apply without allocating.
    if let Err(e) = exec.security.apply() {
        let errno = match &e {
            crate::security::SecurityError::Apply { source, .. } => {
                source.raw_os_error().unwrap_or(libc::EPERM)
            }
            _ => libc::EINVAL,
        };
        fail(report_fd, ExecStep::Security, errno, 1);
    }
}

/// Supplementary groups, gid, then uid. A non-zero uid keeps the permitted
/// capabilities (`PR_SET_KEEPCAPS`) and raises them to effective again, so that the
/// security settings that follow can still drop the bounding set and set the
/// capabilities the configuration keeps.
fn switch_user(user: &super::plan::ExecUser) -> Result<(), Errno> {
    use crate::security::SecuritySyscalls;
    // SAFETY: plain system calls on a pre-built group list.
    unsafe {
        // Without root, setgroups is denied in the user namespace: no supplementary groups
        // is what the process has anyway.
        if libc::setgroups(user.groups.len(), user.groups.as_ptr()) < 0
            && !(user.groups.is_empty() && Errno::last().0 == libc::EPERM)
        {
            return Err(Errno::last());
        }
        if libc::setresgid(user.gid, user.gid, user.gid) < 0 {
            return Err(Errno::last());
        }
        if user.uid == 0 {
            return Ok(());
        }
        if libc::prctl(libc::PR_SET_KEEPCAPS, 1 as libc::c_ulong) < 0
            || libc::setresuid(user.uid, user.uid, user.uid) < 0
        {
            return Err(Errno::last());
        }
    }
    let mut linux = crate::security::LinuxSecurity;
    let errno = |e: std::io::Error| Errno(e.raw_os_error().unwrap_or(libc::EPERM));
    let permitted = linux.read_permitted().map_err(errno)?;
    linux
        .set_caps(
            permitted,
            permitted,
            crate::security::CapabilitySet::empty(),
        )
        .map_err(errno)
}

/// Tries `execve` of each candidate path; returns only on failure, with the most
/// telling errno and the exit code a shell would use (127 not found, 126 otherwise).
fn execute(exec: &ExecPlan) -> (i32, i32) {
    let mut first_error = libc::ENOENT;
    for candidate in &exec.candidates {
        // SAFETY: the candidate, argv and envp are NUL-terminated strings and
        // null-terminated pointer arrays built in the parent before the clone.
        unsafe { libc::execve(candidate.as_ptr(), exec.argv.as_ptr(), exec.envp.as_ptr()) };
        let e = Errno::last().0;
        if e != libc::ENOENT && e != libc::ENOTDIR && first_error == libc::ENOENT {
            first_error = e;
        }
    }
    let code = if first_error == libc::ENOENT {
        127
    } else {
        126
    };
    (first_error, code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let r = Record {
            kind: KIND_SETUP,
            code: 17,
            errno: libc::EPERM,
            ts: 123_456_789,
        };
        assert_eq!(Record::decode(&r.encode()), r);
        assert_eq!(ExecStep::from_code(4), Some(ExecStep::Execve));
        assert_eq!(ExecStep::from_code(9), None);
    }

    #[test]
    fn decimals() {
        let mut buf = [0u8; 20];
        assert_eq!(decimal(0, &mut buf), b"0");
        assert_eq!(decimal(4_194_304, &mut buf), b"4194304");
        assert_eq!(decimal(u64::MAX, &mut buf), b"18446744073709551615");
    }

    #[test]
    fn status_codes() {
        assert_eq!(status_code(3 << 8), 3);
        assert_eq!(status_code(libc::SIGKILL), 137);
        assert_eq!(status_code(libc::SIGTERM), 143);
    }
}
