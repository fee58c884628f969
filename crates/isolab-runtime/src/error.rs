//! [`RuntimeError`]: what failed, on which path or object, and what to do.

use std::io;
use std::path::PathBuf;

/// An error of the container runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A configuration value is invalid.
    #[error("invalid {what} {value:?}: expected {expected}")]
    InvalidConfig {
        /// What was being checked.
        what: &'static str,
        /// The offending value.
        value: String,
        /// What is accepted.
        expected: &'static str,
    },
    /// No command was given.
    #[error("no command to run: give the command after `--` (e.g. `-- /bin/sh -c 'echo hi'`)")]
    EmptyCommand,
    /// A string meant for the kernel holds a NUL byte.
    #[error("{what} {value:?} contains a NUL byte, which the kernel cannot take")]
    NulByte {
        /// What the string is.
        what: &'static str,
        /// The string.
        value: String,
    },
    /// The root filesystem source is missing or of the wrong kind.
    #[error("root filesystem {path}: {problem}")]
    Rootfs {
        /// The source path.
        path: PathBuf,
        /// What is wrong and what to do.
        problem: String,
    },
    /// A file-system operation on the host failed.
    #[error("cannot {op} {path}: {source}")]
    Host {
        /// The operation (e.g. "create the state directory").
        op: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A container with this id is already running (or was killed: run `isolab-runtime gc`).
    #[error("container {id} already exists (state file {path}); choose another --id, or run `isolab-runtime gc` if it was killed")]
    AlreadyExists {
        /// The id.
        id: crate::id::ContainerId,
        /// Its state file.
        path: PathBuf,
    },
    /// A cgroup operation failed.
    #[error("cgroup {rel}: cannot {op}: {source}")]
    Cgroup {
        /// The cgroup, relative to the mounts.
        rel: PathBuf,
        /// The operation.
        op: &'static str,
        /// The cause (names the file).
        #[source]
        source: isolab_cgroups::Error,
    },
    /// The limits read back from the cgroup differ from those asked for.
    #[error("cgroup {rel}: limits read back as {got} instead of {wanted}; the kernel rounded or refused a value")]
    LimitsMismatch {
        /// The cgroup.
        rel: PathBuf,
        /// What was asked for (debug form).
        wanted: String,
        /// What the cgroup reports.
        got: String,
    },
    /// Attaching the image to a loop device failed.
    #[error("cannot attach {image} to a loop device ({op}): {source}; is the loop module loaded (/dev/loop-control)?")]
    LoopDevice {
        /// The image file.
        image: PathBuf,
        /// The failed step.
        op: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A system call of the parent failed.
    #[error("{op} failed: {source}")]
    Syscall {
        /// The call and its purpose.
        op: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A setup step inside the container failed.
    #[error("container setup failed at step \"{step}\": {source}")]
    Setup {
        /// The step, with its paths.
        step: String,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The container's init died before reporting that the command started.
    #[error("the container's init exited with status {status} before the command started")]
    InitDied {
        /// Its exit status (code or 128+signal).
        status: i32,
    },
    /// The network could not be configured.
    #[error("network {mode}: {problem}")]
    Network {
        /// The network mode.
        mode: &'static str,
        /// What failed and what to do.
        problem: String,
    },
    /// The source of a bind mount is missing or unreadable.
    #[error("bind mount source {path}: {source}; give an existing host file or directory")]
    BindSource {
        /// The source as given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// The destination of a bind mount cannot be made in the container's root.
    #[error("bind mount destination {destination}: {problem}")]
    BindDestination {
        /// The destination inside the container.
        destination: PathBuf,
        /// What is wrong and what to do.
        problem: &'static str,
    },
    /// A report file could not be parsed.
    #[error("report {path} is not a valid isolab-runtime report: {source}")]
    ReportParse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A state file could not be parsed.
    #[error("state file {path} is not valid JSON state: {source}; remove it by hand if the container is gone")]
    StateParse {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// An OCI bundle could not be read.
    #[error("OCI bundle {path}: {problem}")]
    Bundle {
        /// The bundle directory or its config.json.
        path: PathBuf,
        /// What is wrong.
        problem: String,
    },
    /// No state file names this container.
    #[error("container {id} does not exist (no state file {path}); `list` shows the containers of this --root")]
    NotFound {
        /// The id asked for.
        id: String,
        /// The state file looked for.
        path: PathBuf,
    },
    /// An OCI operation that the container's status does not allow.
    #[error("container {id} is {status}: cannot {op}; {hint}")]
    WrongStatus {
        /// The container.
        id: String,
        /// Its status (`created`, `running`, `stopped`, `creating`).
        status: &'static str,
        /// The operation.
        op: &'static str,
        /// What to do instead.
        hint: &'static str,
    },
    /// An OCI hook failed.
    #[error("{kind} hook {path}: {problem}")]
    Hook {
        /// `createRuntime`, `poststart`, …
        kind: String,
        /// The hook's program.
        path: PathBuf,
        /// What happened.
        problem: String,
    },
    /// The security settings could not be prepared.
    #[error("security settings: {0}")]
    Security(#[from] crate::security::SecurityError),
    /// Several teardown steps failed; each is listed.
    #[error("teardown left something behind (run `isolab-runtime gc`): {}", .0.join("; "))]
    Teardown(Vec<String>),
}
