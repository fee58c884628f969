//! [`Cgroup`]: one control group across every mounted controller, and [`Attacher`]
//! for attaching a child between `fork` and `exec`.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::controller::Controller;
use crate::error::Error;
use crate::file;
use crate::format::pid_list;
use crate::hierarchy::{Hierarchy, Layout, MountRole, Version};
use crate::limits::Limits;
use crate::stats::Stats;
use crate::tree::PROCESS_LEAF;
use crate::{psi, tree, v1, v2};

/// How long [`Cgroup::kill_all`] keeps killing before it gives up.
const KILL_DEADLINE: Duration = Duration::from_secs(5);
/// How long [`Cgroup::remove`] retries an `rmdir` that fails with `EBUSY` (the
/// last processes are still exiting).
const RMDIR_DEADLINE: Duration = Duration::from_secs(1);
/// Pause between polls of `cgroup.procs`.
const POLL: Duration = Duration::from_millis(10);

/// The cgroup's directory under one mount point.
#[derive(Debug, Clone, PartialEq, Eq)]
struct CgroupDir {
    role: MountRole,
    /// The mount point.
    root: PathBuf,
    /// `root` joined with the cgroup's relative path.
    path: PathBuf,
}

/// A control group: the same relative path (e.g. `isolab/7/run-12`) in every
/// mounted controller of interest (v1), in the unified hierarchy (v2), or both
/// (hybrid: v1 controllers plus the cgroup2 directory for PSI and `cgroup.kill`).
///
/// Dropping a `Cgroup` leaves it in place; call [`Cgroup::remove`].
#[derive(Debug)]
pub struct Cgroup {
    hierarchy: Hierarchy,
    rel: PathBuf,
    dirs: Vec<CgroupDir>,
    /// Ancestor directories this handle created, in creation order.
    created: Vec<PathBuf>,
}

/// Checks that `rel` is a non-empty relative path of plain names.
fn validate_rel(rel: &Path) -> Result<PathBuf, Error> {
    let mut clean = PathBuf::new();
    for component in rel.components() {
        match component {
            Component::Normal(name) => clean.push(name),
            _ => {
                return Err(Error::InvalidPath {
                    rel: rel.to_owned(),
                })
            }
        }
    }
    if clean.as_os_str().is_empty() {
        return Err(Error::InvalidPath {
            rel: rel.to_owned(),
        });
    }
    Ok(clean)
}

fn dirs_for(h: &Hierarchy, rel: &Path) -> Vec<CgroupDir> {
    h.roots()
        .into_iter()
        .map(|(role, root)| CgroupDir {
            role,
            path: root.join(rel),
            root,
        })
        .collect()
}

fn is_errno(e: &io::Error, errno: i32) -> bool {
    e.raw_os_error() == Some(errno)
}

impl Cgroup {
    /// Creates `rel` (e.g. `"isolab/7/run-12"`) in every mounted controller of
    /// interest: cpu, cpuacct, cpuset, memory, pids, blkio and freezer on v1, plus the
    /// unified directory in hybrid mode; one directory on v2, enabling cpu, cpuset,
    /// memory, pids and io (those the parent offers) in each ancestor's
    /// `cgroup.subtree_control`, including existing ones such as the root, where
    /// they stay enabled.
    ///
    /// Missing intermediate directories are created and remembered, so that
    /// [`Cgroup::remove`] removes them again when empty. On v1 each new cpuset level
    /// gets its parent's `cpuset.cpus` and `cpuset.mems` (a new v1 cpuset is empty
    /// and could hold no process). An existing leaf is [`Error::AlreadyExists`]; on
    /// any error everything created so far is removed again.
    pub fn create(h: &Hierarchy, rel: &Path) -> Result<Cgroup, Error> {
        let rel = validate_rel(rel)?;
        let dirs = dirs_for(h, &rel);
        let mut cgroup = Cgroup {
            hierarchy: h.clone(),
            rel,
            dirs,
            created: Vec::new(),
        };
        let mut leaves = Vec::new();
        match cgroup.build(&mut leaves) {
            Ok(()) => Ok(cgroup),
            Err(e) => {
                // Best effort: the original error matters more than a failed cleanup.
                for dir in leaves.iter().rev().chain(cgroup.created.iter().rev()) {
                    let _ = h.sys.rmdir(dir);
                }
                Err(e)
            }
        }
    }

    /// Creates the directories level by level; records created leaves in `leaves`
    /// and created ancestors in `self.created`, for rollback and removal.
    ///
    /// A v1 (or hybrid cgroup2) leaf is first made directly: when its parent exists,
    /// as it does for every run after the first, that is one path lookup instead of
    /// three (an existence check, the parent's, the `mkdir`), each a walk through
    /// cgroupfs. Only when `mkdir` says a parent is missing are the levels made one
    /// by one.
    fn build(&mut self, leaves: &mut Vec<PathBuf>) -> Result<(), Error> {
        let depth = self.rel.components().count();
        for dir in &self.dirs {
            if dir.role != MountRole::V2 {
                match self.hierarchy.sys.mkdir(&dir.path) {
                    Ok(()) => {
                        let parent = dir.path.parent().unwrap_or(&dir.root);
                        made(dir, &dir.path, parent, true, leaves, &mut self.created)?;
                        continue;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound && depth > 1 => {}
                    Err(e) => return Err(mkdir_error(dir.path.clone(), e)),
                }
            }
            let mut current = dir.root.clone();
            for (i, component) in self.rel.components().enumerate() {
                let parent = current.clone();
                current.push(component);
                let is_leaf = i + 1 == depth;
                if dir.role == MountRole::V2 {
                    v2::enable_controllers(&parent)?;
                }
                if !is_leaf && current.is_dir() {
                    continue;
                }
                match self.hierarchy.sys.mkdir(&current) {
                    Ok(()) => {}
                    // Another run created the same ancestor just now: it is theirs.
                    Err(e) if !is_leaf && e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(mkdir_error(current, e)),
                }
                made(dir, &current, &parent, is_leaf, leaves, &mut self.created)?;
            }
        }
        Ok(())
    }

    /// Opens an existing cgroup (for `isolab gc`); it must exist in at least one
    /// controller. The handle created no ancestors, so [`Cgroup::remove`] removes
    /// only the leaf.
    pub fn open(h: &Hierarchy, rel: &Path) -> Result<Cgroup, Error> {
        let rel = validate_rel(rel)?;
        let dirs = dirs_for(h, &rel);
        let cgroup = Cgroup {
            hierarchy: h.clone(),
            rel,
            dirs,
            created: Vec::new(),
        };
        cgroup.ensure_exists()?;
        Ok(cgroup)
    }

    /// The path relative to the mount points, e.g. `isolab/7/run-12`.
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    /// Where a process started "in this cgroup" goes when containers may nest below it: on
    /// cgroup v2 the leaf [`PROCESS_LEAF`] of this cgroup, created (or opened) here, because
    /// a v2 cgroup holding a process cannot enable controllers for children ("no internal
    /// processes"): isolab-runtime and the engines could not create the container's cgroup
    /// below. `None` on v1, where the process goes in this cgroup itself. This cgroup's
    /// limits and its hierarchical counters (`cpu.stat`, `memory.current`, `io.stat`, PSI)
    /// cover the leaf; [`Cgroup::remove`] removes it with this cgroup.
    pub fn process_leaf(&self) -> Result<Option<Cgroup>, Error> {
        if self.hierarchy.version() != Version::V2 {
            return Ok(None);
        }
        let rel = self.rel.join(PROCESS_LEAF);
        match Cgroup::create(&self.hierarchy, &rel) {
            Err(Error::AlreadyExists { .. }) => Cgroup::open(&self.hierarchy, &rel).map(Some),
            other => other.map(Some),
        }
    }

    /// The hierarchy this cgroup lives in.
    pub fn hierarchy(&self) -> &Hierarchy {
        &self.hierarchy
    }

    /// The cgroup's directory under every mount point (v1 controllers, then the
    /// unified directory).
    pub fn paths(&self) -> Vec<&Path> {
        self.dirs.iter().map(|d| d.path.as_path()).collect()
    }

    /// The cgroup's directory holding `controller`'s files: its v1 mount, or the
    /// single directory on v2.
    pub fn path(&self, controller: Controller) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|d| match &d.role {
                MountRole::V1(cs) => cs.contains(&controller),
                MountRole::V2 => true,
                MountRole::Unified => false,
            })
            .map(|d| d.path.as_path())
    }

    /// The directory in the cgroup2 mount (v2, or hybrid unified).
    /// The file that holds the cgroup's cpu time, for a program that reads it
    /// itself: v1 `cpuacct.usage` (nanoseconds), v2 `cpu.stat` (its `usage_usec`
    /// line, microseconds).
    pub fn cpu_usage_file(&self) -> Option<PathBuf> {
        match &self.hierarchy.layout {
            Layout::V1 { .. } => Some(self.path(Controller::Cpuacct)?.join("cpuacct.usage")),
            Layout::V2 { .. } => Some(self.unified_dir()?.join("cpu.stat")),
        }
    }

    fn unified_dir(&self) -> Option<&Path> {
        self.dirs
            .iter()
            .find(|d| matches!(d.role, MountRole::V2 | MountRole::Unified))
            .map(|d| d.path.as_path())
    }

    fn v1_dirs(&self) -> v1::Dirs {
        let mut dirs = v1::Dirs::new();
        for d in &self.dirs {
            if let MountRole::V1(cs) = &d.role {
                for &c in cs {
                    dirs.insert(c, d.path.clone());
                }
            }
        }
        dirs
    }

    fn not_found(&self) -> Error {
        Error::NotFound {
            rel: self.rel.clone(),
            hierarchy: self.hierarchy.describe(),
        }
    }

    fn ensure_exists(&self) -> Result<(), Error> {
        if self.dirs.iter().any(|d| d.path.is_dir()) {
            Ok(())
        } else {
            Err(self.not_found())
        }
    }

    /// Writes every limit that is `Some` (or a limited `io` entry, a `hugetlb` or
    /// `unified` entry).
    ///
    /// v1: `cpu.cfs_period_us` then `cpu.cfs_quota_us`, `cpu.shares`, `cpuset.cpus`,
    /// `cpuset.mems`, `memory.limit_in_bytes` then `memory.memsw.limit_in_bytes`,
    /// `memory.soft_limit_in_bytes`, `pids.max`,
    /// `blkio.throttle.{read,write}_{bps,iops}_device`,
    /// `hugetlb.<size>.limit_in_bytes`. v2: `cpu.max`, `cpu.weight`, `cpuset.cpus`,
    /// `cpuset.mems`, `memory.max`, `memory.swap.max`, `memory.low`, `pids.max`,
    /// `io.max`, `hugetlb.<size>.max`, then the `unified` files. A limit whose
    /// controller is missing fails with [`Error::NotMounted`] (v1) or
    /// [`Error::NotEnabled`] (v2), unified files on v1 with [`Error::UnifiedOnV1`] and
    /// a bad unified name with [`Error::UnifiedName`] or [`Error::UnifiedNotEnabled`],
    /// all before anything is written.
    pub fn apply(&self, limits: &Limits) -> Result<(), Error> {
        match &self.hierarchy.layout {
            Layout::V1 { .. } => v1::apply(&self.v1_dirs(), limits),
            Layout::V2 { .. } => match self.unified_dir() {
                Some(dir) => v2::apply(dir, limits),
                None => Err(self.not_found()),
            },
        }
    }

    /// Reads the limits back from the files: unlimited values (`max`, `-1`, v1's
    /// huge memory limit) are `None`, `io` is sorted by device. On v1 the cpuset is
    /// always `Some` (a v1 cpuset holds its own copy); on v2 it is `None` when empty
    /// (inherited). Controllers that are not mounted give `None`.
    pub fn read_limits(&self) -> Result<Limits, Error> {
        self.ensure_exists()?;
        match &self.hierarchy.layout {
            Layout::V1 { .. } => v1::read_limits(&self.v1_dirs()),
            Layout::V2 { .. } => match self.unified_dir() {
                Some(dir) => v2::read_limits(dir),
                None => Err(self.not_found()),
            },
        }
    }

    /// The trimmed text of the cgroup v2 interface files `names` (as
    /// [`Limits::unified`] names them), to record what the unified limits left in
    /// force: the kernel's own formatting (`memory.high` set to `64M` reads
    /// `67108864`). Names are checked as [`Cgroup::apply`] checks them; on v1 (or
    /// with no name) the map is empty.
    pub fn read_unified<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<std::collections::BTreeMap<String, String>, Error> {
        match (&self.hierarchy.layout, self.unified_dir()) {
            (Layout::V2 { .. }, Some(dir)) => v2::unified::read(dir, names),
            _ => Ok(Default::default()),
        }
    }

    /// Moves process `pid` (all its threads) into the cgroup in every directory.
    pub fn attach(&self, pid: u32) -> Result<(), Error> {
        for d in &self.dirs {
            file::write(&d.path.join("cgroup.procs"), &pid.to_string())?;
        }
        Ok(())
    }

    /// Moves the calling process (all its threads) into the cgroup, remembering
    /// where it was in each hierarchy; [`Entered::leave`] (or dropping the guard)
    /// moves it back. For a benchmark harness: what it spawns afterwards is born in
    /// the cgroup, with no write to a task list per spawn (a write of a pid to
    /// `cgroup.procs` may wait for an RCU grace period, see [`Attacher`]).
    pub fn enter(&self) -> Result<Entered, Error> {
        let own_path = PathBuf::from("/proc/self/cgroup");
        let own = self
            .hierarchy
            .sys
            .own_cgroups()
            .map_err(|source| Error::Read {
                path: own_path.clone(),
                source,
            })?;
        let mut back = Vec::with_capacity(self.dirs.len());
        for d in &self.dirs {
            let origin = origin_of(&own, d).ok_or_else(|| Error::Parse {
                path: own_path.clone(),
                found: own.clone(),
                expected: "a line for every mounted cgroup hierarchy",
            })?;
            back.push(origin.join("cgroup.procs"));
        }
        let entered = Entered {
            back,
            pid: std::process::id().to_string(),
            left: false,
        };
        for d in &self.dirs {
            // On an error the guard's drop moves the process back.
            file::write(&d.path.join("cgroup.procs"), &entered.pid)?;
        }
        Ok(entered)
    }

    /// Opens the files a child process writes to attach itself between `fork` and
    /// `exec` with [`Attacher::attach_self`] (inside `CommandExt::pre_exec`), before
    /// it runs a single instruction of the workload: `tasks` in each v1 hierarchy,
    /// `cgroup.procs` in the cgroup2 directory (see [`Attacher`] for why).
    pub fn attacher(&self) -> Result<Attacher, Error> {
        self.open_attach_files(self.dirs.iter())
    }

    /// What a `clone3` caller needs to start a child inside the cgroup: the cgroup2
    /// directory (pure v2, or the unified one of a hybrid host), opened `O_PATH`,
    /// for `CLONE_INTO_CGROUP`, which joins it at no extra cost; and an
    /// [`Attacher`] over the v1 hierarchies alone, which the child uses on itself.
    pub fn clone_target(&self) -> Result<CloneTarget, Error> {
        let v2 = self
            .dirs
            .iter()
            .find(|d| !matches!(d.role, MountRole::V1(_)))
            .map(|d| {
                fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
                    .open(&d.path)
                    .map(OwnedFd::from)
                    .map_err(|source| Error::Open {
                        path: d.path.clone(),
                        source,
                    })
            })
            .transpose()?;
        let v1 = self.open_attach_files(
            self.dirs
                .iter()
                .filter(|d| matches!(d.role, MountRole::V1(_))),
        )?;
        Ok(CloneTarget { v2_dir: v2, v1 })
    }

    fn open_attach_files<'a>(
        &self,
        dirs: impl Iterator<Item = &'a CgroupDir>,
    ) -> Result<Attacher, Error> {
        let mut fds = Vec::with_capacity(self.dirs.len());
        let mut paths = Vec::with_capacity(self.dirs.len());
        for d in dirs {
            let name = match d.role {
                MountRole::V1(_) => "tasks",
                MountRole::Unified | MountRole::V2 => "cgroup.procs",
            };
            let path = d.path.join(name);
            let f = fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .map_err(|source| Error::Open {
                    path: path.clone(),
                    source,
                })?;
            fds.push(OwnedFd::from(f));
            paths.push(path);
        }
        Ok(Attacher { fds, paths })
    }

    /// Every process in the cgroup: the union over its directories, sorted and
    /// deduplicated. A directory that is gone is skipped; if all are gone, the
    /// cgroup is [`Error::NotFound`].
    pub fn pids(&self) -> Result<Vec<u32>, Error> {
        let mut pids = BTreeSet::new();
        let mut found = false;
        for d in &self.dirs {
            let path = d.path.join("cgroup.procs");
            if let Some(list) = file::read_parsed_opt(&path, pid_list)? {
                found = true;
                pids.extend(list);
            }
        }
        if !found {
            return Err(self.not_found());
        }
        Ok(pids.into_iter().collect())
    }

    /// Kills every process inside and waits until `cgroup.procs` is empty.
    ///
    /// Uses `cgroup.kill` of the v2 (or hybrid unified) directory when the kernel
    /// has it (Linux 5.14+). Otherwise, or for what survives it, it sends SIGKILL to
    /// every listed pid, again and again until none is left (a fork bomb races
    /// with it), freezing the v1 freezer cgroup around each round when mounted (best
    /// effort). Gives up with [`Error::KillTimeout`] after 5 s. Refuses with
    /// [`Error::ContainsSelf`] to kill the calling process.
    pub fn kill_all(&self) -> Result<(), Error> {
        let start = Instant::now();
        let me = std::process::id();
        let mut kill_file_written = false;
        loop {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            let primary = self
                .dirs
                .iter()
                .find(|d| d.path.is_dir())
                .map_or_else(|| self.rel.clone(), |d| d.path.clone());
            if pids.contains(&me) {
                return Err(Error::ContainsSelf {
                    pid: me,
                    path: primary,
                });
            }
            if start.elapsed() >= KILL_DEADLINE {
                return Err(Error::KillTimeout {
                    path: primary,
                    remaining: pids,
                    waited: start.elapsed(),
                });
            }
            let unified = self.unified_dir().filter(|d| d.is_dir());
            if !kill_file_written && unified.is_some() {
                kill_file_written = true;
                if let Some(dir) = unified {
                    if v2::kill(dir)? {
                        thread::sleep(POLL);
                        continue;
                    }
                }
            }
            self.signal_round(&pids)?;
            thread::sleep(POLL);
        }
    }

    /// One round of SIGKILL to `pids`, inside a freeze of the v1 freezer cgroup.
    fn signal_round(&self, pids: &[u32]) -> Result<(), Error> {
        let freezer = self
            .path(Controller::Freezer)
            .filter(|_| matches!(self.hierarchy.layout, Layout::V1 { .. }));
        let freezer = freezer.filter(|d| d.join("freezer.state").exists());
        if let Some(dir) = freezer {
            // Best effort: killing without the freeze still works, only slower
            // against a fork bomb, so a failed freeze is not an error.
            let _ = v1::freezer::freeze(dir, Duration::from_millis(200));
        }
        let mut result = Ok(());
        for &pid in pids {
            match self.hierarchy.sys.kill(pid) {
                Ok(()) => {}
                Err(e) if is_errno(&e, libc::ESRCH) => {}
                Err(source) => {
                    result = Err(Error::Kill {
                        pid,
                        path: self
                            .dirs
                            .first()
                            .map_or_else(PathBuf::new, |d| d.path.clone()),
                        source,
                    });
                    break;
                }
            }
        }
        if let Some(dir) = freezer {
            // Killed tasks of a frozen v1 cgroup only die once thawed.
            v1::freezer::thaw(dir)?;
        }
        result
    }

    /// Resets the memory peak ([`Stats::memory_peak`]) to the current use, so that a
    /// cgroup kept from one run to the next reports each run's own peak: `true` when it
    /// was reset (v1 `memory.max_usage_in_bytes`, written 0), `false` where that is not
    /// possible (v2's `memory.peak` resets only for the descriptor that wrote it, and
    /// not at all before Linux 6.12; or no memory controller).
    pub fn reset_memory_peak(&self) -> Result<bool, Error> {
        if !matches!(self.hierarchy.layout, Layout::V1 { .. }) {
            return Ok(false);
        }
        let Some(dir) = self.path(Controller::Memory) else {
            return Ok(false);
        };
        crate::file::write(&dir.join("memory.max_usage_in_bytes"), "0")?;
        Ok(true)
    }

    /// Cumulative counters (see [`Stats`]); each field the layout cannot provide is
    /// `None`. In hybrid mode PSI comes from the unified directory, and so does cpu
    /// usage when cpuacct is not mounted.
    pub fn stats(&self) -> Result<Stats, Error> {
        self.ensure_exists()?;
        let mut stats = Stats::default();
        match &self.hierarchy.layout {
            Layout::V1 { .. } => {
                v1::stats(&self.v1_dirs(), &mut stats)?;
                if let Some(dir) = self.unified_dir() {
                    stats.psi = psi::read_pressure(dir)?;
                    if stats.cpu_usage.is_none() {
                        let mut unified = Stats::default();
                        v2::cpu::stats(dir, &mut unified)?;
                        stats.cpu_usage = unified.cpu_usage;
                        stats.cpu_user = unified.cpu_user;
                        stats.cpu_system = unified.cpu_system;
                    }
                }
            }
            Layout::V2 { .. } => {
                if let Some(dir) = self.unified_dir() {
                    v2::stats(dir, &mut stats)?;
                }
            }
        }
        Ok(stats)
    }

    /// Kills everything inside ([`Cgroup::kill_all`]), removes the cgroup's
    /// directory in every controller (retrying `EBUSY` for about a second while the
    /// last processes exit), then the ancestors this handle created, when empty
    /// (another run may still use them).
    ///
    /// An empty cgroup (its processes already reaped, the usual case after a
    /// container) is removed by one `rmdir` per directory: the kernel refuses
    /// (`EBUSY`) a directory that still holds a process, and only then are the
    /// processes listed and killed.
    pub fn remove(self) -> Result<(), Error> {
        let mut busy = false;
        let mut missing = 0;
        for d in &self.dirs {
            match self.hierarchy.sys.rmdir(&d.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => missing += 1,
                Err(e) if is_errno(&e, libc::EBUSY) => busy = true,
                Err(source) => {
                    return Err(Error::RemoveDir {
                        path: d.path.clone(),
                        source,
                    })
                }
            }
        }
        if missing == self.dirs.len() {
            return Err(self.not_found());
        }
        if busy {
            self.kill_all()?;
            for d in &self.dirs {
                // Cgroups below this one (a process leaf, a container's cgroup left behind)
                // go first: a directory with children cannot be removed.
                let below = tree::remove_tree(
                    &*self.hierarchy.sys,
                    &d.path,
                    &tree::RemoveTree {
                        keep_top: true,
                        kill: true,
                        patience: RMDIR_DEADLINE,
                    },
                );
                if let Some((path, source)) = below.failed {
                    return Err(Error::RemoveDir { path, source });
                }
                match tree::rmdir_retrying(&*self.hierarchy.sys, &d.path, RMDIR_DEADLINE) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(source) => {
                        return Err(Error::RemoveDir {
                            path: d.path.clone(),
                            source,
                        })
                    }
                }
            }
        }
        for dir in self.created.iter().rev() {
            match self.hierarchy.sys.rmdir(dir) {
                Ok(()) => {}
                Err(e)
                    if e.kind() == io::ErrorKind::NotFound
                        || is_errno(&e, libc::ENOTEMPTY)
                        || is_errno(&e, libc::EBUSY) => {}
                Err(source) => {
                    return Err(Error::RemoveDir {
                        path: dir.clone(),
                        source,
                    })
                }
            }
        }
        Ok(())
    }
}

/// Pre-opened task lists of a [`Cgroup`], for a child process to attach itself
/// between `fork` and `exec`:
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use std::os::unix::process::CommandExt;
/// # let h = isolab_cgroups::Hierarchy::detect()?;
/// # let cgroup = isolab_cgroups::Cgroup::create(&h, "isolab/doc".as_ref())?;
/// let attacher = cgroup.attacher()?;
/// let mut command = std::process::Command::new("sysbench");
/// // SAFETY: attach_self only calls write(2) and allocates nothing.
/// unsafe { command.pre_exec(move || attacher.attach_self()) };
/// # Ok(()) }
/// ```
///
/// In a v1 hierarchy the file is `tasks`, not `cgroup.procs`: a thread that writes
/// `0` to `tasks` moves only itself, and the kernel then skips its global
/// threadgroup lock, whose first writer after a quiet spell waits for a whole RCU
/// grace period (8 ms on the lab's machine, against 0.02 ms). A child between
/// `fork` and `exec` has one thread, so moving it moves the process. cgroup2 has no
/// such way (its `cgroup.threads` only moves threads within a threaded subtree):
/// there the file is `cgroup.procs`, and a `clone3` caller avoids the lock with
/// [`Cgroup::clone_target`].
///
/// The descriptors are close-on-exec: the workload does not inherit them.
#[derive(Debug)]
pub struct Attacher {
    fds: Vec<OwnedFd>,
    /// The file behind each descriptor, for error messages.
    paths: Vec<PathBuf>,
}

/// After [`Cgroup::build`]'s `mkdir` of `path` below `parent` in `dir`'s hierarchy:
/// records it (a leaf in `leaves`, an ancestor in `created`) and gives a new v1
/// cpuset level its parent's cpus and memory nodes.
fn made(
    dir: &CgroupDir,
    path: &Path,
    parent: &Path,
    is_leaf: bool,
    leaves: &mut Vec<PathBuf>,
    created: &mut Vec<PathBuf>,
) -> Result<(), Error> {
    if is_leaf {
        leaves.push(path.to_owned());
    } else {
        created.push(path.to_owned());
    }
    if matches!(&dir.role, MountRole::V1(cs) if cs.contains(&Controller::Cpuset)) {
        v1::cpuset::copy_from_parent(path, parent)?;
    }
    Ok(())
}

/// A failed `mkdir` of a cgroup directory: [`Error::AlreadyExists`] or
/// [`Error::CreateDir`].
fn mkdir_error(path: PathBuf, source: io::Error) -> Error {
    if source.kind() == io::ErrorKind::AlreadyExists {
        Error::AlreadyExists { path }
    } else {
        Error::CreateDir { path, source }
    }
}

/// Where [`Cgroup::enter`] found the calling process: its cgroup in each
/// hierarchy, to which it returns on [`Entered::leave`] or drop.
#[derive(Debug)]
#[must_use = "dropping the guard moves the process back at once"]
pub struct Entered {
    /// The `cgroup.procs` of each cgroup the process came from.
    back: Vec<PathBuf>,
    pid: String,
    left: bool,
}

impl Entered {
    /// Moves the process back where it was.
    pub fn leave(mut self) -> Result<(), Error> {
        self.left = true;
        for procs in &self.back {
            file::write(procs, &self.pid)?;
        }
        Ok(())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        if !self.left {
            for procs in &self.back {
                // Best effort: there is no one to tell.
                let _ = file::write(procs, &self.pid);
            }
        }
    }
}

/// The directory of `dir`'s hierarchy that `/proc/self/cgroup` (`own`) names.
fn origin_of(own: &str, dir: &CgroupDir) -> Option<PathBuf> {
    own.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let matches = match &dir.role {
            MountRole::V1(cs) => {
                let first = cs.first()?.name();
                controllers.split(',').any(|c| c == first)
            }
            MountRole::Unified | MountRole::V2 => id == "0" && controllers.is_empty(),
        };
        matches.then(|| dir.root.join(path.trim_start_matches('/')))
    })
}

/// See [`Cgroup::clone_target`].
#[derive(Debug)]
pub struct CloneTarget {
    /// The cgroup2 directory, for `clone_args.cgroup` with `CLONE_INTO_CGROUP`.
    pub v2_dir: Option<OwnedFd>,
    /// The v1 hierarchies' `tasks` files, for the child to write `0` to.
    pub v1: Attacher,
}

impl Attacher {
    /// Writes `"0"` (the caller) to each pre-opened file with `write(2)`: the
    /// calling process, which must have a single thread (as a forked child has).
    /// Async-signal-safe: no allocation, no lock, so it may run in a forked child of
    /// a multi-threaded parent.
    pub fn attach_self(&self) -> io::Result<()> {
        for fd in &self.fds {
            // SAFETY: the fd is open for the lifetime of `self`, and the buffer is a
            // static one-byte string; write(2) reads exactly that byte.
            let n = unsafe { libc::write(fd.as_raw_fd(), b"0".as_ptr().cast(), 1) };
            match n {
                1 => {}
                n if n < 0 => return Err(io::Error::last_os_error()),
                _ => return Err(io::Error::from_raw_os_error(libc::EIO)),
            }
        }
        Ok(())
    }

    /// The pre-opened descriptors, for a caller that writes `"0"` to them itself
    /// (a `clone3` child that may not touch Rust data structures).
    pub fn raw_fds(&self) -> impl Iterator<Item = std::os::fd::RawFd> + '_ {
        self.fds.iter().map(AsRawFd::as_raw_fd)
    }

    /// The file behind the `i`-th descriptor of [`Attacher::raw_fds`].
    pub fn path(&self, i: usize) -> Option<&Path> {
        self.paths.get(i).map(PathBuf::as_path)
    }

    /// How many descriptors there are.
    pub fn len(&self) -> usize {
        self.fds.len()
    }

    /// Whether there are none (no hierarchy to join).
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }
}

/// Every cgroup below `base` (e.g. `isolab`) in any controller, as relative paths,
/// deepest first (so that removing them in order works) — for `isolab gc`. `base`
/// itself is not listed; a `base` that exists nowhere gives an empty list.
pub fn list_below(h: &Hierarchy, base: &Path) -> Result<Vec<PathBuf>, Error> {
    let base = validate_rel(base)?;
    let mut found = BTreeSet::new();
    for (_, root) in h.roots() {
        let top = root.join(&base);
        let (dirs, error) = tree::subtree(&top);
        if let Some(e) = error {
            return Err(e);
        }
        for dir in dirs.iter().filter(|d| **d != top) {
            if let Ok(below) = dir.strip_prefix(&root) {
                found.insert(below.to_path_buf());
            }
        }
    }
    let mut list: Vec<PathBuf> = found.into_iter().collect();
    list.sort_by(|a, b| {
        b.components()
            .count()
            .cmp(&a.components().count())
            .then_with(|| a.cmp(b))
    });
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_are_validated() {
        assert_eq!(
            validate_rel(Path::new("isolab/7/run-12")).unwrap(),
            Path::new("isolab/7/run-12")
        );
        assert_eq!(validate_rel(Path::new("a//b/")).unwrap(), Path::new("a/b"));
        for bad in ["", "/isolab", "../x", "a/../b", ".", "./a"] {
            assert!(validate_rel(Path::new(bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn list_below_is_deepest_first() {
        let root = tempfile::tempdir().unwrap();
        for d in [
            "pids/isolab/1/a",
            "pids/isolab/2",
            "memory/isolab/1/a/b",
            "memory/other",
        ] {
            fs::create_dir_all(root.path().join(d)).unwrap();
        }
        fs::write(root.path().join("pids/isolab/1/pids.max"), "max").unwrap();
        let h = Hierarchy::v1_under(root.path());
        let list = list_below(&h, Path::new("isolab")).unwrap();
        let expected: Vec<PathBuf> = ["isolab/1/a/b", "isolab/1/a", "isolab/1", "isolab/2"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(list, expected);
        assert!(list_below(&h, Path::new("nothing")).unwrap().is_empty());
    }
}
