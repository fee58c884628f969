//! The container's cgroup v1 `devices` cgroup: the device allowlist
//! ([`crate::security::SecurityConfig::devices`]) written with
//! [`crate::security::write_v1_rules`] before the container's init runs.
//!
//! `isolab-cgroups` does not manage the devices controller (it measures and limits;
//! device access is security), so the runtime creates the same relative path
//! (`<cgroup_parent>/rt-<id>`) in the devices hierarchy itself, creating missing
//! parents and removing only those again. The devices hierarchy is found next to the
//! other v1 controllers of the [`Hierarchy`] (`<mounts>/devices`), so a hierarchy under
//! a test directory never touches the host's.
//!
//! On cgroup v2 device access is controlled by an eBPF program of type
//! `BPF_CGROUP_DEVICE` attached to the cgroup; the runtime does not load one yet, and
//! says so in [`crate::Exit::notes`].

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{
    remove_tree, rmdir_retrying, Controller, Hierarchy, RealSyscalls, RemoveTree, Version,
};

use crate::error::RuntimeError;
use crate::security::{write_v1_rules, DeviceRule};

/// How long a `rmdir` failing with `EBUSY` is retried (the last tasks are exiting).
const RMDIR_DEADLINE: Duration = Duration::from_secs(1);

/// The root of the v1 devices hierarchy next to the hierarchy's other v1 mounts
/// (a directory holding `devices.list`); `None` on v2 or when it is not mounted.
pub fn devices_mount(h: &Hierarchy) -> Option<PathBuf> {
    if h.version() != Version::V1 {
        return None;
    }
    [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Memory,
        Controller::Pids,
        Controller::Cpuset,
        Controller::Blkio,
        Controller::Freezer,
    ]
    .into_iter()
    .filter_map(|c| h.mount(c).and_then(Path::parent))
    .map(|parent| parent.join("devices"))
    .find(|dir| dir.join("devices.list").is_file())
}

/// Removes the empty devices-hierarchy directories at and below `rel` (deepest
/// first) that containers nested in a cgroup `rel` of another owner left: each
/// container removes the ancestors it created, but when containers run side by side
/// the one that created a shared ancestor may end first, while the others still
/// use it. The owner of `rel` calls this once the containers below it are gone.
/// Non-empty directories (a live container's) are left alone. Returns what was
/// removed.
pub fn remove_devices_mirror(h: &Hierarchy, rel: &Path) -> Vec<PathBuf> {
    let Some(mount) = devices_mount(h) else {
        return Vec::new();
    };
    let top = mount.join(rel);
    if top == mount {
        return Vec::new();
    }
    // One pass, nobody killed: a directory that holds a process stays.
    remove_tree(&RealSyscalls, &top, &RemoveTree::default()).removed
}

/// Every mount root a container's cgroup lives under: each controller's mount, the
/// unified mount, and the devices mount; without duplicates.
pub(crate) fn mount_roots(h: &Hierarchy, devices: Option<&Path>) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    let controllers = [
        Controller::Cpu,
        Controller::Cpuacct,
        Controller::Cpuset,
        Controller::Memory,
        Controller::Pids,
        Controller::Blkio,
        Controller::Freezer,
        Controller::Io,
    ];
    let found = controllers
        .into_iter()
        .filter_map(|c| h.mount(c))
        .chain(h.unified())
        .chain(devices);
    for root in found {
        if !roots.iter().any(|r| r == root) {
            roots.push(root.to_owned());
        }
    }
    roots
}

/// The ancestors of a container's cgroup (prefixes of `parent`, outermost first) that
/// exist under none of `roots`: the runtime will create them, so it (and `gc`) may
/// remove them again.
pub(crate) fn missing_ancestors(roots: &[PathBuf], parent: &Path) -> Vec<PathBuf> {
    let mut prefix = PathBuf::new();
    let mut missing = Vec::new();
    for component in parent.components() {
        prefix.push(component);
        if !roots.iter().any(|r| r.join(&prefix).exists()) {
            missing.push(prefix.clone());
        }
    }
    missing
}

/// `rmdir` of a cgroup directory, retrying `EBUSY` for about a second; a missing
/// directory is fine.
pub(crate) fn remove_cgroup_dir(path: &Path) -> io::Result<()> {
    match rmdir_retrying(&RealSyscalls, path, RMDIR_DEADLINE) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// `rmdir` of an ancestor the runtime created: gone, still used by another
/// container (`ENOTEMPTY`, `EBUSY`) or removed are all fine.
pub(crate) fn remove_ancestor(path: &Path) -> io::Result<()> {
    match fs::remove_dir(path) {
        Err(e)
            if e.kind() != io::ErrorKind::NotFound
                && e.raw_os_error() != Some(libc::ENOTEMPTY)
                && e.raw_os_error() != Some(libc::EBUSY) =>
        {
            Err(e)
        }
        _ => Ok(()),
    }
}

/// A container's cgroup in the v1 devices hierarchy.
#[derive(Debug)]
pub(crate) struct DevicesCgroup {
    leaf: PathBuf,
    /// Ancestors this handle created, outermost first.
    created: Vec<PathBuf>,
}

impl DevicesCgroup {
    /// Creates `mount/rel` (and missing parents) and writes "deny all" then `rules`.
    /// Everything created is removed again on error.
    pub(crate) fn create(
        mount: &Path,
        rel: &Path,
        rules: &[DeviceRule],
    ) -> Result<DevicesCgroup, RuntimeError> {
        let mut cgroup = DevicesCgroup {
            leaf: mount.join(rel),
            created: Vec::new(),
        };
        let result = cgroup.build(mount, rel, rules);
        match result {
            Ok(()) => Ok(cgroup),
            Err(e) => {
                // Best effort: the original error matters more.
                let _ = cgroup.remove();
                Err(e)
            }
        }
    }

    fn build(
        &mut self,
        mount: &Path,
        rel: &Path,
        rules: &[DeviceRule],
    ) -> Result<(), RuntimeError> {
        let mut current = mount.to_owned();
        let depth = rel.components().count();
        for (i, component) in rel.components().enumerate() {
            current.push(component);
            let leaf = i + 1 == depth;
            match fs::create_dir(&current) {
                Ok(()) if !leaf => self.created.push(current.clone()),
                Ok(()) => {}
                Err(e) if !leaf && e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(source) => {
                    if leaf {
                        // Not ours: make sure remove() leaves it alone.
                        self.leaf = PathBuf::new();
                    }
                    return Err(RuntimeError::Host {
                        op: "create the devices cgroup (if it exists, run `isolab-runtime gc`)",
                        path: current,
                        source,
                    });
                }
            }
        }
        write_v1_rules(&self.leaf, rules)?;
        Ok(())
    }

    /// Opens the cgroup's `tasks` for writing (close-on-exec), for the container's
    /// init to join it itself once its root is mounted (`tasks`, not `cgroup.procs`:
    /// see [`isolab_cgroups::Attacher`]).
    pub(crate) fn open_tasks(&self) -> Result<OwnedFd, RuntimeError> {
        let path = self.leaf.join("tasks");
        fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .map(OwnedFd::from)
            .map_err(|source| RuntimeError::Host {
                op: "open the devices cgroup's task list",
                path,
                source,
            })
    }

    /// Removes the leaf (its tasks must be gone: the caller removed the container's
    /// main cgroup, which kills them) and the ancestors this handle created, when empty.
    pub(crate) fn remove(self) -> Result<(), String> {
        if !self.leaf.as_os_str().is_empty() {
            remove_cgroup_dir(&self.leaf)
                .map_err(|e| format!("remove devices cgroup {}: {e}", self.leaf.display()))?;
        }
        for dir in self.created.iter().rev() {
            remove_ancestor(dir).map_err(|e| format!("remove {}: {e}", dir.display()))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::default_devices;

    #[test]
    fn finds_the_devices_mount_next_to_the_others() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("cpu")).unwrap();
        let h = Hierarchy::v1_under(dir.path());
        assert_eq!(devices_mount(&h), None);
        fs::create_dir_all(dir.path().join("devices")).unwrap();
        fs::write(dir.path().join("devices/devices.list"), "a *:* rwm\n").unwrap();
        assert_eq!(devices_mount(&h), Some(dir.path().join("devices")));
        let v2 = Hierarchy::v2(dir.path());
        assert_eq!(devices_mount(&v2), None);
        let roots = mount_roots(&h, Some(&dir.path().join("devices")));
        assert!(roots.contains(&dir.path().join("devices")));
        assert!(roots.contains(&dir.path().join("cpu")));
    }

    #[test]
    fn missing_ancestors_are_those_nowhere() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        fs::create_dir_all(a.join("isolab")).unwrap();
        fs::create_dir_all(&b).unwrap();
        let roots = [a, b];
        assert_eq!(
            missing_ancestors(&roots, Path::new("isolab/lab/x")),
            [PathBuf::from("isolab/lab"), PathBuf::from("isolab/lab/x")]
        );
        assert!(missing_ancestors(&roots, Path::new("isolab")).is_empty());
    }

    #[test]
    fn creates_writes_and_removes_in_a_fake_hierarchy() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("devices");
        fs::create_dir_all(mount.join("isolab")).unwrap();
        // A fake cgroupfs: the leaf's rule files must exist before the rules are
        // written, so pre-create the leaf's parent only and expect a clear error.
        let e = DevicesCgroup::create(&mount, Path::new("isolab/new/rt-1"), &default_devices())
            .unwrap_err();
        assert!(e.to_string().contains("devices"), "{e}");
        assert!(!mount.join("isolab/new").exists(), "rolled back");
        assert!(mount.join("isolab").exists(), "existing parent kept");
    }

    #[test]
    fn real_devices_cgroup_round_trip() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            isolab_skip::skip("writing a devices cgroup needs root");
            return;
        }
        let h = match Hierarchy::detect() {
            Ok(h) => h,
            Err(e) => {
                isolab_skip::skip(format!("no cgroup hierarchy detected: {e}"));
                return;
            }
        };
        let Some(mount) = devices_mount(&h) else {
            isolab_skip::skip(format!(
                "no cgroup v1 devices hierarchy on {} (the v2 device rules are not enforced yet)",
                h.describe()
            ));
            return;
        };
        let parent = format!("isolab-devtest-{}", std::process::id());
        let rel = PathBuf::from(&parent).join("a/rt-x");
        let cg = DevicesCgroup::create(&mount, &rel, &default_devices()).unwrap();
        let list = fs::read_to_string(mount.join(&rel).join("devices.list")).unwrap();
        assert!(list.contains("c 1:3 rwm"), "{list}");
        assert!(!list.contains("a *:* rwm"), "{list}");
        cg.remove().unwrap();
        assert!(!mount.join(&parent).exists());
    }
}
