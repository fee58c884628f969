//! [`ContainerConfig`]: everything needed to run one container.

use std::path::{Path, PathBuf};

use isolab_cgroups::Limits;

use crate::error::RuntimeError;
use crate::id::ContainerId;
use crate::security::SecurityConfig;

/// The runtime's default security: Docker's defaults plus `no_new_privs`.
pub fn default_security() -> SecurityConfig {
    SecurityConfig {
        no_new_privs: true,
        ..SecurityConfig::default()
    }
}

/// Default `PATH` of the container's command.
pub const DEFAULT_PATH: &str = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
/// The name of the runtime's executable.
pub const PROGRAM: &str = "isolab-runtime";

/// Where the `isolab-runtime` executable is: `ISOLAB_RUNTIME` when set; else next to
/// the running executable (`isolab` and `isolab-runtime` are installed together; in
/// a cargo target directory test binaries live one level below); else the bare name,
/// for a lookup on `PATH`.
pub fn locate_program() -> PathBuf {
    if let Some(p) = std::env::var_os("ISOLAB_RUNTIME") {
        return PathBuf::from(p);
    }
    if let Ok(exe) = std::env::current_exe() {
        for dir in exe.ancestors().skip(1).take(2) {
            let candidate = dir.join(PROGRAM);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    PathBuf::from(PROGRAM)
}

/// Default state directory (state files for `gc`, mount points of root filesystems).
pub const DEFAULT_STATE_DIR: &str = "/run/isolab";

/// Whether the runtime runs without root (effective uid not 0): then every container gets a
/// user namespace that maps the caller's own uid and gid to root, one id each, as rootless
/// runc and crun do without `newuidmap` ([`USERNS_BASE`]'s range needs root).
pub fn rootless() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() != 0 }
}

/// The state directory when none is given: [`DEFAULT_STATE_DIR`] as root; without root
/// `$XDG_RUNTIME_DIR/isolab` (where runc and crun keep theirs), else `/tmp/isolab-UID`.
pub fn default_state_dir() -> PathBuf {
    if !rootless() {
        return PathBuf::from(DEFAULT_STATE_DIR);
    }
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("isolab"),
        // SAFETY: geteuid has no preconditions and cannot fail.
        None => PathBuf::from(format!("/tmp/isolab-{}", unsafe { libc::geteuid() })),
    }
}
/// Default cgroup parent, relative to each controller's mount.
pub const DEFAULT_CGROUP_PARENT: &str = "isolab";

/// Everything needed to run one container; built from flags
/// ([`ContainerConfig::new`] and field updates) or from an OCI bundle
/// ([`crate::oci::from_bundle`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerConfig {
    /// Container id. Names the cgroup (`<cgroup_parent>/rt-<id>`) and the state file.
    pub id: ContainerId,
    /// The root filesystem.
    pub rootfs: Rootfs,
    /// The command and its arguments; a program without `/` is looked up in the
    /// `PATH` of `env` inside the container.
    pub args: Vec<String>,
    /// Environment, `NAME=value` entries.
    pub env: Vec<String>,
    /// Working directory inside the container.
    pub cwd: PathBuf,
    /// Hostname inside the container's UTS namespace.
    pub hostname: String,
    /// Cgroup limits, applied before the container's init runs any code.
    pub limits: Limits,
    /// Network namespace and connectivity.
    pub network: NetworkChoice,
    /// Security settings: Docker's capabilities, seccomp profile, masked and
    /// read-only paths, plus `no_new_privs` ([`default_security`]); fields loosen them.
    pub security: SecurityConfig,
    /// Run in a new user namespace (container root = host uid/gid [`USERNS_BASE`]; without
    /// root, the caller's own uid and gid: see [`rootless`]).
    pub user_namespace: bool,
    /// Where state files and root mount points live (`/run/isolab`).
    pub state_dir: PathBuf,
    /// Parent of the container's cgroup, relative to the cgroup mounts (`isolab`).
    /// It may exist already (a lab's cgroup with its own cpuset or quota: a new v1
    /// cpuset level copies its parent's cpus and memory nodes); the levels that do
    /// not exist are created and removed again with the container (and by `gc`).
    pub cgroup_parent: PathBuf,
    /// Record phase timestamps (they are always returned in [`crate::Exit::trace`];
    /// the flag tells a front end to print them).
    pub trace: bool,
    /// Read the cgroup's counters (and, with no limits asked for, the limits) after
    /// the container exited, for [`crate::Exit::stats`] and [`crate::Exit::limits`]
    /// (on by default; a caller that reports neither saves the ~80 file reads).
    pub read_counters: bool,
    /// `CLOCK_MONOTONIC` nanoseconds the trace counts from (a front end's own start,
    /// [`crate::trace::monotonic_now_ns`]), so that [`crate::Phase::Setup`] shows the
    /// work before the container's setup; `None` = the start of `run`/`create`.
    pub trace_origin: Option<u64>,
    /// Forward SIGINT/SIGTERM/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 received by this process
    /// to the container while it runs (what a command-line front end wants; a
    /// library caller that handles signals itself leaves it off).
    pub forward_signals: bool,
    /// Standard input, output and error of the command.
    pub stdio: Stdio,
    /// Host files or directories bind-mounted into the container, in order.
    pub binds: Vec<BindMount>,
    /// Run to completion ([`crate::run`]) or create and leave it to `start`
    /// ([`crate::create`]).
    pub lifecycle: Lifecycle,
    /// With [`Lifecycle::Run`]: an init is PID 1 and forks the command as PID 2 (it
    /// reaps orphans and forwards signals to the command); `false`: the command is
    /// PID 1 itself, as an OCI bundle's `process` is with runc and crun (and with
    /// [`Lifecycle::Create`] always).
    pub init: bool,
    /// What an OCI bundle asks for beyond isolab's own configuration: more mounts,
    /// a network namespace to join, the user, rlimits, sysctls, hooks.
    pub oci: OciExtras,
    /// The exact cgroup, relative to the cgroup mounts (an OCI bundle's
    /// `cgroupsPath`, which engines read statistics from); `None` =
    /// `<cgroup_parent>/rt-<id>`. Its parent must be `cgroup_parent`.
    pub cgroup_path: Option<PathBuf>,
}

/// What an OCI bundle asks for beyond isolab's own flags ([`crate::oci::from_bundle`]);
/// the default asks for nothing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OciExtras {
    /// Mounts besides the standard layout (/proc, /sys, /dev, /dev/pts, /dev/shm,
    /// /dev/mqueue), in the bundle's order, after the bind mounts.
    pub mounts: Vec<Mount>,
    /// Mount the cgroup hierarchies read-only at /sys/fs/cgroup (a `cgroup` mount):
    /// a tmpfs with one mount per v1 hierarchy (cgroup2 on a pure v2 host), each
    /// rooted at the container's cgroup by its cgroup namespace.
    pub cgroup_mount: bool,
    /// The namespaces as the bundle lists them; `None` = isolab's own set (pid,
    /// mount, uts, ipc, cgroup, network unless `host`, user when asked for).
    pub namespaces: Option<Namespaces>,
    /// The user of the command: uid, gid, supplementary groups, umask.
    pub user: Option<User>,
    /// `process.rlimits`: (resource number, soft, hard), set before `execve`.
    pub rlimits: Vec<(u32, u64, u64)>,
    /// `linux.sysctl`, written under /proc/sys in the container.
    pub sysctl: Vec<(String, String)>,
    /// `process.oomScoreAdj`.
    pub oom_score_adj: Option<i32>,
    /// `linux.devices`: device nodes made in the container (after the mounts).
    pub devices: Vec<DeviceNode>,
    /// `hooks`.
    pub hooks: Hooks,
    /// Every mount in the bundle's order (the standard ones it lists, the bind
    /// mounts, the others); empty = isolab's own layout and order.
    pub order: Vec<MountRef>,
    /// `linux.uidMappings` and `linux.gidMappings` of the new user namespace; `None`:
    /// [`USERNS_BASE`]'s range (without root, the caller's own ids).
    pub id_maps: Option<IdMaps>,
    /// `linux.rootfsPropagation` (`shared`, `slave`, `private`, `unbindable`, or an
    /// `r` form): the root's propagation, set after `pivot_root`; `None`: private,
    /// as every mount of the container is.
    pub root_propagation: Option<String>,
}

/// The id mappings of a user namespace, as `/proc/PID/uid_map` and `gid_map` take them.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IdMaps {
    /// User ids.
    pub uid: Vec<IdRange>,
    /// Group ids.
    pub gid: Vec<IdRange>,
}

/// `size` ids from `container` in the namespace are ids from `host` outside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdRange {
    /// First id in the namespace.
    pub container: u32,
    /// First id outside it.
    pub host: u32,
    /// How many ids.
    pub size: u32,
}

impl IdRange {
    /// The ranges as the kernel's map file takes them: one `container host size` a line.
    pub fn map_file(ranges: &[IdRange]) -> String {
        ranges
            .iter()
            .map(|r| format!("{} {} {}\n", r.container, r.host, r.size))
            .collect()
    }
}

/// The namespaces of an OCI bundle: those the container gets new, those it joins.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Namespaces {
    /// New namespaces.
    pub create: Vec<NsKind>,
    /// Existing namespaces joined by path (`setns`), in the bundle's order.
    pub join: Vec<(NsKind, PathBuf)>,
}

impl Namespaces {
    /// Whether the container gets a new namespace of this kind.
    pub fn creates(&self, kind: NsKind) -> bool {
        self.create.contains(&kind)
    }

    /// Whether the container joins an existing namespace of this kind by path.
    pub fn joins(&self, kind: NsKind) -> bool {
        self.join.iter().any(|(k, _)| *k == kind)
    }

    /// Whether the container has a mount namespace of its own, new or joined. Without
    /// one it shares the runtime's: its mounts are made below its root in the host's
    /// mount namespace (and removed again with the container), and it is chrooted
    /// there instead of pivoting.
    pub fn own_mount(&self) -> bool {
        self.creates(NsKind::Mount) || self.joins(NsKind::Mount)
    }

    /// The namespaces the container's process joins itself (`setns` in the child):
    /// every joined one but pid, which the runtime joins before `clone3` (a pid
    /// namespace takes the children of whoever joins it, not the joiner).
    pub fn joined_by_child(&self) -> impl Iterator<Item = &(NsKind, PathBuf)> {
        self.join.iter().filter(|(k, _)| *k != NsKind::Pid)
    }

    /// The pid namespace to join by path.
    pub fn pid_to_join(&self) -> Option<&Path> {
        self.join
            .iter()
            .find(|(k, _)| *k == NsKind::Pid)
            .map(|(_, p)| p.as_path())
    }
}

/// A kind of namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NsKind {
    /// pid.
    Pid,
    /// mount.
    Mount,
    /// uts.
    Uts,
    /// ipc.
    Ipc,
    /// network.
    Network,
    /// cgroup.
    Cgroup,
    /// user.
    User,
}

impl NsKind {
    /// Its `CLONE_NEW*` flag.
    pub fn flag(self) -> libc::c_int {
        match self {
            NsKind::Pid => libc::CLONE_NEWPID,
            NsKind::Mount => libc::CLONE_NEWNS,
            NsKind::Uts => libc::CLONE_NEWUTS,
            NsKind::Ipc => libc::CLONE_NEWIPC,
            NsKind::Network => libc::CLONE_NEWNET,
            NsKind::Cgroup => libc::CLONE_NEWCGROUP,
            NsKind::User => libc::CLONE_NEWUSER,
        }
    }
}

/// A mount of a container, in the order they are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountRef {
    /// One of the standard layout's.
    Standard(Standard),
    /// `ContainerConfig::binds[i]`.
    Bind(usize),
    /// `OciExtras::mounts[i]`.
    Oci(usize),
}

/// The mounts of the standard layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standard {
    /// proc on /proc.
    Proc,
    /// sysfs on /sys, read-only.
    Sys,
    /// The cgroup hierarchies on /sys/fs/cgroup, read-only.
    Cgroup,
    /// tmpfs on /dev with the device nodes and links.
    Dev,
    /// devpts on /dev/pts.
    DevPts,
    /// tmpfs on /dev/shm.
    Shm,
    /// mqueue on /dev/mqueue.
    Mqueue,
}

/// A device node of an OCI bundle's `linux.devices`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceNode {
    /// Absolute path in the container.
    pub path: PathBuf,
    /// `S_IFCHR`, `S_IFBLK` or `S_IFIFO`.
    pub kind: u32,
    /// Major number.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Permission bits (`fileMode`, default 0666).
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
}

/// A mount of an OCI bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Absolute path in the container.
    pub destination: PathBuf,
    /// `bind`, or the file system type (`tmpfs`, `proc`, …).
    pub fstype: String,
    /// Host path of a bind (absolute), the source string of another type.
    pub source: PathBuf,
    /// mount(8) options: flags (`ro`, `nosuid`, `rbind`, `rprivate`, …) and data.
    pub options: Vec<String>,
}

impl Mount {
    /// A bind mount (type `bind`, or a `bind`/`rbind` option).
    pub fn is_bind(&self) -> bool {
        self.fstype == "bind" || self.options.iter().any(|o| o == "bind" || o == "rbind")
    }
}

/// The user the command runs as.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    /// Uid.
    pub uid: u32,
    /// Gid.
    pub gid: u32,
    /// Supplementary groups.
    pub additional_gids: Vec<u32>,
    /// File mode creation mask.
    pub umask: Option<u32>,
}

/// OCI hooks, with the container's state JSON on their standard input, at the points
/// of the lifecycle the runtime spec names (in the order listed here).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Hooks {
    /// `prestart` (deprecated): during `create`, in the runtime's namespaces, once the
    /// container's mounts are made, before `pivot_root`; before `createRuntime`.
    pub prestart: Vec<Hook>,
    /// `createRuntime`: as `prestart`, after it.
    pub create_runtime: Vec<Hook>,
    /// `createContainer`: during `create`, in the container's namespaces (its process
    /// runs it), after the runtime hooks, before `pivot_root` (the path is the
    /// host's).
    pub create_container: Vec<Hook>,
    /// `startContainer`: during `start`, in the container (after `pivot_root`, with
    /// the process's user, capabilities and seccomp filter), before the command's
    /// `execve`; the process's environment when the hook has none (as runc).
    pub start_container: Vec<Hook>,
    /// `poststart`: after `start` let the command run, in the runtime's namespaces.
    pub poststart: Vec<Hook>,
    /// `poststop`: during `delete`, after the container is gone.
    pub poststop: Vec<Hook>,
}

impl Hooks {
    /// No hook at all.
    pub fn is_empty(&self) -> bool {
        self.prestart.is_empty()
            && self.create_runtime.is_empty()
            && self.create_container.is_empty()
            && self.start_container.is_empty()
            && self.poststart.is_empty()
            && self.poststop.is_empty()
    }

    /// Whether the runtime runs hooks while the container's process waits between
    /// its mounts and `pivot_root` (`prestart`, `createRuntime`).
    pub fn runtime_hooks(&self) -> bool {
        !self.prestart.is_empty() || !self.create_runtime.is_empty()
    }
}

/// One hook.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Hook {
    /// Absolute path of the program.
    pub path: PathBuf,
    /// Its argv (argv\[0\] included), as given.
    pub args: Vec<String>,
    /// Its environment.
    pub env: Vec<String>,
    /// Seconds before it is killed.
    pub timeout: Option<u64>,
}

/// How a container's life is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Lifecycle {
    /// [`crate::run`]: the runtime's own init is PID 1 and forks the command, the
    /// runtime waits for it and tears everything down.
    #[default]
    Run,
    /// [`crate::create`] (the OCI `create` operation): the command's process is PID
    /// 1; after setup it waits on `<state_dir>/<id>/exec.fifo` until `start` opens
    /// the other end, then executes the command. The runtime returns once the
    /// container is created; the container outlives it and `delete` removes it.
    Create,
}

/// A host file or directory bind-mounted into the container (`--bind SRC:DST[:ro]`).
///
/// The mount is recursive (`MS_BIND | MS_REC`); with `readonly` the top mount is then
/// remounted read-only (submounts of the source keep their own flags). A missing
/// destination is created in the container's root (a directory for a directory source,
/// an empty file for a file source, parents too), which needs a writable root; on a
/// directory root that means in the host directory itself. Destinations may not pass
/// through a symbolic link of the image (the mount happens before `pivot_root`, where
/// an absolute link would resolve on the host): give the resolved path instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindMount {
    /// The host path (must exist).
    pub source: PathBuf,
    /// The absolute path inside the container.
    pub destination: PathBuf,
    /// Remount the bind read-only.
    pub readonly: bool,
}

impl BindMount {
    /// Parses `SRC:DST` or `SRC:DST:ro` (also `:rw`). Checks the syntax only; the
    /// source is checked when the container starts ([`ContainerConfig::validate`]
    /// checks the destination).
    pub fn parse(spec: &str) -> Result<BindMount, RuntimeError> {
        let bad = || RuntimeError::InvalidConfig {
            what: "bind mount",
            value: spec.to_owned(),
            expected: "SRC:DST or SRC:DST:ro, with an absolute DST (e.g. /srv/data:/data:ro)",
        };
        let parts: Vec<&str> = spec.split(':').collect();
        let (source, destination, readonly) = match parts.as_slice() {
            [src, dst] => (*src, *dst, false),
            [src, dst, "ro"] => (*src, *dst, true),
            [src, dst, "rw"] => (*src, *dst, false),
            _ => return Err(bad()),
        };
        if source.is_empty() || destination.is_empty() {
            return Err(bad());
        }
        Ok(BindMount {
            source: PathBuf::from(source),
            destination: PathBuf::from(destination),
            readonly,
        })
    }

    /// Checks the destination: absolute, plain names only (no `.` or `..`), not `/`.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        validate_container_path("bind mount destination", &self.destination)
    }
}

/// Checks a path in the container (a bind mount's destination, a device node):
/// absolute, plain names only (no `.` or `..`), not `/`.
pub fn validate_container_path(what: &'static str, path: &Path) -> Result<(), RuntimeError> {
    use std::path::Component;
    let mut components = path.components();
    let absolute = components.next() == Some(Component::RootDir);
    let plain: Vec<Component> = components.collect();
    if !absolute || plain.is_empty() || !plain.iter().all(|c| matches!(c, Component::Normal(_))) {
        return Err(RuntimeError::InvalidConfig {
            what,
            value: path.display().to_string(),
            expected: "an absolute path other than / without '.' or '..' (e.g. /data)",
        });
    }
    Ok(())
}

/// First host uid and gid of the user namespace mapping (65536 ids are mapped,
/// container id 0 = host id `USERNS_BASE`).
pub const USERNS_BASE: u32 = 100_000;
/// Number of ids mapped into a user namespace.
pub const USERNS_SIZE: u32 = 65_536;

/// The root filesystem of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rootfs {
    /// A directory, bind-mounted (optionally read-only).
    Dir {
        /// The directory.
        path: PathBuf,
        /// Remount read-only.
        readonly: bool,
    },
    /// An overlay: read-only `lower` plus a writable upper layer.
    Overlay {
        /// The read-only lower directory.
        lower: PathBuf,
        /// A kept upper directory (its work directory is `<upper>.work`, next to
        /// it); `None` = a throw-away upper on a tmpfs that vanishes with the container.
        upper: Option<PathBuf>,
    },
    /// An ext4 file system image attached to a loop device (autoclear) and mounted.
    Ext4Image {
        /// The image file.
        file: PathBuf,
        /// Attach and mount read-only.
        readonly: bool,
    },
}

impl Rootfs {
    /// The host path the root filesystem comes from (directory, lower or image file).
    pub fn source(&self) -> &Path {
        match self {
            Rootfs::Dir { path, .. } => path,
            Rootfs::Overlay { lower, .. } => lower,
            Rootfs::Ext4Image { file, .. } => file,
        }
    }
}

/// A published port: `host` on the host forwards to `container` in the container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortMapping {
    /// Host port.
    pub host: u16,
    /// Container port.
    pub container: u16,
}

/// Network of a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkChoice {
    /// A new network namespace with only the loopback interface (up).
    None,
    /// The host's network namespace.
    Host,
    /// A new network namespace attached to the `isolab0` bridge (veth pair, an
    /// allocated address, NAT), with published ports.
    Bridge {
        /// Ports to publish.
        publish: Vec<PortMapping>,
    },
}

/// Standard streams of the container's command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stdio {
    /// Inherit the caller's stdin, stdout and stderr.
    #[default]
    Inherit,
    /// `/dev/null` for all three.
    Null,
}

impl ContainerConfig {
    /// The id maps of the container's new user namespace (`None` without one): the
    /// bundle's, else without root the caller's own uid and gid as root (one id each),
    /// else [`USERNS_BASE`]'s range.
    pub fn user_namespace_maps(&self) -> Option<IdMaps> {
        if !self.user_namespace {
            return None;
        }
        if let Some(maps) = &self.oci.id_maps {
            return Some(maps.clone());
        }
        let one = |host| {
            vec![IdRange {
                container: 0,
                host,
                size: 1,
            }]
        };
        Some(if rootless() {
            // SAFETY: geteuid and getegid have no preconditions and cannot fail.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            IdMaps {
                uid: one(uid),
                gid: one(gid),
            }
        } else {
            let range = vec![IdRange {
                container: 0,
                host: USERNS_BASE,
                size: USERNS_SIZE,
            }];
            IdMaps {
                uid: range.clone(),
                gid: range,
            }
        })
    }

    /// Whether group `gid` exists in the container: always in the caller's user
    /// namespace, else when the new namespace's gid map names it.
    pub fn has_gid(&self, gid: u32) -> bool {
        self.user_namespace_maps().is_none_or(|maps| {
            maps.gid
                .iter()
                .any(|r| gid >= r.container && gid - r.container < r.size)
        })
    }

    /// A configuration with the defaults: a generated id, `PATH` only, cwd `/`,
    /// hostname = id, no limits, network `none`, default security, no user namespace,
    /// state in `/run/isolab`, cgroups under `isolab`.
    pub fn new(rootfs: Rootfs, args: Vec<String>) -> ContainerConfig {
        let id = ContainerId::generate();
        ContainerConfig {
            hostname: id.to_string(),
            id,
            rootfs,
            args,
            env: vec![DEFAULT_PATH.to_owned(), "TERM=xterm".to_owned()],
            cwd: PathBuf::from("/"),
            limits: Limits::default(),
            network: NetworkChoice::None,
            security: default_security(),
            user_namespace: false,
            state_dir: PathBuf::from(DEFAULT_STATE_DIR),
            cgroup_parent: PathBuf::from(DEFAULT_CGROUP_PARENT),
            trace: false,
            read_counters: true,
            trace_origin: None,
            forward_signals: false,
            stdio: Stdio::Inherit,
            binds: Vec::new(),
            lifecycle: Lifecycle::Run,
            init: true,
            oci: OciExtras::default(),
            cgroup_path: None,
        }
    }

    /// Whether the container shares the runtime's mount namespace (an OCI bundle that
    /// neither creates nor joins one): see [`Namespaces::own_mount`]. Its mounts live in
    /// the host's mount namespace below the root, which [`Self::host_mounts_root`] names.
    pub fn in_host_mount_namespace(&self) -> bool {
        self.oci.namespaces.as_ref().is_some_and(|n| !n.own_mount())
    }

    /// The root below which a container without a mount namespace of its own mounts:
    /// what `delete` (and gc) unmount again.
    pub fn host_mounts_root(&self) -> Option<&Path> {
        match &self.rootfs {
            Rootfs::Dir { path, .. } if self.in_host_mount_namespace() => Some(path),
            _ => None,
        }
    }

    /// The cgroup of this container, relative to the cgroup mounts.
    pub fn cgroup_rel(&self) -> PathBuf {
        match &self.cgroup_path {
            Some(path) => path.clone(),
            None => self.cgroup_parent.join(format!("rt-{}", self.id)),
        }
    }

    /// Checks what can be checked without touching the host.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        match &self.cgroup_path {
            None => validate_cgroup_parent(&self.cgroup_parent)?,
            Some(path) => {
                validate_cgroup_parent(path)?;
                if path.parent() != Some(self.cgroup_parent.as_path()) {
                    return Err(RuntimeError::InvalidConfig {
                        what: "cgroup path",
                        value: path.display().to_string(),
                        expected: "a cgroup whose parent is the cgroup parent",
                    });
                }
            }
        }
        for bind in &self.binds {
            bind.validate()?;
        }
        if self.args.is_empty() {
            return Err(RuntimeError::EmptyCommand);
        }
        if !self.cwd.is_absolute() {
            return Err(RuntimeError::InvalidConfig {
                what: "working directory",
                value: self.cwd.display().to_string(),
                expected: "an absolute path inside the container",
            });
        }
        if self.hostname.is_empty() || self.hostname.len() > 64 {
            return Err(RuntimeError::InvalidConfig {
                what: "hostname",
                value: self.hostname.clone(),
                expected: "1 to 64 bytes",
            });
        }
        if let Some(bad) = self.env.iter().find(|e| !e.contains('=')) {
            return Err(RuntimeError::InvalidConfig {
                what: "environment entry",
                value: bad.clone(),
                expected: "NAME=value",
            });
        }
        if self.user_namespace && matches!(self.rootfs, Rootfs::Ext4Image { .. }) {
            return Err(RuntimeError::InvalidConfig {
                what: "user namespace with an ext4 image",
                value: self.rootfs.source().display().to_string(),
                expected:
                    "a directory or overlay root (ext4 cannot be mounted in a user namespace)",
            });
        }
        Ok(())
    }
}

/// Checks a cgroup parent: a relative path of plain names (`isolab`, `isolab/lab-7`).
pub fn validate_cgroup_parent(parent: &Path) -> Result<(), RuntimeError> {
    use std::path::Component;
    let ok = parent.components().next().is_some()
        && parent
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(RuntimeError::InvalidConfig {
            what: "cgroup parent",
            value: parent.display().to_string(),
            expected: "a path relative to the cgroup mounts, without '.' or '..' (e.g. isolab/lab)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ContainerConfig {
        ContainerConfig::new(
            Rootfs::Dir {
                path: "/tmp/root".into(),
                readonly: false,
            },
            vec!["true".into()],
        )
    }

    /// Group tty (5) exists in the caller's namespace and in one whose gid map names it,
    /// not in one that maps gid 0 alone (an unprivileged user's).
    #[test]
    fn a_gid_exists_where_the_namespace_maps_it() {
        let mut c = config();
        assert!(c.has_gid(5));
        assert!(c.user_namespace_maps().is_none());
        c.user_namespace = true;
        let range = |container, size| IdRange {
            container,
            host: 1000,
            size,
        };
        c.oci.id_maps = Some(IdMaps {
            uid: vec![range(0, 1)],
            gid: vec![range(0, 1)],
        });
        assert!(!c.has_gid(5));
        assert!(c.has_gid(0));
        c.oci.id_maps = Some(IdMaps {
            uid: vec![range(0, 1)],
            gid: vec![range(0, 1), range(5, 1)],
        });
        assert!(c.has_gid(5));
        assert!(!c.has_gid(6));
    }

    #[test]
    fn defaults_validate() {
        let c = config();
        c.validate().unwrap();
        assert_eq!(c.hostname, c.id.as_str());
        assert_eq!(c.cgroup_rel(), PathBuf::from(format!("isolab/rt-{}", c.id)));
    }

    #[test]
    fn invalid_configs() {
        // A bad id cannot reach a configuration: its type refuses it.
        assert!("../x".parse::<ContainerId>().is_err());
        let mut c = config();
        c.args.clear();
        assert!(matches!(c.validate(), Err(RuntimeError::EmptyCommand)));
        let mut c = config();
        c.cwd = "rel".into();
        assert!(c.validate().is_err());
        let mut c = config();
        c.env.push("NOEQUALS".into());
        assert!(c.validate().is_err());
        let mut c = config();
        c.user_namespace = true;
        c.rootfs = Rootfs::Ext4Image {
            file: "/x.img".into(),
            readonly: true,
        };
        assert!(c.validate().is_err());
        let mut c = config();
        c.cgroup_parent = "/abs".into();
        assert!(c.validate().is_err());
        c.cgroup_parent = "isolab/../x".into();
        assert!(c.validate().is_err());
        c.cgroup_parent = "isolab/lab-1".into();
        c.validate().unwrap();
        assert_eq!(
            c.cgroup_rel(),
            PathBuf::from(format!("isolab/lab-1/rt-{}", c.id))
        );
    }

    #[test]
    fn bind_specs() {
        let b = BindMount::parse("/srv/data:/data:ro").unwrap();
        assert_eq!(
            b,
            BindMount {
                source: "/srv/data".into(),
                destination: "/data".into(),
                readonly: true
            }
        );
        b.validate().unwrap();
        assert!(!BindMount::parse("rel:/x").unwrap().readonly);
        assert!(!BindMount::parse("a:/x:rw").unwrap().readonly);
        for bad in ["/a", "/a:/b:rx", ":/b", "/a:", "/a:/b:ro:x"] {
            assert!(BindMount::parse(bad).is_err(), "{bad}");
        }
        for bad_dst in ["rel", "/", "/a/../b", "./a"] {
            let b = BindMount {
                source: "/a".into(),
                destination: bad_dst.into(),
                readonly: false,
            };
            assert!(b.validate().is_err(), "{bad_dst}");
        }
        let mut c = config();
        c.binds.push(BindMount::parse("/a:rel").unwrap());
        assert!(c.validate().is_err());
    }
}
