//! What the root tests of this crate share.

use std::path::PathBuf;

/// The cgroup directories named `base` at the top of every hierarchy: what a test
/// that used `base` as its cgroup base left behind.
pub fn leftovers(base: &str) -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|c| c.path().join(base))
        .filter(|p| p.exists())
        .collect()
}
