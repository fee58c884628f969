//! Errors of the security module.

use std::io;
use std::path::PathBuf;

/// What went wrong while preparing or applying the security defaults.
#[derive(Debug, thiserror::Error)]
pub enum SecurityError {
    /// A capability name that is not in the table.
    #[error(
        "unknown capability {name:?}: use a name such as CAP_NET_ADMIN (or NET_ADMIN, or ALL)"
    )]
    UnknownCapability {
        /// The name as given.
        name: String,
    },

    /// The configuration keeps capabilities the calling process does not have.
    #[error(
        "capabilities {missing} are not in this process's permitted/bounding set, so the container \
         cannot keep them: drop them from the configuration or run isolab with them"
    )]
    CapabilitiesUnavailable {
        /// The missing capabilities, comma separated.
        missing: String,
    },

    /// Reading the current capability sets failed (`capget`, `PR_CAPBSET_READ`).
    #[error("cannot read this process's capabilities ({what})")]
    ReadCapabilities {
        /// Which call failed.
        what: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// The seccomp profile does not support this architecture.
    #[error(
        "no built-in seccomp profile for architecture {arch}: Docker's default profile is \
         only kept for x86_64 and aarch64 (use SeccompChoice::Unconfined to run without one, \
         or pass an OCI profile)"
    )]
    UnsupportedArch {
        /// `std::env::consts::ARCH`.
        arch: &'static str,
    },

    /// libseccomp refused a step of building a filter.
    #[error(
        "cannot compile {what} to a seccomp filter: libseccomp refused {step}: {source} \
         (fix or drop that part of the profile)"
    )]
    CompileSeccomp {
        /// Which filter (`Docker's default profile`, `the OCI profile`).
        what: &'static str,
        /// The step refused, e.g. "the rule ALLOW for clone".
        step: String,
        /// libseccomp's error.
        #[source]
        source: libseccomp::error::SeccompError,
    },

    /// A syscall name of the built-in profile that libseccomp does not know.
    #[error(
        "the system's libseccomp does not know the syscall {name:?} of Docker's default \
         profile: update libseccomp (Debian: libseccomp2)"
    )]
    SeccompUnknownSyscall {
        /// The name.
        name: String,
    },

    /// Taking the BPF program out of libseccomp failed.
    #[error("cannot export the seccomp filter to memory: {step} failed: {source}")]
    ExportSeccomp {
        /// The call that failed.
        step: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// libseccomp exported something that is not a BPF program.
    #[error(
        "libseccomp exported {bytes} bytes, which is not a whole number of BPF instructions \
         (8 bytes each): a bug in libseccomp or in isolab"
    )]
    SeccompBadExport {
        /// Bytes read back.
        bytes: usize,
    },

    /// The compiled program is longer than the kernel accepts.
    #[error(
        "{what} compiles to {instructions} BPF instructions, more than the kernel's 4096 \
         (BPF_MAXINSNS): merge rules or drop architectures"
    )]
    SeccompTooLong {
        /// Which filter.
        what: &'static str,
        /// Its length.
        instructions: usize,
    },

    /// A part of an OCI `linux.seccomp` section that isolab cannot honour.
    #[error("OCI linux.seccomp: {field} = {value}: {reason}")]
    OciSeccomp {
        /// Where in the section, e.g. `syscalls[3].args[0].index`.
        field: String,
        /// The value found there.
        value: String,
        /// Why it is refused and what to do.
        reason: &'static str,
    },

    /// A system call made while applying the settings in the container process failed.
    #[error("{step} failed in the container process: {source}{hint}")]
    Apply {
        /// What was being done (e.g. "PR_CAPBSET_DROP of capability 21").
        step: &'static str,
        /// A hint on what to do, empty when there is none.
        hint: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// A write to a devices cgroup file failed.
    #[error("cannot write {data:?} to {path}: {source} (is this a cgroup v1 devices cgroup isolab may write to?)")]
    WriteDevices {
        /// The file written.
        path: PathBuf,
        /// The line written.
        data: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// The directory is a cgroup v2 directory; v2 device control is a BPF program.
    #[error(
        "{path} is a cgroup v2 directory: device rules on cgroup v2 are an eBPF program \
         (BPF_CGROUP_DEVICE), which isolab does not install; use a cgroup v1 devices hierarchy"
    )]
    DevicesCgroupV2 {
        /// The cgroup directory.
        path: PathBuf,
    },

    /// The directory has no `devices.allow` file.
    #[error("{path} is not a cgroup v1 devices cgroup (no devices.allow in it): pass a directory under the devices hierarchy, e.g. /sys/fs/cgroup/devices/<name>")]
    NotDevicesCgroup {
        /// The cgroup directory.
        path: PathBuf,
    },

    /// The OCI JSON did not convert to the `oci-spec` type (a bug in this module).
    #[error("the generated OCI {what} does not parse as an oci-spec value: {source}")]
    OciConversion {
        /// Which part ("seccomp", "capabilities", "devices").
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
}
