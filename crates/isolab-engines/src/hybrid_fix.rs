//! The one hybrid-cgroup fix for crun-based engines (crun itself, Podman with crun),
//! recorded on disk before it changes the host.
//!
//! crun refuses a hybrid cgroup host whose cgroup2 mount lists a controller in
//! `cgroup.controllers`; mounting a v1 hierarchy for each such controller empties
//! that list. [`HybridFix::apply`] does it step by step ([`HostFix`]: remount the
//! cgroup tmpfs read-write, create a mount point, mount a hierarchy), and writes
//! each step into the host's one record (`<state dir>/hybrid-fix/host.json`: who made
//! it, the steps, and its **users**) *before* it takes it, with a write-then-rename so
//! the record is always whole.
//!
//! The fix is host state that every crun-based engine of every isolab process relies
//! on while it runs, so it is shared: each (engine, process) that needs it, or finds
//! it in force ([`HybridFix::join`]), is a user, and [`HybridFix::release`] undoes the
//! recorded steps, newest first, only when the last user leaves. Record changes are
//! serialised between processes by a file lock (`hybrid-fix/lock`). [`gc_dead_owners`]
//! drops users whose process is gone (after a SIGKILL) and undoes a record nobody
//! uses any more, so `gc` leaves no mount behind. A step recorded but not taken (a
//! crash between the two) is undone harmlessly: a missing directory counts as
//! removed. Records of older isolabs (one file per engine, one owner) are read the
//! same way.
//!
//! How a hierarchy is unmounted stays the engine's (crun waits for it to be empty,
//! Podman empties it and checks the controller is back in cgroup2): the undo
//! functions take it as a closure.

use std::path::{Path, PathBuf};
use std::time::Duration;

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

/// The record file's name in [`RECORD_DIR`], without `.json`: one for the host.
pub(crate) const HOST_RECORD: &str = "host";

/// One change the fix makes to the host, undone when its last user leaves (or by `gc`
/// once every user's process is gone).
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

/// An engine of an isolab process that relies on the fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixUser {
    /// The engine (`crun`, `podman`).
    pub engine: String,
    /// Its process.
    pub pid: u32,
}

/// What a record file holds: who made the fix, its steps, in order, and who uses it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixRecord {
    /// The engine that made it (`crun`, `podman`).
    pub engine: String,
    /// The process that made it.
    pub pid: u32,
    /// The steps, oldest first.
    pub steps: Vec<HostFix>,
    /// Who relies on it; empty in an older isolab's record, whose one user was its
    /// maker ([`FixRecord::users`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<FixUser>,
}

impl FixRecord {
    /// Who relies on the fix (its maker, in an older record without users).
    pub fn users(&self) -> Vec<FixUser> {
        if self.users.is_empty() {
            vec![FixUser {
                engine: self.engine.clone(),
                pid: self.pid,
            }]
        } else {
            self.users.clone()
        }
    }

    /// Adds `user` once.
    fn add_user(&mut self, user: FixUser) {
        let mut users = self.users();
        if !users.contains(&user) {
            users.push(user);
        }
        self.users = users;
    }

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
    /// The host's record file.
    pub fn record_file(&self) -> PathBuf {
        record_file(&self.state_dir, HOST_RECORD)
    }

    /// This engine of this process, as a user of the fix.
    fn me(&self) -> FixUser {
        FixUser {
            engine: self.engine.to_owned(),
            pid: std::process::id(),
        }
    }

    /// Holds the lock that serialises record changes between processes.
    fn lock(&self) -> Result<RecordLock, EngineError> {
        RecordLock::take(self.engine, &self.state_dir.join(RECORD_DIR))
    }

    /// Becomes a user of a fix already in force (made by another engine or process),
    /// so that it stays until this engine releases it; `false` when there is none.
    pub fn join(&self) -> Result<bool, EngineError> {
        let _lock = self.lock()?;
        let Some(mut record) = self.load()? else {
            return Ok(false);
        };
        record.add_user(self.me());
        save(self.engine, &self.record_file(), &record)?;
        Ok(true)
    }

    /// The record, when there is one.
    pub fn load(&self) -> Result<Option<FixRecord>, EngineError> {
        load(self.engine, &self.record_file())
    }

    /// Mounts a v1 hierarchy for each of `controllers` below `root` (remounting `root`
    /// read-write first when `remount_rw`). The caller read the mount table:
    /// `controllers` have no v1 hierarchy mounted, so a record that lists one for them
    /// is stale (its steps are dropped and taken anew).
    /// Every step is recorded before it is taken; a step that fails is dropped from
    /// the record again, the ones before it stay (undone by [`HybridFix::undo`]).
    pub fn apply(
        &self,
        root: &Path,
        controllers: &[String],
        remount_rw: bool,
    ) -> Result<Vec<HostFix>, EngineError> {
        let engine = self.engine;
        let _lock = self.lock()?;
        let mut record = self.load()?.unwrap_or(FixRecord {
            engine: engine.to_owned(),
            pid: std::process::id(),
            steps: Vec::new(),
            users: Vec::new(),
        });
        record.add_user(self.me());
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
            // The caller asks for `c` because no v1 hierarchy of it is mounted: a
            // record that says one is was left by a user whose hierarchy is gone
            // (unmounted behind isolab's back). Its steps for `c` no longer hold.
            let stale = |s: &HostFix| match s {
                HostFix::MountedV1 { path, .. } => path == &target,
                HostFix::CreatedDir(path) => path == &target && !target.is_dir(),
                HostFix::RemountedReadWrite(_) => false,
            };
            if record.steps.iter().any(stale) {
                record.steps.retain(|s| !stale(s));
                save(engine, &self.record_file(), &record)?;
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

    /// Leaves the fix: this engine of this process is no longer a user. The last user
    /// undoes it (see [`undo_record`]); while others remain, it stays (one line says
    /// who). Nothing when there is no record or this engine never used it.
    pub fn release(&self, unmount: &mut Unmount<'_>) -> Result<Vec<String>, EngineError> {
        let _lock = self.lock()?;
        let Some(mut record) = self.load()? else {
            return Ok(Vec::new());
        };
        let me = self.me();
        let mut users = record.users();
        if !users.contains(&me) {
            return Ok(Vec::new());
        }
        users.retain(|u| u != &me);
        if !users.is_empty() {
            record.users = users.clone();
            save(self.engine, &self.record_file(), &record)?;
            let others: Vec<String> = users
                .iter()
                .map(|u| format!("{} of pid {}", u.engine, u.pid))
                .collect();
            return Ok(vec![format!(
                "{}: the hybrid-cgroup fix stays for its other users ({})",
                self.engine,
                others.join(", ")
            )]);
        }
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

/// How long an undo waits for a v1 hierarchy it mounted to hold no cgroup but its root
/// (a runtime's removed cgroups are released some milliseconds after their `rmdir`).
pub(crate) const UNMOUNT_V1_DEADLINE: Duration = Duration::from_secs(5);

/// The child cgroups of the v1 hierarchy mounted at `mount_point` (its directories).
pub(crate) fn child_cgroups(mount_point: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(mount_point)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default()
}

/// The error of an undo that leaves the v1 hierarchy of `controller` mounted at
/// `mount_point` because it holds cgroups: `children` (found in it) or, when none is
/// seen, `dying` ones the kernel has not released. Unmounting it would hide them: the
/// hierarchy would live on, mounted nowhere, and the controller would not return to
/// cgroup v2 (a later mount reuses it).
pub(crate) fn kept_mounted(
    engine: &'static str,
    controller: &str,
    mount_point: &Path,
    children: &[PathBuf],
    dying: u64,
) -> EngineError {
    let held = if children.is_empty() {
        format!("{dying} being released by the kernel")
    } else {
        children
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    EngineError::Unsupported {
        engine,
        detail: format!(
            "the v1 {controller} hierarchy isolab mounted at {path} still holds cgroups ({held}); unmounting it now would keep it alive and {controller} would not return to cgroup v2, so it stays mounted: remove them (rmdir, deepest first), then `umount {path}` (or `isolab gc`)",
            path = mount_point.display()
        ),
    }
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
    let _lock = RecordLock::take(engine, &dir)?;
    let mut done = Vec::new();
    for file in files {
        let Some(mut record) = load(engine, &file)? else {
            continue;
        };
        let users = record.users();
        let live: Vec<FixUser> = users
            .iter()
            .filter(|u| proc.join(u.pid.to_string()).exists())
            .cloned()
            .collect();
        if !live.is_empty() {
            if live.len() < users.len() {
                record.users = live;
                save(engine, &file, &record)?;
            }
            continue;
        }
        done.push(format!(
            "{engine}: undoing the hybrid-cgroup fix {} (pid {}; every user's process is gone) recorded in {}",
            record.engine,
            record.pid,
            file.display()
        ));
        done.extend(undo_record(engine, tools, mount, &file, unmount)?);
    }
    Ok(done)
}

/// An exclusive `flock(2)` on the record directory's `lock` file, which serialises
/// record changes between isolab processes; released on drop.
struct RecordLock {
    _file: std::fs::File,
}

impl RecordLock {
    fn take(engine: &'static str, dir: &Path) -> Result<RecordLock, EngineError> {
        let io = |action: &'static str, path: &Path| EngineError::io(engine, action, path);
        std::fs::create_dir_all(dir).map_err(io("create the state directory", dir))?;
        let path = dir.join("lock");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io("open the hybrid-cgroup fix lock", &path))?;
        use std::os::fd::AsRawFd;
        loop {
            // SAFETY: flock on a descriptor this function owns.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                return Ok(RecordLock { _file: file });
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io("lock", &path)(e));
            }
        }
    }
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
            record: record_file(&state, HOST_RECORD),
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
        // Asked again (the caller found no hugetlb hierarchy mounted, as the fake
        // mounts nothing): the recorded mount is stale and taken anew, the remount
        // stays, and the record lists each step once.
        let again = f.apply(&root, &["hugetlb".into()], true).unwrap();
        assert_eq!(again, vec![mounted.clone()]);
        assert_eq!(f.load().unwrap().unwrap().steps, taken);
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
    fn a_recorded_mount_that_is_gone_is_mounted_again() {
        // A record left with its hierarchy unmounted behind isolab's back and its
        // mount point removed: asked for the controller again, the fix forgets the
        // stale steps and takes them anew, instead of trusting the record.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        std::fs::create_dir_all(&root).unwrap();
        let target = root.join("hugetlb");
        let tools = Fake::default();
        let f = fix(&tools, dir.path());
        let stale = FixRecord {
            engine: "crun".into(),
            pid: 999_999,
            steps: vec![
                HostFix::CreatedDir(target.clone()),
                HostFix::MountedV1 {
                    controller: "hugetlb".into(),
                    path: target.clone(),
                },
            ],
            users: Vec::new(),
        };
        save("crun", &f.record_file(), &stale).unwrap();
        let taken = f.apply(&root, &["hugetlb".into()], false).unwrap();
        assert_eq!(taken, stale.steps, "both steps taken again");
        assert!(target.is_dir());
        assert!(tools.calls().iter().any(|c| c.contains("-o hugetlb")));
        let record = f.load().unwrap().unwrap();
        assert_eq!(record.steps, stale.steps, "each step once");
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
            .release(&mut |c, p| {
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
        let err = f.release(&mut |_, _| {
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

    /// A state directory, a fake /proc where pid 100 lives, and a cgroup root.
    fn gc_dirs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let (state, proc, root) = (dir.join("run"), dir.join("proc"), dir.join("cg"));
        std::fs::create_dir_all(proc.join("100")).unwrap();
        std::fs::create_dir_all(&root).unwrap();
        (state, proc, root)
    }

    #[test]
    fn gc_undoes_a_dead_owners_record_and_leaves_a_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let (state, proc, root) = gc_dirs(dir.path());
        let live = FixRecord {
            users: Vec::new(),
            engine: "podman".into(),
            pid: 100,
            steps: vec![HostFix::MountedV1 {
                controller: "rdma".into(),
                path: root.join("rdma"),
            }],
        };
        let dead = FixRecord {
            users: Vec::new(),
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

    #[test]
    fn the_fix_stays_until_its_last_user_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("cg");
        std::fs::create_dir_all(&root).unwrap();
        let tools = Fake::default();
        let crun = fix(&tools, dir.path());
        let podman = HybridFix {
            engine: "podman",
            ..fix(&tools, dir.path())
        };
        assert!(!podman.join().unwrap(), "nothing to join yet");
        crun.apply(&root, &["hugetlb".into()], false).unwrap();
        // Podman finds the fix in force (crun no longer objects) and relies on it.
        assert!(podman.join().unwrap());
        let mut unmounted = Vec::new();
        let lines = crun
            .release(&mut |c, _| {
                unmounted.push(c.to_owned());
                Ok(Vec::new())
            })
            .unwrap();
        assert!(unmounted.is_empty(), "podman still uses it");
        assert!(
            lines[0].contains("stays for its other users (podman of pid"),
            "{lines:?}"
        );
        let left = crun.load().unwrap().unwrap();
        assert_eq!(
            left.users(),
            vec![FixUser {
                engine: "podman".into(),
                pid: std::process::id()
            }]
        );
        // crun leaving again changes nothing; the last user undoes the fix.
        assert!(crun.release(&mut |_, _| unreachable!()).unwrap().is_empty());
        podman
            .release(&mut |c, _| {
                unmounted.push(c.to_owned());
                Ok(Vec::new())
            })
            .unwrap();
        assert_eq!(unmounted, vec!["hugetlb".to_owned()]);
        assert!(!crun.record_file().exists());
        assert!(!root.join("hugetlb").exists());
    }

    #[test]
    fn gc_keeps_a_fix_a_live_user_relies_on_and_drops_the_dead_users() {
        let dir = tempfile::tempdir().unwrap();
        let (state, proc, root) = gc_dirs(dir.path());
        let user = |engine: &str, pid| FixUser {
            engine: engine.into(),
            pid,
        };
        let record = FixRecord {
            engine: "crun".into(),
            pid: 200,
            steps: vec![HostFix::MountedV1 {
                controller: "hugetlb".into(),
                path: root.join("hugetlb"),
            }],
            users: vec![user("crun", 200), user("podman", 100)],
        };
        let file = record_file(&state, HOST_RECORD);
        save("crun", &file, &record).unwrap();
        let tools = Fake::default();
        let gc = |unmounted: &mut Vec<String>| {
            gc_dead_owners("crun", &tools, "mount", &state, &proc, &mut |c, _| {
                unmounted.push(c.to_owned());
                Ok(Vec::new())
            })
            .unwrap()
        };
        let mut unmounted = Vec::new();
        assert!(gc(&mut unmounted).is_empty());
        assert!(unmounted.is_empty(), "podman (pid 100) still runs");
        assert_eq!(
            load("crun", &file).unwrap().unwrap().users,
            vec![user("podman", 100)]
        );
        std::fs::remove_dir(proc.join("100")).unwrap();
        assert!(!gc(&mut unmounted).is_empty());
        assert_eq!(unmounted, vec!["hugetlb".to_owned()]);
        assert!(!file.exists());
    }
}
