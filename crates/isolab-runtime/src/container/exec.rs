//! [`exec`]: the OCI `exec` operation, another process in a running container.
//!
//! 1. The parent opens a pidfd of the container's process (checked against pid
//!    reuse), builds the process's exec plan (arguments, environment, user, rlimits,
//!    capabilities, the container's seccomp profile) and `clone3`s a helper.
//! 2. The parent moves the helper into the container's cgroups (and its devices
//!    cgroup), then sends go.
//! 3. The helper joins the container's namespaces at once (`setns` on the pidfd) and
//!    `clone3`s the process with `CLONE_PARENT`: it is the parent's child (so that
//!    `exec` can wait for it) and, being created after the `setns`, lives in the
//!    container's pid namespace. The helper reports its pid and exits.
//! 4. The process sets up as the container's own command does and executes; its
//!    report pipe closes at `execve`. Without `detach` the parent waits for it and
//!    returns its status; with `detach` it returns the pid, and the process outlives
//!    the runtime (its caller, a subreaper, reaps it).

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;

use isolab_cgroups::{Cgroup, Hierarchy};

use super::child::{self, report, Record, GO, KIND_EXEC};
use super::plan::{self, ExecPlan};
use super::spawn::{clone3, exec_error, CloneArgs};
use crate::config::ContainerConfig;
use crate::error::RuntimeError;
use crate::lifecycle::{self, Status};
use crate::sys::{self, Errno};

/// Record kind of the helper: `code` = the process's pid.
const KIND_PID: u32 = 4;

/// How an `exec` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Executed {
    /// Detached: the process runs, with this host pid.
    Running(u32),
    /// Waited for: its exit code, or 128 + signal.
    Exited(i32),
}

/// The namespaces the container's process has that this process does not: the
/// `setns` flags for joining them through a pidfd.
fn namespace_flags(pid: u32) -> libc::c_int {
    let kinds = [
        ("mnt", libc::CLONE_NEWNS),
        ("uts", libc::CLONE_NEWUTS),
        ("ipc", libc::CLONE_NEWIPC),
        ("net", libc::CLONE_NEWNET),
        ("pid", libc::CLONE_NEWPID),
        ("cgroup", libc::CLONE_NEWCGROUP),
        ("user", libc::CLONE_NEWUSER),
    ];
    let mut flags = 0;
    for (name, flag) in kinds {
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/{name}"));
        let ours = std::fs::read_link(format!("/proc/self/ns/{name}"));
        if let (Ok(a), Ok(b)) = (theirs, ours) {
            if a != b {
                flags |= flag;
            }
        }
    }
    flags
}

/// Runs `process` (the container's own configuration with the exec's arguments,
/// environment, user, capabilities …) in container `id`.
pub fn exec(
    state_dir: &Path,
    id: &str,
    process: &ContainerConfig,
    detach: bool,
    hierarchy: &Hierarchy,
) -> Result<Executed, RuntimeError> {
    let (_, st) = lifecycle::load(state_dir, id)?;
    let status = lifecycle::status(&st);
    if !matches!(status, Status::Created | Status::Running) {
        return Err(RuntimeError::WrongStatus {
            id: id.to_owned(),
            status: status.name(),
            op: "exec",
            hint: "only a created or running container runs more processes",
        });
    }
    let pid = st.init_pid.unwrap_or(0);
    let pidfd = lifecycle::open_process(&st)?.ok_or_else(|| RuntimeError::WrongStatus {
        id: id.to_owned(),
        status: "stopped",
        op: "exec",
        hint: "its process has exited",
    })?;
    let flags = namespace_flags(pid);
    let exec = plan::exec_plan(process)?;
    let pipe_err = |source| RuntimeError::Syscall {
        op: "pipe2 (exec synchronisation)",
        source,
    };
    let (go_read, go_write) = sys::pipe().map_err(pipe_err)?;
    let (report_read, report_write) = sys::pipe().map_err(pipe_err)?;
    let args = CloneArgs {
        exit_signal: libc::SIGCHLD as u64,
        ..CloneArgs::default()
    };
    let fds = HelperFds {
        go: go_read.as_raw_fd(),
        report: report_write.as_raw_fd(),
        pidfd: pidfd.as_raw_fd(),
    };
    // SAFETY: the child only runs `helper`, which never returns and never allocates.
    let helper_pid = unsafe { clone3(&args) };
    if helper_pid == 0 {
        helper(&exec, fds, flags);
    }
    if helper_pid < 0 {
        return Err(RuntimeError::Syscall {
            op: "clone3 (the exec helper)",
            source: io::Error::last_os_error(),
        });
    }
    let helper_pid = helper_pid as libc::pid_t;
    drop(go_read);
    drop(report_write);
    let reap_helper = || {
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(helper_pid, &mut status, 0) };
    };
    // Into the container's cgroups before anything of the process runs.
    let joined = join_cgroups(&st, hierarchy, helper_pid as u32);
    if let Err(e) = joined {
        drop(go_write);
        reap_helper();
        return Err(e);
    }
    let sent = sys::write_all(go_write.as_raw_fd(), &[GO]);
    drop(go_write);
    let mut process_pid = None;
    let mut failure = None;
    let mut record = [0u8; Record::SIZE];
    while let Ok(true) = sys::read_exact(report_read.as_raw_fd(), &mut record) {
        let r = Record::decode(&record);
        match r.kind {
            KIND_PID => process_pid = Some(r.code),
            KIND_EXEC => failure = Some(exec_error(process, r)),
            child::KIND_SETUP => {
                failure = Some(RuntimeError::Setup {
                    step: "join the container's namespaces (setns)".into(),
                    source: io::Error::from_raw_os_error(r.errno),
                })
            }
            _ => {}
        }
    }
    reap_helper();
    if let Err(e) = sent {
        return Err(RuntimeError::Syscall {
            op: "write to the exec helper",
            source: e.to_io(),
        });
    }
    let Some(process_pid) = process_pid else {
        return Err(failure.unwrap_or(RuntimeError::Setup {
            step: "start the process in the container".into(),
            source: io::Error::from_raw_os_error(libc::ECHILD),
        }));
    };
    if let Some(e) = failure {
        let mut status = 0;
        // SAFETY: the failed process is our child (CLONE_PARENT).
        unsafe { libc::waitpid(process_pid as libc::pid_t, &mut status, 0) };
        return Err(e);
    }
    if detach {
        return Ok(Executed::Running(process_pid));
    }
    let mut status = 0;
    // SAFETY: the process is our child (CLONE_PARENT); status is valid storage.
    if unsafe { libc::waitpid(process_pid as libc::pid_t, &mut status, 0) } < 0 {
        return Err(RuntimeError::Syscall {
            op: "waitpid (the exec'd process)",
            source: io::Error::last_os_error(),
        });
    }
    Ok(Executed::Exited(child::status_code(status)))
}

/// Moves `pid` into the container's cgroups and its devices cgroup.
fn join_cgroups(
    st: &crate::state::State,
    hierarchy: &Hierarchy,
    pid: u32,
) -> Result<(), RuntimeError> {
    let cgroup_err = |op: &'static str| {
        let rel = st.cgroup.clone();
        move |source| RuntimeError::Cgroup { rel, op, source }
    };
    Cgroup::open(hierarchy, &st.cgroup)
        .map_err(cgroup_err("open"))?
        .attach(pid)
        .map_err(cgroup_err("attach the exec'd process"))?;
    if let Some(mount) = &st.devices_mount {
        let procs = mount.join(&st.cgroup).join("cgroup.procs");
        if procs.exists() {
            std::fs::write(&procs, pid.to_string()).map_err(|source| RuntimeError::Host {
                op: "attach the exec'd process to the devices cgroup",
                path: procs,
                source,
            })?;
        }
    }
    Ok(())
}

#[derive(Clone, Copy)]
struct HelperFds {
    go: RawFd,
    report: RawFd,
    pidfd: RawFd,
}

/// The helper: waits for go, joins the namespaces, creates the process as a sibling
/// (`CLONE_PARENT`), reports its pid, exits. Allocation-free.
fn helper(exec: &ExecPlan, fds: HelperFds, flags: libc::c_int) -> ! {
    // SAFETY: prctl with integer arguments: die with the runtime until go.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) };
    let mut go = [0u8; 1];
    match sys::read_exact(fds.go, &mut go) {
        Ok(true) if go[0] == GO => {}
        // SAFETY: _exit in the child.
        _ => unsafe { libc::_exit(1) },
    }
    // SAFETY: setns on the container's pidfd with the namespaces to join.
    if flags != 0 && unsafe { libc::setns(fds.pidfd, flags) } < 0 {
        report(fds.report, child::KIND_SETUP, 0, Errno::last().0);
        // SAFETY: as above.
        unsafe { libc::_exit(1) };
    }
    sys::close(fds.pidfd);
    let args = CloneArgs {
        flags: libc::CLONE_PARENT as u64,
        ..CloneArgs::default()
    };
    // SAFETY: the child only runs the allocation-free command path.
    let pid = unsafe { clone3(&args) };
    if pid == 0 {
        child::run_command(exec, fds.report);
    }
    if pid < 0 {
        report(
            fds.report,
            KIND_EXEC,
            child::ExecStep::Fork as u32,
            Errno::last().0,
        );
    } else {
        report(fds.report, KIND_PID, pid as u32, 0);
    }
    // SAFETY: as above.
    unsafe { libc::_exit(0) }
}
