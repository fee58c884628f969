//! Getting Podman ready ([`Engine::ensure_ready`]): which OCI runtime runs the
//! containers, the hybrid-cgroup fix crun needs here (mounting cgroup2's controllers as
//! v1 hierarchies, and undoing it), and the engine resolved once (versions, global
//! options, init).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isolab_cgroups::{
    mountinfo_path, read_mountinfo, remove_tree, Hierarchy, Malformed, RealSyscalls, RemoveTree,
    Version,
};

use crate::hybrid_fix::{
    cgroup2_controllers, child_cgroups, kept_mounted, mount_v1, HybridFix, UNMOUNT_V1_DEADLINE,
};
use crate::tool::{argv, require, run_ok, tail};
use crate::{Engine, EngineError};

use super::{lock, parse_podman_version, Podman, ENGINE};

/// The OCI runtime Podman runs containers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OciRuntime {
    /// crun (package `crun`).
    Crun,
    /// runc (package `runc`).
    Runc,
    /// isolab's own runtime through its OCI command line (`isolab-runtime create`,
    /// `start`, …), found as the `isolab` platform finds it.
    Isolab,
}

impl OciRuntime {
    /// The program as given to `--runtime`: a name looked up on `PATH`, or the path
    /// of isolab-runtime.
    pub fn program(self) -> String {
        match self {
            OciRuntime::Crun => "crun".into(),
            OciRuntime::Runc => "runc".into(),
            OciRuntime::Isolab => isolab_runtime::config::locate_program()
                .display()
                .to_string(),
        }
    }

    /// Where the program comes from: its Debian package, or how to build it.
    pub fn package(self) -> &'static str {
        match self {
            OciRuntime::Crun => "crun",
            OciRuntime::Runc => "runc",
            OciRuntime::Isolab => "isolab-runtime (cargo build --release -p isolab-runtime)",
        }
    }

    /// The runtime's short name in versions and platform names.
    pub fn label(self) -> &'static str {
        match self {
            OciRuntime::Crun => "crun",
            OciRuntime::Runc => "runc",
            OciRuntime::Isolab => "isolab-runtime",
        }
    }
}

/// What to do about controllers in the cgroup2 mount of a hybrid host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HybridDecision {
    /// Nothing to do (runc, pure v1 or v2, or no controller listed).
    NotNeeded,
    /// Mount these controllers as v1 hierarchies (host fixes allowed).
    MountAsV1(Vec<String>),
    /// Use runc instead of crun (host fixes not allowed); the controllers listed.
    FallBackToRunc(Vec<String>),
}

/// Decides what crun needs on `hierarchy` (see the module documentation): reads the
/// cgroup2 mount's `cgroup.controllers` in hybrid mode.
pub fn hybrid_decision(
    runtime: OciRuntime,
    hierarchy: &Hierarchy,
    allow_host_fixes: bool,
) -> HybridDecision {
    if runtime != OciRuntime::Crun || hierarchy.version() != Version::V1 {
        return HybridDecision::NotNeeded;
    }
    let Some(unified) = hierarchy.unified() else {
        return HybridDecision::NotNeeded;
    };
    let listed = cgroup2_controllers(unified).unwrap_or_default();
    if listed.is_empty() {
        HybridDecision::NotNeeded
    } else if allow_host_fixes {
        HybridDecision::MountAsV1(listed)
    } else {
        HybridDecision::FallBackToRunc(listed)
    }
}

/// What was decided and found in [`Engine::ensure_ready`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Resolved {
    pub(super) runtime: OciRuntime,
    pub(super) podman_version: String,
    pub(super) runtime_version: String,
    pub(super) notes: Vec<String>,
    pub(super) globals: Vec<String>,
    pub(super) init: Vec<String>,
}

impl Podman {
    /// The shared hybrid-cgroup fix, with its record in the parent of the state
    /// directory (`/run/isolab`, beside the runc/crun driver's).
    pub(super) fn hybrid_fix(&self, mount: &Path) -> HybridFix<'_> {
        let state = &self.config.state_dir;
        HybridFix {
            engine: ENGINE,
            tools: &*self.tools,
            mount: mount.display().to_string(),
            state_dir: state
                .parent()
                .map_or_else(|| state.clone(), Path::to_path_buf),
        }
    }

    /// The v1 hierarchies the fix's record lists: `(controller, mount point)`.
    pub(super) fn fixed_mounts(&self) -> Vec<(String, PathBuf)> {
        self.hybrid_fix(Path::new("mount"))
            .load()
            .ok()
            .flatten()
            .map(|r| r.mounted())
            .unwrap_or_default()
    }
}

impl Podman {
    /// Mounts `controllers` as v1 hierarchies next to the others with the shared fix
    /// (each recorded before it is mounted).
    pub(super) fn mount_as_v1(&self, controllers: &[String]) -> Result<(), EngineError> {
        let unified = self.config.hierarchy.unified().map(Path::to_path_buf);
        let Some(base) = unified.as_deref().and_then(Path::parent) else {
            return Ok(());
        };
        let mount = require(&*self.tools, ENGINE, "mount", "mount")?;
        self.hybrid_fix(&mount)
            .apply(base, controllers, false)
            .map(|_| ())
    }

    /// Removes every cgroup below the v1 hierarchy of `controller` at `mount_point`,
    /// unmounts it, and makes sure the controller went back to cgroup2 (the shared
    /// fix removes the mount point when it created it).
    pub(super) fn undo_mount(
        &self,
        controller: &str,
        mount_point: &Path,
    ) -> Result<Vec<String>, EngineError> {
        let mut done = Vec::new();
        // Podman's own parents (and crun's) are empty once their runs are gone:
        // remove what is empty below the hierarchy. A cgroup still in use (another
        // program's job, made while the hierarchy was mounted) keeps it mounted:
        // unmounting would hide that cgroup from its owner.
        let below = RemoveTree {
            keep_top: true,
            ..RemoveTree::default()
        };
        let deadline = Instant::now() + UNMOUNT_V1_DEADLINE;
        loop {
            remove_tree(&RealSyscalls, mount_point, &below);
            let children = child_cgroups(mount_point);
            if children.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(kept_mounted(ENGINE, controller, mount_point, &children, 0));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let umount = require(&*self.tools, ENGINE, "umount", "mount")?;
        let mount = require(&*self.tools, ENGINE, "mount", "mount")?;
        let mounted = || {
            read_mountinfo(&mountinfo_path(&self.config.proc), Malformed::Skip)
                .unwrap_or_default()
                .iter()
                .any(|e| e.mount_point == mount_point)
        };
        let back_in_v2 = || {
            self.config
                .hierarchy
                .unified()
                .and_then(|u| cgroup2_controllers(u).ok())
                .is_some_and(|listed| listed.iter().any(|c| c == controller))
        };
        let umount_argv = argv([
            umount.display().to_string(),
            mount_point.display().to_string(),
        ]);
        if mounted() {
            run_ok(&*self.tools, ENGINE, &umount_argv)?;
        }
        done.push(format!("unmounted {}", mount_point.display()));
        let mut attempt = 0;
        let mut recreated = false;
        loop {
            let start = Instant::now();
            while !back_in_v2() && start.elapsed() < Duration::from_secs(2) {
                std::thread::sleep(Duration::from_millis(50));
            }
            if back_in_v2() {
                break;
            }
            attempt += 1;
            // The hierarchy outlived the unmount: its last children were still dying
            // (mounting reuses it, and unmounting it again destroys it), or another
            // program made a cgroup in it just before the unmount. Mount it again
            // either way, so that nothing stays hidden. Its mount point may be gone
            // (removed with the hierarchy unmounted behind isolab's back): made for
            // this mount, and removed after it.
            if !mount_point.is_dir() {
                recreated = true;
                std::fs::create_dir_all(mount_point).map_err(|source| EngineError::Io {
                    engine: ENGINE,
                    action: "create the cgroup mount point again",
                    path: mount_point.to_path_buf(),
                    source,
                })?;
            }
            mount_v1(
                &*self.tools,
                ENGINE,
                &mount.display().to_string(),
                controller,
                mount_point,
            )?;
            let children = child_cgroups(mount_point);
            if !children.is_empty() {
                return Err(kept_mounted(ENGINE, controller, mount_point, &children, 0));
            }
            if attempt > 3 {
                return Err(EngineError::Unexpected {
                    engine: ENGINE,
                    command: umount_argv.join(" "),
                    detail: format!(
                        "the {controller} v1 hierarchy survived {attempt} unmounts (a cgroup the \
                         kernel has not released?), so it stays mounted at {}: see /proc/cgroups, \
                         then unmount it again (or `isolab gc`)",
                        mount_point.display()
                    ),
                });
            }
            run_ok(&*self.tools, ENGINE, &umount_argv)?;
        }
        if recreated {
            // Best effort, as the record's own step would: an empty mount point.
            let _ = std::fs::remove_dir(mount_point);
        }
        done.push(format!("{controller} is back in cgroup2"));
        Ok(done)
    }

    pub(super) fn resolve(&self) -> Result<Resolved, EngineError> {
        let podman = require(&*self.tools, ENGINE, "podman", "podman")?;
        let mut notes = Vec::new();
        let runtime = match hybrid_decision(
            self.runtime,
            &self.config.hierarchy,
            self.allow_host_fixes,
        ) {
            HybridDecision::NotNeeded => {
                let fixes = match self.runtime {
                    OciRuntime::Crun => self.fixed_mounts(),
                    OciRuntime::Runc | OciRuntime::Isolab => Vec::new(),
                };
                if !fixes.is_empty() && self.allow_host_fixes {
                    // crun relies on a fix already in force: stay one of its users.
                    self.hybrid_fix(Path::new("mount")).join()?;
                }
                for (controller, _) in fixes {
                    notes.push(format!(
                            "{controller} mounted as cgroup v1 hierarchy for crun (earlier, still in force)"
                        ));
                }
                self.runtime
            }
            HybridDecision::MountAsV1(cs) => {
                self.mount_as_v1(&cs)?;
                match hybrid_decision(self.runtime, &self.config.hierarchy, true) {
                    HybridDecision::NotNeeded => {
                        notes.push(format!(
                            "{} mounted as cgroup v1 hierarch{} for crun (hybrid host)",
                            cs.join(", "),
                            if cs.len() == 1 { "y" } else { "ies" }
                        ));
                        self.runtime
                    }
                    _ => {
                        notes.push(format!(
                            "crun refuses hybrid cgroups with {} in cgroup2 even after \
                             mounting it as v1: runc used instead",
                            cs.join(", ")
                        ));
                        OciRuntime::Runc
                    }
                }
            }
            HybridDecision::FallBackToRunc(cs) => {
                notes.push(format!(
                    "runc instead of crun: crun refuses hybrid cgroups while cgroup2 lists \
                     {} (allow host fixes to mount it as v1 instead)",
                    cs.join(", ")
                ));
                OciRuntime::Runc
            }
        };
        let runtime_bin = require(&*self.tools, ENGINE, &runtime.program(), runtime.package())?;
        let runtime_version = run_ok(
            &*self.tools,
            ENGINE,
            &argv([runtime_bin.display().to_string(), "--version".into()]),
        )?
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or("unknown")
        .to_owned();
        let globals = self.global_args(&podman, runtime);
        let mut cmd = globals.clone();
        cmd.extend(argv(["version", "--format", "json"]));
        let out = run_ok(&*self.tools, ENGINE, &cmd)?;
        let podman_version = parse_podman_version(&out).ok_or_else(|| EngineError::Unexpected {
            engine: ENGINE,
            command: cmd.join(" "),
            detail: format!("no Client.Version in {}", tail(&out, 300)),
        })?;
        Ok(Resolved {
            runtime,
            podman_version,
            runtime_version,
            notes,
            globals,
            init: self.init_flags(),
        })
    }

    pub(super) fn resolved(&self) -> Result<Resolved, EngineError> {
        if let Some(r) = lock(&self.resolved).as_ref() {
            return Ok(r.clone());
        }
        self.ensure_ready()?;
        lock(&self.resolved)
            .as_ref()
            .cloned()
            .ok_or_else(|| EngineError::Unexpected {
                engine: ENGINE,
                command: "podman version".into(),
                detail: "not ready after ensure_ready".into(),
            })
    }
}
