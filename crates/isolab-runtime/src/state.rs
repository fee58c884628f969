//! State files (`<state_dir>/<id>.json`) and [`gc`], which undoes what a killed
//! runtime left behind.
//!
//! A state file is written before anything is created on the host and removed after
//! everything is gone, so every leftover is named by one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{Cgroup, Hierarchy};

use crate::error::RuntimeError;
use crate::id::ContainerId;
use crate::loopdev;

/// The OCI runtime spec version this runtime implements (the `ociVersion` of the
/// state it reports, to `state` and to hooks).
pub const OCI_VERSION: &str = "1.0.2";

/// Writes `data` to an unnamed file in `dir` (`O_TMPFILE`) and links it as `path`.
/// `EOPNOTSUPP` or `EISDIR` ([`no_unnamed_files`]) when `dir`'s file system has no
/// unnamed files.
fn link_unnamed(dir: &Path, path: &Path, data: &[u8]) -> io::Result<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = fs::OpenOptions::new()
        .write(true)
        .mode(0o644)
        .custom_flags(libc::O_TMPFILE)
        .open(dir)?;
    file.write_all(data)?;
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
    let to = std::ffi::CString::new(path.as_os_str().as_bytes())?;
    // SAFETY: two NUL-terminated paths; linkat reads them and touches nothing else.
    // AT_SYMLINK_FOLLOW links the file the /proc link names (std's hard_link passes
    // no flags, which would link the /proc link itself).
    let rc = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether [`link_unnamed`] failed because the file system has no unnamed files.
fn no_unnamed_files(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EISDIR))
}

/// The largest state that [`State::update`] writes in place: one page, which a
/// single `write(2)` puts in the page cache all at once or not at all (a fatal
/// signal is only taken between pages). Larger states go through a temporary file
/// renamed over the old one.
const IN_PLACE_MAX: usize = 4096;

/// What a running container has created on the host.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct State {
    /// Container id.
    pub id: ContainerId,
    /// Pid of the runtime process that owns the container.
    pub runtime_pid: u32,
    /// Its start time (field 22 of `/proc/<pid>/stat`), against pid reuse.
    pub runtime_start: u64,
    /// Pid of the container's init (host pid namespace), once cloned.
    pub init_pid: Option<u32>,
    /// The cgroup, relative to the cgroup mounts.
    pub cgroup: PathBuf,
    /// The image file of an ext4 root.
    pub image: Option<PathBuf>,
    /// The loop device it is attached to.
    pub loop_device: Option<PathBuf>,
    /// Directory of the mount points (`<state_dir>/<id>`).
    pub mount_base: PathBuf,
    /// The overlay work directory the runtime created for a kept upper.
    pub overlay_work: Option<PathBuf>,
    /// Network state for the network module's teardown (opaque here).
    pub network: Option<serde_json::Value>,
    /// Creation time, seconds since the Unix epoch.
    pub created: u64,
    /// Ancestors of the cgroup (relative, outermost first) that existed under no
    /// cgroup mount before the runtime created them: removed again when empty.
    #[serde(default)]
    pub cgroup_created: Vec<PathBuf>,
    /// Root of the v1 devices hierarchy holding the container's devices cgroup
    /// (`<devices_mount>/<cgroup>`), when one is used.
    #[serde(default)]
    pub devices_mount: Option<PathBuf>,
    /// Ancestors of the cgroup missing from the devices hierarchy alone (the lab's
    /// instance cgroups, e.g., exist in every other hierarchy but not there): the
    /// runtime creates them in it, so they are removed again when empty.
    #[serde(default)]
    pub devices_created: Vec<PathBuf>,
    /// Set once `create` has finished: the container no longer belongs to a runtime
    /// process but to its caller (an engine that reaps its process); only `delete`
    /// removes it, and [`gc`] leaves it alone.
    #[serde(default)]
    pub oci: Option<OciInfo>,
    /// The root of a container without a mount namespace of its own, canonical: its
    /// mounts are in the host's mount table below it, and [`undo`] unmounts them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_mounts: Option<PathBuf>,
}

/// What the OCI operations need of a created container.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct OciInfo {
    /// The bundle directory (absolute).
    pub bundle: PathBuf,
    /// The root filesystem (absolute).
    pub rootfs: PathBuf,
    /// Start time of the container's process (field 22 of `/proc/<pid>/stat`),
    /// against pid reuse.
    pub init_start: u64,
    /// The bundle's annotations.
    #[serde(default)]
    pub annotations: std::collections::BTreeMap<String, String>,
    /// Creation time, RFC 3339 (UTC).
    pub created: String,
    /// Uid of the user who created it.
    pub owner: u32,
    /// The `startContainer` hooks, which the container's process runs during `start`
    /// (kept to name the one that failed).
    #[serde(default)]
    pub start_container: Vec<crate::config::Hook>,
    /// Hooks run after `start`.
    #[serde(default)]
    pub poststart: Vec<crate::config::Hook>,
    /// Hooks run by `delete`.
    #[serde(default)]
    pub poststop: Vec<crate::config::Hook>,
}

/// The exec FIFO of a container whose mount points are under `mount_base`: it exists
/// from `create` until `start`.
pub fn exec_fifo(mount_base: &Path) -> PathBuf {
    mount_base.join("exec.fifo")
}

impl State {
    /// The state file of container `id`.
    pub fn path(state_dir: &Path, id: &ContainerId) -> PathBuf {
        state_dir.join(format!("{id}.json"))
    }

    /// Writes a new state file; [`RuntimeError::AlreadyExists`] if there is one.
    ///
    /// The file appears whole or not at all (its content is written to an unnamed
    /// file, `O_TMPFILE`, that is then hard-linked into place, which fails when the
    /// name exists; where the file system has no unnamed files, to a temporary name
    /// removed afterwards): [`gc`] of another runtime may list the directory at any
    /// moment.
    pub fn create(&self, state_dir: &Path) -> Result<PathBuf, RuntimeError> {
        fs::create_dir_all(state_dir).map_err(|source| RuntimeError::Host {
            op: "create the state directory",
            path: state_dir.to_owned(),
            source,
        })?;
        let path = State::path(state_dir, &self.id);
        let json = self.to_json();
        let linked = match link_unnamed(state_dir, &path, &json) {
            Err(e) if no_unnamed_files(&e) => {
                let tmp = path.with_extension(format!("json.new.{}", std::process::id()));
                fs::write(&tmp, &json).map_err(|source| RuntimeError::Host {
                    op: "write the state file",
                    path: tmp.clone(),
                    source,
                })?;
                let linked = fs::hard_link(&tmp, &path);
                // Best effort: a leftover temporary file is not a state file (gc reads
                // only `*.json`) and is replaced by the next create of this id.
                let _ = fs::remove_file(&tmp);
                linked
            }
            linked => linked,
        };
        match linked {
            Ok(()) => Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                Err(RuntimeError::AlreadyExists {
                    id: self.id.clone(),
                    path,
                })
            }
            Err(source) => Err(RuntimeError::Host {
                op: "create the state file",
                path,
                source,
            }),
        }
    }

    /// Rewrites the state file in place, in one `write(2)` of at most a page, padded
    /// with spaces to the old length (see [`IN_PLACE_MAX`]): a runtime killed at any
    /// moment leaves a whole state, old or new. Not a temporary file renamed over it:
    /// on a disk file system (ext4) renaming over an existing file also flushes the
    /// new one's data to disk (`auto_da_alloc`), 0.13 ms of every start on the lab's
    /// machine, whose /run is not a tmpfs.
    pub fn update(&self, path: &Path) -> Result<(), RuntimeError> {
        let err = |source| RuntimeError::Host {
            op: "update the state file",
            path: path.to_owned(),
            source,
        };
        let mut json = self.to_json();
        if json.len() > IN_PLACE_MAX {
            let tmp = path.with_extension("json.tmp");
            return fs::write(&tmp, json)
                .and_then(|()| fs::rename(&tmp, path))
                .map_err(err);
        }
        let file = fs::OpenOptions::new().write(true).open(path).map_err(err)?;
        let old = file.metadata().map_err(err)?.len() as usize;
        if json.len() < old {
            // JSON allows trailing whitespace: no truncation, so no moment at which
            // the file holds less than a whole state.
            json.resize(old, b' ');
        }
        use std::os::unix::fs::FileExt;
        let written = file.write_at(&json, 0).map_err(err)?;
        if written != json.len() {
            return Err(err(io::Error::from(io::ErrorKind::WriteZero)));
        }
        Ok(())
    }

    fn to_json(&self) -> Vec<u8> {
        // Serialising plain data cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Reads a state file. A read that overlapped an [`State::update`] may see a
    /// page half old, half new: a text that does not parse is read again (three
    /// times, 1 ms apart) before it is an error.
    pub fn read(path: &Path) -> Result<State, RuntimeError> {
        let mut attempt = 0;
        loop {
            let text = fs::read(path).map_err(|source| RuntimeError::Host {
                op: "read the state file",
                path: path.to_owned(),
                source,
            })?;
            match serde_json::from_slice(&text) {
                Ok(state) => return Ok(state),
                Err(_) if attempt < 3 => {
                    attempt += 1;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(source) => {
                    return Err(RuntimeError::StateParse {
                        path: path.to_owned(),
                        source,
                    })
                }
            }
        }
    }

    /// Whether the owning runtime process is still alive (same pid, same start time).
    pub fn runtime_alive(&self) -> bool {
        process_start_time(self.runtime_pid) == Some(self.runtime_start)
            && !is_zombie(self.runtime_pid)
    }
}

/// Whether `pid` has exited but not been reaped yet (state `Z` in `/proc/<pid>/stat`):
/// a runtime killed with its parent may stay a zombie for as long as its new parent
/// does not reap it, yet it will never tear its container down.
pub fn is_zombie(pid: u32) -> bool {
    stat_field(pid, 3).is_some_and(|state| state == "Z")
}

/// Field 22 (`starttime`) of `/proc/<pid>/stat`, `None` when there is no such process.
pub fn process_start_time(pid: u32) -> Option<u64> {
    stat_field(pid, 22)?.parse().ok()
}

/// Field `n` (1-based, as in proc(5)) of `/proc/<pid>/stat`, from field 3 on.
fn stat_field(pid: u32, n: usize) -> Option<String> {
    let stat = isolab_cgroups::read_pseudo_file(Path::new(&format!("/proc/{pid}/stat"))).ok()?;
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace()
        .nth(n.checked_sub(3)?)
        .map(str::to_owned)
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Undoes everything `state` names, in order: the cgroup (killing what is left in
/// it), its devices cgroup, the cgroup ancestors the runtime created (when empty), the
/// loop device, the mount-point directories, the overlay work directory,
/// then the state file itself. Keeps going after a failure and returns every failure.
pub fn undo(state: &State, state_file: &Path, hierarchy: &Hierarchy) -> Vec<String> {
    let mut failures = undo_cgroups(state, hierarchy);
    failures.extend(undo_rest(state, state_file, failures.is_empty()));
    failures
}

/// The cgroup part of [`undo`].
fn undo_cgroups(state: &State, hierarchy: &Hierarchy) -> Vec<String> {
    let mut failures = Vec::new();
    match Cgroup::open(hierarchy, &state.cgroup) {
        Ok(cgroup) => {
            if let Err(e) = cgroup.remove() {
                failures.push(format!("remove cgroup {}: {e}", state.cgroup.display()));
            }
        }
        Err(isolab_cgroups::Error::NotFound { .. }) => {}
        Err(e) => failures.push(format!("open cgroup {}: {e}", state.cgroup.display())),
    }
    if let Some(mount) = &state.devices_mount {
        let leaf = mount.join(&state.cgroup);
        if let Err(e) = crate::container::devices::remove_cgroup_dir(&leaf) {
            failures.push(format!("remove devices cgroup {}: {e}", leaf.display()));
        }
    }
    if let Some(mount) = &state.devices_mount {
        for rel in state.devices_created.iter().rev() {
            let dir = mount.join(rel);
            if let Err(e) = crate::container::devices::remove_ancestor(&dir) {
                failures.push(format!("remove devices cgroup {}: {e}", dir.display()));
            }
        }
    }
    let roots = crate::container::devices::mount_roots(hierarchy, state.devices_mount.as_deref());
    for rel in state.cgroup_created.iter().rev() {
        for root in &roots {
            let dir = root.join(rel);
            if let Err(e) = crate::container::devices::remove_ancestor(&dir) {
                failures.push(format!("remove cgroup {}: {e}", dir.display()));
            }
        }
    }
    failures
}

/// What [`undo`] does after the cgroups: the loop device, the mount points, the
/// overlay work directory, the network's leftovers, and, when nothing failed before
/// (`so_far_ok`) nor here, the state file.
pub(crate) fn undo_rest(state: &State, state_file: &Path, so_far_ok: bool) -> Vec<String> {
    let mut failures = Vec::new();
    if let Some(root) = &state.host_mounts {
        failures.extend(unmount_below(root));
    }
    if let (Some(device), Some(image)) = (&state.loop_device, &state.image) {
        let still = loopdev::attached()
            .into_iter()
            .any(|(d, b)| &d == device && &b == image);
        if still {
            if let Err(e) = loopdev::detach(device) {
                failures.push(e.to_string());
            }
        }
    }
    match fs::remove_file(exec_fifo(&state.mount_base)) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => failures.push(format!("remove the exec FIFO: {e}")),
    }
    for dir in [
        state.mount_base.join("root"),
        state.mount_base.join("scratch"),
        state.mount_base.clone(),
    ] {
        match fs::remove_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => failures.push(format!("remove {}: {e}", dir.display())),
        }
    }
    if let Some(work) = &state.overlay_work {
        match fs::remove_dir_all(work) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => failures.push(format!("remove {}: {e}", work.display())),
        }
    }
    if let Some(mode) = state
        .network
        .as_ref()
        .and_then(|v| serde_json::from_value::<crate::network::NetworkMode>(v.clone()).ok())
    {
        if let Err(e) = crate::network::cleanup_leftovers(&state.id, &mode) {
            failures.push(format!("network of {}: {e}", state.id));
        }
    }
    if so_far_ok && failures.is_empty() {
        if let Err(e) = fs::remove_file(state_file) {
            if e.kind() != io::ErrorKind::NotFound {
                failures.push(format!("remove {}: {e}", state_file.display()));
            }
        }
    }
    failures
}

/// Unmounts every mount strictly below `root` in this process's mount table (the
/// host's), the latest first, each detached (`MNT_DETACH`): what a container without
/// a mount namespace of its own mounted there. A mount already gone with its parent
/// is not a failure.
pub(crate) fn unmount_below(root: &Path) -> Vec<String> {
    let table = Path::new("/proc/self/mountinfo");
    let entries = match isolab_cgroups::read_mountinfo(table, isolab_cgroups::Malformed::Skip) {
        Ok(entries) => entries,
        Err(e) => return vec![format!("read {}: {e}", table.display())],
    };
    let below = mounts_below(entries.iter().map(|e| e.mount_point.as_path()), root);
    let mut failures = Vec::new();
    for point in below {
        let Ok(c) = std::ffi::CString::new(point.as_os_str().as_encoded_bytes()) else {
            continue;
        };
        match crate::sys::umount2(&c, libc::MNT_DETACH) {
            Ok(()) => {}
            Err(e) if matches!(e.0, libc::EINVAL | libc::ENOENT) => {}
            Err(e) => failures.push(format!(
                "unmount {} (mounted by a container without a mount namespace): {}",
                point.display(),
                io::Error::from_raw_os_error(e.0)
            )),
        }
    }
    failures
}

/// The mount points strictly below `root`, in the reverse of their order in the table
/// (the latest, so the innermost, first).
fn mounts_below<'a>(points: impl Iterator<Item = &'a Path>, root: &Path) -> Vec<PathBuf> {
    let mut below: Vec<PathBuf> = points
        .filter(|p| *p != root && p.starts_with(root))
        .map(Path::to_path_buf)
        .collect();
    below.reverse();
    below
}

/// The state files (`*.json`) in `state_dir`; none when it does not exist.
pub fn files(state_dir: &Path) -> Result<Vec<PathBuf>, RuntimeError> {
    let entries = match fs::read_dir(state_dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(RuntimeError::Host {
                op: "list the state directory",
                path: state_dir.to_owned(),
                source,
            })
        }
    };
    Ok(entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().and_then(|e| e.to_str()) == Some("json"))
        .collect())
}

/// Removes what killed runtimes left behind: for every state file in `state_dir`
/// whose runtime process is gone (and that `create` did not hand over to an OCI
/// caller), [`undo`] its cgroup, loop device, directories and the file. Returns the ids cleaned up; containers whose runtime still runs are left
/// alone. Waits a little for the kernel to finish tearing down a container whose
/// runtime has just been killed.
pub fn gc(state_dir: &Path, hierarchy: &Hierarchy) -> Result<Vec<String>, RuntimeError> {
    let mut cleaned = Vec::new();
    let mut failures = Vec::new();
    for path in files(state_dir)? {
        let state = match State::read(&path) {
            Ok(s) => s,
            // Its runtime removed it between the listing and now: nothing left.
            Err(RuntimeError::Host { source, .. }) if source.kind() == io::ErrorKind::NotFound => {
                continue
            }
            Err(e) => {
                failures.push(e.to_string());
                continue;
            }
        };
        // A created container belongs to its caller until `delete`.
        if state.runtime_alive() || state.oci.is_some() {
            continue;
        }
        if let Some(pid) = state.init_pid {
            wait_gone(pid, Duration::from_secs(2));
        }
        let f = undo(&state, &path, hierarchy);
        if f.is_empty() {
            cleaned.push(state.id.into());
        } else {
            failures.extend(f);
        }
    }
    if failures.is_empty() {
        cleaned.sort();
        Ok(cleaned)
    } else {
        Err(RuntimeError::Teardown(failures))
    }
}

/// Waits until process `pid` is gone (or a zombie), at most `timeout`.
fn wait_gone(pid: u32, timeout: Duration) {
    let start = std::time::Instant::now();
    while start.elapsed() < timeout {
        match fs::read_to_string(format!("/proc/{pid}/stat")) {
            Ok(s)
                if !s
                    .rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z') => {}
            _ => return,
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(id: &str, dir: &Path) -> State {
        State {
            id: id.parse().unwrap(),
            runtime_pid: std::process::id(),
            runtime_start: process_start_time(std::process::id()).unwrap(),
            init_pid: None,
            cgroup: "isolab-unit/none".into(),
            image: None,
            loop_device: None,
            mount_base: dir.join(id),
            overlay_work: None,
            network: None,
            created: now_secs(),
            cgroup_created: Vec::new(),
            devices_mount: None,
            devices_created: Vec::new(),
            host_mounts: None,
            oci: None,
        }
    }

    #[test]
    fn create_update_read_and_refuse_duplicates() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = state("a1", dir.path());
        let path = s.create(dir.path()).unwrap();
        assert!(matches!(
            s.create(dir.path()),
            Err(RuntimeError::AlreadyExists { .. })
        ));
        s.init_pid = Some(42);
        s.update(&path).unwrap();
        assert_eq!(State::read(&path).unwrap(), s);
        assert!(s.runtime_alive());
    }

    #[test]
    fn updates_in_place_pad_a_shorter_state_and_rename_a_large_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = state("a2", dir.path());
        s.cgroup_created = vec![PathBuf::from("isolab/a/b/c")];
        let path = s.create(dir.path()).unwrap();
        let ino = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let first = ino(&path);
        let long = fs::metadata(&path).unwrap().len();
        // Shorter: the same file, padded to its old length, and it reads back.
        s.cgroup_created.clear();
        s.update(&path).unwrap();
        assert_eq!(ino(&path), first);
        assert_eq!(fs::metadata(&path).unwrap().len(), long);
        assert_eq!(State::read(&path).unwrap(), s);
        // Longer than a page: a new file renamed over the old one.
        s.cgroup_created = (0..400)
            .map(|i| PathBuf::from(format!("isolab/p{i}")))
            .collect();
        s.update(&path).unwrap();
        assert_ne!(ino(&path), first);
        assert_eq!(State::read(&path).unwrap(), s);
        assert!(!path.with_extension("json.tmp").exists());
    }

    #[test]
    fn mounts_below_a_root_are_unmounted_innermost_first_and_only_those() {
        let table = [
            "/",
            "/b/rootfs-other/proc",
            "/b/rootfs",
            "/b/rootfs/proc",
            "/b/rootfs/dev",
            "/b/rootfs/dev/pts",
            "/tmp",
        ];
        let below = super::mounts_below(table.iter().map(Path::new), Path::new("/b/rootfs"));
        assert_eq!(
            below,
            ["/b/rootfs/dev/pts", "/b/rootfs/dev", "/b/rootfs/proc"]
                .map(PathBuf::from)
                .to_vec()
        );
    }

    #[test]
    fn gc_skips_live_and_cleans_dead() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("cgroupfs/pids")).unwrap();
        fs::create_dir_all(dir.path().join("cgroupfs/memory")).unwrap();
        let h = Hierarchy::v1_under(dir.path().join("cgroupfs").as_path());
        let live = state("live", dir.path());
        live.create(dir.path()).unwrap();
        let mut dead = state("dead", dir.path());
        dead.runtime_start += 1; // a different process with the same pid
                                 // An ancestor the runtime created (now empty) goes, the others stay.
        fs::create_dir_all(dir.path().join("cgroupfs/pids/isolab-unit")).unwrap();
        fs::create_dir_all(dir.path().join("cgroupfs/memory/isolab-unit/other")).unwrap();
        dead.cgroup_created = vec!["isolab-unit".into()];
        fs::create_dir_all(dead.mount_base.join("root")).unwrap();
        dead.create(dir.path()).unwrap();
        assert_eq!(gc(dir.path(), &h).unwrap(), vec!["dead".to_owned()]);
        assert!(!dead.mount_base.exists());
        assert!(!dir.path().join("cgroupfs/pids/isolab-unit").exists());
        assert!(dir
            .path()
            .join("cgroupfs/memory/isolab-unit/other")
            .exists());
        assert!(State::path(dir.path(), &live.id).exists());
        assert!(!State::path(dir.path(), &dead.id).exists());
    }

    #[test]
    fn gc_next_to_live_runtimes_that_come_and_go_finds_nothing_wrong() {
        // 128 containers in one run: each runtime's gc lists the state files of the
        // others while they are created and removed.
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("cgroupfs/pids")).unwrap();
        let h = Hierarchy::v1_under(dir.path().join("cgroupfs").as_path());
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        let stop = std::sync::Arc::new(AtomicBool::new(false));
        let made = std::sync::Arc::new(AtomicU64::new(0));
        let churn = {
            let (dir, stop, made) = (dir.path().to_path_buf(), stop.clone(), made.clone());
            std::thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let s = state(&format!("c{}", i % 8), &dir);
                    if let Ok(path) = s.create(&dir) {
                        let _ = fs::remove_file(path);
                    }
                    i += 1;
                    made.store(i, Ordering::Relaxed);
                }
            })
        };
        // The lists must overlap the churn however the two threads are scheduled:
        // gc runs until the other thread has created and removed 300 files since
        // the first listing (and at least 300 times).
        while made.load(Ordering::Relaxed) == 0 {
            std::thread::yield_now();
        }
        let from = made.load(Ordering::Relaxed);
        let mut listings = 0;
        while listings < 300 || made.load(Ordering::Relaxed) < from + 300 {
            assert_eq!(gc(dir.path(), &h).unwrap(), Vec::<String>::new());
            listings += 1;
        }
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap();
    }

    #[test]
    fn start_time_of_self() {
        assert!(process_start_time(std::process::id()).is_some());
        assert_eq!(process_start_time(u32::MAX), None);
    }
}
