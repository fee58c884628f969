//! The QEMU process: its command line (a pure function of the run's plan, unit-tested), its
//! start inside the caller's cgroup, and a guard that kills it on every way out.
//!
//! Machine choice, measured under TCG on this project's 2-core host: `q35` reaches the agent
//! reliably; `microvm` saves about a second but hung in one of two boots (its TSC calibration
//! has no PIT or HPET to lean on under TCG), so q35 it is.

use std::fmt;

use serde::{Deserialize, Serialize};
use std::ffi::OsStr;
use std::os::fd::RawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};

use isolab_cgroups::Attacher;

use crate::agent::{share_tag, CTL_TAG, WORK_TAG};
use crate::error::VmError;
use isolab_tools::{SystemTools, ToolCommand, ToolRunner};

/// How QEMU runs the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    /// Hardware virtualisation through `/dev/kvm` (`-accel kvm -cpu host`).
    Kvm,
    /// QEMU's Tiny Code Generator, a dynamic binary translator (`-accel tcg,thread=multi -cpu
    /// max`): correct but many times slower; its results must be labelled as such.
    Tcg,
}

impl Accel {
    /// `"kvm"` or `"tcg"`, as in a platform label `vm(tcg)`.
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

impl fmt::Display for Accel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The QEMU binary used when the configuration names none.
pub const QEMU: &str = "qemu-system-x86_64";
/// The machine type.
pub const MACHINE: &str = "q35";

/// Everything the QEMU command line depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct QemuPlan<'a> {
    pub accel: Accel,
    /// How QEMU caches the root and scratch disks on the host.
    pub disk_cache: DiskCache,
    /// TCG with one host thread for every vCPU (`thread=single`) instead of one each.
    pub single_threaded_tcg: bool,
    pub vcpus: u32,
    pub memory_mib: u64,
    pub vmlinux: &'a Path,
    pub initramfs: &'a Path,
    pub cmdline: String,
    /// The root disk overlay (qcow2); `None` for the accelerator probe.
    pub root: Option<&'a Path>,
    /// The scratch disk (raw ext4).
    pub scratch: Option<&'a Path>,
    /// The control directory (9p `isolabctl`).
    pub ctl: Option<&'a Path>,
    /// The run's working directory (9p `isolabwork`).
    pub workdir: Option<&'a Path>,
    /// Read-only shares (9p `isolabshare0`, `isolabshare1`, …, see [`share_tag`]).
    pub shares: &'a [std::path::PathBuf],
    /// Where the serial console goes.
    pub console: &'a Path,
    /// The QMP socket.
    pub qmp: Option<&'a Path>,
    /// The pid file.
    pub pidfile: Option<&'a Path>,
    /// The MAC address of a virtio-net device on the tap QEMU inherits as descriptor
    /// [`TAP_FD`]; `None`: no network device.
    pub nic_mac: Option<&'a str>,
}

/// The descriptor number under which QEMU inherits the guest's tap.
pub const TAP_FD: i32 = 3;

/// A path inside a QEMU option value: commas are doubled.
fn opt_path(p: &Path) -> String {
    p.to_string_lossy().replace(',', ",,")
}

/// The kernel command line: serial console, quiet boot, no reboot after a panic (QEMU's
/// `-no-reboot` then exits).
pub(crate) fn kernel_cmdline(probe: bool) -> String {
    let mut s = String::from("console=ttyS0 quiet panic=-1");
    if probe {
        s.push_str(" isolab.probe=1");
    }
    s
}

/// How QEMU caches a guest's disks on the host (its `-drive cache=`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum DiskCache {
    /// QEMU's default: the host's page cache holds the guest's writes, flushed when the
    /// guest flushes. The guest's disk is partly the host's memory, and on cgroup v1 a
    /// blkio throttle does not see the buffered writes (the flusher does them).
    #[default]
    Writeback,
    /// `cache=none,aio=native`: QEMU opens the images with `O_DIRECT`, as production
    /// hosts (OpenStack, most libvirt guides) run guests whose disks should behave as
    /// disks. Every guest write is submitted to the device by QEMU's threads, which the
    /// kernel charges to QEMU's cgroup and its blkio/io throttle, on cgroup v1 too
    /// (with writeback, the host's flusher writes them).
    None,
}

impl DiskCache {
    /// The name in a spec and a run's notes: `writeback`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskCache::Writeback => "writeback",
            DiskCache::None => "none",
        }
    }

    /// The `-drive` options that select it, each after a comma (none for QEMU's
    /// default).
    fn drive_options(self) -> &'static str {
        match self {
            DiskCache::Writeback => "",
            DiskCache::None => ",cache=none,aio=native",
        }
    }
}

impl std::str::FromStr for DiskCache {
    type Err = String;

    fn from_str(s: &str) -> Result<DiskCache, String> {
        match s {
            "writeback" => Ok(DiskCache::Writeback),
            "none" => Ok(DiskCache::None),
            _ => Err(format!(
                "unknown disk_cache `{s}`: expected `writeback` (QEMU's default: the host's page cache holds the guest's writes) or `none` (O_DIRECT, as production hosts run guests)"
            )),
        }
    }
}

/// The QEMU arguments (without the program).
pub(crate) fn qemu_args(plan: &QemuPlan<'_>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| a.extend(items.iter().map(|s| s.to_string()));
    push(&["-name", "isolab-vm,debug-threads=on"]);
    push(&["-machine", MACHINE]);
    match plan.accel {
        Accel::Kvm => push(&["-accel", "kvm", "-cpu", "host"]),
        // Multi-threaded TCG: one host thread per vCPU, so vCPUs run in parallel and can be
        // pinned one by one.
        Accel::Tcg if !plan.single_threaded_tcg => {
            push(&["-accel", "tcg,thread=multi", "-cpu", "max"])
        }
        Accel::Tcg => push(&["-accel", "tcg,thread=single", "-cpu", "max"]),
    }
    let smp = plan.vcpus.to_string();
    let mem = plan.memory_mib.to_string();
    push(&["-smp", &smp, "-m", &mem]);
    push(&[
        "-nodefaults",
        "-no-user-config",
        "-display",
        "none",
        "-no-reboot",
    ]);
    let serial = format!("file:{}", plan.console.to_string_lossy());
    push(&["-serial", &serial]);
    if let Some(q) = plan.qmp {
        let qmp = format!("unix:{},server=on,wait=off", opt_path(q));
        push(&["-qmp", &qmp]);
    }
    let vmlinux = plan.vmlinux.to_string_lossy();
    let initramfs = plan.initramfs.to_string_lossy();
    push(&[
        "-kernel",
        &vmlinux,
        "-initrd",
        &initramfs,
        "-append",
        &plan.cmdline,
    ]);
    if let Some(root) = plan.root {
        let drive = format!(
            "file={},format=qcow2,if=none,id=root,discard=unmap{}",
            opt_path(root),
            plan.disk_cache.drive_options()
        );
        push(&["-drive", &drive, "-device", "virtio-blk-pci,drive=root"]);
    }
    if let Some(scratch) = plan.scratch {
        let drive = format!(
            "file={},format=raw,if=none,id=scratch,discard=unmap{}",
            opt_path(scratch),
            plan.disk_cache.drive_options()
        );
        push(&["-drive", &drive, "-device", "virtio-blk-pci,drive=scratch"]);
    }
    for (dir, tag) in [(plan.ctl, CTL_TAG), (plan.workdir, WORK_TAG)] {
        if let Some(dir) = dir {
            let fs = format!(
                "local,path={},mount_tag={tag},security_model=passthrough,id={tag}",
                opt_path(dir)
            );
            push(&["-virtfs", &fs]);
        }
    }
    for (i, dir) in plan.shares.iter().enumerate() {
        let tag = share_tag(i);
        let fs = format!(
            "local,path={},mount_tag={tag},security_model=passthrough,id={tag},readonly=on",
            opt_path(dir)
        );
        push(&["-virtfs", &fs]);
    }
    if let Some(mac) = plan.nic_mac {
        let netdev = format!("tap,id=net0,fd={TAP_FD}");
        let device = format!("virtio-net-pci,netdev=net0,mac={mac}");
        push(&["-netdev", &netdev, "-device", &device]);
    }
    if let Some(p) = plan.pidfile {
        let pid = p.to_string_lossy();
        push(&["-pidfile", &pid]);
    }
    a
}

/// The version line of `qemu --version` ("7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)").
pub fn qemu_version_with(runner: &dyn ToolRunner, qemu: &Path) -> Result<String, VmError> {
    let out = runner
        .run(&ToolCommand::new(qemu.to_string_lossy(), "qemu-system-x86").arg("--version"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(parse_version(&text))
}

/// The version of the QEMU binary `qemu` (see [`qemu_version_with`]).
pub fn qemu_version(qemu: &Path) -> Result<String, VmError> {
    qemu_version_with(&SystemTools, qemu)
}

fn parse_version(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default().trim();
    first
        .strip_prefix("QEMU emulator version ")
        .unwrap_or(first)
        .to_owned()
}

/// A running QEMU; killed (SIGKILL) and reaped when dropped unless it has exited.
#[derive(Debug)]
pub(crate) struct QemuProcess {
    child: Child,
    exited: Option<ExitStatus>,
}

impl QemuProcess {
    /// Starts `qemu args…` with stdin from /dev/null and stdout and stderr into `log`, in a
    /// process group of its own (a terminal's Ctrl-C goes to the lab, which stops the VM), with
    /// SIGKILL as its parent-death signal, attached to the caller's cgroup before `exec`; with
    /// `tap`, that descriptor is inherited as [`TAP_FD`] (every other one of ours is closed on
    /// `exec`).
    pub(crate) fn spawn(
        qemu: &Path,
        args: &[String],
        log: &Path,
        attacher: Option<Attacher>,
        tap: Option<RawFd>,
    ) -> Result<QemuProcess, VmError> {
        let log_file = std::fs::File::create(log).map_err(|e| VmError::io("create", log, e))?;
        let log_err = log_file
            .try_clone()
            .map_err(|e| VmError::io("duplicate", log, e))?;
        let mut cmd = Command::new(qemu);
        cmd.args(args.iter().map(OsStr::new))
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err);
        // SAFETY: getpid is async-signal-safe; it runs before the fork.
        let parent = unsafe { libc::getpid() };
        // SAFETY: the closure runs in the forked child before exec and only makes
        // async-signal-safe system calls (setpgid, prctl, getppid, dup2, fcntl, and write(2)
        // inside attach_self); it allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setpgid(0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::getppid() != parent {
                    // The parent died between fork and prctl: do not outlive it.
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                if let Some(a) = &attacher {
                    a.attach_self()?;
                }
                if let Some(fd) = tap {
                    // dup2 clears close-on-exec on the copy; a descriptor that is TAP_FD
                    // already keeps its own flag, so clear it.
                    let rc = if fd == TAP_FD {
                        libc::fcntl(fd, libc::F_SETFD, 0)
                    } else {
                        libc::dup2(fd, TAP_FD)
                    };
                    if rc < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|source| VmError::QemuSpawn {
            program: qemu.to_path_buf(),
            source,
        })?;
        Ok(QemuProcess {
            child,
            exited: None,
        })
    }

    /// QEMU's pid.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status, if it has exited.
    pub(crate) fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.exited = Some(status);
            }
        }
        self.exited
    }

    /// SIGKILL and reap.
    pub(crate) fn kill(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            // Best effort: it may have exited on its own just now.
            let _ = self.child.kill();
            self.exited = self.child.wait().ok();
        }
        self.exited
    }
}

impl Drop for QemuProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_runner::FakeRunner;
    use std::path::PathBuf;

    fn plan<'a>(accel: Accel, console: &'a Path) -> QemuPlan<'a> {
        QemuPlan {
            disk_cache: DiskCache::default(),
            accel,
            single_threaded_tcg: false,
            vcpus: 2,
            memory_mib: 512,
            vmlinux: Path::new("/c/vmlinux"),
            initramfs: Path::new("/c/initramfs.cpio"),
            cmdline: kernel_cmdline(false),
            root: Some(Path::new("/r/root.qcow2")),
            scratch: None,
            ctl: Some(Path::new("/r/ctl")),
            workdir: Some(Path::new("/w,x")),
            shares: &[],
            console,
            qmp: Some(Path::new("/r/qmp.sock")),
            pidfile: Some(Path::new("/r/qemu.pid")),
            nic_mac: None,
        }
    }

    #[test]
    fn tcg_command_line() {
        let args = qemu_args(&plan(Accel::Tcg, Path::new("/r/console.log")));
        let line = args.join(" ");
        assert_eq!(
            line,
            "-name isolab-vm,debug-threads=on -machine q35 -accel tcg,thread=multi -cpu max \
             -smp 2 -m 512 -nodefaults -no-user-config -display none -no-reboot \
             -serial file:/r/console.log -qmp unix:/r/qmp.sock,server=on,wait=off \
             -kernel /c/vmlinux -initrd /c/initramfs.cpio -append console=ttyS0 quiet panic=-1 \
             -drive file=/r/root.qcow2,format=qcow2,if=none,id=root,discard=unmap \
             -device virtio-blk-pci,drive=root \
             -virtfs local,path=/r/ctl,mount_tag=isolabctl,security_model=passthrough,id=isolabctl \
             -virtfs local,path=/w,,x,mount_tag=isolabwork,security_model=passthrough,id=isolabwork \
             -pidfile /r/qemu.pid"
        );
        // the kernel command line is one argument
        assert!(args.contains(&"console=ttyS0 quiet panic=-1".to_string()));
        // Without the host's page cache: O_DIRECT, native AIO.
        let direct = QemuPlan {
            disk_cache: DiskCache::None,
            ..plan(Accel::Tcg, Path::new("/r/console.log"))
        };
        assert!(qemu_args(&direct).contains(
            &"file=/r/root.qcow2,format=qcow2,if=none,id=root,discard=unmap,cache=none,aio=native"
                .to_string()
        ));
        assert_eq!("none".parse::<DiskCache>(), Ok(DiskCache::None));
        assert!("unsafe"
            .parse::<DiskCache>()
            .unwrap_err()
            .contains("expected `writeback`"));
        let single = QemuPlan {
            single_threaded_tcg: true,
            ..plan(Accel::Tcg, Path::new("/r/console.log"))
        };
        let line = qemu_args(&single).join(" ");
        assert!(line.contains("-accel tcg,thread=single -cpu max"), "{line}");
        let kvm = QemuPlan {
            single_threaded_tcg: true,
            ..plan(Accel::Kvm, Path::new("/r/console.log"))
        };
        assert!(qemu_args(&kvm).join(" ").contains("-accel kvm -cpu host"));
    }

    #[test]
    fn read_only_shares_get_numbered_tags() {
        let shares = [PathBuf::from("/work/a,b"), PathBuf::from("/var/lib/x")];
        let p = QemuPlan {
            shares: &shares,
            ..plan(Accel::Tcg, Path::new("/r/console.log"))
        };
        let line = qemu_args(&p).join(" ");
        assert!(line.contains(
            "-virtfs local,path=/work/a,,b,mount_tag=isolabshare0,security_model=passthrough,id=isolabshare0,readonly=on \
             -virtfs local,path=/var/lib/x,mount_tag=isolabshare1,security_model=passthrough,id=isolabshare1,readonly=on"
        ), "{line}");
    }

    #[test]
    fn kvm_scratch_and_probe_variants() {
        let console = Path::new("/r/console.log");
        let mut p = plan(Accel::Kvm, console);
        p.scratch = Some(Path::new("/r/scratch.ext4"));
        let line = qemu_args(&p).join(" ");
        assert!(line.contains("-accel kvm -cpu host"), "{line}");
        assert!(line.contains(
            "-drive file=/r/scratch.ext4,format=raw,if=none,id=scratch,discard=unmap -device virtio-blk-pci,drive=scratch"
        ));
        let probe = QemuPlan {
            cmdline: kernel_cmdline(true),
            root: None,
            ctl: None,
            workdir: None,
            qmp: None,
            pidfile: None,
            ..plan(Accel::Kvm, console)
        };
        let line = qemu_args(&probe).join(" ");
        assert!(line.contains("isolab.probe=1"));
        assert!(!line.contains("-drive") && !line.contains("-virtfs") && !line.contains("-qmp"));
    }

    #[test]
    fn a_network_is_a_virtio_nic_on_the_inherited_tap() {
        let mut p = plan(Accel::Tcg, Path::new("/r/console.log"));
        p.nic_mac = Some("02:00:0a:d5:00:05");
        let args = qemu_args(&p);
        let at = args.iter().position(|a| a == "-netdev").unwrap();
        assert_eq!(
            args[at..at + 4],
            [
                "-netdev",
                "tap,id=net0,fd=3",
                "-device",
                "virtio-net-pci,netdev=net0,mac=02:00:0a:d5:00:05"
            ]
        );
    }

    #[test]
    fn the_tap_descriptor_is_inherited_as_fd_3() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("tap")).unwrap();
        let fd = std::os::fd::AsRawFd::as_raw_fd(&file);
        let out = dir.path().join("out");
        let mut p = QemuProcess::spawn(
            Path::new("/bin/sh"),
            &[
                "-c".into(),
                format!("readlink /proc/self/fd/3 > {}", out.display()),
            ],
            &dir.path().join("log"),
            None,
            Some(fd),
        )
        .unwrap();
        while p.try_wait().is_none() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let target = std::fs::read_to_string(&out).unwrap();
        assert_eq!(target.trim(), dir.path().join("tap").to_string_lossy());
    }

    #[test]
    fn version_parsing() {
        let r = FakeRunner::default().answer(
            "qemu-system-x86_64 --version",
            "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)\nCopyright (c) 2003-2022 Fabrice Bellard\n",
        );
        assert_eq!(
            qemu_version_with(&r, Path::new(QEMU)).unwrap(),
            "7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)"
        );
        assert_eq!(parse_version("something else"), "something else");
    }

    #[test]
    fn a_dropped_process_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = QemuProcess::spawn(
            Path::new("/bin/sleep"),
            &["30".to_string()],
            &dir.path().join("log"),
            None,
            None,
        )
        .unwrap();
        let pid = p.pid();
        assert!(p.try_wait().is_none());
        drop(p);
        assert!(!Path::new(&format!("/proc/{pid}")).exists());
    }
}
