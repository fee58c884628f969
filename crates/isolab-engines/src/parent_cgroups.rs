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
}
