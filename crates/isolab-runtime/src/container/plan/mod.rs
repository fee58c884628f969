//! The container's setup as a list of pre-built steps ([`Plan`]), computed in the
//! parent so that the child only makes system calls with ready C strings: it may be a
//! raw `clone3` copy of a multi-threaded process, where allocating can deadlock.
//!
//! Building the plan is pure (no host effects), so its unit tests check the exact
//! mount sequence.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::config::{ContainerConfig, Lifecycle, NetworkChoice, NsKind, Rootfs, Stdio};
use crate::error::RuntimeError;
use crate::security::{self, Prepared};
use crate::state::OciInfo;
use crate::trace::Phase;

mod hooks;
mod mounts;

pub(crate) use hooks::{ContainerHooks, HookExec};
pub(crate) use mounts::{mount_flags, propagation_flags};

/// One setup step of the container's init.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    /// Become root of a new user namespace (setgroups, setresgid, setresuid to 0).
    BecomeRoot,
    /// Moves init into the container's devices cgroup (writes `0` to its pre-opened
    /// `tasks`): after the root is mounted, because mounting an ext4 image
    /// opens its loop device, which the device allowlist denies; before anything of
    /// the container runs.
    JoinDevicesCgroup,
    /// `unshare(CLONE_NEWCGROUP)`: a cgroup namespace rooted at the container's
    /// cgroups (the parent has attached the child to the others by now, and
    /// [`Op::JoinDevicesCgroup`] came first).
    UnshareCgroupNs,
    /// `mount(2)`.
    Mount {
        source: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: libc::c_ulong,
        data: Option<CString>,
    },
    /// `mkdir(2)`, existing is fine.
    Mkdir { path: CString, mode: libc::mode_t },
    /// A character device: `mknod`, or when that is not permitted (user namespace) an
    /// empty file with the host's node bind-mounted on it.
    Device {
        path: CString,
        host: CString,
        mode: libc::mode_t,
        dev: libc::dev_t,
    },
    /// `symlink(target, link)`, existing is fine.
    Symlink { target: CString, link: CString },
    /// `chdir(2)`.
    Chdir { path: CString },
    /// `pivot_root(".", ".")` then `umount2(".", MNT_DETACH)`: the old root is
    /// stacked on the new one and detached, no `put_old` directory needed (works on a
    /// read-only root).
    PivotHere,
    /// `chroot(".")`: the root of a container without a mount namespace of its own.
    ChrootHere,
    /// Bind remount read-only, keeping the mount's nosuid/nodev/noexec flags.
    RemountReadOnly { path: CString },
    /// Masks a path: `/dev/null` bound over a file, an empty read-only tmpfs over a
    /// directory; a missing path is skipped.
    Mask { path: CString },
    /// Makes a path read-only (bind onto itself, remount ro); missing is skipped.
    ReadOnly { path: CString },
    /// Makes sure the destination of bind mount `bind` (index in
    /// `ContainerConfig::binds`) exists: `components` are the host-side paths of each
    /// level below the root, outermost first. A symbolic link on the way is `ELOOP`;
    /// a missing level is created (directories, and the last one as a directory when
    /// `dir`, else an empty file) when `create`, `ENOENT` otherwise.
    BindTarget {
        components: Vec<CString>,
        dir: bool,
        create: bool,
        bind: usize,
    },
    /// `sethostname(2)`.
    Hostname { name: CString },
    /// Bring up `lo`.
    LoopbackUp,
    /// Report a phase timestamp.
    Phase(Phase),
    /// `setns` into the namespace the parent opened in slot `slot` of `ChildFds::ns`.
    JoinNs { slot: usize, nstype: libc::c_int },
    /// Write `value` to the file `path` (a sysctl under /proc/sys).
    WriteFile { path: CString, value: CString },
    /// Stop for the runtime's hooks (`prestart`, `createRuntime`): report, and wait
    /// for the parent's go once it ran them (EOF: they failed, the process exits).
    RuntimeHooks,
    /// Run `createContainer` hook `index` of [`Plan::create_container`].
    ContainerHook { index: usize },
    /// A device node of `linux.devices`: `mknod` (replacing what is there), then
    /// `chmod` (mknod applies the umask) and `chown`.
    Node {
        path: CString,
        mode: libc::mode_t,
        dev: libc::dev_t,
        uid: libc::uid_t,
        gid: libc::gid_t,
    },
}

/// Strings for `execve` (its `argv` or `envp`): owned, with the null-terminated array
/// of pointers into them that the child passes without allocating.
#[derive(Debug)]
pub(crate) struct CStrings {
    /// Owns the strings `ptrs` points into (read only through them).
    #[cfg_attr(not(test), allow(dead_code))]
    strings: Vec<CString>,
    ptrs: Vec<*const libc::c_char>,
}

impl CStrings {
    /// `items` as C strings; `what` names them in the error for a NUL byte.
    pub(crate) fn new<'a>(
        what: &'static str,
        items: impl IntoIterator<Item = &'a str>,
    ) -> Result<CStrings, RuntimeError> {
        let strings = items
            .into_iter()
            .map(|s| cstring(what, s.as_bytes()))
            .collect::<Result<_, _>>()?;
        Ok(CStrings::from_strings(strings))
    }

    /// `strings` with their pointer array.
    pub(crate) fn from_strings(strings: Vec<CString>) -> CStrings {
        let mut ptrs: Vec<*const libc::c_char> = strings.iter().map(|s| s.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        CStrings { strings, ptrs }
    }

    /// The null-terminated array of pointers, for `execve`.
    pub(crate) fn as_ptr(&self) -> *const *const libc::c_char {
        self.ptrs.as_ptr()
    }

    /// The strings.
    #[cfg(test)]
    pub(crate) fn strings(&self) -> &[CString] {
        &self.strings
    }
}

/// What the command's process (PID 2) does before `execve`.
#[derive(Debug)]
pub(crate) struct ExecPlan {
    pub argv: CStrings,
    pub envp: CStrings,
    /// Paths to try with `execve`, in `PATH` order.
    pub candidates: Vec<CString>,
    pub cwd: CString,
    /// Capabilities, no_new_privs and seccomp, compiled; applied right before execve.
    pub security: Prepared,
    pub stdio_null: bool,
    /// `setrlimit` before anything else: (resource, soft, hard).
    pub rlimits: Vec<(u32, u64, u64)>,
    /// Supplementary groups, gid and uid to switch to (before the security settings).
    pub user: Option<ExecUser>,
    /// `umask`.
    pub umask: Option<u32>,
    /// `startContainer` hooks, run after the security settings, right before `execve`
    /// (none for a process `exec`uted into a running container).
    pub start_container: ContainerHooks,
}

/// The user the command's process switches to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExecUser {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: Vec<libc::gid_t>,
}

/// The whole child side: setup steps with their descriptions, then the exec plan.
#[derive(Debug)]
pub(crate) struct Plan {
    pub ops: Vec<Op>,
    /// One human description per op, for error messages (parent side only).
    pub descriptions: Vec<String>,
    pub exec: ExecPlan,
    /// The command is PID 1 itself (no init: [`ContainerConfig::init`] off).
    pub direct: bool,
    /// The `createContainer` hooks ([`Op::ContainerHook`]).
    pub create_container: ContainerHooks,
}

/// Where the container's root and scratch space are mounted on the host side
/// (inside the container's own mount namespace only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Mount point of the root filesystem.
    pub root: PathBuf,
    /// Mount point of the tmpfs of a throw-away overlay.
    pub scratch: PathBuf,
    /// The loop device of an ext4 image.
    pub loop_device: Option<PathBuf>,
    /// The bind mounts, parallel to `ContainerConfig::binds`: the canonical host
    /// source and whether it is a directory.
    pub binds: Vec<BindSource>,
    /// A devices cgroup for init to join ([`Op::JoinDevicesCgroup`]).
    pub devices_cgroup: bool,
}

/// A bind mount's source as found on the host by [`resolve_binds`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BindSource {
    /// The canonical (absolute, symlink-free) host path.
    pub path: PathBuf,
    /// A directory (else a file, device or socket: bound onto an empty file).
    pub dir: bool,
}

/// Finds every bind source on the host (they must exist).
pub(crate) fn resolve_binds(config: &ContainerConfig) -> Result<Vec<BindSource>, RuntimeError> {
    config
        .binds
        .iter()
        .map(|b| {
            let err = |source| RuntimeError::BindSource {
                path: b.source.clone(),
                source,
            };
            let path = b.source.canonicalize().map_err(err)?;
            let dir = std::fs::metadata(&path).map_err(err)?.is_dir();
            Ok(BindSource { path, dir })
        })
        .collect()
}

pub(crate) fn cstring(what: &'static str, bytes: &[u8]) -> Result<CString, RuntimeError> {
    CString::new(bytes).map_err(|_| RuntimeError::NulByte {
        what,
        value: String::from_utf8_lossy(bytes).into_owned(),
    })
}

fn cpath(what: &'static str, p: &Path) -> Result<CString, RuntimeError> {
    cstring(what, p.as_os_str().as_bytes())
}

/// Overlay option values must escape `,`, `:` and `\`; refuse them instead.
fn overlay_path(p: &Path) -> Result<String, RuntimeError> {
    let s = p.to_str().unwrap_or("");
    if s.is_empty() || s.contains([',', ':', '\\']) {
        return Err(RuntimeError::InvalidConfig {
            what: "overlay directory",
            value: p.display().to_string(),
            expected: "a UTF-8 path without ',', ':' or '\\'",
        });
    }
    Ok(s.to_owned())
}

struct Builder {
    ops: Vec<Op>,
    descriptions: Vec<String>,
}

impl Builder {
    fn push(&mut self, op: Op, description: String) {
        self.ops.push(op);
        self.descriptions.push(description);
    }

    fn mount(
        &mut self,
        source: Option<&str>,
        target: &Path,
        fstype: Option<&str>,
        flags: libc::c_ulong,
        data: Option<&str>,
    ) -> Result<(), RuntimeError> {
        let description = format!(
            "mount {} on {} (type {}, options {})",
            source.unwrap_or("-"),
            target.display(),
            fstype.unwrap_or("-"),
            data.unwrap_or("-")
        );
        let op = Op::Mount {
            source: source
                .map(|s| cstring("mount source", s.as_bytes()))
                .transpose()?,
            target: cpath("mount target", target)?,
            fstype: fstype
                .map(|s| cstring("file system type", s.as_bytes()))
                .transpose()?,
            flags,
            data: data
                .map(|s| cstring("mount options", s.as_bytes()))
                .transpose()?,
        };
        self.push(op, description);
        Ok(())
    }

    fn mkdir(&mut self, path: &Path, mode: libc::mode_t) -> Result<(), RuntimeError> {
        self.push(
            Op::Mkdir {
                path: cpath("directory", path)?,
                mode,
            },
            format!("create directory {}", path.display()),
        );
        Ok(())
    }

    fn symlink(&mut self, target: &str, link: &Path) -> Result<(), RuntimeError> {
        self.push(
            Op::Symlink {
                target: cstring("symlink target", target.as_bytes())?,
                link: cpath("symlink", link)?,
            },
            format!("create symlink {} -> {target}", link.display()),
        );
        Ok(())
    }

    fn phase(&mut self, phase: Phase) {
        self.push(Op::Phase(phase), format!("report phase {phase:?}"));
    }
}

/// The character devices of a container's /dev: name, major, minor.
pub(crate) const DEVICES: [(&str, u32, u32); 6] = [
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
    ("tty", 5, 0),
];

/// Builds the child's plan for `config` with the host-side `layout`: one step after
/// the other, as the child takes them.
/// `oci` names the bundle and its annotations in the state the hooks read.
pub(crate) fn build(
    config: &ContainerConfig,
    layout: &Layout,
    oci: Option<&OciInfo>,
) -> Result<Plan, RuntimeError> {
    let root = &layout.root;
    let mut b = Builder {
        ops: Vec::new(),
        descriptions: Vec::new(),
    };
    join_namespaces(&mut b, config);
    let host_mounts = config.in_host_mount_namespace();
    let root_mode = if host_mounts {
        // The root is the bundle's directory itself, in the host's mount table.
        RootMode {
            readonly: false,
            writable: true,
        }
    } else {
        mount_root(&mut b, config, layout)?
    };
    enter_cgroups(&mut b, config, layout);
    mounts::mount_all(&mut b, config, layout, root_mode.writable)?;
    b.phase(Phase::Mounts);
    let hooks = &config.oci.hooks;
    let state = || crate::hooks::state_parts(config, oci, "created");
    let create_container = ContainerHooks::build(&hooks.create_container, &[], state(), 0)?;
    hook_stops(&mut b, config);
    if host_mounts {
        chroot(&mut b, root)?;
    } else {
        pivot(&mut b, root, root_mode.readonly)?;
    }
    if let Some(name) = &config.oci.root_propagation {
        let flags = propagation_flags(name).ok_or(RuntimeError::InvalidConfig {
            what: "linux.rootfsPropagation",
            value: name.clone(),
            expected: "shared, slave, private or unbindable (or rshared, ...)",
        })?;
        b.mount(None, Path::new("/"), None, flags, None)?;
    }
    settle(&mut b, config)?;
    let mut exec = exec_plan(config)?;
    exec.start_container = ContainerHooks::build(
        &hooks.start_container,
        &config.env,
        state(),
        hooks.create_container.len() as u32,
    )?;
    Ok(Plan {
        ops: b.ops,
        descriptions: b.descriptions,
        exec,
        direct: !config.init,
        create_container,
    })
}

/// Between the mounts and `pivot_root`: the stop for the runtime's hooks, then the
/// `createContainer` hooks (the lifecycle's steps 3 to 5).
fn hook_stops(b: &mut Builder, config: &ContainerConfig) {
    let hooks = &config.oci.hooks;
    if hooks.runtime_hooks() {
        b.push(
            Op::RuntimeHooks,
            "wait for the prestart and createRuntime hooks".into(),
        );
    }
    for (index, hook) in hooks.create_container.iter().enumerate() {
        b.push(
            Op::ContainerHook { index },
            format!("run the createContainer hook {}", hook.path.display()),
        );
    }
}

/// Joins the namespaces given by path (setns) and becomes root of a new user
/// namespace.
fn join_namespaces(b: &mut Builder, config: &ContainerConfig) {
    for (slot, (kind, path)) in config
        .oci
        .namespaces
        .iter()
        .flat_map(|n| n.joined_by_child())
        .enumerate()
    {
        b.push(
            Op::JoinNs {
                slot,
                nstype: kind.flag(),
            },
            format!("join the {kind:?} namespace {} (setns)", path.display()),
        );
    }
    if config.user_namespace {
        b.push(
            Op::BecomeRoot,
            "become root of the user namespace (setresgid/setresuid 0)".into(),
        );
    }
}

/// How the root was mounted.
struct RootMode {
    /// Remounted read-only after `pivot_root` (a read-only directory root).
    readonly: bool,
    /// Whether the root can be written before `pivot_root` (a read-only directory root
    /// is only remounted read-only afterwards, but is the host's directory: never
    /// written).
    writable: bool,
}

/// Makes every mount private, then mounts the root (a bind of a directory, an overlay,
/// or an ext4 image from its loop device).
fn mount_root(
    b: &mut Builder,
    config: &ContainerConfig,
    layout: &Layout,
) -> Result<RootMode, RuntimeError> {
    let root = &layout.root;
    b.mount(
        None,
        Path::new("/"),
        None,
        libc::MS_REC | libc::MS_PRIVATE,
        None,
    )?;
    let mut readonly_root = false;
    let mut writable_root = true;
    match &config.rootfs {
        Rootfs::Dir { path, readonly } => {
            let src = path.to_str().ok_or_else(|| RuntimeError::Rootfs {
                path: path.clone(),
                problem: "the path is not UTF-8; rename it".into(),
            })?;
            b.mount(Some(src), root, None, libc::MS_BIND | libc::MS_REC, None)?;
            readonly_root = *readonly;
            writable_root = !*readonly;
        }
        Rootfs::Overlay { lower, upper } => {
            let lower = overlay_path(lower)?;
            let (upper, work) = match upper {
                Some(upper) => (overlay_path(upper)?, overlay_path(&work_dir_of(upper))?),
                None => {
                    let scratch = &layout.scratch;
                    b.mount(Some("tmpfs"), scratch, Some("tmpfs"), 0, Some("mode=0755"))?;
                    b.mkdir(&scratch.join("upper"), 0o755)?;
                    b.mkdir(&scratch.join("work"), 0o755)?;
                    (
                        overlay_path(&scratch.join("upper"))?,
                        overlay_path(&scratch.join("work"))?,
                    )
                }
            };
            let data = format!("lowerdir={lower},upperdir={upper},workdir={work}");
            b.mount(Some("overlay"), root, Some("overlay"), 0, Some(&data))?;
        }
        Rootfs::Ext4Image { file, readonly } => {
            let device = layout
                .loop_device
                .as_ref()
                .and_then(|d| d.to_str())
                .ok_or_else(|| RuntimeError::Rootfs {
                    path: file.clone(),
                    problem: "no loop device was attached".into(),
                })?;
            let flags = if *readonly { libc::MS_RDONLY } else { 0 };
            b.mount(Some(device), root, Some("ext4"), flags, None)?;
            writable_root = !*readonly;
        }
    }
    Ok(RootMode {
        readonly: readonly_root,
        writable: writable_root,
    })
}

/// Joins the devices cgroup and creates the cgroup namespace (once in the cgroups).
fn enter_cgroups(b: &mut Builder, config: &ContainerConfig, layout: &Layout) {
    if layout.devices_cgroup {
        b.push(
            Op::JoinDevicesCgroup,
            "join the devices cgroup (write to its tasks)".into(),
        );
    }
    if config
        .oci
        .namespaces
        .as_ref()
        .is_none_or(|n| n.creates(NsKind::Cgroup))
    {
        b.push(
            Op::UnshareCgroupNs,
            "create the cgroup namespace (unshare CLONE_NEWCGROUP)".into(),
        );
    }
}

/// Changes into the root and pivots there (then the root is remounted read-only if
/// asked).
fn pivot(b: &mut Builder, root: &Path, readonly_root: bool) -> Result<(), RuntimeError> {
    b.push(
        Op::Chdir {
            path: cpath("root", root)?,
        },
        format!("change directory to {}", root.display()),
    );
    b.push(
        Op::PivotHere,
        format!("pivot_root into {} and detach the old root", root.display()),
    );
    b.push(
        Op::Chdir { path: c"/".into() },
        "change directory to /".into(),
    );
    b.phase(Phase::Pivot);
    if readonly_root {
        b.push(
            Op::RemountReadOnly { path: c"/".into() },
            "remount the root read-only".into(),
        );
    }
    Ok(())
}

/// Without a mount namespace of its own: changes into the root and chroots there
/// (`pivot_root` would move the host's root).
fn chroot(b: &mut Builder, root: &Path) -> Result<(), RuntimeError> {
    b.push(
        Op::Chdir {
            path: cpath("root", root)?,
        },
        format!("change directory to {}", root.display()),
    );
    b.push(Op::ChrootHere, format!("chroot into {}", root.display()));
    b.push(
        Op::Chdir { path: c"/".into() },
        "change directory to /".into(),
    );
    b.phase(Phase::Pivot);
    Ok(())
}

/// After the pivot: the hostname, sysctls, masked and read-only paths, loopback.
fn settle(b: &mut Builder, config: &ContainerConfig) -> Result<(), RuntimeError> {
    b.push(
        Op::Hostname {
            name: cstring("hostname", config.hostname.as_bytes())?,
        },
        format!("set the hostname to {:?}", config.hostname),
    );
    // Before the read-only paths, which include /proc/sys.
    for (key, value) in &config.oci.sysctl {
        if key.contains('/') || key.split('.').any(|p| p.is_empty() || p == "..") {
            return Err(RuntimeError::InvalidConfig {
                what: "sysctl",
                value: key.clone(),
                expected: "a dotted name such as net.ipv4.ip_forward",
            });
        }
        let path = format!("/proc/sys/{}", key.replace('.', "/"));
        b.push(
            Op::WriteFile {
                path: cstring("sysctl", path.as_bytes())?,
                value: cstring("sysctl value", value.as_bytes())?,
            },
            format!("set sysctl {key} = {value:?} (write {path})"),
        );
    }
    for p in &config.security.masked_paths {
        b.push(
            Op::Mask {
                path: cstring("masked path", p.as_bytes())?,
            },
            format!("mask {p}"),
        );
    }
    for p in &config.security.readonly_paths {
        b.push(
            Op::ReadOnly {
                path: cstring("read-only path", p.as_bytes())?,
            },
            format!("make {p} read-only"),
        );
    }
    let new_network = match &config.oci.namespaces {
        None => config.network != NetworkChoice::Host,
        Some(n) => n.creates(NsKind::Network),
    };
    if new_network {
        b.push(Op::LoopbackUp, "bring up the loopback interface lo".into());
    }
    Ok(())
}

/// The work directory of a kept overlay upper: `<upper>.work`, next to it (overlayfs
/// needs it on the same file system).
pub(crate) fn work_dir_of(upper: &Path) -> PathBuf {
    let mut name = upper.file_name().unwrap_or(OsStr::new("upper")).to_owned();
    name.push(".work");
    upper.with_file_name(name)
}

pub(crate) fn exec_plan(config: &ContainerConfig) -> Result<ExecPlan, RuntimeError> {
    let argv = CStrings::new("argument", config.args.iter().map(String::as_str))?;
    let envp = CStrings::new("environment entry", config.env.iter().map(String::as_str))?;
    let program = config.args.first().ok_or(RuntimeError::EmptyCommand)?;
    let candidates = if program.contains('/') {
        vec![cstring("program", program.as_bytes())?]
    } else {
        let path = config
            .env
            .iter()
            .rev()
            .find_map(|e| e.strip_prefix("PATH="))
            .unwrap_or("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        path.split(':')
            .filter(|d| !d.is_empty())
            .map(|d| cstring("program", format!("{d}/{program}").as_bytes()))
            .collect::<Result<_, _>>()?
    };
    Ok(ExecPlan {
        argv,
        envp,
        candidates,
        cwd: cpath("working directory", &config.cwd)?,
        security: security::prepare_cached(
            &config.security,
            &config.state_dir.join(security::seccomp::cache::DIR_NAME),
            if config.user_namespace {
                security::Held::NewUserNamespace
            } else {
                security::Held::Inherited
            },
        )?,
        stdio_null: config.stdio == Stdio::Null,
        rlimits: config.oci.rlimits.clone(),
        user: config.oci.user.as_ref().map(|u| ExecUser {
            uid: u.uid,
            gid: u.gid,
            groups: u.additional_gids.clone(),
        }),
        umask: config.oci.user.as_ref().and_then(|u| u.umask),
        start_container: ContainerHooks::default(),
    })
}

/// Where the container's root is mounted, in its own mount namespace: a directory
/// root on itself (a bind mount, as runc and crun do: no mount point to make and
/// remove on the host), an overlay or an ext4 image on `<state_dir>/<id>/root`.
pub(crate) fn layout_for(
    config: &ContainerConfig,
    loop_device: Option<PathBuf>,
    binds: Vec<BindSource>,
    devices_cgroup: bool,
) -> Layout {
    let base = config.state_dir.join(&config.id);
    Layout {
        root: match &config.rootfs {
            Rootfs::Dir { path, .. } => path.clone(),
            _ => base.join("root"),
        },
        scratch: base.join("scratch"),
        loop_device,
        binds,
        devices_cgroup,
    }
}

/// The host directories the container's mounts need, under `<state_dir>/<id>`:
/// none for `run` on a directory root; the base (which holds `create`'s exec FIFO),
/// the root's and the scratch tmpfs's mount points otherwise.
pub(crate) fn host_dirs(config: &ContainerConfig) -> Vec<PathBuf> {
    let base = config.state_dir.join(&config.id);
    match (&config.rootfs, config.lifecycle) {
        (Rootfs::Dir { .. }, Lifecycle::Run) => Vec::new(),
        (Rootfs::Dir { .. }, _) => vec![base],
        _ => vec![base.clone(), base.join("root"), base.join("scratch")],
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn destinations_resolve_inside_the_image() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("usr/sbin")).unwrap();
        std::os::unix::fs::symlink("usr/sbin", root.join("sbin")).unwrap();
        std::os::unix::fs::symlink("/etc/../../../host", root.join("escape")).unwrap();
        std::os::unix::fs::symlink("loop", root.join("loop")).unwrap();
        let c = config(Rootfs::Dir {
            path: root.to_path_buf(),
            readonly: false,
        });
        let r = |p: &str| resolve_in_image(&c, Path::new(p));
        assert_eq!(r("/sbin/docker-init"), Path::new("/usr/sbin/docker-init"));
        assert_eq!(r("/escape/x"), Path::new("/host/x"));
        assert_eq!(r("/a/../../b"), Path::new("/b"));
        assert_eq!(r("/loop/x"), Path::new("/loop/x"));
        assert_eq!(r("/new/dir"), Path::new("/new/dir"));
    }

    use super::mounts::resolve_in_image;
    use super::*;

    fn config(rootfs: Rootfs) -> ContainerConfig {
        let mut c = ContainerConfig::new(rootfs, vec!["sh".into(), "-c".into(), "true".into()]);
        c.id = "t1".parse().unwrap();
        c.state_dir = "/run/isolab".into();
        c
    }

    fn targets(plan: &Plan) -> Vec<String> {
        plan.ops
            .iter()
            .filter_map(|op| match op {
                Op::Mount { target, .. } => Some(target.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    }

    /// `linux.rootfsPropagation` is set on the new root after `pivot_root`; a name that
    /// is not a propagation is refused.
    #[test]
    fn root_propagation_follows_the_pivot() {
        let mut c = config(Rootfs::Dir {
            path: "/srv/root".into(),
            readonly: false,
        });
        c.oci.root_propagation = Some("shared".into());
        let plan = build(&c, &layout_for(&c, None, Vec::new(), false), None).unwrap();
        let pivot = plan.ops.iter().position(|o| *o == Op::PivotHere).unwrap();
        let shared = plan
            .ops
            .iter()
            .position(|o| {
                matches!(o, Op::Mount { target, flags, .. }
                    if target.as_bytes() == b"/" && *flags == libc::MS_SHARED)
            })
            .unwrap();
        assert!(shared > pivot);
        c.oci.root_propagation = Some("sideways".into());
        assert!(build(&c, &layout_for(&c, None, Vec::new(), false), None).is_err());
    }

    #[test]
    fn dir_plan_mounts_in_order() {
        let c = config(Rootfs::Dir {
            path: "/srv/root".into(),
            readonly: true,
        });
        let plan = build(&c, &layout_for(&c, None, Vec::new(), false), None).unwrap();
        assert_eq!(plan.ops.len(), plan.descriptions.len());
        let t = targets(&plan);
        assert_eq!(t[0], "/");
        // A directory root is bound onto itself: no mount point on the host.
        assert_eq!(t[1], "/srv/root");
        assert!(
            matches!(&plan.ops[1], Op::Mount { source: Some(s), .. } if s.as_bytes() == b"/srv/root")
        );
        assert!(host_dirs(&c).is_empty());
        assert_eq!(plan.ops[2], Op::UnshareCgroupNs);
        assert!(!plan.ops.contains(&Op::JoinDevicesCgroup));
        assert_eq!(t[2], "/srv/root/proc");
        assert!(t.contains(&"/srv/root/dev/pts".to_owned()));
        let pivot = plan.ops.iter().position(|o| *o == Op::PivotHere).unwrap();
        let ro = plan
            .ops
            .iter()
            .position(|o| matches!(o, Op::RemountReadOnly { path } if path.as_bytes() == b"/"))
            .unwrap();
        assert!(ro > pivot, "the root is made read-only after pivot_root");
        assert!(plan
            .ops
            .iter()
            .any(|o| matches!(o, Op::Mask { path } if path.as_bytes() == b"/proc/kcore")));
        assert!(plan.ops.contains(&Op::LoopbackUp));
        assert_eq!(
            plan.exec.candidates[0].to_str().unwrap(),
            "/usr/local/sbin/sh"
        );
        assert_eq!(plan.exec.argv.strings().len(), 3);
        assert_eq!(plan.exec.argv.ptrs.len(), 4);
        assert!(plan.exec.argv.ptrs[3].is_null());
    }

    #[test]
    fn overlay_throwaway_uses_scratch_tmpfs() {
        let c = config(Rootfs::Overlay {
            lower: "/srv/lower".into(),
            upper: None,
        });
        assert_eq!(
            host_dirs(&c),
            [
                "/run/isolab/t1",
                "/run/isolab/t1/root",
                "/run/isolab/t1/scratch"
            ]
            .map(PathBuf::from)
        );
        let mut created = config(Rootfs::Dir {
            path: "/srv/root".into(),
            readonly: false,
        });
        created.lifecycle = Lifecycle::Create;
        assert_eq!(host_dirs(&created), [PathBuf::from("/run/isolab/t1")]);
        let plan = build(&c, &layout_for(&c, None, Vec::new(), false), None).unwrap();
        let data: Vec<String> = plan
            .ops
            .iter()
            .filter_map(|o| match o {
                Op::Mount {
                    data: Some(d),
                    fstype: Some(f),
                    ..
                } if f.as_bytes() == b"overlay" => Some(d.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        assert_eq!(
            data,
            ["lowerdir=/srv/lower,upperdir=/run/isolab/t1/scratch/upper,workdir=/run/isolab/t1/scratch/work"]
        );
        assert_eq!(work_dir_of(Path::new("/a/up")), PathBuf::from("/a/up.work"));
        let bad = config(Rootfs::Overlay {
            lower: "/srv/a,b".into(),
            upper: None,
        });
        assert!(build(&bad, &layout_for(&bad, None, Vec::new(), false), None).is_err());
    }

    #[test]
    fn ext4_needs_loop_device_and_host_net_skips_loopback() {
        let mut c = config(Rootfs::Ext4Image {
            file: "/img".into(),
            readonly: true,
        });
        assert!(build(&c, &layout_for(&c, None, Vec::new(), false), None).is_err());
        c.network = NetworkChoice::Host;
        let plan = build(
            &c,
            &layout_for(&c, Some("/dev/loop3".into()), Vec::new(), true),
            None,
        )
        .unwrap();
        assert!(
            matches!(&plan.ops[1], Op::Mount { source: Some(s), flags, .. }
            if s.as_bytes() == b"/dev/loop3" && *flags == libc::MS_RDONLY)
        );
        // The loop device is opened before init joins the devices cgroup, and the
        // cgroup namespace is made after it.
        assert_eq!(plan.ops[2], Op::JoinDevicesCgroup);
        assert_eq!(plan.ops[3], Op::UnshareCgroupNs);
        assert!(!plan.ops.contains(&Op::LoopbackUp));
    }

    #[test]
    fn program_with_slash_is_not_searched() {
        let mut c = config(Rootfs::Dir {
            path: "/r".into(),
            readonly: false,
        });
        c.args = vec!["/bin/echo".into()];
        let plan = build(&c, &layout_for(&c, None, Vec::new(), false), None).unwrap();
        assert_eq!(plan.exec.candidates.len(), 1);
        c.args = vec!["a\0b".into()];
        assert!(matches!(
            build(&c, &layout_for(&c, None, Vec::new(), false), None),
            Err(RuntimeError::NulByte { .. })
        ));
    }

    #[test]
    fn binds_after_dev_before_pivot() {
        let mut c = config(Rootfs::Dir {
            path: "/r".into(),
            readonly: true,
        });
        c.binds = vec![
            crate::config::BindMount::parse("/srv/data:/data/in:ro").unwrap(),
            crate::config::BindMount::parse("/etc/hosts:/etc/hosts").unwrap(),
        ];
        let sources = vec![
            BindSource {
                path: "/srv/data".into(),
                dir: true,
            },
            BindSource {
                path: "/etc/hosts".into(),
                dir: false,
            },
        ];
        let plan = build(&c, &layout_for(&c, None, sources.clone(), false), None).unwrap();
        let at = |pred: &dyn Fn(&Op) -> bool| plan.ops.iter().position(pred).unwrap();
        let target = at(&|o| matches!(o, Op::BindTarget { bind: 0, .. }));
        let mqueue = at(
            &|o| matches!(o, Op::Mount { target, .. } if target.as_bytes().ends_with(b"/dev/mqueue")),
        );
        let pivot = at(&|o| *o == Op::PivotHere);
        assert!(mqueue < target && target < pivot);
        let Op::BindTarget {
            components,
            dir,
            create,
            ..
        } = &plan.ops[target]
        else {
            unreachable!()
        };
        let names: Vec<&str> = components.iter().map(|c| c.to_str().unwrap()).collect();
        assert_eq!(names, ["/r/data", "/r/data/in"]);
        assert!(
            *dir && !*create,
            "a read-only directory root is never written"
        );
        assert!(
            matches!(&plan.ops[target + 1], Op::Mount { source: Some(s), target: t, flags, .. }
            if s.as_bytes() == b"/srv/data" && t.as_bytes() == b"/r/data/in"
            && *flags == libc::MS_BIND | libc::MS_REC)
        );
        assert!(matches!(&plan.ops[target + 2], Op::RemountReadOnly { path }
            if path.as_bytes() == b"/r/data/in"));
        // The second bind is read-write: no remount after its mount.
        let second = at(&|o| {
            matches!(
                o,
                Op::BindTarget {
                    bind: 1,
                    dir: false,
                    ..
                }
            )
        });
        assert!(matches!(&plan.ops[second + 2], Op::Phase(Phase::Mounts)));
        // Overlay roots may create destinations.
        c.rootfs = Rootfs::Overlay {
            lower: "/r".into(),
            upper: None,
        };
        let plan = build(&c, &layout_for(&c, None, sources, false), None).unwrap();
        assert!(plan
            .ops
            .iter()
            .any(|o| matches!(o, Op::BindTarget { create: true, .. })));
        // A bind without a resolved source is refused.
        assert!(build(&c, &layout_for(&c, None, Vec::new(), false), None).is_err());
    }
}
