//! runc and crun: [`OciEngine`] runs each request as an OCI bundle with
//! `runc run` / `crun run` in the foreground.
//!
//! # Image
//! [`Engine::prepare_image`] copies nothing: the image directory is the read-only lower
//! layer of every run's overlay. Its digest is `sha256:` + the SHA-256 of the image's
//! manifest (`.isolab-image.json`, written by `isolab image build`: recipe, build time,
//! every package with its version), read in microseconds, where hashing the 272 MB tree
//! ([`isolab_image::tree_digest`]) would take seconds per experiment. A rebuilt image has
//! a new manifest (its build time changes), so equal digests mean the same build.
//!
//! # One run
//! [`Engine::run_command`] writes the bundle `/run/isolab/oci/<id>/`:
//! - `scratch/`: a tmpfs holding the overlay's `upper/` and `work/` directories, the
//!   same throw-away upper layer as isolab-runtime's overlay root (writes to the root
//!   filesystem go to memory on both, and vanish with the run);
//! - `rootfs/`: the overlay (lower = the image directory);
//! - `config.json`: the OCI runtime spec (below);
//! - `isolab-run.json`: what [`Engine::remove`] must undo (the cgroup parent, and in
//!   which hierarchies it already existed), so that `remove` works from the id alone.
//!
//! and returns `runc run --bundle /run/isolab/oci/<id> <id>` (or `crun run …`): no
//! `--detach`, so the command exits with the container's status, passes its stdout and
//! stderr through, and forwards the signals it receives to the container.
//!
//! # The spec: the same as isolab-runtime's
//! `config.json` comes from [`isolab_runtime::oci_spec`], the generator isolab-runtime
//! itself is configured by, with isolab-runtime's defaults
//! ([`isolab_runtime::default_security`]). So runc, crun and isolab-runtime get the same
//! capabilities (Docker's 14), `noNewPrivileges`, seccomp profile (Docker's default),
//! masked and read-only paths, device allowlist, standard mounts (/proc, a tmpfs /dev,
//! /dev/pts, /dev/shm, /dev/mqueue, read-only /sys) and namespaces (pid, ipc, uts, mount,
//! cgroup, and net unless the network is `host`). (`isolab_image::default_spec()` is
//! *not* that: it is oci-spec's default, with 3 capabilities and no seccomp.) What
//! differs from an isolab-runtime run:
//! - PID 1 is `tini` (Debian's static `tini-static`, bind-mounted read-only at
//!   `/.isolab-init`): runc and crun have no init of their own, and the signals `runc run`
//!   forwards to a workload that is PID 1 are dropped by the kernel unless it handles them
//!   (checked: `sysbench` ignores SIGTERM there), so the container would not stop on
//!   SIGTERM. tini forwards them and reaps zombies, as isolab-runtime's built-in init does.
//!   [`OciEngine::init`] turns it off.
//! - the overlay is mounted by this driver on the host before the runtime starts, not
//!   inside the container's mount namespace;
//! - the container's cgroup is `<cgroup_parent>/<id>` (isolab-runtime: `rt-<id>`), and
//!   runc/crun create it in *every* mounted hierarchy, also `devices`, `name=systemd` and
//!   `hugetlb`, where the lab's parent does not exist: [`Engine::remove`] removes what they
//!   leave there.
//! - on cgroup v2 runc and crun enforce the device allowlist with eBPF; isolab-runtime
//!   does not yet (on v1 all three use the `devices` controller).
//!
//! Limits become `linux.resources`: cpu (quota, period, cpus, mems), memory (limit,
//! swap), pids, blockIO throttles. OCI's `swap` is memory + swap (v1 semantics): on v1
//! isolab's `memory_swap_max` is already that; on v2 it is swap alone, so the spec gets
//! `memory_max + memory_swap_max`, which runc and crun turn back into `memory.swap.max`.
//!
//! Reading the limits back: runc 1.1 moves its `runc init` process into the container's
//! cgroup *before* it writes the limits there, so for a few milliseconds the cgroup holds
//! a process and is unlimited (seen in every root test run). crun and LXC write the
//! limits first. A watcher should read them once the workload runs (or read them again
//! later), not at the first sight of the cgroup.
//!
//! # Stopping
//! SIGTERM to the command stops the container (runc/crun forward it to tini, tini to the
//! workload; the command exits with 143). SIGKILL to the command leaves the container
//! running (checked): [`Engine::remove`] then deletes it (`runc delete --force`, which
//! kills it), unmounts the overlay and the tmpfs (lazily when busy), removes the
//! container's cgroups in every hierarchy (killing whatever is left in them) and the
//! bundle directory.
//!
//! # Networks
//! `none`: a new network namespace, in which runc and crun bring `lo` up (for a runtime
//! that leaves it down, [`OciKind::brings_up_loopback`], the spec gets a
//! `createContainer` hook, `ip link set lo up`, run in the container's namespaces before
//! `pivot_root`); `host`: no network namespace. `bridge` is [`EngineError::Unsupported`]: runc and crun have no
//! networking of their own (use the `isolab` platform's bridge, or docker/podman).
//!
//! # crun on a hybrid cgroup host
//! crun refuses a host whose cgroup2 mount (`/sys/fs/cgroup/unified`) lists controllers
//! in `cgroup.controllers` ("cgroups in hybrid mode not supported, drop all controllers
//! from cgroupv2"). A controller listed there is one no v1 hierarchy holds (here
//! `hugetlb`). With [`OciEngine::allow_host_fixes`], [`Engine::ensure_ready`] mounts a v1
//! hierarchy for each at `/sys/fs/cgroup/<name>` (remounting the `/sys/fs/cgroup` tmpfs
//! read-write first when it is read-only), as `scripts/bench-runtime.sh` does, and
//! [`Engine::shutdown`] undoes exactly that. The fix is the shared one of
//! `hybrid_fix.rs`: each step is recorded in `/run/isolab/hybrid-fix/host.json`
//! before it is taken, so [`Engine::gc`] undoes it when the process that made it was
//! killed. It unmounts a hierarchy only once it holds
//! no cgroup but its root (`/proc/cgroups`): unmounted while a removed cgroup is still
//! being released, the kernel keeps the hierarchy alive and the controller never returns
//! to cgroup2 (seen); when another program's cgroups are in it, it stays mounted and
//! `shutdown` says so. Without it, `ensure_ready` fails with what to
//! do; it does not fall back to runc, since results labelled crun must come from crun.
//!
//! # Shared with the LXC driver
//! [`Host`] (mounts, signals, cgroup directories: the host effects a test replaces) and
//! [`SystemHost`] live in [`crate::host`], below both drivers, as do the helpers for
//! requests (`request.rs`), run state files and cleanup (`run_state.rs`).

//!
//! # Files
//! This file holds the engine's kinds, paths and [`Engine`] implementation; `spec.rs`
//! writes the bundle's `config.json`; `hybrid.rs` holds the hybrid-cgroup fix.

mod hybrid;
mod spec;

use crate::hybrid_fix::UNMOUNT_V1_DEADLINE;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use isolab_runtime::ContainerId;
use serde_json::Value;

use crate::dir_image::prepare_dir_image;
use crate::host::{Host, SystemHost};
use crate::hybrid_fix::gc_dead_owners;
use crate::mounts::{cgroup_version, mount_table};
use crate::request::{parent_rel, path_str};
use crate::run_state::{create_dir, run_dirs_with_prefix, Cleanup, RunState};
use crate::tool::{argv, require, run_ok, version, SystemTools, Tools};
use crate::{Capabilities, Engine, EngineError, NetworkMode, PreparedImage, RunRequest};

/// Where bundles live by default.
pub const DEFAULT_BUNDLES: &str = "/run/isolab/oci";
/// Path of the init inside the container.
pub const INIT_PATH: &str = "/.isolab-init";
/// The static init bind-mounted as PID 1 (Debian package `tini`).
pub const INIT_PROGRAM: &str = "tini-static";
/// The program of the hook that brings `lo` up for a runtime that leaves it down
/// (Debian package `iproute2`).
pub const LOOPBACK_PROGRAM: &str = "ip";

/// An OCI runtime an [`OciEngine`] drives: every runtime that runs an OCI bundle
/// with `RUNTIME run --bundle DIR ID`, deletes a container with
/// `RUNTIME delete --force ID` and keeps one directory per container in its state root
/// is one of these constants ([`RUNC`], [`CRUN`], and `youki` in its own file).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OciKind {
    /// The engine's name, which is also its program.
    pub name: &'static str,
    /// What provides it: a Debian package, or the command that installs it.
    pub package: &'static str,
    /// Where the runtime keeps its container state by default (`--root`).
    pub state_root: &'static str,
    /// One line saying what it is, for `isolab list --platforms`.
    pub summary: &'static str,
    /// Whether it refuses a hybrid cgroup host (controllers listed by the cgroup2
    /// mount), so that the shared hybrid-cgroup fix must run before it can.
    pub refuses_hybrid: bool,
    /// How [`Engine::gc`] finds the runtime's containers.
    pub listing: Listing,
    /// Its word for a private root mount applied recursively, written as the spec's
    /// `linux.rootfsPropagation`: `rprivate` for runc and crun (isolab-runtime's
    /// spec says it too); youki knows only the runtime spec's `shared`, `slave`,
    /// `private` and `unbindable`, and applies each recursively, so `private` is the
    /// same mount flags there (`MS_PRIVATE | MS_REC`), where it refuses `rprivate`.
    pub root_propagation: &'static str,
    /// Whether it brings `lo` up in the container's new network namespace (runc,
    /// crun). For one that leaves it down (youki), the spec gets a `createContainer`
    /// hook that runs [`LOOPBACK_PROGRAM`] (`ip link set lo up`, Debian package
    /// `iproute2`) in the container's namespaces.
    pub brings_up_loopback: bool,
}

/// How [`Engine::gc`] finds the containers an [`OciKind`] runtime knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Listing {
    /// `RUNTIME list --format json` prints a JSON list of `{"id": …}` objects, or
    /// `null` when there are none (runc, crun).
    Json,
    /// The runtime has no JSON listing (youki prints its table whatever `--format`
    /// says): each directory of its state root is a container, named by its id, as
    /// the runtime's own `list` finds them.
    StateRoot,
}

/// runc (Debian package `runc`).
pub const RUNC: OciKind = OciKind {
    name: "runc",
    package: "runc",
    state_root: "/run/runc",
    summary: "runc, the OCI reference runtime, on a bundle of the image (tini as PID 1)",
    refuses_hybrid: false,
    listing: Listing::Json,
    root_propagation: "rprivate",
    brings_up_loopback: true,
};

/// crun (Debian package `crun`): refuses hybrid cgroup hosts.
pub const CRUN: OciKind = OciKind {
    name: "crun",
    package: "crun",
    state_root: "/run/crun",
    summary: "crun, the C OCI runtime, on the same bundle as runc",
    refuses_hybrid: true,
    listing: Listing::Json,
    root_propagation: "rprivate",
    brings_up_loopback: true,
};

impl OciKind {
    /// The engine's name, which is also its program.
    pub fn name(self) -> &'static str {
        self.name
    }

    /// What provides it.
    pub fn package(self) -> &'static str {
        self.package
    }

    /// Where the runtime keeps its container state by default (`--root`).
    pub fn default_state_root(self) -> PathBuf {
        PathBuf::from(self.state_root)
    }
}

/// The host paths an [`OciEngine`] uses; [`OciPaths::new`] gives this host's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciPaths {
    /// Directory of the per-run bundles (`/run/isolab/oci`).
    pub bundles: PathBuf,
    /// The runtime's state directory (`/run/runc`, `/run/crun`): a container whose
    /// directory is there still exists for the runtime.
    pub runtime_state: PathBuf,
    /// This process's mount table (`/proc/self/mountinfo`).
    pub mountinfo: PathBuf,
    /// Where the cgroup hierarchies are mounted (`/sys/fs/cgroup`).
    pub cgroup_root: PathBuf,
    /// The kernel's table of controllers and hierarchies (`/proc/cgroups`).
    pub proc_cgroups: PathBuf,
}

impl OciPaths {
    /// This host's paths for `kind`.
    pub fn new(kind: OciKind) -> OciPaths {
        OciPaths {
            bundles: PathBuf::from(DEFAULT_BUNDLES),
            runtime_state: kind.default_state_root(),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            proc_cgroups: PathBuf::from("/proc/cgroups"),
        }
    }
}

/// A change [`Engine::ensure_ready`] made to the host, undone by [`Engine::shutdown`]
/// (the shared hybrid-cgroup fix's step, recorded on disk before it is taken).
pub use crate::hybrid_fix::HostFix;

/// runc or crun as an [`Engine`].
pub struct OciEngine {
    /// Which runtime.
    pub kind: OciKind,
    /// May [`Engine::ensure_ready`] change the host so that the runtime works (crun on a
    /// hybrid cgroup host: mount v1 hierarchies for the controllers cgroup2 lists)?
    /// [`Engine::shutdown`] undoes what it did.
    pub allow_host_fixes: bool,
    /// Run the workload under `tini` as PID 1 (see the module docs); on by default.
    pub init: bool,
    /// The host paths.
    pub paths: OciPaths,
    tools: Arc<dyn Tools>,
    host: Arc<dyn Host>,
    /// Serialises [`Engine::ensure_ready`]'s fix and [`Engine::shutdown`]'s undo.
    fix_lock: Mutex<()>,
    /// How long [`Engine::shutdown`] waits for a v1 hierarchy it mounted to be empty.
    unmount_wait: Duration,
}

impl std::fmt::Debug for OciEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OciEngine")
            .field("kind", &self.kind)
            .field("allow_host_fixes", &self.allow_host_fixes)
            .field("init", &self.init)
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl OciEngine {
    /// `kind` on this host: its programs, mounts and paths; no host fixes allowed.
    pub fn new(kind: OciKind) -> OciEngine {
        OciEngine::with(
            kind,
            OciPaths::new(kind),
            Arc::new(SystemTools),
            Arc::new(SystemHost),
        )
    }

    /// `kind` with explicit paths, programs and host effects (tests pass fakes).
    pub fn with(
        kind: OciKind,
        paths: OciPaths,
        tools: Arc<dyn Tools>,
        host: Arc<dyn Host>,
    ) -> OciEngine {
        OciEngine {
            kind,
            allow_host_fixes: false,
            init: true,
            paths,
            tools,
            host,
            fix_lock: Mutex::new(()),
            unmount_wait: UNMOUNT_V1_DEADLINE,
        }
    }

    /// The same engine with [`OciEngine::allow_host_fixes`] set to `allow`.
    pub fn allowing_host_fixes(mut self, allow: bool) -> OciEngine {
        self.allow_host_fixes = allow;
        self
    }

    fn engine(&self) -> &'static str {
        self.kind.name()
    }

    fn program(&self) -> Result<PathBuf, EngineError> {
        require(
            &*self.tools,
            self.engine(),
            self.kind.name(),
            self.kind.package(),
        )
    }

    fn init_program(&self) -> Result<PathBuf, EngineError> {
        require(&*self.tools, self.engine(), INIT_PROGRAM, "tini")
    }

    /// [`LOOPBACK_PROGRAM`] for a runtime that leaves `lo` down
    /// ([`OciKind::brings_up_loopback`]); `None` for the others.
    fn loopback_program(&self) -> Result<Option<PathBuf>, EngineError> {
        if self.kind.brings_up_loopback {
            return Ok(None);
        }
        require(&*self.tools, self.engine(), LOOPBACK_PROGRAM, "iproute2").map(Some)
    }

    /// Finds every program a run needs: the runtime, tini (with [`OciEngine::init`])
    /// and the loopback hook's `ip` (for a runtime that leaves `lo` down).
    fn require_programs(&self) -> Result<(), EngineError> {
        self.program()?;
        if self.init {
            self.init_program()?;
        }
        self.loopback_program().map(|_| ())
    }

    fn bundle(&self, id: &ContainerId) -> PathBuf {
        self.paths.bundles.join(id)
    }

    /// The ids of the runtime's containers that start with `prefix`, found as its
    /// [`OciKind::listing`] says.
    fn containers(&self, program: &Path, prefix: &str) -> Result<Vec<String>, EngineError> {
        let engine = self.engine();
        let ids = match self.kind.listing {
            Listing::Json => {
                let command = argv([path_str(program).as_str(), "list", "--format", "json"]);
                let out = run_ok(&*self.tools, engine, &command)?;
                parse_list(&out).map_err(|detail| EngineError::Unexpected {
                    engine,
                    command: command.join(" "),
                    detail,
                })?
            }
            Listing::StateRoot => run_dirs_with_prefix(engine, &self.paths.runtime_state, prefix)?
                .into_iter()
                .map(|id| id.to_string())
                .collect(),
        };
        Ok(ids
            .into_iter()
            .filter(|id| id.starts_with(prefix))
            .collect())
    }

    /// Removes everything of the run `id` (see [`Engine::remove`]).
    fn remove_id(
        &self,
        id: &ContainerId,
        fallback_parent: &Path,
    ) -> Result<Vec<String>, EngineError> {
        let engine = self.engine();
        let dir = self.bundle(id);
        let mut done = Vec::new();
        let mut first_error: Option<EngineError> = None;
        // The runtime's container: only when the runtime still knows it (a `run` that
        // exited normally has deleted it already; this saves a runtime start).
        if self.paths.runtime_state.join(id).exists() {
            match self.program().and_then(|p| {
                run_ok(
                    &*self.tools,
                    engine,
                    &argv([path_str(&p).as_str(), "delete", "--force", id.as_str()]),
                )
            }) {
                Ok(_) => done.push(format!("{engine}: deleted container {id}")),
                Err(e) => first_error = first_error.or(Some(e)),
            }
        }
        let state = RunState::load(engine, &dir)?;
        let state = state.unwrap_or_else(|| RunState::fallback(id, fallback_parent));
        let cleanup = Cleanup {
            engine,
            host: &self.host,
            mountinfo: &self.paths.mountinfo,
        };
        match cleanup.run(&dir, &state) {
            Ok(mut lines) => done.append(&mut lines),
            Err(e) => first_error = first_error.or(Some(e)),
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(done),
        }
    }
}

impl Engine for OciEngine {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn summary(&self) -> &'static str {
        self.kind.summary
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::container(&[NetworkMode::None, NetworkMode::Host])
    }

    fn available(&self) -> Result<(), EngineError> {
        self.require_programs()
    }

    fn version(&self) -> Result<String, EngineError> {
        let program = self.program()?;
        let expected = format!(
            "a `{name} version X` (or `{name} version: X`) line",
            name = self.kind.name()
        );
        version(&*self.tools, self.engine(), &program, &expected, |out| {
            parse_version(self.kind, out)
        })
    }

    fn ensure_ready(&self) -> Result<(), EngineError> {
        self.require_programs()?;
        if !self.kind.refuses_hybrid {
            return Ok(());
        }
        let mounts = mount_table(self.engine(), &self.paths.mountinfo)?;
        let hybrid = self.hybrid_controllers(&mounts)?;
        let unmounted = self.unmounted_v1_controllers(&mounts);
        let mut controllers = hybrid.clone();
        controllers.extend(unmounted.iter().filter(|c| !hybrid.contains(c)).cloned());
        if controllers.is_empty() {
            // A fix already in force (another engine's or isolab process's) is one this
            // engine relies on too: it stays until every user has released it.
            if self.allow_host_fixes {
                let _guard = self.fix_lock.lock().unwrap_or_else(|e| e.into_inner());
                self.hybrid_fix().join()?;
            }
            return Ok(());
        }
        if !self.allow_host_fixes {
            let mut why = Vec::new();
            if !hybrid.is_empty() {
                why.push(format!(
                    "{} refuses this hybrid cgroup host: {} lists {} (\"cgroups in hybrid mode not supported, drop all controllers from cgroupv2\")",
                    self.kind.name,
                    self.paths.cgroup_root.join("unified/cgroup.controllers").display(),
                    hybrid.join(" ")
                ));
            }
            if !unmounted.is_empty() {
                why.push(format!(
                    "the v1 hierarchy of {} exists but is mounted nowhere (it was unmounted while it had cgroups), and crun would write plain directories in its place",
                    unmounted.join(" ")
                ));
            }
            return Err(EngineError::Unsupported {
                engine: self.engine(),
                detail: format!(
                    "{}; allow isolab to mount a v1 hierarchy for {} at {} for the experiment (host fixes; undone at the end), mount it yourself (`mount -t cgroup -o {} cgroup {}`), or use runc",
                    why.join("; "),
                    if controllers.len() == 1 { "it" } else { "each" },
                    self.paths.cgroup_root.join("<name>").display(),
                    controllers[0],
                    self.paths.cgroup_root.join(&controllers[0]).display(),
                ),
            });
        }
        self.fix_hybrid(&controllers, &mounts)
    }

    fn prepare_image(&self, image: &Path) -> Result<PreparedImage, EngineError> {
        prepare_dir_image(self.engine(), image)
    }

    fn command(
        &self,
        request: &RunRequest,
        image: &PreparedImage,
    ) -> Result<Vec<String>, EngineError> {
        let engine = self.engine();
        if request.network == NetworkMode::Bridge {
            return Err(EngineError::Unsupported {
                engine,
                detail: format!(
                    "network `bridge`: {engine} has no networking of its own (it only creates namespaces); use network `none` or `host`, the `isolab` platform (its bridge `isolab0`), or docker/podman for a bridged container"
                ),
            });
        }
        let program = self.program()?;
        let init = if self.init {
            Some(self.init_program()?)
        } else {
            None
        };
        let loopback = match request.network {
            NetworkMode::None => self.loopback_program()?,
            _ => None,
        };
        let mounts = mount_table(engine, &self.paths.mountinfo)?;
        let version = cgroup_version(engine, &self.paths.mountinfo)?;
        let spec = self.spec(request, version, init.as_deref(), loopback.as_deref())?;
        let dir = self.bundle(&request.id);
        if dir.exists() {
            // A leftover of a killed run with the same id.
            self.remove_id(&request.id, &request.cgroup_parent)?;
        }
        let state = RunState::new(
            request,
            vec![parent_rel(&request.cgroup_parent).join(&request.id)],
            Vec::new(),
            &mounts,
        );
        let prepared = (|| {
            create_dir(engine, &dir, "create the bundle directory")?;
            state.save(engine, &dir)?;
            let scratch = dir.join("scratch");
            let rootfs = dir.join("rootfs");
            create_dir(engine, &scratch, "create the overlay scratch directory")?;
            create_dir(engine, &rootfs, "create the root file system mount point")?;
            self.host
                .mount_tmpfs(&scratch)
                .map_err(|source| EngineError::Io {
                    engine,
                    action: "mount a tmpfs (the overlay's upper layer) on",
                    path: scratch.clone(),
                    source,
                })?;
            let (upper, work) = (scratch.join("upper"), scratch.join("work"));
            create_dir(engine, &upper, "create the overlay upper directory")?;
            create_dir(engine, &work, "create the overlay work directory")?;
            self.host
                .mount_overlay(Path::new(&image.reference), &upper, &work, &rootfs)
                .map_err(|source| EngineError::Io {
                    engine,
                    action: "mount the overlay root (lower = the image) on",
                    path: rootfs.clone(),
                    source,
                })?;
            let config = dir.join("config.json");
            let text = serde_json::to_vec_pretty(&spec).map_err(|e| EngineError::Unexpected {
                engine,
                command: "serialise config.json".into(),
                detail: e.to_string(),
            })?;
            std::fs::write(&config, text).map_err(|source| EngineError::Io {
                engine,
                action: "write",
                path: config,
                source,
            })
        })();
        if let Err(e) = prepared {
            let _ = self.remove_id(&request.id, &request.cgroup_parent);
            return Err(e);
        }
        Ok(vec![
            path_str(&program),
            "run".into(),
            "--bundle".into(),
            path_str(&dir),
            request.id.to_string(),
        ])
    }

    fn remove_container(&self, request: &RunRequest) -> Result<(), EngineError> {
        self.remove_id(&request.id, &request.cgroup_parent)
            .map(|_| ())
    }

    fn gc(&self, prefix: &str) -> Result<Vec<String>, EngineError> {
        let engine = self.engine();
        let mut lines = Vec::new();
        let program = self.program()?;
        for id in self.containers(&program, prefix)? {
            run_ok(
                &*self.tools,
                engine,
                &argv([path_str(&program).as_str(), "delete", "--force", &id]),
            )?;
            lines.push(format!("{engine}: deleted container {id}"));
        }
        for id in run_dirs_with_prefix(engine, &self.paths.bundles, prefix)? {
            let mut done = self.remove_id(&id, Path::new(""))?;
            lines.append(&mut done);
            lines.push(format!(
                "{engine}: removed bundle {}",
                self.bundle(&id).display()
            ));
        }
        Ok(lines)
    }

    fn gc_host_fixes(&self) -> Result<Vec<String>, EngineError> {
        // A hybrid-cgroup fix whose users were all killed before their shutdown.
        let proc = self
            .paths
            .proc_cgroups
            .parent()
            .unwrap_or(Path::new("/proc"));
        gc_dead_owners(
            self.engine(),
            &*self.tools,
            "mount",
            &self.fix_state_dir(),
            proc,
            &mut |controller, path| self.unmount_v1(controller, path).map(|()| Vec::new()),
        )
    }

    fn shutdown(&self) -> Result<(), EngineError> {
        let _guard = self.fix_lock.lock().unwrap_or_else(|e| e.into_inner());
        // This engine leaves the fix; the last of its users (of any engine or isolab
        // process) undoes it, and `gc` does once every user's process is gone.
        self.hybrid_fix()
            .release(&mut |controller, path| self.unmount_v1(controller, path).map(|()| Vec::new()))
            .map(|_| ())
    }
}

/// `runc version 1.1.5+ds1` → `runc 1.1.5+ds1`; `crun version 1.8.1` → `crun 1.8.1`;
/// `youki version: 0.7.0` → `youki 0.7.0` (youki puts a colon after `version`).
fn parse_version(kind: OciKind, out: &str) -> Option<String> {
    let prefix = format!("{} version", kind.name());
    out.lines()
        .filter_map(|l| l.trim().strip_prefix(&prefix))
        .map(|rest| rest.strip_prefix(':').unwrap_or(rest))
        .find(|v| v.starts_with(' '))
        .map(|v| format!("{} {}", kind.name(), v.trim()))
        .filter(|s| s.len() > kind.name().len() + 1)
}

/// The ids of `runc list --format json` / `crun list --format json` (runc prints `null`
/// when there are none).
fn parse_list(out: &str) -> Result<Vec<String>, String> {
    let value: Value = serde_json::from_str(out.trim())
        .map_err(|e| format!("not JSON ({e}): {}", crate::tool::tail(out, 300)))?;
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Array(list) => list
            .iter()
            .map(|c| {
                c.get("id")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| format!("a container without an \"id\": {c}"))
            })
            .collect(),
        other => Err(format!("expected a list of containers, got {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::hybrid::cgroups_in_hierarchy;
    use super::spec::{oci_config, oci_resources};
    use super::*;
    use crate::fakes::*;
    use crate::request::check_request;
    use crate::request::DEFAULT_PATH;
    use isolab_cgroups::{Bytes, CpuQuota, DeviceNumber, IdSet, IoThrottle};
    use isolab_cgroups::{Limits, Version};
    use serde_json::json;
    use std::time::Instant;

    fn request(workdir: &Path) -> RunRequest {
        RunRequest {
            id: "isolab-t1-c0-r1".parse().unwrap(),
            argv: vec!["sysbench".into(), "cpu".into(), "run".into()],
            workdir: workdir.to_path_buf(),
            network: NetworkMode::None,
            limits: Limits::default(),
            cgroup_parent: PathBuf::from("isolab/t1/c0-r1"),
            env: vec!["FOO=bar baz".into()],
        }
    }

    fn engine(
        kind: OciKind,
        sys: &FakeSystem,
        tools: Arc<FakeTools>,
        host: Arc<FakeHost>,
    ) -> OciEngine {
        let paths = OciPaths {
            bundles: sys.root.join("run/oci"),
            runtime_state: sys.root.join("run/runtime"),
            mountinfo: sys.mountinfo.clone(),
            cgroup_root: sys.root.join("cg"),
            proc_cgroups: sys.root.join("proc-cgroups"),
        };
        OciEngine::with(kind, paths, tools, host)
    }

    fn full_limits() -> Limits {
        Limits {
            cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
            cpuset: Some("1".parse::<IdSet>().unwrap()),
            mems: Some("0".parse::<IdSet>().unwrap()),
            memory_max: Some(Bytes(256 << 20)),
            memory_swap_max: Some(Bytes(512 << 20)),
            pids_max: Some(128),
            io: vec![IoThrottle {
                device: DeviceNumber {
                    major: 254,
                    minor: 0,
                },
                read_bps: Some(10 << 20),
                write_bps: None,
                read_iops: None,
                write_iops: Some(500),
            }],
            ..Limits::default()
        }
    }

    #[test]
    fn versions_are_parsed_from_the_first_lines() {
        let runc =
            "runc version 1.1.5+ds1\ncommit: 1.1.5+ds1-1+deb12u1\nspec: 1.0.2-dev\ngo: go1.19.8\n";
        assert_eq!(parse_version(RUNC, runc).unwrap(), "runc 1.1.5+ds1");
        let crun = "crun version 1.8.1\ncommit: f8a096be060b22ccd3d5f3ebe44108517fbf6c30\nrundir: /run/crun\n";
        assert_eq!(parse_version(CRUN, crun).unwrap(), "crun 1.8.1");
        assert_eq!(parse_version(CRUN, "runc version 1.1.5\n"), None);
        assert_eq!(parse_version(RUNC, "runc version \n"), None);
        // youki 0.7.0's `--version`.
        let youki = "youki version: 0.7.0\ncommit: 0.7.0-unknown\nspec: 1.2.1\nrustc: 1.95.0\nlibseccomp: 2.5.4\n";
        assert_eq!(parse_version(YOUKI_LIKE, youki).unwrap(), "youki 0.7.0");
        assert_eq!(parse_version(YOUKI_LIKE, "youki version:\n"), None);
        assert_eq!(parse_version(YOUKI_LIKE, "youki versions 1\n"), None);
    }

    /// A runtime as youki: no JSON listing, only the runtime spec's propagation words,
    /// `lo` left down.
    const YOUKI_LIKE: OciKind = OciKind {
        name: "youki",
        package: "cargo install youki",
        state_root: "/run/youki",
        summary: "a runtime without a JSON listing",
        refuses_hybrid: false,
        listing: Listing::StateRoot,
        root_propagation: "private",
        brings_up_loopback: false,
    };

    #[test]
    fn a_runtime_that_leaves_lo_down_gets_the_loopback_hook_and_its_propagation_word() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        sys.lab_parent("isolab/t1/c0-r1");
        let config = |kind: OciKind, network: NetworkMode| -> Value {
            let e = engine(kind, &sys, Arc::default(), Arc::default());
            let mut req = request(&sys.workdir);
            req.network = network;
            e.run_command(&req, &prepare_image_stub()).unwrap();
            let path = sys.root.join("run/oci").join(&req.id).join("config.json");
            let config = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
            e.remove(&req).unwrap();
            config
        };
        let youki = config(YOUKI_LIKE, NetworkMode::None);
        assert_eq!(
            youki["hooks"],
            json!({"createContainer": [
                {"path": "/usr/bin/ip", "args": ["ip", "link", "set", "lo", "up"]}
            ]})
        );
        assert_eq!(youki["linux"]["rootfsPropagation"], json!("private"));
        // The host's network: its `lo` is up already.
        assert!(config(YOUKI_LIKE, NetworkMode::Host).get("hooks").is_none());
        let runc = config(RUNC, NetworkMode::None);
        assert!(runc.get("hooks").is_none());
        assert_eq!(runc["linux"]["rootfsPropagation"], json!("rprivate"));
        // Without iproute2, it says what to install.
        let tools = Arc::new(FakeTools {
            missing: vec!["ip".into()],
            ..FakeTools::default()
        });
        let e = engine(YOUKI_LIKE, &sys, tools.clone(), Arc::default());
        let err = e.available().unwrap_err().to_string();
        assert!(err.contains("apt-get install iproute2"), "{err}");
        engine(RUNC, &sys, tools, Arc::default())
            .available()
            .unwrap();
    }

    #[test]
    fn gc_finds_the_containers_of_a_runtime_without_json_in_its_state_root() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        let tools = Arc::new(FakeTools::default());
        let e = engine(YOUKI_LIKE, &sys, tools.clone(), Arc::default());
        for id in ["isolab-e1-a", "isolab-e2-b", "other"] {
            std::fs::create_dir_all(sys.root.join("run/runtime").join(id)).unwrap();
        }
        // A file is no container.
        std::fs::write(sys.root.join("run/runtime/isolab-e1-file"), "").unwrap();
        std::fs::create_dir_all(sys.root.join("run/oci/isolab-e1-z")).unwrap();
        let lines = e.gc("isolab-e1-").unwrap();
        assert_eq!(
            tools.calls(),
            ["/usr/bin/youki delete --force isolab-e1-a"],
            "no `youki list`"
        );
        assert!(
            lines
                .iter()
                .any(|l| l == "youki: deleted container isolab-e1-a"),
            "{lines:?}"
        );
        assert!(!sys.root.join("run/oci/isolab-e1-z").exists());
    }

    #[test]
    fn container_lists_are_parsed() {
        assert!(parse_list("null\n").unwrap().is_empty());
        assert!(parse_list("[\n\n]\n").unwrap().is_empty());
        let out = r#"[{"ociVersion":"1.0.2","id":"isolab-a","pid":1},{"id":"other"}]"#;
        assert_eq!(parse_list(out).unwrap(), ["isolab-a", "other"]);
        assert!(parse_list("ID PID\n").is_err());
        assert!(parse_list(r#"[{"pid":1}]"#).is_err());
    }

    #[test]
    fn resources_on_v1_and_v2() {
        let limits = full_limits();
        let v1 = Value::Object(oci_resources("runc", &limits, Version::V1).unwrap());
        assert_eq!(
            v1,
            json!({
                "cpu": {"quota": 50000, "period": 100000, "cpus": "1", "mems": "0"},
                "memory": {"limit": 268435456, "swap": 536870912},
                "pids": {"limit": 128},
                "blockIO": {
                    "throttleReadBpsDevice": [{"major": 254, "minor": 0, "rate": 10485760}],
                    "throttleWriteIOPSDevice": [{"major": 254, "minor": 0, "rate": 500}]
                }
            })
        );
        // v2: isolab's swap is swap alone; OCI's is memory + swap.
        let v2 = Value::Object(oci_resources("runc", &limits, Version::V2).unwrap());
        assert_eq!(v2["memory"]["swap"], json!(768u64 << 20));
        assert_eq!(v2["cpu"], v1["cpu"]);
        assert!(oci_resources("runc", &Limits::default(), Version::V1)
            .unwrap()
            .is_empty());
        let swap_only = Limits {
            memory_swap_max: Some(Bytes(1 << 20)),
            ..Limits::default()
        };
        let err = oci_resources("crun", &swap_only, Version::V2).unwrap_err();
        assert!(err.to_string().contains("memory limit"), "{err}");
    }

    #[test]
    fn the_spec_is_isolab_runtimes_with_our_root_cgroup_and_init() {
        let dir = tempfile::tempdir().unwrap();
        let mut req = request(dir.path());
        req.limits = full_limits();
        let spec = oci_config(
            "runc",
            &req,
            Version::V1,
            Some(Path::new("/usr/bin/tini-static")),
        )
        .unwrap();
        let p = &spec["process"];
        assert_eq!(
            p["args"],
            json!(["/.isolab-init", "--", "sysbench", "cpu", "run"])
        );
        assert_eq!(p["cwd"], json!(dir.path()));
        assert_eq!(p["terminal"], json!(false));
        assert_eq!(p["noNewPrivileges"], json!(true));
        let env: Vec<&str> = p["env"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap())
            .collect();
        assert_eq!(env, [DEFAULT_PATH, "TERM=xterm", "FOO=bar baz"]);
        // Docker's 14 capabilities, as isolab-runtime.
        assert_eq!(p["capabilities"]["bounding"].as_array().unwrap().len(), 14);
        assert_eq!(spec["root"], json!({"path": "rootfs", "readonly": false}));
        assert_eq!(spec["hostname"], json!("isolab-t1-c0-r1"));
        let linux = &spec["linux"];
        assert_eq!(
            linux["cgroupsPath"],
            json!("/isolab/t1/c0-r1/isolab-t1-c0-r1")
        );
        assert!(linux["seccomp"].is_object(), "Docker's seccomp profile");
        assert!(linux["maskedPaths"].as_array().unwrap().len() > 5);
        assert_eq!(linux["resources"]["cpu"]["quota"], json!(50000));
        assert_eq!(linux["resources"]["memory"]["swap"], json!(512u64 << 20));
        assert!(linux["resources"]["devices"].as_array().unwrap().len() > 5);
        let ns: Vec<&str> = linux["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert!(ns.contains(&"network"), "{ns:?}");
        let mounts = spec["mounts"].as_array().unwrap();
        let bind = |dst: &str| {
            mounts
                .iter()
                .find(|m| m["destination"] == json!(dst))
                .cloned()
        };
        let work = bind(&dir.path().display().to_string()).unwrap();
        assert_eq!(work["source"], json!(dir.path()));
        assert_eq!(work["options"], json!(["rbind"]));
        let init = bind(INIT_PATH).unwrap();
        assert_eq!(init["source"], json!("/usr/bin/tini-static"));
        assert_eq!(init["options"], json!(["rbind", "ro"]));

        req.network = NetworkMode::Host;
        let spec = oci_config("runc", &req, Version::V2, None).unwrap();
        let ns: Vec<&str> = spec["linux"]["namespaces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["type"].as_str().unwrap())
            .collect();
        assert!(!ns.contains(&"network"), "{ns:?}");
        assert_eq!(spec["process"]["args"], json!(["sysbench", "cpu", "run"]));
        assert_eq!(
            spec["linux"]["resources"]["memory"]["swap"],
            json!(768u64 << 20)
        );
    }

    #[test]
    fn requests_are_checked_before_touching_the_host() {
        let dir = tempfile::tempdir().unwrap();
        let ok = request(dir.path());
        assert!(check_request("runc", &ok).is_ok());
        let bad = |f: &dyn Fn(&mut RunRequest)| {
            let mut r = ok.clone();
            f(&mut r);
            check_request("runc", &r).unwrap_err().to_string()
        };
        // Ids are checked by their type, before a request can hold them.
        assert!(ContainerId::new("../x")
            .unwrap_err()
            .to_string()
            .contains("container id"));
        assert!(ContainerId::new("")
            .unwrap_err()
            .to_string()
            .contains("container id"));
        assert!(bad(&|r| r.argv.clear()).contains("command is empty"));
        assert!(bad(&|r| r.workdir = "rel".into()).contains("working directory"));
        assert!(bad(&|r| r.workdir = dir.path().join("missing")).contains("working directory"));
        assert!(bad(&|r| r.cgroup_parent = "a/../b".into()).contains("cgroup parent"));
        assert!(bad(&|r| r.cgroup_parent = "".into()).contains("cgroup parent"));
        assert!(bad(&|r| r.env = vec!["NOVALUE".into()]).contains("environment entry"));
        let mut abs = ok.clone();
        abs.cgroup_parent = "/isolab/x".into();
        assert!(check_request("runc", &abs).is_ok());
    }

    #[test]
    fn run_command_writes_a_bundle_and_remove_undoes_it() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        sys.lab_parent("isolab/t1/c0-r1");
        let (tools, host) = (
            Arc::new(FakeTools::default()),
            Arc::new(FakeHost::default()),
        );
        let e = engine(RUNC, &sys, tools.clone(), host.clone());
        let req = request(&sys.workdir);
        let image = PreparedImage {
            reference: "/images/bench".into(),
            digest: "sha256:x".into(),
            source: "/images/bench".into(),
        };
        let cmd = e.run_command(&req, &image).unwrap();
        let bundle = sys.root.join("run/oci/isolab-t1-c0-r1");
        assert_eq!(
            cmd,
            [
                "/usr/bin/runc",
                "run",
                "--bundle",
                &path_str(&bundle),
                "isolab-t1-c0-r1"
            ]
        );
        assert_eq!(
            host.calls(),
            [
                format!("tmpfs {}", bundle.join("scratch").display()),
                format!(
                    "overlay /images/bench {} {} {}",
                    bundle.join("scratch/upper").display(),
                    bundle.join("scratch/work").display(),
                    bundle.join("rootfs").display()
                )
            ]
        );
        let config: Value =
            serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
        assert_eq!(
            config["linux"]["cgroupsPath"],
            json!("/isolab/t1/c0-r1/isolab-t1-c0-r1")
        );
        let state = RunState::load("runc", &bundle).unwrap().unwrap();
        assert_eq!(
            state.cgroups,
            [PathBuf::from("isolab/t1/c0-r1/isolab-t1-c0-r1")]
        );
        assert_eq!(
            state.parent_existed_in.len(),
            8,
            "{:?}",
            state.parent_existed_in
        );

        // What runc leaves: the container's cgroup (still holding a process after a
        // kill) and the parent chain in the hierarchies the lab does not use.
        for c in V1_CONTROLLERS.iter().chain(&["unified"]) {
            std::fs::create_dir_all(sys.cg(c).join("isolab/t1/c0-r1/isolab-t1-c0-r1")).unwrap();
        }
        std::fs::write(
            sys.cg("cpu/isolab/t1/c0-r1/isolab-t1-c0-r1/cgroup.procs"),
            "4242\n",
        )
        .unwrap();
        std::fs::create_dir_all(sys.root.join("run/runtime/isolab-t1-c0-r1")).unwrap();
        // The lab's collect() passes no cgroup parent: the state file has it.
        let mut collect = req.clone();
        collect.cgroup_parent = PathBuf::new();
        collect.argv.clear();
        e.remove(&collect).unwrap();
        assert!(tools
            .calls()
            .contains(&"/usr/bin/runc delete --force isolab-t1-c0-r1".to_string()));
        assert!(host.calls().contains(&"kill 4242".to_string()));
        assert!(!bundle.exists());
        for c in V1_CONTROLLERS.iter().chain(&["unified"]) {
            let parent = sys.cg(c).join("isolab/t1/c0-r1");
            if ["devices", "systemd"].contains(c) {
                assert!(
                    !sys.cg(c).join("isolab").exists(),
                    "{c}: the engine's chain is pruned"
                );
            } else {
                assert!(parent.is_dir(), "{c}: the lab's parent stays");
                assert_eq!(
                    std::fs::read_dir(&parent).unwrap().count(),
                    0,
                    "{c}: no child left"
                );
            }
        }
        // Idempotent.
        e.remove(&req).unwrap();
    }

    #[test]
    fn remove_unmounts_what_is_mounted_below_the_bundle() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("run/oci/isolab-x");
        let extra = format!(
            "60 22 0:70 / {} rw - tmpfs tmpfs rw\n61 22 0:71 / {} rw - overlay overlay rw\n",
            bundle.join("scratch").display(),
            bundle.join("rootfs").display()
        );
        let sys = FakeSystem::v1(dir.path(), &extra);
        std::fs::create_dir_all(&bundle).unwrap();
        let (tools, host) = (
            Arc::new(FakeTools::default()),
            Arc::new(FakeHost::default()),
        );
        let e = engine(CRUN, &sys, tools.clone(), host.clone());
        let mut req = request(&sys.workdir);
        req.id = "isolab-x".parse().unwrap();
        e.remove(&req).unwrap();
        assert_eq!(
            host.calls(),
            [
                format!("umount {}", bundle.join("rootfs").display()),
                format!("umount {}", bundle.join("scratch").display())
            ]
        );
        // The runtime did not know it: no `crun delete`.
        assert!(tools.calls().is_empty(), "{:?}", tools.calls());
        assert!(!bundle.exists());
    }

    #[test]
    fn bridge_networks_are_unsupported_and_host_has_loopback() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        let e = engine(RUNC, &sys, Arc::default(), Arc::default());
        let mut req = request(&sys.workdir);
        req.network = NetworkMode::Bridge;
        let image = prepare_image_stub();
        let err = e.run_command(&req, &image).unwrap_err().to_string();
        assert!(
            err.contains("bridge") && err.contains("docker/podman"),
            "{err}"
        );
        assert_eq!(
            e.host_address(NetworkMode::Host).as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(e.host_address(NetworkMode::None), None);
        assert_eq!(e.host_address(NetworkMode::Bridge), None);
        assert!(!sys.root.join("run/oci").join(&req.id).exists());
    }

    fn prepare_image_stub() -> PreparedImage {
        PreparedImage {
            reference: "/images/bench".into(),
            digest: "sha256:x".into(),
            source: "/images/bench".into(),
        }
    }

    #[test]
    fn missing_programs_name_their_packages() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        let tools = Arc::new(FakeTools {
            missing: vec!["crun".into(), "tini-static".into()],
            ..FakeTools::default()
        });
        let e = engine(CRUN, &sys, tools.clone(), Arc::default());
        assert!(e
            .ensure_ready()
            .unwrap_err()
            .to_string()
            .contains("apt-get install crun"));
        let tools = Arc::new(FakeTools {
            missing: vec!["tini-static".into()],
            ..FakeTools::default()
        });
        let e = engine(RUNC, &sys, tools, Arc::default());
        assert!(e
            .ensure_ready()
            .unwrap_err()
            .to_string()
            .contains("apt-get install tini"));
    }

    #[test]
    fn crun_on_a_hybrid_host_needs_the_fix_and_shutdown_undoes_it() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        std::fs::write(sys.cg("unified/cgroup.controllers"), "hugetlb\n").unwrap();
        let tools = Arc::new(FakeTools::default());
        let e = engine(CRUN, &sys, tools.clone(), Arc::default());
        let err = e.ensure_ready().unwrap_err().to_string();
        assert!(err.contains("hugetlb") && err.contains("use runc"), "{err}");
        assert!(tools.calls().is_empty());
        // runc does not care.
        let runc = engine(RUNC, &sys, tools.clone(), Arc::default());
        runc.ensure_ready().unwrap();

        let e = e.allowing_host_fixes(true);
        e.ensure_ready().unwrap();
        let target = sys.cg("hugetlb");
        assert_eq!(
            tools.calls(),
            [format!(
                "mount -t cgroup -o hugetlb cgroup {}",
                target.display()
            )]
        );
        assert_eq!(
            e.host_fixes(),
            [
                HostFix::CreatedDir(target.clone()),
                HostFix::MountedV1 {
                    controller: "hugetlb".into(),
                    path: target.clone()
                }
            ]
        );
        e.shutdown().unwrap();
        assert!(!target.exists());
        assert_eq!(
            tools.calls().last().unwrap(),
            &format!("umount {}", target.display())
        );
        assert!(e.host_fixes().is_empty());
        e.shutdown().unwrap();

        // A cgroup2 mount without controllers needs nothing.
        std::fs::write(sys.cg("unified/cgroup.controllers"), "\n").unwrap();
        let e = engine(CRUN, &sys, Arc::default(), Arc::default());
        e.ensure_ready().unwrap();
    }

    #[test]
    fn a_read_only_cgroup_tmpfs_is_remounted_and_restored() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        // The later line for the same mount point wins (it is mounted over).
        let extra = format!(
            "70 22 0:80 / {} ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755\n",
            sys.root.join("cg").display()
        );
        let mut info = std::fs::read_to_string(&sys.mountinfo).unwrap();
        info.push_str(&extra);
        std::fs::write(&sys.mountinfo, info).unwrap();
        std::fs::write(sys.cg("unified/cgroup.controllers"), "hugetlb rdma\n").unwrap();
        std::fs::create_dir_all(sys.cg("rdma")).unwrap();
        let tools = Arc::new(FakeTools::default());
        let e = engine(CRUN, &sys, tools.clone(), Arc::default()).allowing_host_fixes(true);
        e.ensure_ready().unwrap();
        let cg = path_str(&sys.root.join("cg"));
        assert_eq!(
            tools.calls(),
            [
                format!("mount -o remount,rw {cg}"),
                format!("mount -t cgroup -o hugetlb cgroup {cg}/hugetlb"),
                format!("mount -t cgroup -o rdma cgroup {cg}/rdma"),
            ]
        );
        e.shutdown().unwrap();
        let calls = tools.calls();
        assert_eq!(
            &calls[3..],
            [
                format!("umount {cg}/rdma"),
                format!("umount {cg}/hugetlb"),
                format!("mount -o remount,ro {cg}"),
            ]
        );
        assert!(sys.cg("rdma").exists(), "a mount point that existed stays");
        assert!(!sys.cg("hugetlb").exists());
    }

    #[test]
    fn an_unmounted_v1_hierarchy_is_mounted_again_for_crun() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        std::fs::write(sys.cg("unified/cgroup.controllers"), "").unwrap();
        std::fs::write(
            sys.root.join("proc-cgroups"),
            "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t7\t1\nnet_cls\t0\t7\t1\nhugetlb\t21\t4\t1\n",
        )
        .unwrap();
        let tools = Arc::new(FakeTools::default());
        let e = engine(CRUN, &sys, tools.clone(), Arc::default());
        let err = e.ensure_ready().unwrap_err().to_string();
        assert!(
            err.contains("hugetlb exists but is mounted nowhere"),
            "{err}"
        );
        let e = e.allowing_host_fixes(true);
        e.ensure_ready().unwrap();
        assert_eq!(
            tools.calls(),
            [format!(
                "mount -t cgroup -o hugetlb cgroup {}",
                sys.cg("hugetlb").display()
            )]
        );
    }

    #[test]
    fn proc_cgroups_counts() {
        let text = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t1\t12\t1\nhugetlb\t14\t3\t1\nrdma\t0\t1\t1\n";
        assert_eq!(cgroups_in_hierarchy(text, "hugetlb"), Some(3));
        assert_eq!(cgroups_in_hierarchy(text, "cpu"), Some(12));
        assert_eq!(cgroups_in_hierarchy(text, "rdma"), None);
        assert_eq!(cgroups_in_hierarchy(text, "net_cls"), None);
    }

    /// crun on a hybrid host whose cgroup2 lists hugetlb, ready: hugetlb mounted as v1.
    fn crun_with_hugetlb_mounted(dir: &Path) -> (FakeSystem, Arc<FakeTools>, OciEngine) {
        let sys = FakeSystem::v1(dir, "");
        std::fs::write(sys.cg("unified/cgroup.controllers"), "hugetlb\n").unwrap();
        let tools = Arc::new(FakeTools::default());
        let e = engine(CRUN, &sys, tools.clone(), Arc::default()).allowing_host_fixes(true);
        e.ensure_ready().unwrap();
        (sys, tools, e)
    }

    #[test]
    fn the_v1_hierarchy_is_unmounted_only_once_empty() {
        let dir = tempfile::tempdir().unwrap();
        let (sys, tools, e) = crun_with_hugetlb_mounted(dir.path());
        // A cgroup the kernel has not released yet, then released in the meantime.
        std::fs::write(sys.root.join("proc-cgroups"), "hugetlb\t14\t2\t1\n").unwrap();
        let proc_cgroups = sys.root.join("proc-cgroups");
        let release = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            std::fs::write(proc_cgroups, "hugetlb\t14\t1\t1\n").unwrap();
        });
        let t = Instant::now();
        e.shutdown().unwrap();
        release.join().unwrap();
        assert!(t.elapsed() >= Duration::from_millis(100));
        assert!(tools.calls().last().unwrap().starts_with("umount "));

        // Someone else's cgroup in it: it stays mounted, and the error says why.
        let tools = Arc::new(FakeTools::default());
        let e = engine(CRUN, &sys, tools.clone(), Arc::default()).allowing_host_fixes(true);
        e.ensure_ready().unwrap();
        std::fs::create_dir_all(sys.cg("hugetlb/docker")).unwrap();
        let mut e = e;
        e.paths.proc_cgroups = sys.root.join("none");
        e.unmount_wait = Duration::from_millis(50);
        let err = e.shutdown().unwrap_err().to_string();
        assert!(
            err.contains("hugetlb/docker") && err.contains("stays mounted"),
            "{err}"
        );
        assert!(
            !tools.calls().iter().any(|c| c.starts_with("umount")),
            "{:?}",
            tools.calls()
        );
    }

    #[test]
    fn a_cgroup_made_while_the_hierarchy_is_unmounted_keeps_it_mounted() {
        let dir = tempfile::tempdir().unwrap();
        let (sys, tools, e) = crun_with_hugetlb_mounted(dir.path());
        let proc_cgroups = sys.root.join("proc-cgroups");
        std::fs::write(&proc_cgroups, "hugetlb\t14\t1\t1\n").unwrap();
        // Another isolab process makes its job's cgroup just before the unmount: the
        // kernel keeps the hierarchy alive, hidden; it is mounted again, and kept.
        let job = sys.cg("hugetlb/isolab-other/job");
        let made = job.clone();
        tools.on_run("umount ", move || {
            std::fs::create_dir_all(&made).unwrap();
            std::fs::write(&proc_cgroups, "hugetlb\t14\t3\t1\n").unwrap();
        });
        let err = e.shutdown().unwrap_err().to_string();
        assert!(
            err.contains("isolab-other") && err.contains("stays mounted"),
            "{err}"
        );
        let mp = path_str(&sys.cg("hugetlb"));
        assert_eq!(
            &tools.calls()[1..],
            [
                format!("umount {mp}"),
                format!("mount -t cgroup -o hugetlb cgroup {mp}"),
            ]
        );
        assert!(job.is_dir());
        assert_eq!(e.host_fixes().len(), 2, "the fix stays recorded");
    }

    #[test]
    fn a_failed_fix_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        std::fs::write(sys.cg("unified/cgroup.controllers"), "hugetlb\n").unwrap();
        let tools = Arc::new(FakeTools::default());
        tools.answer("mount -t", 32, "");
        let e = engine(CRUN, &sys, tools, Arc::default()).allowing_host_fixes(true);
        let err = e.ensure_ready().unwrap_err().to_string();
        assert!(
            err.contains("mount -t cgroup -o hugetlb") && err.contains("boom"),
            "{err}"
        );
        // The directory it created is still undone.
        e.shutdown().unwrap();
        assert!(!sys.cg("hugetlb").exists());
    }

    #[test]
    fn gc_deletes_containers_and_bundles_with_the_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        let tools = Arc::new(FakeTools::default());
        tools.answer(
            "runc list",
            0,
            r#"[{"id":"isolab-e1-a"},{"id":"isolab-e2-b"},{"id":"other"}]"#,
        );
        let e = engine(RUNC, &sys, tools.clone(), Arc::default());
        for id in ["isolab-e1-a", "isolab-e1-z", "isolab-e2-c"] {
            std::fs::create_dir_all(sys.root.join("run/oci").join(id)).unwrap();
        }
        let lines = e.gc("isolab-e1-").unwrap();
        assert!(tools
            .calls()
            .contains(&"/usr/bin/runc delete --force isolab-e1-a".to_string()));
        assert!(!tools
            .calls()
            .iter()
            .any(|c| c.contains("isolab-e2-b") || c.contains("other")));
        assert!(!sys.root.join("run/oci/isolab-e1-a").exists());
        assert!(!sys.root.join("run/oci/isolab-e1-z").exists());
        assert!(sys.root.join("run/oci/isolab-e2-c").exists());
        assert!(
            lines
                .iter()
                .any(|l| l.contains("deleted container isolab-e1-a")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("removed bundle") && l.contains("isolab-e1-z")),
            "{lines:?}"
        );
    }

    #[test]
    fn shutdown_leaves_another_live_process_s_fix_alone() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        std::fs::create_dir(sys.cg("hugetlb")).unwrap();
        let record = sys.root.join("run/hybrid-fix/host.json");
        std::fs::create_dir_all(record.parent().unwrap()).unwrap();
        let other = format!(
            r#"{{"engine":"crun","pid":{},"steps":[{{"MountedV1":{{"controller":"hugetlb","path":"{}"}}}}]}}"#,
            std::process::id() + 1,
            sys.cg("hugetlb").display()
        );
        std::fs::write(&record, &other).unwrap();
        let tools = Arc::new(FakeTools::default());
        let e = engine(CRUN, &sys, tools.clone(), Arc::default());
        e.shutdown().unwrap();
        assert!(tools.calls().is_empty());
        assert_eq!(std::fs::read_to_string(&record).unwrap(), other);
    }

    #[test]
    fn gc_undoes_the_hybrid_fix_of_a_dead_process_only() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        std::fs::write(sys.cg("unified/cgroup.controllers"), "hugetlb\n").unwrap();
        let tools = Arc::new(FakeTools::default());
        tools.answer("crun list", 0, "null");
        let e = engine(CRUN, &sys, tools.clone(), Arc::default()).allowing_host_fixes(true);
        e.ensure_ready().unwrap();
        let target = sys.cg("hugetlb");
        let record = sys.root.join("run/hybrid-fix/host.json");
        assert!(record.is_file());
        // The owner (this process, in the fake /proc) lives: gc leaves the fix alone.
        let own = sys.root.join(std::process::id().to_string());
        std::fs::create_dir(&own).unwrap();
        e.gc("isolab-").unwrap();
        e.gc_host_fixes().unwrap();
        assert!(target.is_dir() && record.is_file());
        assert!(!tools.calls().iter().any(|c| c.starts_with("umount")));
        // The owner is gone (killed): gc undoes exactly the record, whether or not
        // an experiment of it is found.
        std::fs::remove_dir(&own).unwrap();
        assert!(e.gc("isolab-").unwrap().is_empty());
        assert!(record.exists());
        let lines = e.gc_host_fixes().unwrap();
        assert!(!target.exists());
        assert!(!record.exists());
        assert_eq!(
            tools.calls().last().unwrap(),
            &format!("umount {}", target.display())
        );
        assert!(lines.iter().any(|l| l.contains("gone")), "{lines:?}");
        assert!(e.host_fixes().is_empty());
    }

    #[test]
    fn version_runs_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        let tools = Arc::new(FakeTools::default());
        tools.answer("crun --version", 0, "crun version 1.8.1\ncommit: abc\n");
        let e = engine(CRUN, &sys, tools.clone(), Arc::default());
        assert_eq!(e.version().unwrap(), "crun 1.8.1");
        tools.answer("crun --version", 0, "nonsense\n");
        assert!(e
            .version()
            .unwrap_err()
            .to_string()
            .contains("unexpected answer"));
        assert_eq!(e.name(), "crun");
    }
}
