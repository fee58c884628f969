//! Creating the container's process and the handshake with it (steps 2 and 3 of the
//! module documentation of `container`): `clone3` into the new namespaces and the
//! cgroup2 directory, what the parent does before the child may go (id maps, network,
//! waiting until it joined its v1 cgroups, `createRuntime` hooks), and the child's
//! reports until its command's `execve`.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use isolab_cgroups::CloneTarget;

use crate::config::{ContainerConfig, IdMaps, IdRange, Lifecycle, NetworkChoice};
use crate::error::RuntimeError;
use crate::state;
use crate::sys;
use crate::trace::{Phase, Trace};

use super::child::{
    self, ExecStep, Record, KIND_EXEC, KIND_HOOK, KIND_HOOKS, KIND_PHASE, KIND_SETUP,
};
use super::{devices, ns_to_duration, plan, Init, Instance};

// One `clone3` for the runtime and isolab's launcher (isolab-cgroups, beside `CloneTarget`).
pub(super) use isolab_cgroups::{clone3, CloneArgs, CLONE_INTO_CGROUP};

/// The `clone3` flags: a pidfd, and the namespaces the container gets new (the
/// cgroup namespace comes later, by `unshare`, once the child is in its cgroups).
fn clone_flags(config: &ContainerConfig) -> u64 {
    let mut flags = libc::CLONE_PIDFD;
    match &config.oci.namespaces {
        None => {
            flags |=
                libc::CLONE_NEWPID | libc::CLONE_NEWNS | libc::CLONE_NEWUTS | libc::CLONE_NEWIPC;
            if config.network != NetworkChoice::Host {
                flags |= libc::CLONE_NEWNET;
            }
            if config.user_namespace {
                flags |= libc::CLONE_NEWUSER;
            }
        }
        Some(ns) => {
            for kind in &ns.create {
                if *kind != crate::config::NsKind::Cgroup {
                    flags |= kind.flag();
                }
            }
        }
    }
    flags as u64
}

/// Makes the exec FIFO (mode 0622: the container's process opens it for writing
/// whatever its user) and opens it `O_PATH` for the child.
fn exec_fifo(path: &Path) -> Result<OwnedFd, RuntimeError> {
    let host = |op: &'static str| {
        let path = path.to_owned();
        move |source| RuntimeError::Host { op, path, source }
    };
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
        .map_err(|e| host("make the exec FIFO")(io::Error::new(io::ErrorKind::InvalidInput, e)))?;
    // SAFETY: a NUL-terminated path; mkfifo and open with integer arguments.
    unsafe {
        if libc::mkfifo(c.as_ptr(), 0o622) < 0 {
            return Err(host("make the exec FIFO")(io::Error::last_os_error()));
        }
        // mkfifo applies the umask.
        libc::chmod(c.as_ptr(), 0o622);
        let fd = libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(host("open the exec FIFO")(io::Error::last_os_error()));
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// The parent's ends of the pipes to a child that [`Instance::spawn`] created: go
/// (parent -> child) and report (child -> parent).
pub(super) struct Handshake {
    /// Written once ([`child::GO`]) when the child may set itself up.
    pub(super) go: OwnedFd,
    /// The child's [`Record`]s, until the command's `execve` closes it.
    pub(super) report: OwnedFd,
}

impl Instance {
    /// Creates the child with `clone3` in its namespaces (and its cgroup2 directory),
    /// handing it the pipes, the exec FIFO, the namespaces to join and the cgroup
    /// files; records it as the instance's init.
    pub(super) fn spawn(
        &mut self,
        config: &ContainerConfig,
        plan: &plan::Plan,
        target: &CloneTarget,
    ) -> Result<Handshake, RuntimeError> {
        let pipe_err = |source| RuntimeError::Syscall {
            op: "pipe2 (container synchronisation)",
            source,
        };
        let (go_read, go_write) = sys::pipe().map_err(pipe_err)?;
        let (report_read, report_write) = sys::pipe().map_err(pipe_err)?;
        let fifo = match config.lifecycle {
            Lifecycle::Run => None,
            Lifecycle::Create => Some(exec_fifo(&state::exec_fifo(&self.state.mount_base))?),
        };
        let mut fifo_path = [0u8; 32];
        if let Some(fd) = &fifo {
            let path = format!("/proc/self/fd/{}", fd.as_raw_fd());
            fifo_path[..path.len()].copy_from_slice(path.as_bytes());
        }
        let joined = open_joined(config)?;
        let mut ns_fds = [-1; child::MAX_JOINED];
        for (slot, fd) in ns_fds.iter_mut().zip(&joined) {
            *slot = fd.as_raw_fd();
        }
        let mut pidfd: libc::c_int = -1;
        // The cgroup2 part of the cgroup is joined by clone3 itself (Linux 5.7; the
        // runtime needs 5.9 for close_range anyway), the v1 part by the child.
        let args = CloneArgs {
            flags: clone_flags(config) | target.v2_dir.as_ref().map_or(0, |_| CLONE_INTO_CGROUP),
            pidfd: &mut pidfd as *mut libc::c_int as u64,
            exit_signal: libc::SIGCHLD as u64,
            cgroup: target.v2_dir.as_ref().map_or(0, |d| d.as_raw_fd() as u64),
            ..CloneArgs::default()
        };
        let mut cgroup_fds = [-1; child::MAX_CGROUP_FILES];
        for (slot, fd) in cgroup_fds.iter_mut().zip(target.v1.raw_fds()) {
            *slot = fd;
        }
        let devices_tasks = self
            .devices
            .as_ref()
            .map(devices::DevicesCgroup::open_tasks)
            .transpose()?;
        let fds = child::ChildFds {
            go: go_read.as_raw_fd(),
            report: report_write.as_raw_fd(),
            devices: devices_tasks.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            fifo: fifo.as_ref().map_or(-1, AsRawFd::as_raw_fd),
            fifo_path,
            ns: ns_fds,
            cgroup: cgroup_fds,
        };
        let pid_join = PidJoin::open(config)?;
        if let Some(join) = &pid_join {
            join.enter()?;
        }
        // SAFETY: the child only runs child::main, which never returns and never
        // allocates (see its docs).
        let pid = unsafe { clone3(&args) };
        if pid == 0 {
            child::main(plan, fds);
        }
        let left = pid_join.as_ref().map(PidJoin::leave);
        if pid < 0 {
            return Err(RuntimeError::Syscall {
                op: "clone3 (create the container's namespaces; needs root and Linux 5.3+)",
                source: io::Error::last_os_error(),
            });
        }
        let pid = pid as libc::pid_t;
        // SAFETY: CLONE_PIDFD stored a fresh descriptor that nothing else owns.
        let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
        self.init = Some(Init {
            pid,
            pidfd,
            reaped: false,
        });
        // The init is recorded: a failure here tears it down with the rest.
        left.transpose()?;
        drop(go_read);
        drop(report_write);
        drop(devices_tasks);
        drop(fifo);
        drop(joined);
        Ok(Handshake {
            go: go_write,
            report: report_read,
        })
    }

    /// What the parent does for the child before it may go: records its pid in the
    /// state file, writes its user namespace's id maps, sets up its network and its OOM
    /// score; then it waits for the child to be in its cgroups.
    pub(super) fn release(
        &mut self,
        config: &ContainerConfig,
        handshake: &Handshake,
        target: CloneTarget,
        rel: &Path,
    ) -> Result<(), RuntimeError> {
        let pid = self.init.as_ref().map_or(0, |i| i.pid);
        self.state.init_pid = Some(pid as u32);
        self.state.update(&self.state_path)?;
        if let Some(maps) = config.user_namespace_maps() {
            write_id_maps(pid, &maps)?;
        }
        self.setup_network(config)?;
        if let Some(adj) = config.oci.oom_score_adj {
            let path = PathBuf::from(format!("/proc/{pid}/oom_score_adj"));
            fs::write(&path, adj.to_string()).map_err(|source| RuntimeError::Host {
                op: "write",
                path,
                source,
            })?;
        }
        // The child is in its cgroups before its setup.
        self.await_joined(handshake.report.as_raw_fd(), &target.v1, rel)?;
        drop(target);
        Ok(())
    }

    /// Waits for the child's [`child::KIND_JOINED`] record: it wrote itself to every
    /// `tasks` file of `v1`, or says which one refused.
    fn await_joined(
        &self,
        report: std::os::fd::RawFd,
        v1: &isolab_cgroups::Attacher,
        rel: &Path,
    ) -> Result<(), RuntimeError> {
        let mut record = [0u8; Record::SIZE];
        let r = match sys::read_exact(report, &mut record) {
            Ok(true) => Record::decode(&record),
            Ok(false) | Err(_) => {
                return Err(RuntimeError::Setup {
                    step: "join the container's cgroups (its process ended first)".into(),
                    source: io::Error::from_raw_os_error(libc::EPIPE),
                })
            }
        };
        if r.kind == child::KIND_JOINED && r.errno == 0 {
            return Ok(());
        }
        let path = v1
            .path(r.code as usize)
            .map_or_else(|| rel.to_owned(), Path::to_owned);
        Err(RuntimeError::Cgroup {
            rel: rel.to_owned(),
            op: "join (the container's process writing itself to a tasks file)",
            source: isolab_cgroups::Error::Write {
                path,
                data: "0".into(),
                source: io::Error::from_raw_os_error(if r.errno == 0 {
                    libc::EPROTO
                } else {
                    r.errno
                }),
            },
        })
    }
}

/// A pid namespace the container joins by path. A pid namespace takes the children of
/// whoever joins it, so the runtime's thread joins it for `clone3` (the child is then
/// born in it) and goes back to its own right after.
struct PidJoin {
    /// The runtime's own (this thread's) pid namespace.
    own: OwnedFd,
    /// The one to join.
    target: OwnedFd,
    /// Its path, for errors.
    path: PathBuf,
}

impl PidJoin {
    fn open(config: &ContainerConfig) -> Result<Option<PidJoin>, RuntimeError> {
        let Some(path) = config.oci.namespaces.as_ref().and_then(|n| n.pid_to_join()) else {
            return Ok(None);
        };
        let open = |path: &Path| {
            fs::File::open(path)
                .map(OwnedFd::from)
                .map_err(|source| RuntimeError::Host {
                    op: "open the namespace to join",
                    path: path.to_owned(),
                    source,
                })
        };
        Ok(Some(PidJoin {
            own: open(Path::new("/proc/thread-self/ns/pid"))?,
            target: open(path)?,
            path: path.to_owned(),
        }))
    }

    fn setns(fd: &OwnedFd, what: &'static str, path: &Path) -> Result<(), RuntimeError> {
        // SAFETY: setns on a descriptor this process opened.
        if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWPID) } < 0 {
            return Err(RuntimeError::Host {
                op: what,
                path: path.to_owned(),
                source: io::Error::last_os_error(),
            });
        }
        Ok(())
    }

    /// Makes this thread's children be born in the target namespace.
    fn enter(&self) -> Result<(), RuntimeError> {
        Self::setns(
            &self.target,
            "join the pid namespace for the container's process (setns)",
            &self.path,
        )
    }

    /// Back to the runtime's own pid namespace for later children (the hooks).
    fn leave(&self) -> Result<(), RuntimeError> {
        Self::setns(
            &self.own,
            "return to the runtime's pid namespace (setns)",
            Path::new("/proc/thread-self/ns/pid"),
        )
    }
}

/// Opens the namespaces the child joins first (setns).
fn open_joined(config: &ContainerConfig) -> Result<Vec<OwnedFd>, RuntimeError> {
    let mut joined: Vec<OwnedFd> = Vec::new();
    for (_, path) in config
        .oci
        .namespaces
        .iter()
        .flat_map(|n| n.joined_by_child())
    {
        let fd = fs::File::open(path).map_err(|source| RuntimeError::Host {
            op: "open the namespace to join",
            path: path.clone(),
            source,
        })?;
        joined.push(OwnedFd::from(fd));
    }
    if joined.len() > child::MAX_JOINED {
        return Err(RuntimeError::InvalidConfig {
            what: "namespaces to join",
            value: joined.len().to_string(),
            expected: "at most one path for each of mount, uts, ipc, network and cgroup",
        });
    }
    Ok(joined)
}

/// What the parent needs to run the runtime's hooks when the child stops for them
/// ([`child::KIND_HOOKS`]) and to let it go on.
pub(super) struct RuntimeHooks<'a> {
    pub(super) config: &'a ContainerConfig,
    pub(super) oci: Option<&'a state::OciInfo>,
    /// The container's process, as the runtime's pid namespace shows it.
    pub(super) pid: u32,
    /// The go pipe: one more [`child::GO`] once the hooks ran; closed when they failed
    /// (the child reads EOF and exits).
    pub(super) go: OwnedFd,
}

impl RuntimeHooks<'_> {
    /// Runs `prestart`, then `createRuntime`, in the runtime's namespaces, with the
    /// container's state (`created`: its environment is made, its command not run),
    /// then lets the child go on.
    fn run(&self) -> Result<(), RuntimeError> {
        let hooks = &self.config.oci.hooks;
        let state = crate::hooks::state_json(self.config, self.oci, "created", self.pid);
        crate::hooks::run_all(&hooks.prestart, "prestart", &state)?;
        crate::hooks::run_all(&hooks.create_runtime, "createRuntime", &state)?;
        sys::write_all(self.go.as_raw_fd(), &[child::GO]).map_err(|e| RuntimeError::Syscall {
            op: "write to the go pipe (the container's process died during the hooks)",
            source: e.to_io(),
        })
    }
}

/// Reads the child's reports until the command's `execve` closes the pipe (create:
/// until the process says it is created), running the runtime's hooks when it stops
/// for them: phases go to `trace`; returns the setup, hook or exec error reported, if
/// any, and whether the process said it is created.
pub(super) fn read_reports(
    config: &ContainerConfig,
    plan: &plan::Plan,
    report: OwnedFd,
    hooks: RuntimeHooks<'_>,
    t0: u64,
    trace: &mut Trace,
) -> (Option<RuntimeError>, bool) {
    let mut setup_error = None;
    let mut created = false;
    let mut record = [0u8; Record::SIZE];
    let mut hooks = Some(hooks);
    while let Ok(true) = sys::read_exact(report.as_raw_fd(), &mut record) {
        let r = Record::decode(&record);
        match r.kind {
            KIND_HOOKS => {
                if let Some(h) = hooks.take() {
                    match h.run() {
                        Ok(()) => hooks = Some(h),
                        // `h` and its go pipe dropped: the child reads EOF and exits.
                        Err(e) => setup_error = Some(e),
                    }
                }
            }
            KIND_HOOK => setup_error = Some(container_hook_error(config, r)),
            KIND_PHASE => {
                if let Some(p) = crate::trace::Phase::from_code(r.code) {
                    trace.push((p, ns_to_duration(r.ts, t0)));
                    if p == Phase::Created {
                        created = true;
                        break;
                    }
                }
            }
            KIND_SETUP => setup_error = Some(setup_error_of(config, plan, r)),
            KIND_EXEC => setup_error = Some(exec_error(config, r)),
            _ => {}
        }
    }
    drop(report);
    drop(hooks);
    (setup_error, created)
}

/// The error of a `createContainer` or `startContainer` hook that did not succeed
/// ([`child::KIND_HOOK`]): the hooks are numbered `createContainer` first.
pub(super) fn container_hook_error(config: &ContainerConfig, r: Record) -> RuntimeError {
    let hooks = &config.oci.hooks;
    let n = r.code as usize;
    let (kind, hook) = match hooks.create_container.get(n) {
        Some(h) => ("createContainer", Some(h)),
        None => (
            "startContainer",
            hooks.start_container.get(n - hooks.create_container.len()),
        ),
    };
    RuntimeError::Hook {
        kind: kind.to_owned(),
        path: hook.map(|h| h.path.clone()).unwrap_or_default(),
        problem: crate::hooks::failure_text(r.errno, hook.and_then(|h| h.timeout)),
    }
}

/// The error of a failed setup step: the step's description and errno, or a
/// specific message for a bind-mount destination that cannot be made.
fn setup_error_of(config: &ContainerConfig, plan: &plan::Plan, r: Record) -> RuntimeError {
    if let Some(plan::Op::BindTarget { bind, .. }) = plan.ops.get(r.code as usize) {
        let problem = match r.errno {
            libc::ENOENT | libc::EROFS => Some(
                "it does not exist in the image and the root is read-only; create it in the \
                 image or use a writable root (overlay, or without --readonly)",
            ),
            libc::ELOOP => Some(
                "a component of it is a symbolic link in the image; give the path the link \
                 points to",
            ),
            _ => None,
        };
        if let (Some(problem), Some(b)) = (problem, config.binds.get(*bind)) {
            return RuntimeError::BindDestination {
                destination: b.destination.clone(),
                problem,
            };
        }
    }
    let step = plan
        .descriptions
        .get(r.code as usize)
        .cloned()
        .unwrap_or_else(|| format!("step {}", r.code));
    RuntimeError::Setup {
        step,
        source: io::Error::from_raw_os_error(r.errno),
    }
}

pub(super) fn exec_error(config: &ContainerConfig, r: Record) -> RuntimeError {
    let program = config.args.first().cloned().unwrap_or_default();
    let step = match ExecStep::from_code(r.code) {
        Some(ExecStep::Fork) => "fork the command".to_owned(),
        Some(ExecStep::Stdio) => "open /dev/null for the command's stdio".to_owned(),
        Some(ExecStep::Chdir) => format!(
            "change to the working directory {} (does it exist in the root filesystem?)",
            config.cwd.display()
        ),
        Some(ExecStep::Security) => {
            "apply the security settings (capabilities, no_new_privs, seccomp)".to_owned()
        }
        Some(ExecStep::Rlimit) => {
            "set the rlimits (process.rlimits; a hard limit above the runtime's own needs \
             CAP_SYS_RESOURCE, and nofile cannot exceed fs.nr_open)"
                .to_owned()
        }
        Some(ExecStep::User) => format!(
            "switch to the user {:?} (setgroups, setresgid, setresuid)",
            config.oci.user
        ),
        Some(ExecStep::Execve) | None => {
            format!("execute {program:?} (is it in the root filesystem and on PATH?)")
        }
    };
    RuntimeError::Setup {
        step,
        source: io::Error::from_raw_os_error(r.errno),
    }
}

/// Writes the bundle's id maps, or maps container ids 0..65536 to host ids from
/// [`USERNS_BASE`]; without root ([`crate::config::rootless`]) the caller's own uid and
/// gid to 0; without root `setgroups` is denied first (the kernel's condition for an
/// unprivileged gid map).
fn write_id_maps(pid: libc::pid_t, maps: &IdMaps) -> Result<(), RuntimeError> {
    let write = |file: &str, line: &str| {
        let path = PathBuf::from(format!("/proc/{pid}/{file}"));
        fs::write(&path, line).map_err(|source| RuntimeError::Host {
            op: "write the user namespace id map",
            path,
            source,
        })
    };
    if crate::config::rootless() {
        // Without root, the kernel takes a gid map only once setgroups is denied.
        write("setgroups", "deny")?;
    }
    write("uid_map", &IdRange::map_file(&maps.uid))?;
    write("gid_map", &IdRange::map_file(&maps.gid))
}
