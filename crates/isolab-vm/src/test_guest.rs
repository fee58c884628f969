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
//! One guest at a time per process: [`TestGuest::run`] holds a process-wide lock, so that
//! guests do not share the host's cpus and the timing checks inside them hold.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use isolab_cgroups::Bytes;

use crate::{
    detect_accel, prepare_disk, prepare_kernel, run, AccelReport, BaseDisk, GuestCommand, GuestRun,
    KernelFiles, VmConfig, VmError, DEFAULT_PROBE_TIMEOUT, QEMU,
};

/// The bench image, unless `ISOLAB_BENCH_IMAGE` names another.
const BENCH_IMAGE: &str = "/var/lib/isolab/images/bench";
/// The kernel and disk cache, unless `ISOLAB_VM_CACHE` names another.
const VM_CACHE: &str = "/var/lib/isolab/vm";

/// Why no test guest: the test should skip (this machine cannot have one) or fail (it should).
#[derive(Debug)]
pub enum GuestUnavailable {
    /// Something this machine lacks, with what to do about it: not root, QEMU or the bench
    /// image missing.
    Skip(String),
    /// Preparing the kernel, the disk or the accelerator failed where it should work.
    Failed(VmError),
}

/// A guest ready to boot: kernel, disk and accelerator prepared once.
#[derive(Debug, Clone)]
pub struct TestGuest {
    kernel: KernelFiles,
    disk: BaseDisk,
    accel: AccelReport,
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
    /// `/var/lib/isolab/vm`, or `$ISOLAB_VM_CACHE`).
    pub fn prepare() -> Result<TestGuest, GuestUnavailable> {
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
        let image = std::env::var_os("ISOLAB_BENCH_IMAGE")
            .map_or_else(|| PathBuf::from(BENCH_IMAGE), PathBuf::from);
        if !image.join(isolab_image::MANIFEST_FILE).is_file() {
            return Err(GuestUnavailable::Skip(format!(
                "no bench image at {} (make image-debug builds it; or set ISOLAB_BENCH_IMAGE)",
                image.display()
            )));
        }
        let cache = std::env::var_os("ISOLAB_VM_CACHE")
            .map_or_else(|| PathBuf::from(VM_CACHE), PathBuf::from);
        let kernel = prepare_kernel(&cache).map_err(GuestUnavailable::Failed)?;
        let disk = prepare_disk(&image, &cache).map_err(GuestUnavailable::Failed)?;
        let accel = detect_accel(&kernel, Path::new(QEMU), DEFAULT_PROBE_TIMEOUT);
        Ok(TestGuest {
            kernel,
            disk,
            accel,
        })
    }

    /// The accelerator the guests boot with, and why.
    pub fn accel(&self) -> &AccelReport {
        &self.accel
    }

    /// Boots a guest, runs `script` with `sh -c` as root in `workdir` (a host directory that is
    /// the same path in the guest, read-write), and brings back its status and output.
    pub fn run(&self, workdir: &Path, script: &str, test: &GuestTest) -> Result<GuestRun, VmError> {
        static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
        let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
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
        let mut command = GuestCommand::new(["sh", "-c", script], test.timeout);
        command.env = test.env.clone();
        run(&config, &command, None, &|| false)
    }
}
