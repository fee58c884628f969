//! Launching and finishing one VM: the run directory, QEMU started with its disks,
//! kernel and agent configuration, vCPU pinning, then the guest's result read back
//! and the VM shut down.

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isolab_cgroups::Attacher;

use crate::agent::{
    command_script, config_file, parse_result, shares_file, AgentConfig, CommandSpec, Inner,
    InnerSpec, GUEST_DIR, GUEST_IMAGE,
};
use crate::disk::{create_overlay, create_scratch};
use crate::error::{IoContext, VmError};
use crate::qemu::{kernel_cmdline, qemu_args, QemuPlan, QemuProcess};
use crate::qmp::{Qmp, VcpuThread};
use isolab_tools::{tail_lines, ToolRunner};

use super::validate::{bad_config, full_env, validate};
use super::{
    GuestCommand, GuestRun, InnerEngine, Shutdown, VcpuPin, VmConfig, CONSOLE_LINES, POLL,
    POWEROFF_GRACE, QUIT_GRACE,
};

/// The run directory; removed (recursively) when dropped.
#[derive(Debug)]
pub(super) struct RunDir {
    path: PathBuf,
    armed: bool,
}

impl RunDir {
    pub(super) fn create(path: &Path) -> Result<RunDir, VmError> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).ctx("create directory", parent)?;
        }
        match std::fs::create_dir(path) {
            Ok(()) => Ok(RunDir {
                path: path.to_path_buf(),
                armed: true,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(VmError::RunDirExists {
                path: path.to_path_buf(),
            }),
            Err(e) => Err(VmError::io("create directory", path, e)),
        }
    }

    pub(super) fn remove(mut self) -> Result<(), VmError> {
        self.armed = false;
        std::fs::remove_dir_all(&self.path).ctx("remove the run directory", &self.path)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if self.armed {
            // Best effort on an error path: the error being returned matters more.
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

pub(super) fn console_tail(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap_or_default();
    tail_lines(&bytes, CONSOLE_LINES).replace('\r', "")
}

/// Hard-links `src` to `dst`, or copies it when they are on different file systems.
pub(super) fn link_or_copy(src: &Path, dst: &Path) -> Result<(), VmError> {
    match std::fs::hard_link(src, dst) {
        Ok(()) => Ok(()),
        Err(_) => std::fs::copy(src, dst)
            .map(|_| ())
            .ctx("copy the runtime to", dst),
    }
}

/// A booted VM: QMP, QEMU and the run's files. Fields drop in order: QMP, QEMU (killed),
/// then the run directory (removed).
#[derive(Debug)]
pub(super) struct Launched {
    pub(super) qmp: Qmp<UnixStream>,
    pub(super) qemu: QemuProcess,
    pub(super) run_dir: RunDir,
    pub(super) dir: PathBuf,
    pub(super) ctl: PathBuf,
    pub(super) console: PathBuf,
    pub(super) start: Instant,
    pub(super) qemu_pid: u32,
    pub(super) pinned: Vec<VcpuPin>,
    pub(super) qemu_command: Vec<String>,
}

impl Launched {
    /// The error for a QEMU that exited before the guest reported anything.
    pub(super) fn ended_without_result(&mut self) -> VmError {
        if let Ok(message) = std::fs::read_to_string(self.ctl.join("error")) {
            return VmError::Guest {
                message: message.trim().to_owned(),
                console: console_tail(&self.console),
            };
        }
        VmError::QemuExited {
            status: self
                .qemu
                .try_wait()
                .map_or_else(|| "running".into(), |s| s.to_string()),
            qemu: tail_lines(
                &std::fs::read(self.dir.join("qemu.log")).unwrap_or_default(),
                10,
            ),
            console: console_tail(&self.console),
        }
    }
}

/// isolab-runtime in the guest: brought in through the control share.
pub(super) fn runtime_in_guest() -> String {
    format!("{GUEST_DIR}/ctl/isolab-runtime")
}

/// The image of `engine`'s container in the guest: its own, else the guest's root.
pub(super) fn inner_image(engine: Option<&InnerEngine>) -> PathBuf {
    match engine {
        Some(InnerEngine::Isolab(i)) => i.image.clone(),
        _ => None,
    }
    .unwrap_or_else(|| PathBuf::from(GUEST_IMAGE))
}

/// `engine` around a command, as the agent's script starts it (`runtime` and `image` in the
/// guest, `workdir` bound into the container).
pub(super) fn inner_spec<'a>(
    engine: &'a InnerEngine,
    runtime: &'a str,
    image: &'a Path,
    workdir: &'a Path,
) -> Inner<'a> {
    match engine {
        InnerEngine::Isolab(i) => Inner::Isolab(InnerSpec {
            runtime,
            image,
            workdir,
            flags: &i.flags,
        }),
        InnerEngine::Docker(docker) => Inner::Docker { docker, workdir },
    }
}

/// Writes the run's files, starts QEMU, connects QMP and pins the vCPUs.
pub(super) fn launch(
    config: &VmConfig,
    command: &GuestCommand,
    attacher: Option<Attacher>,
    stop: &dyn Fn() -> bool,
    runner: &dyn ToolRunner,
    service: bool,
) -> Result<Launched, VmError> {
    validate(config, command)?;
    let run_dir = RunDir::create(&config.run_dir)?;
    let dir = run_dir.path.clone();
    let ctl = dir.join("ctl");
    std::fs::create_dir(&ctl).ctx("create directory", &ctl)?;

    let cwd = command
        .cwd
        .clone()
        .unwrap_or_else(|| config.workdir.clone());
    let env = full_env(&command.env);
    let runtime_in_guest = runtime_in_guest();
    let image = inner_image(command.inner.as_ref());
    let write = |name: &str, text: &str| {
        let p = ctl.join(name);
        std::fs::write(&p, text).ctx("write", &p)
    };
    match &command.inner {
        None => {}
        Some(InnerEngine::Isolab(i)) => link_or_copy(&i.runtime, &ctl.join("isolab-runtime"))?,
        Some(InnerEngine::Docker(_)) => write("setup.sh", &crate::docker::setup_script())?,
    }
    let inner = command
        .inner
        .as_ref()
        .map(|e| inner_spec(e, &runtime_in_guest, &image, &config.workdir));
    let spec = CommandSpec {
        argv: &command.argv,
        env: &env,
        cwd: &cwd,
        // A container host's command starts the containers itself.
        inner: inner.filter(|_| !command.host),
    };
    write(
        "config",
        &config_file(&AgentConfig {
            workdir: &config.workdir,
            scratch: config.scratch_disk.is_some(),
            inner: command.inner.is_some(),
            service,
            network: config.network.as_ref(),
        }),
    )?;
    write("command.sh", &command_script(&spec))?;
    write("shares", &shares_file(&config.shares))?;

    let root = dir.join("root.qcow2");
    create_overlay(runner, &config.disk.path, &root)?;
    let scratch = match config.scratch_disk {
        Some(size) => {
            let file = dir.join("scratch.ext4");
            create_scratch(runner, &file, size.0)?;
            Some(file)
        }
        None => None,
    };
    let console = dir.join("console.log");
    let qmp_path = dir.join("qmp.sock");
    let pidfile = dir.join("qemu.pid");
    let plan = QemuPlan {
        disk_cache: config.disk_cache,
        accel: config.accel,
        single_threaded_tcg: config.single_threaded_tcg,
        vcpus: config.vcpus,
        memory_mib: config.memory.0 >> 20,
        vmlinux: &config.kernel.vmlinux,
        initramfs: &config.kernel.initramfs,
        cmdline: kernel_cmdline(false),
        root: Some(&root),
        scratch: scratch.as_deref(),
        ctl: Some(&ctl),
        workdir: Some(&config.workdir),
        shares: &config.shares,
        console: &console,
        qmp: Some(&qmp_path),
        pidfile: Some(&pidfile),
        nic_mac: config.network.as_ref().map(|n| n.mac.as_str()),
    };
    let args = qemu_args(&plan);
    let mut qemu_command = vec![config.qemu.to_string_lossy().into_owned()];
    qemu_command.extend(args.iter().cloned());

    let start = Instant::now();
    let tap = config.network.as_ref().map(|n| n.tap.as_raw_fd());
    // Declared after run_dir, so dropped (killed) before the directory is removed.
    let mut qemu = QemuProcess::spawn(&config.qemu, &args, &dir.join("qemu.log"), attacher, tap)?;
    let qemu_pid = qemu.pid();
    let exited_early = |qemu: &mut QemuProcess| -> Option<VmError> {
        qemu.try_wait().map(|status| VmError::QemuExited {
            status: status.to_string(),
            qemu: tail_lines(&std::fs::read(dir.join("qemu.log")).unwrap_or_default(), 10),
            console: console_tail(&console),
        })
    };

    // QMP: QEMU creates the socket before the machine starts.
    let stream = loop {
        if let Some(e) = exited_early(&mut qemu) {
            return Err(e);
        }
        if stop() {
            return Err(VmError::Interrupted);
        }
        match UnixStream::connect(&qmp_path) {
            Ok(s) => break s,
            Err(_) if start.elapsed() < config.boot_timeout => std::thread::sleep(POLL),
            Err(e) => {
                return Err(VmError::Qmp {
                    socket: qmp_path.clone(),
                    detail: format!("cannot connect within {:?}: {e}", config.boot_timeout),
                })
            }
        }
    };
    let qmp_err = |detail: String| VmError::Qmp {
        socket: qmp_path.clone(),
        detail,
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| qmp_err(e.to_string()))?;
    let mut qmp = match Qmp::handshake(stream) {
        Ok(qmp) => qmp,
        Err(detail) => {
            // QEMU opens QMP before it sets up its devices: a device it cannot use (a
            // bad tap) ends it here, and its log says why.
            std::thread::sleep(Duration::from_millis(100));
            return Err(exited_early(&mut qemu).unwrap_or_else(|| qmp_err(detail)));
        }
    };
    let pinned = match &config.pin {
        Some(cpus) => {
            let threads = qmp.vcpu_threads().map_err(qmp_err)?;
            pin_vcpus(&threads, cpus)?
        }
        None => Vec::new(),
    };
    Ok(Launched {
        qmp,
        qemu,
        run_dir,
        dir,
        ctl,
        console,
        start,
        qemu_pid,
        pinned,
        qemu_command,
    })
}

/// Waits for the guest's report and QEMU's end (10 s after the report, QMP `quit`; 3 s after
/// that, SIGKILL) and reads what the guest wrote. `timeout` runs from the agent's `ready` (or
/// from `ready_at` when that is known already); past it QEMU is killed and the result is
/// [`VmError::CommandTimeout`].
pub(super) fn finish(
    mut vm: Launched,
    config: &VmConfig,
    timeout: Duration,
    mut ready_at: Option<Instant>,
    stop: &dyn Fn() -> bool,
) -> Result<GuestRun, VmError> {
    let ready_path = vm.ctl.join("ready");
    let result_path = vm.ctl.join("result");
    let error_path = vm.ctl.join("error");
    let start = vm.start;
    let mut reported_at: Option<Instant> = None;
    let mut quit_at: Option<Instant> = None;
    let mut shutdown = Shutdown::PoweredOff;
    let qemu = &mut vm.qemu;
    let status = loop {
        if let Some(status) = qemu.try_wait() {
            break status;
        }
        if stop() {
            qemu.kill();
            return Err(VmError::Interrupted);
        }
        let now = Instant::now();
        if ready_at.is_none() && ready_path.exists() {
            ready_at = Some(now);
        }
        if reported_at.is_none() && (result_path.exists() || error_path.exists()) {
            reported_at = Some(now);
        }
        match (ready_at, reported_at) {
            (None, None) if now - start > config.boot_timeout => {
                qemu.kill();
                return Err(VmError::BootTimeout {
                    timeout: config.boot_timeout,
                    console: console_tail(&vm.console),
                });
            }
            (Some(ready), None) if now - ready > timeout => {
                qemu.kill();
                // A longer tail than other errors': a hang's kernel reports are long.
                let console = std::fs::read(&vm.console).unwrap_or_default();
                return Err(VmError::CommandTimeout {
                    timeout,
                    console: tail_lines(&console, 4 * CONSOLE_LINES).replace('\r', ""),
                });
            }
            (_, Some(reported)) if now - reported > POWEROFF_GRACE => match quit_at {
                None => {
                    // QEMU may close the socket while answering: either way it is quitting.
                    let _ = vm.qmp.execute("quit", None);
                    shutdown = Shutdown::QmpQuit;
                    quit_at = Some(now);
                }
                Some(q) if now - q > QUIT_GRACE => {
                    shutdown = Shutdown::Killed;
                    match qemu.kill() {
                        Some(status) => break status,
                        None => {
                            return Err(VmError::QemuExited {
                                status: "killed, not reaped".into(),
                                qemu: String::new(),
                                console: console_tail(&vm.console),
                            })
                        }
                    }
                }
                Some(_) => {}
            },
            _ => {}
        }
        std::thread::sleep(POLL);
    };
    let total = start.elapsed();
    let boot = ready_at.map_or(total, |r| r - start);
    let tail = console_tail(&vm.console);

    if let Ok(message) = std::fs::read_to_string(&error_path) {
        return Err(VmError::Guest {
            message: message.trim().to_owned(),
            console: tail,
        });
    }
    let text = match std::fs::read_to_string(&result_path) {
        Ok(t) => t,
        Err(_) => {
            return Err(VmError::QemuExited {
                status: status.to_string(),
                qemu: tail_lines(
                    &std::fs::read(vm.dir.join("qemu.log")).unwrap_or_default(),
                    10,
                ),
                console: tail,
            })
        }
    };
    let result = parse_result(&text).map_err(|reason| VmError::Result {
        path: result_path.clone(),
        reason,
    })?;
    if !result.copy_back_ok {
        return Err(VmError::Guest {
            message: format!(
                "the command ran (status {}) but copying the scratch disk back into {} failed",
                result.status,
                config.workdir.display()
            ),
            console: tail,
        });
    }
    let read_output = |name: &str| -> Result<String, VmError> {
        let p = vm.ctl.join(name);
        let bytes = std::fs::read(&p).ctx("read the guest's", &p)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let stdout = read_output("stdout")?;
    let stderr = read_output("stderr")?;
    let Launched {
        qmp,
        qemu,
        run_dir,
        qemu_pid,
        pinned,
        qemu_command,
        ..
    } = vm;
    drop(qmp);
    drop(qemu);
    run_dir.remove()?;
    Ok(GuestRun {
        exit_status: result.status,
        stdout,
        stderr,
        wall: result.wall,
        clock: result.clock,
        boot,
        guest_uptime: result.uptime,
        setup: result.setup,
        total,
        qemu_pid,
        pinned,
        accel: config.accel,
        shutdown,
        console_tail: tail,
        qemu_command,
    })
}

/// Pins each vCPU thread to its host cpu and reads the affinity back.
pub(super) fn pin_vcpus(threads: &[VcpuThread], cpus: &[u32]) -> Result<Vec<VcpuPin>, VmError> {
    if threads.len() != cpus.len() {
        return Err(bad_config(
            "pin",
            format!(
                "QEMU reports {} vCPU threads for {} pinned cpus",
                threads.len(),
                cpus.len()
            ),
        ));
    }
    let mut ids: Vec<i32> = threads.iter().map(|t| t.thread_id).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != threads.len() {
        return Err(bad_config(
            "pin",
            "the vCPUs share one host thread (single-threaded TCG), so they cannot be pinned one by one",
        ));
    }
    let mut out = Vec::with_capacity(threads.len());
    for (t, &cpu) in threads.iter().zip(cpus) {
        let err = |source: std::io::Error| VmError::Pin {
            vcpu: t.vcpu,
            thread: t.thread_id,
            cpu,
            source,
        };
        set_affinity(t.thread_id, cpu).map_err(err)?;
        let now = get_affinity(t.thread_id).map_err(err)?;
        if now != [cpu] {
            return Err(err(std::io::Error::other(format!(
                "affinity reads back as {now:?}"
            ))));
        }
        out.push(VcpuPin {
            vcpu: t.vcpu,
            thread_id: t.thread_id,
            host_cpu: cpu,
        });
    }
    Ok(out)
}

pub(super) fn set_affinity(tid: i32, cpu: u32) -> std::io::Result<()> {
    let cpu = cpu as usize;
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu < CPU_SETSIZE was checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the set is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The cpus thread `tid` may run on.
pub fn get_affinity(tid: i32) -> std::io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the kernel writes at most size_of::<cpu_set_t>() bytes into set.
    let rc =
        unsafe { libc::sched_getaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: CPU_ISSET reads the set for indices below CPU_SETSIZE.
    Ok((0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect())
}
