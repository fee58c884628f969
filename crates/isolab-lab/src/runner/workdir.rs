//! Working directories: each run's own (`exp<ID>-pid<PID>-<tag>` under the base),
//! the base a run makes and removes again when it is left empty, what the disk
//! under it offers (direct I/O, the device to throttle), and `gc` of the
//! directories whose runner is gone.

use std::path::{Path, PathBuf};

use isolab_cgroups::DeviceNumber;
use isolab_store::ExperimentId;

use super::error::RunError;
use crate::storage::workdir_owner;

/// The working directory of run `tag` of experiment `id` under `base`, named for
/// this process so that [`gc_workdirs`] can tell whether its owner is gone.
pub(super) fn run_workdir(base: &Path, id: ExperimentId, tag: &str) -> PathBuf {
    base.join(format!("exp{id}-pid{}-{tag}", std::process::id()))
}

/// A run's working directory being removed on a helper thread ([`crate::reused`])
/// while the runner stores the run: both are done, on a second core at the same time,
/// before the next run starts, because dropping this waits for the removal.
pub(super) struct Removal(Option<crate::reused::Handle<()>>);

impl Removal {
    /// Starts removing `dir` (everything in it); where no helper thread can be had,
    /// removes it now.
    pub(super) fn start(dir: &Path) -> Removal {
        let owned = dir.to_path_buf();
        match crate::reused::spawn(c"isolab-workdir", move || {
            let _ = std::fs::remove_dir_all(&owned);
        }) {
            Ok(h) => Removal(Some(h)),
            Err(_) => {
                let _ = std::fs::remove_dir_all(dir);
                Removal(None)
            }
        }
    }
}

impl Drop for Removal {
    fn drop(&mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

/// Makes the working directory `base` and probes the disk under it. A base made
/// here goes again with the returned guard if it is left empty (every run removes
/// its own directory unless asked to keep it).
pub(super) fn prepare_base(base: &Path) -> Result<(Option<EmptyDirGuard>, DiskFacts), RunError> {
    let made = (!base.exists()).then(|| EmptyDirGuard(base.to_path_buf()));
    std::fs::create_dir_all(base).map_err(|source| RunError::Workdir {
        path: base.to_path_buf(),
        source,
    })?;
    Ok((made, DiskFacts::probe(base)))
}

/// Removes its directory when dropped, if the directory is empty by then.
pub(super) struct EmptyDirGuard(PathBuf);

impl Drop for EmptyDirGuard {
    fn drop(&mut self) {
        // Fails, harmlessly, when something is left in it (kept workdirs).
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// Removes run working directories under `base` whose isolab process is gone
/// (named `exp<ID>-pid<PID>-…`). Returns what was removed.
pub fn gc_workdirs(base: &Path) -> Result<Vec<String>, RunError> {
    let entries = match std::fs::read_dir(base) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RunError::Workdir {
                path: base.to_path_buf(),
                source,
            })
        }
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = workdir_owner(&name) else {
            continue;
        };
        let alive =
            pid != std::process::id() && crate::platform::isolab_running(Path::new("/proc"), pid);
        if alive {
            continue;
        }
        std::fs::remove_dir_all(entry.path()).map_err(|source| RunError::Workdir {
            path: entry.path(),
            source,
        })?;
        removed.push(format!("working directory {}", entry.path().display()));
    }
    Ok(removed)
}

/// What the disk under the working directories offers.
#[derive(Debug, Clone, Default)]
pub(super) struct DiskFacts {
    /// Whether O_DIRECT opens succeed there.
    pub(super) direct: bool,
    /// The whole-disk device behind it, for io throttling.
    pub(super) device: Option<DeviceNumber>,
    /// Remarks stored with every run.
    pub(super) notes: Vec<String>,
}

impl DiskFacts {
    /// What the file system at `dir` offers.
    pub(super) fn probe(dir: &Path) -> DiskFacts {
        let mut notes = Vec::new();
        let direct = direct_io_supported(dir);
        if !direct {
            notes.push(format!(
                "direct I/O is not supported by the file system at {} (tmpfs or overlay?): I/O workloads run buffered; pass --workdir on a disk-backed file system to measure the device",
                dir.display()
            ));
        }
        DiskFacts {
            direct,
            device: DeviceNumber::backing_disk(dir, Path::new("/sys"))
                .ok()
                .flatten(),
            notes,
        }
    }
}

/// Whether a file can be opened with O_DIRECT in `dir`.
pub fn direct_io_supported(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(".isolab-direct-probe");
    let ok = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
        .is_ok();
    let _ = std::fs::remove_file(&path);
    ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_removes_workdirs_of_dead_runners_only() {
        let dir = tempfile::tempdir().unwrap();
        let mine = dir
            .path()
            .join(format!("exp1-pid{}-c0-r1", std::process::id()));
        // pid 0x3FFFFFFF is above pid_max and never alive.
        let dead = dir.path().join("exp1-pid1073741823-c0-r2");
        let other = dir.path().join("unrelated");
        for d in [&mine, &dead, &other] {
            std::fs::create_dir_all(d).unwrap();
        }
        let removed = gc_workdirs(dir.path()).unwrap();
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(!dead.exists() && !mine.exists() && other.exists());
        assert_eq!(workdir_owner("exp12-pid345-c1-w1"), Some(345));
        assert!(gc_workdirs(&dir.path().join("missing")).unwrap().is_empty());
    }

    #[test]
    fn a_workdir_base_the_run_made_goes_when_left_empty_and_stays_otherwise() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("isolab");
        {
            let _made = EmptyDirGuard(base.clone());
            std::fs::create_dir_all(&base).unwrap();
        }
        assert!(!base.exists());
        {
            let _made = EmptyDirGuard(base.clone());
            std::fs::create_dir_all(base.join("exp1-pid1-c0-r1")).unwrap();
        }
        // A kept working directory keeps its base.
        assert!(base.join("exp1-pid1-c0-r1").exists());
    }
}
