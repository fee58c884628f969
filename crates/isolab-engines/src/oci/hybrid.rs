//! The hybrid-cgroup fix of runc and crun (see the module documentation of `oci`):
//! finding the cgroup2 controllers crun objects to, mounting them as v1 hierarchies
//! through the shared fix of `hybrid_fix.rs`, and unmounting them again.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isolab_cgroups::MountEntry;

use crate::hybrid_fix::{cgroup2_controllers, child_cgroups, kept_mounted, mount_v1, HybridFix};
use crate::request::path_str;
use crate::tool::{argv, run_ok};
use crate::EngineError;

use super::{HostFix, OciEngine};

impl OciEngine {
    /// The hybrid-fix steps in force on the host, which [`Engine::ensure_ready`](crate::Engine::ensure_ready) made or
    /// joined and which the last user's [`Engine::shutdown`](crate::Engine::shutdown) undoes. They are read from
    /// the fix's host-wide record (see `hybrid_fix.rs`).
    pub fn host_fixes(&self) -> Vec<HostFix> {
        self.hybrid_fix()
            .load()
            .ok()
            .flatten()
            .map(|r| r.steps)
            .unwrap_or_default()
    }

    /// The shared hybrid-cgroup fix, with its record in the parent of the bundles
    /// directory (`/run/isolab`).
    pub(super) fn hybrid_fix(&self) -> HybridFix<'_> {
        HybridFix {
            engine: self.engine(),
            tools: &*self.tools,
            mount: "mount".into(),
            state_dir: self.fix_state_dir(),
        }
    }

    pub(super) fn fix_state_dir(&self) -> PathBuf {
        let b = &self.paths.bundles;
        b.parent().map_or_else(|| b.clone(), Path::to_path_buf)
    }
}

impl OciEngine {
    /// The controllers crun would object to: those listed in the hybrid cgroup2
    /// mount's `cgroup.controllers` that no v1 hierarchy is mounted for.
    pub(super) fn hybrid_controllers(
        &self,
        mounts: &[MountEntry],
    ) -> Result<Vec<String>, EngineError> {
        let unified = self.paths.cgroup_root.join("unified");
        let is_hybrid = mounts
            .iter()
            .any(|m| m.fstype == "cgroup2" && m.mount_point == unified)
            && mounts.iter().any(|m| m.fstype == "cgroup");
        if !is_hybrid {
            return Ok(Vec::new());
        }
        let listed = cgroup2_controllers(&unified).map_err(|source| EngineError::Io {
            engine: self.engine(),
            action: "read",
            path: unified.join("cgroup.controllers"),
            source,
        })?;
        Ok(listed
            .into_iter()
            .filter(|c| {
                let target = self.paths.cgroup_root.join(c);
                !mounts.iter().any(|m| m.mount_point == target)
            })
            .collect())
    }

    /// Controllers whose v1 hierarchy exists (`/proc/cgroups` gives it a number) but is
    /// mounted nowhere: what is left when a v1 hierarchy is unmounted while it still
    /// has cgroups. crun finds such a hierarchy in `/proc/self/cgroup` and writes plain
    /// directories into the unmounted `/sys/fs/cgroup/<name>` (seen); mounting it again
    /// makes it usable, and lets [`Engine::shutdown`](crate::Engine::shutdown) free it.
    pub(super) fn unmounted_v1_controllers(&self, mounts: &[MountEntry]) -> Vec<String> {
        let Ok(text) = std::fs::read_to_string(&self.paths.proc_cgroups) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_whitespace().collect();
                match fields.as_slice() {
                    [name, hierarchy, _, "1"] if !name.starts_with('#') && *hierarchy != "0" => {
                        Some((*name).to_owned())
                    }
                    _ => None,
                }
            })
            .filter(|name| {
                !mounts
                    .iter()
                    .any(|m| m.fstype == "cgroup" && m.has_super_option(name))
            })
            .collect()
    }

    /// Mounts a v1 hierarchy for each of `controllers` (the crun fix) with the shared
    /// [`HybridFix`], which records each step on disk before it takes it.
    pub(super) fn fix_hybrid(
        &self,
        controllers: &[String],
        mounts: &[MountEntry],
    ) -> Result<(), EngineError> {
        let root = &self.paths.cgroup_root;
        let _guard = self.fix_lock.lock().unwrap_or_else(|e| e.into_inner());
        let root_ro = mounts
            .iter()
            .rev()
            .find(|m| &m.mount_point == root)
            .is_some_and(|m| m.options.split(',').any(|o| o == "ro"));
        self.hybrid_fix()
            .apply(root, controllers, root_ro)
            .map(|_| ())
    }

    /// Unmounts the v1 hierarchy of `controller` at `path` that [`Engine::ensure_ready`](crate::Engine::ensure_ready)
    /// mounted, once it holds no cgroup but its root. The kernel only frees (and hands
    /// the controller back to cgroup2) a hierarchy that has no children when it is
    /// unmounted, and a removed cgroup stays a child until the kernel has released it,
    /// some milliseconds after its `rmdir`: unmounting earlier would keep the v1
    /// hierarchy alive, unmounted, until the next mount.
    pub(super) fn unmount_v1(&self, controller: &str, path: &Path) -> Result<(), EngineError> {
        let engine = self.engine();
        // Unmounted and its mount point removed behind isolab's back: nothing to
        // undo here (a hierarchy that lingers unmounted is mounted again by the next
        // `ensure_ready`).
        if !path.is_dir() {
            return Ok(());
        }
        let deadline = Instant::now() + self.unmount_wait;
        loop {
            let children = child_cgroups(path);
            let count = self.cgroups_in(controller);
            if children.is_empty() && !matches!(count, Some(n) if n > 1) {
                break;
            }
            if Instant::now() >= deadline {
                let dying = count.unwrap_or(0).saturating_sub(1);
                return Err(kept_mounted(engine, controller, path, &children, dying));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        run_ok(&*self.tools, engine, &argv(["umount", &path_str(path)]))?;
        // Another process may have made a cgroup in it between the check and the
        // unmount (isolab creates a job's cgroup in every mounted v1 hierarchy): the
        // hierarchy then lives on, mounted nowhere, with that cgroup hidden from its
        // owner. Mount it again where it was, so that the owner can remove it, and
        // keep the fix.
        if let Some(n) = self.cgroups_in(controller).filter(|&n| n > 1) {
            let mount = self.hybrid_fix().mount;
            mount_v1(&*self.tools, engine, &mount, controller, path)?;
            return Err(kept_mounted(
                engine,
                controller,
                path,
                &child_cgroups(path),
                n - 1,
            ));
        }
        Ok(())
    }

    /// `num_cgroups` of the v1 hierarchy of `controller` in `/proc/cgroups`.
    fn cgroups_in(&self, controller: &str) -> Option<u64> {
        std::fs::read_to_string(&self.paths.proc_cgroups)
            .ok()
            .and_then(|t| cgroups_in_hierarchy(&t, controller))
    }
}

/// The number of cgroups (`num_cgroups`) of the v1 hierarchy holding `controller`, from
/// the text of `/proc/cgroups`; `None` when the controller is not listed or is on
/// cgroup2 (hierarchy 0).
pub(super) fn cgroups_in_hierarchy(proc_cgroups: &str, controller: &str) -> Option<u64> {
    proc_cgroups.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [name, hierarchy, count, _] if *name == controller && *hierarchy != "0" => {
                count.parse().ok()
            }
            _ => None,
        }
    })
}
