//! LXC: [`Lxc`] runs each request as an application container with `lxc-execute`.
//!
//! # One run
//! Nothing is created with `lxc-create` (which would copy or claim the shared image):
//! [`Engine::run_command`] writes a configuration file per run and returns
//!
//! ```text
//! lxc-execute -n <id> -P /run/isolab/lxc -f /run/isolab/lxc/<id>/config -- <argv…>
//! ```
//!
//! `lxc-execute` runs LXC's own init (`init.lxc`) as PID 1, which starts the workload,
//! forwards the signals the `lxc-execute` monitor receives (SIGTERM stops the
//! workload, checked), reaps zombies and exits with the workload's status, which
//! `lxc-execute` returns; stdout and stderr pass through. That is the same shape as
//! isolab-runtime (its init as PID 1). `lxc-start -F` with `lxc.init.cmd` would make the
//! workload PID 1 (signals without a handler dropped) and does not return its status.
//!
//! The run directory `/run/isolab/lxc/<id>/` holds `config`, `isolab-run.json` (what
//! [`Engine::remove`] undoes) and `scratch/`, a tmpfs with the overlay's upper and work
//! directories (as isolab-runtime's throw-away overlay). The root is LXC's own overlay
//! support, `lxc.rootfs.path = overlay:<image>:<scratch>/upper` (accepted by 5.0.2; LXC
//! mounts it inside the container's mount namespace, so it disappears with the
//! container). The configuration:
//! - `lxc.include` of LXC's `common.conf` (Debian: `/usr/share/lxc/config/common.conf`):
//!   LXC's default capabilities, seccomp policy, device allowlist and automatic mounts,
//!   as every `lxc-create`d container has;
//! - `lxc.uts.name` = the id, a recursive bind of the workdir at the same path
//!   (`lxc.mount.entry`, `create=dir`), `lxc.init.cwd` = the workdir,
//!   `lxc.environment` = `PATH`, `TERM` (isolab-runtime's) and the request's variables;
//! - network `none`: `lxc.net.0.type = empty` with `flags = up` (only then does LXC
//!   bring `lo` up; checked); `host`: `lxc.net.0.type = none`; `bridge`:
//!   [`EngineError::Unsupported`] (LXC's `lxcbr0` only exists while the `lxc-net` service
//!   runs, and this driver does not run a bridge and address allocation of its own; use
//!   docker/podman or the `isolab` platform for a bridged container);
//! - the limits as `lxc.cgroup.*` keys on cgroup v1 (`cpu.cfs_period_us`,
//!   `cpu.cfs_quota_us`, `cpuset.cpus`/`mems`, `memory.limit_in_bytes`,
//!   `memory.memsw.limit_in_bytes`, `pids.max`, `blkio.throttle.*_device`) and
//!   `lxc.cgroup2.*` keys on v2 (`cpu.max`, `cpuset.cpus`/`mems`, `memory.max`,
//!   `memory.swap.max`, `pids.max`, `io.max`): isolab's `memory_swap_max` already has
//!   each version's kernel meaning, so it is written as is.
//!
//! No AppArmor profile is set: this host has no AppArmor, and LXC then applies none (as
//! isolab-runtime). On an AppArmor host LXC applies its generated profile.
//!
//! # Security compared with isolab-runtime
//! LXC's defaults are much looser than isolab-runtime's (Docker's): `common.conf` only
//! drops `mac_admin`, `mac_override`, `sys_time`, `sys_module` and `sys_rawio` (the
//! container keeps e.g. `sys_admin` and `net_admin`; isolab-runtime keeps Docker's 14),
//! its seccomp policy is a denylist of five calls (`kexec_load`, `open_by_handle_at`,
//! `init_module`, `finit_module`, `delete_module`) plus forced-umount rejection (isolab:
//! Docker's allowlist), `no_new_privs` is off (isolab: on), and /proc, /sys and the cgroup
//! file systems are mounted "mixed" instead of masked paths and a read-only /sys. The
//! device allowlist is about the same (LXC adds `/dev/fuse`).
//!
//! # cgroups
//! - The container (`lxc.cgroup.dir.container`) is `<cgroup_parent>/lxc-<id>/payload`;
//!   its limits are there, and it is the deepest cgroup below the parent holding
//!   processes, so [`crate::find_container_cgroup`] finds it.
//! - The monitor (the `lxc-execute` process itself, `lxc.cgroup.dir.monitor`) is moved
//!   to `isolab-lxc/<id>/monitor`, *outside* the parent, and at the end to its pivot
//!   `isolab-lxc/<id>/lxc.pivot` (`lxc.cgroup.dir.monitor.pivot`). Below the parent, the
//!   monitor's cgroup holds a process some milliseconds before the payload's exists (and
//!   its pivot after the payload's is gone: checked by polling), so a watcher that takes
//!   the first cgroup it finds below the parent would read the monitor's (unlimited)
//!   cgroup instead of the container's. Outside, the parent only ever holds the
//!   container. The monitor's own usage is thereby not charged to the run's cgroup.
//! - Paths are relative to the hierarchy roots (`lxc.cgroup.relative = 0`: LXC, as root,
//!   escapes to the root cgroup first), like the lab's `cgroup_parent`.
//! - On v1, LXC initialises the cpuset of the first level below the root only and relies
//!   on `cgroup.clone_children` below it; the lab's parent levels do not have it set, so
//!   a cgroup LXC created below them would have an empty cpuset and could hold no
//!   process. [`Engine::run_command`] therefore creates `<cgroup_parent>/lxc-<id>` in the
//!   cpuset hierarchy itself, with the parent's cpus and memory nodes and
//!   `clone_children` on. (LXC also rewrites `cpuset.mems` and sets `clone_children` on
//!   the lab's top-level `isolab` cgroup, its first level: same values, no effect on the
//!   existing levels.)
//! - [`Engine::remove`] stops the container if it still runs (`lxc-stop -k`, then
//!   SIGKILL to what is left in its cgroups), removes `<parent>/lxc-<id>` and
//!   `isolab-lxc/<id>` in every hierarchy (LXC leaves `lxc-<id>` and the pivot), the
//!   parent levels LXC created in hierarchies where the lab's parent did not exist
//!   (`devices`, `name=systemd`), `isolab-lxc` when empty, the tmpfs and the run
//!   directory.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use isolab_cgroups::{Limits, Version};
use isolab_runtime::ContainerId;

use crate::dir_image::prepare_dir_image;
use crate::host::{Host, SystemHost};
use crate::mounts::{cgroup_mounts, cgroup_version, cpuset_v1_mount, mount_table};
use crate::request::{base_env, parent_rel, path_str};
use crate::run_state::{create_dir, gc_runs, Cleanup, RunState};
use crate::tool::{argv, require, run_ok, version, SystemTools, Tools};
use crate::{
    Capabilities, Engine, EngineError, NetworkMode, PreparedImage, RunRequest, StorageLevel,
};

const ENGINE: &str = "lxc";
/// Where run directories live by default (LXC's `lxcpath` for isolab's containers).
pub const DEFAULT_LXCPATH: &str = "/run/isolab/lxc";
/// Debian's file of LXC's default container settings.
pub const DEFAULT_COMMON_CONFIG: &str = "/usr/share/lxc/config/common.conf";
/// The cgroup (relative to every hierarchy's root) below which monitors are put.
pub const MONITOR_CGROUP: &str = "isolab-lxc";

/// The host paths [`Lxc`] uses; [`LxcPaths::default`] gives this host's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LxcPaths {
    /// LXC's `lxcpath` for isolab's containers: one run directory per container.
    pub lxcpath: PathBuf,
    /// This process's mount table (`/proc/self/mountinfo`).
    pub mountinfo: PathBuf,
    /// LXC's default container settings, included by every configuration; `None` to
    /// leave them out.
    pub common_config: Option<PathBuf>,
}

impl Default for LxcPaths {
    fn default() -> Self {
        LxcPaths {
            lxcpath: PathBuf::from(DEFAULT_LXCPATH),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
            common_config: Some(PathBuf::from(DEFAULT_COMMON_CONFIG)),
        }
    }
}

/// LXC (Debian's `lxc` 5.0) as an [`Engine`].
pub struct Lxc {
    /// The host paths.
    pub paths: LxcPaths,
    tools: Arc<dyn Tools>,
    host: Arc<dyn Host>,
}

impl std::fmt::Debug for Lxc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lxc")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl Default for Lxc {
    fn default() -> Self {
        Lxc::new()
    }
}

impl Lxc {
    /// LXC on this host.
    pub fn new() -> Lxc {
        Lxc::with(
            LxcPaths::default(),
            Arc::new(SystemTools),
            Arc::new(SystemHost),
        )
    }

    /// LXC with explicit paths, programs and host effects (tests pass fakes).
    pub fn with(paths: LxcPaths, tools: Arc<dyn Tools>, host: Arc<dyn Host>) -> Lxc {
        Lxc { paths, tools, host }
    }

    fn program(&self, name: &str) -> Result<PathBuf, EngineError> {
        require(&*self.tools, ENGINE, name, "lxc")
    }

    fn run_dir(&self, id: &ContainerId) -> PathBuf {
        self.paths.lxcpath.join(id)
    }

    /// Whether a process is left in the container's or the monitor's cgroups.
    fn has_processes(&self, state: &RunState) -> Result<bool, EngineError> {
        let mounts = mount_table(ENGINE, &self.paths.mountinfo)?;
        let roots = cgroup_mounts(&mounts);
        Ok(roots.iter().any(|root| {
            state
                .cgroups
                .iter()
                .any(|rel| isolab_cgroups::populated(&root.join(rel)))
        }))
    }

    fn remove_id(
        &self,
        id: &ContainerId,
        fallback_parent: &Path,
    ) -> Result<Vec<String>, EngineError> {
        let dir = self.run_dir(id);
        let state = RunState::load(ENGINE, &dir)?.unwrap_or_else(|| {
            let mut s = RunState::fallback(id, Path::new(""));
            let parent = parent_rel(fallback_parent);
            if !parent.as_os_str().is_empty() {
                s.cgroups.push(parent.join(format!("lxc-{id}")));
            }
            s.cgroups.push(Path::new(MONITOR_CGROUP).join(id));
            s.prune.push(PathBuf::from(MONITOR_CGROUP));
            s
        });
        let mut lines = Vec::new();
        if self.has_processes(&state)? {
            // The monitor's way first; what it cannot reach (a monitor that was
            // killed) is killed through the cgroups by the cleanup.
            if let Ok(stop) = self.program("lxc-stop") {
                let command = argv([
                    path_str(&stop).as_str(),
                    "-n",
                    id.as_str(),
                    "-P",
                    &path_str(&self.paths.lxcpath),
                    "-k",
                ]);
                if run_ok(&*self.tools, ENGINE, &command).is_ok() {
                    lines.push(format!("lxc: stopped container {id}"));
                }
            }
        }
        let cleanup = Cleanup {
            engine: ENGINE,
            host: &self.host,
            mountinfo: &self.paths.mountinfo,
        };
        lines.append(&mut cleanup.run(&dir, &state)?);
        Ok(lines)
    }
}

impl Engine for Lxc {
    fn name(&self) -> &'static str {
        ENGINE
    }

    fn summary(&self) -> &'static str {
        "LXC: `lxc-execute` with a generated configuration on an overlay of the image"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // The monitor process of each container (`[lxc monitor]`, named lxc-start).
            daemons: &["lxc-start"],
            // With an overlay mounted at the working directory (storage `layer`),
            // lxc-execute (LXC 5.0) exits before the container's cgroup appears,
            // saying nothing: not offered until that is understood.
            storage: StorageLevel::MOUNTED,
            ..Capabilities::container(&[NetworkMode::None, NetworkMode::Host])
        }
    }

    fn available(&self) -> Result<(), EngineError> {
        for program in ["lxc-execute", "lxc-stop", "lxc-start"] {
            self.program(program)?;
        }
        Ok(())
    }

    fn version(&self) -> Result<String, EngineError> {
        let program = self.program("lxc-start")?;
        version(
            &*self.tools,
            ENGINE,
            &program,
            "a version such as 5.0.2",
            parse_version,
        )
    }

    fn ensure_ready(&self) -> Result<(), EngineError> {
        for program in ["lxc-execute", "lxc-stop", "lxc-start"] {
            self.program(program)?;
        }
        if let Some(common) = &self.paths.common_config {
            if !common.is_file() {
                return Err(EngineError::Missing {
                    engine: ENGINE,
                    missing: isolab_tools::NotInstalled {
                        program: path_str(common),
                        package: "lxc".to_owned(),
                    },
                });
            }
        }
        Ok(())
    }

    fn prepare_image(&self, image: &Path) -> Result<PreparedImage, EngineError> {
        prepare_dir_image(ENGINE, image)
    }

    fn command(
        &self,
        request: &RunRequest,
        image: &PreparedImage,
    ) -> Result<Vec<String>, EngineError> {
        if request.network == NetworkMode::Bridge {
            return Err(EngineError::Unsupported {
                engine: ENGINE,
                detail: "network `bridge`: LXC's bridge `lxcbr0` only exists while the `lxc-net` service runs, and isolab does not manage an LXC bridge; use network `none` or `host`, or docker/podman or the `isolab` platform for a bridged container".into(),
            });
        }
        let execute = self.program("lxc-execute")?;
        let mounts = mount_table(ENGINE, &self.paths.mountinfo)?;
        let version = cgroup_version(ENGINE, &self.paths.mountinfo)?;
        let dir = self.run_dir(&request.id);
        let scratch = dir.join("scratch");
        let upper = scratch.join("upper");
        let text = config_text(&ConfigInput {
            request,
            image: Path::new(&image.reference),
            upper: &upper,
            version,
            common: self.paths.common_config.as_deref(),
        })?;
        if dir.exists() {
            // A leftover of a killed run with the same id.
            self.remove_id(&request.id, &request.cgroup_parent)?;
        }
        let parent = parent_rel(&request.cgroup_parent);
        let outer = parent.join(format!("lxc-{}", request.id));
        let state = RunState::new(
            request,
            vec![outer.clone(), Path::new(MONITOR_CGROUP).join(&request.id)],
            vec![PathBuf::from(MONITOR_CGROUP)],
            &mounts,
        );
        let config = dir.join("config");
        let prepared = (|| {
            create_dir(ENGINE, &dir, "create the run directory")?;
            state.save(ENGINE, &dir)?;
            create_dir(ENGINE, &scratch, "create the overlay scratch directory")?;
            self.host
                .mount_tmpfs(&scratch)
                .map_err(|source| EngineError::Io {
                    engine: ENGINE,
                    action: "mount a tmpfs (the overlay's upper layer) on",
                    path: scratch.clone(),
                    source,
                })?;
            create_dir(ENGINE, &upper, "create the overlay upper directory")?;
            if let (Version::V1, Some(cpuset)) = (version, cpuset_v1_mount(&mounts)) {
                prepare_cpuset(&cpuset, &outer)?;
            }
            std::fs::write(&config, &text).map_err(|source| EngineError::Io {
                engine: ENGINE,
                action: "write",
                path: config.clone(),
                source,
            })
        })();
        if let Err(e) = prepared {
            let _ = self.remove_id(&request.id, &request.cgroup_parent);
            return Err(e);
        }
        let mut command = argv([
            path_str(&execute).as_str(),
            "-n",
            request.id.as_str(),
            "-P",
            &path_str(&self.paths.lxcpath),
            "-f",
            &path_str(&config),
            "--",
        ]);
        command.extend(request.argv.iter().cloned());
        Ok(command)
    }

    fn remove_container(&self, request: &RunRequest) -> Result<(), EngineError> {
        self.remove_id(&request.id, &request.cgroup_parent)
            .map(|_| ())
    }

    fn gc(&self, prefix: &str) -> Result<Vec<String>, EngineError> {
        let mounts = mount_table(ENGINE, &self.paths.mountinfo)?;
        let mut dirs = vec![self.paths.lxcpath.clone()];
        // Monitors whose run directory is gone.
        dirs.extend(
            cgroup_mounts(&mounts)
                .iter()
                .map(|root| root.join(MONITOR_CGROUP)),
        );
        gc_runs(ENGINE, &dirs, prefix, |id| {
            self.remove_id(id, Path::new(""))
        })
    }

    fn shutdown(&self) -> Result<(), EngineError> {
        Ok(())
    }
}

/// `5.0.2` (what `lxc-start --version` prints) → `lxc 5.0.2`.
fn parse_version(out: &str) -> Option<String> {
    let v = out.lines().map(str::trim).find(|l| !l.is_empty())?;
    let ok = v.chars().next().is_some_and(|c| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+~".contains(c));
    ok.then(|| format!("lxc {v}"))
}

/// Creates the levels of `rel` missing in the v1 cpuset hierarchy at `mount`, each
/// with its parent's cpus and memory nodes and `cgroup.clone_children` on (see the
/// module docs).
fn prepare_cpuset(mount: &Path, rel: &Path) -> Result<(), EngineError> {
    let io = |action: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| EngineError::Io {
            engine: ENGINE,
            action,
            path,
            source,
        }
    };
    let mut current = mount.to_path_buf();
    for component in rel.components() {
        let parent = current.clone();
        current.push(component);
        if current.is_dir() {
            continue;
        }
        match std::fs::create_dir(&current) {
            Ok(()) => {}
            // Created concurrently (another run of the same parent): theirs.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io("create the cpuset cgroup", &current)(e)),
        }
        for file in ["cpuset.cpus", "cpuset.mems"] {
            let from = parent.join(file);
            let value = std::fs::read_to_string(&from).map_err(io("read", &from))?;
            let to = current.join(file);
            std::fs::write(&to, value.trim()).map_err(io("write", &to))?;
        }
        let flag = current.join("cgroup.clone_children");
        std::fs::write(&flag, "1").map_err(io("write", &flag))?;
    }
    Ok(())
}

/// What a configuration file is made of.
pub(crate) struct ConfigInput<'a> {
    pub request: &'a RunRequest,
    /// The image directory (overlay lower layer).
    pub image: &'a Path,
    /// The overlay's upper directory (LXC puts its work directory next to it).
    pub upper: &'a Path,
    pub version: Version,
    /// LXC's common settings to include.
    pub common: Option<&'a Path>,
}

/// A value that fits on one configuration line (and, for paths, in an fstab field or
/// LXC's `overlay:` syntax).
fn config_value(what: &str, value: &str, path: bool) -> Result<(), EngineError> {
    let bad_char =
        |c: char| c == '\n' || c == '\r' || (path && (c.is_whitespace() || c == ':' || c == '\\'));
    if value.is_empty() || value.chars().any(bad_char) {
        return Err(EngineError::Unsupported {
            engine: ENGINE,
            detail: format!(
                "{what} {value:?} cannot be written into an LXC configuration: {}",
                if path {
                    "use a non-empty path without whitespace, ':' or '\\'"
                } else {
                    "use a non-empty value without line breaks"
                }
            ),
        });
    }
    Ok(())
}

/// The configuration file of one run (see the module docs).
pub(crate) fn config_text(input: &ConfigInput<'_>) -> Result<String, EngineError> {
    let r = input.request;
    let workdir = path_str(&r.workdir);
    config_value("working directory", &workdir, true)?;
    config_value("image directory", &path_str(input.image), true)?;
    config_value("overlay upper directory", &path_str(input.upper), true)?;
    let env = base_env(r);
    for e in &env {
        config_value("environment entry", e, false)?;
    }
    let parent = parent_rel(&r.cgroup_parent);
    config_value("cgroup parent", &path_str(&parent), true)?;
    let mut t = String::new();
    let mut line = |key: &str, value: &str| {
        let _ = writeln!(t, "{key} = {value}");
    };
    if let Some(common) = input.common {
        config_value("LXC common configuration", &path_str(common), true)?;
        line("lxc.include", &path_str(common));
    }
    line("lxc.uts.name", r.id.as_str());
    line(
        "lxc.rootfs.path",
        &format!(
            "overlay:{}:{}",
            path_str(input.image),
            path_str(input.upper)
        ),
    );
    line(
        "lxc.mount.entry",
        &format!(
            "{workdir} {} none rbind,create=dir 0 0",
            workdir.trim_start_matches('/')
        ),
    );
    line("lxc.init.cwd", &workdir);
    for e in &env {
        line("lxc.environment", e);
    }
    match r.network {
        NetworkMode::Host => line("lxc.net.0.type", "none"),
        _ => {
            line("lxc.net.0.type", "empty");
            line("lxc.net.0.flags", "up");
        }
    }
    line("lxc.cgroup.relative", "0");
    line(
        "lxc.cgroup.dir.container",
        &path_str(&parent.join(format!("lxc-{}", r.id)).join("payload")),
    );
    let monitor = Path::new(MONITOR_CGROUP).join(&r.id);
    line(
        "lxc.cgroup.dir.monitor",
        &path_str(&monitor.join("monitor")),
    );
    line("lxc.cgroup.dir.monitor.pivot", &path_str(&monitor));
    for (key, value) in limit_lines(&r.limits, input.version) {
        line(&key, &value);
    }
    Ok(t)
}

/// The limits as LXC keys: `lxc.cgroup.*` (v1) or `lxc.cgroup2.*` (v2).
pub(crate) fn limit_lines(limits: &Limits, version: Version) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (prefix, v1) = match version {
        Version::V1 => ("lxc.cgroup.", true),
        Version::V2 => ("lxc.cgroup2.", false),
    };
    let mut add = |key: &str, value: String| out.push((format!("{prefix}{key}"), value));
    if let Some(q) = limits.cpu {
        let (quota, period) = (q.quota.as_micros(), q.period.as_micros());
        if v1 {
            add("cpu.cfs_period_us", period.to_string());
            add("cpu.cfs_quota_us", quota.to_string());
        } else {
            add("cpu.max", format!("{quota} {period}"));
        }
    }
    if let Some(set) = &limits.cpuset {
        add("cpuset.cpus", set.to_string());
    }
    if let Some(set) = &limits.mems {
        add("cpuset.mems", set.to_string());
    }
    if let Some(m) = limits.memory_max {
        add(
            if v1 {
                "memory.limit_in_bytes"
            } else {
                "memory.max"
            },
            m.0.to_string(),
        );
    }
    if let Some(s) = limits.memory_swap_max {
        add(
            if v1 {
                "memory.memsw.limit_in_bytes"
            } else {
                "memory.swap.max"
            },
            s.0.to_string(),
        );
    }
    if let Some(p) = limits.pids_max {
        add("pids.max", p.to_string());
    }
    for t in &limits.io {
        let dev = t.device;
        if v1 {
            for (file, rate) in [
                ("blkio.throttle.read_bps_device", t.read_bps),
                ("blkio.throttle.write_bps_device", t.write_bps),
                ("blkio.throttle.read_iops_device", t.read_iops),
                ("blkio.throttle.write_iops_device", t.write_iops),
            ] {
                if let Some(rate) = rate {
                    add(file, format!("{dev} {rate}"));
                }
            }
        } else if !t.is_unlimited() {
            let mut value = dev.to_string();
            for (key, rate) in [
                ("rbps", t.read_bps),
                ("wbps", t.write_bps),
                ("riops", t.read_iops),
                ("wiops", t.write_iops),
            ] {
                if let Some(rate) = rate {
                    let _ = write!(value, " {key}={rate}");
                }
            }
            add("io.max", value);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::*;
    use isolab_cgroups::{Bytes, CpuQuota, DeviceNumber, IdSet, IoThrottle};

    fn limits() -> Limits {
        Limits {
            cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
            cpuset: Some("1".parse::<IdSet>().unwrap()),
            mems: Some("0".parse::<IdSet>().unwrap()),
            memory_max: Some(Bytes(256 << 20)),
            memory_swap_max: Some(Bytes(256 << 20)),
            pids_max: Some(128),
            io: vec![IoThrottle {
                device: DeviceNumber {
                    major: 254,
                    minor: 0,
                },
                read_bps: Some(1000),
                write_bps: Some(2000),
                read_iops: None,
                write_iops: Some(30),
            }],
            ..Limits::default()
        }
    }

    fn lines(v: Vec<(String, String)>) -> Vec<String> {
        v.into_iter().map(|(k, v)| format!("{k} = {v}")).collect()
    }

    #[test]
    fn v1_limit_keys() {
        assert_eq!(
            lines(limit_lines(&limits(), Version::V1)),
            [
                "lxc.cgroup.cpu.cfs_period_us = 100000",
                "lxc.cgroup.cpu.cfs_quota_us = 50000",
                "lxc.cgroup.cpuset.cpus = 1",
                "lxc.cgroup.cpuset.mems = 0",
                "lxc.cgroup.memory.limit_in_bytes = 268435456",
                "lxc.cgroup.memory.memsw.limit_in_bytes = 268435456",
                "lxc.cgroup.pids.max = 128",
                "lxc.cgroup.blkio.throttle.read_bps_device = 254:0 1000",
                "lxc.cgroup.blkio.throttle.write_bps_device = 254:0 2000",
                "lxc.cgroup.blkio.throttle.write_iops_device = 254:0 30",
            ]
        );
    }

    #[test]
    fn v2_limit_keys() {
        assert_eq!(
            lines(limit_lines(&limits(), Version::V2)),
            [
                "lxc.cgroup2.cpu.max = 50000 100000",
                "lxc.cgroup2.cpuset.cpus = 1",
                "lxc.cgroup2.cpuset.mems = 0",
                "lxc.cgroup2.memory.max = 268435456",
                "lxc.cgroup2.memory.swap.max = 268435456",
                "lxc.cgroup2.pids.max = 128",
                "lxc.cgroup2.io.max = 254:0 rbps=1000 wbps=2000 wiops=30",
            ]
        );
        assert!(limit_lines(&Limits::default(), Version::V2).is_empty());
        let mut only_unlimited = Limits::default();
        only_unlimited
            .io
            .push(IoThrottle::unlimited(DeviceNumber { major: 8, minor: 0 }));
        assert!(limit_lines(&only_unlimited, Version::V2).is_empty());
    }

    #[test]
    fn a_whole_configuration() {
        let w = tempfile::tempdir().unwrap();
        let mut req = request(w.path());
        req.limits = Limits {
            pids_max: Some(64),
            ..Limits::default()
        };
        let text = config_text(&ConfigInput {
            request: &req,
            image: Path::new("/var/lib/isolab/images/bench"),
            upper: Path::new("/run/isolab/lxc/isolab-t1-c0-r1/scratch/upper"),
            version: Version::V1,
            common: Some(Path::new(DEFAULT_COMMON_CONFIG)),
        })
        .unwrap();
        let wd = w.path().display().to_string();
        let expected = format!(
            "lxc.include = /usr/share/lxc/config/common.conf
lxc.uts.name = isolab-t1-c0-r1
lxc.rootfs.path = overlay:/var/lib/isolab/images/bench:/run/isolab/lxc/isolab-t1-c0-r1/scratch/upper
lxc.mount.entry = {wd} {} none rbind,create=dir 0 0
lxc.init.cwd = {wd}
lxc.environment = PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
lxc.environment = TERM=xterm
lxc.environment = FOO=bar
lxc.net.0.type = empty
lxc.net.0.flags = up
lxc.cgroup.relative = 0
lxc.cgroup.dir.container = isolab/t1/c0-r1/lxc-isolab-t1-c0-r1/payload
lxc.cgroup.dir.monitor = isolab-lxc/isolab-t1-c0-r1/monitor
lxc.cgroup.dir.monitor.pivot = isolab-lxc/isolab-t1-c0-r1
lxc.cgroup.pids.max = 64
",
            wd.trim_start_matches('/')
        );
        assert_eq!(text, expected);

        req.network = NetworkMode::Host;
        let text = config_text(&ConfigInput {
            request: &req,
            image: Path::new("/img"),
            upper: Path::new("/up"),
            version: Version::V2,
            common: None,
        })
        .unwrap();
        assert!(text.contains("lxc.net.0.type = none\n"), "{text}");
        assert!(!text.contains("flags"), "{text}");
        assert!(!text.contains("lxc.include"), "{text}");
        assert!(text.contains("lxc.cgroup2.pids.max = 64\n"), "{text}");
    }

    #[test]
    fn values_that_would_break_the_file_are_refused() {
        let w = tempfile::tempdir().unwrap();
        let req = request(w.path());
        let input = |image: &'static str| ConfigInput {
            request: &req,
            image: Path::new(image),
            upper: Path::new("/up"),
            version: Version::V1,
            common: None,
        };
        let err = config_text(&input("/a:b")).unwrap_err().to_string();
        assert!(
            err.contains("image directory") && err.contains("':'"),
            "{err}"
        );
        assert!(config_text(&input("/a b")).is_err());
        let mut bad_env = req.clone();
        bad_env.env = vec!["A=1\rB=2".into()];
        let e = ConfigInput {
            request: &bad_env,
            ..input("/img")
        };
        assert!(config_text(&e)
            .unwrap_err()
            .to_string()
            .contains("line breaks"));
    }

    #[test]
    fn versions() {
        assert_eq!(parse_version("5.0.2\n").unwrap(), "lxc 5.0.2");
        assert_eq!(parse_version("\n4.0.12~rc1\n").unwrap(), "lxc 4.0.12~rc1");
        assert_eq!(parse_version("lxc-start: unknown option\n"), None);
        assert_eq!(parse_version(""), None);
    }

    fn engine(sys: &FakeSystem, tools: Arc<FakeTools>, host: Arc<FakeHost>) -> Lxc {
        Lxc::with(
            LxcPaths {
                lxcpath: sys.root.join("run/lxc"),
                mountinfo: sys.mountinfo.clone(),
                common_config: None,
            },
            tools,
            host,
        )
    }

    #[test]
    fn run_command_prepares_the_run_and_remove_undoes_it() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        sys.lab_parent("isolab/t1/c0-r1");
        for (file, value) in [("cpuset.cpus", "0-1\n"), ("cpuset.mems", "0\n")] {
            std::fs::write(sys.cg("cpuset/isolab/t1/c0-r1").join(file), value).unwrap();
        }
        let (tools, host) = (
            Arc::new(FakeTools::default()),
            Arc::new(FakeHost::default()),
        );
        let e = engine(&sys, tools.clone(), host.clone());
        let req = request(&sys.workdir);
        let cmd = e.run_command(&req, &image()).unwrap();
        let run = sys.root.join("run/lxc/isolab-t1-c0-r1");
        assert_eq!(
            cmd,
            [
                "/usr/bin/lxc-execute".to_string(),
                "-n".into(),
                "isolab-t1-c0-r1".into(),
                "-P".into(),
                path_str(&sys.root.join("run/lxc")),
                "-f".into(),
                path_str(&run.join("config")),
                "--".into(),
                "sysbench".into(),
                "cpu".into(),
                "run".into()
            ]
        );
        assert_eq!(
            host.calls(),
            [format!("tmpfs {}", run.join("scratch").display())]
        );
        assert!(run.join("scratch/upper").is_dir());
        let config = std::fs::read_to_string(run.join("config")).unwrap();
        assert!(config.contains(&format!(
            "lxc.rootfs.path = overlay:/images/bench:{}\n",
            run.join("scratch/upper").display()
        )));
        // The cpuset level LXC will create the payload in, initialised.
        let outer = sys.cg("cpuset/isolab/t1/c0-r1/lxc-isolab-t1-c0-r1");
        assert_eq!(
            std::fs::read_to_string(outer.join("cpuset.cpus")).unwrap(),
            "0-1"
        );
        assert_eq!(
            std::fs::read_to_string(outer.join("cpuset.mems")).unwrap(),
            "0"
        );
        assert_eq!(
            std::fs::read_to_string(outer.join("cgroup.clone_children")).unwrap(),
            "1"
        );
        assert!(!sys.cg("cpu/isolab/t1/c0-r1/lxc-isolab-t1-c0-r1").exists());

        // What LXC leaves after a kill of its monitor: the payload with a process, the
        // outer level everywhere, the chain in `devices`, the monitor's cgroups.
        for c in V1_CONTROLLERS.iter().chain(&["unified"]) {
            std::fs::create_dir_all(
                sys.cg(c)
                    .join("isolab/t1/c0-r1/lxc-isolab-t1-c0-r1/payload"),
            )
            .unwrap();
            std::fs::create_dir_all(sys.cg(c).join("isolab-lxc/isolab-t1-c0-r1/lxc.pivot"))
                .unwrap();
        }
        std::fs::write(
            sys.cg("pids/isolab/t1/c0-r1/lxc-isolab-t1-c0-r1/payload/cgroup.procs"),
            "777\n",
        )
        .unwrap();
        std::fs::create_dir_all(sys.cg("cpu/isolab-lxc/isolab-other")).unwrap();
        let mut collect = req.clone();
        collect.cgroup_parent = PathBuf::new();
        e.remove(&collect).unwrap();
        assert!(
            tools.calls().contains(&format!(
                "/usr/bin/lxc-stop -n isolab-t1-c0-r1 -P {} -k",
                sys.root.join("run/lxc").display()
            )),
            "{:?}",
            tools.calls()
        );
        assert!(host.calls().contains(&"kill 777".to_string()));
        assert!(!run.exists());
        for c in V1_CONTROLLERS.iter().chain(&["unified"]) {
            if ["devices", "systemd"].contains(c) {
                assert!(!sys.cg(c).join("isolab").exists(), "{c}");
            } else {
                let parent = sys.cg(c).join("isolab/t1/c0-r1");
                let children = std::fs::read_dir(&parent)
                    .unwrap()
                    .filter(|e| e.as_ref().unwrap().path().is_dir())
                    .count();
                assert_eq!(children, 0, "{c}");
            }
            let monitors = sys.cg(c).join("isolab-lxc");
            assert_eq!(
                monitors.exists(),
                *c == "cpu",
                "{c}: isolab-lxc goes when empty"
            );
        }
        e.remove(&req).unwrap();
    }

    #[test]
    fn gc_finds_run_directories_and_orphaned_monitors() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        let e = engine(&sys, Arc::default(), Arc::default());
        std::fs::create_dir_all(sys.root.join("run/lxc/isolab-e1-a")).unwrap();
        std::fs::create_dir_all(sys.root.join("run/lxc/isolab-e2-a")).unwrap();
        std::fs::create_dir_all(sys.cg("memory/isolab-lxc/isolab-e1-b/lxc.pivot")).unwrap();
        let lines = e.gc("isolab-e1-").unwrap();
        assert!(!sys.root.join("run/lxc/isolab-e1-a").exists());
        assert!(sys.root.join("run/lxc/isolab-e2-a").exists());
        assert!(!sys.cg("memory/isolab-lxc").exists());
        assert!(
            lines
                .iter()
                .any(|l| l == "lxc: removed container isolab-e1-b"),
            "{lines:?}"
        );
    }

    #[test]
    fn bridge_is_unsupported_and_readiness_names_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v2(dir.path());
        let e = engine(&sys, Arc::default(), Arc::default());
        let mut req = request(&sys.workdir);
        req.network = NetworkMode::Bridge;
        let err = e.run_command(&req, &image()).unwrap_err().to_string();
        assert!(err.contains("lxc-net"), "{err}");
        assert_eq!(
            e.host_address(NetworkMode::Host).as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(e.host_address(NetworkMode::None), None);
        e.ensure_ready().unwrap();
        let tools = Arc::new(FakeTools {
            missing: vec!["lxc-execute".into()],
            ..FakeTools::default()
        });
        let e = engine(&sys, tools, Arc::default());
        assert!(e
            .ensure_ready()
            .unwrap_err()
            .to_string()
            .contains("apt-get install lxc"));
        let mut e = engine(&sys, Arc::default(), Arc::default());
        e.paths.common_config = Some(sys.root.join("no-common.conf"));
        assert!(e.ensure_ready().is_err());
    }

    #[test]
    fn on_v2_no_cpuset_level_is_prepared() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v2(dir.path());
        std::fs::create_dir_all(sys.cg("isolab/t1/c0-r1")).unwrap();
        let e = engine(&sys, Arc::default(), Arc::default());
        let mut req = request(&sys.workdir);
        req.limits = limits();
        e.run_command(&req, &image()).unwrap();
        let run = sys.root.join("run/lxc/isolab-t1-c0-r1");
        let config = std::fs::read_to_string(run.join("config")).unwrap();
        assert!(
            config.contains("lxc.cgroup2.cpu.max = 50000 100000\n"),
            "{config}"
        );
        assert!(!sys.cg("isolab/t1/c0-r1/lxc-isolab-t1-c0-r1").exists());
        e.remove(&req).unwrap();
        assert!(!run.exists());
        assert!(sys.cg("isolab/t1/c0-r1").is_dir());
    }
}
