//! One measured run: boot a VM, run one command in the guest, bring back its status, output and
//! guest-measured wall time, shut the VM down and leave nothing behind.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use isolab_cgroups::{Attacher, Bytes};
use serde::{Deserialize, Serialize};

use crate::accel::{Accel, AccelReport};
use crate::agent::GuestClock;
use crate::disk::BaseDisk;
use crate::docker::InnerDocker;
use crate::error::VmError;
use crate::kernel::KernelFiles;
use crate::qemu::{qemu_version, MACHINE, QEMU};
use isolab_tools::{tail_lines, SystemTools, ToolRunner};

/// How long QEMU may take to exit after the guest reported its result, before QMP `quit`.
mod host;
mod launch;
mod validate;

pub use crate::guest::GuestNetwork;
pub use host::{start_container_host, ContainerHost};
pub use launch::get_affinity;
use launch::{console_tail, finish, launch, Launched};

const POWEROFF_GRACE: Duration = Duration::from_secs(10);
/// How long QEMU may take to exit after `quit`, before SIGKILL.
const QUIT_GRACE: Duration = Duration::from_secs(3);
/// Poll interval of the run loop.
const POLL: Duration = Duration::from_millis(10);
/// Lines of the console kept in results and errors.
const CONSOLE_LINES: usize = 30;

/// Where and how to boot a VM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmConfig {
    /// The guest kernel ([`crate::prepare_kernel`]).
    pub kernel: KernelFiles,
    /// The root disk ([`crate::prepare_disk`]), used read-only under a per-run qcow2 overlay.
    pub disk: BaseDisk,
    /// Number of vCPUs.
    pub vcpus: u32,
    /// Guest memory (a whole number of MiB, at least 128 MiB).
    pub memory: Bytes,
    /// Host cpus, one per vCPU: vCPU *i*'s thread is pinned to `pin[i]` right after QEMU starts.
    pub pin: Option<Vec<u32>>,
    /// The accelerator ([`crate::detect_accel`]).
    pub accel: Accel,
    /// The run's working directory on the host; it appears at the same path in the guest.
    pub workdir: PathBuf,
    /// A directory for this run's files (overlay, sockets, logs); it must not exist, is created,
    /// and is removed afterwards whatever happens.
    pub run_dir: PathBuf,
    /// How long the guest may take from QEMU's start to the agent's start.
    pub boot_timeout: Duration,
    /// With `Some(size)`, the workdir in the guest is a fresh ext4 disk of that size instead of
    /// the 9p share: the host's workdir is copied onto it before the command and copied back
    /// after it, so that file I/O measures a virtio disk rather than 9p.
    pub scratch_disk: Option<Bytes>,
    /// The QEMU binary ([`QEMU`] by default).
    pub qemu: PathBuf,
    /// The guest's network: a virtio-net device on a tap, configured in the guest as `eth0`;
    /// `None`: no network device (only `lo`).
    pub network: Option<GuestNetwork>,
    /// Host directories that appear read-only at the same path in the guest (one 9p share
    /// each), e.g. the binaries and fixtures a test runs in the guest, or an image directory.
    pub shares: Vec<PathBuf>,
    /// Under TCG, one host thread runs every vCPU in turn (`thread=single`) instead of one
    /// thread each: slower (the vCPUs share a host cpu) but free of the cross-thread
    /// wake-ups that, about one guest run in ten here, left a halted vCPU asleep for good
    /// (its timer and IPIs never delivered: the other vCPU waiting for it soft-locked).
    /// The tests' guests use it; a platform's guests do not (their vCPUs are pinned one by
    /// one). Not with `pin`.
    pub single_threaded_tcg: bool,
    /// How QEMU caches the root and scratch disks on the host.
    pub disk_cache: crate::qemu::DiskCache,
}

impl VmConfig {
    /// A configuration with 1 vCPU, 512 MiB, no pinning, a 120 s boot timeout, no scratch disk,
    /// no network, QEMU's writeback disk cache.
    pub fn new(
        kernel: KernelFiles,
        disk: BaseDisk,
        accel: Accel,
        workdir: impl Into<PathBuf>,
        run_dir: impl Into<PathBuf>,
    ) -> VmConfig {
        VmConfig {
            kernel,
            disk,
            vcpus: 1,
            memory: Bytes::mib(512),
            pin: None,
            accel,
            workdir: workdir.into(),
            run_dir: run_dir.into(),
            boot_timeout: Duration::from_secs(120),
            scratch_disk: None,
            qemu: PathBuf::from(QEMU),
            network: None,
            shares: Vec::new(),
            single_threaded_tcg: false,
            disk_cache: crate::qemu::DiskCache::default(),
        }
    }
}

/// The command to run in the guest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestCommand {
    /// Program and arguments; the program is looked up in the guest's `PATH`.
    pub argv: Vec<String>,
    /// The environment, complete but for `PATH` (a default is added when missing) and `HOME`
    /// (`/root` when missing).
    pub env: Vec<(String, String)>,
    /// Working directory in the guest (default: the workdir).
    pub cwd: Option<PathBuf>,
    /// How long the command may run once the guest is up; the VM is killed after that.
    pub timeout: Duration,
    /// `vm+ENGINE`: run the command in a container of that engine inside the guest.
    pub inner: Option<InnerEngine>,
    /// The guest is a container host of `inner`'s engine ([`start_container_host`]): the
    /// engine is made ready (dockerd started, the runtime brought in) but the command runs in
    /// the guest's own root, where it starts the engine's containers itself.
    pub host: bool,
}

/// The container engine around the guest command (`vm+ENGINE`); the container's image is the
/// guest's own root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InnerEngine {
    /// `vm+isolab`: isolab-runtime, brought in from the host.
    Isolab(InnerContainer),
    /// `vm+docker`: the guest image's dockerd, started before the command
    /// ([`crate::docker`]).
    Docker(InnerDocker),
}

impl GuestCommand {
    /// `argv` with an empty environment, the workdir as working directory, and `timeout`.
    pub fn new<S: Into<String>>(argv: impl IntoIterator<Item = S>, timeout: Duration) -> Self {
        GuestCommand {
            argv: argv.into_iter().map(Into::into).collect(),
            env: Vec::new(),
            cwd: None,
            timeout,
            inner: None,
            host: false,
        }
    }
}

/// isolab's runtime around the guest command (`vm+isolab`): the guest runs
/// `isolab-runtime run --rootfs-type overlay --network none --bind W:W --cwd CWD -e K=V…
/// FLAGS… IMAGE -- argv…`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InnerContainer {
    /// The `isolab-runtime` binary on the host (dynamically linked against glibc 2.36 like the
    /// bench image, so it runs in the guest); it is hard-linked (or copied) into the run's
    /// control share.
    pub runtime: PathBuf,
    /// Extra runtime flags, e.g. `--cpus 0.5 --memory 268435456 --report W/.isolab-runtime.json`.
    /// `--network` and `--cwd` given here replace the defaults.
    pub flags: Vec<String>,
    /// The container's image directory in the guest (overlay lower layer). Default
    /// [`GUEST_IMAGE`]: a read-only bind mount of the guest's own root, i.e. the bench image.
    pub image: Option<PathBuf>,
}

/// One vCPU thread pinned to one host cpu.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuPin {
    /// The vCPU index.
    pub vcpu: u32,
    /// QEMU's host thread running it.
    pub thread_id: i32,
    /// The host cpu, as read back with `sched_getaffinity`.
    pub host_cpu: u32,
}

/// A vCPU thread and the host cpus it may run on, as read back from the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VcpuAffinity {
    /// The vCPU index.
    pub vcpu: u32,
    /// QEMU's host thread running it.
    pub thread_id: i32,
    /// Its affinity (`sched_getaffinity`), ascending.
    pub cpus: Vec<u32>,
}

/// How QEMU ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Shutdown {
    /// The guest powered off and QEMU exited by itself.
    PoweredOff,
    /// QEMU was asked to `quit` over QMP after the grace period.
    QmpQuit,
    /// QEMU was killed with SIGKILL.
    Killed,
}

/// What a run brought back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuestRun {
    /// The guest shell's `$?`: the command's exit status, or 128 + the signal that ended it.
    pub exit_status: i32,
    /// The command's standard output (invalid UTF-8 replaced).
    pub stdout: String,
    /// The command's standard error (invalid UTF-8 replaced).
    pub stderr: String,
    /// Wall time of the command, measured in the guest.
    pub wall: Duration,
    /// The guest clock that measured [`GuestRun::wall`].
    pub clock: GuestClock,
    /// Host time from QEMU's start to the agent's start (firmware, kernel, initramfs, mounts).
    pub boot: Duration,
    /// The guest's uptime when the command started, when known.
    pub guest_uptime: Option<Duration>,
    /// Guest time spent starting what the command needs before it (dockerd and its image for
    /// `vm+docker`); part of [`GuestRun::boot`], not of [`GuestRun::wall`].
    #[serde(default)]
    pub setup: Option<Duration>,
    /// Host time from QEMU's start until it was gone.
    pub total: Duration,
    /// QEMU's pid (gone by now).
    pub qemu_pid: u32,
    /// The vCPU pinning done (empty without [`VmConfig::pin`]).
    pub pinned: Vec<VcpuPin>,
    /// The accelerator used.
    pub accel: Accel,
    /// How QEMU ended.
    pub shutdown: Shutdown,
    /// The end of the guest's serial console.
    pub console_tail: String,
    /// QEMU's command line (program and arguments), for the run's log.
    pub qemu_command: Vec<String>,
}

/// What the lab records about the VM platform in the experiment's environment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmEnvironment {
    /// `qemu-system-x86_64 --version` ("7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)").
    pub qemu_version: String,
    /// The machine type ("q35").
    pub machine: String,
    /// The vCPU model ("max" under TCG, "host" under KVM).
    pub cpu_model: String,
    /// The accelerator.
    pub accel: Accel,
    /// Why that accelerator.
    pub accel_reason: String,
    /// The kernel package ("linux-image-6.1.0-56-amd64").
    pub kernel_package: String,
    /// Its version ("6.1.192-2").
    pub kernel_version: String,
    /// The guest's `uname -r`.
    pub kernel_release: String,
    /// SHA-256 of the root disk.
    pub disk_sha256: String,
    /// SHA-256 of the image manifest the disk was made from.
    pub image_manifest_sha256: String,
}

/// The environment record for `config` with accelerator report `accel`.
pub fn environment(config: &VmConfig, accel: &AccelReport) -> Result<VmEnvironment, VmError> {
    Ok(VmEnvironment {
        qemu_version: qemu_version(&config.qemu)?,
        machine: MACHINE.into(),
        cpu_model: match accel.accel {
            Accel::Kvm => "host".into(),
            Accel::Tcg => "max".into(),
        },
        accel: accel.accel,
        accel_reason: accel.reason.clone(),
        kernel_package: config.kernel.package.clone(),
        kernel_version: config.kernel.version.clone(),
        kernel_release: config.kernel.release.clone(),
        disk_sha256: config.disk.sha256.clone(),
        image_manifest_sha256: config.disk.manifest_sha256.clone(),
    })
}

/// Boots a VM, runs `command` in it and returns what it did; see [`run_with`].
pub fn run(
    config: &VmConfig,
    command: &GuestCommand,
    attacher: Option<Attacher>,
    stop: &dyn Fn() -> bool,
) -> Result<GuestRun, VmError> {
    run_with(config, command, attacher, stop, &SystemTools)
}

/// Boots a VM per `config`, runs `command` in the guest, and returns its status, output and
/// guest-measured wall time.
///
/// QEMU starts in its own process group with SIGKILL as parent-death signal, attached to the
/// cgroup of `attacher` before `exec` (so everything it does is accounted there). vCPU threads
/// are pinned as soon as QMP answers, before the guest kernel runs far. `stop` is polled every
/// 10 ms: when it returns true the VM is killed and the result is [`VmError::Interrupted`].
/// After the guest reports its result it powers off; QEMU gets 10 s to exit, then QMP `quit`,
/// then SIGKILL. On every way out QEMU is gone and the run directory is removed; `runner` runs
/// `qemu-img` and `mkfs.ext4`.
pub fn run_with(
    config: &VmConfig,
    command: &GuestCommand,
    attacher: Option<Attacher>,
    stop: &dyn Fn() -> bool,
    runner: &dyn ToolRunner,
) -> Result<GuestRun, VmError> {
    let vm = launch(config, command, attacher, stop, runner, false)?;
    finish(vm, config, command.timeout, None, stop)
}

/// Boots a VM whose `command` is a service, see [`start_with`].
pub fn start(
    config: &VmConfig,
    command: &GuestCommand,
    attacher: Option<Attacher>,
) -> Result<RunningVm, VmError> {
    start_with(config, command, attacher, &SystemTools)
}

/// Boots a VM per `config` (as [`run_with`]) whose `command` is a service: it runs in the
/// guest until [`RunningVm::stop`] (or until it exits; then the guest powers off). Returns once
/// the guest is about to start the command; whether the service is ready is the caller's to
/// check (e.g. a TCP connection to [`GuestNetwork::ip`]). `command.timeout` is not applied.
pub fn start_with(
    config: &VmConfig,
    command: &GuestCommand,
    attacher: Option<Attacher>,
    runner: &dyn ToolRunner,
) -> Result<RunningVm, VmError> {
    let never = || false;
    let mut vm = launch(config, command, attacher, &never, runner, true)?;
    let ready_path = vm.ctl.join("ready");
    loop {
        if ready_path.exists() {
            break;
        }
        if vm.qemu.try_wait().is_some() {
            return Err(vm.ended_without_result());
        }
        if vm.start.elapsed() > config.boot_timeout {
            return Err(VmError::BootTimeout {
                timeout: config.boot_timeout,
                console: console_tail(&vm.console),
            });
        }
        std::thread::sleep(POLL);
    }
    Ok(RunningVm {
        vm,
        config: config.clone(),
        ready_at: Instant::now(),
    })
}

/// How long a service in the guest has, after [`RunningVm::stop`] asked for it, to exit
/// (SIGTERM in the guest) before the VM is killed.
const SERVICE_STOP_GRACE: Duration = Duration::from_secs(15);

/// A VM running a service ([`start`]); killed and its run directory removed when dropped.
#[derive(Debug)]
pub struct RunningVm {
    vm: Launched,
    config: VmConfig,
    ready_at: Instant,
}

impl RunningVm {
    /// QEMU's pid.
    pub fn pid(&self) -> u32 {
        self.vm.qemu_pid
    }

    /// Whether QEMU still runs (a service that exited powers the guest off).
    pub fn is_running(&mut self) -> bool {
        self.vm.qemu.try_wait().is_none()
    }

    /// Host time from QEMU's start to the agent's start of the service.
    pub fn boot(&self) -> Duration {
        self.ready_at - self.vm.start
    }

    /// The vCPU threads pinned at boot (empty when `config.pin` was unset).
    pub fn pinned(&self) -> &[VcpuPin] {
        &self.vm.pinned
    }

    /// Each vCPU's host thread (from QMP) and the host cpus it may run on, read back with
    /// `sched_getaffinity`: one cpu when pinned, the cgroup's cpuset otherwise.
    pub fn vcpu_affinity(&mut self) -> Result<Vec<VcpuAffinity>, VmError> {
        let threads = self.vm.qmp.vcpu_threads().map_err(|detail| VmError::Qmp {
            socket: self.vm.dir.join("qmp.sock"),
            detail,
        })?;
        threads
            .iter()
            .map(|t| {
                let cpus = launch::get_affinity(t.thread_id).map_err(|e| {
                    VmError::io(
                        "read the cpu affinity (sched_getaffinity) of",
                        format!("/proc/{}/task/{}", self.vm.qemu_pid, t.thread_id),
                        e,
                    )
                })?;
                Ok(VcpuAffinity {
                    vcpu: t.vcpu,
                    thread_id: t.thread_id,
                    cpus,
                })
            })
            .collect()
    }

    /// The end of the guest's serial console so far.
    pub fn console_tail(&self) -> String {
        console_tail(&self.vm.console)
    }

    /// The end of the service's standard error, once it has ended by itself (the guest copies
    /// its output to the host then); `None` while it runs.
    pub fn stderr_tail(&self) -> Option<String> {
        let bytes = std::fs::read(self.vm.ctl.join("stderr")).ok()?;
        Some(tail_lines(&bytes, CONSOLE_LINES))
    }

    /// Stops the service and the guest: the agent is told to stop (SIGTERM to the service in
    /// the guest), then the guest powers off by itself; when that takes longer than 15 s, or
    /// QEMU lingers after the guest's report, QMP `quit`, then SIGKILL. The run directory is
    /// removed. Returns how QEMU ended.
    pub fn stop(self) -> Result<Shutdown, VmError> {
        let stop_file = self.vm.ctl.join("stop");
        if let Err(e) = std::fs::write(&stop_file, "") {
            // The control share is gone or unwritable: nothing will tell the guest to stop.
            drop(self);
            return Err(VmError::io("write", stop_file, e));
        }
        let never = || false;
        match finish(
            self.vm,
            &self.config,
            SERVICE_STOP_GRACE,
            Some(Instant::now()),
            &never,
        ) {
            Ok(run) => Ok(run.shutdown),
            Err(VmError::CommandTimeout { .. }) => Ok(Shutdown::Killed),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::launch::{pin_vcpus, RunDir};
    use super::validate::{full_env, validate};
    use super::*;
    use crate::agent::DEFAULT_PATH;
    use crate::qmp::VcpuThread;
    use std::net::Ipv4Addr;
    use std::path::Path;
    use std::sync::Arc;

    fn kernel() -> KernelFiles {
        KernelFiles {
            metapackage: "linux-image-amd64".into(),
            package: "linux-image-6.1.0-56-amd64".into(),
            version: "6.1.192-2".into(),
            release: "6.1.0-56-amd64".into(),
            dir: "/c".into(),
            vmlinux: "/c/vmlinux".into(),
            initramfs: "/c/initramfs.cpio".into(),
            modules: vec![],
        }
    }

    fn disk() -> BaseDisk {
        BaseDisk {
            path: "/c/d.ext4".into(),
            sha256: "ab".into(),
            bytes: 1,
            image: "/img".into(),
            manifest_sha256: "cd".into(),
        }
    }

    fn config(workdir: &Path) -> VmConfig {
        VmConfig::new(kernel(), disk(), Accel::Tcg, workdir, workdir.join("run"))
    }

    #[test]
    fn validation_catches_bad_configs_and_commands() {
        let w = tempfile::tempdir().unwrap();
        let ok_cmd = GuestCommand::new(["true"], Duration::from_secs(5));
        let c = config(w.path());
        validate(&c, &ok_cmd).unwrap();
        let field = |c: &VmConfig| match validate(c, &ok_cmd) {
            Err(VmError::Config { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        let mut bad = c.clone();
        bad.vcpus = 0;
        assert_eq!(field(&bad), "vcpus");
        let mut bad = c.clone();
        bad.pin = Some(vec![0]);
        bad.single_threaded_tcg = true;
        assert_eq!(field(&bad), "pin");
        let mut bad = c.clone();
        bad.pin = Some(vec![0, 1]);
        assert_eq!(field(&bad), "pin");
        let mut bad = c.clone();
        bad.memory = Bytes(100 << 20);
        assert_eq!(field(&bad), "memory");
        let mut bad = c.clone();
        bad.memory = Bytes((512 << 20) + 1);
        assert_eq!(field(&bad), "memory");
        for wd in ["/", "relative", "/run/x", "/proc/1", "/nonexistent-isolab"] {
            let mut bad = c.clone();
            bad.workdir = wd.into();
            assert_eq!(field(&bad), "workdir", "{wd}");
        }
        let mut bad = c.clone();
        bad.scratch_disk = Some(Bytes::mib(1));
        assert_eq!(field(&bad), "scratch_disk");
        let cmd = |argv: &[&str]| GuestCommand::new(argv.iter().copied(), Duration::from_secs(1));
        for argv in [&[][..], &[""], &["A=b", "x"], &["-x"], &["a", "b\0"]] {
            assert!(
                matches!(validate(&c, &cmd(argv)), Err(VmError::Command { .. })),
                "{argv:?}"
            );
        }
        let mut e = ok_cmd.clone();
        e.env = vec![("A=B".into(), "x".into())];
        assert!(validate(&c, &e).is_err());
        let mut e = ok_cmd.clone();
        e.cwd = Some("rel".into());
        assert!(validate(&c, &e).is_err());
        let mut e = ok_cmd.clone();
        e.timeout = Duration::ZERO;
        assert!(validate(&c, &e).is_err());
        let mut e = ok_cmd.clone();
        e.inner = Some(InnerEngine::Isolab(InnerContainer {
            runtime: "/nonexistent/isolab-runtime".into(),
            flags: vec![],
            image: None,
        }));
        let msg = validate(&c, &e).unwrap_err().to_string();
        assert!(msg.contains("cargo build -p isolab-runtime"), "{msg}");
        let docker = |report: PathBuf| {
            let mut e = ok_cmd.clone();
            e.inner = Some(InnerEngine::Docker(InnerDocker {
                flags: vec![],
                report,
            }));
            validate(&c, &e).unwrap_err().to_string()
        };
        let msg = docker(w.path().join(".isolab-docker"));
        assert!(msg.contains("isolab image build bench-docker"), "{msg}");
        let mut c = c.clone();
        let image = w.path().join("image");
        std::fs::create_dir_all(image.join("usr/sbin")).unwrap();
        std::fs::write(image.join(crate::docker::DOCKERD), "").unwrap();
        c.disk.image = image;
        let mut e = ok_cmd.clone();
        e.inner = Some(InnerEngine::Docker(InnerDocker {
            flags: vec![],
            report: "/elsewhere/r".into(),
        }));
        let msg = validate(&c, &e).unwrap_err().to_string();
        assert!(msg.contains("not inside the workdir"), "{msg}");
        e.inner = Some(InnerEngine::Docker(InnerDocker {
            flags: vec![],
            report: w.path().join(".isolab-docker"),
        }));
        validate(&c, &e).unwrap();
    }

    #[test]
    fn env_gets_path_and_home() {
        let env = full_env(&[("X".into(), "1".into())]);
        assert_eq!(env[0], ("PATH".into(), DEFAULT_PATH.into()));
        assert!(env.contains(&("HOME".into(), "/root".into())));
        let env = full_env(&[("PATH".into(), "/bin".into()), ("HOME".into(), "/".into())]);
        assert_eq!(env.len(), 2);
    }

    #[test]
    fn run_dir_must_be_fresh_and_is_removed() {
        let w = tempfile::tempdir().unwrap();
        let p = w.path().join("a/run");
        let d = RunDir::create(&p).unwrap();
        std::fs::write(p.join("f"), "x").unwrap();
        assert!(matches!(
            RunDir::create(&p),
            Err(VmError::RunDirExists { .. })
        ));
        drop(d);
        assert!(!p.exists());
        let d = RunDir::create(&p).unwrap();
        d.remove().unwrap();
        assert!(!p.exists());
    }

    #[test]
    fn run_fails_cleanly_when_qemu_is_missing() {
        let w = tempfile::tempdir().unwrap();
        let mut c = config(w.path());
        c.qemu = "/nonexistent/qemu-system-x86_64".into();
        let r = crate::fake_runner::FakeRunner::default().answer("qemu-img", "");
        let e = run_with(
            &c,
            &GuestCommand::new(["true"], Duration::from_secs(5)),
            None,
            &|| false,
            &r,
        )
        .unwrap_err();
        assert!(matches!(e, VmError::QemuSpawn { .. }), "{e}");
        assert!(!c.run_dir.exists(), "run dir removed");
        let r = crate::fake_runner::FakeRunner::default().fail("qemu-img", "no space");
        let e = run_with(
            &c,
            &GuestCommand::new(["true"], Duration::from_secs(5)),
            None,
            &|| false,
            &r,
        )
        .unwrap_err();
        assert!(e.to_string().contains("no space"), "{e}");
        assert!(!c.run_dir.exists());
    }

    #[test]
    fn a_service_with_a_network_fails_cleanly_when_qemu_is_missing() {
        let w = tempfile::tempdir().unwrap();
        let mut c = config(w.path());
        c.qemu = "/nonexistent/qemu-system-x86_64".into();
        let tap = std::fs::File::open("/dev/null").unwrap();
        c.network = Some(GuestNetwork {
            tap: Arc::new(tap.into()),
            ip: Ipv4Addr::new(10, 213, 0, 9),
            prefix: 24,
            gateway: Ipv4Addr::new(10, 213, 0, 1),
            mac: "02:00:0a:d5:00:09".into(),
        });
        let r = crate::fake_runner::FakeRunner::default().answer("qemu-img", "");
        let e = start_with(
            &c,
            &GuestCommand::new(["iperf3", "-s"], Duration::from_secs(5)),
            None,
            &r,
        )
        .unwrap_err();
        assert!(matches!(e, VmError::QemuSpawn { .. }), "{e}");
        assert!(!c.run_dir.exists(), "run dir removed");
    }

    #[test]
    fn pinning_checks_thread_counts() {
        let t = [
            VcpuThread {
                vcpu: 0,
                thread_id: 1,
            },
            VcpuThread {
                vcpu: 1,
                thread_id: 1,
            },
        ];
        assert!(pin_vcpus(&t, &[0, 1])
            .unwrap_err()
            .to_string()
            .contains("single-threaded"));
        assert!(pin_vcpus(&t[..1], &[0, 1]).is_err());
        // pin this test's own thread, then read it back
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let before = get_affinity(me).unwrap();
        let cpu = before[0];
        let pinned = pin_vcpus(
            &[VcpuThread {
                vcpu: 0,
                thread_id: me,
            }],
            &[cpu],
        )
        .unwrap();
        assert_eq!(
            pinned,
            [VcpuPin {
                vcpu: 0,
                thread_id: me,
                host_cpu: cpu
            }]
        );
        assert_eq!(get_affinity(me).unwrap(), [cpu]);
        // restore: allow every cpu this thread had
        // SAFETY: plain data, zero = empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for c in before {
            // SAFETY: c came from the kernel's own set, so it is below CPU_SETSIZE.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
        // SAFETY: a valid set of the size passed.
        unsafe { libc::sched_setaffinity(me, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    }
}
