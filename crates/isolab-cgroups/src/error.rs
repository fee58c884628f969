//! The crate's error type: every variant names the file or directory involved and,
//! for writes, the data, so that a failure can be reproduced with `echo` and `cat`.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

use crate::controller::Controller;

/// What went wrong while creating, limiting, measuring or removing a cgroup.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A cgroup interface file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The system error.
        source: io::Error,
    },

    /// A cgroup interface file refused a value.
    #[error("cannot write {data:?} to {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// What was written.
        data: String,
        /// The system error (`EINVAL` usually means the value is out of range for
        /// this cgroup or its parent).
        source: io::Error,
    },

    /// A file that a limit needs does not exist in the cgroup.
    #[error(
        "cannot set the {needed_for}: {path} does not exist; the controller or kernel \
         feature behind it is not available on this host (drop this limit or enable it)"
    )]
    MissingFile {
        /// The absent file.
        path: PathBuf,
        /// The limit being set, e.g. "swap limit".
        needed_for: &'static str,
    },

    /// A cgroup interface file held something this crate does not understand.
    #[error("cannot parse {path}: expected {expected}, found {found:?}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The offending text (a line or the whole file).
        found: String,
        /// What the kernel normally writes there.
        expected: &'static str,
    },

    /// A cgroup directory could not be created.
    #[error("cannot create cgroup directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The system error.
        source: io::Error,
    },

    /// A cgroup directory could not be removed.
    #[error(
        "cannot remove cgroup directory {path}: {source}; if processes are still inside, \
         `isolab gc` retries later"
    )]
    RemoveDir {
        /// The directory.
        path: PathBuf,
        /// The system error.
        source: io::Error,
    },

    /// A cgroup directory could not be listed.
    #[error("cannot list cgroup directory {path}: {source}")]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The system error.
        source: io::Error,
    },

    /// A `cgroup.procs` file could not be opened for a later self-attach.
    #[error("cannot open {path} for writing: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// The system error.
        source: io::Error,
    },

    /// A process in the cgroup could not be killed.
    #[error("cannot send SIGKILL to pid {pid} in {path}: {source}")]
    Kill {
        /// The process.
        pid: u32,
        /// The cgroup directory it was found in.
        path: PathBuf,
        /// The system error.
        source: io::Error,
    },

    /// Processes survived `kill_all` for longer than the deadline.
    #[error(
        "processes {remaining:?} are still in {path} after {waited:?} of SIGKILL; they may be \
         stuck in the kernel (D state): check `cat /proc/PID/stack` and retry with `isolab gc`"
    )]
    KillTimeout {
        /// The cgroup directory.
        path: PathBuf,
        /// The pids still listed in its `cgroup.procs`.
        remaining: Vec<u32>,
        /// How long `kill_all` kept trying.
        waited: Duration,
    },

    /// `kill_all` found the calling process itself inside the cgroup.
    #[error(
        "refusing to kill the calling process (pid {pid}), which is inside {path}; move it out \
         of the cgroup first"
    )]
    ContainsSelf {
        /// The calling process.
        pid: u32,
        /// The cgroup directory it is in.
        path: PathBuf,
    },

    /// A controller that a limit or the caller needs is not mounted (v1) or not
    /// available in the hierarchy (v2).
    #[error(
        "the cgroup controller `{controller}` is not mounted, but isolab needs it for {}: mount \
         it (e.g. `mount -t cgroup -o {controller} cgroup /sys/fs/cgroup/{controller}`) or \
         drop that limit", controller.purpose()
    )]
    NotMounted {
        /// The missing controller.
        controller: Controller,
    },

    /// A v2 controller is not enabled for this cgroup.
    #[error(
        "the cgroup v2 controller `{controller}` is not enabled in {path} (it is not listed in \
         cgroup.controllers), but isolab needs it for {}: enable it in the parent's \
         cgroup.subtree_control or drop that limit", controller.purpose()
    )]
    NotEnabled {
        /// The controller.
        controller: Controller,
        /// The cgroup directory.
        path: PathBuf,
    },

    /// Cgroup v2 files were asked for on a v1 hierarchy.
    #[error(
        "the cgroup v2 files {names:?} (OCI `linux.resources.unified`) cannot be set on this \
         cgroup v1 host; remove them or use the v1 limits instead (runc refuses them on v1 too: \
         \"cannot use unified on cgroup v1\")"
    )]
    UnifiedOnV1 {
        /// The names asked for.
        names: Vec<String>,
    },

    /// Limits only cgroup v1 has were asked for on a v2 hierarchy.
    #[error(
        "{names:?} cannot be set on this cgroup v2 host: cgroup v2 has no such limit \
         (swappiness and the OOM killer switch are v1 files; v2 counts TCP buffers in \
         memory.max); remove them"
    )]
    V1Only {
        /// The OCI names of the limits asked for.
        names: Vec<String>,
    },

    /// A name in the unified limits is not a controller's interface file.
    #[error("invalid cgroup v2 file name {name:?} in the unified limits: {problem}")]
    UnifiedName {
        /// The rejected name.
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },

    /// A file of the unified limits belongs to a controller not enabled for the cgroup.
    #[error(
        "cannot set {name}: the cgroup v2 controller `{controller}` is not enabled in {path} \
         (it is not listed in cgroup.controllers); enable it in the parent's \
         cgroup.subtree_control or remove {name} from the unified limits"
    )]
    UnifiedNotEnabled {
        /// The file asked for.
        name: String,
        /// Its controller (the part of the name before the first `.`).
        controller: String,
        /// The cgroup directory.
        path: PathBuf,
    },

    /// No cgroup filesystem was found.
    #[error(
        "no cgroup filesystem is mounted (according to {path}); mount cgroup2 at /sys/fs/cgroup \
         or the v1 controllers below it"
    )]
    NoCgroupMount {
        /// The mount table that was searched.
        path: PathBuf,
    },

    /// A line of the mount table could not be parsed.
    #[error(
        "cannot parse line {line_no} of the mount table {path}: expected {expected}, found {line:?}"
    )]
    Mountinfo {
        /// The mount table (`/proc/self/mountinfo`).
        path: PathBuf,
        /// 1-based line number.
        line_no: usize,
        /// The line.
        line: String,
        /// What a mountinfo line looks like.
        expected: &'static str,
    },

    /// The relative cgroup path is not usable.
    #[error(
        "invalid cgroup path {rel:?}: it must be relative, non-empty and made of plain names \
         (no `..`, no `.`, no leading `/`)"
    )]
    InvalidPath {
        /// The rejected path.
        rel: PathBuf,
    },

    /// `create` found the cgroup already there.
    #[error(
        "cgroup {path} already exists; it may be a leftover of an interrupted run: remove it \
         with `isolab gc` or choose another name"
    )]
    AlreadyExists {
        /// The existing directory.
        path: PathBuf,
    },

    /// The cgroup does not exist in any controller.
    #[error("cgroup {rel:?} does not exist in {hierarchy} (was it already removed?)")]
    NotFound {
        /// The relative path.
        rel: PathBuf,
        /// [`crate::Hierarchy::describe`] of where it was looked for.
        hierarchy: String,
    },
}

/// A value that could not be parsed from text (an [`crate::IdSet`], [`crate::Bytes`],
/// [`crate::DeviceNumber`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {input:?}: expected {expected}")]
pub struct InvalidValue {
    /// The kind of value, e.g. "cpu list".
    pub what: &'static str,
    /// The rejected text.
    pub input: String,
    /// What would have been accepted.
    pub expected: &'static str,
}

impl InvalidValue {
    pub(crate) fn new(what: &'static str, input: &str, expected: &'static str) -> Self {
        InvalidValue {
            what,
            input: input.to_owned(),
            expected,
        }
    }
}
