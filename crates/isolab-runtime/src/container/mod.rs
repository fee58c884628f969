//! [`run`]: create a container, wait for its command, tear everything down.
//!
//! # How a container starts (and why it cannot race itself)
//!
//! 1. The parent resolves the bind-mount sources, writes the state file (naming the
//!    cgroup parents it is about to create), creates the cgroup under
//!    `<cgroup_parent>` and applies the limits (read back and compared), creates the
//!    v1 devices cgroup with the device allowlist (`devices.rs`), attaches an ext4
//!    image to a loop device, and builds the child's whole plan (`plan.rs` — every
//!    path and argument as a C string).
//! 2. One `clone3` creates the child in new pid, mount, uts, ipc (and net, user)
//!    namespaces, in the cgroup2 directory of its cgroup if there is one
//!    (`CLONE_INTO_CGROUP`), and returns a pidfd. `clone3` rather than fork +
//!    unshare + fork: one process creation instead of two, the child is directly
//!    PID 1, and the pidfd makes waiting and signalling race-free. The child is a
//!    copy of a possibly multi-threaded caller, so it only walks the pre-built plan
//!    and never allocates.
//! 3. The child first writes itself (`0`) to its cgroup's `tasks` file in each v1
//!    hierarchy, pre-opened by the parent, and reports that; then it blocks on a
//!    go pipe. (A parent writing the child's pid to `cgroup.procs` would take the
//!    kernel's threadgroup lock, whose first taker after a quiet spell waits for an
//!    RCU grace period, 8 ms here.) Meanwhile the parent writes its uid/gid maps
//!    and sets up the network, then waits for the report. Only then does it send
//!    go: no instruction of the container runs outside its cgroup. If the parent
//!    dies first the child reads EOF and exits (and `PR_SET_PDEATHSIG` kills it
//!    later).
//! 4. The child mounts the root, then joins its devices cgroup (cgroup v1: the
//!    device allowlist; after the root because an ext4 root is mounted from its loop
//!    device, which the allowlist denies; the parent pre-opened `tasks`),
//!    unshares its cgroup namespace (now rooted at its cgroups), mounts /proc, /sys,
//!    /dev and the bind mounts (all paths pre-built, destinations created when
//!    missing), pivots, masks paths, then forks the command as PID 2 and stays as
//!    init. Phase timestamps and failures come back as fixed-size
//!    records on a close-on-exec report pipe; its EOF marks the command's `execve`.
//! 5. The parent waits on the pidfd (forwarding signals if asked), reads the
//!    cgroup's counters ([`Exit::stats`]), then tears down the cgroup, the devices
//!    cgroup, the cgroup parents it created, the loop device, the mount-point
//!    directories and the state file, on success and on every error path (a drop
//!    guard).

pub(crate) mod child;
pub mod devices;
pub mod exec;
pub(crate) mod plan;

use std::borrow::Cow;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::Duration;

use isolab_cgroups::{Bytes, Cgroup, Hierarchy, Limits, Stats, Version};

use crate::config::{ContainerConfig, Lifecycle, NetworkChoice, Rootfs, USERNS_BASE, USERNS_SIZE};
use crate::error::RuntimeError;
use crate::loopdev::LoopDevice;
use crate::state::{self, State};
use crate::sys;
use crate::trace::{Phase, Trace};
use child::{ExecStep, Record, KIND_EXEC, KIND_PHASE, KIND_SETUP};

/// How a container ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Exit {
    /// The command's exit code, or 128 + the signal that killed it.
    pub status: i32,
    /// Phase timestamps relative to the start of [`run`].
    pub trace: Trace,
    /// The limits read back from the container's cgroup: right after they were
    /// applied, or (with no limits asked for) after the container exited. On v1 the
    /// cpuset is always set (a v1 cpuset holds its own copy, from its parent); a cpu
    /// weight reads back in the host's unit (v1 shares, v2 weight); the unified files
    /// asked for hold what the kernel shows in them.
    pub limits: Limits,
    /// The cgroup's counters, read after the container's init exited and before the
    /// cgroup was removed; `None` when they could not be read (the reason is in
    /// [`Exit::notes`]).
    pub stats: Option<Stats>,
    /// Things the caller should know that did not make the run fail: statistics or
    /// limits that could not be read, a device allowlist that is not enforced.
    pub notes: Vec<String>,
}

/// Runs a container and blocks until its command exits; tears everything down
/// before returning, also on errors. Detects the cgroup hierarchy of the host.
pub fn run(config: &ContainerConfig) -> Result<Exit, RuntimeError> {
    let hierarchy = Hierarchy::detect().map_err(|source| RuntimeError::Cgroup {
        rel: config.cgroup_rel(),
        op: "detect the cgroup mounts",
        source,
    })?;
    run_in(config, &hierarchy)
}

/// [`run`] with an explicit cgroup hierarchy.
pub fn run_in(config: &ContainerConfig, hierarchy: &Hierarchy) -> Result<Exit, RuntimeError> {
    if config.lifecycle != Lifecycle::Run {
        return Err(RuntimeError::InvalidConfig {
            what: "lifecycle",
            value: format!("{:?}", config.lifecycle),
            expected: "Run for run (use create for Create)",
        });
    }
    let t0 = config.trace_origin.unwrap_or_else(sys::monotonic_ns);
    let mut trace = Trace::new();
    mark_at(t0)(&mut trace, Phase::Setup);
    let (mut instance, binds) = Instance::prepare(config, hierarchy)?;
    let result = instance.start_and_wait(config, None, binds, t0, &mut trace, mark_at(t0));
    let teardown = instance.teardown();
    match (result, teardown) {
        (Ok(status), Ok(())) => {
            mark_at(t0)(&mut trace, Phase::Exit);
            Ok(Exit {
                status,
                trace,
                limits: instance.limits.take().unwrap_or_default(),
                stats: instance.stats.take(),
                notes: std::mem::take(&mut instance.notes),
            })
        }
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(e),
    }
}

/// A container made by [`create`], waiting for `start`.
#[derive(Debug, Clone, PartialEq)]
pub struct Created {
    /// Pid of the container's process (host pid namespace).
    pub pid: u32,
    /// Phase timestamps relative to the start of [`create`].
    pub trace: Trace,
    /// The limits read back (as [`Exit::limits`]; empty when none were asked for).
    pub limits: Limits,
    /// As [`Exit::notes`].
    pub notes: Vec<String>,
}

/// The OCI `create` operation: sets the container up as [`run`] does, with the
/// command's process as PID 1 stopped right before `execve` until [`crate::lifecycle::start`],
/// and returns. The state file records the container as created (with `oci`) and
/// the container outlives this process; [`crate::lifecycle::delete`] removes it. On a
/// failure everything is torn down before the error returns.
pub fn create(
    config: &ContainerConfig,
    hierarchy: &Hierarchy,
    oci: state::OciInfo,
) -> Result<Created, RuntimeError> {
    if config.lifecycle != Lifecycle::Create {
        return Err(RuntimeError::InvalidConfig {
            what: "lifecycle",
            value: format!("{:?}", config.lifecycle),
            expected: "Create for create (use run for Run)",
        });
    }
    let t0 = config.trace_origin.unwrap_or_else(sys::monotonic_ns);
    let mut trace = Trace::new();
    mark_at(t0)(&mut trace, Phase::Setup);
    let (mut instance, binds) = Instance::prepare(config, hierarchy)?;
    let result = instance
        .start_and_wait(config, Some(&oci), binds, t0, &mut trace, mark_at(t0))
        .and_then(|_| instance.hand_over(oci));
    match result {
        Ok(pid) => Ok(Created {
            pid,
            trace,
            limits: instance.limits.take().unwrap_or_default(),
            notes: std::mem::take(&mut instance.notes),
        }),
        Err(e) => {
            // The drop guard would do the same; explicit, to keep the first error.
            let _ = instance.teardown();
            Err(e)
        }
    }
}

/// A closure that records `phase` at the current time, relative to `t0`.
fn mark_at(t0: u64) -> impl Fn(&mut Trace, Phase) {
    move |trace: &mut Trace, phase: Phase| {
        trace.push((phase, ns_to_duration(sys::monotonic_ns(), t0)));
    }
}

impl Instance {
    /// Checks the configuration and the root, resolves the bind sources and writes
    /// the state file (before anything is created on the host).
    fn prepare(
        config: &ContainerConfig,
        hierarchy: &Hierarchy,
    ) -> Result<(Instance, Vec<plan::BindSource>), RuntimeError> {
        config.validate()?;
        check_rootfs(&config.rootfs)?;
        let binds = plan::resolve_binds(config)?;
        let devices_mount = devices::devices_mount(hierarchy);
        let roots = devices::mount_roots(hierarchy, devices_mount.as_deref());

        let mut st = State {
            id: config.id.clone(),
            runtime_pid: std::process::id(),
            runtime_start: state::process_start_time(std::process::id()).unwrap_or(0),
            init_pid: None,
            cgroup: config.cgroup_rel(),
            image: None,
            loop_device: None,
            mount_base: config.state_dir.join(&config.id),
            overlay_work: None,
            network: None,
            created: state::now_secs(),
            cgroup_created: devices::missing_ancestors(&roots, &config.cgroup_parent),
            devices_created: devices_mount
                .iter()
                .flat_map(|m| {
                    devices::missing_ancestors(std::slice::from_ref(m), &config.cgroup_parent)
                })
                .collect(),
            devices_mount,
            oci: None,
        };
        if let Rootfs::Overlay {
            upper: Some(upper), ..
        } = &config.rootfs
        {
            let work = plan::work_dir_of(upper);
            if !work.exists() {
                st.overlay_work = Some(work);
            }
        }
        let state_path = st.create(&config.state_dir)?;
        let instance = Instance {
            state_path,
            state: st,
            hierarchy: hierarchy.clone(),
            cgroup: None,
            loop_device: None,
            init: None,
            network: None,
            devices: None,
            limits: None,
            stats: None,
            notes: Vec::new(),
            done: false,
        };
        Ok((instance, binds))
    }

    /// After a successful `create`: records the container as created (its pid and
    /// start time, the OCI data) and lets go of it: from now on the state file alone
    /// names what it holds, and the drop guard tears nothing down.
    fn hand_over(&mut self, mut oci: state::OciInfo) -> Result<u32, RuntimeError> {
        let pid = self.init.as_ref().map_or(0, |i| i.pid as u32);
        oci.init_start = state::process_start_time(pid).unwrap_or(0);
        self.state.oci = Some(oci);
        self.state.update(&self.state_path)?;
        self.done = true;
        self.init = None;
        self.network = None;
        self.cgroup = None;
        self.devices = None;
        // Autoclear: the device goes when the container's mount of it does.
        self.loop_device = None;
        Ok(pid)
    }
}

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

fn ns_to_duration(now: u64, t0: u64) -> Duration {
    Duration::from_nanos(now.saturating_sub(t0))
}

fn check_rootfs(rootfs: &Rootfs) -> Result<(), RuntimeError> {
    let bad = |path: &Path, problem: &str| RuntimeError::Rootfs {
        path: path.to_owned(),
        problem: problem.to_owned(),
    };
    match rootfs {
        Rootfs::Dir { path, .. } | Rootfs::Overlay { lower: path, .. } => {
            if !path.is_dir() {
                return Err(bad(
                    path,
                    "not a directory; build one with `isolab image build busybox DIR`",
                ));
            }
        }
        Rootfs::Ext4Image { file, .. } => {
            if !file.is_file() {
                return Err(bad(
                    file,
                    "not a file; make one with `isolab image pack DIR --to ext4 FILE`",
                ));
            }
        }
    }
    Ok(())
}

/// The init process while it runs.
struct Init {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    reaped: bool,
}

/// Everything one container holds on the host; [`Instance::teardown`] (or the drop
/// guard) releases it.
struct Instance {
    state_path: PathBuf,
    state: State,
    hierarchy: Hierarchy,
    cgroup: Option<Cgroup>,
    loop_device: Option<LoopDevice>,
    init: Option<Init>,
    /// The bridge attachment to undo: mode and the namespace path it was attached in.
    network: Option<(crate::network::NetworkMode, PathBuf)>,
    /// The v1 devices cgroup with the device allowlist.
    devices: Option<devices::DevicesCgroup>,
    /// The limits read back from the cgroup.
    limits: Option<Limits>,
    /// The cgroup's counters after the container exited.
    stats: Option<Stats>,
    /// See [`Exit::notes`].
    notes: Vec<String>,
    done: bool,
}

/// The network module's mode for a bridge network; `None` for `none` and `host`.
fn bridge_mode(choice: &NetworkChoice) -> Option<crate::network::NetworkMode> {
    use crate::network::{BridgeConfig, NetworkMode, Proto, Publish};
    match choice {
        NetworkChoice::None | NetworkChoice::Host => None,
        NetworkChoice::Bridge { publish } => Some(NetworkMode::Bridge(BridgeConfig {
            publish: publish
                .iter()
                .map(|p| Publish {
                    host_port: p.host,
                    container_port: p.container,
                    protocol: Proto::Tcp,
                })
                .collect(),
            ..BridgeConfig::default()
        })),
    }
}

/// Write end of the signal self-pipe of the one [`run`] that forwards signals.
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = [sig as u8];
        // SAFETY: write(2) is async-signal-safe; the buffer is a local byte.
        unsafe { libc::write(fd, byte.as_ptr().cast(), 1) };
    }
}

/// Signals a front end forwards to its container.
const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Handlers that write forwarded signals to a pipe, restored on drop.
struct SignalForwarder {
    read: OwnedFd,
    _write: OwnedFd,
    old: Vec<(libc::c_int, libc::sigaction)>,
}

impl SignalForwarder {
    /// Installs the handlers; `None` when another run of this process already forwards.
    fn install() -> Result<Option<SignalForwarder>, RuntimeError> {
        let (read, write) = sys::pipe().map_err(|source| RuntimeError::Syscall {
            op: "pipe2 (signal forwarding)",
            source,
        })?;
        if SIGNAL_PIPE
            .compare_exchange(-1, write.as_raw_fd(), Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return Ok(None);
        }
        let mut old = Vec::new();
        for sig in FORWARDED {
            // SAFETY: zeroed sigaction structs are valid; the handler is an
            // async-signal-safe extern "C" fn; `prev` receives the old action.
            unsafe {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                let mut prev: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, &action, &mut prev) == 0 {
                    old.push((sig, prev));
                }
            }
        }
        Ok(Some(SignalForwarder {
            read,
            _write: write,
            old,
        }))
    }
}

impl Drop for SignalForwarder {
    fn drop(&mut self) {
        for (sig, prev) in &self.old {
            // SAFETY: restores an action previously returned by sigaction.
            unsafe { libc::sigaction(*sig, prev, std::ptr::null_mut()) };
        }
        SIGNAL_PIPE.store(-1, Ordering::SeqCst);
    }
}

/// `CLONE_INTO_CGROUP` of `<linux/sched.h>`: start the child in the cgroup2
/// directory `clone_args.cgroup`.
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// `struct clone_args` of `<linux/sched.h>` (clone3).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `clone3(2)` without `CLONE_VM`: like fork, the child gets a copy of the address
/// space and continues on a copy of this stack; returns 0 in the child, the pid (or
/// -1) in the parent.
///
/// # Safety
/// The caller may be multi-threaded: in the child, only allocation-free code that
/// never returns may run (another thread may have held the allocator's lock).
unsafe fn clone3(args: &CloneArgs) -> libc::c_long {
    // SAFETY: a valid clone_args of the size passed; the caller's contract covers
    // what the child runs.
    unsafe {
        libc::syscall(
            libc::SYS_clone3,
            args as *const CloneArgs,
            std::mem::size_of::<CloneArgs>(),
        )
    }
}

impl Instance {
    fn start_and_wait(
        &mut self,
        config: &ContainerConfig,
        oci: Option<&state::OciInfo>,
        binds: Vec<plan::BindSource>,
        t0: u64,
        trace: &mut Trace,
        mark: impl Fn(&mut Trace, Phase),
    ) -> Result<i32, RuntimeError> {
        let forwarder = if config.forward_signals {
            SignalForwarder::install()?
        } else {
            None
        };
        // Mount points (the mounts themselves live only in the container's namespace).
        for dir in plan::host_dirs(config) {
            fs::create_dir_all(&dir).map_err(|source| RuntimeError::Host {
                op: "create the mount point",
                path: dir.clone(),
                source,
            })?;
        }
        if let Rootfs::Overlay {
            upper: Some(upper), ..
        } = &config.rootfs
        {
            for dir in [upper.clone(), plan::work_dir_of(upper)] {
                fs::create_dir_all(&dir).map_err(|source| RuntimeError::Host {
                    op: "create the overlay directory",
                    path: dir.clone(),
                    source,
                })?;
            }
        }

        // Cgroup with limits, read back.
        let rel = config.cgroup_rel();
        let cgroup_err = |op: &'static str| {
            let rel = rel.clone();
            move |source| RuntimeError::Cgroup { rel, op, source }
        };
        let cgroup = Cgroup::create(&self.hierarchy, &rel).map_err(cgroup_err("create"))?;
        let cgroup = self.cgroup.insert(cgroup);
        if !config.limits.is_empty() {
            let wanted = for_hierarchy(&config.limits, self.hierarchy.version())?;
            cgroup
                .apply(&wanted)
                .map_err(cgroup_err("apply the limits"))?;
            let mut got = cgroup
                .read_limits()
                .map_err(cgroup_err("read the limits back"))?;
            // What the unified files hold now, in the kernel's formatting.
            got.unified = cgroup
                .read_unified(config.limits.unified.keys().map(String::as_str))
                .map_err(cgroup_err("read the unified files back"))?;
            if !wanted.differences(&got).is_empty() {
                return Err(RuntimeError::LimitsMismatch {
                    rel,
                    wanted: format!("{wanted:?}"),
                    got: format!("{got:?}"),
                });
            }
            self.limits = Some(got);
        }
        let target = cgroup
            .clone_target()
            .map_err(cgroup_err("open the task lists"))?;
        if target.v1.len() > child::MAX_CGROUP_FILES {
            return Err(RuntimeError::InvalidConfig {
                what: "v1 cgroup hierarchies",
                value: target.v1.len().to_string(),
                expected: "at most 16",
            });
        }
        self.setup_devices(config, &rel)?;
        mark(trace, Phase::Cgroup);

        // Root filesystem source.
        if let Rootfs::Ext4Image { file, readonly } = &config.rootfs {
            let device = LoopDevice::attach(file, *readonly)?;
            self.state.image = Some(file.clone());
            self.state.loop_device = Some(device.path().to_owned());
            self.loop_device = Some(device);
            self.state.update(&self.state_path)?;
        }
        let layout = plan::layout_for(
            config,
            self.loop_device.as_ref().map(|d| d.path().to_owned()),
            binds,
            self.devices.is_some(),
        );
        let plan = plan::build(config, &layout)?;
        mark(trace, Phase::Plan);

        // Pipes: go (parent -> child) and report (child -> parent).
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

        let flags = clone_flags(config);
        // Namespaces to join, opened here; the child joins them first (setns).
        let mut joined: Vec<OwnedFd> = Vec::new();
        for (_, path) in config.oci.namespaces.iter().flat_map(|n| &n.join) {
            let fd = fs::File::open(path).map_err(|source| RuntimeError::Host {
                op: "open the namespace to join",
                path: path.clone(),
                source,
            })?;
            joined.push(OwnedFd::from(fd));
        }
        let mut ns_fds = [-1; child::MAX_JOINED];
        if joined.len() > ns_fds.len() {
            return Err(RuntimeError::InvalidConfig {
                what: "namespaces to join",
                value: joined.len().to_string(),
                expected: "at most one path for each of mount, uts, ipc, network and cgroup",
            });
        }
        for (slot, fd) in ns_fds.iter_mut().zip(&joined) {
            *slot = fd.as_raw_fd();
        }
        let mut pidfd: libc::c_int = -1;
        // The cgroup2 part of the cgroup is joined by clone3 itself (Linux 5.7; the
        // runtime needs 5.9 for close_range anyway), the v1 part by the child.
        let args = CloneArgs {
            flags: flags | target.v2_dir.as_ref().map_or(0, |_| CLONE_INTO_CGROUP),
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
        // SAFETY: the child only runs child::main, which never returns and never
        // allocates (see its docs).
        let pid = unsafe { clone3(&args) };
        if pid == 0 {
            child::main(&plan, fds);
        }
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
        drop(go_read);
        drop(report_write);
        drop(devices_tasks);
        drop(fifo);
        drop(joined);
        mark(trace, Phase::Clone);
        self.state.init_pid = Some(pid as u32);
        self.state.update(&self.state_path)?;

        if config.user_namespace {
            write_id_maps(pid)?;
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
        // The child is in its cgroups before the hooks see it and before its setup.
        self.await_joined(report_read.as_raw_fd(), &target.v1, &rel)?;
        drop(target);
        if !config.oci.hooks.create_runtime.is_empty() {
            let state = crate::hooks::state_json(config, oci, "creating", pid as u32);
            crate::hooks::run_all(&config.oci.hooks.create_runtime, "createRuntime", &state)?;
        }
        mark(trace, Phase::Network);
        sys::write_all(go_write.as_raw_fd(), &[child::GO]).map_err(|e| RuntimeError::Syscall {
            op: "write to the go pipe (the container's init died during setup)",
            source: e.to_io(),
        })?;
        drop(go_write);

        // Reports until the command's execve closes the pipe (create: until the
        // process says it is created).
        let mut setup_error = None;
        let mut created = false;
        let mut record = [0u8; Record::SIZE];
        while let Ok(true) = sys::read_exact(report_read.as_raw_fd(), &mut record) {
            let r = Record::decode(&record);
            match r.kind {
                KIND_PHASE => {
                    if let Some(p) = crate::trace::Phase::from_code(r.code) {
                        trace.push((p, ns_to_duration(r.ts, t0)));
                        if p == Phase::Created {
                            created = true;
                            break;
                        }
                    }
                }
                KIND_SETUP => setup_error = Some(setup_error_of(config, &plan, r)),
                KIND_EXEC => setup_error = Some(exec_error(config, r)),
                _ => {}
            }
        }
        drop(report_read);
        if config.lifecycle == Lifecycle::Create {
            return match setup_error {
                Some(e) => Err(e),
                None if created => Ok(0),
                None => Err(RuntimeError::Setup {
                    step: "set up the container (its process ended without a report)".into(),
                    source: io::Error::from_raw_os_error(libc::EPIPE),
                }),
            };
        }
        if setup_error.is_none() {
            mark(trace, Phase::Exec);
        }
        let status = self.wait(forwarder.as_ref())?;
        mark(trace, Phase::Reaped);
        if config.read_counters {
            self.read_counters();
        }
        match setup_error {
            Some(e) => Err(e),
            None => Ok(status),
        }
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

    /// The device allowlist: a v1 devices cgroup next to the container's cgroup, or a
    /// note saying why it is not enforced.
    fn setup_devices(&mut self, config: &ContainerConfig, rel: &Path) -> Result<(), RuntimeError> {
        match (&self.state.devices_mount, self.hierarchy.version()) {
            (Some(mount), _) => {
                let cgroup = devices::DevicesCgroup::create(mount, rel, &config.security.devices)?;
                self.devices = Some(cgroup);
            }
            (None, Version::V2) => self.notes.push(
                "device allowlist not enforced: on cgroup v2 it needs a BPF_CGROUP_DEVICE \
                 program, which isolab-runtime does not load yet (the container's /dev holds \
                 only the allowed devices, but CAP_MKNOD lets it create others; drop it with \
                 --cap-drop MKNOD)"
                    .to_owned(),
            ),
            (None, Version::V1) => self.notes.push(
                "device allowlist not enforced: no cgroup v1 devices hierarchy is mounted \
                 next to the other controllers"
                    .to_owned(),
            ),
        }
        Ok(())
    }

    /// Reads the cgroup's counters (and the limits, when none were asked for) after
    /// the container exited; failures become notes.
    fn read_counters(&mut self) {
        let Some(cgroup) = self.cgroup.as_ref() else {
            return;
        };
        let rel = self.state.cgroup.display().to_string();
        match cgroup.stats() {
            Ok(stats) => self.stats = Some(stats),
            Err(e) => self
                .notes
                .push(format!("statistics of cgroup {rel} not read: {e}")),
        }
        if self.limits.is_none() {
            match cgroup.read_limits() {
                Ok(limits) => self.limits = Some(limits),
                Err(e) => self
                    .notes
                    .push(format!("limits of cgroup {rel} not read back: {e}")),
            }
        }
    }

    fn setup_network(&mut self, config: &ContainerConfig) -> Result<(), RuntimeError> {
        // `none`: loopback is brought up by the container's init; `host`: nothing.
        let Some(mode) = bridge_mode(&config.network) else {
            return Ok(());
        };
        let Some(pid) = self.init.as_ref().map(|i| i.pid) else {
            return Ok(());
        };
        // Recorded before attaching, so that gc can undo a half-done attach.
        self.state.network = serde_json::to_value(&mode).ok();
        self.state.update(&self.state_path)?;
        let netns = PathBuf::from(format!("/proc/{pid}/ns/net"));
        crate::network::attach(&config.id, &netns, &mode).map_err(|e| RuntimeError::Network {
            mode: "bridge",
            problem: e.to_string(),
        })?;
        self.network = Some((mode, netns));
        Ok(())
    }

    /// Waits for init to exit, forwarding signals; returns its status.
    fn wait(&mut self, forwarder: Option<&SignalForwarder>) -> Result<i32, RuntimeError> {
        let Some(init) = self.init.as_mut() else {
            return Ok(255);
        };
        loop {
            let forwarded = forwarder.map_or(-1, |f| f.read.as_raw_fd());
            let ready =
                sys::poll_readable([init.pidfd.as_raw_fd(), forwarded], -1).map_err(|source| {
                    RuntimeError::Syscall {
                        op: "poll (wait for the container)",
                        source,
                    }
                })?;
            if ready[1] {
                let mut sigs = [0u8; 16];
                if let Ok(k) = sys::read(forwarded, &mut sigs) {
                    for &sig in &sigs[..k] {
                        // Best effort: an exited init is reaped just below.
                        let _ =
                            sys::pidfd_send_signal(init.pidfd.as_raw_fd(), libc::c_int::from(sig));
                    }
                }
            }
            if ready[0] {
                let mut status = 0;
                // SAFETY: waiting for our own child; status is valid storage.
                let r = unsafe { libc::waitpid(init.pid, &mut status, 0) };
                if r < 0 {
                    return Err(RuntimeError::Syscall {
                        op: "waitpid (the container's init)",
                        source: io::Error::last_os_error(),
                    });
                }
                init.reaped = true;
                return Ok(child::status_code(status));
            }
        }
    }

    /// Releases everything; returns every failure (the rest is still attempted).
    fn teardown(&mut self) -> Result<(), RuntimeError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        let mut failures = Vec::new();
        if let Some(init) = self.init.take() {
            if !init.reaped {
                let _ = sys::pidfd_send_signal(init.pidfd.as_raw_fd(), libc::SIGKILL);
                // SAFETY: reaping our own child.
                unsafe {
                    let mut status = 0;
                    libc::waitpid(init.pid, &mut status, 0);
                }
            }
        }
        if let Some((mode, netns)) = self.network.take() {
            if let Err(e) = crate::network::detach(&self.state.id, &netns, &mode) {
                failures.push(format!("detach the network: {e}"));
            }
        }
        if let Some(cgroup) = self.cgroup.take() {
            if let Err(e) = cgroup.remove() {
                failures.push(format!(
                    "remove cgroup {}: {e}",
                    self.state.cgroup.display()
                ));
            }
        }
        // After the main cgroup: its removal killed and waited for every task.
        if let Some(devices) = self.devices.take() {
            if let Err(e) = devices.remove() {
                failures.push(e);
            }
        }
        if let Some(device) = self.loop_device.take() {
            if let Err(e) = device.release(Duration::from_secs(2)) {
                failures.push(e.to_string());
            }
        }
        // The cgroups and the loop device are gone, unless something failed: then
        // `undo` retries them from the state, as gc would; it handles the
        // directories and the state file either way.
        let state = self.state.clone();
        if failures.is_empty() {
            failures.extend(state::undo_rest(&state, &self.state_path, true));
        } else {
            failures.extend(state::undo(&state, &self.state_path, &self.hierarchy));
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(RuntimeError::Teardown(failures))
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        // Errors were reported by the explicit teardown; this is the panic path.
        let _ = self.teardown();
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

fn exec_error(config: &ContainerConfig, r: Record) -> RuntimeError {
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

/// Maps container ids 0..65536 to host ids from [`USERNS_BASE`].
fn write_id_maps(pid: libc::pid_t) -> Result<(), RuntimeError> {
    let line = format!("0 {USERNS_BASE} {USERNS_SIZE}\n");
    for file in ["uid_map", "gid_map"] {
        let path = PathBuf::from(format!("/proc/{pid}/{file}"));
        fs::write(&path, &line).map_err(|source| RuntimeError::Host {
            op: "write the user namespace id map",
            path,
            source,
        })?;
    }
    Ok(())
}

/// The whole-disk block device that holds `path` (for io throttling of a root
/// filesystem): `stat` gives the file system's device; a partition is mapped to its
/// disk through `/sys/dev/block`.
pub fn backing_device(path: &Path) -> Result<isolab_cgroups::DeviceNumber, RuntimeError> {
    let disk =
        isolab_cgroups::DeviceNumber::backing_disk(path, Path::new("/sys")).map_err(|source| {
            RuntimeError::Host {
                op: "stat",
                path: path.to_owned(),
                source,
            }
        })?;
    disk.ok_or_else(|| RuntimeError::InvalidConfig {
        what: "io throttle device",
        value: path.display().to_string(),
        expected: "a path on a block device (tmpfs and overlay have none; pass MAJOR:MINOR)",
    })
}

/// The limits to write on a hierarchy of `version`. The runtime's interface (`--memory-swap`,
/// OCI's `memory.swap`) gives the swap limit as memory **plus** swap, as cgroup v1's memsw;
/// v2's `memory.swap.max` is swap alone, so there it is the difference (runc and crun convert
/// the same way), and a swap limit without a memory limit, or below it, cannot be expressed.
/// Borrowed as given unless there is something to convert (the start path copies nothing).
fn for_hierarchy(limits: &Limits, version: Version) -> Result<Cow<'_, Limits>, RuntimeError> {
    let Some(memsw) = limits.memory_swap_max.filter(|_| version == Version::V2) else {
        return Ok(Cow::Borrowed(limits));
    };
    let memory = limits
        .memory_max
        .filter(|m| m.0 <= memsw.0)
        .ok_or_else(|| RuntimeError::InvalidConfig {
            what: "memory plus swap limit",
            value: format!("{memsw} with memory limit {:?}", limits.memory_max),
            expected: "a memory limit too, at most the memory plus swap limit",
        })?;
    let mut out = limits.clone();
    out.memory_swap_max = Some(Bytes(memsw.0 - memory.0));
    Ok(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_memory_plus_swap_limit_becomes_swap_alone_on_v2() {
        let limits = Limits {
            memory_max: Some(Bytes::mib(32)),
            memory_swap_max: Some(Bytes::mib(48)),
            ..Limits::default()
        };
        let v1 = for_hierarchy(&limits, Version::V1).unwrap();
        assert_eq!(v1.memory_swap_max, Some(Bytes::mib(48)));
        let v2 = for_hierarchy(&limits, Version::V2).unwrap();
        assert_eq!(v2.memory_swap_max, Some(Bytes::mib(16)));
        assert_eq!(v2.memory_max, Some(Bytes::mib(32)));
        let no_swap = Limits {
            memory_swap_max: Some(Bytes::mib(32)),
            ..limits.clone()
        };
        assert_eq!(
            for_hierarchy(&no_swap, Version::V2)
                .unwrap()
                .memory_swap_max,
            Some(Bytes(0))
        );
        for bad in [
            Limits {
                memory_max: None,
                ..limits.clone()
            },
            Limits {
                memory_swap_max: Some(Bytes::mib(16)),
                ..limits.clone()
            },
        ] {
            let err = for_hierarchy(&bad, Version::V2).unwrap_err().to_string();
            assert!(err.contains("memory plus swap"), "{err}");
        }
    }
    use isolab_cgroups::{Bytes, IdSet, Limits};

    #[test]
    fn limits_compare_with_page_rounding() {
        let wanted = Limits {
            memory_max: Some(Bytes(100_000_000)),
            pids_max: Some(10),
            ..Limits::default()
        };
        let mut got = wanted.clone();
        got.memory_max = Some(Bytes(99_999_744));
        got.cpuset = Some(IdSet::default());
        assert!(wanted.differences(&got).is_empty());
        got.pids_max = Some(11);
        assert!(!wanted.differences(&got).is_empty());
    }

    #[test]
    fn clone_args_size() {
        assert_eq!(std::mem::size_of::<CloneArgs>(), 88);
    }

    #[test]
    fn backing_device_of_root() {
        let d = backing_device(Path::new("/")).unwrap();
        assert!(d.major > 0);
        assert!(backing_device(Path::new("/proc")).is_err());
    }
}
