//! Reading an OCI bundle back into a [`ContainerConfig`]: [`from_bundle`] section by
//! section (process, root, hooks, mounts, namespaces, cgroups path, devices, sysctl,
//! resources), what it accepts and what it refuses with what to remove, and the
//! bundle's metadata and `exec` process.

use std::path::{Path, PathBuf};

use isolab_cgroups::{
    Bytes, CpuQuota, CpuWeight, DeviceNumber, HugePageSize, HugetlbLimit, IdSet, IoThrottle, Limits,
};
use oci_spec::runtime::{LinuxNamespaceType, Spec};

use crate::config::{
    BindMount, ContainerConfig, Hook, Hooks, IdMaps, IdRange, Mount, MountRef, NetworkChoice,
    NsKind, Rootfs, Standard,
};
use crate::error::RuntimeError;
use crate::id::ContainerId;
use crate::security::{DeviceAccess, DeviceKind, DeviceRule};

/// Options of a `bind` mount that [`from_bundle`] accepts (propagation is always
/// private in isolab-runtime; a bind is always recursive).
pub(super) const BIND_OPTIONS: [&str; 6] = ["bind", "rbind", "ro", "rw", "rprivate", "private"];

/// Destination and type of the mounts the standard layout makes itself (with the
/// options [`default_mounts`] lists).
pub(super) const STANDARD_MOUNTS: [(&str, &str, Standard); 6] = [
    ("/proc", "proc", Standard::Proc),
    ("/dev", "tmpfs", Standard::Dev),
    ("/dev/pts", "devpts", Standard::DevPts),
    ("/dev/shm", "tmpfs", Standard::Shm),
    ("/dev/mqueue", "mqueue", Standard::Mqueue),
    ("/sys", "sysfs", Standard::Sys),
];

/// The bundle's hooks, each kind in its order (a `timeout` must be positive).
fn hooks_from(h: &oci_spec::runtime::Hooks) -> Result<Hooks, String> {
    let list = |kind: &str, hooks: &Option<Vec<oci_spec::runtime::Hook>>| {
        hooks
            .iter()
            .flatten()
            .map(|hook| {
                let timeout = match hook.timeout() {
                    None => None,
                    Some(t) if t > 0 => Some(t as u64),
                    Some(t) => {
                        return Err(format!(
                            "{kind} hook {}: timeout {t} is not greater than zero",
                            hook.path().display()
                        ))
                    }
                };
                if !hook.path().is_absolute() {
                    return Err(format!(
                        "{kind} hook {}: the path must be absolute",
                        hook.path().display()
                    ));
                }
                Ok(Hook {
                    path: hook.path().clone(),
                    args: hook.args().clone().unwrap_or_default(),
                    env: hook.env().clone().unwrap_or_default(),
                    timeout,
                })
            })
            .collect::<Result<Vec<Hook>, String>>()
    };
    #[allow(deprecated)]
    let prestart = h.prestart();
    Ok(Hooks {
        prestart: list("prestart", prestart)?,
        create_runtime: list("createRuntime", h.create_runtime())?,
        create_container: list("createContainer", h.create_container())?,
        start_container: list("startContainer", h.start_container())?,
        poststart: list("poststart", h.poststart())?,
        poststop: list("poststop", h.poststop())?,
    })
}

/// `RLIMIT_*` name to its resource number.
fn rlimit_number(name: &str) -> Option<u32> {
    let table = [
        ("RLIMIT_CPU", libc::RLIMIT_CPU),
        ("RLIMIT_FSIZE", libc::RLIMIT_FSIZE),
        ("RLIMIT_DATA", libc::RLIMIT_DATA),
        ("RLIMIT_STACK", libc::RLIMIT_STACK),
        ("RLIMIT_CORE", libc::RLIMIT_CORE),
        ("RLIMIT_RSS", libc::RLIMIT_RSS),
        ("RLIMIT_NPROC", libc::RLIMIT_NPROC),
        ("RLIMIT_NOFILE", libc::RLIMIT_NOFILE),
        ("RLIMIT_MEMLOCK", libc::RLIMIT_MEMLOCK),
        ("RLIMIT_AS", libc::RLIMIT_AS),
        ("RLIMIT_LOCKS", libc::RLIMIT_LOCKS),
        ("RLIMIT_SIGPENDING", libc::RLIMIT_SIGPENDING),
        ("RLIMIT_MSGQUEUE", libc::RLIMIT_MSGQUEUE),
        ("RLIMIT_NICE", libc::RLIMIT_NICE),
        ("RLIMIT_RTPRIO", libc::RLIMIT_RTPRIO),
        ("RLIMIT_RTTIME", libc::RLIMIT_RTTIME),
    ];
    table.iter().find(|(n, _)| *n == name).map(|(_, r)| *r)
}

fn bundle_err(path: &Path, problem: impl Into<String>) -> RuntimeError {
    RuntimeError::Bundle {
        path: path.to_owned(),
        problem: problem.into(),
    }
}

/// Reads an OCI bundle (`DIR/config.json`, root relative to `DIR`) into a
/// configuration with container id `id`. Accepts what [`oci_spec()`] writes:
/// args, env, cwd, hostname, root (read-only flag), the standard mounts, bind mounts
/// (type `bind` or a `bind`/`rbind` option; options limited to `bind`, `rbind`, `ro`,
/// `rw`, `rprivate`, `private`; a relative source is relative to `DIR`), pid, ipc,
/// uts, mount, cgroup, network (absent = host) and user namespaces, new or joined by
/// path (not the user namespace; without a mount namespace the container is chrooted,
/// its mounts made in the host's and removed with it), resources (cpu
/// quota, period and shares, cpuset, memory limit, swap and reservation, pids, blockIO
/// throttles, hugepageLimits, unified cgroup v2 files), masked and read-only paths,
/// capabilities and `noNewPrivileges`; the parent of `cgroupsPath` becomes the cgroup
/// parent. Anything else that would change behaviour (other mounts, joining a
/// user namespace by path, a resource it does not apply such as
/// `cpu.realtimeRuntime`) is refused with what to remove. (Huge page limits and unified
/// files are checked against the host when the cgroup is made: without a hugetlb
/// controller, or with unified files on cgroup v1, the container does not start.)
pub fn from_bundle(dir: &Path, id: &ContainerId) -> Result<ContainerConfig, RuntimeError> {
    let file = dir.join("config.json");
    let spec = load_spec(&file)?;
    check_version(spec.version()).map_err(|problem| bundle_err(&file, problem))?;
    let process = spec
        .process()
        .as_ref()
        .ok_or_else(|| bundle_err(&file, "no \"process\" section"))?;
    let args = process.args().clone().unwrap_or_default();
    let root = spec
        .root()
        .as_ref()
        .ok_or_else(|| bundle_err(&file, "no \"root\" section"))?;
    let root_path = if root.path().is_absolute() {
        root.path().clone()
    } else {
        dir.join(root.path())
    };
    let mut config = ContainerConfig::new(
        Rootfs::Dir {
            path: root_path,
            readonly: root.readonly().unwrap_or(false),
        },
        args,
    );
    config.id = id.clone();
    // The bundle's process is PID 1, as with runc and crun (no init of isolab's).
    config.init = false;
    config.hostname = spec.hostname().clone().unwrap_or_else(|| id.to_string());
    apply_process(&mut config, process, &file)?;
    if let Some(hooks) = spec.hooks() {
        config.oci.hooks = hooks_from(hooks).map_err(|problem| bundle_err(&file, problem))?;
    }
    read_mounts(&mut config, &spec, dir, &file)?;
    let linux = spec
        .linux()
        .as_ref()
        .ok_or_else(|| bundle_err(&file, "no \"linux\" section"))?;
    if let Some(name) = linux.rootfs_propagation() {
        if crate::container::plan::propagation_flags(name).is_none() {
            return Err(bundle_err(
                &file,
                format!(
                    "linux.rootfsPropagation {name:?} is not shared, slave, private or unbindable"
                ),
            ));
        }
        config.oci.root_propagation = Some(name.clone());
    }
    read_namespaces(&mut config, linux, &file)?;
    read_id_maps(&mut config, linux, &file)?;
    read_cgroups_path(&mut config, linux, &file)?;
    if let Some(masked) = linux.masked_paths() {
        config.security.masked_paths = masked.clone();
    }
    if let Some(ro) = linux.readonly_paths() {
        config.security.readonly_paths = ro.clone();
    }
    // The bundle's own profile (an engine's), compiled in `prepare`; none: unconfined.
    config.security.seccomp = match linux.seccomp() {
        Some(profile) => crate::security::SeccompChoice::Oci(Box::new(profile.clone())),
        None => crate::security::SeccompChoice::Unconfined,
    };
    read_devices(&mut config, linux, &file)?;
    for (key, value) in linux.sysctl().iter().flatten() {
        config.oci.sysctl.push((key.clone(), value.clone()));
    }
    config.oci.sysctl.sort();
    read_resources(&mut config, linux, &file)?;
    allow_device_nodes(&mut config);
    Ok(config)
}

/// `mounts`: the standard ones at their place in the order, `/sys/fs/cgroup`, plain bind
/// mounts (as binds) and any other mount (as an OCI mount whose options are checked).
fn read_mounts(
    config: &mut ContainerConfig,
    spec: &Spec,
    dir: &Path,
    file: &Path,
) -> Result<(), RuntimeError> {
    for m in spec.mounts().iter().flatten() {
        let dest = m.destination().to_string_lossy();
        let fstype = m.typ().clone().unwrap_or_default();
        let options = m.options().clone().unwrap_or_default();
        let mut mount = Mount {
            destination: m.destination().clone(),
            source: m.source().clone().unwrap_or_default(),
            fstype,
            options,
        };
        let is_bind = mount.is_bind();
        // A bind's relative source is in the bundle (as runc reads it); any other
        // mount's source is the file system's name (`tmpfs`, a device), kept as given.
        if is_bind && mount.source.is_relative() && !mount.source.as_os_str().is_empty() {
            mount.source = dir.join(&mount.source);
        }
        let standard = STANDARD_MOUNTS
            .iter()
            .find(|(d, t, _)| !is_bind && *d == dest && *t == mount.fstype)
            .map(|(_, _, s)| *s);
        if let Some(s) = standard {
            // The standard layout makes it, at this point of the order.
            if !config.oci.order.contains(&MountRef::Standard(s)) {
                config.oci.order.push(MountRef::Standard(s));
            }
            continue;
        }
        if !is_bind && dest == "/sys/fs/cgroup" {
            config.oci.cgroup_mount = true;
            config.oci.order.push(MountRef::Standard(Standard::Cgroup));
            continue;
        }
        let plain_bind = is_bind
            && mount
                .options
                .iter()
                .all(|o| BIND_OPTIONS.contains(&o.as_str()));
        if plain_bind {
            let bind = BindMount {
                source: mount.source.clone(),
                destination: mount.destination.clone(),
                readonly: mount.options.iter().any(|o| o == "ro"),
            };
            bind.validate()?;
            config.oci.order.push(MountRef::Bind(config.binds.len()));
            config.binds.push(bind);
            continue;
        }
        if is_bind && mount.source.as_os_str().is_empty() {
            return Err(bundle_err(
                file,
                format!("bind mount on {dest} has no source"),
            ));
        }
        BindMount {
            source: mount.source.clone(),
            destination: mount.destination.clone(),
            readonly: false,
        }
        .validate()?;
        crate::container::plan::mount_flags(&mount.options)
            .map_err(|problem| bundle_err(file, format!("mount on {dest}: {problem}")))?;
        config
            .oci
            .order
            .push(MountRef::Oci(config.oci.mounts.len()));
        config.oci.mounts.push(mount);
    }
    Ok(())
}

/// `linux.namespaces`: the namespaces to create or join (not a user namespace by path),
/// and what they imply for the network and the user namespace; without a mount
/// namespace, what needs one is refused.
fn read_namespaces(
    config: &mut ContainerConfig,
    linux: &oci_spec::runtime::Linux,
    file: &Path,
) -> Result<(), RuntimeError> {
    let mut network = NetworkChoice::Host;
    let mut namespaces = crate::config::Namespaces::default();
    for ns in linux.namespaces().iter().flatten() {
        let kind = match ns.typ() {
            LinuxNamespaceType::Pid => NsKind::Pid,
            LinuxNamespaceType::Mount => NsKind::Mount,
            LinuxNamespaceType::Uts => NsKind::Uts,
            LinuxNamespaceType::Ipc => NsKind::Ipc,
            LinuxNamespaceType::Network => NsKind::Network,
            LinuxNamespaceType::Cgroup => NsKind::Cgroup,
            LinuxNamespaceType::User => NsKind::User,
            LinuxNamespaceType::Time => {
                return Err(bundle_err(file, "time namespaces are not supported"))
            }
        };
        match ns.path() {
            Some(_) if kind == NsKind::User => {
                return Err(bundle_err(
                    file,
                    "joining the user namespace by path is not supported; remove its \"path\"",
                ));
            }
            Some(path) => namespaces.join.push((kind, path.clone())),
            None => namespaces.create.push(kind),
        }
        if kind == NsKind::Network {
            network = NetworkChoice::None;
        }
        if kind == NsKind::User {
            config.user_namespace = true;
        }
    }
    if !namespaces.own_mount() {
        // The container mounts below its root in the runtime's mount namespace and is
        // chrooted there: what needs a mount table of its own is refused by name.
        let mut needs = Vec::new();
        if matches!(config.rootfs, Rootfs::Dir { readonly: true, .. }) {
            needs.push("root.readonly");
        }
        if linux.masked_paths().as_ref().is_some_and(|p| !p.is_empty()) {
            needs.push("linux.maskedPaths");
        }
        if linux
            .readonly_paths()
            .as_ref()
            .is_some_and(|p| !p.is_empty())
        {
            needs.push("linux.readonlyPaths");
        }
        if linux.rootfs_propagation().is_some() {
            needs.push("linux.rootfsPropagation");
        }
        if !needs.is_empty() {
            return Err(bundle_err(
                file,
                format!(
                    "{} {} a mount namespace of the container's own: add {{\"type\": \"mount\"}} \
                     to linux.namespaces, or remove {}",
                    needs.join(", "),
                    if needs.len() == 1 { "needs" } else { "need" },
                    if needs.len() == 1 { "it" } else { "them" }
                ),
            ));
        }
    }
    config.oci.namespaces = Some(namespaces);
    config.network = network;
    Ok(())
}

/// `linux.uidMappings` and `linux.gidMappings`: for a new user namespace only, both.
fn read_id_maps(
    config: &mut ContainerConfig,
    linux: &oci_spec::runtime::Linux,
    file: &Path,
) -> Result<(), RuntimeError> {
    let ranges = |list: &Option<Vec<oci_spec::runtime::LinuxIdMapping>>| -> Vec<IdRange> {
        list.iter()
            .flatten()
            .map(|m| IdRange {
                container: m.container_id(),
                host: m.host_id(),
                size: m.size(),
            })
            .collect()
    };
    let maps = IdMaps {
        uid: ranges(linux.uid_mappings()),
        gid: ranges(linux.gid_mappings()),
    };
    if maps == IdMaps::default() {
        return Ok(());
    }
    if !config.user_namespace {
        return Err(bundle_err(
            file,
            "uidMappings and gidMappings need a new user namespace (add {\"type\": \"user\"} \
             to linux.namespaces)",
        ));
    }
    if maps.uid.is_empty() || maps.gid.is_empty() {
        return Err(bundle_err(
            file,
            "a user namespace needs both uidMappings and gidMappings",
        ));
    }
    config.oci.id_maps = Some(maps);
    Ok(())
}

/// `linux.cgroupsPath`: its parent becomes the cgroup parent, the exact path is kept.
fn read_cgroups_path(
    config: &mut ContainerConfig,
    linux: &oci_spec::runtime::Linux,
    file: &Path,
) -> Result<(), RuntimeError> {
    if let Some(parent) = linux
        .cgroups_path()
        .as_ref()
        .and_then(|p| p.strip_prefix("/").unwrap_or(p).parent())
        .filter(|p| !p.as_os_str().is_empty())
    {
        crate::config::validate_cgroup_parent(parent)
            .map_err(|e| bundle_err(file, format!("\"cgroupsPath\": {e}")))?;
        config.cgroup_parent = parent.to_owned();
    }
    if let Some(path) = linux.cgroups_path() {
        // The exact path: engines read the container's statistics from it.
        let path = path.strip_prefix("/").unwrap_or(path);
        if path.parent().is_some_and(|p| p.as_os_str().is_empty()) {
            config.cgroup_parent = PathBuf::new();
        }
        config.cgroup_path = Some(path.to_owned());
    }
    Ok(())
}

/// `linux.devices`: the device nodes to create.
fn read_devices(
    config: &mut ContainerConfig,
    linux: &oci_spec::runtime::Linux,
    file: &Path,
) -> Result<(), RuntimeError> {
    for d in linux.devices().iter().flatten() {
        use oci_spec::runtime::LinuxDeviceType;
        let kind = match d.typ() {
            LinuxDeviceType::C | LinuxDeviceType::U => libc::S_IFCHR,
            LinuxDeviceType::B => libc::S_IFBLK,
            LinuxDeviceType::P => libc::S_IFIFO,
            LinuxDeviceType::A => {
                return Err(bundle_err(
                    file,
                    format!(
                        "device {}: type \"a\" is not a node type",
                        d.path().display()
                    ),
                ))
            }
        };
        crate::config::validate_container_path("device path", d.path())
            .map_err(|e| bundle_err(file, e.to_string()))?;
        config.oci.devices.push(crate::config::DeviceNode {
            path: d.path().clone(),
            kind,
            major: d.major() as u32,
            minor: d.minor() as u32,
            mode: d.file_mode().unwrap_or(0o666) & 0o7777,
            uid: d.uid().unwrap_or(0),
            gid: d.gid().unwrap_or(0),
        });
    }
    Ok(())
}

/// `linux.resources`: the limits, and the device allowlist (the bundle's rules, then
/// the standard devices).
fn read_resources(
    config: &mut ContainerConfig,
    linux: &oci_spec::runtime::Linux,
    file: &Path,
) -> Result<(), RuntimeError> {
    if let Some(r) = linux.resources() {
        config.limits = limits_from(r).map_err(|problem| bundle_err(file, problem))?;
        if let Some(rules) = r.devices() {
            // The bundle's rules in their order (a leading "deny all" is what isolab
            // writes first anyway), then, as runc does, the standard devices of every
            // container's /dev (null, zero, full, random, urandom, tty, console, ptmx,
            // pts; mknod of any) and (below) the nodes of linux.devices.
            let mut all: Vec<DeviceRule> = rules
                .iter()
                .map(device_rule)
                .collect::<Result<_, _>>()
                .map_err(|problem| bundle_err(file, problem))?;
            let leading = all
                .iter()
                .take_while(|r| **r == DeviceRule::DENY_ALL)
                .count();
            all.drain(..leading);
            append_missing(&mut all, crate::security::default_devices());
            config.security.devices = all;
        }
    }
    Ok(())
}

/// Allows each node of `linux.devices`, whatever the allowlist says before.
fn allow_device_nodes(config: &mut ContainerConfig) {
    let nodes: Vec<DeviceRule> = config
        .oci
        .devices
        .iter()
        .filter_map(|node| {
            let kind = match node.kind {
                libc::S_IFCHR => DeviceKind::Char,
                libc::S_IFBLK => DeviceKind::Block,
                _ => return None,
            };
            Some(DeviceRule {
                allow: true,
                kind,
                major: Some(node.major),
                minor: Some(node.minor),
                access: DeviceAccess::ALL,
            })
        })
        .collect();
    append_missing(&mut config.security.devices, nodes);
}

/// Appends each rule of `more` that `rules` does not hold yet.
fn append_missing(rules: &mut Vec<DeviceRule>, more: impl IntoIterator<Item = DeviceRule>) {
    for rule in more {
        if !rules.contains(&rule) {
            rules.push(rule);
        }
    }
}

/// A `linux.resources.devices` entry as a device cgroup rule (absent type: all
/// devices; absent or negative major or minor: any; absent access: `rwm`).
fn device_rule(d: &oci_spec::runtime::LinuxDeviceCgroup) -> Result<DeviceRule, String> {
    use oci_spec::runtime::LinuxDeviceType;
    let kind = match d.typ() {
        None | Some(LinuxDeviceType::A) => DeviceKind::All,
        Some(LinuxDeviceType::C | LinuxDeviceType::U) => DeviceKind::Char,
        Some(LinuxDeviceType::B) => DeviceKind::Block,
        Some(LinuxDeviceType::P) => {
            return Err("resources.devices: type \"p\" has no device cgroup rule".into())
        }
    };
    let number = |n: Option<i64>| n.and_then(|n| u32::try_from(n).ok());
    let access = d.access().as_deref().unwrap_or("rwm");
    if access.is_empty() || !access.chars().all(|c| "rwm".contains(c)) {
        return Err(format!(
            "resources.devices: access {access:?} is not made of r, w and m"
        ));
    }
    Ok(DeviceRule {
        allow: d.allow(),
        kind,
        major: number(d.major()),
        minor: number(d.minor()),
        access: DeviceAccess {
            read: access.contains('r'),
            write: access.contains('w'),
            mknod: access.contains('m'),
        },
    })
}

/// Applies an OCI `process` to `config`: arguments, environment, working directory,
/// `noNewPrivileges`, user, rlimits, `oomScoreAdj`, capabilities. `file` names the
/// JSON file in errors.
fn apply_process(
    config: &mut ContainerConfig,
    process: &oci_spec::runtime::Process,
    file: &Path,
) -> Result<(), RuntimeError> {
    config.args = process.args().clone().unwrap_or_default();
    if let Some(env) = process.env() {
        config.env = env.clone();
    }
    config.cwd = process.cwd().clone();
    config.security.no_new_privs = process.no_new_privileges().unwrap_or(false);
    let user = process.user();
    config.oci.user = Some(crate::config::User {
        uid: user.uid(),
        gid: user.gid(),
        additional_gids: user.additional_gids().clone().unwrap_or_default(),
        umask: user.umask(),
    });
    config.oci.rlimits.clear();
    for r in process.rlimits().iter().flatten() {
        let resource = rlimit_number(&r.typ().to_string())
            .ok_or_else(|| bundle_err(file, format!("unknown rlimit {}", r.typ())))?;
        config.oci.rlimits.push((resource, r.soft(), r.hard()));
    }
    config.oci.oom_score_adj = process.oom_score_adj();
    if let Some(caps) = process.capabilities().as_ref() {
        let set = |list: &Option<oci_spec::runtime::Capabilities>| {
            let names: Vec<String> = list.iter().flatten().map(|c| c.to_string()).collect();
            crate::security::CapabilitySet::from_names(&names)
        };
        let bounding = set(caps.bounding())?;
        let sets = crate::security::CapabilitySets {
            effective: set(caps.effective())?,
            permitted: set(caps.permitted())?,
            inheritable: set(caps.inheritable())?,
            ambient: set(caps.ambient())?,
        };
        config.security.capabilities = bounding;
        // The sets isolab derives from the bounding set need no record of their own.
        let derived = crate::security::CapabilitySets {
            effective: bounding,
            permitted: bounding,
            ..Default::default()
        };
        config.security.sets = (sets != derived).then_some(sets);
    }
    Ok(())
}

/// The configuration of an `exec` in the container of `bundle`: the container's
/// own (its seccomp profile, masked paths, …) with the process of `process_file`
/// (an OCI `process` JSON, as `exec --process` takes it).
pub fn exec_config(
    bundle: &Path,
    id: &ContainerId,
    process_file: &Path,
) -> Result<ContainerConfig, RuntimeError> {
    let mut config = from_bundle(bundle, id)?;
    let text = std::fs::read_to_string(process_file).map_err(|source| RuntimeError::Host {
        op: "read the process file",
        path: process_file.to_owned(),
        source,
    })?;
    let process: oci_spec::runtime::Process = serde_json::from_str(&text)
        .map_err(|e| bundle_err(process_file, format!("not an OCI process: {e}")))?;
    apply_process(&mut config, &process, process_file)?;
    config.validate()?;
    Ok(config)
}

/// What the OCI operations keep of a bundle besides its [`ContainerConfig`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BundleMeta {
    /// `annotations`.
    pub annotations: std::collections::BTreeMap<String, String>,
    /// `process.terminal`.
    pub terminal: bool,
}

/// Reads and parses a bundle's `config.json` whole (what `Spec::load` does through a
/// buffered reader, byte by byte, in twice the time: ~0.1 ms of a start).
fn load_spec(file: &Path) -> Result<Spec, RuntimeError> {
    let text = std::fs::read(file).map_err(|e| bundle_err(file, format!("cannot load: {e}")))?;
    serde_json::from_slice(&text).map_err(|e| bundle_err(file, format!("cannot load: {e}")))
}

/// `ociVersion` must be a version of runtime spec 1 (`1.MINOR.PATCH`, with an optional
/// `-pre-release` or `+build` suffix, as semver writes it): anything else is a value the
/// runtime spec says a runtime must refuse, not guess at.
fn check_version(version: &str) -> Result<(), String> {
    let core = version.split(['-', '+']).next().unwrap_or_default();
    let parts: Vec<&str> = core.split('.').collect();
    let numeric = |p: &&str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    if parts.len() == 3 && parts.iter().all(numeric) && parts[0] == "1" {
        Ok(())
    } else {
        Err(format!(
            "ociVersion {version:?} is not a version of the OCI runtime spec 1 (1.MINOR.PATCH)"
        ))
    }
}

/// Reads [`BundleMeta`] of the bundle in `dir`.
pub fn bundle_meta(dir: &Path) -> Result<BundleMeta, RuntimeError> {
    let file = dir.join("config.json");
    let spec = load_spec(&file)?;
    Ok(BundleMeta {
        annotations: spec
            .annotations()
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        terminal: spec
            .process()
            .as_ref()
            .and_then(|p| p.terminal())
            .unwrap_or(false),
    })
}

/// What isolab-runtime applies of `linux.resources`, for the error that refuses the rest.
pub(super) const APPLIED_RESOURCES: &str =
    "cpu.shares, cpu.quota, cpu.period, cpu.cpus, cpu.mems, \
    memory.limit, memory.swap, memory.reservation, memory.swappiness, memory.kernelTCP, \
    memory.disableOOMKiller (these three on cgroup v1), pids.limit, the blockIO throttles, \
    hugepageLimits, unified (on cgroup v2) and devices";

/// The fields of `linux.resources` that isolab-runtime does not apply and that ask for
/// something (a value other than the kernel's default), as `name = value`. Dropping
/// one would run the container without what the bundle asked for, so
/// [`limits_from`] refuses them. Left out: `memory.useHierarchy` (always on in
/// today's kernels) and `memory.checkBeforeUpdate` (only for `update`).
fn unapplied_resources(r: &oci_spec::runtime::LinuxResources) -> Vec<String> {
    let mut found = Vec::new();
    let mut note = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            found.push(format!("{name} = {value}"));
        }
    };
    let set = |v: Option<i64>| v.filter(|v| *v != 0).map(|v| v.to_string());
    let set_u = |v: Option<u64>| v.filter(|v| *v != 0).map(|v| v.to_string());
    if let Some(m) = r.memory() {
        note("memory.kernel", m.kernel().map(|v| v.to_string()));
    }
    if let Some(c) = r.cpu() {
        // A CFS period is applied with its quota; alone it limits nothing, and applying it
        // alone is not what this runtime does (`docker run --cpu-period` without
        // `--cpu-quota` gives one).
        if c.quota().is_none_or(|q| q <= 0) {
            note(
                "cpu.period (without a positive cpu.quota)",
                set_u(c.period()),
            );
        }
        note("cpu.realtimeRuntime", set(c.realtime_runtime()));
        note("cpu.realtimePeriod", set_u(c.realtime_period()));
        note("cpu.idle", set(c.idle()));
        note("cpu.burst", set_u(c.burst()));
    }
    if let Some(b) = r.block_io() {
        note("blockIO.weight", set_u(b.weight().map(u64::from)));
        note("blockIO.leafWeight", set_u(b.leaf_weight().map(u64::from)));
        let devices = b.weight_device().as_ref().filter(|d| !d.is_empty());
        note(
            "blockIO.weightDevice",
            devices.map(|d| format!("{} devices", d.len())),
        );
    }
    if let Some(n) = r.network() {
        note("network.classID", n.class_id().map(|v| v.to_string()));
        let priorities = n.priorities().as_ref().filter(|p| !p.is_empty());
        note(
            "network.priorities",
            priorities.map(|p| format!("{} interfaces", p.len())),
        );
    }
    let rdma = r.rdma().as_ref().filter(|r| !r.is_empty());
    note("rdma", rdma.map(|r| format!("{} devices", r.len())));
    found
}

/// The limits of `linux.resources`. Each field is applied or, when isolab-runtime
/// cannot apply it ([`unapplied_resources`]), refused: never dropped.
fn limits_from(r: &oci_spec::runtime::LinuxResources) -> Result<Limits, String> {
    let unapplied = unapplied_resources(r);
    if !unapplied.is_empty() {
        return Err(format!(
            "linux.resources asks for what isolab-runtime does not apply: {}; remove it \
             (isolab-runtime applies {APPLIED_RESOURCES})",
            unapplied.join(", ")
        ));
    }
    let mut limits = Limits::default();
    if let Some(cpu) = r.cpu() {
        // 0 is "unset" for runc and crun.
        limits.cpu_weight = cpu.shares().filter(|s| *s > 0).map(CpuWeight::Shares);
        if let Some(quota) = cpu.quota().filter(|q| *q > 0) {
            let period = cpu.period().unwrap_or(100_000);
            limits.cpu = Some(CpuQuota {
                quota: std::time::Duration::from_micros(quota as u64),
                period: std::time::Duration::from_micros(period),
            });
        }
        let set = |s: &Option<String>| -> Result<Option<IdSet>, String> {
            s.as_deref()
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<IdSet>().map_err(|e| e.to_string()))
                .transpose()
        };
        limits.cpuset = set(cpu.cpus())?;
        limits.mems = set(cpu.mems())?;
    }
    if let Some(m) = r.memory() {
        limits.memory_max = m.limit().filter(|l| *l > 0).map(|l| Bytes(l as u64));
        limits.memory_swap_max = m.swap().filter(|l| *l > 0).map(|l| Bytes(l as u64));
        limits.memory_reservation = m.reservation().filter(|l| *l > 0).map(|l| Bytes(l as u64));
        // Only cgroup v1 has these three; a v2 host refuses them by name when the
        // cgroup is made.
        limits.memory_swappiness = match m.swappiness() {
            Some(s) if s > 100 => {
                return Err(format!("memory.swappiness {s} is not in 0..=100"));
            }
            s => s,
        };
        limits.memory_tcp_max = m.kernel_tcp().filter(|l| *l > 0).map(|l| Bytes(l as u64));
        limits.oom_kill_disabled = m.disable_oom_killer().unwrap_or(false);
    }
    for h in r.hugepage_limits().iter().flatten() {
        let page_size = h
            .page_size()
            .parse::<HugePageSize>()
            .map_err(|e| format!("hugepageLimits: {e}"))?;
        let limit = u64::try_from(h.limit())
            .map_err(|_| format!("hugepageLimits: {page_size}: negative limit {}", h.limit()))?;
        limits.hugetlb.push(HugetlbLimit {
            page_size,
            limit: Bytes(limit),
        });
    }
    // Checked where they are written: the host's cgroup version and the cgroup's
    // controllers decide (isolab_cgroups::Limits::unified).
    limits.unified = r
        .unified()
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if let Some(p) = r.pids() {
        if p.limit() > 0 {
            limits.pids_max = Some(p.limit() as u64);
        }
    }
    if let Some(b) = r.block_io() {
        let mut io: Vec<IoThrottle> = Vec::new();
        let lists = [
            (b.throttle_read_bps_device(), 0),
            (b.throttle_write_bps_device(), 1),
            (b.throttle_read_iops_device(), 2),
            (b.throttle_write_iops_device(), 3),
        ];
        for (list, which) in lists {
            for d in list.iter().flatten() {
                let device = DeviceNumber {
                    major: d.major() as u32,
                    minor: d.minor() as u32,
                };
                let pos = match io.iter().position(|t| t.device == device) {
                    Some(pos) => pos,
                    None => {
                        io.push(IoThrottle::unlimited(device));
                        io.len() - 1
                    }
                };
                let t = &mut io[pos];
                let rate = Some(d.rate());
                match which {
                    0 => t.read_bps = rate,
                    1 => t.write_bps = rate,
                    2 => t.read_iops = rate,
                    _ => t.write_iops = rate,
                }
            }
        }
        limits.io = io;
    }
    Ok(limits)
}
