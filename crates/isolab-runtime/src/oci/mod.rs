//! OCI runtime spec (`config.json`): [`oci_spec()`] turns a [`ContainerConfig`] into
//! one that runc and crun run unchanged; [`from_bundle`] reads a bundle back into a
//! [`ContainerConfig`] for [`crate::run`] (in `bundle.rs`, one function per section).

mod bundle;

pub use bundle::{bundle_meta, exec_config, from_bundle, BundleMeta};

use std::path::{Path, PathBuf};

use isolab_cgroups::{CpuWeight, IoThrottle, Limits};
use oci_spec::runtime::Spec;
use serde_json::{json, Value};

use crate::config::{BindMount, ContainerConfig, NetworkChoice, Rootfs, USERNS_BASE, USERNS_SIZE};
use crate::error::RuntimeError;

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
        // What the runtime maps itself: without root, the caller's own ids only.
        let map = |host: u32, size: u32| json!([{"containerID": 0, "hostID": host, "size": size}]);
        if crate::config::rootless() {
            // SAFETY: geteuid and getegid have no preconditions and cannot fail.
            let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
            linux["uidMappings"] = map(uid, 1);
            linux["gidMappings"] = map(gid, 1);
        } else {
            linux["uidMappings"] = map(USERNS_BASE, USERNS_SIZE);
            linux["gidMappings"] = map(USERNS_BASE, USERNS_SIZE);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NsKind;
    use crate::id::ContainerId;
    use crate::security::{DeviceAccess, DeviceKind, DeviceRule};
    use isolab_cgroups::{Bytes, CpuQuota, DeviceNumber, HugetlbLimit};

    fn oci1() -> ContainerId {
        "oci1".parse().unwrap()
    }

    /// Writes `spec` as the bundle's config.json in `dir` and reads the bundle back.
    fn read_bundle(dir: &Path, spec: &Value) -> Result<ContainerConfig, RuntimeError> {
        std::fs::write(dir.join("config.json"), spec.to_string()).unwrap();
        from_bundle(dir, &oci1())
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
        assert_eq!(c.oci.hooks.prestart[0].args, ["true", "a"]);
        assert_eq!(c.oci.hooks.poststop[0].timeout, Some(3));
        // Every kind is read, in its order.
        v["hooks"] = json!({"createContainer": [{"path": "/bin/true"}, {"path": "/bin/echo"}],
                            "startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", ":"]}],
                            "createRuntime": [{"path": "/bin/false"}]});
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let h = from_bundle(dir.path(), &oci1()).unwrap().oci.hooks;
        let paths = |l: &[crate::config::Hook]| -> Vec<PathBuf> {
            l.iter().map(|h| h.path.clone()).collect()
        };
        assert_eq!(
            paths(&h.create_container),
            [PathBuf::from("/bin/true"), "/bin/echo".into()]
        );
        assert_eq!(h.start_container[0].args, ["sh", "-c", ":"]);
        assert_eq!(paths(&h.create_runtime), [PathBuf::from("/bin/false")]);
        assert!(h.runtime_hooks() && h.prestart.is_empty());
        // A timeout must be positive, a path absolute.
        for bad in [
            json!({"poststart": [{"path": "/bin/true", "timeout": 0}]}),
            json!({"startContainer": [{"path": "bin/true"}]}),
        ] {
            v["hooks"] = bad;
            std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
            let e = from_bundle(dir.path(), &oci1()).unwrap_err().to_string();
            assert!(e.contains("timeout 0") || e.contains("absolute"), "{e}");
        }
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
        v["linux"]["namespaces"] =
            json!([{"type": "mount"}, {"type": "user", "path": "/proc/1/ns/user"}]);
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let e = from_bundle(dir.path(), &"x1".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("user namespace by path"), "{e}");
        // A pid and a mount namespace are joined by path; without a mount namespace,
        // what needs one is refused by name.
        v["linux"]["namespaces"] = json!([
            {"type": "pid", "path": "/proc/1/ns/pid"},
            {"type": "mount", "path": "/proc/1/ns/mnt"}
        ]);
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let c = from_bundle(dir.path(), &"x1".parse().unwrap()).unwrap();
        let ns = c.oci.namespaces.as_ref().unwrap();
        assert_eq!(
            ns.pid_to_join(),
            Some(std::path::Path::new("/proc/1/ns/pid"))
        );
        assert_eq!(ns.joined_by_child().count(), 1);
        assert!(ns.own_mount() && !c.in_host_mount_namespace());
        v["linux"]["namespaces"] = json!([{"type": "pid"}]);
        v["linux"]["maskedPaths"] = json!(["/proc/kcore"]);
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let e = from_bundle(dir.path(), &"x1".parse().unwrap()).unwrap_err();
        assert!(e.to_string().contains("linux.maskedPaths"), "{e}");
        assert!(e.to_string().contains("need a mount namespace"), "{e}");
        v["linux"]["maskedPaths"] = json!([]);
        v["linux"]
            .as_object_mut()
            .unwrap()
            .remove("rootfsPropagation");
        v["linux"]["readonlyPaths"] = json!([]);
        v["root"]["readonly"] = json!(false);
        std::fs::write(dir.path().join("config.json"), v.to_string()).unwrap();
        let c = from_bundle(dir.path(), &"x1".parse().unwrap()).unwrap();
        assert!(c.in_host_mount_namespace());
        assert_eq!(
            c.host_mounts_root(),
            Some(dir.path().join("rootfs").as_path())
        );
    }

    /// A mount's source is a path in the bundle only for a bind; `tmpfs` stays the
    /// file system's name. `linux.rootfsPropagation` is read, an unknown one refused.
    #[test]
    fn mount_sources_and_root_propagation_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = serde_json::to_value(oci_spec(&config()).unwrap()).unwrap();
        v["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/tmp/t", "type": "tmpfs", "source": "tmpfs",
                   "options": ["size=1k", "shared"]}),
        );
        v["linux"]["rootfsPropagation"] = json!("unbindable");
        let c = read_bundle(dir.path(), &v).unwrap();
        let tmpfs = c.oci.mounts.iter().find(|m| m.fstype == "tmpfs").unwrap();
        assert_eq!(tmpfs.source, PathBuf::from("tmpfs"));
        assert_eq!(c.oci.root_propagation.as_deref(), Some("unbindable"));
        v["linux"]["rootfsPropagation"] = json!("sideways");
        let e = read_bundle(dir.path(), &v).unwrap_err().to_string();
        assert!(e.contains("rootfsPropagation"), "{e}");
    }

    /// The bundle's uid and gid mappings are kept for a new user namespace; without
    /// one, or with one of the two only, they are refused.
    #[test]
    fn id_mappings_are_read_for_a_user_namespace() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = serde_json::to_value(oci_spec(&config()).unwrap()).unwrap();
        v["linux"]["uidMappings"] = json!([{"containerID": 0, "hostID": 1000, "size": 2000}]);
        v["linux"]["gidMappings"] = json!([{"containerID": 0, "hostID": 1000, "size": 3000}]);
        let e = read_bundle(dir.path(), &v).unwrap_err().to_string();
        assert!(e.contains("user namespace"), "{e}");
        v["linux"]["namespaces"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "user"}));
        let maps = read_bundle(dir.path(), &v).unwrap().oci.id_maps.unwrap();
        assert_eq!(crate::config::IdRange::map_file(&maps.uid), "0 1000 2000\n");
        assert_eq!(crate::config::IdRange::map_file(&maps.gid), "0 1000 3000\n");
        v["linux"]["gidMappings"] = json!([]);
        let e = read_bundle(dir.path(), &v).unwrap_err().to_string();
        assert!(e.contains("both"), "{e}");
    }

    /// `ociVersion` is a version of runtime spec 1; anything else is refused by name.
    #[test]
    fn an_oci_version_that_is_not_1_x_y_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = serde_json::to_value(oci_spec(&config()).unwrap()).unwrap();
        for good in ["1.0.2", "1.3.0", "1.0.2-dev", "1.2.0+build.1"] {
            v["ociVersion"] = json!(good);
            read_bundle(dir.path(), &v).unwrap();
        }
        for bad in ["invalid", "2.0.0", "1.0", "1.x.0", ""] {
            v["ociVersion"] = json!(bad);
            let e = read_bundle(dir.path(), &v).unwrap_err().to_string();
            assert!(e.contains("ociVersion"), "{bad}: {e}");
        }
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

        // What only cgroup v1 has is applied (and refused by name on v2, when the
        // cgroup is made).
        let c = with(
            "/linux/resources",
            json!({"memory": {"swappiness": 10, "kernelTCP": 1 << 20, "disableOOMKiller": true}}),
        )
        .unwrap();
        assert_eq!(c.limits.memory_swappiness, Some(10));
        assert_eq!(c.limits.memory_tcp_max, Some(Bytes::mib(1)));
        assert!(c.limits.oom_kill_disabled);
        let err = with("/linux/resources", json!({"memory": {"swappiness": 101}}))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("memory.swappiness 101 is not in 0..=100"),
            "{err}"
        );

        let refused = [
            (
                json!({"memory": {"kernel": 1 << 20}}),
                "memory.kernel = 1048576",
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
            (
                json!({"cpu": {"period": 50000}}),
                "cpu.period (without a positive cpu.quota) = 50000",
            ),
            (
                json!({"cpu": {"period": 50000, "quota": -1}}),
                "cpu.period (without a positive cpu.quota) = 50000",
            ),
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
