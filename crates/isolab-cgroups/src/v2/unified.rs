//! Other cgroup v2 interface files, by name ([`crate::Limits::unified`], OCI's
//! `linux.resources.unified`): each name is checked before anything is written, so
//! that a write can only reach an interface file of the cgroup's own directory and
//! of a controller enabled for it.

use std::collections::BTreeMap;
use std::path::Path;

use crate::error::Error;
use crate::file;

/// Why `name` is not the name of a controller's interface file, or `None` when it
/// is: `CONTROLLER.FILE`, no `/`, no `..`, no NUL, not a `cgroup.*` core file.
pub(crate) fn name_problem(name: &str) -> Option<&'static str> {
    if name.contains('/') || name.contains('\0') {
        return Some("a file name has no `/` (and no NUL): the file is in the container's cgroup");
    }
    if name.contains("..") {
        return Some("a file name has no `..`");
    }
    match name.split_once('.') {
        Some((controller, file)) if !controller.is_empty() && !file.is_empty() => {
            (controller == "cgroup").then_some(
                "the `cgroup.*` core files (processes, subtree control, kill, freeze) belong to \
                 the runtime",
            )
        }
        _ => Some("a name is CONTROLLER.FILE, such as `memory.high`"),
    }
}

/// Checks every name: its form ([`name_problem`]) and that its controller is one of
/// `available` (the cgroup's `cgroup.controllers`, in `dir`).
pub(crate) fn check(
    dir: &Path,
    available: &[String],
    files: &BTreeMap<String, String>,
) -> Result<(), Error> {
    for name in files.keys() {
        if let Some(problem) = name_problem(name) {
            return Err(Error::UnifiedName {
                name: name.clone(),
                problem,
            });
        }
        let controller = name.split('.').next().unwrap_or_default();
        if !available.iter().any(|a| a == controller) {
            return Err(Error::UnifiedNotEnabled {
                name: name.clone(),
                controller: controller.to_owned(),
                path: dir.to_owned(),
            });
        }
    }
    Ok(())
}

/// Writes each file, in name order (names checked with [`check`] first).
pub(crate) fn apply(dir: &Path, files: &BTreeMap<String, String>) -> Result<(), Error> {
    for (name, value) in files {
        file::write_limit(
            &dir.join(name),
            value,
            "cgroup v2 file of the unified limits",
        )?;
    }
    Ok(())
}

/// The text of each named file, trimmed (names checked for their form first).
pub(crate) fn read<'a>(
    dir: &Path,
    names: impl IntoIterator<Item = &'a str>,
) -> Result<BTreeMap<String, String>, Error> {
    let mut read = BTreeMap::new();
    for name in names {
        if let Some(problem) = name_problem(name) {
            return Err(Error::UnifiedName {
                name: name.to_owned(),
                problem,
            });
        }
        let text = file::read(&dir.join(name))?;
        read.insert(name.to_owned(), text.trim().to_owned());
    }
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_controller_files_of_the_directory() {
        for ok in [
            "memory.high",
            "cpu.weight.nice",
            "io.bfq.weight",
            "hugetlb.2MB.max",
        ] {
            assert_eq!(name_problem(ok), None, "{ok}");
        }
        for bad in [
            "../memory.high",
            "memory.high/x",
            "/sys/fs/cgroup/memory.high",
            "memory..high",
            "memory",
            ".high",
            "memory.",
            "",
            "cgroup.procs",
            "cgroup.subtree_control",
            "memory.hi\0gh",
        ] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn a_controller_not_enabled_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let files = BTreeMap::from([("rdma.max".to_string(), "mlx4_0 hca_handle=2".to_string())]);
        let err = check(dir.path(), &["cpu".into(), "memory".into()], &files).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("rdma.max")
                && text.contains("`rdma`")
                && text.contains("cgroup.controllers"),
            "{text}"
        );
        check(dir.path(), &["rdma".into()], &files).unwrap();
    }
}
