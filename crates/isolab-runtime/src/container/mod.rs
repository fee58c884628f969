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

mod cgroup;
pub(crate) mod child;
pub mod devices;
pub mod exec;
pub(crate) mod plan;
mod signals;
mod spawn;

pub use cgroup::backing_device;

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{Cgroup, Hierarchy, Limits, Stats};

use crate::config::{ContainerConfig, Lifecycle, NetworkChoice, Rootfs};
use crate::error::RuntimeError;
use crate::loopdev::LoopDevice;
use crate::state::{self, State};
use crate::sys;
use crate::trace::{Phase, Trace};
use signals::SignalForwarder;
use spawn::{read_reports, Handshake};

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
            host_mounts: config
                .host_mounts_root()
                .map(|root| std::fs::canonicalize(root).unwrap_or_else(|_| root.to_owned())),
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

/// Creates the mount points (the mounts themselves live only in the container's
/// namespace) and an overlay's upper and work directories.
fn make_host_dirs(config: &ContainerConfig) -> Result<(), RuntimeError> {
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
    Ok(())
}

impl Instance {
    /// Starts the container and waits for it (for `create`: until its process is
    /// created): the steps below, one function each, as youki's builder hands off to
    /// its init process.
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
        make_host_dirs(config)?;
        let rel = config.cgroup_rel();
        let target = self.create_cgroup(config, &rel)?;
        self.setup_devices(config, &rel)?;
        mark(trace, Phase::Cgroup);
        let plan = self.plan(config, oci, binds)?;
        mark(trace, Phase::Plan);
        let handshake = self.spawn(config, &plan, &target)?;
        mark(trace, Phase::Clone);
        self.release(config, &handshake, target, &rel)?;
        mark(trace, Phase::Network);
        let Handshake { go, report } = handshake;
        sys::write_all(go.as_raw_fd(), &[child::GO]).map_err(|e| RuntimeError::Syscall {
            op: "write to the go pipe (the container's init died during setup)",
            source: e.to_io(),
        })?;
        let pid = self.init.as_ref().map_or(0, |i| i.pid as u32);
        let runtime_hooks = spawn::RuntimeHooks {
            config,
            oci,
            pid,
            go,
        };
        let (setup_error, created) = read_reports(config, &plan, report, runtime_hooks, t0, trace);
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

    /// Attaches an ext4 root to a loop device (recorded in the state file) and builds
    /// the child's plan.
    fn plan(
        &mut self,
        config: &ContainerConfig,
        oci: Option<&state::OciInfo>,
        binds: Vec<plan::BindSource>,
    ) -> Result<plan::Plan, RuntimeError> {
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
        plan::build(config, &layout, oci)
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

#[cfg(test)]
mod tests {
    use super::cgroup::for_hierarchy;
    use super::spawn::CloneArgs;
    use super::*;
    use isolab_cgroups::Version;

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
