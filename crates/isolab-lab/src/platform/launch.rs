//! The launcher seam: everything the platforms and the instance supervisor do with
//! processes. A [`Launcher`] starts an argv in a cgroup with its output logged in
//! the working directory; the [`Process`] it returns is waited for (with a deadline
//! and the interrupt), signalled and reaped with its resource usage.
//!
//! [`RealLauncher`] spawns real processes (see `process.rs`: attach between fork
//! and exec, perf counters armed before exec, pidfd waits). A test double scripts
//! them instead (hyperfine's mock executor is the model), so that everything above
//! this seam runs without root and without waiting for real work.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use isolab_cgroups::Cgroup;

use super::process::{Child, Spawn};
use super::{ExitKind, Interrupt, PlatformError};

pub use super::process::{PerfCounts, Waited};

/// One command to start.
#[derive(Debug, Clone, Copy)]
pub struct Launch<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// Its working directory, where its logs go too.
    pub workdir: &'a Path,
    /// Names its logs: `.isolab-{log}.stdout` and `.isolab-{log}.stderr` in
    /// `workdir` (see [`log_path`]).
    pub log: &'a str,
    /// The cgroup it starts in (before its first instruction), if any.
    pub cgroup: Option<&'a Cgroup>,
    /// Whether software perf counters follow it and its children.
    pub count: bool,
}

/// Starts processes. The real one is [`RealLauncher`]; tests use a scripted one.
pub trait Launcher: Send + Sync + fmt::Debug {
    /// Starts `launch`, or says why it could not (a missing program is
    /// [`PlatformError::Spawn`], an unwritable log [`PlatformError::Io`]).
    fn start(&self, launch: Launch<'_>) -> Result<Box<dyn Process>, PlatformError>;
}

/// A started process (the leader of its own process group).
pub trait Process: Send + Sync {
    /// When it started.
    fn started(&self) -> Instant;
    /// Waits for exit (reaping it), the interrupt, or the deadline, whichever
    /// comes first.
    fn wait(&self, interrupt: &Interrupt, deadline: Option<Instant>) -> io::Result<Waited>;
    /// Reaps the exited or killed process: its status and resource usage (of it
    /// and its reaped descendants).
    fn reap(&self) -> io::Result<(ExitKind, libc::rusage)>;
    /// Sends `signal` to its process group.
    fn signal_group(&self, signal: libc::c_int);
    /// Whether it is still running (has not exited), without reaping it.
    fn is_running(&self) -> bool;
    /// Its perf counts so far, or why there are none.
    fn perf(&self) -> Result<PerfCounts, String>;
}

/// The path of the log `ext` (`stdout` or `stderr`) of the command logged as `log`.
pub fn log_path(workdir: &Path, log: &str, ext: &str) -> PathBuf {
    workdir.join(format!(".isolab-{log}.{ext}"))
}

/// Spawns real processes with `process.rs`.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealLauncher;

impl RealLauncher {
    /// The real launcher, shared.
    pub fn shared() -> Arc<dyn Launcher> {
        Arc::new(RealLauncher)
    }
}

impl Launcher for RealLauncher {
    fn start(&self, launch: Launch<'_>) -> Result<Box<dyn Process>, PlatformError> {
        let (out, err) = log_files(launch.workdir, launch.log)?;
        // On cgroup v2 the command waits in the cgroup's process leaf, so that a container
        // runtime it starts can nest the container's cgroup in this one.
        let leaf = launch
            .cgroup
            .map(Cgroup::process_leaf)
            .transpose()?
            .flatten();
        let cgroup = leaf
            .as_ref()
            .or(launch.cgroup)
            .map(Cgroup::clone_target)
            .transpose()?;
        let child = Spawn {
            argv: launch.argv,
            workdir: launch.workdir,
            stdout: out,
            stderr: err,
            cgroup,
            count: launch.count,
        }
        .start()
        .map_err(|source| PlatformError::Spawn {
            program: launch.argv.first().cloned().unwrap_or_default(),
            source,
        })?;
        Ok(Box::new(child))
    }
}

/// Space reserved for each log before the command starts ([`reserve`]).
pub const LOG_RESERVE: i64 = 256 * 1024;

fn log_files(workdir: &Path, log: &str) -> Result<(File, File), PlatformError> {
    let open = |ext: &str| {
        let path = log_path(workdir, log, ext);
        let file = File::create(&path).map_err(|source| PlatformError::Io {
            action: "cannot create log file",
            path,
            source,
        })?;
        reserve(&file, LOG_RESERVE);
        Ok::<_, PlatformError>(file)
    };
    Ok((open("stdout")?, open("stderr")?))
}

/// Reserves `bytes` of disk for `file` without changing its size
/// (`fallocate(FALLOC_FL_KEEP_SIZE)`), so that a command that fills the file system
/// it runs in (a storage level's device: fio until ENOSPC) can still write why it
/// failed: the log lives in the working directory, on that file system. Best effort:
/// a file system without `fallocate` keeps the log unreserved.
pub fn reserve(file: &File, bytes: i64) {
    use std::os::fd::AsRawFd;
    // SAFETY: `fallocate` on a file descriptor we own, with no pointers; an error
    // (EOPNOTSUPP, ENOSPC) leaves the file as it was.
    let _ = unsafe { libc::fallocate(file.as_raw_fd(), libc::FALLOC_FL_KEEP_SIZE, 0, bytes) };
}

impl Process for Child {
    fn started(&self) -> Instant {
        self.started
    }

    fn wait(&self, interrupt: &Interrupt, deadline: Option<Instant>) -> io::Result<Waited> {
        Child::wait(self, interrupt, deadline)
    }

    fn reap(&self) -> io::Result<(ExitKind, libc::rusage)> {
        Child::reap(self)
    }

    fn signal_group(&self, signal: libc::c_int) {
        Child::signal_group(self, signal);
    }

    fn is_running(&self) -> bool {
        let mut info: libc::siginfo_t = unsafe_zeroed_siginfo();
        // SAFETY: waitid with WNOHANG|WNOWAIT on our own child only inspects its state.
        let r = unsafe {
            libc::waitid(
                libc::P_PID,
                self.pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            )
        };
        // SAFETY: si_pid is valid to read after waitid filled (or zeroed) the struct.
        r == 0 && unsafe { info.si_pid() } == 0
    }

    fn perf(&self) -> Result<PerfCounts, String> {
        Child::perf(self)
    }
}

fn unsafe_zeroed_siginfo() -> libc::siginfo_t {
    // SAFETY: siginfo_t is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// How a waited-for command ended: its status, resource usage and end.
pub(crate) type Finished = (ExitKind, libc::rusage, Instant);

/// Waits for `process`; on interrupt or timeout gives it SIGTERM and `grace` to
/// end, then kills the whole cgroup and reaps. The outer error is a failure to
/// wait at all.
pub(crate) fn wait_or_kill(
    process: &dyn Process,
    cgroup: &Cgroup,
    interrupt: &Interrupt,
    deadline: Option<Instant>,
    grace: Duration,
) -> Result<Result<Finished, PlatformError>, PlatformError> {
    let waited = process
        .wait(interrupt, deadline)
        .map_err(|source| PlatformError::Io {
            action: "cannot wait for the command in",
            path: cgroup.rel().to_path_buf(),
            source,
        })?;
    match waited {
        Waited::Exited { exit, rusage, at } => Ok(Ok((exit, rusage, at))),
        other => {
            if !grace.is_zero() && ended_within(process, libc::SIGTERM, grace) {
                return Ok(Err(match other {
                    Waited::Interrupted => PlatformError::Interrupted,
                    _ => PlatformError::TimedOut(Duration::ZERO),
                }));
            }
            process.signal_group(libc::SIGKILL);
            cgroup.kill_all()?;
            let _ = process.reap();
            Ok(Err(match other {
                Waited::Interrupted => PlatformError::Interrupted,
                _ => PlatformError::TimedOut(Duration::ZERO),
            }))
        }
    }
}

/// Sends `signal` to the process group and waits up to `grace` for the process
/// to exit (and reaps it); whether it did.
pub(crate) fn ended_within(process: &dyn Process, signal: libc::c_int, grace: Duration) -> bool {
    process.signal_group(signal);
    // The caller's interrupt has fired already; wait on a fresh one.
    Interrupt::new().ok().is_some_and(|i| {
        matches!(
            process.wait(&i, Some(Instant::now() + grace)),
            Ok(Waited::Exited { .. })
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_log_has_its_space_reserved_and_stays_empty() {
        let dir = tempfile::tempdir().unwrap();
        let (out, err) = log_files(dir.path(), "command").unwrap();
        for (file, ext) in [(out, "stdout"), (err, "stderr")] {
            let meta = file.metadata().unwrap();
            assert_eq!(meta.len(), 0, "{ext}");
            // 512-byte blocks; a file system without fallocate reserves nothing.
            let reserved = meta.blocks() * 512;
            assert!(
                reserved == 0 || reserved >= LOG_RESERVE as u64,
                "{ext}: {reserved} bytes"
            );
            assert!(log_path(dir.path(), "command", ext).exists());
        }
    }
}
