//! The `vm`, `vm+isolab` and `vm+docker` platforms: the workload runs in a QEMU
//! guest ([`isolab_vm`]), booted per run inside the run's instance cgroup.
//!
//! - vCPUs are the shape's cpus; the guest's memory is the shape's memory (for a
//!   container in the VM, that plus [`INNER_HEADROOM`] for the guest around it).
//! - `quota` puts the CFS quota on QEMU's cgroup (all its threads: vCPUs and device
//!   emulation); `pinned` binds QEMU's cgroup to the cpuset and pins each vCPU
//!   thread to one of its cpus. The memory limit becomes the guest's RAM, not a
//!   cgroup limit (QEMU needs memory beyond the guest's), and the pids limit
//!   applies inside the guest for a container in the VM only; the run's notes say so.
//! - `vm+isolab` runs the command through `isolab-runtime` inside the guest (a pure
//!   cgroup2 guest), with the shape and placement as runtime flags in the guest's
//!   cpu numbering, and brings its report back through the shared working directory:
//!   the limits read back there and the container's counters are the run's.
//! - `vm+docker` does the same with the guest image's own dockerd (started before
//!   the measured time) and `docker run` flags; the container's cgroup files come
//!   back through the working directory. The experiment's image must have Docker
//!   (`isolab image build bench-docker DIR`).
//! - Every level names its accelerator (`vm(tcg)`, `vm(kvm)+isolab`): `prepare`
//!   detects whether KVM works only when a level asks for it, and refuses it when it
//!   does not; TCG rows are emulation and their notes say so.
//! - Disk workloads get a scratch virtio disk as the working directory (9p would be
//!   measured instead of a disk); the files are copied in and out outside the
//!   measured time.
//! - Every guest has a network (the levels' network is `bridge`): a virtio-net
//!   device on a tap of isolab's bridge (`isolab0`, the runtime's `bridge`
//!   network), an address leased from the containers' allocator under the VM's
//!   container id (`isolab-exp3-pid42-c0-r1`), and the bridge's address as the
//!   guest's gateway, which is where a workload's `{server}` on the host is. The
//!   lease is released when the run ends, however it ends; `gc` releases those of
//!   dead experiments (the tap itself goes with QEMU).
//! - Services: the command runs in the guest until stopped (for `vm+ENGINE`, in the
//!   engine's container on the guest's host network); it is ready when the guest's
//!   address accepts a TCP connection on its port from the host, and stopping it
//!   powers the guest off. Its limits are QEMU's cgroup's as read back and the
//!   guest's RAM, as for a measured run; a container's limits in the guest are
//!   applied but not read back while it runs.
//! - A service stack's components on `vm+isolab` and `vm+docker` share one guest, as
//!   containers of the level's engine (seed 003's container host, see [`shared`]), unless
//!   the level says `stack_guests = "per-component"`; a plain `vm` boots a guest each.
//! - Neighbours (beside a subject or a service stack) are VMs of their own, plain
//!   guests from the same kernel, disk and accelerator, QEMU in each neighbour's
//!   cgroup with the reservation's limits (see [`neighbours`]); network neighbours
//!   stream from their guests to iperf3 servers in a namespace on isolab's bridge, and
//!   the `net` reservation shapes each one's tap.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isolab_cgroups::{Bytes, IdSet, Limits};
use isolab_runtime::network::{BridgeConfig, Networking};
use isolab_store::{Telemetry as T, TelemetrySet};
use isolab_vm::{
    BaseDisk, DockerReport, GuestCommand, GuestOs, InnerContainer, InnerDocker, InnerEngine,
    KernelFiles, VmConfig,
};

use super::driver::{Driver, Executed, PlatformInfo, PlatformKind, Unavailable};
use super::instance::{stop_server, Supervisor};
use super::isolab::IsolabConfig;
use super::limit::limit;
use super::limit_flags::runtime_limit_flags;
use super::service::{ServiceSpec, Started};

mod neighbours;
mod net;
mod service;
mod shared;

use super::{Accel, Capabilities, Execution, ExitKind, Interrupt, Job, PlatformDef, PlatformError};
use neighbours::VmNeighbours;
use net::{dead_taps, VmNet};

/// Guest memory beyond the container's limit in `vm+isolab` (the guest kernel,
/// its page cache and the runtime).
pub const INNER_HEADROOM: Bytes = Bytes(512 << 20);

/// Guest memory when the shape sets none.
pub const DEFAULT_GUEST_MEMORY: Bytes = Bytes(2 << 30);

/// The scratch disk of disk workloads.
pub const SCRATCH_DISK: Bytes = Bytes(4 << 30);

/// Where the kernel, initramfs and disks are cached, unless `ISOLAB_VM_CACHE` (the
/// variable isolab-vm's tests read too) names another directory.
pub const VM_CACHE: &str = "/var/lib/isolab/vm";

/// The VM cache in use: `$ISOLAB_VM_CACHE`, else [`VM_CACHE`].
pub fn vm_cache() -> PathBuf {
    std::env::var_os("ISOLAB_VM_CACHE").map_or_else(|| PathBuf::from(VM_CACHE), PathBuf::from)
}

/// What a VM needs, prepared once per experiment.
#[derive(Debug, Clone)]
struct Prepared {
    kernel: KernelFiles,
    disk: BaseDisk,
    accel: isolab_vm::Accel,
}

/// The VM platforms: the cache, and what was prepared, per guest level (`None`: the
/// experiment's image with the host's release of Debian's kernel).
#[derive(Debug)]
pub(crate) struct VmPlatform {
    cache: PathBuf,
    prepared: Mutex<HashMap<Option<GuestOs>, Prepared>>,
    /// The guests stacks' components share, by stack run.
    shared: shared::SharedGuests,
}

fn vm_error(e: impl std::fmt::Display) -> PlatformError {
    PlatformError::Engine {
        engine: "qemu".into(),
        message: e.to_string(),
    }
}

/// The guest levels of `levels`, each once (`None` for a level without one).
fn guest_keys(levels: &[&PlatformDef]) -> Vec<(Option<GuestOs>, Option<PathBuf>)> {
    let mut keys: Vec<(Option<GuestOs>, Option<PathBuf>)> = Vec::new();
    for l in levels {
        let key = l.guest.as_ref().map(|g| g.os);
        if !keys.iter().any(|(k, _)| *k == key) {
            keys.push((key, l.guest.as_ref().map(|g| g.image.clone())));
        }
    }
    keys
}

impl VmPlatform {
    pub(crate) fn new() -> VmPlatform {
        VmPlatform {
            cache: vm_cache(),
            prepared: Mutex::new(HashMap::new()),
            shared: shared::SharedGuests::default(),
        }
    }

    /// The accelerator for `levels` (all VM levels of the experiment) with `kernel`: KVM
    /// when one asks for it and it works (refused when it does not), else TCG.
    fn accel(
        levels: &[&PlatformDef],
        kernel: &KernelFiles,
        qemu: &Path,
    ) -> Result<isolab_vm::AccelReport, PlatformError> {
        let wants_kvm = levels.iter().any(|d| d.accel == Some(Accel::Kvm));
        if !wants_kvm {
            return Ok(isolab_vm::AccelReport {
                accel: isolab_vm::Accel::Tcg,
                reason:
                    "the spec asks for TCG (vm(tcg)): software emulation, whatever KVM can do here"
                        .into(),
            });
        }
        let report = isolab_vm::detect_accel(kernel, qemu, isolab_vm::DEFAULT_PROBE_TIMEOUT);
        if report.accel != isolab_vm::Accel::Kvm {
            return Err(vm_error(format!(
                "a platform level asks for KVM (vm(kvm)) but it does not work here: {}; use vm(tcg) (emulation) instead",
                report.reason
            )));
        }
        Ok(report)
    }

    /// Fetches the kernel, packs the image as a disk, and settles the accelerator for
    /// `levels` (all VM levels of the experiment), once per guest level (`image` is the
    /// experiment's, a guest level's is its own); returns the environment's entries.
    pub(crate) fn prepare(
        &self,
        levels: &[&PlatformDef],
        image: &Path,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        let qemu = PathBuf::from(isolab_vm::QEMU);
        let mut env = Vec::new();
        for (guest, guest_image) in guest_keys(levels) {
            let image = guest_image.as_deref().unwrap_or(image);
            let kernel = match guest {
                None => isolab_vm::prepare_kernel(&self.cache.join("kernel"))?,
                Some(os) => os.prepare_kernel(
                    &self.cache.join("kernel"),
                    Path::new("/etc/apt"),
                    &isolab_tools::SystemTools,
                )?,
            };
            let disk = isolab_vm::prepare_disk(image, &self.cache.join("disk"))?;
            let report = Self::accel(levels, &kernel, &qemu)?;
            let mut config = VmConfig::new(
                kernel.clone(),
                disk.clone(),
                report.accel,
                "/tmp",
                "/tmp/unused",
            );
            config.qemu = qemu.clone();
            let e = isolab_vm::environment(&config, &report)?;
            let prefix = match guest {
                None => "vm.".to_owned(),
                Some(os) => format!("vm.guest.{os}."),
            };
            // QEMU, the machine and the accelerator are every guest's: recorded once.
            if !env.iter().any(|(k, _): &(String, String)| k == "vm.qemu") {
                env.extend([
                    ("vm.qemu".to_owned(), e.qemu_version.clone()),
                    ("vm.machine".to_owned(), e.machine.clone()),
                    ("vm.cpu_model".to_owned(), e.cpu_model.clone()),
                    ("vm.accel".to_owned(), e.accel.to_string()),
                    ("vm.accel_reason".to_owned(), e.accel_reason.clone()),
                    (
                        "vm.network".to_owned(),
                        format!(
                            "virtio-net on a tap of bridge {} ({}), the guest's address leased per run",
                            isolab_runtime::network::DEFAULT_BRIDGE,
                            isolab_runtime::network::DEFAULT_SUBNET
                        ),
                    ),
                ]);
            }
            env.extend([
                (
                    format!("{prefix}kernel"),
                    format!("{} {}", e.kernel_package, e.kernel_version),
                ),
                (format!("{prefix}kernel_release"), e.kernel_release),
                (format!("{prefix}disk_sha256"), e.disk_sha256),
            ]);
            if guest.is_some() {
                env.extend([
                    (
                        format!("{prefix}os_release"),
                        isolab_vm::guest_os::os_release(image)
                            .unwrap_or_else(|| "unknown (no etc/os-release)".into()),
                    ),
                    (format!("{prefix}image"), image.display().to_string()),
                    (
                        format!("{prefix}cgroup"),
                        "v2 (the agent mounts a pure cgroup2 hierarchy)".into(),
                    ),
                ]);
            }
            self.prepared
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(
                    guest,
                    Prepared {
                        kernel,
                        disk,
                        accel: report.accel,
                    },
                );
        }
        Ok(env)
    }

    /// [`Self::prepare`] of the guest levels of `levels` not prepared yet for an
    /// accelerator that serves them (the plain and inner VM levels share one kernel and
    /// disk per guest level, and record them in the environment once).
    pub(crate) fn prepare_once(
        &self,
        levels: &[&PlatformDef],
        image: &Path,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        let wants_kvm = levels.iter().any(|d| d.accel == Some(Accel::Kvm));
        let todo: Vec<&PlatformDef> = {
            let prepared = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
            levels
                .iter()
                .copied()
                .filter(|l| {
                    !prepared
                        .get(&l.guest.as_ref().map(|g| g.os))
                        .is_some_and(|p| !wants_kvm || p.accel == isolab_vm::Accel::Kvm)
                })
                .collect()
        };
        if todo.is_empty() {
            return Ok(Vec::new());
        }
        self.prepare(&todo, image)
    }

    fn prepared(&self, job: &Job) -> Result<Prepared, PlatformError> {
        let key = job.platform.guest.as_ref().map(|g| g.os);
        if let Some(p) = self
            .prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
        {
            return Ok(p);
        }
        let image = job
            .image
            .as_deref()
            .ok_or_else(|| vm_error("no image was given for the guest's disk"))?;
        self.prepare(&[&job.platform], image)?;
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned()
            .ok_or_else(|| vm_error("the VM platform was not prepared"))
    }
}

/// The guest's shape from the job's limits: vCPUs (the quota rounded up, else the
/// cpuset's size when pinned, else every cpu isolab may use) and the host cpus to
/// pin them to (a pinned guest's; a quota'd guest in a host cpu pool has a cpuset
/// too, which QEMU's cgroup applies, but its vCPUs float in it).
fn guest_cpus(limits: &Limits, host_cpus: usize) -> (u32, Option<Vec<u32>>) {
    if let Some(q) = &limits.cpu {
        return ((q.cpus().ceil() as u32).max(1), None);
    }
    if let Some(set) = &limits.cpuset {
        let ids: Vec<u32> = set.iter().copied().collect();
        return (ids.len().max(1) as u32, Some(ids));
    }
    ((host_cpus as u32).max(1), None)
}

/// The limits QEMU's cgroup gets: cpu quota, cpuset and io throttles (memory and
/// pids describe the guest, not QEMU).
fn qemu_limits(limits: &Limits) -> Limits {
    Limits {
        cpu: limits.cpu,
        cpuset: limits.cpuset.clone(),
        mems: limits.mems.clone(),
        io: limits.io.clone(),
        ..Limits::default()
    }
}

/// The runtime's limits inside the guest (`vm+isolab`): the job's, with the cpuset
/// renumbered to the guest's vCPUs (vCPU i is pinned to the i-th host cpu; a
/// quota'd guest in a host cpu pool has fewer vCPUs than the pool has cpus).
fn inner_limits(limits: &Limits) -> Limits {
    let mut inner = limits.clone();
    if let Some(set) = &limits.cpuset {
        let (vcpus, _) = guest_cpus(limits, set.len());
        inner.cpuset = Some(IdSet::from_iter(0..(set.len() as u32).min(vcpus)));
    }
    inner.mems = None;
    inner.io = Vec::new(); // the guest's disks are not the host's
    inner
}

/// The report directory of `vm+docker` in the run's working directory.
const DOCKER_REPORT: &str = ".isolab-docker";

/// `vm+docker`'s name in specs.
fn vm_docker() -> PlatformKind {
    PlatformKind::from_engine("vm+docker")
}

/// The container engine in the guest of a `vm+ENGINE` platform.
#[derive(Debug, Clone)]
enum GuestEngine {
    /// `vm+isolab`: isolab-runtime, brought in from the host.
    Isolab(IsolabConfig),
    /// `vm+docker`: the image's dockerd.
    Docker,
}

/// The VM platforms' drivers: a plain `vm`, `vm+isolab` (isolab-runtime in the
/// guest) and `vm+docker` (the image's dockerd in the guest), sharing one prepared
/// kernel and disk.
pub(crate) fn drivers(runtime: &IsolabConfig) -> Vec<Box<dyn Driver>> {
    let vm = Arc::new(VmPlatform::new());
    [
        None,
        Some(GuestEngine::Isolab(runtime.clone())),
        Some(GuestEngine::Docker),
    ]
    .into_iter()
    .map(|engine| {
        Box::new(VmDriver {
            vm: vm.clone(),
            engine,
        }) as Box<dyn Driver>
    })
    .collect()
}

/// A VM platform: plain, or with a container engine inside the guest.
struct VmDriver {
    vm: Arc<VmPlatform>,
    /// The container engine inside the guest (`vm+ENGINE`).
    engine: Option<GuestEngine>,
}

impl Driver for VmDriver {
    fn info(&self) -> PlatformInfo {
        use isolab_engines::{LimitKinds, NetworkMode};
        let (kind, summary) = match self.engine {
            None => (PlatformKind::VM, "a QEMU guest booted per run (KVM or TCG, named in the level: vm(kvm), vm(tcg)); the shape's memory is the guest's RAM"),
            Some(GuestEngine::Isolab(_)) => (PlatformKind::VM_ISOLAB, "isolab-runtime in a QEMU guest (a container in a VM), limits applied and read back in the guest"),
            Some(GuestEngine::Docker) => (vm_docker(), "Docker in a QEMU guest (the image's dockerd; a container in a VM), limits applied by Docker and read back from the container's cgroup in the guest; needs an image with Docker (bench-docker)"),
        };
        PlatformInfo {
            kind,
            summary,
            capabilities: Capabilities {
                // Every guest has a virtio-net device on a tap of isolab's bridge.
                networks: &[NetworkMode::Bridge],
                limits: LimitKinds {
                    // A plain guest's processes are not the host's: no pids limit.
                    pids: self.engine.is_some(),
                    ..LimitKinds::ALL
                },
                perf_follows_workload: false,
                needs_image: true,
                services: true,
                vm: true,
                // QEMU runs in the instance's cgroup, whose cpuset the pool sets.
                daemons: &[],
                // The working directory reaches the guest as it does today, not on a device of its own.
                storage: &[isolab_engines::StorageLevel::Bind],
            },
        }
    }

    fn available(&self) -> Result<String, Unavailable> {
        let qemu = isolab_tools::Program::new(isolab_vm::QEMU, "qemu-system-x86");
        let path = qemu.find()?;
        let kvm = if Path::new("/dev/kvm").exists() {
            "/dev/kvm present (vm(kvm) is probed at prepare)"
        } else {
            "no /dev/kvm: vm(tcg) only"
        };
        let host_local = Path::new(isolab_runtime::network::DEFAULT_PLUGIN_DIR).join("host-local");
        if !host_local.is_file() {
            return Err(Unavailable::Missing {
                path: host_local.display().to_string(),
                needed_for: "the guest's address comes from isolab's bridge allocator",
                fix: "apt-get install containernetworking-plugins",
            });
        }
        if isolab_tools::find_program("iptables").is_none() {
            return Err(Unavailable::Missing {
                path: "iptables".into(),
                needed_for: "the bridge's egress masquerade rule",
                fix: "apt-get install iptables",
            });
        }
        if !Path::new("/dev/net/tun").exists() {
            return Err(Unavailable::Missing {
                path: "/dev/net/tun".into(),
                needed_for: "the guest's network is a tap",
                fix: "modprobe tun",
            });
        }
        let docker = match self.engine {
            Some(GuestEngine::Docker) => {
                "; the experiment's image must have Docker (isolab image build bench-docker DIR)"
            }
            _ => "",
        };
        Ok(format!("{}; {kvm}{docker}", path.display()))
    }

    fn prepare(
        &self,
        levels: &[&PlatformDef],
        image: Option<&Path>,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        let Some(image) = image else {
            return Ok(Vec::new());
        };
        if let Some(GuestEngine::Docker) = self.engine {
            isolab_vm::docker::check_image(image)?;
        }
        let mut env = self.vm.prepare_once(levels, image)?;
        env.extend(super::image_entries(self.info().kind.as_str(), image));
        Ok(env)
    }

    fn execute(&self, supervisor: &Supervisor, job: &Job, interrupt: &Interrupt) -> Executed {
        execute(
            supervisor,
            &self.vm,
            self.engine.as_ref(),
            host_cpus(),
            job,
            interrupt,
        )
    }

    /// Neighbours beside a stack in VMs are VMs of their own, as beside a subject.
    fn beside_neighbours(
        &self,
        supervisor: &Supervisor,
        job: &Job,
        interrupt: &Interrupt,
        body: &mut dyn FnMut() -> Executed,
    ) -> Executed {
        let neighbours = VmNeighbours {
            vm: &self.vm,
            host_cpus: host_cpus(),
        };
        supervisor.beside_neighbours(
            job,
            interrupt,
            super::NeighbourHost::Guests(&neighbours),
            body,
        )
    }

    fn start_service(&self, supervisor: &Supervisor, job: &Job, spec: ServiceSpec) -> Started<'_> {
        if let (Some(engine), Some(place)) = (&self.engine, &job.stack) {
            if job.platform.stack_guests == Some(super::StackGuests::Shared) {
                return shared::start_component(
                    supervisor,
                    &self.vm,
                    engine,
                    host_cpus(),
                    job,
                    place,
                    spec,
                );
            }
        }
        service::start_service(
            supervisor,
            &self.vm,
            self.engine.as_ref(),
            host_cpus(),
            job,
            spec,
        )
    }

    fn gc(&self, prefixes: &[String]) -> Result<Vec<String>, PlatformError> {
        // The three VM drivers share the bridge's records: the plain `vm` collects.
        if self.engine.is_some() {
            return Ok(Vec::new());
        }
        let net = Networking::system();
        let mut removed = Vec::new();
        for (bridge, id) in dead_taps(&net.recorded_taps()?, prefixes) {
            let Ok(id) = id.parse::<isolab_runtime::ContainerId>() else {
                continue;
            };
            let cfg = BridgeConfig {
                bridge,
                ..BridgeConfig::default()
            };
            removed.extend(
                net.detach_tap(&id, &cfg)?
                    .into_iter()
                    .map(|r| format!("{r} (VM {id})")),
            );
        }
        // The leases of the neighbour servers' namespaces on the bridge (`…-nbnet`
        // beside a run, `…-netsrv` for the calibration) of dead experiments.
        let servers: Vec<(String, String)> = net
            .recorded_attachments()?
            .into_iter()
            .filter(|(_, id)| id.ends_with("-nbnet") || id.ends_with("-netsrv"))
            .collect();
        for (bridge, id) in dead_taps(&servers, prefixes) {
            let Ok(id) = id.parse::<isolab_runtime::ContainerId>() else {
                continue;
            };
            let mode = isolab_runtime::network::NetworkMode::Bridge(BridgeConfig {
                bridge,
                ..BridgeConfig::default()
            });
            removed.extend(
                net.cleanup_leftovers(&id, &mode)?
                    .into_iter()
                    .map(|r| format!("{r} (neighbour servers {id})")),
            );
        }
        // A VM's last detach takes the bridge along; one left before that (or by a
        // killed isolab whose taps were collected above) goes here if it is idle.
        removed.extend(net.remove_idle_bridge(&BridgeConfig::default())?);
        Ok(removed)
    }
}

/// The cpus isolab may use.
fn host_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// What a VM for `job` is: its configuration, the guest command and the sizes the
/// run reports.
struct GuestPlan {
    config: VmConfig,
    command: GuestCommand,
    vcpus: u32,
    /// The guest's RAM.
    memory: Bytes,
    /// The shape's memory (the guest's RAM in a plain VM, the container's limit in
    /// `vm+ENGINE`).
    shape_memory: Bytes,
    /// isolab-runtime's report in the workdir (`vm+isolab`).
    report_path: PathBuf,
    /// The Docker container's report directory in the workdir (`vm+docker`).
    docker_report: PathBuf,
}

/// Plans the VM of `job`; a `service` runs in the guest until stopped. A container
/// engine in the guest runs the command on the guest's host network (so that the
/// guest's address is a service's, and a measured command reaches the bridge).
fn guest_plan(
    vm: &VmPlatform,
    engine: Option<&GuestEngine>,
    host_cpus: usize,
    job: &Job,
) -> Result<GuestPlan, PlatformError> {
    let prepared = vm.prepared(job)?;
    let inner = engine.is_some();
    let (vcpus, pin) = guest_cpus(&job.limits, host_cpus);
    let shape_memory = job.limits.memory_max.unwrap_or(DEFAULT_GUEST_MEMORY);
    let memory = if inner {
        Bytes(shape_memory.0 + INNER_HEADROOM.0)
    } else {
        shape_memory
    };
    // Whole MiB, as QEMU takes it.
    let memory = Bytes(memory.0.div_ceil(1 << 20) << 20);
    // One directory per guest, beside the working directory that the guests of a
    // stack's components share: `<workdir>.<last part of the job's name>.vm`.
    let run_dir = PathBuf::from(format!(
        "{}.{}.vm",
        job.workdir.display(),
        job.name.rsplit('/').next().unwrap_or_default()
    ));
    let _ = std::fs::remove_dir_all(&run_dir);
    let mut config = VmConfig::new(
        prepared.kernel,
        prepared.disk,
        prepared.accel,
        job.workdir.clone(),
        run_dir,
    );
    config.vcpus = vcpus;
    config.memory = memory;
    config.pin = pin;
    config.boot_timeout = Duration::from_secs(180);
    config.scratch_disk = job.uses_disk.then_some(SCRATCH_DISK);
    config.disk_cache = job.platform.disk_cache.unwrap_or_default();
    let report_path = job.workdir.join(".isolab-runtime.json");
    let docker_report = job.workdir.join(DOCKER_REPORT);
    // The inner container is on the guest's network (the guest's own is on isolab's
    // bridge): a service is reached at the guest's address, and a measured command
    // reaches a stack's components or a workload's server beside the guest.
    let network = vec!["--network".to_owned(), "host".to_owned()];
    let mut command = GuestCommand::new(job.argv.clone(), job.timeout);
    command.inner = match engine {
        None => None,
        Some(GuestEngine::Isolab(runtime)) => {
            let mut flags = runtime_limit_flags(&inner_limits(&job.limits));
            flags.extend(["--report".into(), report_path.display().to_string()]);
            flags.extend(network);
            Some(InnerEngine::Isolab(InnerContainer {
                runtime: runtime.program.clone(),
                flags,
                image: None,
            }))
        }
        Some(GuestEngine::Docker) => {
            // A pure cgroup2 guest; inner limits have no io throttles, so no device is named.
            let mut flags = isolab_engines::run_flags::docker_limit_flags(
                &inner_limits(&job.limits),
                isolab_cgroups::Version::V2,
                Path::new("/sys"),
            )?;
            flags.extend(network);
            Some(InnerEngine::Docker(InnerDocker {
                flags,
                report: docker_report.clone(),
            }))
        }
    };
    Ok(GuestPlan {
        config,
        command,
        vcpus,
        memory,
        shape_memory,
        report_path,
        docker_report,
    })
}

/// Runs `job` in a QEMU guest inside an instance of `host`.
fn execute(
    host: &Supervisor,
    vm: &VmPlatform,
    engine: Option<&GuestEngine>,
    host_cpus: usize,
    job: &Job,
    interrupt: &Interrupt,
) -> Result<Execution, PlatformError> {
    let GuestPlan {
        mut config,
        command,
        vcpus,
        memory,
        shape_memory,
        report_path,
        docker_report,
    } = guest_plan(vm, engine, host_cpus, job)?;
    let inner = engine.is_some();
    let net = VmNet::attach(job)?;
    config.network = net.guest();
    let outer = qemu_limits(&job.limits);
    let net_note = net.note();
    let neighbours = VmNeighbours { vm, host_cpus };
    let site = super::NeighbourHost::Guests(&neighbours);
    let executed = host.instance_with(job, interrupt, site, |cgroup| {
        let applied = limit(cgroup, &outer)?;
        let attacher = cgroup.attacher()?;
        let stop = || interrupt.is_triggered();
        // The workload's server, on the host in the same instance (as on the other
        // platforms); the guest reaches it at the bridge's address.
        let server = host.start_server(job, cgroup)?;
        let run = isolab_vm::run(&config, &command, Some(attacher), &stop);
        let stats = cgroup.stats();
        stop_server(server, cgroup);
        let run = match run {
            Ok(r) => r,
            Err(isolab_vm::VmError::Interrupted) => return Err(PlatformError::Interrupted),
            Err(e) => return Err(e.into()),
        };
        let ended = Instant::now();
        let mut notes = vec![match run.accel {
            isolab_vm::Accel::Tcg => format!(
                "vm(tcg): QEMU's software emulation, not hardware virtualisation; boot {:.1} s",
                run.boot.as_secs_f64()
            ),
            isolab_vm::Accel::Kvm => format!("vm(kvm); boot {:.1} s", run.boot.as_secs_f64()),
        }];
        if let Some(setup) = run.setup {
            notes.push(format!(
                "dockerd started and the image made a Docker image in {:.1} s of guest time, before the measured time (part of the boot)",
                setup.as_secs_f64()
            ));
        }
        if !run.pinned.is_empty() {
            let pins: Vec<String> = run
                .pinned
                .iter()
                .map(|p| format!("vCPU {} → cpu {}", p.vcpu, p.host_cpu))
                .collect();
            notes.push(format!("pinned {}", pins.join(", ")));
        }
        notes.push(format!(
            "the guest's disks: QEMU cache={}{}",
            config.disk_cache.as_str(),
            match config.disk_cache {
                isolab_vm::DiskCache::Writeback => " (the host's page cache holds its writes; on cgroup v1 a blkio throttle misses them)",
                isolab_vm::DiskCache::None => ",aio=native (O_DIRECT: QEMU's threads submit its writes, charged to QEMU's cgroup)",
            }
        ));
        notes.push(format!(
            "the guest has {} MiB of RAM{}; QEMU's cgroup has no memory or pids limit",
            memory.0 >> 20,
            if inner {
                " (the container's memory limit plus headroom for the guest)"
            } else {
                " (the shape's memory)"
            }
        ));
        let mut telemetry: TelemetrySet = [
            (T::Wall, run.wall.as_secs_f64()),
            (T::VmBoot, run.boot.as_secs_f64()),
            (T::VmTotal, run.total.as_secs_f64()),
            (T::VmVcpus, f64::from(vcpus)),
        ]
        .into_iter()
        .collect();
        match &stats {
            // QEMU's whole life (boot included): what the host paid for the run.
            Ok(s) => crate::platform::push_qemu_stats(&mut telemetry, s),
            Err(e) => notes.push(format!("QEMU's cgroup statistics unavailable: {e}")),
        }
        notes.push(net_note.clone());
        let mut limits_applied = guest_limits(applied, &job.limits, shape_memory);
        if let Some(engine) = engine {
            let report = inner_report(engine, &report_path, &docker_report, &run.stderr)?;
            let asked = inner_limits(&job.limits);
            let differences = asked.differences(&report.limits);
            if !differences.is_empty() {
                return Err(PlatformError::LimitMismatch {
                    cgroup: format!("{} (in the guest)", report.cgroup),
                    detail: differences.join("; "),
                });
            }
            if let Some(s) = &report.stats {
                let t = &mut telemetry;
                t.push_some(T::CpuUsage, s.cpu_usage.map(|d| d.as_secs_f64()));
                t.push_some(T::NrThrottled, s.nr_throttled.map(|v| v as f64));
                t.push_some(T::Throttled, s.throttled.map(|d| d.as_secs_f64()));
                t.push_some(T::MemoryPeak, s.memory_peak.map(|b| b.0 as f64));
            }
            for (phase, at) in report.trace {
                telemetry.push(T::RuntimePhase(phase.into()), at);
            }
            notes.extend(report.notes);
            // The limits in force around the workload: the container's, in the guest.
            limits_applied.memory_max = report.limits.memory_max.or(limits_applied.memory_max);
            limits_applied.pids_max = report.limits.pids_max.or(limits_applied.pids_max);
        } else if job.limits.pids_max.is_some() {
            notes.push("the shape's pids limit is not applied in a plain vm (the guest's processes are not the host's)".into());
        }
        let _ = std::fs::remove_file(&report_path);
        let _ = std::fs::remove_dir_all(&docker_report);
        Ok(Execution {
            exit: if run.exit_status > 128 {
                ExitKind::Signal(run.exit_status - 128)
            } else {
                ExitKind::Code(run.exit_status)
            },
            stdout: run.stdout,
            stderr: run.stderr,
            wall: run.wall,
            started: ended.checked_sub(run.wall).unwrap_or(ended),
            limits_applied,
            neighbour_limits: None,
            telemetry,
            series: Vec::new(),
            notes,
        })
    });
    // QEMU is gone; the tap goes with the last descriptors, the config's and the net's.
    drop(config);
    let released = net.release();
    let execution = executed?;
    released?;
    Ok(execution)
}

/// What the guest got: QEMU's cgroup limits as read back (`applied`), the guest's
/// RAM as its memory, and the shape's pids and swap limits (in force in the guest
/// for a container there).
fn guest_limits(applied: Limits, asked: &Limits, shape_memory: Bytes) -> Limits {
    let mut limits = applied;
    limits.memory_max = asked.memory_max.map(|_| shape_memory);
    limits.pids_max = asked.pids_max;
    limits.memory_swap_max = asked.memory_swap_max;
    limits
}

/// What the container in the guest reported, whatever its engine.
struct InnerReport {
    /// Its cgroup, as the report names it.
    cgroup: String,
    /// Its limits, read back from its cgroup in the guest.
    limits: Limits,
    /// Its cgroup's counters after the command.
    stats: Option<isolab_cgroups::Stats>,
    /// Phase timestamps (seconds), when the engine records them.
    trace: Vec<(String, f64)>,
    /// The engine's notes.
    notes: Vec<String>,
}

/// Reads the report the guest's container engine left in the workdir: isolab-runtime's
/// JSON at `runtime_report`, or the Docker container's cgroup files in `docker_report`.
fn inner_report(
    engine: &GuestEngine,
    runtime_report: &Path,
    docker_report: &Path,
    stderr: &str,
) -> Result<InnerReport, PlatformError> {
    match engine {
        GuestEngine::Isolab(_) => {
            let report = isolab_runtime::Report::read(runtime_report).map_err(|e| {
                vm_error(format!(
                    "isolab-runtime in the guest left no readable report {}: {e}; its stderr: {}",
                    runtime_report.display(),
                    isolab_engines::tool::tail(stderr, 2000)
                ))
            })?;
            if let Some(message) = report.error {
                return Err(vm_error(format!("isolab-runtime in the guest: {message}")));
            }
            Ok(InnerReport {
                cgroup: report.cgroup.display().to_string(),
                limits: report.limits,
                stats: report.stats,
                trace: report
                    .trace
                    .iter()
                    .map(|(phase, at)| (phase.name().into(), at.as_secs_f64()))
                    .collect(),
                notes: report.notes,
            })
        }
        GuestEngine::Docker => {
            let report = DockerReport::read(docker_report).map_err(|e| {
                vm_error(format!(
                    "{e}; docker run's stderr: {}",
                    isolab_engines::tool::tail(stderr, 2000)
                ))
            })?;
            Ok(InnerReport {
                cgroup: "the Docker container's cgroup".into(),
                limits: report.limits,
                stats: report.stats,
                trace: Vec::new(),
                notes: vec!["Docker in the guest: the container's root is an overlay on the guest's root; docker run's own start is in the measured time, as on the docker platform".into()],
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_cgroups::CpuQuota;
    use std::net::Ipv4Addr;

    fn quota(cpus: f64) -> Option<CpuQuota> {
        CpuQuota::from_cpus(cpus, CpuQuota::DEFAULT_PERIOD).ok()
    }

    #[test]
    fn vcpus_follow_the_placement() {
        let pinned = Limits {
            cpuset: Some("1".parse().unwrap()),
            ..Limits::default()
        };
        assert_eq!(guest_cpus(&pinned, 2), (1, Some(vec![1])));
        let q = Limits {
            cpu: quota(1.5),
            ..Limits::default()
        };
        assert_eq!(guest_cpus(&q, 2), (2, None));
        assert_eq!(guest_cpus(&Limits::default(), 2), (2, None));
        // Half a cpu in a host cpu pool of 2: one vCPU floating in the pool.
        let pooled = Limits {
            cpu: quota(0.5),
            cpuset: Some("0-1".parse().unwrap()),
            ..Limits::default()
        };
        assert_eq!(guest_cpus(&pooled, 2), (1, None));
        assert_eq!(inner_limits(&pooled).cpuset, Some("0".parse().unwrap()));
    }

    #[test]
    fn qemu_gets_cpu_limits_and_the_container_the_rest_in_guest_numbering() {
        let limits = Limits {
            cpu: quota(1.0),
            cpuset: Some("1".parse().unwrap()),
            memory_max: Some(Bytes::gib(1)),
            pids_max: Some(128),
            ..Limits::default()
        };
        let outer = qemu_limits(&limits);
        assert_eq!(outer.cpuset, limits.cpuset);
        assert_eq!((outer.memory_max, outer.pids_max), (None, None));
        let inner = inner_limits(&limits);
        assert_eq!(inner.cpuset, Some("0".parse().unwrap()));
        assert_eq!(inner.memory_max, Some(Bytes::gib(1)));
        assert_eq!(inner.pids_max, Some(128));
    }

    #[test]
    fn vm_docker_is_registered_with_the_limits_docker_applies_in_the_guest() {
        let kind = PlatformKind::parse("vm+docker").unwrap();
        assert_eq!(kind, vm_docker());
        let caps = kind.capabilities();
        assert!(caps.vm && caps.needs_image && caps.limits.pids && caps.limits.cpuset);
        assert!(!caps.perf_follows_workload && caps.services);
        assert_eq!(caps.networks, &[isolab_engines::NetworkMode::Bridge]);
        let level = PlatformDef::vm(kind, Accel::Tcg);
        assert_eq!(level.name, "vm(tcg)+docker");
        assert!(PlatformDef::builtins().iter().any(|d| d.name == level.name));
    }

    #[test]
    fn every_vm_is_on_the_bridge_and_serves_and_reaches_the_host_at_the_gateway() {
        for kind in [PlatformKind::VM, PlatformKind::VM_ISOLAB, vm_docker()] {
            let caps = kind.capabilities();
            assert!(caps.services, "{kind}");
            assert_eq!(
                caps.networks,
                &[isolab_engines::NetworkMode::Bridge],
                "{kind}"
            );
            let level = PlatformDef::vm(kind, Accel::Tcg);
            assert_eq!(level.network, super::super::Network::Bridge);
            assert_eq!(
                super::super::default_server_address(&level),
                Ipv4Addr::new(10, 213, 0, 1)
            );
            assert_eq!(level.server_unreachable(), None);
            assert_eq!(level.services_unavailable(), None);
        }
    }

    #[test]
    fn services_run_on_the_guests_host_network_in_a_container_engine() {
        let all = drivers(&IsolabConfig {
            program: "/nonexistent/isolab-runtime".into(),
            state_dir: "/nonexistent/state".into(),
            user_images: None,
        });
        let vm = all
            .iter()
            .find(|d| d.info().kind == PlatformKind::VM_ISOLAB)
            .unwrap();
        assert!(vm.info().capabilities.services);
        let platform = VmPlatform {
            cache: "/nonexistent".into(),
            prepared: Mutex::new(HashMap::from([(
                None,
                Prepared {
                    kernel: isolab_vm::KernelFiles {
                        metapackage: "linux-image-amd64".into(),
                        package: "p".into(),
                        version: "v".into(),
                        release: "r".into(),
                        dir: "/c".into(),
                        vmlinux: "/c/vmlinux".into(),
                        initramfs: "/c/initramfs".into(),
                        modules: vec![],
                    },
                    disk: BaseDisk {
                        path: "/c/d.ext4".into(),
                        sha256: "ab".into(),
                        bytes: 1,
                        image: "/img".into(),
                        manifest_sha256: "cd".into(),
                    },
                    accel: isolab_vm::Accel::Tcg,
                },
            )])),
            shared: shared::SharedGuests::default(),
        };
        let work = tempfile::tempdir().unwrap();
        let job = Job {
            platform: PlatformDef::vm(PlatformKind::VM_ISOLAB, Accel::Tcg),
            image: None,
            name: "exp1-pid2/c0-r1-db".into(),
            argv: vec!["iperf3".into(), "-s".into()],
            prepare: None,
            cleanup: None,
            server: None,
            workdir: work.path().join("w"),
            limits: Limits::default(),
            timeout: Duration::from_secs(5),
            neighbours: None,
            uses_disk: false,
            stack: None,
        };
        let runtime = GuestEngine::Isolab(IsolabConfig::discover());
        let flags = match guest_plan(&platform, Some(&runtime), 2, &job)
            .unwrap()
            .command
            .inner
        {
            Some(InnerEngine::Isolab(c)) => c.flags.join(" "),
            other => panic!("{other:?}"),
        };
        assert!(flags.ends_with("--network host"), "{flags}");
        let docker = match guest_plan(&platform, Some(&GuestEngine::Docker), 2, &job)
            .unwrap()
            .command
            .inner
        {
            Some(InnerEngine::Docker(d)) => d.flags.join(" "),
            other => panic!("{other:?}"),
        };
        assert!(docker.ends_with("--network host"), "{docker}");
        assert_eq!(
            net::vm_id(&job).unwrap().as_str(),
            "isolab-exp1-pid2-c0-r1-db"
        );
    }

    #[test]
    fn vm_docker_prepare_refuses_an_image_without_dockerd() {
        let image = tempfile::tempdir().unwrap();
        let all = drivers(&IsolabConfig::discover());
        let docker = all.iter().find(|d| d.info().kind == vm_docker()).unwrap();
        let level = PlatformDef::vm(vm_docker(), Accel::Tcg);
        let e = docker
            .prepare(&[&level], Some(image.path()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no dockerd") && e.contains("isolab image build bench-docker DIR"),
            "{e}"
        );
        assert!(docker.prepare(&[&level], None).unwrap().is_empty());
    }

    #[test]
    fn docker_in_the_guest_gets_the_inner_limits_as_docker_flags() {
        let limits = Limits {
            cpu: quota(0.5),
            cpuset: Some("1".parse().unwrap()),
            memory_max: Some(Bytes::mib(256)),
            pids_max: Some(64),
            ..Limits::default()
        };
        let flags = isolab_engines::run_flags::docker_limit_flags(
            &inner_limits(&limits),
            isolab_cgroups::Version::V2,
            Path::new("/sys"),
        )
        .unwrap();
        assert_eq!(
            flags.join(" "),
            "--cpu-period 100000 --cpu-quota 50000 --cpuset-cpus 0 --memory 268435456 \
             --memory-swap -1 --pids-limit 64"
        );
    }
}
