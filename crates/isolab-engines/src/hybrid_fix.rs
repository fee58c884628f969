//! The one hybrid-cgroup fix for crun-based engines (crun itself, Podman with crun),
//! recorded on disk before it changes the host.
//!
//! crun refuses a hybrid cgroup host whose cgroup2 mount lists a controller in
//! `cgroup.controllers`; mounting a v1 hierarchy for each such controller empties
//! that list. [`HybridFix::apply`] does it step by step ([`HostFix`]: remount the
//! cgroup tmpfs read-write, create a mount point, mount a hierarchy), and writes
//! each step into the owner's record (`<state dir>/hybrid-fix/<engine>.json`: the
//! engine, its pid and the steps) *before* it takes it, with a write-then-rename so
//! the record is always whole. [`HybridFix::undo`] undoes exactly the recorded steps,
//! newest first, and removes the record; [`gc_dead_owners`] does the same for every
//! record in the state directory whose owner process is gone (after a SIGKILL), so
//! `gc` leaves no mount behind. A step recorded but not taken (a crash between the
//! two) is undone harmlessly: a missing directory counts as removed.
//!
//! How a hierarchy is unmounted stays the engine's (crun waits for it to be empty,
//! Podman empties it and checks the controller is back in cgroup2): the undo
//! functions take it as a closure.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::tool::{argv, run_ok, Tools};
use crate::EngineError;

/// How an engine unmounts a v1 hierarchy it mounted: `(controller, mount point)`,
/// returning what it did beyond the unmount (one line each).
pub(crate) type Unmount<'a> = dyn FnMut(&str, &Path) -> Result<Vec<String>, EngineError> + 'a;

/// The controllers the cgroup2 mount at `unified` lists in `cgroup.controllers`: on a
/// hybrid host, the ones crun objects to (`cgroups in hybrid mode not supported`).
/// Each engine decides from them whether to fix, refuse, or fall back to runc.
pub(crate) fn cgroup2_controllers(unified: &Path) -> std::io::Result<Vec<String>> {
    Ok(std::fs::read_to_string(unified.join("cgroup.controllers"))?
        .split_whitespace()
        .map(str::to_owned)
        .collect())
}

/// The directory of the record files, below the engines' state directory: a folder of
/// its own, because `isolab-runtime gc` reads every `*.json` in `/run/isolab` as a
/// container's state.
const RECORD_DIR: &str = "hybrid-fix";

/// One change the fix makes to the host, undone at shutdown (or by `gc` once its
/// owner process is gone).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostFix {
    /// The cgroup tmpfs was remounted read-write (remounted read-only again).
    RemountedReadWrite(PathBuf),
    /// A mount point directory was created (removed again).
    CreatedDir(PathBuf),
    /// A v1 hierarchy of this controller was mounted there (unmounted again).
    MountedV1 {
        /// The controller (`hugetlb`).
        controller: String,
        /// The mount point.
        path: PathBuf,
    },
}

/// What a record file holds: who made the fix and its steps, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixRecord {
    /// The engine that made it (`crun`, `podman`).
    pub engine: String,
    /// The process that made it; when it is gone, `gc` undoes the fix.
    pub pid: u32,
    /// The steps, oldest first.
    pub steps: Vec<HostFix>,
}

impl FixRecord {
    /// The mount points of the v1 hierarchies the record lists.
    pub fn mounted(&self) -> Vec<(String, PathBuf)> {
        self.steps
            .iter()
            .filter_map(|s| match s {
                HostFix::MountedV1 { controller, path } => Some((controller.clone(), path.clone())),
                _ => None,
            })
            .collect()
    }
}

/// The hybrid fix of one engine: its record file and the program that mounts.
pub(crate) struct HybridFix<'a> {
    /// The engine, in errors and in the record.
    pub engine: &'static str,
    /// Runs `mount` and `umount`.
    pub tools: &'a dyn Tools,
    /// The `mount` program (a name or a path).
    pub mount: String,
    /// The directory of the record files (`/run/isolab`).
    pub state_dir: PathBuf,
}

impl HybridFix<'_> {
    /// This engine's record file.
    pub fn record_file(&self) -> PathBuf {
        record_file(&self.state_dir, self.engine)
    }

    /// The record, when there is one.
    pub fn load(&self) -> Result<Option<FixRecord>, EngineError> {
        load(self.engine, &self.record_file())
    }

    /// Mounts a v1 hierarchy for each of `controllers` below `root` (remounting `root`
    /// read-write first when `remount_rw`), skipping what the record already lists.
    /// Every step is recorded before it is taken; a step that fails is dropped from
    /// the record again, the ones before it stay (undone by [`HybridFix::undo`]).
    pub fn apply(
        &self,
        root: &Path,
        controllers: &[String],
        remount_rw: bool,
    ) -> Result<Vec<HostFix>, EngineError> {
        let engine = self.engine;
        let mut record = self.load()?.unwrap_or(FixRecord {
            engine: engine.to_owned(),
            pid: std::process::id(),
            steps: Vec::new(),
        });
        record.pid = std::process::id();
        let mut taken = Vec::new();
        let remount = HostFix::RemountedReadWrite(root.to_path_buf());
        if remount_rw && !record.steps.contains(&remount) {
            self.step(&mut record, remount.clone(), || {
                run_ok(
                    self.tools,
                    engine,
                    &argv([self.mount.as_str(), "-o", "remount,rw", &path_str(root)]),
                )
                .map(|_| ())
            })?;
            taken.push(remount);
        }
        for c in controllers {
            let target = root.join(c);
            if record.mounted().iter().any(|(_, p)| p == &target) {
                continue;
            }
            if !target.is_dir() {
                let created = HostFix::CreatedDir(target.clone());
                self.step(&mut record, created.clone(), || {
                    std::fs::create_dir(&target).map_err(|source| EngineError::Io {
                        engine,
                        action: "create the cgroup mount point",
                        path: target.clone(),
                        source,
                    })
                })?;
                taken.push(created);
            }
            let mounted = HostFix::MountedV1 {
                controller: c.clone(),
                path: target.clone(),
            };
            self.step(&mut record, mounted.clone(), || {
                mount_v1(self.tools, engine, &self.mount, c, &target)
            })?;
            taken.push(mounted);
        }
        Ok(taken)
    }

    /// Records `fix`, then takes it with `effect`; drops it from the record when that
    /// fails.
    fn step(
        &self,
        record: &mut FixRecord,
        fix: HostFix,
        effect: impl FnOnce() -> Result<(), EngineError>,
    ) -> Result<(), EngineError> {
        record.steps.push(fix);
        save(self.engine, &self.record_file(), record)?;
        if let Err(e) = effect() {
            record.steps.pop();
            save(self.engine, &self.record_file(), record)?;
            return Err(e);
        }
        Ok(())
    }

    /// Undoes this engine's recorded fix (see [`undo_record`]); nothing when there is
    /// no record.
    pub fn undo(&self, unmount: &mut Unmount<'_>) -> Result<Vec<String>, EngineError> {
        undo_record(
            self.engine,
            self.tools,
            &self.mount,
            &self.record_file(),
            unmount,
        )
    }
}

/// `mount -t cgroup -o <controller> cgroup <target>`: the one mount of a v1 hierarchy
/// (also used by an undo that has to mount a lingering hierarchy again to free it).
pub(crate) fn mount_v1(
    tools: &dyn Tools,
    engine: &'static str,
    mount: &str,
    controller: &str,
    target: &Path,
) -> Result<(), EngineError> {
    run_ok(
        tools,
        engine,
        &argv([
            mount,
            "-t",
            "cgroup",
            "-o",
            controller,
            "cgroup",
            &path_str(target),
        ]),
    )
    .map(|_| ())
}

/// The record file of `engine` in `state_dir`.
pub(crate) fn record_file(state_dir: &Path, engine: &str) -> PathBuf {
    state_dir.join(RECORD_DIR).join(format!("{engine}.json"))
}

fn path_str(p: &Path) -> String {
    p.display().to_string()
}

fn load(engine: &'static str, file: &Path) -> Result<Option<FixRecord>, EngineError> {
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(EngineError::Io {
                engine,
                action: "read the hybrid-cgroup fix record",
                path: file.to_path_buf(),
                source,
            })
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| EngineError::Unexpected {
            engine,
            command: format!("read {}", file.display()),
            detail: format!("not a hybrid-cgroup fix record: {e}"),
        })
}

/// Writes `record` to `file` whole: into a temporary file beside it, then renamed over
/// it. An empty record removes the file.
fn save(engine: &'static str, file: &Path, record: &FixRecord) -> Result<(), EngineError> {
    let io = |action: &'static str, path: &Path| EngineError::io(engine, action, path);
    if record.steps.is_empty() {
        return match std::fs::remove_file(file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(io("remove the hybrid-cgroup fix record", file)(e))
            }
            _ => Ok(()),
        };
    }
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(io("create the state directory", dir))?;
    }
    let text = serde_json::to_vec_pretty(record).map_err(|e| EngineError::Unexpected {
        engine,
        command: format!("write {}", file.display()),
        detail: e.to_string(),
    })?;
    let tmp = file.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(io("write the hybrid-cgroup fix record", &tmp))?;
    std::fs::rename(&tmp, file).map_err(io("rename the hybrid-cgroup fix record onto", file))
}

/// Undoes the steps recorded in `file`, newest first: `unmount(controller, path)` for a
/// mounted hierarchy, `rmdir` for a created mount point (already gone counts as
/// done), `mount -o remount,ro` for a remount. Each step undone leaves the record;
/// the record is removed when all are. Undoing continues past a failed step (it stays
/// recorded) and the first error is returned.
pub(crate) fn undo_record(
    engine: &'static str,
    tools: &dyn Tools,
    mount: &str,
    file: &Path,
    unmount: &mut Unmount<'_>,
) -> Result<Vec<String>, EngineError> {
    let Some(mut record) = load(engine, file)? else {
        return Ok(Vec::new());
    };
    let mut done = Vec::new();
    let mut kept = Vec::new();
    let mut first_error = None;
    while let Some(fix) = record.steps.pop() {
        let result = match &fix {
            HostFix::MountedV1 { controller, path } => {
                unmount(controller, path).map(|mut lines| {
                    lines.insert(
                        0,
                        format!(
                            "{engine}: unmounted the v1 {controller} hierarchy at {}",
                            path.display()
                        ),
                    );
                    lines
                })
            }
            HostFix::CreatedDir(path) => match std::fs::remove_dir(path) {
                Ok(()) => Ok(vec![format!("{engine}: removed {}", path.display())]),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![format!(
                    "{engine}: {} was already gone",
                    path.display()
                )]),
                Err(source) => Err(EngineError::Io {
                    engine,
                    action: "remove the cgroup mount point",
                    path: path.clone(),
                    source,
                }),
            },
            HostFix::RemountedReadWrite(path) => run_ok(
                tools,
                engine,
                &argv([mount, "-o", "remount,ro", &path_str(path)]),
            )
            .map(|_| vec![format!("{engine}: remounted {} read-only", path.display())]),
        };
        match result {
            Ok(mut lines) => done.append(&mut lines),
            Err(e) => {
                kept.push(fix);
                first_error = first_error.or(Some(e));
            }
        }
        let mut left = record.clone();
        left.steps.extend(kept.iter().rev().cloned());
        save(engine, file, &left)?;
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(done),
    }
}

/// Undoes every record in `state_dir` whose owner process is gone (no `<proc>/<pid>`),
/// with `unmount` for the hierarchies (see [`undo_record`]); a live owner's record is
/// left alone.
pub(crate) fn gc_dead_owners(
    engine: &'static str,
    tools: &dyn Tools,
    mount: &str,
    state_dir: &Path,
    proc: &Path,
    unmount: &mut Unmount<'_>,
) -> Result<Vec<String>, EngineError> {
    let dir = state_dir.join(RECORD_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(EngineError::Io {
                engine,
                action: "list the hybrid-cgroup fix records in",
                path: dir.clone(),
                source,
            })
        }
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".json"))
        })
        .collect();
    files.sort();
    let mut done = Vec::new();
    for file in files {
        let Some(record) = load(engine, &file)? else {
            continue;
        };
        if proc.join(record.pid.to_string()).exists() {
            continue;
        }
        done.push(format!(
            "{engine}: undoing the hybrid-cgroup fix {} (pid {}, gone) recorded in {}",
            record.engine,
            record.pid,
            file.display()
        ));
        done.extend(undo_record(engine, tools, mount, &file, unmount)?);
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{lock, Fake};
    use crate::tool::Output;
    use std::sync::Mutex;

    /// A [`Tools`] that notes, at each call, the record file's steps at that moment.
    struct Watching<'a> {
        inner: Fake,
        record: PathBuf,
        seen: Mutex<Vec<(String, Vec<HostFix>)>>,
        _dir: &'a Path,
    }

    impl Tools for Watching<'_> {
        fn run(&self, argv: &[String]) -> std::io::Result<Output> {
            let steps = load("crun", &self.record)
                .unwrap()
                .map(|r| r.steps)
                .unwrap_or_default();
            lock(&self.seen).push((argv.join(" "), steps));
            self.inner.run(argv)
        }

        fn which(&self, program: &str) -> Option<PathBuf> {
            self.inner.which(program)
        }
    }

    fn fix<'a>(tools: &'a dyn Tools, state: &Path) -> HybridFix<'a> {
        HybridFix {
            engine: "crun",
            tools,
            mount: "mount".into(),
            state_dir: state.to_path_buf(),
        }
    }

    #[test]
    fn the_record_is_written_before_each_mount() {
        let dir = tempfile::tempdir().unwrap();
        let (state, root) = (dir.path().join("run"), dir.path().join("cg"));
        std::fs::create_dir_all(&root).unwrap();
        let tools = Watching {
            inner: Fake::default(),
            record: record_file(&state, "crun"),
            seen: Mutex::new(Vec::new()),
            _dir: dir.path(),
        };
        let f = fix(&tools, &state);
        let taken = f.apply(&root, &["hugetlb".into()], true).unwrap();
        let mounted = HostFix::MountedV1 {
            controller: "hugetlb".into(),
            path: root.join("hugetlb"),
        };
        assert_eq!(
            taken,
            vec![
                HostFix::RemountedReadWrite(root.clone()),
                HostFix::CreatedDir(root.join("hugetlb")),
                mounted.clone(),
            ]
        );
        let seen = lock(&tools.seen).clone();
        assert_eq!(seen.len(), 2);
        assert!(seen[0].0.contains("remount,rw"));
        assert_eq!(seen[0].1, vec![HostFix::RemountedReadWrite(root.clone())]);
        assert!(seen[1].0.starts_with("mount -t cgroup -o hugetlb cgroup"));
        assert_eq!(seen[1].1.last(), Some(&mounted));
        let record = f.load().unwrap().unwrap();
        assert_eq!(record.steps, taken);
        assert_eq!(record.pid, std::process::id());
        assert_eq!(record.engine, "crun");
        // Applied again: nothing new.
        assert!(f
            .apply(&root, &["hugetlb".into()], true)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_failed_mount_leaves_the_record_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        std::fs::create_dir_all(root.join("hugetlb")).unwrap();
        let tools = Fake::default();
        tools.reply("-o hugetlb", 32, "", "mount: permission denied");
        let f = fix(&tools, dir.path());
        assert!(f.apply(&root, &["hugetlb".into()], false).is_err());
        assert_eq!(f.load().unwrap(), None);
    }

    #[test]
    fn undo_removes_exactly_what_was_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        std::fs::create_dir_all(root.join("rdma")).unwrap();
        let tools = Fake::default();
        let f = fix(&tools, dir.path());
        f.apply(&root, &["hugetlb".into(), "rdma".into()], false)
            .unwrap();
        let mut unmounted = Vec::new();
        let lines = f
            .undo(&mut |c, p| {
                unmounted.push((c.to_owned(), p.to_path_buf()));
                Ok(Vec::new())
            })
            .unwrap();
        assert_eq!(
            unmounted,
            vec![
                ("rdma".to_owned(), root.join("rdma")),
                ("hugetlb".to_owned(), root.join("hugetlb")),
            ]
        );
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(!root.join("hugetlb").exists(), "created: removed");
        assert!(root.join("rdma").exists(), "not created: kept");
        assert!(!tools.calls().iter().any(|c| c.contains("remount")));
        assert_eq!(f.load().unwrap(), None);
        assert!(!f.record_file().exists());
    }

    #[test]
    fn a_failed_unmount_stays_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        std::fs::create_dir_all(&root).unwrap();
        let tools = Fake::default();
        let f = fix(&tools, dir.path());
        f.apply(&root, &["hugetlb".into()], false).unwrap();
        let err = f.undo(&mut |_, _| {
            Err(EngineError::Unsupported {
                engine: "crun",
                detail: "busy".into(),
            })
        });
        assert!(err.is_err());
        let left = f.load().unwrap().unwrap();
        assert_eq!(
            left.mounted(),
            vec![("hugetlb".into(), root.join("hugetlb"))]
        );
    }

    #[test]
    fn gc_undoes_a_dead_owners_record_and_leaves_a_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (state, proc, root) = (
            dir.path().join("run"),
            dir.path().join("proc"),
            dir.path().join("cg"),
        );
        std::fs::create_dir_all(proc.join("100")).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        let live = FixRecord {
            engine: "podman".into(),
            pid: 100,
            steps: vec![HostFix::MountedV1 {
                controller: "rdma".into(),
                path: root.join("rdma"),
            }],
        };
        let dead = FixRecord {
            engine: "crun".into(),
            pid: 200,
            steps: vec![
                HostFix::CreatedDir(root.join("hugetlb")),
                HostFix::MountedV1 {
                    controller: "hugetlb".into(),
                    path: root.join("hugetlb"),
                },
            ],
        };
        std::fs::create_dir(root.join("hugetlb")).unwrap();
        save("podman", &record_file(&state, "podman"), &live).unwrap();
        save("crun", &record_file(&state, "crun"), &dead).unwrap();
        let tools = Fake::default();
        let mut unmounted = Vec::new();
        let lines = gc_dead_owners("crun", &tools, "mount", &state, &proc, &mut |c, _| {
            unmounted.push(c.to_owned());
            Ok(Vec::new())
        })
        .unwrap();
        assert_eq!(unmounted, vec!["hugetlb".to_owned()]);
        assert!(!root.join("hugetlb").exists());
        assert!(!record_file(&state, "crun").exists());
        assert_eq!(
            load("podman", &record_file(&state, "podman")).unwrap(),
            Some(live)
        );
        assert_eq!(lines.len(), 3, "{lines:?}");
    }
}
