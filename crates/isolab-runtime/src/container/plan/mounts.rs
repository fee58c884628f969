//! The mounts of the container's plan below its root: the standard layout (/proc, /sys
//! and the cgroup hierarchies, /dev with its nodes, /dev/pts, /dev/shm, /dev/mqueue),
//! bind mounts, a bundle's other mounts and device nodes, with the destinations
//! resolved inside the image.

use std::ffi::CString;
use std::path::{Path, PathBuf};

use crate::config::{ContainerConfig, MountRef, NetworkChoice, NsKind, Rootfs, Standard};
use crate::error::RuntimeError;

use super::{cpath, cstring, Builder, Layout, Op, DEVICES};

/// The mounts below the root in their order (the standard layout, binds, a bundle's
/// mounts), then the device nodes of a bundle.
pub(super) fn mount_all(
    b: &mut Builder,
    config: &ContainerConfig,
    layout: &Layout,
    writable_root: bool,
) -> Result<(), RuntimeError> {
    let root = &layout.root;
    for dir in ["proc", "sys", "dev"] {
        b.mkdir(&root.join(dir), 0o755)?;
    }
    let order = if config.oci.order.is_empty() {
        default_order(config)
    } else {
        config.oci.order.clone()
    };
    for r in order {
        match r {
            MountRef::Standard(which) => standard_mount(b, config, root, which)?,
            MountRef::Bind(i) => bind_mount(b, config, layout, i, writable_root)?,
            MountRef::Oci(i) => oci_mount(b, config, root, i, writable_root)?,
        }
    }
    for d in &config.oci.devices {
        let (path, mut components) = components_under(root, &d.path)?;
        // The directories above the node, made as a mount destination's are (a
        // symbolic link on the way is refused, so the node stays in the root).
        components.pop();
        if !components.is_empty() {
            b.push(
                Op::BindTarget {
                    components,
                    dir: true,
                    create: true,
                    bind: usize::MAX,
                },
                format!("create the directories of device {}", d.path.display()),
            );
        }
        b.push(
            Op::Node {
                path: cpath("device", &path)?,
                mode: d.kind | d.mode,
                dev: libc::makedev(d.major, d.minor),
                uid: d.uid,
                gid: d.gid,
            },
            format!(
                "create device {} ({}:{}, mode {:o}, owner {}:{})",
                d.path.display(),
                d.major,
                d.minor,
                d.mode,
                d.uid,
                d.gid
            ),
        );
    }
    Ok(())
}

/// isolab's own order: /proc, /sys (and the cgroup hierarchies), /dev with its
/// devices, /dev/pts, /dev/shm, /dev/mqueue, then the bind mounts and a bundle's
/// other mounts in their order.
fn default_order(config: &ContainerConfig) -> Vec<MountRef> {
    let mut order = vec![
        MountRef::Standard(Standard::Proc),
        MountRef::Standard(Standard::Sys),
    ];
    if config.oci.cgroup_mount {
        order.push(MountRef::Standard(Standard::Cgroup));
    }
    order.extend(
        [
            Standard::Dev,
            Standard::DevPts,
            Standard::Shm,
            Standard::Mqueue,
        ]
        .map(MountRef::Standard),
    );
    order.extend((0..config.binds.len()).map(MountRef::Bind));
    order.extend((0..config.oci.mounts.len()).map(MountRef::Oci));
    order
}

/// One mount of the standard layout; /dev comes with its device nodes and links.
fn standard_mount(
    b: &mut Builder,
    config: &ContainerConfig,
    root: &Path,
    which: Standard,
) -> Result<(), RuntimeError> {
    let nosuid_nodev_noexec = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let dev = root.join("dev");
    match which {
        Standard::Proc => {
            b.mkdir(&root.join("proc"), 0o755)?;
            b.mount(
                Some("proc"),
                &root.join("proc"),
                Some("proc"),
                nosuid_nodev_noexec,
                None,
            )
        }
        Standard::Sys => {
            let sys = root.join("sys");
            b.mkdir(&sys, 0o755)?;
            if config.user_namespace && config.network == NetworkChoice::Host {
                // sysfs needs a network namespace owned by the user namespace: bind the
                // host's instead, read-only.
                b.mount(Some("/sys"), &sys, None, libc::MS_BIND | libc::MS_REC, None)?;
                b.push(
                    Op::RemountReadOnly {
                        path: cpath("sys", &sys)?,
                    },
                    format!("remount {} read-only", sys.display()),
                );
                Ok(())
            } else {
                b.mount(
                    Some("sysfs"),
                    &sys,
                    Some("sysfs"),
                    nosuid_nodev_noexec | libc::MS_RDONLY,
                    None,
                )
            }
        }
        Standard::Cgroup => {
            // Without a cgroup namespace of its own (Podman's default on cgroup v1),
            // the container sees its own cgroup at each hierarchy's place, as with runc
            // and crun, not the host's whole tree.
            let host_view = match &config.oci.namespaces {
                Some(ns)
                    if !ns.creates(NsKind::Cgroup)
                        && !ns.join.iter().any(|(kind, _)| *kind == NsKind::Cgroup) =>
                {
                    Some(config.cgroup_rel())
                }
                _ => None,
            };
            cgroup_mount(b, &root.join("sys/fs/cgroup"), host_view.as_deref())
        }
        Standard::Dev => {
            b.mkdir(&dev, 0o755)?;
            b.mount(
                Some("tmpfs"),
                &dev,
                Some("tmpfs"),
                libc::MS_NOSUID | libc::MS_STRICTATIME,
                Some("mode=755,size=65536k"),
            )?;
            for (name, major, minor) in DEVICES {
                let path = dev.join(name);
                b.push(
                    Op::Device {
                        path: cpath("device", &path)?,
                        host: cstring("device", format!("/dev/{name}").as_bytes())?,
                        mode: libc::S_IFCHR | 0o666,
                        dev: libc::makedev(major, minor),
                    },
                    format!("create device {} ({major}:{minor})", path.display()),
                );
            }
            b.symlink("pts/ptmx", &dev.join("ptmx"))?;
            for (link, target) in [
                ("fd", "/proc/self/fd"),
                ("stdin", "/proc/self/fd/0"),
                ("stdout", "/proc/self/fd/1"),
                ("stderr", "/proc/self/fd/2"),
                ("core", "/proc/kcore"),
            ] {
                b.symlink(target, &dev.join(link))?;
            }
            Ok(())
        }
        Standard::DevPts => {
            b.mkdir(&dev.join("pts"), 0o755)?;
            // Group tty (5) only where the user namespace maps it (an unprivileged
            // user's maps gid 0 alone): the kernel refuses `gid=5` otherwise, as
            // runc's rootless mode knows, and the terminals belong to root's group.
            let options = if config.has_gid(5) {
                "newinstance,ptmxmode=0666,mode=0620,gid=5"
            } else {
                "newinstance,ptmxmode=0666,mode=0620"
            };
            b.mount(
                Some("devpts"),
                &dev.join("pts"),
                Some("devpts"),
                libc::MS_NOSUID | libc::MS_NOEXEC,
                Some(options),
            )
        }
        Standard::Shm => {
            b.mkdir(&dev.join("shm"), 0o1777)?;
            b.mount(
                Some("shm"),
                &dev.join("shm"),
                Some("tmpfs"),
                nosuid_nodev_noexec,
                Some("mode=1777,size=65536k"),
            )
        }
        Standard::Mqueue => {
            b.mkdir(&dev.join("mqueue"), 0o755)?;
            b.mount(
                Some("mqueue"),
                &dev.join("mqueue"),
                Some("mqueue"),
                nosuid_nodev_noexec,
                None,
            )
        }
    }
}

/// Bind mount `i` of `config.binds`: destination (created when missing and
/// `create`), recursive bind, read-only remount.
fn bind_mount(
    b: &mut Builder,
    config: &ContainerConfig,
    layout: &Layout,
    i: usize,
    create: bool,
) -> Result<(), RuntimeError> {
    {
        let Some(bind) = config.binds.get(i) else {
            return Ok(());
        };
        bind.validate()?;
        let source = layout
            .binds
            .get(i)
            .ok_or_else(|| RuntimeError::BindSource {
                path: bind.source.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            })?;
        let destination = resolve_in_image(config, &bind.destination);
        let (target, components) = components_under(&layout.root, &destination)?;
        b.push(
            Op::BindTarget {
                components,
                dir: source.dir,
                create,
                bind: i,
            },
            format!(
                "create the bind mount destination {} ({})",
                bind.destination.display(),
                if source.dir { "directory" } else { "file" }
            ),
        );
        let src = source
            .path
            .to_str()
            .ok_or_else(|| RuntimeError::InvalidConfig {
                what: "bind mount source",
                value: source.path.display().to_string(),
                expected: "a UTF-8 path",
            })?;
        b.mount(Some(src), &target, None, libc::MS_BIND | libc::MS_REC, None)?;
        if bind.readonly {
            b.push(
                Op::RemountReadOnly {
                    path: cpath("bind mount destination", &target)?,
                },
                format!(
                    "remount the bind mount on {} read-only",
                    bind.destination.display()
                ),
            );
        }
    }
    Ok(())
}

/// Flags and data of mount(8) options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct MountOptions {
    /// `MS_*` flags to set.
    pub flags: libc::c_ulong,
    /// Propagation flags (`MS_PRIVATE`, `MS_SHARED`, … with `MS_REC` for the r-forms),
    /// each applied by its own mount call.
    pub propagation: Vec<libc::c_ulong>,
    /// File-system specific options, comma-separated.
    pub data: String,
    /// `rbind` (a `bind` is not recursive).
    pub recursive: bool,
}

/// The `mount(2)` flags of a propagation name (`private`, `shared`, `slave`,
/// `unbindable`, each also with an `r` for recursive), or `None` for any other name.
pub(crate) fn propagation_flags(name: &str) -> Option<libc::c_ulong> {
    let (base, rec) = match name.strip_prefix('r') {
        Some(base) => (base, libc::MS_REC),
        None => (name, 0),
    };
    let flag = match base {
        "private" => libc::MS_PRIVATE,
        "shared" => libc::MS_SHARED,
        "slave" => libc::MS_SLAVE,
        "unbindable" => libc::MS_UNBINDABLE,
        _ => return None,
    };
    Some(flag | rec)
}

/// Parses mount(8) options as runc and crun do: known flag names set or clear `MS_*`
/// flags, propagation names become propagation changes, anything else is data.
pub(crate) fn mount_flags(options: &[String]) -> Result<MountOptions, String> {
    let mut out = MountOptions::default();
    let mut data = Vec::new();
    for o in options {
        let set = |flag: libc::c_ulong| (flag, true);
        let clear = |flag: libc::c_ulong| (flag, false);
        let (flag, on) = match o.as_str() {
            "defaults" | "rw" => clear(libc::MS_RDONLY),
            "ro" => set(libc::MS_RDONLY),
            "nosuid" => set(libc::MS_NOSUID),
            "suid" => clear(libc::MS_NOSUID),
            "nodev" => set(libc::MS_NODEV),
            "dev" => clear(libc::MS_NODEV),
            "noexec" => set(libc::MS_NOEXEC),
            "exec" => clear(libc::MS_NOEXEC),
            "sync" => set(libc::MS_SYNCHRONOUS),
            "async" => clear(libc::MS_SYNCHRONOUS),
            "dirsync" => set(libc::MS_DIRSYNC),
            "mand" => set(libc::MS_MANDLOCK),
            "nomand" => clear(libc::MS_MANDLOCK),
            "atime" => clear(libc::MS_NOATIME),
            "noatime" => set(libc::MS_NOATIME),
            "diratime" => clear(libc::MS_NODIRATIME),
            "nodiratime" => set(libc::MS_NODIRATIME),
            "relatime" => set(libc::MS_RELATIME),
            "norelatime" => clear(libc::MS_RELATIME),
            "strictatime" => set(libc::MS_STRICTATIME),
            "nostrictatime" => clear(libc::MS_STRICTATIME),
            "bind" => set(libc::MS_BIND),
            "rbind" => {
                out.recursive = true;
                set(libc::MS_BIND)
            }
            name if propagation_flags(name).is_some() => {
                out.propagation.extend(propagation_flags(name));
                continue;
            }
            "tmpcopyup" | "idmap" | "ridmap" | "rro" | "rrw" => {
                return Err(format!(
                    "option {o:?} is not supported; remove it from the mount's options"
                ))
            }
            other => {
                if other.contains('\0') {
                    return Err(format!("option {other:?} contains a NUL byte"));
                }
                data.push(other.to_owned());
                continue;
            }
        };
        if on {
            out.flags |= flag;
        } else {
            out.flags &= !flag;
        }
    }
    out.data = data.join(",");
    Ok(out)
}

/// `destination` with the image's symbolic links on the way resolved inside the
/// image, as runc does (`/sbin/docker-init` with `/sbin -> usr/sbin` becomes
/// `/usr/sbin/docker-init`): `..` and absolute targets never leave the image's
/// root. Read from the directory the root comes from (an overlay's upper, then
/// lower); an ext4 image is not mounted yet, so its paths stay as given (and a link
/// on the way is refused when the container mounts).
pub(crate) fn resolve_in_image(config: &ContainerConfig, destination: &Path) -> PathBuf {
    let layers: Vec<&Path> = match &config.rootfs {
        Rootfs::Dir { path, .. } => vec![path],
        Rootfs::Overlay { lower, upper } => upper
            .iter()
            .map(PathBuf::as_path)
            .chain([lower.as_path()])
            .collect(),
        Rootfs::Ext4Image { .. } => return destination.to_path_buf(),
    };
    let lstat = |rel: &Path| {
        layers.iter().find_map(|layer| {
            std::fs::symlink_metadata(layer.join(rel))
                .ok()
                .map(|m| (layer.join(rel), m))
        })
    };
    let mut done = PathBuf::new();
    // Components still to walk, the next one last.
    let mut todo: Vec<std::ffi::OsString> = destination
        .iter()
        .filter(|c| *c != "/")
        .map(|c| c.to_owned())
        .collect();
    todo.reverse();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        match part.to_str() {
            Some(".") | Some("") => continue,
            Some("..") => {
                done.pop();
                continue;
            }
            _ => {}
        }
        let candidate = done.join(&part);
        match lstat(&candidate) {
            Some((host, meta)) if meta.file_type().is_symlink() && links < 40 => {
                links += 1;
                let Ok(target) = std::fs::read_link(&host) else {
                    done = candidate;
                    continue;
                };
                if target.is_absolute() {
                    done = PathBuf::new();
                }
                let mut parts: Vec<_> = target.iter().filter(|c| *c != "/").collect();
                parts.reverse();
                todo.extend(parts.into_iter().map(|c| c.to_owned()));
            }
            _ => done = candidate,
        }
    }
    Path::new("/").join(done)
}

/// The levels of `destination` under `root`, as host-side C strings, outermost first.
fn components_under(
    root: &Path,
    destination: &Path,
) -> Result<(PathBuf, Vec<CString>), RuntimeError> {
    let mut target = root.to_path_buf();
    let mut components = Vec::new();
    for part in destination.iter().skip(1) {
        target.push(part);
        components.push(cpath("mount destination", &target)?);
    }
    Ok((target, components))
}

/// Mount `i` of a bundle's other mounts: the destination made (a file for a bind of
/// a file), the mount, a remount for the flags of a bind, the propagation changes.
fn oci_mount(
    b: &mut Builder,
    config: &ContainerConfig,
    root: &Path,
    i: usize,
    create: bool,
) -> Result<(), RuntimeError> {
    if let Some(m) = config.oci.mounts.get(i) {
        let options = mount_flags(&m.options).map_err(|problem| RuntimeError::Bundle {
            path: m.destination.clone(),
            problem: format!("mount options: {problem}"),
        })?;
        let destination = resolve_in_image(config, &m.destination);
        let (target, components) = components_under(root, &destination)?;
        let bind = m.is_bind();
        let dir = if bind {
            std::fs::metadata(&m.source)
                .map_err(|source| RuntimeError::BindSource {
                    path: m.source.clone(),
                    source,
                })?
                .is_dir()
        } else {
            true
        };
        b.push(
            Op::BindTarget {
                components,
                dir,
                create,
                bind: usize::MAX,
            },
            format!(
                "create the mount destination {} ({})",
                m.destination.display(),
                if dir { "directory" } else { "file" }
            ),
        );
        let source = m
            .source
            .to_str()
            .ok_or_else(|| RuntimeError::InvalidConfig {
                what: "mount source",
                value: m.source.display().to_string(),
                expected: "a UTF-8 path",
            })?;
        let data = (!options.data.is_empty()).then_some(options.data.as_str());
        if bind {
            let rec = if options.recursive { libc::MS_REC } else { 0 };
            b.mount(Some(source), &target, None, libc::MS_BIND | rec, None)?;
            let extra = options.flags & !libc::MS_BIND;
            if extra != 0 {
                b.mount(
                    None,
                    &target,
                    None,
                    libc::MS_BIND | libc::MS_REMOUNT | extra,
                    None,
                )?;
            }
        } else {
            let source = if source.is_empty() {
                m.fstype.as_str()
            } else {
                source
            };
            b.mount(Some(source), &target, Some(&m.fstype), options.flags, data)?;
        }
        for &propagation in &options.propagation {
            b.mount(None, &target, None, propagation, None)?;
        }
    }
    Ok(())
}

/// The cgroup hierarchies, read-only, at `dir` (the root's /sys/fs/cgroup): a tmpfs
/// with a mount of each v1 hierarchy of this host (options from /proc/self/mountinfo;
/// the cgroup namespace roots each at the container's cgroup), symlinks for
/// co-mounted controllers, or a single cgroup2 mount on a pure v2 host. With
/// `host_view` (the container's cgroup, relative to the mounts; no cgroup namespace),
/// each hierarchy that holds that cgroup is a read-only bind of it instead.
fn cgroup_mount(b: &mut Builder, dir: &Path, host_view: Option<&Path>) -> Result<(), RuntimeError> {
    let flags = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
    let mountinfo =
        isolab_cgroups::read_pseudo_file(Path::new("/proc/self/mountinfo")).map_err(|source| {
            RuntimeError::Host {
                op: "read",
                path: "/proc/self/mountinfo".into(),
                source,
            }
        })?;
    let mounts = cgroup_mounts(&mountinfo);
    if let [(name, fstype, _)] = mounts.as_slice() {
        if name.is_empty() && fstype == "cgroup2" {
            return b.mount(
                Some("cgroup2"),
                dir,
                Some("cgroup2"),
                flags | libc::MS_RDONLY,
                None,
            );
        }
    }
    b.mount(Some("tmpfs"), dir, Some("tmpfs"), flags, Some("mode=755"))?;
    for (name, fstype, options) in &mounts {
        if name.is_empty() {
            continue;
        }
        let target = dir.join(name);
        b.mkdir(&target, 0o555)?;
        let own = host_view
            .map(|rel| Path::new("/sys/fs/cgroup").join(name).join(rel))
            .filter(|own| own.is_dir());
        if let Some(own) = own {
            b.mount(
                Some(&own.to_string_lossy()),
                &target,
                None,
                libc::MS_BIND,
                None,
            )?;
            b.push(
                Op::RemountReadOnly {
                    path: cpath("cgroup mount", &target)?,
                },
                format!("remount {} read-only", target.display()),
            );
        } else {
            let data = (!options.is_empty()).then_some(options.as_str());
            b.mount(
                Some(fstype.as_str()),
                &target,
                Some(fstype.as_str()),
                flags | libc::MS_RDONLY,
                data,
            )?;
        }
        // cpu -> cpu,cpuacct, as on the host.
        if name.contains(',') {
            for part in name.split(',') {
                b.symlink(name, &dir.join(part))?;
            }
        }
    }
    b.push(
        Op::RemountReadOnly {
            path: cpath("cgroup mount", dir)?,
        },
        format!("remount {} read-only", dir.display()),
    );
    Ok(())
}

/// The cgroup mounts of a mountinfo text directly under /sys/fs/cgroup: (name below
/// it, empty for /sys/fs/cgroup itself; type; super options without rw/ro).
fn cgroup_mounts(mountinfo: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for line in mountinfo.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let point = left.split(' ').nth(4).unwrap_or("");
        let mut r = right.split(' ');
        let fstype = r.next().unwrap_or("");
        let super_options = r.nth(1).unwrap_or("");
        if fstype != "cgroup" && fstype != "cgroup2" {
            continue;
        }
        let name = match point.strip_prefix("/sys/fs/cgroup") {
            Some("") => String::new(),
            Some(rest) if rest.starts_with('/') && !rest[1..].contains('/') => rest[1..].to_owned(),
            _ => continue,
        };
        let options: Vec<&str> = super_options
            .split(',')
            .filter(|o| *o != "rw" && *o != "ro")
            .collect();
        out.push((name, fstype.to_owned(), options.join(",")));
    }
    out
}
