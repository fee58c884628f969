//! OCI runtime spec (`config.json`): [`oci_spec()`] turns a [`ContainerConfig`] into
//! one that runc and crun run unchanged; [`from_bundle`] reads a bundle back into a
//! [`ContainerConfig`] for [`crate::run`].

use std::path::{Path, PathBuf};

use isolab_cgroups::{
    Bytes, CpuQuota, CpuWeight, DeviceNumber, HugePageSize, HugetlbLimit, IdSet, IoThrottle, Limits,
};
use oci_spec::runtime::{LinuxNamespaceType, Spec};
use serde_json::{json, Value};

use crate::config::{
    BindMount, ContainerConfig, Hook, Hooks, Mount, MountRef, NetworkChoice, NsKind, Rootfs,
    Standard, USERNS_BASE, USERNS_SIZE,
};
use crate::error::RuntimeError;
use crate::id::ContainerId;
use crate::security::{DeviceAccess, DeviceKind, DeviceRule};

/// The mounts every container gets (the same as the runtime makes itself).
fn default_mounts() -> Value {
    json!([
        {"destination": "/proc", "type": "proc", "source": "proc",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
         "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
         "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
         "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue",
         "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs",
         "options": ["nosuid", "noexec", "nodev", "ro"]}
    ])
}

/// The standard mounts plus one `bind` entry per bind mount: options `rbind`, and
/// `ro` for a read-only one (runc and crun then remount it read-only).
fn mounts(binds: &[BindMount]) -> Value {
    let mut list = match default_mounts() {
        Value::Array(list) => list,
        _ => Vec::new(),
    };
    for b in binds {
        let mut options = vec!["rbind"];
        if b.readonly {
            options.push("ro");
        }
        list.push(json!({
            "destination": b.destination,
            "type": "bind",
            "source": b.source,
            "options": options,
        }));
    }
    Value::Array(list)
}

/// Options of a `bind` mount that [`from_bundle`] accepts (propagation is always
/// private in isolab-runtime; a bind is always recursive).
const BIND_OPTIONS: [&str; 6] = ["bind", "rbind", "ro", "rw", "rprivate", "private"];

/// Destination and type of the mounts the standard layout makes itself (with the
/// options [`default_mounts`] lists).
const STANDARD_MOUNTS: [(&str, &str, Standard); 6] = [
    ("/proc", "proc", Standard::Proc),
    ("/dev", "tmpfs", Standard::Dev),
    ("/dev/pts", "devpts", Standard::DevPts),
    ("/dev/shm", "tmpfs", Standard::Shm),
    ("/dev/mqueue", "mqueue", Standard::Mqueue),
    ("/sys", "sysfs", Standard::Sys),
];

/// The bundle's hooks; `createContainer` and `startContainer` (run inside the
/// container's namespaces) are refused.
fn hooks_from(h: &oci_spec::runtime::Hooks) -> Result<Hooks, String> {
    let list = |hooks: &Option<Vec<oci_spec::runtime::Hook>>| -> Vec<Hook> {
        hooks
            .iter()
            .flatten()
            .map(|hook| Hook {
                path: hook.path().clone(),
                args: hook.args().clone().unwrap_or_default(),
                env: hook.env().clone().unwrap_or_default(),
                timeout: hook.timeout().map(|t| t.max(1) as u64),
            })
            .collect()
    };
    #[allow(deprecated)]
    let prestart = h.prestart();
    if h.create_container().as_ref().is_some_and(|v| !v.is_empty())
        || h.start_container().as_ref().is_some_and(|v| !v.is_empty())
    {
        return Err(
            "createContainer and startContainer hooks are not supported; \
                    remove them (prestart, createRuntime, poststart and poststop are)"
                .into(),
        );
    }
    let mut create_runtime = list(prestart);
    create_runtime.extend(list(h.create_runtime()));
    Ok(Hooks {
        create_runtime,
        poststart: list(h.poststart()),
        poststop: list(h.poststop()),
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

fn resources(limits: &Limits) -> Value {
    let mut r = serde_json::Map::new();
    let mut cpu = serde_json::Map::new();
    if let Some(q) = limits.cpu {
        cpu.insert("quota".into(), json!(q.quota.as_micros() as i64));
        cpu.insert("period".into(), json!(q.period.as_micros() as u64));
    }
    if let Some(set) = &limits.cpuset {
        cpu.insert("cpus".into(), json!(set.to_string()));
    }
    if let Some(set) = &limits.mems {
        cpu.insert("mems".into(), json!(set.to_string()));
    }
    let mut unified = limits.unified.clone();
    match limits.cpu_weight {
        Some(CpuWeight::Shares(s)) => {
            cpu.insert("shares".into(), json!(s));
        }
        // OCI has shares only: a v2 weight goes as the file itself.
        Some(w @ CpuWeight::Weight(_)) => {
            unified
                .entry("cpu.weight".into())
                .or_insert_with(|| w.weight().to_string());
        }
        None => {}
    }
    if !cpu.is_empty() {
        r.insert("cpu".into(), Value::Object(cpu));
    }
    let mut memory = serde_json::Map::new();
    if let Some(m) = limits.memory_max {
        memory.insert("limit".into(), json!(m.0 as i64));
    }
    if let Some(s) = limits.memory_swap_max {
        // OCI's swap is memory + swap, as cgroup v1's memsw.
        memory.insert("swap".into(), json!(s.0 as i64));
    }
    if let Some(m) = limits.memory_reservation {
        memory.insert("reservation".into(), json!(m.0 as i64));
    }
    if !memory.is_empty() {
        r.insert("memory".into(), Value::Object(memory));
    }
    if let Some(p) = limits.pids_max {
        r.insert("pids".into(), json!({"limit": p as i64}));
    }
    if !limits.hugetlb.is_empty() {
        let list: Vec<Value> = limits
            .hugetlb
            .iter()
            .map(|h| json!({"pageSize": h.page_size.to_string(), "limit": h.limit.0 as i64}))
            .collect();
        r.insert("hugepageLimits".into(), Value::Array(list));
    }
    if !unified.is_empty() {
        r.insert("unified".into(), json!(unified));
    }
    let throttle = |get: fn(&IoThrottle) -> Option<u64>| -> Vec<Value> {
        limits
            .io
            .iter()
            .filter_map(|t| {
                get(t).map(
                    |rate| json!({"major": t.device.major, "minor": t.device.minor, "rate": rate}),
                )
            })
            .collect()
    };
    let mut blkio = serde_json::Map::new();
    for (key, list) in [
        ("throttleReadBpsDevice", throttle(|t| t.read_bps)),
        ("throttleWriteBpsDevice", throttle(|t| t.write_bps)),
        ("throttleReadIOPSDevice", throttle(|t| t.read_iops)),
        ("throttleWriteIOPSDevice", throttle(|t| t.write_iops)),
    ] {
        if !list.is_empty() {
            blkio.insert(key.into(), Value::Array(list));
        }
    }
    if !blkio.is_empty() {
        r.insert("blockIO".into(), Value::Object(blkio));
    }
    Value::Object(r)
}

/// The configuration as an OCI runtime spec: process (args, env, cwd, capabilities,
/// no_new_privs), root, hostname, the standard mounts and the bind mounts (type
/// `bind`, options `rbind` plus `ro`; give absolute sources), namespaces, `linux.resources`
/// from the limits (cgroup v1 semantics for swap: memory + swap), masked and
/// read-only paths, seccomp and the device allowlist, `cgroupsPath`
/// `/<cgroup_parent>/rt-<id>`.
///
/// Only a directory root can be expressed (`root.path` is the directory; write the
/// spec into a bundle next to it, or keep the absolute path); an overlay or an ext4
/// image is [`RuntimeError::InvalidConfig`].
pub fn oci_spec(config: &ContainerConfig) -> Result<Spec, RuntimeError> {
    let (root, readonly) = match &config.rootfs {
        Rootfs::Dir { path, readonly } => (path.clone(), *readonly),
        other => {
            return Err(RuntimeError::InvalidConfig {
                what: "root filesystem for an OCI spec",
                value: other.source().display().to_string(),
                expected: "a directory root (OCI bundles hold a rootfs directory)",
            })
        }
    };
    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
        json!({"type": "cgroup"}),
    ];
    if config.network != NetworkChoice::Host {
        namespaces.push(json!({"type": "network"}));
    }
    let security = &config.security;
    let mut linux = security.oci_linux()?;
    linux["namespaces"] = Value::Array(namespaces.clone());
    if config.user_namespace {
        namespaces.push(json!({"type": "user"}));
        linux["namespaces"] = Value::Array(namespaces);
        let map = json!([{"containerID": 0, "hostID": USERNS_BASE, "size": USERNS_SIZE}]);
        linux["uidMappings"] = map.clone();
        linux["gidMappings"] = map;
    }
    let mut res = resources(&config.limits);
    if let (Some(obj), Some(devices)) = (
        res.as_object_mut(),
        linux.pointer("/resources/devices").cloned(),
    ) {
        obj.insert("devices".into(), devices);
    }
    linux["resources"] = res;
    linux["cgroupsPath"] = json!(Path::new("/").join(config.cgroup_rel()));
    linux["rootfsPropagation"] = json!("rprivate");
    let value = json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": config.args,
            "env": config.env,
            "cwd": config.cwd,
            "capabilities": security.oci_capabilities(),
            "noNewPrivileges": security.no_new_privs,
        },
        "root": {"path": root, "readonly": readonly},
        "hostname": config.hostname,
        "mounts": mounts(&config.binds),
        "linux": linux,
    });
    serde_json::from_value(value).map_err(|e| RuntimeError::Bundle {
        path: PathBuf::from("config.json"),
        problem: format!("the generated spec does not parse as an OCI spec: {e}"),
    })
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
/// uts, mount, cgroup, network (absent = host) and user namespaces, resources (cpu
/// quota, period and shares, cpuset, memory limit, swap and reservation, pids, blockIO
/// throttles, hugepageLimits, unified cgroup v2 files), masked and read-only paths,
/// capabilities and `noNewPrivileges`; the parent of `cgroupsPath` becomes the cgroup
/// parent. Anything else that would change behaviour (other mounts, joining a
/// namespace by path, hooks, a resource it does not apply such as
/// `memory.swappiness`) is refused with what to remove. (Huge page limits and unified
/// files are checked against the host when the cgroup is made: without a hugetlb
/// controller, or with unified files on cgroup v1, the container does not start.)
pub fn from_bundle(dir: &Path, id: &ContainerId) -> Result<ContainerConfig, RuntimeError> {
    let file = dir.join("config.json");
    let spec = load_spec(&file)?;
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
    read_namespaces(&mut config, linux, &file)?;
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
        let source = m.source().clone().unwrap_or_default();
        let mount = Mount {
            destination: m.destination().clone(),
            source: if source.is_absolute() || source.as_os_str().is_empty() {
                source
            } else {
                dir.join(source)
            },
            fstype,
            options,
        };
        let is_bind = mount.is_bind();
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

/// `linux.namespaces`: the namespaces to create or join (a new mount namespace is
/// required), and what they imply for the network and the user namespace.
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
            Some(_) if matches!(kind, NsKind::Pid | NsKind::User) => {
                return Err(bundle_err(
                    file,
                    format!(
                        "joining the {} namespace by path is not supported; remove its \"path\"",
                        ns.typ()
                    ),
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
    if !namespaces.creates(NsKind::Mount) {
        return Err(bundle_err(
            file,
            "no new mount namespace: isolab-runtime needs one (add {\"type\": \"mount\"} \
             to linux.namespaces)",
        ));
    }
    config.oci.namespaces = Some(namespaces);
    config.network = network;
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
const APPLIED_RESOURCES: &str = "cpu.shares, cpu.quota, cpu.period, cpu.cpus, cpu.mems, \
    memory.limit, memory.swap, memory.reservation, pids.limit, the blockIO throttles, \
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
        note("memory.kernelTCP", m.kernel_tcp().map(|v| v.to_string()));
        note("memory.swappiness", m.swappiness().map(|v| v.to_string()));
        note(
            "memory.disableOOMKiller",
            m.disable_oom_killer().filter(|d| *d).map(|d| d.to_string()),
        );
    }
    if let Some(c) = r.cpu() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn oci1() -> ContainerId {
        "oci1".parse().unwrap()
    }

    fn config() -> ContainerConfig {
        let mut c = ContainerConfig::new(
            Rootfs::Dir {
                path: "rootfs".into(),
                readonly: true,
            },
            vec!["sh".into(), "-c".into(), "echo hi".into()],
        );
        c.id = oci1();
        c.hostname = "box".into();
        c.limits = Limits {
            cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
            cpuset: Some("0".parse().unwrap()),
            memory_max: Some(Bytes::mib(64)),
            pids_max: Some(32),
            io: vec![IoThrottle {
                read_bps: Some(1_000_000),
                ..IoThrottle::unlimited(DeviceNumber {
                    major: 254,
                    minor: 0,
                })
            }],
            cpu_weight: Some(CpuWeight::Shares(512)),
            memory_reservation: Some(Bytes::mib(32)),
            hugetlb: vec![HugetlbLimit {
                page_size: "2MB".parse().unwrap(),
                limit: Bytes::mib(4),
            }],
            unified: [("memory.high".to_string(), "50331648".to_string())].into(),
            ..Limits::default()
        };
        c
    }

    #[test]
    fn spec_has_everything() {
        let spec = oci_spec(&config()).unwrap();
        let v = serde_json::to_value(&spec).unwrap();
        assert_eq!(v["process"]["args"][2], "echo hi");
        assert_eq!(v["hostname"], "box");
        assert_eq!(v["root"]["readonly"], true);
        assert_eq!(v["linux"]["resources"]["cpu"]["quota"], 50_000);
        assert_eq!(v["linux"]["resources"]["cpu"]["cpus"], "0");
        assert_eq!(v["linux"]["resources"]["memory"]["limit"], 64 << 20);
        assert_eq!(v["linux"]["resources"]["pids"]["limit"], 32);
        assert_eq!(v["linux"]["resources"]["cpu"]["shares"], 512);
        assert_eq!(v["linux"]["resources"]["memory"]["reservation"], 32 << 20);
        assert_eq!(
            v["linux"]["resources"]["hugepageLimits"],
            json!([{"pageSize": "2MB", "limit": 4 << 20}])
        );
        assert_eq!(
            v["linux"]["resources"]["unified"],
            json!({"memory.high": "50331648"})
        );
        assert_eq!(
            v["linux"]["resources"]["blockIO"]["throttleReadBpsDevice"][0]["rate"],
            1_000_000
        );
        assert_eq!(v["linux"]["cgroupsPath"], "/isolab/rt-oci1");
        assert_eq!(v["process"]["noNewPrivileges"], true);
        let ns: Vec<&str> = v["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert!(ns.contains(&"network") && ns.contains(&"pid") && !ns.contains(&"user"));
        let masked = v["linux"]["maskedPaths"].as_array().unwrap();
        assert!(masked.iter().any(|p| p == "/proc/kcore"));
        assert_eq!(v["mounts"].as_array().unwrap().len(), 6);
    }

    #[test]
    fn binds_and_cgroup_parent_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rootfs")).unwrap();
        let mut c = config();
        c.cgroup_parent = "isolab/lab-3".into();
        c.binds = vec![
            BindMount::parse("/srv/data:/data:ro").unwrap(),
            BindMount::parse("/srv/out:/out").unwrap(),
        ];
        let spec = oci_spec(&c).unwrap();
        let v = serde_json::to_value(&spec).unwrap();
        let mounts = v["mounts"].as_array().unwrap();
        assert_eq!(mounts.len(), 8);
        assert_eq!(
            mounts[6],
            json!({"destination": "/data", "type": "bind", "source": "/srv/data",
                   "options": ["rbind", "ro"]})
        );
        assert_eq!(mounts[7]["options"], json!(["rbind"]));
        assert_eq!(v["linux"]["cgroupsPath"], "/isolab/lab-3/rt-oci1");
        spec.save(dir.path().join("config.json")).unwrap();
        let back = from_bundle(dir.path(), &oci1()).unwrap();
        assert_eq!(back.binds, c.binds);
        assert_eq!(back.cgroup_parent, PathBuf::from("isolab/lab-3"));

        // Relative sources are relative to the bundle; a bind with more options than
        // isolab's own binds is an OCI mount, options kept; unknown options are refused.
        let mut v = v;
        v["mounts"][7]["source"] = json!("out");
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let back = from_bundle(dir.path(), &oci1()).unwrap();
        assert_eq!(back.binds[1].source, dir.path().join("out"));
        v["mounts"][7]["options"] = json!(["rbind", "nosuid"]);
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let back = from_bundle(dir.path(), &oci1()).unwrap();
        assert_eq!(back.binds.len(), 1);
        assert_eq!(back.oci.mounts[0].options, ["rbind", "nosuid"]);
        assert_eq!(back.oci.mounts[0].source, dir.path().join("out"));
        v["mounts"][7]["options"] = json!(["rbind", "idmap"]);
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let e = from_bundle(dir.path(), &oci1()).unwrap_err();
        assert!(e.to_string().contains("idmap"), "{e}");
    }

    #[test]
    fn engine_bundle_features_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = serde_json::to_value(oci_spec(&config()).unwrap()).unwrap();
        let mounts = v["mounts"].as_array_mut().unwrap();
        mounts.push(
            json!({"destination": "/run", "type": "tmpfs", "source": "tmpfs",
                           "options": ["nosuid", "nodev", "mode=755", "size=1m"]}),
        );
        mounts.push(json!({"destination": "/sys/fs/cgroup", "type": "cgroup",
                           "source": "cgroup", "options": ["ro", "nosuid"]}));
        v["process"]["user"] = json!({"uid": 1000, "gid": 100, "additionalGids": [5, 6],
                                      "umask": 18});
        v["process"]["rlimits"] = json!([{"type": "RLIMIT_NOFILE", "soft": 1024, "hard": 2048}]);
        v["process"]["oomScoreAdj"] = json!(100);
        v["linux"]["sysctl"] = json!({"net.ipv4.ping_group_range": "0 0"});
        v["linux"]["devices"] = json!([{"path": "/dev/fuse", "type": "c", "major": 10,
                                        "minor": 229, "fileMode": 432, "uid": 7, "gid": 8}]);
        v["linux"]["resources"]["devices"] = json!([{"allow": false, "access": "rwm"},
            {"allow": true, "type": "c", "major": 10, "minor": 229, "access": "rw"},
            {"allow": false, "type": "b", "major": 8}]);
        v["linux"]["namespaces"] = json!([{"type": "pid"}, {"type": "mount"},
                                          {"type": "network", "path": "/run/netns/x"}]);
        v["hooks"] = json!({"prestart": [{"path": "/bin/true", "args": ["true", "a"]}],
                            "poststop": [{"path": "/bin/echo", "timeout": 3}]});
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let c = from_bundle(dir.path(), &oci1()).unwrap();
        assert_eq!(c.oci.mounts.len(), 1);
        assert_eq!(c.oci.mounts[0].fstype, "tmpfs");
        assert!(c.oci.cgroup_mount);
        let user = c.oci.user.unwrap();
        assert_eq!((user.uid, user.gid, user.umask), (1000, 100, Some(18)));
        assert_eq!(user.additional_gids, [5, 6]);
        assert_eq!(c.oci.rlimits, [(libc::RLIMIT_NOFILE, 1024, 2048)]);
        assert_eq!(c.oci.oom_score_adj, Some(100));
        let rw = DeviceAccess {
            mknod: false,
            ..DeviceAccess::ALL
        };
        let mut expected = vec![
            DeviceRule {
                allow: true,
                kind: DeviceKind::Char,
                major: Some(10),
                minor: Some(229),
                access: rw,
            },
            DeviceRule {
                allow: false,
                kind: DeviceKind::Block,
                major: Some(8),
                minor: None,
                access: DeviceAccess::ALL,
            },
        ];
        // The standard devices, then the node of linux.devices.
        expected.extend(crate::security::default_devices());
        expected.push(DeviceRule::allow_char(10, Some(229)));
        assert_eq!(c.security.devices, expected);
        let fuse = &c.oci.devices[0];
        assert_eq!(
            (fuse.kind, fuse.major, fuse.minor),
            (libc::S_IFCHR, 10, 229)
        );
        assert_eq!((fuse.mode, fuse.uid, fuse.gid), (0o660, 7, 8));
        assert_eq!(
            c.oci.sysctl,
            [("net.ipv4.ping_group_range".into(), "0 0".into())]
        );
        let ns = c.oci.namespaces.unwrap();
        assert_eq!(ns.create, [NsKind::Pid, NsKind::Mount]);
        assert_eq!(ns.join, [(NsKind::Network, PathBuf::from("/run/netns/x"))]);
        assert_eq!(c.oci.hooks.create_runtime[0].args, ["true", "a"]);
        assert_eq!(c.oci.hooks.poststop[0].timeout, Some(3));
        // Hooks inside the container's namespaces are refused, with what is supported.
        v["hooks"] = json!({"createContainer": [{"path": "/bin/true"}]});
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let e = from_bundle(dir.path(), &oci1()).unwrap_err();
        assert!(e.to_string().contains("createContainer"), "{e}");
    }

    #[test]
    fn bundle_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rootfs")).unwrap();
        let c = config();
        oci_spec(&c)
            .unwrap()
            .save(dir.path().join("config.json"))
            .unwrap();
        let back = from_bundle(dir.path(), &oci1()).unwrap();
        assert_eq!(back.args, c.args);
        assert_eq!(back.hostname, "box");
        assert_eq!(back.limits, c.limits);
        assert_eq!(back.network, NetworkChoice::None);
        // The spec carries Docker's default profile as OCI `linux.seccomp`; read back, that
        // section is the bundle's own profile, the same rules, compiled as given.
        let profile = c.security.oci_seccomp_spec().unwrap().unwrap();
        assert_eq!(
            back.security,
            crate::security::SecurityConfig {
                seccomp: crate::security::SeccompChoice::Oci(Box::new(profile)),
                ..c.security.clone()
            }
        );
        assert_eq!(
            back.rootfs,
            Rootfs::Dir {
                path: dir.path().join("rootfs"),
                readonly: true
            }
        );
    }

    #[test]
    fn unsupported_bundles_are_refused() {
        let mut c = config();
        c.rootfs = Rootfs::Ext4Image {
            file: "/x.img".into(),
            readonly: false,
        };
        assert!(oci_spec(&c).is_err());
        let dir = tempfile::tempdir().unwrap();
        let mut v = serde_json::to_value(oci_spec(&config()).unwrap()).unwrap();
        v["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/data", "type": "tmpfs", "source": "tmpfs",
                   "options": ["tmpcopyup"]}),
        );
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let e = from_bundle(dir.path(), &"x1".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("/data"), "{e}");
        v["mounts"].as_array_mut().unwrap().pop();
        v["linux"]["namespaces"] = json!([{"type": "pid", "path": "/proc/1/ns/pid"}]);
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let e = from_bundle(dir.path(), &"x1".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("by path"), "{e}");
    }

    /// Every field of `linux.resources` is applied or refused: none is dropped.
    #[test]
    fn resources_are_applied_or_refused() {
        let dir = tempfile::tempdir().unwrap();
        let id: ContainerId = "x2".parse().unwrap();
        let base = serde_json::to_value(oci_spec(&config()).unwrap()).unwrap();
        let with = |path: &str, value: Value| {
            let mut v = base.clone();
            *v.pointer_mut(path).unwrap() = value;
            std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
            from_bundle(dir.path(), &id)
        };
        // What Docker writes for `--cpu-shares 512 --memory-reservation 64m`, and the
        // defaults it writes along (0 and false ask for nothing).
        let resources = json!({
            "cpu": {"shares": 512, "realtimeRuntime": 0, "realtimePeriod": 0},
            "memory": {"reservation": 64 << 20, "disableOOMKiller": false},
            "blockIO": {"weight": 0},
            "hugepageLimits": [{"pageSize": "1GB", "limit": 1 << 30}],
            "unified": {"memory.high": "max", "pids.max": "10"}
        });
        let c = with("/linux/resources", resources).unwrap();
        assert_eq!(c.limits.cpu_weight, Some(CpuWeight::Shares(512)));
        assert_eq!(c.limits.memory_reservation, Some(Bytes::mib(64)));
        assert_eq!(
            c.limits.hugetlb,
            [HugetlbLimit {
                page_size: "1GB".parse().unwrap(),
                limit: Bytes::gib(1),
            }]
        );
        assert_eq!(c.limits.unified.len(), 2);
        // 0 shares and a 0 reservation are "unset".
        let c = with(
            "/linux/resources",
            json!({"cpu": {"shares": 0}, "memory": {"reservation": 0}}),
        )
        .unwrap();
        assert!(c.limits.is_empty(), "{:?}", c.limits);

        let refused = [
            (
                json!({"memory": {"swappiness": 60}}),
                "memory.swappiness = 60",
            ),
            (
                json!({"memory": {"kernel": 1 << 20}}),
                "memory.kernel = 1048576",
            ),
            (
                json!({"memory": {"kernelTCP": 1 << 20}}),
                "memory.kernelTCP",
            ),
            (
                json!({"memory": {"disableOOMKiller": true}}),
                "memory.disableOOMKiller = true",
            ),
            (
                json!({"cpu": {"realtimeRuntime": 950}}),
                "cpu.realtimeRuntime = 950",
            ),
            (
                json!({"cpu": {"realtimePeriod": 1000}}),
                "cpu.realtimePeriod",
            ),
            (json!({"cpu": {"idle": 1}}), "cpu.idle = 1"),
            (json!({"cpu": {"burst": 1000}}), "cpu.burst = 1000"),
            (json!({"blockIO": {"weight": 500}}), "blockIO.weight = 500"),
            (
                json!({"blockIO": {"leafWeight": 500}}),
                "blockIO.leafWeight",
            ),
            (
                json!({"blockIO": {"weightDevice": [{"major": 8, "minor": 0, "weight": 10}]}}),
                "blockIO.weightDevice = 1 devices",
            ),
            (json!({"network": {"classID": 42}}), "network.classID = 42"),
            (
                json!({"network": {"priorities": [{"name": "eth0", "priority": 5}]}}),
                "network.priorities",
            ),
            (
                json!({"rdma": {"mlx5_1": {"hcaHandles": 3}}}),
                "rdma = 1 devices",
            ),
        ];
        for (resources, named) in refused {
            let e = with("/linux/resources", resources.clone()).unwrap_err();
            let text = e.to_string();
            assert!(
                text.contains(named) && text.contains("does not apply") && text.contains("remove"),
                "{resources}: {text}"
            );
        }
        for (page_size, problem) in [("2M", "huge page size"), ("2MB", "negative limit")] {
            let e = with(
                "/linux/resources",
                json!({"hugepageLimits": [{"pageSize": page_size, "limit": -1}]}),
            )
            .unwrap_err();
            assert!(e.to_string().contains(problem), "{e}");
        }
    }
}
