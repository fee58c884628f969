//! Removal of the copies of the lab's parent cgroup that OCI runtimes (runc, crun,
//! also under Docker and Podman) create in the cgroup v1 hierarchies the lab does not
//! manage (`devices`, `name=systemd`, …).

use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{remove_tree, rmdir_retrying, MountEntry, RealSyscalls, RemoveTree};

use crate::mounts::mounts_of;

/// The v1 controllers the lab creates `cgroup_parent` in (through `isolab_cgroups`).
const LAB_CONTROLLERS: [&str; 7] = [
    "cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "freezer",
];

/// Mount points of cgroup v1 hierarchies that hold none of the controllers the lab
/// manages (`devices`, `name=systemd`, a `hugetlb` mounted for crun, …).
pub(crate) fn foreign_v1_mounts(mounts: &[MountEntry]) -> Vec<PathBuf> {
    mounts
        .iter()
        .filter(|m| m.fstype == "cgroup")
        .filter(|m| !LAB_CONTROLLERS.iter().any(|c| m.has_super_option(c)))
        .map(|m| m.mount_point.clone())
        .collect()
}

/// Removes `parent` and its empty ancestors in every cgroup v1 hierarchy the lab does
/// not manage: runc and crun create the container's cgroup path with all its
/// parents in every mounted hierarchy (`devices`, `name=systemd`, …) and remove only
/// the container's own cgroup, so without this each run would leave its parent
/// there. Directories still in use (another run's) stay. Returns what was removed.
pub(crate) fn remove_foreign_parent_cgroups(proc: &Path, parent: &Path) -> Vec<PathBuf> {
    remove_parent_chains(&foreign_v1_mounts(&mounts_of(proc)), parent)
}

/// How long [`remove_parent_chains`] waits for a busy `parent` (the container's own
/// cgroup is still being removed).
const PARENT_BUSY: Duration = Duration::from_secs(2);

/// Removes everything below `parent` (the container's cgroups: the lab puts nothing
/// else there), `parent` itself and its empty ancestors below each of `mounts`,
/// retrying for a moment while the container's own cgroup is still being removed.
pub(crate) fn remove_parent_chains(mounts: &[PathBuf], parent: &Path) -> Vec<PathBuf> {
    let parent = parent.strip_prefix("/").unwrap_or(parent);
    let mut removed = Vec::new();
    // Best effort: a cgroup that still holds a process stays, and so does the parent
    // above it.
    let below = RemoveTree {
        keep_top: true,
        ..RemoveTree::default()
    };
    for m in mounts {
        removed.append(&mut remove_tree(&RealSyscalls, &m.join(parent), &below).removed);
        let mut dir = m.join(parent);
        while dir != *m && dir.starts_with(m) {
            let patience = if dir.ends_with(parent) {
                PARENT_BUSY
            } else {
                Duration::ZERO
            };
            match rmdir_retrying(&RealSyscalls, &dir, patience) {
                Ok(()) => removed.push(dir.clone()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // In use by another run (or not ours): leave it and its ancestors.
                Err(_) => break,
            }
            if !dir.pop() {
                break;
            }
        }
    }
    removed
}
