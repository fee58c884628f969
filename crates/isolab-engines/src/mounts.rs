//! The host's mount table as the engines read it during cleanup: best effort, and
//! the mount points below a directory.

use std::path::{Path, PathBuf};

use isolab_cgroups::{mountinfo_path, read_mountinfo, Malformed, MountEntry};

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
