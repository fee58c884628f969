//! A stack's data made once ([`isolab_workloads::StackDef::data_paths`]): the first run
//! of a platform, workload and shape prepares its components and loads the data as
//! any run does, then stops the components and keeps those paths in a directory
//! beside the runs' (`exp<ID>-pid<PID>-data-<KEY>`, which `isolab gc` removes with
//! the runs' when the process is gone); every later run of the same platform,
//! workload and shape (other placements, client counts, neighbours, storage levels)
//! gets a copy, owners and modes kept, written to its disk before the components start
//! (so that its writeback does not fall into the measurement), and starts its
//! components without their prepare steps or the data load. The directories go when
//! the experiment's runs end.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use isolab_store::ExperimentId;

use super::super::workdir::run_workdir;
use crate::platform::PlatformError;
use crate::spec::Cell;

/// The tag of a kept data directory, after `exp<ID>-pid<PID>-`.
const TAG: &str = "data-";

/// Where the data of one platform, workload and shape is kept.
pub(in crate::runner) struct KeptData {
    dir: PathBuf,
}

impl KeptData {
    /// The kept data of `cell` in experiment `id` under `base`; `None` when its
    /// stack keeps none (no `keep_data`, or no `data_paths`).
    pub(in crate::runner) fn of(base: &Path, id: ExperimentId, cell: &Cell) -> Option<KeptData> {
        let stack = cell.workload.stack.as_ref()?;
        if !stack.keep_data || stack.data_paths.is_empty() {
            return None;
        }
        // What the data depends on: where it was made (the image and its users'
        // ids), the workload's data load and settings, the shape that sizes it.
        let mut key = DefaultHasher::new();
        cell.platform.name.hash(&mut key);
        format!("{:?}", cell.workload).hash(&mut key);
        format!("{:?}", cell.shape).hash(&mut key);
        let tag = format!("{TAG}{:016x}", key.finish());
        Some(KeptData {
            dir: run_workdir(base, id, &tag),
        })
    }

    /// Whether an earlier run made it.
    pub(in crate::runner) fn is_made(&self) -> bool {
        self.dir.is_dir()
    }

    /// Copies `paths` kept into `workdir`.
    pub(in crate::runner) fn restore(
        &self,
        paths: &[String],
        workdir: &Path,
    ) -> Result<(), PlatformError> {
        for p in paths {
            copy_path(&self.dir.join(p), &workdir.join(p))?;
        }
        flush(workdir)
    }

    /// Keeps `paths` of `workdir`, which the data load just made; a path it did not
    /// make is an error that names it. Written under another name first and renamed,
    /// so that a run that fails half-way leaves nothing that looks made.
    pub(in crate::runner) fn keep(
        &self,
        paths: &[String],
        workdir: &Path,
    ) -> Result<(), PlatformError> {
        let partial = self.dir.with_extension("partial");
        let _ = std::fs::remove_dir_all(&partial);
        let kept = (|| {
            for p in paths {
                let from = workdir.join(p);
                if std::fs::symlink_metadata(&from).is_err() {
                    return Err(PlatformError::Component {
                        component: "data_load".into(),
                        what: format!(
                            "did not make {} (a path of the stack's data_paths)",
                            from.display()
                        ),
                    });
                }
                copy_path(&from, &partial.join(p))?;
            }
            std::fs::rename(&partial, &self.dir).map_err(|source| PlatformError::Io {
                action: "cannot keep the stack's data in",
                path: self.dir.clone(),
                source,
            })?;
            flush(&self.dir)
        })();
        if kept.is_err() {
            let _ = std::fs::remove_dir_all(&partial);
        }
        kept
    }
}

/// Removes the kept data of an experiment's runs when dropped: when its runs end,
/// also on an error or an interruption.
pub(in crate::runner) struct KeptDataGuard {
    /// Where the runs' working directories are.
    pub base: PathBuf,
    /// The experiment.
    pub id: ExperimentId,
}

impl Drop for KeptDataGuard {
    fn drop(&mut self) {
        remove_kept(&self.base, self.id);
    }
}

/// Removes every kept data directory of experiment `id` under `base` made by this
/// process.
fn remove_kept(base: &Path, id: ExperimentId) {
    let prefix = run_workdir(base, id, TAG);
    let (Some(dir), Some(prefix)) = (prefix.parent(), prefix.file_name()) else {
        return;
    };
    let prefix = prefix.to_string_lossy();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_name().to_string_lossy().starts_with(prefix.as_ref()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Writes the file system under `dir` to its disk (syncfs(2)): the copy's dirty pages
/// would otherwise be written back while the next measurement runs, in its disk's
/// queue (a database that syncs its commits waits behind them).
fn flush(dir: &Path) -> Result<(), PlatformError> {
    use std::os::fd::AsRawFd;
    let error = |source| PlatformError::Io {
        action: "cannot write the stack's copied data to disk under",
        path: dir.to_path_buf(),
        source,
    };
    let d = std::fs::File::open(dir).map_err(error)?;
    // SAFETY: `d` is an open descriptor for the duration of the call.
    if unsafe { libc::syncfs(d.as_raw_fd()) } != 0 {
        return Err(error(std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Copies the file or directory tree `from` to `to` (which must not exist), its
/// parents made, owners, modes and times kept.
fn copy_path(from: &Path, to: &Path) -> Result<(), PlatformError> {
    let io = |action, path: &Path| {
        let path = path.to_path_buf();
        move |source| PlatformError::Io {
            action,
            path,
            source,
        }
    };
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(io("cannot create", parent))?;
    }
    let meta = std::fs::symlink_metadata(from).map_err(io("cannot read", from))?;
    if meta.is_dir() {
        std::fs::create_dir(to).map_err(io("cannot create", to))?;
        isolab_image::copy_tree(from, to).map_err(|source| PlatformError::CopyTree {
            from: from.to_path_buf(),
            to: to.to_path_buf(),
            source: Box::new(source),
        })?;
        return Ok(());
    }
    use std::os::unix::fs::MetadataExt;
    std::fs::copy(from, to).map_err(io("cannot copy the stack's data into", to))?;
    // `fs::copy` keeps the mode, not the times: set them as the source's.
    let times = std::fs::FileTimes::new()
        .set_accessed(
            meta.accessed()
                .map_err(io("cannot read the times of", from))?,
        )
        .set_modified(
            meta.modified()
                .map_err(io("cannot read the times of", from))?,
        );
    std::fs::File::options()
        .write(true)
        .open(to)
        .and_then(|f| f.set_times(times))
        .map_err(io("cannot set the times of", to))?;
    std::os::unix::fs::lchown(to, Some(meta.uid()), Some(meta.gid()))
        .map_err(io("cannot change the owner of", to))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_data_is_copied_whole_into_each_run_and_removed_with_the_experiment() {
        let base = tempfile::tempdir().unwrap();
        let id: ExperimentId = 7;
        let kept = KeptData {
            dir: run_workdir(base.path(), id, "data-00000000000000ab"),
        };
        assert!(!kept.is_made());
        let first = base.path().join("first");
        std::fs::create_dir_all(first.join("db/data/base")).unwrap();
        std::fs::write(first.join("db/data/base/1"), "rows").unwrap();
        std::fs::write(first.join("data-set.json"), "{}").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            first.join("db/data"),
            std::fs::Permissions::from_mode(0o700),
        )
        .unwrap();
        let paths = vec!["db/data".to_owned(), "data-set.json".to_owned()];

        // A path the load did not make is named, and nothing looks made.
        let missing = [paths.clone(), vec!["sysbench/table-size".into()]].concat();
        let e = kept.keep(&missing, &first).unwrap_err().to_string();
        assert!(e.contains("sysbench/table-size"), "{e}");
        assert!(!kept.is_made());
        assert!(!kept.dir.with_extension("partial").exists());

        kept.keep(&paths, &first).unwrap();
        assert!(kept.is_made());
        let later = base.path().join("later");
        std::fs::create_dir(&later).unwrap();
        kept.restore(&paths, &later).unwrap();
        assert_eq!(
            std::fs::read_to_string(later.join("db/data/base/1")).unwrap(),
            "rows"
        );
        assert_eq!(
            std::fs::read_to_string(later.join("data-set.json")).unwrap(),
            "{}"
        );
        let mode = std::fs::metadata(later.join("db/data"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);

        // A kept file has its source's times, as a kept directory's files do.
        let then = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let stamped = base.path().join("stamped");
        std::fs::write(&stamped, "x").unwrap();
        std::fs::File::options()
            .write(true)
            .open(&stamped)
            .unwrap()
            .set_modified(then)
            .unwrap();
        let copied = base.path().join("copies/stamped");
        copy_path(&stamped, &copied).unwrap();
        assert_eq!(
            std::fs::metadata(&copied).unwrap().modified().unwrap(),
            then
        );

        // Another experiment's data stays; this one's goes.
        let other = run_workdir(base.path(), 8, "data-00000000000000ab");
        std::fs::create_dir(&other).unwrap();
        remove_kept(base.path(), id);
        assert!(!kept.dir.exists());
        assert!(other.exists());
    }
}
