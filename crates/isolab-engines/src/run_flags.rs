//! The flags of `docker run` and `podman run`, which share a command line: the
//! container's name, cgroup parent, network, workdir and environment
//! ([`common_run_flags`]) and its limits ([`limit_flags`]); and
//! [`docker_limit_flags`], the same limits for a Docker this crate does not drive
//! itself (the one in a `vm+docker` guest).

use std::path::Path;

use isolab_cgroups::{Bytes, Limits, Version};

use crate::tool::argv;
use crate::{EngineError, NetworkMode, RunRequest};

/// The `docker run` flags that apply `limits` on a cgroup `version` host: exact CFS period
/// and quota, cpuset, memory (and swap), pids, and io throttles on the devices named under
/// `sys`. For a Docker this crate does not drive itself, e.g. the one in a `vm+docker` guest.
pub fn docker_limit_flags(
    limits: &Limits,
    version: Version,
    sys: &Path,
) -> Result<Vec<String>, EngineError> {
    limit_flags("docker", limits, version, sys)
}

/// Flags shared by `docker run` and `podman run` for `limits`: exact CFS period and
/// quota, cpuset, memory (+swap, translated for `version`), pids and io throttles.
pub(crate) fn limit_flags(
    engine: &'static str,
    limits: &Limits,
    version: Version,
    sys: &Path,
) -> Result<Vec<String>, EngineError> {
    let mut f = Vec::new();
    if let Some(q) = limits.cpu {
        f.push("--cpu-period".into());
        f.push(q.period.as_micros().to_string());
        f.push("--cpu-quota".into());
        f.push(q.quota.as_micros().to_string());
    }
    if let Some(set) = &limits.cpuset {
        f.push("--cpuset-cpus".into());
        f.push(set.to_string());
    }
    if let Some(set) = &limits.mems {
        f.push("--cpuset-mems".into());
        f.push(set.to_string());
    }
    match (limits.memory_max, limits.memory_swap_max) {
        (None, None) => {}
        (None, Some(_)) => {
            return Err(EngineError::Unsupported {
                engine,
                detail: "a swap limit without a memory limit cannot be expressed with \
                         --memory-swap; give the shape a memory limit too"
                    .into(),
            })
        }
        (Some(Bytes(mem)), swap) => {
            f.push("--memory".into());
            f.push(mem.to_string());
            f.push("--memory-swap".into());
            f.push(match (swap, version) {
                (None, _) => "-1".into(),
                (Some(Bytes(total)), Version::V1) => {
                    if total < mem {
                        return Err(EngineError::Unsupported {
                            engine,
                            detail: format!(
                                "memory+swap limit {total} is below the memory limit {mem} \
                                 (on cgroup v1 it is the limit of memory plus swap)"
                            ),
                        });
                    }
                    total.to_string()
                }
                (Some(Bytes(swap)), Version::V2) => mem.saturating_add(swap).to_string(),
            });
        }
    }
    if let Some(p) = limits.pids_max {
        f.push("--pids-limit".into());
        f.push(p.to_string());
    }
    for t in &limits.io {
        let dev = device_path(engine, sys, &t.device.to_string())?;
        for (flag, value) in [
            ("--device-read-bps", t.read_bps),
            ("--device-write-bps", t.write_bps),
            ("--device-read-iops", t.read_iops),
            ("--device-write-iops", t.write_iops),
        ] {
            if let Some(v) = value {
                f.push(flag.into());
                f.push(format!("{dev}:{v}"));
            }
        }
    }
    Ok(f)
}

/// `/dev/<DEVNAME>` of the block device `major:minor`, from
/// `<sys>/dev/block/<major:minor>/uevent`.
pub(crate) fn device_path(
    engine: &'static str,
    sys: &Path,
    number: &str,
) -> Result<String, EngineError> {
    let uevent = sys.join("dev/block").join(number).join("uevent");
    let text = std::fs::read_to_string(&uevent).map_err(|source| EngineError::Io {
        engine,
        action: "read the block device's name from",
        path: uevent.clone(),
        source,
    })?;
    text.lines()
        .find_map(|l| l.strip_prefix("DEVNAME="))
        .map(|name| format!("/dev/{}", name.trim()))
        .ok_or_else(|| EngineError::Unexpected {
            engine,
            command: format!("read {}", uevent.display()),
            detail: "no DEVNAME line: is it a block device?".into(),
        })
}

/// The arguments of `run` that both engines share: name, cgroup parent, network,
/// workdir, environment.
pub(crate) fn common_run_flags(request: &RunRequest) -> Vec<String> {
    let wd = request.workdir.display().to_string();
    let mut f = argv([
        "--name".to_string(),
        request.id.to_string(),
        "--cgroup-parent".into(),
        Path::new("/")
            .join(&request.cgroup_parent)
            .display()
            .to_string(),
        "--network".into(),
        match request.network {
            NetworkMode::None => "none",
            NetworkMode::Host => "host",
            NetworkMode::Bridge => "bridge",
        }
        .into(),
        "-v".into(),
        format!("{wd}:{wd}"),
        "-w".into(),
        wd,
    ]);
    for e in &request.env {
        f.push("-e".into());
        f.push(e.clone());
    }
    f
}
