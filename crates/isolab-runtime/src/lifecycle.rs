//! The OCI runtime operations on a container made by [`crate::create`]: [`state`],
//! [`start`], [`kill`], [`delete`], [`list`] and [`pids`] (the runtime spec's
//! "Operations", as `runc` and `crun` offer them on the command line).
//!
//! A container's status comes from its state file and its process: `creating`
//! while `create` (or `run`) still sets it up, `created` while its process waits on
//! the exec FIFO, `running` once `start` let it execute the command, `stopped` when
//! the process has exited (also while it is a zombie its caller has not reaped). The
//! process is found by pid *and* start time, so a reused pid is never signalled.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{Cgroup, Hierarchy};

use crate::error::RuntimeError;
use crate::state::{self, State};
use crate::sys;

pub use crate::state::OCI_VERSION;

/// A container's status, as the runtime spec names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Being set up (by `create`, or a `run` before its command executes).
    Creating,
    /// Set up; its process waits for `start`.
    Created,
    /// The command executes.
    Running,
    /// The process has exited.
    Stopped,
}

impl Status {
    /// The spec's name: `creating`, `created`, `running`, `stopped`.
    pub fn name(self) -> &'static str {
        match self {
            Status::Creating => "creating",
            Status::Created => "created",
            Status::Running => "running",
            Status::Stopped => "stopped",
        }
    }
}

/// The state of a container, as `state` prints it (the runtime spec's state plus
/// `rootfs`, `created` and `owner`, which runc prints too and engines read).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct OciState {
    /// Spec version.
    #[serde(rename = "ociVersion")]
    pub oci_version: String,
    /// Container id.
    pub id: String,
    /// Status.
    pub status: Status,
    /// Pid of the container's process in the host's pid namespace; 0 once stopped.
    pub pid: u32,
    /// Bundle directory.
    pub bundle: PathBuf,
    /// Root filesystem.
    pub rootfs: PathBuf,
    /// Creation time, RFC 3339.
    pub created: String,
    /// Uid of the creator (`root` in runc's table).
    pub owner: String,
    /// The bundle's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// The state file of `id` under `state_dir`, read.
pub fn load(state_dir: &Path, id: &str) -> Result<(PathBuf, State), RuntimeError> {
    let id_ok = id.parse::<crate::ContainerId>().is_ok();
    let path = state_dir.join(format!("{id}.json"));
    if !id_ok || !path.is_file() {
        return Err(RuntimeError::NotFound {
            id: id.to_owned(),
            path,
        });
    }
    match State::read(&path) {
        Ok(st) => Ok((path, st)),
        Err(RuntimeError::Host { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
            Err(RuntimeError::NotFound {
                id: id.to_owned(),
                path,
            })
        }
        Err(e) => Err(e),
    }
}

/// Whether process `pid` is the one that started at `start` and has not exited.
fn process_alive(pid: u32, start: u64) -> bool {
    state::process_start_time(pid) == Some(start) && !state::is_zombie(pid)
}

/// The status of a container.
pub fn status(st: &State) -> Status {
    match (&st.oci, st.init_pid) {
        (Some(oci), Some(pid)) if process_alive(pid, oci.init_start) => {
            if state::exec_fifo(&st.mount_base).exists() {
                Status::Created
            } else {
                Status::Running
            }
        }
        (Some(_), _) => Status::Stopped,
        (None, _) if !st.runtime_alive() => Status::Stopped,
        (None, Some(pid)) if state::process_start_time(pid).is_some() => Status::Running,
        (None, _) => Status::Creating,
    }
}

fn oci_state(st: &State) -> OciState {
    let status = status(st);
    let oci = st.oci.clone().unwrap_or_default();
    let pid = match status {
        Status::Stopped => 0,
        _ => st.init_pid.unwrap_or(0),
    };
    OciState {
        oci_version: OCI_VERSION.to_owned(),
        id: st.id.to_string(),
        status,
        pid,
        bundle: oci.bundle,
        rootfs: oci.rootfs,
        created: if oci.created.is_empty() {
            humantime::format_rfc3339_seconds(
                std::time::UNIX_EPOCH + Duration::from_secs(st.created),
            )
            .to_string()
        } else {
            oci.created
        },
        owner: if oci.owner == 0 {
            "root".to_owned()
        } else {
            oci.owner.to_string()
        },
        annotations: oci.annotations,
    }
}

/// The `state` operation.
pub fn state(state_dir: &Path, id: &str) -> Result<OciState, RuntimeError> {
    let (_, st) = load(state_dir, id)?;
    Ok(oci_state(&st))
}

/// Every container under `state_dir`, sorted by id (`list`).
pub fn list(state_dir: &Path) -> Result<Vec<OciState>, RuntimeError> {
    let mut out = Vec::new();
    for path in state::files(state_dir)? {
        // A file removed meanwhile, or one that is not ours, is not a container.
        if let Ok(st) = State::read(&path) {
            out.push(oci_state(&st));
        }
    }
    out.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(out)
}

/// A pidfd of the container's process, checked against pid reuse; `None` when the
/// process has exited.
pub(crate) fn open_process(st: &State) -> Result<Option<OwnedFd>, RuntimeError> {
    let (Some(pid), Some(oci)) = (st.init_pid, st.oci.as_ref()) else {
        return Ok(None);
    };
    // SAFETY: pidfd_open with integer arguments.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ESRCH) {
            return Ok(None);
        }
        return Err(RuntimeError::Syscall {
            op: "pidfd_open (the container's process)",
            source: e,
        });
    }
    // SAFETY: a fresh descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) };
    // Checked after opening: the descriptor now pins this very process.
    if process_alive(pid, oci.init_start) {
        Ok(Some(fd))
    } else {
        Ok(None)
    }
}

fn send_signal(pidfd: &OwnedFd, signal: i32) -> Result<(), RuntimeError> {
    sys::pidfd_send_signal(pidfd.as_raw_fd(), signal).map_err(|source| RuntimeError::Syscall {
        op: "pidfd_send_signal (the container's process)",
        source,
    })
}

/// Waits until the process behind `pidfd` has exited (a pidfd polls readable then),
/// at most `timeout`; whether it did.
fn wait_exit(pidfd: &OwnedFd, timeout: Duration) -> bool {
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    sys::poll_readable([pidfd.as_raw_fd()], ms).is_ok_and(|[exited]| exited)
}

fn wrong(st: &State, s: Status, op: &'static str, hint: &'static str) -> RuntimeError {
    RuntimeError::WrongStatus {
        id: st.id.to_string(),
        status: s.name(),
        op,
        hint,
    }
}

/// The `start` operation: lets a created container execute its command. Returns
/// once the process has taken the go (it then calls `execve`) and the poststart
/// hooks ran; returns their failures, which the spec makes warnings.
pub fn start(state_dir: &Path, id: &str) -> Result<Vec<String>, RuntimeError> {
    let (_, st) = load(state_dir, id)?;
    let s = status(&st);
    if s != Status::Created {
        return Err(wrong(
            &st,
            s,
            "start",
            "only a created container can be started (`create` it again after `delete`)",
        ));
    }
    let Some(pidfd) = open_process(&st)? else {
        return Err(wrong(&st, Status::Stopped, "start", "delete it"));
    };
    let fifo_path = state::exec_fifo(&st.mount_base);
    let fifo = fs::OpenOptions::new()
        .read(true)
        // Non-blocking: return at once instead of waiting for a writer.
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo_path)
        .map_err(|source| RuntimeError::Host {
            op: "open the exec FIFO",
            path: fifo_path.clone(),
            source,
        })?;
    // Data on the FIFO = the process took the go (after its startContainer hooks);
    // the pidfd readable = it died.
    loop {
        let [data, died] = poll_fifo(&fifo, &pidfd, "poll (the exec FIFO)")?;
        if data {
            // "0", or a failed hook's report (one write, shorter than PIPE_BUF).
            let mut bytes = [0u8; 6];
            match sys::read(fifo.as_raw_fd(), &mut bytes) {
                Ok(6) if bytes[0] == crate::container::child::FIFO_HOOK_FAILED => {
                    // It exits right after: `state` then says stopped.
                    wait_exit(&pidfd, Duration::from_secs(2));
                    return Err(start_hook_failed(&st, &bytes));
                }
                Ok(n) if n > 0 => break,
                _ => {}
            }
        }
        if died {
            return Err(wrong(
                &st,
                Status::Stopped,
                "start",
                "its process exited before it was started; its output says why",
            ));
        }
        if data {
            // EOF without the byte: the writer went away; wait for its exit.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    wait_executed(&fifo, &pidfd)?;
    // The FIFO's absence is what tells `running` from `created`.
    fs::remove_file(&fifo_path).map_err(|source| RuntimeError::Host {
        op: "remove the exec FIFO",
        path: fifo_path,
        source,
    })?;
    Ok(hook_warnings(
        &st,
        Status::Running,
        |oci| &oci.poststart,
        "poststart",
    ))
}

/// Waits until the exec FIFO has data (or its writer closed it) or the process behind
/// `pidfd` exited: (FIFO readable, process exited).
fn poll_fifo(
    fifo: &fs::File,
    pidfd: &OwnedFd,
    op: &'static str,
) -> Result<[bool; 2], RuntimeError> {
    sys::poll_readable([fifo.as_raw_fd(), pidfd.as_raw_fd()], -1)
        .map_err(|source| RuntimeError::Syscall { op, source })
}

/// Waits until the container's process no longer holds the exec FIFO open for writing:
/// its `execve` closed it (close-on-exec), or it exited (an `execve` that failed).
fn wait_executed(fifo: &fs::File, pidfd: &OwnedFd) -> Result<(), RuntimeError> {
    loop {
        let [data, died] = poll_fifo(fifo, pidfd, "poll (the exec FIFO, until execve)")?;
        if died {
            return Ok(());
        }
        let mut byte = [0u8; 1];
        if data && sys::read(fifo.as_raw_fd(), &mut byte) == Ok(0) {
            return Ok(());
        }
    }
}

/// The error of the `startContainer` hook a container's process reported on its exec
/// FIFO (`H`, the hook's number, its status): the container stops (the process exits).
fn start_hook_failed(st: &State, report: &[u8; 6]) -> RuntimeError {
    let hook = st
        .oci
        .as_ref()
        .and_then(|o| o.start_container.get(usize::from(report[1])));
    let status = i32::from_ne_bytes([report[2], report[3], report[4], report[5]]);
    RuntimeError::Hook {
        kind: "startContainer".to_owned(),
        path: hook.map(|h| h.path.clone()).unwrap_or_default(),
        problem: format!(
            "{}; the container stopped (`delete` removes it)",
            crate::hooks::failure_text(status, hook.and_then(|h| h.timeout))
        ),
    }
}

/// Runs the poststart or poststop hooks of a container; their failures as warnings.
fn hook_warnings(
    st: &State,
    status: Status,
    hooks: impl Fn(&state::OciInfo) -> &Vec<crate::config::Hook>,
    kind: &str,
) -> Vec<String> {
    let Some(oci) = &st.oci else {
        return Vec::new();
    };
    let list = hooks(oci);
    if list.is_empty() {
        return Vec::new();
    }
    let mut state = oci_state(st);
    state.status = status;
    // The process as `create` reported it, also when it has already exited (a
    // poststart hook of a command that ends at once still names its container's
    // process, as `state` did after `create`).
    if status != Status::Stopped {
        state.pid = st.init_pid.unwrap_or(0);
    }
    let json = serde_json::to_string(&state).unwrap_or_default();
    crate::hooks::run_warn(list, kind, &json)
}

/// The `kill` operation: sends `signal` to the container's process, or with `all` to
/// every process in its cgroup.
pub fn kill(
    state_dir: &Path,
    id: &str,
    signal: i32,
    all: bool,
    hierarchy: &Hierarchy,
) -> Result<(), RuntimeError> {
    let (_, st) = load(state_dir, id)?;
    let s = status(&st);
    if !matches!(s, Status::Created | Status::Running) {
        return Err(wrong(
            &st,
            s,
            "kill",
            "only a created or running container can be signalled",
        ));
    }
    if all {
        for pid in pids_of(&st, hierarchy)? {
            // SAFETY: kill with integer arguments; a process gone meanwhile is fine.
            unsafe { libc::kill(pid as libc::pid_t, signal) };
        }
        return Ok(());
    }
    match open_process(&st)? {
        Some(pidfd) => send_signal(&pidfd, signal),
        None => Err(wrong(&st, Status::Stopped, "kill", "delete it")),
    }
}

/// The `delete` operation: removes a stopped container, everything it held on the
/// host and its state. A created or running container is refused (the runtime spec:
/// "attempting to delete a container that is not stopped MUST generate an error")
/// unless `force`, which kills it first. Runs the poststop hooks last; returns their
/// failures (warnings).
pub fn delete(
    state_dir: &Path,
    id: &str,
    force: bool,
    hierarchy: &Hierarchy,
) -> Result<Vec<String>, RuntimeError> {
    let (path, st) = load(state_dir, id)?;
    let s = status(&st);
    if st.oci.is_none() && s != Status::Stopped {
        return Err(wrong(
            &st,
            s,
            "delete",
            "it belongs to a running `isolab-runtime run`; stop that process",
        ));
    }
    // The spec: only a stopped container may be deleted; `--force` kills a created or
    // running one first (what Podman and containerd's shim ask for).
    if matches!(s, Status::Created | Status::Running) && !force {
        return Err(wrong(
            &st,
            s,
            "delete",
            "stop it first (`kill`), or use `delete --force`",
        ));
    }
    if let Some(pidfd) = open_process(&st)? {
        send_signal(&pidfd, libc::SIGKILL)?;
        if !wait_exit(&pidfd, Duration::from_secs(10)) {
            return Err(RuntimeError::Syscall {
                op: "wait for the container's process to exit after SIGKILL",
                source: io::Error::from_raw_os_error(libc::ETIMEDOUT),
            });
        }
    }
    let failures = state::undo(&st, &path, hierarchy);
    if !failures.is_empty() {
        return Err(RuntimeError::Teardown(failures));
    }
    Ok(hook_warnings(
        &st,
        Status::Stopped,
        |oci| &oci.poststop,
        "poststop",
    ))
}

fn pids_of(st: &State, hierarchy: &Hierarchy) -> Result<Vec<u32>, RuntimeError> {
    let cgroup_err = |op: &'static str| {
        let rel = st.cgroup.clone();
        move |source| RuntimeError::Cgroup { rel, op, source }
    };
    match Cgroup::open(hierarchy, &st.cgroup) {
        Ok(cgroup) => cgroup.pids().map_err(cgroup_err("list the processes")),
        Err(isolab_cgroups::Error::NotFound { .. }) => Ok(Vec::new()),
        Err(e) => Err(cgroup_err("open")(e)),
    }
}

/// The processes in a container's cgroup (`ps`), host pids, sorted.
pub fn pids(state_dir: &Path, id: &str, hierarchy: &Hierarchy) -> Result<Vec<u32>, RuntimeError> {
    let (_, st) = load(state_dir, id)?;
    pids_of(&st, hierarchy)
}
