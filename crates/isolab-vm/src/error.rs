//! [`VmError`]: everything that can go wrong preparing, booting and running a VM, each message
//! naming the object or path and what to do about it.

use std::path::PathBuf;
use std::time::Duration;

/// An error of this crate. Every message says what failed, on which path or object, and where it
/// helps, what to do.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// A host file system operation failed.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done ("create directory", "read").
        op: &'static str,
        /// The path it was done to.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A host program is missing, could not be started or failed.
    #[error(transparent)]
    Tool(#[from] isolab_tools::ToolError),
    /// apt could not tell which versioned kernel package the metapackage stands for.
    #[error(
        "cannot resolve the kernel package {metapackage} with apt-cache: {detail}; run \
         `apt-get update` (needs access to the Debian mirror once) or make sure the host's apt \
         sources include Debian bookworm"
    )]
    KernelResolve {
        /// The metapackage ("linux-image-amd64").
        metapackage: String,
        /// What went wrong.
        detail: String,
    },
    /// apt could not download the kernel package.
    #[error(
        "cannot download {package} (version {version}) with apt-get download: {detail}; allow \
         access to the Debian mirror (deb.debian.org) once, or put the .deb file into {dir} \
         yourself"
    )]
    KernelDownload {
        /// The versioned package ("linux-image-6.1.0-56-amd64").
        package: String,
        /// Its version ("6.1.192-2").
        version: String,
        /// The directory the .deb should land in.
        dir: PathBuf,
        /// What went wrong (the tool's message).
        detail: String,
    },
    /// The kernel package did not contain what a direct kernel boot needs.
    #[error("kernel {path}: {reason}")]
    KernelImage {
        /// The file (bzImage, vmlinux, package tree).
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The busybox binary cannot serve as the initramfs shell.
    #[error("busybox {path}: {reason}; apt-get install busybox-static")]
    Busybox {
        /// The busybox binary.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A kernel module the guest needs is not in the kernel package.
    #[error(
        "kernel module {module} (needed by {needed_by}) is neither built in nor found under \
         {dir}; use a kernel flavour that has it (Debian's generic linux-image-amd64 does)"
    )]
    ModuleMissing {
        /// The missing module.
        module: String,
        /// The module (or "the guest") that needs it.
        needed_by: String,
        /// The modules directory searched.
        dir: PathBuf,
    },
    /// Kernel modules depend on each other in a cycle.
    #[error("kernel modules depend on each other in a cycle: {cycle}")]
    ModuleCycle {
        /// The cycle, "a -> b -> a".
        cycle: String,
    },
    /// A kernel module file could not be parsed.
    #[error("kernel module {path}: {reason}")]
    ModuleFormat {
        /// The .ko file or modules.dep.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// Packing the image into an ext4 disk failed.
    #[error("cannot make the VM disk from image {image}: {source}")]
    Disk {
        /// The image directory.
        image: PathBuf,
        /// The image crate's error.
        source: isolab_image::ImageError,
    },
    /// A VM configuration value is out of range.
    #[error("invalid VM configuration: {field}: {reason}")]
    Config {
        /// The field ("pin", "vcpus").
        field: &'static str,
        /// Why it is refused.
        reason: String,
    },
    /// The guest command is not usable.
    #[error("invalid guest command: {reason}")]
    Command {
        /// Why it is refused.
        reason: String,
    },
    /// The run directory exists already (it would be removed afterwards, so it must be ours).
    #[error(
        "run directory {path} exists already; give a fresh path (it is removed after the run)"
    )]
    RunDirExists {
        /// The path.
        path: PathBuf,
    },
    /// QEMU could not be started.
    #[error("cannot start {program}: {source}; apt-get install qemu-system-x86")]
    QemuSpawn {
        /// The QEMU binary.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The QMP conversation failed.
    #[error("QMP on {socket}: {detail}")]
    Qmp {
        /// The QMP socket.
        socket: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A vCPU thread could not be pinned.
    #[error("cannot pin vCPU {vcpu} (thread {thread}) to host cpu {cpu}: {source}")]
    Pin {
        /// The vCPU index.
        vcpu: u32,
        /// The host thread id.
        thread: i32,
        /// The host cpu.
        cpu: u32,
        /// The OS error.
        source: std::io::Error,
    },
    /// The guest did not start its agent in time.
    #[error(
        "the guest did not come up within {timeout:?} (no agent start); console tail:\n{console}"
    )]
    BootTimeout {
        /// The boot timeout.
        timeout: Duration,
        /// The end of the guest's serial console.
        console: String,
    },
    /// The guest command did not finish in time; the VM was killed.
    #[error(
        "the guest command did not finish within {timeout:?}; the VM was killed; console \
         tail:\n{console}"
    )]
    CommandTimeout {
        /// The command timeout.
        timeout: Duration,
        /// The end of the guest's serial console (the kernel's hung-task and stall reports).
        console: String,
    },
    /// QEMU ended before the guest reported a result.
    #[error(
        "QEMU exited ({status}) before the guest reported a result\nQEMU said:\n{qemu}\nconsole \
         tail:\n{console}"
    )]
    QemuExited {
        /// QEMU's exit status.
        status: String,
        /// The end of QEMU's standard error.
        qemu: String,
        /// The end of the guest's serial console.
        console: String,
    },
    /// The guest agent reported a failure before it could run the command.
    #[error("the guest could not run the command: {message}; console tail:\n{console}")]
    Guest {
        /// The agent's message.
        message: String,
        /// The end of the guest's serial console.
        console: String,
    },
    /// The agent's result file is malformed.
    #[error("guest result {path}: {reason}")]
    Result {
        /// The result file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The image of a `vm+docker` guest has no Docker daemon.
    #[error(
        "the image {image} has no dockerd (usr/sbin/dockerd), so Docker cannot run in the guest: \
         build an image with Docker: isolab image build bench-docker DIR and set image = \"DIR\" \
         in [experiment]"
    )]
    NoDockerd {
        /// The image directory.
        image: PathBuf,
    },
    /// The container's cgroup files, copied into the workdir by the guest, cannot be read.
    #[error(
        "the Docker container's cgroup report {dir} (written in the guest) cannot be read: {source}"
    )]
    DockerReport {
        /// The report directory.
        dir: PathBuf,
        /// What failed.
        source: isolab_cgroups::Error,
    },
    /// The caller asked to stop; the VM was killed.
    #[error("interrupted: the VM was killed")]
    Interrupted,
}

impl VmError {
    /// An [`VmError::Io`] for `op` on `path`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        VmError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// `.ctx("read", path)` on io results.
pub(crate) trait IoContext<T> {
    /// Attach the operation and the path.
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T, VmError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T, VmError> {
        self.map_err(|e| VmError::io(op, path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let e = VmError::from(isolab_tools::ToolError::from(isolab_tools::NotInstalled {
            program: "qemu-img".into(),
            package: "qemu-utils".into(),
        }));
        assert_eq!(
            e.to_string(),
            "`qemu-img` is not installed: install the Debian package `qemu-utils` \
             (`apt-get install qemu-utils`) or run `scripts/setup.sh vm`"
        );
        let e = VmError::KernelDownload {
            package: "linux-image-6.1.0-56-amd64".into(),
            version: "6.1.192-2".into(),
            dir: "/var/lib/isolab/vm/kernel".into(),
            detail: "E: Failed to fetch".into(),
        };
        assert!(e.to_string().contains("allow access to the Debian mirror"));
        let e: Result<(), VmError> =
            Err(std::io::Error::from_raw_os_error(libc::ENOENT)).ctx("read", "/x".as_ref());
        assert!(e.unwrap_err().to_string().starts_with("cannot read /x: "));
    }
}
