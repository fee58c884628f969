//! Removal of the copies of the lab's parent cgroup that OCI runtimes (runc, crun,
//! also under Docker and Podman) create in the cgroup v1 hierarchies the lab does not
//! manage (`devices`, `name=systemd`, …).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
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

/// An engine's run parents in every cgroup v1 hierarchy the lab does not manage: runc
/// and crun create the container's cgroup path with all its parents in every mounted
/// hierarchy (`devices`, `name=systemd`, …) and remove only the container's own
/// cgroup, so without this each run would leave its parent there. A parent still in
/// use when its run is removed (on a host loaded by 128 containers the runtime may
/// take longer than [`PARENT_BUSY`] to remove the container's own cgroup) is kept
/// and removed again when the engine shuts down ([`ForeignParents::retry`]).
#[derive(Debug, Default)]
pub(crate) struct ForeignParents {
    pending: Mutex<Vec<PathBuf>>,
}

impl ForeignParents {
    /// Removes `parent` and its empty ancestors in the hierarchies of `proc`'s
    /// mountinfo the lab does not manage. Returns what was removed.
    pub(crate) fn remove(&self, proc: &Path, parent: &Path) -> Vec<PathBuf> {
        self.remove_in(&foreign_v1_mounts(&mounts_of(proc)), parent)
    }

    /// Removes the parents that were still in use when their runs were removed.
    /// Returns what was removed; what is still in use stays pending.
    pub(crate) fn retry(&self, proc: &Path) -> Vec<PathBuf> {
        self.retry_in(&foreign_v1_mounts(&mounts_of(proc)))
    }

    fn remove_in(&self, mounts: &[PathBuf], parent: &Path) -> Vec<PathBuf> {
        let removed = remove_parent_chains(mounts, parent);
        let rel = parent.strip_prefix("/").unwrap_or(parent);
        if mounts.iter().any(|m| m.join(rel).exists()) {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if !pending.iter().any(|p| p == parent) {
                pending.push(parent.to_path_buf());
            }
        }
        removed
    }

    fn retry_in(&self, mounts: &[PathBuf]) -> Vec<PathBuf> {
        let pending = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|e| e.into_inner()));
        pending
            .iter()
            .flat_map(|parent| self.remove_in(mounts, parent))
            .collect()
    }
}

/// Removes, below `base` in every cgroup v1 hierarchy of `proc`'s mountinfo the lab does
/// not manage, the directories of experiments that `dead` (given a directory's name)
/// says are over: what a run killed before its engine removed them left there
/// (`isolab gc`). A directory that still holds a process stays; so does `base` while
/// anything is below it. Returns what was removed.
pub fn remove_dead_foreign_parents(
    proc: &Path,
    base: &Path,
    dead: &dyn Fn(&str) -> bool,
) -> Vec<PathBuf> {
    let base = base.strip_prefix("/").unwrap_or(base);
    let mut removed = Vec::new();
    for m in foreign_v1_mounts(&mounts_of(proc)) {
        let top = m.join(base);
        for entry in std::fs::read_dir(&top).into_iter().flatten().flatten() {
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && dead(&entry.file_name().to_string_lossy()) {
                let tree = remove_tree(&RealSyscalls, &entry.path(), &RemoveTree::default());
                removed.extend(tree.removed);
            }
        }
        if top.is_dir() && std::fs::remove_dir(&top).is_ok() {
            removed.push(top);
        }
    }
    removed
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

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_cgroups::Malformed;

    fn parse(mountinfo: &str) -> Vec<MountEntry> {
        isolab_cgroups::parse_mountinfo(Path::new("mountinfo"), mountinfo, Malformed::Fail).unwrap()
    }

    #[test]
    fn parents_in_hierarchies_the_lab_does_not_manage_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mi = format!(
            "30 27 0:30 / {d}/cpu rw - cgroup cgroup rw,cpu\n\
             31 27 0:31 / {d}/devices rw - cgroup cgroup rw,devices\n\
             32 27 0:32 / {d}/systemd rw - cgroup cgroup rw,xattr,name=systemd\n\
             33 27 0:33 / {d}/unified rw - cgroup2 cgroup2 rw\n\
             34 27 0:34 / {d}/hugetlb rw - cgroup cgroup rw,hugetlb\n",
            d = d.display()
        );
        let foreign = foreign_v1_mounts(&parse(&mi));
        assert_eq!(
            foreign,
            vec![d.join("devices"), d.join("systemd"), d.join("hugetlb")]
        );
        for m in ["cpu", "devices", "systemd"] {
            std::fs::create_dir_all(d.join(m).join("isolab/e1/r1")).unwrap();
        }
        // Another run still uses isolab/e2 in devices: isolab stays there.
        std::fs::create_dir_all(d.join("devices/isolab/e2/r1")).unwrap();
        // The container's own cgroup left in systemd goes too.
        std::fs::create_dir_all(d.join("systemd/isolab/e1/r1/libpod-1")).unwrap();
        let removed = remove_parent_chains(&foreign, Path::new("/isolab/e1/r1"));
        assert_eq!(removed.len(), 6, "{removed:?}");
        assert!(!d.join("systemd/isolab").exists());
        assert!(!d.join("devices/isolab/e1").exists());
        assert!(d.join("devices/isolab/e2/r1").exists());
        // The lab's own hierarchies are the lab's to clean.
        assert!(d.join("cpu/isolab/e1/r1").exists());
    }

    #[test]
    fn gc_removes_the_parents_of_dead_experiments_only() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let proc = d.join("proc");
        let mountinfo = isolab_cgroups::mountinfo_path(&proc);
        std::fs::create_dir_all(mountinfo.parent().unwrap()).unwrap();
        std::fs::write(
            &mountinfo,
            format!(
                "30 27 0:30 / {d}/cpu rw - cgroup cgroup rw,cpu\n\
                 32 27 0:32 / {d}/systemd rw - cgroup cgroup rw,xattr,name=systemd\n",
                d = d.display()
            ),
        )
        .unwrap();
        for run in [
            "systemd/isolab/exp1-pid7/c1-r1",
            "systemd/isolab/exp2-pid8/c1-r1",
        ] {
            std::fs::create_dir_all(d.join(run)).unwrap();
        }
        std::fs::create_dir_all(d.join("cpu/isolab/exp1-pid7/c1-r1")).unwrap();
        let removed =
            remove_dead_foreign_parents(&proc, Path::new("/isolab"), &|name| name == "exp1-pid7");
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(!d.join("systemd/isolab/exp1-pid7").exists());
        // A live experiment's parent, and the lab's own hierarchies, stay.
        assert!(d.join("systemd/isolab/exp2-pid8/c1-r1").exists());
        assert!(d.join("cpu/isolab/exp1-pid7/c1-r1").exists());
    }

    #[test]
    fn a_parent_still_in_use_is_removed_when_the_engine_shuts_down() {
        let dir = tempfile::tempdir().unwrap();
        let mounts = [dir.path().join("systemd")];
        let run = mounts[0].join("isolab/e1/r1");
        std::fs::create_dir_all(&run).unwrap();
        // Still in use when the run is removed (a file stands for the busy cgroup).
        std::fs::write(run.join("busy"), "").unwrap();
        let parents = ForeignParents::default();
        assert!(parents
            .remove_in(&mounts, Path::new("/isolab/e1/r1"))
            .is_empty());
        assert!(parents.retry_in(&mounts).is_empty(), "still in use");
        std::fs::remove_file(run.join("busy")).unwrap();
        assert_eq!(parents.retry_in(&mounts).len(), 3);
        assert!(!mounts[0].join("isolab").exists());
        assert!(parents.retry_in(&mounts).is_empty(), "nothing pending");
    }
}
