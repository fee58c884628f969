//! The bundle's `config.json`: isolab-runtime's OCI spec for a request, with what
//! runc and crun need besides (the root's propagation, the loopback hook), and the
//! spec's `resources` from the request's limits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{Limits, Version};
use serde_json::{json, Map, Value};

use crate::request::{base_env, parent_rel, path_str};
use crate::{EngineError, NetworkMode, RunRequest};

use super::{OciEngine, INIT_PATH};

impl OciEngine {
    /// The OCI spec of `request` (see the module docs), with the root's propagation
    /// in the runtime's words ([`OciKind::root_propagation`]) and, with `loopback` (the
    /// path of `ip`), the hook that brings `lo` up.
    pub(super) fn spec(
        &self,
        request: &RunRequest,
        version: Version,
        init: Option<&Path>,
        loopback: Option<&Path>,
    ) -> Result<Value, EngineError> {
        let mut spec = oci_config(self.engine(), request, version, init)?;
        spec["linux"]["rootfsPropagation"] = json!(self.kind.root_propagation);
        if let Some(ip) = loopback {
            // Run in the container's namespaces, before pivot_root: the host's `ip`.
            spec["hooks"] = json!({
                "createContainer": [
                    {"path": path_str(ip), "args": ["ip", "link", "set", "lo", "up"]}
                ]
            });
        }
        Ok(spec)
    }
}

/// The `config.json` of `request`: isolab-runtime's spec for the same configuration
/// (see the module docs), with root `rootfs`, hostname = id, `cgroupsPath`
/// `/<cgroup_parent>/<id>`, resources for cgroup `version` and, with `init`, the init
/// bind-mounted read-only at [`INIT_PATH`] as PID 1.
pub(super) fn oci_config(
    engine: &'static str,
    request: &RunRequest,
    version: Version,
    init: Option<&Path>,
) -> Result<Value, EngineError> {
    use isolab_runtime::{BindMount, ContainerConfig, NetworkChoice, Rootfs};
    let invalid = |detail: String| EngineError::Unexpected {
        engine,
        command: "isolab_runtime::oci_spec".into(),
        detail,
    };
    let mut args = Vec::new();
    if init.is_some() {
        args.extend([INIT_PATH.to_owned(), "--".to_owned()]);
    }
    args.extend(request.argv.iter().cloned());
    let mut config = ContainerConfig::new(
        Rootfs::Dir {
            path: PathBuf::from("rootfs"),
            readonly: false,
        },
        args,
    );
    config.id = request.id.clone();
    config.hostname = request.id.to_string();
    config.env = base_env(request);
    config.cwd = request.workdir.clone();
    config.network = match request.network {
        NetworkMode::Host => NetworkChoice::Host,
        _ => NetworkChoice::None,
    };
    config.cgroup_parent = parent_rel(&request.cgroup_parent);
    config.binds = vec![BindMount {
        source: request.workdir.clone(),
        destination: request.workdir.clone(),
        readonly: false,
    }];
    if let Some(init) = init {
        config.binds.push(BindMount {
            source: init.to_path_buf(),
            destination: PathBuf::from(INIT_PATH),
            readonly: true,
        });
    }
    let spec = isolab_runtime::oci_spec(&config).map_err(|e| invalid(e.to_string()))?;
    let mut value = serde_json::to_value(&spec).map_err(|e| invalid(e.to_string()))?;
    let linux = value
        .get_mut("linux")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| invalid("the spec has no `linux` section".into()))?;
    linux.insert(
        "cgroupsPath".into(),
        json!(Path::new("/")
            .join(parent_rel(&request.cgroup_parent))
            .join(&request.id)),
    );
    let mut resources = match linux.remove("resources") {
        Some(Value::Object(r)) => r,
        _ => Map::new(),
    };
    for key in ["cpu", "memory", "pids", "blockIO"] {
        resources.remove(key);
    }
    resources.extend(oci_resources(engine, &request.limits, version)?);
    linux.insert("resources".into(), Value::Object(resources));
    Ok(value)
}

/// `linux.resources` (without devices) for `limits` on cgroup `version`.
pub(super) fn oci_resources(
    engine: &'static str,
    limits: &Limits,
    version: Version,
) -> Result<Map<String, Value>, EngineError> {
    let mut r = Map::new();
    let mut cpu = Map::new();
    if let Some(q) = limits.cpu {
        cpu.insert("quota".into(), json!(micros(q.quota)));
        cpu.insert("period".into(), json!(micros(q.period)));
    }
    if let Some(set) = &limits.cpuset {
        cpu.insert("cpus".into(), json!(set.to_string()));
    }
    if let Some(set) = &limits.mems {
        cpu.insert("mems".into(), json!(set.to_string()));
    }
    if !cpu.is_empty() {
        r.insert("cpu".into(), Value::Object(cpu));
    }
    let mut memory = Map::new();
    if let Some(m) = limits.memory_max {
        memory.insert("limit".into(), json!(m.0));
    }
    if let Some(s) = limits.memory_swap_max {
        let Some(m) = limits.memory_max else {
            return Err(EngineError::Unsupported {
                engine,
                detail: "a swap limit without a memory limit: OCI's `memory.swap` is memory + swap and needs `memory.limit`; give a memory limit too".into(),
            });
        };
        // OCI (and runc/crun) read `swap` as memory + swap, like v1's memsw; isolab's
        // v2 value is swap alone.
        let total = match version {
            Version::V1 => s.0,
            Version::V2 => m.0.saturating_add(s.0),
        };
        memory.insert("swap".into(), json!(total));
    }
    if !memory.is_empty() {
        r.insert("memory".into(), Value::Object(memory));
    }
    if let Some(p) = limits.pids_max {
        r.insert("pids".into(), json!({ "limit": p }));
    }
    let mut blkio = Map::new();
    type Get = fn(&isolab_cgroups::IoThrottle) -> Option<u64>;
    let directions: [(&str, Get); 4] = [
        ("throttleReadBpsDevice", |t| t.read_bps),
        ("throttleWriteBpsDevice", |t| t.write_bps),
        ("throttleReadIOPSDevice", |t| t.read_iops),
        ("throttleWriteIOPSDevice", |t| t.write_iops),
    ];
    for (key, get) in directions {
        let list: Vec<Value> = limits
            .io
            .iter()
            .filter_map(|t| {
                get(t).map(
                    |rate| json!({"major": t.device.major, "minor": t.device.minor, "rate": rate}),
                )
            })
            .collect();
        if !list.is_empty() {
            blkio.insert(key.into(), Value::Array(list));
        }
    }
    if !blkio.is_empty() {
        r.insert("blockIO".into(), Value::Object(blkio));
    }
    Ok(r)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}
