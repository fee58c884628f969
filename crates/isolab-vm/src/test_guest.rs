//! A pure cgroup v2 host for tests: a guest of the `vm` platform's kind (the bench image's
//! disk, the cached Debian kernel, a pure cgroup2 hierarchy with cpu, cpuset, memory, pids and
//! io enabled) in which a test runs a shell script as root.
//!
//! The machines isolab is developed on are hybrid (cgroup v1 controllers), while the hosts
//! users have are pure cgroup v2; this is how the v2 paths meet a real kernel in `make test`.
//! Binaries and fixtures reach the guest through read-only 9p shares at their host paths
//! ([`GuestTest::shares`]: a cargo target directory, the workspace for fixtures, an image
//! directory), so a test binary built on the host runs unchanged in the guest (the bench image
//! is the same Debian release as the build host), and paths compiled into it
//! (`CARGO_MANIFEST_DIR`, `CARGO_BIN_EXE_…`) resolve. The script's working directory is a
//! fresh 9p-shared workdir where it leaves what the test reads back.
//!
//! Guests do not share the host's cpus, so that the timing checks inside them hold:
//! [`TestGuest::run`] waits while the guests running in this process already take every
//! cpu (a TCG guest runs its vCPUs in one host thread here, one cpu; a KVM guest takes
//! one per vCPU). On a two-cpu host two TCG guests run at once.

use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::Duration;

use isolab_cgroups::Bytes;

use crate::{
    detect_accel, prepare_disk, prepare_kernel, run, Accel, AccelReport, BaseDisk, GuestCommand,
    GuestRun, KernelFiles, VmConfig, VmError, DEFAULT_PROBE_TIMEOUT, QEMU,
};

/// The bench image, unless `ISOLAB_BENCH_IMAGE` names another.
const BENCH_IMAGE: &str = "/var/lib/isolab/images/bench";
/// The kernel and disk cache, unless `ISOLAB_VM_CACHE` names another.
const VM_CACHE: &str = "/var/lib/isolab/vm";

/// Why no test guest: the test should skip (this machine cannot have one) or fail (it should).
#[derive(Debug, Clone)]
pub enum GuestUnavailable {
    /// Something this machine lacks, with what to do about it: not root, QEMU or the image
    /// missing.
    Skip(String),
    /// Preparing the kernel, the disk or the accelerator failed where it should work.
    Failed(String),
}

/// A guest ready to boot: kernel, disk and accelerator prepared once.
#[derive(Debug, Clone)]
pub struct TestGuest {
    kernel: KernelFiles,
    disk: BaseDisk,
    accel: AccelReport,
}

/// The kernel cache and the kernel with its accelerator, prepared once per process (the
/// accelerator probe boots a guest).
#[derive(Debug)]
struct Base {
    cache: PathBuf,
    kernel: KernelFiles,
    accel: AccelReport,
}

fn base() -> Result<&'static Base, GuestUnavailable> {
    static BASE: OnceLock<Result<Base, GuestUnavailable>> = OnceLock::new();
    BASE.get_or_init(|| {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err(GuestUnavailable::Skip(
                "a test guest needs root (QEMU, the kernel cache, the disk)".into(),
            ));
        }
        if isolab_tools::find_program(QEMU).is_none() {
            return Err(GuestUnavailable::Skip(format!(
                "{QEMU} missing (apt-get install qemu-system-x86, or scripts/setup.sh)"
            )));
        }
        let cache = std::env::var_os("ISOLAB_VM_CACHE")
            .map_or_else(|| PathBuf::from(VM_CACHE), PathBuf::from);
        let kernel = prepare_kernel(&cache)
            .map_err(|e| GuestUnavailable::Failed(format!("preparing the guest kernel: {e}")))?;
        let accel = this_boots_accel(&cache, &kernel, || {
            detect_accel(&kernel, Path::new(QEMU), DEFAULT_PROBE_TIMEOUT)
        });
        Ok(Base {
            cache,
            kernel,
            accel,
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// How to boot the guest for one script.
#[derive(Debug, Clone)]
pub struct GuestTest {
    /// vCPUs (default 2).
    pub vcpus: u32,
    /// Guest memory (default 2 GiB).
    pub memory: Bytes,
    /// How long the script may run once the guest is up (default 20 minutes: TCG is slow).
    pub timeout: Duration,
    /// Host directories mounted read-only at the same path in the guest.
    pub shares: Vec<PathBuf>,
    /// Environment of the script, besides `PATH` and `HOME`.
    pub env: Vec<(String, String)>,
}

impl Default for GuestTest {
    fn default() -> Self {
        GuestTest {
            vcpus: 2,
            memory: Bytes::gib(2),
            timeout: Duration::from_secs(20 * 60),
            shares: Vec::new(),
            env: Vec::new(),
        }
    }
}

impl TestGuest {
    /// The kernel, the bench image's disk and the accelerator, prepared (cached under
    /// `/var/lib/isolab/vm`, or `$ISOLAB_VM_CACHE`); the image is `$ISOLAB_BENCH_IMAGE` or
    /// /var/lib/isolab/images/bench.
    pub fn prepare() -> Result<TestGuest, GuestUnavailable> {
        TestGuest::prepare_image("ISOLAB_BENCH_IMAGE", BENCH_IMAGE, "bench")
    }

    /// As [`TestGuest::prepare`] with the image at `$var` (default `default`), built by the
    /// image recipe `recipe` (named in the reason when it is missing).
    pub fn prepare_image(
        var: &str,
        default: &str,
        recipe: &str,
    ) -> Result<TestGuest, GuestUnavailable> {
        let image = std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from);
        if !image.join(isolab_image::MANIFEST_FILE).is_file() {
            return Err(GuestUnavailable::Skip(format!(
                "no {recipe} image at {} (make image-debug builds it; or set {var})",
                image.display()
            )));
        }
        let base = base()?;
        let disk = prepare_disk(&image, &base.cache).map_err(|e| {
            GuestUnavailable::Failed(format!("preparing the disk of {}: {e}", image.display()))
        })?;
        Ok(TestGuest {
            kernel: base.kernel.clone(),
            disk,
            accel: base.accel.clone(),
        })
    }

    /// The guest kernel.
    pub fn kernel(&self) -> &KernelFiles {
        &self.kernel
    }

    /// The root disk.
    pub fn disk(&self) -> &BaseDisk {
        &self.disk
    }

    /// The accelerator the guests boot with, and why.
    pub fn accel(&self) -> &AccelReport {
        &self.accel
    }

    /// Boots a guest, runs `script` with `sh -c` as root in `workdir` (a host directory that is
    /// the same path in the guest, read-write), and brings back its status and output.
    pub fn run(&self, workdir: &Path, script: &str, test: &GuestTest) -> Result<GuestRun, VmError> {
        let threads = match self.accel.accel {
            Accel::Tcg => 1,
            Accel::Kvm => test.vcpus.max(1) as usize,
        };
        let _slot = Slot::take(threads);
        let run_dir = std::env::temp_dir().join(format!(
            "isolab-test-guest-{}-{}",
            std::process::id(),
            workdir
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        ));
        let mut config = VmConfig::new(
            self.kernel.clone(),
            self.disk.clone(),
            self.accel.accel,
            workdir,
            run_dir,
        );
        config.vcpus = test.vcpus;
        config.memory = test.memory;
        config.shares = test.shares.clone();
        // One thread for both vCPUs: multi-threaded TCG left a halted vCPU asleep for good
        // in about one pure-v2 experiment in ten (the other soft-locked waiting for it).
        config.single_threaded_tcg = true;
        let mut command = GuestCommand::new(["sh", "-c", script], test.timeout);
        command.env = test.env.clone();
        run(&config, &command, None, &|| false)
    }
}

/// A guest's share of the host's cpus, given back when dropped.
struct Slot(usize);

/// The host threads the running guests of this process take, and a wake-up when one
/// ends.
static TAKEN: Mutex<usize> = Mutex::new(0);
static FREED: Condvar = Condvar::new();

impl Slot {
    /// Waits until a guest whose vCPUs run in `threads` host threads fits beside the
    /// running ones on the host's cpus (one always runs, however many it needs).
    fn take(threads: usize) -> Slot {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        while *taken > 0 && *taken + threads > cpus {
            taken = FREED.wait(taken).unwrap_or_else(|e| e.into_inner());
        }
        *taken += threads;
        Slot(threads)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut taken = TAKEN.lock().unwrap_or_else(|e| e.into_inner());
        *taken -= self.0;
        FREED.notify_all();
    }
}

/// The accelerator test guests use: the verdict of this boot's first probe of this kernel
/// with this QEMU, kept in `cache` (`test-guest-accel.json`), or `probe`'s, then kept.
/// Where `/dev/kvm` opens but cannot boot the kernel, a probe waits 20 s for it before
/// TCG: once per boot instead of once per test binary (two in `make test`). Only the
/// test guests keep it; `isolab run` and `isolab env --check-kvm` probe every time.
fn this_boots_accel(
    cache: &Path,
    kernel: &KernelFiles,
    probe: impl FnOnce() -> AccelReport,
) -> AccelReport {
    let file = cache.join("test-guest-accel.json");
    let key = verdict_key(
        &std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default(),
        &kernel.vmlinux,
        &isolab_tools::find_program(QEMU).unwrap_or_else(|| PathBuf::from(QEMU)),
    );
    let kept: Option<(String, AccelReport)> = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok());
    match kept {
        Some((k, mut report)) if k == key => {
            report.reason = format!(
                "{} (this boot's probe, kept in {})",
                report.reason,
                file.display()
            );
            report
        }
        _ => {
            let report = probe();
            // Best effort: without it the next binary probes again.
            let tmp = file.with_extension(format!("json.{}", std::process::id()));
            if let Ok(bytes) = serde_json::to_vec(&(&key, &report)) {
                if std::fs::write(&tmp, bytes).is_ok() {
                    let _ = std::fs::rename(&tmp, &file);
                }
            }
            report
        }
    }
}

/// What a kept verdict holds for: the boot (`boot_id`), and the kernel's and QEMU's
/// files by path, size and modification time.
fn verdict_key(boot_id: &str, vmlinux: &Path, qemu: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let identity = |p: &Path| match std::fs::metadata(p) {
        Ok(m) => format!(
            "{} {} {}.{}",
            p.display(),
            m.len(),
            m.mtime(),
            m.mtime_nsec()
        ),
        Err(_) => format!("{} missing", p.display()),
    };
    format!(
        "{} | {} | {}",
        boot_id.trim(),
        identity(vmlinux),
        identity(qemu)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Accel;

    #[test]
    fn a_verdict_is_kept_for_the_boot_kernel_and_qemu_it_was_probed_with() {
        let dir = tempfile::tempdir().unwrap();
        let vmlinux = dir.path().join("vmlinux");
        let qemu = dir.path().join("qemu");
        std::fs::write(&vmlinux, "kernel").unwrap();
        std::fs::write(&qemu, "qemu").unwrap();
        let key = verdict_key("b1\n", &vmlinux, &qemu);
        assert_eq!(key, verdict_key("b1", &vmlinux, &qemu));
        assert_ne!(key, verdict_key("b2", &vmlinux, &qemu));
        std::fs::write(&vmlinux, "another kernel").unwrap();
        assert_ne!(key, verdict_key("b1", &vmlinux, &qemu));
        assert!(verdict_key("b1", &dir.path().join("none"), &qemu).contains("missing"));
    }

    #[test]
    fn the_first_probe_of_a_boot_is_kept_and_the_next_one_is_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let kernel = KernelFiles {
            metapackage: "linux-image-amd64".into(),
            package: "linux-image-6.1.0-56-amd64".into(),
            version: "6.1.192-2".into(),
            release: "6.1.0-56-amd64".into(),
            dir: dir.path().into(),
            vmlinux: dir.path().join("vmlinux"),
            initramfs: dir.path().join("initramfs"),
            modules: Vec::new(),
        };
        std::fs::write(&kernel.vmlinux, "kernel").unwrap();
        let tcg = AccelReport {
            accel: Accel::Tcg,
            reason: "KVM unusable: a test".into(),
        };
        let first = this_boots_accel(dir.path(), &kernel, || tcg.clone());
        assert_eq!(first, tcg);
        let second = this_boots_accel(dir.path(), &kernel, || panic!("probed again"));
        assert_eq!(second.accel, Accel::Tcg);
        assert!(second
            .reason
            .starts_with("KVM unusable: a test (this boot's probe, kept in "));
        // Another kernel is probed again.
        std::fs::write(&kernel.vmlinux, "another kernel").unwrap();
        let kvm = AccelReport {
            accel: Accel::Kvm,
            reason: "works".into(),
        };
        assert_eq!(this_boots_accel(dir.path(), &kernel, || kvm.clone()), kvm);
    }
}
