//! The run directories of the OCI-style drivers (runc, crun, LXC, nspawn): creating and
//! listing them, the state file a run leaves there ([`RunState`]) and the
//! [`Cleanup`] that undoes a run from it, also after a crash.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use isolab_cgroups::{MountEntry, RemoveTree};
use isolab_runtime::ContainerId;

use crate::host::{Host, HostCalls};
use crate::mounts::{cgroup_mounts, mount_table};
use crate::request::parent_rel;
use crate::{EngineError, RunRequest};

/// Name of the state file in a run's directory.
pub(crate) const STATE_FILE: &str = "isolab-run.json";

pub(crate) fn create_dir(
    engine: &'static str,
    path: &Path,
    action: &'static str,
) -> Result<(), EngineError> {
    std::fs::create_dir_all(path).map_err(|source| EngineError::Io {
        engine,
        action,
        path: path.to_path_buf(),
        source,
    })
}

/// The ids of the run directories in `dir` whose name starts with `prefix` (names
/// that are no container id are not isolab's).
pub(crate) fn run_dirs_with_prefix(
    engine: &'static str,
    dir: &Path,
    prefix: &str,
) -> Result<Vec<ContainerId>, EngineError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(EngineError::Io {
                engine,
                action: "list",
                path: dir.to_path_buf(),
                source,
            })
        }
    };
    let mut ids: Vec<ContainerId> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse().ok()))
        .filter(|id: &ContainerId| id.as_str().starts_with(prefix))
        .collect();
    ids.sort();
    Ok(ids)
}

/// Removes, with `remove`, every container whose id starts with `prefix` and names a
/// directory in any of `dirs` (the run directories, and wherever else the engine
/// leaves a directory per container); returns `remove`'s lines and
/// `<engine>: removed container <id>` for each, in the order of `dirs`.
pub(crate) fn gc_runs(
    engine: &'static str,
    dirs: &[PathBuf],
    prefix: &str,
    mut remove: impl FnMut(&ContainerId) -> Result<Vec<String>, EngineError>,
) -> Result<Vec<String>, EngineError> {
    let mut ids: Vec<ContainerId> = Vec::new();
    for dir in dirs {
        for id in run_dirs_with_prefix(engine, dir, prefix)? {
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    let mut lines = Vec::new();
    for id in ids {
        lines.append(&mut remove(&id)?);
        lines.push(format!("{engine}: removed container {id}"));
    }
    Ok(lines)
}

/// What a run left for [`Engine::remove`] to undo, saved as `isolab-run.json` in the
/// run's directory.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RunState {
    /// The container id.
    pub id: ContainerId,
    /// The cgroup parent the container was nested in (relative).
    pub cgroup_parent: PathBuf,
    /// Cgroups of the container (relative to every hierarchy's root), removed with
    /// everything below them in every hierarchy.
    pub cgroups: Vec<PathBuf>,
    /// Cgroups removed in every hierarchy when empty, after `cgroups` (shared
    /// top-level directories).
    pub prune: Vec<PathBuf>,
    /// The hierarchies (mount points) in which `cgroup_parent` existed when the run was
    /// prepared: in all others the engine created it, so its empty levels go too.
    pub parent_existed_in: Vec<PathBuf>,
}

impl RunState {
    pub(crate) fn new(
        request: &RunRequest,
        cgroups: Vec<PathBuf>,
        prune: Vec<PathBuf>,
        mounts: &[MountEntry],
    ) -> RunState {
        let parent = parent_rel(&request.cgroup_parent);
        RunState {
            id: request.id.clone(),
            parent_existed_in: cgroup_mounts(mounts)
                .into_iter()
                .filter(|m| m.join(&parent).is_dir())
                .collect(),
            cgroup_parent: parent,
            cgroups,
            prune,
        }
    }

    /// What can be known without the state file: the container's cgroup below
    /// `parent` (empty when unknown), and nothing else.
    pub(crate) fn fallback(id: &ContainerId, parent: &Path) -> RunState {
        let parent = parent_rel(parent);
        let cgroups = if parent.as_os_str().is_empty() {
            Vec::new()
        } else {
            vec![parent.join(id)]
        };
        RunState {
            id: id.clone(),
            cgroup_parent: PathBuf::new(),
            cgroups,
            prune: Vec::new(),
            parent_existed_in: Vec::new(),
        }
    }

    pub(crate) fn save(&self, engine: &'static str, dir: &Path) -> Result<(), EngineError> {
        let path = dir.join(STATE_FILE);
        let text = serde_json::to_vec_pretty(self).map_err(|e| EngineError::Unexpected {
            engine,
            command: format!("serialise {}", path.display()),
            detail: e.to_string(),
        })?;
        std::fs::write(&path, text).map_err(|source| EngineError::Io {
            engine,
            action: "write",
            path,
            source,
        })
    }

    /// The state saved in `dir`, `None` when there is none (or it is unreadable: a run
    /// killed while writing it).
    pub(crate) fn load(engine: &'static str, dir: &Path) -> Result<Option<RunState>, EngineError> {
        let path = dir.join(STATE_FILE);
        match std::fs::read(&path) {
            Ok(text) => Ok(serde_json::from_slice(&text).ok()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(EngineError::Io {
                engine,
                action: "read",
                path,
                source,
            }),
        }
    }
}

/// How long cleanup keeps killing and retrying a busy cgroup.
const CGROUP_DEADLINE: Duration = Duration::from_secs(3);

/// Removes what a run left: mounts below its directory, its cgroups in every
/// hierarchy (killing what is still inside), the parent levels the engine created,
/// and the directory.
pub(crate) struct Cleanup<'a> {
    pub engine: &'static str,
    pub host: &'a Arc<dyn Host>,
    pub mountinfo: &'a Path,
}

impl Cleanup<'_> {
    /// Cleans up the run in `dir` described by `state`; returns one line per thing
    /// removed. Continues after a failure and returns the first one.
    pub(crate) fn run(&self, dir: &Path, state: &RunState) -> Result<Vec<String>, EngineError> {
        let engine = self.engine;
        let mut lines = Vec::new();
        let mut first_error: Option<EngineError> = None;
        let mounts = mount_table(engine, self.mountinfo)?;
        // Mounts below the run's directory, deepest (= latest) first.
        let mut below: Vec<&MountEntry> = mounts
            .iter()
            .filter(|m| m.mount_point.starts_with(dir))
            .collect();
        below.reverse();
        for m in below {
            match self.host.unmount(&m.mount_point) {
                Ok(lazy) => lines.push(format!(
                    "{engine}: unmounted {}{}",
                    m.mount_point.display(),
                    if lazy { " (lazily: it was busy)" } else { "" }
                )),
                Err(e)
                    if e.raw_os_error() == Some(libc::EINVAL)
                        || e.kind() == io::ErrorKind::NotFound => {}
                Err(source) => {
                    first_error = first_error.or(Some(EngineError::Io {
                        engine,
                        action: "unmount",
                        path: m.mount_point.clone(),
                        source,
                    }))
                }
            }
        }
        let hierarchies = cgroup_mounts(&mounts);
        for rel in &state.cgroups {
            for root in &hierarchies {
                match self.remove_cgroup_tree(&root.join(rel)) {
                    Ok(true) => lines.push(format!(
                        "{engine}: removed cgroup {}",
                        root.join(rel).display()
                    )),
                    Ok(false) => {}
                    Err(e) => first_error = first_error.or(Some(e)),
                }
            }
        }
        let mut prune: Vec<(PathBuf, PathBuf)> = Vec::new();
        for root in &hierarchies {
            for rel in &state.prune {
                prune.push((root.clone(), rel.clone()));
            }
            if !state.cgroup_parent.as_os_str().is_empty()
                && !state.parent_existed_in.contains(root)
            {
                let mut level = Some(state.cgroup_parent.as_path());
                while let Some(rel) = level.filter(|r| !r.as_os_str().is_empty()) {
                    prune.push((root.clone(), rel.to_path_buf()));
                    level = rel.parent();
                }
            }
        }
        for (root, rel) in prune {
            let path = root.join(&rel);
            match self.host.rmdir(&path) {
                Ok(()) => lines.push(format!("{engine}: removed cgroup {}", path.display())),
                // Not there, or still used by another run (its remove takes it).
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || matches!(
                            e.raw_os_error(),
                            Some(libc::ENOTEMPTY | libc::EBUSY | libc::EEXIST)
                        ) => {}
                Err(source) => {
                    first_error = first_error.or(Some(EngineError::Io {
                        engine,
                        action: "remove the cgroup",
                        path,
                        source,
                    }))
                }
            }
        }
        match std::fs::remove_dir_all(dir) {
            Ok(()) => lines.push(format!("{engine}: removed {}", dir.display())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(source) => {
                first_error = first_error.or(Some(EngineError::Io {
                    engine,
                    action: "remove the run directory",
                    path: dir.to_path_buf(),
                    source,
                }))
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(lines),
        }
    }

    /// Removes the cgroup `top` and everything below it, killing the processes still
    /// inside ([`isolab_cgroups::remove_tree`] through the [`Host`]); `Ok(false)` when
    /// it does not exist.
    fn remove_cgroup_tree(&self, top: &Path) -> Result<bool, EngineError> {
        if !top.is_dir() {
            return Ok(false);
        }
        let how = RemoveTree {
            kill: true,
            patience: CGROUP_DEADLINE,
            ..RemoveTree::default()
        };
        match isolab_cgroups::remove_tree(&HostCalls(Arc::clone(self.host)), top, &how).failed {
            None => Ok(true),
            Some((path, source)) => Err(EngineError::Io {
                engine: self.engine,
                action: "remove the container's cgroup",
                path,
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gc_removes_each_prefixed_id_once() {
        let dir = tempfile::tempdir().unwrap();
        let (runs, machines) = (dir.path().join("runs"), dir.path().join("machines"));
        for d in [
            runs.join("isolab-e1-b"),
            runs.join("isolab-e2-a"),
            machines.join("isolab-e1-a"),
            machines.join("isolab-e1-b"),
            machines.join("Not-an-id"),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        let mut removed = Vec::new();
        let dirs = [runs, machines, dir.path().join("absent")];
        let lines = gc_runs("nspawn", &dirs, "isolab-e1-", |id| {
            removed.push(id.to_string());
            Ok(vec![format!("undid {id}")])
        })
        .unwrap();
        assert_eq!(removed, ["isolab-e1-b", "isolab-e1-a"]);
        assert_eq!(
            lines,
            [
                "undid isolab-e1-b",
                "nspawn: removed container isolab-e1-b",
                "undid isolab-e1-a",
                "nspawn: removed container isolab-e1-a"
            ]
        );
    }
}
