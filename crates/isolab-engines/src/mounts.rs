//! The host's mount table as the engines read it: best effort during cleanup
//! ([`mounts_of`]) or as an engine error ([`mount_table`]), the mount points below a
//! directory, the cgroup hierarchies and the host's cgroup version.

use std::path::{Path, PathBuf};

use isolab_cgroups::{mountinfo_path, read_mountinfo, Malformed, MountEntry, Version};

use crate::EngineError;

/// This process's mount table in the proc file system at `proc`; empty when it cannot
/// be read (cleanup is best effort). Lines that are not mount entries are skipped.
pub(crate) fn mounts_of(proc: &Path) -> Vec<MountEntry> {
    read_mountinfo(&mountinfo_path(proc), Malformed::Skip).unwrap_or_default()
}

/// Mount points at or below any of `roots`, deepest first.
pub(crate) fn mounts_below(mounts: &[MountEntry], roots: &[&Path]) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = mounts
        .iter()
        .map(|m| m.mount_point.clone())
        .filter(|m| roots.iter().any(|r| m.starts_with(r)))
        .collect();
    found.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    found.dedup();
    found
}

/// The mount table at `path` as an engine error: a file that cannot be read is
/// [`EngineError::Io`], a table that does not say the cgroup layout is
/// [`EngineError::Unsupported`].
fn mountinfo_error(engine: &'static str, path: &Path, e: isolab_cgroups::Error) -> EngineError {
    match e {
        isolab_cgroups::Error::Read { path, source } => EngineError::Io {
            engine,
            action: "read the mount table",
            path,
            source,
        },
        e => EngineError::Unsupported {
            engine,
            detail: format!("cannot tell the cgroup layout from {}: {e}", path.display()),
        },
    }
}

/// Reads the mountinfo file at `path` ([`isolab_cgroups::read_mountinfo`]); lines that
/// are not mount entries are skipped, so that cleanup goes on.
pub(crate) fn mount_table(
    engine: &'static str,
    path: &Path,
) -> Result<Vec<MountEntry>, EngineError> {
    read_mountinfo(path, Malformed::Skip).map_err(|e| mountinfo_error(engine, path, e))
}

/// The cgroup version of the mount table at `path` (as `isolab_cgroups` sees it).
pub(crate) fn cgroup_version(engine: &'static str, path: &Path) -> Result<Version, EngineError> {
    let mounts =
        read_mountinfo(path, Malformed::Fail).map_err(|e| mountinfo_error(engine, path, e))?;
    isolab_cgroups::Hierarchy::from_mounts(&mounts)
        .map(|h| h.version())
        .map_err(|e| mountinfo_error(engine, path, e))
}

/// The mount points of every cgroup hierarchy (v1 and v2) in `mounts`.
pub(crate) fn cgroup_mounts(mounts: &[MountEntry]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for m in mounts {
        if m.is_cgroup() && !out.contains(&m.mount_point) {
            out.push(m.mount_point.clone());
        }
    }
    out
}

/// The v1 `cpuset` hierarchy's mount point, if any.
pub(crate) fn cpuset_v1_mount(mounts: &[MountEntry]) -> Option<PathBuf> {
    mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.has_super_option("cpuset"))
        .map(|m| m.mount_point.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_lines_are_parsed_with_escapes() {
        // The parsing itself is tested in `isolab_cgroups::mountinfo`.
        let text = "36 25 0:31 / /sys/fs/cgroup/cpu rw,nosuid,relatime shared:12 - cgroup cgroup rw,cpu\n\
                    40 22 0:50 / /run/isolab/oci/a\\040b/rootfs rw,relatime - overlay overlay rw,lowerdir=/x\n\
                    garbage\n";
        let m = isolab_cgroups::parse_mountinfo(Path::new("mi"), text, Malformed::Skip).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(cgroup_mounts(&m), [PathBuf::from("/sys/fs/cgroup/cpu")]);
        assert_eq!(cpuset_v1_mount(&m), None);
    }
}
