//! A cgroup directory and everything below it: walking the subtree
//! ([`subtree`]), asking whether a process lives in it ([`has_processes`],
//! [`populated`], [`deepest_populated`]) and removing it bottom-up ([`remove_tree`],
//! [`rmdir_retrying`]).
//!
//! These work on any cgroup directory, also on hierarchies isolab does not manage
//! (the `devices` or `name=systemd` hierarchies that runc and crun create paths in, a
//! v1 hierarchy mounted for crun) and on the cgroups engines create below the lab's.
//! Paths are always given in full, so tests point them at a temporary directory;
//! removal goes through [`Syscalls`] so that a test double can emulate the kernel.

use std::io;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::syscalls::Syscalls;

/// The name of the leaf below a cgroup where processes go on cgroup v2
/// ([`Cgroup::process_leaf`](crate::Cgroup::process_leaf)); [`deepest_populated`] looks
/// past it.
pub const PROCESS_LEAF: &str = "isolab-processes";

/// Pause between retries of a busy `rmdir`.
const POLL: Duration = Duration::from_millis(10);

/// `top` (when it is a directory) and every directory below it, children before
/// their parents, so that removing them in this order works.
///
/// A directory that vanishes during the walk (a cgroup being removed) is skipped. A
/// directory that cannot be listed for another reason is kept but not descended
/// into; the first such error is returned beside the list, for callers that must
/// not miss a part of the tree.
pub fn subtree(top: &Path) -> (Vec<PathBuf>, Option<Error>) {
    let mut preorder = Vec::new();
    let mut first_error = None;
    if !top.is_dir() {
        return (preorder, first_error);
    }
    let mut stack = vec![top.to_path_buf()];
    while let Some(dir) = stack.pop() {
        match std::fs::read_dir(&dir) {
            Ok(entries) => {
                for entry in entries {
                    match entry {
                        Ok(e) if e.file_type().is_ok_and(|t| t.is_dir()) => stack.push(e.path()),
                        Ok(_) => {}
                        Err(source) => {
                            first_error = first_error.or(Some(Error::ReadDir {
                                path: dir.clone(),
                                source,
                            }));
                        }
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(source) => {
                first_error = first_error.or(Some(Error::ReadDir {
                    path: dir.clone(),
                    source,
                }));
            }
        }
        preorder.push(dir);
    }
    preorder.reverse();
    (preorder, first_error)
}

/// The pids listed in the `cgroup.procs` of the cgroup directory `dir` (none when it
/// cannot be read).
pub fn procs(dir: &Path) -> Vec<u32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|s| {
            s.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the cgroup directory `dir` itself holds a process (its `cgroup.procs`
/// lists one); `false` when it cannot be read.
pub fn has_processes(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|s| !s.trim().is_empty())
}

/// Whether `top` or any cgroup below it holds a process.
pub fn populated(top: &Path) -> bool {
    subtree(top).0.iter().any(|d| has_processes(d))
}

/// The deepest cgroup strictly below `top` that holds a process (of several at the
/// same depth, the first one found), or `None`. The v2 process leaf of `top`
/// ([`PROCESS_LEAF`], where the lab's own command waits) is not a container's cgroup
/// and is passed over.
pub fn deepest_populated(top: &Path) -> Option<PathBuf> {
    let top_depth = top.components().count();
    let mut best: Option<(usize, &PathBuf)> = None;
    let dirs = subtree(top).0;
    // Parents first, in the order of the walk.
    for dir in dirs.iter().rev() {
        let depth = dir.components().count() - top_depth;
        let leaf = depth == 1 && dir.file_name() == Some(PROCESS_LEAF.as_ref());
        if depth > 0 && !leaf && has_processes(dir) && !matches!(best, Some((d, _)) if d >= depth) {
            best = Some((depth, dir));
        }
    }
    best.map(|(_, dir)| dir.clone())
}

/// `rmdir(2)` of one cgroup directory through `sys`, retrying while it fails with
/// `EBUSY` (its last processes are still exiting) for up to `patience`.
pub fn rmdir_retrying(sys: &dyn Syscalls, path: &Path, patience: Duration) -> io::Result<()> {
    let start = Instant::now();
    loop {
        match sys.rmdir(path) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < patience => {
                thread::sleep(POLL);
            }
            other => return other,
        }
    }
}

/// How [`remove_tree`] removes a subtree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RemoveTree {
    /// Remove only what is below the top directory (a mount point, or a parent
    /// whose removal the caller handles itself).
    pub keep_top: bool,
    /// Send SIGKILL to the processes listed in each directory before its `rmdir`
    /// (the cgroups of a container being removed). Without it, a directory that
    /// holds a process stays (it may be another run's).
    pub kill: bool,
    /// How long to retry a pass that left a directory behind (processes exiting,
    /// children the kernel has not released yet); zero for a single pass.
    pub patience: Duration,
}

/// What [`remove_tree`] did.
#[derive(Debug, Default)]
pub struct RemovedTree {
    /// The directories removed, children before their parents.
    pub removed: Vec<PathBuf>,
    /// The last directory that could not be removed in the last pass, and why.
    pub failed: Option<(PathBuf, io::Error)>,
}

impl RemovedTree {
    /// The removed directories, or [`Error::RemoveDir`] for the one that stayed.
    pub fn into_result(self) -> Result<Vec<PathBuf>, Error> {
        match self.failed {
            None => Ok(self.removed),
            Some((path, source)) => Err(Error::RemoveDir { path, source }),
        }
    }
}

/// Removes the cgroup directory `top` and every cgroup below it, children first,
/// through `sys` (`rmdir`, and `kill` when asked). A directory that is already gone
/// is fine. When a pass leaves a directory, the whole subtree is listed and tried
/// again every 10 ms until `patience` has passed. Nothing is done when `top` is not
/// a directory.
pub fn remove_tree(sys: &dyn Syscalls, top: &Path, how: &RemoveTree) -> RemovedTree {
    let start = Instant::now();
    let mut done = RemovedTree::default();
    loop {
        let (mut dirs, _) = subtree(top);
        if how.keep_top {
            dirs.retain(|d| d != top);
        }
        let mut failed = None;
        for dir in dirs {
            if how.kill {
                for pid in procs(&dir) {
                    // Best effort: a process that is gone is what we want, and one
                    // that cannot be killed makes the rmdir fail, which is reported.
                    let _ = sys.kill(pid);
                }
            }
            match sys.rmdir(&dir) {
                Ok(()) => done.removed.push(dir),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => failed = Some((dir, source)),
            }
        }
        match failed {
            None => return done,
            Some(f) if start.elapsed() >= how.patience => {
                done.failed = Some(f);
                return done;
            }
            Some(_) => thread::sleep(POLL),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RealSyscalls;
    use std::fs;
    use std::sync::Mutex;

    fn tree() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for d in ["top/a/b", "top/c"] {
            fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        dir
    }

    #[test]
    fn the_walk_lists_children_before_parents() {
        let dir = tree();
        let top = dir.path().join("top");
        let (dirs, error) = subtree(&top);
        assert!(error.is_none());
        assert_eq!(dirs.len(), 4);
        assert_eq!(dirs.last(), Some(&top));
        let pos = |p: &str| dirs.iter().position(|d| d == &top.join(p)).unwrap();
        assert!(pos("a/b") < pos("a"));
        assert!(subtree(&dir.path().join("nothing")).0.is_empty());
        fs::write(top.join("c/file"), "").unwrap();
        assert!(subtree(&top.join("c/file")).0.is_empty());
    }

    #[test]
    fn processes_anywhere_below_populate_the_tree() {
        let dir = tree();
        let top = dir.path().join("top");
        fs::write(top.join("cgroup.procs"), "").unwrap();
        fs::write(top.join("a/cgroup.procs"), "\n").unwrap();
        assert!(!populated(&top));
        assert!(!has_processes(&top.join("a")));
        assert_eq!(deepest_populated(&top), None);
        fs::write(top.join("a/b/cgroup.procs"), "42\n43\n").unwrap();
        assert!(populated(&top));
        assert!(has_processes(&top.join("a/b")));
        assert_eq!(procs(&top.join("a/b")), [42, 43]);
        assert!(procs(&top.join("c")).is_empty());
        assert_eq!(deepest_populated(&top), Some(top.join("a/b")));
        // The top itself does not count as a descendant.
        fs::write(top.join("a/b/cgroup.procs"), "").unwrap();
        fs::write(top.join("cgroup.procs"), "7\n").unwrap();
        assert!(populated(&top));
        assert_eq!(deepest_populated(&top), None);
    }

    /// `rmdir` fails with `EBUSY` for a directory listing a process; `kill` takes
    /// the process out of every `cgroup.procs` below `root`.
    #[derive(Debug)]
    struct FakeKernel {
        root: PathBuf,
        calls: Mutex<Vec<String>>,
    }

    impl FakeKernel {
        fn new(root: &Path) -> FakeKernel {
            FakeKernel {
                root: root.to_owned(),
                calls: Mutex::default(),
            }
        }
    }

    impl Syscalls for FakeKernel {
        fn mkdir(&self, path: &Path) -> io::Result<()> {
            fs::create_dir(path)
        }
        fn rmdir(&self, path: &Path) -> io::Result<()> {
            if has_processes(path) {
                return Err(io::Error::from_raw_os_error(libc::EBUSY));
            }
            let _ = fs::remove_file(path.join("cgroup.procs"));
            fs::remove_dir(path)?;
            self.calls
                .lock()
                .unwrap()
                .push(format!("rmdir {}", path.display()));
            Ok(())
        }
        fn kill(&self, pid: u32) -> io::Result<()> {
            self.calls.lock().unwrap().push(format!("kill {pid}"));
            for dir in subtree(&self.root).0 {
                let left: Vec<String> = procs(&dir)
                    .into_iter()
                    .filter(|&p| p != pid)
                    .map(|p| format!("{p}\n"))
                    .collect();
                if dir.join("cgroup.procs").exists() {
                    fs::write(dir.join("cgroup.procs"), left.concat())?;
                }
            }
            Ok(())
        }
        fn own_cgroups(&self) -> io::Result<String> {
            Ok(String::new())
        }
    }

    #[test]
    fn removal_is_bottom_up_and_kills_only_when_asked() {
        let dir = tree();
        let top = dir.path().join("top");
        fs::write(top.join("a/b/cgroup.procs"), "42\n").unwrap();
        let kernel = FakeKernel::new(dir.path());

        // Without kill and patience: one pass; the busy branch and the top stay.
        let done = remove_tree(&kernel, &top, &RemoveTree::default());
        assert_eq!(done.removed, [top.join("c")]);
        let (path, e) = done.failed.as_ref().unwrap();
        assert_eq!(path, &top);
        assert_eq!(e.raw_os_error(), Some(libc::ENOTEMPTY));
        assert!(top.join("a/b").is_dir());
        let err = done.into_result().unwrap_err().to_string();
        assert!(err.contains("cannot remove cgroup directory"), "{err}");

        // keep_top leaves the top directory itself.
        let done = remove_tree(
            &kernel,
            &top.join("a"),
            &RemoveTree {
                keep_top: true,
                ..RemoveTree::default()
            },
        );
        assert!(done.removed.is_empty());
        assert!(matches!(&done.failed, Some((p, _)) if p == &top.join("a/b")));
        assert!(!kernel
            .calls
            .lock()
            .unwrap()
            .iter()
            .any(|c| c.starts_with("kill")));

        // Killing, with a little patience: everything goes, children first.
        let done = remove_tree(
            &kernel,
            &top,
            &RemoveTree {
                kill: true,
                patience: Duration::from_secs(1),
                ..RemoveTree::default()
            },
        );
        assert!(done.failed.is_none(), "{:?}", done.failed);
        assert_eq!(done.removed, [top.join("a/b"), top.join("a"), top.clone()]);
        assert!(kernel.calls.lock().unwrap().contains(&"kill 42".to_owned()));
        assert!(!top.exists());
        // Gone already: nothing to do.
        let done = remove_tree(&kernel, &top, &RemoveTree::default());
        assert!(done.removed.is_empty() && done.failed.is_none());
    }

    #[test]
    fn busy_rmdir_is_retried_only_while_patient() {
        let dir = tempfile::tempdir().unwrap();
        let cg = dir.path().join("cg");
        fs::create_dir(&cg).unwrap();
        fs::write(cg.join("cgroup.procs"), "1\n").unwrap();
        let kernel = FakeKernel::new(dir.path());
        let start = Instant::now();
        let e = rmdir_retrying(&kernel, &cg, Duration::from_millis(50)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EBUSY));
        assert!(start.elapsed() >= Duration::from_millis(50));
        fs::write(cg.join("cgroup.procs"), "").unwrap();
        rmdir_retrying(&kernel, &cg, Duration::ZERO).unwrap();
        let e = rmdir_retrying(&RealSyscalls, &cg, Duration::ZERO).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
    }
}
