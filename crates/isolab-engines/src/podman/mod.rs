//! Podman: `podman run` in the foreground, no daemon, with crun or runc.
//!
//! **A store of its own.** Every command runs with `--root /var/lib/isolab/podman/storage
//! --runroot /run/isolab/podman/storage --tmpdir /run/isolab/podman/libpod
//! --network-config-dir /var/lib/isolab/podman/networks` ([`PodmanConfig`]), so isolab
//! never touches a user's images, containers, libpod database or networks, and
//! [`Engine::gc`] can only find isolab's containers. Always `--cgroup-manager
//! cgroupfs` (PID 1 may not be systemd), `--events-backend file` (no journald) and
//! `--runtime crun|runc`: the OCI runtime is part of the engine, and
//! [`Engine::version`] says which one really ran, e.g. `podman 4.3.1 (crun 1.8.1)`.
//!
//! **Cgroups.** `--cgroup-parent /<parent>` puts the container in
//! `<parent>/libpod-<id>` in every hierarchy. With the cgroupfs manager Podman would
//! put conmon into a `<parent>/conmon` cgroup that nobody removes (the lab's removal
//! of `<parent>` would then fail): isolab passes `--cgroups no-conmon`, so conmon
//! stays in the cgroup of the `podman` command, which the lab already placed in
//! `<parent>`, and nothing else is created.
//!
//! **Quirks of this kind of host, handled here:**
//! - Podman asks for `nofile` and `nproc` rlimits of 1048576 by default, above root's
//!   hard limits here (nofile 20000), and the OCI runtime then fails with `setrlimit
//!   … Operation not permitted`; moreover podman 4.3 lowers its own `RLIMIT_NPROC` to
//!   32768 when it starts (seen with strace), so the container can get no more.
//!   isolab passes `--ulimit nofile=N:N --ulimit nproc=M:M` with N the hard limit
//!   read by `getrlimit` (at most 1048576) and M = min(hard limit, 32768).
//! - crun 1.8 refuses cgroup "hybrid" mode (v1 controllers plus a cgroup2 mount) as
//!   soon as the cgroup2 mount lists a controller (`cgroups in hybrid mode not
//!   supported, drop all controllers from cgroupv2`); here `hugetlb`, which no v1
//!   hierarchy binds, shows up in `/sys/fs/cgroup/unified/cgroup.controllers`. With
//!   [`Podman::allow_host_fixes`] isolab mounts each listed controller as a v1
//!   hierarchy (`mount -t cgroup -o hugetlb cgroup /sys/fs/cgroup/hugetlb`), which
//!   empties the list; [`Engine::remove`] removes the parent cgroups crun creates in
//!   that hierarchy, and [`Engine::shutdown`] removes what is left there, unmounts
//!   it and checks that the controller is back in cgroup2 (a v1 hierarchy whose
//!   last child died just before the unmount lingers: isolab mounts and unmounts it
//!   once more, which destroys it). Without `allow_host_fixes` isolab falls back to
//!   runc, which accepts this layout, and says so in [`Engine::version`] and
//!   [`Podman::notes`]. The mounts are the shared fix of `hybrid_fix.rs`:
//!   each is recorded in `/run/isolab/hybrid-fix/host.json` before it is made, so
//!   that another isolab process can undo it ([`Engine::shutdown`] undoes the record
//!   whoever made it; [`Engine::gc`] undoes it when its owner process is gone).
//! - A workload that is PID 1 ignores SIGTERM unless it handles it, so the signal
//!   that `podman run` forwards would not stop it: isolab runs it under an init
//!   (`--init`: catatonit when installed, else Docker's `docker-init`/tini with
//!   `--init-path`); without any, [`Engine::remove`] still kills it (`podman rm -f`).
//!
//! **Leftovers.** When the `podman run` command is SIGKILLed while the runtime is
//! creating the container, Podman forgets the container but conmon and the
//! runtime's `init` stay; [`Engine::remove`] therefore also hands every
//! `libpod-<id>` cgroup left below the parent to `<runtime> delete --force` and
//! kills and removes what remains ([`Podman::remove_orphans`]), and removes the
//! parent's copies in hierarchies the lab does not manage (`devices`,
//! `name=systemd`, the `hugetlb` mounted for crun), where runc and crun create it.
//!
//! Measured here (median of 10, `--network none`): `podman run --rm … true` takes
//! about 220–245 ms with crun and 255–265 ms with runc.
//!
//! **Network.** `none` and `host` need nothing. `bridge` is Podman's default network
//! `podman` (CNI with Debian's `containernetworking-plugins`, or netavark), which
//! Podman 4 creates in memory when the dedicated network directory holds no
//! configuration; its bridge (`cni-podman0`) and firewall chains (`CNI-*`) appear on
//! first use. Like Docker's daemon ([`HostNetSnapshot`](crate::host_net::HostNetSnapshot)), isolab
//! records the host's netfilter rules, `ip_forward` and the bridge's absence in
//! [`Engine::ensure_ready`], and [`Engine::shutdown`] removes exactly what Podman
//! added (rules and chains naming `CNI-`, `NETAVARK`, the bridge or its subnet), the
//! bridge, and `/var/lib/cni` when it did not exist and holds no reservation.
//!
//! **Images.** The tar of [`cached_tar_in`] is `podman import`ed as
//! `localhost/isolab/<kind>:<first 12 hex of its sha256>` once; runs use
//! `--pull never`. Limits are the same flags as Docker's
//! (`run_flags.rs`), plus `--pids-limit -1` when no pids limit is asked (Podman's
//! default would be 2048).

//!
//! The engine is split by what it does: `runtime.rs` gets it ready (the OCI runtime,
//! the hybrid-cgroup fix), `network.rs` records and undoes what its default network adds
//! to the host, `cleanup.rs` removes what containers leave and undoes everything at
//! shutdown; this file holds the configuration, the flags of a run and [`Engine`].

mod cleanup;
mod network;
mod runtime;

use runtime::Resolved;
pub use runtime::{hybrid_decision, HybridDecision, OciRuntime};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use isolab_cgroups::Hierarchy;

use crate::hybrid_fix::gc_dead_owners;
use crate::image_tar::{cached_tar_in, repository, DEFAULT_CACHE_DIR};
use crate::own_image::{entrypoint_flags, own_image};
use crate::parent_cgroups::{remove_parent_chains, ForeignParents};
use crate::run_flags::{common_run_flags, limit_flags};
use crate::tool::{argv, require, run_ok, tail, SystemTools, Tools};
use crate::volumes;
use crate::{
    Capabilities, Engine, EngineError, NetworkMode, PreparedImage, RunRequest, StorageLevel,
};

const ENGINE: &str = "podman";

/// How long [`Engine::remove`] waits for the container's conmon to exit on its own.
const MONITOR_EXIT: Duration = Duration::from_secs(10);

/// The highest `RLIMIT_NPROC` a container can get from podman 4.3, which sets its own
/// limit to this value when it starts.
pub const PODMAN_NPROC_CEILING: u64 = 32768;

/// The nofile limit Podman asks for by default.
pub const PODMAN_NOFILE_DEFAULT: u64 = 1_048_576;

/// Where and how the Podman driver works; [`PodmanConfig::default`] is this host's.
#[derive(Debug, Clone)]
pub struct PodmanConfig {
    /// `--root`: isolab's image and container store.
    pub root: PathBuf,
    /// `--runroot`: its runtime state.
    pub runroot: PathBuf,
    /// `--tmpdir`: libpod's runtime files (events log, locks).
    pub tmpdir: PathBuf,
    /// `--network-config-dir`: isolab's network definitions.
    pub network_config_dir: PathBuf,
    /// isolab's own records (host snapshot, host fixes).
    pub state_dir: PathBuf,
    /// Where packed image tars are cached.
    pub cache_dir: PathBuf,
    /// The proc file system (`/proc`).
    pub proc: PathBuf,
    /// The sys file system (`/sys`).
    pub sys: PathBuf,
    /// CNI's state directory (`/var/lib/cni`), removed at shutdown when isolab's
    /// bridge runs created it.
    pub cni_state_dir: PathBuf,
    /// The host's cgroup hierarchy.
    pub hierarchy: Hierarchy,
    /// The hard limits of the process that runs podman (`getrlimit`).
    pub hard_limits: HardLimits,
}

/// Hard resource limits of a process, which a container's `--ulimit` may not exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HardLimits {
    /// Open files (`RLIMIT_NOFILE`); `u64::MAX` when unlimited.
    pub nofile: u64,
    /// Processes (`RLIMIT_NPROC`); `u64::MAX` when unlimited.
    pub nproc: u64,
}

impl Default for PodmanConfig {
    fn default() -> Self {
        let hierarchy = Hierarchy::detect()
            .unwrap_or_else(|_| Hierarchy::v1_under(Path::new("/sys/fs/cgroup")));
        PodmanConfig {
            root: PathBuf::from("/var/lib/isolab/podman/storage"),
            runroot: PathBuf::from("/run/isolab/podman/storage"),
            tmpdir: PathBuf::from("/run/isolab/podman/libpod"),
            network_config_dir: PathBuf::from("/var/lib/isolab/podman/networks"),
            state_dir: PathBuf::from("/run/isolab/podman"),
            cache_dir: PathBuf::from(DEFAULT_CACHE_DIR),
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            cni_state_dir: PathBuf::from("/var/lib/cni"),
            hierarchy,
            hard_limits: HardLimits {
                nofile: hard_limit(libc::RLIMIT_NOFILE),
                nproc: hard_limit(libc::RLIMIT_NPROC),
            },
        }
    }
}

/// The hard limit of `resource` for this process (`u64::MAX` when unlimited or
/// unreadable).
fn hard_limit(resource: libc::__rlimit_resource_t) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `struct rlimit` into the valid, exclusively
    // borrowed `r` and reads nothing else.
    let rc = unsafe { libc::getrlimit(resource, &mut r) };
    if rc != 0 || r.rlim_max == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        r.rlim_max
    }
}

/// The Podman engine (see the module documentation).
pub struct Podman {
    /// The OCI runtime asked for (the one used may be runc: see [`Podman::notes`]).
    pub runtime: OciRuntime,
    /// Whether isolab may change the host to make the runtime work (mount a cgroup
    /// controller as a v1 hierarchy for crun).
    pub allow_host_fixes: bool,
    config: PodmanConfig,
    tools: Arc<dyn Tools>,
    resolved: Mutex<Option<Resolved>>,
    foreign: ForeignParents,
}

impl std::fmt::Debug for Podman {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Podman")
            .field("runtime", &self.runtime)
            .field("allow_host_fixes", &self.allow_host_fixes)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn io_err(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EngineError {
    let path = path.to_path_buf();
    move |source| EngineError::Io {
        engine: ENGINE,
        action,
        path,
        source,
    }
}

impl Podman {
    /// Podman with `runtime` on this host with the default paths.
    pub fn new(runtime: OciRuntime, allow_host_fixes: bool) -> Podman {
        Podman::with(
            runtime,
            allow_host_fixes,
            PodmanConfig::default(),
            Arc::new(SystemTools),
        )
    }

    /// Podman with explicit paths and tools (tests pass a fake).
    pub fn with(
        runtime: OciRuntime,
        allow_host_fixes: bool,
        config: PodmanConfig,
        tools: Arc<dyn Tools>,
    ) -> Podman {
        Podman {
            runtime,
            allow_host_fixes,
            config,
            tools,
            resolved: Mutex::new(None),
            foreign: ForeignParents::default(),
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &PodmanConfig {
        &self.config
    }

    /// What isolab decided about this host (runtime fallback, host fixes); empty
    /// when nothing was needed or before [`Engine::ensure_ready`].
    pub fn notes(&self) -> Vec<String> {
        lock(&self.resolved)
            .as_ref()
            .map(|r| r.notes.clone())
            .unwrap_or_default()
    }

    /// The OCI runtime in use (`None` before [`Engine::ensure_ready`]).
    pub fn effective_runtime(&self) -> Option<OciRuntime> {
        lock(&self.resolved).as_ref().map(|r| r.runtime)
    }

    /// The global options of every podman command for `runtime`.
    pub fn global_args(&self, podman: &Path, runtime: OciRuntime) -> Vec<String> {
        let c = &self.config;
        argv([
            podman.display().to_string(),
            "--root".into(),
            c.root.display().to_string(),
            "--runroot".into(),
            c.runroot.display().to_string(),
            "--tmpdir".into(),
            c.tmpdir.display().to_string(),
            "--network-config-dir".into(),
            c.network_config_dir.display().to_string(),
            "--cgroup-manager".into(),
            "cgroupfs".into(),
            "--events-backend".into(),
            "file".into(),
            "--runtime".into(),
            runtime.program(),
        ])
    }

    /// The `--ulimit` flags that fit the hard limits (see the module documentation).
    pub fn ulimit_flags(&self) -> Vec<String> {
        let HardLimits { nofile, nproc } = self.config.hard_limits;
        let nofile = nofile.min(PODMAN_NOFILE_DEFAULT);
        let nproc = nproc.min(PODMAN_NPROC_CEILING);
        argv([
            "--ulimit".to_string(),
            format!("nofile={nofile}:{nofile}"),
            "--ulimit".into(),
            format!("nproc={nproc}:{nproc}"),
        ])
    }

    fn init_flags(&self) -> Vec<String> {
        if Path::new("/usr/libexec/podman/catatonit").is_file() {
            return argv(["--init"]);
        }
        for p in ["catatonit", "docker-init", "tini"] {
            if let Some(path) = self.tools.which(p) {
                return argv([
                    "--init".to_string(),
                    "--init-path".into(),
                    path.display().to_string(),
                ]);
            }
        }
        Vec::new()
    }

    fn podman<I, S>(&self, args: I) -> Result<Vec<String>, EngineError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut v = self.resolved()?.globals;
        v.extend(args.into_iter().map(Into::into));
        Ok(v)
    }
}

/// `Client.Version` of `podman version --format json`.
pub(crate) fn parse_podman_version(stdout: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    Some(v.get("Client")?.get("Version")?.as_str()?.to_owned())
}

/// Container names from `podman ps --format json`.
pub(crate) fn parse_ps_names(stdout: &str) -> Vec<String> {
    let Ok(serde_json::Value::Array(list)) = serde_json::from_str(stdout.trim()) else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|c| c.get("Names").and_then(|n| n.as_array()))
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect()
}

impl Engine for Podman {
    fn name(&self) -> &'static str {
        match self.runtime {
            OciRuntime::Isolab => "podman+isolab",
            OciRuntime::Crun | OciRuntime::Runc => ENGINE,
        }
    }

    fn summary(&self) -> &'static str {
        match self.runtime {
            OciRuntime::Isolab => {
                "Podman, daemonless, with isolab-runtime as its OCI runtime (create, start, …)"
            }
            OciRuntime::Crun | OciRuntime::Runc => {
                "Podman, daemonless, with crun below it (runc when crun cannot run here)"
            }
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Each container's monitor (podman has no daemon).
            daemons: &["conmon"],
            // Named volumes too (`podman volume create`).
            storage: &StorageLevel::ALL,
            ..Capabilities::container(&[NetworkMode::None, NetworkMode::Bridge, NetworkMode::Host])
        }
    }

    fn available(&self) -> Result<(), EngineError> {
        require(&*self.tools, ENGINE, "podman", "podman")?;
        require(
            &*self.tools,
            ENGINE,
            &self.runtime.program(),
            self.runtime.package(),
        )?;
        Ok(())
    }

    fn version(&self) -> Result<String, EngineError> {
        let r = self.resolved()?;
        let mut s = format!(
            "podman {} ({} {}",
            r.podman_version,
            r.runtime.label(),
            r.runtime_version
        );
        for n in &r.notes {
            s.push_str("; ");
            s.push_str(n);
        }
        s.push(')');
        Ok(s)
    }

    fn ensure_ready(&self) -> Result<(), EngineError> {
        let mut resolved = lock(&self.resolved);
        if resolved.is_some() {
            return Ok(());
        }
        for d in [&self.config.state_dir, &self.config.network_config_dir] {
            std::fs::create_dir_all(d).map_err(io_err("create the directory", d))?;
        }
        let r = self.resolve()?;
        *resolved = Some(r);
        drop(resolved);
        self.take_net_snapshot()
    }

    fn prepare_image(&self, image: &Path) -> Result<PreparedImage, EngineError> {
        // An image of one's own is loaded from its Docker archive (its layers and ID kept);
        // isolab's own images are imported from a packed tar.
        let own = own_image(image);
        let (reference, source) = match &own {
            // Podman names a loaded archive's tag by its own short-name rules: run the image
            // by its ID, which the load keeps.
            Some(own) => (
                own.digest.trim_start_matches("sha256:").to_owned(),
                own.archive.clone(),
            ),
            None => {
                let (tar, sha) = cached_tar_in(ENGINE, &self.config.cache_dir, image)?;
                let sha = &sha[..12.min(sha.len())];
                (format!("localhost/{}:{sha}", repository(image)), tar)
            }
        };
        let exists = self.podman(["image", "exists", reference.as_str()])?;
        let present = self.tools.run(&exists).is_ok_and(|o| o.status == 0);
        if !present {
            let cmd = if own.is_some() {
                self.podman([
                    "load".to_string(),
                    "--quiet".into(),
                    "--input".into(),
                    source.display().to_string(),
                ])?
            } else {
                self.podman([
                    "import".to_string(),
                    "--quiet".into(),
                    source.display().to_string(),
                    reference.clone(),
                ])?
            };
            run_ok(&*self.tools, ENGINE, &cmd)?;
        }
        let cmd = self.podman(["image", "inspect", reference.as_str(), "--format", "json"])?;
        let out = run_ok(&*self.tools, ENGINE, &cmd)?;
        let id = serde_json::from_str::<serde_json::Value>(out.trim())
            .ok()
            .and_then(|v| v.get(0)?.get("Id")?.as_str().map(str::to_owned))
            .ok_or_else(|| EngineError::Unexpected {
                engine: ENGINE,
                command: cmd.join(" "),
                detail: format!("no Id in {}", tail(&out, 300)),
            })?;
        let digest = if id.starts_with("sha256:") {
            id
        } else {
            format!("sha256:{id}")
        };
        Ok(PreparedImage {
            reference,
            digest,
            source: image.to_path_buf(),
        })
    }

    fn shares_names(&self) -> bool {
        true
    }

    fn command(
        &self,
        request: &RunRequest,
        image: &PreparedImage,
    ) -> Result<Vec<String>, EngineError> {
        let r = self.resolved()?;
        let mut cmd = r.globals.clone();
        cmd.extend(argv(["run", "--rm", "--pull", "never"]));
        cmd.extend(r.init.iter().cloned());
        cmd.extend(argv(["--cgroups", "no-conmon"]));
        cmd.extend(self.ulimit_flags());
        cmd.extend(common_run_flags(request));
        cmd.extend(limit_flags(
            ENGINE,
            &request.limits,
            self.config.hierarchy.version(),
            &self.config.sys,
        )?);
        if request.limits.pids_max.is_none() {
            cmd.extend(argv(["--pids-limit", "-1"]));
        }
        cmd.extend(entrypoint_flags(&image.source));
        cmd.push(image.reference.clone());
        cmd.extend(request.argv.iter().cloned());
        Ok(cmd)
    }

    fn remove_container(&self, request: &RunRequest) -> Result<(), EngineError> {
        let cmd = self.podman([
            "rm",
            "--force",
            "--ignore",
            "--time",
            "0",
            request.id.as_str(),
        ])?;
        run_ok(&*self.tools, ENGINE, &cmd)?;
        self.remove_orphans(&request.cgroup_parent);
        self.wait_for_monitors(request.id.as_str(), MONITOR_EXIT);
        // The hugetlb hierarchy isolab mounted is among them, also when the
        // mountinfo of `proc` does not show it yet.
        self.foreign
            .remove(&self.config.proc, &request.cgroup_parent);
        let fixes: Vec<PathBuf> = self.fixed_mounts().into_iter().map(|(_, p)| p).collect();
        remove_parent_chains(&fixes, &request.cgroup_parent);
        Ok(())
    }

    fn host_address(&self, network: NetworkMode) -> Option<String> {
        match network {
            NetworkMode::None => None,
            NetworkMode::Host => Some("127.0.0.1".into()),
            NetworkMode::Bridge => self.bridge_info().map(|(_, _, gw)| gw),
        }
    }

    fn create_volume(&self, name: &str) -> Result<PathBuf, EngineError> {
        let cli = self.podman(Vec::<String>::new())?;
        volumes::create(&*self.tools, ENGINE, &cli, name)
    }

    fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        let cli = self.podman(Vec::<String>::new())?;
        volumes::remove(&*self.tools, ENGINE, &cli, name)
    }

    fn gc(&self, prefix: &str) -> Result<Vec<String>, EngineError> {
        let cmd = self.podman([
            "ps".to_string(),
            "-a".into(),
            "--filter".into(),
            format!("name=^{prefix}"),
            "--format".into(),
            "json".into(),
        ])?;
        let out = run_ok(&*self.tools, ENGINE, &cmd)?;
        let mut removed = Vec::new();
        for name in parse_ps_names(&out) {
            if !name.starts_with(prefix) {
                continue;
            }
            run_ok(
                &*self.tools,
                ENGINE,
                &self.podman(["rm", "--force", "--ignore", "--time", "0", name.as_str()])?,
            )?;
            self.wait_for_monitors(&name, MONITOR_EXIT);
            removed.push(format!("podman container {name}"));
        }
        // The volumes of storage `volume`, which their containers no longer use.
        let cli = self.podman(Vec::<String>::new())?;
        removed.extend(volumes::gc(&*self.tools, ENGINE, &cli, prefix)?);
        Ok(removed)
    }

    fn gc_host_fixes(&self) -> Result<Vec<String>, EngineError> {
        // A hybrid-cgroup fix whose users were all killed before their shutdown.
        let state = &self.config.state_dir;
        gc_dead_owners(
            ENGINE,
            &*self.tools,
            "mount",
            state.parent().unwrap_or(state),
            &self.config.proc,
            &mut |controller, path| self.undo_mount(controller, path),
        )
    }

    fn shutdown(&self) -> Result<(), EngineError> {
        self.shutdown_report().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::network::{holds_reservations, parse_network, subnet_marker, NetState};
    use super::*;
    use crate::fakes::Fake;
    use crate::tool::Output;
    use isolab_cgroups::{Bytes, CpuQuota, IdSet, Limits};
    use std::time::Instant;

    const VERSION: &str =
        r#"{"Client":{"APIVersion":"4.3.1","Version":"4.3.1","GoVersion":"go1.19.8"}}"#;
    const NETWORK: &str = r#"[{"name":"podman","driver":"bridge","network_interface":"cni-podman0","subnets":[{"subnet":"10.88.0.0/16","gateway":"10.88.0.1"}]}]"#;

    /// A hybrid host in `dir`: v1 controllers plus `unified/` listing `listed`.
    fn hybrid(dir: &Path, listed: &str) -> Hierarchy {
        let root = dir.join("cgroup");
        for c in [
            "cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "freezer",
        ] {
            std::fs::create_dir_all(root.join(c)).unwrap();
        }
        std::fs::create_dir_all(root.join("unified")).unwrap();
        std::fs::write(root.join("unified/cgroup.controllers"), listed).unwrap();
        let mut mi = String::new();
        for (i, c) in [
            "cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "freezer",
        ]
        .iter()
        .enumerate()
        {
            mi.push_str(&format!(
                "{} 1 0:{} / {} rw - cgroup cgroup rw,{c}\n",
                30 + i,
                30 + i,
                root.join(c).display()
            ));
        }
        mi.push_str(&format!(
            "40 1 0:40 / {} rw - cgroup2 cgroup2 rw\n",
            root.join("unified").display()
        ));
        Hierarchy::from_mountinfo(&mi).unwrap()
    }

    fn config(dir: &Path, h: Hierarchy) -> PodmanConfig {
        PodmanConfig {
            root: dir.join("storage"),
            runroot: dir.join("runroot"),
            tmpdir: dir.join("tmp"),
            network_config_dir: dir.join("networks"),
            state_dir: dir.join("state"),
            cache_dir: dir.join("cache"),
            proc: dir.join("proc"),
            sys: dir.join("sys"),
            cni_state_dir: dir.join("cni"),
            hierarchy: h,
            hard_limits: HardLimits {
                nofile: 20000,
                nproc: 96365,
            },
        }
    }

    fn fake() -> Arc<Fake> {
        let f = Arc::new(Fake::default());
        f.reply(
            "crun --version",
            0,
            "crun version 1.8.1\ncommit: f8a0\n",
            "",
        );
        f.reply(
            "runc --version",
            0,
            "runc version 1.1.5+ds1\ncommit: x\n",
            "",
        );
        f.reply("version --format json", 0, VERSION, "");
        f.reply("network inspect podman", 0, NETWORK, "");
        f
    }

    fn request() -> RunRequest {
        RunRequest {
            id: "isolab-e1-r1".parse().unwrap(),
            argv: argv(["true"]),
            workdir: PathBuf::from("/tmp/wd"),
            network: NetworkMode::Bridge,
            limits: Limits::default(),
            cgroup_parent: PathBuf::from("isolab/e1/r1"),
            env: Vec::new(),
        }
    }

    fn image() -> PreparedImage {
        PreparedImage {
            reference: "localhost/isolab/bench:0123456789ab".into(),
            digest: "sha256:1".into(),
            source: PathBuf::from("/img"),
        }
    }

    #[test]
    fn decisions_on_a_hybrid_host() {
        let dir = tempfile::tempdir().unwrap();
        let h = hybrid(dir.path(), "hugetlb\n");
        assert_eq!(
            hybrid_decision(OciRuntime::Crun, &h, true),
            HybridDecision::MountAsV1(vec!["hugetlb".into()])
        );
        assert_eq!(
            hybrid_decision(OciRuntime::Crun, &h, false),
            HybridDecision::FallBackToRunc(vec!["hugetlb".into()])
        );
        assert_eq!(
            hybrid_decision(OciRuntime::Runc, &h, false),
            HybridDecision::NotNeeded
        );
        let empty = hybrid(&dir.path().join("e"), "");
        assert_eq!(
            hybrid_decision(OciRuntime::Crun, &empty, false),
            HybridDecision::NotNeeded
        );
        let v2 = Hierarchy::v2(dir.path());
        assert_eq!(
            hybrid_decision(OciRuntime::Crun, &v2, false),
            HybridDecision::NotNeeded
        );
    }

    #[test]
    fn without_host_fixes_crun_falls_back_to_runc_and_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let h = hybrid(dir.path(), "hugetlb\n");
        let f = fake();
        let p = Podman::with(OciRuntime::Crun, false, config(dir.path(), h), f.clone());
        p.ensure_ready().unwrap();
        assert_eq!(p.effective_runtime(), Some(OciRuntime::Runc));
        let v = p.version().unwrap();
        assert!(
            v.starts_with("podman 4.3.1 (runc 1.1.5+ds1; runc instead of crun"),
            "{v}"
        );
        assert!(v.contains("hugetlb"), "{v}");
        assert_eq!(p.notes().len(), 1);
        let cmd = p.run_command(&request(), &image()).unwrap().join(" ");
        assert!(cmd.contains("--runtime runc"), "{cmd}");
        assert!(!f.calls().iter().any(|c| c.contains("mount")));
    }

    /// Tools that emulate the kernel: mounting the controller as v1 empties the
    /// cgroup2 list; unmounting brings it back only on the second unmount (the
    /// lingering hierarchy).
    struct Kernel {
        fake: Arc<Fake>,
        controllers: PathBuf,
        mountinfo: PathBuf,
        umounts: Mutex<u32>,
    }

    impl Tools for Kernel {
        fn run(&self, argv: &[String]) -> std::io::Result<Output> {
            let line = argv.join(" ");
            if argv[0].ends_with("/mount") {
                std::fs::write(&self.controllers, "").unwrap();
                let mp = argv.last().unwrap();
                std::fs::write(
                    &self.mountinfo,
                    format!("50 1 0:50 / {mp} rw - cgroup cgroup rw,hugetlb\n"),
                )
                .unwrap();
            } else if argv[0].ends_with("/umount") {
                let mut n = lock(&self.umounts);
                *n += 1;
                std::fs::write(&self.mountinfo, "").unwrap();
                if *n >= 2 {
                    std::fs::write(&self.controllers, "hugetlb\n").unwrap();
                }
            }
            let _ = line;
            self.fake.run(argv)
        }
        fn which(&self, p: &str) -> Option<PathBuf> {
            self.fake.which(p)
        }
    }

    #[test]
    fn with_host_fixes_crun_gets_hugetlb_mounted_as_v1_and_shutdown_undoes_it() {
        let dir = tempfile::tempdir().unwrap();
        let h = hybrid(dir.path(), "hugetlb\n");
        let cfg = config(dir.path(), h);
        std::fs::create_dir_all(cfg.proc.join("self")).unwrap();
        let f = fake();
        let k = Arc::new(Kernel {
            fake: f.clone(),
            controllers: dir.path().join("cgroup/unified/cgroup.controllers"),
            mountinfo: cfg.proc.join("self/mountinfo"),
            umounts: Mutex::new(0),
        });
        let p = Podman::with(OciRuntime::Crun, true, cfg.clone(), k);
        p.ensure_ready().unwrap();
        let mp = dir.path().join("cgroup/hugetlb");
        assert!(mp.is_dir());
        assert_eq!(p.effective_runtime(), Some(OciRuntime::Crun));
        let v = p.version().unwrap();
        assert!(
            v.starts_with("podman 4.3.1 (crun 1.8.1; hugetlb mounted as cgroup v1 hierarchy"),
            "{v}"
        );
        assert!(f.calls().contains(&format!(
            "/usr/bin/mount -t cgroup -o hugetlb cgroup {}",
            mp.display()
        )));
        // crun made the parent in the new hierarchy; remove takes it away again.
        std::fs::create_dir_all(mp.join("isolab/e1/r1")).unwrap();
        p.remove(&request()).unwrap();
        assert!(!mp.join("isolab").exists());
        // Another process's engine can undo it: the fix is recorded.
        let q = Podman::with(
            OciRuntime::Crun,
            true,
            cfg,
            Arc::new(Kernel {
                fake: f.clone(),
                controllers: dir.path().join("cgroup/unified/cgroup.controllers"),
                mountinfo: dir.path().join("proc/self/mountinfo"),
                umounts: Mutex::new(0),
            }),
        );
        std::fs::create_dir_all(mp.join("leftover")).unwrap();
        let done = q.shutdown_report().unwrap();
        assert!(
            done.iter().any(|d| d == "hugetlb is back in cgroup2"),
            "{done:?}"
        );
        assert!(!mp.exists());
        let calls = f.calls();
        let umounts = calls.iter().filter(|c| c.contains("/umount ")).count();
        let mounts = calls
            .iter()
            .filter(|c| c.starts_with("/usr/bin/mount "))
            .count();
        assert_eq!((umounts, mounts), (2, 2), "{calls:?}");
        assert!(!dir.path().join("hybrid-fix/host.json").exists());
    }

    #[test]
    fn the_fix_waits_for_another_programs_cgroup_before_it_unmounts() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = config(dir.path(), hybrid(dir.path(), "hugetlb\n"));
        std::fs::create_dir_all(cfg.proc.join("self")).unwrap();
        let f = fake();
        let kernel = |f: &Arc<Fake>| {
            Arc::new(Kernel {
                fake: f.clone(),
                controllers: dir.path().join("cgroup/unified/cgroup.controllers"),
                mountinfo: cfg.proc.join("self/mountinfo"),
                umounts: Mutex::new(1),
            })
        };
        let p = Podman::with(OciRuntime::Crun, true, cfg.clone(), kernel(&f));
        p.ensure_ready().unwrap();
        // A job of another program, made while the hierarchy was mounted, still in
        // use (a file keeps its rmdir from succeeding here); it ends after 200 ms.
        let job = dir.path().join("cgroup/hugetlb/isolab-other/job");
        std::fs::create_dir_all(&job).unwrap();
        std::fs::write(job.join("in-use"), "").unwrap();
        let ends = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            std::fs::remove_file(job.join("in-use")).unwrap();
        });
        let t = Instant::now();
        let done = p.shutdown_report().unwrap();
        ends.join().unwrap();
        assert!(t.elapsed() >= Duration::from_millis(200));
        assert!(
            done.iter().any(|d| d == "hugetlb is back in cgroup2"),
            "{done:?}"
        );
        let calls = f.calls();
        let umount = calls.iter().position(|c| c.contains("/umount ")).unwrap();
        assert!(
            !calls[umount + 1..].iter().any(|c| c.contains("mount ")),
            "one unmount, after the job ended: {calls:?}"
        );
    }

    #[test]
    fn run_command_flags() {
        let dir = tempfile::tempdir().unwrap();
        let p = Podman::with(
            OciRuntime::Runc,
            false,
            config(dir.path(), hybrid(dir.path(), "")),
            fake(),
        );
        let mut r = request();
        r.network = NetworkMode::None;
        r.limits = Limits {
            cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
            cpuset: Some("1".parse::<IdSet>().unwrap()),
            memory_max: Some(Bytes::mib(256)),
            pids_max: Some(128),
            ..Limits::default()
        };
        let cmd = p.run_command(&r, &image()).unwrap().join(" ");
        let globals = format!(
            "/usr/bin/podman --root {d}/storage --runroot {d}/runroot --tmpdir {d}/tmp \
             --network-config-dir {d}/networks --cgroup-manager cgroupfs --events-backend file \
             --runtime runc ",
            d = dir.path().display()
        );
        assert!(cmd.starts_with(&globals), "{cmd}");
        let rest = &cmd[globals.len()..];
        let init = p.init_flags().join(" ");
        let init = if init.is_empty() {
            String::new()
        } else {
            format!("{init} ")
        };
        assert_eq!(
            rest,
            format!(
                "run --rm --pull never {init}--cgroups no-conmon --ulimit nofile=20000:20000 \
                 --ulimit nproc=32768:32768 --name isolab-e1-r1 --cgroup-parent /isolab/e1/r1 \
                 --network none -v /tmp/wd:/tmp/wd -w /tmp/wd --cpu-period 100000 \
                 --cpu-quota 50000 --cpuset-cpus 1 --memory 268435456 --memory-swap -1 \
                 --pids-limit 128 localhost/isolab/bench:0123456789ab true"
            )
        );
        // No pids limit asked: unlimited rather than Podman's 2048.
        r.limits = Limits::default();
        let cmd = p.run_command(&r, &image()).unwrap().join(" ");
        assert!(cmd.contains("--pids-limit -1 localhost/"), "{cmd}");
    }

    #[test]
    fn ulimits_fit_the_hard_limits() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = config(dir.path(), hybrid(dir.path(), ""));
        c.hard_limits = HardLimits {
            nofile: u64::MAX,
            nproc: 1000,
        };
        let p = Podman::with(OciRuntime::Runc, false, c, fake());
        assert_eq!(
            p.ulimit_flags(),
            argv([
                "--ulimit",
                "nofile=1048576:1048576",
                "--ulimit",
                "nproc=1000:1000"
            ])
        );
        assert!(hard_limit(libc::RLIMIT_NOFILE) > 0);
    }

    #[test]
    fn remove_waits_for_the_containers_conmon_and_kills_a_lingering_one() {
        let dir = tempfile::tempdir().unwrap();
        let f = fake();
        let p = Podman::with(
            OciRuntime::Runc,
            false,
            config(dir.path(), hybrid(dir.path(), "")),
            f.clone(),
        );
        let proc = dir.path().join("proc");
        let cmdline = |pid: &str, args: &[&str]| {
            std::fs::create_dir_all(proc.join(pid)).unwrap();
            std::fs::write(proc.join(pid).join("cmdline"), args.join("\0") + "\0").unwrap();
        };
        cmdline(
            "41",
            &[
                "/usr/bin/conmon",
                "-c",
                "abc",
                "-n",
                "isolab-e1-r1",
                "-r",
                "/usr/bin/runc",
            ],
        );
        cmdline("42", &["/usr/bin/conmon", "-n", "isolab-e1-r10"]);
        cmdline("43", &["sleep", "-n", "isolab-e1-r1"]);
        std::fs::create_dir_all(proc.join("self")).unwrap();
        assert_eq!(p.monitor_pids("isolab-e1-r1"), vec![41]);
        p.wait_for_monitors("isolab-e1-r1", Duration::ZERO);
        assert!(
            f.calls().iter().any(|c| c.ends_with("kill -KILL 41")),
            "{:?}",
            f.calls()
        );
        assert!(!f
            .calls()
            .iter()
            .any(|c| c.contains("42") || c.contains("43")));

        // Gone at once: nothing is killed.
        std::fs::remove_dir_all(proc.join("41")).unwrap();
        let before = f.calls().len();
        p.wait_for_monitors("isolab-e1-r1", Duration::ZERO);
        assert_eq!(f.calls().len(), before);
    }

    #[test]
    fn images_gc_remove_and_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::create_dir_all(&img).unwrap();
        std::fs::write(img.join("f"), "x").unwrap();
        let f = fake();
        f.reply("image exists", 1, "", "");
        f.reply(
            "image inspect",
            0,
            r#"[{"Id":"9c39","Digest":"sha256:5e7c"}]"#,
            "",
        );
        f.reply(
            "ps -a",
            0,
            r#"[{"Names":["isolab-z-1"]},{"Names":["isolab-z-2"]}]"#,
            "",
        );
        let p = Podman::with(
            OciRuntime::Runc,
            false,
            config(dir.path(), hybrid(dir.path(), "")),
            f.clone(),
        );
        let prepared = p.prepare_image(&img).unwrap();
        assert!(prepared.reference.starts_with("localhost/isolab/image:"));
        assert_eq!(prepared.digest, "sha256:9c39");
        assert!(f
            .calls()
            .iter()
            .any(|c| c.contains(" import --quiet ") && c.ends_with(&prepared.reference)));
        assert_eq!(
            p.gc("isolab-z-").unwrap(),
            vec![
                "podman container isolab-z-1".to_string(),
                "podman container isolab-z-2".to_string()
            ]
        );
        p.remove(&request()).unwrap();
        assert!(f
            .calls()
            .iter()
            .any(|c| c.ends_with("rm --force --ignore --time 0 isolab-e1-r1")));
        assert_eq!(
            p.host_address(NetworkMode::Bridge),
            Some("10.88.0.1".into())
        );
        assert_eq!(p.host_address(NetworkMode::Host), Some("127.0.0.1".into()));
        assert_eq!(p.host_address(NetworkMode::None), None);
        // The snapshot marks Podman's rules by chain prefix, bridge and subnet.
        let net: NetState = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join("state/net.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(net.net.bridge, "cni-podman0");
        assert!(net.net.markers.contains(&"10.88.".to_string()));
    }

    #[test]
    fn small_parsers() {
        assert_eq!(subnet_marker("10.88.0.0/16"), "10.88.");
        assert_eq!(subnet_marker("192.168.5.0/24"), "192.168.5.");
        assert_eq!(parse_podman_version(VERSION), Some("4.3.1".into()));
        assert_eq!(
            parse_network(NETWORK),
            Some((
                "cni-podman0".into(),
                "10.88.0.0/16".into(),
                "10.88.0.1".into()
            ))
        );
        assert!(parse_ps_names("[]").is_empty());
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("networks/podman")).unwrap();
        std::fs::write(dir.path().join("networks/podman/lock"), "").unwrap();
        assert!(!holds_reservations(dir.path()));
        std::fs::write(dir.path().join("networks/podman/10.88.0.2"), "x").unwrap();
        assert!(holds_reservations(dir.path()));
    }
}
