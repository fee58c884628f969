//! QEMU virtual machines for isolab's `vm`, `vm+isolab` and `vm+docker` platforms: boot a VM (inside the
//! lab's cgroup), run one command in the guest, bring back its exit status, output and
//! guest-measured wall time, shut the VM down and leave nothing behind.
//!
//! Preparation, once per host and image (cached under a directory such as
//! `/var/lib/isolab/vm`):
//! - [`prepare_kernel`]: Debian's `linux-image-amd64` kernel, fetched with `apt-get download`,
//!   unpacked with `dpkg-deb -x`, decompressed to an ELF `vmlinux` (direct PVH boot, which
//!   saves the ~7 s an XZ bzImage spends decompressing itself under TCG), and an initramfs
//!   (uncompressed cpio: static busybox, the virtio, ext4, 9p and overlay modules in dependency
//!   order, `/init` and the guest agent) → [`KernelFiles`]. See [`kernel`] for why the generic
//!   flavour and not the cloud one (no 9p).
//! - [`prepare_disk`]: the bench image packed as a whole-disk ext4 file, keyed by the image
//!   manifest's SHA-256 → [`BaseDisk`]; every VM writes into its own qcow2 overlay.
//! - [`detect_accel`]: KVM only when a probe boot of our kernel under KVM reaches its init in
//!   time; TCG otherwise → [`AccelReport`] (label results `vm(tcg)`).
//! - [`environment`]: QEMU version, kernel package and version, accelerator and why, disk digest.
//!
//! Each run ([`run`]): a [`VmConfig`] (vCPUs, memory, optional pinning of vCPU threads to host
//! cpus, workdir, run directory, boot timeout, optional scratch disk) and a [`GuestCommand`]
//! (argv, environment, cwd, timeout, and for a container in the VM an [`InnerEngine`]: for
//! `vm+isolab` an [`InnerContainer`], the guest runs the command through `isolab-runtime run
//! --rootfs-type overlay` on the guest's own root; for `vm+docker` an [`InnerDocker`], the guest
//! image's dockerd is started before the command and runs it with `docker run` on the guest's
//! root, see [`docker`]). The result is a [`GuestRun`].
//!
//! Guest layout: `q35` machine, `-accel tcg,thread=multi -cpu max` or `-accel kvm -cpu host`,
//! the root disk on virtio-blk, the serial console in a log file, QMP on a Unix socket (vCPU
//! thread ids for pinning, `quit`). Two 9p shares: the control directory (command in, results
//! out; see [`agent`]) and the run's workdir, mounted at the same path in the guest; plus one
//! read-only share per [`VmConfig::shares`] directory, also at its own path (binaries and
//! fixtures for tests in a guest, see [`test_guest`]). The agent
//! runs as PID 1 (busybox sh), mounts proc, sys, a pure cgroup2 hierarchy with cpu, cpuset,
//! memory, pids and io enabled, brings up `lo`, runs the command with its output on a tmpfs and
//! times it on `CLOCK_MONOTONIC`, writes the results, syncs and powers off.
//!
//! Network: with [`VmConfig::network`] (a [`GuestNetwork`]: a tap the caller made, e.g. on
//! isolab-runtime's bridge, and the guest's address), QEMU inherits the tap as descriptor 3
//! behind a virtio-net device and the agent configures `eth0` and the default route. Services:
//! [`start`] boots a VM whose command runs until [`RunningVm::stop`] (a clean poweroff, then
//! QMP `quit`, then SIGKILL).
//!
//! File I/O in the 9p-shared workdir measures 9p, not a disk. For disk workloads (fio) set
//! [`VmConfig::scratch_disk`]: the workdir in the guest is then a fresh ext4 file system on a
//! second virtio disk, with the host workdir's files copied in before the command and copied
//! back after it (outside the measured time).
//!
//! Host programs (apt-cache, apt-get, dpkg-deb, xz, qemu-img, mkfs.ext4) run through
//! `isolab-tools`' [`ToolRunner`](isolab_tools::ToolRunner) trait
//! ([`SystemTools`](isolab_tools::SystemTools) for real); QMP's encoding and parsing are tested on
//! canned text ([`qmp`]).

pub mod accel;
pub mod agent;
pub mod disk;
pub mod docker;
mod error;
#[cfg(test)]
mod fake_runner;
mod guest;
pub mod guest_os;
pub mod initramfs;
pub mod kernel;
pub mod modules;
pub mod qemu;
pub mod qmp;
mod run;
pub mod test_guest;

pub use accel::{
    detect_accel, kvm_device_check, probe_boot, Accel, AccelReport, DEFAULT_PROBE_TIMEOUT,
    KVM_DEVICE,
};
pub use agent::GuestClock;
pub use disk::{prepare_disk, BaseDisk};
pub use docker::{DockerReport, InnerDocker};
pub use error::VmError;
pub use guest_os::GuestOs;
pub use kernel::{prepare_kernel, prepare_kernel_with, KernelFiles, KernelOptions, SuiteApt};
pub use qemu::{qemu_version, DiskCache, QEMU};
pub use run::{
    environment, get_affinity, run, run_with, start, start_container_host, start_with,
    ContainerHost, GuestCommand, GuestNetwork, GuestRun, InnerContainer, InnerEngine, RunningVm,
    Shutdown, VcpuAffinity, VcpuPin, VmConfig, VmEnvironment,
};
