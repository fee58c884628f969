//! The accelerator: KVM when it really boots our kernel, TCG (QEMU's emulator) otherwise, with
//! the reason recorded so that results are labelled `vm(kvm)` or `vm(tcg)` honestly.
//!
//! `/dev/kvm` existing, opening and creating a VM is not enough: on this project's host it is a
//! nested "PVM" device that accepts `KVM_CREATE_VM` and then never runs a stock kernel. So after
//! the device checks, [`detect_accel`] boots the guest kernel under KVM in probe mode (the
//! initramfs prints [`PROBE_MARKER`] and powers off at once) and believes KVM only when the
//! marker appears in time.

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::agent::PROBE_MARKER;
use crate::kernel::KernelFiles;
pub use crate::qemu::Accel;
use crate::qemu::{kernel_cmdline, qemu_args, QemuPlan, QemuProcess};

/// The accelerator chosen and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccelReport {
    /// The accelerator to use.
    pub accel: Accel,
    /// Why, in a sentence for the environment record.
    pub reason: String,
}

/// The KVM device.
pub const KVM_DEVICE: &str = "/dev/kvm";
/// How long [`detect_accel`]'s probe boot may take by default: a KVM boot to the initramfs
/// takes well under 2 s; 20 s allows for a heavily loaded host.
pub const DEFAULT_PROBE_TIMEOUT: Duration = Duration::from_secs(20);

const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
const KVM_CREATE_VM: libc::c_ulong = 0xAE01;
const KVM_API_VERSION: i32 = 12;

/// Opens `device`, checks the KVM API version and creates (and closes) a VM.
pub fn kvm_device_check(device: &Path) -> Result<(), String> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(device)
        .map_err(|e| format!("cannot open {}: {e}", device.display()))?;
    // SAFETY: KVM_GET_API_VERSION takes no argument and only returns an integer; the fd is
    // open for the duration of the call.
    let version = unsafe { libc::ioctl(f.as_raw_fd(), KVM_GET_API_VERSION, 0) };
    if version != KVM_API_VERSION {
        return Err(format!(
            "{}: KVM_GET_API_VERSION gave {version}, expected {KVM_API_VERSION}",
            device.display()
        ));
    }
    // SAFETY: KVM_CREATE_VM takes the machine type 0 by value and returns a new fd or -1.
    let vm = unsafe { libc::ioctl(f.as_raw_fd(), KVM_CREATE_VM, 0) };
    if vm < 0 {
        return Err(format!(
            "{}: KVM_CREATE_VM failed: {}",
            device.display(),
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: vm is a file descriptor we own and close exactly once.
    unsafe { libc::close(vm) };
    Ok(())
}

/// Boots `kernel` in probe mode under `accel`; the time until the marker, or why not.
pub fn probe_boot(
    kernel: &KernelFiles,
    qemu: &Path,
    accel: Accel,
    timeout: Duration,
) -> Result<Duration, String> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir = std::env::temp_dir().join(format!("isolab-vm-probe-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let result = probe_in(&dir, kernel, qemu, accel, timeout);
    // Best effort: a leftover probe directory in /tmp holds two small log files.
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn probe_in(
    dir: &Path,
    kernel: &KernelFiles,
    qemu: &Path,
    accel: Accel,
    timeout: Duration,
) -> Result<Duration, String> {
    let console: PathBuf = dir.join("console.log");
    let plan = QemuPlan {
        disk_cache: crate::qemu::DiskCache::default(),
        accel,
        single_threaded_tcg: false,
        vcpus: 1,
        memory_mib: 256,
        vmlinux: &kernel.vmlinux,
        initramfs: &kernel.initramfs,
        cmdline: kernel_cmdline(true),
        root: None,
        scratch: None,
        ctl: None,
        workdir: None,
        shares: &[],
        console: &console,
        qmp: None,
        pidfile: None,
        nic_mac: None,
    };
    let log = dir.join("qemu.log");
    let start = Instant::now();
    let mut qemu =
        QemuProcess::spawn(qemu, &qemu_args(&plan), &log, None, None).map_err(|e| e.to_string())?;
    loop {
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        if text.contains(PROBE_MARKER) {
            let took = start.elapsed();
            qemu.kill();
            return Ok(took);
        }
        if let Some(status) = qemu.try_wait() {
            let said = std::fs::read(&log).unwrap_or_default();
            return Err(format!(
                "QEMU exited ({status}) without the probe marker: {}",
                isolab_tools::tail_lines(&said, 5)
            ));
        }
        if start.elapsed() > timeout {
            qemu.kill();
            let tail = isolab_tools::tail_lines(text.as_bytes(), 3);
            return Err(if tail.is_empty() {
                format!("the guest kernel printed nothing within {timeout:?}")
            } else {
                format!("no probe marker within {timeout:?}; console ended with: {tail}")
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The decision from the two checks: KVM only when the device works and the probe booted.
pub(crate) fn decide(
    device: Result<(), String>,
    boot: Option<Result<Duration, String>>,
) -> AccelReport {
    let tcg = |why: String| AccelReport {
        accel: Accel::Tcg,
        reason: format!("KVM unusable: {why}; using TCG (emulation, much slower)"),
    };
    match (device, boot) {
        (Err(e), _) => tcg(e),
        (Ok(()), None) => tcg("the probe boot was not run".into()),
        (Ok(()), Some(Err(e))) => tcg(format!(
            "{KVM_DEVICE} opens and creates VMs, but a probe boot of the guest kernel failed: {e} \
             (a nested or paravirtual KVM device that cannot run a stock kernel?)"
        )),
        (Ok(()), Some(Ok(took))) => AccelReport {
            accel: Accel::Kvm,
            reason: format!(
                "{KVM_DEVICE} works and a probe boot of the guest kernel reached its init in {:.1} s",
                took.as_secs_f64()
            ),
        },
    }
}

/// Detects the accelerator: `kvm_device_check` of `/dev/kvm`, then a `probe_boot` under KVM
/// that must print the marker within `timeout`.
pub fn detect_accel(kernel: &KernelFiles, qemu: &Path, timeout: Duration) -> AccelReport {
    let device = kvm_device_check(Path::new(KVM_DEVICE));
    let boot = device
        .is_ok()
        .then(|| probe_boot(kernel, qemu, Accel::Kvm, timeout));
    decide(device, boot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions() {
        let r = decide(
            Err("cannot open /dev/kvm: No such file or directory".into()),
            None,
        );
        assert_eq!(r.accel, Accel::Tcg);
        assert!(
            r.reason.starts_with("KVM unusable: cannot open /dev/kvm"),
            "{}",
            r.reason
        );
        let r = decide(
            Ok(()),
            Some(Err("the guest kernel printed nothing within 20s".into())),
        );
        assert_eq!(r.accel, Accel::Tcg);
        assert!(r.reason.contains("printed nothing") && !r.reason.contains("PVM"));
        let r = decide(Ok(()), Some(Ok(Duration::from_millis(1234))));
        assert_eq!(r.accel, Accel::Kvm);
        assert!(r.reason.contains("1.2 s"), "{}", r.reason);
        assert_eq!(Accel::Tcg.to_string(), "tcg");
        assert_eq!(serde_json::to_string(&Accel::Kvm).unwrap(), "\"kvm\"");
    }

    #[test]
    fn missing_device_is_reported() {
        let e = kvm_device_check(Path::new("/nonexistent/kvm")).unwrap_err();
        assert!(e.contains("cannot open /nonexistent/kvm"), "{e}");
        let e = kvm_device_check(Path::new("/dev/null")).unwrap_err();
        assert!(e.contains("KVM_GET_API_VERSION"), "{e}");
    }
}
